//! Runs a [`Plan`]: starts every target instance, runs the steps in plan order (or the
//! capacity searches, round-robin so they interleave), writes each step to the store the
//! moment it ends, and stops the targets whatever happens (their `Drop` cleans up).
//!
//! Place in the flow: `plan -> **runner** -> step (the harness's watched, measured run,
//! then the judgement) -> store`; the end-of-study table (`outcome`) reads the
//! [`StudyReport`] this returns. Nothing here prints: notes, step lines and the progress
//! line go through the binary's callbacks in [`RunOptions`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use volley_analysis::knee::Capacity;
use volley_engine::Live;
use volley_harness::{rest, ColdFigures, ServedDocroot};
use volley_store::{NewRun, NewStudy, RunId, RunKind, Status, StepRecord, Store, StudyId};
use volley_targets::{NetnsPlace, RunningTarget, TargetError};

use crate::deploy::StudyHosts;
use crate::injected;
use crate::lab::StudyLab;
use crate::plan::{Plan, RateBook, Workload};
use crate::spec::Mode;
use crate::step::{cold_request, run_step, JudgedStep, StepOutcome};
use crate::StudyError;
use start::{begin_runs, check_paths, start_targets};

mod remeasure;
mod restart;
mod search;
mod start;
mod step_info;
mod target_spec;
mod variant_lab;

use remeasure::Remeasures;
use search::{ActiveSearch, StepSignal};
use step_info::{cold_json, cores_text, step_parameters, step_what};
use target_spec::spec_for;

/// Hears each tick of the running step (`Some`), and its end (`None`): the binary
/// draws its progress bars from these numbers.
pub type ProgressFn = Box<ProgressSink>;

/// What a [`ProgressFn`] boxes.
pub type ProgressSink = dyn Fn(Option<StepTick<'_>>) + Send + Sync;

/// Where the study and its running step are, about four times a second.
#[derive(Debug, Clone, Copy)]
pub struct StepTick<'a> {
    /// Steps done and planned, and the study's ETA at the step's start.
    pub progress: Progress,
    /// The step in words (instance, workload, rate, repeat, concurrency, keep-alive).
    pub what: &'a str,
    /// Time since the measured load started.
    pub elapsed: Duration,
    /// The engine's live counters.
    pub live: volley_engine::LiveSnapshot,
    /// The step's limits (measured time and/or requests; the first reached ends it).
    pub stop: volley_engine::StopCondition,
}

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
    /// The live progress line with ETA, redrawn about four times a second while a step
    /// runs (`None`: no line, e.g. stderr is not a terminal).
    pub progress: Option<ProgressFn>,
    /// Where notes go (skipped targets, a dead target), one line each.
    pub note: Box<dyn FnMut(&str)>,
    /// Where each finished step's line goes (figures, label, verdict), as it is stored.
    pub step_line: Box<dyn FnMut(&str)>,
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
    /// The study was stopped (Ctrl-C, or the bus of its agents gone), as opposed to
    /// cut short by a target that died or could not run its steps.
    pub interrupted: bool,
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

/// TIME_WAIT sockets now, the cheap way when there are many (see
/// `volley_monitor::parse::PER_STATE_LIMIT`); `None` without /proc.
fn time_wait_now() -> Option<u32> {
    std::fs::metadata("/proc/net/tcp").ok()?;
    Some(volley_monitor::parse::TcpStates::sample(|f| std::fs::read_to_string(f).ok()).time_wait)
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

/// Runs the study. Every finished step is in the store when its line is written.
pub fn run(plan: &Plan, opts: RunOptions) -> Result<StudyReport, StudyError> {
    let RunOptions {
        db,
        file_text,
        volley_exe,
        stop_flag,
        progress,
        mut note,
        step_line,
    } = opts;
    let started = Instant::now();
    let mut store = Store::open(&db)?;
    // A study appends (its steps, and a long step's seconds as they close) and reads
    // little back: SQLite's default 2 MB page cache only fills with pages it never
    // reads again, and showed as an hour-long step's memory growing.
    store.cap_cache(STORE_CACHE_KIB)?;
    store.mark_incomplete_on_open()?;
    let study = store.begin_study(&NewStudy {
        name: plan.name.clone(),
        file_text,
    })?;
    let docroot = plan
        .docroot
        .prepare("study")
        .map_err(|e| StudyError::Fixture(e.to_string()));
    let docroot = or_incomplete(&store, study, docroot)?;
    let docroot_path = docroot.as_ref().map(ServedDocroot::path);
    // Built before the targets, which start inside it; removed when this returns.
    let lab = or_incomplete(&store, study, StudyLab::open(plan, &mut *note))?;
    // volley copied to the ssh hosts before any target starts: a host that cannot take
    // it ends the study here, with nothing left on the others.
    let hosts = or_incomplete(
        &store,
        study,
        StudyHosts::open(plan, volley_exe.as_deref(), &mut *note),
    )?;
    // Variants' kernel settings, each in a lab of its own, checked before any target
    // starts: a refused key ends the study here.
    let vlabs = or_incomplete(&store, study, variant_lab::VariantLabs::open(plan))?;
    note_variant_sysctls(plan, &vlabs, &mut *note);
    let netns = lab.as_ref().map(|l| &l.place);
    let (running, skipped) = start_targets(
        plan,
        docroot_path,
        volley_exe.as_deref(),
        netns,
        &vlabs,
        &mut note,
    );
    or_incomplete(&store, study, any_started(&running, &skipped))?;
    or_incomplete(&store, study, check_paths(plan, &running, &vlabs))?;
    let (runs, run_of_target) =
        begin_runs(plan, &mut store, study, &running, docroot_path, &vlabs)?;
    let mut ctx = StudyRun {
        plan,
        docroot: docroot_path,
        exe: volley_exe.as_deref(),
        lab: lab.as_ref(),
        vlabs: &vlabs,
        hosts: hosts.as_ref(),
        store: &mut store,
        running: &running,
        restarted: (0..running.len()).map(|_| None).collect(),
        run_of_target: &run_of_target,
        next_index: HashMap::new(),
        steps: Vec::new(),
        active: Vec::new(),
        searches: Vec::new(),
        pass: None,
        stop: &stop_flag,
        progress: progress.as_deref(),
        note,
        step_line,
        order: 0,
        started,
        baseline_tw: time_wait_now(),
    };
    let result = ctx.run_steps();
    ctx.store_unfinished_searches();
    let (steps, searches, mut note) = (ctx.steps, ctx.searches, ctx.note);
    let complete = matches!(result, Ok(true)) && !stop_flag.load(Ordering::Relaxed);
    let status = if complete {
        Status::Complete
    } else {
        Status::Incomplete
    };
    close_study(&store, study, &runs, status, running, hosts, &mut *note)?;
    drop(docroot);
    result?;
    Ok(StudyReport {
        study,
        runs,
        steps,
        searches,
        complete,
        interrupted: stop_flag.load(Ordering::Relaxed),
        skipped,
        elapsed: started.elapsed(),
    })
}

/// The study's store connection's page cache (see `Store::cap_cache`).
const STORE_CACHE_KIB: u32 = 512;

/// `r`, after marking `study` incomplete in the store when it failed: a study that could
/// not get to its steps is never left "running".
fn or_incomplete<T>(
    store: &Store,
    study: StudyId,
    r: Result<T, StudyError>,
) -> Result<T, StudyError> {
    if r.is_err() {
        store.finish_study(study, Status::Incomplete)?;
    }
    r
}

/// Refuses a study none of whose targets started, with why each was skipped.
fn any_started(running: &[Option<RunningTarget>], skipped: &[String]) -> Result<(), StudyError> {
    if running.iter().all(Option::is_none) {
        return Err(StudyError::Invalid(format!(
            "no target could be started: {}",
            skipped.join("; ")
        )));
    }
    Ok(())
}

/// Notes each variant's kernel settings as set in its own lab, beside the host's value.
fn note_variant_sysctls(plan: &Plan, vlabs: &variant_lab::VariantLabs, note: &mut dyn FnMut(&str)) {
    for i in 0..plan.instances.len() {
        if let Some(r) = vlabs.record(i) {
            for s in &r.sysctls {
                note(&format!(
                    "{}: {} = {} in {} (host {})",
                    plan.instance_label(i),
                    s.key,
                    s.value,
                    r.ns,
                    s.host
                ));
            }
        }
    }
}

/// Closes what the study opened, in order: its runs and itself marked `status` in the
/// store, the targets stopped, the ssh hosts cleaned.
fn close_study(
    store: &Store,
    study: StudyId,
    runs: &[(String, RunId)],
    status: Status,
    running: Vec<Option<RunningTarget>>,
    hosts: Option<StudyHosts>,
    note: &mut dyn FnMut(&str),
) -> Result<(), StudyError> {
    for (_, id) in runs {
        store.finish_run(*id, status)?;
    }
    store.finish_study(study, status)?;
    for t in running.into_iter().flatten() {
        t.stop();
    }
    if let Some(h) = hosts {
        h.close(note);
    }
    Ok(())
}

/// The study while it runs: what the steps need, and what they produced so far.
struct StudyRun<'a> {
    plan: &'a Plan,
    docroot: Option<&'a Path>,
    exe: Option<&'a Path>,
    /// The network lab of `placement = "netns"` injectors.
    lab: Option<&'a StudyLab>,
    /// The labs of variants with kernel settings, by instance.
    vlabs: &'a variant_lab::VariantLabs,
    /// The hosts of `placement = "ssh"` injectors, volley copied there.
    hosts: Option<&'a StudyHosts>,
    store: &'a mut Store,
    running: &'a [Option<RunningTarget>],
    /// Targets started again after they died (`restart = "next-step"`), by instance;
    /// they stand in for `running`'s dead ones.
    restarted: Vec<Option<RunningTarget>>,
    run_of_target: &'a HashMap<usize, RunId>,
    next_index: HashMap<RunId, u32>,
    steps: Vec<StepOutcome>,
    /// Search mode: each cell's search.
    active: Vec<ActiveSearch>,
    /// Search mode: the capacities found, as each search ended (one per pass).
    searches: Vec<(usize, Capacity)>,
    /// The pass of the search whose step runs, when its cell is searched more than
    /// once (`[search] passes`): said in the step's line and stored with it.
    pass: Option<u32>,
    stop: &'a Arc<AtomicBool>,
    progress: Option<&'a ProgressSink>,
    note: Box<dyn FnMut(&str)>,
    step_line: Box<dyn FnMut(&str)>,
    order: usize,
    started: Instant,
    baseline_tw: Option<u32>,
}

impl StudyRun<'_> {
    /// The plan's steps by its mode: the sweep's steps, then its users searches; or the
    /// searches alone. `Ok(true)` when every step ran.
    fn run_steps(&mut self) -> Result<bool, StudyError> {
        match self.plan.mode {
            // Users searches of a sweep run after its steps.
            Mode::Sweep => self.sweep().and_then(|swept| {
                if self.stop.load(Ordering::Relaxed) {
                    return Ok(false);
                }
                self.search().map(|searched| swept && searched)
            }),
            Mode::Search => self.search(),
        }
    }

    /// Sweep mode: every planned step in order, and each step noise spoiled measured
    /// again later, interleaved with the rest ([`Remeasures`]). `Ok(false)`: stopped, or
    /// a step's target was dead (the study ends incomplete).
    fn sweep(&mut self) -> Result<bool, StudyError> {
        let plan = self.plan;
        // The ETA learns: request-count steps left are re-estimated from the req/s
        // finished steps of the same family measured.
        let mut book = RateBook::default();
        let mut complete = true;
        let mut again = Remeasures::new(plan);
        let mut run = 0;
        let mut planned = plan.steps.iter().peekable();
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(false);
            }
            // A re-measure that is due goes before the next planned step.
            let (ci, repeat, attempt) = match again.due(run) {
                Some(r) => (r.cell, r.repeat, r.attempt),
                None => match planned.next() {
                    Some(ps) => (ps.cell, ps.repeat, 0),
                    None => match again.next() {
                        Some(r) => (r.cell, r.repeat, r.attempt),
                        None => break,
                    },
                },
            };
            let cell = &plan.cells[ci];
            if self.running[cell.instance].is_none() {
                continue;
            }
            // The planned steps after this one, plus this one and the queued re-measures.
            let rest = &plan.steps[plan.steps.len() - planned.len()..];
            let p = Progress {
                done: run,
                total: run + rest.len() + again.len() + 1,
                eta: plan.remaining_estimate(rest, &book)
                    + plan.step_estimate(cell) * (again.len() as u32 + 1),
            };
            run += 1;
            match self.step(ci, repeat, cell.rate, "sweep", attempt, p)? {
                Some(_) => {
                    if let Some(o) = self.steps.last() {
                        book.record(cell, o.rps);
                        // Not an office day (judged by its own rule) and not an injected
                        // step: its agents may run on other machines than the one whose
                        // business is measured here, and a Kubernetes Job runs once.
                        let attempts: Vec<&StepOutcome> = self
                            .steps
                            .iter()
                            .filter(|s| s.cell == ci && s.repeat == repeat)
                            .collect();
                        if o.needs_remeasure()
                            && plan.workloads[cell.workload].office.is_none()
                            && cell.injectors.is_none()
                            && !remeasure::generator_limit_seen_twice(&attempts)
                        {
                            again.spoiled(ci, repeat, attempt, run);
                        }
                    }
                }
                None => complete = false,
            }
        }
        Ok(complete)
    }

    /// Runs, records and cools down one step. `Ok(None)`: the target died (noted; the
    /// study goes on with the others and ends incomplete); what the step says otherwise.
    fn step(
        &mut self,
        ci: usize,
        repeat: u32,
        rate: Option<f64>,
        phase: &str,
        attempt: u32,
        progress: Progress,
    ) -> Result<Option<StepSignal>, StudyError> {
        let plan = self.plan;
        let (cell, rate) = plan.cell_at(ci, rate);
        let cell = &cell;
        let w = &plan.workloads[cell.workload];
        // A variant with kernel settings: this thread (and the load's threads it starts)
        // works from the variant's load namespace for the whole step.
        let _inside = self.vlabs.enter(cell.instance)?;
        let Ok(fresh) = self.fresh_target(cell.instance, w) else {
            return Ok(None);
        };
        if fresh.is_none() && !self.alive(cell.instance) {
            return Ok(None);
        }
        // Taken out for the step (the step borrows `self` mutably), put back after; an
        // error ends the study, and with it this target.
        let restarted = self.restarted[cell.instance].take();
        let running: &[Option<RunningTarget>] = self.running;
        let Some(target) = fresh
            .as_ref()
            .or(restarted.as_ref())
            .or(running[cell.instance].as_ref())
        else {
            return Ok(None);
        };
        if let Err(died) = target.check() {
            (self.note)(&format!("{}: {died}", plan.instance_label(cell.instance)));
            self.restarted[cell.instance] = restarted;
            return Ok(None);
        }
        let mut what = step_what(plan, cell, rate, repeat);
        if let Some(p) = self.pass {
            what.push_str(&format!(" pass {}", p + 1));
        }
        if attempt > 0 {
            what.push_str(&format!(" (re-measure {attempt})"));
        }
        let started_ms = now_ms();
        let cold = match w.cold_start {
            true => Some(self.cold(w, ci, target)?),
            false => None,
        };
        let m = self.measure(ci, cell, rate, target, &what, progress)?;
        let at = (repeat, attempt);
        let signal = self.record(ci, cell, at, rate, phase, &what, started_ms, m, cold)?;
        self.restarted[cell.instance] = restarted;
        cool_down(plan.timing.cooldown, self.baseline_tw, self.stop);
        Ok(Some(signal))
    }

    /// The cold request of a cold-start step, and whether its answer was right.
    fn cold(
        &mut self,
        w: &Workload,
        ci: usize,
        target: &RunningTarget,
    ) -> Result<(ColdFigures, bool), StudyError> {
        let c = cold_request(w, &self.plan.cells[ci], target, self.stop).map_err(|source| {
            StudyError::Engine {
                step: self.order,
                source,
            }
        })?;
        // Validated only now: validating first would have warmed the path.
        let valid = target.validate_path(&w.paths[0]);
        if let Err(e) = &valid {
            (self.note)(&format!(
                "cold request answered wrongly, its figure is void: {e}"
            ));
        }
        Ok((c, valid.is_ok()))
    }

    /// The step's measured, judged load, with the progress line drawn while it runs.
    fn measure(
        &self,
        ci: usize,
        cell: &crate::plan::Cell,
        rate: Option<f64>,
        target: &RunningTarget,
        what: &str,
        p: Progress,
    ) -> Result<JudgedStep, StudyError> {
        let plan = self.plan;
        let live = Live::new();
        let done = AtomicBool::new(false);
        let unstored = std::cell::RefCell::new(None);
        let measured = std::thread::scope(|scope| {
            if let Some(draw) = self.progress {
                let (live, done) = (&live, &done);
                // As `run_step` ends the load: its warm-up, then the measured part.
                let stop = crate::step::measured_stop(&plan.workloads[cell.workload], rate, plan);
                scope.spawn(move || {
                    volley_harness::progress::tick(live, done, |snap, elapsed| {
                        draw(snap.map(|live| StepTick {
                            progress: p,
                            what,
                            elapsed,
                            live,
                            stop,
                        }))
                    })
                });
            }
            let w = &plan.workloads[cell.workload];
            let r = match cell.injectors {
                Some(k) => {
                    // Merged seconds an earlier attempt at this index stored and no
                    // step took (it failed, the study went on) are not this step's.
                    self.keep_live(ci, &unstored, |s, run, i| s.forget_live_seconds(run, i));
                    let run_id = format!("p{}s{}", std::process::id(), self.order);
                    injected::run_injected(
                        w,
                        cell,
                        k,
                        rate,
                        plan,
                        target,
                        self.stop,
                        self.exe,
                        &run_id,
                        self.lab,
                        &|r| {
                            self.keep_live(ci, &unstored, |s, run, i| {
                                s.record_injector_second(run, &injected::injector_second(i, r))
                            })
                        },
                        &|m| {
                            self.keep_live(ci, &unstored, |s, run, i| {
                                injected::merged_second(i, m)
                                    .map_or(Ok(()), |x| s.record_live_second(run, &x))
                            })
                        },
                        self.hosts,
                    )
                }
                None => match &w.office {
                    Some(office) => {
                        // As for injected steps: seconds an earlier attempt at this
                        // index stored and no step took are not this step's.
                        self.keep_live(ci, &unstored, |s, run, i| s.forget_live_seconds(run, i));
                        crate::office_step::run_office(
                            w,
                            office,
                            cell,
                            plan,
                            target,
                            self.stop,
                            &|c| {
                                self.keep_live(ci, &unstored, |s, run, i| {
                                    s.record_live_second(run, &volley_harness::stored::second(i, c))
                                })
                            },
                        )
                    }
                    None => run_step(w, cell, rate, plan, target, self.stop, &live),
                },
            };
            done.store(true, Ordering::Relaxed);
            r
        });
        if let Some(e) = unstored.into_inner() {
            return Err(e.into());
        }
        measured.map_err(|source| StudyError::Engine {
            step: self.order,
            source,
        })
    }

    /// Writes to the store under the run and step index the step of cell `ci` will get,
    /// while that step runs: each injector's second as it arrives and each merged
    /// second as the coordinator closes it, or an office day's second as it closes (as
    /// `volley bench --save` stores its own),
    /// so a study killed mid-step keeps them and the coordinator holds none of their
    /// histograms to the step's end. The first write that fails is kept in `unstored`
    /// (the step then fails with it) and later ones are not tried.
    fn keep_live(
        &self,
        ci: usize,
        unstored: &std::cell::RefCell<Option<volley_store::StoreError>>,
        write: impl FnOnce(&Store, RunId, u32) -> Result<(), volley_store::StoreError>,
    ) {
        if unstored.borrow().is_some() {
            return;
        }
        let plan = self.plan;
        let run = self.run_of_target[&plan.instances[plan.cells[ci].instance].target];
        let index = self.next_index.get(&run).copied().unwrap_or(0);
        if let Err(e) = write(self.store, run, index) {
            *unstored.borrow_mut() = Some(e);
        }
    }

    /// Stores the step (its summary, cold figures, verdict, series and histograms),
    /// writes its line and keeps its outcome; returns what a search hears of it.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        ci: usize,
        cell: &crate::plan::Cell,
        (repeat, attempt): (u32, u32),
        rate: Option<f64>,
        phase: &str,
        what: &str,
        started_ms: i64,
        m: JudgedStep,
        cold: Option<(ColdFigures, bool)>,
    ) -> Result<StepSignal, StudyError> {
        let plan = self.plan;
        let run = self.run_of_target[&plan.instances[plan.cells[ci].instance].target];
        let mut params = step_parameters(plan, cell, repeat, rate, phase, self.order);
        params.extra.insert("attempt".into(), json!(attempt));
        if let Some(p) = self.pass {
            params.extra.insert("pass".into(), json!(p));
        }
        if let Some(r) = self.vlabs.record(cell.instance) {
            params.extra.insert("namespace".into(), json!(r));
        }
        let mut summary_json = m.summary_json;
        let warm_ttfb_ms = m.summary.latency.get("ttfb").map(|l| l.p50_ms);
        if let Some((c, valid)) = &cold {
            params.extra.insert("cold_start".into(), json!(true));
            summary_json["cold"] = cold_json(c, *valid, warm_ttfb_ms);
        }
        let office = m.verdict.office.as_ref();
        let why_not = match (m.sustainable, office) {
            (Some(false), Some(o)) => format!(" ({})", o.reasons.join("; ")),
            (Some(false), None) => format!(
                " ({})",
                crate::step::reasons_text(m.verdict.sustain.as_ref())
            ),
            _ => String::new(),
        };
        // The kernel's word on the connects (a full accept queue, no free port) goes
        // in the line too: it says whose the failure or the lateness was.
        let why_not = match &m.verdict.connects {
            Some(c) => format!("{why_not}; {c}"),
            None => why_not,
        };
        let poll_p99_ms = office.and_then(|o| o.poll_p99_ms);
        let lead_in = office.and_then(|o| o.lead_in);
        let is_office = office.is_some();
        let index = self.next_index.entry(run).or_insert(0);
        let record = StepRecord {
            index: *index,
            parameters: params,
            summary: summary_json,
            // The typed verdict becomes JSON here, where the store takes it.
            verdict: Some(serde_json::to_value(&m.verdict).map_err(|source| {
                volley_store::StoreError::Json {
                    column: "verdict",
                    source,
                }
            })?),
            label: Some(m.label.to_string()),
            started_unix_ms: started_ms,
            finished_unix_ms: now_ms(),
            series: m.series,
            histograms: m.histograms,
        };
        self.store.record_step(run, &record)?;
        *index += 1;
        let outcome = StepOutcome::of(
            self.order,
            ci,
            repeat,
            rate,
            &m.summary,
            m.sustainable,
            m.label,
        )
        .with_ttfb(
            cold.as_ref()
                .filter(|(c, valid)| *valid && c.error.is_none())
                .map(|(c, _)| c.ttfb_ms),
            warm_ttfb_ms,
        );
        let mut outcome = outcome;
        outcome.poll_p99_ms = poll_p99_ms;
        outcome.lead_in = lead_in;
        outcome.users = cell.users.filter(|_| is_office);
        outcome.attempt = attempt;
        outcome.machine_busy = remeasure::busy_spoils(
            outcome.machine_busy,
            is_office && m.sustainable == Some(true),
            m.verdict.target_died.is_some(),
        );
        let slo_ms = plan.rule.p99_slo.as_secs_f64() * 1e3;
        let elapsed_s = self.started.elapsed().as_secs();
        (self.step_line)(&crate::step::step_line(
            elapsed_s, what, &outcome, &m.summary, &why_not, slo_ms,
        ));
        if let Some((c, _)) = &cold {
            (self.step_line)(&crate::step::cold_line(c, warm_ttfb_ms));
        }
        let signal = StepSignal {
            sustainable: m.sustainable,
            label: m.label,
            machine_busy: outcome.machine_busy,
        };
        self.steps.push(outcome);
        self.order += 1;
        Ok(signal)
    }
}
