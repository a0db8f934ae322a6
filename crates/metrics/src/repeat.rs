//! `--repeat K`: one row per run and the median with a bootstrap 95% confidence interval
//! across runs. Each run is one unit of replication (requests inside a run are
//! correlated), so intervals are over per-run values, never over requests.

use crate::Summary;
use serde::Serialize;
use volley_analysis::bootstrap;

/// Bootstrap resamples: volley-analysis's one count, shared with the reports.
pub const RESAMPLES: usize = bootstrap::RESAMPLES;
/// Fixed seed, so a report rebuilt from the same runs shows the same interval.
pub const SEED: u64 = 0x566f_6c6c_6579;

/// One run's line of the table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RepeatRow {
    /// 1-based run number.
    pub run: usize,
    /// Wall time, seconds.
    pub total_s: f64,
    /// Mean of the headline latency, ms.
    pub mean_ms: f64,
    /// Fastest request, ms.
    pub min_ms: f64,
    /// Slowest request, ms.
    pub max_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Requests per second.
    pub requests_per_s: f64,
    /// server-bound / generator-bound / inconclusive.
    pub label: &'static str,
}

/// Median and its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Ci {
    /// Median across runs.
    pub median: f64,
    /// Lower end of the 95% interval.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
}

/// The repeat table and its intervals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RepeatSummary {
    /// Which latency the ms columns show.
    pub latency_definition: String,
    /// One row per run.
    pub rows: Vec<RepeatRow>,
    /// Requests/s across runs.
    pub requests_per_s: Ci,
    /// Mean latency across runs.
    pub mean_ms: Ci,
    /// p99 across runs.
    pub p99_ms: Ci,
    /// Bootstrap resamples used.
    pub resamples: usize,
}

fn ci(values: &[f64]) -> Ci {
    let e = bootstrap::median_ci(values, RESAMPLES, SEED);
    Ci {
        median: e.median,
        lo: e.lo,
        hi: e.hi,
    }
}

/// The headline latency of a run: response time (open loop) or service time (closed).
fn headline(s: &Summary) -> &crate::summary::LatencyStats {
    let key = match s.model {
        crate::Model::Open { .. } => "response_time",
        crate::Model::Closed => "service_time",
    };
    &s.latency[key]
}

/// Builds the table and intervals from the runs' summaries.
pub fn summarise(runs: &[Summary]) -> RepeatSummary {
    let rows: Vec<RepeatRow> = runs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let l = headline(s);
            RepeatRow {
                run: i + 1,
                total_s: s.duration_s,
                mean_ms: l.mean_ms,
                min_ms: l.min_ms,
                max_ms: l.max_ms,
                p99_ms: l.p99_ms,
                requests_per_s: s.throughput.requests_per_s,
                label: s.generator.verdict.label.label(),
            }
        })
        .collect();
    let col = |f: fn(&RepeatRow) -> f64| rows.iter().map(f).collect::<Vec<_>>();
    RepeatSummary {
        latency_definition: runs
            .first()
            .map(|s| s.latency_definition.clone())
            .unwrap_or_default(),
        requests_per_s: ci(&col(|r| r.requests_per_s)),
        mean_ms: ci(&col(|r| r.mean_ms)),
        p99_ms: ci(&col(|r| r.p99_ms)),
        rows,
        resamples: RESAMPLES,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::tests::ok;
    use crate::summary::tests::info;
    use crate::{Model, Recorder};
    use volley_engine::Sink;

    fn run(lat_ms: u64, n: u64) -> Summary {
        let mut r = Recorder::new();
        for i in 0..n {
            r.record(&ok(lat_ms + i, lat_ms));
        }
        r.close(&info(Model::Closed, 1_000)).unwrap()
    }

    #[test]
    fn table_has_a_row_per_run_and_ci_brackets_median() {
        let runs = vec![run(2, 100), run(3, 110), run(4, 90)];
        let rep = summarise(&runs);
        assert_eq!(rep.rows.len(), 3);
        assert_eq!(rep.rows[1].run, 2);
        assert!((rep.rows[1].requests_per_s - 110.0).abs() < 1e-9);
        assert!((rep.requests_per_s.median - 100.0).abs() < 1e-9);
        assert!(rep.requests_per_s.lo <= 100.0 && rep.requests_per_s.hi >= 100.0);
        assert!((rep.mean_ms.median - 3.0).abs() < 0.01);
    }
}
