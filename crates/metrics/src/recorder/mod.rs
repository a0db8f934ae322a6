//! The recorder: a [`Sink`](volley_engine::Sink) per worker thread that turns samples into per-second and
//! whole-run histograms and counters.
//!
//! Hot path: `record` does a handful of histogram increments and counter additions on
//! memory allocated up front; it takes no lock and allocates nothing (the two per-second
//! send/schedule count vectors grow by one slot per second of run time, not per request).
//!
//! Memory stays flat in the number of requests: only the open seconds' histograms are
//! live (one second, or with [`WindowKey::Intended`] the seconds within the hold, see
//! `window.rs`). When a second closes (a later sample or a `tick`), its histograms are encoded
//! in HdrHistogram's compressed V2 format (by the recorder's one [`hist::Encoder`]), the
//! bytes kept, and the live histograms it used reset for reuse; closed-loop service time, identical to response time, is stored once. The
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
use crate::MetricsError;
use std::sync::Arc;
use std::time::Duration;
use volley_engine::ErrorKind;

mod digest;
mod merge;
mod offload;
mod sink;
mod snapshot;
mod stream;
mod window;

pub use digest::SecondDigest;
pub use snapshot::RecorderSnapshot;
pub use stream::{SecondJoiner, SecondStream, StreamedSecond};
pub use window::{WindowKey, MAX_HOLD};

use window::{ResourceMark, Window};

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
    /// Samples keyed to the window (by completion or intended send second, see
    /// [`WindowKey`]), whatever their outcome.
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
    /// Adds another worker's or agent's counters of the same window.
    pub fn add(&mut self, o: &Counts) {
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
    /// Milliseconds worker 0 (the pacer, in an open loop with one worker) was runnable
    /// but waited for a CPU in this second: other tasks held its core. Summed over the
    /// second, so it bounds any one wait from above. `None` without schedstats.
    #[serde(default)]
    pub pacer_wait_ms: Option<f64>,
    /// Milliseconds worker 0 ran in this second (schedstat): its own use of the CPU,
    /// which it never waited behind. `None` without schedstats.
    #[serde(default)]
    pub pacer_run_ms: Option<f64>,
    /// The CPUs worker 0 was seen on at this second's two edges, as a bit mask (bit n =
    /// CPU n; 0 = not known, or a CPU past 63): whose others' use the label holds its
    /// wait against (docs/methodology.md, "A neighbour on the pacer's CPU").
    #[serde(default)]
    pub pacer_cpus: u64,
}

impl SecondResources {
    /// The CPUs in [`SecondResources::pacer_cpus`].
    pub fn pacer_cpu_list(&self) -> impl Iterator<Item = usize> + '_ {
        (0..64).filter(|c| self.pacer_cpus & (1 << c) != 0)
    }
}

/// One closed second, kept compactly.
#[derive(Debug, Clone, PartialEq)]
pub struct ClosedSecond {
    /// Second of run time: `done_ns / 1e9`, or `intended_ns / 1e9` with
    /// [`WindowKey::Intended`].
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

/// Records one worker's samples. Build one per worker (`Recorder::new`, and
/// [`Recorder::with_resources`] for worker 0), merge them after the run, then
/// [`Recorder::close`] into a [`crate::Summary`].
pub struct Recorder {
    /// What windows are keyed by, its hold in ns, and whether by intended time (the
    /// hot path reads the flag, not the enum).
    key: WindowKey,
    hold_ns: u64,
    by_intended: bool,
    /// The open windows: a ring whose slot `head` holds second `base`, the oldest open
    /// one (one window for the completion key).
    ring: Box<[Window]>,
    head: usize,
    base: u64,
    /// Second of the latest instant seen (the wall-clock second the run is in).
    wall_s: u64,
    /// The next instant at which the wall-clock second changes or a window closes.
    edge_ns: u64,
    /// Samples put in a later window than their own (see [`Recorder::late_samples`]).
    late: u64,
    closed: Vec<ClosedSecond>,
    /// False after [`Recorder::stream_only`]: closed seconds go only to the stream.
    keep_closed: bool,
    /// The joined seconds' digests, when they were written out as they closed
    /// ([`Recorder::set_digests`]); empty otherwise.
    digests: Vec<SecondDigest>,
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
    serializer: hist::Encoder,
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
    /// The encoder thread that closes windows off the worker's thread
    /// ([`Recorder::with_offload`]); `None`: closed inline.
    offload: Option<offload::Offload>,
    /// The run's path check, shown every sample before the warm-up cut
    /// ([`Recorder::with_first_answers`]); `None` for every caller but `bench URL`.
    first: Option<Arc<volley_engine::FirstAnswers>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("key", &self.key)
            .field("base", &self.base)
            .field("closed_seconds", &self.closed.len())
            .field("completed", &self.totals.counts.completed)
            .finish()
    }
}

impl Recorder {
    /// A recorder that does not read resources (workers 1..).
    pub fn new() -> Recorder {
        Recorder {
            key: WindowKey::Completion,
            hold_ns: 0,
            by_intended: false,
            ring: Box::new([Window::new()]),
            head: 0,
            base: 0,
            wall_s: 0,
            edge_ns: 0,
            late: 0,
            closed: Vec::new(),
            keep_closed: true,
            digests: Vec::new(),
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
            serializer: hist::Encoder::new(),
            error: None,
            warmup_ns: 0,
            warm: Warmup::default(),
            stream: None,
            offload: None,
            first: None,
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

    /// Shows `first` every sample (warm-up included: the check is of the run's first
    /// answers), so an answer that refuses its request ends the run
    /// (`volley_engine::first`). Give every worker the same one.
    pub fn with_first_answers(mut self, first: Arc<volley_engine::FirstAnswers>) -> Recorder {
        self.first = Some(first);
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

    /// Of those, accepted responses.
    pub fn ok(&self) -> u64 {
        self.totals.counts.ok
    }
}

#[cfg(test)]
mod reuse_tests;
#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod window_tests;
