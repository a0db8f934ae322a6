//! Before the first step: every target instance started (or skipped with a note), each
//! GET path asked once, and one stored run per target begun.

use super::*;

/// Asks every started target for each path its GET workloads load, once, before any
/// step (docs/methodology.md, "Validation before measurement"): the start-up probe checks
/// only the fixture's first path, and without a `[fixture]` none, so a path the target
/// does not have would otherwise be measured as fast errors. Cold-start workloads are
/// left out (asking would warm the path they time); other methods may change state.
pub(super) fn check_paths(
    plan: &Plan,
    running: &[Option<RunningTarget>],
    vlabs: &variant_lab::VariantLabs,
) -> Result<(), StudyError> {
    for (i, t) in running.iter().enumerate() {
        let Some(t) = t else { continue };
        let ti = plan.instances[i].target;
        let mut asked: Vec<&str> = Vec::new();
        for w in &plan.workloads {
            let loads_it = w.targets.as_ref().is_none_or(|ts| ts.contains(&ti));
            if !loads_it || w.office.is_some() || w.cold_start || w.method != "GET" {
                continue;
            }
            for p in &w.paths {
                if asked.contains(&p.as_str()) {
                    continue;
                }
                asked.push(p);
                let answered = vlabs
                    .enter(i)
                    .map_err(|e| e.to_string())
                    .and_then(|_inside| t.answers_path(p).map_err(|e| e.to_string()));
                if let Err(e) = answered {
                    return Err(StudyError::Refused(format!(
                        "workload {}: {e} (checked once before the run: fix the path, or add a [fixture] the target serves)",
                        w.name
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Starts every instance; one that cannot start is skipped with a note, and a target
/// that is not installed is skipped in all its instances. Returns the instances (in
/// plan order, `None` when skipped) and the skip lines.
pub(super) fn start_targets(
    plan: &Plan,
    docroot: Option<&Path>,
    exe: Option<&Path>,
    netns: Option<&NetnsPlace>,
    vlabs: &variant_lab::VariantLabs,
    note: &mut dyn FnMut(&str),
) -> (Vec<Option<RunningTarget>>, Vec<String>) {
    let mut running: Vec<Option<RunningTarget>> = Vec::new();
    let mut skipped = Vec::new();
    let mut skipped_targets: Vec<usize> = Vec::new();
    for i in 0..plan.instances.len() {
        let ti = plan.instances[i].target;
        if skipped_targets.contains(&ti) {
            running.push(None);
            continue;
        }
        let own = vlabs.place(i);
        // Started (and probed) from the variant's load namespace: its target's address
        // is reachable only from inside its lab.
        let started = match vlabs.enter(i) {
            Ok(_inside) => {
                volley_targets::start(&spec_for(plan, i, docroot, exe, own.as_ref().or(netns)))
            }
            Err(e) => Err(TargetError::InvalidSpec(e.to_string())),
        };
        match started {
            Ok(t) => running.push(Some(t)),
            Err(e) => {
                let why = match &e {
                    TargetError::NotInstalled { .. } => format!("not installed ({e})"),
                    _ => e.to_string(),
                };
                let line = format!("skipping {}: {why}", plan.instance_label(i));
                note(&line);
                skipped.push(line);
                if matches!(e, TargetError::NotInstalled { .. }) {
                    skipped_targets.push(ti);
                }
                running.push(None);
            }
        }
    }
    (running, skipped)
}

/// The study's parameters as each run stores them.
fn study_parameters(plan: &Plan) -> Value {
    json!({
        "mode": match plan.mode { Mode::Sweep => "sweep", Mode::Search => "search" },
        "axis": plan.axis,
        "repeats": plan.repeats,
        "timing": {
            "duration_s": plan.timing.duration.map(|d| d.as_secs_f64()),
            "rate_duration_s": plan.timing.rate_duration.map(|d| d.as_secs_f64()),
            "requests": plan.timing.requests,
            "warmup_s": plan.timing.warmup.as_secs_f64(),
            "cooldown_s": plan.timing.cooldown.as_secs_f64(),
        },
        "slo": { "p99_ms": plan.rule.p99_slo.as_secs_f64() * 1e3, "error_share": plan.rule.allowed_error_share },
        "workloads": plan.workloads.iter().map(|w| json!({
            "name": w.name, "method": w.method, "paths": w.paths, "order": format!("{:?}", w.order),
            "load": {
                "model": if w.load.open { "open" } else { "closed" },
                "concurrency": w.load.concurrency, "rate": w.load.rate,
                "threads": w.load.threads, "max_connections": w.load.max_connections,
                "timeout_s": w.load.timeout.as_secs_f64(), "keepalive": w.load.keepalive,
            },
        })).collect::<Vec<_>>(),
    })
}

/// One run per target name that has a running instance, with its environment.
#[allow(clippy::type_complexity)]
pub(super) fn begin_runs(
    plan: &Plan,
    store: &mut Store,
    study: StudyId,
    running: &[Option<RunningTarget>],
    docroot: Option<&Path>,
    vlabs: &variant_lab::VariantLabs,
) -> Result<(Vec<(String, RunId)>, HashMap<usize, RunId>), StudyError> {
    let parameters = study_parameters(plan);
    let mut runs: Vec<(String, RunId)> = Vec::new();
    let mut run_of_target: HashMap<usize, RunId> = HashMap::new();
    for (ti, t) in plan.targets.iter().enumerate() {
        let insts: Vec<usize> = (0..plan.instances.len())
            .filter(|&i| plan.instances[i].target == ti && running[i].is_some())
            .collect();
        let Some(&first) = insts.first() else {
            continue;
        };
        let rt = running[first].as_ref().expect("filtered on is_some");
        let limits = spec_for(plan, first, docroot, None, None).limits;
        let mut env = serde_json::to_value(rt.record(&limits)).unwrap_or(Value::Null);
        env["instances"] = json!(insts
            .iter()
            .map(|&i| json!({
                "label": plan.instance_label(i),
                "url": running[i].as_ref().map(|r| r.url.clone()),
                "cpu_quota": plan.instances[i].cpu_quota,
                "cores": plan.instances[i].cores,
                "variant": plan.instances[i].variant.map(|v| plan.variants[v].name.clone()),
                "config_text": running[i].as_ref().map(|r| r.config_text.clone()),
                "namespace": vlabs.record(i),
            }))
            .collect::<Vec<_>>());
        let id = store.begin_run(&NewRun {
            study: Some(study),
            kind: RunKind::StudyStep,
            target: t.name.clone(),
            parameters: parameters.clone(),
            environment: env,
        })?;
        runs.push((t.name.clone(), id));
        run_of_target.insert(ti, id);
    }
    Ok((runs, run_of_target))
}
