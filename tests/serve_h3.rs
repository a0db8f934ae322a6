//! `volley serve --h3`, end to end: the real binary answering HTTP/3 on UDP at its TCP
//! port number, fetched by an HTTP/3 client no one here wrote (aioquic, PyPI, in
//! /opt/volley-venv: `scripts/install-aioquic.sh`) and by volley's own `bench --h3`;
//! the same bytes as HTTP/1.1 and HTTP/2 (curl) for a file, a range and a precompressed
//! sibling; junk datagrams and a handshake that never finishes leave it answering.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common;
use common::Served;

const VENV_PYTHON: &str = "/opt/volley-venv/bin/python";

/// A temporary directory removed on drop.
struct TempDir(crate::common::TestDir);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = crate::common::fresh_dir(&format!("volley-serve-h3-{tag}"));
        let site = p.join("site");
        std::fs::create_dir_all(&site).unwrap();
        std::fs::write(
            site.join("page.html"),
            "<p>hello over three protocols</p>\n".repeat(40),
        )
        .unwrap();
        // Beyond the small-file cache (256 KiB): read from the file as flow control allows.
        let big: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(site.join("big.bin"), big).unwrap();
        std::fs::write(site.join("style.css"), "body { color: black }\n".repeat(50)).unwrap();
        // The server serves a sibling as it is; its bytes need not be real gzip here.
        std::fs::write(
            site.join("style.css.gz"),
            b"\x1f\x8bnot-really-gzip-but-distinct",
        )
        .unwrap();
        TempDir(p)
    }

    fn site(&self) -> PathBuf {
        self.0.join("site")
    }
}

/// Whether aioquic is installed; a test without it says so and passes as skipped.
fn have_aioquic() -> bool {
    Command::new(VENV_PYTHON)
        .args(["-c", "import aioquic"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/h3_client.py")
}

/// Runs tests/h3_client.py with a hard time limit; (ok, stdout, stderr).
fn h3_client(args: &[&str]) -> (bool, String, String) {
    let out = Command::new("timeout")
        .arg("60")
        .arg(VENV_PYTHON)
        .arg(client_script())
        .args(args)
        .output()
        .expect("run the aioquic client");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The aioquic client's answers to `requests` (a JSON array of `{method, path,
/// headers, body}`) over HTTP/3 to the server on `port`, and its raw output.
fn fetch_h3(port: u16, ca: &str, requests: &serde_json::Value) -> (Vec<serde_json::Value>, String) {
    let (ok, out, err) = h3_client(&[
        "fetch",
        "127.0.0.1",
        &port.to_string(),
        ca,
        &requests.to_string(),
    ]);
    assert!(ok, "aioquic failed: {err}");
    (serde_json::from_str(&out).unwrap(), out)
}

/// Starts `volley serve --h3` with a throw-away CA and an access log; returns the
/// server, its port and the CA path.
fn serve_h3(tmp: &TempDir, extra: &[&str]) -> (Served, u16, String) {
    let certs = tmp.0.join("certs");
    let log = tmp.0.join("access.log");
    let mut args = vec![
        "--tls-self-signed",
        certs.to_str().unwrap(),
        "--h3",
        "--access-log",
        log.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let mut s = Served::start(&tmp.site(), &args);
    let ca = s.ca_line().to_str().unwrap().to_owned();
    let h3_line = s.next_line();
    assert!(h3_line.starts_with("http/3: udp "), "{h3_line}");
    let port: u16 = s.addr.rsplit(':').next().unwrap().parse().unwrap();
    (s, port, ca)
}

/// One answer as the tests compare them: status, the fields that must agree, and the
/// body's length and SHA-256.
#[derive(Debug, PartialEq)]
struct Seen {
    status: u16,
    content_type: Option<String>,
    content_encoding: Option<String>,
    content_range: Option<String>,
    etag: Option<String>,
    len: u64,
    sha256: String,
}

fn sha256_of(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

/// Fetches with curl over HTTP/1.1 or HTTP/2 (`proto`: `--http1.1` / `--http2`);
/// returns what was seen and the raw head.
fn curl_fetch(
    tmp: &TempDir,
    proto: &str,
    ca: &str,
    url: &str,
    headers: &[(&str, &str)],
) -> (Seen, String) {
    let head = tmp.0.join("curl.head");
    let body = tmp.0.join("curl.body");
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "20", proto, "--cacert", ca])
        .arg("-D")
        .arg(&head)
        .arg("-o")
        .arg(&body);
    for (n, v) in headers {
        cmd.arg("-H").arg(format!("{n}: {v}"));
    }
    let out = cmd.arg(url).output().expect("curl is installed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let head_text = std::fs::read_to_string(&head).unwrap();
    let field = |name: &str| {
        head_text.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_owned())
        })
    };
    let status: u16 = head_text
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap();
    let seen = Seen {
        status,
        content_type: field("content-type"),
        content_encoding: field("content-encoding"),
        content_range: field("content-range"),
        etag: field("etag"),
        len: std::fs::metadata(&body).unwrap().len(),
        sha256: sha256_of(&body),
    };
    (seen, head_text)
}

fn h3_seen(v: &serde_json::Value) -> Seen {
    let f = |n: &str| v["headers"][n].as_str().map(str::to_owned);
    Seen {
        status: v["status"].as_u64().unwrap() as u16,
        content_type: f("content-type"),
        content_encoding: f("content-encoding"),
        content_range: f("content-range"),
        etag: f("etag"),
        len: v["len"].as_u64().unwrap(),
        sha256: v["sha256"].as_str().unwrap().to_owned(),
    }
}

#[test]
fn aioquic_gets_the_same_bytes_over_h3_as_curl_over_h1_and_h2() {
    if !have_aioquic() {
        eprintln!("skipped: aioquic is not installed (scripts/install-aioquic.sh)");
        return;
    }
    let tmp = TempDir::new("same");
    let (mut s, port, ca) = serve_h3(&tmp, &[]);
    let cases: &[(&str, &[(&str, &str)])] = &[
        ("/page.html", &[]),
        ("/big.bin", &[]),
        ("/big.bin", &[("range", "bytes=1000-250999")]),
        ("/style.css", &[("accept-encoding", "gzip")]),
        ("/style.css", &[]),
        ("/missing.html", &[]),
    ];
    let requests: Vec<serde_json::Value> = cases
        .iter()
        .map(|(path, headers)| {
            serde_json::json!({
                "method": "GET",
                "path": path,
                "headers": headers.iter().map(|(n, v)| [n, v]).collect::<Vec<_>>(),
            })
        })
        .collect();
    let (answers, _) = fetch_h3(port, &ca, &serde_json::Value::Array(requests));
    assert_eq!(answers.len(), cases.len());
    for ((path, headers), h3) in cases.iter().zip(&answers) {
        let url = format!("https://localhost:{port}{path}");
        let h3 = h3_seen(h3);
        for proto in ["--http1.1", "--http2"] {
            let (seen, head) = curl_fetch(&tmp, proto, &ca, &url, headers);
            assert_eq!(seen, h3, "{path} {headers:?} over {proto} vs h3");
            if seen.status == 200 {
                // HTTP/3 advertised on the TCP answers (RFC 7838).
                let want = format!("alt-svc: h3=\":{port}\"; ma=86400");
                assert!(head.to_ascii_lowercase().contains(&want), "{head}");
            }
        }
    }
    let statuses: Vec<u16> = answers
        .iter()
        .map(|a| a["status"].as_u64().unwrap() as u16)
        .collect();
    assert_eq!(statuses, [200, 200, 206, 200, 200, 404]);
    assert_eq!(answers[3]["headers"]["content-encoding"], "gzip");
    assert_eq!(answers[2]["len"], 250_000);
    // The access log names the protocol of each answer.
    s.stop();
    let log = std::fs::read_to_string(tmp.0.join("access.log")).unwrap();
    let h3_lines: Vec<&str> = log.lines().filter(|l| l.contains("HTTP/3.0")).collect();
    assert_eq!(h3_lines.len(), cases.len(), "{log}");
    assert!(h3_lines[2].contains("\" 206 250000 "), "{}", h3_lines[2]);
    assert!(h3_lines.iter().all(|l| l.contains("aioquic-test")));
    assert_eq!(
        log.lines().filter(|l| l.contains("HTTP/2.0")).count(),
        cases.len()
    );
    assert_eq!(
        log.lines().filter(|l| l.contains("HTTP/1.1")).count(),
        cases.len()
    );
}

#[test]
fn dav_over_h3_writes_and_reads_back_like_h1() {
    if !have_aioquic() {
        eprintln!("skipped: aioquic is not installed (scripts/install-aioquic.sh)");
        return;
    }
    let tmp = TempDir::new("dav");
    let (_s, port, ca) = serve_h3(&tmp, &["--writable"]);
    let requests = serde_json::json!([
        {"method": "PUT", "path": "/up.txt", "body": "written over h3\n",
         "headers": [["content-type", "text/plain"]]},
        {"method": "GET", "path": "/up.txt"},
        {"method": "PROPFIND", "path": "/", "headers": [["depth", "1"]]},
        {"method": "DELETE", "path": "/up.txt"},
        {"method": "GET", "path": "/up.txt"},
    ]);
    let (answers, out) = fetch_h3(port, &ca, &requests);
    let statuses: Vec<u64> = answers
        .iter()
        .map(|a| a["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [201, 200, 207, 204, 404], "{out}");
    assert_eq!(answers[1]["len"], 16);
}

#[test]
fn bench_h3_against_serve_counts_match_the_access_log() {
    let tmp = TempDir::new("bench");
    let (mut s, port, ca) = serve_h3(&tmp, &["--threads", "2"]);
    let url = format!("https://localhost:{port}/page.html");
    let run = bench_h3(
        &[
            "bench",
            &url,
            "--h3",
            "--cacert",
            &ca,
            "-n",
            "400",
            "-c",
            "3",
            "--streams",
            "4",
            "--json",
        ],
        400,
    );
    assert_eq!(run["wire"]["tls"]["negotiated_alpn"], "h3");
    s.stop();
    let log = std::fs::read_to_string(tmp.0.join("access.log")).unwrap();
    let h3 = log
        .lines()
        .filter(|l| l.contains("\"GET /page.html HTTP/3.0\" 200 "))
        .count();
    assert_eq!(
        h3 as u64,
        common::load_lines(&tmp.0.join("access.log")),
        "{log}"
    );
    assert_eq!(h3, 400, "the server's count");
}

/// Datagrams and the calls that carried them, counted by the client: the built-in
/// server sends a large answer in GSO bursts, and on loopback the kernel hands such a
/// burst whole to a socket with UDP GRO on, so the client reads several datagrams a
/// call (Linux has had UDP_SEGMENT since 4.18 and UDP_GRO since 5.0). With
/// `VOLLEY_UDP_OFFLOAD=off` (what bench/h3.py compares) the same answers come one
/// datagram a read, and every send carries one datagram.
#[test]
fn bench_h3_reads_coalesced_datagrams_and_counts_its_calls() {
    let tmp = TempDir::new("gro");
    let (_s, port, ca) = serve_h3(&tmp, &[]);
    let url = format!("https://localhost:{port}/big.bin");
    let args = [
        "bench", &url, "--h3", "--cacert", &ca, "-n", "6", "-c", "1", "--json",
    ];
    let run = bench_h3(&args, 6);
    let udp = &run["wire"]["h3"]["udp"];
    let n = |k: &str| udp[k].as_u64().unwrap_or_else(|| panic!("{k}: {udp}"));
    // 6 answers of 600 KB are more than 2,400 datagrams of at most 1,500 bytes.
    assert!(n("datagrams_read") > 2_400, "{udp}");
    assert!(n("datagrams_sent") >= n("sends") && n("sends") > 0, "{udp}");
    assert!(
        n("datagrams_read") > n("reads") * 2,
        "no coalesced reads (UDP GRO): {udp}"
    );

    let (code, out, err) = common::output_of(
        common::volley_cmd()
            .args(args)
            .env("VOLLEY_UDP_OFFLOAD", "off"),
    );
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON on stdout");
    let udp = &v["runs"][0]["wire"]["h3"]["udp"];
    assert_eq!(v["runs"][0]["requests"]["ok"], 6, "{v}");
    let n = |k: &str| udp[k].as_u64().unwrap_or_else(|| panic!("{k}: {udp}"));
    assert!(n("datagrams_read") > 2_400, "{udp}");
    assert_eq!(
        n("datagrams_read"),
        n("reads"),
        "a coalesced read with GRO off: {udp}"
    );
    assert_eq!(
        n("datagrams_sent"),
        n("sends"),
        "a GSO send with GSO off: {udp}"
    );
}

#[test]
fn bench_target_builtin_over_h3() {
    bench_h3(
        &[
            "bench",
            "--target",
            "builtin",
            "--tls",
            "--h3",
            "-n",
            "200",
            "-c",
            "2",
            "--streams",
            "4",
            "--json",
        ],
        200,
    );
}

/// HTTP/3 into a network namespace volley makes (`--sysctl` puts the target in one and
/// the load in another, over veths and a bridge): UDP crosses the lab, and the
/// throw-away certificate names the lab address the client checks (it named loopback
/// only, so every TLS check of a lab's target failed).
#[test]
fn h3_into_a_lab_namespace() {
    let (code, out, err) = common::volley(&[
        "bench",
        "--target",
        "builtin",
        "--tls",
        "--h3",
        "--sysctl",
        "net.core.somaxconn=1024",
        "-n",
        "200",
        "-c",
        "2",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON on stdout");
    let run = &v["runs"][0];
    assert!(
        run["url"]
            .as_str()
            .is_some_and(|u| u.starts_with("https://10.213.")),
        "{run}"
    );
    assert_eq!(run["wire"]["protocol"], "h3", "{run}");
    assert_eq!(run["wire"]["h3"]["handshakes"], 2, "{run}");
    assert_eq!(run["requests"]["ok"], 200, "{run}");
}

#[test]
fn junk_datagrams_and_a_stalled_handshake_leave_the_server_answering() {
    let tmp = TempDir::new("junk");
    // Room for 4 connections, QUIC or TCP: the 6 handshakes that never finish fill it,
    // so the loads below get in only if the idle timeout (1 s) dropped them.
    let (mut s, port, ca) = serve_h3(&tmp, &["--max-connections", "4", "--idle-timeout", "1s"]);
    let url = format!("https://localhost:{port}/page.html");
    if have_aioquic() {
        let (ok, _, err) = h3_client(&["junk", "127.0.0.1", &port.to_string()]);
        assert!(ok, "{err}");
        for _ in 0..6 {
            let (ok, _, err) = h3_client(&["stall", "127.0.0.1", &port.to_string(), &ca]);
            assert!(ok, "{err}");
        }
        std::thread::sleep(Duration::from_millis(1500));
    } else {
        eprintln!("aioquic is not installed: junk from a plain socket only");
    }
    // Junk from a plain socket too: empty, one byte, a long header with nothing behind.
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for d in [&b""[..], b"\x00", b"\xc0\x00\x00\x00\x01", &[0xffu8; 1400]] {
        let _ = sock.send_to(d, ("127.0.0.1", port));
    }
    // Still answering, over h3 and over TCP, within seconds.
    let started = Instant::now();
    let (code, out, err) = common::volley(&[
        "bench",
        &url,
        "--h3",
        "--cacert",
        &ca,
        "-n",
        "20",
        "--timeout",
        "5s",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["runs"][0]["requests"]["ok"], 20);
    let (code, _, err) =
        common::volley(&["bench", &url, "--h2", "--cacert", &ca, "-n", "20", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(started.elapsed() < Duration::from_secs(30));
    // And it stops cleanly (no panic: exit 0 after SIGTERM).
    let status = s.stop().expect("stopped within 2 s");
    assert!(status.success(), "{status:?}");
}

#[test]
fn accounts_over_h3_need_their_credentials() {
    if !have_aioquic() {
        eprintln!("skipped: aioquic is not installed (scripts/install-aioquic.sh)");
        return;
    }
    let tmp = TempDir::new("accounts");
    let users = crate::groupware::users_file(&tmp.0, &[("alice", "secret")]);
    let (_s, port, ca) = serve_h3(&tmp, &["--users", users.to_str().unwrap()]);
    let auth = ["authorization", "Basic YWxpY2U6c2VjcmV0"]; // alice:secret
    let requests = serde_json::json!([
        {"method": "GET", "path": "/alice/"},
        {"method": "PUT", "path": "/alice/note.txt", "body": "mine\n", "headers": [auth]},
        {"method": "GET", "path": "/alice/note.txt", "headers": [auth]},
        {"method": "GET", "path": "/page.html", "headers": [auth]},
    ]);
    let (answers, out) = fetch_h3(port, &ca, &requests);
    assert_eq!(answers[0]["status"], 401, "{out}");
    assert!(answers[0]["headers"]["www-authenticate"]
        .as_str()
        .is_some_and(|v| v.starts_with("Basic")));
    assert_eq!(answers[1]["status"], 201, "{out}");
    assert_eq!(answers[2]["status"], 200, "{out}");
    assert_eq!(answers[2]["len"], 5);
    // Outside the account's home: refused as over HTTP/1.1.
    assert_eq!(answers[3]["status"], 403, "{out}");
}

#[test]
fn h3_without_tls_is_a_usage_error() {
    let tmp = TempDir::new("usage");
    let (code, out, err) =
        common::volley(&["serve", "--root", tmp.site().to_str().unwrap(), "--h3"]);
    assert_eq!(code, 2, "{out}{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--h3 needs TLS"), "{err}");
}

#[test]
fn zero_rtt_is_accepted_for_safe_methods_only() {
    if !have_aioquic() {
        eprintln!("skipped: aioquic is not installed (scripts/install-aioquic.sh)");
        return;
    }
    let tmp = TempDir::new("early");
    let (mut s, port, ca) = serve_h3(&tmp, &["--writable"]);
    // A GET in 0-RTT data is answered; a PUT, which a replay would repeat, gets 425
    // Too Early (RFC 8470) and the file is not written. A PUT the server reaches only
    // after the handshake completed is no longer replayable and may be applied (201):
    // on a loaded machine the client's Finished can be read first. So up to five
    // resumed connections, each with a PUT of its own: every 425 wrote nothing, every
    // 201 wrote its file, and at least one PUT was refused as too early.
    let mut refused = Vec::new();
    for attempt in 0..5 {
        let path = format!("/early-{attempt}.txt");
        let requests = serde_json::json!([
            {"method": "GET", "path": "/page.html"},
            {"method": "PUT", "path": path, "body": "replayable\n"},
        ]);
        let (ok, out, err) = h3_client(&[
            "early",
            "127.0.0.1",
            &port.to_string(),
            &ca,
            &requests.to_string(),
        ]);
        assert!(ok, "aioquic failed: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["session_resumed"], true, "{out}");
        assert_eq!(v["early_data_accepted"], true, "{out}");
        assert_eq!(v["answers"][0]["status"], 200, "{out}");
        let written = tmp.site().join(&path[1..]).exists();
        match v["answers"][1]["status"].as_u64() {
            Some(425) => {
                assert!(!written, "a PUT refused as too early was written: {out}");
                refused.push(path);
                break;
            }
            Some(201) => assert!(written, "{out}"),
            other => panic!("PUT in 0-RTT answered {other:?}: {out}"),
        }
    }
    s.stop();
    let path = refused
        .first()
        .expect("no PUT sent in 0-RTT data was refused as too early");
    let log = std::fs::read_to_string(tmp.0.join("access.log")).unwrap();
    assert!(
        log.contains(&format!("\"PUT {path} HTTP/3.0\" 425 ")),
        "{log}"
    );
}

/// `volley bench ARGS` (ending with `--json`) must succeed over HTTP/3 with `ok`
/// requests answered; returns its run's JSON.
fn bench_h3(args: &[&str], ok: u64) -> serde_json::Value {
    let (code, out, err) = common::volley(args);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON on stdout");
    let run = v["runs"][0].clone();
    assert_eq!(run["wire"]["protocol"], "h3", "{run}");
    assert_eq!(run["requests"]["ok"], ok, "{run}");
    run
}
