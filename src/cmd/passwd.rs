//! `volley passwd NAME`: one line of a `volley serve --users` file, `NAME:HASH`, for the
//! password read from the first line of stdin (so it never shows in `ps` or a shell
//! history). bcrypt, because it needs 4 KiB per verification where argon2's
//! recommended settings need 19 MiB, more than a pocket server's whole memory cap.

use crate::exit::usage;
use anyhow::Context;
use std::io::BufRead;
use std::process::ExitCode;

/// Flags of `volley passwd`.
#[derive(clap::Args)]
pub struct Args {
    /// The account name (1-64 of A-Z a-z 0-9 . _ -, not starting with '.').
    name: String,
    /// bcrypt cost (4-31); each step doubles the work of every verification.
    #[arg(long, default_value_t = 10)]
    cost: u32,
}

/// Runs `volley passwd`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !volley_dav::auth::valid_name(&args.name) {
        usage!(
            "user name {:?} must be 1-64 of A-Z a-z 0-9 . _ - and not start with '.'",
            args.name
        );
    }
    if !(4..=31).contains(&args.cost) {
        usage!("--cost {} is outside 4-31", args.cost);
    }
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("reading the password from stdin")?;
    let password = line.trim_end_matches(['\r', '\n']);
    if password.is_empty() {
        usage!("no password on stdin");
    }
    let hash = volley_dav::auth::hash_password(password.as_bytes(), args.cost)
        .context("hashing the password")?;
    println!("{}:{hash}", args.name);
    Ok(ExitCode::SUCCESS)
}
