//! What a newcomer to `volley bench` tripped on, each pinned: CSV on stdout written once,
//! `-c` beyond `-n` refused as ab does, the User-Agent and a body's Content-Type sent,
//! IPv6 literal URLs loaded; and the other commands' flags refused by clap in one line.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::bench_cli::{one_line_usage_error, volley, Mode, TestServer};

#[test]
fn csv_on_stdout_is_written_once_and_alone() {
    let srv = TestServer::start(Mode::Ok);
    for flag in ["--csv", "--csv-seconds"] {
        let out = volley()
            .args(["bench", &srv.url("/"), "-n", "20", "-k", flag, "-"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{flag}");
        let text = String::from_utf8_lossy(&out.stdout);
        let header = text.lines().next().unwrap_or_default().to_string();
        assert!(header.contains(','), "{flag}: {text}");
        let headers = text.lines().filter(|l| **l == *header).count();
        assert_eq!(headers, 1, "{flag}: the CSV is written once: {text}");
        assert!(
            !text.contains("Requests per second"),
            "{flag}: no text report mixed into the CSV: {text}"
        );
    }
}

#[test]
fn more_connections_than_requests_is_refused_as_ab_does() {
    let srv = TestServer::start(Mode::Ok);
    let url = srv.url("/");
    one_line_usage_error(&[&url, "-t", "2", "-c", "64", "-k"]);
    let out = volley()
        .args(["bench", &url, "-c", "64", "-k"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("-c 64") && err.contains("-n"), "{err}");
    assert_eq!(srv.accepted.load(Ordering::Relaxed), 0, "nothing was sent");
    // With a duration or enough requests, the same concurrency runs.
    let out = volley()
        .args(["bench", &url, "-c", "4", "-n", "8", "-k", "-q"])
        .output()
        .unwrap();
    assert!(out.status.success());
}

/// A server on `listener` that answers one request and returns its head and body.
/// bench first checks the port with a bare connect: connections that send nothing are
/// skipped (the tests' runs send one request, so at most a few connections come).
fn one_request(listener: TcpListener) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        for _ in 0..10 {
            let (sock, _) = listener.accept().unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut w = sock.try_clone().unwrap();
            let mut r = BufReader::new(sock);
            let (mut head, mut line, mut len) = (String::new(), String::new(), 0usize);
            while line != "\r\n" {
                line.clear();
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
                head.push_str(&line);
            }
            if head.is_empty() {
                continue;
            }
            let mut body = vec![0u8; len];
            let _ = r.read_exact(&mut body);
            let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
            let _ = w.write_all(ok);
            return head + &String::from_utf8_lossy(&body);
        }
        String::new()
    })
}

/// One request's head and body as a one-shot server on loopback received it.
fn received(args: &[&str]) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/in", listener.local_addr().unwrap());
    let server = one_request(listener);
    let out = volley()
        .arg("bench")
        .arg(&url)
        .args(args)
        .arg("-q")
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.join().unwrap().to_ascii_lowercase()
}

#[test]
fn requests_say_who_sends_them_and_what_their_body_is() {
    let version = env!("CARGO_PKG_VERSION");
    let got = received(&[]);
    assert!(
        got.contains(&format!("user-agent: volley/{version}\r\n")),
        "{got}"
    );
    assert!(!got.contains("content-type"), "no body, no type: {got}");
    let got = received(&["--body", "hello"]);
    assert!(got.starts_with("post /in "), "{got}");
    assert!(
        got.contains("content-type: application/octet-stream\r\n"),
        "{got}"
    );
    assert!(got.ends_with("hello"), "{got}");
    let got = received(&["--body", "{}", "-T", "application/json"]);
    assert!(got.contains("content-type: application/json\r\n"), "{got}");
    let got = received(&[
        "-H",
        "User-Agent: curl/8",
        "--body",
        "x",
        "-H",
        "Content-Type: text/plain",
    ]);
    assert!(
        got.contains("user-agent: curl/8\r\n") && !got.contains("volley/"),
        "{got}"
    );
    assert_eq!(got.matches("content-type").count(), 1, "{got}");
}

#[test]
fn ipv6_literal_urls_are_loaded() {
    let Ok(listener) = TcpListener::bind("[::1]:0") else {
        eprintln!("skipped: no IPv6 loopback here");
        return;
    };
    let port = listener.local_addr().unwrap().port();
    let server = one_request(listener);
    let out = volley()
        .args(["bench", &format!("http://[::1]:{port}/v6"), "-q"])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let head = server.join().unwrap();
    assert!(head.contains(&format!("Host: [::1]:{port}\r\n")), "{head}");
}

/// The flags of the other commands are typed too (issue 22 item 2): a bad value is
/// clap's refusal, one line naming the flag, exit 2, before anything runs; `--help`
/// lists the metrics `compare` takes.
#[test]
fn other_commands_refuse_a_bad_flag_value_in_one_line() {
    for (args, want) in [
        (
            &["compare", "1", "2", "--metric", "p50"][..],
            "volley: --metric must be rps or p99, got 'p50'",
        ),
        (
            &["study", "run", "no-such.toml", "--scale", "0"][..],
            "volley: --scale must be a positive number, got '0'",
        ),
        (
            &["demo", "--scale", "-1"][..],
            "volley: --scale must be a positive number, got '-1'",
        ),
        (
            &["agent", "--bus", "nats://127.0.0.1:1", "--wait", "0s"][..],
            "volley: --wait must be longer than zero, got 0s",
        ),
        (
            &["targets", "--show-config", "nginx", "--workers", "0"][..],
            "volley: --workers must be at least 1, got 0",
        ),
    ] {
        let out = volley().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end(), want, "{args:?}");
    }
    let help = volley().args(["compare", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("[possible values: rps, p99]"), "{help}");
}
