//! What the HTTP/2 and HTTP/3 workers do alike: the one worker shape of a protocol
//! that carries many streams per connection ([`Multiplexed`]). It claims requests,
//! places them on a connection with a free stream (else a new connection, else the
//! queue), reopens and fails connections, finds the streams that outlived the
//! timeout (and whether the connection is dead), censors what is left at the end,
//! and turns a request that ended on a stream into its [`Sample`]; it implements the
//! shared loop's [`Protocol`] for both. Each protocol supplies only what differs:
//! how a connection opens, closes and takes a request, how a late stream is
//! cancelled, and how its socket's readiness is handled.
//!
//! Place in the flow: beside [`super::shared`] (the loop all workers share), under
//! [`super::h2`] and [`super::h3`], whose `Flight`s differ in what their protocol needs
//! (a refusal retried once; request bytes, early data, a response reader) but not in
//! this.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Arc;

use super::shared::{Protocol, WorkerCore};
use super::stamps::Stamps;
use crate::config::StatusRange;
use crate::conn::Transport;
use crate::decode::{BodyDecoder, SeenCoding};
use crate::{ErrorKind, Request, Sample, Sink};

/// A request on a stream, as this module needs to see it.
pub(super) trait OnStream {
    /// Its instants.
    fn stamps(&self) -> &Stamps;
    /// Its instants, to stamp.
    fn stamps_mut(&mut self) -> &mut Stamps;
    /// What its response counted.
    fn reply_mut(&mut self) -> &mut Reply;
    /// The request.
    fn request(&self) -> &Request;
}

/// [`OnStream`] for a protocol's `Flight` that keeps its instants in `at`, its reply in
/// `reply` and its request in `req` (h2's and h3's do): the four accessors written once.
macro_rules! on_stream {
    ($flight:ty) => {
        impl OnStream for $flight {
            fn stamps(&self) -> &Stamps {
                &self.at
            }

            fn stamps_mut(&mut self) -> &mut Stamps {
                &mut self.at
            }

            fn reply_mut(&mut self) -> &mut Reply {
                &mut self.reply
            }

            fn request(&self) -> &Request {
                &self.req
            }
        }
    };
}
pub(super) use on_stream;

/// What a stream's response counted so far, alike in both protocols.
pub(super) struct Reply {
    /// Its final status (0 until one came).
    pub status: u16,
    /// Bytes of its response on the wire (frames included).
    pub wire_bytes: u64,
    /// Body bytes as received.
    pub body_bytes: u64,
    /// With body checks on: this stream's decoder, from its final head on.
    pub decode: Option<Box<BodyDecoder>>,
    /// The final head's `Content-Encoding`.
    pub seen: SeenCoding,
}

impl Reply {
    /// Nothing received yet.
    pub fn new() -> Reply {
        Reply {
            status: 0,
            wire_bytes: 0,
            body_bytes: 0,
            decode: None,
            seen: SeenCoding::Identity,
        }
    }

    /// What it counted, for its sample (decoded body bytes beside the coded ones).
    fn ended(&self) -> Ended {
        Ended {
            status: self.status,
            wire_bytes: self.wire_bytes,
            body_bytes: self.body_bytes,
            decoded_bytes: self
                .decode
                .as_ref()
                .map_or(self.body_bytes, |d| d.decoded_bytes()),
        }
    }

    /// The error a complete response is, if any: a status outside `accept`, else what
    /// the body checks found.
    fn verdict(&mut self, accept: StatusRange) -> Option<ErrorKind> {
        if !(accept.min..=accept.max).contains(&self.status) {
            return Some(ErrorKind::Status);
        }
        self.decode.as_deref_mut().and_then(|d| d.finish(self.seen))
    }
}

/// Where a connection is. For HTTP/3 `Connecting` is the QUIC handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    Closed,
    Connecting,
    Ready,
}

/// What every multiplexed connection keeps, whatever its protocol: its state, its
/// streams in flight (by stream id `K`) and the requests waiting for it to come up.
pub(super) struct Lane<K, F> {
    pub state: State,
    /// Streams in flight on this connection.
    pub streams: HashMap<K, F>,
    /// Requests assigned while the connection comes up (submitted once it is ready).
    pub pending: Vec<F>,
    pub connect_start_ns: u64,
    pub connect_ns: u64,
    /// The connect time was charged to a request already.
    pub charged: bool,
    /// When bytes last arrived (or the connection came up): a connection where
    /// nothing arrived since its late streams went out is dead, not merely slow.
    pub last_read_ns: u64,
}

impl<K, F> Lane<K, F> {
    /// A closed connection with nothing on it.
    pub fn new() -> Self {
        Lane {
            state: State::Closed,
            streams: HashMap::new(),
            pending: Vec::new(),
            connect_start_ns: 0,
            connect_ns: 0,
            charged: false,
            last_read_ns: 0,
        }
    }

    /// Requests on it or waiting for it.
    pub fn load(&self) -> usize {
        self.streams.len() + self.pending.len()
    }

    /// A connect starts at `now`: nothing of the last one's timing is kept.
    pub fn connecting_from(&mut self, now: u64) {
        self.connect_start_ns = now;
        self.connect_ns = 0;
        self.charged = false;
    }
}

/// The [`Multiplexed`] accessors that only reach a worker's own fields, alike in every
/// worker that keeps `core`, `queue`, `spare_decoders` and a `lane` in each of its
/// `conns` (h2, h3). A trait cannot see fields, and one struct of them would put every
/// field access of both workers behind it, so the seven one-liners are written once
/// here and expanded in each `impl Multiplexed`; `$core` is the worker's
/// `WorkerCore<..>` type.
macro_rules! field_accessors {
    ($core:ty) => {
        fn core_mut(&mut self) -> &mut $core {
            &mut self.core
        }

        fn queue(&mut self) -> &mut std::collections::VecDeque<Self::Flight> {
            &mut self.queue
        }

        fn queue_ref(&self) -> &std::collections::VecDeque<Self::Flight> {
            &self.queue
        }

        fn slots(&self) -> usize {
            self.conns.len()
        }

        fn lane(&mut self, slot: usize) -> &mut Lane<Self::Key, Self::Flight> {
            &mut self.conns[slot].lane
        }

        fn lane_ref(&self, slot: usize) -> &Lane<Self::Key, Self::Flight> {
            &self.conns[slot].lane
        }

        fn spare_decoders(&mut self) -> &mut Vec<Box<crate::decode::BodyDecoder>> {
            &mut self.spare_decoders
        }
    };
}
pub(super) use field_accessors;

/// A worker whose connections each carry many concurrent streams (HTTP/2, HTTP/3).
/// The required methods are what its protocol does its own way; the provided ones,
/// and the [`Protocol`] every such worker gets from them, are the shape all share:
/// closed loop keeps every connection full; open loop sends an arrival to the first
/// connection with room, else a new connection (up to the cap), else the queue.
pub(super) trait Multiplexed<'a, S: Sink, T: Transport> {
    /// A stream's id.
    type Key: Copy + Eq + Hash;
    /// A request in flight, as the protocol keeps it.
    type Flight: OnStream;

    /// The state every worker keeps.
    fn core_mut(&mut self) -> &mut WorkerCore<'a, S, T>;
    /// Arrivals (open loop) or requests sent back (both loops) waiting for a
    /// stream. They count in `in_flight`, but not in its integral (not on a
    /// connection).
    fn queue(&mut self) -> &mut VecDeque<Self::Flight>;
    /// The queue, to look at.
    fn queue_ref(&self) -> &VecDeque<Self::Flight>;
    /// How many connection slots there are.
    fn slots(&self) -> usize;
    /// The shared part of connection `slot`.
    fn lane(&mut self, slot: usize) -> &mut Lane<Self::Key, Self::Flight>;
    /// The shared part of connection `slot`, to look at.
    fn lane_ref(&self, slot: usize) -> &Lane<Self::Key, Self::Flight>;
    /// A request due at `intended_ns`, not yet on a stream.
    fn new_flight(&self, req: Arc<Request>, intended_ns: u64) -> Self::Flight;
    /// Connection `slot` can take one more request (now or once it is up).
    fn room(&self, slot: usize) -> bool;
    /// Connection `slot` sends a request it takes at once (else it waits there).
    fn takes_now(&self, slot: usize) -> bool;
    /// Puts `f` on a new stream of `slot` and sends what can go.
    fn send(&mut self, slot: usize, f: Self::Flight, now: u64);
    /// Opens a connection on the closed `slot`, keeping its pending requests.
    fn open(&mut self, slot: usize, now: u64);
    /// Closes `slot` (what its protocol says on leaving, best effort).
    fn close_conn(&mut self, slot: usize, now: u64);
    /// Decoders of finished streams, reused so a stream costs no allocation.
    #[allow(clippy::vec_box)]
    fn spare_decoders(&mut self) -> &mut Vec<Box<BodyDecoder>>;
    /// Tells the server that stream `id` of `slot` is given up (it timed out).
    fn cancel(&mut self, slot: usize, id: Self::Key);
    /// Fills `slot` up to its stream limit and sends what can go.
    fn top_up(&mut self, slot: usize, now: u64);
    /// Handles readiness of connection `slot`'s socket.
    fn on_ready(&mut self, slot: usize, readable: bool, writable: bool);
    /// The protocol's own timers (see [`Protocol::fire_timers`]).
    fn due_timers(&mut self, _now: u64) -> Option<u64> {
        None
    }
    /// A connect outlived the connect timeout (counted where the protocol counts).
    fn connect_timed_out(&mut self) {}

    /// Records `f`'s sample, ended at `now` with `error` (see [`record`]); its decoder
    /// is kept for the next stream.
    fn record(&mut self, mut f: Self::Flight, error: Option<ErrorKind>, now: u64) {
        let (at, ended) = (*f.stamps(), f.reply_mut().ended());
        record(self.core_mut(), f.request(), at, ended, error, now);
        self.note_in_flight(now);
        if let Some(d) = f.reply_mut().decode.take() {
            self.spare_decoders().push(d);
        }
    }

    /// Stream `id` of `slot` ended (its FIN, or trailers): its sample, with the error
    /// its status or body checks make it.
    fn complete(&mut self, slot: usize, id: Self::Key, now: u64) {
        let Some(mut f) = self.lane(slot).streams.remove(&id) else {
            return;
        };
        let error = f
            .reply_mut()
            .verdict(self.core_mut().shared.cfg.accept_status);
        self.record(f, error, now);
    }

    /// Opens `slot` again when there is work for it: what waits for it, else the
    /// queue's first (open loop) or a new request (closed loop).
    fn reopen(&mut self, slot: usize, now: u64) {
        if self.lane_ref(slot).state != State::Closed {
            return;
        }
        if self.lane_ref(slot).pending.is_empty() {
            let next = if self.core_mut().open_loop {
                self.queue().pop_front()
            } else {
                self.claim(now)
            };
            match next {
                Some(f) => self.lane(slot).pending.push(f),
                None => return,
            }
        }
        self.open(slot, now);
    }

    /// The next request to start: a queued one first, else (closed loop) a new one
    /// if the run still starts requests, stamped `now` and counted in flight from its
    /// claim. Its ticket is decided at that same instant, so a request stamped before
    /// the warm-up boundary never takes one of `-n`'s measured tickets.
    fn claim(&mut self, now: u64) -> Option<Self::Flight> {
        if let Some(f) = self.queue().pop_front() {
            return Some(f);
        }
        if self.core_mut().open_loop {
            return None;
        }
        let req = self.core_mut().claim_at(now)?;
        self.core_mut().in_flight += 1;
        Some(self.new_flight(req, now))
    }

    /// Finds a stream for `f`: a connection with room, a new connection, or the
    /// queue (a cap hit in the open loop).
    fn place(&mut self, f: Self::Flight, now: u64) {
        if let Some(slot) = (0..self.slots()).find(|&s| self.room(s)) {
            if self.takes_now(slot) {
                self.send(slot, f, now);
            } else {
                self.lane(slot).pending.push(f);
            }
            return;
        }
        let core = self.core_mut();
        if core.open_here < core.share.max_connections {
            let closed = (0..self.slots()).find(|&s| self.lane_ref(s).state == State::Closed);
            if let Some(slot) = closed {
                self.lane(slot).pending.push(f);
                return self.open(slot, now);
            }
        }
        if self.core_mut().open_loop {
            self.core_mut().cap_hit(now);
        }
        self.queue().push_back(f);
    }

    /// Open loop: requests waiting in the queue go to connections with room, until
    /// one goes back to the queue.
    fn place_queued(&mut self, now: u64) {
        while self.core_mut().open_loop {
            let Some(f) = self.queue().pop_front() else {
                break;
            };
            let before = self.queue_ref().len();
            self.place(f, now);
            if self.queue_ref().len() > before {
                break;
            }
        }
    }

    /// The connection on `slot` is unusable: its streams and pending requests fail
    /// with `kind`, and a replacement is opened on the next turn.
    fn fail_conn(&mut self, slot: usize, kind: ErrorKind, now: u64) {
        self.close_conn(slot, now);
        let open_loop = self.core_mut().open_loop;
        let lane = self.lane(slot);
        let start = lane.connect_start_ns;
        let mut failed: Vec<Self::Flight> = lane.streams.drain().map(|(_, f)| f).collect();
        for mut f in lane.pending.drain(..) {
            // Never sent: it failed while its connection was coming up.
            let at = f.stamps_mut();
            at.sent_at(start.max(at.intended_ns), open_loop);
            failed.push(f);
        }
        for f in failed {
            self.record(f, Some(kind), now);
        }
        self.core_mut().deferred.push(slot);
    }

    /// No arrival or request sent back waits for a stream.
    fn queue_empty(&self) -> bool {
        self.queue_ref().is_empty()
    }

    /// Opens the initial connections (closed loop: each with its first request).
    fn start(&mut self, now: u64) {
        let core = self.core_mut();
        let (open_loop, connections) = (core.open_loop, core.share.connections);
        for slot in 0..connections.min(self.slots()) {
            if open_loop {
                self.open(slot, now);
            } else {
                self.reopen(slot, now);
            }
        }
    }

    /// Open loop: an arrival is due (`now` is its dispatched instant).
    fn dispatch(&mut self, req: Arc<Request>, intended_ns: u64, now: u64) {
        self.core_mut().in_flight += 1;
        let mut f = self.new_flight(req, intended_ns);
        f.stamps_mut().dispatched_ns = now;
        self.place(f, now);
    }

    /// See [`Protocol::queue_unreleased`].
    fn queue_unreleased(&mut self, req: Arc<Request>, intended_ns: u64, end: u64) {
        self.core_mut().in_flight += 1;
        let mut f = self.new_flight(req, intended_ns);
        f.stamps_mut().dispatched_ns = end;
        self.queue().push_back(f);
    }

    /// Streams taken from the queue while handling an event start counting here.
    fn after_event(&mut self) {
        let now = self.core_mut().now_ns();
        self.note_in_flight(now);
    }

    /// The in-flight count changed (or may have): account the old one up to `now`.
    fn note_in_flight(&mut self, now: u64) {
        let queued = self.queue_ref().len();
        let core = self.core_mut();
        let on_conn = core.in_flight.saturating_sub(queued);
        core.in_flight_clock.set(now, on_conn as u64);
    }

    /// Requests that never got a stream and waited past the timeout: each fails as a
    /// timeout, sent (never) at its intended instant.
    fn time_out_unsent(&mut self, waited: Vec<Self::Flight>, open_loop: bool, now: u64) {
        for mut f in waited {
            let at = f.stamps_mut();
            at.sent_at(at.intended_ns, open_loop);
            self.record(f, Some(ErrorKind::Timeout), now);
        }
    }

    /// A connect past the connect timeout fails. Late streams are cancelled (their
    /// slots serve the next requests, their work on the server stops); a connection
    /// whose streams are all late with nothing received since is replaced.
    fn scan_timeouts(&mut self, now: u64) {
        let core = self.core_mut();
        let (connect_timeout_ns, timeout_ns) = (core.connect_timeout_ns, core.timeout_ns);
        let core_open_loop = core.open_loop;
        for slot in 0..self.slots() {
            let lane = self.lane(slot);
            match lane.state {
                State::Connecting
                    if now.saturating_sub(lane.connect_start_ns) >= connect_timeout_ns =>
                {
                    self.connect_timed_out();
                    self.fail_conn(slot, ErrorKind::Connect, now);
                }
                State::Ready => {
                    // Requests waiting for a stream the server does not grant (its
                    // stream limit reached, never raised) time out like sent ones, from
                    // their intended instant: without this a `-n` run against such a
                    // server would wait for ever.
                    let waited = take_waited(&mut lane.pending, now, timeout_ns);
                    self.time_out_unsent(waited, core_open_loop, now);
                    let lane = self.lane(slot);
                    let last_read_ns = lane.last_read_ns;
                    let (late, dead) = take_late(&mut lane.streams, now, timeout_ns, last_read_ns);
                    if late.is_empty() {
                        continue;
                    }
                    for (id, f) in late {
                        if !dead {
                            self.cancel(slot, id);
                        }
                        self.record(f, Some(ErrorKind::Timeout), now);
                    }
                    if dead {
                        self.close_conn(slot, now);
                        self.core_mut().deferred.push(slot);
                    } else {
                        self.top_up(slot, now);
                    }
                }
                _ => {}
            }
        }
        // Closed loop: a request waiting in the queue for a stream the server never
        // grants (HTTP/3 sends it back there at its stream limit) times out the same
        // way. (Open loop: the queue is arrivals waiting for a connection, the
        // connection wait the run reports, not a timeout.)
        if !core_open_loop {
            let waited = take_waited(self.queue(), now, timeout_ns);
            self.time_out_unsent(waited, false, now);
        }
        // Closed loop: a slot closed for lack of work may be needed again.
        if !self.core_mut().open_loop {
            for slot in 0..self.slots() {
                if self.lane_ref(slot).state == State::Ready {
                    self.top_up(slot, now);
                }
            }
        }
    }

    /// End of the run: what is on a connection or in the queue is censored.
    fn censor(&mut self, end: u64) {
        for slot in 0..self.slots() {
            let lane = self.lane(slot);
            for f in take_all(&mut lane.streams, &mut lane.pending) {
                self.record(f, Some(ErrorKind::InFlight), end);
            }
            self.close_conn(slot, end);
        }
        while let Some(f) = self.queue().pop_front() {
            self.record(f, Some(ErrorKind::InFlight), end);
        }
    }
}

/// A [`Multiplexed`] worker as the shared loop drives it: every step of
/// [`Protocol`] is the shared shape's, or the protocol's own where it has one.
pub(super) struct Driven<W>(pub W);

impl<'a, S: Sink, T: Transport, W: Multiplexed<'a, S, T>> Protocol<'a, S, T> for Driven<W> {
    fn core(&mut self) -> &mut WorkerCore<'a, S, T> {
        self.0.core_mut()
    }

    fn queue_empty(&self) -> bool {
        self.0.queue_empty()
    }

    fn start(&mut self, now: u64) {
        self.0.start(now);
    }

    fn retry(&mut self, slot: usize, now: u64) {
        self.0.reopen(slot, now);
    }

    fn dispatch(&mut self, req: Arc<Request>, intended_ns: u64, now: u64) {
        self.0.dispatch(req, intended_ns, now);
    }

    fn queue_unreleased(&mut self, req: Arc<Request>, intended_ns: u64, end: u64) {
        self.0.queue_unreleased(req, intended_ns, end);
    }

    fn on_event(&mut self, slot: usize, readable: bool, writable: bool) {
        self.0.on_ready(slot, readable, writable);
    }

    fn after_event(&mut self) {
        self.0.after_event();
    }

    fn note_in_flight(&mut self, now: u64) {
        self.0.note_in_flight(now);
    }

    fn fire_timers(&mut self, now: u64) -> Option<u64> {
        self.0.due_timers(now)
    }

    fn scan_timeouts(&mut self, now: u64) {
        self.0.scan_timeouts(now);
    }

    fn censor(&mut self, end: u64) {
        self.0.censor(end);
    }
}

/// The requests in `waiting` (a lane's pending list, a worker's queue) intended at least
/// `timeout_ns` before `now`, taken out, the rest left in order. The scan runs on every
/// housekeeping turn, so nothing is moved or allocated when none waited that long.
pub(super) fn take_waited<F, C>(waiting: &mut C, now: u64, timeout_ns: u64) -> Vec<F>
where
    F: OnStream,
    C: Default + IntoIterator<Item = F> + FromIterator<F>,
    for<'a> &'a C: IntoIterator<Item = &'a F>,
{
    let late = |f: &F| now.saturating_sub(f.stamps().intended_ns) >= timeout_ns;
    if !(&*waiting).into_iter().any(late) {
        return Vec::new();
    }
    let (waited, left): (Vec<F>, Vec<F>) = std::mem::take(waiting).into_iter().partition(late);
    *waiting = left.into_iter().collect();
    waited
}

/// The streams of one connection sent at least `timeout_ns` before `now`, taken out of
/// `streams`, and whether the connection is dead: every stream late and not one byte
/// received (`last_read_ns`) since the oldest of them went out. A dead connection is
/// replaced; otherwise the server is alive and only slow on these streams, which are
/// cancelled so their slots serve the next requests. Empty when none is late.
pub(super) fn take_late<K: Copy + Eq + Hash, F: OnStream>(
    streams: &mut HashMap<K, F>,
    now: u64,
    timeout_ns: u64,
    last_read_ns: u64,
) -> (Vec<(K, F)>, bool) {
    let late: Vec<K> = streams
        .iter()
        .filter(|(_, f)| now.saturating_sub(f.stamps().sent_ns) >= timeout_ns)
        .map(|(&id, _)| id)
        .collect();
    if late.is_empty() {
        return (Vec::new(), false);
    }
    let oldest_sent_ns = late
        .iter()
        .filter_map(|id| streams.get(id))
        .map(|f| f.stamps().sent_ns)
        .min()
        .unwrap_or(now);
    let dead = late.len() == streams.len() && last_read_ns <= oldest_sent_ns;
    let taken = late
        .into_iter()
        .filter_map(|id| streams.remove(&id).map(|f| (id, f)))
        .collect();
    (taken, dead)
}

/// Every request on a connection (its streams) and waiting for it (`pending`), taken.
pub(super) fn take_all<K, F>(streams: &mut HashMap<K, F>, pending: &mut Vec<F>) -> Vec<F> {
    let mut all: Vec<F> = streams.drain().map(|(_, f)| f).collect();
    all.append(pending);
    all
}

/// What a request that ended on a stream counted.
struct Ended {
    /// Its final status (0 when none came).
    pub status: u16,
    /// Bytes of its response on the wire (frames included).
    pub wire_bytes: u64,
    /// Body bytes as received.
    pub body_bytes: u64,
    /// Body bytes after decoding (`body_bytes` without a decoder).
    pub decoded_bytes: u64,
}

/// Records the sample of `req`, which ended at `now` with `error`, to the sink and
/// the source (a replay compares it with its log), and takes it off the worker's
/// in-flight count. A request still waiting for a stream when the run ends was never
/// sent: `sent_ns` 0 says so (not counted as sent, no send lag or service time; see
/// the HTTP/1.1 worker's `censor`); other failures before the first byte are stamped
/// `now`.
fn record<S: Sink, T: Transport>(
    core: &mut WorkerCore<'_, S, T>,
    req: &Request,
    mut at: Stamps,
    ended: Ended,
    error: Option<ErrorKind>,
    now: u64,
) {
    let never_sent = at.sent_ns == 0 && error == Some(ErrorKind::InFlight);
    if at.sent_ns == 0 && !never_sent {
        at.sent_ns = now;
    }
    let sample = Sample {
        wire_bytes: ended.wire_bytes,
        body_bytes: ended.decoded_bytes,
        wire_body_bytes: ended.body_bytes,
        request_index: req.index,
        ..at.sample(core.open_loop, now, ended.status, error)
    };
    core.record(&sample);
    core.source.on_sample(req, &sample);
    core.source.on_response(req, ended.status, &[]);
    core.in_flight = core.in_flight.saturating_sub(1);
}
