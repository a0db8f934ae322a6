//! Helpers shared by the bus tests: configurations with test-sized bounds, threads
//! joined within a bound.

#![allow(dead_code)]

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use volley_agents::agent::AgentConfig;
use volley_agents::coordinator::{self, CoordinatorConfig, Event, RunResult};
use volley_agents::share::Whole;
use volley_agents::AgentsError;

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
