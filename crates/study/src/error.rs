//! Why a study could not be read or run, as one line for the user.

use thiserror::Error;

/// Everything that can go wrong in this crate.
#[derive(Debug, Error)]
pub enum StudyError {
    /// The file is not valid TOML or does not match the study schema.
    #[error("line {line}{}: {message}", key.as_ref().map(|k| format!(", key `{k}`")).unwrap_or_default())]
    Syntax {
        /// 1-based line (0 when unknown).
        line: usize,
        /// The key on that line, with its table (`load.rate`).
        key: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// A value is valid TOML but makes no sense (no workloads, a rate of zero...).
    #[error("{0}")]
    Invalid(String),
    /// A setting the machine refuses (a sysctl that is global or does not take inside
    /// a namespace, kernel settings without root): wrong input, found before any target
    /// starts (the binary exits 2).
    #[error("{0}")]
    Refused(String),
    /// The results store failed (its message names the store already).
    #[error("{0}")]
    Store(#[from] volley_store::StoreError),
    /// The fixture could not be written.
    #[error("cannot generate the fixture: {0}")]
    Fixture(String),
    /// The load could not be run at all.
    #[error("cannot run step {step}: {source}")]
    Engine {
        /// Order of the step in the plan.
        step: usize,
        /// What failed.
        source: crate::step::StepError,
    },
    /// A target died or could not be checked between steps.
    #[error("target {target} failed: {message}")]
    Target {
        /// Target name.
        target: String,
        /// What happened.
        message: String,
    },
}
