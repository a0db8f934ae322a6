//! Shared by the integration tests: an in-process rustls server on 127.0.0.1:0, a
//! certificate fixture, and a blocking client that drives `TlsSession` over a std
//! socket the way the engine's event loop will over mio.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use volley_tls::certs::{self, Authority, Issued};
use volley_tls::rustls::{ClientConfig, ServerConfig, ServerConnection, StreamOwned};
use volley_tls::{ClientTls, ServerTls, TlsFailure, TlsSession, TlsVersion};

/// Socket timeout: a hung peer fails the test instead of hanging it.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Upper bound on read rounds per exchange (each round is one socket read).
const MAX_ROUNDS: usize = 10_000;

/// What one exchange saw.
#[derive(Debug)]
pub struct Outcome {
    pub version: Option<TlsVersion>,
    pub alpn: Option<Vec<u8>>,
    pub resumed: bool,
    pub handshake_completions: usize,
    pub handshake_stamped: bool,
    pub response: Vec<u8>,
}

/// Connects, sends `request` (queued before the handshake, as the engine will), and
/// reads plaintext until the server closes. `request` empty: stop after the handshake.
pub fn exchange(
    config: Arc<ClientConfig>,
    addr: SocketAddr,
    host: &str,
    require_alpn: bool,
    request: &[u8],
) -> Result<Outcome, TlsFailure> {
    let mut tcp = TcpStream::connect(addr).expect("connect to the test server");
    tcp.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    tcp.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    tcp.set_nodelay(true).unwrap();
    let mut session = TlsSession::new(config, host)
        .expect("valid host")
        .require_alpn(require_alpn);
    if !request.is_empty() {
        assert_eq!(session.write_plain(request).unwrap(), request.len());
    }
    let mut handshake_completions = 0;
    let mut response = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut plain = vec![0u8; 4096];
    let fail = |session: &mut TlsSession, tcp: &mut TcpStream, f: TlsFailure| {
        // Tell the server why, as a real client would; it may already be gone.
        let _ = session.write_tls(tcp);
        Err(f)
    };
    for _ in 0..MAX_ROUNDS {
        session.write_tls(&mut tcp).expect("socket write");
        if request.is_empty() && !session.is_handshaking() {
            break;
        }
        match tcp.read(&mut buf) {
            Ok(0) => {
                if let Err(f) = session.feed_eof() {
                    return fail(&mut session, &mut tcp, f);
                }
            }
            Ok(n) => match session.feed_tls(&buf[..n]) {
                Ok(p) => handshake_completions += usize::from(p.handshake_completed),
                Err(f) => return fail(&mut session, &mut tcp, f),
            },
            Err(e) => return Err(TlsFailure::Other(format!("socket read: {e}"))),
        }
        let mut closed = false;
        loop {
            match session.read_plain(&mut plain) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => response.extend_from_slice(&plain[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("read_plain after a clean feed: {e}"),
            }
        }
        if closed {
            break;
        }
    }
    session.close();
    let _ = session.write_tls(&mut tcp);
    let _ = tcp.flush();
    Ok(Outcome {
        version: session.protocol_version(),
        alpn: session.negotiated_alpn().map(<[u8]>::to_vec),
        resumed: session.resumed(),
        handshake_completions,
        handshake_stamped: session.handshake_done_at().is_some(),
        response,
    })
}

/// A scratch directory under the system temp dir (its path, and the guard that removes
/// it when dropped: when the test ends, and also when it panics).
pub struct Scratch {
    pub path: PathBuf,
    _guard: tempfile::TempDir,
}

/// A fresh scratch directory `volley-tls-TAG-XXXXXX`. Mode 0755 like a directory made
/// with `create_dir`: an nginx started as root may read it from a worker of another user.
pub fn scratch(tag: &str) -> Scratch {
    use std::os::unix::fs::PermissionsExt;
    let guard = tempfile::Builder::new()
        .prefix(&format!("volley-tls-{tag}-"))
        .tempdir()
        .unwrap();
    std::fs::set_permissions(guard.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    Scratch {
        path: guard.path().to_path_buf(),
        _guard: guard,
    }
}

pub const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
/// Largest request head the test server reads.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// A server certificate set on disk plus the CA file a client trusts.
pub struct Fixture {
    pub dir: PathBuf,
    pub ca_file: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Removes `dir` when the fixture drops.
    _scratch: Scratch,
}

impl Fixture {
    pub fn new(tag: &str, ca: &Authority, server: &Issued) -> Fixture {
        let scratch = scratch(tag);
        let dir = scratch.path.clone();
        let ca_file = dir.join("ca.pem");
        std::fs::write(&ca_file, ca.cert_pem()).unwrap();
        let (cert, key) = server.write(&dir, "server").unwrap();
        Fixture {
            dir,
            ca_file,
            cert,
            key,
            _scratch: scratch,
        }
    }

    pub fn valid(tag: &str) -> Fixture {
        let ca = Authority::new().unwrap();
        let server = ca.server(&certs::LOCAL_NAMES).unwrap();
        Fixture::new(tag, &ca, &server)
    }

    pub fn server(&self) -> ServerTls {
        ServerTls::new(&self.cert, &self.key)
    }

    pub fn client(&self) -> ClientTls {
        ClientTls {
            ca_file: Some(self.ca_file.clone()),
            ..ClientTls::default()
        }
    }
}

/// Serves `connections` connections, one after another: reads a request head, answers
/// with a body naming the negotiated version and ALPN, closes with close_notify.
/// Returns each connection's server-side error, if any.
pub fn serve(
    config: Arc<ServerConfig>,
    connections: usize,
) -> (SocketAddr, JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        let mut errors = Vec::new();
        for _ in 0..connections {
            let (tcp, _) = listener.accept().unwrap();
            tcp.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
            tcp.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
            let conn = ServerConnection::new(config.clone()).unwrap();
            let mut stream = StreamOwned::new(conn, tcp);
            if let Err(e) = answer(&mut stream) {
                errors.push(e.to_string());
            }
        }
        errors
    });
    (addr, handle)
}

fn answer(stream: &mut StreamOwned<ServerConnection, std::net::TcpStream>) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            // Handshake-only clients close after the handshake.
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_HEAD_BYTES {
            return Err(std::io::Error::other("request head too large"));
        }
    }
    let version = match stream.conn.protocol_version() {
        Some(v) => format!("{v:?}"),
        None => "none".into(),
    };
    let alpn = stream
        .conn
        .alpn_protocol()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .unwrap_or_else(|| "none".into());
    let body = if head.starts_with(b"GET /big") {
        // Larger than rustls's own plaintext buffer, so the session's drain matters.
        vec![b'x'; 300 * 1024]
    } else {
        format!("{version} {alpn}").into_bytes()
    };
    let mut response = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    response.extend_from_slice(&body);
    stream.write_all(&response)?;
    stream.conn.send_close_notify();
    stream.flush()
}

pub fn body(response: &[u8]) -> &[u8] {
    let at = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    &response[at + 4..]
}
