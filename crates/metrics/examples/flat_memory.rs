//! Memory check for the recorder: feeds 5 million synthetic samples (64 connections'
//! worth of interleaved requests over ~250 s of run time, two workers) and prints the
//! process RSS before and after, plus the bytes the closed seconds keep.
//!
//! `cargo run --release -p volley-metrics --example flat_memory [requests] [hold_s]`
//! With `hold_s`, windows are keyed by intended send time held that long (the agents'
//! key): the ring of open windows is what it adds.
//! No network, no clock: it measures memory, not speed.

use volley_engine::{Sample, Sink};
use volley_metrics::{summary::Model, Recorder, RunInfo, WindowKey};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5_000_000);
    let key = match std::env::args().nth(2).and_then(|a| a.parse().ok()) {
        Some(hold_s) => WindowKey::Intended {
            hold: std::time::Duration::from_secs(hold_s),
        },
        None => WindowKey::Completion,
    };
    let before = rss_kib();
    let mut workers: Vec<Recorder> = (0..2)
        .map(|w| Recorder::for_worker(w).with_window_key(key))
        .collect();
    // 20k requests/s: 64 connections, latencies 0.2..~13 ms from a cheap LCG.
    let mut x: u64 = 42;
    for i in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let lat_ns = 200_000 + (x >> 40) % 12_800_000;
        let done_ns = i * 50_000 + lat_ns;
        let s = Sample {
            intended_ns: done_ns - lat_ns,
            dispatched_ns: done_ns - lat_ns,
            sent_ns: done_ns - lat_ns,
            first_byte_ns: done_ns - lat_ns / 2,
            done_ns,
            connect_ns: 0,
            tls_handshake_ns: 0,
            status: 200,
            wire_bytes: 250,
            body_bytes: 100,
            wire_body_bytes: 100,
            error: None,
            request_index: (i % 64) as u32,
        };
        let w = (i % 2) as usize;
        workers[w].record(&s);
        if i % 64 == 0 {
            workers[w].connections(done_ns, 64);
        }
    }
    let during = rss_kib();
    let stored: usize = workers.iter().map(Recorder::stored_bytes).sum();
    let merged = Recorder::merge_all(workers).expect("merge");
    let info = RunInfo {
        url: "synthetic".into(),
        method: "GET".into(),
        model: Model::Closed,
        threads: 2,
        connections: 64,
        streams_per_connection: 1,
        max_connections: 64,
        keep_alive: true,
        elapsed_ns: n * 50_000 + 13_000_000,
        connections_opened: 64,
        max_open_connections: 64,
        cap_hits: 0,
        stopped_early: false,
        cpu_ns: None,
        cpu_pressure: None,
        cores: 2.0,
        notes: vec![],
        stalls: None,
    };
    let s = merged.close(&info).expect("close");
    let after = rss_kib();
    println!(
        "requests {n}: RSS before {before} KiB, after recording {during} KiB, after merge+close {after} KiB; \
         closed seconds keep {stored} bytes of compressed V2 histograms ({} seconds); completed {}; p99 {:.3} ms",
        s.seconds.len(),
        s.requests.completed,
        s.latency["service_time"].p99_ms
    );
}
