//! One connection's buffers and socket I/O: reading until WouldBlock, growing the read
//! buffer, and writing the pending head and body (one `writev`, `sendfile(2)` for large
//! files, or through the TLS session). The event loop in [`crate::worker`] decides what
//! to do with the bytes; this module only moves them.

use crate::answer::Body;
use crate::h2::H2Server;
use crate::tls::TlsConn;
use mio::net::TcpStream;
use std::io::{self, IoSlice, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::time::Instant;

/// The read buffer a connection gets on its first readable event.
pub(crate) const INITIAL_BUF: usize = 4096;
const SENDFILE_CHUNK: usize = 1 << 20;

pub(crate) struct Conn {
    pub(crate) sock: TcpStream,
    /// The TLS session when the listener is HTTPS (boxed: it is large and absent on
    /// plain connections).
    pub(crate) tls: Option<Box<TlsConn>>,
    pub(crate) peer: SocketAddr,
    pub(crate) rbuf: Vec<u8>,
    pub(crate) rlo: usize,
    pub(crate) rhi: usize,
    pub(crate) out: Vec<u8>,
    pub(crate) out_pos: usize,
    pub(crate) body: Body,
    /// When the current (incomplete) request head began; `None` while idle.
    pub(crate) head_started: Option<Instant>,
    pub(crate) last_active: Instant,
    pub(crate) close_after_write: bool,
    pub(crate) writable_interest: bool,
    /// The last read pass stopped because the buffer was full, not on WouldBlock: the
    /// socket may hold more bytes and, epoll being edge-triggered, no event will say so.
    /// Whoever makes room must read again.
    pub(crate) read_blocked: bool,
    /// `100 Continue` already queued for the request being received.
    pub(crate) continue_sent: bool,
    /// The protocol is decided (HTTP/1.1, or HTTP/2 when `h2` is set); until then the
    /// first bytes are looked at for the h2c preface or the TLS ALPN result.
    pub(crate) proto_known: bool,
    /// HTTP/2 state once the connection speaks it (boxed: absent on most).
    pub(crate) h2: Option<Box<H2Server>>,
}

/// An output buffer that grew past this (a large multistatus) is freed once sent, so
/// that idle keep-alive connections do not each keep their largest answer's memory.
const MAX_IDLE_OUT: usize = 64 << 10;

impl Conn {
    /// Everything pending was sent: the output buffer is reused from its start (or
    /// freed when a large answer grew it). Always true, the value `write_out` returns
    /// then.
    fn reset_out(&mut self) -> bool {
        if self.out.capacity() > MAX_IDLE_OUT {
            self.out = Vec::new();
        } else {
            self.out.clear();
        }
        self.out_pos = 0;
        true
    }

    /// A connection just accepted: no buffers yet (the read buffer comes with the first
    /// readable event), its header clock started.
    pub(crate) fn new(
        sock: TcpStream,
        tls: Option<Box<TlsConn>>,
        peer: SocketAddr,
        now: Instant,
    ) -> Conn {
        Conn {
            sock,
            tls,
            peer,
            rbuf: Vec::new(),
            rlo: 0,
            rhi: 0,
            out: Vec::new(),
            out_pos: 0,
            body: Body::None,
            head_started: Some(now),
            last_active: now,
            close_after_write: false,
            writable_interest: false,
            read_blocked: false,
            continue_sent: false,
            proto_known: false,
            h2: None,
        }
    }

    pub(crate) fn out_pending(&self) -> bool {
        self.out_pos < self.out.len()
            || !matches!(self.body, Body::None)
            || self.tls.as_ref().is_some_and(|t| t.wants_write())
    }
}

/// Writes as much pending output as the socket takes. `Ok(true)`: all sent.
pub(crate) fn write_out(c: &mut Conn, scratch: &mut [u8]) -> io::Result<bool> {
    if c.tls.is_some() {
        return write_out_tls(c, scratch);
    }
    loop {
        let head_left = &c.out[c.out_pos.min(c.out.len())..];
        match &mut c.body {
            Body::Mem(data, pos, end) => {
                let body = data.get(*pos..*end).unwrap_or(&[]);
                let n = match (&c.sock)
                    .write_vectored(&[IoSlice::new(head_left), IoSlice::new(body)])
                {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                let from_head = n.min(head_left.len());
                c.out_pos += from_head;
                *pos += n - from_head;
                if *pos >= *end {
                    c.body = Body::None;
                }
            }
            // The head goes first on its own: sendfile cannot gather it.
            Body::None | Body::File(..) if !head_left.is_empty() => {
                let n = match (&c.sock).write(head_left) {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                c.out_pos += n;
            }
            Body::File(file, pos, end) => {
                let want = (*end - *pos).min(SENDFILE_CHUNK as u64) as usize;
                let mut off = *pos as libc::off_t;
                // SAFETY: both descriptors are open for the duration of the call and
                // `off` is a valid, exclusively borrowed off_t.
                let n =
                    unsafe { libc::sendfile(c.sock.as_raw_fd(), file.as_raw_fd(), &mut off, want) };
                if n < 0 {
                    let e = io::Error::last_os_error();
                    match e.kind() {
                        io::ErrorKind::WouldBlock => return Ok(false),
                        io::ErrorKind::Interrupted => continue,
                        _ => return Err(e),
                    }
                }
                if n == 0 {
                    // The file shrank under us: the promised length cannot be met.
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                *pos += n as u64;
                if *pos >= *end {
                    c.body = Body::None;
                }
            }
            Body::None => return Ok(c.reset_out()),
        }
    }
}

/// [`write_out`] through TLS. The session is handed as much of the answer as it takes
/// (head and body in one vectored write, which rustls seals as one record) before any
/// record goes to the socket, and then everything queued leaves in one `writev`: a
/// session ticket, the answer and, on a last answer, close_notify. Flushing between the
/// pieces sent a small answer as three or four segments, each a wake-up for the client
/// (measured: keep-alive TTFB p90 7x plain HTTP's, new connections 10x slower).
fn write_out_tls(c: &mut Conn, scratch: &mut [u8]) -> io::Result<bool> {
    let Some(tls) = c.tls.as_deref_mut() else {
        return Err(io::ErrorKind::NotConnected.into());
    };
    loop {
        let mut taken = 0;
        loop {
            let head_left = &c.out[c.out_pos.min(c.out.len())..];
            let mut offered = head_left.len();
            let n = match &mut c.body {
                Body::None if head_left.is_empty() => break,
                Body::None => tls.write_plain(head_left, &[])?,
                Body::Mem(data, pos, end) => {
                    let body = data.get(*pos..*end).unwrap_or(&[]);
                    offered += body.len();
                    let n = tls.write_plain(head_left, body)?;
                    let from_head = n.min(head_left.len());
                    *pos += n - from_head;
                    if *pos >= *end {
                        c.body = Body::None;
                    }
                    n
                }
                Body::File(file, pos, end) => {
                    let want = ((*end - *pos) as usize).min(scratch.len());
                    let got = match file.read_at(&mut scratch[..want], *pos) {
                        Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                        Ok(n) => n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(e),
                    };
                    // The session may take less than was read; the rest is read again
                    // next time (rare: it only happens with a full record buffer).
                    offered += got;
                    let n = tls.write_plain(head_left, &scratch[..got])?;
                    let from_head = n.min(head_left.len());
                    *pos += (n - from_head) as u64;
                    if *pos >= *end {
                        c.body = Body::None;
                    }
                    n
                }
            };
            c.out_pos += n.min(head_left.len());
            taken += n;
            if n < offered {
                break; // the session's buffer is full
            }
        }
        let answered = matches!(c.body, Body::None) && c.out_pos >= c.out.len();
        if answered && c.close_after_write {
            tls.queue_close();
        }
        let queued = tls.wants_write();
        if !tls.flush(&c.sock)? {
            return Ok(false);
        }
        if answered {
            return Ok(c.reset_out());
        }
        if taken == 0 && !queued {
            // Room for records, yet the session took nothing: it never will.
            return Err(io::ErrorKind::WriteZero.into());
        }
    }
}

/// What a read pass ended with.
pub(crate) enum ReadEnd {
    /// WouldBlock: wait for the next event.
    Drained,
    /// Buffer full with unprocessed bytes.
    Full,
    /// Peer closed its side or errored.
    Closed,
}

pub(crate) fn read_in(c: &mut Conn) -> ReadEnd {
    if c.rbuf.is_empty() {
        // Allocated on the first readable event, not at accept: a connection that
        // never sends costs no buffer (1000 idle connections: about 4 MiB less RSS).
        c.rbuf = vec![0; INITIAL_BUF];
    }
    loop {
        if c.rlo == c.rhi {
            c.rlo = 0;
            c.rhi = 0;
        }
        if c.rhi == c.rbuf.len() {
            if c.rlo > 0 {
                c.rbuf.copy_within(c.rlo..c.rhi, 0);
                c.rhi -= c.rlo;
                c.rlo = 0;
            } else {
                return ReadEnd::Full;
            }
        }
        let got = match c.tls.as_deref_mut() {
            None => (&c.sock).read(&mut c.rbuf[c.rhi..]),
            Some(tls) => tls.read(&c.sock, &mut c.rbuf[c.rhi..]),
        };
        match got {
            Ok(0) => return ReadEnd::Closed,
            Ok(n) => {
                c.rhi += n;
                c.last_active = Instant::now();
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return ReadEnd::Drained,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return ReadEnd::Closed,
        }
    }
}

/// Makes room for up to `need` unprocessed bytes (clamped to `cap`): compacts, then
/// grows. False if the buffer is already full at `cap` (the request is too large).
pub(crate) fn grow(c: &mut Conn, need: usize, cap: usize) -> bool {
    if c.rlo > 0 {
        c.rbuf.copy_within(c.rlo..c.rhi, 0);
        c.rhi -= c.rlo;
        c.rlo = 0;
    }
    let need = need.min(cap);
    if c.rbuf.len() < need {
        c.rbuf.resize(need, 0);
    }
    c.rhi < c.rbuf.len()
}
