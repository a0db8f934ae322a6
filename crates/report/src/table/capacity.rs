//! The capacity tables: each group's capacity claim (a figure only below a failure of
//! the server, else "at least"), the searches' answers, and the evidence per step.

use super::*;

/// A capacity cell: the figure, "at least" it when the server was not seen to fail
/// above it.
fn at_least(bounded: bool, v: Option<f64>) -> String {
    match v {
        Some(_) if !bounded => format!("at least {}", num(v, 1)),
        _ => num(v, 1),
    }
}

/// A figure of the evidence table: a rate step's always, a closed-loop step's only when
/// most of its requests did not fail.
fn closed_counted(s: &StepReport, v: f64) -> Option<f64> {
    match s.rate_rps {
        Some(_) => Some(v),
        None => counted(s, v),
    }
}

/// Capacity per target.
pub fn capacity(report: &Report) -> Option<Table> {
    let rows: Vec<_> = report
        .targets
        .iter()
        .flat_map(|t| t.capacity.iter().map(move |c| (t, c)))
        .map(|(t, c)| {
            let mut note = Vec::new();
            if c.non_monotone {
                note.push("an unsustainable rate lies below the capacity".to_string());
            }
            if c.steps_judged == 0 && c.generator_bound_excluded > 0 {
                note.push(
                    "no rate step could be judged for the server: no capacity can be claimed"
                        .to_string(),
                );
            } else if c.capacity_rps.is_none() {
                note.push("no rate was sustainable".to_string());
            } else if !c.bounded {
                // "at least 600 req/s (not bounded: ...)": the parenthesis is the note.
                let text = c.claim.text("req/s");
                if let Some(why) = text.split_once(" (").map(|(_, w)| w.trim_end_matches(')')) {
                    note.push(why.to_string());
                }
            }
            for (phase, cap) in &c.by_phase {
                let time = c
                    .phase_times
                    .iter()
                    .find(|t| &t.phase == phase)
                    .map(|t| format!(" ({} steps, {:.0} s)", t.steps, t.wall_s))
                    .unwrap_or_default();
                note.push(format!("{phase} alone: {}{time}", num(*cap, 1)));
            }
            (
                RowMark::Plain,
                vec![
                    t.target.clone(),
                    c.group.clone(),
                    at_least(c.bounded, c.capacity_rps),
                    num(c.first_unsustainable_above_rps, 1),
                    c.steps_judged.to_string(),
                    c.generator_bound_excluded.to_string(),
                    c.remeasured.to_string(),
                    if note.is_empty() {
                        "-".into()
                    } else {
                        note.join("; ")
                    },
                ],
            )
        })
        .collect();
    (!rows.is_empty()).then(|| Table {
        id: "capacity",
        title: "Capacity".into(),
        note: "Capacity = the largest offered rate judged sustainable by a majority of its repeats (send and reply rate >= 99% of the offer, errors within the allowance, every window's p99 within the SLO, no rising in-flight trend), claimed only below a rate the server was seen to fail; otherwise \"at least\". Steps that could not be judged for the server (generator-bound, machine-stalled, or failed on a busy machine) are measured again later and, if still spoiled, left out; a step measured several times counts once, by its best attempt.".into(),
        headers: [
            "Target",
            "Group",
            "Capacity (req/s)",
            "First unsustainable above (req/s)",
            "Steps judged",
            "Unjudged, left out",
            "Re-measured",
            "Notes",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    })
}

/// Capacity by search, from the stored search results, beside the sweep's capacity of
/// the same group when the run has one; unfinished searches say so.
pub fn searches(report: &Report) -> Option<Table> {
    let rows: Vec<_> = report
        .targets
        .iter()
        .flat_map(|t| t.searches.iter().map(move |s| (t, s)))
        .map(|(t, s)| {
            let ci = match (s.ci_lo_rps, s.confidence) {
                _ if s.capacity_rps.is_none() => "-".to_string(),
                (Some(lo), Some(c)) => format!(
                    "{:.0}% [{lo:.1}, {}]",
                    c * 100.0,
                    s.ci_hi_rps
                        .map_or("unbounded".to_string(), |h| format!("{h:.1}"))
                ),
                _ => "-".to_string(),
            };
            let ended = if s.finished {
                crate::model::end_text(&s.end)
            } else {
                format!("did not finish ({})", crate::model::end_text(&s.end))
            };
            (
                RowMark::Plain,
                vec![
                    t.target.clone(),
                    s.group.clone(),
                    at_least(s.bounded, s.capacity_rps),
                    ci,
                    ended,
                    s.steps.to_string(),
                    format!("{:.1}", s.wall_s),
                    num(s.sweep_capacity_rps, 1),
                    s.sweep.as_ref().map_or("-".to_string(), |p| {
                        format!("{} steps, {:.1} s", p.steps, p.wall_s)
                    }),
                ],
            )
        })
        .collect();
    (!rows.is_empty()).then(|| Table {
        id: "searches",
        title: "Capacity by search".into(),
        note: "From the stored result of each capacity search (doubling until a step fails, then bisecting, repeats near the edge decided by majority). The interval is a bootstrap over those repeats (knee::Capacity); its upper end is the first rate shown unsustainable, so it is never narrower than the last bracket. Time = first step start to last step end, other targets' interleaved steps included. A search that did not finish shows the largest rate shown sustainable so far and no interval.".into(),
        headers: [
            "Target",
            "Group",
            "Capacity by search (req/s)",
            "CI (req/s)",
            "Ended",
            "Steps",
            "Search time (s)",
            "Capacity by sweep (req/s)",
            "Sweep",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    })
}

/// The evidence: every judged or labelled step with its verdict and reasons.
pub fn evidence(report: &Report) -> Option<Table> {
    let rows: Vec<_> = steps(report)
        .filter(|(_, s)| s.sustainable.is_some() || s.label.is_some())
        .map(|(t, s)| {
            let verdict = match s.sustainable {
                Some(true) => "sustainable",
                Some(false) => "not sustainable",
                None => "-",
            };
            let mut flags = Vec::new();
            if s.little_flagged {
                flags.push(format!(
                    "Little's law gap {}%",
                    num(s.little_gap.map(|g| g * 100.0), 1)
                ));
            }
            if s.throttled {
                flags.push("CPU-throttled".to_string());
            }
            if s.cap_hits > 0 {
                flags.push(format!("connection cap hit {}x", s.cap_hits));
            }
            if s.target_died.is_some() {
                flags.push("target died".to_string());
            }
            (
                mark(s),
                vec![
                    t.target.clone(),
                    s.index.to_string(),
                    step_label(s),
                    s.phase.clone().unwrap_or_else(|| "-".into()),
                    num(s.send_rate_rps, 1),
                    // A rate step's failures are its verdict's evidence, shown; a
                    // closed loop's are no figure (`counted`).
                    num(closed_counted(s, s.reply_rate_rps), 1),
                    num(closed_counted(s, s.latency.p99_ms), 3),
                    s.failed.to_string(),
                    match s.rate_rps {
                        Some(_) => s.label.clone().unwrap_or_else(|| "-".into()),
                        None => label_of(s),
                    },
                    verdict.to_string(),
                    if s.reasons.is_empty() {
                        "-".into()
                    } else {
                        s.reasons.join("; ")
                    },
                    if flags.is_empty() {
                        "-".into()
                    } else {
                        flags.join("; ")
                    },
                ],
            )
        })
        .collect();
    (!rows.is_empty()).then(|| Table {
        id: "evidence",
        title: "Steps, verdicts and labels (the evidence)".into(),
        note: "Generator-bound rows are marked: their figures describe the generator, not the server, and are excluded from the capacity.".into(),
        headers: [
            "Target",
            "Step",
            "Parameters",
            "Phase",
            "Send/s",
            "Reply/s",
            "p99 (ms)",
            "Failed",
            "Label",
            "Verdict",
            "Reasons",
            "Flags",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    })
}
