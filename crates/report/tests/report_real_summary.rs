//! Guards the model against drift from the recorder: a real `volley_metrics::Summary`
//! (closed from a real `Recorder`) stored as the study runner stores it must come back
//! with the same figures.

use volley_engine::{Sample, Sink};
use volley_metrics::{Model, Recorder, RunInfo};
use volley_report::{load, Selector};
use volley_store::{NewRun, RunKind, SeriesPoint, SeriesSource, StepParameters, StepRecord, Store};

#[test]
fn a_recorder_summary_reads_back_with_the_same_figures() {
    let mut rec = Recorder::new();
    // 300 requests at 100/s over 3 s; service 2..4 ms, send lag 50 us.
    for i in 0..300u64 {
        let intended = i * 10_000_000;
        let sent = intended + 50_000;
        let service = 2_000_000 + (i % 3) * 1_000_000;
        rec.record(&Sample {
            intended_ns: intended,
            dispatched_ns: sent,
            sent_ns: sent,
            first_byte_ns: sent + 1_000_000,
            done_ns: sent + service,
            connect_ns: 0,
            tls_handshake_ns: 0,
            status: 200,
            wire_bytes: 200,
            body_bytes: 100,
            wire_body_bytes: 100,
            error: None,
            request_index: 0,
        });
    }
    let summary = rec
        .close(&RunInfo {
            url: "http://127.0.0.1:1/".into(),
            method: "GET".into(),
            model: Model::Open {
                rate_per_s: 100.0,
                arrival: "constant".into(),
            },
            threads: 1,
            connections: 4,
            streams_per_connection: 1,
            max_connections: 16,
            keep_alive: true,
            elapsed_ns: 3_000_000_000,
            connections_opened: 4,
            max_open_connections: 4,
            cap_hits: 0,
            stopped_early: false,
            cpu_ns: None,
            cpu_pressure: None,
            cores: 1.0,
            notes: Vec::new(),
            stalls: None,
        })
        .unwrap();
    let mut store = Store::open_in_memory().unwrap();
    let run = store
        .begin_run(&NewRun {
            study: None,
            kind: RunKind::Bench,
            target: "builtin".into(),
            parameters: serde_json::json!({}),
            environment: serde_json::json!({}),
        })
        .unwrap();
    let series = summary
        .seconds
        .iter()
        .map(|s| SeriesPoint {
            second: s.second as u32,
            source: SeriesSource::Load,
            values: serde_json::to_value(s).unwrap(),
        })
        .collect();
    store
        .record_step(
            run,
            &StepRecord {
                index: 0,
                parameters: StepParameters {
                    rate_rps: Some(100.0),
                    ..StepParameters::default()
                },
                summary: serde_json::to_value(&summary).unwrap(),
                verdict: None,
                label: None,
                started_unix_ms: 0,
                finished_unix_ms: 3_000,
                series,
                histograms: Vec::new(),
            },
        )
        .unwrap();

    let report = load(&store, Selector::Run(run)).unwrap();
    let t = &report.targets[0];
    assert!(!t.has_closed_loop());
    assert_eq!(t.latency_definitions.len(), 1);
    assert_eq!(t.latency_definitions[0], summary.latency_definition);
    let s = &t.steps[0];
    let headline = &summary.latency["response_time"];
    assert_eq!(s.completed, 300);
    assert_eq!(s.ok, 300);
    assert_eq!(s.duration_s, summary.duration_s);
    assert_eq!(s.requests_per_s, summary.throughput.requests_per_s);
    assert_eq!(s.reply_rate_rps, summary.rates.reply_per_s);
    assert_eq!(s.send_rate_rps, Some(summary.rates.achieved_send_per_s));
    assert_eq!(s.latency.p99_ms, headline.p99_ms);
    assert_eq!(s.latency.mean_ms, headline.mean_ms);
    assert_eq!(s.latency.max_ms, headline.max_ms);
    assert!(s.latency.p99_ms > 3.0, "p99 is read, not defaulted");
    assert_eq!(s.max_open_connections, Some(4));
    // No stored label: the summary's own generator verdict is used.
    assert_eq!(
        s.label.as_deref(),
        Some(summary.generator.verdict.label.label())
    );
    assert_eq!(s.seconds.len(), summary.seconds.len());
    for (a, b) in s.seconds.iter().zip(&summary.seconds) {
        assert_eq!(a.p99_ms, b.p99_ms);
        assert_eq!(a.completed, b.completed);
    }
}
