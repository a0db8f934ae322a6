//! The timing of a study's steps, the sustainability rule they are judged by, whether
//! that rule can judge them at all, and the capacity search's settings: the parts of
//! [`super::resolve`] that decide how long and by what a step is measured.

use std::time::Duration;

use super::resolve::{duration_of, invalid};
use super::*;
use crate::spec::{Mode, StudyFile};
use crate::StudyError;

/// Step timing, scaled; rate steps kept long enough to judge.
pub(super) fn resolve_timing(
    file: &StudyFile,
    text: &str,
    scale: f64,
    workloads: &[Workload],
) -> Result<Timing, StudyError> {
    let st = &file.steps;
    let duration = match &st.duration {
        Some(_) => Some(duration_of(text, &st.duration, Duration::ZERO)?),
        None => None,
    };
    let requests = st.requests;
    if duration.is_none() && requests.is_none() && workloads.iter().any(|w| w.requests.is_none()) {
        return Err(invalid("[steps] needs duration = \"30s\" or requests = N"));
    }
    if duration.is_some_and(|d| d.is_zero()) || requests == Some(0) {
        return Err(invalid("steps.duration and steps.requests must be > 0"));
    }
    let scaled = duration.map(|d| d.mul_f64(scale));
    let timing = Timing {
        duration: scaled,
        rate_duration: scaled.zip(duration).map(|(s, d)| rate_step_length(s, d)),
        requests: requests.map(|n| ((n as f64 * scale).ceil() as u64).max(1)),
        warmup: duration_of(text, &st.warmup, Duration::from_secs(1))?.mul_f64(scale),
        cooldown: duration_of(text, &st.cooldown, Duration::from_secs(1))?.mul_f64(scale),
    };
    Ok(timing)
}

/// The sustainability rule from `[slo]`.
pub(super) fn resolve_rule(
    file: &StudyFile,
    text: &str,
    timing: &Timing,
) -> Result<volley_analysis::sustain::Rule, StudyError> {
    let p99 = duration_of(text, &file.slo.p99, Duration::from_secs(1))?;
    let error_share = file.slo.error_share.unwrap_or(0.01);
    if !(0.0..=1.0).contains(&error_share) {
        return Err(invalid("slo.error_share must be within 0..1"));
    }
    let mut rule = volley_analysis::sustain::Rule::new(error_share, p99);
    // Short (scaled) steps still get judged, on at least 3 one-second windows.
    if let Some(d) = timing.rate_duration {
        rule.min_windows = rule.min_windows.min((d.as_secs() as usize).max(3));
    }
    Ok(rule)
}

/// Refuses a plan whose rate steps cannot be judged: the sustainability rule needs
/// `rule.min_windows` whole one-second windows (at least 3, see
/// `volley_analysis::sustain::Rule`), and a step judged on fewer is never sustainable,
/// so a sweep would claim nothing and a search would walk down to its minimum.
pub(super) fn check_judgeable(
    rule: &volley_analysis::sustain::Rule,
    timing: &Timing,
    rated: bool,
) -> Result<(), StudyError> {
    let Some(d) = timing.rate_duration.filter(|_| rated) else {
        return Ok(());
    };
    let whole = d.as_secs();
    let needed = rule.min_windows.max(3) as u64;
    if whole < needed {
        return Err(invalid(format!(
            "steps.duration: too short to judge: {whole} whole second{} measured, {needed} needed (rate steps are judged on whole one-second windows)",
            if whole == 1 { "" } else { "s" }
        )));
    }
    Ok(())
}

/// Refuses a plan whose capped steps are timed shorter than a CPU cap needs to hold
/// ([`volley_targets::CpuQuota::span_to_hold`]): every such step would be
/// labelled too-short, a burst at full speed, so the study could give no capped
/// server a figure. Request-count steps are only estimated, so the plan warns of them
/// instead ([`Plan::describe`]).
pub(super) fn check_capped(
    cells: &[Cell],
    instances: &[Instance],
    workloads: &[Workload],
    timing: &Timing,
    mode: Mode,
) -> Result<(), StudyError> {
    for c in cells {
        let Some(q) = instances[c.instance].cpu_quota else {
            continue;
        };
        let Some(d) = timing.measured(workloads[c.workload].rated(mode)) else {
            continue;
        };
        let need = volley_targets::CpuQuota::of_one_cpu(q).span_to_hold();
        if d < need {
            return Err(invalid(format!(
                "steps.duration: too short for a CPU cap to hold: {:.0} ms measured, {:.1} s needed (the kernel counts a quota per 100 ms period, and a shorter step is a burst at full speed): give the steps a longer duration or a larger --scale",
                d.as_secs_f64() * 1e3,
                need.as_secs_f64()
            )));
        }
    }
    Ok(())
}

/// Search-mode settings, checked by building the search once.
pub(super) fn resolve_search(
    file: &StudyFile,
    timing: &Timing,
) -> Result<Option<SearchPlan>, StudyError> {
    let search = (file.mode == Mode::Search).then(|| {
        let s = &file.search;
        let opts = volley_analysis::knee::SearchOpts {
            resolution_share: s.resolution.unwrap_or(0.02),
            repeats: s.repeats.unwrap_or(3),
            max_rate_rps: s.max_rate.unwrap_or(100_000.0),
            max_steps: s.max_steps.unwrap_or(40),
            ..Default::default()
        };
        SearchPlan {
            start_rate: s.start_rate.unwrap_or(100.0),
            opts,
            passes: s.passes.unwrap_or(1),
        }
    });
    check_passes(file)?;
    if let Some(s) = &search {
        volley_analysis::knee::Search::new(s.start_rate, s.opts.clone())
            .map_err(|e| invalid(format!("[search]: {e}")))?;
        if timing.duration.is_none() {
            return Err(invalid(
                "search mode needs steps.duration (rate steps are timed)",
            ));
        }
    }
    Ok(search)
}

/// Refuses `[search] passes` outside 1..=[`super::MAX_PASSES`] (a rate or users
/// search alike).
pub(super) fn check_passes(file: &StudyFile) -> Result<(), StudyError> {
    match file.search.passes {
        Some(n) if n == 0 || n > super::MAX_PASSES => Err(invalid(format!(
            "search.passes must be 1 to {} (whole searches per cell), not {n}",
            super::MAX_PASSES
        ))),
        _ => Ok(()),
    }
}

/// The measured length of a rate step: the scaled length, raised to [`MIN_RATE_STEP`]
/// (but never above the unscaled length the file asked for).
pub fn rate_step_length(scaled: Duration, unscaled: Duration) -> Duration {
    scaled.max(MIN_RATE_STEP.min(unscaled))
}
