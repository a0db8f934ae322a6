//! One step: warm-up, the measured load (engine + recorders + monitor), the judgement, and
//! the [`StepRecord`] written to the store (shape: docs/store-conventions.md).

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::serialization::V2DeflateSerializer;
use serde_json::{json, Value};
use volley_analysis::{little, sustain};
use volley_engine::{
    Arrival, HttpVersion, ListSourceFactory, Live, LoadConfig, LoadModel, Request, RequestTemplate,
    Sample, Sink, StatusRange, StopCondition, TlsTarget, Wire,
};
use volley_metrics::{hist, resources, Metric, Model, Recorder, RunInfo, Summary};
use volley_monitor::{Monitor, MonitorConfig, ProcessScope};
use volley_store::{HistogramBlob, HistogramKind, SeriesPoint, SeriesSource};
use volley_targets::ThrottleStats;

use crate::plan::{Cell, Plan, Workload};

/// What the step needs to know about its target instance.
pub(crate) struct TargetView<'a> {
    pub addr: SocketAddr,
    /// The CA to trust for an HTTPS target volley started.
    pub ca_file: Option<std::path::PathBuf>,
    pub pid: Option<u32>,
    pub procs_file: Option<std::path::PathBuf>,
    pub throttle: &'a dyn Fn() -> Option<ThrottleStats>,
}

/// The measured step, ready for the store.
pub(crate) struct Measured {
    pub summary: Summary,
    pub summary_json: Value,
    pub verdict: Value,
    pub label: &'static str,
    /// Rate steps: whether the step was sustainable.
    pub sustainable: Option<bool>,
    pub series: Vec<SeriesPoint>,
    pub histograms: Vec<HistogramBlob>,
}

/// Discards samples: the warm-up is load, not measurement.
struct Discard;

impl Sink for Discard {
    fn record(&mut self, _sample: &Sample) {}
}

/// The engine configuration of one step.
pub(crate) fn load_config(
    w: &Workload,
    cell: &Cell,
    rate: Option<f64>,
    addr: SocketAddr,
    stop: StopCondition,
    stop_flag: Arc<AtomicBool>,
) -> Result<LoadConfig, String> {
    let host = addr.to_string();
    let mut built: Vec<Request> = Vec::with_capacity(w.paths.len());
    for (i, p) in w.paths.iter().enumerate() {
        let mut tpl = RequestTemplate::new(&w.method, p, &host).keep_alive(cell.keepalive);
        for (n, v) in &w.headers {
            tpl = tpl.header(n, v);
        }
        if let Some(b) = &w.body {
            tpl = tpl.body(b.clone());
        }
        built.push(
            tpl.build(i as u32)
                .map_err(|e| format!("bad request: {e}"))?,
        );
    }
    let source = ListSourceFactory::new(built, w.order.clone())
        .map_err(|e| format!("bad request list: {e}"))?;
    let model = match rate {
        Some(rate) => LoadModel::Open {
            rate,
            arrival: w.load.arrival,
            seed: w.load.seed,
        },
        None => LoadModel::Closed,
    };
    Ok(LoadConfig {
        addr,
        threads: w.load.threads as usize,
        connections: cell.concurrency as usize,
        max_connections: w.load.max_connections.max(cell.concurrency) as usize,
        keep_alive: cell.keepalive,
        model,
        stop,
        timeout: w.load.timeout,
        connect_timeout: w.load.timeout.min(Duration::from_secs(10)),
        accept_status: StatusRange::default(),
        source: Arc::new(source),
        stop_flag,
    })
}

/// The engine's protocol stack for a workload against a target: TLS trusting the
/// target's own CA (or any certificate with `insecure`), the name checked being the
/// address (the throw-away certificates name 127.0.0.1 and ::1), HTTP/1.1 or h2.
///
/// Compression is asked by the Accept-Encoding header the plan adds; the engine's body
/// check (`Wire::body`) is left at its default, so bodies are counted as they came off
/// the wire and not decoded here: the targets' start-up probe is what verified the
/// encoding is really applied.
pub(crate) fn wire_for(w: &Workload, addr: SocketAddr, ca_file: Option<&std::path::Path>) -> Wire {
    let def = &w.load.wire;
    let tls = def.tls.then(|| TlsTarget {
        client: volley_engine::volley_tls::ClientTls {
            insecure: def.insecure,
            ca_file: ca_file.map(std::path::Path::to_path_buf),
            ..Default::default()
        },
        server_name: addr.ip().to_string(),
    });
    Wire {
        tls,
        http: match def.h2_streams {
            Some(streams) => HttpVersion::H2 { streams },
            None => HttpVersion::Http1,
        },
        ..Default::default()
    }
}

/// Runs one step against `target`. `rate` is the offered rate of an open-loop step.
pub(crate) fn run_step(
    w: &Workload,
    cell: &Cell,
    rate: Option<f64>,
    plan: &Plan,
    target: &TargetView<'_>,
    stop_flag: &Arc<AtomicBool>,
    live: &Live,
) -> Result<Measured, String> {
    let (timing, rule) = (&plan.timing, &plan.rule);
    let wire = wire_for(w, target.addr, target.ca_file.as_deref());
    if !timing.warmup.is_zero() {
        let warm = StopCondition {
            requests: None,
            duration: Some(timing.warmup),
        };
        let cfg = load_config(w, cell, rate, target.addr, warm, Arc::clone(stop_flag))?;
        volley_engine::run_with(&cfg, &wire, |_| Discard, &Live::new())
            .map_err(|e| format!("warm-up: {e}"))?;
    }
    let stop = StopCondition {
        requests: timing.requests,
        duration: if rate.is_some() {
            timing.rate_duration
        } else {
            timing.duration
        },
    };
    let cfg = load_config(w, cell, rate, target.addr, stop, Arc::clone(stop_flag))?;
    let throttle0 = (target.throttle)();
    let cpu0 = resources::process_cpu_ns();
    let psi0 = resources::cpu_pressure_some_us();
    let origin = Instant::now();
    let scope = match (target.pid, &target.procs_file) {
        (Some(pid), Some(p)) => ProcessScope::Cgroup {
            root_pid: pid,
            procs_file: p.clone(),
        },
        (Some(pid), None) => ProcessScope::Tree { root_pid: pid },
        _ => ProcessScope::None,
    };
    // A monitor that cannot start (no /proc) leaves the step without server figures,
    // which is recorded by the absence of the "monitor" key, not an error.
    let monitor = Monitor::start(MonitorConfig::new(scope, origin)).ok();
    let outcome = volley_engine::run_with(&cfg, &wire, Recorder::for_worker, live);
    let report = monitor.map(Monitor::finish);
    let outcome = outcome.map_err(|e| e.to_string())?;
    let throttle1 = (target.throttle)();
    let wall_ns = origin.elapsed().as_nanos().max(1) as f64;
    let cpu_ns = match (cpu0, resources::process_cpu_ns()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let cpu_pressure = match (psi0, resources::cpu_pressure_some_us()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 * 1e3 / wall_ns),
        _ => None,
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = outcome.sinks.len();
    let mut notes = Vec::new();
    if outcome.stopped_early {
        notes.push("interrupted: the step covers what was measured until then; requests in flight were recorded as censored".to_string());
    }
    let info = RunInfo {
        url: format!(
            "{}://{}{}",
            if wire.tls.is_some() { "https" } else { "http" },
            target.addr,
            w.paths[0]
        ),
        method: w.method.clone(),
        model: match cfg.model {
            LoadModel::Closed => Model::Closed,
            LoadModel::Open { rate, arrival, .. } => Model::Open {
                rate_per_s: rate,
                arrival: match arrival {
                    Arrival::Constant => "constant".into(),
                    Arrival::Poisson => "poisson".into(),
                },
            },
        },
        threads: workers,
        connections: cfg.connections,
        max_connections: cfg.max_connections,
        keep_alive: cfg.keep_alive,
        elapsed_ns: outcome.elapsed_ns,
        connections_opened: outcome.connections_opened,
        max_open_connections: outcome.max_open_connections,
        cap_hits: outcome.cap_hits,
        stopped_early: outcome.stopped_early,
        cpu_ns,
        cpu_pressure,
        cores: workers.min(cpus).max(1) as f64,
        notes,
    };
    let mut merged = Recorder::merge_all(outcome.sinks).map_err(|e| e.to_string())?;
    merged.finish();
    let histograms = histograms(&merged).map_err(|e| e.to_string())?;
    let summary = merged.close(&info).map_err(|e| e.to_string())?;

    // Judgement.
    let windows = judged_windows(&summary);
    let in_flight = in_flight_per_second(&summary);
    let in_flight_w: Vec<f64> = in_flight.iter().take(windows).copied().collect();
    let mean_in_flight = if in_flight_w.is_empty() {
        0.0
    } else {
        in_flight_w.iter().sum::<f64>() / in_flight_w.len() as f64
    };
    let headline = if rate.is_some() {
        "response_time"
    } else {
        "service_time"
    };
    let mean_latency_ms = summary.latency.get(headline).map_or(0.0, |l| l.mean_ms);
    let little = little::check(
        mean_in_flight,
        summary.throughput.requests_per_s,
        Duration::from_secs_f64(mean_latency_ms.max(0.0) / 1e3),
    )
    .ok();
    let throttling = match (throttle0, throttle1) {
        (Some(a), Some(b)) => Some(b.since(&a)),
        _ => None,
    };
    let throttled = throttling.is_some_and(|t| t.nr_throttled > 0);
    let (sustain_verdict, label) = match rate {
        Some(rate) => {
            let stats = step_stats(&summary, rate, windows, in_flight_w);
            let v = sustain::judge(&stats, rule);
            let label = match v.bound {
                sustain::Bound::ServerBound => "server-bound",
                sustain::Bound::GeneratorBound => "generator-bound",
                sustain::Bound::Inconclusive => "inconclusive",
            };
            (Some(v), label)
        }
        None => (None, summary.generator.verdict.label.name()),
    };
    let sustainable = sustain_verdict.as_ref().map(|v| v.sustainable);
    let mut verdict = json!({ "little": little, "throttled": throttled });
    if let Some(v) = &sustain_verdict {
        verdict["sustain"] = serde_json::to_value(v).unwrap_or(Value::Null);
    }
    let mut summary_json = serde_json::to_value(&summary).map_err(|e| e.to_string())?;
    if let Some(r) = &report {
        summary_json["monitor"] = serde_json::to_value(&r.summary).unwrap_or(Value::Null);
    }
    if let Some(t) = throttling {
        summary_json["throttling"] = json!({
            "nr_periods": t.nr_periods,
            "nr_throttled": t.nr_throttled,
            "throttled_usec": t.throttled_us,
        });
    }
    let mut series: Vec<SeriesPoint> = summary
        .seconds
        .iter()
        .map(|s| SeriesPoint {
            second: s.second as u32,
            source: SeriesSource::Load,
            values: serde_json::to_value(s).unwrap_or(Value::Null),
        })
        .collect();
    if let Some(r) = &report {
        series.extend(r.samples.iter().enumerate().map(|(i, s)| SeriesPoint {
            second: i as u32,
            source: SeriesSource::Monitor,
            values: serde_json::to_value(s).unwrap_or(Value::Null),
        }));
    }
    Ok(Measured {
        summary,
        summary_json,
        verdict,
        label,
        sustainable,
        series,
        histograms,
    })
}

/// Whole-step and per-second histograms of every kind, V2-serialised.
fn histograms(r: &Recorder) -> Result<Vec<HistogramBlob>, volley_metrics::MetricsError> {
    let mut ser = V2DeflateSerializer::new();
    let mut out = Vec::new();
    let kinds = [
        (Metric::Response, HistogramKind::Response),
        (Metric::Service, HistogramKind::Service),
        (Metric::Ttfb, HistogramKind::Ttfb),
        (Metric::Connect, HistogramKind::Connect),
        (Metric::SendLag, HistogramKind::SendLag),
    ];
    for (metric, kind) in kinds {
        let mut whole = hist::new_hist();
        for s in r.closed_seconds() {
            let h = s.hist(metric)?;
            hist::add(&mut whole, &h)?;
            // A closed loop's service-time second shares the response-time bytes
            // (intended = sent); the store keeps every kind readable on its own.
            let shared = metric == Metric::Service && s.service_is_response;
            let stored = if shared { Metric::Response } else { metric };
            out.push(HistogramBlob {
                second: Some(s.second as u32),
                kind,
                bytes: s.hists[stored as usize].clone(),
            });
        }
        out.push(HistogramBlob {
            second: None,
            kind,
            bytes: hist::encode(&mut ser, &whole)?,
        });
    }
    Ok(out)
}

/// Windows to judge: the whole seconds of the step (a last partial second holds the
/// censored tail and too few arrivals to judge).
fn judged_windows(s: &Summary) -> usize {
    whole_windows(s.duration_s, s.seconds.len())
}

/// Share of a one-second window that must have been measured for it to count as whole.
/// A 3 s step ends a millisecond or two early by the engine's clock (2.998 s): its last
/// second is still a full window, and flooring would drop it (and with it the step's
/// judgement: three windows are the minimum).
const WHOLE_WINDOW_SHARE: f64 = 0.95;

/// Whole windows in a step that lasted `duration_s` and recorded `seconds` windows.
pub(crate) fn whole_windows(duration_s: f64, seconds: usize) -> usize {
    if !(duration_s.is_finite() && duration_s > 0.0) {
        return seconds.min(1);
    }
    let whole = (duration_s + (1.0 - WHOLE_WINDOW_SHARE)).floor() as usize;
    whole.clamp(1, seconds.max(1)).min(seconds)
}

/// Requests in flight at the end of each second: sent so far minus finished so far.
pub(crate) fn in_flight_per_second(s: &Summary) -> Vec<f64> {
    let (mut sent, mut done) = (0u64, 0u64);
    s.seconds
        .iter()
        .map(|x| {
            sent += x.sent;
            done += x.completed;
            sent.saturating_sub(done) as f64
        })
        .collect()
}

fn step_stats(s: &Summary, rate: f64, windows: usize, in_flight: Vec<f64>) -> sustain::StepStats {
    let sent = s.requests.sent.max(1) as f64;
    sustain::StepStats {
        offered_rate_rps: rate,
        send_rate_rps: s.rates.achieved_send_per_s,
        reply_rate_rps: s.rates.reply_per_s,
        error_share: (s.requests.failed as f64 / sent).min(1.0),
        p99_per_window: s
            .seconds
            .iter()
            .take(windows)
            .map(|x| Duration::from_secs_f64(x.p99_ms.max(0.0) / 1e3))
            .collect(),
        in_flight_per_window: in_flight,
        window: Duration::from_secs(1),
        send_lag_p99: s
            .latency
            .get("send_lag")
            .map(|l| Duration::from_secs_f64(l.p99_ms.max(0.0) / 1e3)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cold_figures_come_from_the_one_sample() {
        let s = Sample {
            intended_ns: 1_000_000,
            sent_ns: 1_000_000,
            first_byte_ns: 4_000_000,
            done_ns: 5_000_000,
            connect_ns: 1_700_000,
            tls_handshake_ns: 1_500_000,
            status: 200,
            wire_bytes: 900,
            body_bytes: 700,
            wire_body_bytes: 700,
            error: None,
            request_index: 0,
        };
        let c = cold_figures(&s, Duration::from_millis(30));
        assert_eq!(c.ttfb_ms, 3.0);
        assert_eq!(c.response_ms, 4.0);
        assert_eq!(c.connect_ms, 0.2);
        assert_eq!(c.tls_handshake_ms, 1.5);
        assert_eq!(c.since_spawn_ms, 34.0);
        assert_eq!((c.status, c.error), (200, None));
    }

    #[test]
    fn a_step_ending_a_hair_early_keeps_its_last_window() {
        assert_eq!(whole_windows(2.998, 3), 3);
        assert_eq!(whole_windows(2.94, 3), 2, "6% short is a partial window");
        assert_eq!(
            whole_windows(3.5, 4),
            3,
            "the partial fourth second is left out"
        );
        assert_eq!(whole_windows(30.0, 31), 30);
        assert_eq!(whole_windows(0.4, 1), 1);
        assert_eq!(whole_windows(2.0, 0), 0);
        assert_eq!(whole_windows(f64::NAN, 2), 1);
    }
}

/// The first request after a target started, timed on its own (seed 002's cold TTFB).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ColdRequest {
    /// First byte minus sent, ms.
    pub ttfb_ms: f64,
    /// TCP connect alone (TLS handshake excluded), ms.
    pub connect_ms: f64,
    /// TLS handshake, ms (0 without TLS).
    pub tls_handshake_ms: f64,
    /// Done minus sent, ms.
    pub response_ms: f64,
    /// From just before the server process was spawned to the first byte, ms (the
    /// engine's own start-up, well under a millisecond, is inside it).
    pub since_spawn_ms: f64,
    /// Status (0 when none came).
    pub status: u16,
    /// The error kind, if it failed.
    pub error: Option<&'static str>,
}

/// Keeps the one sample of the cold request.
struct FirstSample(Arc<std::sync::Mutex<Option<Sample>>>);

impl Sink for FirstSample {
    fn record(&mut self, sample: &Sample) {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(*sample);
        }
    }
}

/// Sends exactly one request for the workload's first path on one fresh connection and
/// returns its timings. `spawned` is the target's `started_at`.
pub(crate) fn cold_request(
    w: &Workload,
    cell: &Cell,
    target: &TargetView<'_>,
    spawned: Instant,
    stop_flag: &Arc<AtomicBool>,
) -> Result<ColdRequest, String> {
    let mut one = w.clone();
    one.paths.truncate(1);
    one.order = volley_engine::Order::Same;
    let single = Cell {
        concurrency: 1,
        rate: None,
        ..cell.clone()
    };
    let stop = StopCondition {
        requests: Some(1),
        duration: None,
    };
    let cfg = load_config(
        &one,
        &single,
        None,
        target.addr,
        stop,
        Arc::clone(stop_flag),
    )?;
    let wire = wire_for(w, target.addr, target.ca_file.as_deref());
    let slot = Arc::new(std::sync::Mutex::new(None));
    let before = Instant::now();
    volley_engine::run_with(
        &cfg,
        &wire,
        |_| FirstSample(Arc::clone(&slot)),
        &Live::new(),
    )
    .map_err(|e| format!("cold request: {e}"))?;
    let sample = slot
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .ok_or("cold request: the engine recorded no sample")?;
    Ok(cold_figures(
        &sample,
        before.saturating_duration_since(spawned),
    ))
}

/// The cold request's figures from its sample; `engine_start` is how long after the
/// spawn the engine run began (its clock's origin, to within its start-up).
pub(crate) fn cold_figures(s: &Sample, engine_start: Duration) -> ColdRequest {
    let ms = |ns: u64| ns as f64 / 1e6;
    ColdRequest {
        ttfb_ms: s.ttfb_ns().map_or(f64::NAN, ms),
        // The engine's connect time includes the handshake (time to a usable
        // connection, as ab counts it): the TCP connect alone is the difference.
        connect_ms: ms(s.connect_ns.saturating_sub(s.tls_handshake_ns)),
        tls_handshake_ms: ms(s.tls_handshake_ns),
        response_ms: ms(s.service_ns()),
        since_spawn_ms: engine_start.as_secs_f64() * 1e3 + ms(s.first_byte_ns),
        status: s.status,
        error: s.error.map(|e| e.name()),
    }
}
