//! volley-engine: the load generator.
//!
//! Place in the flow: `plan/CLI -> **engine** -> samples -> recorder (volley-metrics)`.
//! The engine turns a [`LoadConfig`] into requests on the wire and hands one [`Sample`]
//! per request to a per-thread [`Sink`]. It knows nothing of histograms or reports; the
//! recorder that implements [`Sink`] lives downstream.
#![deny(missing_docs)]

pub mod config;
pub mod sample;

pub use config::*;
pub use sample::*;
