//! `kind = "replay"` workloads resolved: an access log replayed at each step's rate.
//!
//! A replay step's offered rate R is the log at speed R / (the log's mean rate), so a
//! sweep or a capacity search over rates is one over the speed factor (the log's mean
//! rate is speed 1). The log is read once here, so a bad one stops the study before
//! any target starts; each step then streams it again, looping to fill its duration.

use std::path::PathBuf;

use volley_replay::schedule::{Planner, ReplayOptions};
use volley_replay::{LogReader, ReaderOptions};

use super::model::{Load, ReplayLoad, Workload};
use super::resolve::invalid;
use crate::spec::WorkloadDef;
use crate::StudyError;

/// Keys a replay workload does not take (the log gives methods, paths and bodies).
const NOT_FOR_REPLAY: [&str; 9] = [
    "paths", "order", "weights", "block", "method", "body", "requests", "cold_start", "users",
];

/// A replay workload: its log read once for its mean rate, the study's load settings.
pub(super) fn replay_workload(w: &WorkloadDef, load: Load) -> Result<Workload, StudyError> {
    let set = [
        !w.paths.is_empty(),
        w.order.is_some(),
        w.weights.is_some(),
        w.block.is_some(),
        w.method.is_some(),
        w.body.is_some(),
        w.requests.is_some(),
        w.cold_start.is_some(),
        w.users.is_some(),
    ];
    if let Some(i) = set.iter().position(|s| *s) {
        return Err(invalid(format!(
            "workload '{}': {} is not a replay key (the log gives the requests)",
            w.name, NOT_FOR_REPLAY[i]
        )));
    }
    let Some(log) = w.log.clone() else {
        return Err(invalid(format!(
            "workload '{}': a replay needs log = \"access.log\"",
            w.name
        )));
    };
    let log = PathBuf::from(log);
    let bad = |e: String| invalid(format!("workload '{}': {}: {e}", w.name, log.display()));
    let mut reader = LogReader::open(&log, ReaderOptions::default()).map_err(|e| bad(e.to_string()))?;
    let mut planner = Planner::new(ReplayOptions::default());
    let mut span_us = 0;
    for r in reader.by_ref() {
        if let Some(p) = planner.plan(r.map_err(|e| bad(e.to_string()))?) {
            span_us = p.intended_us;
        }
    }
    let planned = planner.counts().planned;
    if planned < 2 || span_us == 0 {
        return Err(bad("a replay needs at least two logged requests at different instants".into()));
    }
    let mean_rate = planned as f64 / (span_us as f64 / 1e6);
    Ok(Workload {
        name: w.name.clone(),
        method: "GET".into(),
        // No paths: the targets validate their default probe file, and the log gives
        // every request.
        paths: Vec::new(),
        order: volley_engine::Order::Same,
        headers: Vec::new(),
        body: None,
        load,
        cold_start: false,
        requests: None,
        expected_rate: None,
        office: None,
        replay: Some(ReplayLoad {
            log,
            mean_rate,
            requests: planned,
        }),
        targets: None,
    })
}
