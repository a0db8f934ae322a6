//! `volley demo`: runs the shipped `studies/quick.toml` (embedded, so it needs no file)
//! against the built-in server and prints the results table. Needs nothing installed;
//! about 35 s here.

use std::path::PathBuf;
use std::process::ExitCode;

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
    let report = result?;
    Ok(if report.complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(130)
    })
}
