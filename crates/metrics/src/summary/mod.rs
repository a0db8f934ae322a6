//! `close()`: the merged recorder plus what the engine and CLI know about the run,
//! turned into one [`Summary`] that every exporter prints from.
//!
//! Definitions (all from the four instants of a sample):
//! - response time = done - intended (coordinated-omission corrected; the headline of an
//!   open-loop run); service time = done - sent (the headline of a closed-loop run, where
//!   intended = sent and the two coincide); TTFB = first byte - sent; send lag = sent -
//!   intended.
//! - ab's Connection Times: Connect = TCP connect time of the request's connection (0
//!   when it reused a kept-alive one); Processing = done - sent; Waiting = first byte -
//!   sent; Total = Connect + Processing. ab measures Processing from the end of connect,
//!   which is when we send.
//! - ab's "Time per request": mean = concurrency x duration / completed;
//!   "across all concurrent requests" = duration / completed.
//! - Rates: achieved send rate = (sent - 1) / (last sent - first sent) and scheduled
//!   rate likewise over intended instants, so the time spent waiting for the last
//!   replies does not dilute them; reply rate = completed / duration.
//! - Warm-up (a recorder built [`Recorder::with_warmup`]): duration = engine wall time -
//!   warm-up, every instant is measured from the boundary, and the engine's whole-run
//!   connection counters are split: connections opened by measured requests are the
//!   measured figure, the rest of the engine's count is reported as warm-up's.

use crate::hist::{self, Hist};
use crate::label::{self, Bound, Check, Verdict};
use crate::recorder::{Metric, Recorder};
use crate::wire::{FirstRequest, WireReport};
use crate::MetricsError;
use serde::Serialize;
use std::collections::BTreeMap;
use volley_engine::ErrorKind;

mod close;

/// Version of the JSON document; bump on any incompatible change (docs/bench-json.md).
pub const SCHEMA_VERSION: u32 = 1;

/// The load model as the summary reports it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Model {
    /// Each connection sends its next request when the previous one finishes.
    Closed,
    /// Requests sent on a schedule at `rate_per_s`.
    Open {
        /// Offered rate, requests/s.
        rate_per_s: f64,
        /// "constant" or "poisson".
        arrival: String,
    },
}

/// What the engine and the CLI know about a run that the samples do not carry.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct RunInfo {
    /// Target URL as given.
    pub url: String,
    /// HTTP method sent.
    pub method: String,
    /// Closed or open loop.
    pub model: Model,
    /// Worker threads.
    pub threads: usize,
    /// Connections (closed loop: concurrency; open loop: initial pool).
    pub connections: usize,
    /// Requests each connection carries at once: HTTP/2 streams, 1 for HTTP/1.1. A
    /// closed loop keeps `connections x streams_per_connection` requests outstanding,
    /// which is what ab calls its concurrency.
    #[serde(default = "one")]
    pub streams_per_connection: u32,
    /// Open-loop connection cap.
    pub max_connections: usize,
    /// Whether connections were reused.
    pub keep_alive: bool,
    /// Wall time of the run, nanoseconds (engine's clock), warm-up included: the
    /// summary subtracts the recorder's warm-up itself.
    pub elapsed_ns: u64,
    /// TCP connections opened during the run (engine's count, warm-up included; with a
    /// warm-up the summary reports the measured share and notes the rest).
    pub connections_opened: u64,
    /// Most connections open at once, from the engine (merged with the sinks' figure;
    /// ignored with a warm-up, whose peak it may be).
    pub max_open_connections: u32,
    /// Open-loop arrivals that found the connection cap reached (engine's count;
    /// ignored with a warm-up: the recorder counts the measured ones).
    pub cap_hits: u64,
    /// The run ended before its stop condition (Ctrl-C or a stop flag).
    pub stopped_early: bool,
    /// Process CPU time (user + sys) used during the measured period (after the
    /// warm-up, when there is one), nanoseconds.
    pub cpu_ns: Option<u64>,
    /// Share of the measured period some task waited for a CPU (PSI), 0..1.
    pub cpu_pressure: Option<f64>,
    /// Cores the generator could use: min(threads, CPUs available).
    pub cores: f64,
    /// Lines the CLI wants printed with the result (e.g. "server closed connections").
    pub notes: Vec<String>,
    /// The stall probe that ran beside the load (`volley_monitor::stall`), its seconds
    /// on the recorder's clock (second 0 = the measured start); `None` when none ran.
    #[serde(default)]
    pub stalls: Option<volley_monitor::stall::StallReport>,
}

/// `RunInfo::streams_per_connection` of a record written before it existed.
fn one() -> u32 {
    1
}

/// min / mean / sd / median / max of one row of ab's Connection Times, milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TimesRow {
    /// Smallest value.
    pub min_ms: f64,
    /// Mean.
    pub mean_ms: f64,
    /// Standard deviation.
    pub sd_ms: f64,
    /// Median.
    pub median_ms: f64,
    /// Largest value.
    pub max_ms: f64,
    /// Values behind the row.
    pub count: u64,
}

/// ab's Connection Times table. Definitions in the module docs and in `definitions`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConnectionTimes {
    /// One line saying how each row is computed.
    pub definitions: String,
    /// TCP connect (0 on a reused connection).
    pub connect: TimesRow,
    /// done - sent.
    pub processing: TimesRow,
    /// first byte - sent.
    pub waiting: TimesRow,
    /// connect + processing.
    pub total: TimesRow,
}

/// One row of a percentile list.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentile {
    /// Percent of requests (0..100).
    pub percent: f64,
    /// Value at or below which that share of requests fell, milliseconds.
    pub ms: f64,
}

/// One line of wrk2's detailed spectrum.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SpectrumRow {
    /// Value, milliseconds.
    pub value_ms: f64,
    /// Quantile iterated to (0..1).
    pub quantile: f64,
    /// Requests at or below `value_ms`.
    pub total_count: u64,
    /// 1 / (1 - quantile); `None` (JSON null) at quantile 1.
    pub inverse: Option<f64>,
}

/// Distribution of one latency definition over the whole run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyStats {
    /// What is measured, in words.
    pub definition: String,
    /// Values recorded.
    pub count: u64,
    /// Smallest, ms.
    pub min_ms: f64,
    /// Mean, ms.
    pub mean_ms: f64,
    /// Standard deviation, ms.
    pub stdev_ms: f64,
    /// Median, ms.
    pub p50_ms: f64,
    /// 90th percentile, ms.
    pub p90_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// 99.9th percentile, ms.
    pub p999_ms: f64,
    /// 99.99th percentile, ms.
    pub p9999_ms: f64,
    /// Largest, ms.
    pub max_ms: f64,
}

/// Request counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Requests {
    /// Requests whose first byte was written.
    pub sent: u64,
    /// Requests that finished, accepted or failed (timeouts included): every sample but
    /// those still in flight at the end. With `-n N` and no interruption, exactly N.
    pub completed: u64,
    /// Accepted responses.
    pub ok: u64,
    /// Completed but not accepted (ab's "Failed requests"; timeouts included).
    pub failed: u64,
    /// Still in flight when the run ended (a `-d` run's last requests, or Ctrl-C).
    pub in_flight: u64,
    /// Timed out or still in flight: latencies recorded as lower bounds.
    pub censored: u64,
    /// Responses whose status is not 2xx (ab's "Non-2xx responses").
    pub non_2xx: u64,
}

/// Byte counts and transfer rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Bytes {
    /// Response bytes read (ab's "Total transferred").
    pub wire_total: u64,
    /// Decoded body bytes (ab's "HTML transferred").
    pub body_total: u64,
    /// wire_total / 1024 / duration (ab's "Transfer rate", Kbytes/sec).
    pub transfer_kib_per_s: f64,
    /// Body bytes as they came over the wire: still compressed when a content coding
    /// was asked for, else equal to `body_total`.
    pub wire_body_total: u64,
    /// body_total / wire_body_total when they differ (compression), else `None`.
    pub compression_ratio: Option<f64>,
}

/// Throughput figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Throughput {
    /// completed / duration (ab's "Requests per second"; in-flight requests excluded).
    pub requests_per_s: f64,
    /// ok / duration.
    pub ok_per_s: f64,
    /// concurrency x duration / completed, ms (ab's "Time per request (mean)"). Meaningful
    /// in a closed loop only; in an open loop `connections` is the initial pool.
    pub time_per_request_ms: f64,
    /// duration / completed, ms (ab's "(mean, across all concurrent requests)").
    pub time_per_request_all_ms: f64,
}

/// Rates the generator was asked for and achieved.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rates {
    /// Open loop: the rate asked for.
    pub offered_per_s: Option<f64>,
    /// Open loop: the rate the schedule's intended instants actually span.
    pub scheduled_per_s: Option<f64>,
    /// Rate of sends over the span of send instants.
    pub achieved_send_per_s: f64,
    /// Rate of dispatches (arrivals the generator handled) over the span of their
    /// dispatched instants: the rate the generator itself kept. Sends can fall behind it
    /// when the server holds every connection; dispatches fall behind only when the
    /// generator does.
    pub dispatched_per_s: f64,
    /// completed (in-flight excluded) / duration.
    pub reply_per_s: f64,
}

/// Connection figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Connections {
    /// Most open at once.
    pub max_open: u32,
    /// TCP connections opened.
    pub opened: u64,
    /// Open-loop arrivals that found `max_connections` reached.
    pub cap_hits: u64,
}

/// The generator's self-check for the whole run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Generator {
    /// CPU cores' worth of process time used (user + sys / wall).
    pub cpu_cores_used: Option<f64>,
    /// Cores it could use: min(threads, CPUs available).
    pub cores: f64,
    /// Share of time some task waited for a CPU, 0..1 (PSI).
    pub cpu_pressure: Option<f64>,
    /// 99th percentile of send lag (sent - intended = scheduler lag + connection wait),
    /// ms.
    pub send_lag_p99_ms: f64,
    /// 99th percentile of scheduler lag (dispatched - intended: the generator's own
    /// lateness), ms. What the label judges.
    pub sched_lag_p99_ms: f64,
    /// 99th percentile of connection wait (sent - dispatched: waiting for a free
    /// connection or stream, the server's doing or the cap's), ms. Reported, never
    /// judged against the generator.
    pub conn_wait_p99_ms: f64,
    /// server-bound, generator-bound, machine-stalled or inconclusive, and why.
    pub verdict: Verdict,
    /// Seconds labelled generator-bound.
    pub generator_bound_seconds: u64,
    /// Seconds labelled machine-stalled (late, and the stall probe saw it too).
    pub machine_stalled_seconds: u64,
    /// The stall probe over the run; `None` when none ran.
    pub probe: Option<ProbeFigures>,
}

/// The stall probe's figures for the whole run (docs/methodology.md, "The generator
/// checks itself").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeFigures {
    /// The sleeper's period, microseconds.
    pub interval_us: u64,
    /// It ran SCHED_FIFO (else at the nice value below, or a plain thread).
    pub fifo: bool,
    /// Its nice value when not real-time.
    pub nice: Option<i32>,
    /// It left the process's capped cpu cgroup.
    pub left_cgroup: bool,
    /// Longest stall it saw, ms.
    pub max_stall_ms: f64,
    /// Wake-ups more than 1 ms late, over the run.
    pub over_1ms: u64,
    /// Steal time over the run, ms summed over CPUs (`None` without a steal column).
    pub steal_ms: Option<f64>,
}

/// What the warm-up excluded from every other figure of the summary.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WarmupStats {
    /// Length of the warm-up, seconds.
    pub duration_s: f64,
    /// Requests intended before the boundary (any outcome).
    pub requests: u64,
    /// Connections opened during the warm-up: the engine's count minus those opened by
    /// measured requests.
    pub connections_opened: u64,
    /// Connections open when measuring began (carried into the measured period).
    pub open_at_boundary: u32,
    /// Most connections open at once during the warm-up.
    pub max_open: u32,
    /// Connection-cap hits during the warm-up.
    pub cap_hits: u64,
}

/// One second of the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SecondSummary {
    /// Second of run time (0-based).
    pub second: u64,
    /// Scheduled arrivals whose intended instant fell in this second.
    pub scheduled: u64,
    /// Requests sent in this second.
    pub sent: u64,
    /// Arrivals the generator dispatched in this second (what the label holds against
    /// `scheduled`).
    pub dispatched: u64,
    /// Requests finished (any outcome) in this second.
    pub completed: u64,
    /// Accepted responses.
    pub ok: u64,
    /// Failures by kind (only kinds that occurred).
    pub errors: BTreeMap<&'static str, u64>,
    /// Response bytes read.
    pub wire_bytes: u64,
    /// Most connections open at once.
    pub max_open: u32,
    /// Connection-cap hits.
    pub cap_hits: u64,
    /// Headline latency (see `Summary::latency_definition`) p50 / p99 / max, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Largest, ms.
    pub max_ms: f64,
    /// Send lag p99, ms.
    pub send_lag_p99_ms: f64,
    /// Scheduler lag (dispatched - intended) p99, ms.
    pub sched_lag_p99_ms: f64,
    /// Largest scheduler lag in this second, ms: what `bench/stall.py` holds against
    /// the probe's longest stall.
    pub sched_lag_max_ms: f64,
    /// Connection wait (sent - dispatched) p99, ms.
    pub conn_wait_p99_ms: f64,
    /// Generator CPU in this second (cores' worth).
    pub cpu_cores_used: Option<f64>,
    /// CPU pressure in this second.
    pub cpu_pressure: Option<f64>,
    /// The stall probe's longest oversleep in this second, ms (`None`: no probe): the
    /// longest stall's lower bound.
    pub probe_max_stall_ms: Option<f64>,
    /// The longest stall's upper bound in this second, ms: from when the held sleeper
    /// last ran to when it woke. This is what the label compares lateness with.
    #[serde(default)]
    pub probe_stall_bound_ms: Option<f64>,
    /// How long the pacer (worker 0) was runnable but waited for a CPU in this second,
    /// ms, summed: other tasks held its core. The stall probe (`SCHED_FIFO`) never
    /// waits so; this shows how much of a late second's lateness that wait explains.
    #[serde(default)]
    pub pacer_wait_ms: Option<f64>,
    /// The probe's oversleep p99 in this second, ms.
    pub probe_p99_ms: Option<f64>,
    /// The probe's wake-ups more than 1 ms late in this second.
    pub probe_over_1ms: Option<u32>,
    /// The guest's steal time in this second, ms summed over CPUs.
    pub steal_ms: Option<f64>,
    /// Share of the machine's CPUs someone else took in this second: steal plus the
    /// CPU of processes outside volley and its target (see [`MachineLoad`]); filled by
    /// a caller that watched a target, `None` otherwise.
    #[serde(default)]
    pub others_busy_share: Option<f64>,
    /// How long the target's threads waited for a CPU in this second, ms summed over
    /// its threads (the monitor's `run_wait_ms_per_s` for a target volley started);
    /// `None` when no monitor watched a process. Beside `others_busy_share` it tells a
    /// target the machine starved from one its load kept busy.
    #[serde(default)]
    pub target_wait_ms: Option<f64>,
    /// CPU time others surely took in this second of the CPU(s) the pacer was on, ms:
    /// its busy time less all of volley's CPU and that of the targets volley started
    /// (`volley_monitor::cpu_share`). A late second the pacer's wait explains while
    /// others took at least that wait is the machine's (`label::neighbour_explains`).
    #[serde(default)]
    pub others_on_pacer_ms: Option<f64>,
    /// CPU time the targets volley started surely took in this second of the CPU(s)
    /// the pacer was on, ms (`volley_monitor::cpu_share`'s per-CPU figures): a target
    /// beside the generator on its core (`label::target_beside`).
    #[serde(default)]
    pub target_on_pacer_ms: Option<f64>,
    /// Who was the bottleneck in this second.
    pub label: Bound,
}

/// Everything a report shows about one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// URL.
    pub url: String,
    /// Method.
    pub method: String,
    /// Closed or open loop.
    pub model: Model,
    /// Worker threads.
    pub threads: usize,
    /// Connections (closed: concurrency).
    pub connections: usize,
    /// HTTP/2 streams per connection (1 for HTTP/1.1): a closed loop keeps
    /// `connections x streams_per_connection` requests outstanding (ab's concurrency).
    pub streams_per_connection: u32,
    /// Connection reuse.
    pub keep_alive: bool,
    /// Which latency the headline figures (spectrum, served_within, per-second) show.
    pub latency_definition: String,
    /// Wall time of the measured period, seconds (warm-up excluded).
    pub duration_s: f64,
    /// What the warm-up excluded; `None` (JSON null) without one.
    pub warmup: Option<WarmupStats>,
    /// Counts.
    pub requests: Requests,
    /// Failures by kind (every kind listed, zeros included).
    pub errors: BTreeMap<&'static str, u64>,
    /// Responses by exact status code ("none" when no status line was read).
    pub status_codes: BTreeMap<String, u64>,
    /// Bytes.
    pub bytes: Bytes,
    /// Throughput.
    pub throughput: Throughput,
    /// Rates.
    pub rates: Rates,
    /// ab's Connection Times.
    pub connection_times: ConnectionTimes,
    /// ab's "Percentage of the requests served within a certain time": in a closed loop
    /// ab's own figure, Total = Connect + Processing; in an open loop (ab has none) the
    /// headline response time, which counts from the intended send.
    pub served_within: Vec<Percentile>,
    /// Which time `served_within` shows, in words.
    pub served_within_definition: String,
    /// Every latency definition: response_time, service_time, ttfb, connect_time,
    /// send_lag, sched_lag, conn_wait (and tls_handshake, body_transfer).
    pub latency: BTreeMap<&'static str, LatencyStats>,
    /// wrk2's detailed percentile spectrum of the headline latency.
    pub spectrum: Vec<SpectrumRow>,
    /// Connections.
    pub connections_stats: Connections,
    /// The generator's self-check.
    pub generator: Generator,
    /// Per-second series (every second, empty ones included).
    pub seconds: Vec<SecondSummary>,
    /// Ended before its stop condition.
    pub stopped_early: bool,
    /// Things the reader must know (interruptions, censored values, server failures).
    pub notes: Vec<String>,
    /// Protocol, TLS and HTTP/2 details, when the caller knows them (the CLI fills
    /// this in after closing; `None` from [`crate::Recorder::close`]).
    pub wire: Option<WireReport>,
    /// The cold first request (`--first-request`), reported apart from the run.
    pub first_request: Option<FirstRequest>,
    /// The generator's fd and ephemeral-port headroom over the run (the CLI fills this
    /// in; `None` from [`crate::Recorder::close`] and when `/proc` could not be read).
    pub headroom: Option<volley_monitor::headroom::HeadroomReport>,
    /// What others took of the machine during the run (a caller that watched a target
    /// fills it in from the monitor; `None` otherwise).
    pub machine: Option<MachineLoad>,
}

/// Share of a run's time during which the machine's CPUs, taken by someone other than
/// volley and its target, make it "busy": 10% of all CPUs.
pub const BUSY_SHARE: f64 = 0.10;

/// What someone else took of the machine during a run: the host (steal) and processes
/// outside volley and its target. A target's CPU quota adds nothing here (throttled time
/// is not busy time), unlike system-wide CPU pressure, which counts the throttled
/// target's waiting (docs/methodology.md, "The generator checks itself").
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MachineLoad {
    /// CPUs of the machine.
    pub cpus: u32,
    /// CPU used by processes outside volley and its target, in CPUs (1.0 = one busy).
    pub others_cores: f64,
    /// Steal, in CPUs.
    pub steal_cores: f64,
    /// CPU used by the other targets volley started (a study's idle instances), in
    /// CPUs: the study's own doing, so never part of [`MachineLoad::busy_share`].
    pub study_cores: f64,
}

impl Summary {
    /// The failures by kind, "status: 70", in the order reports list them; requests
    /// still in flight at the end are censored, not failed, and not among them.
    pub fn failures(&self) -> Vec<String> {
        self.errors
            .iter()
            .filter(|(k, &n)| n > 0 && **k != "in_flight")
            .map(|(k, n)| format!("{k}: {n}"))
            .collect()
    }

    /// What a run most of whose requests failed (but not all: such a run is no run of
    /// the server at all, which its caller says) is not: its "Requests per second"
    /// counts every completed request as ab's does, failures included, and its
    /// latencies are mostly failures' (docs/methodology.md, "Errors are never
    /// throughput"). The note says so and gives the successes' rate beside it.
    pub fn mostly_failed(&self) -> Option<String> {
        let (completed, failed) = (self.requests.completed, self.requests.failed);
        (self.requests.ok > 0 && failed.saturating_mul(2) > completed).then(|| {
            format!(
                "most requests failed ({failed} of {completed}; {}): 'Requests per second' counts them as ab does and the latencies are mostly theirs, so neither is the server's figure; {:.2} request(s) per second succeeded",
                self.failures().join(", "),
                self.throughput.ok_per_s
            )
        })
    }
}

impl MachineLoad {
    /// (others + steal) / CPUs: the share of the machine someone else took.
    pub fn busy_share(&self) -> f64 {
        (self.others_cores + self.steal_cores) / f64::from(self.cpus.max(1))
    }

    /// Whether someone else took more than [`BUSY_SHARE`] of the machine.
    pub fn busy(&self) -> bool {
        self.busy_share() > BUSY_SHARE
    }
}

fn ms(us: u64) -> f64 {
    hist::us_to_ms(us as f64)
}

fn row(h: &Hist) -> TimesRow {
    if h.is_empty() {
        return TimesRow {
            min_ms: 0.0,
            mean_ms: 0.0,
            sd_ms: 0.0,
            median_ms: 0.0,
            max_ms: 0.0,
            count: 0,
        };
    }
    TimesRow {
        min_ms: ms(h.min()),
        mean_ms: hist::us_to_ms(h.mean()),
        sd_ms: hist::us_to_ms(h.stdev()),
        median_ms: ms(h.value_at_quantile(0.5)),
        max_ms: ms(h.max()),
        count: h.len(),
    }
}

fn stats(h: &Hist, definition: &str) -> LatencyStats {
    let q = |p: f64| {
        if h.is_empty() {
            0.0
        } else {
            ms(h.value_at_quantile(p))
        }
    };
    LatencyStats {
        definition: definition.to_string(),
        count: h.len(),
        min_ms: if h.is_empty() { 0.0 } else { ms(h.min()) },
        mean_ms: if h.is_empty() {
            0.0
        } else {
            hist::us_to_ms(h.mean())
        },
        stdev_ms: if h.is_empty() {
            0.0
        } else {
            hist::us_to_ms(h.stdev())
        },
        p50_ms: q(0.5),
        p90_ms: q(0.9),
        p99_ms: q(0.99),
        p999_ms: q(0.999),
        p9999_ms: q(0.9999),
        max_ms: if h.is_empty() { 0.0 } else { ms(h.max()) },
    }
}

/// wrk2's spectrum: quantiles stepping halfway to 100% five ticks at a time.
pub fn spectrum(h: &Hist) -> Vec<SpectrumRow> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut total = 0u64;
    h.iter_quantiles(5)
        .map(|v| {
            total += v.count_since_last_iteration();
            let q = v.quantile_iterated_to();
            SpectrumRow {
                value_ms: ms(v.value_iterated_to()),
                quantile: q,
                total_count: total,
                inverse: (q < 1.0).then(|| 1.0 / (1.0 - q)),
            }
        })
        .collect()
}

/// ab's served-within percentages.
pub fn served_within(h: &Hist) -> Vec<Percentile> {
    [50.0, 66.0, 75.0, 80.0, 90.0, 95.0, 98.0, 99.0, 100.0]
        .into_iter()
        .map(|p| Percentile {
            percent: p,
            ms: if h.is_empty() {
                0.0
            } else {
                ms(h.value_at_percentile(p))
            },
        })
        .collect()
}

/// Rate over a span of instants: (n - 1) events fill the span between first and last.
fn span_rate(n: u64, first_ns: u64, last_ns: u64, fallback_s: f64) -> f64 {
    if n >= 2 && last_ns > first_ns {
        (n - 1) as f64 * 1e9 / (last_ns - first_ns) as f64
    } else if fallback_s > 0.0 {
        n as f64 / fallback_s
    } else {
        0.0
    }
}

/// ab's throughput figures: requests/s, and time per request across all connections
/// and per connection.
/// ab's throughput figures; `concurrency` is the requests outstanding at once
/// (connections x HTTP/2 streams in a closed loop).
fn throughput(concurrency: usize, duration_s: f64, finished: u64, ok: u64) -> Throughput {
    let per_s = |n: u64| {
        if duration_s > 0.0 {
            n as f64 / duration_s
        } else {
            0.0
        }
    };
    let concurrency = concurrency.max(1) as f64;
    Throughput {
        requests_per_s: per_s(finished),
        ok_per_s: per_s(ok),
        time_per_request_ms: if finished > 0 {
            concurrency * duration_s * 1e3 / finished as f64
        } else {
            0.0
        },
        time_per_request_all_ms: if finished > 0 {
            duration_s * 1e3 / finished as f64
        } else {
            0.0
        },
    }
}

const RESPONSE_DEF: &str =
    "response time = done - intended send time (coordinated-omission corrected; includes time queued behind a late generator or a full pool)";
const SERVICE_DEF: &str = "service time = done - sent (not corrected for coordinated omission)";
const TOTAL_DEF: &str = "Total = Connect + Processing, as ab's table: TCP connect and TLS handshake (0 on a reused connection) plus done - sent";
const CLOSED_DEF: &str =
    "closed-loop service time = done - sent (each connection waits for its reply before sending again; intended = sent)";

#[cfg(test)]
pub(crate) mod tests;
