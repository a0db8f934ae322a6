//! The report model: one study (or one run) read from the store into plain numbers that
//! every format renders, so HTML, Markdown and JSON always agree.
//!
//! Reading rules (docs/store-conventions.md): a step's `summary` is the JSON of
//! `volley_metrics::Summary` (plus `monitor` and `throttling`), its `verdict` holds
//! `sustain` / `little` / `throttled`, its series are `load` (`SecondSummary`) and
//! `monitor` (`MonitorSample`) rows, its histograms HdrHistogram V2 bytes. Every field is
//! read leniently (`serde(default)`): a missing figure becomes "not shown", never a
//! failure, so reports of older or partial runs still render.
//!
//! Generator-bound steps stay in the model (they are evidence) but are excluded from every
//! figure presented as the server's: the capacity, the USL fit, the percentile curve and
//! the per-rate medians.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use volley_analysis::{bootstrap, knee, little::LittleCheck, sustain, usl};
use volley_metrics::hist;
use volley_store::{HistogramKind, RunId, RunRow, SeriesSource, StepRow, Store};

use crate::error::ReportError;

mod derive;
mod injected;
mod load;
mod office;
mod selector;
mod stored;
#[cfg(test)]
mod tests;
mod wire;

pub(crate) use derive::best_attempts;
use derive::*;
pub use derive::{group_name, group_of_any_series, reason_text, trim_num};
pub use injected::{InjectorRow, PhaseRow};
pub use load::load;
pub(crate) use load::load_run;
pub use office::{OfficeAnswer, OfficeStep};
pub use selector::Selector;
use stored::*;
pub use wire::{H3Handshakes, HandshakeKind, WireFacts};

/// Version of the JSON report model; bump on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Heading, e.g. "study 3: rate-sweep" or "run 12: nginx".
    pub title: String,
    /// The study, when the report covers one (or the run belongs to one).
    pub study: Option<StudyInfo>,
    /// One entry per run, in run order; each has its own colour in charts.
    pub targets: Vec<TargetReport>,
}

/// The study a report comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StudyInfo {
    /// Row id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// running / complete / incomplete.
    pub status: String,
    /// Wall-clock start, ms since the Unix epoch.
    pub started_unix_ms: i64,
}

/// One run: one target under one study.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetReport {
    /// Run id.
    pub run_id: i64,
    /// Target name as written in the study (or URL for a bench run).
    pub target: String,
    /// running / complete / incomplete.
    pub status: String,
    /// Environment record, verbatim.
    pub environment: Value,
    /// Which latency the headline figures show, in words (from the summaries; a run
    /// mixing open- and closed-loop steps has two).
    pub latency_definitions: Vec<String>,
    /// Every step, by index.
    pub steps: Vec<StepReport>,
    /// Capacity of each group of judged rate steps (empty without rate steps).
    pub capacity: Vec<Capacity>,
    /// Capacity searches: the stored result of each, with its interval, and searches
    /// whose steps are stored but whose result is not (the study was killed mid-search).
    pub searches: Vec<SearchCapacity>,
    /// Points measured more than once: medians with bootstrap intervals.
    pub repeats: Vec<RepeatGroup>,
    /// USL fits of the concurrency steps, one per (cap, cores, keep-alive) group.
    pub usl: Vec<UslGroup>,
    /// Latency percentile curves of the merged whole-step histograms (non-generator-bound
    /// steps), one per definition present (response time, service time).
    pub percentile_curves: Vec<PercentileCurve>,
    /// Office workloads: how many users this target carries.
    pub office: Vec<OfficeAnswer>,
}

/// One measured step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepReport {
    /// Position in the run.
    pub index: u32,
    /// Offered rate, requests/s (rate steps).
    pub rate_rps: Option<f64>,
    /// Concurrency or pool size.
    pub concurrency: Option<u32>,
    /// CPU quota of the target in cores.
    pub cpu_quota_cores: Option<f64>,
    /// cpuset of the target.
    pub cores: Option<String>,
    /// Keep-alive on or off.
    pub keepalive: Option<bool>,
    /// Repeat index (0-based).
    pub repeat: u32,
    /// The study's workload name, when the runner recorded it.
    pub workload: Option<String>,
    /// The `[[variant]]` (tuning) the target ran this step with, when it had one.
    pub variant: Option<String>,
    /// The protocol the step spoke ("h1", "h2", "h3"), when the report holds more than
    /// one: a series dimension like the variant. `None` when every step spoke the same
    /// (it would only lengthen every label) or nothing says.
    pub protocol: Option<String>,
    /// Closed loop: the latency figures are service times; otherwise response times.
    pub closed_loop: bool,
    /// "sweep" or "search", when the runner said.
    pub phase: Option<String>,
    /// Which of its cell's whole searches the step belonged to (0-based, as stored),
    /// when the cell was searched more than once (`[search] passes`).
    pub pass: Option<u32>,
    /// Seconds from the run's first step start to this step's start (wall clock).
    pub start_offset_s: f64,
    /// Wall time of the step, start to end (warm-up and load; cool-down excluded), s.
    pub wall_s: f64,
    /// Load duration, seconds.
    pub duration_s: f64,
    /// Requests with an outcome.
    pub completed: u64,
    /// Accepted responses.
    pub ok: u64,
    /// Failed (including censored).
    pub failed: u64,
    /// Timed out or in flight at the end.
    pub censored: u64,
    /// completed / duration.
    pub requests_per_s: f64,
    /// Achieved send rate.
    pub send_rate_rps: Option<f64>,
    /// Replies per second.
    pub reply_rate_rps: f64,
    /// Headline latency (response time open loop, service time closed loop), ms.
    pub latency: LatencyFigures,
    /// Most connections open at once.
    pub max_open_connections: Option<u32>,
    /// Arrivals that found the connection cap reached.
    pub cap_hits: u64,
    /// server-bound / generator-bound / inconclusive.
    pub label: Option<String>,
    /// Sustainability verdict (rate steps).
    pub sustainable: Option<bool>,
    /// Why not sustainable, in words.
    pub reasons: Vec<String>,
    /// Little's law relative gap, when checked.
    pub little_gap: Option<f64>,
    /// Little's law gap above 5%.
    pub little_flagged: bool,
    /// Throttled by a CPU cap during the step.
    pub throttled: bool,
    /// Someone else took the CPU while it ran (the study re-measures such steps).
    pub machine_busy: bool,
    /// The longest oversleep the stall probe beside the load measured, ms: the
    /// machine's own stall, the evidence a machine-stalled label rests on.
    pub probe_max_stall_ms: Option<f64>,
    /// The target died during this step: what the death watch saw.
    pub target_died: Option<String>,
    /// Which measurement of its planned step this is: 0 the first, 1.. re-measures of
    /// a step noise spoiled.
    pub attempt: u32,
    /// Server resources over the step, when a monitor ran.
    pub resources: Option<Resources>,
    /// Per-second latency and throughput.
    pub seconds: Vec<SecondPoint>,
    /// Monitor samples.
    pub monitor: Vec<MonitorPoint>,
    /// Injectors that shared the step's load (`None`: one process).
    pub injectors: Option<u32>,
    /// Intervals with the same set of active injectors.
    pub phases: Vec<PhaseRow>,
    /// Each injector's own figures.
    pub injector_rows: Vec<InjectorRow>,
    /// Office days (`caldav` workloads): the step's judgement.
    pub office: Option<OfficeStep>,
    /// What the run noted about the step, as stored (a bus in the clear, connections
    /// the bus refused, a shaped link's figure, an interrupted step, ...).
    pub notes: Vec<String>,
    /// What its bytes travelled over (TLS and h3 handshakes by kind, h2/h3 events),
    /// when stored (left out of JSON when not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wire: Option<WireFacts>,
}

impl TargetReport {
    /// True when some step ran closed loop (service-time figures).
    pub fn has_closed_loop(&self) -> bool {
        self.steps.iter().any(|s| s.closed_loop)
    }

    /// True when some step ran open loop (response-time figures).
    pub fn has_open_loop(&self) -> bool {
        self.steps.iter().any(|s| !s.closed_loop)
    }
}

impl StepReport {
    /// The point this step measures, without its repeat: "8.6KB, rate 100/s, no-ka",
    /// and its variant and protocol when it has them ("..., variant tuned, h2").
    pub fn point_label(&self) -> String {
        self.label_with(true, true)
    }

    /// [`StepReport::point_label`] without the variant: where the variants of one target
    /// meet to be compared.
    pub fn point_label_of_any_variant(&self) -> String {
        self.label_with(false, true)
    }

    /// [`StepReport::point_label`] without the protocol: where the protocols of one
    /// target meet to be compared.
    pub fn point_label_of_any_protocol(&self) -> String {
        self.label_with(true, false)
    }

    /// The point without variant or protocol: a chart's category, where every series
    /// (target, variant, protocol: `crate::colors::key`) stands side by side.
    pub fn point_label_of_any_series(&self) -> String {
        self.label_with(false, false)
    }

    fn label_with(&self, variant: bool, protocol: bool) -> String {
        let mut label = self.bare_point_label();
        if let Some(v) = self.variant.as_ref().filter(|_| variant) {
            label.push_str(&format!(", variant {v}"));
        }
        if let Some(p) = self.protocol.as_ref().filter(|_| protocol) {
            label.push_str(&format!(", {p}"));
        }
        label
    }

    /// The load point alone: workload, rate or concurrency, injectors, cap, cores,
    /// keep-alive.
    fn bare_point_label(&self) -> String {
        let mut parts = Vec::new();
        if let Some(w) = &self.workload {
            parts.push(w.clone());
        }
        if let Some(r) = self.rate_rps {
            parts.push(format!("rate {}/s", trim_num(r)));
        }
        if let Some(c) = self.concurrency {
            if self.rate_rps.is_none() {
                parts.push(format!("c={c}"));
            }
        }
        if let Some(k) = self.injectors {
            parts.push(format!("{k} injector{}", if k == 1 { "" } else { "s" }));
        }
        if let Some(q) = self.cpu_quota_cores {
            parts.push(format!("cap {}", trim_num(q)));
        }
        if let Some(c) = &self.cores {
            parts.push(format!("cpus {c}"));
        }
        if let Some(k) = self.keepalive {
            parts.push(if k { "ka" } else { "no-ka" }.to_string());
        }
        if parts.is_empty() {
            "default".to_string()
        } else {
            parts.join(", ")
        }
    }

    /// Most of its requests failed (or none finished): it has no throughput or latency
    /// figure in any answer (an error is never throughput).
    pub fn mostly_failed(&self) -> bool {
        self.completed == 0 || self.failed.saturating_mul(2) > self.completed
    }

    /// True when the step was labelled link-bound (`volley_analysis::link`).
    pub fn link_bound(&self) -> bool {
        self.label.as_deref() == Some(volley_analysis::link::LABEL)
    }

    /// True when the step was too short for the CPU cap volley set to hold
    /// (`volley_analysis::sustain::TOO_SHORT`): a burst, not the capped server's figure.
    pub fn too_short(&self) -> bool {
        self.label.as_deref() == Some(volley_analysis::sustain::TOO_SHORT)
    }

    /// True when the generator, not the server, limited the step.
    /// The rule is volley-analysis's, shared with the study's end-of-run table.
    pub fn generator_bound(&self) -> bool {
        !volley_analysis::sustain::counts_for_server(self.label.as_deref())
    }

    /// What the step says about the server (`None`: not a judged rate step); the
    /// study's end table applies the same rule.
    pub fn evidence(&self) -> Option<knee::Evidence> {
        Some(knee::Evidence::of(
            self.sustainable?,
            !self.generator_bound(),
            self.machine_busy,
        ))
    }
}

#[cfg(test)]
impl TargetReport {
    /// A complete run of `target` with these steps and nothing derived, for unit tests.
    pub(crate) fn blank(target: &str, steps: Vec<StepReport>) -> TargetReport {
        TargetReport {
            run_id: 1,
            target: target.into(),
            status: "complete".into(),
            environment: Value::Null,
            latency_definitions: Vec::new(),
            steps,
            capacity: Vec::new(),
            searches: Vec::new(),
            repeats: Vec::new(),
            usl: Vec::new(),
            percentile_curves: Vec::new(),
            office: Vec::new(),
        }
    }
}

#[cfg(test)]
impl StepReport {
    /// A step with every figure zero or absent, for unit tests to fill in.
    pub(crate) fn blank() -> StepReport {
        StepReport {
            index: 0,
            rate_rps: None,
            concurrency: None,
            cpu_quota_cores: None,
            cores: None,
            keepalive: None,
            repeat: 0,
            workload: None,
            variant: None,
            protocol: None,
            closed_loop: true,
            phase: None,
            pass: None,
            start_offset_s: 0.0,
            wall_s: 0.0,
            duration_s: 0.0,
            completed: 0,
            ok: 0,
            failed: 0,
            censored: 0,
            requests_per_s: 0.0,
            send_rate_rps: None,
            reply_rate_rps: 0.0,
            latency: LatencyFigures::default(),
            max_open_connections: None,
            cap_hits: 0,
            label: None,
            sustainable: None,
            reasons: Vec::new(),
            little_gap: None,
            little_flagged: false,
            throttled: false,
            machine_busy: false,
            probe_max_stall_ms: None,
            target_died: None,
            attempt: 0,
            resources: None,
            seconds: Vec::new(),
            monitor: Vec::new(),
            injectors: None,
            phases: Vec::new(),
            injector_rows: Vec::new(),
            notes: Vec::new(),
            office: None,
            wire: None,
        }
    }
}

/// min / mean / p50 / p99 / max of the headline latency, milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LatencyFigures {
    /// Smallest.
    pub min_ms: f64,
    /// Mean.
    pub mean_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

/// Seed 003's resource columns for one step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Resources {
    /// Target user CPU, percent of one CPU.
    pub cpu_user_pct: Option<f64>,
    /// Target system CPU, percent of one CPU.
    pub cpu_sys_pct: Option<f64>,
    /// Largest RSS, bytes.
    pub max_rss_bytes: Option<u64>,
    /// RSS as a share of memory, percent.
    pub mem_pct: Option<f64>,
    /// Transmitted packets per second.
    pub tx_packets_per_s: Option<f64>,
    /// Transmitted bytes per second.
    pub tx_bytes_per_s: Option<f64>,
    /// Server CPU-milliseconds per 1000 requests.
    pub cpu_ms_per_1000_requests: Option<f64>,
}

/// One second of a step's load series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SecondPoint {
    /// Seconds since the run's first step started.
    pub t_s: f64,
    /// Requests finished in the second.
    pub completed: u64,
    /// Headline latency p50, ms.
    pub p50_ms: f64,
    /// p99, ms.
    pub p99_ms: f64,
    /// Max, ms.
    pub max_ms: f64,
}

/// One monitor sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MonitorPoint {
    /// Seconds since the run's first step started.
    pub t_s: f64,
    /// Target user + system CPU, percent of one CPU.
    pub cpu_pct: Option<f64>,
    /// Target RSS, bytes.
    pub rss_bytes: Option<u64>,
    /// Transmitted bytes per second.
    pub tx_bytes_per_s: Option<f64>,
    /// Received bytes per second.
    pub rx_bytes_per_s: Option<f64>,
}

/// Capacity of the rate steps and what it rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capacity {
    /// The group of rate steps (workload, cap, cores, keep-alive, and the variant and
    /// protocol when the steps had them) this capacity is for.
    pub group: String,
    /// The group's variant, when its steps ran one.
    pub variant: Option<String>,
    /// The group's protocol, when protocols are a dimension of the run.
    pub protocol: Option<String>,
    /// Largest sustainable rate (majority of repeats), requests/s.
    pub capacity_rps: Option<f64>,
    /// Smallest unsustainable rate above it.
    pub first_unsustainable_above_rps: Option<f64>,
    /// An unsustainable rate lies below the capacity.
    pub non_monotone: bool,
    /// What may be claimed (docs/methodology.md, "Saturation"): a capacity only when
    /// the server was seen to fail above it, else "at least".
    pub claim: knee::Claim,
    /// True when the server was seen to fail above the capacity (`claim` is a figure,
    /// not "at least").
    pub bounded: bool,
    /// Planned steps judged for the server (each counted once, by its best attempt).
    pub steps_judged: usize,
    /// Planned steps that could not be judged for the server (generator-bound,
    /// machine-stalled, or failed on a busy machine), after their re-measures: left out.
    pub generator_bound_excluded: usize,
    /// Planned steps measured more than once because noise spoiled them.
    pub remeasured: usize,
    /// Capacity from each phase's steps alone ("sweep", "search"), when the steps came
    /// from more than one phase, so the two methods can be compared.
    pub by_phase: Vec<(String, Option<f64>)>,
    /// Steps and wall time of each phase of this group (see [`PhaseTime`]).
    pub phase_times: Vec<PhaseTime>,
}

/// How long one phase (sweep or search) of a group took.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseTime {
    /// "sweep" or "search".
    pub phase: String,
    /// Steps run in this phase (generator-bound ones included: they took time too).
    pub steps: usize,
    /// From the phase's first step start to its last step end, seconds. When a study
    /// interleaves targets or cells, the steps run between them are inside this span,
    /// as they are inside the wall time a user waits.
    pub wall_s: f64,
}

/// One capacity search of a run, from the store's `capacities` table (or, when the
/// study was killed before the search ended, from its steps alone).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchCapacity {
    /// The group of rate steps (workload, cap, cores, keep-alive, variant, protocol), as
    /// [`Capacity::group`].
    pub group: String,
    /// The searched cell's variant, when it ran one.
    pub variant: Option<String>,
    /// Its protocol, when protocols are a dimension of the run.
    pub protocol: Option<String>,
    /// Which of the cell's whole searches this is and how many there were (1-based,
    /// `[search] passes`), when there were several: the list names each.
    pub pass: Option<(u32, u32)>,
    /// The search's point estimate (largest rate decided sustainable), requests/s; for
    /// an unfinished search, the largest sustainable rate so far.
    pub capacity_rps: Option<f64>,
    /// What may be claimed of it: a capacity only when a rate above it was decided
    /// unsustainable by the server, else "at least".
    pub claim: knee::Claim,
    /// True when `claim` is a figure, not "at least".
    pub bounded: bool,
    /// Lower end of the interval.
    pub ci_lo_rps: Option<f64>,
    /// Upper end of the interval (`None`: unbounded above or no interval).
    pub ci_hi_rps: Option<f64>,
    /// Confidence level of the interval (0.95).
    pub confidence: Option<f64>,
    /// How it ended: converged, reached_max_rate, below_min_rate, step_budget_exhausted,
    /// generator_bound, interrupted (stopped, result stored), or not_finished (killed:
    /// steps stored, no result).
    pub end: String,
    /// True when the search reached its own end.
    pub finished: bool,
    /// Steps the search ran.
    pub steps: u32,
    /// Wall time of the search, first step start to last step end, seconds.
    pub wall_s: f64,
    /// The same group's capacity from its sweep-phase steps, when it has any.
    pub sweep_capacity_rps: Option<f64>,
    /// Its sweep steps and their wall time, when it has any.
    pub sweep: Option<PhaseTime>,
}

/// A stored search end in words.
pub fn end_text(end: &str) -> String {
    match end {
        "not_finished" => "killed mid-search, no result stored".to_string(),
        "interrupted" => "interrupted, partial result stored".to_string(),
        other => other.replace('_', " "),
    }
}

impl SearchCapacity {
    /// "capacity by search: 2990 req/s, 95% CI [2850, 3100], 7 steps, 25 s", or why
    /// there is no such line.
    pub fn summary_line(&self) -> String {
        let rate = |v: Option<f64>| v.map_or("-".to_string(), |r| format!("{r:.0}"));
        let figures = format!("{} steps, {:.0} s", self.steps, self.wall_s);
        let line = if self.finished && self.capacity_rps.is_none() {
            format!("capacity by search: no rate shown sustainable, {figures}")
        } else if self.finished {
            let ci = match (self.ci_lo_rps, self.confidence) {
                (Some(lo), Some(c)) => format!(
                    ", {:.0}% CI [{lo:.0}, {}]",
                    c * 100.0,
                    self.ci_hi_rps
                        .map_or("unbounded".to_string(), |h| format!("{h:.0}"))
                ),
                _ => String::new(),
            };
            format!(
                "capacity by search: {}{ci}, {figures}",
                self.claim.text("req/s")
            )
        } else {
            format!(
                "capacity search did not finish ({}): {} req/s sustainable so far, no interval, {figures}",
                end_text(&self.end),
                rate(self.capacity_rps)
            )
        };
        let line = match self.pass {
            Some((n, of)) => format!("search {n} of {of}: {line}"),
            None => line,
        };
        match self.end.as_str() {
            "converged" | "interrupted" | "not_finished" => line,
            other => format!("{line} (ended: {})", end_text(other)),
        }
    }
}

/// A median and its 95% bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MedianCi {
    /// Median of the per-run values.
    pub median: f64,
    /// Lower end of the 95% interval.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
}

/// One point (same parameters) run several times.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RepeatGroup {
    /// The point, as [`StepReport::point_label`] prints it.
    pub point: String,
    /// Non-generator-bound runs behind the figures.
    pub runs: usize,
    /// Throughput, requests/s.
    pub requests_per_s: MedianCi,
    /// Headline latency p99, ms.
    pub p99_ms: MedianCi,
}

/// Resamples for the repeat intervals, and their fixed seed (a rebuilt report must show
/// the same interval).
pub(crate) const BOOTSTRAP_RESAMPLES: usize = bootstrap::RESAMPLES;
pub(crate) const BOOTSTRAP_SEED: u64 = 0x766f_6c6c_6579;

/// Each point's planned repeats, each once by its best attempt (as the headline, the
/// comparison charts and the study's end table count them: a point with 3 repeats, each
/// re-measured twice on a busy machine, has 3 runs, not 9), those that stand for the
/// server.
fn repeat_groups(steps: &[StepReport]) -> Vec<RepeatGroup> {
    // Keep first-seen order so the table follows the run.
    let mut order: Vec<String> = Vec::new();
    let mut attempts: BTreeMap<String, Vec<&StepReport>> = BTreeMap::new();
    for s in steps.iter().filter(|s| !s.mostly_failed()) {
        let key = s.point_label();
        if !attempts.contains_key(&key) {
            order.push(key.clone());
        }
        attempts.entry(key).or_default().push(s);
    }
    let ci = |values: Vec<f64>| {
        let e = bootstrap::median_ci(&values, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED);
        MedianCi {
            median: e.median,
            lo: e.lo,
            hi: e.hi,
        }
    };
    order
        .into_iter()
        .filter_map(|point| {
            let (best, _) = best_attempts(attempts.get(&point)?);
            let runs: Vec<&StepReport> =
                best.into_iter().filter(|s| !s.generator_bound()).collect();
            (runs.len() >= 2).then(|| RepeatGroup {
                runs: runs.len(),
                requests_per_s: ci(runs.iter().map(|s| s.requests_per_s).collect()),
                p99_ms: ci(runs.iter().map(|s| s.latency.p99_ms).collect()),
                point,
            })
        })
        .collect()
}

/// A USL fit over one group of concurrency steps.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UslGroup {
    /// "cap 0.5 cores, cores 0-1" style description of the group.
    pub group: String,
    /// (concurrency, requests/s) points used.
    pub points: Vec<(f64, f64)>,
    /// The fit, or why there is none (serialised as `{"fit": ...}` or `{"no_fit": "why"}`).
    #[serde(flatten, serialize_with = "fit_json")]
    pub fit: Result<UslSummary, usl::UslError>,
}

fn fit_json<S: serde::Serializer>(
    fit: &Result<UslSummary, usl::UslError>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(1))?;
    match fit {
        Ok(f) => m.serialize_entry("fit", f)?,
        Err(e) => m.serialize_entry("no_fit", &e.to_string())?,
    }
    m.end()
}

/// The fitted law.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UslSummary {
    /// Single-unit throughput, requests/s.
    pub lambda: f64,
    /// Contention.
    pub sigma: f64,
    /// Coherency.
    pub kappa: f64,
    /// Best concurrency (infinite when kappa = 0; JSON null).
    pub n_star: Option<f64>,
    /// Predicted peak throughput (JSON null when unbounded).
    pub peak_rps: Option<f64>,
    /// Coefficient of determination.
    pub r_squared: f64,
}

impl UslSummary {
    /// Predicted throughput at `n`.
    pub fn predict(&self, n: f64) -> f64 {
        self.lambda * n / (1.0 + self.sigma * (n - 1.0) + self.kappa * n * (n - 1.0))
    }
}

/// A latency-by-percentile curve.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PercentileCurve {
    /// "response" (open loop, CO-corrected) or "service" (closed loop).
    pub kind: String,
    /// Requests behind the curve.
    pub count: u64,
    /// Steps merged.
    pub steps_merged: usize,
    /// (percentile 0..100, latency ms), rising.
    pub points: Vec<(f64, f64)>,
}
