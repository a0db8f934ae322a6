//! volley-harness: running one load against a target, the one way every caller does it.
//!
//! Place in the flow: between the callers that decide *what* to run (`volley bench`,
//! `volley bench --target`, a study step, and next the injector agent) and the stages
//! that do the work (`engine`, `metrics`, `targets`, `monitor`):
//!
//! ```text
//! caller -> PreparedDocroot -> target started (volley-targets) -> cold_request
//!        -> watch(monitor + throttling + death watch, measure(engine + recorders))
//!        -> MeasuredRun -> the caller closes, judges, prints or stores it
//! ```
//!
//! The nouns are composed by each caller, not wrapped in one function per caller:
//! [`PreparedDocroot`] (a generated fixture tree, removed on drop), [`cold_request`]
//! (one request on a fresh connection), [`watch`] (the server's side of a run),
//! [`measure`] (one measured run), [`progress::tick`] (live counters for a progress
//! line), [`rest`] (the pause between runs) and [`wire::report`] (what the run's bytes
//! travelled over). Nothing here prints: errors
//! are [`HarnessError`], progress goes through callbacks.
#![deny(missing_docs)]

pub mod cold;
pub mod docroot;
pub mod measure;
pub mod progress;
pub mod rest;
pub mod stored;
pub mod watch;
pub mod wire;

use std::path::PathBuf;

use thiserror::Error;

pub use cold::{cold_request, ColdFigures, ColdRequest};
pub use docroot::{DocrootSource, PreparedDocroot, ServedDocroot};
pub use measure::{measure, model_of, Measure, MeasureError, MeasuredRun};
pub use rest::rest;
pub use watch::{fill_machine, scope_of, watch, Watch, Watched};

/// Why the harness could not prepare or watch a run (failed requests are data, never
/// this).
#[derive(Debug, Error)]
pub enum HarnessError {
    /// The private temporary directory could not be made.
    #[error("cannot create a temporary docroot in {path}: {source}")]
    TempDir {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The fixture set could not be generated.
    #[error("cannot generate the fixture docroot: {0}")]
    Fixture(#[from] volley_fixtures::FixtureError),
    /// The monitor could not start (and the caller needs its figures).
    #[error("cannot start the monitor: {0}")]
    Monitor(#[from] volley_monitor::MonitorError),
}
