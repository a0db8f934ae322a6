//! volley-metrics: the recorder.
//!
//! Place in the flow: `engine -> samples -> **recorder** -> summary + per-second
//! histograms -> results store / exporters`. The engine hands each worker's [`Recorder`]
//! (a [`volley_engine::Sink`]) one sample per request; after the run the recorders are
//! merged and closed into a [`Summary`], which the exporters in [`output`] print as text
//! (ab + wrk2 style), JSON or CSV. [`label`] decides, per second and per run, whether the
//! server or the generator was the bottleneck; [`repeat`] summarises repeated runs.
#![deny(missing_docs)]

mod error;
pub mod hist;
pub mod label;
pub mod output;
pub mod recorder;
pub mod repeat;
pub mod resources;
pub mod summary;
pub mod wire;

pub use error::MetricsError;
pub use label::{Bound, Verdict};
pub use recorder::{
    ClosedSecond, Counts, Metric, Recorder, RecorderSnapshot, SecondDigest, SecondJoiner,
    SecondResources, SecondStream, StreamedSecond, Warmup, WindowKey,
};
pub use summary::{Model, RunInfo, Summary, SCHEMA_VERSION};
pub use wire::{
    FirstRequest, H2Report, H3Report, HandshakeReport, TlsReport, UdpReport, WireReport,
};
