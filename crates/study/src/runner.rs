//! Runs a [`Plan`]: starts every target instance, runs the steps in plan order (or the
//! capacity searches, round-robin so they interleave), writes each step to the store the
//! moment it ends, and stops the targets whatever happens (their `Drop` cleans up).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use volley_analysis::knee::{Capacity, Search, SearchEnd};
use volley_analysis::sustain;
use volley_engine::Live;
use volley_store::{
    CapacityRecord, NewRun, NewStudy, RunId, RunKind, SearchEnd as StoredEnd, Status,
    StepParameters, StepRecord, Store, StudyId,
};
use volley_targets::{
    Compression, CpuQuota, ExternalTarget, ResourceLimits, RunningTarget, TargetError, TargetKind,
    TargetSpec, TlsSource,
};

use crate::outcome::StepOutcome;
use crate::plan::{fmt_duration as fmt_eta, Docroot, Plan, RateBook};
use crate::spec::Mode;
use crate::step::{cold_request, run_step};
use crate::StudyError;

/// How to run.
pub struct RunOptions {
    /// The results store.
    pub db: PathBuf,
    /// The study file's text, stored with the study.
    pub file_text: String,
    /// The `volley` binary for builtin targets (`None`: the current executable).
    pub volley_exe: Option<PathBuf>,
    /// Set by Ctrl-C: the current step stops, is recorded, and the study ends incomplete.
    pub stop_flag: Arc<AtomicBool>,
    /// Draw a progress line with ETA on stderr (only when stderr is a terminal).
    pub progress: bool,
    /// Where notes go (skipped targets, a dead target), one line each.
    pub note: Box<dyn FnMut(&str)>,
}

/// A progress snapshot, as the progress line shows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// Steps finished.
    pub done: usize,
    /// Steps planned (search mode: an estimate).
    pub total: usize,
    /// Estimated time left.
    pub eta: Duration,
}

/// What a study run produced.
#[derive(Debug, Clone)]
pub struct StudyReport {
    /// The study's row.
    pub study: StudyId,
    /// Run per target name.
    pub runs: Vec<(String, RunId)>,
    /// Every step measured, in order.
    pub steps: Vec<StepOutcome>,
    /// Search mode: the capacity found per cell.
    pub searches: Vec<(usize, Capacity)>,
    /// False when interrupted or a target died.
    pub complete: bool,
    /// Targets skipped, with the reason.
    pub skipped: Vec<String>,
    /// Wall time of the whole study.
    pub elapsed: Duration,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A generated fixture, removed on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn make_docroot(d: &Docroot) -> Result<Option<(PathBuf, Option<TempDir>)>, StudyError> {
    match d {
        Docroot::Default => Ok(None),
        Docroot::Dir(p) => Ok(Some((p.clone(), None))),
        Docroot::Fixture { kind, seed } => {
            static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let dir = std::env::temp_dir().join(format!(
                "volley-study-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir)
                .map_err(|e| StudyError::Fixture(format!("{}: {e}", dir.display())))?;
            let guard = TempDir(dir.clone());
            volley_fixtures::generate(kind, &dir, *seed)
                .map_err(|e| StudyError::Fixture(e.to_string()))?;
            Ok(Some((dir, Some(guard))))
        }
    }
}

fn spec_for(plan: &Plan, inst: usize, docroot: Option<&Path>, exe: Option<&Path>) -> TargetSpec {
    let i = &plan.instances[inst];
    let t = &plan.targets[i.target];
    if t.kind == TargetKind::External {
        return TargetSpec::external(ExternalTarget {
            url: t.url.clone().unwrap_or_default(),
            pid: t.pid,
            cgroup_procs: None,
        });
    }
    let mut spec = TargetSpec::new(t.kind);
    spec.settings.workers = t.workers;
    spec.settings.keep_alive = t.keepalive;
    if let Some(d) = docroot {
        spec.docroot = Some(d.to_path_buf());
        // Validate with the first path the study will load (methodology.md, "Validation
        // before measurement"): a fast wrong answer must not become a result.
        if let Some(p) = plan.workloads.first().and_then(|w| w.paths.first()) {
            spec.probe_path = p.split('?').next().unwrap_or(p).to_string();
        }
    }
    spec.limits = ResourceLimits {
        cpus: i.cores.map(|c| (0..c as usize).collect()),
        cpu_quota: i.cpu_quota.map(CpuQuota::of_one_cpu),
        memory_max_bytes: None,
    };
    spec.volley_exe = exe.map(Path::to_path_buf);
    let serve = plan.serve;
    if serve.tls {
        spec.tls = Some(TlsSource::Generate);
        spec.settings.http2 = serve.http2 && t.kind.supports_http2();
    }
    if serve.brotli || serve.gzip {
        // Brotli only where the server has it (seed 002: "where the target supports it");
        // gzip stays on beside it so a client asking gzip is served too.
        let brotli = serve.brotli && t.kind.supports_brotli();
        spec.settings.compression = Some(Compression {
            brotli,
            gzip: serve.gzip || !brotli,
            ..Compression::gzip_and_brotli()
        });
    }
    spec
}

/// TIME_WAIT sockets now, the cheap way when there are many (see
/// `volley_monitor::parse::PER_STATE_LIMIT`); `None` without /proc.
fn time_wait_now() -> Option<u32> {
    std::fs::metadata("/proc/net/tcp").ok()?;
    Some(volley_monitor::parse::TcpStates::sample(|f| std::fs::read_to_string(f).ok()).time_wait)
}

/// Waits `d`, waking early when `stop` is set.
fn rest(d: Duration, stop: &AtomicBool) {
    let until = Instant::now() + d;
    while Instant::now() < until && !stop.load(Ordering::Relaxed) {
        std::thread::sleep((until - Instant::now()).min(Duration::from_millis(20)));
    }
}

/// Cool-down: the engine returns with nothing in flight; then rest the configured time
/// and, while TIME_WAIT is well above its level before the study, rest up to as long
/// again (bounded: TIME_WAIT lasts 60 s on Linux, longer than any sane cool-down).
fn cool_down(d: Duration, baseline: Option<u32>, stop: &AtomicBool) {
    rest(d, stop);
    let Some(base) = baseline else { return };
    let limit = base + (base / 10).max(200);
    let until = Instant::now() + d;
    while Instant::now() < until && !stop.load(Ordering::Relaxed) {
        match time_wait_now() {
            Some(tw) if tw > limit => rest(Duration::from_millis(100), stop),
            _ => break,
        }
    }
}

/// Runs the study. Every finished step is in the store when its line is printed.
pub fn run(plan: &Plan, mut opts: RunOptions) -> Result<StudyReport, StudyError> {
    let started = Instant::now();
    let mut store = Store::open(&opts.db)?;
    store.mark_incomplete_on_open()?;
    let study = store.begin_study(&NewStudy {
        name: plan.name.clone(),
        file_text: opts.file_text.clone(),
    })?;
    let docroot = match make_docroot(&plan.docroot) {
        Ok(d) => d,
        Err(e) => {
            store.finish_study(study, Status::Incomplete)?;
            return Err(e);
        }
    };
    let docroot_path = docroot.as_ref().map(|(p, _)| p.as_path());

    // Start every instance; a target that is not installed is skipped with a note.
    let mut running: Vec<Option<RunningTarget>> = Vec::new();
    let mut skipped = Vec::new();
    let mut skipped_targets: Vec<usize> = Vec::new();
    for i in 0..plan.instances.len() {
        let ti = plan.instances[i].target;
        if skipped_targets.contains(&ti) {
            running.push(None);
            continue;
        }
        let spec = spec_for(plan, i, docroot_path, opts.volley_exe.as_deref());
        match volley_targets::start(&spec) {
            Ok(t) => running.push(Some(t)),
            Err(e) => {
                let why = match &e {
                    TargetError::NotInstalled { .. } => format!("not installed ({e})"),
                    _ => e.to_string(),
                };
                let line = format!("skipping {}: {why}", plan.instance_label(i));
                (opts.note)(&line);
                skipped.push(line);
                if matches!(e, TargetError::NotInstalled { .. }) {
                    skipped_targets.push(ti);
                }
                running.push(None);
            }
        }
    }
    if running.iter().all(Option::is_none) {
        store.finish_study(study, Status::Incomplete)?;
        return Err(StudyError::Invalid(format!(
            "no target could be started: {}",
            skipped.join("; ")
        )));
    }

    // One run per target name.
    let parameters = json!({
        "mode": match plan.mode { Mode::Sweep => "sweep", Mode::Search => "search" },
        "axis": plan.axis,
        "repeats": plan.repeats,
        "timing": {
            "duration_s": plan.timing.duration.map(|d| d.as_secs_f64()),
            "rate_duration_s": plan.timing.rate_duration.map(|d| d.as_secs_f64()),
            "requests": plan.timing.requests,
            "warmup_s": plan.timing.warmup.as_secs_f64(),
            "cooldown_s": plan.timing.cooldown.as_secs_f64(),
        },
        "slo": { "p99_ms": plan.rule.p99_slo.as_secs_f64() * 1e3, "error_share": plan.rule.allowed_error_share },
        "workloads": plan.workloads.iter().map(|w| json!({
            "name": w.name, "method": w.method, "paths": w.paths, "order": format!("{:?}", w.order),
            "load": {
                "model": if w.load.open { "open" } else { "closed" },
                "concurrency": w.load.concurrency, "rate": w.load.rate,
                "threads": w.load.threads, "max_connections": w.load.max_connections,
                "timeout_s": w.load.timeout.as_secs_f64(), "keepalive": w.load.keepalive,
            },
        })).collect::<Vec<_>>(),
    });
    let mut runs: Vec<(String, RunId)> = Vec::new();
    let mut run_of_target: HashMap<usize, RunId> = HashMap::new();
    for (ti, t) in plan.targets.iter().enumerate() {
        let insts: Vec<usize> = (0..plan.instances.len())
            .filter(|&i| plan.instances[i].target == ti && running[i].is_some())
            .collect();
        let Some(&first) = insts.first() else {
            continue;
        };
        let rt = running[first].as_ref().expect("filtered on is_some");
        let limits = spec_for(plan, first, docroot_path, None).limits;
        let mut env = serde_json::to_value(rt.record(&limits)).unwrap_or(Value::Null);
        env["instances"] = json!(insts
            .iter()
            .map(|&i| json!({
                "label": plan.instance_label(i),
                "url": running[i].as_ref().map(|r| r.url.clone()),
                "cpu_quota": plan.instances[i].cpu_quota,
                "cores": plan.instances[i].cores,
            }))
            .collect::<Vec<_>>());
        let id = store.begin_run(&NewRun {
            study: Some(study),
            kind: RunKind::StudyStep,
            target: t.name.clone(),
            parameters: parameters.clone(),
            environment: env,
        })?;
        runs.push((t.name.clone(), id));
        run_of_target.insert(ti, id);
    }

    let baseline_tw = time_wait_now();
    let mut ctx = Ctx {
        plan,
        docroot: docroot_path,
        exe: opts.volley_exe.as_deref(),
        store: &mut store,
        running: &running,
        run_of_target: &run_of_target,
        next_index: HashMap::new(),
        steps: Vec::new(),
        stop: &opts.stop_flag,
        progress: opts.progress,
        order: 0,
        started,
        baseline_tw,
    };
    let mut complete = true;
    let mut searches = Vec::new();
    let mut active: Vec<ActiveSearch> = Vec::new();
    let result: Result<(), StudyError> = (|| {
        match plan.mode {
            Mode::Sweep => {
                let total = plan.steps.len();
                // The ETA learns: request-count steps left are re-estimated from the
                // req/s finished steps of the same family measured.
                let mut book = RateBook::default();
                for ps in &plan.steps {
                    if opts.stop_flag.load(Ordering::Relaxed) {
                        complete = false;
                        break;
                    }
                    let cell = &plan.cells[ps.cell];
                    if running[cell.instance].is_none() {
                        continue;
                    }
                    let remaining = plan.remaining_estimate(&plan.steps[ps.order..], &book);
                    let p = Progress {
                        done: ps.order,
                        total,
                        eta: remaining,
                    };
                    match ctx.step(ps.cell, ps.repeat, cell.rate, "sweep", p, &mut *opts.note)? {
                        Some(_) => {
                            if let Some(o) = ctx.steps.last() {
                                book.record(cell, o.rps);
                            }
                        }
                        None => complete = false,
                    }
                }
            }
            Mode::Search => {
                let sp = plan
                    .search
                    .as_ref()
                    .expect("search mode has search settings");
                for (ci, c) in plan.cells.iter().enumerate() {
                    if running[c.instance].is_some() {
                        let s = Search::new(sp.start_rate, sp.opts.clone())
                            .map_err(|e| StudyError::Invalid(e.to_string()))?;
                        active.push(ActiveSearch::new(ci, s));
                    }
                }
                let per_search = plan.search_steps_estimate();
                let mut done_steps = 0usize;
                'rounds: while active.iter().any(|a| !a.search.is_done()) {
                    for a in active.iter_mut() {
                        let ci = a.cell;
                        let Some(rate) = a.search.next_rate() else {
                            continue;
                        };
                        if opts.stop_flag.load(Ordering::Relaxed) {
                            complete = false;
                            break 'rounds;
                        }
                        let est = plan.step_estimate(&plan.cells[ci]);
                        let total = (done_steps + 6).max(per_search as usize * active_len(plan));
                        let p = Progress {
                            done: done_steps,
                            total,
                            eta: est * (total - done_steps) as u32,
                        };
                        let mut repeat = a
                            .search
                            .history()
                            .iter()
                            .filter(|(r, _)| *r == rate)
                            .count() as u32;
                        // A generator-bound step measured the generator, not the server
                        // (the shared rule, `sustain::counts_for_server`): rerun it, a
                        // bounded number of times after a rest, and if it stays
                        // generator-bound it is neither a pass nor a fail.
                        let mut retries = 0;
                        a.started_ms.get_or_insert_with(now_ms);
                        let heard = loop {
                            let Some(sig) =
                                ctx.step(ci, repeat, Some(rate), "search", p, &mut *opts.note)?
                            else {
                                break None;
                            };
                            a.steps_run += 1;
                            let stopping = opts.stop_flag.load(Ordering::Relaxed);
                            match search_input(sig, retries, stopping) {
                                SearchInput::Rerun => {
                                    retries += 1;
                                    repeat += 1;
                                    done_steps += 1;
                                    rest(GENERATOR_RERUN_REST, &opts.stop_flag);
                                }
                                other => break Some(other),
                            }
                        };
                        let observed = match heard {
                            Some(SearchInput::Observe(ok)) => a.search.observe(rate, ok),
                            // Stopping: a generator-bound step ends nothing, the search
                            // is stored as interrupted, not as a generator-bound end.
                            Some(_) if opts.stop_flag.load(Ordering::Relaxed) => {
                                complete = false;
                                break 'rounds;
                            }
                            Some(_) => {
                                (opts.note)(&format!(
                                    "search {}: still generator-bound at {rate:.0} req/s after {retries} rerun(s): the edge cannot be looked for above this rate on this machine",
                                    plan.instance_label(plan.cells[ci].instance)
                                ));
                                a.search.observe_generator_bound(rate)
                            }
                            None => {
                                complete = false;
                                break 'rounds;
                            }
                        };
                        observed.map_err(|e| StudyError::Invalid(e.to_string()))?;
                        done_steps += 1;
                        if let Some(c) = a.search.capacity() {
                            // The search's answer is stored the moment it ends: a study
                            // killed later keeps it (style.md habit 8).
                            let record = capacity_record(plan, a, Some(&c), now_ms());
                            let run =
                                run_of_target[&plan.instances[plan.cells[ci].instance].target];
                            ctx.store.record_capacity(run, &record)?;
                            a.recorded = true;
                            searches.push((ci, c));
                        }
                    }
                }
            }
        }
        Ok(())
    })();
    // Searches cut short (Ctrl-C, a dead target, an engine error) keep a row saying so,
    // with what they had decided; a search that never ran a step leaves none.
    let finished_ms = now_ms();
    for a in active.iter().filter(|a| !a.recorded && a.steps_run > 0) {
        let ci = a.cell;
        let run = run_of_target[&plan.instances[plan.cells[ci].instance].target];
        let record = capacity_record(plan, a, None, finished_ms);
        if let Err(e) = ctx.store.record_capacity(run, &record) {
            (opts.note)(&format!("could not store the unfinished search: {e}"));
        }
    }
    let steps = std::mem::take(&mut ctx.steps);
    if result.is_err() || opts.stop_flag.load(Ordering::Relaxed) {
        complete = false;
    }
    let status = if complete {
        Status::Complete
    } else {
        Status::Incomplete
    };
    for (_, id) in &runs {
        store.finish_run(*id, status)?;
    }
    store.finish_study(study, status)?;
    for t in running.into_iter().flatten() {
        t.stop();
    }
    drop(docroot);
    result?;
    Ok(StudyReport {
        study,
        runs,
        steps,
        searches,
        complete,
        skipped,
        elapsed: started.elapsed(),
    })
}

/// Reruns of a search step labelled generator-bound before the search hears of it.
const GENERATOR_RETRIES: u32 = 2;

/// Rest before such a rerun (on top of the cool-down): a machine busy with someone
/// else's work for a moment gets that moment to pass.
const GENERATOR_RERUN_REST: Duration = Duration::from_secs(1);

/// What a finished rate step tells the capacity search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StepSignal {
    /// The sustainability verdict (rate steps only).
    pub sustainable: Option<bool>,
    /// The step's bound label (`server-bound`, `generator-bound`, `inconclusive`).
    pub label: &'static str,
}

/// What the search loop does with a finished step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SearchInput {
    /// Run the same rate again.
    Rerun,
    /// Tell the search whether the rate was sustainable.
    Observe(bool),
    /// Still generator-bound after the reruns: neither pass nor fail.
    GeneratorBound,
}

/// The search's use of a step, by the same rule the reports apply
/// (`volley_analysis::sustain::counts_for_server`): a step that counts for the server
/// is observed as its verdict says (inconclusive ones included, as the reports keep
/// them); a generator-bound step, pass or fail, is rerun up to [`GENERATOR_RETRIES`]
/// times (not when the study is stopping), then reported as generator-bound.
pub(crate) fn search_input(sig: StepSignal, retries: u32, stopping: bool) -> SearchInput {
    if sustain::counts_for_server(Some(sig.label)) {
        SearchInput::Observe(sig.sustainable == Some(true))
    } else if retries < GENERATOR_RETRIES && !stopping {
        SearchInput::Rerun
    } else {
        SearchInput::GeneratorBound
    }
}

/// One cell's capacity search while the study runs.
struct ActiveSearch {
    cell: usize,
    search: Search,
    /// Wall clock when its first step started.
    started_ms: Option<i64>,
    /// Steps run, reruns of generator-bound steps included.
    steps_run: u32,
    /// Its row is in the store.
    recorded: bool,
}

impl ActiveSearch {
    fn new(cell: usize, search: Search) -> Self {
        ActiveSearch {
            cell,
            search,
            started_ms: None,
            steps_run: 0,
            recorded: false,
        }
    }
}

/// Confidence level of the search's interval (`knee::Capacity`: 2.5th and 97.5th
/// percentiles of the bootstrap replicates).
const SEARCH_CONFIDENCE: f64 = 0.95;

/// The identity of a cell as stored with its search result (docs/store-conventions.md,
/// "capacities"): the same names and formats as the step parameters, so a report can
/// match the row to the cell's steps.
pub(crate) fn cell_identity(plan: &Plan, ci: usize) -> Value {
    let cell = &plan.cells[ci];
    let inst = &plan.instances[cell.instance];
    json!({
        "target": plan.targets[inst.target].name,
        "instance": plan.instance_label(cell.instance),
        "workload": plan.workloads[cell.workload].name,
        "concurrency": cell.concurrency,
        "keepalive": cell.keepalive,
        "cpu_quota_cores": inst.cpu_quota,
        "cores": inst.cores.map(cores_text),
    })
}

/// The cpuset of `n` pinned cores as the steps store it: "0", "0-1", ...
fn cores_text(n: u32) -> String {
    if n <= 1 {
        "0".to_string()
    } else {
        format!("0-{}", n - 1)
    }
}

/// The stored row of a search: its answer when it ended (`cap`), or, cut short, the
/// largest rate decided sustainable so far with no interval.
fn capacity_record(
    plan: &Plan,
    a: &ActiveSearch,
    cap: Option<&Capacity>,
    finished_ms: i64,
) -> CapacityRecord {
    let cell = cell_identity(plan, a.cell);
    let started_unix_ms = a.started_ms.unwrap_or(finished_ms);
    match cap {
        Some(c) => CapacityRecord {
            cell,
            capacity_rps: c.capacity_rps,
            ci_lo_rps: Some(c.ci_lo_rps),
            ci_hi_rps: c.ci_hi_rps,
            confidence: SEARCH_CONFIDENCE,
            end: match c.end {
                SearchEnd::Converged => StoredEnd::Converged,
                SearchEnd::ReachedMaxRate => StoredEnd::ReachedMaxRate,
                SearchEnd::BelowMinRate => StoredEnd::BelowMinRate,
                SearchEnd::StepBudgetExhausted => StoredEnd::StepBudgetExhausted,
                SearchEnd::GeneratorBound => StoredEnd::GeneratorBound,
            },
            steps: a.steps_run,
            started_unix_ms,
            finished_unix_ms: finished_ms,
            detail: serde_json::to_value(c).unwrap_or(Value::Null),
        },
        None => {
            let history = a.search.history();
            CapacityRecord {
                cell,
                capacity_rps: volley_analysis::knee::sweep_capacity(history).capacity_rps,
                ci_lo_rps: None,
                ci_hi_rps: None,
                confidence: SEARCH_CONFIDENCE,
                end: StoredEnd::Interrupted,
                steps: a.steps_run,
                started_unix_ms,
                finished_unix_ms: finished_ms,
                detail: json!({ "history": history }),
            }
        }
    }
}

fn active_len(plan: &Plan) -> usize {
    plan.cells.len().max(1)
}

/// The spec of a fresh target for a cold step: `cold_path` is the workload's first path,
/// which the start-up probe must not touch, so the probe asks another file.
fn cold_spec(
    plan: &Plan,
    inst: usize,
    w: &crate::plan::Workload,
    docroot: Option<&Path>,
    exe: Option<&Path>,
) -> TargetSpec {
    let mut spec = spec_for(plan, inst, docroot, exe);
    let cold = w.paths[0].split('?').next().unwrap_or("/").to_string();
    if spec.probe_path == cold {
        spec.probe_path = plan
            .workloads
            .iter()
            .flat_map(|w| w.paths.iter())
            .map(|p| p.split('?').next().unwrap_or(p).to_string())
            .find(|p| *p != cold)
            .unwrap_or_else(|| "/index.html".to_string());
    }
    spec.cold_path = Some(cold);
    spec
}

struct Ctx<'a> {
    plan: &'a Plan,
    docroot: Option<&'a Path>,
    exe: Option<&'a Path>,
    store: &'a mut Store,
    running: &'a [Option<RunningTarget>],
    run_of_target: &'a HashMap<usize, RunId>,
    next_index: HashMap<RunId, u32>,
    steps: Vec<StepOutcome>,
    stop: &'a Arc<AtomicBool>,
    progress: bool,
    order: usize,
    started: Instant,
    baseline_tw: Option<u32>,
}

impl Ctx<'_> {
    /// Runs, records and cools down one step. `Ok(None)`: the target died (noted; the
    /// study goes on with the others and ends incomplete); what the step says otherwise.
    fn step(
        &mut self,
        ci: usize,
        repeat: u32,
        rate: Option<f64>,
        phase: &str,
        progress: Progress,
        note: &mut dyn FnMut(&str),
    ) -> Result<Option<StepSignal>, StudyError> {
        let plan = self.plan;
        let cell = &plan.cells[ci];
        let inst = &plan.instances[cell.instance];
        let w = &plan.workloads[cell.workload];
        // Cold start: a target of its own, started now, so the step's first request is
        // the first after start (the up-front instance keeps serving other workloads).
        let mut fresh: Option<RunningTarget> = None;
        if w.cold_start {
            let spec = cold_spec(plan, cell.instance, w, self.docroot, self.exe);
            match volley_targets::start(&spec) {
                Ok(t) => fresh = Some(t),
                Err(e) => {
                    note(&format!(
                        "{}: cannot start a fresh target for the cold request: {e}",
                        plan.instance_label(cell.instance)
                    ));
                    return Ok(None);
                }
            }
        }
        let Some(target) = fresh.as_ref().or(self.running[cell.instance].as_ref()) else {
            return Ok(None);
        };
        if let Err(died) = target.check() {
            note(&format!("{}: {died}", plan.instance_label(cell.instance)));
            return Ok(None);
        }
        let run = self.run_of_target[&inst.target];
        let live = Live::new();
        let what = format!(
            "{} {}{}{} c={} ka={}",
            plan.instance_label(cell.instance),
            w.name,
            rate.map(|r| format!(" rate={r:.0}")).unwrap_or_default(),
            if repeat > 0 {
                format!(" #{}", repeat + 1)
            } else {
                String::new()
            },
            cell.concurrency,
            if cell.keepalive { "on" } else { "off" },
        );
        let started_ms = now_ms();
        let cold = if w.cold_start {
            let c =
                cold_request(w, cell, target, self.stop).map_err(|message| StudyError::Engine {
                    step: self.order,
                    message,
                })?;
            // Validated only now: validating first would have warmed the path.
            let valid = target.validate_path(&w.paths[0]);
            if let Err(e) = &valid {
                note(&format!(
                    "cold request answered wrongly, its figure is void: {e}"
                ));
            }
            Some((c, valid.is_ok()))
        } else {
            None
        };
        let done_flag = AtomicBool::new(false);
        let show = self.progress;
        let measured = std::thread::scope(|scope| {
            if show {
                let (live, done_flag, what) = (&live, &done_flag, &what);
                scope.spawn(move || progress_line(live, done_flag, what, progress));
            }
            let r = run_step(w, cell, rate, plan, target, self.stop, &live);
            done_flag.store(true, Ordering::Relaxed);
            r
        });
        let m = measured.map_err(|message| StudyError::Engine {
            step: self.order,
            message,
        })?;
        let index = self.next_index.entry(run).or_insert(0);
        let mut params = StepParameters {
            rate_rps: rate,
            concurrency: Some(cell.concurrency),
            cpu_quota_cores: inst.cpu_quota,
            cores: inst.cores.map(cores_text),
            keepalive: Some(cell.keepalive),
            repeat,
            extra: serde_json::Map::new(),
        };
        params.extra.insert("axis".into(), json!(plan.axis));
        params.extra.insert("phase".into(), json!(phase));
        params.extra.insert("order".into(), json!(self.order));
        params.extra.insert("workload".into(), json!(w.name));
        params
            .extra
            .insert("instance".into(), json!(plan.instance_label(cell.instance)));
        let mut summary_json = m.summary_json;
        let warm_ttfb_ms = m.summary.latency.get("ttfb").map(|l| l.p50_ms);
        if let Some((c, valid)) = &cold {
            params.extra.insert("cold_start".into(), json!(true));
            summary_json["cold"] = json!({
                "ttfb_ms": c.ttfb_ms,
                "connect_ms": c.connect_ms,
                "tls_handshake_ms": c.tls_handshake_ms,
                "response_ms": c.response_ms,
                "since_spawn_ms": c.since_spawn_ms,
                "status": c.status,
                "error": c.error,
                "validated": valid,
                "warm_ttfb_p50_ms": warm_ttfb_ms,
                "note": "the first request after the target started, timed alone on a fresh connection; the warm figures are the step's",
            });
        }
        let why_not = if m.sustainable == Some(false) {
            format!(" ({})", reasons_text(&m.verdict["sustain"]["reasons"]))
        } else {
            String::new()
        };
        let record = StepRecord {
            index: *index,
            parameters: params,
            summary: summary_json,
            verdict: Some(m.verdict),
            label: Some(m.label.to_string()),
            started_unix_ms: started_ms,
            finished_unix_ms: now_ms(),
            series: m.series,
            histograms: m.histograms,
        };
        self.store.record_step(run, &record)?;
        *index += 1;
        let s = &m.summary;
        let headline = if rate.is_some() {
            "response_time"
        } else {
            "service_time"
        };
        let p99 = s.latency.get(headline).map_or(0.0, |l| l.p99_ms);
        let outcome = StepOutcome {
            order: self.order,
            cell: ci,
            repeat,
            rate,
            rps: s.throughput.requests_per_s,
            ok_rps: s.throughput.ok_per_s,
            p99_ms: p99,
            // Requests still in flight when the step ended are censored, not failures.
            errors: s.requests.failed.saturating_sub(s.requests.censored),
            sustainable: m.sustainable,
            label: m.label,
            cold_ttfb_ms: cold
                .as_ref()
                .filter(|(c, valid)| *valid && c.error.is_none())
                .map(|(c, _)| c.ttfb_ms),
            warm_ttfb_ms,
        };
        let slow = if rate.is_some() {
            crate::outcome::slow_second_note(&s.seconds, plan.rule.p99_slo.as_secs_f64() * 1e3)
        } else {
            None
        };
        eprintln!(
            "[{:>4}s] {what}: {:.0} req/s, p99 {:.2} ms, {} errors, {}{}{}{}{}",
            self.started.elapsed().as_secs(),
            outcome.rps,
            outcome.p99_ms,
            outcome.errors,
            m.label,
            match m.sustainable {
                Some(true) => ", sustainable",
                Some(false) => ", NOT sustainable",
                None => "",
            },
            why_not,
            match s.generator.cpu_pressure {
                Some(p) if p > crate::outcome::BUSY_PRESSURE_SHARE =>
                    format!(" [machine busy: CPU pressure {:.0}%]", p * 100.0),
                _ => String::new(),
            },
            slow.map(|n| format!("; {n}")).unwrap_or_default()
        );
        if let Some((c, _)) = &cold {
            eprintln!(
                "        cold: first request TTFB {:.2} ms (TCP connect {:.2}, TLS handshake {:.2}), first byte {:.0} ms after spawn; warm TTFB p50 {:.2} ms",
                c.ttfb_ms,
                c.connect_ms,
                c.tls_handshake_ms,
                c.since_spawn_ms,
                warm_ttfb_ms.unwrap_or(f64::NAN)
            );
        }
        self.steps.push(outcome);
        self.order += 1;
        cool_down(plan.timing.cooldown, self.baseline_tw, self.stop);
        Ok(Some(StepSignal {
            sustainable: m.sustainable,
            label: m.label,
        }))
    }
}

/// The sustainability reasons of a stored verdict in one line, e.g.
/// `send_rate_short send_rate_rps=985.2 required_rps=990`: why a step failed is printed
/// with it, so a search walking down can be read from its log.
fn reasons_text(reasons: &Value) -> String {
    let Some(list) = reasons.as_array() else {
        return "no reason recorded".to_string();
    };
    let one = |r: &Value| -> String {
        let Some(obj) = r.as_object() else {
            return r.to_string();
        };
        let mut parts = vec![obj
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string()];
        for (k, v) in obj.iter().filter(|(k, _)| *k != "reason") {
            // Durations serialise as {secs, nanos}: shown in ms.
            let duration_ms = v.as_object().and_then(|d| {
                Some(d.get("secs")?.as_f64()? * 1e3 + d.get("nanos")?.as_f64()? / 1e6)
            });
            let num = |x: f64| {
                format!("{x:.4}")
                    .trim_end_matches('0')
                    .trim_end_matches('.')
                    .to_string()
            };
            let v = match (duration_ms, v.as_f64()) {
                (Some(ms), _) => format!("{}ms", num(ms)),
                (None, Some(x)) => num(x),
                (None, None) => v.to_string(),
            };
            parts.push(format!("{k}={v}"));
        }
        parts.join(" ")
    };
    list.iter().map(one).collect::<Vec<_>>().join("; ")
}

fn progress_line(live: &Live, done: &AtomicBool, what: &str, p: Progress) {
    let mut err = std::io::stderr();
    let start = Instant::now();
    while !done.load(Ordering::Relaxed) {
        let s = live.snapshot();
        let eta = p.eta.saturating_sub(start.elapsed());
        let _ = write!(
            err,
            "\r\x1b[2K[step {}/{} ETA {}] {what}: done {} errors {} open {}",
            p.done + 1,
            p.total,
            fmt_eta(eta),
            s.done,
            s.errors,
            s.open_connections
        );
        let _ = err.flush();
        for _ in 0..5 {
            if done.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let _ = write!(err, "\r\x1b[2K");
    let _ = err.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(sustainable: bool, label: &'static str) -> StepSignal {
        StepSignal {
            sustainable: Some(sustainable),
            label,
        }
    }

    #[test]
    fn the_search_hears_steps_by_the_reports_rule() {
        use SearchInput::*;
        // Server-bound and inconclusive steps count, as in the reports.
        assert_eq!(
            search_input(sig(true, "server-bound"), 0, false),
            Observe(true)
        );
        assert_eq!(
            search_input(sig(false, "server-bound"), 0, false),
            Observe(false)
        );
        assert_eq!(
            search_input(sig(false, "inconclusive"), 1, false),
            Observe(false)
        );
        // Generator-bound, pass or fail, is rerun (bounded), then neither pass nor fail.
        for ok in [true, false] {
            assert_eq!(search_input(sig(ok, "generator-bound"), 0, false), Rerun);
            assert_eq!(
                search_input(sig(ok, "generator-bound"), GENERATOR_RETRIES - 1, false),
                Rerun
            );
            assert_eq!(
                search_input(sig(ok, "generator-bound"), GENERATOR_RETRIES, false),
                GeneratorBound
            );
            assert_eq!(
                search_input(sig(ok, "generator-bound"), 0, true),
                GeneratorBound,
                "no rerun while the study is stopping"
            );
        }
    }

    #[test]
    fn reasons_are_printed_with_their_figures() {
        let v = serde_json::json!([
            {"reason": "send_rate_short", "send_rate_rps": 985.25, "required_rps": 990.0},
            {"reason": "in_flight_rising", "slope_per_s": 3.5},
            {"reason": "p99_over_slo", "slo": {"secs": 0, "nanos": 100_000_000}}
        ]);
        assert_eq!(
            reasons_text(&v),
            "send_rate_short required_rps=990 send_rate_rps=985.25; in_flight_rising slope_per_s=3.5; p99_over_slo slo=100ms"
        );
        assert_eq!(reasons_text(&Value::Null), "no reason recorded");
    }

    #[test]
    fn a_search_is_stored_with_its_interval_or_as_interrupted() {
        let text = r#"
name = "s"
mode = "search"
[[target]]
name = "n"
kind = "nginx"
cpu_quota = 0.5
cores = 2
[[workload]]
name = "w"
paths = ["/x"]
[steps]
duration = "3s"
[search]
start_rate = 100
repeats = 1
"#;
        let plan = crate::resolve(&crate::parse(text).unwrap(), text, 1.0).unwrap();
        let sp = plan.search.clone().unwrap();
        let mut a = ActiveSearch::new(0, Search::new(sp.start_rate, sp.opts).unwrap());
        a.started_ms = Some(1_000);
        // Capacity 1000 req/s: 100..800 pass, 1600 fails, then bisection.
        let mut partial = None;
        while let Some(rate) = a.search.next_rate() {
            a.search.observe(rate, rate <= 1000.0).unwrap();
            a.steps_run += 1;
            if a.steps_run == 5 {
                partial = Some(capacity_record(&plan, &a, None, 2_000));
            }
        }
        let c = a.search.capacity().unwrap();
        let done = capacity_record(&plan, &a, Some(&c), 9_000);
        assert_eq!(done.end, StoredEnd::Converged);
        assert_eq!(done.capacity_rps, c.capacity_rps);
        assert_eq!(done.ci_lo_rps, Some(c.ci_lo_rps));
        assert_eq!(done.ci_hi_rps, c.ci_hi_rps);
        assert_eq!(done.confidence, 0.95);
        assert_eq!(done.steps, a.steps_run);
        assert_eq!(
            (done.started_unix_ms, done.finished_unix_ms),
            (1_000, 9_000)
        );
        assert_eq!(done.detail["end"], "converged");
        assert_eq!(
            done.cell,
            json!({"target": "n", "instance": "n cpu=50% cores=2", "workload": "w",
                   "concurrency": 1, "keepalive": true, "cpu_quota_cores": 0.5,
                   "cores": "0-1"})
        );
        // Cut short after 100, 200, 400, 800 passed and 1600 failed: 800 so far, no CI.
        let partial = partial.unwrap();
        assert_eq!(partial.end, StoredEnd::Interrupted);
        assert_eq!(partial.capacity_rps, Some(800.0));
        assert_eq!((partial.ci_lo_rps, partial.ci_hi_rps), (None, None));
        assert_eq!(partial.steps, 5);
    }
}
