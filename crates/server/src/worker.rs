//! One event loop per thread: accept, read until WouldBlock, parse, answer, writev.
//!
//! Connections live in a slab indexed by their mio token. Each keeps its read buffer
//! and output buffer for its whole life, so a keep-alive request for a cached file costs
//! no allocation: the preformatted header block is copied into the output buffer, Date
//! and Connection appended, and header + body leave in one `writev`. Larger files go out
//! with `sendfile(2)`. Timeouts are enforced by a sweep every 100 ms.
//!
//! The loop only schedules: [`crate::conn`] moves a connection's bytes, [`crate::parse`]
//! reads a head, [`crate::respond`] writes the answer.
//!
//! A connection's first bytes pick its framing: the h2c preface on a plain connection
//! (or ALPN `h2` over TLS) hands it to [`crate::h2`], which is fed the same read buffer
//! and appends its frames to the same output buffer; everything else is HTTP/1.1.

use crate::answer::Body;
use crate::conn::{grow, read_in, write_out, Conn, ReadEnd, INITIAL_BUF};
use crate::files::Cache;
use crate::h2::H2Server;
use crate::log::AccessLog;
use crate::parse::{self, decode_chunked, BodyFraming, Chunked, Head, HeaderSpan, ParseError};
use crate::respond::{header, simple, Ctx, H2Respond};
use crate::tls::TlsConn;
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use volley_dav::Dav;

/// Token of the listening socket.
pub const LISTENER: Token = Token(usize::MAX - 1);
/// Token of the shutdown waker.
pub const WAKER: Token = Token(usize::MAX - 2);
/// Token of the HTTP/3 UDP socket.
pub const QUIC: Token = Token(usize::MAX - 3);

/// A read buffer larger than this is dropped back to `INITIAL_BUF` once drained.
const MAX_IDLE_BUF: usize = 64 << 10;
const SWEEP_EVERY: Duration = Duration::from_millis(100);
/// File bytes read per step when they must pass through TLS (one full record).
const TLS_FILE_CHUNK: usize = 16 << 10;

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
    /// The Alt-Svc value HTTP/1.1 and HTTP/2 answers carry when HTTP/3 is offered.
    pub alt_svc: Option<Box<[u8]>>,
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
    /// The one waker of this poll (mio allows one): shutdown and credential decisions.
    waker: Arc<Waker>,
    /// Connections whose request waits for its credentials to be verified.
    parked: Vec<usize>,
    /// HTTP/3: this thread's UDP socket, QUIC endpoint and connections.
    quic: Option<crate::h3::QuicSide>,
}

impl Worker {
    /// A worker accepting from `listener`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        poll: Poll,
        mut listener: TcpListener,
        cache: Cache,
        dav: Dav,
        auth: Option<Arc<volley_dav::auth::Auth>>,
        shared: Arc<Shared>,
        log: Option<AccessLog>,
        limits: Limits,
        tls: Option<Arc<volley_tls::rustls::ServerConfig>>,
        mut quic: Option<crate::h3::QuicSide>,
    ) -> io::Result<Worker> {
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        if let Some(q) = quic.as_mut() {
            poll.registry()
                .register(&mut q.sock, QUIC, Interest::READABLE)?;
        }
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let wake: Option<volley_dav::auth::Waker> = auth.as_ref().map(|_| {
            let w = waker.clone();
            Arc::new(move || {
                let _ = w.wake();
            }) as volley_dav::auth::Waker
        });
        let limits_alt = limits.alt_svc.clone();
        let mut ctx = Ctx {
            cache,
            dav,
            auth,
            wake,
            shared,
            log,
            limits,
            date: crate::date::http_date(0),
            date_secs: 0,
            now: Instant::now(),
            micros: 0,
            alt_svc: limits_alt,
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
            waker,
            parked: Vec::new(),
            quic,
        })
    }

    /// The counter of requests this worker answers.
    pub fn answered(&self) -> Arc<AtomicU64> {
        self.answered.clone()
    }

    /// The waker of this worker's poll.
    pub fn waker(&self) -> io::Result<Arc<Waker>> {
        Ok(self.waker.clone())
    }

    /// Runs until `shared.stop` is set (and the waker is woken).
    pub fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        let mut last_sweep = Instant::now();
        loop {
            // QUIC's timers (loss detection, acknowledgement delay, idle) wake the loop
            // when they are due; nothing else needs finer than the sweep.
            let wait = self
                .quic
                .as_ref()
                .and_then(|q| q.next_timer())
                .map_or(SWEEP_EVERY, |t| {
                    t.saturating_duration_since(Instant::now()).min(SWEEP_EVERY)
                });
            if let Err(e) = self.poll.poll(&mut events, Some(wait)) {
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
                    WAKER => self.unpark(),
                    QUIC => self.quic_readable(),
                    Token(i) => {
                        self.on_event(i, ev.is_readable() || ev.is_read_closed() || ev.is_error())
                    }
                }
            }
            if let Some(q) = self.quic.as_mut() {
                q.fire_timers(&mut self.ctx, Instant::now());
                self.answered
                    .fetch_add(q.take_answered(), Ordering::Relaxed);
            }
            if self.ctx.now.duration_since(last_sweep) >= SWEEP_EVERY {
                last_sweep = self.ctx.now;
                self.sweep();
            }
        }
        for i in 0..self.conns.len() {
            self.close(i);
        }
        if let Some(q) = self.quic.as_mut() {
            q.close_all(&mut self.ctx);
        }
        if let Some(log) = self.ctx.log.as_mut() {
            log.flush();
        }
    }

    /// Reads the UDP socket until it would block (in batches, so a flood of datagrams
    /// cannot starve the timers of the connections already read).
    fn quic_readable(&mut self) {
        let Some(q) = self.quic.as_mut() else {
            return;
        };
        loop {
            q.on_readable(&mut self.ctx);
            if !q.more {
                break;
            }
            q.fire_timers(&mut self.ctx, Instant::now());
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
            self.conns[idx] = Some(Conn::new(sock, tls, peer, now));
        }
    }

    /// Retries every parked request (some credential was decided; the ones still
    /// pending park again).
    fn unpark(&mut self) {
        for i in std::mem::take(&mut self.parked) {
            self.on_event(i, false);
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
                Step::Parked => return true,
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
            if let Some(step) = self.pick_protocol(i) {
                return step;
            }
        }
        let Some(c) = self.conns.get_mut(i).and_then(Option::as_mut) else {
            return Step::Close;
        };
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
            Err(ParseError::NotHttp) => return Step::Close,
            Err(e) => return self.fail(i, e.status()),
        };
        let (body_range, consumed, chunked_body) = match self.frame_body(i, &head) {
            Ok(framed) => framed,
            Err(step) => return step,
        };
        let Some(c) = self.conns.get_mut(i).and_then(Option::as_mut) else {
            return Step::Close;
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
            if self
                .ctx
                .respond(c, &head, &hdrs, body, keep_alive)
                .is_none()
            {
                // Parked: the request stays buffered; the idle timeout, not the header
                // timeout, bounds the wait (a slow hash under a CPU quota takes a while).
                c.head_started = None;
                self.hdrs = hdrs;
                if !self.parked.contains(&i) {
                    self.parked.push(i);
                }
                return Step::Parked;
            }
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

    /// Decides a fresh connection's protocol from its first bytes (h2c preface) or its
    /// TLS ALPN result, and sets HTTP/2 up. `Some(step)` when the caller must return it.
    fn pick_protocol(&mut self, i: usize) -> Option<Step> {
        let c = self.conns.get_mut(i).and_then(Option::as_mut)?;
        let data = &c.rbuf[c.rlo..c.rhi];
        let preface: &[u8] = volley_h2::frame::PREFACE;
        let h2 = match c.tls.as_deref() {
            // Plaintext only arrives after the handshake, so ALPN is settled.
            Some(tls) => tls.alpn_h2(),
            None if !self.ctx.limits.http2 => false,
            // No HTTP/1.1 request starts with `PRI * HTTP/2.0`: wait for all 24.
            None if data.len() < preface.len() && preface.starts_with(data) => {
                return Some(Step::NeedMore)
            }
            None => data.starts_with(preface),
        };
        c.proto_known = true;
        if h2 {
            if c.out_pos >= c.out.len() {
                c.out.clear();
                c.out_pos = 0;
            }
            let max_body = usize::try_from(self.ctx.limits.max_body_bytes).unwrap_or(usize::MAX);
            c.h2 = Some(Box::new(H2Server::new(&mut c.out, max_body)));
            c.head_started = None;
            grow(c, crate::h2::READ_BUF_BYTES, crate::h2::READ_BUF_BYTES);
            return Some(self.process_h2(i));
        }
        None
    }

    /// Where the body of a parsed head lies: `Ok((range in the head's bytes, bytes the
    /// request uses, decoded chunked body))`, or `Err(step)` while it is still arriving
    /// or when it is refused.
    #[allow(clippy::type_complexity)]
    fn frame_body(
        &mut self,
        i: usize,
        head: &Head,
    ) -> Result<((usize, usize), usize, Option<Vec<u8>>), Step> {
        let Some(c) = self.conns.get_mut(i).and_then(Option::as_mut) else {
            return Err(Step::Close);
        };
        let max_body_bytes = self.ctx.limits.max_body_bytes;
        let avail = c.rhi - c.rlo;
        Ok(match head.body {
            BodyFraming::None => ((0, 0), head.len, None),
            BodyFraming::Length(n) => {
                if n > max_body_bytes {
                    return Err(self.fail(i, 413));
                }
                let total = head.len + n as usize;
                if avail < total {
                    c.head_started = None;
                    // Room for the whole request. `read_blocked` is left as the read
                    // pass set it: if that pass stopped on a full buffer, the rest of
                    // the body is still in the socket and `drive` must read it now
                    // (clearing it here left such requests unanswered forever).
                    grow(c, total, total);
                    return Err(self.body_pending(i, head));
                }
                ((head.len, total), total, None)
            }
            BodyFraming::Chunked => {
                match decode_chunked(&c.rbuf[c.rlo + head.len..c.rhi], max_body_bytes) {
                    Ok(Chunked::Done(b, used)) => ((0, 0), head.len + used, Some(b)),
                    Ok(Chunked::Partial) => {
                        c.head_started = None;
                        if c.rhi == c.rbuf.len() {
                            let cap = (max_body_bytes as usize)
                                .saturating_mul(2)
                                .saturating_add(1 << 16);
                            if !grow(c, avail * 2, cap) {
                                return Err(self.fail(i, 413));
                            }
                        }
                        return Err(self.body_pending(i, head));
                    }
                    Err(ParseError::HeadersTooLarge) => return Err(self.fail(i, 413)),
                    Err(e) => return Err(self.fail(i, e.status())),
                }
            }
        })
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
        if !self.ctx.answers(head.method.get(buf)) {
            let allow = self.ctx.allow();
            return self.fail_with(i, 405, allow);
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
    /// Waiting for credentials to be verified; retried when the waker fires.
    Parked,
}
