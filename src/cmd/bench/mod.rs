//! `volley bench`: one load test against one host, ab's and wrk2's figures, and a
//! verdict on whether the server or the generator was the limit.
//!
//! Pipeline: raw flags ([`Args`]: the load's, src/cmd/bench/load.rs, and the managed
//! targets', src/cmd/bench/target.rs) -> with `--target`, `target` runs the load
//! against each server it starts; otherwise [`run_url`]: `load::resolve` (every
//! mistake a usage error, exit 2) -> the cold request and pre-flight -> `run_once` per
//! repeat (the harness's `measure`) -> exporters (text, JSON, CSV). Runs that measure
//! nothing useful exit 1 with one line; Ctrl-C exits 130 after printing what was
//! measured.

pub mod caldav;
pub mod load;
pub mod replay;
pub mod save;
pub mod target;
pub mod wire;

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use volley_metrics::output::{Csv, CsvSeconds, Exporter, Json, Text};
use volley_metrics::{repeat, Summary};

use self::caldav::CaldavArgs;
use self::load::{describe_errors, server_trouble, LoadArgs, LoadSpec};
use self::save::{Extras, SaveArgs, Saver};
use self::target::TargetArgs;
use crate::exit::{Interrupted, UsageError};

/// Flags of `volley bench`, as typed.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// The load: URL, counts, rates, requests, outputs, TLS/HTTP/2 (src/cmd/bench/load.rs).
    #[command(flatten)]
    pub load: LoadArgs,
    /// Managed targets (`--target nginx ...`, caps, pinning, monitor): src/cmd/bench/target.rs.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Keeping the run in the results store (`--save`): src/cmd/bench/save.rs.
    #[command(flatten)]
    pub save: SaveArgs,
    /// The CalDAV office workload (`--caldav USERS`): src/cmd/bench/caldav.rs.
    #[command(flatten)]
    pub caldav: CaldavArgs,
    /// Replaying an access log (`--replay FILE`): src/cmd/bench/replay.rs.
    #[command(flatten)]
    pub replay: replay::ReplayArgs,
}

/// Where results go, and what is printed.
struct Outputs {
    json: Option<String>,
    csv: Option<PathBuf>,
    csv_seconds: Option<PathBuf>,
    /// The text report on stdout (not with -q, nor with JSON on stdout).
    text: bool,
    /// The progress bar (stderr is a terminal, not -q).
    progress: bool,
}

impl Outputs {
    fn of(a: &LoadArgs) -> Self {
        Outputs {
            json: a.json.clone(),
            csv: a.csv.clone(),
            csv_seconds: a.csv_seconds.clone(),
            text: !a.quiet && !a.stdout_taken(),
            progress: super::progress::wanted(a.quiet),
        }
    }
}

/// Runs `volley bench`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    check_outputs(&args.load)?;
    if args.caldav.is_set() {
        return caldav::run(args.caldav, args.load, &args.target, &args.save);
    }
    if args.replay.is_set() {
        return replay::run(args.load, args.replay, args.target, args.save);
    }
    if args.target.is_set() {
        return target::run(args.load, args.target, args.save, None);
    }
    run_url(args.load, args.save)
}

/// `volley bench URL`: the load against a server volley did not start, `--repeat`
/// times, each run printed and written as it ends.
fn run_url(a: LoadArgs, save: SaveArgs) -> anyhow::Result<ExitCode> {
    let out = Outputs::of(&a);
    let (repeats, cooldown) = (a.repeat as usize, a.cooldown);
    let mut spec = load::resolve(&a)?;
    let mut first = preflight(&mut spec)?;
    let interrupted = on_ctrl_c(&spec.cfg.stop_flag);
    let environment = serde_json::to_value(volley_targets::Environment::capture())?;
    let url = spec.url.clone();
    let mut saver = Saver::begin(&save, &url, &spec, environment)?;
    let text = Text::default();
    let mut runs: Vec<Summary> = Vec::with_capacity(repeats);
    for k in load::repeats(repeats, cooldown, &interrupted) {
        let ran = load::run_once(
            &spec,
            &interrupted,
            out.progress,
            load::Keep::live(saver.as_ref()),
        )?;
        if let Some(refused) = spec.take_refusal() {
            // Stopped at its first answers: nothing was measured, so the saved run
            // (and the seconds it stored) goes too; history never lists it.
            if let Some(s) = saver.take() {
                s.discard()?;
            }
            return Err(refused);
        }
        let mut summary = ran.summary;
        summary.first_request = first.take();
        if summary.requests.ok == 0 {
            // A run whose every answer failed is a result too (a server answering 503
            // to everything): stored whole, errors by kind included, so `volley report`
            // shows what the server did. Still exit 1: nothing succeeded.
            if let Some(mut s) = saver.take() {
                s.step(&spec, &summary, ran.histograms, Extras::default())?;
                eprintln!(
                    "volley: {}",
                    s.finish(!interrupted.load(Ordering::Relaxed))?
                );
            }
            return Err(nothing_succeeded(&spec, &summary, &out, &text));
        }
        if let Some(s) = saver.as_mut() {
            s.step(&spec, &summary, ran.histograms, Extras::default())?;
        }
        show_run(&out, &text, repeats, k, &summary)?;
        runs.push(summary);
        write_files(&out, &runs, None, false)?;
    }
    let rep = (runs.len() > 1).then(|| repeat::summarise(&runs));
    if out.text {
        if let Some(r) = &rep {
            text.export(&[], Some(r), &mut std::io::stdout().lock())?;
        }
    }
    write_files(&out, &runs, rep.as_ref(), true)?;
    if let Some(s) = saver {
        eprintln!(
            "volley: {}",
            s.finish(!interrupted.load(Ordering::Relaxed))?
        );
    }
    if interrupted.load(Ordering::Relaxed) {
        return Err(Interrupted("interrupted; printed what was measured".into()).into());
    }
    Ok(ExitCode::SUCCESS)
}

/// Before the first run: the target answers a connect, the load is prepared (with its
/// cold request, when asked), and the path check is armed. The path check
/// (docs/methodology.md, "Validation before measurement") sends no request of its own,
/// so the server's log counts exactly the run's requests: the cold request's answer
/// when `--first-request` sent one, else the first run's own first answer to each
/// request, which ends that run at once when it refuses it.
fn preflight(spec: &mut LoadSpec) -> anyhow::Result<Option<volley_metrics::FirstRequest>> {
    let addr = spec.cfg.addr;
    let h3 = matches!(spec.wire.wire.http, volley_engine::HttpVersion::H3 { .. });
    let refused = if h3 { probe_udp(addr) } else { probe(addr) };
    if let Some(why) = refused {
        bail!("no request succeeded: cannot connect to {addr} ({why}); nothing was measured");
    }
    let first = spec.prepare()?;
    spec.check_cold(first.as_ref())?;
    spec.check_first_answers();
    Ok(first)
}

/// Ctrl-C stops the load (what was measured is still printed) instead of killing the
/// process; if a handler cannot be installed, Ctrl-C simply kills it as usual.
fn on_ctrl_c(stop: &Arc<AtomicBool>) -> Arc<AtomicBool> {
    let interrupted = Arc::new(AtomicBool::new(false));
    let stop = Arc::clone(stop);
    let flag = Arc::clone(&interrupted);
    let _ = ctrlc::set_handler(move || {
        flag.store(true, Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
    });
    interrupted
}

/// One run's report: ab's text (with its number among repeats), or with the text off
/// only the lines that say the server was in trouble or the run mostly failed.
fn show_run(
    out: &Outputs,
    text: &Text,
    repeats: usize,
    k: usize,
    summary: &Summary,
) -> anyhow::Result<()> {
    if out.text {
        if repeats > 1 {
            println!("=== run {} of {} ===", k + 1, repeats);
        }
        text.export(
            std::slice::from_ref(summary),
            None,
            &mut std::io::stdout().lock(),
        )?;
        println!();
    } else {
        for line in server_trouble(summary)
            .into_iter()
            .chain(summary.mostly_failed())
        {
            eprintln!("volley: {line}");
        }
    }
    Ok(())
}

/// The error of a run in which no request succeeded, naming why; the responses that
/// did come back (all rejected) are printed first.
fn nothing_succeeded(spec: &LoadSpec, s: &Summary, out: &Outputs, text: &Text) -> anyhow::Error {
    let addr = spec.cfg.addr;
    let mut line = format!(
        "no request succeeded: {}",
        wire::explain_failures(s, describe_errors(s), &spec.host)
    );
    if s.errors["connect"] > 0 {
        if let Some(why) = probe(addr) {
            line.push_str(&format!(" ({why})"));
        }
    }
    // TLS failures, like connect errors, leave no response to show.
    let no_response = s.errors["connect"] + s.errors["tls"];
    if out.text && s.requests.completed > no_response {
        // Some responses came back (all rejected): show what they were.
        let mut stdout = std::io::stdout().lock();
        if let Err(e) = text.export(std::slice::from_ref(s), None, &mut stdout) {
            return e.into();
        }
    }
    anyhow::anyhow!("{line} to {addr}")
}

/// Why a TCP connect to `addr` fails right now, in a few words; `None` if it succeeds.
fn probe(addr: SocketAddr) -> Option<String> {
    match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
        Ok(_) => None,
        Err(e) => Some(match e.kind() {
            std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
            std::io::ErrorKind::TimedOut => "connect timed out".into(),
            _ => e.to_string(),
        }),
    }
}

/// `--h3`'s probe: one byte over UDP. A port nobody listens on answers with an ICMP
/// port unreachable, which a connected socket reports as ECONNREFUSED on the next
/// read; a QUIC server drops the byte silently, so silence (up to 300 ms) passes and
/// the run's own handshakes say the rest (timeouts, TLS alerts).
fn probe_udp(addr: SocketAddr) -> Option<String> {
    let any: SocketAddr = if addr.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let refused = || "nothing listens on UDP there: the server offers no HTTP/3".to_string();
    let sock = std::net::UdpSocket::bind(any).ok()?;
    sock.connect(addr).ok()?;
    sock.set_read_timeout(Some(Duration::from_millis(300)))
        .ok()?;
    match sock.send(&[0]) {
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Some(refused()),
        _ => {}
    }
    let mut buf = [0u8; 64];
    match sock.recv(&mut buf) {
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Some(refused()),
        _ => None,
    }
}

/// Fails at once, with one line, when a file asked for with `--json`, `--csv` or
/// `--csv-seconds` cannot be written (no such directory, a directory, no
/// permission), rather than after the run has run: a long run without `--save` has
/// no other record, and learning of a typo in its path at the end loses it. A file
/// that did not exist is created to find out and removed again, so a run that
/// fails later leaves no empty file behind; an existing one is opened without
/// truncating it, so it keeps its content until the run writes it.
fn check_outputs(a: &LoadArgs) -> Result<(), UsageError> {
    let paths = [
        a.json.as_deref().map(Path::new),
        a.csv.as_deref(),
        a.csv_seconds.as_deref(),
    ];
    for p in paths.into_iter().flatten() {
        if p == Path::new("-") {
            continue;
        }
        let existed = std::fs::symlink_metadata(p).is_ok();
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(p)
            .map_err(|e| UsageError(format!("cannot write {}: {e}", p.display())))?;
        if !existed {
            let _ = std::fs::remove_file(p);
        }
    }
    Ok(())
}

/// Writes `runs` with `exporter` to `path` ("-" = stdout).
fn export_to(
    exporter: &dyn Exporter,
    path: &str,
    runs: &[Summary],
    rep: Option<&repeat::RepeatSummary>,
) -> anyhow::Result<()> {
    if path == "-" {
        let stdout = std::io::stdout();
        let mut lock = stdout.lock();
        exporter.export(runs, rep, &mut lock)?;
        return Ok(());
    }
    let mut buf = Vec::new();
    exporter.export(runs, rep, &mut buf)?;
    std::fs::write(path, buf).with_context(|| format!("cannot write {path}"))
}

/// Writes the files asked for. Called after every run (hyperfine's habit: a later run
/// that fails must not lose the earlier ones: a file is rewritten whole each time);
/// stdout ('-') only once, at the end, since what is printed cannot be rewritten.
fn write_files(
    out: &Outputs,
    runs: &[Summary],
    rep: Option<&repeat::RepeatSummary>,
    last: bool,
) -> anyhow::Result<()> {
    let csv = out.csv.as_ref().map(|p| p.to_string_lossy());
    let csv_seconds = out.csv_seconds.as_ref().map(|p| p.to_string_lossy());
    let outputs: [(&dyn Exporter, Option<&str>); 3] = [
        (&Json, out.json.as_deref()),
        (&Csv, csv.as_deref()),
        (&CsvSeconds, csv_seconds.as_deref()),
    ];
    for (exporter, path) in outputs {
        match path {
            Some(p) if p != "-" || last => export_to(exporter, p, runs, rep)?,
            _ => {}
        }
    }
    Ok(())
}
