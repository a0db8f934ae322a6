//! `volley history` and `volley compare` from the store alone: find runs by id or by
//! `study:target`, pull one figure per step (each step is a unit of replication), and
//! compare medians with bootstrap CIs and the A/B ratio with its CI.

use serde_json::Value;
use volley_analysis::knee::{self, Claim};
use volley_analysis::{bootstrap, ratio};
use volley_store::{CapacityRow, RunId, RunRow, SearchEnd, Store};

use crate::model::{Report, TargetReport};
use crate::ReportError;

/// Which figure to compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Completed requests per second.
    Rps,
    /// p99 of the headline latency (response time in open loops, service time in closed).
    P99,
}

impl Metric {
    /// Parses `rps` or `p99`.
    pub fn parse(s: &str) -> Option<Metric> {
        match s {
            "rps" => Some(Metric::Rps),
            "p99" => Some(Metric::P99),
            _ => None,
        }
    }

    /// Name with unit.
    pub fn label(self) -> &'static str {
        match self {
            Metric::Rps => "req/s",
            Metric::P99 => "p99 ms",
        }
    }
}

/// The figure of one stored step summary, if present.
pub fn figure(summary: &Value, m: Metric) -> Option<f64> {
    match m {
        Metric::Rps => summary["throughput"]["requests_per_s"].as_f64(),
        Metric::P99 => {
            let def = if summary["model"]["kind"] == "open" {
                "response_time"
            } else {
                "service_time"
            };
            summary["latency"][def]["p99_ms"].as_f64()
        }
    }
}

/// Finds a run by id (`12`) or by any other form of [`crate::Selector::find`]; a study
/// stands for its run when it has only one.
pub fn find_run(store: &Store, spec: &str) -> Result<RunRow, ReportError> {
    if let Ok(id) = spec.trim().parse::<i64>() {
        return store.run(RunId(id)).map_err(|_| {
            ReportError::Compare(format!("no run with id {id} (see volley history)"))
        });
    }
    let study = match crate::Selector::find(store, spec)? {
        crate::Selector::Run(id) => return Ok(store.run(id)?),
        crate::Selector::Study(study) => study,
    };
    let mut runs = store.runs_of_study(study)?;
    if runs.len() == 1 {
        return Ok(runs.remove(0));
    }
    let targets: Vec<String> = runs.iter().map(|r| r.target.clone()).collect();
    Err(ReportError::Compare(format!(
        "study {study} has {} runs ({}): name one, e.g. study:{study}:{}",
        runs.len(),
        targets.join(", "),
        targets.first().map_or("TARGET", String::as_str)
    )))
}

/// One side of a comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    /// The run.
    pub run: RunId,
    /// Its target.
    pub target: String,
    /// One value per step compared: the steps at points both runs measured that stand
    /// for the server.
    pub values: Vec<f64>,
    /// Median and its 95% CI (a point, lo = hi, from fewer than two values: then
    /// [`Side::has_interval`] is false and no interval is shown).
    pub median: bootstrap::Estimate,
    /// Steps left out, by why (generator-bound, machine-stalled, link-bound, failed).
    pub left_out: crate::answer::LeftOut,
    /// Steps at points the other run did not measure.
    pub unmatched: usize,
    /// Some point compared has two runs or more on this side. Without, the values are
    /// one run of each of several points, and a bootstrap over them is no interval of
    /// anything ("95% CI 61821 .. 61821" from one run).
    pub repeated: bool,
}

impl Side {
    /// Whether its median has an interval: two values or more, some of them repeats.
    pub fn has_interval(&self) -> bool {
        self.repeated && self.values.len() >= 2
    }
}

/// The comparison of two runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// The metric.
    pub metric: Metric,
    /// First run.
    pub a: Side,
    /// Second run.
    pub b: Side,
    /// The points both measured (workload, load point, variant), like with like.
    pub points: Vec<String>,
    /// A/B: the pooled ratio of medians over the points with at least two runs on each
    /// side, with its 95% interval; `None` when no point has (one run each: no
    /// interval), see `single_ratio`.
    pub ratio: Option<bootstrap::Estimate>,
    /// A/B of the medians over every matched point, from one run each.
    pub single_ratio: Option<f64>,
    /// The answer in one sentence (the report's rule, `crate::answer`).
    pub answer: String,
    /// Capacities found by search in both runs, matched by cell.
    pub capacities: Vec<CapacityPair>,
}

/// One searched capacity: estimate and interval, in requests per second or, for a
/// caldav workload's users search, in users.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchedCapacity {
    /// Point estimate.
    pub rps: f64,
    /// Lower end of the interval.
    pub lo_rps: f64,
    /// Upper end (`None`: unbounded above).
    pub hi_rps: Option<f64>,
    /// Confidence level, e.g. 0.95.
    pub confidence: f64,
    /// `"req/s"`, or `"users"` for a users search (its stored cell's `unit`).
    pub unit: &'static str,
    /// What may be claimed ([`stored_claim`]): a capacity only when the server was seen
    /// to fail above it, else "at least".
    pub claim: Claim,
    /// A users search's office time over wall time ([`compress_of`]), said beside its
    /// count; `None` for rates (and users searches stored before it was kept).
    pub compress: Option<f64>,
    /// Whole searches behind the figure: 1, or a cell's passes taken together
    /// (`knee::pool`: the lower median search inside the envelope of their intervals).
    pub searches: usize,
}

/// What a stored search result may claim (docs/methodology.md, "Saturation"): from its
/// `detail` (`knee::Capacity`) when it ended, else from the decisions it had made
/// (`detail.history`). A record whose detail cannot be read is bounded only when it
/// converged (a converged search has a failing rate above its answer), else "at least".
pub fn stored_claim(r: &volley_store::CapacityRecord) -> Claim {
    if let Ok(c) = serde_json::from_value::<knee::Capacity>(r.detail.clone()) {
        return c.claim();
    }
    let history: Option<Vec<(f64, bool)>> = r
        .detail
        .get("history")
        .and_then(|h| serde_json::from_value(h.clone()).ok());
    match (history, r.capacity_rps) {
        (Some(h), _) => knee::sweep_capacity(&h).claim(),
        (None, None) => Claim::None,
        (None, Some(value)) if r.end == SearchEnd::Converged => Claim::Capacity {
            value,
            failed_at: r.ci_hi_rps.unwrap_or(value),
        },
        (None, Some(value)) => Claim::AtLeast {
            value,
            unjudged_above: 0,
        },
    }
}

impl SearchedCapacity {
    /// The capacity of a stored search that reached its own end with an estimate and an
    /// interval; `None` for interrupted ones (their figures are partial).
    pub fn of(row: &CapacityRow) -> Option<SearchedCapacity> {
        let r = &row.record;
        if r.end == SearchEnd::Interrupted {
            return None;
        }
        Some(SearchedCapacity {
            rps: r.capacity_rps?,
            lo_rps: r.ci_lo_rps?,
            hi_rps: r.ci_hi_rps,
            confidence: r.confidence,
            unit: unit_of(row),
            claim: stored_claim(r),
            compress: compress_of(row),
            searches: 1,
        })
    }

    /// One cell's searches taken together, as the report takes them (`knee::pool`):
    /// the lower median search's figure and claim, the envelope of their intervals.
    /// `None` for none.
    pub fn pooled(all: &[SearchedCapacity]) -> Option<SearchedCapacity> {
        let spans: Vec<(f64, f64, Option<f64>)> =
            all.iter().map(|c| (c.rps, c.lo_rps, c.hi_rps)).collect();
        let p = knee::pool(&spans)?;
        Some(SearchedCapacity {
            rps: p.value,
            lo_rps: p.lo,
            hi_rps: p.hi.is_finite().then_some(p.hi),
            searches: all.len(),
            ..all[p.rep]
        })
    }

    /// "2990 req/s (95% CI 2850 .. 3100)", "140 users (95% CI 130 .. 150)", "at least
    /// 1400 req/s (the highest step tried) (95% CI 1400 .. unbounded)".
    pub fn text(&self) -> String {
        let head = match self.claim {
            Claim::AtLeast { unjudged_above, .. } => Claim::AtLeast {
                value: self.rps,
                unjudged_above,
            }
            .text(self.unit),
            _ => format!("{:.0} {}", self.rps, self.unit),
        };
        let head = if self.searches > 1 {
            format!("{head}, the lower median of {} searches", self.searches)
        } else {
            head
        };
        let head = match self.compress {
            Some(f) => format!("{head}, {}", volley_analysis::words::pace(f)),
            None => head,
        };
        format!(
            "{head} ({:.0}% CI {:.0} .. {})",
            self.confidence * 100.0,
            self.lo_rps,
            self.hi_rps
                .map_or("unbounded".to_string(), |h| format!("{h:.0}"))
        )
    }
}

/// The capacities of the same cell in two runs.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityPair {
    /// The cell, in words (workload, concurrency, cap, cores, keep-alive).
    pub cell: String,
    /// Run A's.
    pub a: SearchedCapacity,
    /// Run B's.
    pub b: SearchedCapacity,
    /// A / B of the point estimates.
    pub ratio: f64,
    /// The smallest and largest A / B the two intervals allow (lo_A / hi_B,
    /// hi_A / lo_B); `None` where an interval end is unbounded or zero (printed as 0
    /// below, unbounded above). This is the
    /// range both intervals admit, wider than an interval of the ratio itself would be;
    /// it is what the stored figures support without the repeats' raw outcomes.
    pub ratio_range: (Option<f64>, Option<f64>),
}

impl CapacityPair {
    /// What the two intervals do and do not cover. One search's interval is its own
    /// (its runs near its edge), not one over searches (docs/methodology.md,
    /// "Capacity"): said, so the range is not read as the answer's.
    pub fn spread_text(&self) -> &'static str {
        match (self.a.searches, self.b.searches) {
            (1, 1) => "one search each: neither interval covers the spread from one search to the next",
            (1, _) | (_, 1) => "one side is a single search, whose interval does not cover the spread from one search to the next",
            _ => "each side the envelope of its searches' intervals",
        }
    }

    /// `ratio_range` as printed: no upper end of B's interval means A/B may be as small
    /// as 0; a zero lower end of B's, that A/B may be as large as any number.
    pub fn ratio_range_text(&self) -> (String, String) {
        (
            self.ratio_range
                .0
                .map_or("0".to_string(), |r| format!("{r:.3}")),
            self.ratio_range
                .1
                .map_or("unbounded".to_string(), |r| format!("{r:.3}")),
        )
    }
}

/// What identifies a searched cell across runs: its stored identity without the target
/// and instance names (which differ between the two runs being compared).
/// The unit of a stored search: `"users"` for a users search, else `"req/s"` (rows
/// written before the cell had a `unit` are rate searches).
pub fn unit_of(row: &CapacityRow) -> &'static str {
    match row.record.cell.get("unit").and_then(Value::as_str) {
        Some("users") => "users",
        _ => "req/s",
    }
}

/// A users search's compression factor as stored with its cell (`compress`): 1 is
/// people at their real pace; `None` for rate searches and rows stored before it was.
pub fn compress_of(row: &CapacityRow) -> Option<f64> {
    (unit_of(row) == "users")
        .then(|| row.record.cell.get("compress").and_then(Value::as_f64))
        .flatten()
}

/// What a search searched, as two runs' searches are met by: like with like, the same
/// workload, load point, variant and protocol (a run's tuned search never meets the
/// other's default one); users at another pace are another unit, never met.
pub fn cell_key(row: &CapacityRow) -> String {
    let c = &row.record.cell;
    let f = |k: &str| match c.get(k) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(format!("{k} {s}")),
        Some(v) => Some(format!("{k} {v}")),
    };
    let series = ["variant", "protocol"].iter().filter_map(|k| f(k));
    if unit_of(row) == "users" {
        // A users search's connections are its clients': its workload names it.
        let workload = c.get("workload").and_then(Value::as_str).unwrap_or("-");
        let pace = match compress_of(row) {
            Some(f) if f != 1.0 => format!(", {}", volley_analysis::words::pace(f)),
            _ => String::new(),
        };
        return std::iter::once(format!("workload {workload}, users{pace}"))
            .chain(series)
            .collect::<Vec<_>>()
            .join(", ");
    }
    [
        "workload",
        "concurrency",
        "cpu_quota_cores",
        "cores",
        "keepalive",
    ]
    .iter()
    .filter_map(|k| f(k))
    .chain(series)
    .collect::<Vec<_>>()
    .join(", ")
}

/// Pairs the finished searches of two runs by cell, each cell's several searches
/// (`[search] passes`) taken together first ([`SearchedCapacity::pooled`]), never one
/// pass against another; when each run has exactly one searched cell, they are paired
/// whatever their cells (comparing two targets' searches is the common case).
pub fn capacity_pairs(a: &[CapacityRow], b: &[CapacityRow]) -> Vec<CapacityPair> {
    let usable = |rows: &[CapacityRow]| -> Vec<(String, SearchedCapacity)> {
        let mut cells: Vec<(String, Vec<SearchedCapacity>)> = Vec::new();
        for r in rows {
            let Some(c) = SearchedCapacity::of(r) else {
                continue;
            };
            let key = cell_key(r);
            match cells.iter_mut().find(|(k, _)| *k == key) {
                Some((_, all)) => all.push(c),
                None => cells.push((key, vec![c])),
            }
        }
        cells
            .into_iter()
            .filter_map(|(k, all)| Some((k, SearchedCapacity::pooled(&all)?)))
            .collect()
    };
    let (a, b) = (usable(a), usable(b));
    let pair = |cell: String, x: SearchedCapacity, y: SearchedCapacity| {
        let div = |n: f64, d: Option<f64>| d.filter(|d| *d > 0.0).map(|d| n / d);
        CapacityPair {
            cell,
            ratio: if y.rps > 0.0 { x.rps / y.rps } else { f64::NAN },
            ratio_range: (
                div(x.lo_rps, y.hi_rps),
                x.hi_rps.and_then(|h| div(h, Some(y.lo_rps))),
            ),
            a: x,
            b: y,
        }
    };
    // One each of the same unit pair whatever their cells (users at one pace only:
    // a compressed day's users are not people).
    let pace = |c: &SearchedCapacity| c.compress.unwrap_or(1.0);
    if a.len() == 1 && b.len() == 1 && a[0].1.unit == b[0].1.unit && pace(&a[0].1) == pace(&b[0].1)
    {
        let ((ka, x), (kb, y)) = (a[0].clone(), b[0].clone());
        let cell = if ka == kb {
            ka
        } else {
            format!("{ka} vs {kb}")
        };
        return vec![pair(cell, x, y)];
    }
    a.into_iter()
        .filter_map(|(k, x)| {
            let (_, y) = b.iter().find(|(kb, _)| *kb == k)?;
            Some(pair(k, x, *y))
        })
        .collect()
}

/// A run's figures per point: (point, one value per run).
type Points = Vec<(String, Vec<f64>)>;

/// A point both runs measured: (point, A's values, B's values).
type Matched = (String, Vec<f64>, Vec<f64>);

/// A run's points as the report reads them, from one read of the run.
struct RunPoints {
    /// The figure of each step that stands for the server (`headline::stands`), each
    /// planned repeat once.
    strict: Points,
    /// The same with the generator-bound steps kept: what is compared when nothing
    /// else is shared (the answer then says whose limit the figures are).
    with_generator: Points,
    /// The link-bound steps' figures: what is compared when both runs have nothing
    /// else (the answer then is the report's: the link's figures, no winner).
    shaped: Points,
    /// What `strict` left out, by cause.
    left_out: crate::answer::LeftOut,
}

/// Whose figures a comparison shows, when it shows some: the servers', or, when the
/// runs share nothing else, the generator's or the shaped link's.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shown {
    Servers,
    Generators,
    Links,
}

/// Adds one step's figure to `points` under `key`, each planned repeat once.
fn add_point(points: &mut Points, seen: &mut Vec<(String, u32)>, key: String, repeat: u32, v: f64) {
    if seen.contains(&(key.clone(), repeat)) {
        return;
    }
    seen.push((key.clone(), repeat));
    match points.iter_mut().find(|(k, _)| *k == key) {
        Some((_, vs)) => vs.push(v),
        None => points.push((key, vec![v])),
    }
}

/// A step's figure of metric `m`.
fn figure_of(s: &crate::model::StepReport, m: Metric) -> f64 {
    match m {
        Metric::Rps => s.requests_per_s,
        Metric::P99 => s.latency.p99_ms,
    }
}

fn points_of(t: &TargetReport, m: Metric) -> RunPoints {
    let mut r = RunPoints {
        strict: Vec::new(),
        with_generator: Vec::new(),
        shaped: Vec::new(),
        left_out: crate::answer::LeftOut::default(),
    };
    let (mut seen, mut seen_all, mut seen_link) = (Vec::new(), Vec::new(), Vec::new());
    for s in &t.steps {
        let generator = s.generator_bound();
        if s.link_bound() {
            r.left_out.link += 1;
            let v = figure_of(s, m);
            if v.is_finite() && v > 0.0 && !s.mostly_failed() {
                add_point(&mut r.shaped, &mut seen_link, s.point_label(), s.repeat, v);
            }
            continue;
        } else if generator {
            r.left_out.generator += 1;
        } else if s.mostly_failed() {
            r.left_out.failed += 1;
            continue;
        }
        let v = figure_of(s, m);
        if !(v.is_finite() && v > 0.0) {
            continue;
        }
        let key = s.point_label();
        add_point(
            &mut r.with_generator,
            &mut seen_all,
            key.clone(),
            s.repeat,
            v,
        );
        if !generator {
            add_point(&mut r.strict, &mut seen, key, s.repeat, v);
        }
    }
    r
}

/// Compares two runs given as ids or `study:target`: like with like (the points both
/// measured: workload, load point, variant), leaving out what the report leaves out
/// (generator-bound, machine-stalled, link-bound and mostly failed steps), and an
/// interval only where repeats give one.
pub fn compare(store: &Store, a: &str, b: &str, m: Metric) -> Result<Comparison, ReportError> {
    let ra = find_run(store, a)?;
    let rb = find_run(store, b)?;
    let ta = crate::model::load_run(store, &ra)?;
    let tb = crate::model::load_run(store, &rb)?;
    let (ra_points, rb_points) = (points_of(&ta, m), points_of(&tb, m));
    let (mut la, mut lb) = (ra_points.left_out, rb_points.left_out);
    let match_points = |pa: &Points, pb: &Points| -> Vec<Matched> {
        pa.iter()
            .filter_map(|(k, va)| {
                let (_, vb) = pb.iter().find(|(kb, _)| kb == k)?;
                Some((k.clone(), va.clone(), vb.clone()))
            })
            .collect()
    };
    let (mut pa, mut pb) = (ra_points.strict, rb_points.strict);
    let mut matched = match_points(&pa, &pb);
    // Nothing left that stands for the server because the generator bound it: the
    // figures are still shown (a user comparing two local bench runs sees them), but
    // the answer says they are volley's limit and names no winner.
    let mut shown = Shown::Servers;
    // Both measured something, and nothing alike even with the generator's points.
    let unlike = !ra_points.with_generator.is_empty()
        && !rb_points.with_generator.is_empty()
        && match_points(&ra_points.with_generator, &rb_points.with_generator).is_empty();
    if matched.is_empty() && (la.generator > 0 || lb.generator > 0) {
        let g = match_points(&ra_points.with_generator, &rb_points.with_generator);
        if !g.is_empty() {
            // Shown, not left out: the answer says what they measured.
            (la.generator, lb.generator) = (0, 0);
            (pa, pb) = (ra_points.with_generator, rb_points.with_generator);
            (matched, shown) = (g, Shown::Generators);
        }
    }
    // Both runs link-bound at the points they share: their figures are the link's,
    // and the answer is the report's (no winner), not "nothing to compare".
    if matched.is_empty() && pa.is_empty() && pb.is_empty() && la.link > 0 && lb.link > 0 {
        let g = match_points(&ra_points.shaped, &rb_points.shaped);
        if !g.is_empty() {
            (pa, pb) = (ra_points.shaped, rb_points.shaped);
            (matched, shown) = (g, Shown::Links);
        }
    }
    if matched.is_empty() {
        // Unlike points are the first reason, whoever bound the figures: a closed loop
        // and an open loop never compare, however the generator fared.
        if unlike {
            return Err(unlike_points(&ra, &rb));
        }
        return Err(nothing_shared((&ra, &pa, &la), (&rb, &pb, &lb)));
    }
    let unmatched = |p: &[(String, Vec<f64>)]| -> usize {
        p.iter()
            .filter(|(k, _)| !matched.iter().any(|(m, _, _)| m == k))
            .map(|(_, v)| v.len())
            .sum()
    };
    let side = |r: &RunRow, runs: Vec<&Vec<f64>>, left_out, unmatched| {
        let values: Vec<f64> = runs.iter().flat_map(|v| v.iter().copied()).collect();
        Side {
            run: r.id,
            target: r.target.clone(),
            // The seed of the report's repeat intervals: the same runs, the same interval.
            median: bootstrap::median_ci(
                &values,
                bootstrap::RESAMPLES,
                crate::model::BOOTSTRAP_SEED,
            ),
            values,
            left_out,
            unmatched,
            repeated: runs.iter().any(|v| v.len() >= 2),
        }
    };
    let sa = side(
        &ra,
        matched.iter().map(|(_, a, _)| a).collect(),
        la,
        unmatched(&pa),
    );
    let sb = side(
        &rb,
        matched.iter().map(|(_, _, b)| b).collect(),
        lb,
        unmatched(&pb),
    );
    let (r, single_ratio) = ratios(&matched)?;
    let answer = answer_of(m, [ta, tb], (&sa, &sb), r.as_ref(), shown);
    let capacities = capacity_pairs(&store.capacities(ra.id)?, &store.capacities(rb.id)?);
    Ok(Comparison {
        metric: m,
        a: sa,
        b: sb,
        points: matched.into_iter().map(|(k, _, _)| k).collect(),
        ratio: r,
        single_ratio,
        answer,
        capacities,
    })
}

/// Why two runs share no point to compare: the side (run, its points, what it left
/// out) that has none standing for its server, else that they measured unlike points.
fn nothing_shared(
    a: (&RunRow, &Points, &crate::answer::LeftOut),
    b: (&RunRow, &Points, &crate::answer::LeftOut),
) -> ReportError {
    let why = |(r, p, l): (&RunRow, &Points, &crate::answer::LeftOut)| {
        p.is_empty().then(|| {
            format!(
                "run {} ({}) has no step that stands for the server ({})",
                r.id,
                r.target,
                crate::answer::nothing_left_of(&crate::answer::Contender {
                    left_out: *l,
                    ..Default::default()
                })
            )
        })
    };
    let reasons: Vec<String> = [why(a), why(b)].into_iter().flatten().collect();
    if reasons.is_empty() {
        unlike_points(a.0, b.0)
    } else {
        ReportError::Compare(reasons.join("; "))
    }
}

/// Two runs that measured no point alike.
fn unlike_points(a: &RunRow, b: &RunRow) -> ReportError {
    ReportError::Compare(format!(
        "runs {} and {} share no measured point (workload, load, variant): nothing like to compare with like",
        a.id, b.id
    ))
}

/// The pooled ratio a / b with its interval over the points with two runs a side or
/// more (`None` without any), and its point estimate over every matched point.
fn ratios(matched: &[Matched]) -> Result<(Option<bootstrap::Estimate>, Option<f64>), ReportError> {
    let repeated: Vec<(Vec<f64>, Vec<f64>)> = matched
        .iter()
        .filter(|(_, a, b)| a.len() >= 2 && b.len() >= 2)
        .map(|(_, a, b)| (a.clone(), b.clone()))
        .collect();
    let r = if repeated.is_empty() {
        None
    } else {
        Some(
            // The answer's seed: the ratio line shows the answer's interval.
            ratio::pooled_ratio_ci(&repeated, bootstrap::RESAMPLES, crate::answer::SEED)
                .map_err(|e| ReportError::Compare(format!("cannot form the ratio: {e}")))?,
        )
    };
    let all: Vec<(Vec<f64>, Vec<f64>)> = matched
        .iter()
        .map(|(_, a, b)| (a.clone(), b.clone()))
        .collect();
    let single_ratio = ratio::pooled_ratio_ci(&all, 1, 1).ok().map(|e| e.median);
    Ok((r, single_ratio))
}

/// The answer: for req/s, the report's headline of a study of these two runs
/// (`headline::answer`: the same contenders, capacities where they swept rates, series
/// met series by series), so compare and the report never disagree; for p99, lower is
/// better; a comparison of generator-bound points only names no winner.
fn answer_of(
    m: Metric,
    mut runs: [TargetReport; 2],
    (sa, sb): (&Side, &Side),
    r: Option<&bootstrap::Estimate>,
    shown: Shown,
) -> String {
    if shown == Shown::Generators {
        return format!(
            "No answer about the servers: the only points both runs measured were bound by the generator (generator-bound or machine-stalled steps), so these figures are volley's limit, not the servers'; {}",
            "repeat on a quieter machine or with more generator cores"
        );
    }
    // req/s, and link-bound figures of either metric: the report's answer (for the
    // link's figures: no winner).
    if m == Metric::P99 && shown != Shown::Links {
        return p99_answer(sa, sb, r);
    }
    // Two runs of one target are told apart by their ids.
    if runs[0].target == runs[1].target {
        for t in &mut runs {
            t.target = format!("{} (run {})", t.target, t.run_id);
        }
    }
    crate::headline::answer(&Report {
        schema_version: crate::SCHEMA_VERSION,
        title: String::new(),
        study: None,
        targets: runs.into(),
    })
}

/// The p99 answer: lower is better; a difference only when the ratio's interval
/// excludes 1, none claimed from one run each.
fn p99_answer(a: &Side, b: &Side, r: Option<&bootstrap::Estimate>) -> String {
    match r {
        None => format!(
            "{} and {}: one run each has no interval; a single run cannot separate p99s (repeat the study)",
            a.target, b.target
        ),
        Some(e) if e.hi < 1.0 => format!(
            "{} has the lower p99: A/B {} (95% interval)",
            a.target,
            crate::answer::ratio_text(e)
        ),
        Some(e) if e.lo > 1.0 => format!(
            "{} has the lower p99: A/B {} (95% interval)",
            b.target,
            crate::answer::ratio_text(e)
        ),
        Some(e) => format!(
            "No difference beyond noise in p99: A/B {}, the interval holds 1",
            crate::answer::ratio_text(e)
        ),
    }
}

impl Comparison {
    /// The ratio line: the interval when repeats give one, else the one-run figure
    /// with no interval.
    pub fn ratio_line(&self) -> String {
        let over = format!(
            "over {} matched point{}",
            self.points.len(),
            if self.points.len() == 1 { "" } else { "s" }
        );
        match (&self.ratio, self.single_ratio) {
            (Some(r), _) => format!(
                "A/B ratio of medians: {:.3} (95% CI {:.3} .. {:.3}), {over}",
                r.median, r.lo, r.hi
            ),
            (None, Some(x)) => {
                format!("A/B ratio of medians: {x:.3} from one run each, no interval, {over}")
            }
            (None, None) => format!("A/B ratio: none, {over}"),
        }
    }

    /// What was left out of the comparison, or `None`.
    pub fn left_out_line(&self) -> Option<String> {
        let part = |s: &Side| {
            let l = &s.left_out;
            let mut parts = Vec::new();
            if l.generator > 0 {
                parts.push(format!(
                    "{} generator-bound or machine-stalled",
                    l.generator
                ));
            }
            if l.link > 0 {
                parts.push(format!("{} link-bound", l.link));
            }
            if l.failed > 0 {
                parts.push(format!("{} mostly failed", l.failed));
            }
            if s.unmatched > 0 {
                parts.push(format!("{} at points the other run lacks", s.unmatched));
            }
            (!parts.is_empty()).then(|| format!("{}: {}", s.target, parts.join(", ")))
        };
        let both: Vec<String> = [part(&self.a), part(&self.b)]
            .into_iter()
            .flatten()
            .collect();
        (!both.is_empty()).then(|| format!("steps left out: {}", both.join("; ")))
    }
}

impl std::fmt::Display for Comparison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = if self.metric == Metric::Rps { 0 } else { 3 };
        for (name, s) in [("A", &self.a), ("B", &self.b)] {
            let ci = if s.has_interval() {
                format!(" (95% CI {:.d$} .. {:.d$})", s.median.lo, s.median.hi)
            } else {
                " (one run: no interval)".to_string()
            };
            writeln!(
                f,
                "{name}: run {} ({}), {} steps: median {:.d$} {}{ci}",
                s.run,
                s.target,
                s.values.len(),
                s.median.median,
                self.metric.label(),
            )?;
        }
        write!(f, "{}\n{}", self.ratio_line(), self.answer)?;
        if let Some(l) = self.left_out_line() {
            write!(f, "\n{l}")?;
        }
        for p in &self.capacities {
            let (lo, hi) = p.ratio_range_text();
            write!(
                f,
                "\ncapacity by search ({}): A {}, B {}; A/B {:.3} (the two intervals allow {} .. {}; {})",
                if p.cell.is_empty() { "default" } else { &p.cell },
                p.a.text(),
                p.b.text(),
                p.ratio,
                lo,
                hi,
                p.spread_text()
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "compare_tests.rs"]
mod tests;
