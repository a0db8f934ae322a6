//! The stored JSON of steps and series, read leniently: a missing or odd field blanks
//! only itself (docs/store-conventions.md).

use super::*;

// ---- the stored JSON, read leniently ----

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct StoredSummary {
    pub(super) latency_definition: String,
    pub(super) duration_s: f64,
    pub(super) model: StoredModel,
    pub(super) requests: StoredRequests,
    pub(super) throughput: StoredThroughput,
    pub(super) rates: StoredRates,
    pub(super) latency: BTreeMap<String, LatencyFigures>,
    pub(super) connections_stats: Option<StoredConnections>,
    pub(super) generator: Option<StoredGenerator>,
    pub(super) monitor: Option<StoredMonitor>,
    pub(super) throttling: Option<StoredThrottling>,
    pub(super) notes: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct StoredModel {
    pub(super) kind: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct StoredRequests {
    pub(super) completed: u64,
    pub(super) ok: u64,
    pub(super) failed: u64,
    pub(super) censored: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct StoredThroughput {
    pub(super) requests_per_s: f64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct StoredRates {
    pub(super) achieved_send_per_s: Option<f64>,
    pub(super) reply_per_s: f64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct StoredConnections {
    pub(super) max_open: u32,
    pub(super) cap_hits: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct StoredGenerator {
    pub(super) verdict: Option<StoredBound>,
    /// The stall probe's figures for the whole step (absent before the probe).
    pub(super) probe: Option<StoredProbe>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct StoredProbe {
    pub(super) max_stall_ms: f64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct StoredBound {
    pub(super) label: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct StoredMonitor {
    pub(super) cpu_user_pct: Option<f64>,
    pub(super) cpu_sys_pct: Option<f64>,
    pub(super) server_cpu_seconds: Option<f64>,
    pub(super) max_rss_bytes: Option<u64>,
    pub(super) mem_pct: Option<f64>,
    pub(super) tx_packets_per_s: Option<f64>,
    pub(super) tx_bytes_per_s: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct StoredThrottling {
    pub(super) nr_throttled: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct StoredVerdict {
    pub(super) sustain: Option<sustain::Verdict>,
    pub(super) little: Option<LittleCheck>,
    pub(super) throttled: bool,
    /// Someone else took the CPU while the step ran (absent in older stores: false).
    pub(super) machine_busy: bool,
    /// The target died during the step (`restart = "next-step"` studies go on).
    pub(super) target_died: Option<String>,
}

/// A number field of a series row; series rows are read field by field so one odd
/// field (a float where an integer was expected) blanks only itself.
pub(super) fn field(v: &Value, path: &[&str]) -> Option<f64> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_f64()
}

/// Reads a JSON value leniently: missing fields take their defaults, and a value of the
/// wrong shape reads as empty (its figures show as missing) instead of failing the report.
pub(super) fn lenient<T: for<'de> Deserialize<'de> + Default>(v: &Value) -> T {
    serde_json::from_value(v.clone()).unwrap_or_default()
}
