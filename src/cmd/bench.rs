//! `volley bench` (being built; see the open issue).

use std::process::ExitCode;

/// Flags of `volley bench`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `volley bench`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'bench' is not built yet")
}
