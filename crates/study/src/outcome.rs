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
    Evidence::attempt_rank(s.sustainable, Some(s.label), s.machine_busy)
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
        // The cell's searches, one per pass (`[search] passes`).
        let passes: Vec<&Capacity> = searches
            .iter()
            .filter(|(ci, _)| key_of(plan, *ci) == key)
            .map(|(_, c)| c)
            .collect();
        let result = if group.is_empty() {
            "(not run)".to_string()
        } else if office {
            office_result(&group)
        } else if let [one] = passes[..] {
            search_result(one, &attempts)
        } else if !passes.is_empty() {
            passes_result(&passes, &attempts)
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
        other => format!(", search ended: {}", other.words()),
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
        "{}, 95% CI [{:.0}, {hi}] ({} steps, ended: {}{}{})",
        match claim {
            Claim::None => "capacity none (no rate shown sustainable)".to_string(),
            c => format!("capacity {}", c.text("req/s")),
        },
        cap.ci_lo_rps,
        // Steps run for this cell, re-measures included: `cap.steps` counts only the
        // observations the search decided on, which is 0 for a search that stopped at
        // its first, unjudged rate.
        attempts.len(),
        cap.end.words(),
        match cap.generator_bound_at_rps {
            Some(r) => format!(
                "; {r:.0} req/s could not be judged for the server (generator-bound, machine-stalled or on a busy machine): the edge above was not looked for"
            ),
            None => String::new(),
        },
        remeasured_text(remeasured),
    )
}

/// A cell searched more than once (`[search] passes`): each search's claim and interval,
/// in the order they ended, and the steps of all of them.
fn passes_result(passes: &[&Capacity], attempts: &[StepOutcome]) -> String {
    let (_, remeasured) = best_attempts(attempts);
    let each: Vec<String> = passes
        .iter()
        .map(|c| {
            let hi = c
                .ci_hi_rps
                .map_or("unbounded".to_string(), |h| format!("{h:.0}"));
            format!("{} [{:.0}, {hi}]", c.claim().text("req/s"), c.ci_lo_rps)
        })
        .collect();
    let ends: Vec<&str> = passes.iter().map(|c| c.end.words()).collect();
    format!(
        "{} searches: capacity {} ({} steps in all, ended: {}{})",
        passes.len(),
        each.join("; "),
        attempts.len(),
        ends.join(", "),
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
    if !steps.is_empty()
        && steps
            .iter()
            .all(|s| s.label == volley_analysis::sustain::TOO_SHORT)
    {
        return format!(
            "no server figure: {} too short for its CPU cap to hold (under ten periods of the quota measured): a burst, not the capped server's figure; give the steps more requests",
            match steps.len() {
                1 => "its one step was".to_string(),
                n => format!("each of its {n} steps was"),
            }
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
        // A closed loop that used its cores on a quiet machine, every time: volley's
        // own limit, which another attempt meets again; say what would pass it.
        let outpaced = steps.iter().all(|s| s.generator_limit());
        format!(
            "no server figure: none of the {} step(s) could be judged for the server: {}{}",
            steps.len(),
            unjudged_reasons(steps),
            match outpaced {
                true => " (volley's load could not outpace this server on the CPU it had: more [load] threads, on a machine with cores to spare, or injectors would)",
                false => "",
            }
        )
    } else if steps.iter().any(|s| s.rate.is_some()) {
        rate_result(steps, &server, excluded)
    } else {
        closed_result(&server, excluded)
    }
}

/// Why steps that do not count for the server do not, counted by reason in the order
/// first met ("2 generator-bound, 1 failed on a busy machine"): the end table names
/// what stood in the way instead of listing every reason there could be.
fn unjudged_reasons(steps: &[&StepOutcome]) -> String {
    let mut reasons: Vec<(&'static str, usize)> = Vec::new();
    for s in steps {
        let why = match volley_analysis::sustain::not_the_servers(Some(s.label)) {
            Some(label) if label == volley_analysis::sustain::TOO_SHORT => {
                "too short for its CPU cap"
            }
            Some(label) => label,
            None if s.rate.is_none() && s.mostly_failed() => "mostly failed",
            None if s.machine_busy && s.rate.is_some() => "failed on a busy machine",
            None if s.machine_busy => "on a busy machine",
            None => "not judged",
        };
        match reasons.iter_mut().find(|(r, _)| *r == why) {
            Some((_, n)) => *n += 1,
            None => reasons.push((why, 1)),
        }
    }
    reasons
        .iter()
        .map(|(r, n)| format!("{n} {r}"))
        .collect::<Vec<_>>()
        .join(", ")
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
    // Inconclusive figures are kept, and said to be: whose limit they show is not known
    // (a burst too short to judge, a generator between 70% and 90% of its cores).
    let unsure = server
        .iter()
        .filter(|s| s.label == volley_analysis::sustain::Bound::Inconclusive.label())
        .count();
    let unsure = match unsure {
        0 => String::new(),
        n if n == server.len() => ", inconclusive: whose limit not known".to_string(),
        n => format!(", {n} inconclusive"),
    };
    format!(
        "{} req/s, p99 {} ms{ttfb} ({} run{}{}{unsure}{})",
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
#[path = "outcome_tests.rs"]
mod tests;
