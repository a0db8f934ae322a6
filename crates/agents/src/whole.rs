//! The whole run's summaries: one per injector and one merged, from the recorders the
//! agents sent with their final records.
//!
//! Place in the flow: after [`crate::coordinator::coordinate`], before the store. Each
//! agent's recorder closes into its own summary on its own time base, as `volley bench`
//! would show it; the merged run is every recorder moved by its agent's start offset
//! and added ([`volley_metrics::Recorder::merge`]: histograms added, never averaged),
//! then closed once. The merged request count is checked against the sum of the
//! per-second records the agents streamed.

use volley_metrics::{Model, Recorder, RunInfo, Summary};

use crate::coordinator::RunResult;
use crate::AgentsError;

/// An injector's own figures.
#[derive(Debug, Clone)]
pub struct InjectorSummary {
    /// Its name.
    pub name: String,
    /// Its start after T0, whole seconds.
    pub offset_s: u64,
    /// Its summary, on its own time base.
    pub summary: Summary,
}

/// The merged run and each injector's.
#[derive(Debug)]
pub struct WholeRun {
    /// Every agent that sent its recorder, merged (not closed: the caller judges and
    /// closes it as it does a single injector's).
    pub merged: Recorder,
    /// The run facts to close `merged` with.
    pub info: RunInfo,
    /// Each of them.
    pub injectors: Vec<InjectorSummary>,
    /// Requests in the seconds the agents streamed (equal to `merged`'s count unless a
    /// record was lost on the bus, which a note in `info` then says).
    pub streamed_requests: u64,
    /// Agents that finished without a recorder (lost, failed): their streamed seconds
    /// are in the phases, not in `merged`.
    pub without_record: Vec<String>,
    /// No agent sent its recorder: `merged` is the merged seconds that reached the
    /// coordinator and nothing more, a step to keep but never to judge as a pass.
    pub incomplete: bool,
}

fn metrics(e: volley_metrics::MetricsError) -> AgentsError {
    AgentsError::Summary(e.to_string())
}

/// The run facts of the merged run: sums of the agents' resources, the longest span.
fn merged_info(infos: &[(u64, &RunInfo)]) -> Option<RunInfo> {
    let (_, first) = infos.first()?;
    let mut m = (*first).clone();
    m.threads = infos.iter().map(|(_, i)| i.threads).sum();
    m.connections = infos.iter().map(|(_, i)| i.connections).sum();
    m.max_connections = infos.iter().map(|(_, i)| i.max_connections).sum();
    m.elapsed_ns = infos
        .iter()
        .map(|(o, i)| o * 1_000_000_000 + i.elapsed_ns)
        .max()
        .unwrap_or(0);
    m.connections_opened = infos.iter().map(|(_, i)| i.connections_opened).sum();
    m.max_open_connections = infos.iter().map(|(_, i)| i.max_open_connections).sum();
    m.cap_hits = infos.iter().map(|(_, i)| i.cap_hits).sum();
    m.stopped_early = infos.iter().any(|(_, i)| i.stopped_early);
    // Known only when every agent read its own.
    m.cpu_ns = infos.iter().map(|(_, i)| i.cpu_ns).sum::<Option<u64>>();
    m.cpu_pressure = infos
        .iter()
        .filter_map(|(_, i)| i.cpu_pressure)
        .reduce(f64::max);
    m.cores = infos.iter().map(|(_, i)| i.cores).sum();
    m.notes = Vec::new();
    // Each agent's probe ran on its own clock and machine: its seconds judge its own
    // summary, not the merged one.
    m.stalls = None;
    Some(m)
}

/// Closes every agent's recorder and the merged one (see the module doc).
pub fn summarise(r: &RunResult) -> Result<WholeRun, AgentsError> {
    let mut injectors = Vec::new();
    let mut shifted = Vec::new();
    let mut infos = Vec::new();
    let mut without_record = Vec::new();
    for a in &r.agents {
        let Some(rec) = a.final_record.as_ref().and_then(|f| f.share.as_deref()) else {
            without_record.push(a.name.clone());
            continue;
        };
        let own = Recorder::from_snapshot(rec.recorder.clone(), 0).map_err(metrics)?;
        injectors.push(InjectorSummary {
            name: a.name.clone(),
            offset_s: rec.offset_s,
            summary: own.close(&rec.info).map_err(metrics)?,
        });
        shifted.push(Recorder::from_snapshot(rec.recorder.clone(), rec.offset_s).map_err(metrics)?);
        infos.push((rec.offset_s, &rec.info));
    }
    let Some(mut info) = merged_info(&infos) else {
        return without_any_record(r, without_record);
    };
    let mut merged = Recorder::merge_all(shifted).map_err(metrics)?;
    if merged.closed_seconds().is_empty() {
        rebuild_seconds(&mut merged, r, &without_record, &mut info);
    }
    let streamed = streamed_requests(r, &without_record);
    let late = merged.late_samples();
    if late > 0 {
        // Each agent's summary says it too; the merged run must not hide it.
        info.notes.push(format!(
            "{late} requests ended more than the timeout after their intended second: the \
             injectors' live per-second records count them in a later second"
        ));
    }
    if merged.completed() != streamed {
        // Kept, and said: the recorders are the complete record; the live seconds are
        // what the phases are cut from.
        info.notes.push(
            AgentsError::WholeMismatch {
                merged: merged.completed(),
                streamed,
            }
            .to_string(),
        );
    }
    Ok(WholeRun {
        streamed_requests: streamed,
        merged,
        info,
        injectors,
        without_record,
        incomplete: false,
    })
}

/// The run when no agent sent its recorder (every one lost before its final record):
/// the merged seconds that reached the coordinator are the run, kept and marked
/// incomplete ([`WholeRun::incomplete`]) rather than thrown away with the step.
fn without_any_record(r: &RunResult, without_record: Vec<String>) -> Result<WholeRun, AgentsError> {
    let f = &r.folded;
    if f.uncounted > 0 {
        return Err(AgentsError::Summary(
            "no agent sent its recorder, and their seconds came without full counters: nothing to merge".into(),
        ));
    }
    let Some(totals) = f.totals.clone() else {
        return Err(AgentsError::Summary(
            "no agent sent its recorder or any second: nothing to merge".into(),
        ));
    };
    let streamed = streamed_requests(r, &without_record);
    // The seconds' sums as one, and their summary rows: what the seconds, each stored as
    // it closed, leave of the run.
    let merged = Recorder::from_seconds(vec![totals], f.digests.clone()).map_err(metrics)?;
    let rate: Option<f64> = r.agents.iter().map(|a| a.share.rate_rps()).sum();
    let last = f.last_s.map_or(0, |s| s + 1);
    let info = RunInfo {
        url: String::new(),
        method: String::new(),
        model: match rate {
            Some(rate_per_s) => Model::Open {
                rate_per_s,
                arrival: String::new(),
            },
            None => Model::Closed,
        },
        threads: 0,
        connections: r.agents.iter().map(|a| a.share.connections as usize).sum(),
        streams_per_connection: 1,
        max_connections: 0,
        keep_alive: true,
        elapsed_ns: last * 1_000_000_000,
        connections_opened: 0,
        max_open_connections: 0,
        cap_hits: 0,
        stopped_early: true,
        cpu_ns: None,
        cpu_pressure: None,
        cores: 0.0,
        notes: vec![format!(
            "incomplete: every injector ({}) was lost before it sent its run's record; the {} merged seconds that reached the coordinator are kept, and the run's totals are their sums",
            without_record.join(", "),
            f.present
        )],
        stalls: None,
    };
    Ok(WholeRun {
        merged,
        info,
        injectors: Vec::new(),
        streamed_requests: streamed,
        without_record,
        incomplete: true,
    })
}

/// Requests in the seconds streamed by the agents not in `without_record`.
fn streamed_requests(r: &RunResult, without_record: &[String]) -> u64 {
    r.merged
        .agents
        .iter()
        .filter(|s| !without_record.contains(&s.agent))
        .map(|s| s.requests())
        .sum()
}

/// Puts the coordinator's merged seconds into the merged recorder of agents that kept
/// none (they sent each second as it closed, and only its digest in the final record):
/// the seconds are the same sums the recorders' merge would have made. An agent that
/// sent no final record is in those seconds but not in the run's totals: said in a note.
fn rebuild_seconds(
    merged: &mut Recorder,
    r: &RunResult,
    without_record: &[String],
    info: &mut RunInfo,
) {
    // A second no agent was present in (missing, lost) is no window of the recorder.
    // The summary's rows come from the present seconds' digests, the per-second
    // histograms from the store (each second was stored as it was merged).
    if r.folded.uncounted == 0 {
        merged.set_digests(r.folded.digests.clone());
    } else {
        info.notes.push(
            "an injector sent its seconds without their full counters: the merged run's \
             per-second series is left empty (its totals stand)"
                .into(),
        );
    }
    if !without_record.is_empty() {
        info.notes.push(format!(
            "the per-second series includes the seconds streamed by {} (no final record), \
             which the run's totals do not count",
            without_record.join(", ")
        ));
    }
}
