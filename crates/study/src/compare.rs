//! `volley history` and `volley compare` from the store alone: find runs by id or by
//! `study:target`, pull one figure per step (each step is a unit of replication), and
//! compare medians with bootstrap CIs and the A/B ratio with its CI.

use serde_json::Value;
use volley_analysis::{bootstrap, ratio};
use volley_store::{RunId, RunRow, Store};

use crate::StudyError;

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

/// Finds a run by id (`12`) or by `study:target` (the latest run of that target in the
/// latest study of that name).
pub fn find_run(store: &Store, spec: &str) -> Result<RunRow, StudyError> {
    if let Ok(id) = spec.parse::<i64>() {
        return store
            .run(RunId(id))
            .map_err(|_| StudyError::Invalid(format!("no run with id {id} (see volley history)")));
    }
    let Some((study, target)) = spec.split_once(':') else {
        return Err(StudyError::Invalid(format!(
            "'{spec}' is neither a run id nor study:target (see volley history)"
        )));
    };
    let mut studies = store.list_studies()?;
    studies.retain(|s| s.name == study);
    studies.sort_by_key(|s| s.id);
    for s in studies.iter().rev() {
        let mut runs = store.runs_of_study(s.id)?;
        runs.retain(|r| r.target == target);
        if let Some(r) = runs.into_iter().max_by_key(|r| r.id) {
            return Ok(r);
        }
    }
    Err(StudyError::Invalid(format!(
        "no run of target '{target}' in a study named '{study}' (see volley history)"
    )))
}

/// One side of a comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    /// The run.
    pub run: RunId,
    /// Its target.
    pub target: String,
    /// One value per step.
    pub values: Vec<f64>,
    /// Median and its 95% CI.
    pub median: bootstrap::Estimate,
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
    /// median(A) / median(B) with its 95% CI.
    pub ratio: bootstrap::Estimate,
}

fn side(store: &Store, run: &RunRow, m: Metric) -> Result<Side, StudyError> {
    let values: Vec<f64> = store
        .steps(run.id)?
        .iter()
        .filter_map(|s| figure(&s.summary, m))
        .collect();
    if values.is_empty() {
        return Err(StudyError::Invalid(format!(
            "run {} ({}) has no step with a {} figure",
            run.id,
            run.target,
            m.label()
        )));
    }
    Ok(Side {
        run: run.id,
        target: run.target.clone(),
        median: bootstrap::median_ci(&values, 2000, 1),
        values,
    })
}

/// Compares two runs given as ids or `study:target`.
pub fn compare(store: &Store, a: &str, b: &str, m: Metric) -> Result<Comparison, StudyError> {
    let ra = find_run(store, a)?;
    let rb = find_run(store, b)?;
    let sa = side(store, &ra, m)?;
    let sb = side(store, &rb, m)?;
    let r = ratio::ratio_of_medians_ci(&sa.values, &sb.values, 2000, 1)
        .map_err(|e| StudyError::Invalid(format!("cannot form the ratio: {e}")))?;
    Ok(Comparison {
        metric: m,
        a: sa,
        b: sb,
        ratio: r,
    })
}

impl std::fmt::Display for Comparison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = if self.metric == Metric::Rps { 0 } else { 3 };
        for (name, s) in [("A", &self.a), ("B", &self.b)] {
            writeln!(
                f,
                "{name}: run {} ({}), {} steps: median {:.d$} {} (95% CI {:.d$} .. {:.d$})",
                s.run,
                s.target,
                s.values.len(),
                s.median.median,
                self.metric.label(),
                s.median.lo,
                s.median.hi
            )?;
        }
        write!(
            f,
            "A/B ratio of medians: {:.3} (95% CI {:.3} .. {:.3})",
            self.ratio.median, self.ratio.lo, self.ratio.hi
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn figures_pick_the_headline_latency() {
        let closed = json!({"model": {"kind": "closed"}, "throughput": {"requests_per_s": 10.0},
            "latency": {"service_time": {"p99_ms": 2.0}, "response_time": {"p99_ms": 9.0}}});
        let open = json!({"model": {"kind": "open", "rate_per_s": 5.0},
            "latency": {"service_time": {"p99_ms": 2.0}, "response_time": {"p99_ms": 9.0}}});
        assert_eq!(figure(&closed, Metric::Rps), Some(10.0));
        assert_eq!(figure(&closed, Metric::P99), Some(2.0));
        assert_eq!(figure(&open, Metric::P99), Some(9.0));
        assert_eq!(figure(&open, Metric::Rps), None);
        assert_eq!(Metric::parse("p99"), Some(Metric::P99));
        assert_eq!(Metric::parse("p50"), None);
    }
}
