//! Exporters: one trait, one file per format, so a new format touches one file.
//!
//! Every exporter prints from [`Summary`] values (and the optional repeat table), never
//! from raw recorder state, so a report can be rebuilt later from stored summaries.

mod csv;
mod json;
mod text;

pub use self::csv::{Csv, CsvSeconds};
pub use self::json::Json;
pub use self::text::Text;

use crate::repeat::RepeatSummary;
use crate::{MetricsError, Summary};
use std::io::Write;

/// Writes runs in one format.
pub trait Exporter {
    /// Writes every run (and, with `--repeat`, the table across runs) to `out`.
    fn export(
        &self,
        runs: &[Summary],
        repeat: Option<&RepeatSummary>,
        out: &mut dyn Write,
    ) -> Result<(), MetricsError>;
}
