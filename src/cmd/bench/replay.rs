//! `volley bench --replay access.log URL`: a server's access log replayed against URL at
//! its logged instants (open loop: latency from each request's logged instant, scaled
//! by `--speed`), each logged client on its own connection in its own order, then the
//! fidelity report (send lag against the log's schedule, statuses, body sizes, each
//! path group's latency beside the logged request time).
//!
//! Pipeline: the flags ([`ReplayArgs`]) -> a first pass over the log (`plan_log`:
//! every bad input is one line, exit 2, before any load; it also gives the schedule's
//! span and mean rate) -> [`Replay`] -> the load's flags resolved as for any URL (or,
//! with `--target`, at each server `target::run` starts), then made a scheduled load
//! over `volley_replay::source::ReplayFactory` by [`Replay::aim`] -> `--repeat`
//! measured runs (`load::run_once`), each saved with `--save` -> the summary and the
//! fidelity of each run, as text or in `--json`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use volley_engine::{LoadModel, StatusRange, StopCondition};
use volley_metrics::output::{Exporter, Json, Text};
use volley_metrics::{repeat, Summary};
use volley_replay::fidelity::FidelityReport;
use volley_replay::schedule::{PlanCounts, Planner, ReplayOptions, StatusMatch, MAX_CLIENTS};
use volley_replay::source::{ReplayFactory, ReplaySpec, RequestShape};
use volley_replay::{LogReader, ReaderOptions, Skips};

use super::load::{self, LoadArgs, LoadSpec};
use super::save::{Extras, SaveArgs, Saver};
use super::target::TargetArgs;
use crate::cmd::log::LogReadArgs;
use crate::cmd::table;
use crate::exit::{usage, Interrupted, UsageError};

/// Connections open at once when `--max-connections` is not given: a replay opens one
/// per active client, and a log can have many.
const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// The replay flags of `volley bench` (flattened into bench's `Args`).
#[derive(clap::Args, Debug, Clone)]
pub struct ReplayArgs {
    /// Replay this access log (plain or gzip) against the URL's host: each request at
    /// its logged instant, each logged client on its own connection(s) in its order.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// Replay speed: 2 sends the log twice as fast (needs --replay).
    #[arg(long, value_name = "F", value_parser = speed, requires = "replay")]
    pub speed: Option<f64>,
    /// Shorten every quiet stretch of the log longer than this to it (before --speed).
    #[arg(long = "max-gap", value_name = "DURATION", value_parser = volley_units::parse_duration, requires = "replay")]
    pub max_gap: Option<Duration>,
    /// Replay from this offset into the log (from its first request).
    #[arg(long, value_name = "DURATION", value_parser = volley_units::parse_duration, requires = "replay")]
    pub from: Option<Duration>,
    /// Replay up to this offset into the log (exclusive).
    #[arg(long, value_name = "DURATION", value_parser = volley_units::parse_duration, requires = "replay")]
    pub to: Option<Duration>,
    /// Replay only requests of this method (repeatable).
    #[arg(long = "only-method", value_name = "METHOD", requires = "replay")]
    pub only_method: Vec<String>,
    /// Replay only requests logged with this status or class, e.g. 200 or 2xx (repeatable).
    #[arg(long = "only-status", value_name = "STATUS", requires = "replay")]
    pub only_status: Vec<StatusMatch>,
    /// Replay only requests whose target (path and query) matches this regular expression.
    #[arg(long = "only-path", value_name = "REGEX", requires = "replay")]
    pub only_path: Option<regex::Regex>,
    /// Fold the logged clients onto N connections (default: one per client).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), requires = "replay")]
    pub clients: Option<u64>,
    /// Replay the log again and again until -d or -n ends the run.
    #[arg(long = "loop", requires = "replay")]
    pub repeat_log: bool,
    /// Logged client addresses remembered at once: past it, those idle longest are
    /// forgotten, and one that comes back replays as a new client on a new connection
    /// (bounds memory on logs with millions of addresses).
    #[arg(long = "max-clients", value_name = "N", default_value_t = MAX_CLIENTS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(2..), requires = "replay")]
    pub max_clients: usize,
    /// Each replayed client connects from its own loopback address (127.0.0.2, .3, ...
    /// in order of appearance), so a loopback server's log tells them apart as the
    /// replayed log did (`volley log phases` of it then finds the log's phases). Needs
    /// a target on IPv4 loopback.
    #[arg(long = "client-addresses", requires = "replay")]
    pub client_addresses: bool,
    /// Reading the log (--log-format, --reorder-window).
    #[command(flatten)]
    pub read: LogReadArgs,
}

fn speed(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() && f > 0.0 && f <= 1e6 => Ok(f),
        _ => Err(format!("{s:?} is not a speed factor in (0, 1000000]")),
    }
}

impl ReplayArgs {
    /// Whether `--replay` was given.
    pub fn is_set(&self) -> bool {
        self.replay.is_some()
    }

    fn options(&self) -> ReplayOptions {
        ReplayOptions {
            speed: self.speed.unwrap_or(1.0),
            max_gap: self.max_gap,
            from: self.from,
            to: self.to,
            methods: self.only_method.clone(),
            statuses: self.only_status.clone(),
            path: self.only_path.clone(),
            clients: self.clients.map(|n| n as usize),
            max_clients: self.max_clients,
        }
    }

    fn reader(&self) -> ReaderOptions {
        ReaderOptions {
            format: self.read.log_format.clone(),
            window: self.read.reorder_window,
        }
    }
}

/// The first pass: what the log gives under these options.
struct LogPlan {
    counts: PlanCounts,
    /// Records read (before window and filters).
    records: u64,
    /// The last planned request's instant, µs after the first.
    span_us: u64,
    format: String,
    lines: u64,
    spread: bool,
    skips: Skips,
    /// The client table's bound the plan ran with.
    max_clients: usize,
}

/// Reads the whole log once through the planner (bounded memory), so that every bad
/// input stops here with one line and exit 2, and the schedule's mean rate is known.
fn plan_log(path: &std::path::Path, r: &ReplayArgs) -> anyhow::Result<LogPlan> {
    if let (Some(f), Some(t)) = (r.from, r.to) {
        if f >= t {
            usage!("--from ({f:?}) must come before --to ({t:?})");
        }
    }
    let mut reader = LogReader::open(path, r.reader()).map_err(|e| UsageError(e.to_string()))?;
    let opts = r.options();
    let max_clients = opts.max_clients;
    let mut planner = Planner::new(opts);
    let (mut records, mut span_us) = (0u64, 0u64);
    for rec in reader.by_ref() {
        let rec = rec.map_err(|e| UsageError(e.to_string()))?;
        records += 1;
        if let Some(p) = planner.plan(rec) {
            span_us = p.intended_us;
        }
    }
    let counts = planner.counts().clone();
    if records == 0 {
        usage!("{}: no requests in the log", path.display());
    }
    if counts.planned == 0 {
        usage!(
            "{}: nothing to replay: of {records} logged requests, {} fall outside --from/--to, {} are left out by the filters, {} cannot be sent to another host",
            path.display(),
            counts.outside_window,
            counts.filtered,
            counts.not_replayable
        );
    }
    Ok(LogPlan {
        counts,
        records,
        span_us,
        format: reader.format().name().to_string(),
        lines: reader.lines(),
        spread: reader.spread(),
        skips: reader.skips().clone(),
        max_clients,
    })
}

/// Flags that mean nothing to a replay (the log gives methods, targets, instants).
fn refuse_conflicts(a: &LoadArgs, r: &ReplayArgs) -> anyhow::Result<()> {
    let given = [
        (
            a.rate.is_some(),
            "--rate (the log gives the instants; use --speed)",
        ),
        (a.arrival.is_some(), "--arrival"),
        (a.urls.is_some(), "--urls"),
        (
            a.method.is_some(),
            "-m (the log gives the methods; use --only-method)",
        ),
        (
            a.body.is_some() || a.body_file.is_some(),
            "--body (a log has no bodies)",
        ),
        (
            !a.warmup.is_zero(),
            "--warmup (every logged request is compared with the log)",
        ),
        (
            a.wire.h2,
            "--h2 (a replay keeps each client on its own HTTP/1.1 connection)",
        ),
        (
            a.wire.h3,
            "--h3 (a replay keeps each client on its own HTTP/1.1 connection)",
        ),
        (
            a.wire.compressed.is_some(),
            "--compressed (a log does not say what each client accepted: ask with -H 'Accept-Encoding: ...')",
        ),
        (
            a.wire.expect_size.is_some(),
            "--expect-size (the log gives each request's size, and the fidelity report compares them)",
        ),
    ];
    if let Some((_, flag)) = given.iter().find(|(g, _)| *g) {
        usage!("--replay cannot be combined with {flag}");
    }
    if r.repeat_log && a.requests.is_none() && a.duration.is_none() {
        usage!("--loop replays the log without end: give -d or -n to end the run");
    }
    Ok(())
}

/// A replay, resolved once before any load: the log read through (every bad input a
/// usage error), its flags typed. [`Replay::aim`] turns any bench load (at a URL, or at
/// each target `--target` starts) into this log's replay, so `--repeat`, `--save` and
/// `--target` mean what they mean for any bench.
pub struct Replay {
    path: PathBuf,
    args: ReplayArgs,
    plan: LogPlan,
    speed: f64,
    /// The replay's span at its speed, s (at least 1 ms).
    span_s: f64,
    /// -n and -d as given (the replay's own ends apply without them).
    requests: Option<u64>,
    duration: Option<Duration>,
    /// `-H` headers, sent as given (none is invented from the log).
    headers: Vec<(String, String)>,
    max_connections: usize,
}

/// What one replayed run found, beside its summary.
pub struct ReplayOutcome {
    fidelity: FidelityReport,
    /// Planned requests never reached, and why (`None`: all were).
    unreached: Option<(u64, String)>,
}

impl Replay {
    /// Checks the flags against the load's and reads the log through once.
    pub fn resolve(a: &LoadArgs, r: ReplayArgs) -> anyhow::Result<Replay> {
        let Some(path) = r.replay.clone() else {
            bail!("--replay needs a file");
        };
        refuse_conflicts(a, &r)?;
        let plan = plan_log(&path, &r)?;
        let speed = r.speed.unwrap_or(1.0);
        Ok(Replay {
            // The planner's instants are already scaled by the speed.
            span_s: (plan.span_us as f64 / 1e6).max(1e-3),
            path,
            plan,
            speed,
            requests: a.requests,
            duration: a.duration,
            headers: a
                .headers
                .iter()
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect(),
            max_connections: a
                .max_connections
                .map_or(DEFAULT_MAX_CONNECTIONS, |m| m as usize),
            args: r,
        })
    }

    /// Makes `spec` (the load's flags resolved at a URL) this log's replay, its Host
    /// header `host`: a scheduled open loop over a fresh [`ReplayFactory`], whose
    /// fidelity [`Replay::outcome`] reads after the run.
    ///
    /// Fails (usage) when `--client-addresses` asks for loopback sources and the target
    /// is not on IPv4 loopback.
    pub fn aim(&self, spec: &mut LoadSpec, host: String) -> anyhow::Result<Arc<ReplayFactory>> {
        let factory = Arc::new(ReplayFactory::new(ReplaySpec {
            path: self.path.clone(),
            read: self.args.reader(),
            plan: self.args.options(),
            shape: RequestShape {
                host,
                headers: self.headers.clone(),
                keep_alive: true,
            },
            repeat: self.args.repeat_log,
        }));
        let cfg = &mut spec.cfg;
        if self.args.client_addresses {
            let ip = cfg.addr.ip();
            if !matches!(ip, std::net::IpAddr::V4(v4) if v4.is_loopback()) {
                usage!(
                    "--client-addresses gives each replayed client a loopback address; \
                     the target is at {ip}, not on IPv4 loopback"
                );
            }
            cfg.source_ip = volley_engine::SourceIp::LoopbackPerLane;
        }
        // n requests span n - 1 gaps: the schedule's mean rate is (n - 1) / span (a log
        // of 3 requests over 1 s offers 2 req/s, not 3), rounded for the report.
        let planned = self.plan.counts.planned;
        let mean_rate =
            (planned.saturating_sub(1).max(1) as f64 / self.span_s * 100.0).round() / 100.0;
        cfg.model = LoadModel::Scheduled {
            rate: mean_rate.max(0.01),
        };
        cfg.source = factory.clone();
        // Connections open as clients appear; a logged client keeps its connection alive.
        cfg.connections = 0;
        cfg.keep_alive = true;
        cfg.max_connections = self.max_connections;
        // Every status is an answer: a 404 the log had is the site's, not a failure;
        // the fidelity report compares each status with the logged one instead.
        cfg.accept_status = StatusRange { min: 100, max: 599 };
        // The replay ends with its log; its request count also drives the progress bar.
        let whole_log = (!self.args.repeat_log).then_some(planned);
        // Without -d, the run still has an end: the log's span at its speed plus one
        // timeout for the last answers (what is still in flight then is censored).
        let log_end = (!self.args.repeat_log)
            .then(|| Duration::from_secs_f64(self.span_s) + cfg.timeout + Duration::from_secs(1));
        cfg.stop = StopCondition {
            warmup: Duration::ZERO,
            requests: self.requests.or(whole_log),
            duration: self.duration.or(log_end),
        };
        spec.method = "(as logged)".into();
        // The log gives the paths: the run names the origin it was replayed against
        // (not --target's probe path).
        if let Some(end) = spec.url.find("://").and_then(|i| {
            let rest = &spec.url[i + 3..];
            rest.find('/').map(|j| i + 3 + j)
        }) {
            spec.url.truncate(end + 1);
        }
        Ok(factory)
    }

    /// The comparison with the log of the run `factory` fed; a reader failure during
    /// the run becomes a note of `summary`.
    pub fn outcome(&self, factory: &ReplayFactory, summary: &mut Summary) -> ReplayOutcome {
        if let Some(e) = factory.take_error() {
            summary
                .notes
                .push(format!("the log reader stopped during the replay: {e}"));
        }
        let fidelity = factory.take_fidelity().report();
        let unreached = self.unreached(&fidelity);
        ReplayOutcome {
            fidelity,
            unreached,
        }
    }

    /// Planned requests the run never reached (it ended first: its -d or -n, or the
    /// generator fell so far behind that the log's end came before them), said rather
    /// than silently dropped; `None` when every planned request was compared.
    fn unreached(&self, f: &FidelityReport) -> Option<(u64, String)> {
        let planned = self.plan.counts.planned;
        let left = planned.checked_sub(f.requests).filter(|n| *n > 0)?;
        if self.args.repeat_log {
            return None;
        }
        let why = match (self.duration, self.requests) {
            (Some(d), _) => format!("-d {d:?} ended the run first"),
            (None, Some(n)) => format!("-n {n} ended the run first"),
            (None, None) => "the run ended (the log's span at its speed plus one timeout) before the generator reached them".to_string(),
        };
        Some((
            left,
            format!("{left} of the {planned} planned requests were never sent: {why}"),
        ))
    }

    /// What the first pass found, as said before the replay starts.
    pub fn plan_lines(&self) -> Vec<String> {
        let mut lines = plan_lines(&self.path, &self.plan, self.speed);
        if self.args.client_addresses {
            lines.push(
                "each client connects from its own loopback address, 127.0.0.2 on, in order \
                 of appearance"
                    .into(),
            );
        }
        lines
    }

    /// Prints [`Replay::plan_lines`] on stdout, before the first run.
    fn print_plan(&self) {
        for line in self.plan_lines() {
            println!("{line}");
        }
    }

    /// The log and its plan, as `--json`'s `replay` object holds them.
    pub fn json(&self) -> serde_json::Value {
        let c = &self.plan.counts;
        serde_json::json!({
            "log": self.path.display().to_string(),
            "format": self.plan.format,
            "lines": self.plan.lines,
            "logged_requests": self.plan.records,
            "planned": c.planned,
            "outside_window": c.outside_window,
            "filtered": c.filtered,
            "not_replayable": c.not_replayable,
            "sent_without_body": c.bodiless,
            "gaps_shortened": c.gaps_shortened,
            "clients": c.clients,
            "clients_dropped": c.clients_dropped,
            "max_clients": self.plan.max_clients,
            "client_addresses": self.args.client_addresses,
            "speed": self.speed,
            "span_s": self.span_s,
            "spread_over_seconds": self.plan.spread,
            "skipped_lines": self.plan.skips.total(),
        })
    }
}

impl ReplayOutcome {
    /// The fidelity report as text: its lines, what was never sent, the path groups.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for line in self.fidelity.lines() {
            out.push_str(&line);
            out.push('\n');
        }
        if let Some((_, line)) = &self.unreached {
            out.push_str(&format!("  {line}\n"));
        }
        out.push_str(&table::render(&group_table(&self.fidelity)));
        out
    }

    /// `{"fidelity": ..., "unreached": N or null}`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "fidelity": self.fidelity,
            "unreached": self.unreached.as_ref().map(|u| u.0),
        })
    }
}

/// Runs `volley bench --replay FILE URL` (or, with `--target`, against each managed
/// target in turn: `target::run` aims its load with [`Replay::aim`]).
pub fn run(
    a: LoadArgs,
    r: ReplayArgs,
    targets: TargetArgs,
    save: SaveArgs,
) -> anyhow::Result<ExitCode> {
    let replay = Replay::resolve(&a, r)?;
    let text_out = !a.quiet && !a.stdout_taken();
    if targets.is_set() {
        if text_out {
            replay.print_plan();
        }
        return super::target::run(a, targets, save, Some(&replay));
    }
    let Some(url) = a.url().cloned() else {
        usage!("--replay needs the URL of the server to replay against (volley bench --replay FILE http://host:port/), or --target KIND to start one");
    };
    let mut spec = load::resolve(&a)?;
    let (repeats, cooldown) = (a.repeat as usize, a.cooldown);
    let host = url.host_header();
    let factory = replay.aim(&mut spec, host)?;
    if text_out {
        replay.print_plan();
    }
    let mut first = spec.prepare()?;
    let interrupted = stop_on_interrupt(Arc::clone(&spec.cfg.stop_flag));
    let environment = serde_json::to_value(volley_targets::Environment::capture())?;
    let mut saver = Saver::begin(&save, &spec.url, &spec, environment)?;
    let progress = crate::cmd::progress::wanted(a.quiet);
    let mut runs: Vec<Summary> = Vec::with_capacity(repeats);
    let mut outcomes: Vec<ReplayOutcome> = Vec::with_capacity(repeats);
    for k in load::repeats(repeats, cooldown, &interrupted) {
        let ran = load::run_once(
            &spec,
            &interrupted,
            progress,
            load::Keep::live(saver.as_ref()),
        )?;
        let mut summary = ran.summary;
        summary.first_request = first.take();
        let outcome = replay.outcome(&factory, &mut summary);
        if let Some(s) = saver.as_mut() {
            let extras = Extras {
                replay: Some(replay_record(&replay, &outcome)),
                ..Extras::default()
            };
            s.step(&spec, &summary, ran.histograms, extras)?;
        }
        if text_out {
            print_run(k, repeats, &summary, &outcome)?;
        }
        let failed = summary.requests.ok == 0;
        runs.push(summary);
        outcomes.push(outcome);
        if failed {
            break;
        }
    }
    let rep = (runs.len() > 1).then(|| repeat::summarise(&runs));
    if text_out {
        if let Some(r) = &rep {
            println!();
            Text::default().export(&[], Some(r), &mut std::io::stdout().lock())?;
        }
    }
    if let Some(dest) = &a.json {
        write_json(dest, &replay, &runs, rep.as_ref(), &outcomes)?;
    }
    let complete = !interrupted.load(Ordering::Relaxed) && runs.iter().all(|s| s.requests.ok > 0);
    if let Some(s) = saver {
        eprintln!("volley: {}", s.finish(complete)?);
    }
    if let Some(last) = runs.last().filter(|s| s.requests.ok == 0) {
        bail!(
            "no request succeeded: {} to {}",
            load::describe_errors(last),
            spec.cfg.addr
        );
    }
    if interrupted.load(Ordering::Relaxed) {
        return Err(Interrupted("interrupted; printed what was measured".into()).into());
    }
    Ok(ExitCode::SUCCESS)
}

/// One run's text report and its fidelity, headed `=== run K of N ===` among repeats.
fn print_run(
    k: usize,
    repeats: usize,
    summary: &Summary,
    outcome: &ReplayOutcome,
) -> anyhow::Result<()> {
    if repeats > 1 {
        println!("=== run {} of {} ===", k + 1, repeats);
    }
    Text::default().export(
        std::slice::from_ref(summary),
        None,
        &mut std::io::stdout().lock(),
    )?;
    println!();
    print!("{}", outcome.text());
    Ok(())
}

/// The flag Ctrl-C raises; it stops the engine's load (`stop`) too.
fn stop_on_interrupt(stop: Arc<AtomicBool>) -> Arc<AtomicBool> {
    let interrupted = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&interrupted);
    let _ = ctrlc::set_handler(move || {
        flag.store(true, Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
    });
    interrupted
}

/// What a saved step keeps of the replay: the log's plan and this run's fidelity.
pub fn replay_record(replay: &Replay, outcome: &ReplayOutcome) -> serde_json::Value {
    let mut v = replay.json();
    v["fidelity"] = serde_json::to_value(&outcome.fidelity).unwrap_or_default();
    v["unreached"] = serde_json::json!(outcome.unreached.as_ref().map(|u| u.0));
    v
}

/// Bench's JSON document with `replay` beside `runs`: the log's plan, and each run's
/// fidelity under `replay.runs` (in run order; `replay.fidelity` is the first run's).
fn write_json(
    dest: &str,
    replay: &Replay,
    runs: &[Summary],
    rep: Option<&repeat::RepeatSummary>,
    outcomes: &[ReplayOutcome],
) -> anyhow::Result<()> {
    let mut buf = Vec::new();
    Json.export(runs, rep, &mut buf)?;
    let mut doc: serde_json::Value = serde_json::from_slice(&buf)?;
    let mut r = replay.json();
    if let Some(o) = outcomes.first() {
        r["fidelity"] = serde_json::to_value(&o.fidelity)?;
        r["unreached"] = serde_json::json!(o.unreached.as_ref().map(|u| u.0));
    }
    r["runs"] = outcomes.iter().map(ReplayOutcome::json).collect();
    doc["replay"] = r;
    let text = serde_json::to_string_pretty(&doc)? + "\n";
    if dest == "-" {
        print!("{text}");
    } else {
        std::fs::write(dest, text).map_err(|e| anyhow::anyhow!("cannot write {dest}: {e}"))?;
    }
    Ok(())
}

/// What the first pass found, as said before the replay starts.
fn plan_lines(path: &std::path::Path, p: &LogPlan, speed: f64) -> Vec<String> {
    let c = &p.counts;
    let mut out = vec![format!(
        "replaying {}: {} of {} logged requests ({} format, {} lines) from {} clients over {:.1} s at {speed}x",
        path.display(),
        c.planned,
        p.records,
        p.format,
        p.lines,
        c.clients,
        p.span_us as f64 / 1e6,
    )];
    if p.spread {
        out.push("  whole-second timestamps: each second's requests spread evenly over it".into());
    }
    let mut left = Vec::new();
    if c.outside_window > 0 {
        left.push(format!("{} outside --from/--to", c.outside_window));
    }
    if c.filtered > 0 {
        left.push(format!("{} filtered out", c.filtered));
    }
    if c.not_replayable > 0 {
        left.push(format!(
            "{} not replayable to another host (CONNECT, *)",
            c.not_replayable
        ));
    }
    if p.skips.total() > 0 {
        let causes: Vec<String> = p
            .skips
            .iter()
            .map(|(cause, n, lines)| {
                let lines: Vec<String> = lines.iter().map(u64::to_string).collect();
                format!("{n} {cause} (line {})", lines.join(", "))
            })
            .collect();
        left.push(format!(
            "{} lines skipped: {}",
            p.skips.total(),
            causes.join("; ")
        ));
    }
    if !left.is_empty() {
        out.push(format!("  left out: {}", left.join(", ")));
    }
    if c.bodiless > 0 {
        out.push(format!(
            "  {} POST/PUT/PATCH requests sent without a body: a log has none",
            c.bodiless
        ));
    }
    if c.gaps_shortened > 0 {
        out.push(format!(
            "  {} quiet stretches shortened to --max-gap",
            c.gaps_shortened
        ));
    }
    if c.clients_dropped > 0 {
        out.push(format!(
            "  {} client addresses forgotten, idle longest, when the table of {} was full: one that came back replayed as a new client on a new connection (counted again above)",
            c.clients_dropped, p.max_clients
        ));
    }
    out
}

/// Each path group's replayed latency beside the logged request time.
fn group_table(f: &FidelityReport) -> comfy_table::Table {
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    let mut t = table::new([
        "path group",
        "requests",
        "replayed mean ms",
        "replayed p99 ms",
        "logged mean ms",
        "logged p99 ms",
    ]);
    for g in &f.groups {
        t.add_row(vec![
            g.group.clone(),
            g.requests.to_string(),
            ms(Some(g.replayed_mean_ms)),
            ms(Some(g.replayed_p99_ms)),
            ms(g.logged_mean_ms),
            ms(g.logged_p99_ms),
        ]);
    }
    table::align_right(&mut t, &[1, 2, 3, 4, 5]);
    t
}
