//! `volley serve` (being built; see the open issue).

use std::process::ExitCode;

/// Flags of `volley serve`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `volley serve`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'serve' is not built yet")
}
