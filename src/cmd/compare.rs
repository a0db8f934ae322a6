//! `volley compare` (being built; see the open issue).

use std::process::ExitCode;

/// Flags of `volley compare`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `volley compare`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'compare' is not built yet")
}
