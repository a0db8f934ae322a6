//! Reading one study or run from the store into the model.

use super::*;

/// Loads the report for `selector` from the store.
pub fn load(store: &Store, selector: Selector) -> Result<Report, ReportError> {
    let (title, study, runs) = match selector {
        Selector::Run(id) => {
            let run = store
                .run(id)
                .map_err(|e| not_found(e, || no_run(store, id)))?;
            let study = run.study.and_then(|s| store.study(s).ok());
            (format!("run {}: {}", run.id, run.target), study, vec![run])
        }
        Selector::Study(id) => {
            let study = store
                .study(id)
                .map_err(|e| not_found(e, || ReportError::UnknownStudy(id.0)))?;
            let runs = store.runs_of_study(id)?;
            (
                format!("study {}: {}", study.id, study.name),
                Some(study),
                runs,
            )
        }
    };
    let mut targets = Vec::with_capacity(runs.len());
    for run in &runs {
        targets.push(load_run(store, run)?);
    }
    if targets.iter().all(|t| t.steps.is_empty()) {
        return Err(ReportError::NoSteps(title));
    }
    Ok(Report {
        schema_version: SCHEMA_VERSION,
        title,
        study: study.map(|s| StudyInfo {
            id: s.id.0,
            name: s.name,
            status: s.status.as_str().to_string(),
            started_unix_ms: s.started_unix_ms,
        }),
        targets,
    })
}

/// An unknown run reads as "empty store" when the store holds no runs at all, because
/// that is the more useful thing to tell the user.
pub(super) fn no_run(store: &Store, id: RunId) -> ReportError {
    match store.list_runs() {
        Ok(runs) if runs.is_empty() => ReportError::EmptyStore,
        _ => ReportError::UnknownRun(id.0),
    }
}

pub(super) fn not_found(
    e: volley_store::StoreError,
    f: impl FnOnce() -> ReportError,
) -> ReportError {
    match e {
        volley_store::StoreError::NotFound { .. } => f(),
        other => ReportError::Store(other),
    }
}

pub(crate) fn load_run(store: &Store, run: &RunRow) -> Result<TargetReport, ReportError> {
    let rows = store.steps(run.id)?;
    let origin_ms = rows.iter().map(|r| r.started_unix_ms).min().unwrap_or(0);
    let mut steps = Vec::with_capacity(rows.len());
    let mut definitions: Vec<String> = Vec::new();
    // Open-loop steps (response time) and closed-loop steps (service time) are merged
    // apart: one curve per definition, never a mix.
    let mut merged = [(hist::new_hist(), 0usize), (hist::new_hist(), 0usize)];
    for row in &rows {
        let summary: StoredSummary = lenient(&row.summary);
        let closed_loop = summary.model.kind == "closed";
        if !summary.latency_definition.is_empty()
            && !definitions.contains(&summary.latency_definition)
        {
            definitions.push(summary.latency_definition.clone());
        }
        let step = load_step(store, row, &summary, origin_ms, closed_loop)?;
        if !step.generator_bound() {
            let kind = if closed_loop {
                HistogramKind::Service
            } else {
                HistogramKind::Response
            };
            let (into, count) = &mut merged[usize::from(closed_loop)];
            for blob in store.histograms(row.id)? {
                if blob.second.is_none() && blob.kind == kind {
                    let bad = |e: volley_metrics::MetricsError| ReportError::Histogram {
                        run: run.id.0,
                        step: row.index,
                        kind: kind.as_str(),
                        detail: e.to_string(),
                    };
                    let h = hist::decode(&blob.bytes).map_err(bad)?;
                    if !h.is_empty() {
                        hist::add(into, &h).map_err(bad)?;
                        *count += 1;
                    }
                }
            }
        }
        steps.push(step);
    }
    let percentile_curves = merged
        .iter()
        .zip(["response", "service"])
        .filter(|((h, _), _)| !h.is_empty())
        .map(|((h, n), kind)| PercentileCurve {
            kind: kind.to_string(),
            count: h.len(),
            steps_merged: *n,
            points: percentile_points(h),
        })
        .collect();
    one_protocol_is_no_dimension(&mut steps);
    // A users search's row answers its office; the others are rate searches.
    let (users_rows, rate_rows): (Vec<_>, Vec<_>) = store
        .capacities(run.id)?
        .into_iter()
        .partition(|r| crate::compare::unit_of(r) == "users");
    let searches = searches(&rate_rows, &steps);
    Ok(TargetReport {
        run_id: run.id.0,
        target: run.target.clone(),
        status: run.status.as_str().to_string(),
        environment: run.environment.clone(),
        latency_definitions: definitions,
        capacity: capacities(&steps),
        office: super::office::answers(&steps, &users_rows),
        searches,
        usl: usl_groups(&steps),
        repeats: repeat_groups(&steps),
        percentile_curves,
        steps,
    })
}

pub(super) fn load_step(
    store: &Store,
    row: &StepRow,
    s: &StoredSummary,
    origin_ms: i64,
    closed_loop: bool,
) -> Result<StepReport, ReportError> {
    let p = &row.parameters;
    let verdict: StoredVerdict = row.verdict.as_ref().map(lenient).unwrap_or_default();
    let headline = if closed_loop {
        "service_time"
    } else {
        "response_time"
    };
    let start_offset_s = (row.started_unix_ms - origin_ms) as f64 / 1e3;
    let (phases, injector_rows) = super::injected::read(&row.summary, headline);
    let (seconds, monitor) = series_of(store, row, start_offset_s)?;
    let text = |key: &str| p.extra.get(key).and_then(Value::as_str).map(str::to_string);
    Ok(StepReport {
        index: row.index,
        rate_rps: p.rate_rps,
        concurrency: p.concurrency,
        cpu_quota_cores: p.cpu_quota_cores,
        cores: p.cores.clone(),
        keepalive: p.keepalive,
        repeat: p.repeat,
        workload: text("workload"),
        variant: text("variant"),
        protocol: protocol_of(p.extra.get("protocol"), &row.summary),
        closed_loop,
        phase: text("phase"),
        pass: p
            .extra
            .get("pass")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok()),
        start_offset_s,
        wall_s: (row.finished_unix_ms - row.started_unix_ms).max(0) as f64 / 1e3,
        duration_s: s.duration_s,
        completed: s.requests.completed,
        ok: s.requests.ok,
        failed: s.requests.failed,
        censored: s.requests.censored,
        requests_per_s: s.throughput.requests_per_s,
        send_rate_rps: s.rates.achieved_send_per_s,
        reply_rate_rps: s.rates.reply_per_s,
        latency: s.latency.get(headline).copied().unwrap_or_default(),
        max_open_connections: s.connections_stats.as_ref().map(|c| c.max_open),
        cap_hits: s.connections_stats.as_ref().map_or(0, |c| c.cap_hits),
        label: label_of(row, s),
        sustainable: verdict.sustain.as_ref().map(|v| v.sustainable),
        reasons: verdict
            .sustain
            .as_ref()
            .map(|v| v.reasons.iter().map(reason_text).collect())
            .unwrap_or_default(),
        little_gap: verdict.little.map(|l| l.relative_gap),
        little_flagged: verdict.little.is_some_and(|l| l.flagged),
        throttled: verdict.throttled || s.throttling.as_ref().is_some_and(|t| t.nr_throttled > 0),
        machine_busy: verdict.machine_busy,
        probe_max_stall_ms: s
            .generator
            .as_ref()
            .and_then(|g| g.probe.as_ref())
            .map(|p| p.max_stall_ms),
        target_died: verdict.target_died.clone(),
        attempt: p
            .extra
            .get("attempt")
            .and_then(Value::as_u64)
            .map_or(0, |a| a as u32),
        resources: resources_of(s),
        seconds,
        monitor,
        injectors: p
            .extra
            .get("injectors")
            .and_then(Value::as_u64)
            .map(|k| k as u32),
        phases,
        injector_rows,
        office: super::office::read(row.verdict.as_ref(), &row.summary),
        notes: s.notes.clone(),
        wire: super::wire::read(&row.summary),
    })
}

/// The step's stored label ("server-bound", ...), else its generator verdict's (bench
/// runs stored before steps had labels).
fn label_of(row: &StepRow, s: &StoredSummary) -> Option<String> {
    row.label
        .clone()
        .or_else(|| {
            s.generator
                .as_ref()?
                .verdict
                .as_ref()
                .map(|v| v.label.clone())
        })
        .filter(|l| !l.is_empty())
        .map(|l| l.replace('_', "-"))
}

/// The server's resources over the step, when a monitor ran.
fn resources_of(s: &StoredSummary) -> Option<Resources> {
    s.monitor.as_ref().map(|m| Resources {
        cpu_user_pct: m.cpu_user_pct,
        cpu_sys_pct: m.cpu_sys_pct,
        max_rss_bytes: m.max_rss_bytes,
        mem_pct: m.mem_pct,
        tx_packets_per_s: m.tx_packets_per_s,
        tx_bytes_per_s: m.tx_bytes_per_s,
        // Same formula as volley_monitor::MonitorSummary::cpu_ms_per_1000_requests.
        cpu_ms_per_1000_requests: m.server_cpu_seconds.and_then(|cpu_s| {
            (s.requests.completed > 0).then(|| cpu_s / s.requests.completed as f64 * 1_000_000.0)
        }),
    })
}

/// The protocol a step spoke, as "h1", "h2" or "h3": the study's step parameter, else
/// a bench run's `summary.wire.protocol` ("http/1.1", "h2", "h2c", "h3").
fn protocol_of(param: Option<&Value>, summary: &Value) -> Option<String> {
    let raw = param
        .and_then(Value::as_str)
        .or_else(|| summary["wire"]["protocol"].as_str())?;
    Some(
        match raw.to_ascii_lowercase().as_str() {
            "h1" | "http/1.1" | "http/1.0" | "http1" => "h1",
            "h2" | "h2c" => "h2",
            "h3" => "h3",
            other => return Some(other.to_string()),
        }
        .to_string(),
    )
}

/// Protocols are a series dimension only where a run spoke more than one (a study's
/// protocol axis): with one (or none recorded), every step's protocol is cleared so
/// labels and colours read as before (so `volley compare` of an h1 run and an h2 run
/// meets their points; runs that spoke several meet protocol by protocol).
pub(super) fn one_protocol_is_no_dimension(steps: &mut [StepReport]) {
    let mut seen: Vec<String> = Vec::new();
    for s in steps.iter() {
        let p = s.protocol.clone().unwrap_or_else(|| "h1".to_string());
        if !seen.contains(&p) {
            seen.push(p);
        }
    }
    if seen.len() <= 1 {
        for s in steps.iter_mut() {
            s.protocol = None;
        }
    } else {
        // Unrecorded beside recorded: HTTP/1.1, volley's default.
        for s in steps.iter_mut() {
            s.protocol.get_or_insert_with(|| "h1".to_string());
        }
    }
}

/// A step's stored per-second load and monitor series, on the run's time axis.
fn series_of(
    store: &Store,
    row: &StepRow,
    start_offset_s: f64,
) -> Result<(Vec<SecondPoint>, Vec<MonitorPoint>), ReportError> {
    let mut seconds = Vec::new();
    let mut monitor = Vec::new();
    for point in store.series(row.id)? {
        match point.source {
            SeriesSource::Load => {
                let v = &point.values;
                let f = |k: &str| field(v, &[k]).unwrap_or(0.0);
                seconds.push(SecondPoint {
                    t_s: start_offset_s + point.second as f64,
                    completed: f("completed") as u64,
                    p50_ms: f("p50_ms"),
                    p99_ms: f("p99_ms"),
                    max_ms: f("max_ms"),
                });
            }
            SeriesSource::Monitor => {
                let v = &point.values;
                // t_ms is on the load's clock; without it, the sample index is the second.
                let t_ms = field(v, &["t_ms"]).unwrap_or(point.second as f64 * 1e3);
                let cpu = field(v, &["target", "cpu_user_pct"])
                    .zip(field(v, &["target", "cpu_sys_pct"]))
                    .map(|(u, s)| u + s);
                monitor.push(MonitorPoint {
                    t_s: start_offset_s + t_ms / 1e3,
                    cpu_pct: cpu,
                    rss_bytes: field(v, &["target", "rss_bytes"]).map(|b| b as u64),
                    tx_bytes_per_s: field(v, &["net", "tx_bytes_per_s"]),
                    rx_bytes_per_s: field(v, &["net", "rx_bytes_per_s"]),
                });
            }
        }
    }
    Ok((seconds, monitor))
}
