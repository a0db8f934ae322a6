//! The HTTP/2 worker: one mio event loop per thread where each connection carries
//! many concurrent streams, driven through the sans-IO codec of `volley-h2`.
//!
//! Place in the flow: `run -> **H2Worker** -> (TLS) -> TCP`, beside the HTTP/1.1
//! [`crate::worker`]; it emits the same [`Sample`] per request to the same [`Sink`].
//!
//! The unit of concurrency is the stream. Closed loop: every connection keeps
//! `streams` requests outstanding (h2load's `-c x -m`). Open loop: an arrival goes to
//! the first connection with a free stream, else to a new connection (up to the cap),
//! else waits in a queue with its intended time (a cap hit). A stream the server
//! refused (RST_STREAM or GOAWAY with REFUSED_STREAM: it did no work) is re-sent once,
//! keeping its intended time; other resets are `Reset`, a broken frame or header block
//! is `Malformed`, and the connection is replaced.
//!
//! Body checks (`--compressed`, `--expect-size`, `--expect-sha256`) reuse the HTTP/1.1
//! decoder ([`BodyDecoder`]), one per stream in flight: the codec then keeps each
//! head's `content-encoding` and each DATA payload ([`Settings::capture_content`]),
//! and a stream's payloads are decoded as they arrive, so the same error kinds
//! (`Encoding`, `Validation`) and the same wire-vs-decoded byte counts come out.
//!
//! A stream that outlives the timeout is cancelled (RST_STREAM(CANCEL)) and recorded
//! as a `Timeout`; its slot serves the next request at once. Only a connection whose
//! streams are all late, with nothing received since the oldest of them was sent, is
//! taken for dead and replaced.
//!
//! As in the HTTP/1.1 worker, each request carries the instant its arrival was
//! dispatched (so its wait for a stream slot shows as connection wait, not as the
//! generator's lateness), and the worker keeps the time integral of the requests
//! holding a stream or waiting on a connection that is coming up (`in_flight` minus
//! the queue) for Little's law.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use mio::{Events, Interest, Poll, Token};
use volley_h2::{
    ConnError, EncodedHead, ErrorCode, Event, H2Conn, RequestHead, Settings, StreamId,
};

use crate::conn::{Tcp, Transport};
use crate::decode::{BodyDecoder, BodySpec, SeenCoding};
use crate::live::InFlightIntegral;
use crate::pacer::Pace;
use crate::sample::stamp_dispatched;
use crate::timer::poll_timeout;
use crate::tls::{TlsConnector, TlsTransport};
use crate::worker::{claim_request, Plan, Shared, WorkerStats};
use crate::{ErrorKind, Request, RequestSource, Sample, Sink};

/// Per-worker read buffer: several full frames per read.
const SCRATCH_BYTES: usize = 64 * 1024;
/// How often counters are published and timeouts scanned.
const HOUSEKEEPING_NS: u64 = 5_000_000;
/// How often `Sink::tick` is called.
const TICK_NS: u64 = 100_000_000;
/// Sleep in epoll only until this long before the next arrival (ms granularity).
const SPIN_WINDOW_NS: u64 = 1_000_000;
/// Arrivals released per loop turn when behind schedule.
const MAX_ARRIVALS_PER_TURN: usize = 256;
/// Bytes of an HTTP/2 frame header, charged to a stream per DATA frame.
const FRAME_HEADER_BYTES: u64 = 9;

/// HTTP/2 connection and stream events of a run, summed over workers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct H2Stats {
    /// GOAWAY frames received.
    pub goaways: u64,
    /// Streams the server refused (REFUSED_STREAM) that were re-sent once.
    pub refused_retries: u64,
    /// Streams the server reset otherwise (each also a `Reset` sample).
    pub stream_resets: u64,
    /// Connections that failed on a protocol error (a broken frame, HPACK, flow
    /// control), each failing its open streams as `Malformed`.
    pub connection_errors: u64,
    /// Streams we cancelled (RST_STREAM(CANCEL)) because they outlived the timeout,
    /// each also a `Timeout` sample.
    pub cancelled_streams: u64,
}

impl H2Stats {
    /// Adds another worker's counts.
    pub fn add(&mut self, o: &H2Stats) {
        self.goaways += o.goaways;
        self.refused_retries += o.refused_retries;
        self.stream_resets += o.stream_resets;
        self.connection_errors += o.connection_errors;
        self.cancelled_streams += o.cancelled_streams;
    }
}

/// Plain TCP (h2c, prior knowledge) or TLS (h2 by ALPN).
enum Sock {
    Tcp(Tcp),
    Tls(Box<TlsTransport>),
}

impl Sock {
    fn connect(tls: Option<&TlsConnector>, addr: SocketAddr) -> io::Result<Sock> {
        Ok(match tls {
            None => Sock::Tcp(Tcp::connect(&(), addr)?),
            Some(c) => Sock::Tls(Box::new(TlsTransport::connect(c, addr)?)),
        })
    }
    fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Sock::Tcp(s) => s.source(),
            Sock::Tls(s) => s.source(),
        }
    }
    fn finish_connect(&mut self) -> io::Result<bool> {
        match self {
            Sock::Tcp(s) => s.finish_connect(),
            Sock::Tls(s) => s.finish_connect(),
        }
    }
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Tcp(s) => Transport::read(s, buf),
            Sock::Tls(s) => Transport::read(s.as_mut(), buf),
        }
    }
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sock::Tcp(s) => Transport::write(s, buf),
            Sock::Tls(s) => Transport::write(s.as_mut(), buf),
        }
    }
    /// Pushes ciphertext the TLS session still holds (a write that would block
    /// leaves it there); nothing for TCP.
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sock::Tcp(_) => Ok(()),
            Sock::Tls(s) => s.stream_mut().flush_tls().map(|_| ()),
        }
    }
    fn handshake_ns(&self) -> u64 {
        match self {
            Sock::Tcp(_) => 0,
            Sock::Tls(s) => s.handshake_ns(),
        }
    }
    fn error_kind(&self, e: &io::Error, default: ErrorKind) -> ErrorKind {
        match self {
            Sock::Tcp(_) => default,
            Sock::Tls(_) => TlsTransport::error_kind(e, default),
        }
    }
}

/// One request in flight (or waiting for its connection to come up).
struct Flight {
    req: Arc<Request>,
    intended_ns: u64,
    /// When the arrival was dispatched (open loop); the claim instant in a closed loop.
    dispatched_ns: u64,
    sent_ns: u64,
    first_byte_ns: u64,
    connect_ns: u64,
    tls_handshake_ns: u64,
    status: u16,
    wire_bytes: u64,
    body_bytes: u64,
    /// Already re-sent once after a refusal.
    retried: bool,
    /// With body checks on: this stream's decoder, from its final head on.
    decode: Option<Box<BodyDecoder>>,
    /// The final head's `Content-Encoding`.
    seen: SeenCoding,
}

impl Flight {
    fn new(req: Arc<Request>, intended_ns: u64, retried: bool) -> Flight {
        Flight {
            req,
            intended_ns,
            dispatched_ns: intended_ns,
            sent_ns: 0,
            first_byte_ns: 0,
            connect_ns: 0,
            tls_handshake_ns: 0,
            status: 0,
            wire_bytes: 0,
            body_bytes: 0,
            retried,
            decode: None,
            seen: SeenCoding::Identity,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed,
    Connecting,
    Ready,
}

struct Conn {
    sock: Option<Sock>,
    state: State,
    h2: H2Conn,
    /// Streams in flight on this connection.
    streams: HashMap<StreamId, Flight>,
    /// Requests assigned while the connection comes up (submitted once it is ready).
    pending: Vec<Flight>,
    connect_start_ns: u64,
    connect_ns: u64,
    tls_handshake_ns: u64,
    /// The connect time was charged to a request already.
    charged: bool,
    /// When bytes last arrived (or the connection came up): a connection where
    /// nothing arrived since its late streams went out is dead, not merely slow.
    last_read_ns: u64,
}

impl Conn {
    fn new() -> Conn {
        Conn {
            sock: None,
            state: State::Closed,
            h2: H2Conn::new(Settings::default()),
            streams: HashMap::new(),
            pending: Vec::new(),
            connect_start_ns: 0,
            connect_ns: 0,
            tls_handshake_ns: 0,
            charged: false,
            last_read_ns: 0,
        }
    }
    fn load(&self) -> usize {
        self.streams.len() + self.pending.len()
    }
}

/// A request converted once for HTTP/2: its HPACK-encoded head and its body.
struct Prepared {
    head: EncodedHead,
    body_start: usize,
}

pub(crate) struct H2Worker<'a, S> {
    shared: &'a Shared<'a>,
    sink: S,
    source: Box<dyn RequestSource>,
    poll: Poll,
    conns: Vec<Conn>,
    tls: Option<TlsConnector>,
    scheme: &'static str,
    streams_per_conn: usize,
    prepared: HashMap<u32, Arc<Prepared>>,
    /// Arrivals (open loop) or refused requests (both loops) waiting for a stream.
    queue: VecDeque<Flight>,
    /// Slots to reopen on the next loop turn (after a failed connect).
    deferred: Vec<usize>,
    scratch: Vec<u8>,
    plan: Plan,
    open_loop: bool,
    arrivals: u64,
    starting_done: bool,
    in_flight: usize,
    /// Time integral of `in_flight - queue.len()` (requests on a connection).
    in_flight_clock: InFlightIntegral,
    open_here: usize,
    stats: WorkerStats,
    h2stats: H2Stats,
    unpublished: (u64, u64, u64),
    timeout_ns: u64,
    connect_timeout_ns: u64,
    /// What every response body must meet (`Shared::body`).
    body: BodySpec,
    /// Decoders of finished streams, reused so a stream costs no allocation. Boxed
    /// because each moves into a `Flight` (kept small) and back, never re-allocated.
    #[allow(clippy::vec_box)]
    spare_decoders: Vec<Box<BodyDecoder>>,
}

impl<'a, S: Sink> H2Worker<'a, S> {
    pub fn new(
        shared: &'a Shared<'a>,
        sink: S,
        source: Box<dyn RequestSource>,
        plan: Plan,
        streams: u32,
        tls: Option<TlsConnector>,
    ) -> io::Result<Self> {
        let open_loop = plan.pacer.is_some();
        let slots = plan.max_connections.max(plan.connections);
        Ok(H2Worker {
            shared,
            sink,
            source,
            poll: Poll::new()?,
            conns: (0..slots).map(|_| Conn::new()).collect(),
            scheme: if tls.is_some() { "https" } else { "http" },
            tls,
            streams_per_conn: streams.max(1) as usize,
            prepared: HashMap::new(),
            queue: VecDeque::new(),
            deferred: Vec::new(),
            scratch: vec![0; SCRATCH_BYTES],
            plan,
            open_loop,
            arrivals: 0,
            starting_done: false,
            in_flight: 0,
            in_flight_clock: InFlightIntegral::default(),
            open_here: 0,
            stats: WorkerStats::default(),
            h2stats: H2Stats::default(),
            unpublished: (0, 0, 0),
            timeout_ns: duration_ns(shared.cfg.timeout),
            connect_timeout_ns: duration_ns(shared.cfg.connect_timeout),
            body: shared.body,
            spare_decoders: Vec::new(),
        })
    }

    pub fn run(mut self) -> (S, WorkerStats, H2Stats) {
        let mut events = Events::with_capacity(1024);
        let now = now_ns(self.shared);
        for slot in 0..self.plan.connections.min(self.conns.len()) {
            if self.open_loop {
                self.open(slot, now);
            } else {
                self.reopen(slot, now);
            }
        }
        let mut next_housekeeping = now + HOUSEKEEPING_NS;
        let mut next_tick = now + TICK_NS;
        loop {
            let now = now_ns(self.shared);
            if self.shared.cfg.stop_flag.load(Ordering::Relaxed)
                || self.shared.abort.load(Ordering::Relaxed)
            {
                self.stats.stopped_early = true;
                break;
            }
            if self.shared.end_ns.is_some_and(|end| now >= end) {
                break;
            }
            while let Some(slot) = self.deferred.pop() {
                self.reopen(slot, now);
            }
            let wait_ns = if self.open_loop {
                self.release_arrivals(now)
            } else {
                None
            };
            self.note_in_flight(now);
            if self.starting_done && self.in_flight == 0 && self.queue.is_empty() {
                break;
            }
            let timeout = poll_timeout(
                now,
                next_housekeeping,
                wait_ns,
                self.shared.end_ns,
                !self.deferred.is_empty(),
                SPIN_WINDOW_NS,
            );
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    self.stats.stopped_early = true;
                    break;
                }
            }
            for ev in events.iter() {
                let readable = ev.is_readable() || ev.is_read_closed();
                let writable = ev.is_writable() || ev.is_error();
                self.on_event(ev.token().0, readable, writable);
                // Streams taken from the queue while handling it start counting here.
                let now = now_ns(self.shared);
                self.note_in_flight(now);
            }
            let now = now_ns(self.shared);
            if now >= next_housekeeping {
                next_housekeeping = now + HOUSEKEEPING_NS;
                self.scan_timeouts(now);
                self.publish(now);
            }
            if now >= next_tick {
                next_tick = now + TICK_NS;
                self.sink.tick(now);
            }
        }
        let end = now_ns(self.shared);
        self.finish(end);
        (self.sink, self.stats, self.h2stats)
    }

    /// Opens a closed `slot` with a request to carry (a waiting one, or in a closed
    /// loop a new one), so that a failing connect is charged to a request as in the
    /// HTTP/1.1 worker; with no work the slot stays closed.
    fn reopen(&mut self, slot: usize, now: u64) {
        if self.conns[slot].state != State::Closed {
            return;
        }
        if self.conns[slot].pending.is_empty() {
            let next = if self.open_loop {
                self.queue.pop_front()
            } else {
                self.claim(now)
            };
            match next {
                Some(f) => self.conns[slot].pending.push(f),
                None => return,
            }
        }
        self.open(slot, now);
    }

    /// The next request to start: a refused one first, else a new one if the run
    /// still starts requests.
    fn claim(&mut self, now: u64) -> Option<Flight> {
        if let Some(f) = self.queue.pop_front() {
            return Some(f);
        }
        if self.open_loop {
            return None;
        }
        self.claim_new().map(|req| Flight::new(req, now, false))
    }

    fn claim_new(&mut self) -> Option<Arc<Request>> {
        if self.starting_done {
            return None;
        }
        let r = claim_request(self.shared, &mut self.plan.reserved, self.source.as_mut());
        match r {
            Some(_) => {
                self.unpublished.0 += 1;
                self.in_flight += 1;
            }
            None => self.starting_done = true,
        }
        r
    }

    /// Open loop: sends every arrival that is due; returns ns until the next one.
    fn release_arrivals(&mut self, now: u64) -> Option<u64> {
        if self.starting_done {
            return None;
        }
        for _ in 0..MAX_ARRIVALS_PER_TURN {
            let pace = match self.plan.pacer.as_mut() {
                Some(p) => p.pace(now, self.arrivals),
                None => Pace::Done,
            };
            match pace {
                Pace::SendNow(intended) => {
                    let req = self.claim_new()?;
                    self.arrivals += 1;
                    let mut f = Flight::new(req, intended, false);
                    f.dispatched_ns = now;
                    self.dispatch(f, now);
                }
                Pace::Wait(ns) => return Some(ns),
                Pace::Done => {
                    self.starting_done = true;
                    return None;
                }
            }
        }
        Some(0)
    }

    /// Finds a stream for `f`: an open connection with room, one coming up with room,
    /// a new connection, or the queue (a cap hit in the open loop).
    fn dispatch(&mut self, f: Flight, now: u64) {
        let room = |c: &Conn, cap: usize| match c.state {
            State::Ready => c.load() < cap && c.h2.can_submit(),
            State::Connecting => c.load() < cap,
            State::Closed => false,
        };
        let cap = self.streams_per_conn;
        if let Some(slot) = self.conns.iter().position(|c| room(c, cap)) {
            return self.assign(slot, f, now);
        }
        if self.open_here < self.plan.max_connections {
            if let Some(slot) = self.conns.iter().position(|c| c.state == State::Closed) {
                self.conns[slot].pending.push(f);
                self.open(slot, now);
                return;
            }
        }
        if self.open_loop {
            self.stats.cap_hits += 1;
            self.sink.cap_hit(now);
        }
        self.queue.push_back(f);
    }

    fn assign(&mut self, slot: usize, f: Flight, now: u64) {
        match self.conns[slot].state {
            State::Ready => {
                self.submit(slot, f, now);
                self.flush_out(slot);
            }
            _ => self.conns[slot].pending.push(f),
        }
    }

    /// Opens a connection on `slot` (closed), keeping any pending requests.
    fn open(&mut self, slot: usize, now: u64) {
        self.stats.connections_opened += 1;
        let addr = self.shared.cfg.addr;
        let c = &mut self.conns[slot];
        c.connect_start_ns = now;
        c.connect_ns = 0;
        c.tls_handshake_ns = 0;
        c.charged = false;
        c.h2 = H2Conn::new(Settings {
            // Payloads and content fields only when bodies are checked.
            capture_content: self.body.is_active(),
            ..Settings::default()
        });
        let registered = Sock::connect(self.tls.as_ref(), addr).and_then(|mut sock| {
            self.poll
                .registry()
                .register(
                    sock.source(),
                    Token(slot),
                    Interest::READABLE | Interest::WRITABLE,
                )
                .map(|()| sock)
        });
        match registered {
            Ok(sock) => {
                c.sock = Some(sock);
                c.state = State::Connecting;
                self.open_here += 1;
                let open = self.shared.open.fetch_add(1, Ordering::Relaxed) + 1;
                self.shared.max_open.fetch_max(open, Ordering::Relaxed);
                self.shared.live.set_open(open);
                self.sink.connections(now, open);
            }
            Err(_) => {
                c.state = State::Closed;
                self.fail_conn(slot, ErrorKind::Connect, now);
            }
        }
    }

    fn close(&mut self, slot: usize, now: u64) {
        let c = &mut self.conns[slot];
        if c.sock.take().is_some() {
            self.open_here -= 1;
            let open = self
                .shared
                .open
                .fetch_sub(1, Ordering::Relaxed)
                .saturating_sub(1);
            self.shared.live.set_open(open);
            self.sink.connections(now, open);
        }
        c.state = State::Closed;
    }

    /// The connection on `slot` is unusable: its streams and pending requests fail
    /// with `kind`, and (closed loop) a replacement is opened on the next turn.
    fn fail_conn(&mut self, slot: usize, kind: ErrorKind, now: u64) {
        self.close(slot, now);
        let c = &mut self.conns[slot];
        let mut failed: Vec<Flight> = c.streams.drain().map(|(_, f)| f).collect();
        for mut f in c.pending.drain(..) {
            // Never sent: it failed while its connection was coming up.
            f.sent_ns = c.connect_start_ns.max(f.intended_ns);
            if !self.open_loop {
                f.intended_ns = f.sent_ns;
            }
            failed.push(f);
        }
        for f in failed {
            self.record(&f, Some(kind), now);
        }
        self.deferred.push(slot);
    }

    /// Queues `f` as a new stream on the ready connection `slot`.
    fn submit(&mut self, slot: usize, mut f: Flight, now: u64) {
        let prepared = match self.prepare(&f.req) {
            Some(p) => p,
            None => {
                // A request HTTP/2 cannot carry (bad header for h2): counted, not sent.
                f.sent_ns = now;
                if !self.open_loop {
                    f.intended_ns = now;
                }
                return self.record(&f, Some(ErrorKind::Malformed), now);
            }
        };
        let c = &mut self.conns[slot];
        let body = &f.req.bytes[prepared.body_start..];
        match c.h2.submit_encoded(&prepared.head, body) {
            Ok(id) => {
                f.sent_ns = now;
                if !self.open_loop {
                    f.intended_ns = now;
                }
                if !c.charged {
                    c.charged = true;
                    f.connect_ns = c.connect_ns;
                    f.tls_handshake_ns = c.tls_handshake_ns;
                }
                c.streams.insert(id, f);
            }
            // Closing or out of stream ids or over the limit: another connection.
            Err(_) => self.queue.push_front(f),
        }
    }

    /// Parses a serialised HTTP/1.1 request once into an HTTP/2 head.
    fn prepare(&mut self, req: &Request) -> Option<Arc<Prepared>> {
        if let Some(p) = self.prepared.get(&req.index) {
            return Some(p.clone());
        }
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut parsed = httparse::Request::new(&mut headers);
        let body_start = match parsed.parse(&req.bytes) {
            Ok(httparse::Status::Complete(n)) => n,
            _ => return None,
        };
        let mut fields: Vec<(String, String)> = Vec::new();
        let mut authority = String::new();
        for h in parsed.headers.iter() {
            let value = std::str::from_utf8(h.value).ok()?.to_string();
            if h.name.eq_ignore_ascii_case("host") {
                authority = value;
            } else {
                fields.push((h.name.to_ascii_lowercase(), value));
            }
        }
        let head = EncodedHead::new(&RequestHead {
            method: parsed.method?,
            scheme: self.scheme,
            authority: &authority,
            path: parsed.path?,
            headers: &fields,
        })
        .ok()?;
        let p = Arc::new(Prepared { head, body_start });
        self.prepared.insert(req.index, p.clone());
        Some(p)
    }

    /// Fills `slot` with requests up to its stream limit (closed loop, or the queue).
    fn fill(&mut self, slot: usize, now: u64) {
        loop {
            let c = &self.conns[slot];
            if c.state != State::Ready || c.load() >= self.streams_per_conn || !c.h2.can_submit() {
                break;
            }
            let Some(f) = self.claim(now) else { break };
            self.submit(slot, f, now);
        }
        self.flush_out(slot);
    }

    fn on_event(&mut self, slot: usize, readable: bool, writable: bool) {
        let Some(state) = self.conns.get(slot).map(|c| c.state) else {
            return;
        };
        match state {
            State::Closed => {}
            State::Connecting => {
                let now = now_ns(self.shared);
                let c = &mut self.conns[slot];
                let Some(sock) = c.sock.as_mut() else { return };
                match sock.finish_connect() {
                    Ok(false) => {}
                    Ok(true) => {
                        c.connect_ns = now.saturating_sub(c.connect_start_ns);
                        c.last_read_ns = now;
                        c.tls_handshake_ns = sock.handshake_ns().min(c.connect_ns);
                        c.state = State::Ready;
                        let pending = std::mem::take(&mut c.pending);
                        for f in pending {
                            self.submit(slot, f, now);
                        }
                        self.fill(slot, now);
                        if readable {
                            self.read(slot);
                        }
                    }
                    Err(e) => {
                        let kind = sock.error_kind(&e, ErrorKind::Connect);
                        self.fail_conn(slot, kind, now);
                    }
                }
            }
            State::Ready => {
                if writable {
                    self.flush_out(slot);
                }
                if readable && self.conns[slot].state == State::Ready {
                    self.read(slot);
                }
            }
        }
    }

    /// Writes the codec's output until it is empty or the socket would block.
    fn flush_out(&mut self, slot: usize) {
        let c = &mut self.conns[slot];
        let Some(sock) = c.sock.as_mut() else { return };
        loop {
            let out = c.h2.pending_output();
            if out.is_empty() {
                break;
            }
            match sock.write(out) {
                Ok(0) => break,
                Ok(n) => c.h2.consume_output(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let kind = sock.error_kind(&e, ErrorKind::Reset);
                    let now = now_ns(self.shared);
                    return self.fail_conn(slot, kind, now);
                }
            }
        }
        if let Err(e) = sock.flush() {
            if e.kind() != io::ErrorKind::WouldBlock {
                let kind = sock.error_kind(&e, ErrorKind::Reset);
                let now = now_ns(self.shared);
                self.fail_conn(slot, kind, now);
            }
        }
    }

    /// Reads and feeds until the socket would block, handling events as they come.
    fn read(&mut self, slot: usize) {
        loop {
            let c = &mut self.conns[slot];
            let Some(sock) = c.sock.as_mut() else { return };
            match sock.read(&mut self.scratch) {
                Ok(0) => {
                    let now = now_ns(self.shared);
                    let kind = if c.streams.is_empty() && c.pending.is_empty() {
                        None
                    } else {
                        Some(ErrorKind::Closed)
                    };
                    return self.conn_done(slot, kind, now);
                }
                Ok(n) => {
                    let now = now_ns(self.shared);
                    c.last_read_ns = now;
                    let fed = c.h2.feed(&self.scratch[..n]);
                    self.drain_events(slot, now);
                    if let Err(e) = fed {
                        self.h2stats.connection_errors += 1;
                        let kind = match e {
                            ConnError::GoAway { .. } => ErrorKind::Reset,
                            _ => ErrorKind::Malformed,
                        };
                        // Write the GOAWAY that tells the server why, best effort.
                        let c = &mut self.conns[slot];
                        if let Some(sock) = c.sock.as_mut() {
                            let _ = sock.write(c.h2.pending_output());
                            let _ = sock.flush();
                        }
                        return self.fail_conn(slot, kind, now);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let kind = sock.error_kind(&e, ErrorKind::Reset);
                    let now = now_ns(self.shared);
                    return self.fail_conn(slot, kind, now);
                }
            }
        }
        let now = now_ns(self.shared);
        let c = &self.conns[slot];
        if c.h2.is_going_away() && c.streams.is_empty() {
            // Drained after a GOAWAY: replace the connection.
            return self.conn_done(slot, None, now);
        }
        self.fill(slot, now);
    }

    /// The connection ended (EOF or drained GOAWAY): streams still open fail with
    /// `kind`, and the slot is reopened when there is work.
    fn conn_done(&mut self, slot: usize, kind: Option<ErrorKind>, now: u64) {
        match kind {
            Some(k) => self.fail_conn(slot, k, now),
            None => {
                self.close(slot, now);
                let pending = std::mem::take(&mut self.conns[slot].pending);
                self.queue.extend(pending);
                self.deferred.push(slot);
            }
        }
    }

    fn drain_events(&mut self, slot: usize, now: u64) {
        while let Some(ev) = self.conns[slot].h2.poll_event() {
            match ev {
                Event::Headers {
                    stream,
                    status,
                    end_stream,
                } => {
                    let c = &mut self.conns[slot];
                    if let Some(f) = c.streams.get_mut(&stream) {
                        f.status = status;
                        if f.first_byte_ns == 0 {
                            f.first_byte_ns = now;
                        }
                        if self.body.is_active() {
                            let head = c.h2.polled_head();
                            f.seen = head
                                .content_encoding
                                .map_or(SeenCoding::Identity, SeenCoding::from_header);
                            let spec = self.body;
                            let mut d = self
                                .spare_decoders
                                .pop()
                                .unwrap_or_else(|| Box::new(BodyDecoder::new(spec)));
                            d.start();
                            f.decode = Some(d);
                        }
                        if end_stream {
                            self.complete(slot, stream, now);
                        }
                    }
                }
                Event::Data {
                    stream,
                    len,
                    end_stream,
                } => {
                    let c = &mut self.conns[slot];
                    if let Some(f) = c.streams.get_mut(&stream) {
                        f.body_bytes += len as u64;
                        f.wire_bytes += len as u64 + FRAME_HEADER_BYTES;
                        if let Some(d) = f.decode.as_deref_mut() {
                            d.push(c.h2.polled_data(), f.seen);
                        }
                        if end_stream {
                            self.complete(slot, stream, now);
                        }
                    }
                }
                Event::Trailers { stream } => self.complete(slot, stream, now),
                Event::StreamReset { stream, code } => {
                    let Some(f) = self.conns[slot].streams.remove(&stream) else {
                        continue;
                    };
                    if code == ErrorCode::RefusedStream && !f.retried {
                        // Refused streams were not processed: safe to send again, once,
                        // on whichever connection has room (this one is going away or
                        // at its limit). The intended time is kept.
                        self.h2stats.refused_retries += 1;
                        let mut again = Flight::new(f.req, f.intended_ns, true);
                        again.dispatched_ns = f.dispatched_ns;
                        self.queue.push_front(again);
                    } else {
                        self.h2stats.stream_resets += 1;
                        self.record(&f, Some(ErrorKind::Reset), now);
                    }
                }
                Event::StreamError { stream, .. } => {
                    if let Some(f) = self.conns[slot].streams.remove(&stream) {
                        self.record(&f, Some(ErrorKind::Malformed), now);
                    }
                }
                Event::GoAway { .. } => self.h2stats.goaways += 1,
                Event::PeerSettings | Event::Ping => {}
            }
        }
        // Refused streams go to another connection with room, or a new one.
        while !self.queue.is_empty() && self.open_loop {
            let Some(f) = self.queue.pop_front() else {
                break;
            };
            let before = self.queue.len();
            self.dispatch(f, now);
            if self.queue.len() > before {
                break;
            }
        }
    }

    fn complete(&mut self, slot: usize, stream: StreamId, now: u64) {
        let Some(mut f) = self.conns[slot].streams.remove(&stream) else {
            return;
        };
        let range = self.shared.cfg.accept_status;
        let mut error = (!(range.min..=range.max).contains(&f.status)).then_some(ErrorKind::Status);
        if let (None, Some(d)) = (error, f.decode.as_deref_mut()) {
            error = d.finish(f.seen);
        }
        self.record(&f, error, now);
        if let Some(d) = f.decode.take() {
            self.spare_decoders.push(d);
        }
    }

    /// The in-flight count changed (or may have): account the old one up to `now`.
    fn note_in_flight(&mut self, now: u64) {
        let on_conn = self.in_flight.saturating_sub(self.queue.len());
        self.in_flight_clock.set(now, on_conn as u64);
    }

    fn record(&mut self, f: &Flight, error: Option<ErrorKind>, now: u64) {
        // A request still waiting for a stream when the run ends was never sent: 0 says
        // so (not counted as sent, no send lag or service time; see the HTTP/1.1
        // worker's `finish`). Other failures before the first byte are stamped `now`.
        let never_sent = f.sent_ns == 0 && error == Some(ErrorKind::InFlight);
        let sent_ns = if f.sent_ns == 0 && !never_sent {
            now
        } else {
            f.sent_ns
        };
        let sample = Sample {
            intended_ns: f.intended_ns,
            dispatched_ns: stamp_dispatched(
                self.open_loop,
                f.intended_ns,
                f.dispatched_ns,
                sent_ns,
            ),
            sent_ns,
            first_byte_ns: f.first_byte_ns,
            done_ns: now,
            connect_ns: f.connect_ns,
            tls_handshake_ns: f.tls_handshake_ns,
            status: f.status,
            wire_bytes: f.wire_bytes,
            // With a decoder: decoded bytes beside the coded ones on the wire.
            body_bytes: f
                .decode
                .as_ref()
                .map_or(f.body_bytes, |d| d.decoded_bytes()),
            wire_body_bytes: f.body_bytes,
            error,
            request_index: f.req.index,
        };
        self.sink.record(&sample);
        self.unpublished.1 += 1;
        if error.is_some() {
            self.unpublished.2 += 1;
        }
        self.source.on_response(&f.req, f.status, &[]);
        self.in_flight = self.in_flight.saturating_sub(1);
        self.note_in_flight(now);
    }

    fn scan_timeouts(&mut self, now: u64) {
        for slot in 0..self.conns.len() {
            let c = &mut self.conns[slot];
            match c.state {
                State::Connecting
                    if now.saturating_sub(c.connect_start_ns) >= self.connect_timeout_ns =>
                {
                    self.fail_conn(slot, ErrorKind::Connect, now);
                }
                State::Ready => {
                    let timeout = self.timeout_ns;
                    let late: Vec<StreamId> = c
                        .streams
                        .iter()
                        .filter(|(_, f)| now.saturating_sub(f.sent_ns) >= timeout)
                        .map(|(&id, _)| id)
                        .collect();
                    if late.is_empty() {
                        continue;
                    }
                    // Every stream late and not one byte since the oldest of them
                    // went out: the connection (or the server) is dead, so it is
                    // replaced. Otherwise the server is alive and only slow on these
                    // streams: cancelling them frees their slots here and their work
                    // on the server.
                    let oldest_sent_ns = late
                        .iter()
                        .filter_map(|id| c.streams.get(id))
                        .map(|f| f.sent_ns)
                        .min()
                        .unwrap_or(now);
                    let dead = late.len() == c.streams.len() && c.last_read_ns <= oldest_sent_ns;
                    for id in late {
                        let c = &mut self.conns[slot];
                        if let Some(f) = c.streams.remove(&id) {
                            if !dead && c.h2.cancel(id) {
                                self.h2stats.cancelled_streams += 1;
                            }
                            self.record(&f, Some(ErrorKind::Timeout), now);
                        }
                    }
                    if dead {
                        self.close(slot, now);
                        self.deferred.push(slot);
                    } else {
                        self.flush_out(slot);
                    }
                }
                _ => {}
            }
        }
        // Closed loop: a slot closed for lack of work may be needed again.
        if !self.open_loop {
            for slot in 0..self.conns.len() {
                if self.conns[slot].state == State::Ready {
                    self.fill(slot, now);
                }
            }
        }
    }

    fn publish(&mut self, now: u64) {
        let (s, d, e) = std::mem::take(&mut self.unpublished);
        self.shared.live.publish(s, d, e);
        self.note_in_flight(now);
        self.shared
            .live
            .publish_in_flight(self.in_flight_clock.unpublished(now));
    }

    /// End of the run: streams in flight, requests waiting for a connection and
    /// queued arrivals become censored InFlight samples with `done_ns = end`.
    fn finish(&mut self, end: u64) {
        if self.open_loop {
            for _ in 0..MAX_ARRIVALS_PER_TURN * 16 {
                let Some(Pace::SendNow(intended)) =
                    self.plan.pacer.as_mut().map(|p| p.pace(end, self.arrivals))
                else {
                    break;
                };
                let Some(req) = self.claim_new() else { break };
                self.arrivals += 1;
                // Handled only now: dispatched at the end, a lower bound like sent.
                let mut f = Flight::new(req, intended, false);
                f.dispatched_ns = end;
                self.queue.push_back(f);
            }
        }
        self.starting_done = true;
        for slot in 0..self.conns.len() {
            let c = &mut self.conns[slot];
            let mut left: Vec<Flight> = c.streams.drain().map(|(_, f)| f).collect();
            left.append(&mut c.pending);
            for f in left {
                self.record(&f, Some(ErrorKind::InFlight), end);
            }
            self.close(slot, end);
        }
        while let Some(f) = self.queue.pop_front() {
            self.record(&f, Some(ErrorKind::InFlight), end);
        }
        self.publish(end);
        self.sink.tick(end);
    }
}

/// Nanoseconds since the run started, on the run's one clock.
fn now_ns(shared: &Shared<'_>) -> u64 {
    shared.start.elapsed().as_nanos() as u64
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
