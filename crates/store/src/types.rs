//! The rows the store writes and reads back. All serde-friendly and independent of the
//! other volley crates: summaries, verdicts and per-second values travel as
//! `serde_json::Value`, histograms as opaque bytes.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Result, StoreError};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub i64);

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_type!(
    /// Row id of a study.
    StudyId
);
id_type!(
    /// Row id of a run.
    RunId
);
id_type!(
    /// Row id of a step.
    StepId
);
id_type!(
    /// Row id of a capacity search result.
    CapacityId
);

/// Declares a string-backed enum stored as its lower-case name.
macro_rules! text_enum {
    ($(#[$doc:meta])* $name:ident, $what:literal { $($(#[$vdoc:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// The name stored in the database.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// Parses a stored name.
            pub fn parse(text: &str) -> Result<Self> {
                match text {
                    $($text => Ok($name::$variant),)+
                    other => Err(StoreError::UnknownValue { what: $what, value: other.to_owned() }),
                }
            }
        }
    };
}

text_enum!(
    /// Where a study or run stands.
    Status, "status" {
        /// Still being recorded (or its writer was killed and no one has opened the
        /// store since).
        Running = "running",
        /// Finished normally.
        Complete = "complete",
        /// Stopped early: interrupted, failed, or found 'running' with its writer dead.
        Incomplete = "incomplete",
    }
);

text_enum!(
    /// What produced a run.
    RunKind, "run kind" {
        /// A single `volley bench`.
        Bench = "bench",
        /// One configuration of a study (its steps are the rates/concurrencies tried).
        StudyStep = "study-step",
    }
);

text_enum!(
    /// Who produced a per-second series row.
    SeriesSource, "series source" {
        /// The load generator (rates, latencies, in-flight).
        Load = "load",
        /// The resource monitor (CPU, RSS, sockets of the target).
        Monitor = "monitor",
    }
);

text_enum!(
    /// Which latency a histogram holds (docs/methodology.md, "Latency definitions").
    HistogramKind, "histogram kind" {
        /// done - intended: what a user waits (coordinated-omission corrected).
        Response = "response",
        /// done - sent: uncorrected service time.
        Service = "service",
        /// first byte - sent.
        Ttfb = "ttfb",
        /// TCP (and TLS) connect time.
        Connect = "connect",
        /// sent - intended: scheduler lag + connection wait.
        SendLag = "send_lag",
        /// dispatched - intended: the generator's own lateness.
        SchedLag = "sched_lag",
        /// sent - dispatched: the wait for a free connection or stream.
        ConnWait = "conn_wait",
    }
);

text_enum!(
    /// How a capacity search ended (the analysis crate's `SearchEnd`, plus `Interrupted`).
    SearchEnd, "search end" {
        /// The bracket narrowed to the resolution.
        Converged = "converged",
        /// The search's maximum rate was sustainable: capacity is at least that.
        ReachedMaxRate = "reached_max_rate",
        /// Even the minimum rate was unsustainable.
        BelowMinRate = "below_min_rate",
        /// The step budget ran out before convergence.
        StepBudgetExhausted = "step_budget_exhausted",
        /// The generator, not the server, could not offer the next rate.
        GeneratorBound = "generator_bound",
        /// The study was stopped before the search ended; the figures are partial.
        Interrupted = "interrupted",
    }
);

/// The result of one capacity search, written the moment the search ends.
///
/// `cell` says which search it was (the runner writes the workload, instance, CPU quota,
/// cores, concurrency and keep-alive of the searched cell; see
/// docs/store-conventions.md); `detail` keeps everything else the search knows (every
/// probe with its outcomes), so a report can show the evidence without the analysis
/// crate's types in the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityRecord {
    /// Identity of the searched cell (JSON object).
    pub cell: Value,
    /// Point estimate: the largest rate decided sustainable, requests per second.
    pub capacity_rps: Option<f64>,
    /// Lower end of the confidence interval, requests per second.
    pub ci_lo_rps: Option<f64>,
    /// Upper end (`None`: unbounded above, or no interval).
    pub ci_hi_rps: Option<f64>,
    /// Confidence level of the interval, e.g. 0.95.
    pub confidence: f64,
    /// How the search ended.
    pub end: SearchEnd,
    /// Steps the search ran (reruns of generator-bound steps included).
    pub steps: u32,
    /// Wall-clock start of the search's first step, milliseconds since the Unix epoch.
    pub started_unix_ms: i64,
    /// Wall-clock end of its last step, milliseconds since the Unix epoch.
    pub finished_unix_ms: i64,
    /// The rest of the search's answer (probes, bracket), as JSON.
    pub detail: Value,
}

/// A capacity search result as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityRow {
    /// Row id.
    pub id: CapacityId,
    /// Its run.
    pub run: RunId,
    /// What was written.
    pub record: CapacityRecord,
}

/// A study being started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewStudy {
    /// Its name (from the study file).
    pub name: String,
    /// The study file's full text, so the study can be re-run or audited later.
    pub file_text: String,
}

/// A study as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudyRow {
    /// Row id.
    pub id: StudyId,
    /// Name.
    pub name: String,
    /// The study file's text.
    pub file_text: String,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_unix_ms: i64,
    /// Wall-clock end, when finished.
    pub finished_unix_ms: Option<i64>,
    /// Where it stands.
    pub status: Status,
}

/// A run being started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewRun {
    /// The study it belongs to, if any.
    pub study: Option<StudyId>,
    /// What produced it.
    pub kind: RunKind,
    /// The target (URL or target name).
    pub target: String,
    /// The resolved parameters of the run.
    pub parameters: Value,
    /// The environment recorded with it (kernel, CPU, governor, cgroup, tc, versions).
    pub environment: Value,
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    /// Row id.
    pub id: RunId,
    /// The study it belongs to, if any.
    pub study: Option<StudyId>,
    /// What produced it.
    pub kind: RunKind,
    /// The target.
    pub target: String,
    /// Parameters.
    pub parameters: Value,
    /// Environment.
    pub environment: Value,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_unix_ms: i64,
    /// Wall-clock end, when finished.
    pub finished_unix_ms: Option<i64>,
    /// Where it stands.
    pub status: Status,
}

/// The parameters that distinguish one step from another. Every field is optional
/// because a rate sweep varies the rate, a concurrency sweep the concurrency, and so on;
/// anything else goes in `extra`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepParameters {
    /// Offered rate (open loop), requests per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_rps: Option<f64>,
    /// Connections (closed loop) or connection pool size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// CPU quota of the target, in cores (cgroup `cpu.max` quota / period).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_quota_cores: Option<f64>,
    /// Cores the target was pinned to (cpuset list, e.g. "2-3").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<String>,
    /// Keep-alive on or off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keepalive: Option<bool>,
    /// Which repeat of these parameters this is (0-based).
    #[serde(default)]
    pub repeat: u32,
    /// Anything else the study varied.
    #[serde(default, flatten)]
    pub extra: serde_json::Map<String, Value>,
}

/// One row of a per-second series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesPoint {
    /// Second since the step started.
    pub second: u32,
    /// Who produced it.
    pub source: SeriesSource,
    /// The figures of that second, as named values.
    pub values: Value,
}

/// One serialised histogram (HdrHistogram V2 bytes, stored opaquely).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistogramBlob {
    /// Second since the step started, or `None` for the whole step.
    pub second: Option<u32>,
    /// Which latency it holds.
    pub kind: HistogramKind,
    /// The serialised histogram.
    pub bytes: Vec<u8>,
}

/// Everything about one finished step, written in one transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Position of the step in its run (unique within the run).
    pub index: u32,
    /// What distinguishes it.
    pub parameters: StepParameters,
    /// The recorder's summary.
    pub summary: Value,
    /// The analysis verdict (sustainability, reasons), if judged.
    pub verdict: Option<Value>,
    /// The bound label (server_bound, generator_bound, inconclusive), if judged.
    pub label: Option<String>,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_unix_ms: i64,
    /// Wall-clock end, milliseconds since the Unix epoch.
    pub finished_unix_ms: i64,
    /// Per-second series of the step.
    pub series: Vec<SeriesPoint>,
    /// Histograms of the step.
    pub histograms: Vec<HistogramBlob>,
}

/// A step as stored (series and histograms are read separately: they are large).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRow {
    /// Row id.
    pub id: StepId,
    /// Its run.
    pub run: RunId,
    /// Position in the run.
    pub index: u32,
    /// Parameters.
    pub parameters: StepParameters,
    /// Summary.
    pub summary: Value,
    /// Verdict.
    pub verdict: Option<Value>,
    /// Bound label.
    pub label: Option<String>,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_unix_ms: i64,
    /// Wall-clock end, milliseconds since the Unix epoch.
    pub finished_unix_ms: i64,
}
