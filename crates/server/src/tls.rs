//! HTTPS for the event loop: a rustls `ServerConnection` per connection, driven
//! sans-IO from the worker (socket bytes in with `read_tls`, plaintext out through
//! `reader`; plaintext in through `writer`, records out with `write_tls`).
//!
//! Place in the flow: the transport under [`crate::worker`]. The worker's buffers,
//! parser and responses are the same for both transports; only the socket reads and
//! writes go through here when the listener is TLS. ALPN offers `h2` then `http/1.1`
//! (only `http/1.1` when HTTP/2 is off); the worker reads the outcome with
//! [`TlsConn::alpn_h2`] and picks the framing.

use mio::net::TcpStream;
use std::io::{self, Read, Write};

/// Longest stretch of a plain-HTTP client's bytes drained before answering it, so the
/// close that follows is a FIN rather than a reset that could destroy the answer.
const PLAIN_DRAIN_BYTES: usize = 64 << 10;

/// What a TLS port says to a client that speaks plain HTTP to it (as nginx does).
const PLAIN_TO_TLS: &[u8] = b"HTTP/1.1 400 Bad Request\r\nServer: volley\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 45\r\nConnection: close\r\n\r\nThis port speaks HTTPS; plain HTTP was sent.\n";

/// One connection's TLS state.
pub(crate) struct TlsConn {
    conn: volley_tls::rustls::ServerConnection,
    /// The first byte has not been looked at yet (plain-HTTP detection).
    fresh: bool,
}

impl TlsConn {
    pub(crate) fn new(conn: volley_tls::rustls::ServerConnection) -> TlsConn {
        TlsConn { conn, fresh: true }
    }

    /// ALPN settled on HTTP/2 (meaningful once the handshake is done).
    pub(crate) fn alpn_h2(&self) -> bool {
        self.conn.alpn_protocol() == Some(volley_tls::ALPN_H2.as_bytes())
    }

    /// Records (handshake, alerts, response data) are waiting for the socket.
    pub(crate) fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// Reads plaintext like a socket read would: `Ok(n > 0)` bytes, `Ok(0)` the peer
    /// closed, `WouldBlock` nothing more until the next readable event. A TLS error
    /// queues the alert, sends it best-effort and comes back as `InvalidData`.
    pub(crate) fn read(&mut self, sock: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
        if self.fresh {
            let mut first = [0u8; 1];
            match sock.peek(&mut first) {
                Ok(0) => return Ok(0),
                Ok(_) => {
                    self.fresh = false;
                    // A TLS record starts with a content type (22 = handshake); an
                    // HTTP request starts with a method's upper-case letter.
                    if first[0].is_ascii_uppercase() {
                        answer_plain_http(sock);
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "plain HTTP on a TLS port",
                        ));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        let mut eof = false;
        loop {
            match self.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if eof {
                        return Ok(0);
                    }
                }
                // Closed without close_notify: the same as a close for an HTTP server.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            let mut s = sock;
            match self.conn.read_tls(&mut s) {
                Ok(0) => eof = true,
                Ok(_) => {}
                Err(e) => return Err(e),
            }
            if let Err(e) = self.conn.process_new_packets() {
                let _ = self.conn.write_tls(&mut s);
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        }
    }

    /// Hands plaintext to the session, `head` then `body` sealed together (one record
    /// up to 16 KiB); returns how much it took (0: its buffer of records is full, flush
    /// first).
    pub(crate) fn write_plain(&mut self, head: &[u8], body: &[u8]) -> io::Result<usize> {
        self.conn
            .writer()
            .write_vectored(&[io::IoSlice::new(head), io::IoSlice::new(body)])
    }

    /// Writes queued records until none are left (`Ok(true)`) or the socket is full
    /// (`Ok(false)`).
    pub(crate) fn flush(&mut self, sock: &TcpStream) -> io::Result<bool> {
        let mut s = sock;
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut s) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Queues close_notify behind the records already queued, to leave with them.
    pub(crate) fn queue_close(&mut self) {
        self.conn.send_close_notify();
    }

    /// Queues close_notify (once) and sends it best-effort (the connection closes next).
    pub(crate) fn close(&mut self, sock: &TcpStream) {
        self.queue_close();
        let _ = self.flush(sock);
    }
}

/// Drains what the plain-HTTP client sent (bounded), answers 400 in clear text and
/// half-closes, so the client reads a reason instead of a reset or TLS alert bytes.
fn answer_plain_http(sock: &TcpStream) {
    let mut s = sock;
    let mut scratch = [0u8; 4096];
    let mut drained = 0;
    while drained < PLAIN_DRAIN_BYTES {
        match s.read(&mut scratch) {
            Ok(0) => break,
            Ok(n) => drained += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = s.write(PLAIN_TO_TLS);
    let _ = sock.shutdown(std::net::Shutdown::Write);
}
