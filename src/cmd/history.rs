//! `volley history` (being built; see the open issue).

use std::process::ExitCode;

/// Flags of `volley history`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `volley history`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'history' is not built yet")
}
