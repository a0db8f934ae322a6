//! Capacity: the largest sustainable rate, from a sweep or from a search.
//!
//! Place in the flow: the study runner runs rate steps and judges each with
//! [`crate::sustain::judge`]; this module decides which rate to run next (search mode) and
//! what the capacity is. It never runs anything itself: [`Search`] is a pure state
//! machine driven by `next_rate` / `observe`, so it is tested against synthetic servers
//! without a clock or a network.
//!
//! Search: grow the rate x2 from the start until a step fails (halving instead if the
//! start itself fails), then bisect between the last sustainable and the first
//! unsustainable rate until the bracket is narrower than the resolution. Because the
//! machine is noisy, every bisection probe and every failing growth probe is run up to
//! `repeats` times and decided by majority (it stops early once the majority is settled).
//!
//! The capacity interval is a bootstrap over those repeats, see [`Capacity`].

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Why a search could not be created or driven.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SearchError {
    /// A rate, resolution or limit was zero, negative, NaN or inconsistent.
    #[error("invalid search option: {0}")]
    InvalidOption(&'static str),
    /// `observe` was called with a rate other than the one `next_rate` proposed.
    #[error("observed rate {observed} rps but the search asked for {expected:?} rps")]
    UnexpectedRate {
        /// The rate passed to `observe`.
        observed: f64,
        /// The rate the search asked for (`None` once it has finished).
        expected: Option<f64>,
    },
}

/// What one step says about the server at its rate (docs/methodology.md, "Saturation").
///
/// Only a step whose figures are the server's, on a machine nobody else was using, can
/// show that the server *failed*: a generator-bound or machine-stalled step measured
/// volley or the machine, and a failure while someone else took the CPU may be theirs.
/// A step that sustained its rate sustained it whatever else ran, and whoever was late:
/// latency counts from the intended send time, so a late generator or a stalled machine
/// only made the pass harder (seed 001 on a busy machine otherwise claimed "at least
/// 500" for a server that passed every rate up to 1400).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// The step's rate was sustained, on the server's figures.
    Sustained,
    /// The step failed, on the server's figures, with the machine otherwise quiet.
    ServerFailed,
    /// The step cannot be judged for the server.
    Unjudged,
}

impl Evidence {
    /// The evidence of a judged step: `counts_for_server` is
    /// `crate::sustain::counts_for_server` of its label, `machine_busy` whether someone
    /// else took the CPU while it ran.
    pub fn of(sustainable: bool, counts_for_server: bool, machine_busy: bool) -> Self {
        match (sustainable, counts_for_server, machine_busy) {
            (true, _, _) => Evidence::Sustained,
            (false, false, _) | (false, true, true) => Evidence::Unjudged,
            (false, true, false) => Evidence::ServerFailed,
        }
    }

    /// Whether a step must be measured again, from its stored label (the one rule of
    /// the study's re-measures, its searches and the reports' choice among attempts):
    /// noise spoiled it (`crate::sustain::spoiled_by_noise`: generator-bound or
    /// machine-stalled), or it counts for the server and did not pass (failed, or has
    /// no verdict: a closed-loop figure) while the machine was busy. A pass on a busy
    /// machine is the server's pass (someone else's load can only have made it harder),
    /// so it is kept. A step whose figures are not the server's for a reason another
    /// attempt would meet again (link-bound: the same link bounds it; too-short: the
    /// same plan is as short) is not measured again, busy machine or not.
    pub fn needs_remeasure(
        sustainable: Option<bool>,
        label: Option<&str>,
        machine_busy: bool,
    ) -> bool {
        if crate::sustain::spoiled_by_noise(label) {
            return true;
        }
        crate::sustain::counts_for_server(label) && machine_busy && sustainable != Some(true)
    }

    /// How good one attempt at a step is, 0 best: not to be measured again
    /// ([`Self::needs_remeasure`]; a pass on a busy machine included: still the server's
    /// pass); a pass while volley or the machine was late, or a closed-loop figure on a
    /// busy machine; spoiled. A step measured several times is counted once, by the
    /// earliest of its best attempts (the end table and the reports alike).
    pub fn attempt_rank(sustainable: Option<bool>, label: Option<&str>, machine_busy: bool) -> u8 {
        if !Self::needs_remeasure(sustainable, label, machine_busy) {
            0
        } else if sustainable == Some(true)
            || (crate::sustain::counts_for_server(label)
                && (sustainable.is_none() || !machine_busy))
        {
            1
        } else {
            2
        }
    }
}

/// What may be claimed of a capacity (docs/methodology.md, "Saturation"): a figure only
/// when the server was seen to fail above it, otherwise a lower bound.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "claim", rename_all = "snake_case")]
pub enum Claim {
    /// The capacity is `value`: a step at `failed_at` above it was judged unsustainable
    /// because of the server.
    Capacity {
        /// The largest sustainable rate (or users).
        value: f64,
        /// The smallest rate above it the server failed.
        failed_at: f64,
    },
    /// The capacity is at least `value`: no step above it was seen to fail because of
    /// the server. `unjudged_above` steps above it could not be judged (0: `value` was
    /// the highest step tried).
    AtLeast {
        /// The largest sustainable rate (or users).
        value: f64,
        /// Steps above `value` that could not be judged for the server.
        unjudged_above: u32,
    },
    /// No step was shown sustainable.
    None,
}

impl Claim {
    /// True when a failure of the server above the figure was seen.
    pub fn bounded(&self) -> bool {
        matches!(self, Claim::Capacity { .. })
    }

    /// The figure (bounded or not), `None` when nothing was sustainable.
    pub fn value(&self) -> Option<f64> {
        match *self {
            Claim::Capacity { value, .. } | Claim::AtLeast { value, .. } => Some(value),
            Claim::None => None,
        }
    }

    /// The claim in words with its unit: "1300 req/s", "at least 1400 req/s (the
    /// highest step tried)", "at least 600 req/s (not bounded: 3 steps above could not
    /// be judged)", "none". The one wording the end table and the reports use.
    pub fn text(&self, unit: &str) -> String {
        match *self {
            Claim::Capacity { value, .. } => format!("{value:.0} {unit}"),
            Claim::AtLeast {
                value,
                unjudged_above: 0,
            } => format!("at least {value:.0} {unit} (the highest step tried)"),
            Claim::AtLeast {
                value,
                unjudged_above,
            } => format!(
                "at least {value:.0} {unit} (not bounded: {unjudged_above} step{} above could not be judged)",
                if unjudged_above == 1 { "" } else { "s" }
            ),
            Claim::None => "none".to_string(),
        }
    }
}

/// Capacity from a sweep over fixed rates: the largest rate judged sustainable, and
/// whether the server was seen to fail above it ([`SweepCapacity::claim`]).
///
/// A rate run several times is sustainable when strictly more than half of its judged
/// runs were (a tie counts as unsustainable: we do not claim a rate without a majority);
/// runs that could not be judged ([`Evidence::Unjudged`]) take no part in the vote.
/// `non_monotone` is set when some rate below the capacity was unsustainable: the
/// capacity is still the largest sustainable rate, as docs/methodology.md ("Capacity") defines it, but the
/// report should show the dip (often noise, sometimes a real second regime).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepCapacity {
    /// The largest sustainable rate, `None` when no rate was sustainable.
    pub capacity_rps: Option<f64>,
    /// The smallest rate above the capacity the server failed, `None` if none was seen.
    pub first_unsustainable_above_rps: Option<f64>,
    /// True when an unsustainable rate lies below the capacity.
    pub non_monotone: bool,
    /// Steps above the capacity (all of them when there is none) that could not be
    /// judged for the server.
    #[serde(default)]
    pub unjudged_above: u32,
}

impl SweepCapacity {
    /// What may be claimed: the capacity when the server failed above it, else "at
    /// least".
    pub fn claim(&self) -> Claim {
        match (self.capacity_rps, self.first_unsustainable_above_rps) {
            (None, _) => Claim::None,
            (Some(value), Some(failed_at)) => Claim::Capacity { value, failed_at },
            (Some(value), None) => Claim::AtLeast {
                value,
                unjudged_above: self.unjudged_above,
            },
        }
    }
}

/// Capacity of a sweep given `(rate, sustainable)` for every step run, each judged for
/// the server (any order, rates may repeat). Non-finite rates are ignored.
pub fn sweep_capacity(steps: &[(f64, bool)]) -> SweepCapacity {
    let judged: Vec<(f64, Evidence)> = steps
        .iter()
        .map(|&(r, ok)| {
            let e = if ok {
                Evidence::Sustained
            } else {
                Evidence::ServerFailed
            };
            (r, e)
        })
        .collect();
    sweep_evidence(&judged)
}

/// Capacity of a sweep given each step's [`Evidence`] (any order, rates may repeat).
/// Non-finite rates are ignored.
pub fn sweep_evidence(steps: &[(f64, Evidence)]) -> SweepCapacity {
    let probes = tally(
        steps
            .iter()
            .filter(|(_, e)| *e != Evidence::Unjudged)
            .map(|&(r, e)| (r, e == Evidence::Sustained)),
    );
    let decided: Vec<(f64, bool)> = probes.iter().map(|p| (p.rate_rps, p.majority())).collect();
    let capacity = decided.iter().rev().find(|(_, ok)| *ok).map(|(r, _)| *r);
    let first_above = decided
        .iter()
        .find(|(r, ok)| !*ok && capacity.is_none_or(|c| *r > c))
        .map(|(r, _)| *r);
    let non_monotone = match capacity {
        Some(c) => decided.iter().any(|(r, ok)| !*ok && *r < c),
        None => false,
    };
    let unjudged_above = steps
        .iter()
        .filter(|(r, e)| {
            *e == Evidence::Unjudged && r.is_finite() && capacity.is_none_or(|c| *r > c)
        })
        .count() as u32;
    SweepCapacity {
        capacity_rps: capacity,
        first_unsustainable_above_rps: first_above,
        non_monotone,
        unjudged_above,
    }
}

/// The outcomes at one rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// The offered rate.
    pub rate_rps: f64,
    /// How many runs at this rate were sustainable.
    pub sustainable: u32,
    /// How many runs at this rate there were.
    pub runs: u32,
}

impl Probe {
    fn majority(&self) -> bool {
        2 * self.sustainable > self.runs
    }
}

/// Groups outcomes by rate (exact equality), sorted by rate.
fn tally(steps: impl Iterator<Item = (f64, bool)>) -> Vec<Probe> {
    let mut probes: Vec<Probe> = Vec::new();
    for (rate, ok) in steps.filter(|(r, _)| r.is_finite()) {
        match probes.iter_mut().find(|p| p.rate_rps == rate) {
            Some(p) => {
                p.runs += 1;
                p.sustainable += u32::from(ok);
            }
            None => probes.push(Probe {
                rate_rps: rate,
                sustainable: u32::from(ok),
                runs: 1,
            }),
        }
    }
    probes.sort_by(|a, b| a.rate_rps.total_cmp(&b.rate_rps));
    probes
}

/// Options of a capacity search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchOpts {
    /// Stop bisecting when hi - lo <= this share of lo (default 0.02)...
    pub resolution_share: f64,
    /// ...or when hi - lo <= this many requests per second (default 1.0).
    pub resolution_rps: f64,
    /// Runs per decision near the edge, decided by majority (default 3; odd is best).
    pub repeats: u32,
    /// Never offer more than this (the generator's own ceiling).
    pub max_rate_rps: f64,
    /// Give up halving below this rate (the target cannot sustain even this).
    pub min_rate_rps: f64,
    /// Hard cap on the number of steps run, so a search always ends.
    pub max_steps: u32,
    /// Bootstrap resamples for the capacity interval (default: the one count every
    /// interval uses, [`crate::bootstrap::RESAMPLES`]).
    pub resamples: u32,
    /// Seed of the bootstrap, so a rebuilt report shows the same interval.
    pub seed: u64,
    /// Only whole numbers are tried: a search over users (37.5 users is no office).
    /// Halving and bisection round down, and a bracket one apart is converged. The
    /// start, minimum and maximum must then be whole too.
    #[serde(default)]
    pub whole: bool,
}

impl Default for SearchOpts {
    fn default() -> Self {
        SearchOpts {
            resolution_share: 0.02,
            resolution_rps: 1.0,
            repeats: 3,
            max_rate_rps: 1.0e7,
            min_rate_rps: 1.0,
            max_steps: 200,
            resamples: crate::bootstrap::RESAMPLES as u32,
            seed: 0x5eed,
            whole: false,
        }
    }
}

/// How a search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchEnd {
    /// The bracket is within the resolution.
    Converged,
    /// `max_rate_rps` was sustainable: capacity is at least that (the generator's limit).
    ReachedMaxRate,
    /// Even `min_rate_rps` was unsustainable.
    BelowMinRate,
    /// `max_steps` ran out before convergence; the bracket is what was reached.
    StepBudgetExhausted,
    /// A probe could not be judged for the server through its reruns (generator-bound,
    /// machine-stalled, or failed while the machine was busy), so the edge could not be
    /// looked for above it. The capacity is the last rate shown sustainable (at least
    /// that, unless a failure above it was already seen), and
    /// [`Capacity::generator_bound_at_rps`] names the rate that could not be judged.
    /// (Stored as `generator_bound`, its name before machine stalls were told apart.)
    GeneratorBound,
}

impl SearchEnd {
    /// How the search ended, in words for the end table, never the enum's Rust name:
    /// the words the report gives a stored end (`volley_report::model::end_text`, its
    /// stored name with spaces), so the study's end line and the report say it alike.
    pub fn words(self) -> &'static str {
        match self {
            SearchEnd::Converged => "converged",
            SearchEnd::ReachedMaxRate => "reached max rate",
            SearchEnd::BelowMinRate => "below min rate",
            SearchEnd::StepBudgetExhausted => "step budget exhausted",
            SearchEnd::GeneratorBound => "generator bound",
        }
    }
}

/// The answer of a search.
///
/// The point estimate is the last sustainable rate (capacity is the largest sustainable
/// rate, so we report one that was shown to be sustainable, never an interpolation).
///
/// The 95% interval `[ci_lo_rps, ci_hi_rps]` is a bootstrap over the repeats: in each of
/// `resamples` replicates, the outcomes at every probed rate are resampled with
/// replacement (k' ~ Binomial(n, k/n)), each rate is re-decided by majority, and we note
/// the replicate's capacity (largest sustainable rate, 0 if none) and its edge (smallest
/// unsustainable rate above it). `ci_lo_rps` is the 2.5th percentile of the capacities,
/// `ci_hi_rps` the 97.5th percentile of the edges (`None` when some replicate had no edge,
/// i.e. the top is unbounded). So the interval is never narrower than the bisection
/// bracket, and widens where the repeats disagreed. Rates run once (most growth steps)
/// contribute no resampling variance: they count as certain. The interval never
/// interpolates between probes, so where adjacent probes near the edge were split votes
/// its lower end can fall back to a distant probe: more `repeats` tighten it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    /// Point estimate: the last sustainable rate (`None` when none was).
    pub capacity_rps: Option<f64>,
    /// The largest rate decided sustainable.
    pub last_sustainable_rps: Option<f64>,
    /// The smallest rate above it decided unsustainable.
    pub first_unsustainable_rps: Option<f64>,
    /// Lower end of the 95% interval.
    pub ci_lo_rps: f64,
    /// Upper end of the 95% interval (`None`: unbounded above).
    pub ci_hi_rps: Option<f64>,
    /// Every rate run, with its outcomes, sorted by rate.
    pub probes: Vec<Probe>,
    /// Steps run in total.
    pub steps: u32,
    /// Why the search stopped.
    pub end: SearchEnd,
    /// The rate that could not be judged for the server and so ended the search
    /// ([`SearchEnd::GeneratorBound`]); `None` otherwise.
    #[serde(default)]
    pub generator_bound_at_rps: Option<f64>,
    /// Steps run at that rate, none of which could be judged.
    #[serde(default)]
    pub unjudged_steps: u32,
}

impl Capacity {
    /// What may be claimed (docs/methodology.md, "Saturation"): the last sustainable rate
    /// is a capacity only when a rate above it was decided unsustainable (the search
    /// hears only steps judged for the server); otherwise it is "at least" that, with the
    /// steps above that could not be judged (0 when it was the highest tried, e.g.
    /// [`SearchEnd::ReachedMaxRate`]).
    pub fn claim(&self) -> Claim {
        match (self.capacity_rps, self.first_unsustainable_rps) {
            (None, _) => Claim::None,
            (Some(value), Some(failed_at)) if failed_at > value => {
                Claim::Capacity { value, failed_at }
            }
            (Some(value), _) => Claim::AtLeast {
                value,
                unjudged_above: self.unjudged_steps,
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Doubling from the start; `lo` is the last sustainable rate so far.
    Grow,
    /// The start failed: halving until something is sustainable.
    Shrink,
    /// Bisecting between `lo` and `hi`.
    Bisect,
    Done(SearchEnd),
}

/// The capacity search state machine: ask [`Search::next_rate`], run that step, tell
/// [`Search::observe`] whether it was sustainable, until `next_rate` returns `None`; then
/// read [`Search::capacity`].
#[derive(Debug, Clone)]
pub struct Search {
    opts: SearchOpts,
    phase: Phase,
    /// Rate currently being decided.
    current: f64,
    /// Outcomes at `current` so far.
    current_ok: u32,
    current_runs: u32,
    /// Largest rate decided sustainable / smallest decided unsustainable.
    lo: Option<f64>,
    hi: Option<f64>,
    history: Vec<(f64, bool)>,
    /// The rate whose probe could not be judged, which ended the search, and the steps
    /// run there.
    generator_bound_at: Option<f64>,
    unjudged_steps: u32,
}

impl Search {
    /// A search starting at `start_rate_rps`.
    pub fn new(start_rate_rps: f64, opts: SearchOpts) -> Result<Self, SearchError> {
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !positive(start_rate_rps) {
            return Err(SearchError::InvalidOption(
                "start rate must be a positive number",
            ));
        }
        if !positive(opts.min_rate_rps) || !positive(opts.max_rate_rps) {
            return Err(SearchError::InvalidOption(
                "min and max rates must be positive numbers",
            ));
        }
        if opts.min_rate_rps > opts.max_rate_rps
            || !(opts.min_rate_rps..=opts.max_rate_rps).contains(&start_rate_rps)
        {
            return Err(SearchError::InvalidOption(
                "need min rate <= start rate <= max rate",
            ));
        }
        if !(opts.resolution_share >= 0.0 && opts.resolution_rps >= 0.0)
            || (opts.resolution_share == 0.0 && opts.resolution_rps == 0.0)
        {
            return Err(SearchError::InvalidOption(
                "the resolution must be positive",
            ));
        }
        let whole = |v: f64| v.fract() == 0.0;
        if opts.whole
            && !(whole(start_rate_rps) && whole(opts.min_rate_rps) && whole(opts.max_rate_rps))
        {
            return Err(SearchError::InvalidOption(
                "a search over whole numbers needs whole start, min and max",
            ));
        }
        if opts.repeats == 0 || opts.max_steps == 0 {
            return Err(SearchError::InvalidOption(
                "repeats and max steps must be at least 1",
            ));
        }
        Ok(Search {
            opts,
            phase: Phase::Grow,
            current: start_rate_rps,
            current_ok: 0,
            current_runs: 0,
            lo: None,
            hi: None,
            history: Vec::new(),
            generator_bound_at: None,
            unjudged_steps: 0,
        })
    }

    /// The rate to run next, or `None` when the search is over.
    pub fn next_rate(&self) -> Option<f64> {
        match self.phase {
            Phase::Done(_) => None,
            _ => Some(self.current),
        }
    }

    /// True once the search has an answer.
    pub fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Done(_))
    }

    /// Records the outcome of a step at `rate_rps` (which must be the rate `next_rate`
    /// proposed) and moves the search on.
    pub fn observe(&mut self, rate_rps: f64, sustainable: bool) -> Result<(), SearchError> {
        self.expect_rate(rate_rps)?;
        self.history.push((self.current, sustainable));
        self.current_runs += 1;
        self.current_ok += u32::from(sustainable);
        if let Some(decision) = self.decision() {
            self.decide(decision);
        }
        if !self.is_done() && self.history.len() as u32 >= self.opts.max_steps {
            self.phase = Phase::Done(SearchEnd::StepBudgetExhausted);
        }
        Ok(())
    }

    /// Records that the probe at `rate_rps` could not be judged for the server in any
    /// of its `attempts` (the caller reruns; the search does not count reruns): it was
    /// generator-bound, machine-stalled or failed while the machine was busy
    /// ([`Evidence::Unjudged`]). Such a step is neither a pass nor a fail. Counting it as
    /// a fail would walk the search down to rates the server easily sustains whenever the
    /// machine is busy; counting it as a pass would claim a rate nobody offered. So the
    /// search ends here with [`SearchEnd::GeneratorBound`]: capacity is at least the last
    /// sustainable rate, and the edge above it is unknown.
    pub fn observe_unjudged(&mut self, rate_rps: f64, attempts: u32) -> Result<(), SearchError> {
        self.expect_rate(rate_rps)?;
        self.generator_bound_at = Some(self.current);
        self.unjudged_steps = attempts;
        self.phase = Phase::Done(SearchEnd::GeneratorBound);
        Ok(())
    }

    fn expect_rate(&self, rate_rps: f64) -> Result<(), SearchError> {
        let expected = self.next_rate();
        match expected {
            Some(e) if (rate_rps - e).abs() <= 1e-9 * e.abs() => Ok(()),
            _ => Err(SearchError::UnexpectedRate {
                observed: rate_rps,
                expected,
            }),
        }
    }

    /// Whether the rate being probed is decided yet. Growth probes that pass are decided
    /// by one run (far below the edge noise rarely makes a step pass); everything else
    /// waits for a majority of `repeats`.
    fn decision(&self) -> Option<bool> {
        let repeats = match self.phase {
            Phase::Grow if self.current_runs == 1 && self.current_ok == 1 => return Some(true),
            _ => self.opts.repeats,
        };
        let need = repeats / 2 + 1;
        let failed = self.current_runs - self.current_ok;
        if self.current_ok >= need {
            Some(true)
        } else if failed >= need || self.current_runs >= repeats {
            // With an even `repeats` a tie lands here: unsustainable without a majority.
            Some(false)
        } else {
            None
        }
    }

    fn decide(&mut self, sustainable: bool) {
        let rate = self.current;
        if sustainable {
            self.lo = Some(rate);
        } else {
            self.hi = Some(rate);
        }
        let next = match (self.phase, sustainable) {
            (Phase::Grow, true) => {
                if rate >= self.opts.max_rate_rps {
                    self.phase = Phase::Done(SearchEnd::ReachedMaxRate);
                    return;
                }
                (rate * 2.0).min(self.opts.max_rate_rps)
            }
            (Phase::Grow, false) if self.lo.is_none() => {
                self.phase = Phase::Shrink;
                if rate <= self.opts.min_rate_rps {
                    self.phase = Phase::Done(SearchEnd::BelowMinRate);
                    return;
                }
                self.half(rate)
            }
            (Phase::Shrink, false) => {
                if rate <= self.opts.min_rate_rps {
                    self.phase = Phase::Done(SearchEnd::BelowMinRate);
                    return;
                }
                self.half(rate)
            }
            _ => {
                self.phase = Phase::Bisect;
                match self.bisect_point() {
                    Some(mid) => mid,
                    None => {
                        self.phase = Phase::Done(SearchEnd::Converged);
                        return;
                    }
                }
            }
        };
        self.current = next;
        self.current_ok = 0;
        self.current_runs = 0;
    }

    /// Half of `rate`, rounded down for a search over whole numbers, never below the
    /// minimum.
    fn half(&self, rate: f64) -> f64 {
        let h = rate / 2.0;
        let h = if self.opts.whole { h.floor() } else { h };
        h.max(self.opts.min_rate_rps)
    }

    /// The midpoint of the bracket, or `None` when the bracket is within the resolution
    /// (for whole numbers, also when no whole number lies strictly inside it).
    fn bisect_point(&self) -> Option<f64> {
        let (lo, hi) = (self.lo?, self.hi?);
        let width = hi - lo;
        if width <= self.opts.resolution_share * lo || width <= self.opts.resolution_rps {
            return None;
        }
        let mid = lo + width / 2.0;
        if self.opts.whole {
            let m = mid.floor();
            return (m > lo && m < hi).then_some(m);
        }
        Some(mid)
    }

    /// Every step observed so far, as `(rate, sustainable)` in order.
    pub fn history(&self) -> &[(f64, bool)] {
        &self.history
    }

    /// The answer, once the search is done (`None` before).
    pub fn capacity(&self) -> Option<Capacity> {
        let Phase::Done(end) = self.phase else {
            return None;
        };
        let probes = tally(self.history.iter().copied());
        let (ci_lo, ci_hi) = bootstrap_bracket(&probes, self.opts.resamples, self.opts.seed);
        Some(Capacity {
            capacity_rps: self.lo,
            last_sustainable_rps: self.lo,
            first_unsustainable_rps: self.hi,
            ci_lo_rps: ci_lo,
            ci_hi_rps: ci_hi,
            probes,
            steps: self.history.len() as u32,
            end,
            generator_bound_at_rps: self.generator_bound_at,
            unjudged_steps: self.unjudged_steps,
        })
    }
}

/// The bootstrap interval described on [`Capacity`].
fn bootstrap_bracket(probes: &[Probe], resamples: u32, seed: u64) -> (f64, Option<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut capacities = Vec::with_capacity(resamples as usize);
    let mut edges = Vec::with_capacity(resamples as usize);
    let mut unbounded = 0usize;
    for _ in 0..resamples.max(1) {
        let decided: Vec<(f64, bool)> = probes
            .iter()
            .map(|p| {
                let share = f64::from(p.sustainable) / f64::from(p.runs);
                let k = (0..p.runs).filter(|_| rng.random::<f64>() < share).count() as u32;
                (p.rate_rps, 2 * k > p.runs)
            })
            .collect();
        let cap = decided
            .iter()
            .rev()
            .find(|(_, ok)| *ok)
            .map_or(0.0, |(r, _)| *r);
        match decided.iter().find(|(r, ok)| !*ok && *r > cap) {
            Some((r, _)) => edges.push(*r),
            None => unbounded += 1,
        }
        capacities.push(cap);
    }
    capacities.sort_by(f64::total_cmp);
    edges.sort_by(f64::total_cmp);
    let lo = capacities[((capacities.len() - 1) as f64 * 0.025).round() as usize];
    let hi = if unbounded > 0 || edges.is_empty() {
        None
    } else {
        Some(edges[((edges.len() - 1) as f64 * 0.975).round() as usize])
    };
    (lo, hi)
}

/// One cell's whole searches (`[search] passes`) taken together: what the report and the
/// study's end table both claim of them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pooled {
    /// The lower median search's capacity: a figure one search saw, never an average.
    pub value: f64,
    /// Index of that search in the input.
    pub rep: usize,
    /// The lowest lower end of the searches' intervals (never above `value`).
    pub lo: f64,
    /// The highest upper end (never below `value`); infinite when some interval is
    /// open above.
    pub hi: f64,
}

/// Pools `searches`, each `(capacity, interval's lower end, upper end or None when open
/// above)`; `None` when there are none. Why the envelope of the intervals and not one
/// search's: a search's interval holds only its own runs near its edge, not the spread
/// from one search to the next (docs/methodology.md, "Capacity").
pub fn pool(searches: &[(f64, f64, Option<f64>)]) -> Option<Pooled> {
    let mut order: Vec<usize> = (0..searches.len()).collect();
    order.sort_by(|&a, &b| searches[a].0.total_cmp(&searches[b].0));
    let rep = *order.get(order.len().checked_sub(1)? / 2)?;
    let value = searches[rep].0;
    let lo = searches.iter().map(|s| s.1).fold(value, f64::min);
    let hi = searches
        .iter()
        .map(|s| s.2.unwrap_or(f64::INFINITY))
        .fold(value, f64::max);
    Some(Pooled { value, rep, lo, hi })
}

#[cfg(test)]
#[path = "knee_tests.rs"]
mod tests;
