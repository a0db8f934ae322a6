//! `volley bench --compressed` against servers that get compression wrong, and the
//! built-in server's precompressed siblings: a server that ignores Accept-Encoding,
//! one that answers br when gzip was asked, and body validation by size and SHA-256.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A keep-alive HTTP/1.1 server on a free port answering every request with `head`
/// (extra header lines) and `body`; stops (and its thread ends) on drop. Bounded: each
/// connection times out after 5 s idle, the accept loop polls its stop flag.
struct Tiny {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Tiny {
    fn start(head: &'static str, body: &'static [u8]) -> Tiny {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut s, _)) => {
                        let _ = s.set_nonblocking(false);
                        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                        std::thread::spawn(move || {
                            let mut buf = Vec::new();
                            let mut chunk = [0u8; 4096];
                            // At most 10 000 requests per connection.
                            for _ in 0..10_000 {
                                let end = loop {
                                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                        break i + 4;
                                    }
                                    match s.read(&mut chunk) {
                                        Ok(0) | Err(_) => return,
                                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                                    }
                                };
                                buf.drain(..end);
                                let resp = format!(
                                    "HTTP/1.1 200 OK\r\n{head}Content-Length: {}\r\n\r\n",
                                    body.len()
                                );
                                if s.write_all(resp.as_bytes()).is_err()
                                    || s.write_all(body).is_err()
                                {
                                    return;
                                }
                            }
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Tiny {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for Tiny {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_volley"))
        .arg("bench")
        .args(["--timeout", "5s", "-d", "20s"])
        .args(args)
        .output()
        .unwrap()
}

fn one_line_failure(args: &[&str]) -> String {
    let out = bench(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    err
}

#[test]
fn a_server_ignoring_accept_encoding_is_counted_not_measured() {
    let s = Tiny::start(
        "Content-Type: text/plain\r\n",
        b"plain text, never compressed",
    );
    let line = one_line_failure(&[&s.url(), "-n", "20", "-k", "--compressed", "gzip"]);
    assert!(
        line.contains("no request succeeded: 20 encoding errors"),
        "{line}"
    );
    assert!(line.contains("not gzip-encoded"), "{line}");
    // Without --compressed the same server is a success.
    let out = bench(&[&s.url(), "-n", "5", "-q"]);
    assert!(out.status.success());
}

#[test]
fn br_when_gzip_was_asked_is_an_encoding_error() {
    // "hello" as one uncompressed Brotli meta-block, then an empty last one.
    let s = Tiny::start("Content-Encoding: br\r\n", b"\x40\x00\x10hello\x03");
    let line = one_line_failure(&[&s.url(), "-n", "6", "--compressed", "gzip"]);
    assert!(line.contains("6 encoding errors"), "{line}");
    // Asked for br, the same bytes decode.
    let out = bench(&[
        &s.url(),
        "-n",
        "3",
        "--compressed",
        "br",
        "--expect-size",
        "5",
        "-q",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["runs"][0]["bytes"]["body_total"], 15);
    assert_eq!(v["runs"][0]["bytes"]["wire_body_total"], 27);
}

#[test]
fn a_gzip_header_on_a_body_that_is_not_gzip_is_an_encoding_error() {
    // A body that is not gzip at all under a gzip header: decodes to an error.
    let s = Tiny::start("Content-Encoding: gzip\r\n", b"not gzip at all");
    let line = one_line_failure(&[&s.url(), "-n", "4", "-k", "--compressed", "gzip"]);
    assert!(line.contains("4 encoding errors"), "{line}");
}

/// A temporary site for the built-in server, removed on drop.
struct Site(crate::common::TestDir);

#[test]
fn precompressed_gzip_from_the_builtin_server_validates_by_size_and_hash() {
    let site = Site(crate::common::fresh_dir("volley-bench-compress"));
    let text: String = (0..3000)
        .map(|i| format!("row {i:05} of the file\n"))
        .collect();
    let file = site.0.join("t.txt");
    std::fs::write(&file, &text).unwrap();
    let gz = Command::new("gzip").arg("-k").arg("-9").arg(&file).status();
    if !gz.is_ok_and(|s| s.success()) {
        eprintln!("skipping: gzip not available");
        return;
    }
    let sha = Command::new("sha256sum").arg(&file).output().unwrap();
    let sha = String::from_utf8_lossy(&sha.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["serve", "--root"])
        .arg(&site.0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    {
        use std::io::BufRead;
        let mut r = std::io::BufReader::new(child.stdout.as_mut().unwrap());
        r.read_line(&mut line).unwrap();
    }
    let url = format!(
        "{}t.txt",
        line.trim().strip_prefix("listening on ").unwrap()
    );
    let size = text.len().to_string();
    let out = bench(&[
        &url,
        "-n",
        "30",
        "-k",
        "--compressed",
        "gzip",
        "--expect-size",
        &size,
        "--expect-sha256",
        &sha,
        "-q",
        "--json",
    ]);
    let wrong_hash = "0".repeat(64);
    let bad = bench(&[
        &url,
        "-n",
        "3",
        "--compressed",
        "gzip",
        "--expect-sha256",
        &wrong_hash,
    ]);
    let text_out = bench(&[&url, "-n", "3", "--compressed", "gzip"]);
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = &v["runs"][0];
    assert_eq!(run["requests"]["ok"], 30);
    assert_eq!(run["bytes"]["body_total"], 30 * text.len() as u64);
    let gz_len = std::fs::metadata(site.0.join("t.txt.gz")).unwrap().len();
    assert_eq!(run["bytes"]["wire_body_total"], 30 * gz_len);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(1), "{err}");
    assert!(err.contains("3 validation errors"), "{err}");
    let shown = String::from_utf8_lossy(&text_out.stdout);
    assert!(shown.contains("Body on the wire:"), "{shown}");
    assert!(shown.contains("Accept-Encoding: gzip"), "{shown}");
}
