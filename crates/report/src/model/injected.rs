//! The multi-injector parts of a step, read from its stored summary: the phases (seed
//! 003's power-test table) and each injector's own figures.
//!
//! Place in the flow: `load` calls [`read`] for every step; steps loaded by a single
//! process have neither and get empty lists.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use volley_analysis::phase::Figures;

/// One interval with the same set of active injectors (the stored `phases[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseRow {
    /// The active injectors.
    pub injectors: Vec<String>,
    /// Its seconds since T0 (the boundary seconds left out) and the figures of the
    /// covered ones.
    #[serde(flatten)]
    pub figures: Figures,
    /// Median, ms.
    pub p50_ms: Option<f64>,
    /// Failed requests.
    pub errors: u64,
    /// An injector was generator-bound in a covered second.
    #[serde(default)]
    pub generator_bound: bool,
    /// Which ones.
    #[serde(default)]
    pub bound_injectors: Vec<String>,
    /// Covered (second, injector) pairs without data.
    #[serde(default)]
    pub missing: u64,
    /// At or after the second the run became degraded.
    #[serde(default)]
    pub degraded: bool,
    /// Its figure sits at what the shaped links of its active injectors allow: the
    /// link's figure, not the server's (judged per phase as per step).
    #[serde(default)]
    pub link_bound: bool,
    /// Why, in words.
    #[serde(default)]
    pub link_reason: Option<String>,
}

/// One injector's own figures in a step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InjectorRow {
    /// Its name.
    pub name: String,
    /// Its start after T0, ms.
    pub delay_ms: u64,
    /// Requests with an outcome (none when it sent no recorder).
    pub completed: Option<u64>,
    /// Its requests per second.
    pub requests_per_s: Option<f64>,
    /// Its median and 99th percentile of the headline latency, ms.
    pub p50_ms: Option<f64>,
    /// 99th percentile, ms.
    pub p99_ms: Option<f64>,
    /// Its failed requests.
    pub failed: Option<u64>,
    /// Its clock minus the coordinator's, ms.
    pub clock_offset_ms: Option<f64>,
    /// Lost from this second on.
    pub lost_from_s: Option<u64>,
    /// Its generator's own label (server-bound, generator-bound, inconclusive).
    pub label: Option<String>,
}

fn f(v: &Value, path: &[&str]) -> Option<f64> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_f64()
}

fn u(v: &Value, path: &[&str]) -> Option<u64> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_u64()
}

/// The step's injector count, phases and injectors, from its stored summary.
pub fn read(summary: &Value, headline: &str) -> (Vec<PhaseRow>, Vec<InjectorRow>) {
    let phases = summary
        .get("phases")
        .and_then(|p| serde_json::from_value(p.clone()).ok())
        .unwrap_or_default();
    let injectors = summary
        .get("injectors")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|i| {
                    let s = &i["summary"];
                    InjectorRow {
                        name: i["name"].as_str().unwrap_or("?").to_string(),
                        delay_ms: u(i, &["delay_ms"]).unwrap_or(0),
                        completed: u(s, &["requests", "completed"]),
                        requests_per_s: f(s, &["throughput", "requests_per_s"]),
                        p50_ms: f(s, &["latency", headline, "p50_ms"]),
                        p99_ms: f(s, &["latency", headline, "p99_ms"]),
                        failed: u(s, &["requests", "failed"]),
                        clock_offset_ms: f(i, &["clock", "offset_ns"]).map(|n| n / 1e6),
                        lost_from_s: u(i, &["lost_from_s"]),
                        label: s
                            .pointer("/generator/verdict/label")
                            .and_then(Value::as_str)
                            .map(|l| l.replace('_', "-")),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    (phases, injectors)
}
