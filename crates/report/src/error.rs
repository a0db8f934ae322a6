//! The report's typed errors: the binary turns each into one line and an exit code.

use thiserror::Error;

/// Everything that can stop a report from being built.
#[derive(Debug, Error)]
pub enum ReportError {
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] volley_store::StoreError),
    /// Two runs cannot be compared as asked (no such run, no figure of that kind, a
    /// ratio that cannot be formed); the message says which.
    #[error("{0}")]
    Compare(String),
    /// The selector was neither a run id nor `study:ID`.
    #[error("'{0}' is not a run id or study:ID (see `volley history`)")]
    BadSelector(String),
    /// The store holds no run with this id.
    #[error("no run {0} in the results store (see `volley history`)")]
    UnknownRun(i64),
    /// The store holds no study with this id.
    #[error("no study {0} in the results store (see `volley history`)")]
    UnknownStudy(i64),
    /// A selector names a study, target or label the store does not hold.
    #[error("{0} (see `volley history`)")]
    NoMatch(String),
    /// The store holds no runs at all.
    #[error("the results store holds no runs yet (record some with `volley bench --db` or `volley study run`)")]
    EmptyStore,
    /// The study exists but none of its runs recorded a step.
    #[error("{0} has no recorded steps to report")]
    NoSteps(String),
    /// A stored histogram could not be decoded.
    #[error("run {run} step {step}: unreadable {kind} histogram: {detail}")]
    Histogram {
        /// Run id.
        run: i64,
        /// Step index.
        step: u32,
        /// Histogram kind.
        kind: &'static str,
        /// Decoder message.
        detail: String,
    },
    /// The JSON report could not be serialised.
    #[error("cannot serialise the report: {0}")]
    Json(#[from] serde_json::Error),
}

impl ReportError {
    /// True for errors in what the user asked for (exit code 2) rather than in the data.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            ReportError::BadSelector(_)
                | ReportError::UnknownRun(_)
                | ReportError::UnknownStudy(_)
                | ReportError::NoMatch(_)
                | ReportError::EmptyStore
                | ReportError::NoSteps(_)
        )
    }
}
