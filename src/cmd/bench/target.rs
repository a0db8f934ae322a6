//! `volley bench --target KIND ...`: the same load against servers volley starts itself,
//! capped and pinned, with the server's resource use printed beside the load's figures.
//!
//! Place in the flow: between the CLI and the harness. For each `--target` in turn:
//! [`volley_targets::start`] (generated config, private cgroup, validation) -> the
//! load's flags resolved against its address (`load::resolve`, so every load flag
//! means the same with and without `--target`) -> `volley_harness::watch` (monitor,
//! CFS throttling delta, death watch) around the cold request and `load::run_once`
//! -> the target's record -> stop and clean up. Results are printed (and written) after
//! each target, so a later failure keeps the earlier ones (hyperfine's habit). This
//! file is flags, the run order and the messages; printing and files are in
//! `target/`.
//!
//! Raw flags ([`TargetArgs`]) are resolved into a [`Setup`] before anything starts: a
//! mistake there is a usage error (exit 2) and nothing is created. A server that is
//! missing, a cap the kernel refuses or a target that dies mid-run is a failed run
//! (exit 1), reported after what was measured. A path the docroot lacks is refused
//! before any server starts; one a started server refuses (a 4xx first answer to the
//! load's own request: its method, headers or permissions, which the start-up probe's
//! plain GET does not try) ends that run at once, exit 2, as `bench URL`'s path check
//! does (`load/check.rs`). Ctrl-C stops the load, stops every target
//! (`volley_targets::stop_all` from the handler thread) and exits 130.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use volley_engine::{Coding, HttpUrl};
use volley_harness::{DocrootSource, Watch, Watched};
use volley_metrics::{Model, Summary};
use volley_monitor::MonitorReport;
use volley_netlab::tune::{RouteSettings, Sysctl};
use volley_targets::config::{Assignment, Compression, Tuning};
use volley_targets::{
    CpuQuota, ResourceLimits, RunningTarget, TargetDied, TargetError, TargetKind, TargetRecord,
    TargetSpec, ThrottleStats, TlsSource,
};

use super::load::{self, Load, LoadArgs, LoadSpec, Ran};
use super::replay::{Replay, ReplayOutcome};
use super::save::{Extras, SaveArgs, Savers};
use crate::exit::{usage, Interrupted};

mod export;
pub(crate) mod flags;
mod netns;
mod print;
mod setup;

use export::write_files;
use flags::{allowed_cpus, pin_self, CpuList};
pub(crate) use print::builtin_flags;
use print::{comparison_table, print_run, show_config};
use setup::{resolve, Setup};

/// The `--target` flags of `volley bench`, as typed (flattened into bench's `Args`);
/// clap parses each value into its type (`flags.rs`), so a bad one is one line, exit 2.
#[derive(clap::Args, Debug, Clone)]
pub struct TargetArgs {
    /// Start this server and load it: nginx, apache (event MPM), apache-prefork, lighttpd,
    /// caddy, builtin, radicale or xandikos (the last two with --caldav). Repeat to run
    /// the same load against each in turn; the URL is then optional (the target picks
    /// host and port).
    #[arg(long = "target", value_name = "KIND", value_parser = flags::kind)]
    pub targets: Vec<TargetKind>,
    /// Cores the target may use, e.g. 0 or 0,1 or 0-1; volley is pinned to the others.
    #[arg(long = "target-cpus", value_name = "LIST", requires = "targets", value_parser = flags::cpus)]
    pub target_cpus: Option<CpuList>,
    /// CPU cap of the target: 25% (or 0.25) of one CPU, cgroup cpu.max / cfs_quota_us.
    #[arg(
        long = "cpu-quota",
        value_name = "SHARE",
        requires = "targets",
        allow_hyphen_values = true,
        value_parser = flags::parse_quota
    )]
    pub cpu_quota: Option<f64>,
    /// Memory limit of the target, e.g. 256M, 1G (binary units).
    #[arg(
        long = "memory-max",
        value_name = "BYTES",
        requires = "targets",
        allow_hyphen_values = true,
        value_parser = flags::parse_bytes
    )]
    pub memory_max: Option<u64>,
    /// Worker processes (threads for Caddy) of the target.
    #[arg(long, value_name = "N", requires = "targets", allow_hyphen_values = true, default_value = "1", value_parser = flags::workers)]
    pub workers: u32,
    /// Directory the target serves (default: a generated fixture set, see --fixture).
    #[arg(
        long,
        value_name = "DIR",
        requires = "targets",
        conflicts_with = "fixture"
    )]
    pub docroot: Option<PathBuf>,
    /// Fixture set generated into a temporary docroot [default: sizes].
    #[arg(long, value_name = "SET", requires = "targets", value_enum)]
    pub fixture: Option<FixtureArg>,
    /// Path to load (default /700b.html of the sizes set, /index1.html of uniserve,
    /// /index.html of a --docroot); a URL's path is used when one is given.
    #[arg(long, requires = "targets")]
    pub path: Option<String>,
    /// Print the configuration each target would run with, and exit.
    #[arg(long = "show-config", requires = "targets")]
    pub show_config: bool,
    /// Time between monitor samples (at least 100ms).
    #[arg(
        long = "monitor-interval",
        value_name = "DURATION",
        requires = "targets",
        allow_hyphen_values = true,
        default_value = "1s",
        value_parser = flags::monitor_interval
    )]
    pub monitor_interval: Duration,
    /// Serve HTTPS with a throw-away CA made for the run (the load trusts it); an
    /// https:// URL asks for the same. Needed by --h2: managed servers offer h2 by ALPN.
    #[arg(long, requires = "targets")]
    pub tls: bool,
    /// A server knob for this run, KNOB=VALUE (repeatable): sendfile, defer_accept,
    /// tcp_nodelay, access_log (true/false); backlog, workers, keepalive_requests
    /// (counts); or raw.KIND=TEXT, configuration lines for that kind, verbatim. A knob a
    /// target cannot express is refused before anything starts.
    #[arg(
        long = "set",
        value_name = "KNOB=VALUE",
        requires = "targets",
        value_parser = parse_set
    )]
    pub set: Vec<Assignment>,
    /// A sysctl for the target, KEY=VALUE (repeatable), written inside a network
    /// namespace volley makes for it (the load runs in one too), read back, and refused
    /// when global or not taken; the host's values never change. Needs root.
    #[arg(
        long = "sysctl",
        value_name = "KEY=VALUE",
        requires = "targets",
        value_parser = netns::parse_sysctl
    )]
    pub sysctl: Vec<Sysctl>,
    /// A switch on the target's routes inside its namespace: quickack=true (no delayed
    /// ACKs). Puts the target in a namespace as --sysctl does.
    #[arg(
        long = "route",
        value_name = "quickack=BOOL",
        requires = "targets",
        value_parser = netns::parse_route
    )]
    pub route: Vec<RouteSettings>,
}

/// `--set`'s value parser: one typed assignment, or the knob's one-line error.
pub(crate) fn parse_set(s: &str) -> Result<Assignment, String> {
    volley_targets::config::knobs::parse_assignment(s).map_err(|e| e.to_string())
}

/// A fixture set generated into the targets' docroot.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixtureArg {
    /// Files of many sizes (/700b.html ...).
    Sizes,
    /// The uniserve set (/index1.html ...).
    Uniserve,
}

impl TargetArgs {
    /// True when `--target` was given: bench hands the run to this module.
    pub fn is_set(&self) -> bool {
        !self.targets.is_empty()
    }
}

/// What one target's run produced.
struct TargetRun {
    kind: TargetKind,
    pid: Option<u32>,
    record: TargetRecord,
    summary: Summary,
    monitor: Option<MonitorReport>,
    /// Throttling during the load (delta of the cgroup's counters); `None` without a quota.
    throttling: Option<ThrottleStats>,
    /// The target died during the load.
    died: Option<TargetDied>,
    /// Cgroup directories that could not be removed at stop (normally none).
    leftover_cgroups: Vec<PathBuf>,
    /// Ctrl-C ended the load early.
    interrupted: bool,
    /// 1-based round of `--repeat`.
    round: usize,
    /// The target's namespace and what it held, as read back (`--sysctl`, `--route`).
    namespace: Option<netns::NsRecord>,
    /// `--replay`: the comparison with the log.
    replay: Option<ReplayOutcome>,
}

impl TargetRun {
    fn requests(&self) -> u64 {
        self.summary.requests.completed
    }

    /// Server CPU-seconds per 1000 completed requests.
    fn cpu_s_per_1000(&self) -> Option<f64> {
        let ms = self
            .monitor
            .as_ref()?
            .summary
            .cpu_ms_per_1000_requests(self.requests())?;
        Some(ms / 1000.0)
    }

    /// `ok`, `failed` (the server died) or `interrupted` (Ctrl-C).
    fn status(&self) -> &'static str {
        match (&self.died, self.interrupted) {
            (Some(_), _) => "failed",
            (None, true) => "interrupted",
            (None, false) => "ok",
        }
    }

    /// Why this run counts as failed (the server died, or no request succeeded); `None`
    /// for a good run and for one Ctrl-C cut short.
    fn failure(&self) -> Option<anyhow::Error> {
        if self.interrupted {
            return None;
        }
        if let Some(d) = &self.died {
            return Some(anyhow::anyhow!(
                "{} died during the run ({}); the run is marked failed",
                d.kind,
                d.exit_status
            ));
        }
        (self.summary.requests.ok == 0).then(|| {
            anyhow::anyhow!(
                "no request to {} succeeded; the run is marked failed",
                self.kind
            )
        })
    }

    fn throttled(&self) -> bool {
        self.throttling.is_some_and(|t| t.nr_throttled > 0)
    }

    fn p99_ms(&self) -> f64 {
        headline(&self.summary).map_or(0.0, |l| l.p99_ms)
    }
}

/// The headline latency of a run (closed loop: service time; open loop: response time).
fn headline(s: &Summary) -> Option<&volley_metrics::summary::LatencyStats> {
    let key = match s.model {
        Model::Open { .. } => "response_time",
        Model::Closed => "service_time",
    };
    s.latency.get(key)
}

/// How `volley bench --target` reports: text on stdout or not, the progress bar.
struct Show {
    quiet: bool,
    text: bool,
    progress: bool,
}

/// Runs `volley bench --target ...`: `load` is the load's flags, run against each target
/// (as `replay`'s replay of its log, when given).
pub fn run(
    load: LoadArgs,
    t: TargetArgs,
    save: SaveArgs,
    replay: Option<&Replay>,
) -> anyhow::Result<ExitCode> {
    crate::cmd::sweep_leftovers();
    let setup = resolve(&load, &t, replay)?;
    if setup.show_config {
        return show_config(&setup);
    }
    check_installed(&setup.kinds)?;
    let show = Show {
        quiet: load.quiet,
        text: !load.quiet && !load.stdout_taken(),
        progress: crate::cmd::progress::wanted(load.quiet),
    };
    let interrupted = stop_on_interrupt();
    pin(&setup, show.quiet)?;
    // `served` owns a generated fixture tree (removed on drop) for as long as the
    // targets serve it; bench always names a directory or a fixture, never the default.
    // Before any target starts: a refused sysctl is a usage error and nothing runs.
    let lab = build_lab(&setup, show.quiet)?;
    let served = setup
        .docroot
        .prepare("bench")?
        .ok_or_else(|| anyhow::anyhow!("no docroot to serve"))?;
    let docroot = served.path().to_path_buf();
    check_path(&docroot, &setup.path)?;
    let mut runs: Vec<TargetRun> = Vec::new();
    let mut savers = Savers::new(save, setup.kinds.len() > 1);
    let mut failure: Option<anyhow::Error> = None;
    let schedule: Vec<(usize, TargetKind)> = (0..setup.load.repeat)
        .flat_map(|round| setup.kinds.iter().map(move |&k| (round, k)))
        .collect();
    for i in super::load::repeats(schedule.len(), setup.load.cooldown, &interrupted) {
        let (round, kind) = schedule[i];
        let ran = run_target(
            kind,
            &setup,
            lab.as_ref(),
            &docroot,
            &interrupted,
            &show,
            &mut savers,
        );
        let mut r = match ran {
            Ok(r) => r,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        r.round = round + 1;
        if show.text {
            let mut out = std::io::stdout().lock();
            if schedule.len() > 1 {
                writeln!(
                    out,
                    "{}",
                    run_header(i, schedule.len(), kind, round, setup.load.repeat)
                )?;
            }
            print_run(&mut out, &r)?;
        }
        failure = r.failure();
        runs.push(r);
        write_files(&load, &setup, &runs, false)?;
        if failure.is_some() {
            break;
        }
    }
    if show.text && runs.len() > 1 {
        let mut out = std::io::stdout().lock();
        write!(out, "{}", comparison_table(&runs, &setup.kinds))?;
    }
    write_files(&load, &setup, &runs, true)?;
    for line in savers.finish(failure.is_none() && !interrupted.load(Ordering::Relaxed))? {
        eprintln!("volley: {line}");
    }
    drop(served);
    drop(lab);
    if let Some(e) = failure {
        return Err(e);
    }
    if interrupted.load(Ordering::Relaxed) {
        return Err(Interrupted(
            "interrupted; printed what was measured and stopped the targets".into(),
        )
        .into());
    }
    Ok(ExitCode::SUCCESS)
}

/// The line above run `i` of `n` when several run: its target and, with repeats, its
/// round.
fn run_header(i: usize, n: usize, kind: TargetKind, round: usize, repeat: usize) -> String {
    let of_rounds = if repeat > 1 {
        format!(", round {} of {repeat}", round + 1)
    } else {
        String::new()
    };
    format!("=== run {} of {n}: {kind}{of_rounds} ===", i + 1)
}

/// The flag Ctrl-C raises. The handler runs on ctrlc's own thread, where taking locks is
/// fine: the load sees the flag within 50 ms (the harness's death watch), and the targets
/// are stopped right there so that nothing survives even if the main thread is stuck.
fn stop_on_interrupt() -> Arc<AtomicBool> {
    let interrupted = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&interrupted);
    let _ = ctrlc::set_handler(move || {
        flag.store(true, Ordering::Relaxed);
        volley_targets::stop_all();
    });
    interrupted
}

/// The run's lab when it tunes a namespace (`None` otherwise), its settings noted on
/// stderr unless quiet.
fn build_lab(setup: &Setup<'_>, quiet: bool) -> anyhow::Result<Option<netns::TunedLab>> {
    if !setup.in_namespace() || setup.show_config {
        return Ok(None);
    }
    let lab = netns::build(&setup.sysctls, setup.route)?;
    if !quiet {
        note_lab(&lab);
    }
    Ok(Some(lab))
}

/// The lab's kernel settings and routes, each beside the host's value, on stderr.
fn note_lab(l: &netns::TunedLab) {
    for s in &l.record.sysctls {
        eprintln!(
            "volley: {} {} = {} (host {})",
            l.record.ns, s.key, s.value, s.host
        );
    }
    for r in &l.record.routes {
        eprintln!("volley: {} route {r}", l.record.ns);
    }
}

/// A missing server fails before anything is created or loaded.
fn check_installed(kinds: &[TargetKind]) -> anyhow::Result<()> {
    for kind in kinds {
        if let Some(program) = kind.program() {
            if volley_targets::kind::find_program(program).is_none() {
                return Err(TargetError::NotInstalled {
                    kind: *kind,
                    program: program.to_string(),
                }
                .into());
            }
        }
    }
    Ok(())
}

/// Pins volley to the cores `--target-cpus` leaves, and says so.
fn pin(setup: &Setup, quiet: bool) -> anyhow::Result<()> {
    if let Some(cpus) = &setup.volley_cpus {
        pin_self(cpus).context("cannot pin volley to the cores left by --target-cpus")?;
        if !quiet {
            eprintln!(
                "volley: pinned volley to CPU {} and the targets to CPU {}",
                list(cpus),
                list(setup.limits.cpus.as_deref().unwrap_or_default())
            );
        }
    } else if setup.limits.cpus.is_some() && !quiet {
        eprintln!(
            "volley: --target-cpus leaves no core for volley: it shares them with the target"
        );
    }
    Ok(())
}

/// `0,1,2` for the messages.
fn list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The path checked before any target starts, as a study checks its paths
/// (docs/methodology.md, "Validation before measurement"): every managed target serves
/// the docroot's files and answers their path with 200 (its start-up probe asks for this
/// one), so a path with no file there is the user's mistake: one line, exit 2, not "cannot
/// start" after a server was spawned for nothing.
fn check_path(docroot: &Path, path: &str) -> anyhow::Result<()> {
    let p = path.split('?').next().unwrap_or("/");
    let file = docroot.join(p.trim_start_matches('/'));
    if !file.is_file() {
        usage!(
            "GET {p}: no such file in the docroot the targets serve ({}): every target would answer 404 (checked once before the run: give a --path it has)",
            docroot.display()
        );
    }
    Ok(())
}

/// Starts one target with the setup's settings; the error names the likely cause.
fn start(
    kind: TargetKind,
    setup: &Setup,
    lab: Option<&netns::TunedLab>,
    docroot: &Path,
) -> anyhow::Result<RunningTarget> {
    let mut spec = TargetSpec::new(kind);
    spec.netns = lab.map(netns::TunedLab::place);
    spec.settings.workers = setup.workers;
    spec.docroot = Some(docroot.to_path_buf());
    spec.probe_path = setup.path.split('?').next().unwrap_or("/").to_string();
    spec.limits = setup.limits.clone();
    spec.settings.http2 = setup.http2;
    spec.settings.http3 = setup.http3;
    spec.settings.compression = setup.compression;
    setup.tuning.apply(kind, &mut spec.settings);
    if setup.tls {
        spec.tls = Some(TlsSource::Generate);
    }
    // The error's own message already names its OS cause; anyhow's chain would repeat it.
    volley_targets::start(&spec).map_err(|e| {
        let hint = match (&e, setup.limits.memory_max_bytes) {
            (
                TargetError::Rejected { .. }
                | TargetError::BadBanner { .. }
                | TargetError::StartTimeout { .. },
                Some(max),
            ) => format!(
                " (with --memory-max {} MiB the kernel may have killed it for memory: raise the limit)",
                max >> 20
            ),
            _ => String::new(),
        };
        anyhow::anyhow!("cannot start {kind}: {e}{hint}")
    })
}

/// The setup's load aimed at `target`: its address, the path, its CA (the throw-away
/// one made for it is the only one the load trusts, unless the flags name their own);
/// with `--replay`, made the log's replay, whose source comes back beside it.
fn load_for(
    setup: &Setup,
    target: &RunningTarget,
) -> anyhow::Result<(LoadSpec, Option<Arc<volley_replay::source::ReplayFactory>>)> {
    let scheme = if setup.tls { "https" } else { "http" };
    let url = HttpUrl::parse(&format!("{scheme}://{}{}", target.addr, setup.path))
        .context("the target's URL")?;
    let mut spec = setup
        .load
        .at(&[(url.clone(), None)], target.ca_file.as_deref())?;
    let factory = setup
        .replay
        .map(|r| r.aim(&mut spec, url.host_header()))
        .transpose()?;
    Ok((spec, factory))
}

/// Start, watch, load, stop: one target. The target is stopped (and its cgroups and
/// directory removed) on every path out of here, by `stop` or by its `Drop`.
#[allow(clippy::too_many_arguments)]
/// A run under a quota that ended within a few of its periods measured a burst at full
/// speed, not the capped server (`CpuQuota::too_short`): its notes say so.
fn note_too_short(limits: &ResourceLimits, summary: &mut Summary) {
    if let Some(why) = limits
        .cpu_quota
        .and_then(|q| q.too_short(summary.duration_s))
    {
        summary.notes.push(why);
    }
}

fn run_target(
    kind: TargetKind,
    setup: &Setup,
    lab: Option<&netns::TunedLab>,
    docroot: &Path,
    interrupted: &Arc<AtomicBool>,
    show: &Show,
    savers: &mut Savers,
) -> anyhow::Result<TargetRun> {
    let target = start(kind, setup, lab, docroot)?;
    if !show.quiet {
        eprintln!("{}", started_line(&target, ""));
    }
    let record = target.record(&setup.limits);
    let (mut spec, replay_source) = load_for(setup, &target)?;
    if replay_source.is_none() {
        spec.check_first_answers();
    }
    let watch = Watch {
        target: &target,
        monitor_interval: setup.monitor_interval,
        monitor_required: true,
        load_stop: Arc::clone(&spec.cfg.stop_flag),
        outside_stop: Arc::clone(interrupted),
        warmup: spec.cfg.stop.warmup,
    };
    let keep = if savers.wanted() {
        load::Keep::Histograms
    } else {
        load::Keep::Nothing
    };
    let watched = volley_harness::watch(&watch, || -> anyhow::Result<Ran> {
        let first = spec.prepare()?;
        spec.check_cold(first.as_ref())
            .map_err(|e| e.context(kind.to_string()))?;
        let mut ran = load::run_once(&spec, interrupted, show.progress, keep)?;
        ran.summary.first_request = first;
        Ok(ran)
    })?;
    let Watched {
        load: outcome,
        monitor,
        throttling,
        died,
    } = watched;
    let pid = target.pid;
    let leftover_cgroups = stop_target(target);
    let Ran {
        mut summary,
        histograms,
    } = outcome?;
    if let Some(refused) = spec.take_refusal() {
        return Err(refused.context(kind.to_string()));
    }
    volley_harness::fill_machine(&mut summary, monitor.as_ref(), throttling.as_ref());
    note_too_short(&setup.limits, &mut summary);
    let replay = setup
        .replay
        .zip(replay_source.as_deref())
        .map(|(r, source)| (r, r.outcome(source, &mut summary)));
    if let Some(d) = &died {
        summary.notes.push(format!(
            "the target {} (pid {}) died during the run: {}",
            d.kind, d.pid, d.exit_status
        ));
    }
    let throttled = throttling.map(|t| {
        serde_json::json!({
            "nr_periods": t.nr_periods,
            "nr_throttled": t.nr_throttled,
            "throttled_usec": t.throttled_us,
        })
    });
    let extras = Extras {
        monitor: monitor.as_ref(),
        throttling: throttled,
        replay: replay
            .as_ref()
            .map(|(r, o)| super::replay::replay_record(r, o)),
    };
    savers.step(kind, &spec, &record, &summary, histograms, extras)?;
    Ok(TargetRun {
        kind,
        pid,
        record,
        summary,
        monitor,
        throttling,
        died,
        leftover_cgroups,
        interrupted: interrupted.load(Ordering::Relaxed),
        round: 1,
        namespace: lab.map(|l| l.record.clone()),
        replay: replay.map(|(_, o)| o),
    })
}

/// The line a started target gets: `volley: started nginx (pid 12) on URL, VERSION`,
/// with `with` (e.g. ` with 3 DAV account(s)`) after its address.
pub(crate) fn started_line(target: &RunningTarget, with: &str) -> String {
    format!(
        "volley: started {} (pid {}) on {}{with}, {}",
        target.kind,
        target.pid.map_or("-".into(), |p| p.to_string()),
        target.url,
        target.version.as_deref().unwrap_or("version unknown")
    )
}

/// Stops the target; says which cgroups could not be removed.
fn stop_target(target: RunningTarget) -> Vec<PathBuf> {
    let left = target.stop();
    for d in &left {
        eprintln!(
            "volley: warning: cgroup {} could not be removed",
            d.display()
        );
    }
    left
}
