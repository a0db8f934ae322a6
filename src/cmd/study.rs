//! `volley study` (being built; see the open issue).

use std::process::ExitCode;

/// Flags of `volley study`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `volley study`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'study' is not built yet")
}
