//! `volley demo` (being built; see the open issue).

use std::process::ExitCode;

/// Flags of `volley demo`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `volley demo`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'demo' is not built yet")
}
