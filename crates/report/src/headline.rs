//! The answer first: one headline per target (its capacity with the interval, or for
//! closed-loop runs its req/s and p99; its errors; which side bound it) and the report's
//! one-sentence answer (which target did best, by how much). Pure: from the model.

use std::time::Duration;

use volley_analysis::words::{self, duration, number};

use crate::answer;
use crate::model::{Report, SearchCapacity, StepReport, TargetReport};
use crate::table::median;

/// A target's main figure, ranked by `value` across targets.
struct Figure {
    /// req/s: the capacity, or the median throughput of closed-loop steps.
    value: f64,
    /// The figure in words, without the target's name.
    text: String,
}

fn ms(v: f64) -> String {
    duration(Duration::from_secs_f64(v.max(0.0) / 1e3))
}

/// The capacity by search (with its interval), else by sweep, else the closed-loop
/// medians of the server-bound steps; `None` when no step counts for the server.
fn figure(t: &TargetReport) -> Option<Figure> {
    if let Some(f) = office_figure(t) {
        return Some(f);
    }
    let searched = searched_groups(t, |_| true)
        .into_iter()
        .max_by(|a, b| a.value.total_cmp(&b.value));
    if let Some(g) = searched {
        let s = g.rep;
        let hi =
            g.hi.filter(|h| h.is_finite())
                .map_or("unbounded".to_string(), number);
        let ci = match g.n {
            1 => s.ci_lo_rps.map_or(String::new(), |lo| {
                format!(
                    " ({:.0}% CI {} to {hi})",
                    s.confidence.unwrap_or(0.95) * 100.0,
                    number(lo)
                )
            }),
            n => format!(
                " (the lower median of {n} searches; their intervals span {} to {hi})",
                number(g.lo)
            ),
        };
        return Some(Figure {
            value: g.value,
            text: format!(
                "capacity {}{ci}, by search{}",
                claim_text(&s.claim, g.value),
                series_named(t, s.variant.as_deref(), s.protocol.as_deref())
            ),
        });
    }
    let swept = t
        .capacity
        .iter()
        .filter_map(|c| Some((c.capacity_rps?, c)))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((c, cap)) = swept {
        let above = cap
            .first_unsustainable_above_rps
            .map_or(String::new(), |r| {
                format!(", first unsustainable rate {} req/s", number(r))
            });
        return Some(Figure {
            value: c,
            text: format!(
                "capacity {} by sweep{above}{}",
                claim_text(&cap.claim, c),
                series_named(t, cap.variant.as_deref(), cap.protocol.as_deref())
            ),
        });
    }
    let server = once_each(t.steps.iter().filter(|s| stands(s)));
    let rps = median(&server.iter().map(|s| s.requests_per_s).collect::<Vec<_>>())?;
    let p99 = median(&server.iter().map(|s| s.latency.p99_ms).collect::<Vec<_>>())?;
    let what = if t.has_open_loop() {
        "response time"
    } else {
        "closed-loop service time"
    };
    Some(Figure {
        value: rps,
        text: format!(
            "{} req/s, p99 {} ({what}; median of {} step{}{})",
            number(rps),
            ms(p99),
            server.len(),
            if server.len() == 1 { "" } else { "s" },
            series_pooled(t)
        ),
    })
}

/// ", of variant tuned, h2": which series a target's best capacity came from, when the
/// target ran more than one (its other series are answered beside it).
fn series_named(t: &TargetReport, variant: Option<&str>, protocol: Option<&str>) -> String {
    let mut parts = Vec::new();
    if let Some(v) = variant.filter(|_| values_of(t, variant_of).len() > 1) {
        parts.push(format!("variant {v}"));
    }
    if let Some(p) = protocol.filter(|_| values_of(t, protocol_of).len() > 1) {
        parts.push(p.to_string());
    }
    match parts.is_empty() {
        true => String::new(),
        false => format!(", of {}", parts.join(", ")),
    }
}

/// " over variants default, tuned": the series a target's median pools, when it ran
/// more than one (each is answered on its own beside it).
fn series_pooled(t: &TargetReport) -> String {
    let mut parts = Vec::new();
    for (what, of) in [
        ("variants", variant_of as fn(&StepReport) -> Option<&str>),
        ("protocols", protocol_of),
    ] {
        let names = values_of(t, of);
        if names.len() > 1 {
            parts.push(format!("{what} {}", names.join(", ")));
        }
    }
    match parts.is_empty() {
        true => String::new(),
        false => format!(" over {}", parts.join(" and ")),
    }
}

/// Each planned step once (its point and repeat), by its first attempt in `steps`: a
/// step measured again (noise spoiled it) is one step of the figure, not three.
fn once_each<'a>(steps: impl Iterator<Item = &'a StepReport>) -> Vec<&'a StepReport> {
    let mut seen: Vec<(String, u32)> = Vec::new();
    let mut out = Vec::new();
    for s in steps {
        let key = (s.point_label(), s.repeat);
        if !seen.contains(&key) {
            seen.push(key);
            out.push(s);
        }
    }
    out
}

/// A capacity in words (`knee::Claim::text`, with the report's number format): "1,300
/// req/s", or "at least 1,400 req/s (the highest step tried)" when the server was not
/// seen to fail above it.
fn claim_text(claim: &volley_analysis::knee::Claim, value: f64) -> String {
    use volley_analysis::knee::Claim;
    match *claim {
        Claim::Capacity { .. } => format!("{} req/s", number(value)),
        Claim::AtLeast { unjudged_above, .. } => {
            let plain = Claim::AtLeast {
                value,
                unjudged_above,
            }
            .text("req/s");
            // The same sentence, the figure as the report writes numbers.
            plain.replacen(&format!("{value:.0}"), &number(value), 1)
        }
        Claim::None => "none".to_string(),
    }
}

/// The office answer of `t` with the most users carried.
fn best_office(t: &TargetReport) -> Option<&crate::model::OfficeAnswer> {
    t.office.iter().max_by_key(|a| a.users_carried.unwrap_or(0))
}

/// An office run's figure: the most users any of its office workloads carries.
fn office_figure(t: &TargetReport) -> Option<Figure> {
    let best = best_office(t)?;
    let sentence = best.sentence(&t.target);
    Some(Figure {
        value: f64::from(best.users_carried.unwrap_or(0)),
        text: sentence
            .strip_prefix(&format!("{} ", t.target))
            .unwrap_or(&sentence)
            .to_string(),
    })
}

/// "no errors" or "12 errors (0.3% of requests)".
fn errors(t: &TargetReport) -> String {
    let failed: u64 = t.steps.iter().map(|s| s.failed).sum();
    let completed: u64 = t.steps.iter().map(|s| s.completed).sum();
    match failed {
        0 => "no errors".to_string(),
        n => {
            let pct = 100.0 * n as f64 / completed.max(1) as f64;
            format!(
                "{} error{} ({} of requests)",
                number(n as f64),
                if n == 1 { "" } else { "s" },
                // A few errors in many requests are not "0%".
                if pct < 0.1 {
                    "under 0.1%".to_string()
                } else {
                    format!("{}%", number(pct))
                }
            )
        }
    }
}

/// "server-bound" when every step was, else the count of each label.
fn bound(t: &TargetReport) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for s in &t.steps {
        let l = s.label.clone().unwrap_or_else(|| "unlabelled".to_string());
        match counts.iter_mut().find(|(k, _)| *k == l) {
            Some((_, n)) => *n += 1,
            None => counts.push((l, 1)),
        }
    }
    let said = |l: &str| match stall_evidence(t, l) {
        Some(e) => format!("{l} {e}"),
        None => l.to_string(),
    };
    match counts.as_slice() {
        [(only, _)] => said(only),
        _ => counts
            .iter()
            .map(|(l, n)| format!("{} in {n} of {} steps", said(l), t.steps.len()))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// For the machine-stalled label, the figure it rests on: "(the stall probe beside the
/// load overslept up to 13.5 ms)", the longest of those steps' probes.
fn stall_evidence(t: &TargetReport, label: &str) -> Option<String> {
    if label != volley_analysis::sustain::Bound::MachineStalled.label() {
        return None;
    }
    let longest = t
        .steps
        .iter()
        .filter(|s| s.label.as_deref() == Some(label))
        .filter_map(|s| s.probe_max_stall_ms)
        .max_by(f64::total_cmp)?;
    Some(format!(
        "(the stall probe beside the load overslept up to {} ms)",
        number(longest)
    ))
}

/// One line per target: "nginx: capacity 2,990 req/s (95% CI 2,850 to 3,100), by
/// search; no errors; server-bound".
pub fn lines(report: &Report) -> Vec<String> {
    report
        .targets
        .iter()
        .map(|t| {
            let main = figure(t).map_or_else(
                || {
                    let c = contender(t, &t.target, Across::Targets, |_| true);
                    format!("no figure for the server: {}", answer::nothing_left_of(&c))
                },
                |f| f.text,
            );
            let mut line = format!("{}: {main}; {}; {}", t.target, errors(t), bound(t));
            if let Some(v) = variants_answer(t) {
                line.push_str(&format!(". Variants: {v}"));
            }
            if let Some(p) = protocols_answer(t) {
                line.push_str(&format!(". Protocols: {p}"));
            }
            line
        })
        .collect()
}

/// Whether a step's figure may stand for its server in an answer: it counts for the
/// server (not generator-bound, machine-stalled or link-bound) and most of its requests
/// did not fail.
pub fn stands(s: &StepReport) -> bool {
    !s.generator_bound() && !s.mostly_failed()
}

/// Which dimension the contenders differ in: its points meet across it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Across {
    /// Targets: every variant and protocol is a point of its own (like with like).
    Targets,
    /// The variants of one target.
    Variants,
    /// The protocols of one target.
    Protocols,
}

/// The contender `name`: the steps of `t` that `keep` selects, as the answer rule reads
/// them (`crate::answer`): closed-loop req/s per point (each planned repeat once), the
/// capacity of rate steps, and what was left out and why. `across`: the dimension the
/// contenders differ in, whose points meet.
fn contender(
    t: &TargetReport,
    name: &str,
    across: Across,
    keep: impl Fn(&StepReport) -> bool,
) -> answer::Contender {
    let steps: Vec<&StepReport> = t.steps.iter().filter(|s| keep(s)).collect();
    let mut left_out = answer::LeftOut::default();
    for s in &steps {
        if s.link_bound() {
            left_out.link += 1;
        } else if s.too_short() {
            left_out.short += 1;
        } else if s.generator_bound() {
            left_out.generator += 1;
        } else if s.mostly_failed() {
            left_out.failed += 1;
        }
    }
    let counted: Vec<&&StepReport> = steps.iter().filter(|s| stands(s)).collect();
    let mut points: Vec<answer::Point> = Vec::new();
    let mut seen: Vec<(String, u32)> = Vec::new();
    for s in counted.iter().filter(|s| s.rate_rps.is_none()) {
        let key = match across {
            Across::Targets => s.point_label(),
            Across::Variants => s.point_label_of_any_variant(),
            Across::Protocols => s.point_label_of_any_protocol(),
        };
        // A planned repeat measured again counts once, by its first standing attempt.
        if seen.contains(&(key.clone(), s.repeat)) || s.requests_per_s <= 0.0 {
            continue;
        }
        seen.push((key.clone(), s.repeat));
        match points.iter_mut().find(|p| p.key == key) {
            Some(p) => p.runs.push(s.requests_per_s),
            None => points.push(answer::Point {
                key,
                runs: vec![s.requests_per_s],
            }),
        }
    }
    let unsure = !points.is_empty()
        && counted.iter().filter(|s| s.rate_rps.is_none()).all(|s| {
            s.label.as_deref() == Some(volley_analysis::sustain::Bound::Inconclusive.label())
        });
    answer::Contender {
        name: name.to_string(),
        points,
        capacity: capacity_figure(t, &steps),
        left_out,
        capped: !counted.is_empty() && counted.iter().all(|s| s.throttled),
        unsure,
    }
}

/// The capacity as the answer compares it: a search's with its interval, else a sweep's
/// between its last sustained and first failed rate, with the repeats behind each rate;
/// only of groups whose variant and protocol some of `steps` ran.
fn capacity_figure(t: &TargetReport, steps: &[&StepReport]) -> Option<answer::CapacityFigure> {
    let ran = |variant: &Option<String>, protocol: &Option<String>| {
        steps
            .iter()
            .any(|s| s.variant == *variant && s.protocol == *protocol)
    };
    let runs = steps
        .iter()
        .filter(|s| s.rate_rps.is_some())
        .map(|s| s.repeat + 1)
        .max()
        .unwrap_or(1) as usize;
    let searched = searched_groups(t, |s| ran(&s.variant, &s.protocol))
        .into_iter()
        .max_by(|a, b| a.value.total_cmp(&b.value));
    if let Some(g) = searched {
        return Some(answer::CapacityFigure {
            value: g.value,
            lo: g.lo,
            hi: g.hi,
            runs: g.n,
            searches: g.n,
        });
    }
    let (c, cap) = t
        .capacity
        .iter()
        .filter(|c| ran(&c.variant, &c.protocol))
        .filter_map(|c| Some((c.capacity_rps?, c)))
        .max_by(|a, b| a.0.total_cmp(&b.0))?;
    Some(answer::CapacityFigure {
        value: c,
        lo: c,
        hi: cap.first_unsustainable_above_rps.filter(|_| cap.bounded),
        runs,
        searches: 0,
    })
}

/// One group's finished searches (`[search] passes`) taken together.
struct SearchedGroup<'a> {
    /// The lower median search: its figure and claim are what the group claims (a
    /// figure one search saw, never an average of searches).
    rep: &'a SearchCapacity,
    /// `rep`'s capacity.
    value: f64,
    /// The lowest lower end of the searches' intervals.
    lo: f64,
    /// The highest upper end (`None` when any search was not seen to fail; infinite
    /// when every one was, but some interval's upper end is unbounded).
    hi: Option<f64>,
    /// Searches in the group.
    n: usize,
}

/// `t`'s finished searches that `keep` keeps, by group (workload, point, variant,
/// protocol): each group's lower median search inside the envelope of its searches'
/// intervals, one run per search.
///
/// Why the envelope and not one search's interval: that holds only the runs near its
/// own edge, not the spread from one search to the next, which is far wider (seed 001's
/// Apache default read 6,200 [6,200, 6,400] and 8,400 [8,000, 8,800] req/s in two
/// searches on this machine; docs/methodology.md, "Capacity"). So one search counts as
/// one run and orders nothing, whatever its interval says.
fn searched_groups(
    t: &TargetReport,
    keep: impl Fn(&SearchCapacity) -> bool,
) -> Vec<SearchedGroup<'_>> {
    let mut groups: Vec<(&str, Vec<(f64, &SearchCapacity)>)> = Vec::new();
    for s in t.searches.iter().filter(|s| s.finished && keep(s)) {
        let Some(c) = s.capacity_rps else { continue };
        match groups.iter_mut().find(|(g, _)| *g == s.group) {
            Some((_, v)) => v.push((c, s)),
            None => groups.push((&s.group, vec![(c, s)])),
        }
    }
    groups
        .into_iter()
        .filter_map(|(_, v)| {
            let figures: Vec<(f64, f64, Option<f64>)> = v
                .iter()
                .map(|(c, s)| (*c, s.ci_lo_rps.unwrap_or(*c), s.ci_hi_rps))
                .collect();
            let p = volley_analysis::knee::pool(&figures)?;
            // A search seen to fail whose interval is open above still bounds its
            // claim (its upper end is infinite); one never seen to fail does not.
            let bounded = v.iter().all(|(_, s)| s.bounded);
            Some(SearchedGroup {
                rep: v[p.rep].1,
                value: p.value,
                lo: p.lo,
                hi: bounded.then_some(p.hi),
                n: v.len(),
            })
        })
        .collect()
}

/// The variants of one target side by side ("tuned carries 1,250 req/s vs default 900:
/// 1.39x [1.31, 1.46] (95% interval)."), when its steps ran more than one.
pub fn variants_answer(t: &TargetReport) -> Option<String> {
    side_by_side(t, Across::Variants, variant_of)
}

/// The protocols of one target side by side ("h2 carries ... vs h1 ..."), the same rule
/// as variants, when its steps spoke more than one.
pub fn protocols_answer(t: &TargetReport) -> Option<String> {
    side_by_side(t, Across::Protocols, protocol_of)
}

fn variant_of(s: &StepReport) -> Option<&str> {
    s.variant.as_deref()
}

fn protocol_of(s: &StepReport) -> Option<&str> {
    s.protocol.as_deref()
}

/// The distinct values of one dimension (`of`) in `t`'s steps, in the order first run.
fn values_of<'a>(
    t: &'a TargetReport,
    of: impl Fn(&'a StepReport) -> Option<&'a str>,
) -> Vec<&'a str> {
    let mut names: Vec<&str> = Vec::new();
    for s in &t.steps {
        if let Some(v) = of(s) {
            if !names.contains(&v) {
                names.push(v);
            }
        }
    }
    names
}

/// The answer between the values of one dimension (`of`) of `t`'s steps, when it has
/// two or more.
fn side_by_side(
    t: &TargetReport,
    across: Across,
    of: impl Fn(&StepReport) -> Option<&str>,
) -> Option<String> {
    let names = values_of(t, &of);
    if names.len() < 2 {
        return None;
    }
    let one = |v: &str| contender(t, v, across, |s: &StepReport| of(s) == Some(v));
    // Which knob mattered (`variants = "each"`): the headline is the knobs all together
    // against the default; each knob alone gets its own line ([`knob_lines`]).
    if across == Across::Variants && each_knob(&names) {
        let whole = names
            .iter()
            .find(|v| **v != DEFAULT_VARIANT && !v.contains(':'));
        let Some(whole) = whole else {
            return Some("knob by knob against the default, one line each".into());
        };
        let pair = [one(whole), one(DEFAULT_VARIANT)];
        return Some(answer::sentence(&answer::decide(&pair), &pair, "carries"));
    }
    let all: Vec<answer::Contender> = names.iter().map(|v| one(v)).collect();
    Some(answer::sentence(&answer::decide(&all), &all, "carries"))
}

/// The variant a study's generated configuration runs as (`sweep.variants`).
const DEFAULT_VARIANT: &str = "default";

/// Whether `names` (a target's variants) ran knob by knob (`variants = "each"` or a
/// named list): the default and two or more knobs alone (`tuned:knob`).
fn each_knob(names: &[&str]) -> bool {
    names.contains(&DEFAULT_VARIANT) && names.iter().filter(|v| v.contains(':')).count() >= 2
}

/// Each knob alone against the default, one line per knob ("tuned:sendfile: 1.40x the
/// default [1.31, 1.46] (95% interval), 1,405 vs 1,005 req/s"), when `t` ran its
/// variants knob by knob; knobs with the same words (nothing to compare, say) share one
/// line that names them all. Empty otherwise.
pub fn knob_lines(t: &TargetReport) -> Vec<String> {
    let names = values_of(t, variant_of);
    if !each_knob(&names) {
        return Vec::new();
    }
    let one = |v: &str| {
        contender(t, v, Across::Variants, |s: &StepReport| {
            variant_of(s) == Some(v)
        })
    };
    let default = one(DEFAULT_VARIANT);
    let mut each: Vec<(Vec<&str>, String)> = Vec::new();
    for v in names.iter().filter(|v| v.contains(':')) {
        let pair = [one(v), default.clone()];
        let said = answer::knob_words(&answer::decide(&pair), &pair);
        match each.iter_mut().find(|(_, s)| *s == said) {
            Some((named, _)) => named.push(v),
            None => each.push((vec![v], said)),
        }
    }
    each.into_iter()
        .map(|(named, said)| format!("{}: {said}", named.join(", ")))
        .collect()
}

/// Every target's knob lines ([`knob_lines`]), each led by its target's name, for the
/// study's end (the report nests them under the target's line).
pub fn knob_answers(report: &Report) -> Vec<String> {
    report
        .targets
        .iter()
        .flat_map(|t| {
            knob_lines(t)
                .into_iter()
                .map(move |l| format!("{}, {l}", t.target))
        })
        .collect()
}

/// Each target's own series side by side, for the targets that ran more than one:
/// "nginx's variants: tuned carries ...", "builtin's protocols: h2 carries ..." (the
/// same answers as the report's per-target lines, [`lines`]).
pub fn series_answers(report: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for t in &report.targets {
        if let Some(v) = variants_answer(t) {
            out.push(format!("{}'s variants: {v}", t.target));
        }
        if let Some(p) = protocols_answer(t) {
            out.push(format!("{}'s protocols: {p}", t.target));
        }
    }
    out
}

/// One series of a study: the variant and protocol its steps ran, each `None` where
/// that dimension is not swept.
#[derive(Debug, Clone, PartialEq)]
struct Series {
    /// A step without a variant ran the generated configuration: the default.
    variant: Option<String>,
    /// `Some(None)`: the steps of runs that spoke one protocol (the model clears it,
    /// `one_protocol_is_no_dimension`), which meet no other run's protocol.
    protocol: Option<Option<String>>,
}

impl Series {
    /// Whether step `s` belongs to the series.
    fn holds(&self, s: &StepReport) -> bool {
        self.holds_pair(s.variant.as_deref(), s.protocol.as_deref())
    }

    /// Whether a step, capacity or search of this variant and protocol belongs to it.
    fn holds_pair(&self, variant: Option<&str>, protocol: Option<&str>) -> bool {
        self.variant
            .as_deref()
            .is_none_or(|v| variant.unwrap_or(DEFAULT_VARIANT) == v)
            && self
                .protocol
                .as_ref()
                .is_none_or(|p| p.as_deref() == protocol)
    }

    /// "variant default, h2".
    fn label(&self) -> String {
        let mut parts = Vec::new();
        if let Some(v) = &self.variant {
            parts.push(format!("variant {v}"));
        }
        if let Some(p) = &self.protocol {
            parts.push(p.clone().unwrap_or_else(|| "one protocol".to_string()));
        }
        parts.join(", ")
    }
}

/// The series targets meet in, when some target sweeps variants or protocols: each
/// protocol on its own, and of the variants only the default when there is one (a
/// tuning is a target's own question, answered by [`series_answers`]), else each
/// variant. Empty when nothing is swept.
fn meeting_series(report: &Report) -> Vec<Series> {
    let swept = |of: fn(&StepReport) -> Option<&str>| {
        report.targets.iter().any(|t| values_of(t, of).len() >= 2)
    };
    let (variants, protocols) = (swept(variant_of), swept(protocol_of));
    if !variants && !protocols {
        return Vec::new();
    }
    let has_default = report
        .targets
        .iter()
        .any(|t| values_of(t, variant_of).contains(&DEFAULT_VARIANT));
    let mut out: Vec<Series> = Vec::new();
    for s in report.targets.iter().flat_map(|t| &t.steps) {
        let variant = variants.then(|| s.variant.as_deref().unwrap_or(DEFAULT_VARIANT));
        if has_default && variant.is_some_and(|v| v != DEFAULT_VARIANT) {
            continue;
        }
        let series = Series {
            variant: variant.map(str::to_string),
            protocol: protocols.then(|| s.protocol.clone()),
        };
        if !out.contains(&series) {
            out.push(series);
        }
    }
    out
}

/// The report cut down to one series: each target's steps, capacities and searches of
/// that variant and protocol.
fn only(report: &Report, series: &Series) -> Report {
    let mut r = report.clone();
    for t in &mut r.targets {
        t.steps.retain(|s| series.holds(s));
        t.capacity
            .retain(|c| series.holds_pair(c.variant.as_deref(), c.protocol.as_deref()));
        t.searches
            .retain(|c| series.holds_pair(c.variant.as_deref(), c.protocol.as_deref()));
    }
    r.targets.retain(|t| !t.steps.is_empty());
    r
}

/// The report's answer: which target did best and by how much. When targets sweep
/// variants or protocols, they are answered per series (like with like: "h2: nginx
/// ..."; a target's best protocol is never set against another's worst), in the series
/// two or more targets ran; a single target's answer is its own series side by side
/// ([`series_answers`]).
pub fn answer(report: &Report) -> String {
    // Users carried and requests per second do not rank together: a study with an
    // office answers with its office targets (its question), others with req/s.
    if report.targets.iter().any(|t| !t.office.is_empty()) {
        return office_answer(report);
    }
    let series = meeting_series(report);
    if series.is_empty() {
        return targets_answer(report);
    }
    if report.targets.len() == 1 {
        return series_answers(report).join(" ");
    }
    let shared: Vec<(String, Report)> = series
        .iter()
        .map(|s| (s.label(), only(report, s)))
        .filter(|(_, r)| r.targets.len() >= 2)
        .collect();
    if shared.is_empty() {
        // No series that two targets ran: each target's points still meet only their
        // like (the points carry their variant and protocol).
        return targets_answer(report);
    }
    shared
        .iter()
        .map(|(label, r)| format!("{label}: {}", targets_answer(r)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The best target and its lead over the next, in one sentence.
fn targets_answer(report: &Report) -> String {
    let all: Vec<answer::Contender> = report
        .targets
        .iter()
        .map(|t| contender(t, &t.target, Across::Targets, |_| true))
        .collect();
    let verb = if all.iter().any(|c| c.capacity.is_some()) {
        "sustained the highest rate"
    } else {
        "served the most requests per second"
    };
    let verdict = answer::decide(&all);
    if let answer::Verdict::Alone { only, others } = &verdict {
        // One target alone: its own figure, in its own words.
        let t = &report.targets[*only];
        if let Some(f) = figure(t) {
            return format!(
                "{}: {}{}.",
                t.target,
                f.text,
                others
                    .as_ref()
                    .filter(|_| report.targets.len() > 1)
                    .map(|o| format!(" (no other target has a figure: {o})"))
                    .unwrap_or_default()
            );
        }
    }
    answer::sentence(&verdict, &all, verb)
}

/// The office question's answer: which server carries the most users, by how much.
fn office_answer(report: &Report) -> String {
    let mut ranked: Vec<(&TargetReport, Figure)> = report
        .targets
        .iter()
        .filter_map(|t| Some((t, office_figure(t)?)))
        .collect();
    ranked.sort_by(|a, b| b.1.value.total_cmp(&a.1.value));
    match ranked.as_slice() {
        [] => "No office day has a judgement.".to_string(),
        [(t, f)] => format!("{} {}.", t.target, f.text),
        [(best, fb), (next, fn_), ..] if fb.value > 0.0 => {
            // Each answer says its own day's pace (a compressed day's users are not
            // people) and what may be claimed of it: "at least" unless a larger count
            // failed because of the server (docs/methodology.md, "Saturation").
            let claimed = |t: &TargetReport, n: f64| {
                best_office(t).map_or_else(
                    || words::users(n, 1.0),
                    |a| words::users_claimed(n, a.bounded, a.compress),
                )
            };
            format!(
                "{} carries the most users: {} ({} carries {}).",
                best.target,
                claimed(best, fb.value),
                next.target,
                claimed(next, fn_.value)
            )
        }
        _ => "No server carried any of the user counts tried.".to_string(),
    }
}

#[cfg(test)]
#[path = "headline_tests.rs"]
mod tests;
