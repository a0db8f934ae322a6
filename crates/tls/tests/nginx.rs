//! TlsSession against a real nginx (OpenSSL) over TLS 1.2 and 1.3 on 127.0.0.1, with
//! certificates from `certs::write_local_set`: interoperability that in-process rustls
//! on both ends cannot show. Skipped, with a message, where nginx is not installed.

use crate::common;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{exchange, scratch};
use volley_tls::{certs, ClientTls, TlsVersion, VersionPolicy};

const NGINX: &str = "/usr/sbin/nginx";
/// How long nginx gets to start listening before the test gives up.
const START_TIMEOUT: Duration = Duration::from_secs(10);
const BODY: &str = "hello from nginx over tls\n";

/// An nginx child, killed and reaped on drop even when an assertion fails.
struct Nginx {
    child: Child,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    // nginx binds by itself, so the port is found with port 0 and released just before;
    // a rare collision shows up as a failed start and a retry.
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn config(dir: &Path, port: u16, paths: &certs::CertPaths) -> String {
    let d = dir.display();
    // nginx 1.22 (Debian 12) predates `http2 on;`; the listen flag is the portable form.
    // One process (no master): `Child::kill` on drop then leaves no orphaned worker.
    format!(
        "master_process off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n    access_log off;\n\
         \x20   client_body_temp_path {d}/tmp/body;\n    proxy_temp_path {d}/tmp/proxy;\n\
         \x20   fastcgi_temp_path {d}/tmp/fastcgi;\n    uwsgi_temp_path {d}/tmp/uwsgi;\n\
         \x20   scgi_temp_path {d}/tmp/scgi;\n\
         \x20   server {{\n        listen 127.0.0.1:{port} ssl http2;\n\
         \x20       ssl_certificate {cert};\n        ssl_certificate_key {key};\n\
         \x20       ssl_protocols TLSv1.2 TLSv1.3;\n\
         \x20       ssl_session_cache shared:volley:1m;\n\
         \x20       location / {{ return 200 \"{body}\"; }}\n    }}\n}}\n",
        cert = paths.cert.display(),
        key = paths.key.display(),
        body = BODY.escape_default(),
    )
}

/// Starts nginx serving on a free port, with TLS on the listener or (`tls == false`)
/// plain HTTP on it.
fn start(dir: &Path, paths: &certs::CertPaths, tls: bool) -> Option<(Nginx, SocketAddr)> {
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    for _attempt in 0..3 {
        let port = free_port();
        let conf = dir.join("nginx.conf");
        let mut text = config(dir, port, paths);
        if !tls {
            text = text.replace(" ssl http2;", ";");
        }
        std::fs::write(&conf, text).unwrap();
        let child = Command::new(NGINX)
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(&conf)
            .args(["-g", "daemon off;"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn nginx");
        let mut nginx = Nginx { child };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_exited)) = nginx.child.try_wait() {
                break; // e.g. the port was taken after all: try another
            }
            if TcpStream::connect(addr).is_ok() {
                return Some((nginx, addr));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
        eprintln!("nginx did not start on port {port}: {log}");
    }
    None
}

#[test]
fn nginx_tls12_tls13_alpn_and_resumption() {
    if !Path::new(NGINX).exists() {
        eprintln!("skipped: {NGINX} is not installed");
        return;
    }
    // Removed on drop, after the nginx using it (declared later).
    let dir = scratch("nginx");
    let paths = certs::write_local_set(&dir.path).unwrap();
    let (nginx, addr) = start(&dir.path, &paths, true).expect("nginx starts within three tries");

    let request = b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    for (policy, want) in [
        (VersionPolicy::Tls12, TlsVersion::Tls12),
        (VersionPolicy::Tls13, TlsVersion::Tls13),
    ] {
        // HTTP/2 is offered first and nginx picks it (the codec is elsewhere; only the
        // handshake is checked here).
        let h2 = ClientTls {
            versions: policy,
            ca_file: Some(paths.ca.clone()),
            alpn: vec!["h2".into(), "http/1.1".into()],
            ..ClientTls::default()
        };
        let out = exchange(h2.client_config().unwrap(), addr, "localhost", true, b"")
            .unwrap_or_else(|f| panic!("{policy} h2 handshake: {f}"));
        assert_eq!(out.version, Some(want));
        assert_eq!(out.alpn.as_deref(), Some(b"h2".as_slice()));

        // HTTP/1.1 requests through one config: full handshake, then resumed ones.
        let h1 = ClientTls {
            versions: policy,
            ca_file: Some(paths.ca.clone()),
            alpn: vec!["http/1.1".into()],
            resumption: true,
            ..ClientTls::default()
        };
        let config = h1.client_config().unwrap();
        for (i, host) in ["localhost", "localhost", "localhost"].iter().enumerate() {
            let out = exchange(config.clone(), addr, host, false, request)
                .unwrap_or_else(|f| panic!("{policy} request {i}: {f}"));
            assert_eq!(out.version, Some(want));
            assert_eq!(out.alpn.as_deref(), Some(b"http/1.1".as_slice()));
            let text = String::from_utf8_lossy(&out.response);
            assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
            assert!(text.ends_with(BODY), "{text}");
            assert_eq!(out.resumed, i > 0, "{policy} request {i}: resumed");
        }

        // Resumption off: every connection is a full handshake.
        let no_resume = ClientTls {
            resumption: false,
            ..h1
        };
        let config = no_resume.client_config().unwrap();
        for i in 0..2 {
            let out = exchange(config.clone(), addr, "localhost", false, request).unwrap();
            assert!(!out.resumed, "{policy} no-resumption request {i}");
        }
    }

    // By IP address (no SNI, IP SAN) and with the wrong trust anchor.
    let by_ip = ClientTls {
        ca_file: Some(paths.ca.clone()),
        ..ClientTls::default()
    };
    let out = exchange(
        by_ip.client_config().unwrap(),
        addr,
        "127.0.0.1",
        false,
        request,
    )
    .unwrap();
    assert!(out.response.starts_with(b"HTTP/1.1 200 OK"));

    let other_dir = dir.path.join("other");
    let other = certs::write_local_set(&other_dir).unwrap();
    let wrong_ca = ClientTls {
        ca_file: Some(other.ca),
        ..ClientTls::default()
    };
    let err = exchange(
        wrong_ca.client_config().unwrap(),
        addr,
        "localhost",
        false,
        request,
    )
    .unwrap_err();
    assert_eq!(err.name(), "unknown_issuer", "{err}");
    drop(nginx);
}

#[test]
fn nginx_plain_http_port_is_not_tls() {
    if !Path::new(NGINX).exists() {
        eprintln!("skipped: {NGINX} is not installed");
        return;
    }
    // The same nginx set-up without `ssl` on the listener: an https URL pointed at a
    // plain port, the mistake NotTls exists to name.
    let dir = scratch("nginx-plain");
    let paths = certs::write_local_set(&dir.path).unwrap();
    let (nginx, addr) = start(&dir.path, &paths, false).expect("nginx starts within three tries");
    let client = ClientTls {
        ca_file: Some(paths.ca.clone()),
        ..ClientTls::default()
    };
    let err = exchange(
        client.client_config().unwrap(),
        addr,
        "localhost",
        false,
        b"GET / HTTP/1.1\r\n\r\n",
    )
    .unwrap_err();
    assert_eq!(err.name(), "not_tls", "{err}");
    assert!(err.to_string().contains("HTTP/1.1 400"), "{err}");
    drop(nginx);
}
