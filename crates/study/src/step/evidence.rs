//! Whether a step the generator rule calls server-bound shows the server's own
//! evidence: what volley's limits let the target use, whether the step was long
//! enough for a CPU cap to hold, and the server's queue or CPU (docs/methodology.md,
//! "Server-bound needs the server's evidence").

use serde_json::Value;
use volley_analysis::sustain;
use volley_targets::CpuQuota;

use super::JudgedStep;
use crate::plan::{Cell, Plan};

/// What volley's limits let the step's target use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Cap {
    /// The CPUs it could use: its quota, else its pinned cores; `None` when neither
    /// was set.
    pub cores: Option<f64>,
    /// Its CPU quota, if volley set one.
    pub quota: Option<CpuQuota>,
}

/// The step's target's [`Cap`].
pub(crate) fn cap_of(plan: &Plan, cell: &Cell) -> Cap {
    let inst = &plan.instances[cell.instance];
    Cap {
        cores: inst.cpu_quota.or(inst.cores.map(f64::from)),
        quota: inst.cpu_quota.map(CpuQuota::of_one_cpu),
    }
}

/// A step the generator rule calls server-bound stays so only with the server's own
/// evidence (`sustain::server_evidence`): its queue grew, or its CPU neared what it
/// could use (`cap.cores`: its quota or pinned cores, as they are; else the machine's
/// CPUs less the generator's, at least half a core). Otherwise it is inconclusive, with
/// the reason in its notes. A capped step too short for its cap to hold
/// (`CpuQuota::too_short`) is labelled [`sustain::TOO_SHORT`] whatever the generator
/// rule said (a link-bound one aside): its figure is not the capped server's at all,
/// its generator CPU is mostly start-up over a few milliseconds (seed 002's built-in
/// server: "1.27 of 1 core" in 11 ms), and measuring it again would be as short.
pub(crate) fn require_server_evidence(j: &mut JudgedStep, cap: Cap) {
    if j.label != volley_analysis::link::LABEL {
        if let Some(why) = cap.quota.and_then(|q| q.too_short(j.summary.duration_s)) {
            relabel(j, sustain::TOO_SHORT, why);
            return;
        }
    }
    if j.label != sustain::Bound::ServerBound.label() {
        return;
    }
    let failed_on_server = j.verdict.sustain.as_ref().is_some_and(|v| {
        v.reasons.iter().any(|r| {
            matches!(
                r,
                sustain::Reason::ReplyRateShort { .. }
                    | sustain::Reason::TooManyErrors { .. }
                    | sustain::Reason::P99OverSlo { .. }
                    | sustain::Reason::InFlightRising(_)
            )
        })
    });
    let monitor = j.monitor.as_ref();
    let cpu_pct = monitor
        .and_then(|m| m.cpu_user_pct.zip(m.cpu_sys_pct))
        .map(|(u, s)| u + s);
    let machine = monitor.map_or(1.0, |m| f64::from(m.cpus));
    let generator = j.summary.generator.cpu_cores_used.unwrap_or(0.0);
    let side = sustain::ServerSide {
        failed_on_server,
        cpu_pct,
        available_cores: cap.cores.unwrap_or((machine - generator).max(0.5)),
    };
    if let sustain::ServerEvidence::Inconclusive(why) = sustain::server_evidence(&side) {
        relabel(j, sustain::Bound::Inconclusive.label(), why);
    }
}

/// Labels the step `label` and says `why` in its notes.
fn relabel(j: &mut JudgedStep, label: &'static str, why: String) {
    j.label = label;
    if let Some(notes) = j.summary_json["notes"].as_array_mut() {
        notes.push(Value::String(why.clone()));
    }
    j.summary.notes.push(why);
}
