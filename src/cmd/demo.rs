//! `volley demo`: runs the shipped `studies/quick.toml` (embedded, so it needs no file)
//! against the built-in server and prints the results table. Needs nothing installed;
//! about 40 s here (2-core VM), under a minute even on a busy machine.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::exit::Interrupted;

/// The quick study, embedded at build time.
const QUICK: &str = include_str!("../../studies/quick.toml");

/// Flags of `volley demo`.
#[derive(clap::Args)]
pub struct Args {
    /// Keep the results in this store (default: a temporary one, removed afterwards).
    #[arg(long)]
    db: Option<PathBuf>,
}

/// Runs `volley demo`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let plan = super::study::load(QUICK, "studies/quick.toml", 1.0)?;
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
    let (db, temporary) = match args.db {
        Some(p) => (p, false),
        None => (
            std::env::temp_dir().join(format!("volley-demo-{}.db", std::process::id())),
            true,
        ),
    };
    let result = super::study::execute(&plan, QUICK, db.clone());
    if temporary {
        for suffix in ["", "-wal", "-shm"] {
            let mut p = db.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
    } else {
        println!(
            "results kept in {} (volley history --db {})",
            db.display(),
            db.display()
        );
    }
    if !result?.complete {
        // The runner already said what was left undone.
        return Err(Interrupted(String::new()).into());
    }
    Ok(ExitCode::SUCCESS)
}
