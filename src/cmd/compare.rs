//! `volley compare A B`: medians of two runs' steps with bootstrap CIs, and the A/B ratio
//! with its CI, from the results store alone.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use volley_report::compare::{compare, Metric};
use volley_store::Store;

use crate::exit::usage;

/// Flags of `volley compare`.
#[derive(clap::Args)]
pub struct Args {
    /// Run A: a run id or study:target.
    a: String,
    /// Run B: a run id or study:target.
    b: String,
    /// Results store (SQLite).
    #[arg(long, default_value = "volley.db")]
    db: PathBuf,
    /// rps or p99.
    #[arg(long, default_value = "rps")]
    metric: String,
}

/// Runs `volley compare`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Some(metric) = Metric::parse(&args.metric) else {
        usage!("--metric must be rps or p99, got '{}'", args.metric);
    };
    if !args.db.exists() {
        usage!(
            "no results store at {} (run a study or pass --db)",
            args.db.display()
        );
    }
    let store =
        Store::open(&args.db).with_context(|| format!("cannot open {}", args.db.display()))?;
    // Runs whose writer was killed (kill -9, power loss) are still 'running': mark them.
    store.mark_incomplete_on_open()?;
    match compare(&store, &args.a, &args.b, metric) {
        Ok(c) => println!("{c}"),
        Err(volley_report::ReportError::Compare(m)) => usage!("{m}"),
        Err(e) => return Err(e.into()),
    }
    Ok(ExitCode::SUCCESS)
}
