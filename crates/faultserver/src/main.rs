//! `volley-faultserver`: runs one [`volley_faultserver::FaultServer`] for manual poking
//! (curl, wrk, volley itself) and exits after a bounded time.
//!
//! Usage: `volley-faultserver BEHAVIOUR [--seconds N]`, e.g.
//! `volley-faultserver ok:1024+slow:20+close-after:3 --seconds 30`; or the DAV mode,
//! `volley-faultserver dav[:FAULT] [--record FILE] [--seconds N]`, e.g.
//! `volley-faultserver dav:lost-put:4 --record requests.txt`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use volley_faultserver::{Behaviour, DavFault, DavServer, FaultServer};

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

/// The whole program; its error is the one line `main` prints (a binary, so anyhow).
fn run(args: Vec<String>) -> anyhow::Result<()> {
    let mut behaviour: Option<Behaviour> = None;
    let mut dav: Option<DavFault> = None;
    let mut record: Option<std::path::PathBuf> = None;
    let mut seconds = DEFAULT_SECONDS;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => {
                println!("usage: volley-faultserver BEHAVIOUR [--seconds N (1..={MAX_SECONDS}, default {DEFAULT_SECONDS})]");
                println!("behaviours: ok[:LEN[:close]] chunked[:L1,L2..] interim[:100,103] no-content not-modified");
                println!("  close-delimited[:LEN] stall[:BYTES] reset[:N[:mid]] close-mid-body malformed:KIND slow[:MS]");
                println!("  status:CODE close-after:N[:silent] ignore-close hostile[:huge] bucket:RATE[:BURST] dies:N  (join with +)");
                let kinds: Vec<&str> = volley_faultserver::MalformedKind::ALL
                    .iter()
                    .map(|k| k.name())
                    .collect();
                println!("malformed kinds: {}", kinds.join(", "));
                println!("DAV mode: dav[:none|stale-etag|lost-put[:N]|wrong-sync[:N]|error-5xx[:N]] [--record FILE]");
                return Ok(());
            }
            "--seconds" => {
                let value = args.next().context("--seconds needs a value")?;
                seconds = value
                    .parse()
                    .ok()
                    .filter(|s| (1..=MAX_SECONDS).contains(s))
                    .ok_or_else(|| anyhow!("--seconds must be 1..={MAX_SECONDS}, got `{value}`"))?;
            }
            "--record" => {
                record = Some(args.next().context("--record needs a file")?.into());
            }
            text if behaviour.is_none()
                && dav.is_none()
                && (text == "dav" || text.starts_with("dav:")) =>
            {
                let fault = text.strip_prefix("dav:").unwrap_or("none");
                dav = Some(fault.parse()?);
            }
            text if behaviour.is_none() && dav.is_none() => {
                behaviour = Some(text.parse()?);
            }
            other => bail!("unexpected argument `{other}` (see --help)"),
        }
    }
    if let Some(fault) = dav {
        let server =
            DavServer::start(fault, record.as_deref()).map_err(|e| anyhow!("cannot start: {e}"))?;
        println!("{}", server.url());
        std::thread::sleep(Duration::from_secs(seconds));
        server.shutdown();
        return Ok(());
    }
    if record.is_some() {
        bail!("--record is for the DAV mode (dav[:FAULT])");
    }
    let behaviour = behaviour.context("missing BEHAVIOUR (see --help)")?;
    let server = FaultServer::start(behaviour).map_err(|e| anyhow!("cannot start: {e}"))?;
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
