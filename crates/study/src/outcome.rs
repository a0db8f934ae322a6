//! The end-of-study table: per target and point, the median throughput and p99 over the
//! repeats (with bootstrap CIs), the capacity of rate sweeps and searches, and the USL
//! fit of concurrency sweeps. Pure: built from the steps just measured.
//!
//! A planned step measured more than once (noise spoiled it, see
//! `runner::Remeasures`) counts once, by its best attempt ([`best_attempts`]); a
//! capacity is claimed only below a failure of the server, otherwise "at least"
//! (`volley_analysis::knee::Claim`, docs/methodology.md "Saturation").

use std::fmt::Write;

use volley_analysis::{bootstrap, knee, usl, words};

use volley_analysis::knee::{Capacity, Claim, Evidence};

use crate::plan::{OfficeLoad, Plan, Point, Protocol};

// Defined beside the step that produces them (the runner must not import this table).
pub use crate::step::{slow_second_note, StepOutcome, BUSY_PRESSURE_SHARE};

use volley_analysis::bootstrap::RESAMPLES;

/// ", 2 unjudged steps left out" (empty when none were): steps that could not be
/// judged for the server (generator-bound, machine-stalled, or failed while the
/// machine was busy), each after its re-measures.
fn left_out(n: usize) -> String {
    match n {
        0 => String::new(),
        1 => ", 1 unjudged step left out".to_string(),
        n => format!(", {n} unjudged steps left out"),
    }
}

/// ", 3 steps re-measured" (empty when none were).
fn remeasured_text(n: usize) -> String {
    match n {
        0 => String::new(),
        1 => ", 1 step re-measured".to_string(),
        n => format!(", {n} steps re-measured"),
    }
}

/// The planned step an attempt belongs to: cell, repeat, rate, users.
fn planned_key(s: &StepOutcome) -> (usize, u32, Option<u64>, Option<u32>) {
    (s.cell, s.repeat, s.rate.map(f64::to_bits), s.users)
}

/// How good an attempt's evidence is (`Evidence::attempt_rank`, 0 best).
fn rank(s: &StepOutcome) -> u8 {
    Evidence::attempt_rank(
        s.sustainable,
        !volley_analysis::sustain::spoiled_by_noise(Some(s.label)),
        s.machine_busy,
    )
}

/// One outcome per planned step, its best attempt (the earliest of the best [`rank`]),
/// in the order the steps were first measured; and how many planned steps were
/// measured more than once.
pub fn best_attempts(steps: &[StepOutcome]) -> (Vec<StepOutcome>, usize) {
    let mut best: Vec<(StepOutcome, usize)> = Vec::new();
    for s in steps {
        match best
            .iter_mut()
            .find(|(b, _)| planned_key(b) == planned_key(s))
        {
            Some((b, n)) => {
                *n += 1;
                if rank(s) < rank(b) {
                    *b = s.clone();
                }
            }
            None => best.push((s.clone(), 1)),
        }
    }
    let remeasured = best.iter().filter(|(_, n)| *n > 1).count();
    (best.into_iter().map(|(b, _)| b).collect(), remeasured)
}

/// Whether a step's best attempt stands for the server: it counts for the server and
/// is not a failure on a busy machine.
pub(crate) fn judged_for_server(s: &StepOutcome) -> bool {
    s.counts_for_server() && s.evidence() != Some(Evidence::Unjudged)
}

fn ci_text(values: &[f64], digits: usize) -> String {
    if values.len() < 2 {
        return format!("{:.digits$}", values.first().copied().unwrap_or(0.0));
    }
    let e = bootstrap::median_ci(values, RESAMPLES, 1);
    format!(
        "{:.digits$} [{:.digits$}, {:.digits$}]",
        e.median, e.lo, e.hi
    )
}

/// One line of the table: the steps of one target instance, workload, concurrency and
/// keep-alive (the rate varies inside a group): a [`Point`] without its users, which
/// take the place of the concurrency in an office's group.
type GroupKey = Point;

/// The group of a step: its cell's, with the users it played (a users search varies
/// them within one cell).
fn step_key(plan: &Plan, s: &StepOutcome) -> GroupKey {
    let mut k = key_of(plan, s.cell);
    if let Some(u) = s.users {
        k.concurrency = u;
    }
    k
}

fn key_of(plan: &Plan, cell: usize) -> GroupKey {
    Point {
        users: None,
        ..plan.cells[cell].point()
    }
}

/// The end-of-study table: one row per result (target, workload, point, result) and
/// the USL fits below it. The binary lays the rows out for the terminal; `Display`
/// pads them to the widest cell (logs, tests).
#[derive(Debug, Clone, PartialEq)]
pub struct EndTable {
    /// Column names.
    pub header: [&'static str; 4],
    /// target, workload, point, result.
    pub rows: Vec<[String; 4]>,
    /// One line per USL fit (or why there is none), per office answer and per variant
    /// against its default (`effects`).
    pub usl: Vec<String>,
}

impl std::fmt::Display for EndTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut widths = self.header.map(str::len);
        for r in &self.rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let header = self.header.map(str::to_string);
        for r in std::iter::once(&header).chain(&self.rows) {
            let [a, b, c, d] = r;
            let [wa, wb, wc, _] = widths;
            writeln!(f, "{a:<wa$}  {b:<wb$}  {c:<wc$}  {d}")?;
        }
        for l in &self.usl {
            writeln!(f, "{l}")?;
        }
        Ok(())
    }
}

/// The summary table, one row per result: `steps` measured and, in search mode, the
/// capacity found per cell (`searches`).
pub fn table(plan: &Plan, steps: &[StepOutcome], searches: &[(usize, Capacity)]) -> EndTable {
    let all = steps;
    let (best, _) = best_attempts(steps);
    let steps = &best[..];
    let mut keys: Vec<GroupKey> = Vec::new();
    for ci in 0..plan.cells.len() {
        // A users search's cell has one row per count it tried.
        let mut tried: Vec<GroupKey> = steps
            .iter()
            .filter(|s| s.cell == ci && plan.searches_users(ci))
            .map(|s| step_key(plan, s))
            .collect();
        tried.sort_by_key(|k| k.concurrency);
        if tried.is_empty() {
            tried.push(key_of(plan, ci));
        }
        for k in tried {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    let mut rows = Vec::new();
    for &key in &keys {
        let Point {
            instance: inst,
            workload: wl,
            concurrency: conc,
            keepalive: ka,
            injectors: inj,
            protocol: proto,
            ..
        } = key;
        let group: Vec<&StepOutcome> = steps.iter().filter(|s| step_key(plan, s) == key).collect();
        let attempts: Vec<StepOutcome> = all
            .iter()
            .filter(|s| step_key(plan, s) == key)
            .cloned()
            .collect();
        let compress = plan.workloads[wl].office.as_ref().map(|o| o.compress);
        let office = compress.is_some();
        let result = if group.is_empty() {
            "(not run)".to_string()
        } else if office {
            office_result(&group)
        } else if let Some((_, cap)) = searches.iter().find(|(ci, _)| key_of(plan, *ci) == key) {
            search_result(cap, &attempts)
        } else {
            let (_, remeasured) = best_attempts(&attempts);
            measured_result(&group) + &remeasured_text(remeasured)
        };
        rows.push([
            plan.instance_label(inst),
            plan.workloads[wl].name.clone(),
            if let Some(f) = compress {
                // A compressed day's users send the requests of F people each.
                match f == 1.0 {
                    true => format!("users={conc}"),
                    false => format!("users={conc} x{}", words::number(f)),
                }
            } else {
                format!(
                    "{}c={conc} ka={}{}",
                    proto.map(|p| format!("{} ", p.name())).unwrap_or_default(),
                    if ka { "on" } else { "off" },
                    inj.map(|k| format!(" inj={k}")).unwrap_or_default()
                )
            },
            result,
        ]);
    }
    let mut usl = String::new();
    let http_keys: Vec<GroupKey> = keys
        .iter()
        .copied()
        .filter(|k| plan.workloads[k.workload].office.is_none())
        .collect();
    usl_lines(plan, steps, &http_keys, &mut usl);
    for line in carried_lines(plan, steps, searches)
        .into_iter()
        .chain(crate::effects::effect_lines(plan, steps, searches))
    {
        usl.push_str(&line);
        usl.push('\n');
    }
    EndTable {
        header: ["target", "workload", "point", "result"],
        rows,
        usl: usl.lines().map(str::to_string).collect(),
    }
}

/// An office point: whether its users were carried (every repeat, by majority as a
/// sweep's rates are), the poll p99 against the SLO, the request figures.
fn office_result(steps: &[&StepOutcome]) -> String {
    let carried = steps.iter().filter(|s| s.sustainable == Some(true)).count();
    let poll: Vec<f64> = steps.iter().filter_map(|s| s.poll_p99_ms).collect();
    let rps: Vec<f64> = steps.iter().map(|s| s.rps).collect();
    let errors: u64 = steps.iter().map(|s| s.errors).sum();
    format!(
        "{} ({carried} of {} run{}), poll p99 {} ms, {} req/s{}{}",
        if carried * 2 > steps.len() {
            "carried"
        } else {
            "NOT carried"
        },
        steps.len(),
        if steps.len() == 1 { "" } else { "s" },
        if poll.is_empty() {
            "-".to_string()
        } else {
            ci_text(&poll, 1)
        },
        ci_text(&rps, 0),
        if errors > 0 {
            format!(", {errors} errors")
        } else {
            String::new()
        },
        lead_in_text(steps)
    )
}

/// The lead-in of an office point's warm days, before their windows: the median wall
/// time and requests, and every failed request (set apart from the verdicts); empty
/// for cold days.
fn lead_in_text(steps: &[&StepOutcome]) -> String {
    let costs: Vec<crate::LeadInCost> = steps.iter().filter_map(|s| s.lead_in).collect();
    if costs.is_empty() {
        return String::new();
    }
    let wall: Vec<f64> = costs.iter().map(|c| c.wall_s).collect();
    let requests: Vec<f64> = costs.iter().map(|c| c.requests as f64).collect();
    let failed: u64 = costs.iter().map(|c| c.failed_requests).sum();
    format!(
        "; lead-in {} s, {} requests, {failed} failed (set apart)",
        ci_text(&wall, 0),
        ci_text(&requests, 0)
    )
}

/// The answer of an office sweep, per target instance and office workload: the most
/// users carried below the first count that was not (a sweep's capacity, on users);
/// for a users search that ended, its answer and interval (`searches`).
pub fn carried_lines(
    plan: &Plan,
    steps: &[StepOutcome],
    searches: &[(usize, Capacity)],
) -> Vec<String> {
    let mut seen: Vec<(usize, usize)> = Vec::new();
    let mut out = Vec::new();
    for s in steps {
        let c = &plan.cells[s.cell];
        let Some(office) = &plan.workloads[c.workload].office else {
            continue;
        };
        if seen.contains(&(c.instance, c.workload)) {
            continue;
        }
        seen.push((c.instance, c.workload));
        let judged: Vec<(f64, Evidence)> = steps
            .iter()
            .filter(|o| {
                let oc = &plan.cells[o.cell];
                oc.instance == c.instance && oc.workload == c.workload
            })
            .filter_map(|o| Some((o.users? as f64, o.evidence()?)))
            .collect();
        let slo_ms = plan.rule.p99_slo.as_secs_f64() * 1e3;
        if let Some((_, found)) = searches.iter().find(|(ci, _)| {
            let sc = &plan.cells[*ci];
            sc.instance == c.instance && sc.workload == c.workload
        }) {
            out.push(searched_line(plan, s.cell, found, office, slo_ms));
            continue;
        }
        let cap = knee::sweep_evidence(&judged);
        let claim = cap.claim();
        out.push(match cap.capacity_rps {
            Some(n) => format!(
                "{} carries {} ({}{}) at {} decisions/person/day with poll p99 under {slo_ms:.0} ms and no correctness violation{}",
                plan.instance_label(c.instance),
                words::users_claimed(n, claim.bounded(), office.compress),
                plan.workloads[c.workload].name,
                words::users_bound(&claim),
                office.decisions,
                if cap.non_monotone {
                    " (non-monotone: a smaller count was not carried)"
                } else {
                    ""
                }
            ),
            None => format!(
                "{} carries none of the user counts tried ({}, {}: poll p99 under {slo_ms:.0} ms and no correctness violation failed at every count)",
                plan.instance_label(c.instance),
                plan.workloads[c.workload].name,
                words::pace(office.compress),
            ),
        });
    }
    out
}

/// The answer of a users search that ended: the most users carried, its interval and
/// how the search ended.
fn searched_line(plan: &Plan, ci: usize, c: &Capacity, office: &OfficeLoad, slo_ms: f64) -> String {
    let (decisions, compress) = (office.decisions, office.compress);
    let cell = &plan.cells[ci];
    let (inst, wl) = (
        plan.instance_label(cell.instance),
        &plan.workloads[cell.workload].name,
    );
    let hi = c
        .ci_hi_rps
        .map_or("unbounded".to_string(), |h| format!("{h:.0}"));
    let end = match c.end {
        knee::SearchEnd::Converged => String::new(),
        knee::SearchEnd::ReachedMaxRate => ", not bounded: the most the search tries".into(),
        other => format!(
            ", search ended: {}",
            serde_json::to_value(other)
                .ok()
                .and_then(|v| v.as_str().map(|e| e.replace('_', " ")))
                .unwrap_or_default()
        ),
    };
    match c.capacity_rps {
        Some(n) => format!(
            "{inst} carries {} ({wl}; searched, 95% CI [{:.0}, {hi}] users, {} days{end}) at {decisions} decisions/person/day with poll p99 under {slo_ms:.0} ms and no correctness violation",
            words::users_claimed(n, c.claim().bounded(), compress),
            c.ci_lo_rps, c.steps
        ),
        None => format!(
            "{inst} carries none of the user counts tried ({wl}, {}; searched, {} days{end}: poll p99 under {slo_ms:.0} ms and no correctness violation failed at every count)",
            words::pace(compress),
            c.steps
        ),
    }
}

/// A searched cell: what may be claimed of the capacity the search found
/// (`Capacity::claim`), its interval and how it ended; `attempts` are every step it
/// ran, re-measures included.
fn search_result(cap: &Capacity, attempts: &[StepOutcome]) -> String {
    let hi = cap
        .ci_hi_rps
        .map_or("unbounded".to_string(), |h| format!("{h:.0}"));
    let (_, remeasured) = best_attempts(attempts);
    let claim = cap.claim();
    format!(
        "{}, 95% CI [{:.0}, {hi}] ({} steps, {:?}{}{})",
        match claim {
            Claim::None => "capacity none (no rate shown sustainable)".to_string(),
            c => format!("capacity {}", c.text("req/s")),
        },
        cap.ci_lo_rps,
        // Steps run for this cell, re-measures included: `cap.steps` counts only the
        // observations the search decided on, which is 0 for a search that stopped at
        // its first, unjudged rate.
        attempts.len(),
        cap.end,
        match cap.generator_bound_at_rps {
            Some(r) => format!(
                "; {r:.0} req/s could not be judged for the server (generator-bound, machine-stalled or on a busy machine): the edge above was not looked for"
            ),
            None => String::new(),
        },
        remeasured_text(remeasured),
    )
}

/// A swept group (one step per planned step, its best attempt): the capacity of its
/// rate steps, or the medians of its closed-loop repeats; steps that could not be
/// judged for the server never count.
fn measured_result(steps: &[&StepOutcome]) -> String {
    // A closed-loop step whose requests mostly failed has no figure: errors are not
    // throughput (a rate step's errors are its verdict, and count as the server's).
    // A rate step counts by its evidence (a pass is a pass whoever was late); a
    // closed-loop figure only when it stands for the server.
    let server: Vec<&StepOutcome> = steps
        .iter()
        .copied()
        .filter(|s| match s.rate {
            Some(_) => matches!(s.evidence(), Some(e) if e != Evidence::Unjudged),
            None => judged_for_server(s) && !s.mostly_failed(),
        })
        .collect();
    let excluded = steps.len() - server.len();
    if !steps.is_empty()
        && steps
            .iter()
            .all(|s| s.label == volley_analysis::link::LABEL)
    {
        // The link's figure, shown as such: what the link allowed, not the server.
        let rps: Vec<f64> = steps.iter().map(|s| s.rps).collect();
        let p99: Vec<f64> = steps.iter().map(|s| s.p99_ms).collect();
        return format!(
            "link-bound: {} req/s, p99 {} ms: the shaped link's figure, not the server's",
            ci_text(&rps, 1),
            ci_text(&p99, 1)
        );
    }
    if server.is_empty() && steps.iter().all(|s| s.rate.is_none() && s.mostly_failed()) {
        format!(
            "no server figure: most requests of {} failed (errors are not throughput)",
            match steps.len() {
                1 => "its one step".to_string(),
                n => format!("each of its {n} steps"),
            }
        )
    } else if server.is_empty() {
        format!(
            "no server figure: none of the {} step(s) could be judged for the server (generator-bound, machine-stalled, link-bound, mostly failed, or failed on a busy machine)",
            steps.len()
        )
    } else if steps.iter().any(|s| s.rate.is_some()) {
        rate_result(steps, &server, excluded)
    } else {
        closed_result(&server, excluded)
    }
}

/// Rate steps: what may be claimed of the sweep's capacity (the largest sustainable
/// rate; a figure only below a failure of the server, else "at least").
fn rate_result(all: &[&StepOutcome], server: &[&StepOutcome], excluded: usize) -> String {
    let judged: Vec<(f64, Evidence)> = all
        .iter()
        .filter_map(|s| Some((s.rate?, s.evidence()?)))
        .collect();
    let cap = knee::sweep_evidence(&judged);
    let claim = cap.claim();
    let max_reply = server.iter().map(|s| s.rps).fold(0.0, f64::max);
    format!(
        "{}{}{}; peak replies {:.0}/s{}",
        match claim {
            Claim::None => "no rate was sustainable".to_string(),
            c => format!("capacity {}", c.text("req/s")),
        },
        cap.first_unsustainable_above_rps
            .map(|r| format!(", first unsustainable {r:.0}"))
            .unwrap_or_default(),
        if cap.non_monotone {
            " (non-monotone)"
        } else {
            ""
        },
        max_reply,
        left_out(excluded)
    )
}

/// Closed-loop repeats: median req/s and p99 with bootstrap CIs, cold vs warm TTFB.
fn closed_result(server: &[&StepOutcome], excluded: usize) -> String {
    let rps: Vec<f64> = server.iter().map(|s| s.rps).collect();
    let p99: Vec<f64> = server.iter().map(|s| s.p99_ms).collect();
    let errors: u64 = server.iter().map(|s| s.errors).sum();
    let cold: Vec<f64> = server.iter().filter_map(|s| s.cold_ttfb_ms).collect();
    let warm: Vec<f64> = server.iter().filter_map(|s| s.warm_ttfb_ms).collect();
    let ttfb = if cold.is_empty() || warm.is_empty() {
        String::new()
    } else {
        format!(
            ", TTFB cold {} ms vs warm p50 {} ms",
            ci_text(&cold, 2),
            ci_text(&warm, 3)
        )
    };
    format!(
        "{} req/s, p99 {} ms{ttfb} ({} run{}{}{})",
        ci_text(&rps, 0),
        ci_text(&p99, 2),
        server.len(),
        if server.len() == 1 { "" } else { "s" },
        if errors > 0 {
            format!(", {errors} errors")
        } else {
            String::new()
        },
        left_out(excluded)
    )
}

/// USL per (instance, workload, keepalive, protocol) over concurrency.
fn usl_lines(plan: &Plan, steps: &[StepOutcome], keys: &[GroupKey], out: &mut String) {
    let mut usl_keys: Vec<(usize, usize, bool, Option<Protocol>)> = Vec::new();
    for k in keys {
        let usl_key = (k.instance, k.workload, k.keepalive, k.protocol);
        if !usl_keys.contains(&usl_key) {
            usl_keys.push(usl_key);
        }
    }
    for (inst, wl, ka, proto) in usl_keys {
        let points = usl_points(plan, steps, (inst, wl, ka, proto));
        if points.len() < usl::MIN_POINTS || !points.iter().any(|p| p.n == 1.0) {
            continue;
        }
        let label = plan.instance_label(inst);
        match usl::fit(&points) {
            Ok(f) => {
                let _ = writeln!(
                    out,
                    "USL {label} {}{} ka={}: sigma {:.4}, kappa {:.6}, N* {}, peak {:.0} req/s, R^2 {:.3}",
                    plan.workloads[wl].name,
                    proto.map(|p| format!(" {}", p.name())).unwrap_or_default(),
                    if ka { "on" } else { "off" },
                    f.sigma,
                    f.kappa,
                    if f.n_star.is_finite() { format!("{:.1}", f.n_star) } else { "inf".into() },
                    f.peak_throughput,
                    f.r_squared
                );
            }
            Err(e) => {
                let _ = writeln!(out, "USL {label}: no fit ({e})");
            }
        }
    }
}

/// (concurrency, median req/s) of the closed-loop steps of one instance and workload,
/// generator-bound steps left out.
fn usl_points(
    plan: &Plan,
    steps: &[StepOutcome],
    series: (usize, usize, bool, Option<Protocol>),
) -> Vec<usl::UslPoint> {
    let mut by_n: Vec<(u32, Vec<f64>)> = Vec::new();
    for s in steps {
        let c = &plan.cells[s.cell];
        if (c.instance, c.workload, c.keepalive, c.protocol) != series
            || s.rate.is_some()
            || !s.counts_for_server()
        {
            continue;
        }
        match by_n.iter_mut().find(|(n, _)| *n == c.concurrency) {
            Some((_, v)) => v.push(s.rps),
            None => by_n.push((c.concurrency, vec![s.rps])),
        }
    }
    by_n.into_iter()
        .map(|(n, v)| usl::UslPoint {
            n: f64::from(n),
            throughput: bootstrap::median(&v),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const RAMP: &str = r#"
name = "ramp"
[[target]]
name = "builtin"
kind = "builtin"
[[workload]]
name = "w"
paths = ["/"]
[sweep]
rate = [100, 200, 300, 400]
[steps]
duration = "3s"
"#;

    const CONC: &str = r#"
name = "conc"
[[target]]
name = "builtin"
kind = "builtin"
[[workload]]
name = "w"
paths = ["/"]
[load]
model = "closed"
[sweep]
concurrency = [1, 2, 3, 4, 5, 6]
[steps]
duration = "3s"
"#;

    fn plan(text: &str) -> Plan {
        crate::resolve(&crate::parse(text).unwrap(), text, 1.0).unwrap()
    }

    fn step(
        cell: usize,
        rate: Option<f64>,
        rps: f64,
        ok: Option<bool>,
        label: &'static str,
    ) -> StepOutcome {
        StepOutcome {
            order: cell,
            cell,
            repeat: 0,
            rate,
            rps,
            ok_rps: rps,
            p99_ms: 1.0,
            errors: 0,
            sustainable: ok,
            label,
            cold_ttfb_ms: None,
            warm_ttfb_ms: None,
            poll_p99_ms: None,
            users: None,
            lead_in: None,
            attempt: 0,
            machine_busy: false,
        }
    }

    const OFFICE: &str = r#"
name = "office"
[[target]]
name = "builtin"
kind = "builtin"
dav = true
[[target]]
name = "radicale"
kind = "radicale"
[[workload]]
name = "day"
kind = "caldav"
users = [10, 25, 50, 100]
[steps]
duration = "3s"
"#;

    #[test]
    fn an_office_sweep_answers_the_most_users_carried_below_the_first_failure() {
        let p = plan(OFFICE);
        // Cells: users outer, target inner: builtin carries up to 50 (100 fails),
        // radicale carries 10 only, with a dip at 25 it never recovers from.
        let carried = |ci: usize| {
            let c = &p.cells[ci];
            let u = c.users.unwrap();
            if p.targets[p.instances[c.instance].target].name == "builtin" {
                u <= 50
            } else {
                u == 10
            }
        };
        let steps: Vec<StepOutcome> = (0..p.cells.len())
            .map(|ci| StepOutcome {
                users: p.cells[ci].users,
                ..step(ci, None, 10.0, Some(carried(ci)), "server-bound")
            })
            .collect();
        let lines = carried_lines(&p, &steps, &[]);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0]
                .starts_with("builtin carries 50 users at their real pace (day; 100 not carried)"),
            "{}",
            lines[0]
        );
        assert!(
            lines[1]
                .starts_with("radicale carries 10 users at their real pace (day; 25 not carried)"),
            "{}",
            lines[1]
        );
        let t = table(&p, &steps, &[]);
        assert!(
            t.rows
                .iter()
                .any(|r| r[2] == "users=100" && r[3].starts_with("NOT carried")),
            "{t}"
        );
        // No USL fit over users: the office's load is its users' day, not connections.
        assert!(t.usl.iter().all(|l| !l.starts_with("USL")), "{t}");
    }

    #[test]
    fn an_office_sweep_no_failure_bounded_says_at_least() {
        let p = plan(OFFICE);
        // builtin carries every count tried; radicale carries up to 50 and its day at
        // 100 was spoiled by the generator: neither answer is the server's limit.
        let steps: Vec<StepOutcome> = (0..p.cells.len())
            .map(|ci| {
                let c = &p.cells[ci];
                let radicale = p.targets[p.instances[c.instance].target].name == "radicale";
                let spoiled = radicale && c.users == Some(100);
                StepOutcome {
                    users: c.users,
                    ..step(
                        ci,
                        None,
                        10.0,
                        Some(!spoiled),
                        if spoiled {
                            "generator-bound"
                        } else {
                            "server-bound"
                        },
                    )
                }
            })
            .collect();
        let lines = carried_lines(&p, &steps, &[]);
        assert!(
            lines[0].starts_with(
                "builtin carries at least 100 users at their real pace \
                 (day; not bounded: 100 was the most tried)"
            ),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].starts_with(
                "radicale carries at least 50 users at their real pace \
                 (day; not bounded: 1 day above could not be judged)"
            ),
            "{}",
            lines[1]
        );
    }

    #[test]
    fn a_compressed_office_names_its_factor_in_every_line_and_row() {
        let p = plan(&OFFICE.replace(
            "users = [10, 25, 50, 100]",
            "users = [10, 25, 50, 100]\ncompress = 480",
        ));
        let steps: Vec<StepOutcome> = (0..p.cells.len())
            .map(|ci| StepOutcome {
                users: p.cells[ci].users,
                ..step(
                    ci,
                    None,
                    10.0,
                    Some(p.cells[ci].users.unwrap() <= 50),
                    "server-bound",
                )
            })
            .collect();
        let lines = carried_lines(&p, &steps, &[]);
        assert!(
            lines[0].starts_with(
                "builtin carries the request rate of about 24,000 people, with the data of 50 \
                 (office time compressed 480x) (day; 100 not carried)"
            ),
            "{}",
            lines[0]
        );
        let t = table(&p, &steps, &[]);
        let office_rows: Vec<&String> = t.rows.iter().map(|r| &r[2]).collect();
        assert!(
            office_rows.iter().all(|r| r.ends_with(" x480")),
            "{office_rows:?}"
        );
    }

    /// Rate steps at 100, 200, ... req/s, each sustained and replying at its rate.
    fn ramp(n: usize, label: &'static str) -> Vec<StepOutcome> {
        (0..n)
            .map(|i| {
                let r = 100.0 * (i + 1) as f64;
                step(i, Some(r), r, Some(true), label)
            })
            .collect()
    }

    #[test]
    fn generator_bound_rate_steps_never_bound_a_capacity() {
        let p = plan(RAMP);
        // The generator lagged at every rate and every step failed: the failures are
        // the generator's, so nothing is claimed.
        let all_gen: Vec<StepOutcome> = (0..4)
            .map(|i| {
                let r = 100.0 * (i + 1) as f64;
                step(i, Some(r), 0.8 * r, Some(false), "generator-bound")
            })
            .collect();
        let t = table(&p, &all_gen, &[]).to_string();
        assert!(!t.contains("capacity 400"), "{t}");
        assert!(
            t.contains("no server figure: none of the 4 step(s) could be judged"),
            "{t}"
        );
        // Passes while the generator lagged are still passes (latency counts from the
        // intended send time): at least the top, never a bounded capacity.
        let t = table(&p, &ramp(4, "generator-bound"), &[]).to_string();
        assert!(
            t.contains("capacity at least 400 req/s (the highest step tried)"),
            "{t}"
        );

        let mut mixed = ramp(3, "server-bound");
        mixed.push(step(3, Some(400.0), 320.0, Some(false), "generator-bound"));
        let t = table(&p, &mixed, &[]).to_string();
        assert!(
            t.contains(
                "capacity at least 300 req/s (not bounded: 1 step above could not be judged)"
            ),
            "{t}"
        );
        assert!(t.contains("peak replies 300/s"), "{t}");
        assert!(t.contains("1 unjudged step left out"), "{t}");
    }

    #[test]
    fn a_capacity_is_claimed_only_below_a_failure_of_the_server() {
        let p = plan(RAMP);
        // Sustained everywhere: the top of the sweep, and no more.
        let t = table(&p, &ramp(4, "server-bound"), &[]).to_string();
        assert!(
            t.contains("capacity at least 400 req/s (the highest step tried)"),
            "{t}"
        );
        // A failure of the server above 300: a capacity.
        let mut failed = ramp(3, "server-bound");
        failed.push(step(3, Some(400.0), 350.0, Some(false), "server-bound"));
        let t = table(&p, &failed, &[]).to_string();
        assert!(
            t.contains("capacity 300 req/s, first unsustainable 400"),
            "{t}"
        );
        // The same failure while the machine was busy bounds nothing.
        let mut busy = failed.clone();
        busy[3].machine_busy = true;
        let t = table(&p, &busy, &[]).to_string();
        assert!(
            t.contains(
                "capacity at least 300 req/s (not bounded: 1 step above could not be judged)"
            ),
            "{t}"
        );
        // Machine-stalled steps do not count for the server either.
        let mut stalled = ramp(3, "server-bound");
        stalled.push(step(3, Some(400.0), 350.0, Some(false), "machine-stalled"));
        let t = table(&p, &stalled, &[]).to_string();
        assert!(
            t.contains("capacity at least 300 req/s (not bounded"),
            "{t}"
        );
    }

    #[test]
    fn a_re_measured_step_counts_once_by_its_best_attempt() {
        let p = plan(RAMP);
        // 400 was generator-bound, then re-measured: a failure of the server.
        let mut steps = ramp(4, "server-bound");
        steps[3] = step(3, Some(400.0), 400.0, Some(true), "generator-bound");
        steps.push(StepOutcome {
            attempt: 1,
            ..step(3, Some(400.0), 330.0, Some(false), "server-bound")
        });
        // 200 failed while the machine was busy, then passed quietly.
        steps[1].machine_busy = true;
        steps[1].sustainable = Some(false);
        steps.push(StepOutcome {
            attempt: 1,
            ..step(1, Some(200.0), 200.0, Some(true), "server-bound")
        });
        let (best, remeasured) = best_attempts(&steps);
        assert_eq!((best.len(), remeasured), (4, 2));
        assert_eq!(best[3].label, "server-bound", "a server-bound attempt wins");
        assert!(!best[1].machine_busy, "a quiet attempt beats a busy one");
        let t = table(&p, &steps, &[]).to_string();
        assert!(
            t.contains("capacity 300 req/s, first unsustainable 400"),
            "{t}"
        );
        assert!(t.contains("2 steps re-measured"), "{t}");
        assert!(!t.contains("left out"), "{t}");
        // Spoiled in every attempt: left out, counted once.
        let mut spoiled = ramp(3, "server-bound");
        for attempt in 0..3 {
            spoiled.push(StepOutcome {
                attempt,
                ..step(3, Some(400.0), 320.0, Some(false), "machine-stalled")
            });
        }
        let t = table(&p, &spoiled, &[]).to_string();
        assert!(
            t.contains("1 unjudged step left out, 1 step re-measured"),
            "{t}"
        );
        assert!(
            t.contains("at least 300 req/s (not bounded: 1 step above"),
            "{t}"
        );
    }

    #[test]
    fn link_bound_steps_show_the_links_figure_not_the_servers() {
        let p = plan(CONC);
        let steps: Vec<StepOutcome> = (0..6)
            .map(|i| step(i, None, 14.0, None, "link-bound"))
            .collect();
        let t = table(&p, &steps, &[]).to_string();
        assert!(
            t.contains("link-bound: 14.0 req/s")
                && t.contains("the shaped link's figure, not the server's"),
            "{t}"
        );
        assert!(
            !t.contains("USL builtin"),
            "no fit from the link's figures: {t}"
        );
    }

    #[test]
    fn generator_bound_closed_steps_stay_out_of_medians_and_usl() {
        let p = plan(CONC);
        // X(N) = 1000 N / (1 + 0.05 (N - 1)): a clean USL curve...
        let x = |n: f64| 1000.0 * n / (1.0 + 0.05 * (n - 1.0));
        let mut steps: Vec<StepOutcome> = (0..6)
            .map(|i| step(i, None, x((i + 1) as f64), None, "server-bound"))
            .collect();
        let clean = table(&p, &steps, &[]).to_string();
        assert!(clean.contains("USL builtin w ka=on"), "{clean}");
        // ...plus a generator-bound run at N = 6 with an absurd figure: it must change
        // neither the median of that point nor the fit.
        steps.push(StepOutcome {
            repeat: 1,
            ..step(5, None, 99_999.0, None, "generator-bound")
        });
        let t = table(&p, &steps, &[]).to_string();
        let usl_line = |s: &str| {
            s.lines()
                .find(|l| l.starts_with("USL"))
                .unwrap()
                .to_string()
        };
        assert_eq!(usl_line(&t), usl_line(&clean));
        let c6 = t.lines().find(|l| l.contains("c=6 ")).unwrap();
        assert!(!c6.contains("99999"), "{c6}");
        assert!(c6.contains("1 unjudged step left out"), "{c6}");
    }

    fn second(p99_ms: f64, pressure: Option<f64>) -> volley_metrics::summary::SecondSummary {
        volley_metrics::summary::SecondSummary {
            second: 0,
            scheduled: 500,
            dispatched: 500,
            sent: 500,
            completed: 500,
            ok: 500,
            errors: Default::default(),
            wire_bytes: 0,
            max_open: 1,
            cap_hits: 0,
            p50_ms: 0.1,
            p99_ms,
            max_ms: p99_ms,
            send_lag_p99_ms: 0.01,
            sched_lag_p99_ms: 0.01,
            sched_lag_max_ms: 0.01,
            conn_wait_p99_ms: 0.0,
            cpu_cores_used: None,
            cpu_pressure: None,
            probe_max_stall_ms: None,
            probe_stall_bound_ms: None,
            pacer_wait_ms: None,
            probe_p99_ms: None,
            probe_over_1ms: None,
            steal_ms: None,
            others_busy_share: pressure,
            others_on_pacer_ms: None,
            label: volley_metrics::Bound::ServerBound,
        }
    }

    #[test]
    fn the_machine_is_busy_only_when_others_took_the_cpu_from_volley() {
        use crate::step::{machine_busy, volley_waited};
        use volley_metrics::summary::MachineLoad;
        // A second: (others' share of the machine, the pacer's wait ms).
        type Sec = (Option<f64>, Option<f64>);
        let with = |others_cores: f64, seconds: &[Sec]| {
            let mut s = volley_metrics::Recorder::new()
                .close(&crate::office_step::run_info(
                    "http://127.0.0.1:1/",
                    1,
                    std::time::Duration::from_secs(2),
                    false,
                    0.1,
                ))
                .unwrap();
            s.machine = Some(MachineLoad {
                cpus: 2,
                others_cores,
                steal_cores: 0.0,
            });
            s.seconds = seconds
                .iter()
                .map(|&(share, wait)| {
                    let mut x = second(0.2, share);
                    x.pacer_wait_ms = wait;
                    x
                })
                .collect();
            s
        };
        // (others' cores over the step, per second (others' share, pacer's wait ms))
        // -> busy?
        let rows: [(f64, &[Sec], bool); 7] = [
            // A nice-19 build on the idle core: others took 45%, volley never waited.
            (
                0.9,
                &[(Some(0.45), Some(0.0)), (Some(0.45), Some(0.2))],
                false,
            ),
            // The same build took the pacer's CPU: it waited 4 ms in a busy second.
            (
                0.9,
                &[(Some(0.45), Some(0.0)), (Some(0.45), Some(4.0))],
                true,
            ),
            // volley waited, but only in a second when others were quiet.
            (
                0.9,
                &[(Some(0.02), Some(4.0)), (Some(0.8), Some(0.1))],
                false,
            ),
            // A second whose share is unknown counts as possibly busy.
            (0.9, &[(None, Some(2.0))], true),
            // Waits never measured (stored before, no schedstats): share alone.
            (0.9, &[(Some(0.45), None)], true),
            // Quiet: never busy, whatever volley waited for (its own threads).
            (0.1, &[(Some(0.05), Some(30.0))], false),
            (0.1, &[(Some(0.05), None)], false),
        ];
        for (cores, seconds, want) in rows {
            let s = with(cores, seconds);
            assert_eq!(machine_busy(&s), want, "{cores} {seconds:?}");
            if cores > 0.5 {
                assert_eq!(volley_waited(&s), want, "{seconds:?}");
            }
        }
    }

    #[test]
    fn a_slow_second_names_the_machine_when_it_was_busy() {
        let quiet = [second(0.2, Some(0.0)), second(0.3, Some(0.01))];
        assert_eq!(slow_second_note(&quiet, 50.0), None);
        let busy = [
            second(0.2, Some(0.0)),
            second(162.0, Some(0.45)),
            second(0.3, None),
        ];
        let n = slow_second_note(&busy, 50.0).unwrap();
        assert!(n.contains("second 2 of 3") && n.contains("162.0 ms"), "{n}");
        assert!(
            n.contains("others took 45%") && n.contains("the machine"),
            "{n}"
        );
        let server = [second(80.0, Some(0.02))];
        let n = slow_second_note(&server, 50.0).unwrap();
        assert!(n.contains("it was quiet"), "{n}");
        assert_eq!(slow_second_note(&[], 50.0), None);
    }

    #[test]
    fn a_users_search_has_a_row_per_count_tried_and_answers_with_its_interval() {
        let text = OFFICE
            .replace("users = [10, 25, 50, 100]", "users = \"search\"")
            .replace("[steps]", "[search]\nmax_users = 100\nrepeats = 1\n[steps]");
        let p = plan(&text);
        assert_eq!(p.cells.len(), 2, "one searched cell per target");
        // Builtin carries 37 users: drive its search as the runner would (10, 20, 40
        // fails, then 30, 35, 37; [37, 40] is within the default 10% resolution).
        let sp = p.search_of(0).unwrap();
        let mut search = knee::Search::new(sp.start_rate, sp.opts.clone()).unwrap();
        let mut steps = Vec::new();
        while let Some(u) = search.next_rate() {
            let (cell, rate) = p.cell_at(0, Some(u));
            assert_eq!(rate, None, "a users step offers no rate");
            let ok = cell.users.unwrap() <= 37;
            steps.push(StepOutcome {
                users: cell.users,
                ..step(0, None, 10.0, Some(ok), "server-bound")
            });
            search.observe(u, ok).unwrap();
        }
        let cap = search.capacity().unwrap();
        let t = table(&p, &steps, &[(0, cap.clone())]);
        let users: Vec<&str> = t
            .rows
            .iter()
            .filter(|r| r[0] == "builtin")
            .map(|r| r[2].as_str())
            .collect();
        assert_eq!(
            users,
            ["users=10", "users=20", "users=30", "users=35", "users=37", "users=40"]
        );
        let line = t.usl.iter().find(|l| l.starts_with("builtin")).unwrap();
        assert!(
            line.starts_with(
                "builtin carries 37 users at their real pace (day; searched, 95% CI [37, 40] users, 6 days)"
            ),
            "{line}"
        );
        // The radicale search never ran: its row says so and no answer is claimed.
        assert!(t
            .rows
            .iter()
            .any(|r| r[0] == "radicale" && r[3] == "(not run)"));
        assert!(!t.usl.iter().any(|l| l.starts_with("radicale")));
    }
}
