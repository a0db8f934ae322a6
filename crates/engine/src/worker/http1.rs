//! The HTTP/1.1 worker: one request at a time per connection, over any
//! [`Transport`] (plain TCP or TLS).
//!
//! Place in the flow: `run -> worker (shared loop + **http1**) -> transport`, beside
//! the HTTP/2 worker [`super::h2`]; the event loop, pacing and accounting are
//! [`super::shared`]'s, this file is what is particular to HTTP/1.1.
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
//! Open loop: the [`crate::pacer::Pacer`] releases arrivals; each goes to an idle connection, else a
//! new one (up to the cap), else waits in a queue (a cap hit) with its intended time
//! and the instant it was dispatched (queued), so its send lag splits into the
//! generator's lateness (dispatched - intended) and the wait for a connection
//! (sent - dispatched).
//!
//! Each worker keeps the time integral of its in-flight count ([`crate::live::InFlightIntegral`],
//! updated at every change, published with the counters) for Little's law.
mod lanes;

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;

use super::pollset::{Interest, PollFds};
use super::shared::{run_loop, Protocol, WorkerCore, WorkerStats};
use super::stamps::Stamps;
use crate::conn::Transport;
use crate::decode::BodyDecoder;
use crate::http1::{FrameError, ResponseReader};
use crate::{ErrorKind, Request, Sample, Sink};

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
    /// The current request's instants.
    at: Stamps,
    connect_start_ns: u64,
    reader: ResponseReader,
    /// Responses completed on this socket; > 0 means the socket is being reused.
    served: u32,
    /// The current request was already re-sent once after an idle close.
    retried: bool,
    /// Connecting without a request (opened ahead of demand, open loop).
    spare: bool,
    in_idle_list: bool,
    /// Decodes and checks bodies when [`super::Shared::body`] is active (made on first use).
    decode: Option<Box<BodyDecoder>>,
}

impl<T> Conn<T> {
    fn new() -> Self {
        Conn {
            sock: None,
            state: State::Closed,
            req: None,
            written: 0,
            at: Stamps::default(),
            connect_start_ns: 0,
            reader: ResponseReader::new(),
            served: 0,
            retried: false,
            spare: false,
            in_idle_list: false,
            decode: None,
        }
    }
}

/// The HTTP/1.1 worker: one request at a time per connection.
pub(crate) struct Worker<'a, S, T: Transport> {
    core: WorkerCore<'a, S, T>,
    wants_body: bool,
    /// The response body, for sources that want it (`RequestSource::wants_body`).
    body: Vec<u8>,
    conns: Vec<Conn<T>>,
    /// Open connections with no request (open loop).
    idle: Vec<usize>,
    /// Closed slots.
    free: Vec<usize>,
    /// Open loop: arrivals waiting for a connection (request, intended instant,
    /// dispatched instant).
    queue: VecDeque<(Arc<Request>, u64, u64)>,
    /// Connections still connecting that carry no request (`Conn::spare`): queued
    /// arrivals up to this many wait for them instead of opening more.
    spare_connecting: usize,
    /// Open loop: requests with a lane (a replay) and the slots their lanes hold.
    lanes: lanes::Lanes,
}

impl<'a, S: Sink, T: Transport> Worker<'a, S, T> {
    /// The worker over `core`; the open loop wakes by timerfd before arrivals.
    pub fn new(core: WorkerCore<'a, S, T>) -> Self {
        let wants_body = core.source.wants_body();
        let mut core = core.with_arrival_timer();
        let slots = core.slots();
        core.deferred.reserve(slots);
        Worker {
            core,
            wants_body,
            body: Vec::new(),
            conns: (0..slots).map(|_| Conn::new()).collect(),
            idle: Vec::with_capacity(slots),
            free: (0..slots).rev().collect(),
            queue: VecDeque::with_capacity(1024),
            spare_connecting: 0,
            lanes: lanes::Lanes::default(),
        }
    }

    /// Runs to the end of the load and returns the sink and counters.
    pub fn run(mut self) -> (S, WorkerStats) {
        run_loop(&mut self);
        (self.core.sink, self.core.stats)
    }

    /// A connection (`slot`, open and idle, or closed) can take work.
    fn next_for(&mut self, slot: usize, now: u64) {
        if self.core.open_loop && self.lanes.wants(slot) {
            return self.next_for_lane(slot, now);
        }
        if self.core.open_loop {
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
            self.assign(slot, req, intended, dispatched, now);
        } else {
            match self.core.claim_at(now) {
                Some(req) => self.assign(slot, req, now, now, now),
                None => {
                    if self.conns[slot].state != State::Closed {
                        self.close(slot, now);
                    }
                    self.free.push(slot);
                }
            }
        }
    }

    /// Makes `req` the current request of `slot`, with fresh per-request state (so a
    /// request that fails before it is sent reports no bytes of an earlier one), and
    /// sends it on the idle connection or opens one on the closed slot.
    fn assign(&mut self, slot: usize, req: Arc<Request>, intended: u64, dispatched: u64, now: u64) {
        let c = &mut self.conns[slot];
        c.reader.start(req.method == "HEAD");
        c.req = Some(req);
        c.at.intended_ns = intended;
        c.at.dispatched_ns = dispatched;
        c.at.first_byte_ns = 0;
        c.at.connect_ns = 0;
        c.at.tls_handshake_ns = 0;
        c.retried = false;
        let idle = c.state == State::Idle;
        self.core.in_flight += 1;
        self.core
            .in_flight_clock
            .set(now, self.core.in_flight as u64);
        if idle {
            self.send(slot, now);
        } else {
            self.open(slot, now);
        }
    }

    /// Starts a connect on `slot` (which may carry a request).
    fn open(&mut self, slot: usize, now: u64) {
        let lane = self.conns[slot].req.as_ref().and_then(|r| r.lane);
        let registered = self.core.connect(slot, now, lane);
        let c = &mut self.conns[slot];
        c.connect_start_ns = now;
        c.served = 0;
        match registered {
            Ok(sock) => {
                c.sock = Some(sock);
                c.state = State::Connecting;
                if c.req.is_none() {
                    c.spare = true;
                    self.spare_connecting += 1;
                }
            }
            Err(_) => {
                c.state = State::Closed;
                if c.req.is_some() {
                    c.at.sent_at(now, self.core.open_loop);
                    self.fail(slot, ErrorKind::Connect, now);
                } else {
                    self.next_for(slot, now);
                }
            }
        }
    }

    /// Drops the socket of `slot`.
    fn close(&mut self, slot: usize, now: u64) {
        let c = &mut self.conns[slot];
        if std::mem::take(&mut c.spare) {
            self.spare_connecting -= 1;
        }
        if c.sock.take().is_some() {
            self.core.closed(now);
        }
        c.state = State::Closed;
    }

    /// Writes the current request of `slot` from the start.
    fn send(&mut self, slot: usize, now: u64) {
        let c = &mut self.conns[slot];
        let Some(req) = c.req.as_ref() else { return };
        c.at.sent_at(now, self.core.open_loop);
        c.at.first_byte_ns = 0;
        c.written = 0;
        c.reader.start(req.method == "HEAD");
        if self.core.shared.body.is_active() {
            let spec = self.core.shared.body;
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
                    let now = self.core.shared.now_ns();
                    return self.fail(slot, ErrorKind::Reset, now);
                }
                Ok(n) => c.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let now = self.core.shared.now_ns();
                    return self.fail(slot, T::error_kind(&e, ErrorKind::Reset), now);
                }
            }
        }
        c.state = State::Reading;
    }

    /// Reads until the response is complete, the socket is drained, or an error.
    fn read(&mut self, slot: usize) {
        loop {
            let c = &mut self.conns[slot];
            let Some(sock) = c.sock.as_mut() else { return };
            match sock.read(&mut self.core.scratch) {
                Ok(0) => {
                    let now = self.core.shared.now_ns();
                    match c.reader.eof() {
                        Ok(resp) => return self.complete(slot, resp.status, false, now),
                        Err(e) => return self.fail_frame(slot, e, now),
                    }
                }
                Ok(n) => {
                    let now = self.core.shared.now_ns();
                    if c.at.first_byte_ns == 0 {
                        c.at.first_byte_ns = now;
                    }
                    // With body checks on, the coded body goes to the decoder (the
                    // source then gets no body).
                    let body = match (c.decode.as_deref_mut(), self.wants_body) {
                        (Some(d), _) => Some(d.input()),
                        (None, true) => Some(&mut self.body),
                        (None, false) => None,
                    };
                    match c.reader.push(&self.core.scratch[..n], body) {
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
                    let now = self.core.shared.now_ns();
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
        let (body_bytes, wire_body_bytes) = match c.decode.as_ref() {
            Some(d) => (d.decoded_bytes(), d.wire_body_bytes()),
            None => (c.reader.body_bytes(), c.reader.body_bytes()),
        };
        Sample {
            wire_bytes: c.reader.wire_bytes(),
            body_bytes,
            wire_body_bytes,
            request_index: c.req.as_ref().map_or(0, |r| r.index),
            ..c.at.sample(self.core.open_loop, done_ns, status, error)
        }
    }

    fn record(&mut self, slot: usize, status: u16, error: Option<ErrorKind>, now: u64) {
        let sample = self.sample(slot, status, error, now);
        self.core.record(&sample);
        if let Some(req) = self.conns[slot].req.take() {
            self.core.source.on_sample(&req, &sample);
            self.core.source.on_response(&req, status, &self.body);
        }
        self.core.in_flight -= 1;
        self.core
            .in_flight_clock
            .set(now, self.core.in_flight as u64);
    }

    fn complete(&mut self, slot: usize, status: u16, server_keep_alive: bool, now: u64) {
        let range = self.core.shared.cfg.accept_status;
        let mut error = (!(range.min..=range.max).contains(&status)).then_some(ErrorKind::Status);
        let c = &mut self.conns[slot];
        if let (None, Some(d)) = (error, c.decode.as_deref_mut()) {
            error = d.finish(c.reader.content_encoding());
        }
        self.record(slot, status, error, now);
        let c = &mut self.conns[slot];
        c.served += 1;
        if self.core.shared.cfg.keep_alive && server_keep_alive {
            c.state = State::Idle;
        } else {
            // The client closes as soon as the response is complete, as ab does, and
            // never waits for the server's FIN: a server that says `Connection: close`
            // but keeps the socket open would otherwise stall the slot until the
            // timeout, and waiting costs an extra wake-up and read per request. The
            // TIME_WAIT state then sits on the client's port; Linux reuses such ports
            // for new outgoing connects (net.ipv4.tcp_tw_reuse, on for loopback by
            // default, and set in the load namespaces of volley's labs), so a long
            // non-keep-alive run does not run out of ports there.
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
            self.core.stats.idle_close_retries += 1;
            self.open(slot, now);
            self.conns[slot].retried = true;
            return;
        }
        let status = self.conns[slot].reader.status();
        self.record(slot, status, Some(kind), now);
        if kind == ErrorKind::Connect {
            // Refused connects can fail synchronously; retrying from here would recurse
            // once per request, so the slot is picked up on the next loop turn.
            self.core.deferred.push(slot);
        } else {
            self.next_for(slot, now);
        }
    }
}

impl<'a, S: Sink, T: Transport> Protocol<'a, S, T> for Worker<'a, S, T> {
    fn core(&mut self) -> &mut WorkerCore<'a, S, T> {
        &mut self.core
    }

    /// Open-loop arrivals waiting for a connection (the only queue in this worker).
    fn queue_empty(&self) -> bool {
        self.queue.is_empty() && self.lanes.queued() == 0
    }

    /// Opens the initial connections; in a closed loop each starts with a request.
    fn start(&mut self, now: u64) {
        for _ in 0..self.core.share.connections {
            if self.core.open_loop {
                if let Some(slot) = self.free.pop() {
                    self.open(slot, now);
                }
            } else if let Some(req) = self.core.claim_at(now) {
                if let Some(slot) = self.free.pop() {
                    self.assign(slot, req, now, now, now);
                }
            }
        }
    }

    fn retry(&mut self, slot: usize, now: u64) {
        self.next_for(slot, now);
    }

    /// Open loop: an arrival goes to an idle connection, a new one, or the queue.
    /// `now` is its dispatched instant, whichever way it goes.
    fn dispatch(&mut self, req: Arc<Request>, intended: u64, now: u64) {
        if let Some(lane) = req.lane {
            return self.dispatch_lane(req, lane, intended, now);
        }
        while let Some(slot) = self.idle.pop() {
            self.conns[slot].in_idle_list = false;
            if self.conns[slot].state == State::Idle {
                self.assign(slot, req, intended, now, now);
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
        if self.core.open_here < self.core.share.max_connections {
            if let Some(slot) = self.free.pop() {
                self.assign(slot, req, intended, now, now);
                return;
            }
        }
        self.core.cap_hit(now);
        self.queue.push_back((req, intended, now));
    }

    fn queue_unreleased(&mut self, req: Arc<Request>, intended_ns: u64, end: u64) {
        self.queue.push_back((req, intended_ns, end));
    }

    fn watch(&self, fds: &mut PollFds) {
        for (slot, c) in self.conns.iter().enumerate() {
            let interest = match c.state {
                State::Closed => continue,
                State::Connecting => Interest::Write,
                State::Writing => Interest::ReadWrite,
                State::Idle | State::Reading => Interest::Read,
            };
            if let Some(fd) = c.sock.as_ref().and_then(T::raw_fd) {
                fds.watch(slot, fd, interest);
            }
        }
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
                let now = self.core.shared.now_ns();
                let c = &mut self.conns[slot];
                let Some(sock) = c.sock.as_mut() else { return };
                match sock.finish_connect() {
                    Ok(false) => {}
                    Ok(true) => {
                        if std::mem::take(&mut c.spare) {
                            self.spare_connecting -= 1;
                        }
                        c.at.connect_ns = now.saturating_sub(c.connect_start_ns);
                        c.at.tls_handshake_ns = sock.handshake_ns().min(c.at.connect_ns);
                        c.state = State::Idle;
                        if c.req.is_some() {
                            self.send(slot, now);
                        } else {
                            // TLS holds its Finished for a request; none came, so send it
                            // now (a failure shows on the next read).
                            let _ = sock.flush();
                            self.next_for(slot, now);
                        }
                    }
                    Err(e) => {
                        if c.req.is_some() {
                            c.at.sent_at(c.connect_start_ns, self.core.open_loop);
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
                    let now = self.core.shared.now_ns();
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

    /// Requests past their timeout become Timeout samples; connects past theirs, Connect.
    fn scan_timeouts(&mut self, now: u64) {
        for slot in 0..self.conns.len() {
            let c = &self.conns[slot];
            match c.state {
                State::Writing | State::Reading
                    if now.saturating_sub(c.at.sent_ns) >= self.core.timeout_ns =>
                {
                    self.fail(slot, ErrorKind::Timeout, now);
                }
                State::Connecting
                    if now.saturating_sub(c.connect_start_ns) >= self.core.connect_timeout_ns =>
                {
                    if c.req.is_some() {
                        let c = &mut self.conns[slot];
                        c.at.sent_at(c.connect_start_ns, self.core.open_loop);
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

    fn censor(&mut self, end: u64) {
        for slot in 0..self.conns.len() {
            if self.conns[slot].req.is_some() {
                let c = &mut self.conns[slot];
                if c.state == State::Connecting {
                    c.at.sent_at(end, self.core.open_loop);
                }
                let status = c.reader.status();
                self.record(slot, status, Some(ErrorKind::InFlight), end);
            }
            self.close(slot, end);
        }
        let lanes = self.lanes.drain();
        self.queue.extend(lanes);
        while let Some((req, intended_ns, dispatched_ns)) = self.queue.pop_front() {
            // Never sent: `sent_ns` 0 says so (the recorder counts only requests whose
            // first byte went out as sent, and gives them no service time or send lag);
            // its response time, end - intended, is still recorded as a lower bound.
            // Stamping `end` here once made every queued arrival count as sent in the
            // last instant, inflating the achieved send rate far past the offered one.
            let at = Stamps {
                intended_ns,
                dispatched_ns,
                ..Stamps::default()
            };
            let sample = Sample {
                request_index: req.index,
                ..at.sample(true, end, 0, Some(ErrorKind::InFlight))
            };
            self.core.record(&sample);
            self.core.source.on_sample(&req, &sample);
        }
    }
}
