//! The HTTP/3 worker: one mio event loop per thread where each QUIC connection
//! carries many concurrent request streams, QUIC driven through quinn-proto (sans-IO)
//! and HTTP/3 through `volley-h3`.
//!
//! Place in the flow: `run -> worker (shared loop + **h3**) -> quinn-proto -> UDP`.
//! The event loop, pacing and accounting are [`super::shared`]'s; it emits the same
//! [`Sample`] per request to the same [`Sink`] as the HTTP/2 worker, whose shape it
//! follows: closed loop keeps `streams` requests outstanding on every connection;
//! open loop sends an arrival to the first connection with a free stream, else a new
//! connection (up to the cap), else the queue (a cap hit).
//!
//! All connections of a worker share one connected UDP socket and one quinn-proto
//! `Endpoint`, which routes each datagram read to its connection by connection ID
//! (why one socket: [`crate::quic`]). After every input (datagrams read, a timer
//! fired, a request submitted) each connection it reached is *driven*: its events
//! handled, its endpoint events exchanged, its next timer noted; then what every
//! driven connection has to send leaves together (one `sendmmsg` for the lot, GSO
//! bursts where a connection has several full datagrams). [`Protocol::fire_timers`]
//! wakes the loop for the earliest timer. A datagram the socket refuses (a full send
//! buffer) is dropped: QUIC's loss recovery sends it again, as it would for a loss on
//! the path.
//!
//! The loop's poll before sleeping ([`crate::busy_wait`]) stays on for HTTP/3, though
//! a server that answers slower than its 50 us window (Caddy on one core, ~90 us a
//! reply) makes most polls find nothing: the policy's back-off already stops those
//! after four misses, and where replies do land in the window the server is spared
//! waking this thread. Measured against Caddy (bench/h3.py's load, 8 paired rounds,
//! 2026-11-28, a machine loaded by other runs): with the poll the server's CPU per
//! request was 0.91x [0.83, 1.00] of without it, the client's 1.04x [0.73, 1.14].
//!
//! Instants: the connect (and its `tls_handshake_ns`, the same span: QUIC's handshake
//! is the connect) runs from opening the socket to quinn's `Connected`; TTFB is the
//! first response byte of a stream. Errors by kind: a handshake that fails on a TLS
//! alert is `tls`, one that gets no answer (or an ICMP port unreachable: nothing on
//! UDP) is `connect`; a stream the server resets is `reset`; a connection the peer
//! closes is `closed` (its code kept in [`H2Stats::last_close_code`]); the idle
//! timeout is `timeout`; a broken frame or QPACK section is `malformed` (QPACK ones
//! also counted apart). quinn reports each of these per connection, so they stay
//! apart on the shared socket; only an error of the socket itself (an ICMP port
//! unreachable: nothing on UDP at the target) fails every connection at once, as it
//! concerns them all.
//!
//! This file opens, drives and closes connections and submits requests; `events`
//! handles what quinn reports (handshake done, connection lost, stream data).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use mio::Token;
use quinn_proto::{ConnectionHandle, Dir, Endpoint, EndpointEvent, StreamId, VarInt};
use volley_h3::stream::{
    write_request, ControlEvent, LocalSettings, PeerStreams, ResponseReader, Role,
};
use volley_h3::{qpack, ErrorCode, H3Error};

mod datagrams;
mod events;

use super::shared::{run_loop, H2Stats, WorkerCore, WorkerStats};
use super::split::{connection_specific, split_request};
use super::stamps::Stamps;
use super::streams::{
    field_accessors, on_stream, Driven, Lane, Multiplexed, OnStream, Reply, State,
};
use crate::conn::Transport;
use crate::decode::{BodyDecoder, BodySpec};
use crate::quic::{RecvBatch, SendBatch, Udp, RECV_BATCH};
use crate::{ErrorKind, Request, Sink};

/// Largest UDP datagram read (QUIC packets stay below the path MTU, 1200-1500 bytes
/// here; a jumbo loopback MTU never gets used since MTU discovery is off).
const MAX_DATAGRAM_BYTES: usize = 65_535;

/// One request in flight (or waiting for its connection to come up).
pub(super) struct Flight {
    req: Arc<Request>,
    at: Stamps,
    reply: Reply,
    /// Its request bytes (HEADERS and DATA frames) and how much of them quinn took.
    wire: Arc<Vec<u8>>,
    written: usize,
    /// Its method is safe to send as early data (0-RTT can be replayed, RFC 8470):
    /// GET, HEAD or OPTIONS.
    early_ok: bool,
    /// It found the server's stream limit reached once (counted once).
    limit_waited: bool,
    reader: ResponseReader,
}

impl Flight {
    fn new(req: Arc<Request>, intended_ns: u64, capture: bool) -> Flight {
        Flight {
            req,
            at: Stamps {
                intended_ns,
                dispatched_ns: intended_ns,
                ..Stamps::default()
            },
            reply: Reply::new(),
            wire: Arc::new(Vec::new()),
            written: 0,
            early_ok: false,
            limit_waited: false,
            // Only the field section limit matters to a response reader.
            reader: ResponseReader::new(&LocalSettings::default(), capture),
        }
    }
}

on_stream!(Flight);

/// The worker's UDP socket's token in its event loop: past every connection slot
/// (which have no socket of their own) and before the arrival timer's.
const SOCKET_TOKEN: Token = Token(usize::MAX - 1);

/// quinn-proto's side of one connection.
struct Quic {
    /// The connection's handle in the worker's endpoint.
    handle: ConnectionHandle,
    conn: quinn_proto::Connection,
    /// The endpoint was told the connection is drained (it forgot its connection
    /// IDs and may give the handle to a new connection).
    drained: bool,
}

/// One QUIC connection; `lane.state` is `Connecting` during its handshake.
struct Conn {
    /// Counted open ([`WorkerCore::opened`]) until closed.
    counted: bool,
    /// Datagrams for it were handled this turn: it is to be driven.
    touched: bool,
    /// It was driven since the last send: it may have datagrams to send.
    to_send: bool,
    lane: Lane<StreamId, Flight>,
    quic: Option<Box<Quic>>,
    peer: PeerStreams,
    /// The QPACK decoder (its dynamic table is the server's to fill), and our
    /// decoder stream once the handshake is done.
    qpack: qpack::Decoder,
    decoder_stream: Option<StreamId>,
    /// The peer sent GOAWAY: no new streams; replaced once its streams are done.
    going_away: bool,
    /// The handshake offers early data (a resumed session that allows it, and
    /// `--early-data on`): safe requests are sent before it completes.
    early: bool,
    /// A server certificate was checked during this handshake: a full one, not
    /// resumed.
    verified: bool,
    /// quinn's next timer, ns since the run's start.
    timer_ns: Option<u64>,
}

impl Conn {
    fn new() -> Conn {
        Conn {
            counted: false,
            touched: false,
            to_send: false,
            lane: Lane::new(),
            quic: None,
            peer: PeerStreams::new(Role::Server),
            qpack: qpack::Decoder::default(),
            decoder_stream: None,
            going_away: false,
            early: false,
            verified: false,
            timer_ns: None,
        }
    }
}

/// How a response stream read ended.
enum ReadEnd {
    /// More may come.
    Open,
    /// FIN: complete (or broken, if the reader says so).
    Fin,
    /// The server reset the stream.
    Reset,
    /// A protocol error on this stream or the connection.
    Broken(H3Error),
}

/// The HTTP/3 worker.
pub(crate) struct H3Worker<'a, S> {
    core: WorkerCore<'a, S, Udp>,
    conns: Vec<Conn>,
    streams_per_conn: usize,
    /// Each request's bytes, and whether it may go as early data.
    prepared: HashMap<u32, (Arc<Vec<u8>>, bool)>,
    queue: VecDeque<Flight>,
    stats: H2Stats,
    body: BodySpec,
    #[allow(clippy::vec_box)]
    spare_decoders: Vec<Box<BodyDecoder>>,
    /// One datagram being written by quinn, reused.
    tx: Vec<u8>,
    /// Control events of the peer's streams, reused.
    control: Vec<ControlEvent>,
    /// What quinn reported for the connection being driven, reused.
    events: Vec<quinn_proto::Event>,
    /// The buffers every connection's datagrams are read into.
    rx: RecvBatch,
    /// The worker's one socket (made at the first connect) and its QUIC endpoint.
    sock: Option<Udp>,
    endpoint: Endpoint,
    /// The slot of each endpoint connection handle in use (handles are small
    /// indices the endpoint reuses).
    slot_of: Vec<Option<usize>>,
    /// Connections with datagrams handled this turn, and those driven since the
    /// last send.
    touched: Vec<usize>,
    to_send: Vec<usize>,
    /// What the driven connections send, gathered for one send.
    out: SendBatch,
}

impl<'a, S: Sink> H3Worker<'a, S> {
    /// The worker over `core`, with up to `streams` request streams per connection;
    /// the open loop wakes by timerfd before arrivals, as HTTP/1.1's does. Without it
    /// the loop polled the last millisecond before each arrival: `bench/h3.py --paced
    /// 1800` read 553 us of client CPU a request (a whole core) against Caddy.
    pub fn new(core: WorkerCore<'a, S, Udp>, streams: u32) -> Self {
        let core = core.with_arrival_timer();
        let slots = core.slots();
        let body = core.shared.body;
        let endpoint = Endpoint::new(core.connector().endpoint.clone(), None, false, None);
        H3Worker {
            core,
            conns: (0..slots).map(|_| Conn::new()).collect(),
            streams_per_conn: streams.max(1) as usize,
            prepared: HashMap::new(),
            queue: VecDeque::new(),
            stats: H2Stats::default(),
            body,
            spare_decoders: Vec::new(),
            tx: Vec::with_capacity(MAX_DATAGRAM_BYTES),
            control: Vec::new(),
            events: Vec::new(),
            rx: RecvBatch::new(),
            sock: None,
            endpoint,
            slot_of: Vec::new(),
            touched: Vec::new(),
            to_send: Vec::new(),
            out: SendBatch::default(),
        }
    }

    /// Runs to the end of the load and returns the sink and counters.
    pub fn run(self) -> (S, WorkerStats, H2Stats) {
        let mut driven = Driven(self);
        run_loop(&mut driven);
        let w = driven.0;
        (w.core.sink, w.core.stats, w.stats)
    }

    fn instant(&self, ns: u64) -> Instant {
        self.core.shared.start + Duration::from_nanos(ns)
    }

    fn ns(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.core.shared.start)
            .as_nanos() as u64
    }

    /// Whether `slot` takes requests now: ready, or handshaking with early data.
    fn sends(&self, slot: usize) -> bool {
        let c = &self.conns[slot];
        c.lane.state == State::Ready || (c.lane.state == State::Connecting && c.early)
    }

    /// Closes `slot`: a CONNECTION_CLOSE (H3_NO_ERROR, or `code`) is sent best
    /// effort, so the server frees its state at once rather than at its idle timeout.
    /// The endpoint forgets the connection (its IDs, its handle): a datagram the
    /// server still sends it is answered by a stateless reset, as a closed socket's
    /// would be by an ICMP port unreachable.
    fn close_with(&mut self, slot: usize, now: u64, code: ErrorCode) {
        let at = self.instant(now);
        let c = &mut self.conns[slot];
        if let Some(mut q) = c.quic.take() {
            if !q.conn.is_closed() {
                let code = VarInt::from_u64(code.to_u64()).unwrap_or(VarInt::from_u32(0x100));
                q.conn.close(at, code, bytes::Bytes::new());
                self.tx.clear();
                if let (Some(t), Some(sock)) = (
                    q.conn.poll_transmit(at, 1, &mut self.tx),
                    self.sock.as_mut(),
                ) {
                    let _ = sock.write(&self.tx[..t.size]);
                }
            }
            if !q.drained {
                self.endpoint
                    .handle_event(q.handle, EndpointEvent::drained());
            }
            if let Some(s) = self.slot_of.get_mut(q.handle.0) {
                *s = None;
            }
        }
        if std::mem::take(&mut c.counted) {
            self.core.closed(now);
        }
        c.lane.state = State::Closed;
        c.timer_ns = None;
    }

    /// A protocol error of ours to report: the connection is closed with its code.
    fn conn_error(&mut self, slot: usize, e: H3Error, now: u64) {
        self.stats.connection_errors += 1;
        if e.is_qpack() {
            self.stats.qpack_errors += 1;
        }
        self.close_with(slot, now, e.code());
        self.fail_conn(slot, ErrorKind::Malformed, now);
    }

    /// The request bytes of `req`, built once per request index: its HTTP/1.1
    /// serialisation re-encoded as HEADERS (QPACK, static table) and DATA frames;
    /// and whether its method is safe for early data.
    fn prepare(&mut self, req: &Request) -> Option<(Arc<Vec<u8>>, bool)> {
        if let Some(p) = self.prepared.get(&req.index) {
            return Some(p.clone());
        }
        let r = split_request(&req.bytes)?;
        let mut all: Vec<(&[u8], &[u8])> = vec![
            (b":method", r.method.as_bytes()),
            (b":scheme", b"https"),
            (b":authority", r.authority.as_bytes()),
            (b":path", r.path.as_bytes()),
        ];
        all.extend(
            r.fields
                .iter()
                .filter(|(n, v)| !connection_specific(n, v))
                .map(|(n, v)| (n.as_bytes(), v.as_bytes())),
        );
        let mut wire = Vec::new();
        write_request(&mut wire, &all, &req.bytes[r.body_start..]);
        let early_ok = matches!(r.method.as_str(), "GET" | "HEAD" | "OPTIONS");
        let p = (Arc::new(wire), early_ok);
        self.prepared.insert(req.index, p.clone());
        Some(p)
    }

    /// Opens a request stream for `f` on `slot` (ready, or handshaking with early
    /// data) and hands quinn its bytes; queued again when the server's stream limit
    /// is reached. During a 0-RTT handshake a request unsafe for early data waits
    /// for the handshake's end, as do all when the remembered limit is reached.
    fn submit(&mut self, slot: usize, mut f: Flight, now: u64) {
        let Some((wire, early_ok)) = self.prepare(&f.req) else {
            f.at.sent_at(now, self.core.open_loop);
            return self.record(f, Some(ErrorKind::Malformed), now);
        };
        let c = &mut self.conns[slot];
        let early = c.lane.state == State::Connecting;
        if early && !(c.early && early_ok) {
            return c.lane.pending.push(f);
        }
        let Some(q) = c.quic.as_mut() else {
            return self.queue.push_front(f);
        };
        let Some(id) = q.conn.streams().open(Dir::Bi) else {
            if early {
                return c.lane.pending.push(f);
            }
            // The server's stream limit: wait for its MAX_STREAMS (quinn reports it
            // as StreamEvent::Available, which fills the connection again).
            if !f.limit_waited {
                f.limit_waited = true;
                self.stats.stream_limit_waits += 1;
            }
            return self.queue.push_front(f);
        };
        f.wire = wire;
        f.written = 0;
        f.early_ok = early_ok;
        write_more(&mut q.conn, id, &mut f);
        // A request sent again after the server refused early data keeps the
        // instant it first went out: the refusal is part of what it waited.
        if f.at.sent_ns == 0 {
            f.at.sent_at(now, self.core.open_loop);
        }
        if early {
            // Sent in the first flight: it waited for no handshake.
            c.lane.charged = true;
        } else if !c.lane.charged {
            c.lane.charged = true;
            f.at.connect_ns = c.lane.connect_ns;
            f.at.tls_handshake_ns = c.lane.connect_ns;
        }
        c.lane.streams.insert(id, f);
    }

    /// Hands our decoder stream the QPACK instructions waiting (acknowledgments,
    /// insert count increments, cancellations), as much as its flow control takes,
    /// and counts what the decoder saw.
    fn settle_qpack(&mut self, slot: usize) {
        let c = &mut self.conns[slot];
        let counts = c.qpack.take_counts();
        self.stats.qpack_dynamic_refs += counts.dynamic_refs;
        self.stats.qpack_inserts += counts.inserts;
        let (Some(q), Some(id)) = (c.quic.as_mut(), c.decoder_stream) else {
            return;
        };
        let pending = c.qpack.instructions();
        if !pending.is_empty() {
            if let Ok(n) = q.conn.send_stream(id).write(pending) {
                c.qpack.sent(n);
            }
        }
    }

    /// Fills `slot` with requests up to its stream limit.
    fn fill(&mut self, slot: usize, now: u64) {
        loop {
            let c = &self.conns[slot];
            if !self.sends(slot) || c.lane.load() >= self.streams_per_conn || c.going_away {
                break;
            }
            let Some(f) = self.claim(now) else { break };
            let before = self.queue.len();
            self.submit(slot, f, now);
            if self.queue.len() > before {
                // The server's stream limit: wait for StreamEvent::Available.
                break;
            }
        }
    }
}

/// Hands quinn as much of `f`'s request as its flow control takes, and finishes the
/// stream once all of it is taken.
fn write_more(conn: &mut quinn_proto::Connection, id: StreamId, f: &mut Flight) {
    if f.written >= f.wire.len() {
        return;
    }
    let mut s = conn.send_stream(id);
    if let Ok(n) = s.write(&f.wire[f.written..]) {
        f.written += n;
    }
    if f.written >= f.wire.len() {
        let _ = s.finish();
    }
}

impl<'a, S: Sink> Multiplexed<'a, S, Udp> for H3Worker<'a, S> {
    type Key = StreamId;
    type Flight = Flight;

    field_accessors!(WorkerCore<'a, S, Udp>);

    fn new_flight(&self, req: Arc<Request>, intended_ns: u64) -> Flight {
        Flight::new(req, intended_ns, self.body.is_active())
    }

    /// A connection with a free stream that has not been told to go away, or one
    /// whose handshake is under way.
    fn room(&self, slot: usize) -> bool {
        let c = &self.conns[slot];
        match c.lane.state {
            State::Ready => c.lane.load() < self.streams_per_conn && !c.going_away,
            State::Connecting => c.lane.load() < self.streams_per_conn,
            State::Closed => false,
        }
    }

    /// Ready, or handshaking with early data.
    fn takes_now(&self, slot: usize) -> bool {
        self.sends(slot)
    }

    fn send(&mut self, slot: usize, f: Flight, now: u64) {
        self.submit(slot, f, now);
        self.drive(slot);
        self.flush();
    }

    fn open(&mut self, slot: usize, now: u64) {
        let c = &mut self.conns[slot];
        c.lane.connecting_from(now);
        c.going_away = false;
        c.early = false;
        c.verified = false;
        c.peer = PeerStreams::new(Role::Server);
        c.qpack = self.core.connector().local.qpack_decoder();
        c.decoder_stream = None;
        c.timer_ns = None;
        self.core.stats.connections_opened += 1;
        if self.socket().is_err() {
            self.conns[slot].lane.state = State::Closed;
            return self.fail_conn(slot, ErrorKind::Connect, now);
        }
        self.core.opened(now);
        self.conns[slot].counted = true;
        let at = self.instant(now);
        let connector = self.core.connector();
        let started = self.endpoint.connect(
            at,
            connector.client.clone(),
            self.core.shared.cfg.addr,
            connector.tls.server_name(),
        );
        match started {
            Ok((handle, conn)) => {
                if self.slot_of.len() <= handle.0 {
                    self.slot_of.resize(handle.0 + 1, None);
                }
                self.slot_of[handle.0] = Some(slot);
                let c = &mut self.conns[slot];
                // 0-RTT keys exist from the start when the session cache held a
                // ticket that allows early data (and early data is offered).
                c.early = conn.has_0rtt();
                c.quic = Some(Box::new(Quic {
                    handle,
                    conn,
                    drained: false,
                }));
                c.lane.state = State::Connecting;
                if c.early {
                    let pending = std::mem::take(&mut c.lane.pending);
                    for f in pending {
                        self.submit(slot, f, now);
                    }
                    self.fill(slot, now);
                }
                self.drive(slot);
                self.flush();
            }
            // An address quinn refuses (port 0, unspecified): nothing to retry.
            Err(_) => self.fail_conn(slot, ErrorKind::Connect, now),
        }
    }

    fn close_conn(&mut self, slot: usize, now: u64) {
        self.close_with(slot, now, ErrorCode::NoError);
    }

    /// H3_REQUEST_CANCELLED both ways (RFC 9114 §4.1.1), and QPACK's Stream
    /// Cancellation.
    fn cancel(&mut self, slot: usize, id: StreamId) {
        let c = &mut self.conns[slot];
        if let Some(q) = c.quic.as_mut() {
            let code = VarInt::from_u32(0x10c);
            let _ = q.conn.send_stream(id).reset(code);
            let _ = q.conn.recv_stream(id).stop(code);
            c.qpack.cancel_stream(u64::from(id));
            self.stats.cancelled_streams += 1;
        }
    }

    fn top_up(&mut self, slot: usize, now: u64) {
        self.fill(slot, now);
        self.drive(slot);
        self.flush();
    }

    /// The worker's socket is the only source registered (its token, not a slot).
    /// It is read on any event: registered for reading, its other one is an error
    /// (EPOLLERR: an ICMP port unreachable), which the read reports.
    fn on_ready(&mut self, token: usize, _readable: bool, _writable: bool) {
        if token != SOCKET_TOKEN.0 {
            return;
        }
        self.read();
        // Open loop: arrivals queued for a stream may now find one.
        let now = self.core.now_ns();
        self.place_queued(now);
        self.flush();
    }

    fn due_timers(&mut self, now: u64) -> Option<u64> {
        let mut next: Option<u64> = None;
        for slot in 0..self.conns.len() {
            let Some(t) = self.conns[slot].timer_ns else {
                continue;
            };
            if t <= now {
                let at = self.instant(now);
                if let Some(q) = self.conns[slot].quic.as_mut() {
                    q.conn.handle_timeout(at);
                }
                self.drive(slot);
            }
            if let Some(t) = self.conns[slot].timer_ns {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        self.flush();
        next
    }

    /// A handshake that never finished.
    fn connect_timed_out(&mut self) {
        self.stats.handshake_failures += 1;
    }
}
