//! JSON: one document per invocation, fields documented in docs/bench-json.md.

use super::Exporter;
use crate::repeat::RepeatSummary;
use crate::{MetricsError, Summary, SCHEMA_VERSION};
use serde::Serialize;
use std::io::Write;

/// The JSON exporter.
#[derive(Debug, Default, Clone, Copy)]
pub struct Json;

#[derive(Serialize)]
struct Document<'a> {
    schema_version: u32,
    tool: &'static str,
    tool_version: &'static str,
    runs: &'a [Summary],
    repeat: Option<&'a RepeatSummary>,
}

impl Exporter for Json {
    fn export(
        &self,
        runs: &[Summary],
        repeat: Option<&RepeatSummary>,
        out: &mut dyn Write,
    ) -> Result<(), MetricsError> {
        let doc = Document {
            schema_version: SCHEMA_VERSION,
            tool: "volley",
            tool_version: env!("CARGO_PKG_VERSION"),
            runs,
            repeat,
        };
        let w = |source| MetricsError::Write {
            format: "json",
            source,
        };
        serde_json::to_writer_pretty(&mut *out, &doc).map_err(|e| w(std::io::Error::other(e)))?;
        writeln!(out).map_err(w)
    }
}
