//! The recorder: a [`Sink`] per worker thread that turns samples into per-second and
//! whole-run histograms and counters.
//!
//! Hot path: `record` does a handful of histogram increments and counter additions on
//! memory allocated up front; it takes no lock and allocates nothing (the two per-second
//! send/schedule count vectors grow by one slot per second of run time, not per request).
//!
//! Memory stays flat in the number of requests: only the current second's histograms are
//! live. When a second closes (a later sample or a `tick`), its histograms are encoded
//! in HdrHistogram's compressed V2 format, the bytes kept, and the live histograms reset
//! for reuse; closed-loop service time, identical to response time, is stored once. The
//! whole-run histograms stay uncompressed (one set per worker). Measured with
//! `examples/flat_memory.rs`: 5 million requests, 64 connections' worth, two workers,
//! latencies spread over 13 ms: 6.9 MB RSS for the whole process, 1.8 MB of it the 251
//! closed seconds.
//!
//! What goes where:
//! - response time (done - intended) and service time (done - sent): every response
//!   (accepted or not) plus censored requests (timeout, still in flight at the end),
//!   which enter at their elapsed time: a lower bound of their true latency.
//! - TTFB (first byte - sent), connect time and ab's "total" (connect + service): only
//!   requests that got a response.
//! - send lag (sent - intended) and its two parts, scheduler lag (dispatched -
//!   intended: the generator's own lateness) and connection wait (sent - dispatched:
//!   waiting for a free connection or stream): every request that was sent, whatever
//!   its fate, so the three histograms count the same requests.
//! - connect/reset/closed/malformed/TLS failures have no meaningful latency; they are
//!   counted by kind, never dropped.
//!
//! Warm-up ([`Recorder::with_warmup`]): docs/methodology.md says "warm up before measuring".
//! A sample whose `intended_ns` is before the warm-up boundary is not measured (one
//! compare on the hot path); it is only counted in [`Warmup`]. Measured samples are
//! shifted so that the boundary is instant 0: per-second windows, send/schedule series
//! and rates start at the boundary. Attribution by *intended* instant (not done) keeps a
//! request whole: one scheduled in warm-up that finishes after it is warm-up, one
//! scheduled after it is measured even if it waits for a connection. Connection and
//! cap-hit events before the boundary go to [`Warmup`] too.

use crate::hist::{self, Hist};
use crate::resources;
use crate::MetricsError;
use hdrhistogram::serialization::V2DeflateSerializer;
use std::time::Duration;
use volley_engine::{ErrorKind, Sample, Sink};

mod merge;
mod snapshot;
mod stream;

pub use snapshot::RecorderSnapshot;
pub use stream::{SecondJoiner, SecondStream, StreamedSecond};

use merge::join_second;

const NS_PER_S: u64 = 1_000_000_000;

/// The per-second histograms, by the latency definition they hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// done - intended: what a user waits (coordinated-omission corrected).
    Response = 0,
    /// done - sent: the uncorrected service time.
    Service = 1,
    /// first byte - sent.
    Ttfb = 2,
    /// TCP connect time of requests that opened their connection (0 on reuse).
    Connect = 3,
    /// sent - intended: scheduler lag + connection wait.
    SendLag = 4,
    /// dispatched - intended: the generator's own lateness.
    SchedLag = 5,
    /// sent - dispatched: waiting for a free connection (HTTP/1.1) or stream (HTTP/2).
    ConnWait = 6,
}

/// Number of per-second histogram kinds ([`Metric::ALL`]).
pub const METRICS: usize = 7;

impl Metric {
    /// Every per-second metric, in storage order.
    pub const ALL: [Metric; METRICS] = [
        Metric::Response,
        Metric::Service,
        Metric::Ttfb,
        Metric::Connect,
        Metric::SendLag,
        Metric::SchedLag,
        Metric::ConnWait,
    ];

    /// Stable name used in JSON and CSV.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Response => "response_time",
            Metric::Service => "service_time",
            Metric::Ttfb => "ttfb",
            Metric::Connect => "connect_time",
            Metric::SendLag => "send_lag",
            Metric::SchedLag => "sched_lag",
            Metric::ConnWait => "conn_wait",
        }
    }
}

/// Counters of one window (a second, or the whole run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    /// Samples whose `done_ns` fell in the window, whatever their outcome.
    pub completed: u64,
    /// Of those, accepted responses.
    pub ok: u64,
    /// Of those, failures by [`ErrorKind::index`].
    pub errors: [u64; ErrorKind::ALL.len()],
    /// Responses by status class: index 0 = no status line, 1..=5 = 1xx..5xx
    /// (anything above 599 counts as 5xx).
    pub status_class: [u64; 6],
    /// Response bytes read from the wire (headers + body + framing).
    pub wire_bytes: u64,
    /// Decoded body bytes.
    pub body_bytes: u64,
    /// Most connections open at once, as reported by the engine.
    pub max_open: u32,
    /// Times an arrival found the connection cap reached.
    pub cap_hits: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.completed += o.completed;
        self.ok += o.ok;
        for (a, b) in self.errors.iter_mut().zip(o.errors) {
            *a += b;
        }
        for (a, b) in self.status_class.iter_mut().zip(o.status_class) {
            *a += b;
        }
        self.wire_bytes += o.wire_bytes;
        self.body_bytes += o.body_bytes;
        // Workers report the global open count, so the max of maxima is the global max.
        self.max_open = self.max_open.max(o.max_open);
        self.cap_hits += o.cap_hits;
    }

    /// Failed requests of every kind (censored ones included).
    pub fn failed(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// Requests still in flight or timed out: censored latencies.
    pub fn censored(&self) -> u64 {
        self.errors[ErrorKind::Timeout.index()] + self.errors[ErrorKind::InFlight.index()]
    }
}

/// The generator's resource use over one closed second (worker 0 only).
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct SecondResources {
    /// CPU cores' worth of process time used (user + sys / wall).
    pub cpu_cores_used: f64,
    /// Share of wall time some task waited for a CPU (PSI), when available.
    pub cpu_pressure: Option<f64>,
}

/// One closed second, kept compactly.
#[derive(Debug, Clone, PartialEq)]
pub struct ClosedSecond {
    /// Second of run time (`done_ns / 1e9`).
    pub second: u64,
    /// Its counters.
    pub counts: Counts,
    /// Its histograms, compressed-V2-encoded, by [`Metric`] index (empty bytes = empty
    /// histogram). Read them with [`ClosedSecond::hist`], which honours
    /// `service_is_response`.
    pub hists: [Vec<u8>; METRICS],
    /// The service-time histogram equals the response-time one (always so in a closed
    /// loop, where intended = sent) and is not stored twice: `hists[Service]` is empty.
    pub service_is_response: bool,
    /// Generator resource use in this second, if this recorder measured it.
    pub resources: Option<SecondResources>,
}

impl ClosedSecond {
    /// Decodes one of this second's histograms.
    pub fn hist(&self, m: Metric) -> Result<Hist, MetricsError> {
        let m = if m == Metric::Service && self.service_is_response {
            Metric::Response
        } else {
            m
        };
        hist::decode(&self.hists[m as usize])
    }

    /// Undoes the service = response sharing, before adding another worker's second.
    fn unshare(&mut self) {
        if self.service_is_response {
            self.hists[Metric::Service as usize] = self.hists[Metric::Response as usize].clone();
            self.service_is_response = false;
        }
    }

    /// Shares the service-time bytes with response time when they are equal.
    fn share(&mut self) {
        let (r, s) = (Metric::Response as usize, Metric::Service as usize);
        if !self.service_is_response && !self.hists[r].is_empty() && self.hists[r] == self.hists[s]
        {
            self.hists[s] = Vec::new();
            self.service_is_response = true;
        }
    }
}

/// Whole-run figures that are not histograms.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunTotals {
    pub counts: Counts,
    /// Exact status codes 0..=599 (index = code; larger codes are folded into 599).
    pub status_codes: Box<[u64; 600]>,
    pub sent: u64,
    /// Requests the generator dispatched (handled their arrival), and the span of their
    /// dispatched instants: the send rate the generator itself kept.
    pub dispatched: u64,
    pub first_dispatched_ns: u64,
    pub last_dispatched_ns: u64,
    /// Body bytes as they came over the wire (compressed when a coding was asked for).
    pub wire_body_bytes: u64,
    pub first_sent_ns: u64,
    pub last_sent_ns: u64,
    pub first_intended_ns: u64,
    pub last_intended_ns: u64,
    pub last_done_ns: u64,
    /// Measured requests that opened the connection they went out on (`connect_ns > 0`)
    /// or failed to connect: the measured period's share of the engine's
    /// `connections_opened` when there is a warm-up.
    pub opened: u64,
}

impl Default for RunTotals {
    fn default() -> Self {
        RunTotals {
            counts: Counts::default(),
            status_codes: Box::new([0; 600]),
            sent: 0,
            dispatched: 0,
            first_dispatched_ns: u64::MAX,
            last_dispatched_ns: 0,
            wire_body_bytes: 0,
            first_sent_ns: u64::MAX,
            last_sent_ns: 0,
            first_intended_ns: u64::MAX,
            last_intended_ns: 0,
            last_done_ns: 0,
            opened: 0,
        }
    }
}

/// What happened before the warm-up boundary: kept out of every measured figure, but
/// reported (in a summary note) so a reader can see the transient that was excluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Warmup {
    /// Samples whose intended instant fell before the boundary (any outcome).
    pub samples: u64,
    /// Connection-cap hits before the boundary.
    pub cap_hits: u64,
    /// Most connections open at once before the boundary.
    pub max_open: u32,
    /// Instant (ns since the run started) of the last connection event before the
    /// boundary, and the global open count it reported: with the latest event across
    /// workers, the number of connections carried into the measured period.
    pub last_event_ns: u64,
    /// Open connections reported by that last event.
    pub open_at_boundary: u32,
}

impl Warmup {
    fn add(&mut self, o: &Warmup) {
        self.samples += o.samples;
        self.cap_hits += o.cap_hits;
        self.max_open = self.max_open.max(o.max_open);
        // Each worker reports the global count: the latest event is the freshest view.
        if o.last_event_ns >= self.last_event_ns {
            self.last_event_ns = o.last_event_ns;
            self.open_at_boundary = o.open_at_boundary;
        }
    }
}

/// Where worker 0 is in its once-per-second resource readings.
#[derive(Debug, Clone, Copy)]
struct ResourceMark {
    at_ns: u64,
    cpu_ns: u64,
    psi_us: Option<u64>,
}

/// Records one worker's samples. Build one per worker (`Recorder::new`, and
/// [`Recorder::with_resources`] for worker 0), merge them after the run, then
/// [`Recorder::close`] into a [`crate::Summary`].
pub struct Recorder {
    /// Second the live window covers.
    current: u64,
    live_counts: Counts,
    live: [Hist; METRICS],
    closed: Vec<ClosedSecond>,
    /// Whole-run histograms by [`Metric`] index, then ab's total (connect + service).
    pub(crate) run: [Hist; METRICS],
    pub(crate) run_total: Hist,
    /// Whole-run only (not per second, so stored seconds keep their layout): the TLS
    /// handshake of requests that opened a TLS connection, and body transfer
    /// (done - first byte) of responses.
    pub(crate) run_tls: Hist,
    pub(crate) run_body: Hist,
    pub(crate) totals: RunTotals,
    /// Sends by second of `sent_ns`, dispatches by second of `dispatched_ns`, and
    /// scheduled arrivals by second of `intended_ns`.
    pub(crate) sent_by_second: Vec<u64>,
    pub(crate) dispatched_by_second: Vec<u64>,
    pub(crate) scheduled_by_second: Vec<u64>,
    started: bool,
    measure_resources: bool,
    mark: Option<ResourceMark>,
    live_resources: Option<SecondResources>,
    serializer: V2DeflateSerializer,
    /// First encode failure, reported at merge/close (the Sink trait cannot fail).
    error: Option<MetricsError>,
    /// Samples intended before this instant (ns since the run started) are warm-up;
    /// 0 = no warm-up. Measured instants are shifted down by it.
    pub(crate) warmup_ns: u64,
    /// What the warm-up saw.
    pub(crate) warm: Warmup,
    /// Where each closed window is also sent while the run goes (the agent's live
    /// per-second records); `None` for every other caller.
    stream: Option<SecondStream>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("current", &self.current)
            .field("closed_seconds", &self.closed.len())
            .field("completed", &self.totals.counts.completed)
            .finish()
    }
}

impl Recorder {
    /// A recorder that does not read resources (workers 1..).
    pub fn new() -> Recorder {
        Recorder {
            current: 0,
            live_counts: Counts::default(),
            live: std::array::from_fn(|_| hist::new_hist()),
            closed: Vec::new(),
            run: std::array::from_fn(|_| hist::new_hist()),
            run_total: hist::new_hist(),
            run_tls: hist::new_hist(),
            run_body: hist::new_hist(),
            totals: RunTotals::default(),
            sent_by_second: Vec::new(),
            dispatched_by_second: Vec::new(),
            scheduled_by_second: Vec::new(),
            started: false,
            measure_resources: false,
            mark: None,
            live_resources: None,
            serializer: V2DeflateSerializer::new(),
            error: None,
            warmup_ns: 0,
            warm: Warmup::default(),
            stream: None,
        }
    }

    /// Excludes the first `warmup` of the run from every measured figure: samples
    /// intended before it, and connection and cap-hit events before it, are only counted
    /// in [`Recorder::warmup`]; measured instants are shifted so that seconds and rates
    /// start at the boundary. Give every worker the same value (merging recorders with
    /// different boundaries is refused). `Duration::ZERO` (the default) measures all.
    pub fn with_warmup(mut self, warmup: Duration) -> Recorder {
        self.warmup_ns = u64::try_from(warmup.as_nanos()).unwrap_or(u64::MAX);
        self
    }

    /// The warm-up boundary, nanoseconds since the run started (0 = none).
    pub fn warmup_ns(&self) -> u64 {
        self.warmup_ns
    }

    /// What happened before the warm-up boundary.
    pub fn warmup(&self) -> &Warmup {
        &self.warm
    }

    /// A recorder that also reads the process's CPU time and the system's CPU pressure
    /// once per second, when a second closes. Give it to exactly one worker (worker 0):
    /// the readings are process-wide.
    pub fn with_resources() -> Recorder {
        Recorder {
            measure_resources: true,
            ..Recorder::new()
        }
    }

    /// The recorder for worker `worker`: worker 0 measures resources.
    pub fn for_worker(worker: usize) -> Recorder {
        if worker == 0 {
            Recorder::with_resources()
        } else {
            Recorder::new()
        }
    }

    /// Closed seconds so far, in order (after [`Recorder::finish`], all of them).
    pub fn closed_seconds(&self) -> &[ClosedSecond] {
        &self.closed
    }

    /// Bytes held by closed seconds' encoded histograms: what grows with run length.
    pub fn stored_bytes(&self) -> usize {
        self.closed
            .iter()
            .map(|c| c.hists.iter().map(Vec::len).sum::<usize>())
            .sum()
    }

    /// The whole-run histogram of one definition (all seconds, uncompressed): what a
    /// results store should persist beside the per-second bytes, without re-adding them.
    pub fn whole_run(&self, m: Metric) -> &Hist {
        &self.run[m as usize]
    }

    /// Requests recorded so far.
    pub fn completed(&self) -> u64 {
        self.totals.counts.completed
    }

    fn begin(&mut self, now_ns: u64) {
        if !self.started {
            self.started = true;
            self.current = now_ns / NS_PER_S;
            if self.measure_resources {
                self.mark = read_mark(now_ns);
            }
        }
    }

    /// Moves the live window forward to `second`, closing the current one if it moves.
    fn advance(&mut self, now_ns: u64) {
        self.begin(now_ns);
        let second = now_ns / NS_PER_S;
        if second > self.current {
            self.close_live(now_ns, true);
            self.current = second;
        }
    }

    /// Encodes and stores the live window. `read_resources` is false at the very end,
    /// where no real instant is known and a CPU reading would be misattributed.
    fn close_live(&mut self, now_ns: u64, read_resources: bool) {
        if self.measure_resources && read_resources {
            if let (Some(prev), Some(next)) = (self.mark, read_mark(now_ns)) {
                let dt_ns = next.at_ns.saturating_sub(prev.at_ns);
                if dt_ns > 0 {
                    let pressure = match (prev.psi_us, next.psi_us) {
                        (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 * 1e3 / dt_ns as f64),
                        _ => None,
                    };
                    self.live_resources = Some(SecondResources {
                        cpu_cores_used: next.cpu_ns.saturating_sub(prev.cpu_ns) as f64
                            / dt_ns as f64,
                        cpu_pressure: pressure,
                    });
                    self.mark = Some(next);
                }
            }
        }
        let empty = self.live_counts == Counts::default() && self.live.iter().all(Hist::is_empty);
        if !empty || self.live_resources.is_some() {
            let mut hists: [Vec<u8>; METRICS] = Default::default();
            let same = self.live[Metric::Service as usize] == self.live[Metric::Response as usize];
            for (i, h) in self.live.iter().enumerate() {
                if same && i == Metric::Service as usize {
                    continue;
                }
                match hist::encode(&mut self.serializer, h) {
                    Ok(b) => hists[i] = b,
                    Err(e) => {
                        self.error.get_or_insert(e);
                    }
                }
            }
            let closed = ClosedSecond {
                second: self.current,
                counts: self.live_counts,
                hists,
                service_is_response: same && !self.live[Metric::Response as usize].is_empty(),
                resources: self.live_resources.take(),
            };
            if let Some(stream) = &self.stream {
                stream.send(self.current, Some(closed.clone()));
            }
            // A second can be closed twice only if samples arrive after `finish`; keep
            // one entry per second so merging by index stays a simple join.
            match self.closed.last_mut() {
                Some(last) if last.second == closed.second => {
                    let prev = std::mem::replace(last, closed);
                    match join_second(prev, last.clone(), &mut self.serializer) {
                        Ok(j) => *last = j,
                        Err(e) => {
                            self.error.get_or_insert(e);
                        }
                    }
                }
                _ => self.closed.push(closed),
            }
        } else if let Some(stream) = &self.stream {
            stream.send(self.current, None);
        }
        self.live_counts = Counts::default();
        for h in self.live.iter_mut() {
            h.reset();
        }
    }

    /// Closes the live window. Called by merge and close; harmless to call twice.
    pub fn finish(&mut self) {
        let empty = self.live_counts == Counts::default() && self.live.iter().all(Hist::is_empty);
        if self.started && !empty {
            self.close_live(0, false);
        }
    }
}

fn read_mark(now_ns: u64) -> Option<ResourceMark> {
    Some(ResourceMark {
        at_ns: now_ns,
        cpu_ns: resources::process_cpu_ns()?,
        psi_us: resources::cpu_pressure_some_us(),
    })
}

fn bump(series: &mut Vec<u64>, second: u64) {
    let i = second as usize;
    if series.len() <= i {
        // Grows once per second of run time, not per request.
        series.resize(i + 1, 0);
    }
    series[i] += 1;
}

/// `s` with every instant moved `w` earlier (the warm-up boundary becomes 0). Only
/// called on measured samples, whose intended instant is >= `w`; a first byte of 0
/// means "none" and stays 0.
#[inline]
fn shifted(s: &Sample, w: u64) -> Sample {
    Sample {
        intended_ns: s.intended_ns - w,
        dispatched_ns: s.dispatched_ns.saturating_sub(w),
        sent_ns: s.sent_ns.saturating_sub(w),
        first_byte_ns: if s.first_byte_ns == 0 {
            0
        } else {
            s.first_byte_ns.saturating_sub(w)
        },
        done_ns: s.done_ns.saturating_sub(w),
        ..*s
    }
}

impl Sink for Recorder {
    #[inline]
    fn record(&mut self, s: &Sample) {
        if s.intended_ns < self.warmup_ns {
            self.warm.samples += 1;
            return;
        }
        // Decided before shifting: a sample never sent may carry sent_ns = 0.
        let was_sent = s.sent_ns >= s.intended_ns;
        let was_dispatched = s.dispatched_ns >= s.intended_ns;
        let s = &shifted(s, self.warmup_ns);
        self.advance(s.done_ns.max(self.current * NS_PER_S));
        let kind = s.error;
        let responded = matches!(kind, None | Some(ErrorKind::Status));
        let censored = matches!(kind, Some(ErrorKind::Timeout | ErrorKind::InFlight));

        let c = &mut self.live_counts;
        c.completed += 1;
        match kind {
            None => c.ok += 1,
            Some(k) => c.errors[k.index()] += 1,
        }
        let class = if s.status == 0 {
            0
        } else {
            (s.status as usize / 100).clamp(1, 5)
        };
        c.status_class[class] += 1;
        c.wire_bytes += s.wire_bytes;
        c.body_bytes += s.body_bytes;

        let t = &mut self.totals;
        t.counts.completed += 1;
        match kind {
            None => t.counts.ok += 1,
            Some(k) => t.counts.errors[k.index()] += 1,
        }
        t.counts.status_class[class] += 1;
        t.counts.wire_bytes += s.wire_bytes;
        t.counts.body_bytes += s.body_bytes;
        t.wire_body_bytes += s.wire_body_bytes;
        t.status_codes[(s.status as usize).min(599)] += 1;
        t.first_intended_ns = t.first_intended_ns.min(s.intended_ns);
        t.last_intended_ns = t.last_intended_ns.max(s.intended_ns);
        t.last_done_ns = t.last_done_ns.max(s.done_ns);
        if s.connect_ns > 0 || kind == Some(ErrorKind::Connect) {
            t.opened += 1;
        }
        bump(&mut self.scheduled_by_second, s.intended_ns / NS_PER_S);
        if was_dispatched {
            t.dispatched += 1;
            t.first_dispatched_ns = t.first_dispatched_ns.min(s.dispatched_ns);
            t.last_dispatched_ns = t.last_dispatched_ns.max(s.dispatched_ns);
            bump(&mut self.dispatched_by_second, s.dispatched_ns / NS_PER_S);
        }
        if was_sent {
            t.sent += 1;
            t.first_sent_ns = t.first_sent_ns.min(s.sent_ns);
            t.last_sent_ns = t.last_sent_ns.max(s.sent_ns);
            bump(&mut self.sent_by_second, s.sent_ns / NS_PER_S);
            for (m, v) in [
                (Metric::SendLag, s.send_lag_ns()),
                (Metric::SchedLag, s.sched_lag_ns()),
                (Metric::ConnWait, s.conn_wait_ns()),
            ] {
                hist::record_ns(&mut self.live[m as usize], v);
                hist::record_ns(&mut self.run[m as usize], v);
            }
        }
        if responded || censored {
            let (resp, serv) = (s.response_ns(), if was_sent { s.service_ns() } else { 0 });
            for h in [&mut self.live[0], &mut self.run[0]] {
                hist::record_ns(h, resp);
            }
            if was_sent {
                for h in [&mut self.live[1], &mut self.run[1]] {
                    hist::record_ns(h, serv);
                }
                hist::record_ns(&mut self.run_total, s.connect_ns.saturating_add(serv));
            }
        }
        if responded {
            if let Some(ttfb) = s.ttfb_ns() {
                for h in [&mut self.live[2], &mut self.run[2]] {
                    hist::record_ns(h, ttfb);
                }
            }
            for h in [&mut self.live[3], &mut self.run[3]] {
                hist::record_ns(h, s.connect_ns);
            }
            if s.tls_handshake_ns > 0 {
                hist::record_ns(&mut self.run_tls, s.tls_handshake_ns);
            }
            if s.first_byte_ns != 0 {
                hist::record_ns(
                    &mut self.run_body,
                    s.done_ns.saturating_sub(s.first_byte_ns),
                );
            }
        }
    }

    fn connections(&mut self, now_ns: u64, open_now: u32) {
        if now_ns < self.warmup_ns {
            let w = &mut self.warm;
            w.max_open = w.max_open.max(open_now);
            if now_ns >= w.last_event_ns {
                w.last_event_ns = now_ns;
                w.open_at_boundary = open_now;
            }
            return;
        }
        let now_ns = now_ns - self.warmup_ns;
        self.advance(now_ns.max(self.current * NS_PER_S));
        self.live_counts.max_open = self.live_counts.max_open.max(open_now);
        self.totals.counts.max_open = self.totals.counts.max_open.max(open_now);
    }

    fn cap_hit(&mut self, now_ns: u64) {
        if now_ns < self.warmup_ns {
            self.warm.cap_hits += 1;
            return;
        }
        let now_ns = now_ns - self.warmup_ns;
        self.advance(now_ns.max(self.current * NS_PER_S));
        self.live_counts.cap_hits += 1;
        self.totals.counts.cap_hits += 1;
    }

    fn tick(&mut self, now_ns: u64) {
        // Before the boundary there is no measured window to close.
        if now_ns < self.warmup_ns {
            return;
        }
        let now_ns = now_ns - self.warmup_ns;
        self.advance(now_ns.max(self.current * NS_PER_S));
    }
}

#[cfg(test)]
pub(crate) mod tests;
