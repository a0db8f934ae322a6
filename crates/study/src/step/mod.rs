//! One step: warm-up, the measured load (the harness: `measure` inside `watch`, so
//! monitor, throttling and death watch as in `volley bench --target`), the judgement,
//! and the [`StepRecord`] written to the store (shape: docs/store-conventions.md).

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use volley_analysis::knee::Evidence;
use volley_analysis::{little, sustain};
use volley_engine::{
    BodySpec, Coding, HttpVersion, ListSourceFactory, Live, LoadConfig, LoadModel, Request,
    RequestTemplate, StatusRange, StopCondition, TlsTarget, Wire,
};
use volley_harness::{ColdFigures, Measure, Watch, Watched};
use volley_metrics::{Recorder, RunInfo, Summary, WireReport};
use volley_replay::schedule::ReplayOptions;
use volley_replay::source::{scheduled_within, ReplayFactory, ReplaySpec, RequestShape};
use volley_replay::ReaderOptions;
use volley_store::{HistogramBlob, SeriesPoint};
use volley_targets::RunningTarget;

use crate::plan::{Cell, Encoding, Plan, Protocol, Workload};

mod evidence;
pub(crate) use evidence::{cap_of, require_server_evidence};
pub(crate) mod extra;
mod link;
mod load;
mod outcome;
pub(crate) mod unshaped;
pub(crate) use load::*;
pub use outcome::*;

/// Why a step could not be run or judged (the runner adds the step's order).
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The workload's requests could not be built.
    #[error("bad request: {0}")]
    Request(#[source] volley_engine::SourceError),
    /// The cold request could not be sent.
    #[error("cold request: {0}")]
    Cold(#[source] volley_engine::EngineError),
    /// The cold request ran but the engine recorded no sample of it.
    #[error("cold request: the engine recorded no sample")]
    NoColdSample,
    /// The harness could not watch the target (monitor, death watch).
    #[error(transparent)]
    Harness(#[from] volley_harness::HarnessError),
    /// The measured load could not be run or merged.
    #[error(transparent)]
    Measure(#[from] volley_harness::MeasureError),
    /// The recorders could not be closed into a summary or histograms.
    #[error(transparent)]
    Metrics(#[from] volley_metrics::MetricsError),
    /// The summary could not be serialised for the store.
    #[error("summary: {0}")]
    Json(#[from] serde_json::Error),
    /// The injectors could not be started, coordinated or merged.
    #[error("injectors: {0}")]
    Agents(#[source] volley_agents::AgentsError),
    /// The step cannot be run by injectors as planned.
    #[error("injectors: {0}")]
    Injectors(String),
    /// The office day could not start or run (volley-office), or its target has too
    /// few DAV accounts.
    #[error("office: {0}")]
    Office(String),
    /// A replay step cannot be run as planned.
    #[error("replay: {0}")]
    Replay(String),
}

/// The measured and judged step, ready for the store.
pub(crate) struct JudgedStep {
    pub summary: Summary,
    pub summary_json: Value,
    /// The target's resources over the step, typed (the store gets them in
    /// `summary_json["monitor"]`); `None` when the monitor could not run.
    pub monitor: Option<volley_monitor::MonitorSummary>,
    pub verdict: Verdict,
    pub label: &'static str,
    /// Rate steps: whether the step was sustainable.
    pub sustainable: Option<bool>,
    pub series: Vec<SeriesPoint>,
    pub histograms: Vec<HistogramBlob>,
}

/// A step's verdict, typed until the store serialises it (`StepRecord::verdict`); its
/// JSON is what the reports read, field for field: `little` (null when not checked),
/// `throttled`, and when they apply `sustain` (a rate step), `conn_wait` and `office`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Verdict {
    /// Little's law on the step; none for an office day (a device thinks between its
    /// requests, so there is no in-flight figure to compare).
    pub little: Option<little::LittleCheck>,
    /// The target's cgroup was throttled during the step.
    pub throttled: bool,
    /// Someone else took the CPU during the step ([`machine_busy`]).
    pub machine_busy: bool,
    /// Rate steps: the sustainability verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sustain: Option<sustain::Verdict>,
    /// Why a step with a large send lag is still the server's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conn_wait: Option<String>,
    /// What the kernel's counters say of the step's connects when they decided its
    /// label or explain its failure (`sustain::connect_note`): an accept queue that
    /// overflowed, or connects that found no free port, with the counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connects: Option<String>,
    /// Office steps: whether the day carried its users.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub office: Option<crate::office_step::OfficeVerdict>,
    /// The target died during this step (what the death watch saw): the step is the
    /// one that made the server fall over, so it is never judged sustainable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_died: Option<String>,
}

/// Sends exactly one request for the workload's first path on one fresh connection
/// (the harness's cold request) and returns its figures against the target's spawn.
pub(crate) fn cold_request(
    w: &Workload,
    cell: &Cell,
    target: &RunningTarget,
    stop_flag: &Arc<AtomicBool>,
) -> Result<ColdFigures, StepError> {
    let mut one = w.clone();
    one.paths.truncate(1);
    one.order = volley_engine::Order::Same;
    let single = Cell {
        concurrency: 1,
        rate: None,
        ..cell.clone()
    };
    let stop = StopCondition {
        warmup: Duration::ZERO,
        requests: Some(1),
        duration: None,
    };
    let cfg = load_config(
        &one,
        &single,
        None,
        target.addr,
        stop,
        Arc::clone(stop_flag),
    )?;
    let wire = wire_for(w, &single, target.addr, target.ca_file.as_deref());
    volley_harness::cold_request(&cfg, &wire)
        .map_err(StepError::Cold)?
        .figures(target.started_at)
        .ok_or(StepError::NoColdSample)
}

/// When a step ends: the plan's warm-up, then its measured requests or
/// duration, in one engine run on the same connections (as `volley bench --warmup`):
/// the schedule goes on across the boundary, so the first measured second meets the
/// server and the connections as they are under the load, and every figure leaves
/// out what was intended before it (docs/methodology.md, "Warm-up").
pub(crate) fn measured_stop(w: &Workload, rate: Option<f64>, plan: &Plan) -> StopCondition {
    let timing = &plan.timing;
    let measured = timing.measured(rate.is_some());
    StopCondition {
        warmup: timing.warmup,
        requests: w.requests.or(timing.requests),
        duration: measured.map(|d| d + timing.warmup),
    }
}

/// Runs one step against `target`: the warm-up, then the measured load watched by the
/// harness (monitor, throttling, death watch), then the judgement. `rate` is the offered
/// rate of an open-loop step; `stop_flag` is the study's (Ctrl-C).
pub(crate) fn run_step(
    w: &Workload,
    cell: &Cell,
    rate: Option<f64>,
    plan: &Plan,
    target: &RunningTarget,
    stop_flag: &Arc<AtomicBool>,
    live: &Live,
) -> Result<JudgedStep, StepError> {
    let wire = wire_for(w, cell, target.addr, target.ca_file.as_deref());
    let stop = measured_stop(w, rate, plan);
    // The load's own flag: the death watch sets it when the target dies or the study
    // is stopped, without stopping the study for a death.
    let load_stop = Arc::new(AtomicBool::new(false));
    let cfg = load_config(w, cell, rate, target.addr, stop, Arc::clone(&load_stop))?;
    let run = Measure {
        cfg: &cfg,
        wire: &wire,
        live,
        url: format!(
            "{}://{}{}",
            if wire.tls.is_some() { "https" } else { "http" },
            target.addr,
            w.paths.first().map_or("/", String::as_str)
        ),
        method: w.method.clone(),
        stream: None,
        first_answers: None,
    };
    // A replay is judged against what its schedule offered within the step.
    let rate = match (&cfg.model, rate) {
        (LoadModel::Scheduled { rate: offered }, Some(_)) => Some(*offered),
        _ => rate,
    };
    let watch = step_watch(target, load_stop, stop_flag, stop.warmup);
    let overflows_before = listen_overflows(target);
    let watched = volley_harness::watch(&watch, || volley_harness::measure(&run))?;
    let connections = cfg.connections;
    let watched = watched.map(|measured| {
        measured.map_err(StepError::from).map(|m| {
            // What bench prints of the wire (h3 handshakes by kind, h2/h3 events by
            // kind) is stored with the step, so a report can show it.
            let wire = volley_harness::wire::report(&wire, &m.outcome, None);
            // Connections x streams of the protocol spoken (a swept h2 or h3 included).
            let streams = m.info.streams_per_connection as f64;
            Loaded {
                recorder: m.recorder,
                info: m.info,
                stopped_early: m.outcome.stopped_early,
                open_in_flight: m.mean_in_flight,
                closed_in_flight: connections as f64 * streams,
                wire: Some(wire),
                extra: extra::Extra::default(),
                connects: ConnectCounters::since(
                    overflows_before,
                    target,
                    m.outcome.connects_without_port,
                ),
            }
        })
    });
    let mut judged = judge(rate, plan, watched)?;
    require_server_evidence(&mut judged, cap_of(plan, cell));
    Ok(judged)
}

/// `TcpExt` `ListenOverflows` of the network namespace the target listens in: its
/// process's (`/proc/<pid>/net/netstat`, a lab's namespace as well as volley's own),
/// else volley's when it listens on loopback; a target elsewhere is not counted.
fn listen_overflows(target: &RunningTarget) -> Option<u64> {
    match target.pid {
        Some(pid) => volley_monitor::headroom::listen_overflows(Some(pid)),
        None if target.addr.ip().is_loopback() => volley_monitor::headroom::listen_overflows(None),
        None => None,
    }
}

/// What the kernel and the generator say of a step's connects (docs/methodology.md,
/// "Connects that wait: whose failure"): SYNs the listener dropped over the step, the
/// sockets towards the target at its end against the local port range, and connects
/// that found no free port. Judged with the step's other figures (`judge`), once.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ConnectCounters {
    listen_overflows: Option<u64>,
    ports_used_of_range: Option<(u64, u64)>,
    time_wait: Option<u64>,
    without_port: Option<u64>,
}

impl ConnectCounters {
    /// The overflows since `before`, the ports in use now (counted in the calling
    /// thread's network namespace, where the load ran) and the connects that failed
    /// for want of a port. Ports and TIME_WAIT only grow during a step shorter than
    /// TIME_WAIT's 60 s, so the end is their most.
    fn since(before: Option<u64>, target: &RunningTarget, without_port: u64) -> ConnectCounters {
        let listen_overflows = before
            .zip(listen_overflows(target))
            .map(|(b, a)| a.saturating_sub(b));
        let sockets = volley_monitor::headroom::sample(Some(target.addr)).ok();
        ConnectCounters {
            listen_overflows,
            ports_used_of_range: sockets.as_ref().map(|s| (s.sockets.in_use, s.port_range)),
            time_wait: sockets.as_ref().map(|s| s.sockets.time_wait),
            without_port: Some(without_port),
        }
    }

    /// `stats` with these counters and the step's connections.
    fn into_stats(self, stats: sustain::StepStats, opened: u64) -> sustain::StepStats {
        sustain::StepStats {
            listen_overflows: self.listen_overflows,
            ports_used_of_range: self.ports_used_of_range,
            connections_opened: Some(opened),
            connects_without_port: self.without_port,
            time_wait: self.time_wait,
            ..stats
        }
    }
}

/// How a step watches its target: the monitor once a second, not required (a monitor
/// that cannot start, no /proc, leaves the step without server figures, recorded by the
/// absence of the "monitor" key, not an error), the load's own stop flag for the death
/// watch, and the study's stop.
/// The monitor starts at the load's warm-up boundary (`warmup` after the load starts).
pub(crate) fn step_watch<'a>(
    target: &'a RunningTarget,
    load_stop: Arc<AtomicBool>,
    stop_flag: &Arc<AtomicBool>,
    warmup: Duration,
) -> Watch<'a> {
    Watch {
        target,
        monitor_interval: Duration::from_secs(1),
        monitor_required: false,
        load_stop,
        outside_stop: Arc::clone(stop_flag),
        warmup,
    }
}

/// A measured load ready to judge: from one process, or merged from several injectors.
pub(crate) struct Loaded {
    /// The merged recorder (not closed).
    pub recorder: Recorder,
    /// The facts it closes with.
    pub info: RunInfo,
    /// The load ended before its stop condition.
    pub stopped_early: bool,
    /// Open loop: mean requests in flight over the step (for Little's check), if known.
    pub open_in_flight: Option<f64>,
    /// Closed loop: requests always outstanding (connections x streams).
    pub closed_in_flight: f64,
    /// What the bytes travelled over (protocol, TLS, h2/h3 events and handshakes);
    /// `None` where no one engine run carried the load (injectors, office days).
    pub wire: Option<WireReport>,
    /// More keys for the stored summary (office, injectors, phases, links).
    pub extra: extra::Extra,
    /// The step's connects as the kernel counted them (default: not counted).
    pub connects: ConnectCounters,
}

/// The step's summary, verdict, series and histograms from its watched run.
pub(crate) fn judge(
    rate: Option<f64>,
    plan: &Plan,
    watched: Watched<Result<Loaded, StepError>>,
) -> Result<JudgedStep, StepError> {
    let Watched {
        load: loaded,
        monitor: report,
        throttling,
        died,
    } = watched;
    let Loaded {
        recorder: mut merged,
        mut info,
        stopped_early,
        open_in_flight,
        closed_in_flight,
        wire,
        mut extra,
        connects,
    } = loaded?;
    let target_died = died.as_ref().map(|d| {
        format!(
            "the target {} (pid {}) died during the step: {}",
            d.kind, d.pid, d.exit_status
        )
    });
    note_ending(&mut info, target_died.as_deref(), stopped_early);
    merged.finish();
    let histograms = volley_harness::stored::histograms(&merged)?;
    let mut summary = merged.close(&info)?;
    summary.wire = wire;
    volley_harness::fill_machine(&mut summary, report.as_ref(), throttling.as_ref());

    // Judgement.
    let windows = judged_windows(&summary);
    let in_flight = in_flight_per_second(&summary);
    let in_flight_w: Vec<f64> = in_flight.iter().take(windows).copied().collect();
    // Closed loop: every connection (every h2 stream) always has a request outstanding
    // or is opening its connection for one. Open loop: the workers' time integral of
    // their in-flight counts over the step, divided by its length.
    let observed_in_flight = match rate {
        None => Some(closed_in_flight),
        Some(_) => open_in_flight,
    };
    let little = observed_in_flight.and_then(|l| little_check(l, &summary));
    let throttled = throttling.is_some_and(|t| t.nr_throttled > 0);
    let (sustain_verdict, label, conn_wait, connect_note) = match rate {
        Some(rate) => {
            let stats = connects.into_stats(
                step_stats(&summary, rate, windows, in_flight_w),
                summary.connections_stats.opened,
            );
            let mut v = sustain::judge(&stats, &plan.rule);
            // A step during which the server died cannot have carried its load, whatever
            // its windows say (the death may fall after the last judged second).
            v.sustainable &= target_died.is_none();
            // A connect that waited behind a full accept queue, or found no port,
            // names its cause with its count (`sustain::connect_cause`).
            let note = sustain::connect_note(&stats, v.sustainable);
            if let Some(note) = &note {
                summary.notes.push(note.clone());
            }
            let label = v.bound.label();
            (Some(v), label, sustain::conn_wait_note(&stats), note)
        }
        None => (None, summary.generator.verdict.label.label(), None, None),
    };
    // Behind a link volley shaped, the figure may be the link's (volley_analysis::link).
    link::judge_phases(&mut extra, &summary);
    let label = match link::step_reason(&extra, &summary) {
        Some(why) if !matches!(label, "generator-bound" | "machine-stalled") => {
            summary.notes.push(why);
            volley_analysis::link::LABEL
        }
        _ => label,
    };
    let sustainable = sustain_verdict.as_ref().map(|v| v.sustainable);
    // Users see why a step with a large send lag is still the server's.
    if let Some(note) = &conn_wait {
        summary.notes.push(note.clone());
    }
    let verdict = Verdict {
        little,
        throttled,
        machine_busy: machine_busy(&summary),
        sustain: sustain_verdict,
        conn_wait,
        connects: connect_note,
        office: None,
        target_died,
    };
    let summary_json = stored_summary(&summary, extra, report.as_ref(), throttling)?;
    let series = volley_harness::stored::series(&summary, report.as_ref());
    Ok(JudgedStep {
        monitor: report.as_ref().map(|r| r.summary.clone()),
        summary,
        summary_json,
        verdict,
        label,
        sustainable,
        series,
        histograms,
    })
}

/// Why a step's figures end where they do, in its notes: the target's death, else an
/// interrupt (what was in flight then is censored, not dropped).
fn note_ending(info: &mut RunInfo, target_died: Option<&str>, stopped_early: bool) {
    if let Some(d) = target_died {
        info.notes.push(d.to_string());
    } else if stopped_early {
        info.notes.push("interrupted: the step covers what was measured until then; requests in flight were recorded as censored".to_string());
    }
}

/// The summary as the store keeps it: the engine's summary with the step's `extra` keys
/// (injectors, phases, office), the monitor's summary and the cgroup's throttling.
fn stored_summary(
    summary: &Summary,
    extra: extra::Extra,
    monitor: Option<&volley_monitor::MonitorReport>,
    throttling: Option<volley_targets::ThrottleStats>,
) -> Result<Value, StepError> {
    let mut summary_json = serde_json::to_value(summary)?;
    if let Value::Object(keys) = serde_json::to_value(&extra)? {
        for (k, v) in keys {
            summary_json[k] = v;
        }
    }
    if let Some(r) = monitor {
        summary_json["monitor"] = serde_json::to_value(&r.summary).unwrap_or(Value::Null);
    }
    if let Some(t) = throttling {
        summary_json["throttling"] = json!({
            "nr_periods": t.nr_periods,
            "nr_throttled": t.nr_throttled,
            "throttled_usec": t.throttled_us,
        });
    }
    Ok(summary_json)
}

/// Windows to judge: the whole seconds of the step (a last partial second holds the
/// censored tail and too few arrivals to judge).
fn judged_windows(s: &Summary) -> usize {
    whole_windows(s.duration_s, s.seconds.len())
}

/// Share of a one-second window that must have been measured for it to count as whole.
/// A 3 s step ends a millisecond or two early by the engine's clock (2.998 s): its last
/// second is still a full window, and flooring would drop it (and with it the step's
/// judgement: three windows are the minimum).
const WHOLE_WINDOW_SHARE: f64 = 0.95;

/// Whole windows in a step that lasted `duration_s` and recorded `seconds` windows.
pub(crate) fn whole_windows(duration_s: f64, seconds: usize) -> usize {
    if !(duration_s.is_finite() && duration_s > 0.0) {
        return seconds.min(1);
    }
    let whole = (duration_s + (1.0 - WHOLE_WINDOW_SHARE)).floor() as usize;
    whole.clamp(1, seconds.max(1)).min(seconds)
}

/// Little's law on a step: `observed_in_flight` (`volley_harness::MeasuredRun::mean_in_flight`, or the
/// configured concurrency of a closed loop) against throughput x W, where W is the mean
/// time a request holds its place: service time (sent to done) plus the connect time
/// spent for it (connects are timed apart from service time, and without keep-alive
/// every request opens one). `None` when the summary lacks the figures.
pub(crate) fn little_check(observed_in_flight: f64, s: &Summary) -> Option<little::LittleCheck> {
    let service = s.latency.get("service_time")?;
    let connect_total_ms = s
        .latency
        .get("connect_time")
        .map_or(0.0, |c| c.mean_ms * c.count as f64);
    let w_ms = little_w_ms(service.mean_ms, connect_total_ms, s.requests.completed);
    little::check(
        observed_in_flight,
        s.throughput.requests_per_s,
        Duration::from_secs_f64(w_ms.max(0.0) / 1e3),
    )
    .ok()
}

/// W for Little's law, ms: mean service time plus the connect time spread over the
/// `completed` requests.
fn little_w_ms(service_mean_ms: f64, connect_total_ms: f64, completed: u64) -> f64 {
    let connect_share = if completed > 0 {
        connect_total_ms / completed as f64
    } else {
        0.0
    };
    service_mean_ms + connect_share
}

/// Requests in flight at the end of each second: sent so far minus finished so far.
/// A snapshot, good for the trend test (a queue that grows shows in it), not a mean.
pub(crate) fn in_flight_per_second(s: &Summary) -> Vec<f64> {
    let (mut sent, mut done) = (0u64, 0u64);
    s.seconds
        .iter()
        .map(|x| {
            sent += x.sent;
            done += x.completed;
            sent.saturating_sub(done) as f64
        })
        .collect()
}

fn step_stats(s: &Summary, rate: f64, windows: usize, in_flight: Vec<f64>) -> sustain::StepStats {
    let sent = s.requests.sent.max(1) as f64;
    let p99 = |name: &str| {
        s.latency
            .get(name)
            .map(|l| Duration::from_secs_f64(l.p99_ms.max(0.0) / 1e3))
    };
    sustain::StepStats {
        offered_rate_rps: rate,
        send_rate_rps: s.rates.achieved_send_per_s,
        reply_rate_rps: s.rates.reply_per_s,
        error_share: (s.requests.failed as f64 / sent).min(1.0),
        p99_per_window: s
            .seconds
            .iter()
            .take(windows)
            .map(|x| Duration::from_secs_f64(x.p99_ms.max(0.0) / 1e3))
            .collect(),
        in_flight_per_window: in_flight,
        window: Duration::from_secs(1),
        send_lag_p99: p99("send_lag"),
        sched_lag_p99: p99("sched_lag"),
        conn_wait_p99: p99("conn_wait"),
        dispatch_rate_rps: Some(s.rates.dispatched_per_s),
        cap_hits: s.connections_stats.cap_hits,
        pool_saturated: s.connections_stats.cap_hits > 0,
        generator_bound_seconds: Some(s.generator.generator_bound_seconds),
        machine_stalled_seconds: Some(s.generator.machine_stalled_seconds),
        // The kernel's connect counters are not in the summary: `ConnectCounters`.
        listen_overflows: None,
        ports_used_of_range: None,
        connections_opened: None,
        connects_without_port: None,
        time_wait: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_printed_as_sentences() {
        let v: sustain::Verdict = serde_json::from_value(serde_json::json!({
            "sustainable": false,
            "bound": "server_bound",
            "trend": null,
            "reasons": [
                {"reason": "send_rate_short", "send_rate_rps": 985.25, "required_rps": 990.0},
                {"reason": "in_flight_rising", "slope_per_s": 3.5, "t_stat": null,
                 "t_critical": 2.0, "rise_requests": 17.5, "mean_in_flight": 4.0, "rising": true},
                {"reason": "p99_over_slo", "worst_p99": {"secs": 0, "nanos": 250_000_000},
                 "window_index": 2, "slo": {"secs": 0, "nanos": 100_000_000}}
            ]
        }))
        .unwrap();
        assert_eq!(
            reasons_text(Some(&v)),
            "sent 985 req/s of the 1,000 offered (99%; 99% needed); \
             in-flight requests rose by 3.5/s (17.5 over the step, 4 on average); \
             p99 250 ms in second 3 exceeds the 100 ms SLO"
        );
        assert_eq!(reasons_text(None), "no reason recorded");
    }

    #[test]
    fn a_verdict_serialises_to_the_stored_shape() {
        // The shape the store has always held (reports read these keys): a rate step's.
        let sustain: sustain::Verdict = serde_json::from_value(serde_json::json!({
            "sustainable": true, "bound": "server_bound", "trend": null, "reasons": []
        }))
        .unwrap();
        let v = Verdict {
            little: None,
            throttled: true,
            machine_busy: false,
            sustain: Some(sustain.clone()),
            conn_wait: Some("waited for connections".into()),
            connects: None,
            office: None,
            target_died: None,
        };
        assert_eq!(
            serde_json::to_value(&v).unwrap(),
            serde_json::json!({
                "little": null,
                "throttled": true,
                "machine_busy": false,
                "sustain": serde_json::to_value(&sustain).unwrap(),
                "conn_wait": "waited for connections",
            })
        );
        // A closed-loop step has neither sustain nor conn_wait.
        let plain = Verdict {
            sustain: None,
            conn_wait: None,
            throttled: false,
            ..v
        };
        assert_eq!(
            serde_json::to_value(&plain).unwrap(),
            serde_json::json!({"little": null, "throttled": false, "machine_busy": false})
        );
    }

    fn integral(ns: u64) -> volley_engine::LiveSnapshot {
        volley_engine::LiveSnapshot {
            in_flight_integral_ns: ns,
            ..Default::default()
        }
    }

    #[test]
    fn little_uses_the_in_flight_integral_not_end_of_second_snapshots() {
        // Synthetic open loop: 1000 req/s, 2 ms each, so on average 2 outstanding: over
        // a 3 s step the integral grows by 3000 requests x 2 ms. At each second's end the
        // counters may well show none outstanding.
        let start = integral(5_000_000_000); // what an earlier step left on the counters
        let end = integral(5_000_000_000 + 3000 * 2_000_000);
        let mean = end.mean_in_flight_since(&start, 3_000_000_000).unwrap();
        assert!((mean - 2.0).abs() < 1e-9, "{mean}");
        assert_eq!(end.mean_in_flight_since(&start, 0), None);
        let w = Duration::from_secs_f64(little_w_ms(2.0, 0.0, 3000) / 1e3);
        let ok = little::check(mean, 1000.0, w).unwrap();
        assert!(!ok.flagged, "{ok:?}");
        let snapshot = little::check(0.0, 1000.0, w).unwrap();
        assert!(
            snapshot.flagged && (snapshot.relative_gap - 1.0).abs() < 1e-9,
            "the old definition: 100% gap"
        );
        // Requests lost from the histogram (half the latencies never recorded would halve
        // throughput) show as a gap against the gauge.
        assert!(little::check(mean, 500.0, w).unwrap().flagged);
    }

    #[test]
    fn w_includes_the_connect_time_spent_per_request() {
        // Closed loop without keep-alive: 4 connections always busy; 0.8 ms service and
        // a 0.2 ms connect per request give 1 ms, 4000 req/s x 1 ms = 4.
        let w_ms = little_w_ms(0.8, 0.2 * 4000.0, 4000);
        assert!((w_ms - 1.0).abs() < 1e-9);
        let c = little::check(4.0, 4000.0, Duration::from_secs_f64(w_ms / 1e3)).unwrap();
        assert!(c.relative_gap < 1e-9);
        // Keep-alive: no connect share. No requests: no division by zero.
        assert_eq!(little_w_ms(0.8, 0.0, 4000), 0.8);
        assert_eq!(little_w_ms(0.8, 5.0, 0), 0.8);
    }

    #[test]
    fn a_step_ending_a_hair_early_keeps_its_last_window() {
        assert_eq!(whole_windows(2.998, 3), 3);
        assert_eq!(whole_windows(2.94, 3), 2, "6% short is a partial window");
        assert_eq!(
            whole_windows(3.5, 4),
            3,
            "the partial fourth second is left out"
        );
        assert_eq!(whole_windows(30.0, 31), 30);
        assert_eq!(whole_windows(0.4, 1), 1);
        assert_eq!(whole_windows(2.0, 0), 0);
        assert_eq!(whole_windows(f64::NAN, 2), 1);
    }
}
