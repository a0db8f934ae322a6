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
use volley_store::{HistogramKind, RunId, RunRow, SeriesSource, StepRow, Store, StudyId};

use crate::error::ReportError;

/// Version of the JSON report model; bump on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// What to report on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selector {
    /// One run (one target).
    Run(RunId),
    /// Every run of a study, side by side.
    Study(StudyId),
}

impl Selector {
    /// Parses `42` (a run id) or `study:7`.
    pub fn parse(text: &str) -> Result<Selector, ReportError> {
        let bad = || ReportError::BadSelector(text.to_string());
        match text.strip_prefix("study:") {
            Some(id) => Ok(Selector::Study(StudyId(
                id.trim().parse().map_err(|_| bad())?,
            ))),
            None => Ok(Selector::Run(RunId(
                text.trim().parse().map_err(|_| bad())?,
            ))),
        }
    }
}

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
    /// Closed loop: the latency figures are service times; otherwise response times.
    pub closed_loop: bool,
    /// "sweep" or "search", when the runner said.
    pub phase: Option<String>,
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
    /// Server resources over the step, when a monitor ran.
    pub resources: Option<Resources>,
    /// Per-second latency and throughput.
    pub seconds: Vec<SecondPoint>,
    /// Monitor samples.
    pub monitor: Vec<MonitorPoint>,
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
    /// The point this step measures, without its repeat: "8.6KB, rate 100/s, no-ka".
    pub fn point_label(&self) -> String {
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

    /// True when the generator, not the server, limited the step.
    /// The rule is volley-analysis's, shared with the study's end-of-run table.
    pub fn generator_bound(&self) -> bool {
        !volley_analysis::sustain::counts_for_server(self.label.as_deref())
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
    /// The group of rate steps (workload, cap, cores, keep-alive) this capacity is for.
    pub group: String,
    /// Largest sustainable rate (majority of repeats), requests/s.
    pub capacity_rps: Option<f64>,
    /// Smallest unsustainable rate above it.
    pub first_unsustainable_above_rps: Option<f64>,
    /// An unsustainable rate lies below the capacity.
    pub non_monotone: bool,
    /// Steps judged (server-bound or inconclusive).
    pub steps_judged: usize,
    /// Generator-bound steps left out: they say nothing about the server.
    pub generator_bound_excluded: usize,
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
    /// The group of rate steps (workload, cap, cores, keep-alive), as [`Capacity::group`].
    pub group: String,
    /// The search's point estimate (largest rate decided sustainable), requests/s; for
    /// an unfinished search, the largest sustainable rate so far.
    pub capacity_rps: Option<f64>,
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
                "capacity by search: {} req/s{ci}, {figures}",
                rate(self.capacity_rps)
            )
        } else {
            format!(
                "capacity search did not finish ({}): {} req/s sustainable so far, no interval, {figures}",
                end_text(&self.end),
                rate(self.capacity_rps)
            )
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
const BOOTSTRAP_RESAMPLES: usize = 2000;
const BOOTSTRAP_SEED: u64 = 0x766f_6c6c_6579;

fn repeat_groups(steps: &[StepReport]) -> Vec<RepeatGroup> {
    // Keep first-seen order so the table follows the run.
    let mut order: Vec<String> = Vec::new();
    let mut by_point: BTreeMap<String, Vec<&StepReport>> = BTreeMap::new();
    for s in steps.iter().filter(|s| !s.generator_bound()) {
        let key = s.point_label();
        if !by_point.contains_key(&key) {
            order.push(key.clone());
        }
        by_point.entry(key).or_default().push(s);
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
            let runs = by_point.remove(&point)?;
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
    pub fit: Result<UslSummary, String>,
}

fn fit_json<S: serde::Serializer>(
    fit: &Result<UslSummary, String>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(1))?;
    match fit {
        Ok(f) => m.serialize_entry("fit", f)?,
        Err(e) => m.serialize_entry("no_fit", e)?,
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

// ---- the stored JSON, read leniently ----

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StoredSummary {
    latency_definition: String,
    duration_s: f64,
    model: StoredModel,
    requests: StoredRequests,
    throughput: StoredThroughput,
    rates: StoredRates,
    latency: BTreeMap<String, LatencyFigures>,
    connections_stats: Option<StoredConnections>,
    generator: Option<StoredGenerator>,
    monitor: Option<StoredMonitor>,
    throttling: Option<StoredThrottling>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StoredModel {
    kind: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StoredRequests {
    completed: u64,
    ok: u64,
    failed: u64,
    censored: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StoredThroughput {
    requests_per_s: f64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StoredRates {
    achieved_send_per_s: Option<f64>,
    reply_per_s: f64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StoredConnections {
    max_open: u32,
    cap_hits: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StoredGenerator {
    verdict: Option<StoredBound>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StoredBound {
    label: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StoredMonitor {
    cpu_user_pct: Option<f64>,
    cpu_sys_pct: Option<f64>,
    server_cpu_seconds: Option<f64>,
    max_rss_bytes: Option<u64>,
    mem_pct: Option<f64>,
    tx_packets_per_s: Option<f64>,
    tx_bytes_per_s: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StoredThrottling {
    nr_throttled: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StoredVerdict {
    sustain: Option<sustain::Verdict>,
    little: Option<LittleCheck>,
    throttled: bool,
}

/// A number field of a series row; series rows are read field by field so one odd
/// field (a float where an integer was expected) blanks only itself.
fn field(v: &Value, path: &[&str]) -> Option<f64> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_f64()
}

/// Reads a JSON value leniently: missing fields take their defaults, and a value of the
/// wrong shape reads as empty (its figures show as missing) instead of failing the report.
fn lenient<T: for<'de> Deserialize<'de> + Default>(v: &Value) -> T {
    serde_json::from_value(v.clone()).unwrap_or_default()
}

/// Loads the report for `selector` from the store.
pub fn load(store: &Store, selector: Selector) -> Result<Report, ReportError> {
    let (title, study, runs) = match selector {
        Selector::Run(id) => {
            let run = store
                .run(id)
                .map_err(|e| not_found(e, || no_run(store, id)))?;
            let study = run.study.and_then(|s| store.study(s).ok());
            (format!("run {}: {}", run.id, run.target), study, vec![run])
        }
        Selector::Study(id) => {
            let study = store
                .study(id)
                .map_err(|e| not_found(e, || ReportError::UnknownStudy(id.0)))?;
            let runs = store.runs_of_study(id)?;
            (
                format!("study {}: {}", study.id, study.name),
                Some(study),
                runs,
            )
        }
    };
    let mut targets = Vec::with_capacity(runs.len());
    for run in &runs {
        targets.push(load_run(store, run)?);
    }
    if targets.iter().all(|t| t.steps.is_empty()) {
        return Err(ReportError::NoSteps(title));
    }
    Ok(Report {
        schema_version: SCHEMA_VERSION,
        title,
        study: study.map(|s| StudyInfo {
            id: s.id.0,
            name: s.name,
            status: s.status.as_str().to_string(),
            started_unix_ms: s.started_unix_ms,
        }),
        targets,
    })
}

/// An unknown run reads as "empty store" when the store holds no runs at all, because
/// that is the more useful thing to tell the user.
fn no_run(store: &Store, id: RunId) -> ReportError {
    match store.list_runs() {
        Ok(runs) if runs.is_empty() => ReportError::EmptyStore,
        _ => ReportError::UnknownRun(id.0),
    }
}

fn not_found(e: volley_store::StoreError, f: impl FnOnce() -> ReportError) -> ReportError {
    match e {
        volley_store::StoreError::NotFound { .. } => f(),
        other => ReportError::Store(other),
    }
}

fn load_run(store: &Store, run: &RunRow) -> Result<TargetReport, ReportError> {
    let rows = store.steps(run.id)?;
    let origin_ms = rows.iter().map(|r| r.started_unix_ms).min().unwrap_or(0);
    let mut steps = Vec::with_capacity(rows.len());
    let mut definitions: Vec<String> = Vec::new();
    // Open-loop steps (response time) and closed-loop steps (service time) are merged
    // apart: one curve per definition, never a mix.
    let mut merged = [(hist::new_hist(), 0usize), (hist::new_hist(), 0usize)];
    for row in &rows {
        let summary: StoredSummary = lenient(&row.summary);
        let closed_loop = summary.model.kind == "closed";
        if !summary.latency_definition.is_empty()
            && !definitions.contains(&summary.latency_definition)
        {
            definitions.push(summary.latency_definition.clone());
        }
        let step = load_step(store, row, &summary, origin_ms, closed_loop)?;
        if !step.generator_bound() {
            let kind = if closed_loop {
                HistogramKind::Service
            } else {
                HistogramKind::Response
            };
            let (into, count) = &mut merged[usize::from(closed_loop)];
            for blob in store.histograms(row.id)? {
                if blob.second.is_none() && blob.kind == kind {
                    let bad = |e: volley_metrics::MetricsError| ReportError::Histogram {
                        run: run.id.0,
                        step: row.index,
                        kind: kind.as_str(),
                        detail: e.to_string(),
                    };
                    let h = hist::decode(&blob.bytes).map_err(bad)?;
                    if !h.is_empty() {
                        hist::add(into, &h).map_err(bad)?;
                        *count += 1;
                    }
                }
            }
        }
        steps.push(step);
    }
    let percentile_curves = merged
        .iter()
        .zip(["response", "service"])
        .filter(|((h, _), _)| !h.is_empty())
        .map(|((h, n), kind)| PercentileCurve {
            kind: kind.to_string(),
            count: h.len(),
            steps_merged: *n,
            points: percentile_points(h),
        })
        .collect();
    let searches = searches(&store.capacities(run.id)?, &steps);
    Ok(TargetReport {
        run_id: run.id.0,
        target: run.target.clone(),
        status: run.status.as_str().to_string(),
        environment: run.environment.clone(),
        latency_definitions: definitions,
        capacity: capacities(&steps),
        searches,
        usl: usl_groups(&steps),
        repeats: repeat_groups(&steps),
        percentile_curves,
        steps,
    })
}

fn load_step(
    store: &Store,
    row: &StepRow,
    s: &StoredSummary,
    origin_ms: i64,
    closed_loop: bool,
) -> Result<StepReport, ReportError> {
    let p = &row.parameters;
    let verdict: StoredVerdict = row.verdict.as_ref().map(lenient).unwrap_or_default();
    let headline = if closed_loop {
        "service_time"
    } else {
        "response_time"
    };
    let label = row
        .label
        .clone()
        .or_else(|| {
            s.generator
                .as_ref()?
                .verdict
                .as_ref()
                .map(|v| v.label.clone())
        })
        .filter(|l| !l.is_empty())
        .map(|l| l.replace('_', "-"));
    let start_offset_s = (row.started_unix_ms - origin_ms) as f64 / 1e3;
    let mut seconds = Vec::new();
    let mut monitor = Vec::new();
    for point in store.series(row.id)? {
        match point.source {
            SeriesSource::Load => {
                let v = &point.values;
                let f = |k: &str| field(v, &[k]).unwrap_or(0.0);
                seconds.push(SecondPoint {
                    t_s: start_offset_s + point.second as f64,
                    completed: f("completed") as u64,
                    p50_ms: f("p50_ms"),
                    p99_ms: f("p99_ms"),
                    max_ms: f("max_ms"),
                });
            }
            SeriesSource::Monitor => {
                let v = &point.values;
                // t_ms is on the load's clock; without it, the sample index is the second.
                let t_ms = field(v, &["t_ms"]).unwrap_or(point.second as f64 * 1e3);
                let cpu = field(v, &["target", "cpu_user_pct"])
                    .zip(field(v, &["target", "cpu_sys_pct"]))
                    .map(|(u, s)| u + s);
                monitor.push(MonitorPoint {
                    t_s: start_offset_s + t_ms / 1e3,
                    cpu_pct: cpu,
                    rss_bytes: field(v, &["target", "rss_bytes"]).map(|b| b as u64),
                    tx_bytes_per_s: field(v, &["net", "tx_bytes_per_s"]),
                    rx_bytes_per_s: field(v, &["net", "rx_bytes_per_s"]),
                });
            }
        }
    }
    let resources = s.monitor.as_ref().map(|m| Resources {
        cpu_user_pct: m.cpu_user_pct,
        cpu_sys_pct: m.cpu_sys_pct,
        max_rss_bytes: m.max_rss_bytes,
        mem_pct: m.mem_pct,
        tx_packets_per_s: m.tx_packets_per_s,
        tx_bytes_per_s: m.tx_bytes_per_s,
        // Same formula as volley_monitor::MonitorSummary::cpu_ms_per_1000_requests.
        cpu_ms_per_1000_requests: m.server_cpu_seconds.and_then(|cpu_s| {
            (s.requests.completed > 0).then(|| cpu_s / s.requests.completed as f64 * 1_000_000.0)
        }),
    });
    Ok(StepReport {
        index: row.index,
        rate_rps: p.rate_rps,
        concurrency: p.concurrency,
        cpu_quota_cores: p.cpu_quota_cores,
        cores: p.cores.clone(),
        keepalive: p.keepalive,
        repeat: p.repeat,
        workload: p
            .extra
            .get("workload")
            .and_then(Value::as_str)
            .map(str::to_string),
        closed_loop,
        phase: p
            .extra
            .get("phase")
            .and_then(Value::as_str)
            .map(str::to_string),
        start_offset_s,
        wall_s: (row.finished_unix_ms - row.started_unix_ms).max(0) as f64 / 1e3,
        duration_s: s.duration_s,
        completed: s.requests.completed,
        ok: s.requests.ok,
        failed: s.requests.failed,
        censored: s.requests.censored,
        requests_per_s: s.throughput.requests_per_s,
        send_rate_rps: s.rates.achieved_send_per_s,
        reply_rate_rps: s.rates.reply_per_s,
        latency: s.latency.get(headline).copied().unwrap_or_default(),
        max_open_connections: s.connections_stats.as_ref().map(|c| c.max_open),
        cap_hits: s.connections_stats.as_ref().map_or(0, |c| c.cap_hits),
        label,
        sustainable: verdict.sustain.as_ref().map(|v| v.sustainable),
        reasons: verdict
            .sustain
            .as_ref()
            .map(|v| v.reasons.iter().map(reason_text).collect())
            .unwrap_or_default(),
        little_gap: verdict.little.map(|l| l.relative_gap),
        little_flagged: verdict.little.is_some_and(|l| l.flagged),
        throttled: verdict.throttled || s.throttling.as_ref().is_some_and(|t| t.nr_throttled > 0),
        resources,
        seconds,
        monitor,
    })
}

/// A sustainability reason in words a reader can check against the tables.
pub fn reason_text(r: &sustain::Reason) -> String {
    use sustain::Reason::*;
    match r {
        TooFewWindows { windows, required } => {
            format!("too short to judge: {windows} windows, {required} required")
        }
        InvalidFigures => "invalid figures (NaN or negative)".to_string(),
        SendRateShort {
            send_rate_rps,
            required_rps,
        } => format!("send rate {send_rate_rps:.1}/s < {required_rps:.1}/s"),
        ReplyRateShort {
            reply_rate_rps,
            required_rps,
        } => format!("reply rate {reply_rate_rps:.1}/s < {required_rps:.1}/s"),
        TooManyErrors {
            error_share,
            allowed_share,
        } => format!(
            "errors {:.2}% > {:.2}%",
            error_share * 100.0,
            allowed_share * 100.0
        ),
        P99OverSlo {
            worst_p99,
            window_index,
            slo,
        } => format!(
            "p99 {:.1} ms in window {window_index} > SLO {:.1} ms",
            worst_p99.as_secs_f64() * 1e3,
            slo.as_secs_f64() * 1e3
        ),
        InFlightRising(t) => format!(
            "in-flight rising {:.1}/s (t = {:.1})",
            t.slope_per_s, t.t_stat
        ),
    }
}

/// Points of the percentile curve at p = 1 - 10^(-k/10), from 0% up to the last
/// percentile the count can resolve, plus the maximum: the wrk2/HdrHistogram plot.
fn percentile_points(h: &hist::Hist) -> Vec<(f64, f64)> {
    let n = h.len() as f64;
    let mut out = Vec::new();
    for k in 0..=60 {
        let p = 1.0 - 10f64.powf(-(k as f64) / 10.0);
        // Beyond 1/(1-p) > n the histogram has no sample to tell the percentile apart.
        if 1.0 / (1.0 - p) > n {
            break;
        }
        out.push((p * 100.0, hist::us_to_ms(h.value_at_quantile(p) as f64)));
    }
    let top = (1.0 - 1.0 / n.max(2.0)) * 100.0;
    if out.last().is_none_or(|(p, _)| *p < top) {
        out.push((top, hist::us_to_ms(h.max() as f64)));
    }
    out
}

/// Capacity per group of rate steps (workload, cap, cores, keep-alive): each group is
/// its own sweep.
fn capacities(steps: &[StepReport]) -> Vec<Capacity> {
    let mut groups: BTreeMap<String, Vec<&StepReport>> = BTreeMap::new();
    for s in steps
        .iter()
        .filter(|s| s.rate_rps.is_some() && s.sustainable.is_some())
    {
        groups.entry(group_name(s)).or_default().push(s);
    }
    groups
        .into_iter()
        .map(|(group, judged)| {
            let usable = |phase: Option<&str>| -> Vec<(f64, bool)> {
                judged
                    .iter()
                    .filter(|s| !s.generator_bound())
                    .filter(|s| phase.is_none() || s.phase.as_deref() == phase)
                    .filter_map(|s| Some((s.rate_rps?, s.sustainable?)))
                    .collect()
            };
            let all = usable(None);
            let c = knee::sweep_capacity(&all);
            let mut phases: Vec<String> = judged.iter().filter_map(|s| s.phase.clone()).collect();
            phases.sort();
            phases.dedup();
            let by_phase = if phases.len() > 1 {
                phases
                    .into_iter()
                    .map(|p| {
                        let cap = knee::sweep_capacity(&usable(Some(&p))).capacity_rps;
                        (p, cap)
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let phase_times = phase_times(&judged);
            Capacity {
                group,
                capacity_rps: c.capacity_rps,
                first_unsustainable_above_rps: c.first_unsustainable_above_rps,
                non_monotone: c.non_monotone,
                steps_judged: all.len(),
                generator_bound_excluded: judged.len() - all.len(),
                by_phase,
                phase_times,
            }
        })
        .collect()
}

/// Steps and wall time per phase of one group's steps, phases in name order.
fn phase_times(steps: &[&StepReport]) -> Vec<PhaseTime> {
    let mut by: BTreeMap<String, (usize, f64, f64)> = BTreeMap::new();
    for s in steps {
        let Some(p) = &s.phase else { continue };
        let e = by
            .entry(p.clone())
            .or_insert((0, f64::INFINITY, f64::NEG_INFINITY));
        e.0 += 1;
        e.1 = e.1.min(s.start_offset_s);
        e.2 = e.2.max(s.start_offset_s + s.wall_s);
    }
    by.into_iter()
        .map(|(phase, (steps, first, last))| PhaseTime {
            phase,
            steps,
            wall_s: (last - first).max(0.0),
        })
        .collect()
}

/// The stored search results of a run, matched to their groups of steps, plus a
/// "not finished" entry for every group with search steps but no stored result.
fn searches(rows: &[volley_store::CapacityRow], steps: &[StepReport]) -> Vec<SearchCapacity> {
    let sweep_of = |group: &str| {
        let in_group: Vec<&StepReport> = steps
            .iter()
            .filter(|s| s.phase.as_deref() == Some("sweep") && s.rate_rps.is_some())
            .filter(|s| group_name(s) == group)
            .collect();
        if in_group.is_empty() {
            return (None, None);
        }
        let usable: Vec<(f64, bool)> = in_group
            .iter()
            .filter(|s| !s.generator_bound())
            .filter_map(|s| Some((s.rate_rps?, s.sustainable?)))
            .collect();
        (
            knee::sweep_capacity(&usable).capacity_rps,
            phase_times(&in_group).pop(),
        )
    };
    let mut out: Vec<SearchCapacity> = rows
        .iter()
        .map(|row| {
            let r = &row.record;
            let c = &r.cell;
            let group = group_label(
                c.get("workload").and_then(Value::as_str),
                c.get("cpu_quota_cores").and_then(Value::as_f64),
                c.get("cores").and_then(Value::as_str),
                c.get("keepalive").and_then(Value::as_bool),
            );
            let (sweep_capacity_rps, sweep) = sweep_of(&group);
            let end = r.end.as_str().to_string();
            SearchCapacity {
                finished: r.end != volley_store::SearchEnd::Interrupted,
                capacity_rps: r.capacity_rps,
                ci_lo_rps: r.ci_lo_rps,
                ci_hi_rps: r.ci_hi_rps,
                confidence: Some(r.confidence),
                end,
                steps: r.steps,
                wall_s: (r.finished_unix_ms - r.started_unix_ms).max(0) as f64 / 1e3,
                sweep_capacity_rps,
                sweep,
                group,
            }
        })
        .collect();
    // Killed mid-search: the steps are stored, the result never was.
    let mut orphans: BTreeMap<String, Vec<&StepReport>> = BTreeMap::new();
    for s in steps
        .iter()
        .filter(|s| s.phase.as_deref() == Some("search") && s.rate_rps.is_some())
    {
        orphans.entry(group_name(s)).or_default().push(s);
    }
    for (group, in_group) in orphans {
        if out.iter().any(|x| x.group == group) {
            continue;
        }
        let usable: Vec<(f64, bool)> = in_group
            .iter()
            .filter(|s| !s.generator_bound())
            .filter_map(|s| Some((s.rate_rps?, s.sustainable?)))
            .collect();
        let (sweep_capacity_rps, sweep) = sweep_of(&group);
        out.push(SearchCapacity {
            capacity_rps: knee::sweep_capacity(&usable).capacity_rps,
            ci_lo_rps: None,
            ci_hi_rps: None,
            confidence: None,
            end: "not_finished".to_string(),
            finished: false,
            steps: in_group.len() as u32,
            wall_s: phase_times(&in_group).pop().map_or(0.0, |p| p.wall_s),
            sweep_capacity_rps,
            sweep,
            group,
        });
    }
    out
}

/// Describes the (cap, cores, keep-alive) group of a step, the lines of seed 002's plots.
pub fn group_name(s: &StepReport) -> String {
    group_label(
        s.workload.as_deref(),
        s.cpu_quota_cores,
        s.cores.as_deref(),
        s.keepalive,
    )
}

/// The group of a workload, cap, cpuset and keep-alive; shared by steps and stored
/// search results so the two meet.
fn group_label(
    workload: Option<&str>,
    quota: Option<f64>,
    cores: Option<&str>,
    keepalive: Option<bool>,
) -> String {
    let mut parts = Vec::new();
    if let Some(w) = workload {
        parts.push(w.to_string());
    }
    if let Some(q) = quota {
        parts.push(format!("cap {} cores", trim_num(q)));
    }
    if let Some(c) = cores {
        parts.push(format!("cpus {c}"));
    }
    if let Some(k) = keepalive {
        parts.push(if k { "keep-alive" } else { "no keep-alive" }.to_string());
    }
    if parts.is_empty() {
        "all steps".to_string()
    } else {
        parts.join(", ")
    }
}

/// A number without trailing zeros: 0.5, 2, 1.25.
pub fn trim_num(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn usl_groups(steps: &[StepReport]) -> Vec<UslGroup> {
    let mut groups: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for s in steps.iter().filter(|s| s.rate_rps.is_none()) {
        let Some(n) = s.concurrency else { continue };
        if s.generator_bound() {
            continue;
        }
        groups
            .entry(group_name(s))
            .or_default()
            .push((n as f64, s.requests_per_s));
    }
    groups
        .into_iter()
        .filter(|(_, pts)| {
            let mut ns: Vec<u64> = pts.iter().map(|p| p.0 as u64).collect();
            ns.dedup();
            ns.len() >= 2
        })
        .map(|(group, points)| {
            let input: Vec<usl::UslPoint> = points
                .iter()
                .map(|&(n, throughput)| usl::UslPoint { n, throughput })
                .collect();
            let fit = usl::fit(&input)
                .map(|f| UslSummary {
                    lambda: f.lambda,
                    sigma: f.sigma,
                    kappa: f.kappa,
                    n_star: f.n_star.is_finite().then_some(f.n_star),
                    peak_rps: f.peak_throughput.is_finite().then_some(f.peak_throughput),
                    r_squared: f.r_squared,
                })
                .map_err(|e| e.to_string());
            UslGroup { group, points, fit }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_parses_runs_and_studies() {
        assert_eq!(Selector::parse("12").unwrap(), Selector::Run(RunId(12)));
        assert_eq!(
            Selector::parse("study:3").unwrap(),
            Selector::Study(StudyId(3))
        );
        assert!(matches!(
            Selector::parse("study:x"),
            Err(ReportError::BadSelector(_))
        ));
        assert!(matches!(
            Selector::parse("nginx"),
            Err(ReportError::BadSelector(_))
        ));
    }

    #[test]
    fn percentile_points_rise_and_end_at_max() {
        let mut h = hist::new_hist();
        for v in 1..=10_000u64 {
            h.record(v).unwrap();
        }
        let pts = percentile_points(&h);
        assert_eq!(pts[0].0, 0.0);
        assert!(pts.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        let (p, ms) = *pts.last().unwrap();
        assert!(p > 99.98 && p < 100.0, "{p}");
        assert!((ms - 10.0).abs() < 0.02, "{ms}");
        // p90 of 1..=10000 us is ~9 ms.
        let p90 = pts.iter().find(|(p, _)| (*p - 90.0).abs() < 1e-9).unwrap();
        assert!((p90.1 - 9.0).abs() < 0.02, "{p90:?}");
    }

    #[test]
    fn lenient_reading_tolerates_missing_and_odd_fields() {
        let s: StoredSummary = lenient(&serde_json::json!({"duration_s": 2.0, "requests": 5}));
        // A wrong-shaped field makes the whole value fall back to default.
        assert_eq!(s.duration_s, 0.0);
        let s: StoredSummary = lenient(&serde_json::json!({"duration_s": 2.0}));
        assert_eq!(s.duration_s, 2.0);
        assert_eq!(s.requests.completed, 0);
    }

    #[test]
    fn series_fields_are_read_one_by_one() {
        let v =
            serde_json::json!({"p99_ms": 2.5, "completed": 10.5, "target": {"rss_bytes": 4096}});
        assert_eq!(field(&v, &["p99_ms"]), Some(2.5));
        assert_eq!(field(&v, &["completed"]), Some(10.5));
        assert_eq!(field(&v, &["target", "rss_bytes"]), Some(4096.0));
        assert_eq!(field(&v, &["net", "tx_bytes_per_s"]), None);
    }

    #[test]
    fn trim_num_drops_trailing_zeros() {
        assert_eq!(trim_num(0.5), "0.5");
        assert_eq!(trim_num(2.0), "2");
        assert_eq!(trim_num(1.25), "1.25");
    }
}
