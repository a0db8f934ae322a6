//! volley-report: renders a run's or a study's report from the results store.
//!
//! Place in the flow: `... -> results store -> **reports**`. Reports read only from the
//! store, so any report can be rebuilt later. [`model::load`] turns
//! a study or run into a plain [`Report`]; the shared tables in [`table`] are built from it
//! once; each format is one [`ReportFormat`] in its own file: [`html::Html`] (one
//! self-contained file: the answer first ([`headline`]), interactive charts
//! ([`interactive`], uPlot vendored in `assets/uplot` and inlined), and the static SVG
//! charts drawn by [`svg`] for print; one colour per target and variant from [`colors`],
//! steps on a time axis from [`timeline`]), [`markdown::Markdown`]
//! (the seeds' tables) and [`json::Json`] (the model itself, versioned).
#![deny(missing_docs)]

pub mod answer;
pub mod colors;
pub mod compare;
pub mod downsample;
mod error;
pub mod headline;
pub mod html;
pub mod interactive;
pub mod json;
pub mod markdown;
pub mod model;
pub mod sanitise;
pub mod svg;
pub mod table;
pub mod timeline;

pub use error::ReportError;
pub use model::{load, Report, Selector, SCHEMA_VERSION};

/// One output format of a stored report. Every format renders the same [`Report`], so
/// formats agree. (Named apart from `volley_metrics::output::Exporter`, which writes
/// runs as they are measured, from their summaries.)
pub trait ReportFormat {
    /// Short name of the format ("html", "markdown", "json").
    fn name(&self) -> &'static str;
    /// The whole document.
    fn render(&self, report: &Report) -> Result<String, ReportError>;
}
