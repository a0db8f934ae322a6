//! `volley log`: a server's access log read back. `volley log phases FILE` cuts it into
//! phases (intervals with the same set of active client addresses, their edges left
//! out as the injectors' phases do) with each phase's requests, req/s and, when the log
//! has request times, mean and p99 time: the check of any load, volley's or another
//! tool's, against the server's own count.
//!
//! `volley log example FILE` writes the seeded example log (`volley_replay::generate`).
//!
//! Parsing is `volley_replay`; this module resolves the flags, reads the log twice
//! (spans, then figures: bounded memory for any size) and prints.

use crate::cmd::table;
use crate::exit::UsageError;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use volley_replay::generate::{write_site_log, write_site_pages, SiteModel};
use volley_replay::phases::{self, LogPhase};
use volley_replay::{LogError, LogFormat, LogReader, ReaderOptions, Skips};

/// The subcommands of `volley log`.
#[derive(clap::Subcommand)]
pub enum Args {
    /// Cut an access log into phases: intervals with the same set of active client
    /// addresses, each with requests, req/s and (when logged) mean and p99 time.
    Phases(PhasesArgs),
    /// Write an example access log from a seeded model of a site (a day's shape
    /// compressed into the span, bursts, three heavy clients, ~10% 404s), in volley's
    /// Combined layout.
    Example(ExampleArgs),
}

/// Flags of `volley log example`.
#[derive(clap::Args)]
pub struct ExampleArgs {
    /// Where to write the log (`-` for stdout).
    file: PathBuf,
    /// Seed of the model: the same seed writes the same log.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The log's span (a day's shape compressed into it).
    #[arg(long, default_value = "10m", value_parser = volley_units::parse_duration)]
    span: Duration,
    /// Mean requests per second over the span.
    #[arg(long, default_value_t = 50.0, value_parser = positive_rate)]
    rate: f64,
    /// Also write the pages the log asks for into this directory, each of its logged
    /// size, so a server serving it answers the log as logged (a replay's docroot).
    #[arg(long, value_name = "DIR")]
    docroot: Option<PathBuf>,
}

fn positive_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 && r <= 1e6 => Ok(r),
        _ => Err(format!("{s:?} is not a rate in (0, 1000000] req/s")),
    }
}

/// How to read a log: shared by every `volley log` command (and meant for the replay).
#[derive(clap::Args, Debug, Clone)]
pub struct LogReadArgs {
    /// The log's layout: `common`, `combined`, `json`, an nginx `log_format` string
    /// (`$remote_addr [$time_local] "$request" ...`) or an Apache `LogFormat` string
    /// (`%h %t \"%r\" ...`). Default: recognised from the first lines (Combined, Common
    /// or JSON lines).
    #[arg(long, value_parser = LogFormat::parse)]
    pub log_format: Option<LogFormat>,
    /// How far out of order the log's lines may come; an older line is skipped and
    /// counted.
    #[arg(long, default_value = "10s", value_parser = volley_units::parse_duration)]
    pub reorder_window: Duration,
}

impl LogReadArgs {
    /// Opens `path` as these flags say; every failure is a usage error (exit 2).
    pub fn open(&self, path: &Path) -> anyhow::Result<LogReader> {
        let opts = ReaderOptions {
            format: self.log_format.clone(),
            window: self.reorder_window,
        };
        LogReader::open(path, opts).map_err(usage)
    }
}

/// Flags of `volley log phases`.
#[derive(clap::Args)]
pub struct PhasesArgs {
    /// The access log (plain or gzip-compressed).
    file: PathBuf,
    #[command(flatten)]
    read: LogReadArgs,
    /// Client addresses kept apart, in order of first appearance; addresses first seen
    /// past this many are counted together as one client, `others` (said, with their
    /// request count): memory and the cut stay bounded on a log of any number of
    /// addresses.
    #[arg(long, value_name = "N", default_value_t = phases::MAX_CLIENTS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_clients: usize,
    /// Print the phases as JSON instead of a table (with the format, line and request
    /// counts, and the skipped lines by cause).
    #[arg(long)]
    json: bool,
}

/// Runs `volley log`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args {
        Args::Phases(a) => log_phases(a),
        Args::Example(a) => write_example(a),
    }
}

/// A log that cannot be read as asked is the user's to fix: exit 2.
fn usage(e: LogError) -> anyhow::Error {
    UsageError(e.to_string()).into()
}

fn log_phases(a: PhasesArgs) -> anyhow::Result<ExitCode> {
    let mut first = a.read.open(&a.file)?;
    let spans = phases::spans(first.by_ref(), a.max_clients).map_err(usage)?;
    if spans.requests == 0 {
        return Err(UsageError(format!("{}: no requests in the log", a.file.display())).into());
    }
    let ps = phases::phases(&spans, a.read.open(&a.file)?).map_err(usage)?;
    if a.json {
        let skipped: Vec<serde_json::Value> = first
            .skips()
            .iter()
            .map(|(cause, n, lines)| {
                serde_json::json!({"cause": cause.to_string(), "lines": n, "first_lines": lines})
            })
            .collect();
        let out = serde_json::json!({
            "file": a.file.display().to_string(),
            "format": first.format().name(),
            "lines": first.lines(),
            "requests": spans.requests,
            "spread_over_seconds": first.spread(),
            "first_unix_s": spans.first_s,
            "max_clients": spans.max_clients,
            "folded_requests": spans.folded_requests,
            "skipped": skipped,
            "phases": ps,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{}: {} requests from {} lines ({} format){}",
        a.file.display(),
        spans.requests,
        first.lines(),
        first.format().name(),
        if first.spread() {
            "; whole-second timestamps: each second's requests spread evenly over it"
        } else {
            ""
        }
    );
    print_skips(first.skips());
    if spans.folded_requests > 0 {
        println!(
            "{} requests came from addresses first seen after the first {} (--max-clients): \
             counted together as one client, '{}'",
            spans.folded_requests,
            spans.max_clients,
            phases::OTHERS
        );
    }
    println!(
        "seconds count from the log's first, {} (Unix time); seconds in which a client \
         started or stopped are left out of the figures",
        spans.first_s
    );
    print!("{}", table::render(&phase_table(&ps)));
    Ok(ExitCode::SUCCESS)
}

fn write_example(a: ExampleArgs) -> anyhow::Result<ExitCode> {
    let model = SiteModel {
        seed: a.seed,
        span: a.span,
        mean_rate: a.rate,
        ..SiteModel::default()
    };
    if let Some(dir) = &a.docroot {
        write_site_pages(dir)
            .map_err(|e| UsageError(format!("cannot write pages into {}: {e}", dir.display())))?;
    }
    if a.file.as_os_str() == "-" {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        write_site_log(&model, &mut out)?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let file = std::fs::File::create(&a.file)
        .map_err(|e| UsageError(format!("cannot write {}: {e}", a.file.display())))?;
    let mut out = std::io::BufWriter::new(file);
    let lines = write_site_log(&model, &mut out)?;
    out.flush()?;
    eprintln!("wrote {lines} lines to {}", a.file.display());
    Ok(ExitCode::SUCCESS)
}

fn print_skips(skips: &Skips) {
    if skips.total() == 0 {
        return;
    }
    let causes: Vec<String> = skips
        .iter()
        .map(|(cause, n, lines)| {
            let lines: Vec<String> = lines.iter().map(u64::to_string).collect();
            let more = if n > lines.len() as u64 { ", ..." } else { "" };
            format!("{n} {cause} (line {}{more})", lines.join(", "))
        })
        .collect();
    println!("skipped {} lines: {}", skips.total(), causes.join("; "));
}

fn phase_table(ps: &[LogPhase]) -> comfy_table::Table {
    let mut t = table::new([
        "phase", "clients", "from s", "to s", "left out", "seconds", "requests", "req/s",
        "mean ms", "p99 ms",
    ]);
    let opt = |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:.digits$}"));
    for (i, p) in ps.iter().enumerate() {
        t.add_row(vec![
            (i + 1).to_string(),
            clients(&p.clients),
            p.figures.start_s.to_string(),
            p.figures.end_s.to_string(),
            p.figures.left_out_s.len().to_string(),
            p.figures.seconds.to_string(),
            p.figures.requests.to_string(),
            opt(p.figures.rps, 1),
            opt(p.figures.mean_ms, 2),
            opt(p.figures.p99_ms, 2),
        ]);
    }
    table::align_right(&mut t, &[0, 2, 3, 4, 5, 6, 7, 8, 9]);
    t
}

/// `3: 10.0.0.1, 10.0.0.2, 10.0.0.3`, at most three addresses named.
fn clients(c: &[String]) -> String {
    let named: Vec<&str> = c.iter().take(3).map(String::as_str).collect();
    let more = c.len().saturating_sub(3);
    let tail = if more > 0 {
        format!(" +{more}")
    } else {
        String::new()
    };
    format!("{}: {}{tail}", c.len(), named.join(", "))
}
