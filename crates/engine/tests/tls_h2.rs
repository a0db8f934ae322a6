//! The engine over TLS and HTTP/2 against in-process servers on loopback: a rustls
//! server (volley-tls certificates) for TLS 1.2/1.3, resumption and every certificate
//! failure; plain HTTP on an https target; ALPN mismatch; a fake h2 server that sends
//! garbage after the preface. Each bad case must end as one counted error kind, with
//! no panic and no hang (every server and run is bounded in time).

use crate::common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use volley_engine::{run_with, ErrorKind, HttpVersion, Live, RunOutcome, TlsTarget, Wire};
use volley_tls::certs::{self, Authority, Issued};
use volley_tls::rustls::{ServerConfig, ServerConnection, StreamOwned};
use volley_tls::{ClientTls, ServerTls, VersionPolicy};

/// How each accepted connection is served.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// TLS, HTTP/1.1 keep-alive, 200 "ok" per request.
    TlsOk,
    /// Plain HTTP/1.1 (a server without TLS on an https URL) that answers the
    /// ClientHello with 400.
    Plain,
    /// Reads the h2 preface, then sends bytes that are no valid frame.
    H2Garbage,
}

/// A loopback server serving each connection in `mode` (common's bounded [`Server`]).
struct TestServer;

impl TestServer {
    fn start(mode: Mode, config: Option<Arc<ServerConfig>>) -> Server {
        Server::start_with(move |s| serve(mode, config.clone(), s))
    }
}

fn serve(mode: Mode, config: Option<Arc<ServerConfig>>, mut s: TcpStream) {
    match mode {
        Mode::TlsOk => {
            let Some(config) = config else { return };
            let Ok(conn) = ServerConnection::new(config) else {
                return;
            };
            let mut tls = StreamOwned::new(conn, s);
            http1_ok(&mut tls);
        }
        Mode::Plain => {
            // As nginx or Apache do with a ClientHello: 400 and close.
            let mut first = [0u8; 1024];
            if matches!(s.read(&mut first), Ok(n) if n > 0 && !first[0].is_ascii_alphabetic()) {
                let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n");
            }
        }
        Mode::H2Garbage => {
            let mut preface = [0u8; 24];
            if s.read_exact(&mut preface).is_ok() {
                // A frame header claiming a 16 MiB HEADERS on stream 0: a protocol
                // error at once, whatever the client's limits.
                let _ = s.write_all(&[0xff, 0xff, 0xff, 0x01, 0x00, 0, 0, 0, 0, 1, 2, 3]);
                let mut rest = [0u8; 1024];
                while matches!(s.read(&mut rest), Ok(n) if n > 0) {}
            }
        }
    }
}

/// Keep-alive HTTP/1.1: 200 "ok" to each request head until EOF or error.
fn http1_ok<S: Read + Write>(s: &mut S) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
            if s.write_all(answer).and_then(|()| s.flush()).is_err() {
                return;
            }
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Certificates on disk for one test, removed on drop.
struct Certs {
    _dir: tempfile::TempDir,
    ca_file: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl Certs {
    fn new(tag: &str, ca: &Authority, server: &Issued) -> Certs {
        let dir = tempfile::Builder::new()
            .prefix(&format!("volley-engine-tls-{tag}-"))
            .tempdir()
            .unwrap();
        let ca_file = dir.path().join("ca.pem");
        std::fs::write(&ca_file, ca.cert_pem()).unwrap();
        let (cert, key) = server.write(dir.path(), "server").unwrap();
        Certs {
            _dir: dir,
            ca_file,
            cert,
            key,
        }
    }

    fn valid(tag: &str) -> Certs {
        let ca = Authority::new().unwrap();
        let server = ca.server(&certs::LOCAL_NAMES).unwrap();
        Certs::new(tag, &ca, &server)
    }

    fn server(&self, versions: VersionPolicy, alpn: &[&str]) -> Arc<ServerConfig> {
        ServerTls {
            versions,
            alpn: alpn.iter().map(|s| s.to_string()).collect(),
            ..ServerTls::new(&self.cert, &self.key)
        }
        .server_config()
        .unwrap()
    }

    fn client(&self) -> ClientTls {
        ClientTls {
            ca_file: Some(self.ca_file.clone()),
            ..ClientTls::default()
        }
    }
}

fn tls_wire(client: ClientTls, http: HttpVersion) -> Wire {
    Wire {
        tls: Some(TlsTarget {
            client,
            server_name: "localhost".into(),
        }),
        http,
        ..Wire::default()
    }
}

fn go(addr: SocketAddr, c: usize, n: u64, keep_alive: bool, wire: &Wire) -> RunOutcome<Collect> {
    let mut cfg = config(addr, 1, c, n);
    cfg.keep_alive = keep_alive;
    cfg.stop.duration = Some(Duration::from_secs(10));
    run_with(&cfg, wire, |_| Collect::default(), &Live::new()).expect("run starts")
}

#[test]
fn tls13_keep_alive_charges_the_handshake_to_the_first_request_only() {
    let certs = Certs::valid("ka13");
    let server = TestServer::start(Mode::TlsOk, Some(certs.server(VersionPolicy::Tls13, &[])));
    let client = ClientTls {
        versions: VersionPolicy::Tls13,
        ..certs.client()
    };
    let out = go(
        server.addr,
        2,
        40,
        true,
        &tls_wire(client, HttpVersion::Http1),
    );
    let samples = all_samples(&out.sinks);
    assert_eq!(samples.len(), 40);
    assert_eq!(count(&samples, None), 40, "{:?}", out.tls_failures);
    let with_handshake: Vec<_> = samples.iter().filter(|s| s.tls_handshake_ns > 0).collect();
    assert_eq!(with_handshake.len(), 2, "one handshake per connection");
    for s in &with_handshake {
        assert!(s.connect_ns >= s.tls_handshake_ns);
    }
    assert_eq!(server.accepted.load(Ordering::Relaxed), 2);
    assert_eq!(out.tls_full_handshakes, 2);
    assert!(out.tls_failures.is_empty());
}

#[test]
fn tls12_connection_per_request_resumes_only_when_asked() {
    let certs = Certs::valid("resume12");
    let config = certs.server(VersionPolicy::Tls12, &[]);
    for (resumption, full) in [(true, 1), (false, 8)] {
        let server = TestServer::start(Mode::TlsOk, Some(config.clone()));
        let client = ClientTls {
            versions: VersionPolicy::Tls12,
            resumption,
            ..certs.client()
        };
        let out = go(
            server.addr,
            1,
            8,
            false,
            &tls_wire(client, HttpVersion::Http1),
        );
        let samples = all_samples(&out.sinks);
        assert_eq!(count(&samples, None), 8, "{:?}", out.tls_failures);
        assert_eq!(server.accepted.load(Ordering::Relaxed), 8);
        assert!(samples.iter().all(|s| s.tls_handshake_ns > 0));
        assert_eq!(
            out.tls_full_handshakes, full,
            "resumption {resumption}: full handshakes"
        );
    }
}

/// TCP segments with data `sock` has received (`tcpi_data_segs_in`, Linux 4.6).
fn data_segments_in(sock: &TcpStream) -> u32 {
    use std::os::fd::AsRawFd;
    // SAFETY: `info` is a plain C struct the kernel fills up to `len` bytes.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0, "TCP_INFO: {}", std::io::Error::last_os_error());
    info.tcpi_data_segs_in
}

/// The client's Finished leaves with the first request, in one segment: a TLS 1.3
/// connection reaches the server as two (ClientHello; Finished and request), full or
/// resumed. The Finished alone cost the server a wake-up per connection.
#[test]
fn tls13_finished_rides_with_the_first_request() {
    let certs = Certs::valid("finished");
    let config = certs.server(VersionPolicy::Tls13, &[]);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let server = {
        let seen = seen.clone();
        Server::start_with(move |s: TcpStream| {
            let Ok(conn) = ServerConnection::new(config.clone()) else {
                return;
            };
            let mut tls = StreamOwned::new(conn, s);
            let mut head = Vec::new();
            let mut chunk = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match tls.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => head.extend_from_slice(&chunk[..n]),
                }
            }
            seen.lock().unwrap().push(data_segments_in(&tls.sock));
            let _ = tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            let _ = tls.flush();
        })
    };
    let client = ClientTls {
        versions: VersionPolicy::Tls13,
        ..certs.client()
    };
    let out = go(
        server.addr,
        1,
        4,
        false,
        &tls_wire(client, HttpVersion::Http1),
    );
    let samples = all_samples(&out.sinks);
    assert_eq!(count(&samples, None), 4, "{:?}", out.tls_failures);
    assert_eq!(out.tls_full_handshakes, 1, "the others resumed");
    assert_eq!(
        *seen.lock().unwrap(),
        [2, 2, 2, 2],
        "segments per connection"
    );
}

/// Runs 3 requests, one connection each, and returns the failure classes counted.
fn failing_run(server: &Server, client: ClientTls, http: HttpVersion) -> RunOutcome<Collect> {
    let out = go(server.addr, 1, 3, false, &tls_wire(client, http));
    let samples = all_samples(&out.sinks);
    assert_eq!(samples.len(), 3);
    assert_eq!(count(&samples, Some(ErrorKind::Tls)), 3, "{samples:?}");
    out
}

#[test]
fn bad_certificates_are_tls_errors_by_class() {
    let ca = Authority::new().unwrap();
    let cases: [(&str, Issued, &str); 3] = [
        (
            "expired",
            ca.expired_server(&certs::LOCAL_NAMES).unwrap(),
            "cert_expired",
        ),
        (
            "self",
            certs::self_signed_server(&certs::LOCAL_NAMES).unwrap(),
            "self_signed",
        ),
        ("wronghost", ca.wrong_host_server().unwrap(), "wrong_host"),
    ];
    for (tag, issued, class) in cases {
        let certs = Certs::new(tag, &ca, &issued);
        let server = TestServer::start(Mode::TlsOk, Some(certs.server(VersionPolicy::Any, &[])));
        let out = failing_run(&server, certs.client(), HttpVersion::Http1);
        assert_eq!(
            out.tls_failures.get(class),
            Some(&3),
            "{tag}: {:?}",
            out.tls_failures
        );

        // The same server is fine with --insecure.
        let insecure = ClientTls {
            insecure: true,
            ..certs.client()
        };
        let ok = go(
            server.addr,
            1,
            2,
            true,
            &tls_wire(insecure, HttpVersion::Http1),
        );
        assert_eq!(count(&all_samples(&ok.sinks), None), 2, "{tag} insecure");
    }
}

#[test]
fn plain_http_on_an_https_target_is_not_tls() {
    let certs = Certs::valid("plain");
    let server = TestServer::start(Mode::Plain, None);
    let out = failing_run(&server, certs.client(), HttpVersion::Http1);
    assert_eq!(
        out.tls_failures.get("not_tls"),
        Some(&3),
        "{:?}",
        out.tls_failures
    );
}

#[test]
fn h2_against_an_http1_only_server_is_an_alpn_mismatch() {
    let certs = Certs::valid("alpn");
    let server = TestServer::start(
        Mode::TlsOk,
        Some(certs.server(VersionPolicy::Any, &["http/1.1"])),
    );
    let out = failing_run(&server, certs.client(), HttpVersion::H2 { streams: 4 });
    assert_eq!(
        out.tls_failures.get("alpn_mismatch"),
        Some(&3),
        "{:?}",
        out.tls_failures
    );
}

#[test]
fn broken_h2_frames_are_malformed_and_counted() {
    let server = TestServer::start(Mode::H2Garbage, None);
    let wire = Wire {
        tls: None,
        http: HttpVersion::H2 { streams: 4 },
        ..Wire::default()
    };
    let out = go(server.addr, 1, 6, true, &wire);
    let samples = all_samples(&out.sinks);
    assert_eq!(samples.len(), 6, "every request accounted for");
    assert_eq!(
        count(&samples, Some(ErrorKind::Malformed)),
        6,
        "{samples:?}"
    );
    assert!(out.h2.connection_errors >= 1);
}
