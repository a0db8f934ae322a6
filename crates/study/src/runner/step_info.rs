//! How a step is named and stored: its line's label, its stored parameters
//! (docs/store-conventions.md) and the cold request's stored figures.

use serde_json::{json, Value};
use volley_harness::ColdFigures;
use volley_store::StepParameters;

use crate::plan::{Cell, Plan};

/// The cpuset of `n` pinned cores as the steps store it: "0", "0-1", ...
pub(super) fn cores_text(n: u32) -> String {
    if n <= 1 {
        "0".to_string()
    } else {
        format!("0-{}", n - 1)
    }
}

/// How a step's line and progress line name it: instance, workload, rate, repeat,
/// concurrency, keep-alive.
pub(super) fn step_what(plan: &Plan, cell: &Cell, rate: Option<f64>, repeat: u32) -> String {
    let nth = if repeat > 0 {
        format!(" #{}", repeat + 1)
    } else {
        String::new()
    };
    if let Some(u) = cell.users {
        return format!("{} users={u}{nth}", plan.cell_name(cell, None));
    }
    format!(
        "{}{}{nth} c={} ka={}",
        plan.cell_name(cell, rate),
        cell.injectors
            .map(|k| format!(" injectors={k}"))
            .unwrap_or_default(),
        cell.concurrency,
        if cell.keepalive { "on" } else { "off" },
    )
}

/// The step's parameters as stored (docs/store-conventions.md).
pub(super) fn step_parameters(
    plan: &Plan,
    cell: &Cell,
    repeat: u32,
    rate: Option<f64>,
    phase: &str,
    order: usize,
) -> StepParameters {
    let inst = &plan.instances[cell.instance];
    let mut params = StepParameters {
        rate_rps: rate,
        concurrency: Some(cell.concurrency),
        cpu_quota_cores: inst.cpu_quota,
        cores: inst.cores.map(cores_text),
        keepalive: Some(cell.keepalive),
        repeat,
        extra: serde_json::Map::new(),
    };
    params.extra.insert("axis".into(), json!(plan.axis));
    if let Some(k) = cell.injectors {
        params.extra.insert("injectors".into(), json!(k));
    }
    if let Some(u) = cell.users {
        params.extra.insert("users".into(), json!(u));
    }
    params.extra.insert("phase".into(), json!(phase));
    params.extra.insert("order".into(), json!(order));
    params
        .extra
        .insert("workload".into(), json!(plan.workloads[cell.workload].name));
    params
        .extra
        .insert("instance".into(), json!(plan.instance_label(cell.instance)));
    // The protocol the step spoke, so a report can set protocols side by side as it
    // does targets and variants (docs/store-conventions.md).
    params
        .extra
        .insert("protocol".into(), json!(plan.protocol_of(cell)));
    if let Some(v) = inst.variant {
        // The variant and every value it set; the generated config is the run's
        // (`environment.instances[].config_text`).
        let v = &plan.variants[v];
        params.extra.insert("variant".into(), json!(v.name));
        params.extra.insert("tuning".into(), json!(v.tuning));
    }
    params
}

/// The stored `cold` object of a cold-start step's summary.
pub(super) fn cold_json(c: &ColdFigures, valid: bool, warm_ttfb_ms: Option<f64>) -> Value {
    json!({
        "ttfb_ms": c.ttfb_ms,
        "connect_ms": c.connect_ms,
        "tls_handshake_ms": c.tls_handshake_ms,
        "response_ms": c.response_ms,
        "since_spawn_ms": c.since_spawn_ms,
        "status": c.status,
        "error": c.error,
        "validated": valid,
        "warm_ttfb_p50_ms": warm_ttfb_ms,
        "note": "the first request after the target started, timed alone on a fresh connection; the warm figures are the step's",
    })
}
