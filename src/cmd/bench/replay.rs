//! `volley bench --replay access.log URL`: a server's access log replayed against URL at
//! its logged instants (open loop: latency from each request's logged instant, scaled
//! by `--speed`), each logged client on its own connection in its own order, then the
//! fidelity report (send lag against the log's schedule, statuses, body sizes, each
//! path group's latency beside the logged request time).
//!
//! Pipeline: the flags ([`ReplayArgs`]) -> a first pass over the log (`plan_log`:
//! every bad input is one line, exit 2, before any load; it also gives the schedule's
//! span and mean rate) -> the load's flags resolved as for any URL, then made a
//! scheduled load over `volley_replay::source::ReplayFactory` -> one measured run
//! (`load::run_once`) -> the summary and the fidelity, as text or in `--json`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use volley_engine::{LoadModel, StatusRange, StopCondition};
use volley_metrics::output::{Exporter, Json, Text};
use volley_replay::schedule::{PlanCounts, Planner, ReplayOptions, StatusMatch};
use volley_replay::source::{ReplayFactory, ReplaySpec, RequestShape};
use volley_replay::{LogReader, ReaderOptions, Skips};

use super::load::{self, LoadArgs};
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
    let mut planner = Planner::new(r.options());
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
        (a.repeat > 1, "--repeat"),
        (
            !a.warmup.is_zero(),
            "--warmup (every logged request is compared with the log)",
        ),
        (
            a.wire.h2,
            "--h2 (a replay keeps each client on its own HTTP/1.1 connection)",
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

/// Runs `volley bench --replay FILE URL`.
pub fn run(a: LoadArgs, r: ReplayArgs) -> anyhow::Result<ExitCode> {
    let Some(path) = r.replay.clone() else {
        bail!("--replay needs a file");
    };
    refuse_conflicts(&a, &r)?;
    let Some(url) = a.url().cloned() else {
        usage!("--replay needs the URL of the server to replay against: volley bench --replay FILE http://host:port/");
    };
    let plan = plan_log(&path, &r)?;
    let mut spec = load::resolve(&a)?;
    let speed = r.speed.unwrap_or(1.0);
    let span_s = (plan.span_us as f64 / 1e6).max(1e-3);
    let factory = Arc::new(ReplayFactory::new(ReplaySpec {
        path: path.clone(),
        read: r.reader(),
        plan: r.options(),
        shape: RequestShape {
            host: url.host_header(),
            headers: a
                .headers
                .iter()
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect(),
            keep_alive: true,
        },
        repeat: r.repeat_log,
    }));
    configure(&mut spec.cfg, &a, &r, &plan, span_s, factory.clone());
    spec.method = "(as logged)".into();
    let text_out = !a.quiet && !a.stdout_taken();
    if text_out {
        for line in plan_lines(&path, &plan, speed) {
            println!("{line}");
        }
    }
    let first = spec.prepare()?;
    let interrupted = stop_on_interrupt(Arc::clone(&spec.cfg.stop_flag));
    let progress = crate::cmd::progress::wanted(a.quiet);
    let ran = load::run_once(&spec, &interrupted, progress, false)?;
    let mut summary = ran.summary;
    summary.first_request = first;
    if let Some(e) = factory.take_error() {
        summary
            .notes
            .push(format!("the log reader stopped during the replay: {e}"));
    }
    let fidelity = factory.take_fidelity().report();
    if text_out {
        Text::default().export(
            std::slice::from_ref(&summary),
            None,
            &mut std::io::stdout().lock(),
        )?;
        println!();
        for line in fidelity.lines() {
            println!("{line}");
        }
        if let Some(line) = unreached(&fidelity, &plan, &r, &a) {
            println!("  {line}");
        }
        print!("{}", table::render(&group_table(&fidelity)));
    }
    if let Some(dest) = &a.json {
        let unreached_n = unreached(&fidelity, &plan, &r, &a)
            .map(|_| plan.counts.planned.saturating_sub(fidelity.requests));
        let doc = replay_json(
            &summary,
            &path,
            &plan,
            speed,
            span_s,
            &fidelity,
            unreached_n,
        )?;
        let text = serde_json::to_string_pretty(&doc)? + "\n";
        if dest == "-" {
            print!("{text}");
        } else {
            std::fs::write(dest, text).map_err(|e| anyhow::anyhow!("cannot write {dest}: {e}"))?;
        }
    }
    if summary.requests.ok == 0 {
        bail!(
            "no request succeeded: {} to {}",
            load::describe_errors(&summary),
            spec.cfg.addr
        );
    }
    if interrupted.load(Ordering::Relaxed) {
        return Err(Interrupted("interrupted; printed what was measured".into()).into());
    }
    Ok(ExitCode::SUCCESS)
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

/// The engine's load for a replay: the log's schedule at its mean rate (scaled by
/// `--speed` in the source), connections opened as logged clients appear, every status an
/// answer, and an end at the log's end.
fn configure(
    cfg: &mut volley_engine::LoadConfig,
    a: &LoadArgs,
    r: &ReplayArgs,
    plan: &LogPlan,
    span_s: f64,
    factory: Arc<ReplayFactory>,
) {
    let speed = r.speed.unwrap_or(1.0);
    // n requests span n - 1 gaps: the schedule's mean rate is (n - 1) / span (a log of
    // 3 requests over 1 s offers 2 req/s, not 3), rounded for the report.
    let mean_rate =
        (plan.counts.planned.saturating_sub(1).max(1) as f64 / span_s * 100.0).round() / 100.0;
    cfg.model = LoadModel::Scheduled {
        rate: mean_rate.max(0.01),
    };
    cfg.source = factory;
    // Connections open as clients appear; a logged client keeps its connection alive.
    cfg.connections = 0;
    cfg.keep_alive = true;
    cfg.max_connections = a
        .max_connections
        .map_or(DEFAULT_MAX_CONNECTIONS, |m| m as usize);
    // Every status is an answer: a 404 the log had is the site's, not a failure; the
    // fidelity report compares each status with the logged one instead.
    cfg.accept_status = StatusRange { min: 100, max: 599 };
    // The replay ends with its log; its request count also drives the progress bar.
    let whole_log = (!r.repeat_log).then_some(plan.counts.planned);
    // Without -d, the run still has an end: the log's span at its speed plus one
    // timeout for the last answers (what is still in flight then is censored).
    let log_end = (!r.repeat_log)
        .then(|| Duration::from_secs_f64(span_s / speed) + a.timeout + Duration::from_secs(1));
    cfg.stop = StopCondition {
        requests: a.requests.or(whole_log),
        duration: a.duration.or(log_end),
    };
}

/// The `--json` document: the run's summary as `bench --json` writes it, with the
/// replay's log, counts, speed and fidelity under `replay`.
fn replay_json(
    summary: &volley_metrics::Summary,
    path: &std::path::Path,
    plan: &LogPlan,
    speed: f64,
    span_s: f64,
    fidelity: &volley_replay::fidelity::FidelityReport,
    unreached_n: Option<u64>,
) -> anyhow::Result<serde_json::Value> {
    let mut buf = Vec::new();
    Json.export(std::slice::from_ref(summary), None, &mut buf)?;
    let mut doc: serde_json::Value = serde_json::from_slice(&buf)?;
    doc["replay"] = serde_json::json!({
        "log": path.display().to_string(),
        "format": plan.format,
        "lines": plan.lines,
        "logged_requests": plan.records,
        "planned": plan.counts.planned,
        "outside_window": plan.counts.outside_window,
        "filtered": plan.counts.filtered,
        "not_replayable": plan.counts.not_replayable,
        "sent_without_body": plan.counts.bodiless,
        "gaps_shortened": plan.counts.gaps_shortened,
        "clients": plan.counts.clients,
        "speed": speed,
        "span_s": span_s,
        "spread_over_seconds": plan.spread,
        "skipped_lines": plan.skips.total(),
        "fidelity": fidelity,
        "unreached": unreached_n,
    });
    Ok(doc)
}

/// Planned requests the run never reached (it ended first: its -d or -n, or the
/// generator fell so far behind that the log's end came before them), said rather
/// than silently dropped; `None` when every planned request was compared.
fn unreached(
    f: &volley_replay::fidelity::FidelityReport,
    plan: &LogPlan,
    r: &ReplayArgs,
    a: &LoadArgs,
) -> Option<String> {
    let left = plan
        .counts
        .planned
        .checked_sub(f.requests)
        .filter(|n| *n > 0)?;
    if r.repeat_log {
        return None;
    }
    let why = match (a.duration, a.requests) {
        (Some(d), _) => format!("-d {d:?} ended the run first"),
        (None, Some(n)) => format!("-n {n} ended the run first"),
        (None, None) => "the run ended (the log's span at its speed plus one timeout) before the generator reached them".to_string(),
    };
    Some(format!(
        "{left} of the {} planned requests were never sent: {why}",
        plan.counts.planned
    ))
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
    out
}

/// Each path group's replayed latency beside the logged request time.
fn group_table(f: &volley_replay::fidelity::FidelityReport) -> comfy_table::Table {
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
