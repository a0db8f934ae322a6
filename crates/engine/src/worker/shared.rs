//! What the HTTP/1.1 and HTTP/2 workers do the same way, written once.
//!
//! Place in the flow: `run -> worker (**shared** + http1 | h2) -> transport`. The run
//! hands every worker the same [`Shared`] state and its own [`WorkerShare`]; each worker
//! keeps a [`WorkerCore`] (clock, sink, request source, event queue, pacing, counters,
//! connection accounting) and implements [`Protocol`], the few steps where HTTP/1.1
//! (one request per connection at a time) and HTTP/2 and HTTP/3 (many streams per
//! connection, one shape: `super::streams::Multiplexed`) differ. [`run_loop`] drives either through the same event loop; it is generic, so
//! each worker's loop is monomorphised and the per-request path has no dynamic call.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Events, Poll, Token};

use super::pollset::{exact_timeouts, PollFds};
use super::uring::Ring;

use crate::busy_wait::{poll_then_sleep, PollPolicy};
use crate::conn::Transport;
use crate::decode::BodySpec;
use crate::live::InFlightIntegral;
use crate::pacer::{Pace, Pacer};
use crate::slice::{request_slice, WORKER_SLICE_NS};
use crate::timer::{poll_timeout, ArrivalTimer, EARLY_WAKE_NS};
use crate::{IoPath, Live, LoadConfig, Request, RequestSource, Sample, Sink};

/// Size of the per-worker read buffer: one read takes a typical HTTP/1.1 response
/// whole, or several full HTTP/2 frames.
pub(crate) const SCRATCH_BYTES: usize = 64 * 1024;
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
/// Open loop: replies handled between two looks at the schedule inside one batch of
/// events. A batch holds up to one event per connection (512 at the usual cap), each
/// a few microseconds of parsing and recording, and arrivals due meanwhile waited for
/// the whole batch: `bench/engine.py`'s open loop at 80% with 512 connections read a
/// scheduler-lag p99 of 1-17 ms where 64 connections read 0.6-1.9 ms (2026-11-28, a
/// loaded machine). Eight replies are tens of microseconds; the look is one clock read.
const EVENTS_BETWEEN_RELEASES: usize = 8;
/// A scheduled source's own work ([`crate::RequestSource::idle`]) is offered gaps of at least
/// this long before the next arrival: shorter ones are the loop's own turn.
const IDLE_MIN_NS: u64 = 5_000;
/// ... and at most this much of each: a reply landing meanwhile waits for the slice's
/// end before it is read (its time stamped that much late), so the slice is a few
/// requests' worth of the source's work, then the loop looks at its sockets again.
const IDLE_SLICE_NS: u64 = 15_000;
/// At the end of a run, at most this many arrivals due but not released are censored.
const MAX_UNRELEASED_AT_END: usize = MAX_ARRIVALS_PER_TURN * 16;

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
    /// The I/O path the run resolved: under [`IoPath::Poll`] every worker waits in
    /// `ppoll`.
    pub io: IoPath,
}

impl Shared<'_> {
    /// Nanoseconds since the run started, on the run's one clock.
    pub fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

/// What a worker hands back besides its sink.
#[derive(Debug, Default)]
pub(crate) struct WorkerStats {
    pub cap_hits: u64,
    pub connections_opened: u64,
    /// Connects that failed at once for want of a free local port (EADDRNOTAVAIL).
    pub connects_without_port: u64,
    pub idle_close_retries: u64,
    pub stopped_early: bool,
    /// Open loop: the kernel gave this worker the short slice it asked for
    /// ([`crate::slice`]).
    pub short_slice: bool,
    /// Time spent polling for a reply before sleeping ([`crate::busy_wait`]).
    pub busy_wait_ns: u64,
    /// How many such polls there were.
    pub busy_waits: u64,
}

/// HTTP/2 and HTTP/3 connection and stream events of a run, summed over workers
/// (the HTTP/3 worker fills the same stream counters, plus its own below).
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
    /// HTTP/3: QUIC handshakes completed (TLS 1.3 with ALPN `h3`: rustls refuses a
    /// QUIC handshake without an agreed protocol).
    pub quic_handshakes: u64,
    /// HTTP/3: QUIC handshakes that failed (TLS alert, version negotiation, no
    /// answer within the connect timeout); their requests are `tls` or `connect`.
    pub handshake_failures: u64,
    /// HTTP/3: connections that hit the QUIC idle timeout (requests `timeout`).
    pub idle_timeouts: u64,
    /// HTTP/3: connections or streams lost to a QPACK error (requests `malformed`).
    pub qpack_errors: u64,
    /// HTTP/3: connections the peer closed (CONNECTION_CLOSE) while requests were
    /// open, and the code of the last such close.
    pub peer_closes: u64,
    /// The error code of the last CONNECTION_CLOSE from the peer (QUIC transport or
    /// HTTP/3 application code).
    pub last_close_code: Option<u64>,
    /// HTTP/3: completed handshakes by kind, each timed from opening the socket to
    /// the handshake's end: full (1-RTT, the certificate checked), resumed (1-RTT on
    /// a session ticket, no certificate) and 0-RTT (resumed, with requests sent in the
    /// first flight and accepted by the server).
    pub handshake_full: HandshakeTimes,
    /// See [`H2Stats::handshake_full`].
    pub handshake_resumed: HandshakeTimes,
    /// See [`H2Stats::handshake_full`].
    pub handshake_0rtt: HandshakeTimes,
    /// HTTP/3: handshakes that offered early data the server refused; their early
    /// requests were sent again once the handshake was done (their service time
    /// includes the refusal).
    pub zero_rtt_rejected: u64,
    /// HTTP/3: requests sent as early data (0-RTT) that the server accepted.
    pub early_requests: u64,
    /// HTTP/3: UDP messages sent (one `sendmmsg` carries several), and the
    /// datagrams they carried (more than one a message where GSO is on).
    pub udp_sends: u64,
    /// See [`H2Stats::udp_sends`].
    pub udp_datagrams_sent: u64,
    /// HTTP/3: UDP messages read, and the datagrams they carried (more than one a
    /// message where GRO coalesced them; one `recvmmsg` takes several messages).
    pub udp_reads: u64,
    /// See [`H2Stats::udp_reads`].
    pub udp_datagrams_read: u64,
    /// HTTP/3: requests that found the server's stream limit reached and waited
    /// for it to rise (MAX_STREAMS), each counted once.
    pub stream_limit_waits: u64,
    /// HTTP/3: response field lines the QPACK decoder resolved through the server's
    /// dynamic table, and the entries the server inserted into it.
    pub qpack_dynamic_refs: u64,
    /// See [`H2Stats::qpack_dynamic_refs`].
    pub qpack_inserts: u64,
}

/// Handshakes of one kind: how many and how long they took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandshakeTimes {
    /// Handshakes completed.
    pub count: u64,
    /// Their durations summed, ns (the mean is `total_ns / count`).
    pub total_ns: u64,
    /// The longest, ns.
    pub max_ns: u64,
}

impl HandshakeTimes {
    /// Counts one handshake of `ns`.
    pub fn add_ns(&mut self, ns: u64) {
        self.count += 1;
        self.total_ns += ns;
        self.max_ns = self.max_ns.max(ns);
    }

    /// Adds another worker's.
    pub fn add(&mut self, o: &HandshakeTimes) {
        self.count += o.count;
        self.total_ns += o.total_ns;
        self.max_ns = self.max_ns.max(o.max_ns);
    }

    /// The mean duration, ns (0 with none).
    pub fn mean_ns(&self) -> u64 {
        self.total_ns.checked_div(self.count).unwrap_or(0)
    }
}

impl H2Stats {
    /// Adds another worker's counts.
    pub fn add(&mut self, o: &H2Stats) {
        self.goaways += o.goaways;
        self.refused_retries += o.refused_retries;
        self.stream_resets += o.stream_resets;
        self.connection_errors += o.connection_errors;
        self.cancelled_streams += o.cancelled_streams;
        self.quic_handshakes += o.quic_handshakes;
        self.handshake_failures += o.handshake_failures;
        self.idle_timeouts += o.idle_timeouts;
        self.qpack_errors += o.qpack_errors;
        self.qpack_dynamic_refs += o.qpack_dynamic_refs;
        self.qpack_inserts += o.qpack_inserts;
        self.peer_closes += o.peer_closes;
        self.last_close_code = o.last_close_code.or(self.last_close_code);
        self.handshake_full.add(&o.handshake_full);
        self.handshake_resumed.add(&o.handshake_resumed);
        self.handshake_0rtt.add(&o.handshake_0rtt);
        self.zero_rtt_rejected += o.zero_rtt_rejected;
        self.early_requests += o.early_requests;
        self.udp_sends += o.udp_sends;
        self.udp_datagrams_sent += o.udp_datagrams_sent;
        self.udp_reads += o.udp_reads;
        self.udp_datagrams_read += o.udp_datagrams_read;
        self.stream_limit_waits += o.stream_limit_waits;
    }
}

/// One worker's share of the run's configuration: its connections, cap and pacer.
/// (Not the study's plan of steps: this is what `run` splits a single load into.)
pub(crate) struct WorkerShare {
    pub connections: usize,
    /// Closed loop with a request limit: tickets set aside for this worker's initial
    /// requests before any worker started, so every worker opens its share of the
    /// connections even if another worker's thread started first and raced through
    /// the shared tickets (which made the connection count depend on thread start-up).
    pub reserved: u64,
    pub max_connections: usize,
    pub pacer: Option<Pacer>,
}

impl WorkerShare {
    /// The connection slots this worker needs: its share of the cap (open loop) or of
    /// the connections.
    pub fn slots(&self) -> usize {
        self.max_connections.max(self.connections)
    }
}

/// Requests started, samples recorded and errors among them since the last publish.
#[derive(Debug, Default, Clone, Copy)]
struct Unpublished {
    started: u64,
    done: u64,
    errors: u64,
}

/// The next step of the open-loop schedule.
pub(crate) enum Arrival {
    /// An arrival is due: its request and intended instant.
    Due(Arc<Request>, u64),
    /// The next arrival is this many ns away.
    Wait(u64),
    /// No more arrivals (schedule over, request count reached, source empty).
    Over,
}

/// The per-worker state both workers keep, and what they do with it the same way.
pub(crate) struct WorkerCore<'a, S, T: Transport> {
    pub shared: &'a Shared<'a>,
    pub sink: S,
    pub source: Box<dyn RequestSource>,
    pub poll: Poll,
    /// Read buffer shared by all of the worker's connections.
    pub scratch: Vec<u8>,
    pub share: WorkerShare,
    pub open_loop: bool,
    /// Arrivals released by the pacer so far.
    arrivals: u64,
    /// No new request will be started (count reached, schedule over, source empty).
    pub starting_done: bool,
    /// Requests in flight, as each worker counts them (see its `in_flight_clock`).
    pub in_flight: usize,
    /// Time integral of the requests holding a connection, for Little's law.
    pub in_flight_clock: InFlightIntegral,
    /// Slots to be given new work on the next loop turn (after a failed connect).
    pub deferred: Vec<usize>,
    /// Connections this worker has open.
    pub open_here: usize,
    pub stats: WorkerStats,
    /// How long to poll for a reply before sleeping ([`crate::busy_wait`]).
    poll_policy: PollPolicy,
    unpublished: Unpublished,
    pub timeout_ns: u64,
    pub connect_timeout_ns: u64,
    /// Open loop: wakes the loop just before the next arrival (`None` in a closed loop,
    /// for HTTP/2, or when the OS refused a timerfd: then the loop busy-polls the last
    /// ms).
    timer: Option<ArrivalTimer>,
    /// Shared by this worker's connections (e.g. the TLS config and session cache).
    connector: T::Connector,
    /// `--io uring`: the loop waits on this ring instead of epoll.
    ring: Option<Arc<Ring>>,
}

impl<'a, S: Sink, T: Transport> WorkerCore<'a, S, T> {
    /// The state of one worker about to run `share` with `sink` and `source`, its
    /// connections made by `connector`.
    pub fn new(
        shared: &'a Shared<'a>,
        sink: S,
        source: Box<dyn RequestSource>,
        share: WorkerShare,
        connector: T::Connector,
    ) -> io::Result<Self> {
        let open_loop = share.pacer.is_some();
        let poll = Poll::new()?;
        Ok(WorkerCore {
            shared,
            sink,
            source,
            poll,
            scratch: vec![0; SCRATCH_BYTES],
            share,
            open_loop,
            arrivals: 0,
            starting_done: false,
            in_flight: 0,
            in_flight_clock: InFlightIntegral::default(),
            deferred: Vec::new(),
            open_here: 0,
            stats: WorkerStats::default(),
            poll_policy: PollPolicy::default(),
            unpublished: Unpublished::default(),
            timeout_ns: duration_ns(shared.cfg.timeout),
            connect_timeout_ns: duration_ns(shared.cfg.connect_timeout),
            timer: None,
            connector,
            ring: None,
        })
    }

    /// `--io uring`: the loop waits on `ring` (which its transports also use) instead
    /// of epoll. Before [`Self::with_arrival_timer`]: a ring needs no timerfd, since
    /// its wait takes a timeout in ns.
    pub fn with_ring(mut self, ring: Arc<Ring>) -> Self {
        self.ring = Some(ring);
        self
    }

    /// Open loop: wake up by timerfd just before each arrival instead of busy-polling
    /// the last ms (without a timerfd from the OS, the loop still busy-polls).
    pub fn with_arrival_timer(mut self) -> Self {
        if self.open_loop && self.ring.is_none() && !self.polled() {
            self.timer = ArrivalTimer::new(self.poll.registry(), TIMER_TOKEN).ok();
        }
        self
    }

    /// Nanoseconds since the run started.
    pub fn now_ns(&self) -> u64 {
        self.shared.now_ns()
    }

    /// `--io poll`: the loop waits in `ppoll` on the sockets the protocol lists
    /// ([`Protocol::watch`]), which are never put in epoll ([`super::pollset`]).
    pub fn polled(&self) -> bool {
        self.shared.io == IoPath::Poll
    }

    /// What this worker's connections share (the QUIC worker reads its configs).
    pub fn connector(&self) -> &T::Connector {
        &self.connector
    }

    /// The connection slots this worker needs ([`WorkerShare::slots`]).
    pub fn slots(&self) -> usize {
        self.share.slots()
    }

    /// The next request to start, intended at `intended_ns`, or `None` when the worker
    /// must start no more: its own reserved tickets first (see
    /// [`WorkerShare::reserved`]), then, in a run limited to `-n` requests, a ticket
    /// from the shared counter, each paired with its source's next request. Both workers
    /// start exactly `n` requests this way. A request intended before the warm-up
    /// boundary takes no ticket (it is not measured); the caller passes the instant it
    /// stamps the request with, so the count stays exact at the boundary.
    pub fn claim_at(&mut self, intended_ns: u64) -> Option<Arc<Request>> {
        if self.starting_done {
            return None;
        }
        let stop = &self.shared.cfg.stop;
        let mut ticket = true;
        if self.share.reserved > 0 {
            self.share.reserved -= 1;
        } else if let Some(limit) = stop.requests {
            let warming = (intended_ns as u128) < stop.warmup.as_nanos();
            ticket = warming || self.shared.tickets.fetch_add(1, Ordering::Relaxed) < limit;
        }
        let r = if ticket {
            self.source.next_request()
        } else {
            None
        };
        match r {
            Some(_) => self.unpublished.started += 1,
            None => self.starting_done = true,
        }
        r
    }

    /// The source gives the instants ([`crate::LoadModel::Scheduled`]).
    pub fn scheduled(&self) -> bool {
        self.share.pacer.as_ref().is_some_and(|p| p.is_scheduled())
    }

    /// Open loop: the arrival due at `now`, if any, with its request claimed.
    pub fn next_arrival(&mut self, now: u64) -> Arrival {
        if self.starting_done {
            return Arrival::Over;
        }
        let pace = match self.share.pacer.as_mut() {
            Some(p) if p.is_scheduled() => p.pace_next(now, self.source.next_instant()),
            Some(p) => p.pace(now, self.arrivals),
            None => Pace::Done,
        };
        match pace {
            Pace::SendNow(intended) => match self.claim_at(intended) {
                Some(req) => {
                    self.arrivals += 1;
                    Arrival::Due(req, intended)
                }
                None => Arrival::Over,
            },
            Pace::Wait(ns) => Arrival::Wait(ns),
            Pace::Done => {
                self.starting_done = true;
                Arrival::Over
            }
        }
    }

    /// Starts a connect for `slot` (of `lane`, whose source address it may take) and registers it for read and write readiness
    /// (edge-triggered, once for the connection's life); counts it open on success.
    pub fn connect(&mut self, slot: usize, now: u64, lane: Option<u32>) -> io::Result<T> {
        self.stats.connections_opened += 1;
        let cfg = &self.shared.cfg;
        let mut sock = T::connect(&self.connector, cfg.addr, cfg.source_ip.for_lane(lane))
            .inspect_err(|e| {
                if e.kind() == io::ErrorKind::AddrNotAvailable {
                    self.stats.connects_without_port += 1;
                }
            })?;
        if !self.polled() {
            sock.register(self.poll.registry(), Token(slot))?;
        }
        self.opened(now);
        Ok(sock)
    }

    /// A connection is open: counted here and in the run's live and sink counts.
    /// [`Self::connect`] calls it; a connection without a socket of its own (HTTP/3's
    /// share the worker's) calls it itself, and [`Self::closed`] when it closes.
    pub fn opened(&mut self, now: u64) {
        self.open_here += 1;
        let open = self.shared.open.fetch_add(1, Ordering::Relaxed) + 1;
        self.shared.max_open.fetch_max(open, Ordering::Relaxed);
        self.shared.live.set_open(open);
        self.sink.connections(now, open);
    }

    /// A connection [`Self::opened`] counted closed (a socket `connect` returned was
    /// dropped: closing its fd also removes it from epoll).
    pub fn closed(&mut self, now: u64) {
        self.open_here -= 1;
        let open = self
            .shared
            .open
            .fetch_sub(1, Ordering::Relaxed)
            .saturating_sub(1);
        self.shared.live.set_open(open);
        self.sink.connections(now, open);
    }

    /// An open-loop arrival found no connection and waits: a cap hit.
    pub fn cap_hit(&mut self, now: u64) {
        self.stats.cap_hits += 1;
        self.sink.cap_hit(now);
    }

    /// Hands one sample to the sink and counts it for the progress line.
    pub fn record(&mut self, sample: &Sample) {
        self.sink.record(sample);
        self.unpublished.done += 1;
        if sample.error.is_some() {
            self.unpublished.errors += 1;
        }
    }

    /// Publishes the counters and the in-flight integral since the last publish.
    pub fn publish(&mut self, now: u64) {
        let u = std::mem::take(&mut self.unpublished);
        self.shared.live.publish(u.started, u.done, u.errors);
        self.shared
            .live
            .publish_in_flight(self.in_flight_clock.unpublished(now));
    }

    /// How long the loop may sleep in epoll: not at all with deferred work; with the
    /// arrival timer armed, past the next arrival (to the next housekeeping or the
    /// end) since the timer's event wakes it; else up to the spin window before it.
    fn poll_timeout(&mut self, now: u64, next_housekeeping: u64, wait_ns: Option<u64>) -> Duration {
        if !self.deferred.is_empty() {
            return Duration::ZERO;
        }
        if let (Some(w), Some(timer)) = (wait_ns, self.timer.as_mut()) {
            if w <= EARLY_WAKE_NS || timer.arm(now + w, w - EARLY_WAKE_NS).is_err() {
                return Duration::ZERO;
            }
            let mut sleep_ns = next_housekeeping.saturating_sub(now);
            if let Some(end) = self.shared.end_ns {
                sleep_ns = sleep_ns.min(end.saturating_sub(now));
            }
            return Duration::from_nanos(sleep_ns);
        }
        if self.ring.is_some() || self.polled() {
            // The ring's wait and ppoll take ns: sleep until just before the next
            // arrival (then poll the last EARLY_WAKE_NS, as after the arrival timer's
            // wake-up).
            let wait = wait_ns.map(|w| w.saturating_sub(EARLY_WAKE_NS));
            return poll_timeout(now, next_housekeeping, wait, self.shared.end_ns, false, 0);
        }
        poll_timeout(
            now,
            next_housekeeping,
            wait_ns,
            self.shared.end_ns,
            false,
            SPIN_WINDOW_NS,
        )
    }

    /// Waits up to `timeout` from `now` in epoll, or on the ring under `--io uring`,
    /// or in `ppoll` over `fds` under `--io poll`, first polling for a reply as
    /// [`crate::busy_wait`] decides, and lists the connections that have something as
    /// (slot, readable, writable).
    fn wait(
        &mut self,
        events: &mut Events,
        fds: &mut PollFds,
        ready: &mut Vec<(usize, bool, bool)>,
        now: u64,
        timeout: Duration,
    ) -> io::Result<()> {
        ready.clear();
        let shared = self.shared;
        let clock = || shared.now_ns();
        let polled = self.polled();
        let policy = &mut self.poll_policy;
        let busy = if let Some(ring) = &self.ring {
            poll_then_sleep(policy, self.in_flight, now, timeout, clock, |t| {
                ring.wait(t, ready)?;
                Ok(!ready.is_empty())
            })?
        } else if polled {
            poll_then_sleep(policy, self.in_flight, now, timeout, clock, |t| fds.wait(t))?
        } else {
            let poll = &mut self.poll;
            poll_then_sleep(policy, self.in_flight, now, timeout, clock, |t| {
                poll.poll(events, Some(t))?;
                Ok(!events.is_empty())
            })?
        };
        if let Some(ns) = busy {
            self.stats.busy_wait_ns += ns;
            self.stats.busy_waits += 1;
        }
        if self.ring.is_some() {
            return Ok(());
        }
        if polled {
            fds.ready(ready);
            return Ok(());
        }
        ready.extend(
            events
                .iter()
                .filter(|ev| ev.token() != TIMER_TOKEN)
                .map(|ev| {
                    (
                        ev.token().0,
                        ev.is_readable() || ev.is_read_closed(),
                        ev.is_writable() || ev.is_error(),
                    )
                }),
        );
        Ok(())
    }

    /// The run was stopped from outside or by a failed worker start.
    fn stop_requested(&self) -> bool {
        self.shared.cfg.stop_flag.load(Ordering::Relaxed)
            || self.shared.abort.load(Ordering::Relaxed)
    }
}

/// The steps where the HTTP/1.1 and HTTP/2 workers differ; [`run_loop`] does the rest.
pub(crate) trait Protocol<'a, S: Sink, T: Transport> {
    /// The state both workers keep.
    fn core(&mut self) -> &mut WorkerCore<'a, S, T>;
    /// No arrival or refused request waits for a connection.
    fn queue_empty(&self) -> bool;
    /// Opens the initial connections.
    fn start(&mut self, now: u64);
    /// A slot on the deferred list (its connect failed) can take work again.
    fn retry(&mut self, slot: usize, now: u64);
    /// Open loop: an arrival is due; it goes to a connection or waits in the queue.
    /// `now` is its dispatched instant.
    fn dispatch(&mut self, req: Arc<Request>, intended_ns: u64, now: u64);
    /// End of the run: an arrival due before `end` that the loop had not released
    /// waits in the queue, dispatched at `end` (a lower bound, like sent), to be
    /// censored with the rest.
    fn queue_unreleased(&mut self, req: Arc<Request>, intended_ns: u64, end: u64);
    /// `--io poll`: lists every open connection's socket with what it waits for.
    /// Only the plain-TCP HTTP/1.1 worker runs so (`run` refuses the others).
    fn watch(&self, _fds: &mut PollFds) {}
    /// Handles readiness of connection `slot`.
    fn on_event(&mut self, slot: usize, readable: bool, writable: bool);
    /// After each event: the HTTP/2 worker accounts streams taken from its queue.
    fn after_event(&mut self) {}
    /// Brings the in-flight integral up to `now` where the worker does not update it
    /// at every change itself.
    fn note_in_flight(&mut self, _now: u64) {}
    /// Fires the protocol's own timers that are due at `now` (QUIC's loss recovery,
    /// acknowledgements, idle timeout) and returns the next one's instant, so the
    /// loop sleeps no longer; workers whose transport has no timers return `None`.
    fn fire_timers(&mut self, _now: u64) -> Option<u64> {
        None
    }
    /// Requests and connects past their timeouts fail.
    fn scan_timeouts(&mut self, now: u64);
    /// End of the run: everything still on a connection becomes a censored InFlight
    /// sample with `done_ns = end`, then every socket closes; then the queue.
    fn censor(&mut self, end: u64);
}

/// Runs a worker to the end of the load: release arrivals, sleep in epoll, handle
/// readiness, scan timeouts and publish every few ms, tick the sink, and at the end
/// censor what is left.
pub(crate) fn run_loop<'a, S: Sink, T: Transport, W: Protocol<'a, S, T>>(w: &mut W) {
    let mut events = Events::with_capacity(1024);
    let mut ready: Vec<(usize, bool, bool)> = Vec::with_capacity(1024);
    let mut fds = PollFds::default();
    if w.core().open_loop {
        w.core().stats.short_slice = request_slice(WORKER_SLICE_NS);
        if w.core().polled() {
            exact_timeouts();
        }
    }
    let now = w.core().now_ns();
    w.start(now);
    let mut next_housekeeping = now + HOUSEKEEPING_NS;
    let mut next_tick = now + TICK_NS;
    loop {
        let core = w.core();
        let now = core.now_ns();
        if core.stop_requested() {
            core.stats.stopped_early = true;
            break;
        }
        if core.shared.end_ns.is_some_and(|end| now >= end) {
            break;
        }
        while let Some(slot) = w.core().deferred.pop() {
            w.retry(slot, now);
        }
        let wait_ns = if w.core().open_loop {
            release_arrivals(w, now)
        } else {
            None
        };
        w.note_in_flight(now);
        // Nothing left to do: no request will start, none is in flight or queued.
        let queue_empty = w.queue_empty();
        let timer_ns = w.fire_timers(now);
        let core = w.core();
        if core.starting_done && core.in_flight == 0 && queue_empty {
            break;
        }
        let mut timeout = core.poll_timeout(now, next_housekeeping, wait_ns);
        if let Some(ns) = wait_ns.filter(|ns| *ns >= IDLE_MIN_NS && core.scheduled()) {
            let until = now + ns.min(IDLE_SLICE_NS);
            let shared = core.shared;
            if core.source.idle(until, &|| shared.now_ns()) {
                timeout = Duration::ZERO;
            }
        }
        if let Some(t) = timer_ns {
            timeout = timeout.min(Duration::from_nanos(t.saturating_sub(now)));
        }
        if core.polled() {
            fds.clear();
            w.watch(&mut fds);
        }
        let core = w.core();
        if let Err(e) = core.wait(&mut events, &mut fds, &mut ready, now, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                // The event queue itself failed: nothing more can be measured.
                core.stats.stopped_early = true;
                break;
            }
        }
        let open_loop = w.core().open_loop;
        for (i, &(slot, readable, writable)) in ready.iter().enumerate() {
            w.on_event(slot, readable, writable);
            w.after_event();
            if open_loop && (i + 1) % EVENTS_BETWEEN_RELEASES == 0 {
                let now = w.core().now_ns();
                release_arrivals(w, now);
            }
        }
        let now = w.core().now_ns();
        if now >= next_housekeeping {
            next_housekeeping = now + HOUSEKEEPING_NS;
            w.scan_timeouts(now);
            w.note_in_flight(now);
            w.core().publish(now);
        }
        if now >= next_tick {
            next_tick = now + TICK_NS;
            w.core().sink.tick(now);
        }
    }
    let end = w.core().now_ns();
    finish(w, end);
}

/// Open loop: dispatches every arrival that is due; returns ns until the next one.
fn release_arrivals<'a, S: Sink, T: Transport, W: Protocol<'a, S, T>>(
    w: &mut W,
    now: u64,
) -> Option<u64> {
    for _ in 0..MAX_ARRIVALS_PER_TURN {
        match w.core().next_arrival(now) {
            Arrival::Due(req, intended) => w.dispatch(req, intended, now),
            Arrival::Wait(ns) => return Some(ns),
            Arrival::Over => return None,
        }
    }
    Some(0)
}

/// End of the run: every scheduled arrival in [0, end) gets exactly one sample, those
/// the loop had not released yet (it checks the end before pacing) included.
fn finish<'a, S: Sink, T: Transport, W: Protocol<'a, S, T>>(w: &mut W, end: u64) {
    if w.core().open_loop {
        for _ in 0..MAX_UNRELEASED_AT_END {
            let Arrival::Due(req, intended) = w.core().next_arrival(end) else {
                break;
            };
            w.queue_unreleased(req, intended, end);
        }
    }
    w.core().starting_done = true;
    w.censor(end);
    w.note_in_flight(end);
    let core = w.core();
    core.publish(end);
    core.sink.tick(end);
}

/// A `Duration` in ns, saturating (a timeout of years is "never").
pub(crate) fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
