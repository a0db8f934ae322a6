//! `volley serve` end to end: the real binary on a free loopback port, raw HTTP/1.1 over
//! std sockets (so the checks see exactly the bytes on the wire).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};

use std::time::Duration;

use crate::common;
use common::Served;

/// `volley serve` over a fresh root directory that `setup` fills; the directory is
/// removed on drop, after the server is killed (so it never serves a half-removed tree):
/// fields drop in order, `served` first.
struct Site {
    served: Served,
    root: crate::common::TestDir,
}

impl Site {
    fn start(tag: &str, extra: &[&str], setup: impl FnOnce(&Path)) -> Site {
        let root = crate::common::fresh_dir(&format!("volley-serve-{tag}"));
        setup(&root);
        let served = Served::start(&root, extra);
        assert!(served.base.starts_with("http://"), "{}", served.base);
        Site { served, root }
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(&self.served.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }

    /// Clean shutdown (SIGTERM): the access log is flushed.
    fn stop(&mut self) -> Option<std::process::ExitStatus> {
        self.served.stop()
    }
}

#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one response; `head_only` for HEAD (no body despite Content-Length).
fn read_resp(r: &mut BufReader<TcpStream>, head_only: bool) -> Resp {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status: u16 = line
        .split(' ')
        .nth(1)
        .unwrap_or_else(|| panic!("status line {line:?}"))
        .parse()
        .unwrap();
    let mut headers = Vec::new();
    loop {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        let l = l.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l.split_once(':').unwrap();
        headers.push((n.to_owned(), v.trim().to_owned()));
    }
    let mut resp = Resp {
        status,
        headers,
        body: Vec::new(),
    };
    if !head_only && status != 304 {
        let len: usize = resp.header("content-length").unwrap().parse().unwrap();
        resp.body = vec![0; len];
        r.read_exact(&mut resp.body).unwrap();
    }
    resp
}

/// One request on a fresh connection.
fn get(s: &Site, raw: &str) -> Resp {
    let mut c = s.connect();
    c.write_all(raw.as_bytes()).unwrap();
    read_resp(&mut BufReader::new(c), raw.starts_with("HEAD "))
}

fn req(path: &str, extra: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n")
}

fn site(root: &Path) {
    std::fs::write(root.join("700b.html"), "x".repeat(700)).unwrap();
    std::fs::create_dir_all(root.join("dir")).unwrap();
    std::fs::write(root.join("dir/index.html"), "dir index\n").unwrap();
    std::fs::write(
        root.join("big.bin"),
        (0..600_000u32).map(|i| (i % 251) as u8).collect::<Vec<_>>(),
    )
    .unwrap();
}

#[test]
fn get_head_types_validators_and_keep_alive() {
    let s = Site::start("basic", &[], site);
    let mut c = BufReader::new(s.connect());
    // Three requests on one connection, the last HEAD.
    c.get_mut()
        .write_all(req("/700b.html", "").as_bytes())
        .unwrap();
    let a = read_resp(&mut c, false);
    assert_eq!(a.status, 200);
    assert_eq!(a.body.len(), 700);
    assert_eq!(a.header("content-type"), Some("text/html; charset=utf-8"));
    assert!(a.header("date").unwrap().ends_with(" GMT"));
    assert!(a.header("last-modified").unwrap().ends_with(" GMT"));
    let etag = a.header("etag").unwrap().to_owned();
    assert_eq!(etag, volley_dav::strong_etag("x".repeat(700).as_bytes()));
    c.get_mut().write_all(req("/dir/", "").as_bytes()).unwrap();
    assert_eq!(read_resp(&mut c, false).body, b"dir index\n");
    c.get_mut()
        .write_all(b"HEAD /700b.html HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let h = read_resp(&mut c, true);
    assert_eq!((h.status, h.header("content-length")), (200, Some("700")));
    // Large file streamed (not cached), exact bytes.
    c.get_mut()
        .write_all(req("/big.bin", "").as_bytes())
        .unwrap();
    let big = read_resp(&mut c, false);
    assert_eq!(
        big.body,
        (0..600_000u32).map(|i| (i % 251) as u8).collect::<Vec<_>>()
    );

    // Conditionals.
    assert_eq!(
        get(
            &s,
            &req("/700b.html", &format!("If-None-Match: {etag}\r\n"))
        )
        .status,
        304
    );
    assert_eq!(
        get(&s, &req("/700b.html", "If-None-Match: \"other\"\r\n")).status,
        200
    );
    let lm = a.header("last-modified").unwrap();
    assert_eq!(
        get(
            &s,
            &req("/700b.html", &format!("If-Modified-Since: {lm}\r\n"))
        )
        .status,
        304
    );
    let old = "If-Modified-Since: Thu, 01 Jan 1998 00:00:00 GMT\r\n";
    assert_eq!(get(&s, &req("/700b.html", old)).status, 200);

    // Directory without slash, missing file, unknown method, HTTP/1.0 closes.
    let r = get(&s, &req("/dir", ""));
    assert_eq!((r.status, r.header("location")), (301, Some("/dir/")));
    assert_eq!(get(&s, &req("/nope.html", "")).status, 404);
    let r = get(&s, "BREW /pot HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 405);
    assert!(r.header("allow").unwrap().contains("GET"));
    let mut c10 = s.connect();
    c10.write_all(b"GET /700b.html HTTP/1.0\r\n\r\n").unwrap();
    let mut all = Vec::new();
    c10.read_to_end(&mut all).unwrap();
    assert!(all.starts_with(b"HTTP/1.1 200 OK\r\n") && all.ends_with(&[b'x'; 700]));
    // HTTP/1.0 with keep-alive stays open.
    let mut c = BufReader::new(s.connect());
    for _ in 0..2 {
        c.get_mut()
            .write_all(b"GET /700b.html HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .unwrap();
        let r = read_resp(&mut c, false);
        assert_eq!(
            (r.status, r.header("connection")),
            (200, Some("keep-alive"))
        );
    }
}

#[test]
fn byte_ranges() {
    let s = Site::start("range", &[], site);
    let body = "x".repeat(700);
    for (spec, want, cr) in [
        ("bytes=0-9", 0..10, "bytes 0-9/700"),
        ("bytes=690-", 690..700, "bytes 690-699/700"),
        ("bytes=-5", 695..700, "bytes 695-699/700"),
        ("bytes=600-9999", 600..700, "bytes 600-699/700"),
    ] {
        let r = get(&s, &req("/700b.html", &format!("Range: {spec}\r\n")));
        assert_eq!(r.status, 206, "{spec}");
        assert_eq!(r.header("content-range"), Some(cr));
        assert_eq!(r.body, body.as_bytes()[want].to_vec());
    }
    let r = get(&s, &req("/big.bin", "Range: bytes=500000-500009\r\n"));
    assert_eq!(r.status, 206);
    assert_eq!(
        r.body,
        (500_000..500_010u32)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<_>>()
    );
    let r = get(&s, &req("/700b.html", "Range: bytes=700-\r\n"));
    assert_eq!(
        (r.status, r.header("content-range")),
        (416, Some("bytes */700"))
    );
    // If-Range with a stale validator: the whole file.
    assert_eq!(
        get(
            &s,
            &req("/700b.html", "Range: bytes=0-1\r\nIf-Range: \"stale\"\r\n")
        )
        .status,
        200
    );
}

#[test]
fn traversal_corpus_never_leaves_root() {
    // A sibling of the site's root, both in the temporary directory, so `/../NAME/`
    // names it.
    let outside = crate::common::fresh_dir("volley-serve-secret");
    std::fs::write(outside.join("secret.txt"), "TOPSECRET").unwrap();
    let out2 = outside.to_path_buf();
    let s = Site::start("trav", &[], move |root| {
        site(root);
        std::os::unix::fs::symlink(&out2, root.join("link")).unwrap();
        std::os::unix::fs::symlink(out2.join("secret.txt"), root.join("file-link")).unwrap();
        std::fs::write(root.join(".volley-sync"), "internal").unwrap();
    });
    let name = outside.file_name().unwrap().to_str().unwrap();
    for target in [
        format!("/../{name}/secret.txt"),
        format!("/%2e%2e/{name}/secret.txt"),
        format!("/dir/%2E%2E/%2e%2e/{name}/secret.txt"),
        format!("/..%2f{name}/secret.txt"),
        format!("http://t/../{name}/secret.txt"),
        "/link/secret.txt".to_owned(),
        "/file-link".to_owned(),
        "/700b.html%00.txt".to_owned(),
        "/.volley-sync".to_owned(),
        "//etc/passwd".to_owned(),
        format!("{}/secret.txt", outside.display()),
    ] {
        let r = get(&s, &req(&target, ""));
        assert!((400..500).contains(&r.status), "{target} -> {}", r.status);
        assert!(
            !String::from_utf8_lossy(&r.body).contains("TOPSECRET"),
            "{target} leaked"
        );
        assert!(
            !String::from_utf8_lossy(&r.body).contains("root:"),
            "{target} leaked"
        );
    }
}

#[test]
fn limits_answer_414_431_413_and_400() {
    let s = Site::start("limits", &["--max-body", "1000"], site);
    assert_eq!(
        get(&s, &req(&format!("/{}", "a".repeat(9000)), "")).status,
        414
    );
    let many: String = (0..150).map(|i| format!("X-H{i}: v\r\n")).collect();
    assert_eq!(get(&s, &req("/700b.html", &many)).status, 431);
    let huge = format!("X-Big: {}\r\n", "v".repeat(40_000));
    assert_eq!(get(&s, &req("/700b.html", &huge)).status, 431);
    assert_eq!(
        get(
            &s,
            "PUT /x HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n"
        )
        .status,
        413
    );
    assert_eq!(get(&s, "GARBAGE\r\n\r\n").status, 400);
    assert_eq!(
        get(&s, "GET / HTTP/1.1\r\n\r\n").status,
        400,
        "missing Host"
    );
    // A GET with a body: the body is read and skipped, the next request still works.
    let mut c = BufReader::new(s.connect());
    c.get_mut()
        .write_all(b"GET /700b.html HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nabcd")
        .unwrap();
    assert_eq!(read_resp(&mut c, false).status, 200);
    c.get_mut().write_all(b"GET /700b.html HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n").unwrap();
    assert_eq!(read_resp(&mut c, false).status, 200);
    c.get_mut()
        .write_all(req("/700b.html", "").as_bytes())
        .unwrap();
    assert_eq!(read_resp(&mut c, false).status, 200);
}

#[test]
fn slowloris_is_timed_out_while_others_are_served() {
    let s = Site::start("slow", &["--header-timeout", "1s"], site);
    // Issue 3's figure: 1000 idle slow connections (this machine allows 20000 fds).
    let slow: Vec<TcpStream> = (0..1000)
        .map(|_| {
            let mut c = s.connect();
            c.write_all(b"GET /700b.html HTTP/1.1\r\nHo").unwrap();
            c
        })
        .collect();
    // A normal client is answered while 1000 connections hold half a header.
    assert_eq!(get(&s, &req("/700b.html", "")).status, 200);
    // Every slow connection is closed (408 or EOF) within a bounded wait.
    for mut c in slow {
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = Vec::new();
        let _ = c.read_to_end(&mut buf);
        assert!(
            buf.is_empty() || buf.starts_with(b"HTTP/1.1 408"),
            "{:?}",
            String::from_utf8_lossy(&buf)
        );
    }
    assert_eq!(get(&s, &req("/700b.html", "")).status, 200);
}

#[test]
fn connection_cap_answers_503() {
    let s = Site::start("cap", &["--max-connections", "2"], site);
    let mut held: Vec<BufReader<TcpStream>> = (0..2).map(|_| BufReader::new(s.connect())).collect();
    for c in &mut held {
        c.get_mut()
            .write_all(req("/700b.html", "").as_bytes())
            .unwrap();
        assert_eq!(read_resp(c, false).status, 200);
    }
    let mut third = s.connect();
    let _ = third.write_all(req("/700b.html", "").as_bytes());
    let mut buf = Vec::new();
    let _ = third.read_to_end(&mut buf);
    assert!(
        buf.starts_with(b"HTTP/1.1 503"),
        "{:?}",
        String::from_utf8_lossy(&buf)
    );
}

#[test]
fn precompressed_siblings_follow_accept_encoding() {
    let s = Site::start("gz", &[], |root| {
        std::fs::write(root.join("app.js"), "plain").unwrap();
        std::fs::write(root.join("app.js.gz"), b"\x1f\x8bGZ").unwrap();
        std::fs::write(root.join("app.js.br"), b"BR").unwrap();
    });
    let r = get(&s, &req("/app.js", "Accept-Encoding: gzip\r\n"));
    assert_eq!(
        (r.header("content-encoding"), r.body.as_slice()),
        (Some("gzip"), &b"\x1f\x8bGZ"[..])
    );
    assert_eq!(r.header("vary"), Some("Accept-Encoding"));
    assert_eq!(
        r.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    let r = get(&s, &req("/app.js", "Accept-Encoding: gzip, br\r\n"));
    assert_eq!(
        (r.header("content-encoding"), r.body.as_slice()),
        (Some("br"), &b"BR"[..])
    );
    let r = get(&s, &req("/app.js", "Accept-Encoding: gzip;q=0\r\n"));
    assert_eq!(
        (r.header("content-encoding"), r.body.as_slice()),
        (None, &b"plain"[..])
    );
    assert_eq!(r.header("vary"), Some("Accept-Encoding"));
}

#[test]
fn access_log_is_combined_format_with_microseconds() {
    let logs = crate::common::fresh_dir("volley-serve-log");
    let log = logs.join("access.log");
    let mut s = Site::start("log", &["--access-log", log.to_str().unwrap()], site);
    get(
        &s,
        &req(
            "/700b.html",
            "User-Agent: test \"agent\"\r\nReferer: http://r/\r\n",
        ),
    );
    get(&s, &req("/nope", ""));
    s.stop();
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    // 127.0.0.1 - - [21/Nov/2026:21:54:35.762488 +0000] "GET /700b.html HTTP/1.1" 200 700 "http://r/" "test \"agent\""
    let l = lines[0];
    assert!(l.starts_with("127.0.0.1 - - ["), "{l}");
    let ts = &l[l.find('[').unwrap() + 1..l.find(']').unwrap()];
    let (time, zone) = ts.split_once(' ').unwrap();
    assert_eq!(zone, "+0000");
    let micros = time.rsplit('.').next().unwrap();
    assert!(
        micros.len() == 6 && micros.bytes().all(|b| b.is_ascii_digit()),
        "{ts}"
    );
    assert!(
        l.ends_with("\"GET /700b.html HTTP/1.1\" 200 700 \"http://r/\" \"test \\\"agent\\\"\""),
        "{l}"
    );
    assert!(
        lines[1].contains("\"GET /nope HTTP/1.1\" 404 "),
        "{}",
        lines[1]
    );
}

#[test]
fn threads_flag_serves_concurrent_connections_and_stops_cleanly() {
    let mut s = Site::start("threads", &["--threads", "3"], site);
    // Connections held open together, so the kernel spreads them over the loops.
    let mut conns: Vec<BufReader<TcpStream>> =
        (0..12).map(|_| BufReader::new(s.connect())).collect();
    for round in 0..3 {
        for c in &mut conns {
            c.get_mut()
                .write_all(req("/700b.html", "").as_bytes())
                .unwrap();
            let r = read_resp(c, false);
            assert_eq!((r.status, r.body.len()), (200, 700), "round {round}");
        }
    }
    let status = s.stop().expect("volley serve did not stop on SIGTERM");
    assert!(status.success(), "{status:?}");
    // Every loop closed its connections on the way out.
    for mut c in conns {
        let mut rest = Vec::new();
        assert_eq!(c.read_to_end(&mut rest).unwrap_or(0), 0);
    }
}

#[test]
fn conditional_dates_in_all_three_rfc_9110_forms() {
    // Sun, 06 Nov 1994 08:49:37 GMT, RFC 9110 §5.6.7's own example instant.
    let stamp = std::time::UNIX_EPOCH + Duration::from_secs(784_111_777);
    let s = Site::start("dates", &[], |root| {
        let p = root.join("old.txt");
        std::fs::write(&p, "0123456789").unwrap();
        let f = std::fs::File::options().write(true).open(&p).unwrap();
        f.set_modified(stamp).unwrap();
    });
    let forms = [
        "Sun, 06 Nov 1994 08:49:37 GMT",  // IMF-fixdate
        "Sunday, 06-Nov-94 08:49:37 GMT", // obsolete RFC 850
        "Sun Nov  6 08:49:37 1994",       // ANSI C asctime()
    ];
    for date in forms {
        let ims = format!("If-Modified-Since: {date}\r\n");
        assert_eq!(get(&s, &req("/old.txt", &ims)).status, 304, "{date}");
        // An earlier date in the same form: modified since, so 200.
        let earlier = date.replace("08:49:37", "08:49:36");
        let ims = format!("If-Modified-Since: {earlier}\r\n");
        assert_eq!(get(&s, &req("/old.txt", &ims)).status, 200, "{earlier}");
        let ius = format!("If-Unmodified-Since: {earlier}\r\n");
        assert_eq!(get(&s, &req("/old.txt", &ius)).status, 412, "{earlier}");
        let range = format!("Range: bytes=0-3\r\nIf-Range: {date}\r\n");
        let r = get(&s, &req("/old.txt", &range));
        assert_eq!((r.status, &r.body[..]), (206, &b"0123"[..]), "{date}");
    }
}

/// Without `--users` the server is read-only unless `--writable`: the writing methods
/// get 405 with the methods it allows, nothing (not even the sync journal) lands in the
/// root, and a PUT waiting on `100 Continue` is refused before its body is sent.
#[test]
fn an_anonymous_server_is_read_only_unless_writable() {
    let s = Site::start("readonly", &[], site);
    let before = list(&s.root);
    let put = "PUT /dir/new.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc";
    let with_dest = |m: &str| {
        format!("{m} /700b.html HTTP/1.1\r\nHost: t\r\nDestination: /copy.html\r\nContent-Length: 0\r\n\r\n")
    };
    for raw in [
        put.to_owned(),
        "DELETE /700b.html HTTP/1.1\r\nHost: t\r\n\r\n".to_owned(),
        "MKCOL /newdir/ HTTP/1.1\r\nHost: t\r\n\r\n".to_owned(),
        "MKCALENDAR /cal/ HTTP/1.1\r\nHost: t\r\n\r\n".to_owned(),
        "PROPPATCH /700b.html HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n".to_owned(),
        with_dest("COPY"),
        with_dest("MOVE"),
    ] {
        let r = get(&s, &raw);
        assert_eq!(r.status, 405, "{raw}");
        let allow = r.header("allow").unwrap_or_default();
        assert!(
            allow.contains("GET") && allow.contains("PROPFIND") && !allow.contains("PUT"),
            "{raw}: Allow {allow:?}"
        );
    }
    let mut c = s.connect();
    c.write_all(
        b"PUT /e.txt HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
    )
    .unwrap();
    assert_eq!(read_resp(&mut BufReader::new(c), false).status, 405);
    assert_eq!(
        get(&s, &req("/700b.html", "")).status,
        200,
        "reads still work"
    );
    let propfind = "PROPFIND /dir/ HTTP/1.1\r\nHost: t\r\nDepth: 1\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(get(&s, propfind).status, 207);
    assert_eq!(list(&s.root), before, "a read-only server changed its root");

    let w = Site::start("writable", &["--writable"], site);
    assert_eq!(get(&w, put).status, 201);
    assert!(w.root.join("dir/new.txt").is_file());
}

/// Every path under `dir`, sorted.
fn list(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p.clone());
            }
            out.push(p);
        }
    }
    out.sort();
    out
}

/// `--writable` beyond loopback would hand the tree to anyone on the network: one line,
/// exit 2, and no server starts. `--help` says what the server allows.
#[test]
fn anonymous_writes_beyond_loopback_are_refused() {
    let root = crate::common::fresh_dir("volley-serve-open");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["serve", "--writable", "--listen", "0.0.0.0:0", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("--writable") && err.contains("--users"),
        "{err}"
    );
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("read-only") && help.contains("--writable"),
        "{help}"
    );
}

/// The server's flags are typed and parsed once: a zero or malformed timeout and an
/// address that is none are one line naming the flag, exit 2, before anything starts;
/// `--help` shows the defaults.
#[test]
fn bad_serve_flags_are_one_line_and_exit_2() {
    let root = crate::common::fresh_dir("volley-serve-flags");
    for (flag, value) in [
        ("--header-timeout", "0s"),
        ("--header-timeout", "soon"),
        ("--idle-timeout", "-1s"),
        ("--listen", "localhost"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_volley"))
            .args(["serve", "--root"])
            .arg(&root)
            .arg(format!("{flag}={value}"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{flag} {value}: {err}");
        assert!(err.contains(flag), "{flag} {value}: {err}");
    }
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("[default: 10s]") && help.contains("[default: 60s]"),
        "{help}"
    );
}
