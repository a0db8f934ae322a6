//! `volley fixtures NAME DIR [--seed S]`: write a deterministic fixture set.
//!
//! Prints one line per file (`SIZE SHA256 PATH`) so a study log records exactly what
//! was served; calendar directories of the groupware set are marked as CalDAV
//! collections here, the one place that knows both crates.

use crate::exit::usage;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use volley_fixtures::Fixture;

/// Flags of `volley fixtures`.
#[derive(clap::Args)]
pub struct Args {
    /// Set to write: uniserve, sizes or groupware.
    name: String,
    /// Directory to write into (created if missing).
    dir: PathBuf,
    /// Seed: the same seed gives the same bytes.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// groupware: number of users (one calendar each).
    #[arg(long, default_value_t = 10)]
    users: u32,
    /// groupware: items per calendar.
    #[arg(long, default_value_t = 100)]
    items: u32,
}

/// Runs `volley fixtures`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let kind = match args.name.as_str() {
        "uniserve" => Fixture::Uniserve,
        "sizes" => Fixture::Sizes,
        "site" => Fixture::Site,
        "groupware" => Fixture::Groupware {
            users: args.users,
            items: args.items,
        },
        other => {
            usage!("unknown fixture set {other:?} (expected uniserve, sizes, site or groupware)")
        }
    };
    if args.dir.exists() && !args.dir.is_dir() {
        usage!("{} exists and is not a directory", args.dir.display());
    }
    let manifest = volley_fixtures::generate(&kind, &args.dir, args.seed)?;
    for rel in &manifest.calendars {
        let dir = args.dir.join(rel);
        let name = rel.trim_end_matches('/').replace('/', " ");
        volley_dav::make_calendar(&dir, &name)
            .map_err(|e| anyhow::anyhow!("marking {} as a calendar: {e}", dir.display()))?;
    }
    let mut out = std::io::stdout().lock();
    for f in &manifest.files {
        writeln!(out, "{:>8} {} {}", f.size, f.sha256, f.path)?;
    }
    let total: u64 = manifest.files.iter().map(|f| f.size).sum();
    writeln!(
        out,
        "{} files, {} bytes, seed {}, in {}",
        manifest.files.len(),
        total,
        args.seed,
        args.dir.display()
    )?;
    Ok(ExitCode::SUCCESS)
}
