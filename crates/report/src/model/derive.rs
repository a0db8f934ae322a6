//! Figures derived from the loaded steps: capacities, searches, phases, groups, the
//! percentile curve, and the words reasons are shown in.

use super::*;

/// A sustainability reason in words a reader can check against the tables: the one
/// sentence the study's step line prints too (`volley_analysis::words`).
pub fn reason_text(r: &sustain::Reason) -> String {
    volley_analysis::words::sentence(r)
}

/// Points of the percentile curve at p = 1 - 10^(-k/10), from 0% up to the last
/// percentile the count can resolve, plus the maximum: the wrk2/HdrHistogram plot.
pub(super) fn percentile_points(h: &hist::Hist) -> Vec<(f64, f64)> {
    let n = h.len() as f64;
    let mut out = Vec::new();
    for k in 0..=60 {
        let p = 1.0 - 10f64.powf(-(k as f64) / 10.0);
        // Beyond 1/(1-p) > n the histogram has no sample to tell the percentile apart.
        if 1.0 / (1.0 - p) > n {
            break;
        }
        out.push((p * 100.0, hist::us_to_ms(h.value_at_quantile(p) as f64)));
    }
    let top = (1.0 - 1.0 / n.max(2.0)) * 100.0;
    if out.last().is_none_or(|(p, _)| *p < top) {
        out.push((top, hist::us_to_ms(h.max() as f64)));
    }
    out
}

/// One step per planned step (rate, repeat, phase) of a group, its best attempt
/// (`knee::Evidence::attempt_rank`, the earliest of the best), in stored order; and how
/// many planned steps were measured more than once.
pub(crate) fn best_attempts<'a>(steps: &[&'a StepReport]) -> (Vec<&'a StepReport>, usize) {
    let key = |s: &StepReport| (s.rate_rps.map(f64::to_bits), s.repeat, s.phase.clone());
    let rank = |s: &StepReport| {
        knee::Evidence::attempt_rank(s.sustainable, s.label.as_deref(), s.machine_busy)
    };
    let mut best: Vec<(&StepReport, usize)> = Vec::new();
    for &s in steps {
        match best.iter_mut().find(|(b, _)| key(b) == key(s)) {
            Some((b, n)) => {
                *n += 1;
                if rank(s) < rank(b) {
                    *b = s;
                }
            }
            None => best.push((s, 1)),
        }
    }
    let remeasured = best.iter().filter(|(_, n)| *n > 1).count();
    (best.into_iter().map(|(b, _)| b).collect(), remeasured)
}

/// The (rate, evidence) of each step that has both.
fn evidence_of(steps: &[&StepReport]) -> Vec<(f64, knee::Evidence)> {
    steps
        .iter()
        .filter_map(|s| Some((s.rate_rps?, s.evidence()?)))
        .collect()
}

/// Capacity per group of rate steps (workload, cap, cores, keep-alive): each group is
/// its own sweep, each planned step counted once by its best attempt, and the capacity
/// claimed only below a failure of the server (`knee::Claim`).
pub(super) fn capacities(steps: &[StepReport]) -> Vec<Capacity> {
    let mut groups: BTreeMap<String, Vec<&StepReport>> = BTreeMap::new();
    for s in steps
        .iter()
        .filter(|s| s.rate_rps.is_some() && s.sustainable.is_some())
    {
        groups.entry(group_name(s)).or_default().push(s);
    }
    groups
        .into_iter()
        .map(|(group, attempts)| {
            let (judged, remeasured) = best_attempts(&attempts);
            let usable = |phase: Option<&str>| -> Vec<(f64, knee::Evidence)> {
                let in_phase: Vec<&StepReport> = judged
                    .iter()
                    .copied()
                    .filter(|s| phase.is_none() || s.phase.as_deref() == phase)
                    .collect();
                evidence_of(&in_phase)
            };
            let all = usable(None);
            let c = knee::sweep_evidence(&all);
            let for_server = all
                .iter()
                .filter(|(_, e)| *e != knee::Evidence::Unjudged)
                .count();
            let mut phases: Vec<String> = judged.iter().filter_map(|s| s.phase.clone()).collect();
            phases.sort();
            phases.dedup();
            let by_phase = if phases.len() > 1 {
                phases
                    .into_iter()
                    .map(|p| {
                        let cap = knee::sweep_evidence(&usable(Some(&p))).capacity_rps;
                        (p, cap)
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let phase_times = phase_times(&attempts);
            Capacity {
                group,
                variant: attempts[0].variant.clone(),
                protocol: attempts[0].protocol.clone(),
                capacity_rps: c.capacity_rps,
                first_unsustainable_above_rps: c.first_unsustainable_above_rps,
                non_monotone: c.non_monotone,
                claim: c.claim(),
                bounded: c.claim().bounded(),
                steps_judged: for_server,
                generator_bound_excluded: judged.len() - for_server,
                remeasured,
                by_phase,
                phase_times,
            }
        })
        .collect()
}

/// Steps and wall time per phase of one group's steps, phases in name order.
pub(super) fn phase_times(steps: &[&StepReport]) -> Vec<PhaseTime> {
    let mut by: BTreeMap<String, (usize, f64, f64)> = BTreeMap::new();
    for s in steps {
        let Some(p) = &s.phase else { continue };
        let e = by
            .entry(p.clone())
            .or_insert((0, f64::INFINITY, f64::NEG_INFINITY));
        e.0 += 1;
        e.1 = e.1.min(s.start_offset_s);
        e.2 = e.2.max(s.start_offset_s + s.wall_s);
    }
    by.into_iter()
        .map(|(phase, (steps, first, last))| PhaseTime {
            phase,
            steps,
            wall_s: (last - first).max(0.0),
        })
        .collect()
}

/// Which of its cell's searches a stored search was, 1-based, and of how many: the
/// `pass` (0-based) and `passes` stored beside the cell when there were several
/// (docs/store-conventions.md, "capacities").
fn pass_of(cell: &Value) -> Option<(u32, u32)> {
    let n = cell.get("pass")?.as_u64()?;
    let of = cell.get("passes")?.as_u64()?;
    Some((
        u32::try_from(n).ok()?.saturating_add(1),
        u32::try_from(of).ok()?,
    ))
}

/// The stored search results of a run, matched to their groups of steps, plus a
/// "not finished" entry for every group with search steps but no stored result.
pub(super) fn searches(
    rows: &[volley_store::CapacityRow],
    steps: &[StepReport],
) -> Vec<SearchCapacity> {
    let mut out: Vec<SearchCapacity> = rows
        .iter()
        .map(|row| {
            let r = &row.record;
            let c = &r.cell;
            let (variant, protocol) = cell_series(c, steps);
            let group = group_label(
                c.get("workload").and_then(Value::as_str),
                c.get("cpu_quota_cores").and_then(Value::as_f64),
                c.get("cores").and_then(Value::as_str),
                c.get("keepalive").and_then(Value::as_bool),
                variant.as_deref(),
                protocol.as_deref(),
            );
            let (sweep_capacity_rps, sweep) = sweep_of(steps, &group);
            let end = r.end.as_str().to_string();
            let claim = crate::compare::stored_claim(r);
            SearchCapacity {
                finished: r.end != volley_store::SearchEnd::Interrupted,
                capacity_rps: r.capacity_rps,
                claim,
                bounded: claim.bounded(),
                ci_lo_rps: r.ci_lo_rps,
                ci_hi_rps: r.ci_hi_rps,
                confidence: Some(r.confidence),
                end,
                steps: r.steps,
                wall_s: (r.finished_unix_ms - r.started_unix_ms).max(0) as f64 / 1e3,
                sweep_capacity_rps,
                sweep,
                group,
                variant,
                protocol,
                pass: pass_of(c),
            }
        })
        .collect();
    let killed = killed_searches(steps, &out);
    out.extend(killed);
    out
}

/// The capacity by sweep of `group`'s sweep-phase steps and their wall time, when it has
/// any.
fn sweep_of(steps: &[StepReport], group: &str) -> (Option<f64>, Option<PhaseTime>) {
    let in_group: Vec<&StepReport> = steps
        .iter()
        .filter(|s| s.phase.as_deref() == Some("sweep") && s.rate_rps.is_some())
        .filter(|s| group_name(s) == group)
        .collect();
    if in_group.is_empty() {
        return (None, None);
    }
    let (best, _) = best_attempts(&in_group);
    (
        knee::sweep_evidence(&evidence_of(&best)).capacity_rps,
        phase_times(&in_group).pop(),
    )
}

/// The searches killed mid-way, whose steps are stored and whose result never was: one
/// "not finished" entry per group and pass with search steps but no result in `out`.
/// A cell searched several times is one search per pass: a killed second pass is
/// listed beside the first's stored result, not hidden by it.
fn killed_searches(steps: &[StepReport], out: &[SearchCapacity]) -> Vec<SearchCapacity> {
    let mut killed = Vec::new();
    let mut orphans: BTreeMap<(String, Option<u32>), Vec<&StepReport>> = BTreeMap::new();
    for s in steps
        .iter()
        .filter(|s| s.phase.as_deref() == Some("search") && s.rate_rps.is_some())
    {
        orphans.entry((group_name(s), s.pass)).or_default().push(s);
    }
    for ((group, pass), in_group) in orphans {
        let stored_pass = |x: &SearchCapacity| x.pass.map(|(n, _)| n - 1);
        if out
            .iter()
            .any(|x| x.group == group && stored_pass(x) == pass)
        {
            continue;
        }
        // Of how many: as the group's stored searches say, else as many as its steps
        // show begun.
        let of = out
            .iter()
            .filter(|x| x.group == group)
            .find_map(|x| x.pass.map(|(_, of)| of))
            .or_else(|| {
                steps
                    .iter()
                    .filter(|s| group_name(s) == group)
                    .filter_map(|s| s.pass)
                    .max()
                    .map(|m| m + 1)
            });
        let (best, _) = best_attempts(&in_group);
        let c = knee::sweep_evidence(&evidence_of(&best));
        let (sweep_capacity_rps, sweep) = sweep_of(steps, &group);
        killed.push(SearchCapacity {
            variant: in_group[0].variant.clone(),
            protocol: in_group[0].protocol.clone(),
            pass: pass.zip(of).map(|(n, of)| (n + 1, of)),
            capacity_rps: c.capacity_rps,
            claim: c.claim(),
            bounded: c.claim().bounded(),
            ci_lo_rps: None,
            ci_hi_rps: None,
            confidence: None,
            end: "not_finished".to_string(),
            finished: false,
            steps: in_group.len() as u32,
            wall_s: phase_times(&in_group).pop().map_or(0.0, |p| p.wall_s),
            sweep_capacity_rps,
            sweep,
            group,
        });
    }
    killed
}

/// The variant and protocol of a stored search's cell. Older rows name the variant only
/// in the instance's label; the protocol counts only where the run's steps have it as a
/// dimension, and a row without one takes its steps' when they all spoke one.
fn cell_series(c: &Value, steps: &[StepReport]) -> (Option<String>, Option<String>) {
    let variant = c
        .get("variant")
        .and_then(Value::as_str)
        .or_else(|| {
            let instance = c.get("instance").and_then(Value::as_str)?;
            Some(instance.rsplit_once(" variant=")?.1)
        })
        .map(str::to_string);
    let protocol = steps
        .iter()
        .any(|s| s.protocol.is_some())
        .then(|| c.get("protocol").and_then(Value::as_str))
        .flatten()
        .or_else(|| {
            let mut ps = steps.iter().filter_map(|s| s.protocol.as_deref());
            let first = ps.next()?;
            ps.all(|p| p == first).then_some(first)
        })
        .map(str::to_string);
    (variant, protocol)
}

/// Describes the (workload, cap, cores, keep-alive, variant, protocol) group of a step:
/// each is its own sweep (a tuned server's capacity is never mixed with its default's).
pub fn group_name(s: &StepReport) -> String {
    group_label(
        s.workload.as_deref(),
        s.cpu_quota_cores,
        s.cores.as_deref(),
        s.keepalive,
        s.variant.as_deref(),
        s.protocol.as_deref(),
    )
}

/// [`group_name`] without the variant and protocol: where the series of one group stand
/// side by side (a chart's category; `crate::colors::key` tells the series apart).
pub fn group_of_any_series(group: &str, variant: Option<&str>, protocol: Option<&str>) -> String {
    let suffix = series_suffix(variant, protocol);
    group
        .strip_suffix(suffix.as_str())
        .unwrap_or(group)
        .to_string()
}

/// ", variant tuned, h2": what a group's label adds for its variant and protocol.
fn series_suffix(variant: Option<&str>, protocol: Option<&str>) -> String {
    let mut out = String::new();
    if let Some(v) = variant {
        out.push_str(&format!(", variant {v}"));
    }
    if let Some(p) = protocol {
        out.push_str(&format!(", {p}"));
    }
    out
}

/// The group of a workload, cap, cpuset, keep-alive, variant and protocol; shared by
/// steps and stored search results so the two meet.
pub(super) fn group_label(
    workload: Option<&str>,
    quota: Option<f64>,
    cores: Option<&str>,
    keepalive: Option<bool>,
    variant: Option<&str>,
    protocol: Option<&str>,
) -> String {
    base_group_label(workload, quota, cores, keepalive) + &series_suffix(variant, protocol)
}

fn base_group_label(
    workload: Option<&str>,
    quota: Option<f64>,
    cores: Option<&str>,
    keepalive: Option<bool>,
) -> String {
    let mut parts = Vec::new();
    if let Some(w) = workload {
        parts.push(w.to_string());
    }
    if let Some(q) = quota {
        parts.push(format!("cap {} cores", trim_num(q)));
    }
    if let Some(c) = cores {
        parts.push(format!("cpus {c}"));
    }
    if let Some(k) = keepalive {
        parts.push(if k { "keep-alive" } else { "no keep-alive" }.to_string());
    }
    if parts.is_empty() {
        "all steps".to_string()
    } else {
        parts.join(", ")
    }
}

/// A number without trailing zeros: 0.5, 2, 1.25.
pub fn trim_num(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

pub(super) fn usl_groups(steps: &[StepReport]) -> Vec<UslGroup> {
    let mut groups: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for s in steps.iter().filter(|s| s.rate_rps.is_none()) {
        let Some(n) = s.concurrency else { continue };
        if s.generator_bound() {
            continue;
        }
        groups
            .entry(group_name(s))
            .or_default()
            .push((n as f64, s.requests_per_s));
    }
    groups
        .into_iter()
        .filter(|(_, pts)| {
            let mut ns: Vec<u64> = pts.iter().map(|p| p.0 as u64).collect();
            ns.dedup();
            ns.len() >= 2
        })
        .map(|(group, points)| {
            let input: Vec<usl::UslPoint> = points
                .iter()
                .map(|&(n, throughput)| usl::UslPoint { n, throughput })
                .collect();
            let fit = usl::fit(&input).map(|f| UslSummary {
                lambda: f.lambda,
                sigma: f.sigma,
                kappa: f.kappa,
                n_star: f.n_star.is_finite().then_some(f.n_star),
                peak_rps: f.peak_throughput.is_finite().then_some(f.peak_throughput),
                r_squared: f.r_squared,
            });
            UslGroup { group, points, fit }
        })
        .collect()
}
