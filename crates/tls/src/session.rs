//! A sans-IO TLS client session: bytes in, bytes out, no socket.
//!
//! The engine's event loop owns the non-blocking socket; this type owns only the TLS
//! state. The loop feeds what the socket gave ([`TlsSession::feed_tls`]), sends what
//! the session has to say ([`TlsSession::take_tls_out`] or [`TlsSession::write_tls`]),
//! and moves plaintext with [`TlsSession::write_plain`] / [`TlsSession::read_plain`].
//! Because nothing here blocks or reads a socket, the same type serves mio, a blocking
//! test client, or a recorded byte stream.
//!
//! Decrypted bytes are moved out of rustls into a buffer of our own as soon as they
//! arrive. rustls caps its own plaintext buffer and refuses more ciphertext when it is
//! full; draining it each time lets `feed_tls` always take every byte it is given, so
//! the caller never has to hold ciphertext back.

use std::io::{self, Read, Write};
use std::sync::Arc;
use std::time::Instant;

use rustls::client::ClientConnection;
use rustls::{ClientConfig, HandshakeKind, ProtocolVersion};

use crate::{client, TlsConfigError, TlsFailure};

/// First bytes shown in a `NotTls` message: enough for "HTTP/1.1 400 Bad Request".
const NOT_TLS_PREVIEW_BYTES: usize = 24;

/// The TLS version a session negotiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    /// TLS 1.2.
    Tls12,
    /// TLS 1.3.
    Tls13,
}

impl TlsVersion {
    /// Label for reports, as OpenSSL and servers' logs write it.
    pub fn name(self) -> &'static str {
        match self {
            TlsVersion::Tls12 => "TLSv1.2",
            TlsVersion::Tls13 => "TLSv1.3",
        }
    }
}

/// What one [`TlsSession::feed_tls`] call changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    /// The handshake finished during this call: the moment to stamp the handshake time.
    pub handshake_completed: bool,
    /// Decrypted bytes waiting for [`TlsSession::read_plain`].
    pub plain_ready: usize,
}

/// One client TLS connection's state, driven by the caller's I/O.
#[derive(Debug)]
pub struct TlsSession {
    conn: ClientConnection,
    /// Decrypted bytes not yet read; `plain_in[plain_pos..]` is pending.
    plain_in: Vec<u8>,
    plain_pos: usize,
    /// Whether any byte has arrived yet (the first ones tell TLS from plain HTTP).
    seen_first_byte: bool,
    /// The peer sent close_notify or the socket hit end of stream.
    peer_closed: bool,
    handshake_done_at: Option<Instant>,
    /// The first failure, returned again by every later call: a failed TLS connection
    /// cannot recover.
    failure: Option<TlsFailure>,
    require_alpn: bool,
}

impl TlsSession {
    /// A new session to `host` (a URL's host: DNS name, IP address or `[v6]`), using a
    /// worker's shared config. The ClientHello is ready in the outgoing bytes at once.
    pub fn new(config: Arc<ClientConfig>, host: &str) -> Result<TlsSession, TlsConfigError> {
        let name = client::server_name(host)?;
        let conn = ClientConnection::new(config, name)?;
        Ok(TlsSession {
            conn,
            plain_in: Vec::new(),
            plain_pos: 0,
            seen_first_byte: false,
            peer_closed: false,
            handshake_done_at: None,
            failure: None,
            require_alpn: false,
        })
    }

    /// Makes a handshake that ends without an agreed ALPN protocol fail with
    /// [`TlsFailure::AlpnMismatch`] (for `--http2`, where falling back silently to
    /// HTTP/1.1 would measure the wrong protocol). Off by default: many HTTP/1.1
    /// servers send no ALPN at all.
    pub fn require_alpn(mut self, required: bool) -> TlsSession {
        self.require_alpn = required;
        self
    }

    /// Takes bytes read from the socket. Every byte is consumed. An error is final:
    /// the caller counts it, may flush [`take_tls_out`](Self::take_tls_out) once (an
    /// alert telling the server why) and closes the socket.
    pub fn feed_tls(&mut self, bytes: &[u8]) -> Result<Progress, TlsFailure> {
        self.check()?;
        if bytes.is_empty() {
            return Ok(self.progress(false));
        }
        if !self.seen_first_byte {
            self.seen_first_byte = true;
            if !looks_like_tls_record(bytes) {
                return Err(self.fail(TlsFailure::NotTls(preview(bytes))));
            }
        }
        let was_handshaking = self.conn.is_handshaking();
        let mut input = bytes;
        while !input.is_empty() {
            match self.conn.read_tls(&mut input) {
                // After close_notify rustls takes nothing more; later bytes are junk
                // a well-behaved server would not send, so they are dropped.
                Ok(0) => break,
                Ok(_) => self.process()?,
                Err(e) => return Err(self.fail(TlsFailure::Other(e.to_string()))),
            }
        }
        let completed = was_handshaking && !self.conn.is_handshaking();
        if completed {
            self.handshake_done_at = Some(Instant::now());
            if self.require_alpn && self.conn.alpn_protocol().is_none() {
                return Err(self.fail(TlsFailure::AlpnMismatch(
                    "the server selected no protocol and one is required".into(),
                )));
            }
        }
        Ok(self.progress(completed))
    }

    /// Tells the session the socket reached end of stream. During the handshake that is
    /// a failure (the server hung up on the ClientHello or on our certificate); after
    /// it, [`read_plain`](Self::read_plain) returns the remaining plaintext, then `Ok(0)`.
    pub fn feed_eof(&mut self) -> Result<(), TlsFailure> {
        self.check()?;
        let mut empty: &[u8] = &[];
        // Reading zero bytes is how rustls learns of end of stream.
        if let Err(e) = self.conn.read_tls(&mut empty) {
            return Err(self.fail(TlsFailure::Other(e.to_string())));
        }
        self.process()?;
        self.peer_closed = true;
        if self.conn.is_handshaking() {
            let detail = if self.seen_first_byte {
                "the server closed the connection during the TLS handshake"
            } else {
                "the server closed the connection without answering the ClientHello"
            };
            return Err(self.fail(TlsFailure::Other(detail.into())));
        }
        Ok(())
    }

    /// Whether the session has bytes for the socket.
    pub fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// Whether the session expects more bytes from the socket (false once the peer has
    /// closed).
    pub fn wants_read(&self) -> bool {
        !self.peer_closed && self.conn.wants_read()
    }

    /// Appends every pending outgoing TLS byte to `out`; returns how many. For loops
    /// that keep their own send buffer.
    pub fn take_tls_out(&mut self, out: &mut Vec<u8>) -> usize {
        let before = out.len();
        while self.conn.wants_write() {
            // Writing into a Vec cannot fail.
            if self.conn.write_tls(out).is_err() {
                break;
            }
        }
        out.len() - before
    }

    /// Writes pending outgoing TLS bytes straight to a (non-blocking) writer until it
    /// would block or nothing is left; returns how many went. `WouldBlock` is returned
    /// only when nothing could be written; bytes not taken stay queued for the next call.
    pub fn write_tls(&mut self, w: &mut dyn Write) -> io::Result<usize> {
        let mut total = 0;
        while self.conn.wants_write() {
            match self.conn.write_tls(w) {
                Ok(0) => break,
                Ok(n) => total += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && total > 0 => break,
                Err(e) => return Err(e),
            }
        }
        Ok(total)
    }

    /// Queues plaintext to send; returns how much was taken. Before the handshake ends
    /// the bytes wait inside the session (so a request can be queued at connect time)
    /// and leave encrypted once it completes.
    pub fn write_plain(&mut self, data: &[u8]) -> io::Result<usize> {
        if let Some(f) = &self.failure {
            return Err(io::Error::other(f.clone()));
        }
        self.conn.writer().write(data)
    }

    /// Reads decrypted bytes. `Ok(0)` means the peer closed and nothing is left;
    /// `WouldBlock` means feed more ciphertext first.
    pub fn read_plain(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let pending = &self.plain_in[self.plain_pos..];
        if !pending.is_empty() {
            let n = pending.len().min(buf.len());
            buf[..n].copy_from_slice(&pending[..n]);
            self.plain_pos += n;
            if self.plain_pos == self.plain_in.len() {
                self.plain_in.clear();
                self.plain_pos = 0;
            }
            return Ok(n);
        }
        if let Some(f) = &self.failure {
            return Err(io::Error::other(f.clone()));
        }
        if self.peer_closed {
            return Ok(0);
        }
        Err(io::ErrorKind::WouldBlock.into())
    }

    /// Decrypted bytes waiting to be read.
    pub fn plain_available(&self) -> usize {
        self.plain_in.len() - self.plain_pos
    }

    /// Queues a close_notify alert (flush it with `take_tls_out`/`write_tls`).
    pub fn close(&mut self) {
        self.conn.send_close_notify();
    }

    /// Whether the handshake is still in progress.
    pub fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// When `feed_tls` saw the handshake complete. The engine stamps its own clock off
    /// [`Progress::handshake_completed`]; this instant is for callers without one.
    pub fn handshake_done_at(&self) -> Option<Instant> {
        self.handshake_done_at
    }

    /// The ALPN protocol the server chose, e.g. `b"h2"`.
    pub fn negotiated_alpn(&self) -> Option<&[u8]> {
        self.conn.alpn_protocol()
    }

    /// The negotiated version, once the server has chosen it.
    pub fn protocol_version(&self) -> Option<TlsVersion> {
        match self.conn.protocol_version()? {
            ProtocolVersion::TLSv1_2 => Some(TlsVersion::Tls12),
            ProtocolVersion::TLSv1_3 => Some(TlsVersion::Tls13),
            _ => None,
        }
    }

    /// The negotiated cipher suite's IANA name, e.g. `TLS13_AES_256_GCM_SHA384`.
    pub fn cipher_suite(&self) -> Option<&'static str> {
        self.conn
            .negotiated_cipher_suite()
            .and_then(|s| s.suite().as_str())
    }

    /// Whether the handshake resumed an earlier session (abbreviated handshake).
    pub fn resumed(&self) -> bool {
        self.conn.handshake_kind() == Some(HandshakeKind::Resumed)
    }

    /// Whether the peer has closed (close_notify or end of stream).
    pub fn peer_closed(&self) -> bool {
        self.peer_closed
    }

    /// The failure that ended the session, if any.
    pub fn failure(&self) -> Option<&TlsFailure> {
        self.failure.as_ref()
    }

    fn check(&self) -> Result<(), TlsFailure> {
        match &self.failure {
            Some(f) => Err(f.clone()),
            None => Ok(()),
        }
    }

    fn fail(&mut self, failure: TlsFailure) -> TlsFailure {
        self.failure = Some(failure.clone());
        failure
    }

    /// Runs rustls over the buffered records and moves out any plaintext.
    fn process(&mut self) -> Result<(), TlsFailure> {
        let state = match self.conn.process_new_packets() {
            Ok(state) => state,
            Err(e) => return Err(self.fail(TlsFailure::from_rustls(&e))),
        };
        if state.peer_has_closed() {
            self.peer_closed = true;
        }
        let n = state.plaintext_bytes_to_read();
        if n > 0 {
            if self.plain_pos > 0 {
                self.plain_in.drain(..self.plain_pos);
                self.plain_pos = 0;
            }
            let start = self.plain_in.len();
            self.plain_in.resize(start + n, 0);
            if let Err(e) = self.conn.reader().read_exact(&mut self.plain_in[start..]) {
                self.plain_in.truncate(start);
                return Err(self.fail(TlsFailure::Other(e.to_string())));
            }
        }
        Ok(())
    }

    fn progress(&self, handshake_completed: bool) -> Progress {
        Progress {
            handshake_completed,
            plain_ready: self.plain_available(),
        }
    }
}

/// A TLS record starts with a content type (20 change_cipher_spec .. 24 heartbeat)
/// and a major version of 3. Anything else, e.g. `H` of `HTTP/1.1 400`, is not TLS.
fn looks_like_tls_record(bytes: &[u8]) -> bool {
    let type_ok = matches!(bytes.first(), Some(20..=24));
    let version_ok = bytes.get(1).is_none_or(|&major| major == 3);
    type_ok && version_ok
}

/// The first bytes, printable, for a one-line message.
fn preview(bytes: &[u8]) -> String {
    let head = &bytes[..bytes.len().min(NOT_TLS_PREVIEW_BYTES)];
    head.iter()
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                char::from(b)
            } else {
                '.'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ClientTls;

    fn session() -> TlsSession {
        let config = ClientTls {
            insecure: true,
            ..ClientTls::default()
        }
        .client_config()
        .unwrap();
        TlsSession::new(config, "localhost").unwrap()
    }

    #[test]
    fn client_hello_is_ready_at_once() {
        let mut s = session();
        assert!(s.is_handshaking());
        assert!(s.wants_write());
        let mut out = Vec::new();
        let n = s.take_tls_out(&mut out);
        assert!(n > 0);
        assert_eq!(out[0], 22, "a handshake record");
        assert!(!s.wants_write());
        assert_eq!(s.protocol_version(), None);
        assert!(!s.resumed());
    }

    #[test]
    fn plain_http_answer_is_not_tls_and_sticky() {
        let mut s = session();
        let err = s.feed_tls(b"HTTP/1.1 400 Bad Request\r\n\r\n").unwrap_err();
        assert_eq!(err.name(), "not_tls");
        assert!(
            err.to_string().contains("HTTP/1.1 400 Bad Request"),
            "{err}"
        );
        assert_eq!(s.feed_tls(&[22, 3, 3]).unwrap_err(), err);
        assert!(s.write_plain(b"GET").is_err());
    }

    #[test]
    fn garbage_after_a_tls_looking_header_is_a_typed_error() {
        let mut s = session();
        let err = s
            .feed_tls(&[22, 3, 3, 0, 4, 0xff, 0xff, 0xff, 0xff])
            .unwrap_err();
        assert_eq!(err.name(), "other");
    }

    #[test]
    fn eof_before_any_answer_is_a_failure() {
        let mut s = session();
        let err = s.feed_eof().unwrap_err();
        assert!(err.to_string().contains("without answering"), "{err}");
        assert!(s.read_plain(&mut [0u8; 4]).is_err());
    }

    #[test]
    fn reading_before_data_would_block() {
        let mut s = session();
        let err = s.read_plain(&mut [0u8; 4]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        // Plaintext queued during the handshake is accepted.
        assert_eq!(s.write_plain(b"GET / HTTP/1.1\r\n\r\n").unwrap(), 18);
    }

    #[test]
    fn record_header_check() {
        assert!(looks_like_tls_record(&[22, 3, 1]));
        assert!(looks_like_tls_record(&[21]));
        assert!(!looks_like_tls_record(b"HTTP/1.1"));
        assert!(!looks_like_tls_record(&[22, 4]));
        assert_eq!(preview(b"a\r\nb"), "a..b");
    }
}
