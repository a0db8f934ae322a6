//! End-to-end DAV tests against the real binary (`volley serve`): Debian's litmus
//! WebDAV suite, a python-caldav client, and a kill -9 in the middle of a stream of PUTs.
//! Needs `litmus` and `python3-caldav` (scripts/install-deps.sh installs both).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common;
use common::Served;

/// A test's own directory (`volley-davit-TAG-...`), removed when dropped.
fn temp_dir(tag: &str) -> crate::common::TestDir {
    crate::common::fresh_dir(&format!("volley-davit-{tag}"))
}

/// Runs `cmd` to completion or kills it after `limit`; returns (success, stdout+stderr).
fn run_bounded(mut cmd: Command, limit: Duration) -> (bool, String) {
    // A file of its own (tests run in parallel threads of one process), removed when
    // `out_file` drops, also if the client cannot be started.
    let out_file = tempfile::Builder::new()
        .prefix("volley-davit-out-")
        .tempfile()
        .unwrap();
    let out = out_file.reopen().unwrap();
    let mut child = cmd
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("spawn client (is it installed? see scripts/install-deps.sh)");
    let deadline = Instant::now() + limit;
    let ok = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.success();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(out_file.path()).unwrap_or_default();
    (ok, text)
}

/// `<- summary for `basic': of 16 tests run: 16 passed, 0 failed. 100.0%` -> (run, failed).
fn litmus_summary(output: &str, group: &str) -> Option<(u32, u32)> {
    let key = format!("<- summary for `{group}': of ");
    let line = output
        .lines()
        .find_map(|l| l.split_once(&key).map(|(_, r)| r))?;
    let run: u32 = line.split_whitespace().next()?.parse().ok()?;
    let failed: u32 = line
        .split(", ")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some((run, failed))
}

/// Runs litmus `groups` against a fresh server and asserts each group fully passes.
fn assert_litmus_passes(tag: &str, groups: &[&str]) {
    let tmp = temp_dir(tag);
    let root = tmp.join("root");
    std::fs::create_dir_all(root.join("dir")).unwrap();
    let server = Served::start(&root, &["--listen", "127.0.0.1:0", "--writable"]);
    let mut cmd = Command::new("litmus");
    cmd.arg("-k")
        .arg(format!("http://{}/dir/", server.addr))
        .env("TESTS", groups.join(" "))
        .current_dir(&tmp);
    let (_, out) = run_bounded(cmd, Duration::from_secs(180));
    for group in groups {
        let (run, failed) = litmus_summary(&out, group)
            .unwrap_or_else(|| panic!("no litmus summary for {group}:\n{out}"));
        assert!(
            run > 0 && failed == 0,
            "litmus {group}: {failed} of {run} failed:\n{out}"
        );
    }
}

#[test]
fn litmus_basic_props_and_copymove_pass() {
    assert_litmus_passes("litmus-dav", &["basic", "props", "copymove"]);
}

/// The `http` group is about HTTP framing (Expect: 100-continue), which the server
/// crate owns; kept apart so a failure here points at the right crate.
#[test]
fn litmus_http_passes() {
    assert_litmus_passes("litmus-http", &["http"]);
}

#[test]
fn python_caldav_client_round_trip() {
    let tmp = temp_dir("caldav");
    std::fs::create_dir_all(tmp.join("cal")).unwrap();
    let server = Served::start(&tmp, &["--listen", "127.0.0.1:0", "--writable"]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/caldav_client.py");
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.arg(script).arg(format!("http://{}/cal/", server.addr));
    let (ok, out) = run_bounded(cmd, Duration::from_secs(120));
    assert!(ok, "python-caldav script failed:\n{out}");
    assert!(out.contains("all caldav checks passed"), "{out}");
}

/// python-caldav against a multi-user server: it starts at `/.well-known/caldav`
/// (RFC 6764, a redirect), authenticates with a password, finds its principal and
/// default calendar, then creates, edits, deletes and syncs as above.
#[test]
fn python_caldav_client_with_password_through_well_known() {
    let tmp = temp_dir("caldav-users");
    let root = tmp.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let mut passwd = Command::new(env!("CARGO_BIN_EXE_volley"));
    passwd
        .args(["passwd", "erin", "--cost", "4"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = passwd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"s3cret pass\n")
        .unwrap();
    let line = child.wait_with_output().unwrap().stdout;
    let users = tmp.join("users");
    std::fs::write(&users, line).unwrap();
    let server = Served::start(&root, &["--users", users.to_str().unwrap()]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/caldav_client.py");
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.arg(script)
        .arg(format!("http://{}/.well-known/caldav", server.addr))
        .args(["/erin/", "erin", "s3cret pass"]);
    let (ok, out) = run_bounded(cmd, Duration::from_secs(120));
    assert!(ok, "python-caldav script failed:\n{out}");
    assert!(out.contains("all caldav checks passed"), "{out}");
}

/// One HTTP/1.1 request on a fresh connection; returns (status, body). Reads exactly
/// Content-Length body bytes rather than waiting for the server to close.
fn request(addr: &str, method: &str, path: &str, body: &[u8]) -> std::io::Result<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.set_write_timeout(Some(Duration::from_secs(5)))?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nDepth: 1\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let end = loop {
        if let Some(e) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break e;
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut rest = buf[end + 4..].to_vec();
    while rest.len() < len {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        rest.extend_from_slice(&chunk[..n]);
    }
    rest.truncate(len);
    Ok((status, rest))
}

/// The body of version `v` of item `i`: a repeated self-describing record whose length
/// depends on the version, so a mix of two versions or a truncation is detectable.
/// Sizes straddle 4 KiB (about 1.1 to 8 KiB), so bodies arriving in a later read than
/// their head are part of the stream too.
fn item_body(i: u64, v: u64) -> Vec<u8> {
    let rec = format!("item{i}-v{v};");
    rec.repeat(100 + (v % 7) as usize * 100).into_bytes()
}

#[test]
fn kill_9_during_puts_leaves_no_torn_item() {
    const ITEMS: u64 = 8;
    let tmp = temp_dir("crash");
    std::fs::create_dir_all(tmp.join("items")).unwrap();
    let mut server = Served::start(&tmp, &["--listen", "127.0.0.1:0", "--writable"]);
    let addr = server.addr.clone();
    for i in 0..ITEMS {
        let (st, _) = request(&addr, "PUT", &format!("/items/i{i}.txt"), &item_body(i, 0)).unwrap();
        assert!(st == 201 || st == 204, "initial PUT status {st}");
    }
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (done, stop, addr) = (done.clone(), stop.clone(), addr.clone());
        std::thread::spawn(move || {
            // Bounded in count and time; ends early when the server dies.
            let deadline = Instant::now() + Duration::from_secs(10);
            for v in 1..5000u64 {
                if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
                    break;
                }
                let i = v % ITEMS;
                if request(&addr, "PUT", &format!("/items/i{i}.txt"), &item_body(i, v)).is_err() {
                    break;
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while done.load(Ordering::Relaxed) < 40 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        done.load(Ordering::Relaxed) >= 40,
        "the PUT stream never got going"
    );
    server.kill(); // SIGKILL, mid-stream
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();

    for i in 0..ITEMS {
        let content = std::fs::read(tmp.join(format!("items/i{i}.txt"))).unwrap();
        let text = String::from_utf8_lossy(&content);
        let v: u64 = text
            .strip_prefix(&format!("item{i}-v"))
            .and_then(|r| r.split(';').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| {
                panic!("item {i} is torn: starts {:?}", &text[..text.len().min(40)])
            });
        assert!(
            content == item_body(i, v),
            "item {i} is a torn mix around version {v}"
        );
    }

    // A restarted server lists the items (and no temp files) and its journal still works.
    let server = Served::start(&tmp, &["--listen", "127.0.0.1:0", "--writable"]);
    let (st, body) = request(&server.addr, "PROPFIND", "/items/", b"").unwrap();
    assert_eq!(st, 207);
    let listing = String::from_utf8_lossy(&body);
    assert!(
        !listing.contains(".volley-"),
        "internal file listed:\n{listing}"
    );
    assert_eq!(
        listing.matches("<D:response>").count(),
        1 + ITEMS as usize,
        "{listing}"
    );
    let sync = br#"<D:sync-collection xmlns:D="DAV:"><D:sync-token>urn:volley:sync:0:0</D:sync-token><D:sync-level>1</D:sync-level><D:prop><D:getetag/></D:prop></D:sync-collection>"#;
    let (st, body) = request(&server.addr, "REPORT", "/items/", sync).unwrap();
    assert_eq!(st, 207, "{}", String::from_utf8_lossy(&body));
}
