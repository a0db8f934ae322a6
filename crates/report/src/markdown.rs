//! Markdown: the answer (`headline`), then the seeds' tables as GitHub pipe tables,
//! for notes and pull requests.

use crate::headline;
use crate::model::Report;
use crate::sanitise::{self, MAX_CHARS};
use crate::table::{self, RowMark, Table};
use crate::{ReportError, ReportFormat};
use std::fmt::Write;

/// The Markdown exporter.
#[derive(Debug, Default, Clone, Copy)]
pub struct Markdown;

/// A cell safe inside a pipe table and on a terminal: no control character, no
/// HTML, link or code span, pipes escaped, cut past [`MAX_CHARS`].
fn cell(s: &str) -> String {
    sanitise::markdown(s, MAX_CHARS)
}

/// Longest note or line of prose before it is cut (notes are ours, but hold names).
const MAX_NOTE_CHARS: usize = 8 * MAX_CHARS;

/// One table as Markdown: heading, note, pipe table. A row whose figures are not the
/// server's gets its label after the first cell, since Markdown has no row styling.
pub fn render_table(t: &Table) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## {}\n", cell(&t.title));
    if !t.note.is_empty() {
        let _ = writeln!(out, "{}\n", sanitise::markdown(&t.note, MAX_NOTE_CHARS));
    }
    let _ = writeln!(
        out,
        "| {} |",
        t.headers
            .iter()
            .map(|h| cell(h))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(
        out,
        "|{}|",
        t.headers
            .iter()
            .map(|_| "---")
            .collect::<Vec<_>>()
            .join("|")
    );
    for (mark, row) in &t.rows {
        let mut cells: Vec<String> = row.iter().map(|c| cell(c)).collect();
        if let RowMark::NotServer(why) = mark {
            if let Some(first) = cells.first_mut() {
                first.push_str(&format!(" ({why})"));
            }
        }
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out.push('\n');
    out
}

impl ReportFormat for Markdown {
    fn name(&self) -> &'static str {
        "markdown"
    }

    fn render(&self, report: &Report) -> Result<String, ReportError> {
        let mut out = format!("# volley report: {}\n\n", cell(&report.title));
        // The answer first, the same sentence as the HTML's and the study's end table's.
        let answer = sanitise::markdown(&headline::answer(report), MAX_NOTE_CHARS);
        let _ = writeln!(out, "**{answer}**\n");
        for (line, t) in headline::lines(report).iter().zip(&report.targets) {
            let _ = writeln!(out, "- {}", sanitise::markdown(line, MAX_NOTE_CHARS));
            for k in headline::knob_lines(t) {
                let _ = writeln!(out, "  - {}", sanitise::markdown(&k, MAX_NOTE_CHARS));
            }
        }
        out.push('\n');
        for t in &report.targets {
            let _ = writeln!(
                out,
                "- run {} {} ({}, {} steps): {}",
                t.run_id,
                sanitise::code_span(&t.target, MAX_CHARS),
                cell(&t.status),
                t.steps.len(),
                if t.latency_definitions.is_empty() {
                    "latency definition not recorded".to_string()
                } else {
                    sanitise::markdown(&t.latency_definitions.join("; "), MAX_NOTE_CHARS)
                }
            );
            for s in &t.searches {
                let _ = writeln!(
                    out,
                    "  - {}: {}",
                    cell(&s.group),
                    sanitise::markdown(&s.summary_line(), MAX_NOTE_CHARS)
                );
            }
        }
        out.push('\n');
        for t in table::all(report) {
            out.push_str(&render_table(&t));
        }
        Ok(out)
    }
}
