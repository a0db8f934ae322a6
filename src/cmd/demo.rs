//! `volley demo`: runs the shipped `studies/quick.toml` (embedded, so it needs no file)
//! against the built-in server, keeps its store and a self-contained HTML report in one
//! directory it names at the end, and prints the commands that read them again. Needs
//! nothing installed; about 40 s here (2-core VM), under a minute even on a busy machine.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use volley_report::Selector;

use super::hint::{db_flag, quote};
use crate::exit::{usage, Interrupted};

/// The quick study, embedded at build time.
const QUICK: &str = include_str!("../../studies/quick.toml");

/// Flags of `volley demo`.
#[derive(clap::Args)]
pub struct Args {
    /// Write the store (volley.db) and the report (report.html) into DIR (default: a
    /// new directory under the system's temporary directory, kept afterwards).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Keep the results in this store instead of DIR/volley.db.
    #[arg(long)]
    db: Option<PathBuf>,
    /// No progress bars (they are drawn only on a terminal anyway).
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Multiply durations and request counts (the CLI tests run the demo at 0.1).
    #[arg(long, default_value = "1", hide = true, allow_hyphen_values = true)]
    scale: String,
}

/// Runs `volley demo`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let scale: f64 = match args.scale.trim().parse() {
        Ok(s) if f64::is_finite(s) && s > 0.0 => s,
        _ => usage!("--scale must be a positive number, got '{}'", args.scale),
    };
    let plan = super::study::load(QUICK, "studies/quick.toml", scale)?;
    let out = out_dir(args.out.as_deref())?;
    // Absolute, so the printed commands work from any directory.
    let db = std::path::absolute(args.db.unwrap_or_else(|| out.join("volley.db")))?;
    print!("{}", plan.describe());
    // The generator and the server share this machine with whatever else runs on it: a
    // busy machine shows up as slow seconds and generator-bound steps, and the demo
    // says so rather than blaming the server.
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        println!(
            "machine: load average {} on {cores} core(s). Steps run while other processes wanted the CPU are marked [machine busy]; generator-bound steps never count as the server's figures.",
            load.split_whitespace().next().unwrap_or("?")
        );
    }
    println!();
    let report = super::study::execute(&plan, QUICK, db.clone(), args.quiet)?;
    let html = out.join("report.html");
    let selector = Selector::Study(report.study);
    println!("\ndemo results in {}", quote(&out));
    match super::report::write_html(&db, selector, &html) {
        Ok(()) => println!("  report:  {} (open it in a browser)", quote(&html)),
        Err(e) => println!("  report:  not written ({e:#})"),
    }
    println!(
        "  rebuild: volley report {selector}{} --html {}",
        db_flag(&db),
        quote(&html)
    );
    println!("  history: volley history{}", db_flag(&db));
    if !report.complete {
        // The runner already said what was left undone.
        return Err(Interrupted(String::new()).into());
    }
    Ok(ExitCode::SUCCESS)
}

/// The directory the demo writes into: `dir` (created when missing), or a new
/// `volley-demo-<pid>-<n>` under the system's temporary directory.
fn out_dir(dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(d) = dir {
        if d.exists() && !d.is_dir() {
            usage!("--out {}: not a directory", d.display());
        }
        std::fs::create_dir_all(d)
            .with_context(|| format!("cannot create the demo directory {}", d.display()))?;
        return Ok(std::path::absolute(d)?);
    }
    let base = std::env::temp_dir();
    for n in 0..1000 {
        let d = base.join(format!("volley-demo-{}-{n}", std::process::id()));
        match std::fs::create_dir(&d) {
            Ok(()) => return Ok(std::path::absolute(d)?),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e).with_context(|| format!("cannot create {}", d.display()));
            }
        }
    }
    anyhow::bail!("cannot find a free directory name under {}", base.display())
}
