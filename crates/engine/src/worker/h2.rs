//! The HTTP/2 worker: one mio event loop per thread where each connection carries
//! many concurrent streams, driven through the sans-IO codec of `volley-h2`.
//!
//! Place in the flow: `run -> worker (shared loop + **h2**) -> transport` (TCP for
//! h2c, TLS for h2 by ALPN; generic over [`Transport`] like the HTTP/1.1
//! [`super::http1`]); the event loop, pacing and accounting are [`super::shared`]'s,
//! and it emits the same [`crate::Sample`] per request to the same [`Sink`].
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
use std::sync::Arc;

use volley_h2::{
    ConnError, EncodedHead, ErrorCode, Event, H2Conn, RequestHead, Settings, StreamId,
};

use super::shared::{run_loop, H2Stats, WorkerCore, WorkerStats};
use super::split::split_request;
use super::stamps::Stamps;
use super::streams::{
    field_accessors, on_stream, Driven, Lane, Multiplexed, OnStream, Reply, State,
};
use crate::conn::Transport;
use crate::decode::{BodyDecoder, BodySpec, SeenCoding};
use crate::{ErrorKind, Request, Sink};

/// Bytes of an HTTP/2 frame header, charged to a stream per DATA frame.
const FRAME_HEADER_BYTES: u64 = 9;

/// One request in flight (or waiting for its connection to come up).
pub(super) struct Flight {
    req: Arc<Request>,
    /// Its instants; `dispatched_ns` is the claim instant in a closed loop.
    at: Stamps,
    reply: Reply,
    /// Already re-sent once after a refusal.
    retried: bool,
}

impl Flight {
    fn new(req: Arc<Request>, intended_ns: u64, retried: bool) -> Flight {
        Flight {
            req,
            at: Stamps {
                intended_ns,
                dispatched_ns: intended_ns,
                ..Stamps::default()
            },
            reply: Reply::new(),
            retried,
        }
    }
}

on_stream!(Flight);

struct Conn<T> {
    sock: Option<T>,
    lane: Lane<StreamId, Flight>,
    h2: H2Conn,
    tls_handshake_ns: u64,
}

impl<T> Conn<T> {
    fn new() -> Self {
        Conn {
            sock: None,
            lane: Lane::new(),
            h2: H2Conn::new(Settings::default()),
            tls_handshake_ns: 0,
        }
    }
}

/// A request converted once for HTTP/2: its HPACK-encoded head and its body.
struct Prepared {
    head: EncodedHead,
    body_start: usize,
}

/// The HTTP/2 worker: many streams per connection.
pub(crate) struct H2Worker<'a, S, T: Transport> {
    core: WorkerCore<'a, S, T>,
    conns: Vec<Conn<T>>,
    streams_per_conn: usize,
    prepared: HashMap<u32, Arc<Prepared>>,
    /// Arrivals (open loop) or refused requests (both loops) waiting for a stream.
    /// Its requests count in `core.in_flight`; the in-flight integral counts
    /// `in_flight - queue.len()` (requests on a connection).
    queue: VecDeque<Flight>,
    h2stats: H2Stats,
    /// What every response body must meet (`Shared::body`).
    body: BodySpec,
    /// Decoders of finished streams, reused so a stream costs no allocation. Boxed
    /// because each moves into a `Flight` (kept small) and back, never re-allocated.
    #[allow(clippy::vec_box)]
    spare_decoders: Vec<Box<BodyDecoder>>,
}

impl<'a, S: Sink, T: Transport> H2Worker<'a, S, T> {
    /// The worker over `core`, with up to `streams` streams per connection; the open
    /// loop wakes by timerfd before arrivals, as HTTP/1.1's does (without it the loop
    /// polled the last millisecond before each: a whole core at 1,000 req/s or more).
    pub fn new(core: WorkerCore<'a, S, T>, streams: u32) -> Self {
        let core = core.with_arrival_timer();
        let slots = core.slots();
        let body = core.shared.body;
        H2Worker {
            core,
            conns: (0..slots).map(|_| Conn::new()).collect(),
            streams_per_conn: streams.max(1) as usize,
            prepared: HashMap::new(),
            queue: VecDeque::new(),
            h2stats: H2Stats::default(),
            body,
            spare_decoders: Vec::new(),
        }
    }

    /// Runs to the end of the load and returns the sink and counters.
    pub fn run(self) -> (S, WorkerStats, H2Stats) {
        let mut driven = Driven(self);
        run_loop(&mut driven);
        let w = driven.0;
        (w.core.sink, w.core.stats, w.h2stats)
    }

    /// Queues `f` as a new stream on the ready connection `slot`.
    fn submit(&mut self, slot: usize, mut f: Flight, now: u64) {
        let prepared = match self.prepare(&f.req) {
            Some(p) => p,
            None => {
                // A request HTTP/2 cannot carry (bad header for h2): counted, not sent.
                f.at.sent_at(now, self.core.open_loop);
                return self.record(f, Some(ErrorKind::Malformed), now);
            }
        };
        let c = &mut self.conns[slot];
        let body = &f.req.bytes[prepared.body_start..];
        match c.h2.submit_encoded(&prepared.head, body) {
            Ok(id) => {
                f.at.sent_at(now, self.core.open_loop);
                if !c.lane.charged {
                    c.lane.charged = true;
                    f.at.connect_ns = c.lane.connect_ns;
                    f.at.tls_handshake_ns = c.tls_handshake_ns;
                }
                c.lane.streams.insert(id, f);
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
        let r = split_request(&req.bytes)?;
        let head = EncodedHead::new(&RequestHead {
            method: &r.method,
            scheme: T::SCHEME,
            authority: &r.authority,
            path: &r.path,
            headers: &r.fields,
        })
        .ok()?;
        let p = Arc::new(Prepared {
            head,
            body_start: r.body_start,
        });
        self.prepared.insert(req.index, p.clone());
        Some(p)
    }

    /// Fills `slot` with requests up to its stream limit (closed loop, or the queue).
    fn fill(&mut self, slot: usize, now: u64) {
        loop {
            let c = &self.conns[slot];
            if c.lane.state != State::Ready
                || c.lane.load() >= self.streams_per_conn
                || !c.h2.can_submit()
            {
                break;
            }
            let Some(f) = self.claim(now) else { break };
            self.submit(slot, f, now);
        }
        self.flush_out(slot);
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
                    let kind = T::error_kind(&e, ErrorKind::Reset);
                    let now = self.core.now_ns();
                    return self.fail_conn(slot, kind, now);
                }
            }
        }
        if let Err(e) = sock.flush() {
            if e.kind() != io::ErrorKind::WouldBlock {
                let kind = T::error_kind(&e, ErrorKind::Reset);
                let now = self.core.now_ns();
                self.fail_conn(slot, kind, now);
            }
        }
    }

    /// Reads and feeds until the socket would block, handling events as they come.
    fn read(&mut self, slot: usize) {
        loop {
            let c = &mut self.conns[slot];
            let Some(sock) = c.sock.as_mut() else { return };
            match sock.read(&mut self.core.scratch) {
                Ok(0) => {
                    let now = self.core.now_ns();
                    let kind = if c.lane.streams.is_empty() && c.lane.pending.is_empty() {
                        None
                    } else {
                        Some(ErrorKind::Closed)
                    };
                    return self.conn_done(slot, kind, now);
                }
                Ok(n) => {
                    let now = self.core.now_ns();
                    c.lane.last_read_ns = now;
                    let fed = c.h2.feed(&self.core.scratch[..n]);
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
                    let kind = T::error_kind(&e, ErrorKind::Reset);
                    let now = self.core.now_ns();
                    return self.fail_conn(slot, kind, now);
                }
            }
        }
        let now = self.core.now_ns();
        let c = &self.conns[slot];
        if c.h2.is_going_away() && c.lane.streams.is_empty() {
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
                self.close_conn(slot, now);
                let pending = std::mem::take(&mut self.conns[slot].lane.pending);
                self.queue.extend(pending);
                self.core.deferred.push(slot);
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
                    if let Some(f) = c.lane.streams.get_mut(&stream) {
                        f.reply.status = status;
                        if f.at.first_byte_ns == 0 {
                            f.at.first_byte_ns = now;
                        }
                        if self.body.is_active() {
                            let head = c.h2.polled_head();
                            f.reply.seen = head
                                .content_encoding
                                .map_or(SeenCoding::Identity, SeenCoding::from_header);
                            let spec = self.body;
                            let mut d = self
                                .spare_decoders
                                .pop()
                                .unwrap_or_else(|| Box::new(BodyDecoder::new(spec)));
                            d.start();
                            f.reply.decode = Some(d);
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
                    if let Some(f) = c.lane.streams.get_mut(&stream) {
                        f.reply.body_bytes += len as u64;
                        f.reply.wire_bytes += len as u64 + FRAME_HEADER_BYTES;
                        if let Some(d) = f.reply.decode.as_deref_mut() {
                            d.push(c.h2.polled_data(), f.reply.seen);
                        }
                        if end_stream {
                            self.complete(slot, stream, now);
                        }
                    }
                }
                Event::Trailers { stream } => self.complete(slot, stream, now),
                Event::StreamReset { stream, code } => {
                    let Some(f) = self.conns[slot].lane.streams.remove(&stream) else {
                        continue;
                    };
                    if code == ErrorCode::RefusedStream && !f.retried {
                        // Refused streams were not processed: safe to send again, once,
                        // on whichever connection has room (this one is going away or
                        // at its limit). The intended time is kept.
                        self.h2stats.refused_retries += 1;
                        let mut again = Flight::new(f.req, f.at.intended_ns, true);
                        again.at.dispatched_ns = f.at.dispatched_ns;
                        self.queue.push_front(again);
                    } else {
                        self.h2stats.stream_resets += 1;
                        self.record(f, Some(ErrorKind::Reset), now);
                    }
                }
                Event::StreamError { stream, .. } => {
                    if let Some(f) = self.conns[slot].lane.streams.remove(&stream) {
                        self.record(f, Some(ErrorKind::Malformed), now);
                    }
                }
                Event::GoAway { .. } => self.h2stats.goaways += 1,
                Event::PeerSettings | Event::Ping => {}
            }
        }
        // Refused streams go to another connection with room, or a new one.
        self.place_queued(now);
    }
}

impl<'a, S: Sink, T: Transport> Multiplexed<'a, S, T> for H2Worker<'a, S, T> {
    type Key = StreamId;
    type Flight = Flight;

    field_accessors!(WorkerCore<'a, S, T>);

    fn new_flight(&self, req: Arc<Request>, intended_ns: u64) -> Flight {
        Flight::new(req, intended_ns, false)
    }

    /// A ready connection the codec lets open one more stream, or one coming up.
    fn room(&self, slot: usize) -> bool {
        let c = &self.conns[slot];
        match c.lane.state {
            State::Ready => c.lane.load() < self.streams_per_conn && c.h2.can_submit(),
            State::Connecting => c.lane.load() < self.streams_per_conn,
            State::Closed => false,
        }
    }

    fn takes_now(&self, slot: usize) -> bool {
        self.conns[slot].lane.state == State::Ready
    }

    fn send(&mut self, slot: usize, f: Flight, now: u64) {
        self.submit(slot, f, now);
        self.flush_out(slot);
    }

    fn open(&mut self, slot: usize, now: u64) {
        let registered = self.core.connect(slot, now, None);
        let c = &mut self.conns[slot];
        c.lane.connecting_from(now);
        c.tls_handshake_ns = 0;
        c.h2 = H2Conn::new(Settings {
            // Payloads and content fields only when bodies are checked.
            capture_content: self.body.is_active(),
            ..Settings::default()
        });
        match registered {
            Ok(sock) => {
                c.sock = Some(sock);
                c.lane.state = State::Connecting;
            }
            Err(_) => {
                c.lane.state = State::Closed;
                self.fail_conn(slot, ErrorKind::Connect, now);
            }
        }
    }

    fn close_conn(&mut self, slot: usize, now: u64) {
        let c = &mut self.conns[slot];
        if c.sock.take().is_some() {
            self.core.closed(now);
        }
        c.lane.state = State::Closed;
    }

    /// RST_STREAM(CANCEL): the server stops its work on the stream.
    fn cancel(&mut self, slot: usize, id: StreamId) {
        if self.conns[slot].h2.cancel(id) {
            self.h2stats.cancelled_streams += 1;
        }
    }

    fn top_up(&mut self, slot: usize, now: u64) {
        self.fill(slot, now);
    }

    fn on_ready(&mut self, slot: usize, readable: bool, writable: bool) {
        let Some(state) = self.conns.get(slot).map(|c| c.lane.state) else {
            return;
        };
        match state {
            State::Closed => {}
            State::Connecting => {
                let now = self.core.now_ns();
                let c = &mut self.conns[slot];
                let Some(sock) = c.sock.as_mut() else { return };
                match sock.finish_connect() {
                    Ok(false) => {}
                    Ok(true) => {
                        c.lane.connect_ns = now.saturating_sub(c.lane.connect_start_ns);
                        c.lane.last_read_ns = now;
                        c.tls_handshake_ns = sock.handshake_ns().min(c.lane.connect_ns);
                        c.lane.state = State::Ready;
                        let pending = std::mem::take(&mut c.lane.pending);
                        for f in pending {
                            self.submit(slot, f, now);
                        }
                        self.fill(slot, now);
                        if readable {
                            self.read(slot);
                        }
                    }
                    Err(e) => {
                        let kind = T::error_kind(&e, ErrorKind::Connect);
                        self.fail_conn(slot, kind, now);
                    }
                }
            }
            State::Ready => {
                if writable {
                    self.flush_out(slot);
                }
                if readable && self.conns[slot].lane.state == State::Ready {
                    self.read(slot);
                }
            }
        }
    }
}
