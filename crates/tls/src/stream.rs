//! [`TlsStream`]: a [`TlsSession`] glued to any byte stream as std `Read`/`Write`.
//!
//! The session stays sans-IO; this is the thin loop every caller would otherwise
//! write: flush ciphertext when there is some, read the socket when plaintext runs
//! out. With a non-blocking stream (a mio `TcpStream`) every call returns at once and
//! `WouldBlock` means "wait for readiness", which is the engine's `Transport` contract.
//! A TLS failure comes back as an `io::Error` carrying the [`crate::TlsFailure`]; recover it
//! with [`crate::TlsFailure::in_io`].

use std::io::{self, Read, Write};

use crate::{Progress, TlsSession};

/// Socket read size: one maximal TLS record (16 KiB of payload plus overhead), so a
/// single read can complete any record.
const READ_CHUNK_BYTES: usize = 16 * 1024 + 512;

/// A TLS client connection over a stream `S`.
#[derive(Debug)]
pub struct TlsStream<S> {
    session: TlsSession,
    io: S,
}

impl<S: Read + Write> TlsStream<S> {
    /// Wraps a connected (or connecting, if non-blocking) stream.
    pub fn new(session: TlsSession, io: S) -> TlsStream<S> {
        TlsStream { session, io }
    }

    /// The TLS state: version, ALPN, resumption, handshake time.
    pub fn session(&self) -> &TlsSession {
        &self.session
    }

    /// The stream, e.g. to register it with an event loop.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.io
    }

    /// The stream.
    pub fn get_ref(&self) -> &S {
        &self.io
    }

    /// Splits the stream back into its parts.
    pub fn into_parts(self) -> (TlsSession, S) {
        (self.session, self.io)
    }

    /// Writes queued ciphertext until none is left (`Ok(true)`) or the stream would
    /// block (`Ok(false)`: call again when writable).
    pub fn flush_tls(&mut self) -> io::Result<bool> {
        while self.session.wants_write() {
            match self.session.write_tls(&mut self.io) {
                Ok(0) => return Ok(false),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Advances the handshake as far as the stream allows: `Ok(true)` once it is
    /// complete, `Ok(false)` when the stream would block first.
    pub fn handshake(&mut self) -> io::Result<bool> {
        self.drive_handshake(false)
    }

    /// [`handshake`](Self::handshake), except that the client's last flight (its
    /// Finished) is not written when it completes the handshake: it stays queued for the
    /// caller's next `write` or `flush`, so it leaves in one segment with the first
    /// request (TLS 1.3 lets application data follow the Finished at once). Sent alone
    /// it cost the server a wake-up per connection. The caller must write or flush next.
    pub fn handshake_holding_finished(&mut self) -> io::Result<bool> {
        self.drive_handshake(true)
    }

    fn drive_handshake(&mut self, hold_finished: bool) -> io::Result<bool> {
        loop {
            self.flush_tls()?;
            if !self.session.is_handshaking() {
                return Ok(true);
            }
            match self.fill() {
                Ok(_) if hold_finished && !self.session.is_handshaking() => return Ok(true),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
    }

    /// One socket read fed to the session.
    fn fill(&mut self) -> io::Result<Progress> {
        let mut buf = [0u8; READ_CHUNK_BYTES];
        match self.io.read(&mut buf)? {
            0 => {
                self.session.feed_eof().map_err(io::Error::other)?;
                Ok(Progress::default())
            }
            n => self.session.feed_tls(&buf[..n]).map_err(io::Error::other),
        }
    }
}

impl<S: Read + Write> Read for TlsStream<S> {
    /// Plaintext if any is decrypted; otherwise reads the stream (flushing first, since
    /// the handshake may be waiting on us). `Ok(0)` once the server has closed.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            match self.session.read_plain(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => return other,
            }
            self.flush_tls()?;
            self.fill()?;
        }
    }
}

impl<S: Read + Write> Write for TlsStream<S> {
    /// Queues plaintext (encrypted once the handshake is done) and pushes what the
    /// stream takes. `WouldBlock` when the session's send buffer is full.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.session.write_plain(buf)?;
        self.flush_tls()?;
        if n == 0 && !buf.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.flush_tls()? {
            self.io.flush()
        } else {
            Err(io::ErrorKind::WouldBlock.into())
        }
    }
}
