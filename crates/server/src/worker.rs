//! One event loop per thread: accept, read until WouldBlock, parse, answer, writev.
//!
//! Connections live in a slab indexed by their mio token. Each keeps its read buffer
//! and output buffer for its whole life, so a keep-alive request for a cached file costs
//! no allocation: the preformatted header block is copied into the output buffer, Date
//! and Connection appended, and header + body leave in one `writev`. Larger files go out
//! with `sendfile(2)`. Timeouts are enforced by a sweep every 100 ms.
//!
//! A connection's first bytes pick its framing: the h2c preface on a plain connection
//! (or ALPN `h2` over TLS) hands it to [`crate::h2`], which is fed the same read buffer
//! and appends its frames to the same output buffer; everything else is HTTP/1.1.

use crate::answer::{
    decide, h2_text, open_body, path_of, reason, render_h2, text_body, Answer, Body,
};
use crate::files::Cache;
use crate::h2::{H2Server, Request, Responder};
use crate::log::{AccessLog, Entry};
use crate::parse::{
    self, decode_chunked, name_is, BodyFraming, Chunked, Head, HeaderSpan, ParseError,
};
use crate::tls::TlsConn;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use std::io::{self, IoSlice, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use volley_dav::{Dav, DavRequest};

/// Token of the listening socket.
pub const LISTENER: Token = Token(usize::MAX - 1);
/// Token of the shutdown waker.
pub const WAKER: Token = Token(usize::MAX - 2);

const INITIAL_BUF: usize = 4096;
/// A read buffer larger than this is dropped back to `INITIAL_BUF` once drained.
const MAX_IDLE_BUF: usize = 64 << 10;
const SWEEP_EVERY: Duration = Duration::from_millis(100);
const SENDFILE_CHUNK: usize = 1 << 20;
/// File bytes read per step when they must pass through TLS (one full record).
const TLS_FILE_CHUNK: usize = 16 << 10;
/// The Allow field of a 405: the static methods plus every method the DAV handler claims.
const ALLOW: &[u8] =
    b"Allow: GET, HEAD, OPTIONS, PROPFIND, PROPPATCH, REPORT, PUT, DELETE, MKCOL, MKCALENDAR, COPY, MOVE, LOCK, UNLOCK\r\n";

/// State shared by all workers.
#[derive(Debug)]
pub struct Shared {
    /// Set by `ServerHandle::shutdown`.
    pub stop: AtomicBool,
    /// Open connections across workers (for the cap).
    pub active: AtomicUsize,
    /// Bumped by every DAV request that may have changed the tree: caches drop on change.
    pub generation: AtomicU64,
}

/// Limits and options a worker runs with.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connection cap across workers.
    pub max_connections: usize,
    /// Time a client gets to send a complete header block.
    pub header_timeout: Duration,
    /// Time an idle keep-alive connection (or a stalled body/response) is kept.
    pub idle_timeout: Duration,
    /// Largest request body accepted.
    pub max_body_bytes: u64,
    /// Answer HTTP/2: h2c with prior knowledge on plain connections (TLS offers `h2`
    /// through ALPN, set up in `Server::bind`).
    pub http2: bool,
}

struct Conn {
    sock: TcpStream,
    /// The TLS session when the listener is HTTPS (boxed: it is large and absent on
    /// plain connections).
    tls: Option<Box<TlsConn>>,
    peer: SocketAddr,
    rbuf: Vec<u8>,
    rlo: usize,
    rhi: usize,
    out: Vec<u8>,
    out_pos: usize,
    body: Body,
    /// When the current (incomplete) request head began; `None` while idle.
    head_started: Option<Instant>,
    last_active: Instant,
    close_after_write: bool,
    writable_interest: bool,
    /// The last read pass stopped because the buffer was full, not on WouldBlock: the
    /// socket may hold more bytes and, epoll being edge-triggered, no event will say so.
    /// Whoever makes room must read again.
    read_blocked: bool,
    /// `100 Continue` already queued for the request being received.
    continue_sent: bool,
    /// The protocol is decided (HTTP/1.1, or HTTP/2 when `h2` is set); until then the
    /// first bytes are looked at for the h2c preface or the TLS ALPN result.
    proto_known: bool,
    /// HTTP/2 state once the connection speaks it (boxed: absent on most).
    h2: Option<Box<H2Server>>,
}

impl Conn {
    fn out_pending(&self) -> bool {
        self.out_pos < self.out.len()
            || !matches!(self.body, Body::None)
            || self.tls.as_ref().is_some_and(|t| t.wants_write())
    }
}

/// Everything a response needs besides the connection.
struct Ctx {
    cache: Cache,
    dav: Dav,
    shared: Arc<Shared>,
    log: Option<AccessLog>,
    limits: Limits,
    date: [u8; 29],
    date_secs: u64,
    now: Instant,
    micros: u32,
}

/// One thread's event loop.
pub struct Worker {
    poll: Poll,
    listener: TcpListener,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    hdrs: Vec<HeaderSpan>,
    ctx: Ctx,
    /// The HTTPS configuration; `None` for plain HTTP.
    tls: Option<Arc<volley_tls::rustls::ServerConfig>>,
    /// Where file bytes wait on their way into TLS records (sendfile cannot encrypt).
    scratch: Vec<u8>,
    /// Requests this worker answered (read by `ServerHandle::answered_per_thread`).
    answered: Arc<AtomicU64>,
}

fn header<'a>(buf: &'a [u8], hdrs: &[HeaderSpan], name: &str) -> Option<&'a [u8]> {
    hdrs.iter()
        .find(|h| name_is(buf, h, name))
        .map(|h| h.value.get(buf))
}

impl Ctx {
    fn tick(&mut self) {
        self.now = Instant::now();
        let (secs, micros) = crate::date::now_unix();
        self.micros = micros;
        if secs != self.date_secs {
            self.date_secs = secs;
            self.date = crate::date::http_date(secs);
            if let Some(log) = self.log.as_mut() {
                log.flush();
            }
        }
    }

    /// Answers one complete request into `c`'s output. Returns (status, body bytes).
    fn respond(
        &mut self,
        c: &mut Conn,
        head: &Head,
        hdrs: &[HeaderSpan],
        body: &[u8],
        keep_alive: bool,
    ) -> (u16, u64) {
        let buf = &c.rbuf[c.rlo..c.rhi];
        let method = head.method.get(buf);
        let target = head.target.get(buf);
        let out = &mut c.out;
        let result = match method {
            b"GET" | b"HEAD" => self.static_file(out, &mut c.body, buf, head, hdrs, keep_alive),
            m => match std::str::from_utf8(m) {
                Ok(m) if Dav::handles(m) => {
                    self.dav_request(out, m, buf, head, hdrs, body, keep_alive)
                }
                _ => (
                    405,
                    simple(&self.date, out, 405, ALLOW, head.minor, keep_alive, false),
                ),
            },
        };
        result.also_log(self, c.peer, buf, head, hdrs, target)
    }

    /// Runs the DAV handler (either protocol) and drops every worker's file cache
    /// generation when the method may have changed the tree.
    fn dav_handle(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> volley_dav::DavResponse {
        let req = DavRequest {
            method,
            target,
            headers,
            body,
        };
        let resp = self.dav.handle(&req);
        if !matches!(method, "OPTIONS" | "PROPFIND" | "REPORT") {
            self.shared.generation.fetch_add(1, Ordering::Relaxed);
        }
        resp
    }

    #[allow(clippy::too_many_arguments)]
    fn dav_request(
        &mut self,
        out: &mut Vec<u8>,
        method: &str,
        buf: &[u8],
        head: &Head,
        hdrs: &[HeaderSpan],
        body: &[u8],
        keep_alive: bool,
    ) -> (u16, u64) {
        let target = std::str::from_utf8(head.target.get(buf)).unwrap_or("/");
        let mut fields = Vec::with_capacity(hdrs.len());
        for h in hdrs {
            if let (Ok(n), Ok(v)) = (
                std::str::from_utf8(h.name.get(buf)),
                std::str::from_utf8(h.value.get(buf)),
            ) {
                fields.push((n, v));
            }
        }
        let resp = self.dav_handle(method, target, &fields, body);
        let _ = write!(
            out,
            "HTTP/1.1 {} {}\r\nServer: volley\r\nContent-Length: {}\r\n",
            resp.status,
            reason(resp.status),
            resp.body.len()
        );
        for (n, v) in &resp.headers {
            // The handler's fields are trusted code, but a CR/LF must never split a head.
            if !n.bytes().chain(v.bytes()).any(|b| b == b'\r' || b == b'\n') {
                let _ = write!(out, "{n}: {v}\r\n");
            }
        }
        finish_head(&self.date, out, head.minor, keep_alive);
        out.extend_from_slice(&resp.body);
        (resp.status, resp.body.len() as u64)
    }

    fn static_file(
        &mut self,
        out: &mut Vec<u8>,
        body_out: &mut Body,
        buf: &[u8],
        head: &Head,
        hdrs: &[HeaderSpan],
        keep_alive: bool,
    ) -> (u16, u64) {
        let head_only = head.method.get(buf) == b"HEAD";
        let minor = head.minor;
        let answer = decide(
            &mut self.cache,
            self.shared.generation.load(Ordering::Relaxed),
            self.now,
            path_of(head.target.get(buf)),
            head_only,
            |name| header(buf, hdrs, name),
        );
        let date = &self.date;
        let (status, v, start, end) = match answer {
            Answer::Text { status, location } => {
                let mut extra = Vec::new();
                if let Some(loc) = location {
                    extra.extend_from_slice(b"Location: ");
                    extra.extend_from_slice(loc);
                    extra.extend_from_slice(b"\r\n");
                }
                return (
                    status,
                    simple(date, out, status, &extra, minor, keep_alive, head_only),
                );
            }
            Answer::NotModified(v) => {
                out.extend_from_slice(b"HTTP/1.1 304 Not Modified\r\nServer: volley\r\n");
                out.extend_from_slice(&v.meta);
                finish_head(date, out, minor, keep_alive);
                return (304, 0);
            }
            Answer::Unsatisfiable(v) => {
                let _ = write!(
                    out,
                    "HTTP/1.1 416 Range Not Satisfiable\r\nServer: volley\r\nContent-Length: 0\r\nContent-Range: bytes */{}\r\n",
                    v.len
                );
                finish_head(date, out, minor, keep_alive);
                return (416, 0);
            }
            Answer::Full(v) => {
                out.extend_from_slice(&v.head200);
                (200, v, 0, v.len)
            }
            Answer::Part(v, a, b) => {
                let _ = write!(
                    out,
                    "HTTP/1.1 206 Partial Content\r\nServer: volley\r\nContent-Length: {}\r\nContent-Range: bytes {}-{}/{}\r\n",
                    b - a,
                    a,
                    b - 1,
                    v.len
                );
                out.extend_from_slice(&v.meta);
                (206, v, a, b)
            }
        };
        finish_head(date, out, minor, keep_alive);
        if head_only {
            return (status, 0);
        }
        match open_body(v, start, end) {
            Some(b) => *body_out = b,
            None => {
                // The head already promised a body; the only honest move is to close.
                *body_out = Body::None;
                out.clear();
                return (500, simple(date, out, 500, b"", minor, false, head_only));
            }
        }
        (status, end - start)
    }
}

/// A short text response (errors, redirects). Returns the body length.
fn simple(
    date: &[u8; 29],
    out: &mut Vec<u8>,
    status: u16,
    extra: &[u8],
    minor: u8,
    keep_alive: bool,
    head_only: bool,
) -> u64 {
    // The same text as the HTTP/2 answers (`answer::text_body`).
    let text = text_body(status);
    let _ = write!(
        out,
        "HTTP/1.1 {status} {}\r\nServer: volley\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n",
        reason(status),
        text.len()
    );
    out.extend_from_slice(extra);
    finish_head(date, out, minor, keep_alive);
    if !text.is_empty() && !head_only {
        out.extend_from_slice(text.as_bytes());
        text.len() as u64
    } else {
        0
    }
}

fn finish_head(date: &[u8; 29], out: &mut Vec<u8>, minor: u8, keep_alive: bool) {
    out.extend_from_slice(b"Date: ");
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\n");
    if !keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if minor == 0 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// The static-file answers behind an HTTP/2 connection: the same [`decide`] as
/// HTTP/1.1, rendered as HPACK fields.
struct H2Respond<'a> {
    ctx: &'a mut Ctx,
    peer: SocketAddr,
}

impl Responder for H2Respond<'_> {
    fn respond(&mut self, req: &Request<'_>, block: &mut Vec<u8>) -> Body {
        let ctx = &mut *self.ctx;
        let (status, body, bytes) = match req.method {
            b"GET" | b"HEAD" => {
                let head_only = req.method == b"HEAD";
                let answer = decide(
                    &mut ctx.cache,
                    ctx.shared.generation.load(Ordering::Relaxed),
                    ctx.now,
                    path_of(req.path),
                    head_only,
                    |name| req.field(name),
                );
                render_h2(answer, &ctx.date, head_only, block)
            }
            m => match std::str::from_utf8(m) {
                Ok(m) if Dav::handles(m) => dav_h2(ctx, m, req, block),
                _ => {
                    let (body, n) = h2_text(405, &ctx.date, None, Some(ALLOW_H2), false, block);
                    (405, body, n)
                }
            },
        };
        if let Some(log) = ctx.log.as_mut() {
            log.record(&Entry {
                peer: self.peer,
                secs: ctx.date_secs,
                micros: ctx.micros,
                method: req.method,
                target: req.path,
                protocol: "HTTP/2.0",
                status,
                bytes,
                referer: req.field("referer"),
                user_agent: req.field("user-agent"),
            });
        }
        body
    }

    fn refuse(&mut self, status: u16, block: &mut Vec<u8>) -> Body {
        h2_text(status, &self.ctx.date, None, None, false, block).0
    }

    fn wants_body(&self, method: &[u8]) -> bool {
        std::str::from_utf8(method).is_ok_and(Dav::handles)
    }
}

/// The Allow value of an HTTP/2 405 (the HTTP/1.1 `ALLOW` line without name and CRLF).
const ALLOW_H2: &[u8] = b"GET, HEAD, OPTIONS, PROPFIND, PROPPATCH, REPORT, PUT, DELETE, MKCOL, MKCALENDAR, COPY, MOVE, LOCK, UNLOCK";

/// A DAV request over HTTP/2: the same handler as HTTP/1.1 (`:authority` passed as
/// Host), its fields lower-cased into HPACK. Returns (status, body, body bytes).
fn dav_h2(ctx: &mut Ctx, method: &str, req: &Request<'_>, block: &mut Vec<u8>) -> (u16, Body, u64) {
    let mut fields = Vec::new();
    for (n, v) in req.fields() {
        let (Ok(n), Ok(v)) = (std::str::from_utf8(n), std::str::from_utf8(v)) else {
            continue;
        };
        match n {
            ":authority" => fields.push(("host", v)),
            _ if n.starts_with(':') => {}
            _ => fields.push((n, v)),
        }
    }
    let target = std::str::from_utf8(req.path).unwrap_or("/");
    let resp = ctx.dav_handle(method, target, &fields, req.body);
    let status = resp.status.to_string();
    volley_h2::hpack::encode_field(b":status", status.as_bytes(), block);
    volley_h2::hpack::encode_field(b"server", b"volley", block);
    volley_h2::hpack::encode_field(b"date", &ctx.date, block);
    volley_h2::hpack::encode_field(
        b"content-length",
        resp.body.len().to_string().as_bytes(),
        block,
    );
    for (n, v) in &resp.headers {
        let name = n.to_ascii_lowercase();
        // Connection-specific fields are not allowed in HTTP/2 (RFC 9113 §8.2.2).
        if matches!(
            name.as_str(),
            "connection" | "keep-alive" | "transfer-encoding" | "upgrade" | "content-length"
        ) || v.bytes().any(|b| b == b'\r' || b == b'\n')
        {
            continue;
        }
        volley_h2::hpack::encode_field(name.as_bytes(), v.as_bytes(), block);
    }
    let len = resp.body.len();
    let body = if len == 0 || method == "HEAD" {
        Body::None
    } else {
        Body::Mem(Arc::from(resp.body), 0, len)
    };
    (resp.status, body, len as u64)
}

/// Logging as a tail step of `respond`, so every path through it is logged once.
trait AlsoLog {
    fn also_log(
        self,
        ctx: &mut Ctx,
        peer: SocketAddr,
        buf: &[u8],
        head: &Head,
        hdrs: &[HeaderSpan],
        target: &[u8],
    ) -> Self;
}

impl AlsoLog for (u16, u64) {
    fn also_log(
        self,
        ctx: &mut Ctx,
        peer: SocketAddr,
        buf: &[u8],
        head: &Head,
        hdrs: &[HeaderSpan],
        target: &[u8],
    ) -> Self {
        if let Some(log) = ctx.log.as_mut() {
            log.record(&Entry {
                peer,
                secs: ctx.date_secs,
                micros: ctx.micros,
                method: head.method.get(buf),
                target,
                protocol: if head.minor == 0 {
                    "HTTP/1.0"
                } else {
                    "HTTP/1.1"
                },
                status: self.0,
                bytes: self.1,
                referer: header(buf, hdrs, "referer"),
                user_agent: header(buf, hdrs, "user-agent"),
            });
        }
        self
    }
}

/// Writes as much pending output as the socket takes. `Ok(true)`: all sent.
fn write_out(c: &mut Conn, scratch: &mut [u8]) -> io::Result<bool> {
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
            Body::None if !head_left.is_empty() => {
                let n = match (&c.sock).write(head_left) {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                c.out_pos += n;
            }
            Body::File(..) if !head_left.is_empty() => {
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
            Body::None => {
                c.out.clear();
                c.out_pos = 0;
                return Ok(true);
            }
        }
    }
}

/// [`write_out`] through TLS: plaintext (head, then the body from memory or read from
/// the file) goes into the session as fast as it takes it, records go to the socket.
fn write_out_tls(c: &mut Conn, scratch: &mut [u8]) -> io::Result<bool> {
    let Some(tls) = c.tls.as_deref_mut() else {
        return Err(io::ErrorKind::NotConnected.into());
    };
    loop {
        if !tls.flush(&c.sock)? {
            return Ok(false);
        }
        let head_left = &c.out[c.out_pos.min(c.out.len())..];
        let taken = if !head_left.is_empty() {
            let n = tls.write_plain(head_left)?;
            c.out_pos += n;
            n
        } else {
            match &mut c.body {
                Body::Mem(data, pos, end) => {
                    let n = tls.write_plain(data.get(*pos..*end).unwrap_or(&[]))?;
                    *pos += n;
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
                    let n = tls.write_plain(&scratch[..got])?;
                    *pos += n as u64;
                    if *pos >= *end {
                        c.body = Body::None;
                    }
                    n
                }
                Body::None => {
                    c.out.clear();
                    c.out_pos = 0;
                    return Ok(true);
                }
            }
        };
        if taken == 0 && !tls.wants_write() {
            return Err(io::ErrorKind::WriteZero.into());
        }
    }
}

/// What a read pass ended with.
enum ReadEnd {
    /// WouldBlock: wait for the next event.
    Drained,
    /// Buffer full with unprocessed bytes.
    Full,
    /// Peer closed its side or errored.
    Closed,
}

fn read_in(c: &mut Conn) -> ReadEnd {
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
fn grow(c: &mut Conn, need: usize, cap: usize) -> bool {
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

impl Worker {
    /// A worker accepting from `listener`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        poll: Poll,
        mut listener: TcpListener,
        cache: Cache,
        dav: Dav,
        shared: Arc<Shared>,
        log: Option<AccessLog>,
        limits: Limits,
        tls: Option<Arc<volley_tls::rustls::ServerConfig>>,
    ) -> io::Result<Worker> {
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let mut ctx = Ctx {
            cache,
            dav,
            shared,
            log,
            limits,
            date: crate::date::http_date(0),
            date_secs: 0,
            now: Instant::now(),
            micros: 0,
        };
        ctx.tick();
        Ok(Worker {
            poll,
            listener,
            conns: Vec::new(),
            free: Vec::new(),
            hdrs: Vec::with_capacity(32),
            ctx,
            scratch: if tls.is_some() {
                vec![0; TLS_FILE_CHUNK]
            } else {
                Vec::new()
            },
            tls,
            answered: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The counter of requests this worker answers.
    pub fn answered(&self) -> Arc<AtomicU64> {
        self.answered.clone()
    }

    /// A waker for this worker's poll.
    pub fn waker(&self) -> io::Result<Arc<Waker>> {
        Ok(Arc::new(Waker::new(self.poll.registry(), WAKER)?))
    }

    /// Runs until `shared.stop` is set (and the waker is woken).
    pub fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        let mut last_sweep = Instant::now();
        loop {
            if let Err(e) = self.poll.poll(&mut events, Some(SWEEP_EVERY)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    break;
                }
            }
            if self.ctx.shared.stop.load(Ordering::Acquire) {
                break;
            }
            self.ctx.tick();
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept(),
                    WAKER => {}
                    Token(i) => {
                        self.on_event(i, ev.is_readable() || ev.is_read_closed() || ev.is_error())
                    }
                }
            }
            if self.ctx.now.duration_since(last_sweep) >= SWEEP_EVERY {
                last_sweep = self.ctx.now;
                self.sweep();
            }
        }
        for i in 0..self.conns.len() {
            self.close(i);
        }
        if let Some(log) = self.ctx.log.as_mut() {
            log.flush();
        }
    }

    fn accept(&mut self) {
        loop {
            let (mut sock, peer) = match self.listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // EMFILE and friends: stop accepting this round; the listener stays
                // readable and the next event retries.
                Err(_) => return,
            };
            let active = self.ctx.shared.active.fetch_add(1, Ordering::AcqRel);
            if active >= self.ctx.limits.max_connections {
                self.ctx.shared.active.fetch_sub(1, Ordering::AcqRel);
                // In clear text only: a TLS client gets just the close.
                if self.tls.is_none() {
                    let _ = (&sock).write(
                        b"HTTP/1.1 503 Service Unavailable\r\nServer: volley\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                }
                continue;
            }
            let tls = match &self.tls {
                None => None,
                Some(config) => match volley_tls::rustls::ServerConnection::new(config.clone()) {
                    Ok(conn) => Some(Box::new(TlsConn::new(conn))),
                    Err(_) => {
                        self.ctx.shared.active.fetch_sub(1, Ordering::AcqRel);
                        continue;
                    }
                },
            };
            let _ = sock.set_nodelay(true);
            let idx = match self.free.pop() {
                Some(i) => i,
                None => {
                    self.conns.push(None);
                    self.conns.len() - 1
                }
            };
            if self
                .poll
                .registry()
                .register(&mut sock, Token(idx), Interest::READABLE)
                .is_err()
            {
                self.ctx.shared.active.fetch_sub(1, Ordering::AcqRel);
                self.free.push(idx);
                continue;
            }
            let now = self.ctx.now;
            self.conns[idx] = Some(Conn {
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
            });
        }
    }

    fn close(&mut self, i: usize) {
        if let Some(mut c) = self.conns.get_mut(i).and_then(Option::take) {
            let _ = self.poll.registry().deregister(&mut c.sock);
            self.ctx.shared.active.fetch_sub(1, Ordering::AcqRel);
            self.free.push(i);
        }
    }

    fn on_event(&mut self, i: usize, readable: bool) {
        if self.conns.get(i).is_none_or(Option::is_none) {
            return;
        }
        if !self.drive(i, readable) {
            self.close(i);
        }
    }

    /// Reads, answers and writes until the connection would block. False: close it.
    fn drive(&mut self, i: usize, mut readable: bool) -> bool {
        loop {
            let Some(c) = self.conns.get_mut(i).and_then(Option::as_mut) else {
                return false;
            };
            if c.out_pending() {
                match write_out(c, &mut self.scratch) {
                    Ok(true) => {}
                    Ok(false) => {
                        if !c.writable_interest {
                            c.writable_interest = true;
                            let _ = self.poll.registry().reregister(
                                &mut c.sock,
                                Token(i),
                                Interest::READABLE | Interest::WRITABLE,
                            );
                        }
                        return true;
                    }
                    Err(_) => return false,
                }
                c.last_active = self.ctx.now;
                if c.close_after_write {
                    if let Some(tls) = c.tls.as_deref_mut() {
                        tls.close(&c.sock);
                    }
                    let _ = c.sock.shutdown(std::net::Shutdown::Write);
                    return false;
                }
                if c.writable_interest {
                    c.writable_interest = false;
                    let _ =
                        self.poll
                            .registry()
                            .reregister(&mut c.sock, Token(i), Interest::READABLE);
                }
                if c.read_blocked {
                    c.read_blocked = false;
                    readable = true;
                }
            }
            if readable {
                readable = false;
                match read_in(c) {
                    ReadEnd::Drained => {}
                    ReadEnd::Full => c.read_blocked = true,
                    ReadEnd::Closed => {
                        // Answer what was fully received (half-close), then close.
                        c.close_after_write = true;
                        if c.rlo == c.rhi {
                            return false;
                        }
                    }
                }
            }
            match self.process_one(i) {
                Step::Answered => continue,
                Step::NeedMore => {
                    let Some(c) = self.conns.get_mut(i).and_then(Option::as_mut) else {
                        return false;
                    };
                    if c.read_blocked {
                        // Buffer grew (or not): try reading again right away.
                        c.read_blocked = false;
                        readable = true;
                        continue;
                    }
                    if c.out_pending() {
                        // TLS records the read produced (handshake, alert): send them
                        // now; the write step drains them, waits for writable or closes.
                        continue;
                    }
                    return !c.close_after_write || c.out_pending();
                }
                Step::Close => return false,
            }
        }
    }

    /// Parses and answers at most one buffered request.
    fn process_one(&mut self, i: usize) -> Step {
        let Some(c) = self.conns.get_mut(i).and_then(Option::as_mut) else {
            return Step::Close;
        };
        if c.h2.is_some() {
            return self.process_h2(i);
        }
        if c.out_pending() || c.rlo == c.rhi {
            if c.rlo == c.rhi && !c.out_pending() {
                c.head_started = None;
            }
            return Step::NeedMore;
        }
        if !c.proto_known {
            let data = &c.rbuf[c.rlo..c.rhi];
            let preface: &[u8] = volley_h2::frame::PREFACE;
            let h2 = match c.tls.as_deref() {
                // Plaintext only arrives after the handshake, so ALPN is settled.
                Some(tls) => tls.alpn_h2(),
                None if !self.ctx.limits.http2 => false,
                // No HTTP/1.1 request starts with `PRI * HTTP/2.0`: wait for all 24.
                None if data.len() < preface.len() && preface.starts_with(data) => {
                    return Step::NeedMore
                }
                None => data.starts_with(preface),
            };
            c.proto_known = true;
            if h2 {
                if c.out_pos >= c.out.len() {
                    c.out.clear();
                    c.out_pos = 0;
                }
                let max_body =
                    usize::try_from(self.ctx.limits.max_body_bytes).unwrap_or(usize::MAX);
                c.h2 = Some(Box::new(H2Server::new(&mut c.out, max_body)));
                c.head_started = None;
                grow(c, crate::h2::READ_BUF_BYTES, crate::h2::READ_BUF_BYTES);
                return self.process_h2(i);
            }
        }
        let limits = self.ctx.limits.clone();
        let parsed = parse::parse_head(&c.rbuf[c.rlo..c.rhi], &mut self.hdrs);
        let head = match parsed {
            Ok(Some(h)) => h,
            Ok(None) => {
                if c.head_started.is_none() {
                    c.head_started = Some(self.ctx.now);
                }
                if c.read_blocked {
                    let have = c.rhi - c.rlo;
                    if !grow(c, have * 2, parse::MAX_HEAD + 1024) {
                        return self.fail(i, 431);
                    }
                }
                return Step::NeedMore;
            }
            Err(e) => return self.fail(i, e.status()),
        };
        let avail = c.rhi - c.rlo;
        let (body_range, consumed, chunked_body) = match head.body {
            BodyFraming::None => ((0, 0), head.len, None),
            BodyFraming::Length(n) => {
                if n > limits.max_body_bytes {
                    return self.fail(i, 413);
                }
                let total = head.len + n as usize;
                if avail < total {
                    c.head_started = None;
                    // Room for the whole request. `read_blocked` is left as the read
                    // pass set it: if that pass stopped on a full buffer, the rest of
                    // the body is still in the socket and `drive` must read it now
                    // (clearing it here left such requests unanswered forever).
                    grow(c, total, total);
                    return self.body_pending(i, &head);
                }
                ((head.len, total), total, None)
            }
            BodyFraming::Chunked => {
                match decode_chunked(&c.rbuf[c.rlo + head.len..c.rhi], limits.max_body_bytes) {
                    Ok(Chunked::Done(b, used)) => ((0, 0), head.len + used, Some(b)),
                    Ok(Chunked::Partial) => {
                        c.head_started = None;
                        if c.rhi == c.rbuf.len() {
                            let cap = (limits.max_body_bytes as usize)
                                .saturating_mul(2)
                                .saturating_add(1 << 16);
                            if !grow(c, avail * 2, cap) {
                                return self.fail(i, 413);
                            }
                        }
                        return self.body_pending(i, &head);
                    }
                    Err(ParseError::HeadersTooLarge) => return self.fail(i, 413),
                    Err(e) => return self.fail(i, e.status()),
                }
            }
        };
        let keep_alive = head.keep_alive && !c.close_after_write;
        let hdrs = std::mem::take(&mut self.hdrs);
        {
            let start = c.rlo;
            let body_owned;
            let body: &[u8] = match &chunked_body {
                Some(b) => b,
                None if body_range.1 > 0 => {
                    body_owned = c.rbuf[start + body_range.0..start + body_range.1].to_vec();
                    &body_owned
                }
                None => &[],
            };
            self.ctx.respond(c, &head, &hdrs, body, keep_alive);
        }
        self.answered.fetch_add(1, Ordering::Relaxed);
        self.hdrs = hdrs;
        c.continue_sent = false;
        c.rlo += consumed;
        if c.rlo == c.rhi && c.rbuf.len() > MAX_IDLE_BUF {
            // A large body grew the buffer; an idle keep-alive connection goes back to
            // the small one so that many idle connections stay cheap.
            c.rbuf = vec![0; INITIAL_BUF];
            c.rlo = 0;
            c.rhi = 0;
        }
        c.head_started = if c.rlo < c.rhi {
            Some(self.ctx.now)
        } else {
            None
        };
        if !keep_alive {
            c.close_after_write = true;
            c.rlo = c.rhi;
        }
        Step::Answered
    }

    /// Feeds buffered bytes to the connection's HTTP/2 state and tops its output up
    /// with DATA. `Answered` when there is output to write.
    fn process_h2(&mut self, i: usize) -> Step {
        let Some(c) = self.conns.get_mut(i).and_then(Option::as_mut) else {
            return Step::Close;
        };
        if c.out_pending() {
            return Step::NeedMore;
        }
        c.out.clear();
        c.out_pos = 0;
        let Some(h2) = c.h2.as_deref_mut() else {
            return Step::Close;
        };
        let mut responder = H2Respond {
            ctx: &mut self.ctx,
            peer: c.peer,
        };
        let used = h2.feed(&c.rbuf[c.rlo..c.rhi], &mut c.out, &mut responder);
        c.rlo += used;
        h2.fill(&mut c.out);
        self.answered
            .fetch_add(h2.take_answered(), Ordering::Relaxed);
        if h2.is_closing() {
            c.close_after_write = true;
            c.rlo = c.rhi;
        }
        if c.out.is_empty() {
            Step::NeedMore
        } else {
            Step::Answered
        }
    }

    /// A complete head whose body is still on its way. With `Expect: 100-continue`
    /// (HTTP/1.1 only, RFC 9110 10.1.1) the client waits for an interim answer before
    /// sending the body: queue `100 Continue` once, or refuse at once with the final
    /// status when the method is one nobody here handles (the body is then never read,
    /// so the connection closes after the 405).
    fn body_pending(&mut self, i: usize, head: &Head) -> Step {
        let Some(c) = self.conns.get_mut(i).and_then(Option::as_mut) else {
            return Step::Close;
        };
        if c.continue_sent || head.minor == 0 {
            return Step::NeedMore;
        }
        let buf = &c.rbuf[c.rlo..c.rhi];
        let expects =
            header(buf, &self.hdrs, "expect").is_some_and(|v| parse::has_token(v, "100-continue"));
        if !expects {
            return Step::NeedMore;
        }
        let handled = match head.method.get(buf) {
            b"GET" | b"HEAD" => true,
            m => std::str::from_utf8(m).is_ok_and(Dav::handles),
        };
        if !handled {
            return self.fail_with(i, 405, ALLOW);
        }
        c.continue_sent = true;
        c.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        // Not an answer to the request, but output to flush before reading on.
        Step::Answered
    }

    /// Queues an error answer and marks the connection to close after it.
    fn fail(&mut self, i: usize, status: u16) -> Step {
        self.fail_with(i, status, b"")
    }

    /// [`Worker::fail`] with extra header lines (each ending in CRLF).
    fn fail_with(&mut self, i: usize, status: u16, extra: &[u8]) -> Step {
        let Some(c) = self.conns.get_mut(i).and_then(Option::as_mut) else {
            return Step::Close;
        };
        c.out.clear();
        c.out_pos = 0;
        c.body = Body::None;
        c.continue_sent = false;
        simple(&self.ctx.date, &mut c.out, status, extra, 1, false, false);
        c.close_after_write = true;
        c.rlo = c.rhi;
        Step::Answered
    }

    /// Enforces the header timeout (408) and the idle timeout.
    fn sweep(&mut self) {
        let now = self.ctx.now;
        let limits = self.ctx.limits.clone();
        for i in 0..self.conns.len() {
            let Some(c) = self.conns[i].as_mut() else {
                continue;
            };
            if let Some(t) = c.head_started {
                if now.duration_since(t) >= limits.header_timeout && !c.out_pending() {
                    let sent_any = c.rhi > c.rlo;
                    if sent_any && c.tls.is_none() {
                        let _ = (&c.sock).write(
                            b"HTTP/1.1 408 Request Timeout\r\nServer: volley\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        );
                    }
                    self.close(i);
                    continue;
                }
            }
            if now.duration_since(c.last_active) >= limits.idle_timeout {
                self.close(i);
            }
        }
    }
}

enum Step {
    Answered,
    NeedMore,
    Close,
}
