//! The end-of-study table: per target and point, the median throughput and p99 over the
//! repeats (with bootstrap CIs), the capacity of rate sweeps and searches, and the USL
//! fit of concurrency sweeps. Pure: built from the steps just measured.

use std::fmt::Write;

use volley_analysis::{bootstrap, knee, usl};

use crate::plan::Plan;
use crate::runner::StudyReport;

/// One measured step, reduced to what the table needs.
#[derive(Debug, Clone, PartialEq)]
pub struct StepOutcome {
    /// Position in the schedule.
    pub order: usize,
    /// Index into the plan's cells.
    pub cell: usize,
    /// Repeat.
    pub repeat: u32,
    /// Offered rate (open loop).
    pub rate: Option<f64>,
    /// Completed requests per second.
    pub rps: f64,
    /// Successful requests per second.
    pub ok_rps: f64,
    /// p99 of the headline latency, ms.
    pub p99_ms: f64,
    /// Failed requests.
    pub errors: u64,
    /// Rate steps: the sustainability verdict.
    pub sustainable: Option<bool>,
    /// server-bound, generator-bound or inconclusive.
    pub label: &'static str,
}

const RESAMPLES: usize = 2000;

fn ci_text(values: &[f64], digits: usize) -> String {
    if values.len() < 2 {
        return format!("{:.digits$}", values.first().copied().unwrap_or(0.0));
    }
    let e = bootstrap::median_ci(values, RESAMPLES, 1);
    format!(
        "{:.digits$} [{:.digits$}, {:.digits$}]",
        e.median, e.lo, e.hi
    )
}

/// The summary table, one line per result.
pub fn table(plan: &Plan, report: &StudyReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<28} {:<10} {:<18} result",
        "target", "workload", "point"
    );
    // Group key: instance, workload, concurrency, keepalive (rate varies inside).
    let mut keys: Vec<(usize, usize, u32, bool)> = Vec::new();
    for c in &plan.cells {
        let k = (c.instance, c.workload, c.concurrency, c.keepalive);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    for &(inst, wl, conc, ka) in &keys {
        let steps: Vec<&StepOutcome> = report
            .steps
            .iter()
            .filter(|s| {
                let c = &plan.cells[s.cell];
                (c.instance, c.workload, c.concurrency, c.keepalive) == (inst, wl, conc, ka)
            })
            .collect();
        let label = plan.instance_label(inst);
        let wname = &plan.workloads[wl].name;
        let point = format!("c={conc} ka={}", if ka { "on" } else { "off" });
        if steps.is_empty() {
            let _ = writeln!(out, "{label:<28} {wname:<10} {point:<18} (not run)");
            continue;
        }
        let search = report.searches.iter().find(|(ci, _)| {
            let c = &plan.cells[*ci];
            (c.instance, c.workload, c.concurrency, c.keepalive) == (inst, wl, conc, ka)
        });
        if let Some((_, cap)) = search {
            let hi = cap
                .ci_hi_rps
                .map_or("unbounded".to_string(), |h| format!("{h:.0}"));
            let _ = writeln!(
                out,
                "{label:<28} {wname:<10} {point:<18} capacity {} req/s, 95% CI [{:.0}, {hi}] ({} steps, {:?})",
                cap.capacity_rps.map_or("none".to_string(), |c| format!("{c:.0}")),
                cap.ci_lo_rps,
                cap.steps,
                cap.end
            );
            continue;
        }
        if steps.iter().any(|s| s.rate.is_some()) {
            let judged: Vec<(f64, bool)> = steps
                .iter()
                .filter_map(|s| Some((s.rate?, s.sustainable?)))
                .collect();
            let cap = knee::sweep_capacity(&judged);
            let max_reply = steps.iter().map(|s| s.rps).fold(0.0, f64::max);
            let _ = writeln!(
                out,
                "{label:<28} {wname:<10} {point:<18} capacity {} req/s{}{}; peak replies {:.0}/s",
                cap.capacity_rps
                    .map_or("none (no rate was sustainable)".to_string(), |c| format!(
                        "{c:.0}"
                    )),
                cap.first_unsustainable_above_rps
                    .map(|r| format!(", first unsustainable {r:.0}"))
                    .unwrap_or_default(),
                if cap.non_monotone {
                    " (non-monotone)"
                } else {
                    ""
                },
                max_reply
            );
            continue;
        }
        let rps: Vec<f64> = steps.iter().map(|s| s.rps).collect();
        let p99: Vec<f64> = steps.iter().map(|s| s.p99_ms).collect();
        let errors: u64 = steps.iter().map(|s| s.errors).sum();
        let _ = writeln!(
            out,
            "{label:<28} {wname:<10} {point:<18} {} req/s, p99 {} ms ({} run{}{})",
            ci_text(&rps, 0),
            ci_text(&p99, 2),
            steps.len(),
            if steps.len() == 1 { "" } else { "s" },
            if errors > 0 {
                format!(", {errors} errors")
            } else {
                String::new()
            }
        );
    }
    // USL per (instance, workload, keepalive) over concurrency.
    let mut usl_keys: Vec<(usize, usize, bool)> = Vec::new();
    for &(i, w, _, k) in &keys {
        if !usl_keys.contains(&(i, w, k)) {
            usl_keys.push((i, w, k));
        }
    }
    for (inst, wl, ka) in usl_keys {
        let points = usl_points(plan, report, inst, wl, ka);
        if points.len() < usl::MIN_POINTS || !points.iter().any(|p| p.n == 1.0) {
            continue;
        }
        let label = plan.instance_label(inst);
        match usl::fit(&points) {
            Ok(f) => {
                let _ = writeln!(
                    out,
                    "USL {label} {} ka={}: sigma {:.4}, kappa {:.6}, N* {}, peak {:.0} req/s, R^2 {:.3}",
                    plan.workloads[wl].name,
                    if ka { "on" } else { "off" },
                    f.sigma,
                    f.kappa,
                    if f.n_star.is_finite() { format!("{:.1}", f.n_star) } else { "inf".into() },
                    f.peak_throughput,
                    f.r_squared
                );
            }
            Err(e) => {
                let _ = writeln!(out, "USL {label}: no fit ({e})");
            }
        }
    }
    out
}

/// (concurrency, median req/s) of the closed-loop steps of one instance and workload.
fn usl_points(
    plan: &Plan,
    report: &StudyReport,
    inst: usize,
    wl: usize,
    ka: bool,
) -> Vec<usl::UslPoint> {
    let mut by_n: Vec<(u32, Vec<f64>)> = Vec::new();
    for s in &report.steps {
        let c = &plan.cells[s.cell];
        if (c.instance, c.workload, c.keepalive) != (inst, wl, ka) || s.rate.is_some() {
            continue;
        }
        match by_n.iter_mut().find(|(n, _)| *n == c.concurrency) {
            Some((_, v)) => v.push(s.rps),
            None => by_n.push((c.concurrency, vec![s.rps])),
        }
    }
    by_n.into_iter()
        .map(|(n, v)| usl::UslPoint {
            n: f64::from(n),
            throughput: bootstrap::median(&v),
        })
        .collect()
}
