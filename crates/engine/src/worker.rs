//! One worker thread: an edge-triggered epoll (mio) loop over its share of connections.
//!
//! Hot path per request (keep-alive): one `write` of prebuilt bytes, one `read` into a
//! scratch buffer shared by all of the worker's connections (reads stop as soon as the
//! response is framed: no extra read to meet `EAGAIN`, since a complete response with
//! no pipelining leaves nothing to drain, and the next response raises a new edge), no
//! `epoll_ctl` (interest is registered once, read and write, edge-triggered), one
//! `Sink::record`. Measured: 2.03 syscalls per request against wrk's 4.09.
//!
//! Clock reads: one per read that returns bytes, plus two per loop turn. The instant a
//! read returns is the response's first byte and, when that read completes it (a
//! typical small response), also its done instant; the next request on that
//! connection is written at once and takes the same instant as its `sent` (the write
//! follows within the same loop step, well under a microsecond). So in steady state
//! one `clock_gettime` serves `done` of one request and `sent` of the next; `intended`
//! equals `sent` in a closed loop and comes from the schedule in an open one.
//!
//! No allocation and no lock: a request is an `Arc` clone, a response only moves
//! counters (the header block is copied only when split across reads, into a
//! per-connection buffer that is reused).
//!
//! Closed loop: each slot sends its next request when the previous one finishes.
//! Open loop: the [`Pacer`] releases arrivals; each goes to an idle connection, else a
//! new one (up to the cap), else waits in a queue (a cap hit) with its intended time
//! and the instant it was dispatched (queued), so its send lag splits into the
//! generator's lateness (dispatched - intended) and the wait for a connection
//! (sent - dispatched).
//!
//! Each worker keeps the time integral of its in-flight count ([`InFlightIntegral`],
//! updated at every change, published with the counters) for Little's law.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};

use crate::conn::Transport;
use crate::decode::{BodyDecoder, BodySpec};
use crate::http1::{FrameError, ResponseReader};
use crate::live::InFlightIntegral;
use crate::pacer::{Pace, Pacer};
use crate::sample::stamp_dispatched;
use crate::timer::{poll_timeout, ArrivalTimer, EARLY_WAKE_NS};
use crate::{ErrorKind, Live, LoadConfig, Request, RequestSource, Sample, Sink};

/// Size of the per-worker read buffer: one read takes a typical response whole.
const SCRATCH_BYTES: usize = 64 * 1024;
/// How often counters are published to [`Live`] and timeouts are scanned.
const HOUSEKEEPING_NS: u64 = 5_000_000;
/// How often `Sink::tick` is called (the contract asks for at least once a second).
const TICK_NS: u64 = 100_000_000;
/// epoll timeouts are whole milliseconds (mio rounds up). Without an [`ArrivalTimer`]
/// (timerfd refused), the loop sleeps in epoll only until this long before the next
/// arrival and then polls without blocking.
const SPIN_WINDOW_NS: u64 = 1_000_000;
/// The open-loop arrival timer's token: past every connection slot.
const TIMER_TOKEN: Token = Token(usize::MAX);
/// Arrivals released per loop turn when behind schedule, so events are still served.
const MAX_ARRIVALS_PER_TURN: usize = 256;

/// State shared by all workers of one run.
pub(crate) struct Shared<'a> {
    pub cfg: &'a LoadConfig,
    pub live: &'a Live,
    pub start: Instant,
    /// End of the run by duration, ns since start.
    pub end_ns: Option<u64>,
    /// Connections open across workers, and the most ever open at once.
    pub open: AtomicU32,
    pub max_open: AtomicU32,
    /// Started-request tickets (only used when `stop.requests` is set).
    pub tickets: AtomicU64,
    /// Set by `run` when a later worker failed to start, so earlier ones stop.
    pub abort: AtomicBool,
    /// Body checks (content coding, expected size or hash); inactive by default.
    pub body: BodySpec,
}

impl Shared<'_> {
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

/// What a worker hands back besides its sink.
#[derive(Debug, Default)]
pub(crate) struct WorkerStats {
    pub cap_hits: u64,
    pub connections_opened: u64,
    pub idle_close_retries: u64,
    pub stopped_early: bool,
}

/// A worker's share of the configuration.
pub(crate) struct Plan {
    pub connections: usize,
    /// Closed loop with a request limit: tickets set aside for this worker's initial
    /// requests before any worker started, so every worker opens its share of the
    /// connections even if another worker's thread started first and raced through
    /// the shared tickets (which made the connection count depend on thread start-up).
    pub reserved: u64,
    pub max_connections: usize,
    pub pacer: Option<Pacer>,
}

/// The next request a worker may start, or `None` when it must start no more: its own
/// reserved tickets first (see [`Plan::reserved`]), then, in a run limited to `-n`
/// requests, a ticket from the shared counter, each paired with its source's next
/// request. One function for the HTTP/1.1 and HTTP/2 workers, so both start exactly `n`
/// requests and both honour the reservation.
pub(crate) fn claim_request(
    shared: &Shared<'_>,
    reserved: &mut u64,
    source: &mut dyn RequestSource,
) -> Option<Arc<Request>> {
    if *reserved > 0 {
        *reserved -= 1;
    } else if let Some(limit) = shared.cfg.stop.requests {
        if shared.tickets.fetch_add(1, Ordering::Relaxed) >= limit {
            return None;
        }
    }
    source.next_request()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No socket.
    Closed,
    /// Non-blocking connect in progress.
    Connecting,
    /// Connected, no request.
    Idle,
    /// Request partly written.
    Writing,
    /// Request written, response being read.
    Reading,
}

struct Conn<T> {
    sock: Option<T>,
    state: State,
    req: Option<Arc<Request>>,
    written: usize,
    intended_ns: u64,
    /// When the current request's arrival was dispatched (open loop).
    dispatched_ns: u64,
    sent_ns: u64,
    first_byte_ns: u64,
    connect_start_ns: u64,
    /// Connect time charged to the current request (0 on a reused connection).
    connect_ns: u64,
    /// The TLS handshake part of `connect_ns`.
    tls_handshake_ns: u64,
    reader: ResponseReader,
    /// Responses completed on this socket; > 0 means the socket is being reused.
    served: u32,
    /// The current request was already re-sent once after an idle close.
    retried: bool,
    /// Connecting without a request (opened ahead of demand, open loop).
    spare: bool,
    in_idle_list: bool,
    /// Decodes and checks bodies when [`Shared::body`] is active (made on first use).
    decode: Option<Box<BodyDecoder>>,
}

impl<T> Conn<T> {
    fn new() -> Self {
        Conn {
            sock: None,
            state: State::Closed,
            req: None,
            written: 0,
            intended_ns: 0,
            dispatched_ns: 0,
            sent_ns: 0,
            first_byte_ns: 0,
            connect_start_ns: 0,
            connect_ns: 0,
            tls_handshake_ns: 0,
            reader: ResponseReader::new(),
            served: 0,
            retried: false,
            spare: false,
            in_idle_list: false,
            decode: None,
        }
    }
}

pub(crate) struct Worker<'a, S, T: Transport> {
    shared: &'a Shared<'a>,
    sink: S,
    source: Box<dyn RequestSource>,
    wants_body: bool,
    body: Vec<u8>,
    poll: Poll,
    conns: Vec<Conn<T>>,
    idle: Vec<usize>,
    free: Vec<usize>,
    /// Open loop: arrivals waiting for a connection (request, intended instant,
    /// dispatched instant).
    queue: VecDeque<(Arc<Request>, u64, u64)>,
    /// Slots whose connect failed, to be given new work on the next loop turn.
    deferred: Vec<usize>,
    scratch: Vec<u8>,
    plan: Plan,
    open_loop: bool,
    /// Arrivals released by the pacer so far.
    arrivals: u64,
    /// No new request will be started (count reached, schedule over, source empty).
    starting_done: bool,
    /// Requests with a connection assigned (connecting, writing or reading).
    in_flight: usize,
    /// Time integral of `in_flight`, for Little's law.
    in_flight_clock: InFlightIntegral,
    /// Connections still connecting that carry no request (`Conn::spare`): queued
    /// arrivals up to this many wait for them instead of opening more.
    spare_connecting: usize,
    open_here: usize,
    stats: WorkerStats,
    unpublished: (u64, u64, u64),
    timeout_ns: u64,
    connect_timeout_ns: u64,
    /// Open loop: wakes the loop just before the next arrival (`None` in a closed loop,
    /// or when the OS refused a timerfd: then the loop busy-polls the last ms).
    timer: Option<ArrivalTimer>,
    /// Shared by this worker's connections (e.g. the TLS config and session cache).
    connector: T::Connector,
}

impl<'a, S: Sink, T: Transport> Worker<'a, S, T> {
    pub fn new(
        shared: &'a Shared<'a>,
        sink: S,
        source: Box<dyn RequestSource>,
        plan: Plan,
        connector: T::Connector,
    ) -> io::Result<Self> {
        let wants_body = source.wants_body();
        let open_loop = plan.pacer.is_some();
        let slots = plan.max_connections.max(plan.connections);
        let poll = Poll::new()?;
        let timer = if open_loop {
            ArrivalTimer::new(poll.registry(), TIMER_TOKEN).ok()
        } else {
            None
        };
        Ok(Worker {
            shared,
            sink,
            source,
            wants_body,
            body: Vec::new(),
            poll,
            timer,
            conns: (0..slots).map(|_| Conn::new()).collect(),
            idle: Vec::with_capacity(slots),
            free: (0..slots).rev().collect(),
            queue: VecDeque::with_capacity(1024),
            deferred: Vec::with_capacity(slots),
            scratch: vec![0; SCRATCH_BYTES],
            plan,
            open_loop,
            arrivals: 0,
            starting_done: false,
            in_flight: 0,
            in_flight_clock: InFlightIntegral::default(),
            spare_connecting: 0,
            open_here: 0,
            stats: WorkerStats::default(),
            unpublished: (0, 0, 0),
            timeout_ns: duration_ns(shared.cfg.timeout),
            connect_timeout_ns: duration_ns(shared.cfg.connect_timeout),
            connector,
        })
    }

    /// Runs to the end of the load and returns the sink and counters.
    pub fn run(mut self) -> (S, WorkerStats) {
        let mut events = Events::with_capacity(1024);
        let now = self.shared.now_ns();
        self.start(now);
        let mut next_housekeeping = now + HOUSEKEEPING_NS;
        let mut next_tick = now + TICK_NS;
        loop {
            let now = self.shared.now_ns();
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
                self.next_for(slot, now);
            }
            let wait_ns = if self.open_loop {
                self.release_arrivals(now)
            } else {
                None
            };
            if self.starting_done && self.in_flight == 0 && self.queue.is_empty() {
                break;
            }
            // Sleep in epoll only when the wake-up is far enough for ms granularity;
            // with the arrival timer armed, epoll may sleep past the next arrival
            // (to the next housekeeping or the end) since the timer's event wakes it.
            let timeout = if !self.deferred.is_empty() {
                Duration::ZERO
            } else if let (Some(w), Some(timer)) = (wait_ns, self.timer.as_mut()) {
                if w <= EARLY_WAKE_NS || timer.arm(now + w, w - EARLY_WAKE_NS).is_err() {
                    Duration::ZERO
                } else {
                    let mut sleep_ns = next_housekeeping.saturating_sub(now);
                    if let Some(end) = self.shared.end_ns {
                        sleep_ns = sleep_ns.min(end.saturating_sub(now));
                    }
                    Duration::from_nanos(sleep_ns)
                }
            } else {
                poll_timeout(
                    now,
                    next_housekeeping,
                    wait_ns,
                    self.shared.end_ns,
                    false,
                    SPIN_WINDOW_NS,
                )
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    // The event queue itself failed: nothing more can be measured.
                    self.stats.stopped_early = true;
                    break;
                }
            }
            for ev in events.iter() {
                if ev.token() == TIMER_TOKEN {
                    continue;
                }
                let slot = ev.token().0;
                self.on_event(
                    slot,
                    ev.is_readable() || ev.is_read_closed(),
                    ev.is_writable() || ev.is_error(),
                );
            }
            let now = self.shared.now_ns();
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
        let end = self.shared.now_ns();
        self.finish(end);
        (self.sink, self.stats)
    }

    /// Opens the initial connections; in a closed loop each starts with a request.
    fn start(&mut self, now: u64) {
        for _ in 0..self.plan.connections {
            if self.open_loop {
                if let Some(slot) = self.free.pop() {
                    self.open(slot, now);
                }
            } else if let Some(req) = self.claim() {
                if let Some(slot) = self.free.pop() {
                    self.assign_new(slot, req, now, now, now);
                }
            }
        }
    }

    /// The next request to start, if the run still starts requests.
    fn claim(&mut self) -> Option<Arc<Request>> {
        if self.starting_done {
            return None;
        }
        let r = claim_request(self.shared, &mut self.plan.reserved, self.source.as_mut());
        match r {
            Some(_) => self.unpublished.0 += 1,
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
                    let req = self.claim()?;
                    self.arrivals += 1;
                    self.dispatch(req, intended, now);
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

    /// Open loop: an arrival goes to an idle connection, a new one, or the queue.
    /// `now` is its dispatched instant, whichever way it goes.
    fn dispatch(&mut self, req: Arc<Request>, intended: u64, now: u64) {
        while let Some(slot) = self.idle.pop() {
            self.conns[slot].in_idle_list = false;
            if self.conns[slot].state == State::Idle {
                self.assign_idle(slot, req, intended, now, now);
                return;
            }
        }
        if self.queue.len() < self.spare_connecting {
            // A connection opened ahead of demand (the initial pool) will be ready
            // sooner than a new one: wait for it. Without this every arrival of the
            // first hundred microseconds opened a connection of its own.
            self.queue.push_back((req, intended, now));
            return;
        }
        if self.open_here < self.plan.max_connections {
            if let Some(slot) = self.free.pop() {
                self.assign_new(slot, req, intended, now, now);
                return;
            }
        }
        self.stats.cap_hits += 1;
        self.sink.cap_hit(now);
        self.queue.push_back((req, intended, now));
    }

    /// A connection (`slot`, open and idle, or closed) can take work.
    fn next_for(&mut self, slot: usize, now: u64) {
        if self.open_loop {
            let Some((req, intended, dispatched)) = self.queue.pop_front() else {
                if self.conns[slot].state == State::Idle {
                    if !self.conns[slot].in_idle_list {
                        self.conns[slot].in_idle_list = true;
                        self.idle.push(slot);
                    }
                } else {
                    self.free.push(slot);
                }
                return;
            };
            if self.conns[slot].state == State::Idle {
                self.assign_idle(slot, req, intended, dispatched, now);
            } else {
                self.assign_new(slot, req, intended, dispatched, now);
            }
        } else {
            match self.claim() {
                Some(req) if self.conns[slot].state == State::Idle => {
                    self.assign_idle(slot, req, now, now, now)
                }
                Some(req) => self.assign_new(slot, req, now, now, now),
                None => {
                    if self.conns[slot].state != State::Closed {
                        self.close(slot, now);
                    }
                    self.free.push(slot);
                }
            }
        }
    }

    fn assign_idle(
        &mut self,
        slot: usize,
        req: Arc<Request>,
        intended: u64,
        dispatched: u64,
        now: u64,
    ) {
        self.take_request(slot, req, intended, dispatched, now);
        self.conns[slot].connect_ns = 0;
        self.conns[slot].tls_handshake_ns = 0;
        self.send(slot, now);
    }

    /// Makes `req` the current request of `slot`, with fresh per-request state (so a
    /// request that fails before it is sent reports no bytes of an earlier one).
    fn take_request(
        &mut self,
        slot: usize,
        req: Arc<Request>,
        intended: u64,
        dispatched: u64,
        now: u64,
    ) {
        let c = &mut self.conns[slot];
        c.reader.start(req.method == "HEAD");
        c.req = Some(req);
        c.intended_ns = intended;
        c.dispatched_ns = dispatched;
        c.first_byte_ns = 0;
        c.connect_ns = 0;
        c.tls_handshake_ns = 0;
        c.retried = false;
        self.in_flight += 1;
        self.in_flight_clock.set(now, self.in_flight as u64);
    }

    /// Opens a connection on a closed `slot` for `req`.
    fn assign_new(
        &mut self,
        slot: usize,
        req: Arc<Request>,
        intended: u64,
        dispatched: u64,
        now: u64,
    ) {
        self.take_request(slot, req, intended, dispatched, now);
        self.open(slot, now);
    }

    /// Starts a TCP connect on `slot` (which may carry a request).
    fn open(&mut self, slot: usize, now: u64) {
        self.stats.connections_opened += 1;
        let addr = self.shared.cfg.addr;
        let c = &mut self.conns[slot];
        c.connect_start_ns = now;
        c.served = 0;
        let registered = T::connect(&self.connector, addr).and_then(|mut sock| {
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
                if c.req.is_none() {
                    c.spare = true;
                    self.spare_connecting += 1;
                }
                self.open_here += 1;
                let open = self.shared.open.fetch_add(1, Ordering::Relaxed) + 1;
                self.shared.max_open.fetch_max(open, Ordering::Relaxed);
                self.shared.live.set_open(open);
                self.sink.connections(now, open);
            }
            Err(_) => {
                c.state = State::Closed;
                if c.req.is_some() {
                    c.sent_ns = now;
                    if !self.open_loop {
                        c.intended_ns = now;
                    }
                    self.fail(slot, ErrorKind::Connect, now);
                } else {
                    self.next_for(slot, now);
                }
            }
        }
    }

    /// Drops the socket of `slot` (closing the fd also removes it from epoll).
    fn close(&mut self, slot: usize, now: u64) {
        let c = &mut self.conns[slot];
        if std::mem::take(&mut c.spare) {
            self.spare_connecting -= 1;
        }
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

    /// Writes the current request of `slot` from the start.
    fn send(&mut self, slot: usize, now: u64) {
        let c = &mut self.conns[slot];
        let Some(req) = c.req.as_ref() else { return };
        c.sent_ns = now;
        if !self.open_loop {
            c.intended_ns = now;
        }
        c.first_byte_ns = 0;
        c.written = 0;
        c.reader.start(req.method == "HEAD");
        if self.shared.body.is_active() {
            let spec = self.shared.body;
            c.decode
                .get_or_insert_with(|| Box::new(BodyDecoder::new(spec)))
                .start();
        }
        if self.wants_body {
            self.body.clear();
        }
        c.state = State::Writing;
        self.write_more(slot);
    }

    fn write_more(&mut self, slot: usize) {
        let c = &mut self.conns[slot];
        let (Some(sock), Some(req)) = (c.sock.as_mut(), c.req.as_ref()) else {
            return;
        };
        while c.written < req.bytes.len() {
            match sock.write(&req.bytes[c.written..]) {
                Ok(0) => {
                    let now = self.shared.now_ns();
                    return self.fail(slot, ErrorKind::Reset, now);
                }
                Ok(n) => c.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let now = self.shared.now_ns();
                    return self.fail(slot, T::error_kind(&e, ErrorKind::Reset), now);
                }
            }
        }
        c.state = State::Reading;
    }

    fn on_event(&mut self, slot: usize, readable: bool, writable: bool) {
        let Some(state) = self.conns.get(slot).map(|c| c.state) else {
            return;
        };
        match state {
            State::Closed => {}
            State::Connecting => {
                if !(readable || writable) {
                    return;
                }
                let now = self.shared.now_ns();
                let c = &mut self.conns[slot];
                let Some(sock) = c.sock.as_mut() else { return };
                match sock.finish_connect() {
                    Ok(false) => {}
                    Ok(true) => {
                        if std::mem::take(&mut c.spare) {
                            self.spare_connecting -= 1;
                        }
                        c.connect_ns = now.saturating_sub(c.connect_start_ns);
                        c.tls_handshake_ns = sock.handshake_ns().min(c.connect_ns);
                        c.state = State::Idle;
                        if c.req.is_some() {
                            self.send(slot, now);
                        } else {
                            self.next_for(slot, now);
                        }
                    }
                    Err(e) => {
                        if c.req.is_some() {
                            c.sent_ns = c.connect_start_ns;
                            if !self.open_loop {
                                c.intended_ns = c.connect_start_ns;
                            }
                            self.fail(slot, T::error_kind(&e, ErrorKind::Connect), now);
                        } else {
                            self.close(slot, now);
                            self.next_for(slot, now);
                        }
                    }
                }
            }
            State::Writing => {
                if writable {
                    self.write_more(slot);
                }
                if readable && self.conns[slot].state == State::Reading {
                    self.read(slot);
                }
            }
            State::Reading => {
                if readable {
                    self.read(slot);
                }
            }
            State::Idle => {
                if readable
                    && !self.conns[slot]
                        .sock
                        .as_mut()
                        .is_some_and(|sock| sock.idle_readable())
                {
                    // An idle connection has nothing to read: the server closed it or
                    // sent stray bytes. Either way it cannot be reused.
                    let now = self.shared.now_ns();
                    self.close(slot, now);
                    if self.conns[slot].in_idle_list {
                        self.conns[slot].in_idle_list = false;
                        self.idle.retain(|&s| s != slot);
                    }
                    self.next_for(slot, now);
                }
            }
        }
    }

    /// Reads until the response is complete, the socket is drained, or an error.
    fn read(&mut self, slot: usize) {
        loop {
            let c = &mut self.conns[slot];
            let Some(sock) = c.sock.as_mut() else { return };
            match sock.read(&mut self.scratch) {
                Ok(0) => {
                    let now = self.shared.now_ns();
                    match c.reader.eof() {
                        Ok(resp) => return self.complete(slot, resp.status, false, now),
                        Err(e) => return self.fail_frame(slot, e, now),
                    }
                }
                Ok(n) => {
                    let now = self.shared.now_ns();
                    if c.first_byte_ns == 0 {
                        c.first_byte_ns = now;
                    }
                    // With body checks on, the coded body goes to the decoder (the
                    // source then gets no body).
                    let body = match (c.decode.as_deref_mut(), self.wants_body) {
                        (Some(d), _) => Some(d.input()),
                        (None, true) => Some(&mut self.body),
                        (None, false) => None,
                    };
                    match c.reader.push(&self.scratch[..n], body) {
                        Ok(Some(resp)) => {
                            return self.complete(slot, resp.status, resp.keep_alive, now)
                        }
                        // Incomplete: read again until WouldBlock. A short read is
                        // not proof of a drained socket here: a FIN queued with the
                        // data raised no separate edge, and would be missed.
                        Ok(None) => {
                            if let Some(d) = c.decode.as_deref_mut() {
                                d.drain(c.reader.content_encoding());
                            }
                        }
                        Err(e) => return self.fail_frame(slot, e, now),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let now = self.shared.now_ns();
                    return self.fail(slot, T::error_kind(&e, ErrorKind::Reset), now);
                }
            }
        }
    }

    fn fail_frame(&mut self, slot: usize, e: FrameError, now: u64) {
        self.fail(slot, e.kind(), now)
    }

    fn sample(&self, slot: usize, status: u16, error: Option<ErrorKind>, done_ns: u64) -> Sample {
        let c = &self.conns[slot];
        Sample {
            intended_ns: c.intended_ns,
            dispatched_ns: stamp_dispatched(
                self.open_loop,
                c.intended_ns,
                c.dispatched_ns,
                c.sent_ns,
            ),
            sent_ns: c.sent_ns,
            first_byte_ns: c.first_byte_ns,
            done_ns,
            connect_ns: c.connect_ns,
            tls_handshake_ns: c.tls_handshake_ns,
            status,
            wire_bytes: c.reader.wire_bytes(),
            body_bytes: c
                .decode
                .as_ref()
                .map_or(c.reader.body_bytes(), |d| d.decoded_bytes()),
            wire_body_bytes: c
                .decode
                .as_ref()
                .map_or(c.reader.body_bytes(), |d| d.wire_body_bytes()),
            error,
            request_index: c.req.as_ref().map_or(0, |r| r.index),
        }
    }

    fn record(&mut self, slot: usize, status: u16, error: Option<ErrorKind>, now: u64) {
        let sample = self.sample(slot, status, error, now);
        self.sink.record(&sample);
        self.unpublished.1 += 1;
        if error.is_some() {
            self.unpublished.2 += 1;
        }
        if let Some(req) = self.conns[slot].req.take() {
            self.source.on_response(&req, status, &self.body);
        }
        self.in_flight -= 1;
        self.in_flight_clock.set(now, self.in_flight as u64);
    }

    fn complete(&mut self, slot: usize, status: u16, server_keep_alive: bool, now: u64) {
        let range = self.shared.cfg.accept_status;
        let mut error = (!(range.min..=range.max).contains(&status)).then_some(ErrorKind::Status);
        let c = &mut self.conns[slot];
        if let (None, Some(d)) = (error, c.decode.as_deref_mut()) {
            error = d.finish(c.reader.content_encoding());
        }
        self.record(slot, status, error, now);
        let c = &mut self.conns[slot];
        c.served += 1;
        if self.shared.cfg.keep_alive && server_keep_alive {
            c.state = State::Idle;
        } else {
            // The client closes as soon as the response is complete, as ab does, and
            // never waits for the server's FIN: a server that says `Connection: close`
            // but keeps the socket open would otherwise stall the slot until the
            // timeout, and waiting costs an extra wake-up and read per request. The
            // TIME_WAIT state then sits on the client's port; Linux reuses such ports
            // for new outgoing connects (net.ipv4.tcp_tw_reuse, on for loopback by
            // default), so a long non-keep-alive run does not run out of ports there.
            self.close(slot, now);
        }
        self.next_for(slot, now);
    }

    /// The current request of `slot` failed with `kind`; the connection is closed.
    fn fail(&mut self, slot: usize, kind: ErrorKind, now: u64) {
        let c = &self.conns[slot];
        let idle_closed = matches!(kind, ErrorKind::Closed | ErrorKind::Reset)
            && c.served > 0
            && !c.reader.any_bytes()
            && !c.retried;
        self.close(slot, now);
        if idle_closed {
            // The server closed a kept-alive connection while it was idle (its
            // keep-alive timeout raced our request): re-send once on a fresh
            // connection, as browsers and wrk do, keeping the intended time.
            self.stats.idle_close_retries += 1;
            self.open(slot, now);
            self.conns[slot].retried = true;
            return;
        }
        let status = self.conns[slot].reader.status();
        self.record(slot, status, Some(kind), now);
        if kind == ErrorKind::Connect {
            // Refused connects can fail synchronously; retrying from here would recurse
            // once per request, so the slot is picked up on the next loop turn.
            self.deferred.push(slot);
        } else {
            self.next_for(slot, now);
        }
    }

    /// Requests past their timeout become Timeout samples; connects past theirs, Connect.
    fn scan_timeouts(&mut self, now: u64) {
        for slot in 0..self.conns.len() {
            let c = &self.conns[slot];
            match c.state {
                State::Writing | State::Reading
                    if now.saturating_sub(c.sent_ns) >= self.timeout_ns =>
                {
                    self.fail(slot, ErrorKind::Timeout, now);
                }
                State::Connecting
                    if now.saturating_sub(c.connect_start_ns) >= self.connect_timeout_ns =>
                {
                    if c.req.is_some() {
                        let c = &mut self.conns[slot];
                        c.sent_ns = c.connect_start_ns;
                        if !self.open_loop {
                            c.intended_ns = c.connect_start_ns;
                        }
                        self.fail(slot, ErrorKind::Connect, now);
                    } else {
                        self.close(slot, now);
                        self.next_for(slot, now);
                    }
                }
                _ => {}
            }
        }
    }

    fn publish(&mut self, now: u64) {
        let (s, d, e) = std::mem::take(&mut self.unpublished);
        self.shared.live.publish(s, d, e);
        self.shared
            .live
            .publish_in_flight(self.in_flight_clock.unpublished(now));
    }

    /// End of the run: everything still in flight or queued becomes a censored
    /// InFlight sample with `done_ns = end`; then all sockets close.
    fn finish(&mut self, end: u64) {
        // Arrivals due before the end that the loop had not released yet (it checks
        // the end before pacing) are censored too, so every scheduled arrival in
        // [0, end) has exactly one sample.
        if self.open_loop {
            for _ in 0..MAX_ARRIVALS_PER_TURN * 16 {
                let Some(Pace::SendNow(intended)) =
                    self.plan.pacer.as_mut().map(|p| p.pace(end, self.arrivals))
                else {
                    break;
                };
                let Some(req) = self.claim() else { break };
                self.arrivals += 1;
                // Handled only now: dispatched at the end, a lower bound like sent.
                self.queue.push_back((req, intended, end));
            }
        }
        self.starting_done = true;
        for slot in 0..self.conns.len() {
            if self.conns[slot].req.is_some() {
                let c = &mut self.conns[slot];
                if c.state == State::Connecting {
                    c.sent_ns = end;
                    if !self.open_loop {
                        c.intended_ns = end;
                    }
                }
                let status = c.reader.status();
                self.record(slot, status, Some(ErrorKind::InFlight), end);
            }
            self.close(slot, end);
        }
        while let Some((req, intended, dispatched)) = self.queue.pop_front() {
            // Never sent: `sent_ns` 0 says so (the recorder counts only requests whose
            // first byte went out as sent, and gives them no service time or send lag);
            // its response time, end - intended, is still recorded as a lower bound.
            // Stamping `end` here once made every queued arrival count as sent in the
            // last instant, inflating the achieved send rate far past the offered one.
            let sample = Sample {
                intended_ns: intended,
                dispatched_ns: stamp_dispatched(true, intended, dispatched, 0),
                sent_ns: 0,
                first_byte_ns: 0,
                done_ns: end,
                connect_ns: 0,
                tls_handshake_ns: 0,
                status: 0,
                wire_bytes: 0,
                body_bytes: 0,
                wire_body_bytes: 0,
                error: Some(ErrorKind::InFlight),
                request_index: req.index,
            };
            self.sink.record(&sample);
            self.unpublished.1 += 1;
            self.unpublished.2 += 1;
        }
        self.publish(end);
        self.sink.tick(end);
    }
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
