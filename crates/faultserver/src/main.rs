//! `volley-faultserver`: runs one [`volley_faultserver::FaultServer`] for manual poking
//! (curl, wrk, volley itself) and exits after a bounded time.
//!
//! Usage: `volley-faultserver BEHAVIOUR [--seconds N]`, e.g.
//! `volley-faultserver ok:1024+slow:20+close-after:3 --seconds 30`.

use std::process::ExitCode;
use std::time::Duration;

use volley_faultserver::{Behaviour, FaultServer};

/// Default and largest run time: the server must never outlive a forgotten terminal.
const DEFAULT_SECONDS: u64 = 60;
const MAX_SECONDS: u64 = 3600;

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("volley-faultserver: {message}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Vec<String>) -> Result<(), String> {
    let mut behaviour: Option<Behaviour> = None;
    let mut seconds = DEFAULT_SECONDS;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => {
                println!("usage: volley-faultserver BEHAVIOUR [--seconds N (1..={MAX_SECONDS}, default {DEFAULT_SECONDS})]");
                println!("behaviours: ok[:LEN[:close]] chunked[:L1,L2..] interim[:100,103] no-content not-modified");
                println!("  close-delimited[:LEN] stall[:BYTES] reset[:N[:mid]] close-mid-body malformed:KIND slow[:MS]");
                println!("  status:CODE close-after:N[:silent] ignore-close bucket:RATE[:BURST] dies:N  (join with +)");
                let kinds: Vec<&str> = volley_faultserver::MalformedKind::ALL
                    .iter()
                    .map(|k| k.name())
                    .collect();
                println!("malformed kinds: {}", kinds.join(", "));
                return Ok(());
            }
            "--seconds" => {
                let value = args.next().ok_or("--seconds needs a value")?;
                seconds = value
                    .parse()
                    .ok()
                    .filter(|s| (1..=MAX_SECONDS).contains(s))
                    .ok_or(format!(
                        "--seconds must be 1..={MAX_SECONDS}, got `{value}`"
                    ))?;
            }
            text if behaviour.is_none() => {
                behaviour = Some(text.parse().map_err(|e| format!("{e}"))?);
            }
            other => return Err(format!("unexpected argument `{other}` (see --help)")),
        }
    }
    let behaviour = behaviour.ok_or("missing BEHAVIOUR (see --help)")?;
    let server = FaultServer::start(behaviour).map_err(|e| format!("cannot start: {e}"))?;
    println!("{}", server.url("/"));
    // Poll rather than sleep once, so a server that `dies` ends the process too.
    let deadline = std::time::Instant::now() + Duration::from_secs(seconds);
    while std::time::Instant::now() < deadline && !server.is_stopped() {
        std::thread::sleep(Duration::from_millis(100));
    }
    let stats = server.shutdown();
    println!(
        "stopped: {} connections, {} requests",
        stats.connections, stats.requests
    );
    Ok(())
}
