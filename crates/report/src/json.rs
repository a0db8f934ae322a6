//! JSON: the report model itself, with `schema_version`, for other tools.

use crate::model::Report;
use crate::{ReportError, ReportFormat};

/// The JSON exporter (pretty-printed).
#[derive(Debug, Default, Clone, Copy)]
pub struct Json;

impl ReportFormat for Json {
    fn name(&self) -> &'static str {
        "json"
    }

    fn render(&self, report: &Report) -> Result<String, ReportError> {
        let mut s = serde_json::to_string_pretty(report)?;
        s.push('\n');
        Ok(s)
    }
}
