//! `volley report` (being built; see the open issue).

use std::process::ExitCode;

/// Flags of `volley report`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `volley report`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'report' is not built yet")
}
