//! Helpers shared by the bus tests: configurations with test-sized bounds, threads
//! joined within a bound.

#![allow(dead_code)]

use hdrhistogram::serialization::V2Serializer;
use serde_bytes::ByteBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use volley_agents::agent::{AgentConfig, LoadCtx, LoadError};
use volley_agents::coordinator::{self, CoordinatorConfig, Event, RunResult};
use volley_agents::msg::{Counters, SecondRecord, PROTO, RESPONSE_TIME};
use volley_agents::share::Whole;
use volley_agents::AgentsError;
use volley_metrics::hist;

/// An agent's configuration with test-sized bounds.
pub fn agent_cfg(url: &str, name: &str) -> AgentConfig {
    let mut cfg = AgentConfig::new(url, name);
    cfg.assign_bound = Duration::from_secs(30);
    cfg.run_bound = Duration::from_secs(60);
    cfg
}

/// A run of `requests` over `secs` seconds by three agents, test-sized bounds.
pub fn coord_cfg(url: &str, run: &str, requests: u64, secs: u64) -> CoordinatorConfig {
    let whole = Whole {
        requests: Some(requests),
        rate_rps: None,
        connections: 3,
        duration_ms: Some(secs * 1_000),
    };
    let mut cfg = CoordinatorConfig::new(url, run, whole, 3);
    cfg.ready_bound = Duration::from_secs(20);
    cfg.max_offset = Duration::from_secs(1);
    cfg.start_lead = Duration::from_millis(1_500);
    cfg.run_bound = Duration::from_secs(60);
    cfg
}

/// The coordinator's thread.
pub type CoordThread = JoinHandle<Result<RunResult, AgentsError>>;

/// Runs a coordinator in a thread of its own.
pub fn spawn_coordinator(cfg: CoordinatorConfig) -> CoordThread {
    std::thread::spawn(move || coordinator::coordinate(&cfg, &mut |_| {}))
}

/// Runs a coordinator in a thread of its own; its events come on the receiver.
pub fn spawn_coordinator_events(cfg: CoordinatorConfig) -> (CoordThread, mpsc::Receiver<Event>) {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        coordinator::coordinate(&cfg, &mut |e| {
            let _ = tx.send(e);
        })
    });
    (h, rx)
}

/// The record of second `k` of a synthetic load's share: `n` requests, all ok, each at
/// `latency_us`.
pub fn second_record(
    ctx: &LoadCtx,
    k: u64,
    n: u64,
    latency_us: u64,
) -> Result<SecondRecord, LoadError> {
    let mut h = hist::new_hist();
    if n > 0 {
        h.record_n(latency_us, u32::try_from(n)?)?;
    }
    let bytes = hist::encode(&mut V2Serializer::new(), &h)?;
    Ok(SecondRecord {
        proto: PROTO,
        agent: String::new(),
        second: ctx.second_of(ctx.started + Duration::from_secs(k)),
        hists: [(RESPONSE_TIME.to_string(), ByteBuf::from(bytes))].into(),
        counters: Counters {
            requests: n,
            ok: n,
            ..Counters::default()
        },
        generator_bound: false,
    })
}

/// Requests in the whole merged run.
pub fn merged_requests(r: &RunResult) -> u64 {
    r.merged.seconds.iter().map(|s| s.counters.requests).sum()
}

/// Joins a thread, failing the test if it runs past `bound`.
pub fn join_within<T>(h: JoinHandle<T>, bound: Duration) -> T {
    let until = Instant::now() + bound;
    while !h.is_finished() {
        assert!(
            Instant::now() < until,
            "thread still running after {bound:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    h.join().expect("thread panicked")
}
