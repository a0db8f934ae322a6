//! `volley targets` (being built; see the open issue).

use std::process::ExitCode;

/// Flags of `volley targets`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `volley targets`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'targets' is not built yet")
}
