//! `volley report RUN_OR_STUDY`: renders a run's or a study's report from the results
//! store alone (HTML with inline SVG charts, Markdown, JSON), so any report can be
//! rebuilt later. With no output file named, prints the Markdown to stdout.

use crate::exit::UsageError;
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use volley_report::{html::Html, json::Json, markdown::Markdown, ReportFormat, Selector};
use volley_store::Store;

/// Flags of `volley report`.
#[derive(clap::Args)]
pub struct Args {
    /// A run id (see `volley history`) or `study:ID` for every target of a study.
    #[arg(value_name = "RUN_OR_STUDY")]
    pub what: String,
    /// The results store.
    #[arg(long, default_value = "volley.db")]
    pub db: PathBuf,
    /// Write the self-contained HTML report (inline SVG charts) here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the Markdown tables here.
    #[arg(long, value_name = "FILE")]
    pub md: Option<PathBuf>,
    /// Write the JSON report model here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// Runs `volley report`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let selector = Selector::parse(&args.what).map_err(usage)?;
    // Store::open would create an empty file: a missing store is a mistake in the path.
    if !args.db.exists() {
        return Err(UsageError(format!(
            "no results store at {} (pass --db PATH)",
            args.db.display()
        ))
        .into());
    }
    let store = Store::open(&args.db)
        .with_context(|| format!("cannot open results store {}", args.db.display()))?;
    let report = volley_report::load(&store, selector).map_err(|e| {
        if e.is_usage() {
            usage(e)
        } else {
            anyhow::Error::new(e)
        }
    })?;
    let outputs: [(&Option<PathBuf>, &dyn ReportFormat); 3] = [
        (&args.html, &Html),
        (&args.md, &Markdown),
        (&args.json, &Json),
    ];
    if outputs.iter().all(|(path, _)| path.is_none()) {
        print!("{}", Markdown.render(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    for (path, exporter) in outputs {
        if let Some(path) = path {
            write(path, &exporter.render(&report)?, exporter.name())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn usage(e: volley_report::ReportError) -> anyhow::Error {
    UsageError(e.to_string()).into()
}

fn write(path: &Path, text: &str, format: &str) -> anyhow::Result<()> {
    std::fs::write(path, text)
        .with_context(|| format!("cannot write the {format} report to {}", path.display()))?;
    eprintln!("volley: wrote {format} report to {}", path.display());
    Ok(())
}
