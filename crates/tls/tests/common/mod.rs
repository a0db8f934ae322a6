//! A blocking test client that drives `TlsSession` over a std socket, the way the
//! engine's event loop will over mio, plus scratch directories.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use volley_tls::rustls::ClientConfig;
use volley_tls::{TlsFailure, TlsSession, TlsVersion};

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

/// A fresh scratch directory under the system temp dir.
pub fn scratch(tag: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "volley-tls-{tag}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
