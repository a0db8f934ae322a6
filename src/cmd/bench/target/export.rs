//! Files of `volley bench --target`: bench's JSON document with a `targets` array beside
//! `runs` (docs/bench-json.md, "Managed targets"), and bench's CSV rows.

use std::io::Write;

use anyhow::Context;
use serde_json::{json, Value};
use volley_metrics::output::{Csv, Exporter, Json};
use volley_metrics::{repeat, Summary};
use volley_targets::TargetKind;

use super::print::{median_ci, tree_stats};
use super::{LoadArgs, Setup, TargetRun};

/// The JSON `targets` entry of one run (docs/bench-json.md, "Managed targets").
fn target_json(r: &TargetRun, setup: &Setup) -> Value {
    json!({
        "kind": r.kind,
        "round": r.round,
        "pid": r.pid,
        "status": r.status(),
        "died": r.died.as_ref().map(|d| json!({
            "exit_status": d.exit_status,
            "log_tail": d.log_tail,
        })),
        "record": r.record,
        "volley_cpus": setup.volley_cpus,
        "server_cpu_s_per_1000_requests": r.cpu_s_per_1000(),
        "throttling": r.throttling.map(|t| json!({
            "nr_periods": t.nr_periods,
            "nr_throttled": t.nr_throttled,
            "throttled_usec": t.throttled_us,
        })),
        "p99_throttled": r.throttled(),
        "process_tree": r.monitor.as_ref().and_then(tree_stats).map(|t| json!({
            "max_processes": t.max_processes,
            "max_threads": t.max_threads,
            "ctx_voluntary_per_s": t.ctx_voluntary_per_s,
            "ctx_involuntary_per_s": t.ctx_involuntary_per_s,
        })),
        "monitor": r.monitor,
        "leftover_cgroups": r.leftover_cgroups,
        "namespace": r.namespace,
        "replay": r.replay.as_ref().map(|o| o.json()),
    })
}

/// The bench JSON document with a `targets` array beside `runs` (same order).
fn json_document(runs: &[TargetRun], setup: &Setup) -> anyhow::Result<Value> {
    let summaries: Vec<Summary> = runs.iter().map(|r| r.summary.clone()).collect();
    let mut buf = Vec::new();
    Json.export(&summaries, None, &mut buf)?;
    let mut doc: Value = serde_json::from_slice(&buf).context("bench JSON")?;
    doc["targets"] = Value::Array(runs.iter().map(|r| target_json(r, setup)).collect());
    if let Some(replay) = setup.replay {
        // The log and its plan once; each run's fidelity is in its `targets` entry.
        doc["replay"] = replay.json();
    }
    if setup.load.repeat > 1 {
        doc["target_repeats"] = Value::Array(
            unique(&setup.kinds)
                .into_iter()
                .filter_map(|k| {
                    let mine: Vec<Summary> = runs
                        .iter()
                        .filter(|r| r.kind == k)
                        .map(|r| r.summary.clone())
                        .collect();
                    let cpu: Vec<f64> = runs
                        .iter()
                        .filter(|r| r.kind == k)
                        .filter_map(|r| r.cpu_s_per_1000())
                        .collect();
                    (!mine.is_empty()).then(|| {
                        json!({
                            "kind": k,
                            "repeat": repeat::summarise(&mine),
                            "server_cpu_s_per_1000_requests": median_ci(&cpu).map(|e| json!({
                                "median": e.median, "lo": e.lo, "hi": e.hi,
                            })),
                        })
                    })
                })
                .collect(),
        );
    }
    Ok(doc)
}

/// Writes `--json` / `--csv` after every target; JSON on stdout only at the end.
pub(super) fn write_files(
    args: &LoadArgs,
    setup: &Setup,
    runs: &[TargetRun],
    last: bool,
) -> anyhow::Result<()> {
    if let Some(j) = &args.json {
        if j != "-" || last {
            let text = serde_json::to_string_pretty(&json_document(runs, setup)?)? + "\n";
            if j == "-" {
                std::io::stdout().lock().write_all(text.as_bytes())?;
            } else {
                std::fs::write(j, text).with_context(|| format!("cannot write {j}"))?;
            }
        }
    }
    if let Some(p) = &args.csv {
        let summaries: Vec<Summary> = runs.iter().map(|r| r.summary.clone()).collect();
        let mut buf = Vec::new();
        Csv.export(&summaries, None, &mut buf)?;
        // Stdout ('-') once, at the end: what is printed cannot be rewritten.
        if p.as_os_str() == "-" {
            if last {
                std::io::stdout().lock().write_all(&buf)?;
            }
        } else {
            std::fs::write(p, buf).with_context(|| format!("cannot write {}", p.display()))?;
        }
    }
    if args.csv_seconds.is_some() && last {
        eprintln!("volley: --csv-seconds is not written with --target yet; the per-second series are in --json");
    }
    Ok(())
}

/// Kinds in first-seen order, each once (`--target nginx --target nginx` is one group).
fn unique(kinds: &[TargetKind]) -> Vec<TargetKind> {
    let mut out: Vec<TargetKind> = Vec::new();
    for &k in kinds {
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}
