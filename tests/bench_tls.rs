//! `volley bench` over TLS and HTTP/2, end to end: the real binary against the built-in
//! server over HTTPS (good and bad certificates, plain HTTP on an https URL, ALPN
//! mismatch) and against a real nginx over TLS with HTTP/1.1, h2, gzip and Brotli.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use volley_engine::volley_tls::certs;

use crate::common;
use common::Served;

/// A temporary directory with a small site, removed on drop.
struct TempDir(crate::common::TestDir);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = crate::common::fresh_dir(&format!("volley-bench-tls-{tag}"));
        std::fs::create_dir_all(p.join("site")).unwrap();
        std::fs::write(p.join("site/700b.html"), "x".repeat(700)).unwrap();
        std::fs::write(p.join("site/text.txt"), text()).unwrap();
        TempDir(p)
    }
}

/// 40 KB of compressible text.
fn text() -> String {
    (0..2000)
        .map(|i| format!("line {i:05} of text\n"))
        .collect()
}

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_volley"))
        .arg("bench")
        .args(["--timeout", "5s", "-d", "20s"])
        .args(args)
        .output()
        .unwrap()
}

fn json(args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["-q", "--json"]);
    let out = bench(&all);
    assert!(
        out.status.success(),
        "volley bench {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Runs a bench that must fail with exit 1 and one stderr line; returns that line.
fn fails(args: &[&str]) -> String {
    let out = bench(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line expected: {err}");
    err
}

#[test]
fn builtin_server_over_https_keep_alive_first_request_and_resumption() {
    let dir = TempDir::new("builtin");
    let tls_dir = dir.0.join("tls");
    let mut s = Served::start(
        &dir.0.join("site"),
        &["--tls-self-signed", tls_dir.to_str().unwrap()],
    );
    let ca = s.ca_line();
    let ca = ca.to_str().unwrap();
    let url = format!("{}/700b.html", s.base);
    assert!(url.starts_with("https://"), "{url}");

    let v = json(&[
        &url,
        "--cacert",
        ca,
        "-n",
        "60",
        "-c",
        "3",
        "-k",
        "--first-request",
    ]);
    let run = &v["runs"][0];
    assert_eq!(run["requests"]["ok"], 60);
    assert_eq!(run["bytes"]["body_total"], 60 * 700);
    let wire = &run["wire"];
    assert_eq!(wire["protocol"], "http/1.1");
    assert_eq!(wire["tls"]["negotiated_alpn"], "http/1.1");
    assert!(wire["tls"]["negotiated_version"]
        .as_str()
        .unwrap()
        .starts_with("TLSv1."));
    // Keep-alive: one handshake per connection, each charged to its first request.
    assert_eq!(run["latency"]["tls_handshake"]["count"], 3);
    assert!(run["latency"]["body_transfer"]["count"].as_u64().unwrap() == 60);
    let first = &run["first_request"];
    assert_eq!(first["status"], 200);
    assert!(first["tls_handshake_ms"].as_f64().unwrap() > 0.0, "{first}");
    assert!(first["total_ms"].as_f64().unwrap() >= first["connect_ms"].as_f64().unwrap());

    // No resumption and no keep-alive: every connection pays a full handshake.
    let v = json(&[&url, "--cacert", ca, "-n", "12", "--tls-resume", "off"]);
    let run = &v["runs"][0];
    assert_eq!(run["requests"]["ok"], 12);
    assert_eq!(run["wire"]["tls"]["full_handshakes"], 12);
    assert_eq!(run["wire"]["tls"]["resumption"], false);
    assert_eq!(run["latency"]["tls_handshake"]["count"], 12);

    // TLS 1.2 only is honoured.
    let v = json(&[&url, "--cacert", ca, "-n", "3", "--tls-version", "1.2"]);
    assert_eq!(v["runs"][0]["wire"]["tls"]["negotiated_version"], "TLSv1.2");

    // Text output names the protocol and the TLS session.
    let out = bench(&[&url, "--cacert", ca, "-n", "5"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("Protocol:               http/1.1"), "{text}");
    assert!(text.contains("tls_handshake"), "{text}");
}

/// Serves `site` over HTTPS with one certificate from `issue`.
fn serve_with(dir: &TempDir, stem: &str, issued: &certs::Issued) -> Served {
    let (cert, key) = issued.write(&dir.0, stem).unwrap();
    Served::start(
        &dir.0.join("site"),
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    )
}

#[test]
fn bad_certificates_fail_with_their_cause_named() {
    let dir = TempDir::new("badcerts");
    let ca = certs::Authority::new().unwrap();
    let ca_path = dir.0.join("ca.pem");
    std::fs::write(&ca_path, ca.cert_pem()).unwrap();
    let ca_arg = ca_path.to_str().unwrap();

    let expired = serve_with(
        &dir,
        "expired",
        &ca.expired_server(&["localhost", "127.0.0.1"]).unwrap(),
    );
    let url = format!("{}/700b.html", expired.base);
    let line = fails(&[&url, "--cacert", ca_arg, "-n", "5"]);
    assert!(
        line.contains("5 TLS failures (certificate expired)"),
        "{line}"
    );

    let wrong = serve_with(&dir, "wrong", &ca.wrong_host_server().unwrap());
    let url = format!("{}/700b.html", wrong.base);
    let line = fails(&[&url, "--cacert", ca_arg, "-n", "4"]);
    assert!(
        line.contains("certificate not valid for 127.0.0.1"),
        "{line}"
    );
    // --insecure is the way through for a lab target.
    let v = json(&[&url, "--insecure", "-n", "4"]);
    assert_eq!(v["runs"][0]["requests"]["ok"], 4);
    assert_eq!(v["runs"][0]["wire"]["tls"]["insecure"], true);

    let own = serve_with(
        &dir,
        "self",
        &certs::self_signed_server(&["localhost", "127.0.0.1"]).unwrap(),
    );
    let url = format!("{}/700b.html", own.base);
    let line = fails(&[&url, "--cacert", ca_arg, "-n", "3"]);
    assert!(line.contains("self-signed"), "{line}");
}

#[test]
fn plain_http_on_https_and_alpn_mismatch_are_tls_errors() {
    let dir = TempDir::new("proto");
    let plain = Served::start(&dir.0.join("site"), &[]);
    let url = format!(
        "{}/700b.html",
        plain.base.replacen("http://", "https://", 1)
    );
    let line = fails(&[&url, "--insecure", "-n", "3"]);
    assert!(line.contains("3 TLS failures"), "{line}");
    assert!(line.contains("plain HTTP on an https:// URL"), "{line}");

    // The built-in server started HTTP/1.1-only: --h2 must fail by ALPN, not hang.
    let tls_dir = dir.0.join("tls");
    let mut s = Served::start(
        &dir.0.join("site"),
        &[
            "--tls-self-signed",
            tls_dir.to_str().unwrap(),
            "--http1-only",
        ],
    );
    let ca = s.ca_line();
    let url = format!("{}/700b.html", s.base);
    let line = fails(&[&url, "--cacert", ca.to_str().unwrap(), "--h2", "-n", "3"]);
    assert!(line.contains("ALPN"), "{line}");
}

#[test]
fn usage_errors_for_tls_flags() {
    for (args, want) in [
        (
            vec!["http://127.0.0.1:9/", "--insecure"],
            "--insecure needs an https:// URL",
        ),
        (
            vec!["https://127.0.0.1:9/", "--tls-version", "1.1"],
            "--tls-version",
        ),
        (
            vec!["https://127.0.0.1:9/", "--cacert", "/nonexistent.pem"],
            "/nonexistent.pem",
        ),
        (
            vec!["http://127.0.0.1:9/", "--streams", "4"],
            "--streams needs --h2",
        ),
        (
            vec!["http://127.0.0.1:9/", "--compressed", "lzma"],
            "br, gzip or zstd",
        ),
    ] {
        let out = bench(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

const NGINX: &str = "/usr/sbin/nginx";
const BROTLI_MODULE: &str = "/usr/lib/nginx/modules/ngx_http_brotli_filter_module.so";

/// nginx over TLS (HTTP/1.1 and h2 on one port), gzip on, Brotli when the module is
/// installed; killed and removed on drop.
struct Nginx {
    child: Child,
    port: u16,
    ca: PathBuf,
    brotli: bool,
    _dir: TempDir,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn nginx() -> Option<Nginx> {
    if !Path::new(NGINX).exists() {
        eprintln!("skipping: {NGINX} not installed");
        return None;
    }
    let dir = TempDir::new("nginx");
    std::fs::create_dir_all(dir.0.join("tmp")).unwrap();
    let paths = certs::write_local_set(&dir.0.join("certs")).unwrap();
    let port = free_port();
    let brotli = Path::new(BROTLI_MODULE).exists();
    let d = dir.0.display();
    let conf = format!(
        "{load}master_process off;\ndaemon off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
         error_log {d}/error.log warn;\nevents {{ worker_connections 256; }}\n\
         http {{\n access_log off;\n types {{ text/plain txt; text/html html; }}\n\
         client_body_temp_path {d}/tmp/body;\n proxy_temp_path {d}/tmp/proxy;\n\
         fastcgi_temp_path {d}/tmp/fastcgi;\n uwsgi_temp_path {d}/tmp/uwsgi;\n\
         scgi_temp_path {d}/tmp/scgi;\n gzip on;\n gzip_types text/plain;\n{br}\
         server {{\n  listen 127.0.0.1:{port} ssl http2;\n  root {d}/site;\n\
           ssl_certificate {cert};\n  ssl_certificate_key {key};\n\
           ssl_protocols TLSv1.2 TLSv1.3;\n }}\n}}\n",
        load = if brotli {
            format!("load_module {BROTLI_MODULE};\n")
        } else {
            String::new()
        },
        br = if brotli {
            " brotli on;\n brotli_types text/plain;\n"
        } else {
            ""
        },
        cert = paths.cert.display(),
        key = paths.key.display(),
    );
    let conf_path = dir.0.join("nginx.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let child = Command::new(NGINX)
        .arg("-p")
        .arg(&dir.0)
        .arg("-c")
        .arg(&conf_path)
        .arg("-e")
        .arg(dir.0.join("error.log"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn nginx");
    let n = Nginx {
        child,
        port,
        ca: paths.ca,
        brotli,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nginx did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(n)
}

#[test]
fn nginx_over_tls_http1_h2_gzip_and_brotli() {
    let Some(n) = nginx() else { return };
    let ca = n.ca.to_str().unwrap();
    let base = format!("https://localhost:{}", n.port);
    let page = format!("{base}/700b.html");
    let txt = format!("{base}/text.txt");
    let size = text().len().to_string();

    // HTTP/1.1 keep-alive over TLS.
    let v = json(&[&page, "--cacert", ca, "-n", "40", "-c", "2", "-k"]);
    assert_eq!(v["runs"][0]["requests"]["ok"], 40);
    assert_eq!(v["runs"][0]["wire"]["tls"]["negotiated_alpn"], "http/1.1");

    // h2 by ALPN, several streams per connection.
    let v = json(&[
        &page,
        "--cacert",
        ca,
        "--h2",
        "--streams",
        "4",
        "-n",
        "40",
        "-c",
        "2",
    ]);
    let run = &v["runs"][0];
    assert_eq!(run["requests"]["ok"], 40);
    assert_eq!(run["wire"]["protocol"], "h2");
    assert_eq!(run["wire"]["tls"]["negotiated_alpn"], "h2");
    assert_eq!(run["wire"]["h2"]["connection_errors"], 0);
    assert_eq!(run["bytes"]["body_total"], 40 * 700);

    // gzip, decoded and checked against the original size.
    let v = json(&[
        &txt,
        "--cacert",
        ca,
        "-n",
        "20",
        "-k",
        "--compressed",
        "gzip",
        "--expect-size",
        &size,
    ]);
    let run = &v["runs"][0];
    assert_eq!(run["requests"]["ok"], 20, "{run}");
    assert_eq!(run["bytes"]["body_total"], 20 * text().len() as u64);
    assert!(run["bytes"]["wire_body_total"].as_u64().unwrap() < 20 * text().len() as u64 / 3);
    assert!(run["bytes"]["compression_ratio"].as_f64().unwrap() > 3.0);
    assert_eq!(run["wire"]["compression"], "gzip");

    // A wrong expected size is a validation error, never a success.
    let line = fails(&[
        &txt,
        "--cacert",
        ca,
        "-n",
        "5",
        "--compressed",
        "gzip",
        "--expect-size",
        "12",
    ]);
    assert!(line.contains("5 validation errors"), "{line}");

    if n.brotli {
        let v = json(&[
            &txt,
            "--cacert",
            ca,
            "-n",
            "20",
            "-k",
            "--compressed",
            "br",
            "--expect-size",
            &size,
        ]);
        let run = &v["runs"][0];
        assert_eq!(run["requests"]["ok"], 20, "{run}");
        assert_eq!(run["bytes"]["body_total"], 20 * text().len() as u64);
        assert!(run["bytes"]["compression_ratio"].as_f64().unwrap() > 3.0);
    } else {
        eprintln!("brotli module not installed: br against nginx skipped");
    }
    // nginx does not speak zstd: every response is an encoding error, counted.
    let line = fails(&[&txt, "--cacert", ca, "-n", "4", "--compressed", "zstd"]);
    assert!(line.contains("4 encoding errors"), "{line}");
}
