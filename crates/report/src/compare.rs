//! `volley history` and `volley compare` from the store alone: find runs by id or by
//! `study:target`, pull one figure per step (each step is a unit of replication), and
//! compare medians with bootstrap CIs and the A/B ratio with its CI.

use serde_json::Value;
use volley_analysis::{bootstrap, ratio};
use volley_store::{RunId, RunRow, Store};

use crate::model::{Report, TargetReport};
use crate::ReportError;

mod searched;
pub use searched::{
    capacity_pairs, cell_key, compress_of, stored_claim, unit_of, CapacityPair, SearchedCapacity,
};

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
        } else if s.too_short() {
            r.left_out.short += 1;
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
