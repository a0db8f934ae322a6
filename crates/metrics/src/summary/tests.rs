//! The summary's figures from known samples.

use super::*;
use crate::recorder::tests::ok;
use volley_engine::Sink;

pub(crate) fn info(model: Model, elapsed_ms: u64) -> RunInfo {
    RunInfo {
        url: "http://127.0.0.1:1/".into(),
        method: "GET".into(),
        model,
        threads: 1,
        connections: 2,
        streams_per_connection: 1,
        max_connections: 2,
        keep_alive: true,
        elapsed_ns: elapsed_ms * 1_000_000,
        connections_opened: 2,
        max_open_connections: 2,
        cap_hits: 0,
        stopped_early: false,
        cpu_ns: Some(elapsed_ms * 100_000),
        cpu_pressure: Some(0.0),
        cores: 1.0,
        notes: vec![],
        stalls: None,
    }
}

#[test]
fn ab_figures_from_known_samples() {
    let mut r = Recorder::new();
    // 100 requests of 10 ms each over 1 second (2 connections, closed loop).
    for i in 0..100u64 {
        r.record(&ok(10 + i * 10, 10));
    }
    let s = r.close(&info(Model::Closed, 1_000)).unwrap();
    assert_eq!(s.requests.completed, 100);
    assert_eq!(s.requests.ok, 100);
    assert_eq!(s.requests.failed, 0);
    assert!((s.throughput.requests_per_s - 100.0).abs() < 1e-9);
    // ab: concurrency x time / n = 2 x 1000 ms / 100 = 20 ms; across all = 10 ms.
    assert!((s.throughput.time_per_request_ms - 20.0).abs() < 1e-9);
    assert!((s.throughput.time_per_request_all_ms - 10.0).abs() < 1e-9);
    assert_eq!(s.bytes.wire_total, 10_000);
    assert!((s.bytes.transfer_kib_per_s - 10_000.0 / 1024.0).abs() < 1e-9);
    let p = &s.connection_times.processing;
    assert!((p.median_ms - 10.0).abs() < 0.02, "{p:?}");
    assert!((s.connection_times.waiting.median_ms - 5.0).abs() < 0.01);
    assert_eq!(s.connection_times.connect.max_ms, 0.0);
    assert_eq!(s.served_within.len(), 9);
    assert!(s.latency_definition.starts_with("closed-loop service time"));
    assert_eq!(s.status_codes.get("200"), Some(&100));
    assert_eq!(s.spectrum.last().map(|r| r.total_count), Some(100));
    assert!(s.spectrum.last().unwrap().inverse.is_none());
    assert_eq!(s.errors.len(), ErrorKind::ALL.len());
}

#[test]
fn open_loop_labels_late_generator() {
    let mut r = Recorder::new();
    // 100/s for 2 s, each sent 5 ms late: lag p99 5 ms > 1 ms.
    for i in 0..200u64 {
        let mut s = ok(10 * i + 20, 2);
        s.intended_ns = s.sent_ns - 5_000_000;
        r.record(&s);
    }
    let s = r
        .close(&info(
            Model::Open {
                rate_per_s: 100.0,
                arrival: "constant".into(),
            },
            2_000,
        ))
        .unwrap();
    assert_eq!(s.generator.verdict.label, Bound::GeneratorBound);
    assert!(s.notes.iter().any(|n| n.starts_with("GENERATOR-BOUND")));
    assert!(s.seconds.iter().all(|x| x.label == Bound::GeneratorBound));
    // Response time includes the lag: about 7 ms, service time 2 ms.
    assert!((s.latency["response_time"].p50_ms - 7.0).abs() < 0.02);
    assert!((s.latency["service_time"].p50_ms - 2.0).abs() < 0.01);
    assert!(s
        .latency_definition
        .contains("coordinated-omission corrected"));
}

#[test]
fn open_loop_on_schedule_is_server_bound() {
    let mut r = Recorder::new();
    for i in 0..300u64 {
        r.record(&ok(10 * i + 3, 2));
    }
    let s = r
        .close(&info(
            Model::Open {
                rate_per_s: 100.0,
                arrival: "constant".into(),
            },
            3_000,
        ))
        .unwrap();
    assert_eq!(
        s.generator.verdict.label,
        Bound::ServerBound,
        "{}",
        s.generator.verdict.reason
    );
    assert!((s.rates.achieved_send_per_s - 100.0).abs() < 0.01);
    assert_eq!(s.seconds.len(), 3);
    assert_eq!(s.seconds[1].sent, 100);
}

#[test]
fn censored_requests_are_noted() {
    let mut r = Recorder::new();
    let mut s = ok(500, 400);
    s.error = Some(ErrorKind::Timeout);
    r.record(&s);
    let mut f = ok(900, 300);
    f.error = Some(ErrorKind::InFlight);
    r.record(&f);
    r.record(&ok(950, 1));
    let sum = r.close(&info(Model::Closed, 1_000)).unwrap();
    assert_eq!(sum.requests.censored, 2);
    assert_eq!(sum.errors["timeout"], 1);
    // The in-flight request did not complete: not in ab's counts or rates.
    assert_eq!(sum.requests.completed, 2);
    assert_eq!(sum.requests.failed, 1);
    assert_eq!(sum.requests.in_flight, 1);
    assert!((sum.throughput.requests_per_s - 2.0).abs() < 1e-9);
    assert!(sum.notes.iter().any(|n| n.contains("lower bounds")));
    assert!(sum.latency["response_time"].max_ms >= 399.0);
    // ab's "Failed requests" holds the timeout, not the request still in flight:
    // the note says which is which, never "counted as failed" for both.
    let note = sum
        .notes
        .iter()
        .find(|n| n.contains("lower bounds"))
        .unwrap();
    assert!(
        note.starts_with("1 request(s) timed out (counted in Failed requests); 1 request(s) were still in flight when the run ended (neither complete nor failed)"),
        "{note}"
    );
}

#[test]
fn served_within_is_abs_total_in_a_closed_loop_and_response_time_in_an_open_one() {
    // Each request: 5 ms to connect, then 10 ms from send to done.
    let sample = |done_ms: u64| {
        let mut s = ok(done_ms, 10);
        s.connect_ns = 5_000_000;
        s.intended_ns -= 5_000_000;
        s.dispatched_ns = s.intended_ns;
        s
    };
    let mut r = Recorder::new();
    for i in 0..50u64 {
        r.record(&sample(20 + i * 15));
    }
    let closed = r.close(&info(Model::Closed, 1_000)).unwrap();
    let top = closed.served_within.last().unwrap().ms;
    assert!((top - 15.0).abs() < 0.02, "ab's total is 5 + 10 ms: {top}");
    assert!((top - closed.connection_times.total.max_ms).abs() < 0.02);
    assert!(closed
        .served_within_definition
        .starts_with("Total = Connect + Processing"));
    let mut r = Recorder::new();
    for i in 0..50u64 {
        r.record(&sample(20 + i * 15));
    }
    let open = r
        .close(&info(
            Model::Open {
                rate_per_s: 50.0,
                arrival: "constant".into(),
            },
            1_000,
        ))
        .unwrap();
    assert_eq!(open.served_within_definition, open.latency_definition);
    assert!((open.served_within.last().unwrap().ms - 15.0).abs() < 0.02);
}

#[test]
fn abs_time_per_request_counts_every_http2_stream() {
    let mut r = Recorder::new();
    for i in 0..100u64 {
        r.record(&ok(10 + i * 10, 10));
    }
    let mut run = info(Model::Closed, 1_000);
    run.streams_per_connection = 8;
    let s = r.close(&run).unwrap();
    assert_eq!(s.streams_per_connection, 8);
    // ab: concurrency x time / n = (2 x 8) x 1000 ms / 100 = 160 ms.
    assert!((s.throughput.time_per_request_ms - 160.0).abs() < 1e-9);
}

#[test]
fn warmup_is_excluded_from_counts_rates_seconds_and_verdict() {
    // Open loop at 100/s for 3 s, warm-up 1 s. The warm-up second is late by 20 ms
    // (a start-up transient) and hits the cap; the two measured seconds are on time.
    let mut r = Recorder::new().with_warmup(std::time::Duration::from_secs(1));
    for i in 0..300u64 {
        let mut s = ok(10 * i + 3, 2);
        if (5..100).contains(&i) {
            s.intended_ns -= 20_000_000;
            s.connect_ns = 50_000;
            r.cap_hit(s.intended_ns);
        }
        r.record(&s);
    }
    r.connections(900_000_000, 40);
    let mut run = info(
        Model::Open {
            rate_per_s: 100.0,
            arrival: "constant".into(),
        },
        3_000,
    );
    run.connections_opened = 45;
    run.cap_hits = 100;
    run.max_open_connections = 60;
    let s = r.close(&run).unwrap();
    assert_eq!(s.requests.completed, 200);
    assert!((s.duration_s - 2.0).abs() < 1e-9);
    assert!((s.throughput.requests_per_s - 100.0).abs() < 1e-9);
    assert!((s.rates.achieved_send_per_s - 100.0).abs() < 0.01);
    assert_eq!(s.latency["send_lag"].count, 200);
    assert_eq!(s.latency["send_lag"].max_ms, 0.0);
    assert_eq!(s.seconds.len(), 2);
    assert_eq!((s.seconds[0].sent, s.seconds[1].sent), (100, 100));
    assert_eq!(
        s.generator.verdict.label,
        Bound::ServerBound,
        "{}",
        s.generator.verdict.reason
    );
    assert_eq!(s.connections_stats.cap_hits, 0);
    assert_eq!(s.connections_stats.opened, 0);
    assert_eq!(
        s.connections_stats.max_open, 40,
        "carried over the boundary"
    );
    let w = s.warmup.unwrap();
    assert_eq!(
        (w.requests, w.cap_hits, w.connections_opened),
        (100, 95, 45)
    );
    assert!(s.notes.iter().any(|n| n.starts_with("warm-up 1s excluded")));
    assert!(!s.notes.iter().any(|n| n.contains("connection cap")));

    // The same samples without a warm-up: the transient makes it generator-bound.
    let mut r = Recorder::new();
    for i in 0..300u64 {
        let mut s = ok(10 * i + 3, 2);
        if (5..100).contains(&i) {
            s.intended_ns -= 20_000_000;
        }
        r.record(&s);
    }
    let s = r.close(&run).unwrap();
    assert_eq!(s.requests.completed, 300);
    assert!(s.warmup.is_none());
    assert_eq!(s.generator.verdict.label, Bound::GeneratorBound);
}

#[test]
fn empty_run_summarises_without_panicking() {
    let s = Recorder::new().close(&info(Model::Closed, 0)).unwrap();
    assert_eq!(s.requests.completed, 0);
    assert_eq!(s.throughput.requests_per_s, 0.0);
    assert!(s.spectrum.is_empty());
}

#[test]
fn a_run_mostly_of_failures_says_its_rate_is_not_the_servers() {
    let run = |failures: u64| {
        let mut r = Recorder::new();
        for i in 0..100u64 {
            let mut s = ok(10 + i * 10, 2);
            if i < failures {
                s.status = 503;
                s.error = Some(ErrorKind::Status);
            }
            r.record(&s);
        }
        r.close(&info(Model::Closed, 1_000)).unwrap()
    };
    let s = run(70);
    let note = s.mostly_failed().expect("70 of 100 failed");
    assert!(
        note.starts_with("most requests failed (70 of 100; status: 70)")
            && note.ends_with("30.00 request(s) per second succeeded"),
        "{note}"
    );
    // Half is not most; none succeeded is the caller's "no request succeeded".
    assert_eq!(run(50).mostly_failed(), None);
    assert_eq!(run(100).mostly_failed(), None);
    assert_eq!(run(0).mostly_failed(), None);
}

/// The whole run's wait for a CPU is its seconds' run delay over the seconds that
/// measured it (a second without the reading counts neither way), and unknown when
/// none did: the closed-loop rule then falls back on CPU pressure.
#[test]
fn the_runs_wait_for_a_cpu_is_its_measured_seconds_mean() {
    let mut r = Recorder::new();
    for i in 0..10u64 {
        r.record(&ok(10 + i * 10, 10));
    }
    let s = r.close(&info(Model::Closed, 1_000)).unwrap();
    let with = |w: Option<f64>| SecondSummary {
        pacer_wait_ms: w,
        ..s.seconds[0].clone()
    };
    let seconds = [with(Some(10.0)), with(None), with(Some(30.0))];
    let share = super::close::cpu_wait_share(&seconds).unwrap();
    assert!((share - 0.02).abs() < 1e-12, "{share}");
    assert_eq!(super::close::cpu_wait_share(&[with(None)]), None);
    assert_eq!(super::close::cpu_wait_share(&[]), None);
}
