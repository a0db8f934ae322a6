//! Fuzz harness: the body of the `bus_messages` target in `fuzz/`, kept here so the
//! seeded short run in `tests/fuzz_short.rs` drives exactly the code libFuzzer drives.
//! Not part of the API (hidden from the docs).
//!
//! Place in the flow: none; this is the test side of [`crate::msg`]. Every bus message
//! comes from the network, so the harness takes any byte string and decodes it the way
//! each receiver does: as every message type, an assignment through the agent's own
//! checks (signature, nonce, allow-list), and a second record through the coordinator's
//! bound and its exact merge (the histograms' bytes are a stranger's too). It must never
//! panic, and a message that decodes must encode and decode to itself.

use std::sync::OnceLock;

use crate::agent::{self, AgentConfig};
use crate::auth::BusCredentials;
use crate::merge::{self, AgentSeries, Received};
use crate::msg::{self, Message};
use crate::msg::{
    Ack, Assignment, FinalRecord, Heartbeat, Hello, ProbeReply, ProbeRequest, Ready, SecondRecord,
    SignedAssignment, Stale, Stop,
};

/// The run bound the coordinator's check uses here (its default, a day).
const RUN_BOUND: std::time::Duration = std::time::Duration::from_secs(86_400);

/// An agent named `a` with fixed credentials and the default (loopback) allow-list.
fn agent_cfg() -> &'static AgentConfig {
    static CFG: OnceLock<AgentConfig> = OnceLock::new();
    CFG.get_or_init(|| {
        let mut cfg = AgentConfig::new("nats://127.0.0.1:4222", "a");
        cfg.auth = Some(fuzz_credentials());
        cfg
    })
}

/// Credentials with a fixed key, so seeds can carry valid signatures.
pub fn fuzz_credentials() -> BusCredentials {
    BusCredentials {
        user: "a".into(),
        password: "fuzz".into(),
        ca_pem: None,
        ca_file: None,
        assign_key: "ZnV6ei1rZXktZnV6ei1rZXktZnV6ei1rZXktZnV6eg".into(),
    }
}

/// The nonce the fuzzed agent announced.
pub const NONCE: &str = "fuzz-nonce";

/// Decodes `data` as each message type; see the module docs.
pub fn bus_messages(data: &[u8]) {
    round_trip::<Hello>(data);
    round_trip::<ProbeRequest>(data);
    round_trip::<ProbeReply>(data);
    round_trip::<Ready>(data);
    round_trip::<Heartbeat>(data);
    round_trip::<Ack>(data);
    round_trip::<Stale>(data);
    round_trip::<Stop>(data);
    round_trip::<FinalRecord>(data);
    round_trip::<Assignment>(data);
    if let Some(s) = round_trip::<SignedAssignment>(data) {
        let cfg = agent_cfg();
        if let Ok(a) = agent::take(cfg, NONCE, data) {
            // Only a correctly signed assignment gets here: the agent's checks held.
            assert!(cfg.auth.as_ref().unwrap().verify(&s.body, &s.mac));
            assert_eq!((a.agent.as_str(), a.nonce.as_str()), ("a", NONCE));
            if let Some(l) = &a.load {
                // Host names would be resolved (DNS); addresses are checked offline.
                if l.addr.parse::<std::net::SocketAddr>().is_ok() {
                    let _ = cfg.allow.check(&l.addr);
                }
            }
        }
    }
    if let Some(r) = round_trip::<SecondRecord>(data) {
        if crate::collect::check_second("a", r.second, RUN_BOUND).is_ok() {
            let mut series = AgentSeries::new("a", r.second.saturating_sub(2));
            series.received.insert(
                r.second,
                Received {
                    record: r,
                    arrived_ms: 0,
                },
            );
            // Bad histogram bytes or counts that do not add up are typed errors.
            let _ = merge::merge(vec![series], 2_000);
        }
    }
}

/// Decodes `data` as `M`; what decodes must re-encode to bytes that decode and encode
/// to the same bytes (compared as bytes: a NaN weight is not equal to itself).
fn round_trip<M: Message>(data: &[u8]) -> Option<M> {
    let m: M = msg::decode(data).ok()?;
    let once = msg::encode(&m).expect("a decoded message encodes");
    let back: M = msg::decode(&once).expect("an encoded message decodes");
    let twice = msg::encode(&back).expect("it encodes again");
    assert_eq!(once, twice, "{} round trip", M::WHAT);
    Some(m)
}
