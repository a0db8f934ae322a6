//! One step of a `caldav` workload: an office day (volley-office) against the target's
//! DAV accounts, watched like any step, judged by the office's own rule: a step
//! *carries* its users when the poll sessions' p99 is within the study's SLO, the error
//! share within its bound, and not one correctness check failed
//! (docs/methodology.md, "The office in a study").

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use volley_metrics::{
    ClosedSecond, Model, Recorder, RunInfo, SecondDigest, SecondJoiner, SecondStream,
};
use volley_office::{Account, OfficeConfig, OfficeReport};
use volley_targets::RunningTarget;

use crate::plan::{Cell, OfficeLoad, Plan, Workload};
use crate::step::{judge, step_watch, JudgedStep, Loaded, StepError};

/// The session kind the SLO judges: a client's poll (what a user waits for all day);
/// the first sync of a new device is reported beside it, not judged.
pub const JUDGED_SESSION: &str = "sync-poll";

/// Runs one office step of `cell` on `target` and judges it. Each second of the day
/// goes to `on_second` as it closes (the study stores it live, as `volley bench --save`
/// does) and the day keeps none: its memory stays flat however long it is (issue 26).
pub(crate) fn run_office(
    w: &Workload,
    office: &OfficeLoad,
    cell: &Cell,
    plan: &Plan,
    target: &RunningTarget,
    stop_flag: &Arc<AtomicBool>,
    on_second: &dyn Fn(&ClosedSecond),
) -> Result<JudgedStep, StepError> {
    let users = cell.users.unwrap_or(1) as usize;
    let url = format!("http://{}", target.addr);
    let mut cfg = office_config(w, office, plan, target, &url, users)?;
    // The office's own flag: the death watch sets it when the target dies or the
    // study is stopped.
    let load_stop = Arc::new(AtomicBool::new(false));
    cfg.stop = Arc::clone(&load_stop);
    let watch = step_watch(target, load_stop, stop_flag, std::time::Duration::ZERO);
    let step_started = std::time::Instant::now();
    let watched = volley_harness::watch(&watch, || day_streamed(&cfg, on_second))?;
    let stopped = cfg.stop.load(std::sync::atomic::Ordering::Relaxed);
    // A lead-in that could not finish: the day was never set up, which is this step's
    // finding (not carried, said so), not an error that ends the study.
    let mut not_set_up: Option<String> = None;
    let watched = watched.map(|(run, digests)| {
        let run = run.map_err(|e| {
            if matches!(e, volley_office::OfficeError::LeadIn { .. }) {
                not_set_up = Some(e.to_string());
            }
            StepError::Office(e.to_string())
        })?;
        let report = run.report;
        let mut recorder = Recorder::merge_all(vec![run.all])?;
        recorder.set_digests(digests?);
        let cpu_s = report.generator_cpu_s;
        // The window's own time: set-up, lead-in and audit sent none of these requests.
        let elapsed = std::time::Duration::from_secs_f64(report.wall_s);
        let info = run_info(&url, users * cfg.devices, elapsed, stopped, cpu_s);
        Ok::<_, StepError>((
            Loaded {
                recorder,
                info,
                stopped_early: stopped,
                open_in_flight: None,
                // Each device waits for its answer, then thinks: a device is not always
                // outstanding, so Little's check has no closed-loop figure to compare.
                closed_in_flight: 0.0,
                wire: None,
                extra: crate::step::extra::Extra {
                    office: Some(report.clone()),
                    ..Default::default()
                },
                connects: Default::default(),
            },
            report,
        ))
    });
    let (loaded, report) = match watched.load {
        Ok((l, r)) => (Ok(l), Some(r)),
        // The target died before its day could run (the set-up found no server): the
        // death is the step's finding, stored with it as a death mid-day is, not an
        // error that ends the study; a users search goes on past it with
        // `restart = "next-step"`. The step has no requests and no office report.
        Err(e) if watched.died.is_some() || not_set_up.is_some() => {
            let mut info = run_info(&url, users * cfg.devices, step_started.elapsed(), true, 0.0);
            info.notes.push(format!("the office day never ran: {e}"));
            (Ok(never_ran(info)), None)
        }
        Err(e) => (Err(e), None),
    };
    let watched = volley_harness::Watched {
        load: loaded,
        monitor: watched.monitor,
        throttling: watched.throttling,
        died: watched.died,
    };
    let mut judged = judge(None, plan, watched)?;
    let Some(report) = report else {
        let why = match (&judged.verdict.target_died, not_set_up) {
            (Some(_), _) => Some("the target died before the day could run".to_string()),
            (None, Some(e)) => Some(e),
            (None, None) => None,
        };
        if let Some(why) = why {
            carried_nothing(&mut judged, why, users, office, plan);
            return Ok(judged);
        }
        return Err(StepError::Office("the day ended without its report".into()));
    };
    let v = verdict(&report, plan);
    // A day during which the server died did not carry its users.
    judged.sustainable = Some(v.carries && judged.verdict.target_died.is_none());
    judged.verdict.office = Some(v);
    judged.verdict.little = None;
    Ok(judged)
}

/// Runs the day on a thread of its own while this one joins its streamed seconds and
/// hands each to `on_second` (on this thread: the study's store is not shared across
/// threads); returns the day and the digests of its seconds, for the step's series.
fn day_streamed(
    cfg: &OfficeConfig,
    on_second: &dyn Fn(&ClosedSecond),
) -> (
    Result<volley_office::OfficeRun, volley_office::OfficeError>,
    Result<Vec<SecondDigest>, volley_metrics::MetricsError>,
) {
    let (tx, rx) = std::sync::mpsc::channel();
    // One stream: the day's every-request recorder is one, shared by its threads.
    let mut joiner = SecondJoiner::new(1).keeping_digests();
    let mut joined = Ok(());
    let mut take = |closed: Result<Vec<ClosedSecond>, volley_metrics::MetricsError>| match closed {
        Ok(done) => done.iter().for_each(on_second),
        Err(e) if joined.is_ok() => joined = Err(e),
        Err(_) => {}
    };
    let day = std::thread::scope(|s| {
        let stream = SecondStream::new(0, tx);
        let day = s.spawn(move || volley_office::run_streaming(cfg, Some(stream)));
        // Ends when the day has let its stream go (or failed, dropping it).
        for streamed in rx {
            take(joiner.push(streamed));
        }
        day.join()
    });
    take(joiner.finish());
    let day = day.unwrap_or_else(|_| {
        Err(volley_office::OfficeError::Config(
            "the office day's thread panicked".into(),
        ))
    });
    (day, joined.map(|()| joiner.take_digests()))
}

/// The office's configuration for `users` of the target's DAV accounts at `url`: the
/// workload's day, the plan's window, the load's timeout and seed.
fn office_config(
    w: &Workload,
    office: &OfficeLoad,
    plan: &Plan,
    target: &RunningTarget,
    url: &str,
    users: usize,
) -> Result<OfficeConfig, StepError> {
    let accounts = target
        .dav
        .as_ref()
        .map(|d| d.accounts.as_slice())
        .unwrap_or_default();
    if accounts.len() < users {
        return Err(StepError::Office(format!(
            "the target has {} DAV accounts, the step needs {users}",
            accounts.len()
        )));
    }
    let duration = plan
        .timing
        .duration
        .ok_or_else(|| StepError::Office("an office step needs steps.duration".into()))?;
    let mut cfg =
        OfficeConfig::with_accounts(url, accounts[..users].iter().map(Account::from).collect());
    cfg.mix = office.mix.clone();
    cfg.decisions_per_day = office.decisions;
    cfg.compress = office.compress;
    cfg.cold_start = office.cold_start;
    cfg.duration = duration;
    cfg.timeout = w.load.timeout;
    cfg.seed = w.load.seed;
    // A users search's days run on one target: a larger day takes the calendars the
    // smaller one left (read back) and sets up only the users it adds.
    cfg.keep_calendars = true;
    Ok(cfg)
}

/// A day that never ran as a step's load: no requests, no office report, stopped early
/// (`info` says why).
fn never_ran(info: RunInfo) -> Loaded {
    Loaded {
        recorder: Recorder::new(),
        info,
        stopped_early: true,
        open_in_flight: None,
        closed_in_flight: 0.0,
        wire: None,
        extra: crate::step::extra::Extra::default(),
        connects: Default::default(),
    }
}

/// Judged as an office day that carried nothing, so the step reads (and a search hears
/// it) like a day the server died in: a server that cannot serve N people's first
/// syncs, a few at a time, does not carry them.
fn carried_nothing(
    judged: &mut JudgedStep,
    why: String,
    users: usize,
    office: &OfficeLoad,
    plan: &Plan,
) {
    judged.sustainable = Some(false);
    judged.verdict.little = None;
    judged.verdict.office = Some(OfficeVerdict {
        carries: false,
        users,
        compress: office.compress,
        decisions_per_day: office.decisions,
        poll_p99_ms: None,
        slo_ms: plan.rule.p99_slo.as_secs_f64() * 1e3,
        error_share: 1.0,
        violations: 0,
        reasons: vec![why],
        lead_in: None,
    });
}

/// The day's load facts as any step's: a closed loop of `connections` kept-alive
/// devices over the window's `elapsed` time, the office's own CPU time; no stall probe
/// runs beside an office day. `volley bench --caldav --save` stores its day with them.
pub fn run_info(
    url: &str,
    connections: usize,
    elapsed: std::time::Duration,
    stopped: bool,
    cpu_s: f64,
) -> RunInfo {
    RunInfo {
        url: url.to_string(),
        method: "CALDAV".into(),
        model: Model::Closed,
        threads: 1,
        connections,
        streams_per_connection: 1,
        max_connections: connections,
        keep_alive: true,
        elapsed_ns: u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX),
        connections_opened: connections as u64,
        max_open_connections: u32::try_from(connections).unwrap_or(u32::MAX),
        cap_hits: 0,
        stopped_early: stopped,
        cpu_ns: Some((cpu_s * 1e9) as u64),
        cpu_pressure: None,
        cores: 1.0,
        notes: Vec::new(),
        stalls: None,
    }
}

/// Whether an office day carried its users, and why not; stored as the verdict's
/// `office` (reports read these fields).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OfficeVerdict {
    /// Poll p99 within the SLO, errors within their share, no correctness violation.
    pub carries: bool,
    /// Users simulated.
    pub users: usize,
    /// Office time / wall time of the day: 1 is real time (the users are people); F
    /// makes each user send the requests of F people.
    pub compress: f64,
    /// Decisions per person per office day.
    pub decisions_per_day: u32,
    /// p99 of the poll sessions, ms; none when no poll completed.
    pub poll_p99_ms: Option<f64>,
    /// The SLO it is judged against, ms.
    pub slo_ms: f64,
    /// Failed requests / requests.
    pub error_share: f64,
    /// Correctness violations.
    pub violations: u64,
    /// Why not, one sentence each.
    pub reasons: Vec<String>,
    /// What a warm day ran before its window (none on a cold day or a day never
    /// run): its cost, and the failures set apart from this verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lead_in: Option<LeadInCost>,
}

/// The cost of a warm day's lead-in, beside its verdict (docs/methodology.md, "The
/// office in a study"): the study's end table and the report show it per day.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LeadInCost {
    /// Wall-clock seconds.
    pub wall_s: f64,
    /// Requests sent.
    pub requests: u64,
    /// Requests that failed, set apart from the day's verdict.
    pub failed_requests: u64,
}

impl LeadInCost {
    /// The cost of `l`.
    pub fn of(l: &volley_office::LeadIn) -> LeadInCost {
        LeadInCost {
            wall_s: l.wall_s,
            requests: l.requests,
            failed_requests: l.failed_requests,
        }
    }
}

/// Whether the step carried its users, and why not: the poll p99 against the SLO, the
/// error share against its bound, the correctness violations.
fn verdict(report: &OfficeReport, plan: &Plan) -> OfficeVerdict {
    let slo_ms = plan.rule.p99_slo.as_secs_f64() * 1e3;
    let poll = report.sessions.iter().find(|s| s.name == JUDGED_SESSION);
    let poll_p99 = poll.filter(|s| s.count > 0).map(|s| s.p99_ms);
    let requests: u64 = report.ops.iter().map(|r| r.count).sum();
    let errors: u64 = report.ops.iter().map(|r| r.errors).sum();
    let error_share = if requests == 0 {
        1.0
    } else {
        errors as f64 / requests as f64
    };
    let mut reasons = Vec::new();
    match poll_p99 {
        None => reasons.push("no poll session completed".to_string()),
        Some(p) if p > slo_ms => {
            reasons.push(format!("poll p99 {p:.1} ms is over the {slo_ms:.0} ms SLO"))
        }
        Some(_) => {}
    }
    if error_share > plan.rule.allowed_error_share {
        reasons.push(format!(
            "{:.2}% of requests failed (at most {:.2}%)",
            error_share * 100.0,
            plan.rule.allowed_error_share * 100.0
        ));
    }
    if report.violations_total > 0 {
        reasons.push(format!(
            "{} correctness violations",
            report.violations_total
        ));
    }
    OfficeVerdict {
        carries: reasons.is_empty(),
        users: report.users,
        compress: report.compress,
        decisions_per_day: report.decisions_per_day,
        poll_p99_ms: poll_p99,
        slo_ms,
        error_share,
        violations: report.violations_total,
        reasons,
        lead_in: report.lead_in.as_ref().map(LeadInCost::of),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_office_verdict_serialises_to_the_stored_shape() {
        let v = OfficeVerdict {
            carries: false,
            users: 40,
            compress: 480.0,
            decisions_per_day: 250,
            poll_p99_ms: Some(1200.5),
            slo_ms: 1000.0,
            error_share: 0.0,
            violations: 0,
            reasons: vec!["poll p99 1200.5 ms is over the 1000 ms SLO".into()],
            lead_in: None,
        };
        let step = crate::step::Verdict {
            little: None,
            throttled: false,
            machine_busy: false,
            sustain: None,
            conn_wait: None,
            connects: None,
            office: Some(v),
            target_died: None,
        };
        // The keys the reports read (volley-report's model/office), with `compress`
        // beside the users.
        assert_eq!(
            serde_json::to_value(&step).unwrap(),
            serde_json::json!({
                "little": null,
                "throttled": false,
                "machine_busy": false,
                "office": {
                    "carries": false,
                    "users": 40,
                    "compress": 480.0,
                    "decisions_per_day": 250,
                    "poll_p99_ms": 1200.5,
                    "slo_ms": 1000.0,
                    "error_share": 0.0,
                    "violations": 0,
                    "reasons": ["poll p99 1200.5 ms is over the 1000 ms SLO"],
                }
            })
        );
        let none = OfficeVerdict {
            poll_p99_ms: None,
            ..match step.office {
                Some(o) => o,
                None => unreachable!(),
            }
        };
        assert_eq!(
            serde_json::to_value(&none).unwrap()["poll_p99_ms"],
            serde_json::Value::Null
        );
    }
}
