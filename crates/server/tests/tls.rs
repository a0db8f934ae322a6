//! HTTPS from the built-in server, in-process, with volley-tls's rustls client: files
//! (cached and streamed) arrive intact over TLS, keep-alive carries many requests on one
//! session, request bodies pass through, ALPN is `http/1.1` only, and a plain-HTTP or
//! garbage client on the TLS port is closed cleanly.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;
use volley_server::{Server, ServerConfig, ServerHandle, ServerTls};
use volley_tls::{ClientTls, TlsSession, TlsStream};

struct Served {
    root: PathBuf,
    ca: PathBuf,
    addr: SocketAddr,
    handle: Option<ServerHandle>,
    /// Removes `root` once `drop` below has shut the server down (fields drop after it).
    _guard: tempfile::TempDir,
}

fn big() -> Vec<u8> {
    (0..600_000u32).map(|i| (i % 251) as u8).collect()
}

impl Served {
    fn start(tag: &str) -> Served {
        Served::start_with(tag, true)
    }

    fn start_with(tag: &str, http2: bool) -> Served {
        let guard = tempfile::Builder::new()
            .prefix(&format!("volley-server-tls-{tag}-"))
            .tempdir()
            .unwrap();
        let root = guard.path().to_path_buf();
        std::fs::create_dir_all(root.join("site")).unwrap();
        let certs = volley_server::self_signed_set(&root.join("certs")).unwrap();
        std::fs::write(root.join("site/700b.html"), "x".repeat(700)).unwrap();
        std::fs::write(root.join("site/big.bin"), big()).unwrap();
        let mut config = ServerConfig::new(root.join("site"));
        config.tls = Some(ServerTls::new(&certs.cert, &certs.key));
        config.http2 = http2;
        config.writable = true; // the session test ends with a PUT
        let server = Server::bind(config).unwrap();
        assert_eq!(server.scheme(), "https");
        let addr = server.local_addr();
        Served {
            root,
            ca: certs.ca,
            addr,
            handle: Some(server.spawn().unwrap()),
            _guard: guard,
        }
    }

    fn client(&self, alpn: &[&str]) -> TlsStream<TcpStream> {
        let options = ClientTls {
            ca_file: Some(self.ca.clone()),
            alpn: alpn.iter().map(|s| s.to_string()).collect(),
            resumption: false,
            ..ClientTls::default()
        };
        let session = TlsSession::new(options.client_config().unwrap(), "127.0.0.1").unwrap();
        let sock = TcpStream::connect(self.addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        TlsStream::new(session, sock)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown();
        }
    }
}

/// (status, headers lower-cased, body) of one response.
fn read_resp<R: Read>(r: &mut BufReader<R>) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status = line
        .split(' ')
        .nth(1)
        .unwrap_or_else(|| panic!("status line {line:?}"))
        .parse()
        .unwrap();
    let mut headers = Vec::new();
    let mut len = 0;
    loop {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        let l = l.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l.split_once(':').unwrap();
        let (n, v) = (n.to_ascii_lowercase(), v.trim().to_owned());
        if n == "content-length" {
            len = v.parse().unwrap();
        }
        headers.push((n, v));
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    (status, headers, body)
}

#[test]
fn files_over_tls_with_keep_alive_and_bodies() {
    let s = Served::start("files");
    let mut c = BufReader::new(s.client(&["http/1.1"]));
    // Many requests on one TLS session: cached file, streamed file, then a PUT.
    for round in 0..5 {
        c.get_mut()
            .write_all(b"GET /700b.html HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        let (status, _, body) = read_resp(&mut c);
        assert_eq!((status, body.len()), (200, 700), "round {round}");
        assert!(body.iter().all(|&b| b == b'x'));
        c.get_mut()
            .write_all(b"GET /big.bin HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        let (status, _, body) = read_resp(&mut c);
        assert_eq!(status, 200);
        assert!(body == big(), "streamed file differs (round {round})");
    }
    let put_body: Vec<u8> = (0..70_000u32).map(|i| (i % 97) as u8).collect();
    write!(
        c.get_mut(),
        "PUT /up.bin HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n",
        put_body.len()
    )
    .unwrap();
    c.get_mut().write_all(&put_body).unwrap();
    let (status, _, _) = read_resp(&mut c);
    assert_eq!(status, 201);
    assert_eq!(std::fs::read(s.root.join("site/up.bin")).unwrap(), put_body);
    let alpn = c.get_ref().session().negotiated_alpn().map(<[u8]>::to_vec);
    assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]));
    // Connection: close ends with close_notify: the client sees a clean end of stream.
    c.get_mut()
        .write_all(b"GET /700b.html HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let (status, headers, _) = read_resp(&mut c);
    assert_eq!(status, 200);
    assert!(headers.contains(&("connection".into(), "close".into())));
    let mut rest = Vec::new();
    assert_eq!(c.read_to_end(&mut rest).unwrap(), 0);
}

/// TCP segments with data this socket has received (`tcpi_data_segs_in`, Linux 4.6).
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

/// A small answer over TLS leaves in one write, so it arrives as one TCP segment: head
/// and body sealed in one record, sent with whatever the session had queued (a ticket,
/// close_notify). Sent piece by piece it took the client a wake-up per piece (keep-alive
/// TTFB p90 seven times plain HTTP's on loopback).
#[test]
fn a_small_answer_is_one_segment() {
    let s = Served::start("segments");
    let mut c = BufReader::new(s.client(&["http/1.1"]));
    for round in 0..6 {
        let last = round == 5;
        let before = data_segments_in(c.get_ref().get_ref());
        let close = if last { "Connection: close\r\n" } else { "" };
        write!(
            c.get_mut(),
            "GET /700b.html HTTP/1.1\r\nHost: localhost\r\n{close}\r\n"
        )
        .unwrap();
        let (status, _, body) = read_resp(&mut c);
        assert_eq!((status, body.len()), (200, 700), "round {round}");
        if last {
            // close_notify rode with the answer: the end of stream needs no more data.
            let mut rest = Vec::new();
            assert_eq!(c.read_to_end(&mut rest).unwrap(), 0);
        }
        // Round 0 carries the handshake's flights too.
        let segments = data_segments_in(c.get_ref().get_ref()) - before;
        if round > 0 {
            assert_eq!(
                segments, 1,
                "round {round}: the answer came in {segments} segments"
            );
        }
    }
}

#[test]
fn alpn_prefers_h2_and_still_serves_http11() {
    let s = Served::start("alpn-h2");
    for (offer, want) in [
        (&["h2"][..], Some(&b"h2"[..])),
        (&["http/1.1", "h2"][..], Some(&b"h2"[..])),
        (&["http/1.1"][..], Some(&b"http/1.1"[..])),
        (&[][..], None),
    ] {
        let mut c = s.client(offer);
        assert!(c.handshake().unwrap());
        assert_eq!(c.session().negotiated_alpn(), want, "{offer:?}");
    }
}

#[test]
fn h2_is_not_offered_when_off() {
    let s = Served::start_with("alpn", false);
    // A client that offers only h2 is refused (RFC 7301 no_application_protocol)...
    let mut only_h2 = s.client(&["h2"]);
    let err = only_h2.handshake().unwrap_err();
    assert!(
        err.to_string()
            .to_lowercase()
            .contains("application protocol")
            || err.to_string().to_lowercase().contains("alpn"),
        "{err}"
    );
    // ...and one offering both gets http/1.1; one offering none is served too.
    let mut both = s.client(&["h2", "http/1.1"]);
    assert!(both.handshake().unwrap());
    assert_eq!(both.session().negotiated_alpn(), Some(&b"http/1.1"[..]));
    let mut none = BufReader::new(s.client(&[]));
    none.get_mut()
        .write_all(b"GET /700b.html HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    assert_eq!(read_resp(&mut none).0, 200);
}

#[test]
fn plain_http_and_garbage_on_the_tls_port_are_closed_cleanly() {
    let s = Served::start("plain");
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"GET /700b.html HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut all = Vec::new();
    c.read_to_end(&mut all).unwrap();
    let text = String::from_utf8_lossy(&all);
    assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
    assert!(
        text.ends_with("\r\n\r\nThis port speaks HTTPS; plain HTTP was sent.\n"),
        "{text}"
    );

    // Bytes that are neither TLS nor HTTP: a TLS alert at most, then the close.
    let mut g = TcpStream::connect(s.addr).unwrap();
    g.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    g.write_all(&[0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08])
        .unwrap();
    let mut all = Vec::new();
    let ended = g.read_to_end(&mut all);
    assert!(
        ended.is_ok() || ended.is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "the connection was not closed"
    );
    assert!(all.len() < 64 && !all.starts_with(b"HTTP"), "{all:?}");

    // The server is unharmed.
    let mut ok = BufReader::new(s.client(&["http/1.1"]));
    ok.get_mut()
        .write_all(b"GET /700b.html HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    assert_eq!(read_resp(&mut ok).0, 200);
}

#[test]
fn http3_needs_tls_and_its_udp_port() {
    let tmp = tempfile::Builder::new()
        .prefix("volley-server-h3-bind-")
        .tempdir()
        .unwrap();
    let root = tmp.path().to_path_buf();
    std::fs::create_dir_all(root.join("site")).unwrap();
    let certs = volley_server::self_signed_set(&root.join("certs")).unwrap();
    // Without TLS: refused before anything is bound (QUIC always runs TLS 1.3).
    let mut config = ServerConfig::new(root.join("site"));
    config.http3 = true;
    assert!(matches!(
        Server::bind(config.clone()),
        Err(volley_server::ServerError::Config(_))
    ));
    // Another program holds the UDP port: said as such, not as a TCP failure.
    let holder = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    config.listen = holder.local_addr().unwrap();
    config.tls = Some(ServerTls::new(&certs.cert, &certs.key));
    match Server::bind(config.clone()) {
        Err(e @ volley_server::ServerError::BindUdp { .. }) => {
            assert!(e.to_string().contains("UDP"), "{e}")
        }
        other => panic!("expected BindUdp, got {other:?}"),
    }
    // On a free port both sockets bind, and the threads start and stop.
    drop(holder);
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.threads = 2;
    let server = Server::bind(config).unwrap();
    assert_eq!(server.scheme(), "https");
    server.spawn().unwrap().shutdown();
}
