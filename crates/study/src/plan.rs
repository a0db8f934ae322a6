//! The plan: a parsed study file resolved into targets, workloads, cells (one point of the
//! sweep axes on one target instance) and the ordered list of steps to run.
//!
//! Pure: no I/O, no clock. The order of steps is where noise is fought (methodology.md,
//! "Repeats and noise"): by default round r runs every cell once, with the target instance
//! as the innermost axis, so A and B alternate (A B A B) and a slow drift of the machine
//! hits both alike.

use std::str::FromStr;
use std::time::Duration;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use volley_engine::{Arrival, Order};
use volley_targets::TargetKind;

use crate::spec::{
    self, ArrivalKind, FixtureKind, LoadDef, Mode, ModelKind, OrderKind, RateAxis, RepeatOrder,
    StudyFile, SweepDef,
};
use crate::StudyError;

/// A target as the study names it.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// Name in results.
    pub name: String,
    /// Which server.
    pub kind: TargetKind,
    /// Workers.
    pub workers: u32,
    /// Server-side keep-alive.
    pub keepalive: bool,
    /// External: URL.
    pub url: Option<String>,
    /// External: pid to monitor.
    pub pid: Option<u32>,
}

/// One started copy of a target: the target with one CPU quota and core count. Every
/// instance runs for the whole study so interleaved steps need no restart.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// Index into [`Plan::targets`].
    pub target: usize,
    /// CPU quota, share of one CPU.
    pub cpu_quota: Option<f64>,
    /// Cores pinned (CPUs 0..cores).
    pub cores: Option<u32>,
}

/// The load model of one workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Load {
    /// Open loop (rate steps) or closed loop.
    pub open: bool,
    /// Closed: connections; open: initial pool.
    pub concurrency: u32,
    /// Open: the rate when not swept.
    pub rate: Option<f64>,
    /// Open: arrival process.
    pub arrival: Arrival,
    /// Generator threads.
    pub threads: u32,
    /// Open: connection cap.
    pub max_connections: u32,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Client keep-alive when not swept.
    pub keepalive: bool,
    /// Schedule seed.
    pub seed: u64,
    /// TLS, HTTP version and compression.
    pub wire: WireDef,
}

/// Compressed bodies asked of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `br` (Brotli).
    Br,
    /// `gzip`.
    Gzip,
}

impl Encoding {
    /// The `Accept-Encoding` / `Content-Encoding` token.
    pub fn token(self) -> &'static str {
        match self {
            Encoding::Br => "br",
            Encoding::Gzip => "gzip",
        }
    }
}

/// How the bytes travel: the study file's `tls`, `http2`, `streams`, `compressed` and
/// `insecure` keys, resolved. Mapped to the engine's `Wire` per step and to the managed
/// targets' TLS / HTTP/2 / compression settings at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WireDef {
    /// HTTPS.
    pub tls: bool,
    /// HTTP/2 with this many streams per connection; `None`: HTTP/1.1.
    pub h2_streams: Option<u32>,
    /// Accept-Encoding sent; the engine then decodes every HTTP/1.1 response with it
    /// (an answer in another coding is an `encoding` error) and counts wire beside
    /// decoded bytes. The targets' start-up probe also checks the encoding is applied.
    pub compressed: Option<Encoding>,
    /// Accept any certificate.
    pub insecure: bool,
}

/// A request mix, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Name.
    pub name: String,
    /// Method.
    pub method: String,
    /// Paths.
    pub paths: Vec<String>,
    /// Order of paths.
    pub order: Order,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Option<Vec<u8>>,
    /// Load model.
    pub load: Load,
    /// Cold vs warm TTFB: every step starts its target afresh and times the first request
    /// on its own.
    pub cold_start: bool,
    /// Requests per step for this workload (scaled), replacing the study's
    /// `Timing::requests`.
    pub requests: Option<u64>,
    /// Expected throughput of one step, requests per second (the workload's
    /// `expected_rate`, else the study's `[steps] expected_rate`): the duration estimate
    /// of request-count steps.
    pub expected_rate: Option<f64>,
}

/// One point: an instance, a workload and the values of the load axes.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Index into [`Plan::instances`].
    pub instance: usize,
    /// Index into [`Plan::workloads`].
    pub workload: usize,
    /// Offered rate (open loop); `None` in closed loops and in search mode.
    pub rate: Option<f64>,
    /// Connections.
    pub concurrency: u32,
    /// Client keep-alive.
    pub keepalive: bool,
}

/// One step to run: a cell's `repeat`-th run at position `order`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedStep {
    /// Position in the schedule.
    pub order: usize,
    /// Index into [`Plan::cells`].
    pub cell: usize,
    /// 0-based repeat.
    pub repeat: u32,
}

/// Shortest measured length `--scale` may give an open-loop (rate) step: the
/// sustainability rule judges whole one-second windows and its in-flight trend test needs
/// at least 3 of them, so a shorter rate step could only ever be judged `too_few_windows`.
pub const MIN_RATE_STEP: Duration = Duration::from_secs(3);

/// Step timing (already scaled).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Measured length of closed-loop steps.
    pub duration: Option<Duration>,
    /// Measured length of open-loop (rate) steps: `duration` scaled, but never below
    /// [`MIN_RATE_STEP`] unless the file itself asks for less.
    pub rate_duration: Option<Duration>,
    /// Or requests per step.
    pub requests: Option<u64>,
    /// Discarded load before measuring.
    pub warmup: Duration,
    /// Rest after each step.
    pub cooldown: Duration,
}

/// What the managed targets serve.
#[derive(Debug, Clone, PartialEq)]
pub enum Docroot {
    /// Generate this fixture into a temp dir.
    Fixture {
        /// Which.
        kind: volley_fixtures::Fixture,
        /// Seed.
        seed: u64,
    },
    /// Serve this directory.
    Dir(std::path::PathBuf),
    /// The target's own default (a private dir with index.html).
    Default,
}

/// Search-mode settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchPlan {
    /// First rate.
    pub start_rate: f64,
    /// Options of the state machine.
    pub opts: volley_analysis::knee::SearchOpts,
}

/// What managed targets are started to serve (from the workloads' wire keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Serve {
    /// HTTPS with a throw-away CA the load trusts.
    pub tls: bool,
    /// Offer HTTP/2 by ALPN (only over TLS: h2c is for external targets).
    pub http2: bool,
    /// Compress with Brotli (quality 11, as seed 002).
    pub brotli: bool,
    /// Compress with gzip (level 6).
    pub gzip: bool,
}

/// A resolved study.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Study name.
    pub name: String,
    /// Sweep or search.
    pub mode: Mode,
    /// Targets (filtered by the `target` axis).
    pub targets: Vec<Target>,
    /// Instances (target x quota x cores).
    pub instances: Vec<Instance>,
    /// Workloads.
    pub workloads: Vec<Workload>,
    /// Points, in schedule order within a round.
    pub cells: Vec<Cell>,
    /// Sweep mode: every step in order. Search mode: empty (steps are decided live).
    pub steps: Vec<PlannedStep>,
    /// Repeats per cell.
    pub repeats: u32,
    /// Timing.
    pub timing: Timing,
    /// Judging rule for rate steps.
    pub rule: volley_analysis::sustain::Rule,
    /// What to serve.
    pub docroot: Docroot,
    /// Search settings (search mode).
    pub search: Option<SearchPlan>,
    /// What managed targets serve.
    pub serve: Serve,
    /// The axis with more than one value that best describes the study (`rate`,
    /// `concurrency`, `cpu_quota`, `cores`, `keepalive`, `workload`, `target` or `none`).
    pub axis: &'static str,
}

impl Plan {
    /// Display name of an instance: the target name, plus its cap when the study varies it.
    pub fn instance_label(&self, i: usize) -> String {
        let inst = &self.instances[i];
        let mut s = self.targets[inst.target].name.clone();
        if let Some(q) = inst.cpu_quota {
            s.push_str(&format!(" cpu={:.0}%", q * 100.0));
        }
        if let Some(c) = inst.cores {
            s.push_str(&format!(" cores={c}"));
        }
        s
    }

    /// The request rate a request-count step of `cell` is expected to run at, and where
    /// that figure comes from: the offered rate (open loop), what finished steps of the
    /// same family measured (`book`), the study's `expected_rate`, or the fallback guess
    /// of [`GUESS_RPS_PER_CONNECTION`].
    pub fn request_rate(&self, cell: &Cell, book: &RateBook) -> (f64, RateSource) {
        if let Some(r) = cell.rate {
            return (r, RateSource::Offered);
        }
        if let Some(r) = book.rate(cell) {
            return (r, RateSource::Measured);
        }
        if let Some(r) = self.workloads[cell.workload].expected_rate {
            return (r, RateSource::Stated);
        }
        (
            GUESS_RPS_PER_CONNECTION * f64::from(cell.concurrency.max(1)),
            RateSource::Guess,
        )
    }

    /// Rough length of one step of `cell`, for the plan: warm-up, the measured part,
    /// cool-down. A request-count step lasts requests / [`Plan::request_rate`] (capped by
    /// the step's duration when it has both: the first limit reached ends it).
    pub fn step_estimate(&self, cell: &Cell) -> Duration {
        self.step_estimate_learned(cell, &RateBook::default())
    }

    /// [`Plan::step_estimate`] with the rates measured so far: the ETA's estimate.
    pub fn step_estimate_learned(&self, cell: &Cell, book: &RateBook) -> Duration {
        let t = &self.timing;
        let open = self.mode == Mode::Search || self.workloads[cell.workload].load.open;
        let duration = if open { t.rate_duration } else { t.duration };
        let requests = self.workloads[cell.workload].requests.or(t.requests);
        let by_count = requests.map(|n| {
            let (rate, _) = self.request_rate(cell, book);
            Duration::try_from_secs_f64(n as f64 / rate.max(1e-3)).unwrap_or(Duration::MAX)
        });
        let measured = match (duration, by_count) {
            (Some(d), Some(c)) => d.min(c),
            (Some(d), None) => d,
            (None, Some(c)) => c,
            (None, None) => Duration::ZERO,
        };
        t.warmup.saturating_add(measured).saturating_add(t.cooldown)
    }

    /// Time left for `steps` (the rest of a sweep), each estimated with the rates
    /// measured so far.
    pub fn remaining_estimate(&self, steps: &[PlannedStep], book: &RateBook) -> Duration {
        steps
            .iter()
            .map(|s| self.step_estimate_learned(&self.cells[s.cell], book))
            .fold(Duration::ZERO, Duration::saturating_add)
    }

    /// Steps one capacity search is expected to take, `(fewest, most)`, from its
    /// settings. Fewest: the start passes, the next doubling fails, then
    /// b = ceil(log2(1 / resolution)) bisections (the bracket [c, 2c] halves each time
    /// until it is within the resolution), each decided by a bare majority of the
    /// repeats. Most: doubling all the way to the maximum rate, every decision near the
    /// edge needing all its repeats. Both capped by the step budget. Where the capacity
    /// lies is unknown in advance, hence a range.
    pub fn search_steps_range(&self) -> Option<(u32, u32)> {
        let s = self.search.as_ref()?;
        let o = &s.opts;
        let bisections = if o.resolution_share > 0.0 {
            (1.0 / o.resolution_share).log2().ceil().max(0.0) as u32
        } else {
            // Only an absolute resolution: assume the bracket starts near the start rate.
            (s.start_rate / o.resolution_rps.max(1e-9))
                .log2()
                .ceil()
                .max(0.0) as u32
        };
        let doublings = (o.max_rate_rps / s.start_rate).log2().ceil().max(0.0) as u32;
        let need = o.repeats / 2 + 1;
        let fewest = 1 + need * (1 + bisections);
        let most = doublings + 1 + o.repeats * (1 + bisections);
        Some((fewest.min(o.max_steps), most.min(o.max_steps)))
    }

    /// Steps per search the estimate and the ETA assume: the middle of
    /// [`Plan::search_steps_range`].
    pub fn search_steps_estimate(&self) -> u32 {
        self.search_steps_range()
            .map_or(SEARCH_STEPS_FALLBACK, |(lo, hi)| (lo + hi).div_ceil(2))
    }

    /// Rough length of the whole study. Search mode: [`Plan::search_steps_estimate`]
    /// steps per search.
    pub fn estimate(&self) -> Duration {
        if self.mode == Mode::Search {
            let n = self.search_steps_estimate();
            return self.cells.iter().map(|c| self.step_estimate(c) * n).sum();
        }
        self.remaining_estimate(&self.steps, &RateBook::default())
    }
}

/// Requests per second per connection assumed for a request-count step when the study
/// states no `expected_rate` and nothing has been measured yet: a small static file over
/// keep-alive on loopback. Slow requests (Brotli 11, big bodies, CPU caps) need
/// `expected_rate`.
pub const GUESS_RPS_PER_CONNECTION: f64 = 2000.0;

/// Steps per search assumed when the plan has no search settings.
const SEARCH_STEPS_FALLBACK: u32 = 12;

/// Where [`Plan::request_rate`] got its figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateSource {
    /// The step's offered rate (open loop).
    Offered,
    /// The median of finished steps of the same family.
    Measured,
    /// The study file's `expected_rate`.
    Stated,
    /// [`GUESS_RPS_PER_CONNECTION`] per connection.
    Guess,
}

/// Requests per second measured by finished steps, per family: one (target instance,
/// workload) pair, i.e. target, workload, CPU quota and cores. Concurrency and
/// keep-alive vary within a family; under a CPU cap (seed 002) throughput barely moves
/// with them, and elsewhere the family's median is still far closer than a fixed guess.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RateBook {
    measured: std::collections::BTreeMap<(usize, usize), Vec<f64>>,
}

impl RateBook {
    /// Notes a finished step of `cell` that completed `rps` requests per second
    /// (non-positive or non-finite figures, e.g. a step that failed outright, are
    /// ignored: they would predict an endless step).
    pub fn record(&mut self, cell: &Cell, rps: f64) {
        if rps.is_finite() && rps > 0.0 {
            self.measured
                .entry((cell.instance, cell.workload))
                .or_default()
                .push(rps);
        }
    }

    /// The median measured rate of `cell`'s family, if any step of it finished.
    pub fn rate(&self, cell: &Cell) -> Option<f64> {
        let v = self.measured.get(&(cell.instance, cell.workload))?;
        let mut v = v.clone();
        v.sort_by(f64::total_cmp);
        let m = v.len() / 2;
        match v.len() {
            0 => None,
            n if n % 2 == 1 => Some(v[m]),
            _ => Some((v[m - 1] + v[m]) / 2.0),
        }
    }
}

impl Plan {
    /// The plan as printed before a run: targets, workloads, the steps in order (the
    /// first 30) and the estimated total time.
    pub fn describe(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let mode = match self.mode {
            Mode::Sweep => "sweep",
            Mode::Search => "search",
        };
        let _ = writeln!(out, "study {}: {mode}, axis {}", self.name, self.axis);
        let names: Vec<String> = (0..self.instances.len())
            .map(|i| self.instance_label(i))
            .collect();
        let _ = writeln!(out, "targets: {}", names.join(", "));
        for w in &self.workloads {
            let wire = &w.load.wire;
            let _ = writeln!(
                out,
                "workload {}: {} {} ({} loop, {} thread(s), timeout {:?}, {}{}{}{})",
                w.name,
                w.method,
                w.paths.join(" "),
                if w.load.open { "open" } else { "closed" },
                w.load.threads,
                w.load.timeout,
                if wire.tls { "HTTPS " } else { "" },
                match wire.h2_streams {
                    Some(n) => format!("HTTP/2 x{n} streams"),
                    None => "HTTP/1.1".to_string(),
                },
                wire.compressed
                    .map(|e| format!(
                        ", Accept-Encoding {} (bodies decoded and checked)",
                        e.token()
                    ))
                    .unwrap_or_default(),
                if w.cold_start {
                    ", cold start: target restarted per step, first request timed alone"
                } else {
                    ""
                }
            );
        }
        let t = &self.timing;
        if t.rate_duration != t.duration {
            if let Some(d) = t.rate_duration {
                let _ = writeln!(
                    out,
                    "rate steps: {d:?} measured (scaled length raised to the {MIN_RATE_STEP:?} floor so each step has the 3 whole one-second windows the sustainability rule judges)"
                );
            }
        }
        let _ = writeln!(
            out,
            "each step: {}{}warm-up {:?}, cool-down {:?}; {} repeat(s); SLO p99 {:?}, errors <= {:.1}%",
            t.duration.map(|d| format!("{d:?} measured, ")).unwrap_or_default(),
            t.requests.map(|n| format!("{n} requests, ")).unwrap_or_default(),
            t.warmup,
            t.cooldown,
            self.repeats,
            self.rule.p99_slo,
            self.rule.allowed_error_share * 100.0
        );
        let line = |c: &Cell| {
            format!(
                "{} {}{} c={} ka={}",
                self.instance_label(c.instance),
                self.workloads[c.workload].name,
                c.rate.map(|r| format!(" rate={r:.0}")).unwrap_or_default(),
                c.concurrency,
                if c.keepalive { "on" } else { "off" }
            )
        };
        if let Some(s) = &self.search {
            let _ = writeln!(
                out,
                "{} capacity search(es) from {:.0} req/s (x2 until a step fails, then bisect to {:.0}%, {} run(s) per decision near the edge, at most {} steps each):",
                self.cells.len(),
                s.start_rate,
                s.opts.resolution_share * 100.0,
                s.opts.repeats,
                s.opts.max_steps
            );
            for c in &self.cells {
                let _ = writeln!(out, "  {}", line(c));
            }
        } else {
            let _ = writeln!(out, "{} steps, in this order:", self.steps.len());
            for s in self.steps.iter().take(30) {
                let _ = writeln!(
                    out,
                    "  {:>4}. {}{}",
                    s.order + 1,
                    line(&self.cells[s.cell]),
                    if self.repeats > 1 {
                        format!(" (repeat {})", s.repeat + 1)
                    } else {
                        String::new()
                    }
                );
            }
            if self.steps.len() > 30 {
                let _ = writeln!(out, "  ... {} more", self.steps.len() - 30);
            }
        }
        let est = self.estimate().as_secs();
        let how = match self.search_steps_range() {
            Some((lo, hi)) => format!(
                " (search: {} steps per search assumed, {lo}-{hi} by its settings: start rate, resolution, repeats, max rate and step budget)",
                self.search_steps_estimate()
            ),
            None => self.rate_note(),
        };
        let _ = writeln!(
            out,
            "estimated total: {}{how}",
            fmt_duration(Duration::from_secs(est))
        );
        out
    }
}

impl Plan {
    /// How request-count steps were estimated, for the plan print: the stated
    /// `expected_rate`s, or a warning that the fallback guess was used.
    fn rate_note(&self) -> String {
        let counted: Vec<&Workload> = self
            .workloads
            .iter()
            .filter(|w| !w.load.open && (w.requests.or(self.timing.requests)).is_some())
            .collect();
        if counted.is_empty() {
            return String::new();
        }
        let stated: Vec<String> = counted
            .iter()
            .filter_map(|w| Some(format!("{} {} req/s", w.name, w.expected_rate?)))
            .collect();
        if stated.len() == counted.len() {
            format!(
                " (request-count steps at the expected_rate: {})",
                stated.join(", ")
            )
        } else {
            format!(
                " (request-count steps guessed at {GUESS_RPS_PER_CONNECTION:.0} req/s per connection, a small file on loopback; state [steps] expected_rate when requests are slower)"
            )
        }
    }
}

/// `1h32m`, `4m05s`: the plan's and the ETA's format.
pub fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

/// A stated `expected_rate`: a positive, finite number of requests per second.
fn expected_rate_of(text: &str, v: &Option<toml::Spanned<f64>>) -> Result<Option<f64>, StudyError> {
    match v {
        None => Ok(None),
        Some(r) if r.get_ref().is_finite() && *r.get_ref() > 0.0 => Ok(Some(*r.get_ref())),
        Some(r) => Err(spec::at(
            text,
            r,
            format!(
                "expected_rate must be a positive number of requests per second (one step, all connections), got {}",
                r.get_ref()
            ),
        )),
    }
}

fn invalid(msg: impl Into<String>) -> StudyError {
    StudyError::Invalid(msg.into())
}

fn duration_of(
    text: &str,
    v: &Option<toml::Spanned<String>>,
    default: Duration,
) -> Result<Duration, StudyError> {
    match v {
        None => Ok(default),
        Some(s) => spec::parse_duration(s.get_ref()).map_err(|m| spec::at(text, s, m.to_string())),
    }
}

fn expand_rates(axis: &RateAxis) -> Result<Vec<f64>, StudyError> {
    let rates = match axis {
        RateAxis::List(v) => v.clone(),
        RateAxis::Range { from, to, step } => {
            if !(step.is_finite() && *step > 0.0 && from <= to) {
                return Err(invalid(format!(
                    "sweep.rate range needs from <= to and step > 0 (got from {from}, to {to}, step {step})"
                )));
            }
            let n = ((to - from) / step + 1e-9).floor() as usize;
            if n > 10_000 {
                return Err(invalid("sweep.rate range has more than 10000 points"));
            }
            (0..=n).map(|i| from + step * i as f64).collect()
        }
    };
    if rates.is_empty() {
        return Err(invalid("sweep.rate is empty"));
    }
    if let Some(r) = rates.iter().find(|r| !(r.is_finite() && **r > 0.0)) {
        return Err(invalid(format!("sweep.rate values must be > 0, got {r}")));
    }
    Ok(rates)
}

fn resolve_load(text: &str, d: &LoadDef) -> Result<Load, StudyError> {
    let open = match d.model {
        Some(ModelKind::Open) => true,
        Some(ModelKind::Closed) => false,
        None => d.rate.is_some(),
    };
    let timeout = duration_of(text, &d.timeout, Duration::from_secs(10))?;
    if timeout.is_zero() {
        return Err(invalid("load.timeout must be longer than zero"));
    }
    if let Some(r) = d.rate {
        if !(r.is_finite() && r > 0.0) {
            return Err(invalid(format!("load.rate must be > 0, got {r}")));
        }
    }
    let concurrency = d.concurrency.unwrap_or(if open { 16 } else { 1 });
    let threads = d.threads.unwrap_or(1);
    if concurrency == 0 || threads == 0 {
        return Err(invalid(
            "load.concurrency and load.threads must be at least 1",
        ));
    }
    let compressed = match d.compressed.as_deref() {
        None => None,
        Some("br") => Some(Encoding::Br),
        Some("gzip") => Some(Encoding::Gzip),
        Some(other) => {
            return Err(invalid(format!(
                "load.compressed must be \"br\" or \"gzip\", got \"{other}\""
            )))
        }
    };
    let streams = d.streams.unwrap_or(1);
    if streams == 0 {
        return Err(invalid("load.streams must be at least 1"));
    }
    if d.streams.is_some() && d.http2 != Some(true) {
        return Err(invalid("load.streams needs http2 = true"));
    }
    let wire = WireDef {
        tls: d.tls.unwrap_or(false),
        h2_streams: (d.http2 == Some(true)).then_some(streams),
        compressed,
        insecure: d.insecure.unwrap_or(false),
    };
    Ok(Load {
        wire,
        open,
        concurrency,
        rate: d.rate,
        arrival: match d.arrival {
            Some(ArrivalKind::Poisson) => Arrival::Poisson,
            _ => Arrival::Constant,
        },
        threads,
        max_connections: d.max_connections.unwrap_or(256).max(concurrency),
        timeout,
        keepalive: d.keepalive.unwrap_or(true),
        seed: d.seed.unwrap_or(1),
    })
}

fn parse_header(h: &str) -> Result<(String, String), StudyError> {
    match h.split_once(':') {
        Some((n, v)) if !n.trim().is_empty() => Ok((n.trim().to_string(), v.trim().to_string())),
        _ => Err(invalid(format!(
            "workload header '{h}' must be 'Name: value'"
        ))),
    }
}

/// Resolves a parsed study. `text` is the file (for error lines); `scale` multiplies
/// durations and request counts (`--scale 0.1` for a quick look).
pub fn resolve(file: &StudyFile, text: &str, scale: f64) -> Result<Plan, StudyError> {
    if !(scale.is_finite() && scale > 0.0) {
        return Err(invalid(format!("--scale must be > 0, got {scale}")));
    }
    if file.targets.is_empty() {
        return Err(invalid("the study names no [[target]]"));
    }
    if file.workloads.is_empty() {
        return Err(invalid("the study names no [[workload]]"));
    }
    // Targets, filtered by the target axis.
    let mut targets = Vec::new();
    for t in &file.targets {
        let kind = TargetKind::from_str(t.kind.get_ref()).map_err(|_| {
            spec::at(
                text,
                &t.kind,
                format!(
                    "unknown target kind '{}' (builtin, nginx, apache-event, apache-prefork, lighttpd, caddy, external)",
                    t.kind.get_ref()
                ),
            )
        })?;
        if kind == TargetKind::External && t.url.is_none() {
            return Err(spec::at(
                text,
                &t.kind,
                format!(
                    "target '{}' is external and needs url = \"http://...\"",
                    t.name
                ),
            ));
        }
        if targets.iter().any(|x: &Target| x.name == t.name) {
            return Err(invalid(format!("two targets are named '{}'", t.name)));
        }
        if let Some(q) = t.cpu_quota {
            check_quota(q)?;
        }
        targets.push(Target {
            name: t.name.clone(),
            kind,
            workers: t.workers.unwrap_or(1).max(1),
            keepalive: t.keepalive.unwrap_or(true),
            url: t.url.clone(),
            pid: t.pid,
        });
    }
    if let Some(names) = &file.sweep.target {
        for n in names {
            if !targets.iter().any(|t| &t.name == n) {
                return Err(invalid(format!(
                    "sweep.target names '{n}', which is no [[target]]"
                )));
            }
        }
        targets.retain(|t| names.contains(&t.name));
    }
    // Instances: target x cpu quota x cores.
    let sweep = &file.sweep;
    if let Some(qs) = &sweep.cpu_quota {
        for q in qs {
            check_quota(*q)?;
        }
    }
    if sweep.cores.as_ref().is_some_and(|c| c.contains(&0)) {
        return Err(invalid("sweep.cores values must be at least 1"));
    }
    let mut instances = Vec::new();
    for (ti, t) in targets.iter().enumerate() {
        let def = file.targets.iter().find(|d| d.name == t.name);
        let external = t.kind == TargetKind::External;
        let quotas: Vec<Option<f64>> = match (&sweep.cpu_quota, external) {
            (Some(v), false) => v.iter().copied().map(Some).collect(),
            _ => vec![def.and_then(|d| d.cpu_quota)],
        };
        let cores: Vec<Option<u32>> = match (&sweep.cores, external) {
            (Some(v), false) => v.iter().copied().map(Some).collect(),
            _ => vec![def.and_then(|d| d.cores)],
        };
        for &c in &cores {
            for &q in &quotas {
                instances.push(Instance {
                    target: ti,
                    cpu_quota: q,
                    cores: c,
                });
            }
        }
    }
    // Workloads.
    let base_load = resolve_load(text, &file.load)?;
    let study_rate = expected_rate_of(text, &file.steps.expected_rate)?;
    let mut workloads = Vec::new();
    for w in &file.workloads {
        if w.paths.is_empty() {
            return Err(invalid(format!("workload '{}' has no paths", w.name)));
        }
        if let Some(p) = w.paths.iter().find(|p| !p.starts_with('/')) {
            return Err(invalid(format!(
                "workload '{}': path '{p}' must start with '/'",
                w.name
            )));
        }
        let seed = w.seed.unwrap_or(1);
        let order = match w.order.unwrap_or(if w.paths.len() > 1 {
            OrderKind::Sequential
        } else {
            OrderKind::Same
        }) {
            OrderKind::Same => Order::Same,
            // A block is a request count: scaled with the step's requests, so that
            // seed 003's L2 (5 x 1000) at `--scale 0.1` is still 5 x 100.
            OrderKind::Sequential => Order::Sequential {
                block: ((w.block.unwrap_or(1).max(1) as f64 * scale).ceil() as u64).max(1),
            },
            OrderKind::Random => Order::Random { seed },
            OrderKind::Weighted => {
                let weights = w.weights.clone().unwrap_or_default();
                if weights.len() != w.paths.len() {
                    return Err(invalid(format!(
                        "workload '{}': weighted order needs one weight per path",
                        w.name
                    )));
                }
                Order::Weighted { weights, seed }
            }
        };
        let load = match &w.load {
            Some(l) => resolve_load(text, l)?,
            None => base_load.clone(),
        };
        let headers = w
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        let body = w.body.clone().map(String::into_bytes);
        let method = w
            .method
            .clone()
            .unwrap_or_else(|| if body.is_some() { "POST" } else { "GET" }.into());
        let mut headers = headers;
        if let Some(e) = load.wire.compressed {
            if !headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("accept-encoding"))
            {
                headers.push(("Accept-Encoding".into(), e.token().into()));
            }
        }
        workloads.push(Workload {
            name: w.name.clone(),
            method,
            paths: w.paths.clone(),
            order,
            headers,
            body,
            load,
            cold_start: w.cold_start.unwrap_or(false),
            expected_rate: expected_rate_of(text, &w.expected_rate)?.or(study_rate),
            requests: match w.requests {
                Some(0) => {
                    return Err(invalid(format!(
                        "workload '{}': requests must be > 0",
                        w.name
                    )))
                }
                n => n.map(|n| ((n as f64 * scale).ceil() as u64).max(1)),
            },
        });
    }
    let serve = serve_of(&workloads)?;
    if workloads.iter().any(|w| w.cold_start) {
        if file.mode == Mode::Search {
            return Err(invalid(
                "cold_start workloads cannot be searched (each step restarts its target)",
            ));
        }
        if let Some(t) = targets.iter().find(|t| t.kind == TargetKind::External) {
            return Err(invalid(format!(
                "cold_start needs managed targets: '{}' is external and cannot be restarted",
                t.name
            )));
        }
    }
    // Cells: workload, keepalive, concurrency, rate outer; instance innermost (A B A B).
    let mut cells = Vec::new();
    let mut made_open = Vec::new();
    for (wi, (w, wd)) in workloads.iter().zip(&file.workloads).enumerate() {
        let sw: &SweepDef = wd.sweep.as_ref().unwrap_or(sweep);
        if wd
            .sweep
            .as_ref()
            .is_some_and(|s| s.cpu_quota.is_some() || s.cores.is_some() || s.target.is_some())
        {
            return Err(invalid(format!(
                "workload '{}': a workload's sweep may only set rate, concurrency and keepalive",
                w.name
            )));
        }
        let keepalives = sw.keepalive.clone().unwrap_or(vec![w.load.keepalive]);
        let concs = sw.concurrency.clone().unwrap_or(vec![w.load.concurrency]);
        if concs.is_empty() || concs.contains(&0) {
            return Err(invalid("sweep.concurrency values must be at least 1"));
        }
        let open = w.load.open || sw.rate.is_some();
        let rates: Vec<Option<f64>> = if file.mode == Mode::Search {
            vec![None]
        } else if let Some(axis) = &sw.rate {
            expand_rates(axis)?.into_iter().map(Some).collect()
        } else if open {
            match w.load.rate {
                Some(r) => vec![Some(r)],
                None => {
                    return Err(invalid(format!(
                        "workload '{}' is open-loop but has no rate (set load.rate or sweep.rate)",
                        w.name
                    )))
                }
            }
        } else {
            vec![None]
        };
        for &ka in &keepalives {
            for &c in &concs {
                for &r in &rates {
                    for ii in 0..instances.len() {
                        cells.push(Cell {
                            instance: ii,
                            workload: wi,
                            rate: r,
                            concurrency: c,
                            keepalive: ka,
                        });
                    }
                }
            }
        }
        if open && !w.load.open {
            made_open.push(wi);
        }
    }
    // A rate axis makes the workload open-loop.
    for wi in made_open {
        workloads[wi].load.open = true;
    }
    if file.mode == Mode::Search {
        for w in &mut workloads {
            w.load.open = true;
        }
    }
    if cells.is_empty() {
        return Err(invalid("the study has no step to run (no target left?)"));
    }
    // Timing.
    let st = &file.steps;
    let duration = match &st.duration {
        Some(_) => Some(duration_of(text, &st.duration, Duration::ZERO)?),
        None => None,
    };
    let requests = st.requests;
    if duration.is_none() && requests.is_none() && workloads.iter().any(|w| w.requests.is_none()) {
        return Err(invalid("[steps] needs duration = \"30s\" or requests = N"));
    }
    if duration.is_some_and(|d| d.is_zero()) || requests == Some(0) {
        return Err(invalid("steps.duration and steps.requests must be > 0"));
    }
    let scaled = duration.map(|d| d.mul_f64(scale));
    let timing = Timing {
        duration: scaled,
        rate_duration: scaled.zip(duration).map(|(s, d)| rate_step_length(s, d)),
        requests: requests.map(|n| ((n as f64 * scale).ceil() as u64).max(1)),
        warmup: duration_of(text, &st.warmup, Duration::from_secs(1))?.mul_f64(scale),
        cooldown: duration_of(text, &st.cooldown, Duration::from_secs(1))?.mul_f64(scale),
    };
    let repeats = st.repeats.unwrap_or(1);
    if repeats == 0 {
        return Err(invalid("steps.repeats must be at least 1"));
    }
    let steps = if file.mode == Mode::Sweep {
        schedule(
            cells.len(),
            repeats,
            st.order.unwrap_or_default(),
            st.seed.unwrap_or(1),
        )
    } else {
        Vec::new()
    };
    // SLO.
    let p99 = duration_of(text, &file.slo.p99, Duration::from_secs(1))?;
    let error_share = file.slo.error_share.unwrap_or(0.01);
    if !(0.0..=1.0).contains(&error_share) {
        return Err(invalid("slo.error_share must be within 0..1"));
    }
    let mut rule = volley_analysis::sustain::Rule::new(error_share, p99);
    // Short (scaled) steps still get judged, on at least 3 one-second windows.
    if let Some(d) = timing.rate_duration {
        rule.min_windows = rule.min_windows.min((d.as_secs() as usize).max(3));
    }
    let search = (file.mode == Mode::Search).then(|| {
        let s = &file.search;
        let opts = volley_analysis::knee::SearchOpts {
            resolution_share: s.resolution.unwrap_or(0.02),
            repeats: s.repeats.unwrap_or(3),
            max_rate_rps: s.max_rate.unwrap_or(100_000.0),
            max_steps: s.max_steps.unwrap_or(40),
            ..Default::default()
        };
        SearchPlan {
            start_rate: s.start_rate.unwrap_or(100.0),
            opts,
        }
    });
    if let Some(s) = &search {
        volley_analysis::knee::Search::new(s.start_rate, s.opts.clone())
            .map_err(|e| invalid(format!("[search]: {e}")))?;
        if timing.duration.is_none() {
            return Err(invalid(
                "search mode needs steps.duration (rate steps are timed)",
            ));
        }
    }
    let docroot = match &file.fixture {
        None => Docroot::Default,
        Some(f) => match (&f.docroot, f.kind) {
            (Some(d), _) => Docroot::Dir(d.clone()),
            (None, Some(k)) => Docroot::Fixture {
                kind: match k {
                    FixtureKind::Uniserve => volley_fixtures::Fixture::Uniserve,
                    FixtureKind::Sizes => volley_fixtures::Fixture::Sizes,
                    FixtureKind::Groupware => volley_fixtures::Fixture::Groupware {
                        users: f.users.unwrap_or(2),
                        items: f.items.unwrap_or(20),
                    },
                },
                seed: f.seed.unwrap_or(1),
            },
            (None, None) => return Err(invalid("[fixture] needs kind or docroot")),
        },
    };
    let axis = primary_axis(&cells, &instances, &targets);
    Ok(Plan {
        name: file.name.clone(),
        mode: file.mode,
        targets,
        instances,
        workloads,
        cells,
        steps,
        repeats,
        timing,
        rule,
        docroot,
        search,
        serve,
        axis,
    })
}

/// The measured length of a rate step: the scaled length, raised to [`MIN_RATE_STEP`]
/// (but never above the unscaled length the file asked for).
pub fn rate_step_length(scaled: Duration, unscaled: Duration) -> Duration {
    scaled.max(MIN_RATE_STEP.min(unscaled))
}

/// What the managed targets must serve for these workloads: one scheme for all (a
/// target listens either HTTPS or plain), HTTP/2 and compression when any workload asks.
fn serve_of(workloads: &[Workload]) -> Result<Serve, StudyError> {
    let tls = workloads.first().is_some_and(|w| w.load.wire.tls);
    if let Some(w) = workloads.iter().find(|w| w.load.wire.tls != tls) {
        return Err(invalid(format!(
            "workload '{}': every workload of a study must agree on tls (a managed target serves HTTPS or plain HTTP, not both)",
            w.name
        )));
    }
    let h2 = workloads.iter().any(|w| w.load.wire.h2_streams.is_some());
    let asked: Vec<Encoding> = workloads
        .iter()
        .filter_map(|w| w.load.wire.compressed)
        .collect();
    Ok(Serve {
        tls,
        http2: h2 && tls,
        brotli: asked.contains(&Encoding::Br),
        gzip: asked.contains(&Encoding::Gzip),
    })
}

fn check_quota(q: f64) -> Result<(), StudyError> {
    if q.is_finite() && q > 0.0 && q <= 64.0 {
        Ok(())
    } else {
        Err(invalid(format!(
            "cpu_quota is a share of one CPU (0.25 = 25%), got {q}"
        )))
    }
}

fn primary_axis(cells: &[Cell], instances: &[Instance], targets: &[Target]) -> &'static str {
    fn varies<T: PartialEq>(v: impl Iterator<Item = T>) -> bool {
        let v: Vec<T> = v.collect();
        v.windows(2).any(|w| w[0] != w[1])
    }
    if varies(cells.iter().map(|c| c.rate.map(f64::to_bits))) {
        "rate"
    } else if varies(cells.iter().map(|c| c.concurrency)) {
        "concurrency"
    } else if varies(instances.iter().map(|i| i.cpu_quota.map(f64::to_bits))) {
        "cpu_quota"
    } else if varies(instances.iter().map(|i| i.cores)) {
        "cores"
    } else if varies(cells.iter().map(|c| c.keepalive)) {
        "keepalive"
    } else if varies(cells.iter().map(|c| c.workload)) {
        "workload"
    } else if targets.len() > 1 {
        "target"
    } else {
        "none"
    }
}

/// The order of steps: `cells` points x `repeats`, interleaved (round by round), randomised
/// within each round (seeded), or sequential (all repeats of a point back to back).
pub fn schedule(cells: usize, repeats: u32, order: RepeatOrder, seed: u64) -> Vec<PlannedStep> {
    let mut out = Vec::with_capacity(cells * repeats as usize);
    match order {
        RepeatOrder::Sequential => {
            for cell in 0..cells {
                for repeat in 0..repeats {
                    out.push((cell, repeat));
                }
            }
        }
        RepeatOrder::Interleaved | RepeatOrder::Random => {
            for repeat in 0..repeats {
                let mut round: Vec<usize> = (0..cells).collect();
                if order == RepeatOrder::Random {
                    let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_add(u64::from(repeat)));
                    round.shuffle(&mut rng);
                }
                out.extend(round.into_iter().map(|c| (c, repeat)));
            }
        }
    }
    out.into_iter()
        .enumerate()
        .map(|(order, (cell, repeat))| PlannedStep {
            order,
            cell,
            repeat,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> Result<Plan, StudyError> {
        let f = spec::parse(text)?;
        resolve(&f, text, 1.0)
    }

    const AB: &str = r#"
name = "ab"
[[target]]
name = "a"
kind = "builtin"
[[target]]
name = "b"
kind = "nginx"
[[workload]]
name = "w"
paths = ["/x"]
[sweep]
rate = { from = 100, to = 300, step = 100 }
[steps]
duration = "5s"
warmup = "1s"
cooldown = "2s"
repeats = 2
"#;

    #[test]
    fn sweep_expands_and_interleaves_targets_innermost() {
        let p = plan(AB).unwrap();
        assert_eq!(p.cells.len(), 6);
        assert_eq!(p.steps.len(), 12);
        assert_eq!(p.axis, "rate");
        let seq: Vec<(String, f64, u32)> = p
            .steps
            .iter()
            .map(|s| {
                let c = &p.cells[s.cell];
                (p.instance_label(c.instance), c.rate.unwrap(), s.repeat)
            })
            .collect();
        assert_eq!(seq[0], ("a".into(), 100.0, 0));
        assert_eq!(seq[1], ("b".into(), 100.0, 0));
        assert_eq!(seq[2], ("a".into(), 200.0, 0));
        assert_eq!(seq[6], ("a".into(), 100.0, 1));
        assert!(p.workloads[0].load.open);
        // 12 steps x (1 + 5 + 2) s.
        assert_eq!(p.estimate(), Duration::from_secs(96));
    }

    #[test]
    fn sequential_and_random_orders() {
        let s = schedule(3, 2, RepeatOrder::Sequential, 0);
        let cells: Vec<usize> = s.iter().map(|s| s.cell).collect();
        assert_eq!(cells, vec![0, 0, 1, 1, 2, 2]);
        let r1 = schedule(5, 3, RepeatOrder::Random, 7);
        let r2 = schedule(5, 3, RepeatOrder::Random, 7);
        assert_eq!(r1, r2, "seeded order repeats");
        for round in 0..3u32 {
            let mut c: Vec<usize> = r1
                .iter()
                .filter(|s| s.repeat == round)
                .map(|s| s.cell)
                .collect();
            c.sort();
            assert_eq!(c, vec![0, 1, 2, 3, 4], "each round holds every cell once");
        }
        assert_ne!(
            r1.iter().map(|s| s.cell).collect::<Vec<_>>(),
            schedule(5, 3, RepeatOrder::Interleaved, 7)
                .iter()
                .map(|s| s.cell)
                .collect::<Vec<_>>()
        );
        assert!(r1.iter().enumerate().all(|(i, s)| s.order == i));
    }

    /// The shipped seed-003 studies fetch only the HTML, as the seed did: L1 1000 of
    /// index1, L2 1000 of each index in turn, L3 1000 at random; 003 is one sequential
    /// client without keep-alive.
    #[test]
    fn shipped_studies_match_seed_003() {
        let pages: Vec<String> = (1..=5).map(|n| format!("/index{n}.html")).collect();
        for (file, text) in [
            ("quick", include_str!("../../../studies/quick.toml")),
            ("003", include_str!("../../../studies/003-uniserve.toml")),
        ] {
            let f = spec::parse(text).unwrap();
            let p = resolve(&f, text, 1.0).unwrap();
            let w = |name: &str| p.workloads.iter().find(|w| w.name == name).unwrap();
            let (l1, l2, l3) = (w("L1"), w("L2"), w("L3"));
            assert_eq!(l1.paths, vec!["/index1.html".to_string()], "{file}");
            assert_eq!((l1.order.clone(), l1.requests), (Order::Same, Some(1000)));
            assert_eq!(l2.paths, pages, "{file}");
            assert_eq!(l2.order, Order::Sequential { block: 1000 }, "{file}");
            assert_eq!(l2.requests, Some(5000), "{file}");
            assert_eq!(l3.paths, pages, "{file}");
            assert!(matches!(l3.order, Order::Random { .. }), "{file}");
            assert_eq!(l3.requests, Some(1000), "{file}");
            for c in p
                .cells
                .iter()
                .filter(|c| p.workloads[c.workload].name.starts_with('L'))
            {
                assert_eq!(c.concurrency, 1, "{file}: one sequential client");
                assert!(!p.workloads[c.workload].load.open, "{file}");
            }
            let kas: Vec<bool> = p.cells.iter().map(|c| c.keepalive).collect();
            assert!(kas.contains(&false), "{file}: the seed's open, read, close");
            if file == "003" {
                assert!(kas.iter().all(|k| !k), "003 never keeps connections alive");
                assert_eq!(p.repeats, 5);
            }
        }
        // Scaled, L2 is still five blocks of one page each.
        let text = include_str!("../../../studies/003-uniserve.toml");
        let p = resolve(&spec::parse(text).unwrap(), text, 0.1).unwrap();
        let l2 = p.workloads.iter().find(|w| w.name == "L2").unwrap();
        assert_eq!(
            (l2.order.clone(), l2.requests),
            (Order::Sequential { block: 100 }, Some(500))
        );
    }

    #[test]
    fn caps_multiply_instances_and_scale_shrinks_time() {
        let text = r#"
name = "caps"
[[target]]
name = "n"
kind = "nginx"
[[workload]]
name = "w"
paths = ["/x"]
[sweep]
concurrency = [1, 3]
cpu_quota = [0.25, 0.65]
cores = [1, 2]
keepalive = [true, false]
[steps]
requests = 1000
"#;
        let f = spec::parse(text).unwrap();
        let p = resolve(&f, text, 0.1).unwrap();
        assert_eq!(p.instances.len(), 4);
        assert_eq!(p.cells.len(), 16);
        assert_eq!(p.axis, "concurrency");
        assert_eq!(p.timing.requests, Some(100));
        assert_eq!(p.timing.warmup, Duration::from_millis(100));
        assert!(!p.workloads[0].load.open);
        assert_eq!(p.instance_label(1), "n cpu=65% cores=1");
    }

    #[test]
    fn semantic_errors_are_one_line() {
        let e = plan(&AB.replace("kind = \"nginx\"", "kind = \"iis\""))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 8") && e.contains("target.kind") && e.contains("iis"),
            "{e}"
        );
        let e = plan(&AB.replace("duration = \"5s\"", "duration = \"5 fortnights\""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 15") && e.contains("steps.duration"), "{e}");
        let e = plan(&AB.replace("step = 100", "step = 0"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("step > 0"), "{e}");
    }

    #[test]
    fn scale_keeps_rate_steps_judgeable() {
        assert_eq!(
            rate_step_length(Duration::from_millis(1200), Duration::from_secs(12)),
            MIN_RATE_STEP
        );
        assert_eq!(
            rate_step_length(Duration::from_secs(6), Duration::from_secs(60)),
            Duration::from_secs(6)
        );
        // A file asking for 2 s steps gets 2 s: the floor never lengthens the file.
        assert_eq!(
            rate_step_length(Duration::from_millis(200), Duration::from_secs(2)),
            Duration::from_secs(2)
        );
        let f = spec::parse(AB).unwrap();
        let p = resolve(&f, AB, 0.1).unwrap();
        assert_eq!(p.timing.duration, Some(Duration::from_millis(500)));
        assert_eq!(p.timing.rate_duration, Some(Duration::from_secs(3)));
        assert_eq!(p.rule.min_windows, 3);
        assert!(
            p.describe().contains("rate steps: 3s measured"),
            "{}",
            p.describe()
        );
        // Every step of AB is a rate step: 12 x (0.1 + 3 + 0.2) s.
        assert_eq!(p.estimate(), Duration::from_millis(39_600));
    }

    #[test]
    fn wire_keys_resolve_and_disagreeing_tls_is_refused() {
        let text = AB.replace(
            "[[workload]]\nname = \"w\"\npaths = [\"/x\"]",
            "[[workload]]\nname = \"w\"\npaths = [\"/x\"]\ncold_start = true\nload = { tls = true, http2 = true, streams = 4, compressed = \"br\" }",
        );
        let p = plan(&text).unwrap();
        let w = &p.workloads[0];
        assert_eq!(
            w.load.wire,
            WireDef {
                tls: true,
                h2_streams: Some(4),
                compressed: Some(Encoding::Br),
                insecure: false
            }
        );
        assert!(w.cold_start);
        assert!(w.headers.contains(&("Accept-Encoding".into(), "br".into())));
        assert_eq!(
            p.serve,
            Serve {
                tls: true,
                http2: true,
                brotli: true,
                gzip: false
            }
        );
        assert!(
            p.describe().contains("HTTPS HTTP/2 x4 streams"),
            "{}",
            p.describe()
        );
        let two = format!("{text}\n[[workload]]\nname = \"plain\"\npaths = [\"/y\"]\n");
        let e = plan(&two).unwrap_err().to_string();
        assert!(e.contains("'plain'") && e.contains("agree on tls"), "{e}");
        let e = plan(&text.replace("\"br\"", "\"lz4\""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("lz4"), "{e}");
        let e = plan(&text.replace("http2 = true, ", ""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("streams needs http2"), "{e}");
        let ext = text.replace(
            "kind = \"nginx\"",
            "kind = \"external\"\nurl = \"http://127.0.0.1:1/\"",
        );
        let e = plan(&ext).unwrap_err().to_string();
        assert!(e.contains("cold_start needs managed targets"), "{e}");
    }

    #[test]
    fn search_mode_has_no_fixed_steps() {
        let text = AB.replace("name = \"ab\"", "name = \"s\"\nmode = \"search\"");
        let p = plan(&text).unwrap();
        assert!(p.steps.is_empty());
        assert_eq!(p.cells.len(), 2, "one search per target");
        assert!(p.cells.iter().all(|c| c.rate.is_none()));
        assert!(p.search.is_some());
    }

    const CLOSED: &str = r#"
name = "slow"
[[target]]
name = "n"
kind = "nginx"
[[workload]]
name = "w"
paths = ["/x"]
[[workload]]
name = "v"
paths = ["/y"]
[sweep]
concurrency = [1, 3]
cpu_quota = [0.25, 0.65]
[steps]
requests = 1000
warmup = "1s"
cooldown = "1s"
"#;

    #[test]
    fn request_count_steps_use_the_stated_rate_then_the_guess() {
        let p = plan(CLOSED).unwrap();
        let book = RateBook::default();
        // No expected_rate: 2000 req/s per connection.
        let c3 = p.cells.iter().find(|c| c.concurrency == 3).unwrap();
        assert_eq!(p.request_rate(c3, &book), (6000.0, RateSource::Guess));
        let with = CLOSED.replace("requests = 1000", "requests = 1000\nexpected_rate = 40");
        let p = plan(&with).unwrap();
        for c in &p.cells {
            assert_eq!(p.request_rate(c, &book), (40.0, RateSource::Stated));
            // 1 s warm-up + 1000 / 40 s + 1 s cool-down.
            assert_eq!(p.step_estimate(c), Duration::from_secs(27));
        }
        assert_eq!(p.estimate(), Duration::from_secs(27 * 8));
        // A workload's own rate replaces the study's.
        let own = with.replace("name = \"v\"", "name = \"v\"\nexpected_rate = 10");
        let p = plan(&own).unwrap();
        let v = p.cells.iter().find(|c| c.workload == 1).unwrap();
        assert_eq!(p.step_estimate(v), Duration::from_secs(102));
        // A duration and a count: the first limit reached ends the step.
        let both = with.replace("requests = 1000", "requests = 1000\nduration = \"10s\"");
        let p = plan(&both).unwrap();
        assert_eq!(p.step_estimate(&p.cells[0]), Duration::from_secs(12));
    }

    #[test]
    fn the_eta_learns_the_median_rate_of_each_family() {
        let with = CLOSED.replace("requests = 1000", "requests = 1000\nexpected_rate = 40");
        let p = plan(&with).unwrap();
        let family = |inst: usize, wl: usize| {
            p.cells
                .iter()
                .filter(move |c| c.instance == inst && c.workload == wl)
        };
        let w0: Vec<&Cell> = family(0, 0).collect();
        let other = family(1, 0).next().unwrap();
        let mut book = RateBook::default();
        // (measured req/s recorded, expected rate of the family, source)
        let table: &[(&[f64], f64, RateSource)] = &[
            (&[], 40.0, RateSource::Stated),
            (&[20.0], 20.0, RateSource::Measured),
            (&[30.0], 25.0, RateSource::Measured),
            (&[100.0], 30.0, RateSource::Measured),
            // Failed steps (nothing completed) teach nothing.
            (&[0.0, f64::NAN, -5.0], 30.0, RateSource::Measured),
        ];
        for (measured, want, source) in table {
            for &rps in *measured {
                book.record(w0[0], rps);
            }
            // Every cell of the family (any concurrency) learns; other families do not.
            for c in &w0 {
                assert_eq!(p.request_rate(c, &book), (*want, *source));
            }
            assert_eq!(p.request_rate(other, &book), (40.0, RateSource::Stated));
        }
        // 1 s + 1000 / 30 s + 1 s for the learned family, 27 s for the others.
        let rest: Vec<PlannedStep> = p.steps.clone();
        let learned = Duration::from_secs(2) + Duration::from_secs_f64(1000.0 / 30.0);
        let want: Duration = p
            .steps
            .iter()
            .map(|s| {
                let c = &p.cells[s.cell];
                if (c.instance, c.workload) == (0, 0) {
                    learned
                } else {
                    Duration::from_secs(27)
                }
            })
            .sum();
        assert_eq!(p.remaining_estimate(&rest, &book), want);
        assert_eq!(
            p.remaining_estimate(&rest[rest.len()..], &book),
            Duration::ZERO
        );
        // Open-loop steps keep their offered rate whatever was measured.
        let ab = plan(AB).unwrap();
        let mut book = RateBook::default();
        book.record(&ab.cells[0], 5.0);
        assert_eq!(
            ab.request_rate(&ab.cells[0], &book),
            (100.0, RateSource::Offered)
        );
    }

    #[test]
    fn the_caps_study_estimate_matches_its_header() {
        let text = include_str!("../../../studies/002-caps.toml");
        let f = spec::parse(text).unwrap();
        let full = resolve(&f, text, 1.0).unwrap().estimate();
        assert!(
            full >= Duration::from_secs(90 * 60) && full <= Duration::from_secs(120 * 60),
            "{full:?}"
        );
        let quick = resolve(&f, text, 0.2).unwrap().estimate();
        assert!(
            quick >= Duration::from_secs(18 * 60) && quick <= Duration::from_secs(25 * 60),
            "{quick:?}"
        );
    }

    #[test]
    fn search_steps_come_from_the_search_settings() {
        let base = AB.replace("name = \"ab\"", "name = \"s\"\nmode = \"search\"");
        // (search section, fewest, most, assumed)
        let table = [
            // Defaults: start 100, 2%, 3 repeats, max 100000, 40 steps:
            // b = ceil(log2 50) = 6; fewest 1 + 2 * 7 = 15; most 10 + 1 + 3 * 7 = 32.
            ("", 15, 32, 24),
            // The integration test's search: b = ceil(log2 20) = 5, repeats 1,
            // ceil(log2(100000 / 1000)) = 7 doublings: 1 + 6 = 7 and 8 + 6 = 14, capped at 10.
            (
                "[search]\nstart_rate = 1000\nresolution = 0.05\nrepeats = 1\nmax_steps = 10\n",
                7,
                10,
                9,
            ),
            // A step budget below the fewest caps both.
            ("[search]\nmax_steps = 5\n", 5, 5, 5),
        ];
        for (section, lo, hi, mid) in table {
            let p = plan(&format!("{base}{section}")).unwrap();
            assert_eq!(p.search_steps_range(), Some((lo, hi)), "{section}");
            assert_eq!(p.search_steps_estimate(), mid, "{section}");
            assert_eq!(
                p.estimate(),
                p.cells
                    .iter()
                    .map(|c| p.step_estimate(c) * mid)
                    .sum::<Duration>()
            );
            assert!(p.describe().contains(&format!("{lo}-{hi} by its settings")));
        }
        assert_eq!(plan(AB).unwrap().search_steps_range(), None);
    }

    #[test]
    fn bad_expected_rates_name_line_and_key() {
        let cases = [
            (
                "requests = 1000\nexpected_rate = \"fast\"",
                "line 17",
                "steps.expected_rate",
            ),
            (
                "requests = 1000\nexpected_rate = 0",
                "line 17",
                "steps.expected_rate",
            ),
            (
                "requests = 1000\nexpected_rate = -3.5",
                "line 17",
                "steps.expected_rate",
            ),
        ];
        for (replacement, line, key) in cases {
            let text = CLOSED.replace("requests = 1000", replacement);
            let e = plan(&text).unwrap_err().to_string();
            assert!(e.contains(line) && e.contains(key), "{e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        let text = CLOSED.replace("paths = [\"/y\"]", "paths = [\"/y\"]\nexpected_rate = -1");
        let e = plan(&text).unwrap_err().to_string();
        assert!(
            e.contains("line 12") && e.contains("workload.expected_rate") && e.contains("positive"),
            "{e}"
        );
    }
}
