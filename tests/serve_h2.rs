//! `volley serve` speaking HTTP/2, end to end: over TLS (ALPN h2) and plain h2c with
//! prior knowledge, loaded by `volley bench --h2` (bodies checked: size, Brotli
//! sibling decoded), by Debian's h2load and fetched by curl where installed; broken
//! frames on a raw socket earn a GOAWAY with the right code and the server keeps
//! serving; the managed built-in target offers h2 and passes its h2 readiness probe.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::time::Duration;

const FILE_BYTES: usize = 40_000;

/// A temporary site removed on drop: `/file.bin` (several DATA frames long) and
/// `/page.html` with a `.br` sibling.
struct TempDir(crate::common::TestDir);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = crate::common::fresh_dir(&format!("volley-serve-h2-{tag}"));
        std::fs::create_dir_all(p.join("site")).unwrap();
        let file: Vec<u8> = (0..FILE_BYTES as u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(p.join("site/file.bin"), file).unwrap();
        let page = page();
        std::fs::write(p.join("site/page.html"), &page).unwrap();
        let mut br = Vec::new();
        {
            let mut w = brotli::CompressorWriter::new(&mut br, 4096, 5, 22);
            w.write_all(page.as_bytes()).unwrap();
        }
        std::fs::write(p.join("site/page.html.br"), br).unwrap();
        TempDir(p)
    }

    fn site(&self) -> PathBuf {
        self.0.join("site")
    }
}

fn page() -> String {
    (0..1500)
        .map(|i| format!("<p>row {i:05} of an h2 page</p>\n"))
        .collect()
}

/// A running `volley serve`, killed on drop.
struct Served {
    child: Child,
    /// `http://127.0.0.1:PORT` or `https://...`.
    base: String,
    addr: String,
    ca: Option<PathBuf>,
    _lines: BufReader<ChildStdout>,
}

impl Served {
    fn start(root: &Path, extra: &[&str]) -> Served {
        let mut child = Command::new(env!("CARGO_BIN_EXE_volley"))
            .args(["serve", "--root"])
            .arg(root)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        lines.read_line(&mut line).unwrap();
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|s| s.strip_suffix('/'))
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        let addr = base.split("://").nth(1).unwrap().to_owned();
        let ca = base.starts_with("https").then(|| {
            let mut l = String::new();
            lines.read_line(&mut l).unwrap();
            PathBuf::from(l.trim().strip_prefix("tls ca: ").unwrap())
        });
        Served {
            child,
            base,
            addr,
            ca,
            _lines: lines,
        }
    }

    fn tls(site: &Path, dir: &Path, extra: &[&str]) -> Served {
        let tls_dir = dir.join("tls");
        let mut args = vec!["--tls-self-signed", tls_dir.to_str().unwrap()];
        args.extend_from_slice(extra);
        Served::start(site, &args)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn volley(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(args)
        .output()
        .expect("run volley")
}

/// `volley bench ... -q --json`, which must succeed; returns the first run.
fn bench_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["bench"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-q", "--json"]);
    let out = volley(&all);
    assert!(
        out.status.success(),
        "{all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["runs"][0].clone()
}

fn installed(program: &str) -> Option<PathBuf> {
    ["/usr/bin", "/usr/local/bin"]
        .iter()
        .map(|d| Path::new(d).join(program))
        .find(|p| p.exists())
}

/// `volley bench --h2 --streams 8 -n 2000` over TLS and over h2c: every request ok,
/// every body its full size; the Brotli sibling is served, decoded and checked.
#[test]
fn volley_bench_h2_over_tls_and_h2c() {
    let dir = TempDir::new("bench");
    let tls = Served::tls(&dir.site(), &dir.0, &[]);
    let plain = Served::start(&dir.site(), &[]);
    let ca = tls.ca.clone().unwrap();
    let size = FILE_BYTES.to_string();
    for (s, protocol) in [(&tls, "h2"), (&plain, "h2c")] {
        let url = format!("{}/file.bin", s.base);
        let mut args = vec![
            url.as_str(),
            "--h2",
            "--streams",
            "8",
            "-c",
            "2",
            "-n",
            "2000",
            "--expect-size",
            &size,
        ];
        if protocol == "h2" {
            args.extend_from_slice(&["--cacert", ca.to_str().unwrap()]);
        }
        let run = bench_json(&args);
        assert_eq!(run["wire"]["protocol"], protocol);
        assert_eq!(run["requests"]["ok"], 2000, "{protocol}: {run}");
        assert_eq!(run["bytes"]["body_total"], 2000 * FILE_BYTES as u64);
    }
    let page_len = page().len().to_string();
    let url = format!("{}/page.html", tls.base);
    let run = bench_json(&[
        &url,
        "--h2",
        "--streams",
        "8",
        "-n",
        "2000",
        "--cacert",
        ca.to_str().unwrap(),
        "--compressed",
        "br",
        "--expect-size",
        &page_len,
    ]);
    assert_eq!(run["wire"]["tls"]["negotiated_alpn"], "h2");
    assert_eq!(run["wire"]["compression"], "br");
    assert_eq!(run["requests"]["ok"], 2000, "{run}");
    let wire = run["bytes"]["wire_body_total"].as_u64().unwrap();
    assert!(wire > 0 && wire < 2000 * page().len() as u64 / 4, "{wire}");
}

/// Debian's h2load (nghttp2-client), which checks no certificate, over TLS and h2c.
#[test]
fn h2load_succeeds_over_tls_and_h2c() {
    let Some(h2load) = installed("h2load") else {
        eprintln!("skipping: h2load not installed (apt-get install nghttp2-client)");
        return;
    };
    let dir = TempDir::new("h2load");
    let tls = Served::tls(&dir.site(), &dir.0, &[]);
    let plain = Served::start(&dir.site(), &[]);
    for s in [&tls, &plain] {
        let url = format!("{}/file.bin", s.base);
        let out = Command::new("timeout")
            .arg("60")
            .arg(&h2load)
            .args(["-n", "2000", "-c", "4", "-m", "8", &url])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("2000 succeeded, 0 failed"),
            "{url}: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("2000 2xx"), "{text}");
    }
}

fn curl(args: &[&str]) -> (bool, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20", "-o", "/dev/null"])
        .args(["-w", "%{http_version} %{http_code} %{size_download}"])
        .args(args)
        .output()
        .expect("curl runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// curl with prior knowledge on the plain port and by ALPN over TLS: the same
/// statuses and lengths as HTTP/1.1, WebDAV included; an HTTP/1.1-only server answers
/// no h2.
#[test]
fn curl_prior_knowledge_and_alpn() {
    if installed("curl").is_none() {
        eprintln!("skipping: curl not installed");
        return;
    }
    let dir = TempDir::new("curl");
    // Writable: the test ends with a PUT over h2.
    let plain = Served::start(&dir.site(), &["--writable"]);
    let b = &plain.base;
    let pk = "--http2-prior-knowledge";
    let file = format!("{b}/file.bin");
    assert_eq!(curl(&[pk, &file]), (true, format!("2 200 {FILE_BYTES}")));
    assert_eq!(curl(&[&file]), (true, format!("1.1 200 {FILE_BYTES}")));
    assert_eq!(
        curl(&[pk, "-I", &file]).1,
        "2 200 0",
        "HEAD: no body over h2"
    );
    assert_eq!(curl(&[pk, &format!("{b}/nope")]), (true, "2 404 14".into()));
    assert_eq!(curl(&[pk, "-X", "POST", &file]), (true, "2 405 23".into()));
    assert_eq!(curl(&[pk, "-r", "10-19", &file]), (true, "2 206 10".into()));

    // WebDAV over HTTP/2: the body of a PUT is collected, then the same handler runs.
    let up = dir.0.join("up.txt");
    std::fs::write(&up, "uploaded over h2\n").unwrap();
    let put_url = format!("{b}/up.txt");
    let (ok, put) = curl(&[pk, "-T", up.to_str().unwrap(), &put_url]);
    assert!(ok && put.starts_with("2 201 "), "{put}");
    assert_eq!(curl(&[pk, &put_url]), (true, "2 200 17".into()));
    let (ok, pf) = curl(&[pk, "-X", "PROPFIND", "-H", "Depth: 0", &put_url]);
    assert!(ok && pf.starts_with("2 207 "), "{pf}");

    let tls = Served::tls(&dir.site(), &dir.0, &[]);
    let ca = tls.ca.clone().unwrap();
    let url = format!("{}/file.bin", tls.base.replace("127.0.0.1", "localhost"));
    let cacert = ["--cacert", ca.to_str().unwrap()];
    assert_eq!(
        curl(&[cacert[0], cacert[1], "--http2", &url]),
        (true, format!("2 200 {FILE_BYTES}"))
    );

    let dir1 = TempDir::new("curl-h1");
    let h1 = Served::tls(&dir1.site(), &dir1.0, &["--http1-only"]);
    let ca1 = h1.ca.clone().unwrap();
    let url = format!("{}/file.bin", h1.base.replace("127.0.0.1", "localhost"));
    assert_eq!(
        curl(&["--cacert", ca1.to_str().unwrap(), "--http2", &url]),
        (true, format!("1.1 200 {FILE_BYTES}"))
    );
}

/// Reads frames until the server closes; returns the GOAWAY error code, if any.
fn goaway_after(addr: &str, input: &[u8]) -> Option<u32> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(input).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // Bounded: the server closes after its GOAWAY, or the timeout ends the read.
    while got.len() < 1 << 20 {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let mut rest = &got[..];
    let mut code = None;
    while rest.len() >= 9 {
        let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
        let kind = rest[3];
        if rest.len() < 9 + len {
            break;
        }
        if kind == 7 && len >= 8 {
            code = Some(u32::from_be_bytes(rest[13..17].try_into().unwrap()));
        }
        rest = &rest[9 + len..];
    }
    code
}

/// Broken frames on a raw h2c connection: GOAWAY with FRAME_SIZE_ERROR,
/// COMPRESSION_ERROR or PROTOCOL_ERROR, then the close; the server keeps serving.
#[test]
fn malformed_frames_get_goaway_and_the_server_lives_on() {
    let dir = TempDir::new("bad");
    let plain = Served::start(&dir.site(), &[]);
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0".to_vec();
    let with = |frame: &[u8]| {
        let mut v = preface.clone();
        v.extend_from_slice(frame);
        v
    };
    // A DATA frame announcing 16 KiB + 1 on stream 1.
    let oversized = with(&[0, 0x40, 1, 0, 0, 0, 0, 0, 1]);
    // HEADERS on stream 1 whose block is the invalid HPACK index 0.
    let bad_hpack = with(&[0, 0, 1, 1, 5, 0, 0, 0, 1, 0x80]);
    // SETTINGS of 5 bytes.
    let bad_settings = with(&[0, 0, 5, 4, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5]);
    // HEADERS on an even (server-initiated) stream.
    let even = with(&[0, 0, 1, 1, 5, 0, 0, 0, 2, 0x82]);
    for (name, input, code) in [
        ("oversized frame", oversized, 0x6),
        ("bad HPACK", bad_hpack, 0x9),
        ("bad SETTINGS length", bad_settings, 0x6),
        ("even stream id", even, 0x1),
    ] {
        assert_eq!(goaway_after(&plain.addr, &input), Some(code), "{name}");
    }
    // A preface whose tail is wrong is no preface: HTTP/1.1 answers it (400).
    let mut s = TcpStream::connect(&plain.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n").unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    assert!(head.starts_with(b"HTTP/1.1 4") || head.starts_with(b"HTTP/1.1 5"));

    let url = format!("{}/file.bin", plain.base);
    let run = bench_json(&[&url, "--h2", "-n", "20"]);
    assert_eq!(run["requests"]["ok"], 20, "server still serving: {run}");
}

/// The managed built-in target over TLS offers h2: its readiness probe sends real
/// HTTP/2 GETs (per encoding), then `volley bench --target builtin --tls --h2` runs.
#[test]
fn managed_builtin_target_offers_h2() {
    let run = bench_json(&[
        "--target",
        "builtin",
        "--tls",
        "--h2",
        "--streams",
        "4",
        "--compressed",
        "br",
        "-n",
        "400",
    ]);
    assert_eq!(run["wire"]["protocol"], "h2");
    assert_eq!(run["wire"]["tls"]["negotiated_alpn"], "h2");
    assert_eq!(run["wire"]["compression"], "br");
    assert_eq!(run["requests"]["ok"], 400, "{run}");
}
