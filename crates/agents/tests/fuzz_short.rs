//! Seeded short run of the `bus_messages` fuzz target (`fuzz/fuzz_targets/`): the same
//! harness libFuzzer drives (`volley_agents::fuzzing::bus_messages`), fed one valid
//! message of each kind (written to `fuzz/corpus/bus_messages/` with `VOLLEY_BLESS=1`,
//! the long runs' starting corpus), every committed corpus and regression input, and
//! seeded mutations of them. A panic in the harness (a crash, or one of its assertions)
//! fails the test; the long runs are `cargo +nightly fuzz run` (see fuzz/README.md).
//!
//! The mutations are libFuzzer's common moves, as in the server's short runs
//! (`crates/server/tests/fuzz_short.rs`).

use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_bytes::ByteBuf;
use volley_agents::fuzzing::{bus_messages, fuzz_credentials, NONCE};
use volley_agents::load::LoadSpec;
use volley_agents::msg::{self, *};
use volley_agents::share::Share;

/// Mutated inputs: a few seconds in a debug build (`VOLLEY_FUZZ_RUNS` for more).
const MUTATIONS: usize = 20_000;
/// Longest mutated input, bytes.
const MAX_LEN: usize = 4_096;
const TARGET: &str = "bus_messages";

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

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

/// The seeds and every file of `fuzz/corpus/bus_messages` and
/// `fuzz/regressions/bus_messages`.
fn inputs() -> Vec<Vec<u8>> {
    let seeds = seeds();
    if std::env::var_os("VOLLEY_BLESS").is_some() {
        let dir = fuzz_dir().join("corpus").join(TARGET);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in &seeds {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
    let mut v: Vec<Vec<u8>> = seeds.into_iter().map(|(_, b)| b).collect();
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz_dir().join(dir).join(TARGET)) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
        paths.sort();
        for p in paths {
            v.push(std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())));
        }
    }
    v
}

/// One random edit of `base`, with `other` for splices.
fn mutate(rng: &mut ChaCha8Rng, base: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = base.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        let at = if v.is_empty() {
            0
        } else {
            rng.random_range(0..v.len())
        };
        match rng.random_range(0..6) {
            0 if !v.is_empty() => v[at] ^= 1 << rng.random_range(0..8),
            1 if !v.is_empty() => v[at] = rng.random(),
            2 => {
                let n = rng.random_range(1..=16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.random()).collect();
                v.splice(at..at, bytes);
            }
            3 if !v.is_empty() => {
                let end = (at + rng.random_range(1..=32)).min(v.len());
                v.drain(at..end);
            }
            4 if !v.is_empty() => {
                let end = (at + rng.random_range(1..=64)).min(v.len());
                let copy = v[at..end].to_vec();
                v.splice(at..at, copy);
            }
            _ if !other.is_empty() => {
                let from = rng.random_range(0..other.len());
                v.truncate(at);
                v.extend_from_slice(&other[from..]);
            }
            _ => {}
        }
    }
    v.truncate(MAX_LEN);
    v
}

#[test]
fn bus_messages_short_run() {
    let corpus = inputs();
    for input in &corpus {
        bus_messages(input);
    }
    let runs = std::env::var("VOLLEY_FUZZ_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(MUTATIONS);
    let mut rng = ChaCha8Rng::seed_from_u64(26);
    for _ in 0..runs {
        let base = &corpus[rng.random_range(0..corpus.len())];
        let other = &corpus[rng.random_range(0..corpus.len())];
        bus_messages(&mutate(&mut rng, base, other));
    }
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
    };
    bus_messages(&msg::encode(&rec).unwrap());
}
