//! Helpers shared by the bus tests: configurations with test-sized bounds, threads
//! joined within a bound.

#![allow(dead_code)]

use hdrhistogram::serialization::V2Serializer;
use serde_bytes::ByteBuf;
use std::collections::HashMap;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use volley_agents::agent::{AgentConfig, LoadCtx, LoadError};
use volley_agents::auth::{BusCredentials, CREDENTIALS_ENV};
use volley_agents::coordinator::{self, CoordinatorConfig, Event, RunResult};
use volley_agents::msg::{Counters, SecondRecord, PROTO, RESPONSE_TIME};
use volley_agents::server::PrivateNats;
use volley_agents::share::Whole;
use volley_agents::AgentsError;
use volley_metrics::hist;

/// The agent names the tests' secured buses have users for.
pub const NAMES: [&str; 10] = [
    "a", "b", "c", "victim", "lonely", "bad", "deaf", "agent-0", "agent-1", "big",
];

/// A secured private bus on loopback (TLS, a user per party, permissions), as studies
/// start it, with users for [`NAMES`].
pub fn secured_bus() -> PrivateNats {
    let names: Vec<String> = NAMES.iter().map(|n| n.to_string()).collect();
    PrivateNats::start_secured("127.0.0.1:0".parse().unwrap(), &names)
        .expect("nats-server (scripts/install-deps.sh installs it)")
}

/// Where a test's parties meet: the bus's URL and, on a secured bus, each party's
/// credentials.
#[derive(Debug, Clone)]
pub struct Meet {
    pub url: String,
    pub coordinator: Option<BusCredentials>,
    pub agents: HashMap<String, BusCredentials>,
}

impl Meet {
    /// The URL and keys of a running private bus.
    pub fn of(nats: &PrivateNats) -> Meet {
        Meet {
            url: nats.url(),
            coordinator: nats.keys().map(|k| k.coordinator.clone()),
            agents: nats
                .keys()
                .map(|k| k.agents.clone().into_iter().collect())
                .unwrap_or_default(),
        }
    }

    /// In a child process: the URL given, and the one agent's credentials from
    /// [`CREDENTIALS_ENV`] (as a study hands them to a local agent).
    pub fn from_env(url: &str, name: &str) -> Meet {
        let mut agents = HashMap::new();
        if let Ok(j) = std::env::var(CREDENTIALS_ENV) {
            agents.insert(
                name.to_string(),
                BusCredentials::from_json(&j, "env").unwrap(),
            );
        }
        Meet {
            url: url.to_string(),
            coordinator: None,
            agents,
        }
    }
}

/// An agent's configuration with test-sized bounds and its credentials.
pub fn agent_cfg(m: &Meet, name: &str) -> AgentConfig {
    let mut cfg = AgentConfig::new(&m.url, name);
    cfg.assign_bound = Duration::from_secs(30);
    cfg.run_bound = Duration::from_secs(60);
    cfg.auth = m.agents.get(name).cloned();
    cfg
}

/// A run of `requests` over `secs` seconds by three agents, test-sized bounds.
pub fn coord_cfg(m: &Meet, run: &str, requests: u64, secs: u64) -> CoordinatorConfig {
    let whole = Whole {
        requests: Some(requests),
        rate_rps: None,
        connections: 3,
        duration_ms: Some(secs * 1_000),
    };
    let mut cfg = CoordinatorConfig::new(&m.url, run, whole, 3);
    cfg.auth = m.coordinator.clone();
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
        counts: None,
        resources: None,
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

/// The run facts of a synthetic share, with `notes`.
pub fn run_info(notes: Vec<String>) -> volley_metrics::RunInfo {
    volley_metrics::RunInfo {
        url: "synthetic".into(),
        method: "GET".into(),
        model: volley_metrics::Model::Closed,
        threads: 1,
        connections: 1,
        streams_per_connection: 1,
        max_connections: 1,
        keep_alive: true,
        elapsed_ns: 1_000_000_000,
        connections_opened: 1,
        max_open_connections: 1,
        cap_hits: 0,
        stopped_early: false,
        cpu_ns: None,
        cpu_pressure: None,
        cores: 1.0,
        notes,
        stalls: None,
    }
}
