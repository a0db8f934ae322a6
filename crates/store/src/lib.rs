//! volley-store: the SQLite results store: studies, runs, steps, series and histograms.
//!
//! Place in the flow: the recorder's summaries, per-second series and HDR histograms,
//! plus the analysis verdicts, are written here after every step; reports read only from
//! here, so any report can be rebuilt later. The store does not depend
//! on the recorder or analysis crates: summaries and verdicts are `serde_json::Value`s and
//! histograms opaque HdrHistogram V2 bytes.
//!
//! Layout: `studies` 1-n `runs` 1-n `steps` 1-n (`series`, `histograms`), and
//! `runs` 1-n `capacities` (one row per capacity search, [`Store::record_capacity`]), and
//! `runs` 1-n `injector_seconds` (each injector's own seconds of a step with several
//! injectors, written as they arrive: [`Store::record_injector_second`]), and `live_seconds`
//! (a running step's seconds as they close, [`Store::record_live_second`], moved into the
//! step when it is recorded). A step and its
//! series and histograms are written in one transaction ([`Store::record_step`]), so a
//! killed process leaves whole steps or none, and every step written is durable when the
//! call returns. Runs a killed writer left 'running' are marked incomplete on the next
//! open.
#![deny(missing_docs)]

mod error;
mod injectors;
mod live;
mod owner;
mod schema;
mod store;
mod types;

pub use error::{Result, StoreError};
pub use injectors::InjectorSecond;
pub use live::LiveSecond;
pub use schema::SCHEMA_VERSION;
pub use store::{Abandoned, Store};
pub use types::{
    CapacityId, CapacityRecord, CapacityRow, HistogramBlob, HistogramKind, NewRun, NewStudy, RunId,
    RunKind, RunRow, SearchEnd, SeriesPoint, SeriesSource, Status, StepId, StepParameters,
    StepRecord, StepRow, StudyId, StudyRow,
};
