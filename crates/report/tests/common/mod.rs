//! Synthetic stores for the report tests, written through the `volley-store` API the way
//! docs/store-conventions.md says the study runner writes them.
#![allow(dead_code)]

use hdrhistogram::serialization::V2Serializer;
use serde_json::{json, Value};
use std::time::Duration;
use volley_analysis::{little::LittleCheck, sustain};
use volley_metrics::hist;
use volley_store::{
    CapacityRecord, HistogramBlob, HistogramKind, NewRun, NewStudy, RunId, RunKind, SeriesPoint,
    SeriesSource, Status, StepParameters, StepRecord, Store, StudyId,
};

/// Figures of one synthetic step.
pub struct Step {
    pub rate_rps: Option<f64>,
    pub concurrency: Option<u32>,
    pub cpu_quota_cores: Option<f64>,
    pub cores: Option<String>,
    pub reply_rps: f64,
    pub send_rps: f64,
    pub p99_ms: f64,
    pub max_open: u32,
    pub label: &'static str,
    pub sustainable: Option<bool>,
    pub closed: bool,
    /// "sweep" or "search".
    pub phase: &'static str,
}

/// A `volley_metrics::Summary`-shaped JSON with the fields the report reads.
pub fn summary(s: &Step, duration_s: f64) -> Value {
    let completed = (s.reply_rps * duration_s).round() as u64;
    let headline = if s.closed {
        "service_time"
    } else {
        "response_time"
    };
    let lat = json!({
        "definition": "x", "count": completed, "min_ms": s.p99_ms / 10.0, "mean_ms": s.p99_ms / 4.0,
        "stdev_ms": 0.1, "p50_ms": s.p99_ms / 5.0, "p90_ms": s.p99_ms / 2.0,
        "p99_ms": s.p99_ms, "p999_ms": s.p99_ms * 1.5, "p9999_ms": s.p99_ms * 2.0,
        "max_ms": s.p99_ms * 3.0
    });
    json!({
        "url": "http://127.0.0.1:1/", "method": "GET",
        "model": if s.closed { json!({"kind": "closed"}) } else {
            json!({"kind": "open", "rate_per_s": s.rate_rps, "arrival": "constant"}) },
        "latency_definition": if s.closed { "closed-loop service time = done - sent" }
            else { "response time = done - intended (coordinated-omission corrected)" },
        "duration_s": duration_s,
        "requests": {"sent": completed, "completed": completed, "ok": completed, "failed": 0,
                     "censored": 0, "non_2xx": 0},
        "throughput": {"requests_per_s": s.reply_rps, "ok_per_s": s.reply_rps,
                       "time_per_request_ms": 1.0, "time_per_request_all_ms": 1.0},
        "rates": {"offered_per_s": s.rate_rps, "scheduled_per_s": s.rate_rps,
                  "achieved_send_per_s": s.send_rps, "reply_per_s": s.reply_rps},
        "latency": { headline: lat },
        "connections_stats": {"max_open": s.max_open, "opened": s.max_open, "cap_hits": 0},
        "generator": {"verdict": {"label": s.label, "reason": "synthetic"}},
        "monitor": {"duration_s": duration_s, "cpu_user_pct": 40.0, "cpu_sys_pct": 20.0,
                    "server_cpu_seconds": 0.6 * duration_s, "max_rss_bytes": 10_485_760u64,
                    "mem_pct": 0.5, "tx_packets_per_s": 2.0 * s.reply_rps,
                    "tx_bytes_per_s": 1000.0 * s.reply_rps, "max_time_wait": 0}
    })
}

/// Latencies (us) spread up to `p99_ms * 3`, as a V2-serialised histogram.
pub fn histogram(p99_ms: f64, n: u64) -> Vec<u8> {
    let mut h = hist::new_hist();
    let top_us = (p99_ms * 1000.0) as u64;
    for i in 0..n {
        // 99% of the values below the p99, 1% above it.
        let v = if i % 100 == 99 {
            top_us + (i % 7 + 1) * top_us / 4
        } else {
            1 + (i % 99) * top_us / 99
        };
        h.record(v.max(1)).unwrap();
    }
    hist::encode(&mut V2Serializer::new(), &h).unwrap()
}

fn verdict(s: &Step) -> Option<Value> {
    let sustainable = s.sustainable?;
    let mut reasons = Vec::new();
    if !sustainable {
        reasons.push(sustain::Reason::ReplyRateShort {
            reply_rate_rps: s.reply_rps,
            required_rps: 0.99 * s.rate_rps.unwrap_or(0.0),
        });
        reasons.push(sustain::Reason::P99OverSlo {
            worst_p99: Duration::from_secs_f64(s.p99_ms / 1e3),
            window_index: 3,
            slo: Duration::from_millis(100),
        });
    }
    let v = sustain::Verdict {
        sustainable,
        reasons,
        bound: sustain::Bound::ServerBound,
        trend: None,
    };
    let little = LittleCheck {
        expected_in_flight: 10.0,
        observed_in_flight: 10.2,
        relative_gap: 0.02,
        flagged: false,
    };
    Some(json!({"sustain": v, "little": little, "throttled": false}))
}

/// Records `steps` as one run of `target` in `study`: 10 s on and 10 s rest per step,
/// per-second load series, monitor series and whole-step + per-second histograms.
pub fn record_run(
    store: &mut Store,
    study: Option<StudyId>,
    target: &str,
    steps: &[Step],
) -> RunId {
    record_run_with(store, study, target, steps, &[], Status::Complete)
}

/// [`record_run`] that also stores capacity search results (written after the steps,
/// as the runner writes them when a search ends) and ends the run with `status`.
pub fn record_run_with(
    store: &mut Store,
    study: Option<StudyId>,
    target: &str,
    steps: &[Step],
    searches: &[CapacityRecord],
    status: Status,
) -> RunId {
    record_run_tagged(store, study, target, steps, &[], searches, status)
}

/// [`record_run_with`] whose steps carry more stored parameters: `tags[i]` (a JSON
/// object; missing: none) is merged into step i's `extra` keys (`variant`, `protocol`),
/// except `repeat`, which sets its repeat index.
pub fn record_run_tagged(
    store: &mut Store,
    study: Option<StudyId>,
    target: &str,
    steps: &[Step],
    tags: &[Value],
    searches: &[CapacityRecord],
    status: Status,
) -> RunId {
    let run = store
        .begin_run(&NewRun {
            study,
            kind: RunKind::StudyStep,
            target: target.to_string(),
            parameters: json!({"workload": "synthetic"}),
            environment: json!({"kernel": "test", "server": target}),
        })
        .unwrap();
    let duration_s = 10.0;
    for (i, s) in steps.iter().enumerate() {
        let start = 1_700_000_000_000 + i as i64 * 20_000;
        let mut series = Vec::new();
        for sec in 0..10u32 {
            let wobble = if sec == 5 { 2.0 } else { 1.0 };
            series.push(SeriesPoint {
                second: sec,
                source: SeriesSource::Load,
                values: json!({"second": sec, "scheduled": s.rate_rps.unwrap_or(0.0) as u64,
                    "sent": s.send_rps as u64, "completed": s.reply_rps as u64,
                    "ok": s.reply_rps as u64, "errors": {},
                    "wire_bytes": 1000, "max_open": s.max_open, "cap_hits": 0,
                    "p50_ms": s.p99_ms / 5.0, "p99_ms": s.p99_ms * wobble,
                    "max_ms": s.p99_ms * 3.0 * wobble, "send_lag_p99_ms": 0.1,
                    "cpu_cores_used": 0.2, "cpu_pressure": 0.0, "label": s.label}),
            });
            series.push(SeriesPoint {
                second: sec,
                source: SeriesSource::Monitor,
                values: json!({"t_ms": (sec as u64 + 1) * 1000, "interval_ms": 1000,
                    "target": {"cpu_user_pct": 40.0 + sec as f64, "cpu_sys_pct": 20.0,
                        "rss_bytes": 10_485_760u64 + sec as u64 * 65_536, "processes": 1,
                        "threads": 2, "ctx_voluntary_per_s": 10.0,
                        "ctx_involuntary_per_s": 1.0, "open_fds": 20},
                    "system": {"run_queue": 1, "blocked": 0, "interrupts_per_s": 100.0,
                        "context_switches_per_s": 200.0, "cpu_us_pct": 30.0,
                        "cpu_sy_pct": 10.0, "cpu_id_pct": 60.0, "cpu_wa_pct": 0.0},
                    "net": {"interface": "lo", "rx_packets_per_s": s.reply_rps,
                        "tx_packets_per_s": 2.0 * s.reply_rps,
                        "rx_bytes_per_s": 100.0 * s.reply_rps,
                        "tx_bytes_per_s": 1000.0 * s.reply_rps},
                    "tcp": {"established": s.max_open, "time_wait": 0}}),
            });
        }
        let kind = if s.closed {
            HistogramKind::Service
        } else {
            HistogramKind::Response
        };
        let histograms = vec![
            HistogramBlob {
                second: None,
                kind,
                bytes: histogram(s.p99_ms, 2_000),
            },
            HistogramBlob {
                second: Some(0),
                kind,
                bytes: histogram(s.p99_ms, 200),
            },
        ];
        let mut extra = serde_json::Map::new();
        extra.insert("phase".into(), json!(s.phase));
        let mut repeat = 0;
        if let Some(Value::Object(tags)) = tags.get(i) {
            for (k, v) in tags {
                if k == "repeat" {
                    repeat = v.as_u64().unwrap_or(0) as u32;
                } else {
                    extra.insert(k.clone(), v.clone());
                }
            }
        }
        store
            .record_step(
                run,
                &StepRecord {
                    index: i as u32,
                    parameters: StepParameters {
                        rate_rps: s.rate_rps,
                        concurrency: s.concurrency,
                        cpu_quota_cores: s.cpu_quota_cores,
                        cores: s.cores.clone(),
                        keepalive: Some(true),
                        repeat,
                        extra,
                    },
                    summary: summary(s, duration_s),
                    verdict: verdict(s),
                    label: Some(s.label.to_string()),
                    started_unix_ms: start,
                    finished_unix_ms: start + 10_000,
                    series,
                    histograms,
                },
            )
            .unwrap();
    }
    for c in searches {
        store.record_capacity(run, c).unwrap();
    }
    store.finish_run(run, status).unwrap();
    run
}

/// A rate step.
pub fn rate_step(rate: f64, reply: f64, p99_ms: f64, label: &'static str, ok: bool) -> Step {
    Step {
        rate_rps: Some(rate),
        concurrency: None,
        cpu_quota_cores: None,
        cores: None,
        reply_rps: reply,
        send_rps: if label == "generator-bound" {
            0.9 * rate
        } else {
            rate
        },
        p99_ms,
        max_open: (rate / 20.0) as u32,
        label,
        sustainable: Some(ok),
        closed: false,
        phase: "sweep",
    }
}

/// A capacity search's step at `rate`: sustained (every request answered), or not
/// (four in five answered).
pub fn search_step(rate: f64, ok: bool) -> Step {
    let mut s = rate_step(
        rate,
        if ok { rate } else { 0.8 * rate },
        1.0,
        "server-bound",
        ok,
    );
    s.phase = "search";
    s
}

/// A stored search of `cell` that converged on 300 req/s [250, 350] in 4 steps over the
/// 70 s from `started_unix_ms`.
pub fn converged_search(cell: Value, started_unix_ms: i64) -> CapacityRecord {
    CapacityRecord {
        cell,
        capacity_rps: Some(300.0),
        ci_lo_rps: Some(250.0),
        ci_hi_rps: Some(350.0),
        confidence: 0.95,
        end: volley_store::SearchEnd::Converged,
        steps: 4,
        started_unix_ms,
        finished_unix_ms: started_unix_ms + 70_000,
        detail: json!({}),
    }
}

/// Study 1: a rate sweep 100..400 for `builtin` (saturates at 400) and `nginx` (its 400
/// step is generator-bound). Returns the study id.
pub fn rate_sweep(store: &mut Store) -> StudyId {
    let study = store
        .begin_study(&NewStudy {
            name: "rate-sweep".into(),
            file_text: "# synthetic".into(),
        })
        .unwrap();
    record_run(
        store,
        Some(study),
        "builtin",
        &[
            rate_step(100.0, 100.0, 2.0, "server-bound", true),
            rate_step(200.0, 200.0, 2.5, "server-bound", true),
            rate_step(300.0, 299.0, 4.0, "server-bound", true),
            rate_step(400.0, 350.0, 250.0, "server-bound", false),
        ],
    );
    record_run(
        store,
        Some(study),
        "nginx",
        &[
            rate_step(100.0, 100.0, 1.0, "server-bound", true),
            rate_step(200.0, 199.5, 1.2, "server-bound", true),
            rate_step(300.0, 300.0, 1.5, "server-bound", true),
            rate_step(400.0, 360.0, 3.0, "generator-bound", false),
        ],
    );
    store.finish_study(study, Status::Complete).unwrap();
    study
}

/// USL throughput with lambda = 1000 x quota, sigma = 0.05, kappa = 0.02.
pub fn usl_rps(n: f64, quota: f64) -> f64 {
    1000.0 * quota * n / (1.0 + 0.05 * (n - 1.0) + 0.02 * n * (n - 1.0))
}

/// Study 2: concurrency 1..8 x CPU cap {0.5, 1} x cores {"0", "0-1"} for `lighttpd`.
pub fn concurrency_grid(store: &mut Store) -> StudyId {
    let study = store
        .begin_study(&NewStudy {
            name: "concurrency-grid".into(),
            file_text: "# synthetic".into(),
        })
        .unwrap();
    let mut steps = Vec::new();
    for cores in ["0", "0-1"] {
        for quota in [0.5, 1.0] {
            for n in 1..=8u32 {
                let rps = usl_rps(n as f64, quota);
                steps.push(Step {
                    rate_rps: None,
                    concurrency: Some(n),
                    cpu_quota_cores: Some(quota),
                    cores: Some(cores.to_string()),
                    reply_rps: rps,
                    send_rps: rps,
                    p99_ms: n as f64 / quota,
                    max_open: n,
                    label: "server-bound",
                    sustainable: None,
                    closed: true,
                    phase: "sweep",
                });
            }
        }
    }
    record_run(store, Some(study), "lighttpd", &steps);
    store.finish_study(study, Status::Complete).unwrap();
    study
}

/// Study 3: `builtin` swept 100..400 then searched (result stored: 300 req/s, 95% CI
/// [250, 350], converged); `nginx` killed mid-search (search steps stored, no result).
pub fn search_study(store: &mut Store) -> StudyId {
    let study = store
        .begin_study(&NewStudy {
            name: "search".into(),
            file_text: "# synthetic".into(),
        })
        .unwrap();
    let search = search_step;
    // Steps start 20 s apart: the 4 sweep steps span 0..70 s, the 4 search steps 80..150 s.
    record_run_with(
        store,
        Some(study),
        "builtin",
        &[
            rate_step(100.0, 100.0, 2.0, "server-bound", true),
            rate_step(200.0, 200.0, 2.5, "server-bound", true),
            rate_step(300.0, 299.0, 4.0, "server-bound", true),
            rate_step(400.0, 350.0, 250.0, "server-bound", false),
            search(100.0, true),
            search(200.0, true),
            search(400.0, false),
            search(300.0, true),
        ],
        &[converged_search(
            json!({"target": "builtin", "instance": "builtin", "workload": null,
                   "concurrency": 16, "keepalive": true, "cpu_quota_cores": null,
                   "cores": null}),
            1_700_000_080_000,
        )],
        Status::Complete,
    );
    record_run_with(
        store,
        Some(study),
        "nginx",
        &[
            search(100.0, true),
            search(200.0, true),
            search(400.0, false),
        ],
        &[],
        Status::Incomplete,
    );
    store.finish_study(study, Status::Incomplete).unwrap();
    study
}

/// One step of [`interleaved_variants`]: who ran it and when.
struct Timed {
    target: &'static str,
    variant: Option<&'static str>,
    workload: &'static str,
    repeat: u32,
    duration_s: f64,
    reply_rps: f64,
    p99_ms: f64,
    start_ms: i64,
}

/// Study 4: closed-loop steps of `builtin`, and of `nginx` run plain and as variant
/// `tuned`, interleaved (builtin, nginx, nginx tuned, ...) over 3 repeats of two
/// workloads: `tiny` steps of 0.2 s (shorter than a second: the one stored second
/// holds a fifth of a second's requests) and `large` steps of 3.5 s (a half last
/// second). Each run's series has gaps where the others ran.
pub fn interleaved_variants(store: &mut Store) -> StudyId {
    let study = store
        .begin_study(&NewStudy {
            name: "interleaved-variants".into(),
            file_text: "# synthetic".into(),
        })
        .unwrap();
    let keys: [(&str, Option<&str>, f64); 3] = [
        ("builtin", None, 9_000.0),
        ("nginx", None, 8_000.0),
        ("nginx", Some("tuned"), 8_600.0),
    ];
    let mut timed = Vec::new();
    let mut start_ms = 1_700_000_000_000i64;
    for repeat in 0..3u32 {
        for (workload, duration_s, scale) in [("tiny", 0.2, 1.0), ("large", 3.5, 0.1)] {
            for (target, variant, rps) in keys {
                timed.push(Timed {
                    target,
                    variant,
                    workload,
                    repeat,
                    duration_s,
                    reply_rps: (rps + 150.0 * repeat as f64) * scale,
                    p99_ms: 1.0 + repeat as f64 * 0.1 + if variant.is_some() { 0.2 } else { 0.0 },
                    start_ms,
                });
                start_ms += (duration_s * 1000.0) as i64 + 2_000;
            }
        }
    }
    for target in ["builtin", "nginx"] {
        let run = store
            .begin_run(&NewRun {
                study: Some(study),
                kind: RunKind::StudyStep,
                target: target.to_string(),
                parameters: json!({}),
                environment: json!({"kernel": "test", "server": target}),
            })
            .unwrap();
        for (index, t) in timed.iter().filter(|t| t.target == target).enumerate() {
            let step = Step {
                rate_rps: None,
                concurrency: Some(8),
                cpu_quota_cores: None,
                cores: None,
                reply_rps: t.reply_rps,
                send_rps: t.reply_rps,
                p99_ms: t.p99_ms,
                max_open: 8,
                label: "server-bound",
                sustainable: None,
                closed: true,
                phase: "sweep",
            };
            let seconds = t.duration_s.ceil() as u32;
            let series = (0..seconds)
                .map(|sec| {
                    let covered = (t.duration_s - sec as f64).min(1.0);
                    let n = (t.reply_rps * covered).round() as u64;
                    SeriesPoint {
                        second: sec,
                        source: SeriesSource::Load,
                        values: json!({"second": sec, "sent": n, "completed": n, "ok": n,
                            "errors": {}, "p50_ms": t.p99_ms / 5.0, "p99_ms": t.p99_ms,
                            "max_ms": t.p99_ms * 3.0, "label": "server-bound"}),
                    }
                })
                .collect();
            let mut extra = serde_json::Map::new();
            extra.insert("phase".into(), json!("sweep"));
            extra.insert("workload".into(), json!(t.workload));
            if let Some(v) = t.variant {
                extra.insert("variant".into(), json!(v));
            }
            store
                .record_step(
                    run,
                    &StepRecord {
                        index: index as u32,
                        parameters: StepParameters {
                            rate_rps: None,
                            concurrency: Some(8),
                            cpu_quota_cores: None,
                            cores: None,
                            keepalive: Some(true),
                            repeat: t.repeat,
                            extra,
                        },
                        summary: summary(&step, t.duration_s),
                        verdict: None,
                        label: Some("server-bound".into()),
                        started_unix_ms: t.start_ms,
                        finished_unix_ms: t.start_ms + (t.duration_s * 1000.0) as i64,
                        series,
                        histograms: vec![HistogramBlob {
                            second: None,
                            kind: HistogramKind::Service,
                            bytes: histogram(t.p99_ms, 500),
                        }],
                    },
                )
                .unwrap();
        }
        store.finish_run(run, Status::Complete).unwrap();
    }
    store.finish_study(study, Status::Complete).unwrap();
    study
}

/// Study 5, seed 001 and 002 as tuning studies: `nginx` run as variants `default` and
/// `tuned`, each swept 100..400 req/s (default fails at 300, tuned at 400) and at CPU
/// quotas 0.5 and 1 on cores "0" (concurrency 4, tuned 20% faster); `builtin` speaks h1
/// and h2 (three closed-loop repeats each, h2 30% faster).
pub fn tuned_variants(store: &mut Store) -> StudyId {
    let study = store
        .begin_study(&NewStudy {
            name: "tuned-variants".into(),
            file_text: "# synthetic".into(),
        })
        .unwrap();
    let mut steps = Vec::new();
    let mut tags = Vec::new();
    for rate in [100.0, 200.0, 300.0, 400.0] {
        for (variant, fails_at) in [("default", 300.0), ("tuned", 400.0)] {
            let ok = rate < fails_at;
            let reply = if ok { rate } else { 0.8 * rate };
            steps.push(rate_step(
                rate,
                reply,
                if ok { 2.0 } else { 300.0 },
                "server-bound",
                ok,
            ));
            tags.push(json!({"variant": variant}));
        }
    }
    for quota in [0.5, 1.0] {
        for (variant, gain) in [("default", 1.0), ("tuned", 1.2)] {
            let rps = usl_rps(4.0, quota) * gain;
            steps.push(Step {
                rate_rps: None,
                concurrency: Some(4),
                cpu_quota_cores: Some(quota),
                cores: Some("0".into()),
                reply_rps: rps,
                send_rps: rps,
                p99_ms: 4.0 / quota,
                max_open: 4,
                label: "server-bound",
                sustainable: None,
                closed: true,
                phase: "sweep",
            });
            tags.push(json!({"variant": variant}));
        }
    }
    record_run_tagged(
        store,
        Some(study),
        "nginx",
        &steps,
        &tags,
        &[],
        Status::Complete,
    );
    let mut steps = Vec::new();
    let mut tags = Vec::new();
    for repeat in 0..3u32 {
        for (protocol, rps) in [("h1", 1000.0), ("h2", 1300.0)] {
            let rps = rps + 10.0 * repeat as f64;
            steps.push(Step {
                rate_rps: None,
                concurrency: Some(8),
                cpu_quota_cores: None,
                cores: None,
                reply_rps: rps,
                send_rps: rps,
                p99_ms: 2.0,
                max_open: 8,
                label: "server-bound",
                sustainable: None,
                closed: true,
                phase: "sweep",
            });
            tags.push(json!({"protocol": protocol, "repeat": repeat}));
        }
    }
    record_run_tagged(
        store,
        Some(study),
        "builtin",
        &steps,
        &tags,
        &[],
        Status::Complete,
    );
    store.finish_study(study, Status::Complete).unwrap();
    study
}
