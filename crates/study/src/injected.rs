//! A step loaded by several injectors at once: `volley agent` processes (on this host,
//! on ssh hosts, or a Kubernetes Job's pods: `crate::deploy`) joined by a NATS bus,
//! coordinated, merged exactly, and cut into phases.
//!
//! Place in the flow: the study's alternative to [`crate::step::run_step`] for a cell
//! with `injectors = k`. The same harness watches the target (monitor, throttling,
//! death watch); instead of one in-process measured run, the coordinator splits the
//! step's load into `k` exact shares, starts the agents together or staggered, collects
//! their per-second records and recorders, and the merged recorder is judged like any
//! step. The stored summary gains `injectors[]` (each injector's own summary, clock
//! offset and share) and `phases[]` (docs/methodology.md, "Several injectors"). Each
//! injector's per-second records go to the caller's `on_second` as they arrive, for the
//! store to keep at once (`volley_store::InjectorSecond`), before the step ends.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use serde_json::json;
use volley_agents::coordinator::{self, CoordinatorConfig, Event, RunResult};
use volley_agents::load::LoadSpec;
use volley_agents::merge::{MergedSecond, Received};
use volley_agents::msg::RESPONSE_TIME;
use volley_agents::share::Whole;
use volley_agents::whole::{self, WholeRun};
use volley_engine::{Arrival, Order};
use volley_store::{InjectorSecond, LiveSecond};
use volley_targets::RunningTarget;

use crate::deploy::{StepAgents, StudyHosts};
use crate::lab::StudyLab;
use crate::plan::{Cell, Plan, Workload};
use crate::step::extra::{Extra, Injected, InjectorRecord, StoredPhase};
use crate::step::{judge, step_watch, JudgedStep, Loaded, StepError};

/// The spec every agent of the step loads.
fn load_spec(
    w: &Workload,
    cell: &Cell,
    target: &RunningTarget,
    warmup: std::time::Duration,
) -> LoadSpec {
    let (order, seed, block, weights) = match &w.order {
        Order::Same => ("same", w.load.seed, 1, Vec::new()),
        Order::Sequential { block } => ("sequential", w.load.seed, *block, Vec::new()),
        Order::Random { seed } => ("random", *seed, 1, Vec::new()),
        Order::Weighted { weights, seed } => ("weighted", *seed, 1, weights.clone()),
    };
    LoadSpec {
        addr: target.addr.to_string(),
        method: w.method.clone(),
        paths: w.paths.clone(),
        headers: w.headers.clone(),
        order: order.into(),
        block,
        weights,
        seed,
        keep_alive: cell.keepalive,
        threads: w.load.threads,
        arrival: match w.load.arrival {
            Arrival::Constant => "constant".into(),
            Arrival::Poisson => "poisson".into(),
        },
        timeout_ms: w.load.timeout.as_millis() as u64,
        // Each agent warms up inside its own run, as a step of this process does.
        warmup_ms: warmup.as_millis() as u64,
    }
}

/// What the injectors are asked to do in all.
fn whole_of(
    w: &Workload,
    cell: &Cell,
    k: u32,
    rate: Option<f64>,
    plan: &Plan,
    each: bool,
) -> Whole {
    let times = if each { u64::from(k) } else { 1 };
    let timing = &plan.timing;
    let duration = timing.measured(rate.is_some());
    Whole {
        requests: w.requests.or(timing.requests).map(|n| n * times),
        rate_rps: rate.map(|r| r * times as f64),
        connections: u64::from(cell.concurrency) * times,
        duration_ms: duration.map(|d| d.as_millis() as u64),
    }
}

/// Checks what the bus cannot: too few connections. (A wire the agents do not speak
/// was refused with the plan: `plan::resolve::cells::check_injectable`.)
fn check(whole: &Whole, k: u32) -> Result<(), StepError> {
    if whole.connections < u64::from(k) {
        return Err(StepError::Injectors(format!(
            "{k} injectors need at least {k} connections, the step has {} (raise concurrency or use share = \"each\")",
            whole.connections
        )));
    }
    Ok(())
}

/// Runs one step with `k` local injectors (see the module doc).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_injected(
    w: &Workload,
    cell: &Cell,
    k: u32,
    rate: Option<f64>,
    plan: &Plan,
    target: &RunningTarget,
    stop_flag: &Arc<AtomicBool>,
    exe: Option<&Path>,
    run_id: &str,
    lab: Option<&StudyLab>,
    on_second: &dyn Fn(&Received),
    on_merged: &dyn Fn(&MergedSecond),
    hosts: Option<&StudyHosts>,
) -> Result<JudgedStep, StepError> {
    let inj = plan
        .injectors
        .as_ref()
        .ok_or_else(|| StepError::Injectors("the plan has no [injectors]".into()))?;
    let whole = whole_of(w, cell, k, rate, plan, inj.each);
    check(&whole, k)?;
    // Behind links volley shaped: the server's own time per request, for the link rule.
    let shaped = |l: &&StudyLab| {
        l.links
            .iter()
            .any(|x| x.rate_bit.is_some() || x.delay_ms.is_some())
    };
    let unshaped = lab
        .filter(shaped)
        .and_then(|_| crate::step::unshaped::measure(w, cell, target, stop_flag));
    // `None` means this executable, as for the built-in target (tests pass the binary).
    let exe = match exe {
        Some(e) => e.to_path_buf(),
        None => std::env::current_exe()
            .map_err(|e| StepError::Injectors(format!("cannot find the volley executable: {e}")))?,
    };
    // Where the bus and the agents run: crate::deploy.
    let mut agents = StepAgents::start(inj, k, &exe, lab, hosts, target)?;
    let load_stop = Arc::new(AtomicBool::new(false));
    let cfg = coordinator_config(
        &agents, run_id, whole, k, w, cell, plan, target, lab, &load_stop,
    )?;
    let watch = step_watch(target, load_stop, stop_flag, std::time::Duration::ZERO);
    let watched = volley_harness::watch(&watch, || coordinate(&cfg, on_second, on_merged))?;
    agents.stop();
    let refused = agents.refused();
    let mut incomplete = false;
    let watched = watched.map(|load| {
        load.map(|(result, whole)| {
            incomplete = whole.incomplete;
            let mut l = loaded(result, whole, cell, w);
            if !inj.secure_bus {
                l.info.notes.push(
                    "the bus ran in the clear: no TLS, no credentials, unsigned assignments (injectors.bus_security = \"off\")".into(),
                );
            }
            if refused > 0 {
                l.info.notes.push(format!(
                    "the bus refused {refused} connection(s) during the step (wrong or missing credentials, or no TLS)"
                ));
            }
            if let Some(lab) = lab {
                l.extra.links = lab.links.iter().take(k as usize).cloned().collect();
            }
            l.extra.unshaped = unshaped;
            l
        })
    });
    let mut judged = judge(rate, plan, watched)?;
    crate::step::require_server_evidence(&mut judged, crate::step::cap_of(plan, cell));
    if incomplete {
        mark_incomplete(&mut judged);
    }
    Ok(judged)
}

/// The coordinator's settings for one injected step: its agents and bus, the whole
/// load and each agent's address, and the waits that tell a silent agent from a lost
/// one.
#[allow(clippy::too_many_arguments)]
fn coordinator_config(
    agents: &StepAgents,
    run_id: &str,
    whole: Whole,
    k: u32,
    w: &Workload,
    cell: &Cell,
    plan: &Plan,
    target: &RunningTarget,
    lab: Option<&StudyLab>,
    load_stop: &Arc<AtomicBool>,
) -> Result<CoordinatorConfig, StepError> {
    let inj = plan
        .injectors
        .as_ref()
        .ok_or_else(|| StepError::Injectors("the plan has no [injectors]".into()))?;
    let mut cfg = CoordinatorConfig::new(agents.bus_url(), run_id, whole, k as usize);
    cfg.min_agents = inj.min_agents.map_or(k as usize, |m| m as usize);
    cfg.ready_bound = inj.ready_timeout;
    cfg.stagger = inj.stagger;
    // A silent agent is waited out for a sixtieth of the step (10 to 60 s): on a
    // loaded machine a few seconds' silence is a stall, not a death
    // (docs/methodology.md, "When the bus is away").
    cfg.lost_after =
        coordinator::lost_grace(cfg.whole.duration_ms.map(std::time::Duration::from_millis));
    // Agents key their seconds by intended send time and publish second s only once
    // the request timeout has passed after it (docs/methodology.md, "Per-second
    // windows"): a record is late only past that hold plus the usual grace.
    cfg.late_grace += w.load.timeout;
    cfg.load = Some(load_spec(w, cell, target, plan.timing.warmup));
    if let Some(l) = lab {
        cfg.addrs = (0..k as usize)
            .map(|i| l.addr_for(i, target.addr).map(|a| a.map(|a| a.to_string())))
            .collect::<Result<_, _>>()
            .map_err(|e| StepError::Injectors(e.to_string()))?;
    }
    cfg.stop = Some(Arc::clone(load_stop));
    cfg.auth = agents.coordinator_auth();
    // Every merged second goes to the store as it closes (`on_merged`): the
    // coordinator keeps no second's histograms to the step's end.
    cfg.stored_live = true;
    cfg.exited = agents.exit_watch();
    Ok(cfg)
}

/// Every injector was lost before its final record: the step keeps the seconds that
/// reached the coordinator, labelled incomplete and never a pass (its load was cut by
/// the injectors, whatever its windows say; docs/methodology.md, "When the bus is away").
fn mark_incomplete(j: &mut JudgedStep) {
    j.label = volley_analysis::sustain::INCOMPLETE;
    j.sustainable = j.sustainable.map(|_| false);
    if let Some(v) = j.verdict.sustain.as_mut() {
        v.sustainable = false;
    }
    j.summary_json["incomplete"] = json!(true);
}

fn coordinate(
    cfg: &CoordinatorConfig,
    on_second: &dyn Fn(&Received),
    on_merged: &dyn Fn(&MergedSecond),
) -> Result<(RunResult, WholeRun), StepError> {
    let mut on_event = |e: Event| match e {
        Event::Second(r) => on_second(&r),
        Event::Merged(m) => on_merged(&m),
        _ => {}
    };
    let result = coordinator::coordinate(cfg, &mut on_event).map_err(StepError::Agents)?;
    let whole = whole::summarise(&result).map_err(StepError::Agents)?;
    Ok((result, whole))
}

/// A live merge waiting for this many seconds at once is noted: records leave an agent
/// a request timeout after their second and reach the coordinator within a second or two,
/// so a healthy run holds one or two.
const BACKLOG_NOTED_S: usize = 10;

/// The notes a shared run's injectors leave on its step: fewer started than `wanted`,
/// one lost (and why), seconds that came late, a clock past its bound.
fn injector_notes(notes: &mut Vec<String>, r: &RunResult, wanted: usize) {
    if r.agents.len() < wanted {
        // `min_agents` let the run start without the ones that were not ready in time.
        notes.push(format!(
            "started with {} of {wanted} injectors: the others were not ready in time (min_agents)",
            r.agents.len()
        ));
    }
    if r.backlog.seconds >= BACKLOG_NOTED_S {
        notes.push(format!(
            "the coordinator held up to {} seconds ({} KB of records) waiting for an injector's late records (a starved or slow injector)",
            r.backlog.seconds,
            r.backlog.bytes / 1_000
        ));
    }
    for a in &r.agents {
        if let Some(from) = a.lost_from_s {
            let why = if a.process_exited {
                " (its process exited)"
            } else {
                ""
            };
            notes.push(format!(
                "injector {} was lost from second {from}{why}: the run is degraded from there; its data up to then is kept",
                a.name
            ));
        }
        if a.late_seconds > 0 {
            notes.push(format!(
                "injector {}: {} seconds arrived late (at most {} ms past the grace; the bus was away or slow) and are filled in",
                a.name, a.late_seconds, a.max_late_ms
            ));
        }
        if a.after_merge > 0 {
            notes.push(format!(
                "injector {}: {} records came after their second had been merged without them (after a later record of its own) and are not in the merge",
                a.name, a.after_merge
            ));
        }
        if a.clock_warning {
            notes.push(format!(
                "injector {}'s clock is {:.1} ms off (round trip {:.1} ms)",
                a.name,
                a.clock.offset_ns as f64 / 1e6,
                a.clock.rtt_ns as f64 / 1e6
            ));
        }
    }
}

/// The merged run as a step's load, with the injectors' own figures and the phases.
fn loaded(r: RunResult, whole: WholeRun, cell: &Cell, w: &Workload) -> Loaded {
    let mut info = whole.info;
    injector_notes(&mut info.notes, &r, cell.injectors.unwrap_or(1) as usize);
    let injectors: Vec<InjectorRecord> = r
        .agents
        .into_iter()
        .map(|mut agent| {
            let own = whole.injectors.iter().find(|i| i.name == agent.name);
            InjectorRecord {
                // Of its final record the store keeps only why its load ended; its
                // share, merged already, is dropped here rather than kept to the end.
                ending: agent.final_record.take().map(|f| f.ending),
                offset_s: own.map(|i| i.offset_s),
                summary: own.map(|i| i.summary.clone()),
                agent,
            }
        })
        .collect();
    // The self-check per injector (docs/methodology.md, "The generator checks itself"):
    // a phase holding an injector whose own run was generator-bound is marked, by name.
    let bound_names: Vec<&str> = whole
        .injectors
        .iter()
        .filter(|i| i.summary.generator.verdict.label == volley_metrics::Bound::GeneratorBound)
        .map(|i| i.name.as_str())
        .collect();
    let mut phases = r.phases.clone();
    for p in &mut phases {
        for name in &bound_names {
            if p.injectors.iter().any(|i| i == name) && !p.bound_injectors.iter().any(|b| b == name)
            {
                p.bound_injectors.push((*name).to_string());
                p.generator_bound = true;
            }
        }
    }
    let bound = phases.iter().any(|p| p.generator_bound);
    let stopped_early = info.stopped_early;
    Loaded {
        recorder: whole.merged,
        info,
        stopped_early,
        open_in_flight: None,
        closed_in_flight: f64::from(cell.concurrency)
            * w.load.wire.h2_streams.unwrap_or(1) as f64,
        wire: None,
        extra: Extra {
            injected: Some(Injected {
                injectors,
                phases: phases.into_iter().map(StoredPhase::from).collect(),
                phases_note: "each injector's first and last active seconds are left out of the phase they fall in (it started or stopped inside them)",
                degraded_from_s: r.merged.degraded_from_s,
                streamed_requests: whole.streamed_requests,
                generator_bound_phase: bound,
            }),
            ..Extra::default()
        },
        // Each agent's namespace and ports are its own: not counted here.
        connects: Default::default(),
    }
}

/// One merged second as the store keeps a running step's seconds
/// (`volley_store::Store::record_live_second`, moved into the step when it is
/// recorded), as `volley bench --save` keeps its own; `None` for a second whose
/// injectors sent no full counters (the step then keeps no per-second histograms).
pub(crate) fn merged_second(step_index: u32, m: &MergedSecond) -> Option<LiveSecond> {
    m.closed()
        .map(|c| volley_harness::stored::second(step_index, &c))
}

/// One injector's second as the store keeps it (see `volley_store::InjectorSecond`):
/// its counters and self-check as named values, its response-time histogram as bytes.
pub(crate) fn injector_second(step_index: u32, r: &Received) -> InjectorSecond {
    let rec = &r.record;
    InjectorSecond {
        step_index,
        injector: rec.agent.clone(),
        second: rec.second,
        arrived_ms: r.arrived_ms,
        values: json!({
            "requests": rec.counters.requests,
            "ok": rec.counters.ok,
            "errors": rec.counters.errors,
            "errors_by_kind": rec.counters.errors_by_kind,
            "wire_bytes": rec.counters.wire_bytes,
            "generator_bound": rec.generator_bound,
        }),
        response: rec
            .hists
            .get(RESPONSE_TIME)
            .map(|b| b.to_vec())
            .unwrap_or_default(),
    }
}
