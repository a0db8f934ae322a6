//! Whether a step the generator rule calls server-bound shows the server's own
//! evidence: what volley's limits let the target use, whether the step was long
//! enough for a CPU cap to hold, and the server's queue or CPU (docs/methodology.md,
//! "Server-bound needs the server's evidence").

use std::time::Duration;

use serde_json::Value;
use volley_analysis::sustain;

use super::JudgedStep;
use crate::plan::{Cell, Plan};

/// What volley's limits let the step's target use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Cap {
    /// The CPUs it could use: its quota, else its pinned cores; `None` when neither
    /// was set.
    pub cores: Option<f64>,
    /// The period its CPU quota is counted over (the kernel's CFS period); `None`
    /// without a quota.
    pub quota_period: Option<Duration>,
}

/// The step's target's [`Cap`].
pub(crate) fn cap_of(plan: &Plan, cell: &Cell) -> Cap {
    let inst = &plan.instances[cell.instance];
    Cap {
        cores: inst.cpu_quota.or(inst.cores.map(f64::from)),
        quota_period: inst
            .cpu_quota
            .map(|q| volley_targets::CpuQuota::of_one_cpu(q).period),
    }
}

/// Periods of its CPU quota a capped step must measure for its figure to be the
/// capped server's (ten): the kernel counts a quota per period, so a burst shorter
/// than a period runs at full speed, and over a step of D a server can get up to one
/// period's quota beyond its share of D; ten periods hold that to a tenth. Seed 002's
/// built-in server answered 250 requests in 11 ms "at 25% of a CPU" (20,000 req/s)
/// and never met its cap.
pub(crate) const CAP_PERIODS: u32 = 10;

/// Why a step `measured_s` long cannot show a server held to a quota counted over
/// `period`: it measured under [`CAP_PERIODS`] periods. `None` when it measured enough,
/// or when there is no quota.
pub(crate) fn too_short_for_cap(measured_s: f64, period: Option<Duration>) -> Option<String> {
    let period = period?;
    let need = period * CAP_PERIODS;
    (measured_s < need.as_secs_f64()).then(|| {
        format!(
            "too short for its CPU cap: the step measured {:.0} ms, under {CAP_PERIODS} periods of its CPU cap ({:.1} s): the kernel counts a quota per {:.0} ms period, and a burst shorter than that runs at full speed, so this figure is not the capped server's; give the step more requests or a longer duration",
            measured_s * 1e3,
            need.as_secs_f64(),
            period.as_secs_f64() * 1e3
        )
    })
}

/// A step the generator rule calls server-bound stays so only with the server's own
/// evidence (`sustain::server_evidence`): its queue grew, or its CPU neared what it
/// could use (`cap.cores`: its quota or pinned cores, as they are; else the machine's
/// CPUs less the generator's, at least half a core). Otherwise it is inconclusive, with
/// the reason in its notes. A capped step too short for its cap to hold
/// ([`too_short_for_cap`]) is labelled [`sustain::TOO_SHORT`] whatever the generator
/// rule said (a link-bound one aside): its figure is not the capped server's at all,
/// its generator CPU is mostly start-up over a few milliseconds (seed 002's built-in
/// server: "1.27 of 1 core" in 11 ms), and measuring it again would be as short.
pub(crate) fn require_server_evidence(j: &mut JudgedStep, cap: Cap) {
    if j.label != volley_analysis::link::LABEL {
        if let Some(why) = too_short_for_cap(j.summary.duration_s, cap.quota_period) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten periods of the quota (1 s on the kernel's 100 ms) or more hold the cap; a
    /// shorter capped step cannot show it; an uncapped step is never too short.
    #[test]
    fn a_capped_step_must_measure_ten_periods_of_its_quota() {
        let p = Some(Duration::from_millis(100));
        let table = [
            (0.011, p, true), // seed 002's built-in server: 250 requests in 11 ms
            (0.999, p, true),
            (1.0, p, false),
            (3.7, p, false),
            (0.011, None, false), // no quota
            (0.45, Some(Duration::from_millis(10)), false),
        ];
        for (measured_s, period, short) in table {
            let why = too_short_for_cap(measured_s, period);
            assert_eq!(why.is_some(), short, "{measured_s} s, {period:?}: {why:?}");
        }
        let why = too_short_for_cap(0.011, p).unwrap();
        assert!(
            why.starts_with(
                "too short for its CPU cap: the step measured 11 ms, under 10 periods of its CPU cap (1.0 s)"
            ),
            "{why}"
        );
    }
}
