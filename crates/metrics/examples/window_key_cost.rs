//! Speed check for the window keys: the recorder's cost per sample with windows keyed
//! by intended send time (hold 10 s, the default request timeout) against the default
//! completion key, on the same samples, in paired rounds (A B, then B A, ...).
//!
//! `cargo run --release -p volley-metrics --example window_key_cost [rounds] [samples]`
//! Prints one JSON line per round (ns per sample of each key: the process's CPU time,
//! which other processes sharing the core do not inflate, and wall time);
//! `bench/recorder.py` runs it pinned to one core and reports the median ratio with a
//! bootstrap CI.
//! The samples are made before timing (64 connections' worth, 20k requests/s,
//! latencies 0.2..13 ms); each round records them into a fresh recorder and closes
//! every window, so the per-second encoding is in the cost.

use std::hint::black_box;
use std::time::{Duration, Instant};

use volley_engine::{Sample, Sink};
use volley_metrics::resources::process_cpu_ns;
use volley_metrics::{Recorder, WindowKey};

fn samples(n: u64) -> Vec<Sample> {
    let mut x: u64 = 42;
    (0..n)
        .map(|i| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let lat_ns = 200_000 + (x >> 40) % 12_800_000;
            let intended_ns = i * 50_000;
            let sent_ns = intended_ns + (x >> 20) % 50_000;
            let done_ns = sent_ns + lat_ns;
            Sample {
                intended_ns,
                dispatched_ns: sent_ns,
                sent_ns,
                first_byte_ns: sent_ns + lat_ns / 2,
                done_ns,
                connect_ns: 0,
                tls_handshake_ns: 0,
                status: 200,
                wire_bytes: 800,
                body_bytes: 700,
                wire_body_bytes: 700,
                error: None,
                request_index: 0,
            }
        })
        .collect()
}

/// CPU and wall ns per sample to record `s` (in completion order) and close every
/// window. The process is single-threaded, so its CPU time is this loop's.
fn cost(key: WindowKey, s: &[Sample]) -> (f64, f64) {
    let mut r = Recorder::new().with_window_key(key);
    let (t, cpu0) = (Instant::now(), process_cpu_ns().unwrap_or(0));
    for x in s {
        r.record(black_box(x));
    }
    r.finish();
    let cpu = process_cpu_ns().unwrap_or(0).saturating_sub(cpu0) as f64;
    let wall = t.elapsed().as_nanos() as f64;
    black_box(r.closed_seconds().len());
    let n = s.len() as f64;
    (cpu / n, wall / n)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let n: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let mut s = samples(n);
    s.sort_by_key(|x| x.done_ns);
    let intended = WindowKey::Intended {
        hold: Duration::from_secs(10),
    };
    // One unmeasured pass of each warms caches and the allocator.
    cost(WindowKey::Completion, &s);
    cost(intended, &s);
    for k in 0..rounds {
        let (c, i) = if k % 2 == 0 {
            let c = cost(WindowKey::Completion, &s);
            (c, cost(intended, &s))
        } else {
            let i = cost(intended, &s);
            (cost(WindowKey::Completion, &s), i)
        };
        println!(
            "{{\"round\":{k},\"completion_ns\":{:.2},\"intended_ns\":{:.2},\
             \"completion_wall_ns\":{:.2},\"intended_wall_ns\":{:.2}}}",
            c.0, i.0, c.1, i.1
        );
    }
}
