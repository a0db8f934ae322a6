//! volley-study: runs a whole study from one file and keeps every step in the store.
//!
//! Place in the flow: `study file -> **spec** (parsed) -> **plan** (steps, order) ->
//! **runner**: targets started (volley-targets), each step loaded by the engine into
//! recorders (volley-metrics) with the monitor beside it, judged (volley-analysis) and
//! written to the results store (volley-store) the moment it ends -> **outcome** (the
//! capacity per target, the USL fit). A/B comparison of stored runs lives beside the
//! other store readers, in `volley_report::compare`.
//!
//! The binary's `volley study run` is a thin shell over this crate; `volley demo` runs the shipped `studies/quick.toml`.
#![deny(missing_docs)]

mod deploy;
mod effects;
mod error;
mod injected;
mod lab;
mod office_step;
pub mod outcome;
pub mod plan;
pub mod runner;
pub mod spec;
mod step;

pub use error::StudyError;
pub use office_step::{run_info as office_run_info, LeadInCost};
pub use plan::{resolve, Plan};
pub use runner::{run, Progress, RunOptions, StepTick, StudyReport};
pub use spec::parse;
