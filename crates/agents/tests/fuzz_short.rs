//! Seeded short run of the `bus_messages` fuzz target (`fuzz/fuzz_targets/`): the same
//! harness libFuzzer drives (`volley_agents::fuzzing::bus_messages`), fed the committed
//! corpus (one valid message of each kind, written by [`seeds`] with `VOLLEY_BLESS=1`),
//! every regression input and seeded mutations of them (`fuzz/short_run.rs`, shared with
//! the server's and the office's short runs). A panic in the harness (a crash, or one of
//! its assertions) fails the test; the long runs are `cargo +nightly fuzz run` (see
//! fuzz/README.md), or `VOLLEY_FUZZ_RUNS=N` here.

#[path = "../../../fuzz/short_run.rs"]
mod short_run;

use serde_bytes::ByteBuf;
use volley_agents::fuzzing::{bus_messages, fuzz_credentials, NONCE};
use volley_agents::load::LoadSpec;
use volley_agents::msg::{self, *};
use volley_agents::share::Share;

const TARGET: &str = "bus_messages";

/// One valid message of each kind, encoded.
fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let share = Share {
        index: 0,
        of: 2,
        requests: Some(100),
        rate_milli_rps: Some(50_000),
        connections: 2,
        duration_ms: Some(2_000),
    };
    let load = LoadSpec {
        addr: "127.0.0.1:8080".into(),
        method: "GET".into(),
        paths: vec!["/a".into(), "/b".into()],
        headers: vec![("Accept".into(), "*/*".into())],
        order: "weighted".into(),
        block: 1,
        weights: vec![1.0, 3.0],
        seed: 7,
        keep_alive: true,
        threads: 1,
        arrival: "poisson".into(),
        timeout_ms: 1_000,
        warmup_ms: 0,
    };
    let a = Assignment {
        proto: PROTO,
        run: "r1".into(),
        share,
        t0_ns: 1_700_000_000_000_000_000,
        offset_ns: -1_000,
        delay_ms: 0,
        load: Some(load),
        agent: "a".into(),
        nonce: NONCE.into(),
    };
    let body = msg::encode(&a).unwrap();
    let signed = SignedAssignment {
        proto: PROTO,
        mac: fuzz_credentials().sign(&body).unwrap().into(),
        body: body.into(),
    };
    let mut h = volley_metrics::hist::new_hist();
    h.record_n(1_500, 40).unwrap();
    let mut ser = hdrhistogram::serialization::V2Serializer::new();
    let bytes = volley_metrics::hist::encode(&mut ser, &h).unwrap();
    let counters = Counters {
        requests: 40,
        ok: 39,
        errors: 1,
        errors_by_kind: [("timeout".to_string(), 1)].into(),
        wire_bytes: 4_000,
    };
    let rec = SecondRecord {
        proto: PROTO,
        agent: "a".into(),
        second: 3,
        hists: [(RESPONSE_TIME.to_string(), ByteBuf::from(bytes))].into(),
        counters: counters.clone(),
        generator_bound: false,
        counts: None,
        resources: None,
    };
    let fin = FinalRecord {
        proto: PROTO,
        agent: "a".into(),
        records_sent: 2,
        last_second: Some(3),
        totals: counters,
        ending: Ending::Done,
        error: None,
        share: None,
        share_parts: 0,
    };
    let e = |m: &dyn Fn() -> Vec<u8>| m();
    vec![
        (
            "hello",
            e(&|| {
                msg::encode(&Hello {
                    proto: PROTO,
                    name: "a".into(),
                    nonce: NONCE.into(),
                })
                .unwrap()
            }),
        ),
        (
            "probe",
            e(&|| {
                msg::encode(&ProbeRequest {
                    proto: PROTO,
                    seq: 3,
                })
                .unwrap()
            }),
        ),
        (
            "probe_reply",
            e(&|| {
                msg::encode(&ProbeReply {
                    proto: PROTO,
                    seq: 3,
                    t1: 5,
                    t2: 9,
                })
                .unwrap()
            }),
        ),
        ("assignment", msg::encode(&a).unwrap()),
        ("signed_assignment", msg::encode(&signed).unwrap()),
        (
            "ready",
            e(&|| {
                msg::encode(&Ready {
                    proto: PROTO,
                    name: "a".into(),
                    late_ms: 0,
                    refused: Some("no".into()),
                })
                .unwrap()
            }),
        ),
        ("second", msg::encode(&rec).unwrap()),
        (
            "heartbeat",
            e(&|| {
                msg::encode(&Heartbeat {
                    proto: PROTO,
                    agent: "a".into(),
                    seq: 1,
                    records_sent: 1,
                })
                .unwrap()
            }),
        ),
        ("final", msg::encode(&fin).unwrap()),
        (
            "ack",
            e(&|| {
                msg::encode(&Ack {
                    proto: PROTO,
                    kept: true,
                })
                .unwrap()
            }),
        ),
        (
            "stale",
            e(&|| {
                msg::encode(&Stale {
                    proto: PROTO,
                    run: "r1".into(),
                    reason: "lost".into(),
                })
                .unwrap()
            }),
        ),
        (
            "stop",
            e(&|| {
                msg::encode(&Stop {
                    proto: PROTO,
                    reason: "ctrl-c".into(),
                })
                .unwrap()
            }),
        ),
    ]
}

/// Writes the seeds as the target's corpus (`VOLLEY_BLESS=1`).
fn bless() {
    if std::env::var_os("VOLLEY_BLESS").is_some() {
        let dir = short_run::fuzz_dir().join("corpus").join(TARGET);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in seeds() {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
}

#[test]
fn bus_messages_short_run() {
    bless();
    let corpus = short_run::inputs(TARGET);
    assert!(
        corpus.len() >= seeds().len(),
        "the committed corpus holds the seeds (VOLLEY_BLESS=1 writes them)"
    );
    short_run::short_run(TARGET, 26, bus_messages);
}

/// `VOLLEY_FUZZ_RUNS=N`: N more mutations (a longer run without libFuzzer).
#[test]
fn bus_messages_long_run_when_asked() {
    short_run::long_run(TARGET, 2626, bus_messages);
}

#[test]
fn a_record_from_far_past_the_run_is_refused_not_merged() {
    // Found by reading the merge with the fuzzer's eyes: a second far in the future
    // would size the merge's vector of seconds; the coordinator refuses it instead.
    let rec = SecondRecord {
        proto: PROTO,
        agent: "a".into(),
        second: u64::MAX / 2,
        hists: Default::default(),
        counters: Counters::default(),
        generator_bound: false,
        counts: None,
        resources: None,
    };
    bus_messages(&msg::encode(&rec).unwrap());
}
