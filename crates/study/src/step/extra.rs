//! What a step's load adds to its stored summary beyond the engine's own: the office
//! day's report, the injectors and their phases, the links volley shaped and the
//! server's unshaped time. Typed until the store serialises them (as top-level keys of
//! the stored summary, the names below), so the step's own rules (the link rule, the
//! phases' marks) read fields, never JSON by key.

use serde::Serialize;
use volley_agents::coordinator::AgentReport;
use volley_agents::msg::Ending;
use volley_agents::phase::Phase;
use volley_metrics::Summary;
use volley_netlab::measure::LinkMeasure;
use volley_office::OfficeReport;

/// The step's keys beyond the engine's summary; each left out when absent.
#[derive(Debug, Default, Serialize)]
pub struct Extra {
    /// An office day's report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub office: Option<OfficeReport>,
    /// A run shared by several injectors.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub injected: Option<Injected>,
    /// Per injector behind a lab: its link as set and as measured.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<LinkRecord>,
    /// The server's own time per request, measured outside the shaped links.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unshaped: Option<Unshaped>,
}

/// A run shared by several injectors: each one's figures, and the phases their joins
/// and leaves cut the run into.
#[derive(Debug, Serialize)]
pub struct Injected {
    /// Each injector, as the coordinator saw it.
    pub injectors: Vec<InjectorRecord>,
    /// The phases, each marked link-bound where its links explain its figure.
    pub phases: Vec<StoredPhase>,
    /// How the phases' boundary seconds are treated.
    pub phases_note: &'static str,
    /// The first second some injector was lost from.
    pub degraded_from_s: Option<u64>,
    /// Requests the injectors streamed live.
    pub streamed_requests: u64,
    /// Some phase held an injector whose own run was generator-bound.
    pub generator_bound_phase: bool,
}

/// One injector of a shared run: the coordinator's own [`AgentReport`] (its name,
/// share, start, clock, losses and late seconds, under the names the store has always
/// kept: `refused_after_lost`), then what its final record and its own run add.
#[derive(Debug, Serialize)]
pub struct InjectorRecord {
    /// As the coordinator saw it (its final record left out: see `ending`).
    #[serde(flatten)]
    pub agent: AgentReport,
    /// Why its load ended, when its final record came.
    pub ending: Option<Ending>,
    /// Its start offset after T0 in whole seconds, when its record came.
    pub offset_s: Option<u64>,
    /// Its own run's summary, when its record came.
    pub summary: Option<Summary>,
}

/// A phase as stored: the agents' phase, and whether the links of its active
/// injectors explain its figure.
#[derive(Debug, Serialize)]
pub struct StoredPhase {
    /// The phase.
    #[serde(flatten)]
    pub phase: Phase,
    /// Its figure sits at what its injectors' links allow.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub link_bound: bool,
    /// Why, when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_reason: Option<String>,
}

impl From<Phase> for StoredPhase {
    fn from(phase: Phase) -> StoredPhase {
        StoredPhase {
            phase,
            link_bound: false,
            link_reason: None,
        }
    }
}

/// One injector's link in a study's lab.
#[derive(Debug, Clone, Serialize)]
pub struct LinkRecord {
    /// The injector behind it (`inj1`, ...).
    pub injector: String,
    /// Its namespace.
    pub namespace: String,
    /// Its rate each way, bits per second (`None`: unshaped).
    pub rate_bit: Option<u64>,
    /// Round trip a proxy adds, ms (`None`: none).
    pub delay_ms: Option<u64>,
    /// What it carried when measured before the study.
    pub measured: LinkMeasure,
}

/// The server's own time per request, measured from this host outside the shaped links
/// just before the step.
#[derive(Debug, Clone, Serialize)]
pub struct Unshaped {
    /// Mean time per request, ms.
    pub per_request_ms: f64,
    /// Requests it rests on.
    pub requests: u64,
    /// Where it was measured.
    pub from: &'static str,
}

#[cfg(test)]
mod tests {
    use super::InjectorRecord;
    use volley_agents::clock::ClockOffset;
    use volley_agents::coordinator::AgentReport;
    use volley_agents::msg::Ending;
    use volley_agents::share::Share;

    /// An injector is stored under the keys, and in the order, the study has always
    /// written them (readers, and the tests reading steps back, go by these names).
    #[test]
    fn an_injector_is_stored_as_it_always_was() {
        let share = Share {
            index: 1,
            of: 2,
            requests: None,
            rate_milli_rps: Some(500_000),
            connections: 8,
            duration_ms: Some(3_000),
        };
        let clock = ClockOffset {
            offset_ns: -1_500,
            rtt_ns: 90_000,
            probes: 5,
        };
        let record = InjectorRecord {
            agent: AgentReport {
                name: "inj2".into(),
                share,
                clock,
                clock_warning: false,
                delay_ms: 12,
                late_ms: 3,
                final_record: None,
                lost_from_s: Some(4),
                process_exited: true,
                late_seconds: 1,
                max_late_ms: 250,
                refused: 7,
                after_merge: 0,
            },
            ending: Some(Ending::Stopped),
            offset_s: Some(0),
            summary: None,
        };
        let want = format!(
            concat!(
                r#"{{"name":"inj2","share":{},"delay_ms":12,"late_ms":3,"clock":{},"#,
                r#""clock_warning":false,"lost_from_s":4,"process_exited":true,"#,
                r#""late_seconds":1,"max_late_ms":250,"refused_after_lost":7,"#,
                r#""ending":"Stopped","offset_s":0,"summary":null}}"#
            ),
            serde_json::to_string(&share).unwrap(),
            serde_json::to_string(&clock).unwrap(),
        );
        assert_eq!(serde_json::to_string(&record).unwrap(), want);
    }
}
