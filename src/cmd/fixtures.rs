//! `volley fixtures` (being built; see the open issue).

use std::process::ExitCode;

/// Flags of `volley fixtures`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `volley fixtures`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'fixtures' is not built yet")
}
