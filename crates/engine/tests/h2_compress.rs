//! Body checks and stream cancel over HTTP/2: `--compressed`, `--expect-size` and
//! `--expect-sha256` through the HTTP/2 worker, against a tiny in-test h2c server
//! written with the codec's frame encoder (every bad answer on demand, and a stream it
//! never answers), and against real nginx over TLS+h2 and h2c with gzip and Brotli.
//! Every server and run is bounded in time; nginx is skipped, with a message, where
//! it is not installed.

use crate::common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::*;
use sha2::{Digest, Sha256};
use volley_engine::{
    run_with, BodySpec, Coding, ErrorKind, HttpVersion, ListSourceFactory, Live, Order,
    RequestTemplate, RunOutcome, TlsTarget, Wire,
};
use volley_h2::frame::{self, flag, kind, FrameHeader, HEADER_LEN, PREFACE};
use volley_h2::hpack::encode_field;
use volley_tls::{certs, ClientTls};

/// How the in-test server answers every stream.
#[derive(Clone)]
struct Reply {
    /// `content-encoding` to send, if any.
    content_encoding: Option<&'static str>,
    /// The body as sent (already coded).
    body: Arc<Vec<u8>>,
    /// A stream id the server never answers (it only notes a reset for it).
    never_answer: Option<u32>,
}

/// A prior-knowledge h2c server on a free loopback port, one thread per connection;
/// stops accepting after 20 s or when dropped. It records every RST_STREAM it gets.
struct H2Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    resets: Arc<Mutex<Vec<(u32, u32)>>>,
    thread: Option<JoinHandle<()>>,
}

impl H2Server {
    fn start(reply: Reply) -> H2Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let resets = Arc::new(Mutex::new(Vec::new()));
        let (stop2, resets2) = (stop.clone(), resets.clone());
        let thread = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(20);
            while !stop2.load(Ordering::Relaxed) && Instant::now() < deadline {
                match listener.accept() {
                    Ok((s, _)) => {
                        s.set_nonblocking(false).unwrap();
                        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                        let (reply, resets) = (reply.clone(), resets2.clone());
                        std::thread::spawn(move || serve_h2(s, &reply, &resets));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        H2Server {
            addr,
            stop,
            resets,
            thread: Some(thread),
        }
    }
}

impl Drop for H2Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answers each request stream with the reply's head and body (DATA frames of at
/// most 16 KiB, the default frame size). The client's request blocks are not
/// decoded: the reply is the same for every stream.
fn serve_h2(mut s: TcpStream, reply: &Reply, resets: &Mutex<Vec<(u32, u32)>>) {
    let mut preface = [0u8; 24];
    if s.read_exact(&mut preface).is_err() || &preface != PREFACE {
        return;
    }
    let mut out = Vec::new();
    frame::write_settings(&mut out, &[]);
    if s.write_all(&out).is_err() {
        return;
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    // Bounded: at most 100 000 frames per connection.
    for _ in 0..100_000 {
        let Some(h) = FrameHeader::parse(&buf) else {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let total = HEADER_LEN + h.len as usize;
        if buf.len() < total {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        }
        let payload = buf[HEADER_LEN..total].to_vec();
        buf.drain(..total);
        out.clear();
        match h.kind {
            kind::SETTINGS if !h.has(flag::ACK) => {
                frame::write_header(&mut out, 0, kind::SETTINGS, flag::ACK, 0);
            }
            kind::RST_STREAM if payload.len() == 4 => {
                let code = u32::from_be_bytes(payload[..4].try_into().unwrap());
                resets.lock().unwrap().push((h.stream, code));
            }
            kind::HEADERS if reply.never_answer != Some(h.stream) => {
                let mut block = Vec::new();
                encode_field(b":status", b"200", &mut block);
                if let Some(ce) = reply.content_encoding {
                    encode_field(b"content-encoding", ce.as_bytes(), &mut block);
                }
                let len = reply.body.len().to_string();
                encode_field(b"content-length", len.as_bytes(), &mut block);
                let end = if reply.body.is_empty() {
                    flag::END_STREAM
                } else {
                    0
                };
                frame::write_header(
                    &mut out,
                    block.len(),
                    kind::HEADERS,
                    flag::END_HEADERS | end,
                    h.stream,
                );
                out.extend_from_slice(&block);
                let pieces: Vec<&[u8]> = reply.body.chunks(16 * 1024).collect();
                for (i, piece) in pieces.iter().enumerate() {
                    let f = if i + 1 == pieces.len() {
                        flag::END_STREAM
                    } else {
                        0
                    };
                    frame::write_header(&mut out, piece.len(), kind::DATA, f, h.stream);
                    out.extend_from_slice(piece);
                }
            }
            _ => {}
        }
        if !out.is_empty() && s.write_all(&out).is_err() {
            return;
        }
    }
}

fn text() -> Vec<u8> {
    (0..3000u32)
        .flat_map(|i| format!("line {i} of an h2 body\n").into_bytes())
        .collect()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

fn h2c(body: BodySpec) -> Wire {
    Wire {
        tls: None,
        http: HttpVersion::H2 { streams: 4 },
        body,
        ..Wire::default()
    }
}

fn gzip_spec() -> BodySpec {
    BodySpec {
        coding: Some(Coding::Gzip),
        ..BodySpec::default()
    }
}

/// `n` GETs with `Accept-Encoding: gzip` on one connection with 4 streams.
fn run_h2(addr: SocketAddr, n: u64, wire: &Wire) -> RunOutcome<Collect> {
    let mut cfg = config(addr, 1, 1, n);
    let req = RequestTemplate::new("GET", "/", &addr.to_string())
        .header("Accept-Encoding", "gzip")
        .build(0)
        .unwrap();
    cfg.source = Arc::new(ListSourceFactory::new(vec![req], Order::Same).unwrap());
    run_with(&cfg, wire, |_| Collect::default(), &Live::new()).expect("run starts")
}

fn server(content_encoding: Option<&'static str>, body: Vec<u8>) -> H2Server {
    H2Server::start(Reply {
        content_encoding,
        body: Arc::new(body),
        never_answer: None,
    })
}

#[test]
fn gzip_over_h2_is_decoded_counted_and_validated() {
    let plain = text();
    let coded = gzip(&plain);
    assert!(coded.len() < plain.len() && plain.len() > 16 * 1024);
    let srv = server(Some("gzip"), coded.clone());
    let spec = BodySpec {
        expect_size: Some(plain.len() as u64),
        expect_sha256: Some(sha256(&plain)),
        ..gzip_spec()
    };
    let out = run_h2(srv.addr, 40, &h2c(spec));
    let samples = all_samples(&out.sinks);
    assert_eq!(samples.len(), 40);
    assert_eq!(count(&samples, None), 40, "{:?}", samples[0]);
    for s in &samples {
        assert_eq!(s.body_bytes, plain.len() as u64, "decoded");
        assert_eq!(s.wire_body_bytes, coded.len() as u64, "as sent");
    }
    assert_eq!(out.connections_opened, 1);
}

#[test]
fn bad_answers_over_h2_are_one_error_kind_each() {
    let plain = text();
    let coded = gzip(&plain);
    let mut corrupt = coded.clone();
    corrupt[coded.len() / 2] ^= 0xff;
    let cases: Vec<(&str, H2Server, BodySpec, ErrorKind)> = vec![
        (
            "server ignores Accept-Encoding",
            server(None, plain.clone()),
            gzip_spec(),
            ErrorKind::Encoding,
        ),
        (
            "br sent when gzip was asked",
            server(Some("br"), b"\x40\x00\x10hello\x03".to_vec()),
            gzip_spec(),
            ErrorKind::Encoding,
        ),
        (
            "corrupt gzip body",
            server(Some("gzip"), corrupt),
            gzip_spec(),
            ErrorKind::Encoding,
        ),
        (
            "decoded size differs",
            server(Some("gzip"), coded.clone()),
            BodySpec {
                expect_size: Some(plain.len() as u64 + 1),
                ..gzip_spec()
            },
            ErrorKind::Validation,
        ),
        (
            "decoded hash differs",
            server(Some("gzip"), coded.clone()),
            BodySpec {
                expect_sha256: Some(sha256(b"something else")),
                ..gzip_spec()
            },
            ErrorKind::Validation,
        ),
    ];
    for (what, srv, spec, kind) in cases {
        let out = run_h2(srv.addr, 12, &h2c(spec));
        let samples = all_samples(&out.sinks);
        assert_eq!(samples.len(), 12, "{what}");
        assert_eq!(count(&samples, Some(kind)), 12, "{what}: {:?}", samples[0]);
        // The stream was read to its end: the connection stays usable.
        assert_eq!(out.connections_opened, 1, "{what}");
        assert_eq!(out.h2.connection_errors, 0, "{what}");
    }
}

#[test]
fn a_stream_the_server_never_answers_is_cancelled_and_the_connection_kept() {
    // Stream 5 is the third request of the first batch of four.
    let srv = H2Server::start(Reply {
        content_encoding: None,
        body: Arc::new(b"ok".to_vec()),
        never_answer: Some(5),
    });
    let mut cfg = config(srv.addr, 1, 1, 30);
    cfg.timeout = Duration::from_millis(300);
    let wire = Wire {
        tls: None,
        http: HttpVersion::H2 { streams: 4 },
        ..Wire::default()
    };
    let out = run_with(&cfg, &wire, |_| Collect::default(), &Live::new()).unwrap();
    let samples = all_samples(&out.sinks);
    assert_eq!(samples.len(), 30);
    assert_eq!(count(&samples, Some(ErrorKind::Timeout)), 1, "{:?}", out.h2);
    assert_eq!(count(&samples, None), 29);
    let late = samples
        .iter()
        .find(|s| s.error == Some(ErrorKind::Timeout))
        .unwrap();
    // Censored: recorded at (at least) the timeout after it was sent.
    assert!(late.done_ns - late.sent_ns >= 300_000_000);
    assert_eq!(out.h2.cancelled_streams, 1);
    assert_eq!(out.h2.connection_errors, 0);
    assert_eq!(out.connections_opened, 1, "the connection kept serving");
    // The server got RST_STREAM(CANCEL = 0x8) for that stream, and for no other.
    let deadline = Instant::now() + Duration::from_secs(2);
    while srv.resets.lock().unwrap().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(*srv.resets.lock().unwrap(), [(5, 0x8)]);
}

// ----- real nginx -----

const BROTLI_MODULE: &str = "/usr/lib/nginx/modules/ngx_http_brotli_filter_module.so";

/// nginx with gzip (and Brotli when the module is installed) on `/`, and a `/plain/`
/// location that never compresses (a server that ignores Accept-Encoding).
fn start_nginx(body: &[u8]) -> Option<(Nginx, certs::CertPaths, bool)> {
    if !Path::new(NGINX).exists() {
        eprintln!("skipping: {NGINX} not installed");
        return None;
    }
    let brotli = Path::new(BROTLI_MODULE).exists();
    if !brotli {
        eprintln!("brotli part skipped: {BROTLI_MODULE} missing (libnginx-mod-http-brotli-filter)");
    }
    let dir = nginx_dir("volley-h2-compress");
    std::fs::create_dir_all(dir.join("www/plain")).unwrap();
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    std::fs::write(dir.join("www/index.html"), body).unwrap();
    std::fs::write(dir.join("www/plain/index.html"), body).unwrap();
    let paths = certs::write_local_set(&dir.join("certs")).unwrap();
    let (tls_port, h2c_port) = (free_port(), free_port());
    let d = dir.display();
    let (load, br) = if brotli {
        (
            format!("load_module {BROTLI_MODULE};\n"),
            "brotli on;\n brotli_comp_level 5;\n brotli_types text/html;\n",
        )
    } else {
        (String::new(), "")
    };
    let site = format!(
        "root {d}/www;\n  location /plain/ {{ gzip off;{} }}\n",
        if brotli { " brotli off;" } else { "" }
    );
    let conf = format!(
        "{load}master_process off;\ndaemon off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
         error_log {d}/error.log warn;\nevents {{ worker_connections 256; }}\n\
         http {{\n access_log off;\n client_body_temp_path {d}/tmp/body;\n\
         proxy_temp_path {d}/tmp/proxy;\n fastcgi_temp_path {d}/tmp/fastcgi;\n\
         uwsgi_temp_path {d}/tmp/uwsgi;\n scgi_temp_path {d}/tmp/scgi;\n\
         gzip on;\n gzip_min_length 0;\n gzip_types text/html;\n {br}\
         server {{\n  listen 127.0.0.1:{tls_port} ssl http2;\n  {site}\
           ssl_certificate {cert};\n  ssl_certificate_key {key};\n }}\n\
         server {{\n  listen 127.0.0.1:{h2c_port} http2;\n  {site} }}\n}}\n",
        cert = paths.cert.display(),
        key = paths.key.display(),
    );
    let nginx = spawn_nginx(dir, &conf, tls_port, h2c_port);
    Some((nginx, paths, brotli))
}

fn nginx_run(addr: SocketAddr, path: &str, coding: Coding, wire: &Wire) -> RunOutcome<Collect> {
    let mut cfg = config(addr, 1, 2, 60);
    let req = RequestTemplate::new("GET", path, "localhost")
        .header("Accept-Encoding", coding.token())
        .build(0)
        .unwrap();
    cfg.source = Arc::new(ListSourceFactory::new(vec![req], Order::Same).unwrap());
    run_with(&cfg, wire, |_| Collect::default(), &Live::new()).expect("run starts")
}

#[test]
fn nginx_over_tls_h2_and_h2c_compresses_and_volley_decodes() {
    let plain = text();
    let Some((nginx, paths, brotli)) = start_nginx(&plain) else {
        return;
    };
    let spec = |coding| BodySpec {
        coding: Some(coding),
        expect_size: Some(plain.len() as u64),
        expect_sha256: Some(sha256(&plain)),
    };
    let tls = |coding| Wire {
        tls: Some(TlsTarget {
            client: ClientTls {
                ca_file: Some(paths.ca.clone()),
                ..ClientTls::default()
            },
            server_name: "localhost".into(),
        }),
        http: HttpVersion::H2 { streams: 8 },
        body: spec(coding),
        ..Wire::default()
    };
    let tls_addr: SocketAddr = format!("127.0.0.1:{}", nginx.tls_port).parse().unwrap();
    let h2c_addr: SocketAddr = format!("127.0.0.1:{}", nginx.h2c_port).parse().unwrap();
    let mut codings = vec![Coding::Gzip];
    if brotli {
        codings.push(Coding::Br);
    }
    for coding in codings {
        for (what, addr, wire) in [
            ("tls+h2", tls_addr, tls(coding)),
            ("h2c", h2c_addr, h2c(spec(coding))),
        ] {
            let out = nginx_run(addr, "/index.html", coding, &wire);
            let samples = all_samples(&out.sinks);
            assert_eq!(samples.len(), 60, "{what} {coding:?}");
            assert_eq!(
                count(&samples, None),
                60,
                "{what} {coding:?}: {:?} {:?}",
                samples[0],
                out.h2
            );
            for s in &samples {
                assert_eq!(s.body_bytes, plain.len() as u64);
                assert!(
                    s.wire_body_bytes > 0 && s.wire_body_bytes < plain.len() as u64 / 3,
                    "{what} {coding:?}: {} coded bytes",
                    s.wire_body_bytes
                );
            }
        }
        // A location that does not compress: every answer is an encoding error.
        let out = nginx_run(tls_addr, "/plain/index.html", coding, &tls(coding));
        let samples = all_samples(&out.sinks);
        assert_eq!(count(&samples, Some(ErrorKind::Encoding)), 60, "{coding:?}");
    }
}
