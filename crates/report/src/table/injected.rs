//! The tables of office days and injected steps: each day carried or not and why, each
//! phase of an injected step with its active injectors, each injector's own figures.

use super::*;

/// The office days: per target and user count, carried or not and why.
pub fn office(report: &Report) -> Option<Table> {
    let mut rows = Vec::new();
    for (t, s) in steps(report) {
        let Some(o) = &s.office else { continue };
        let mut why = o.reasons.join("; ");
        if !o.lacks.is_empty() {
            if !why.is_empty() {
                why.push_str("; ");
            }
            why.push_str(&format!("lacks {}", o.lacks.join(", ")));
        }
        rows.push((
            RowMark::Plain,
            vec![
                t.target.clone(),
                s.workload.clone().unwrap_or_default(),
                match o.compress == 1.0 {
                    true => o.users.to_string(),
                    // Users of a compressed day each send the requests of F people.
                    false => format!(
                        "{} x{}",
                        o.users,
                        volley_analysis::words::number(o.compress)
                    ),
                },
                if o.carries { "yes" } else { "no" }.to_string(),
                num(o.poll_p99_ms, 1),
                num(Some(s.requests_per_s), 1),
                o.lead_in.map_or("-".into(), |l| l.words()),
                o.violations.to_string(),
                if why.is_empty() { "-".into() } else { why },
            ],
        ));
    }
    let answers: Vec<String> = report
        .targets
        .iter()
        .flat_map(|t| t.office.iter().map(|a| a.sentence(&t.target)))
        .collect();
    (!rows.is_empty()).then(|| Table {
        id: "office",
        title: "Office days: how many users each server carries".into(),
        note: format!(
            "A day carries its users when the clients' poll p99 is within the SLO, few enough requests fail and no correctness check fails. A warm day's lead-in (every device's first sync and one poll interval, a few at a time, before the window) is its set-up: its cost is shown, and its failed requests are set apart from the verdict. {}",
            answers.join(". ")
        ),
        headers: [
            "Target",
            "Workload",
            "Users",
            "Carried",
            "Poll p99 (ms)",
            "Req/s",
            "Lead-in (before the window)",
            "Violations",
            "Why not / lacks",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    })
}

/// Seed 003's power test: per step with several injectors, each interval with the same
/// set of active injectors.
pub fn phases(report: &Report) -> Option<Table> {
    let mut rows = Vec::new();
    for (t, s) in steps(report) {
        for p in &s.phases {
            let mut note = Vec::new();
            if !p.figures.left_out_s.is_empty() {
                let secs: Vec<String> = p.figures.left_out_s.iter().map(u64::to_string).collect();
                note.push(format!("left out s {}", secs.join(",")));
            }
            if p.generator_bound {
                note.push(format!("generator-bound: {}", p.bound_injectors.join(", ")));
            }
            if p.missing > 0 {
                note.push(format!("{} injector-seconds missing", p.missing));
            }
            if p.degraded {
                note.push("degraded".into());
            }
            if let Some(why) = p.link_reason.as_ref().filter(|_| p.link_bound) {
                note.push(why.clone());
            }
            let mark = if p.link_bound {
                RowMark::NotServer(volley_analysis::link::LABEL)
            } else if p.generator_bound {
                RowMark::NotServer(volley_analysis::sustain::Bound::GeneratorBound.label())
            } else {
                RowMark::Plain
            };
            rows.push((
                mark,
                vec![
                    t.target.clone(),
                    step_label(s),
                    format!("{} ({})", p.injectors.len(), p.injectors.join(" ")),
                    format!("{}-{}", p.figures.start_s, p.figures.end_s),
                    num(p.figures.rps, 1),
                    num(p.figures.mean_ms, 3),
                    num(p.p50_ms, 3),
                    num(p.figures.p99_ms, 3),
                    p.errors.to_string(),
                    if note.is_empty() {
                        "-".into()
                    } else {
                        note.join("; ")
                    },
                ],
            ));
        }
    }
    (!rows.is_empty()).then(|| Table {
        id: "phases",
        title: "Phases: intervals with the same active injectors".into(),
        note: "Seconds since T0 (the common start). Response time from the intended send time. An injector's first and last active seconds are partial (it started or stopped inside them), so they are left out of the phase they fall in, as listed.".into(),
        headers: [
            "Target",
            "Step",
            "Injectors active",
            "Seconds",
            "Req/s",
            "Mean (ms)",
            "p50 (ms)",
            "p99 (ms)",
            "Errors",
            "Note",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    })
}

/// Each injector's own figures in the steps that had several.
pub fn injectors(report: &Report) -> Option<Table> {
    let mut rows = Vec::new();
    for (t, s) in steps(report) {
        for i in &s.injector_rows {
            rows.push((
                RowMark::of_label(i.label.as_deref()),
                vec![
                    t.target.clone(),
                    step_label(s),
                    i.name.clone(),
                    num(Some(i.delay_ms as f64 / 1e3), 1),
                    i.completed.map_or("-".into(), |n| n.to_string()),
                    num(i.requests_per_s, 1),
                    num(i.p50_ms, 3),
                    num(i.p99_ms, 3),
                    i.failed.map_or("-".into(), |n| n.to_string()),
                    num(i.clock_offset_ms, 2),
                    match i.lost_from_s {
                        Some(l) => format!("lost from s {l}"),
                        None => i.label.clone().unwrap_or_else(|| "-".into()),
                    },
                ],
            ));
        }
    }
    (!rows.is_empty()).then(|| Table {
        id: "injectors",
        title: "Injectors: each one's own figures".into(),
        note: "Each injector on its own clock and time base, as `volley bench` would show it; the merged step is in the tables above.".into(),
        headers: [
            "Target",
            "Step",
            "Injector",
            "Start (s)",
            "Requests",
            "Req/s",
            "p50 (ms)",
            "p99 (ms)",
            "Failed",
            "Clock offset (ms)",
            "Label",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    })
}
