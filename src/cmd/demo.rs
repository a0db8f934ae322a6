//! `volley demo`: runs the shipped `studies/quick.toml` and then `studies/protocols.toml`
//! (both embedded, so it needs no file) against the built-in server, keeps their store
//! and a self-contained HTML report of each in one directory it names at the end, and
//! prints the commands that read them again. Needs nothing installed; about 45 s here
//! (2-core VM), about a minute on a busy machine.
//!
//! Two studies, not one: a study's managed targets serve either plain HTTP or HTTPS,
//! and the quick study repeats seed 003 exactly (plain HTTP), while the protocols are
//! compared over HTTPS (HTTP/2 by ALPN, HTTP/3 over QUIC on the same port number).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use volley_report::Selector;

use super::hint::{db_flag, quote};
use crate::exit::{usage, Interrupted};

/// The quick study, embedded at build time.
const QUICK: &str = include_str!("../../studies/quick.toml");
/// The protocols study (HTTP/1.1, HTTP/2 and HTTP/3 over HTTPS), embedded at build time.
const PROTOCOLS: &str = include_str!("../../studies/protocols.toml");

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
    #[arg(long, default_value = "1", hide = true, allow_hyphen_values = true,
          value_parser = super::study::scale)]
    scale: f64,
}

/// Runs `volley demo`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let scale = args.scale;
    let quick = super::study::load(QUICK, "studies/quick.toml", scale)?;
    let protocols = super::study::load(PROTOCOLS, "studies/protocols.toml", scale)?;
    let out = out_dir(args.out.as_deref())?;
    // Absolute, so the printed commands work from any directory.
    let db = std::path::absolute(args.db.unwrap_or_else(|| out.join("volley.db")))?;
    print!("{}", quick.describe());
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
    let report = super::study::execute(&quick, QUICK, db.clone(), args.quiet)?;
    let mut complete = report.complete;
    let mut reports = vec![(report.study, out.join("report.html"))];
    if complete {
        println!();
        print!("{}", protocols.describe());
        println!();
        let report = super::study::execute(&protocols, PROTOCOLS, db.clone(), args.quiet)?;
        complete = report.complete;
        reports.push((report.study, out.join("protocols.html")));
    }
    println!("\ndemo results in {}", quote(&out));
    for (study, html) in &reports {
        let selector = Selector::Study(*study);
        match super::report::write_html(&db, selector, html) {
            Ok(()) => println!("  report:  {} (open it in a browser)", quote(html)),
            Err(e) => println!("  report:  not written ({e:#})"),
        }
        println!(
            "  rebuild: volley report {selector}{} --html {}",
            db_flag(&db),
            quote(html)
        );
    }
    println!("  history: volley history{}", db_flag(&db));
    if !complete {
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
