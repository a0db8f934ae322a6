//! `volley report [RUN_OR_STUDY]`: renders a run's or a study's report from the results
//! store alone (HTML with interactive charts and print SVG, Markdown, JSON), so any
//! report can be rebuilt later. With no run given, the newest study or saved bench run.
//! With no output file named, prints the Markdown to stdout; `--open` writes the HTML
//! (to a temporary file unless `--html` names one) and opens it in the browser.

use crate::exit::UsageError;
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use volley_report::{html::Html, json::Json, markdown::Markdown, ReportFormat, Selector};
use volley_store::Store;

/// Flags of `volley report`.
#[derive(clap::Args)]
pub struct Args {
    /// A run id (see `volley history`), `study:ID` or `study:NAME` for every target of
    /// a study, `study:ID:TARGET` for one of them, or `label:TEXT` for a saved bench
    /// run (default: the newest study or saved bench run in the store).
    #[arg(value_name = "RUN_OR_STUDY")]
    pub what: Option<String>,
    /// The results store.
    #[arg(long, default_value = "volley.db")]
    pub db: PathBuf,
    /// Write the self-contained HTML report (interactive charts, no network) here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the Markdown tables here.
    #[arg(long, value_name = "FILE")]
    pub md: Option<PathBuf>,
    /// Write the JSON report model here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Open the HTML report in the system's browser ($BROWSER, xdg-open or open).
    #[arg(long)]
    pub open: bool,
}

/// Runs `volley report`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let store = open_store(&args.db)?;
    let selector = match &args.what {
        Some(w) => Selector::find(&store, w).map_err(usage)?,
        None => Selector::latest(&store).map_err(usage)?,
    };
    let report = volley_report::load(&store, selector).map_err(|e| {
        if e.is_usage() {
            usage(e)
        } else {
            anyhow::Error::new(e)
        }
    })?;
    // --open needs an HTML file: a temporary one unless --html names it.
    let html = match (&args.html, args.open) {
        (None, true) => Some(std::env::temp_dir().join(format!(
            "volley-report-{}-{}.html",
            selector.to_string().replace(':', "-"),
            std::process::id()
        ))),
        (h, _) => h.clone(),
    };
    let outputs: [(&Option<PathBuf>, &dyn ReportFormat); 3] =
        [(&html, &Html), (&args.md, &Markdown), (&args.json, &Json)];
    if outputs.iter().all(|(path, _)| path.is_none()) {
        print!("{}", Markdown.render(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    for (path, exporter) in outputs {
        if let Some(path) = path {
            write(path, &exporter.render(&report)?, exporter.name())?;
        }
    }
    if let (true, Some(path)) = (args.open, &html) {
        open_in_browser(path);
    }
    Ok(ExitCode::SUCCESS)
}

/// Opens an existing store; a missing one is a mistake in the path (exit 2), never a
/// new empty file.
pub(crate) fn open_store(db: &Path) -> anyhow::Result<Store> {
    if !db.exists() {
        return Err(UsageError(format!(
            "no results store at {} (pass --db PATH)",
            db.display()
        ))
        .into());
    }
    Store::open_read(db).with_context(|| format!("cannot open results store {}", db.display()))
}

/// Writes the HTML report of `selector` from the store at `db` to `path` (`volley demo`).
pub(crate) fn write_html(db: &Path, selector: Selector, path: &Path) -> anyhow::Result<()> {
    let store = open_store(db)?;
    let report = volley_report::load(&store, selector)?;
    std::fs::write(path, Html.render(&report)?)
        .with_context(|| format!("cannot write the html report to {}", path.display()))
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

/// The browser command: `$BROWSER` when set (as `xdg-open` itself honours it), else
/// `open` on macOS, else `xdg-open` when a display is there to show a window on.
fn browser() -> Option<PathBuf> {
    if let Some(b) = std::env::var_os("BROWSER").filter(|b| !b.is_empty()) {
        return Some(PathBuf::from(b));
    }
    let (program, needs_display) = if cfg!(target_os = "macos") {
        ("open", false)
    } else {
        ("xdg-open", true)
    };
    let display = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|d| !d.is_empty()));
    if needs_display && !display {
        return None;
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// Starts the browser on `path` without waiting for it; when there is none, says where
/// the file is instead (the report is written either way, so this is not an error).
fn open_in_browser(path: &Path) {
    let Some(program) = browser() else {
        eprintln!(
            "volley: no browser to open (no $BROWSER, and no xdg-open with a display); open {} yourself",
            path.display()
        );
        return;
    };
    let started = std::process::Command::new(&program)
        .arg(path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match started {
        Ok(mut child) => {
            // xdg-open returns at once, and is reaped here; a browser named by $BROWSER
            // may run until its window closes, and is left running (bounded wait).
            let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while std::time::Instant::now() < until && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            eprintln!(
                "volley: opened {} with {}",
                path.display(),
                program.display()
            );
        }
        Err(e) => eprintln!(
            "volley: cannot start {} ({e}); open {} yourself",
            program.display(),
            path.display()
        ),
    }
}
