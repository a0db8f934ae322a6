//! The answer first: one headline per target (its capacity with the interval, or for
//! closed-loop runs its req/s and p99; its errors; which side bound it) and the report's
//! one-sentence answer (which target did best, by how much). Pure: from the model.

use std::time::Duration;

use volley_analysis::words::{self, duration, number};

use crate::model::{Report, TargetReport};
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
    let searched = t
        .searches
        .iter()
        .filter(|s| s.finished)
        .filter_map(|s| Some((s.capacity_rps?, s)))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((c, s)) = searched {
        let hi = s.ci_hi_rps.map_or("unbounded".to_string(), number);
        let ci = s.ci_lo_rps.map_or(String::new(), |lo| {
            format!(
                " ({:.0}% CI {} to {hi})",
                s.confidence.unwrap_or(0.95) * 100.0,
                number(lo)
            )
        });
        return Some(Figure {
            value: c,
            text: format!("capacity {} req/s{ci}, by search", number(c)),
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
            .map_or(", no rate above it failed".to_string(), |r| {
                format!(", first unsustainable rate {} req/s", number(r))
            });
        return Some(Figure {
            value: c,
            text: format!("capacity {} req/s by sweep{above}", number(c)),
        });
    }
    let server: Vec<_> = t.steps.iter().filter(|s| !s.generator_bound()).collect();
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
            "{} req/s, p99 {} ({what}; median of {} step{})",
            number(rps),
            ms(p99),
            server.len(),
            if server.len() == 1 { "" } else { "s" }
        ),
    })
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
        n => format!(
            "{} error{} ({}% of requests)",
            number(n as f64),
            if n == 1 { "" } else { "s" },
            number(100.0 * n as f64 / completed.max(1) as f64)
        ),
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
    match counts.as_slice() {
        [(only, _)] => only.clone(),
        _ => counts
            .iter()
            .map(|(l, n)| format!("{l} in {n} of {} steps", t.steps.len()))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// One line per target: "nginx: capacity 2,990 req/s (95% CI 2,850 to 3,100), by
/// search; no errors; server-bound".
pub fn lines(report: &Report) -> Vec<String> {
    report
        .targets
        .iter()
        .map(|t| {
            let main = figure(t).map_or_else(
                || "no figure for the server: every step was generator-bound".to_string(),
                |f| f.text,
            );
            format!("{}: {main}; {}; {}", t.target, errors(t), bound(t))
        })
        .collect()
}

/// The report's answer in one sentence: the best target and its lead over the next.
pub fn answer(report: &Report) -> String {
    // Users carried and requests per second do not rank together: a study with an
    // office answers with its office targets (its question), others with req/s.
    let office = report.targets.iter().any(|t| !t.office.is_empty());
    if office {
        return office_answer(report);
    }
    let mut ranked: Vec<(&TargetReport, Figure)> = report
        .targets
        .iter()
        .filter_map(|t| Some((t, figure(t)?)))
        .collect();
    ranked.sort_by(|a, b| b.1.value.total_cmp(&a.1.value));
    let verb = |t: &TargetReport| {
        if !t.capacity.is_empty() || !t.searches.is_empty() {
            "sustained the highest rate"
        } else {
            "served the most requests per second"
        }
    };
    match ranked.as_slice() {
        [] => "No target has a figure of its own: every step measured the generator, not a server."
            .to_string(),
        [(t, f)] => format!("{}: {}.", t.target, f.text),
        [(best, fb), (next, fn_), ..] => {
            let lead = if fn_.value > 0.0 {
                format!("{:.2}x", fb.value / fn_.value)
            } else {
                "ahead of".to_string()
            };
            format!(
                "{} {}: {} req/s, {lead} {} ({} req/s).",
                best.target,
                verb(best),
                number(fb.value),
                next.target,
                number(fn_.value)
            )
        }
    }
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
            // Each answer says its own day's pace: a compressed day's users are not people.
            let compress = |t: &TargetReport| best_office(t).map_or(1.0, |a| a.compress);
            format!(
                "{} carries the most users: {} ({} carries {}).",
                best.target,
                words::users(fb.value, compress(best)),
                next.target,
                words::users(fn_.value, compress(next))
            )
        }
        _ => "No server carried any of the user counts tried.".to_string(),
    }
}
