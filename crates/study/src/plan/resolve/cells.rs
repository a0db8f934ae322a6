//! The study's cells: every point of the sweep axes for each instance and workload
//! (rates or concurrencies, caps, cores, keep-alive, protocols, variants), with the
//! checks that need them (cold-start workloads, HTTP/3 targets, what injectors can
//! send).

use super::*;

/// Cold-start workloads restart their target per step: not searchable, not external.
pub(super) fn check_cold_start(
    file: &StudyFile,
    workloads: &[Workload],
    targets: &[Target],
) -> Result<(), StudyError> {
    if workloads.iter().any(|w| w.cold_start) {
        if file.mode == Mode::Search {
            return Err(invalid(
                "cold_start workloads cannot be searched (each step restarts its target)",
            ));
        }
        if let Some(t) = targets.iter().find(|t| t.kind == TargetKind::External) {
            return Err(invalid(format!(
                "cold_start needs managed targets: '{}' is external and cannot be restarted",
                t.name
            )));
        }
    }
    Ok(())
}

/// Cells: workload, keepalive, concurrency, rate outer; instance innermost (A B A B). A
/// rate axis (or search mode) makes its workload open-loop.
pub(super) fn resolve_cells(
    file: &StudyFile,
    workloads: &mut [Workload],
    instances: &[Instance],
) -> Result<Vec<Cell>, StudyError> {
    let sweep = &file.sweep;
    let mut cells = Vec::new();
    let mut made_open = Vec::new();
    for (wi, (w, wd)) in workloads.iter().zip(&file.workloads).enumerate() {
        let runs_on = |ii: usize| {
            w.targets
                .as_ref()
                .is_none_or(|t| t.contains(&instances[ii].target))
        };
        if let Some(office) = &w.office {
            office_cells(file, office, wi, instances, &runs_on, &mut cells);
            continue;
        }
        let sw: &SweepDef = wd.sweep.as_ref().unwrap_or(sweep);
        check_sweep(w, wd)?;
        let keepalives = sw.keepalive.clone().unwrap_or(vec![w.load.keepalive]);
        let protocols = protocols_of(sw, w)?;
        if file.injectors.is_some() {
            check_injectable(w, &protocols)?;
        }
        check_streams(w, &protocols)?;
        let concs = sw.concurrency.clone().unwrap_or(vec![w.load.concurrency]);
        if concs.is_empty() || concs.contains(&0) {
            return Err(invalid("sweep.concurrency values must be at least 1"));
        }
        let open = w.load.open || sw.rate.is_some();
        let rates = rates_of(file, w, sw, open)?;
        let injector_counts: Vec<Option<u32>> = match &file.injectors {
            Some(d) => d.count.values().into_iter().map(Some).collect(),
            None => vec![None],
        };
        for &proto in &protocols {
            for &ka in &keepalives {
                for &c in &concs {
                    for &r in &rates {
                        for &k in &injector_counts {
                            for ii in (0..instances.len()).filter(|&ii| runs_on(ii)) {
                                cells.push(Cell {
                                    instance: ii,
                                    workload: wi,
                                    rate: r,
                                    concurrency: c,
                                    keepalive: ka,
                                    protocol: proto,
                                    injectors: k,
                                    users: None,
                                });
                            }
                        }
                    }
                }
            }
        }
        if open && !w.load.open {
            made_open.push(wi);
        }
    }
    // A rate axis makes the workload open-loop.
    for wi in made_open {
        workloads[wi].load.open = true;
    }
    if file.mode == Mode::Search {
        for w in workloads.iter_mut() {
            w.load.open = true;
        }
    }
    if cells.is_empty() {
        return Err(invalid("the study has no step to run (no target left?)"));
    }
    // Searched offices last, in their order: a sweep's schedule covers the cells before
    // them, and the searches run after it.
    let (mut swept, searched): (Vec<Cell>, Vec<Cell>) = cells
        .into_iter()
        .partition(|c| !workloads[c.workload].searches_users());
    swept.extend(searched);
    Ok(swept)
}

/// An office's cells: it sweeps its users (or searches them: one cell per instance, its
/// users decided per step); the connection axes are the clients' own.
fn office_cells(
    file: &StudyFile,
    office: &OfficeLoad,
    wi: usize,
    instances: &[Instance],
    runs_on: &dyn Fn(usize) -> bool,
    cells: &mut Vec<Cell>,
) {
    let start = [office
        .own_search
        .as_ref()
        .map_or(super::office::start_users(file), |s| s.start_rate as u32)];
    let users: &[u32] = if office.search { &start } else { &office.users };
    for &u in users {
        for ii in (0..instances.len()).filter(|&ii| runs_on(ii)) {
            cells.push(Cell {
                instance: ii,
                workload: wi,
                rate: None,
                concurrency: u,
                keepalive: true,
                protocol: None,
                injectors: None,
                users: Some(u),
            });
        }
    }
}

/// A workload's own sweep may only set its load axes: the target's axes (CPU quota,
/// cores, target) are the study's.
fn check_sweep(w: &Workload, wd: &WorkloadDef) -> Result<(), StudyError> {
    if wd
        .sweep
        .as_ref()
        .is_some_and(|s| s.cpu_quota.is_some() || s.cores.is_some() || s.target.is_some())
    {
        return Err(invalid(format!(
            "workload '{}': a workload's sweep may only set rate, concurrency and keepalive",
            w.name
        )));
    }
    Ok(())
}

/// Streams per connection only mean something on a multiplexed protocol.
fn check_streams(w: &Workload, protocols: &[Option<Protocol>]) -> Result<(), StudyError> {
    if protocols == [None] && w.load.wire.h2_streams.is_none() && w.load.wire.streams != 1 {
        return Err(invalid(format!(
            "workload '{}': load.streams needs http2 = true (or a sweep.protocol)",
            w.name
        )));
    }
    Ok(())
}

/// The rate axis of a workload: one open cell per rate of `sweep.rate`, its own
/// `load.rate` when open without an axis, none when closed or searched (a search
/// decides its rates per step).
fn rates_of(
    file: &StudyFile,
    w: &Workload,
    sw: &SweepDef,
    open: bool,
) -> Result<Vec<Option<f64>>, StudyError> {
    if file.mode == Mode::Search {
        return Ok(vec![None]);
    }
    if let Some(axis) = &sw.rate {
        return Ok(expand_rates(axis)?.into_iter().map(Some).collect());
    }
    if !open {
        return Ok(vec![None]);
    }
    match w.load.rate {
        Some(r) => Ok(vec![Some(r)]),
        None => Err(invalid(format!(
            "workload '{}' is open-loop but has no rate (set load.rate or sweep.rate)",
            w.name
        ))),
    }
}

/// What `[injectors]` cannot send, refused before anything starts: an agent's load is
/// plain HTTP/1.1 without a body (`volley-agents` builds no TLS, HTTP/2 or HTTP/3
/// connection, and giving it them means trust material on every agent's host), so a
/// swept h2 or h3 step would have measured HTTP/1.1 under another name.
fn check_injectable(w: &Workload, protocols: &[Option<Protocol>]) -> Result<(), StudyError> {
    let def = &w.load.wire;
    let what = match protocols.iter().flatten().find(|&&p| p != Protocol::H1) {
        Some(p) => format!("sweep.protocol \"{}\"", p.name()),
        None if def.tls => "load.tls".into(),
        None if def.h2_streams.is_some() => "load.http2".into(),
        None if def.compressed.is_some() => "load.compressed".into(),
        None if w.body.is_some() => "a request body".into(),
        None => return Ok(()),
    };
    Err(invalid(format!(
        "workload '{}': {what} cannot run with [injectors] (injectors send plain HTTP/1.1 requests without a body)",
        w.name
    )))
}

/// The `protocol` axis of a workload: each name checked (h3 needs TLS); `[None]` when
/// it is not swept.
fn protocols_of(sw: &SweepDef, w: &Workload) -> Result<Vec<Option<Protocol>>, StudyError> {
    let Some(names) = &sw.protocol else {
        return Ok(vec![None]);
    };
    if names.is_empty() {
        return Err(invalid(
            "sweep.protocol needs at least one of \"h1\", \"h2\", \"h3\"",
        ));
    }
    let mut out = Vec::new();
    for n in names {
        let p = Protocol::parse(n).ok_or_else(|| {
            invalid(format!(
                "sweep.protocol: \"{n}\" is not one of \"h1\", \"h2\", \"h3\""
            ))
        })?;
        if p == Protocol::H3 && !w.load.wire.tls {
            return Err(invalid(format!(
                "workload '{}': sweep.protocol \"h3\" needs load.tls = true (QUIC always runs TLS 1.3)",
                w.name
            )));
        }
        if out.contains(&Some(p)) {
            return Err(invalid(format!("sweep.protocol names \"{n}\" twice")));
        }
        out.push(Some(p));
    }
    Ok(out)
}

/// A managed target whose kind has no HTTP/3 cannot run an h3 step: refused before
/// anything starts (an external one, `url = ...`, is taken at its word).
pub(super) fn check_h3_targets(
    cells: &[Cell],
    instances: &[Instance],
    targets: &[Target],
) -> Result<(), StudyError> {
    for c in cells.iter().filter(|c| c.protocol == Some(Protocol::H3)) {
        let t = &targets[instances[c.instance].target];
        if t.url.is_none() && !t.kind.supports_http3() {
            return Err(invalid(format!(
                "target '{}': sweep.protocol \"h3\" needs a kind that offers HTTP/3 (caddy, builtin); {} does not (limit the workload's targets)",
                t.name,
                t.kind.name()
            )));
        }
    }
    Ok(())
}
