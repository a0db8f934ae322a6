//! Trust on the bus, against a real secured `nats-server` on loopback (TLS from a
//! throw-away CA, a user per party, permissions): a party without valid credentials or
//! without TLS is refused by the server and counted; a forged or replayed assignment is
//! refused by the agent, which stays available; an assignment outside the agent's
//! allow-list is refused on both sides and nothing is loaded.

use crate::common;

use common::{agent_cfg, coord_cfg, join_within, second_record, secured_bus, Meet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use volley_agents::agent::{self, AgentEvent, LoadCtx, LoadError};
use volley_agents::auth::random_token;
use volley_agents::bus::Bus;
use volley_agents::coordinator;
use volley_agents::load::LoadSpec;
use volley_agents::msg::{self, subject, Assignment, Ready, SignedAssignment, PROTO};
use volley_agents::server::PrivateNats;
use volley_agents::share::Share;
use volley_agents::AgentsError;

/// A load of one record that notes it ran.
fn noted(ran: Arc<AtomicBool>) -> impl FnOnce(LoadCtx) -> Result<(), LoadError> + Send {
    move |ctx: LoadCtx| {
        ran.store(true, Ordering::SeqCst);
        ctx.emit(second_record(&ctx, 0, 10, 1_000)?);
        Ok(())
    }
}

/// A run of 10 requests by one agent.
fn one_agent_run(m: &Meet, run: &str) -> coordinator::CoordinatorConfig {
    let mut c = coord_cfg(m, run, 10, 1);
    (c.agents, c.min_agents, c.whole.connections) = (1, 1, 1);
    c.ready_bound = Duration::from_secs(10);
    c
}

/// Coordinates run `c` on a thread of its own, within 30 s.
fn coordinate_within_30_s(
    c: coordinator::CoordinatorConfig,
) -> Result<coordinator::RunResult, AgentsError> {
    join_within(
        std::thread::spawn(move || coordinator::coordinate(&c, &mut |_| {})),
        Duration::from_secs(30),
    )
}

#[test]
fn a_party_without_valid_credentials_or_tls_is_refused_and_counted() {
    let nats = secured_bus();
    let m = Meet::of(&nats);
    // No credentials at all: no TLS config either, so the handshake fails first.
    let mut cfg = agent_cfg(&m, "a");
    cfg.auth = None;
    let e = agent::run(&cfg, noted(Arc::default()), &mut |_| {}).unwrap_err();
    assert!(matches!(e, AgentsError::BusTls { .. }), "{e}");
    // The right CA, a wrong password.
    let mut cfg = agent_cfg(&m, "a");
    cfg.auth.as_mut().unwrap().password = "guessed".into();
    let e = agent::run(&cfg, noted(Arc::default()), &mut |_| {}).unwrap_err();
    assert!(matches!(e, AgentsError::BusRefused { .. }), "{e}");
    assert!(e.to_string().contains("credentials"), "{e}");
    // Another study's credentials (another CA): the bus's certificate is not trusted.
    let other = PrivateNats::start_secured("127.0.0.1:0".parse().unwrap(), &["a".into()])
        .expect("nats-server");
    let mut cfg = agent_cfg(&m, "a");
    cfg.auth = other.keys().unwrap().agent("a").cloned();
    let e = agent::run(&cfg, noted(Arc::default()), &mut |_| {}).unwrap_err();
    assert!(matches!(e, AgentsError::BusTls { .. }), "{e}");
    // The server logs each refusal after the client has given up: give it a generous
    // moment. Then, stopped, its log has been read to its end: each refusal counted
    // once, and nothing of volley's own (it makes no connection to see the server up).
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while nats.refused() < 3 && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut nats = nats;
    nats.stop();
    assert_eq!(nats.refused(), 3);
}

/// The other side of the count (issue 26: a long run's step said "the bus refused 1
/// connection(s)" although every party had credentials; it was volley's own TCP
/// connect that checked the server was up, a failed TLS handshake in its log): a run
/// whose parties all signed in leaves none.
#[test]
fn a_run_of_authenticated_parties_counts_no_refusal() {
    let mut nats = secured_bus();
    let m = Meet::of(&nats);
    let ran = Arc::new(AtomicBool::new(false));
    let (cfg, load) = (agent_cfg(&m, "a"), noted(ran.clone()));
    let agent = std::thread::spawn(move || agent::run(&cfg, load, &mut |_| {}));
    let r = coordinate_within_30_s(one_agent_run(&m, "signed-in")).expect("the run");
    assert_eq!(r.agents.len(), 1);
    join_within(agent, Duration::from_secs(10)).expect("agent");
    assert!(ran.load(Ordering::SeqCst));
    nats.stop();
    assert_eq!(nats.refused(), 0);
}

#[test]
fn a_secured_party_refuses_a_bus_that_does_not_speak_tls() {
    let plain = PrivateNats::start().expect("nats-server");
    let secured = secured_bus();
    let mut cfg = agent_cfg(&Meet::of(&secured), "a");
    cfg.bus_url = plain.url();
    let e = agent::run(&cfg, noted(Arc::default()), &mut |_| {}).unwrap_err();
    assert!(matches!(e, AgentsError::BusTls { .. }), "{e}");
}

#[test]
fn forged_and_replayed_assignments_are_refused_and_the_agent_stays() {
    let nats = secured_bus();
    let m = Meet::of(&nats);
    let ran = Arc::new(AtomicBool::new(false));
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (cfg, load, seen) = (agent_cfg(&m, "a"), noted(ran.clone()), events.clone());
    let agent =
        std::thread::spawn(move || agent::run(&cfg, load, &mut |e| seen.lock().unwrap().push(e)));
    // Somebody with the coordinator's bus login but not the study's assignment key.
    let mut forger = m.clone();
    forger.coordinator.as_mut().unwrap().assign_key = random_token(32).unwrap();
    let e = join_within(
        std::thread::spawn({
            let c = one_agent_run(&forger, "forged");
            move || coordinator::coordinate(&c, &mut |_| {})
        }),
        Duration::from_secs(30),
    )
    .unwrap_err();
    assert!(
        matches!(&e, AgentsError::Refused { agent, reason } if agent == "a" && reason.contains("not signed")),
        "{e}"
    );
    // A correctly signed assignment for an earlier lobby (another nonce): replayed.
    let rt = volley_agents::bus::runtime().unwrap();
    let coord = m.coordinator.clone().unwrap();
    let ready: Ready = rt.block_on(async {
        let bus = Bus::connect(&m.url, Duration::from_secs(5), Some(&coord))
            .await
            .unwrap();
        let a = Assignment {
            proto: PROTO,
            run: "replayed".into(),
            share: Share {
                index: 0,
                of: 1,
                requests: Some(10),
                rate_milli_rps: None,
                connections: 1,
                duration_ms: Some(1_000),
            },
            t0_ns: 0,
            offset_ns: 0,
            delay_ms: 0,
            load: None,
            agent: "a".into(),
            nonce: "an-earlier-lobby".into(),
        };
        let body = msg::encode(&a).unwrap();
        let signed = SignedAssignment {
            proto: PROTO,
            mac: coord.sign(&body).unwrap().into(),
            body: body.into(),
        };
        bus.request(subject::assign("a"), &signed, Duration::from_secs(5))
            .await
            .unwrap()
    });
    assert!(
        ready.refused.as_deref().unwrap_or("").contains("replayed"),
        "{ready:?}"
    );
    assert!(!ran.load(Ordering::SeqCst), "a refused assignment loaded");
    // The agent stayed in the lobby: the study's own coordinator still runs it.
    let r = coordinate_within_30_s(one_agent_run(&m, "genuine")).expect("the genuine run");
    assert_eq!(r.agents.len(), 1);
    join_within(agent, Duration::from_secs(10)).expect("agent");
    assert!(ran.load(Ordering::SeqCst));
    let refusals = events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, AgentEvent::Refused(_)))
        .count();
    assert_eq!(refusals, 2);
}

#[test]
fn another_party_cannot_use_the_coordinators_subjects() {
    let nats = secured_bus();
    let m = Meet::of(&nats);
    let ran = Arc::new(AtomicBool::new(false));
    let (cfg, load) = (agent_cfg(&m, "a"), noted(ran.clone()));
    let agent = std::thread::spawn(move || agent::run(&cfg, load, &mut |_| {}));
    // Agent b's login as a coordinator: the server keeps it from the lobby and from
    // a's assignment subject, so it never sees a and a never hears of it.
    let mut intruder = m.clone();
    intruder.coordinator = m.agents.get("b").cloned();
    let e = join_within(
        std::thread::spawn({
            let mut c = one_agent_run(&intruder, "intruder");
            c.ready_bound = Duration::from_secs(3);
            move || coordinator::coordinate(&c, &mut |_| {})
        }),
        Duration::from_secs(30),
    )
    .unwrap_err();
    assert!(
        matches!(e, AgentsError::NotEnoughAgents { ready: 0, .. }),
        "{e}"
    );
    let r = coordinate_within_30_s(one_agent_run(&m, "after")).expect("the study's own run");
    assert_eq!(r.agents.len(), 1);
    join_within(agent, Duration::from_secs(10)).expect("agent");
}

#[test]
fn a_target_outside_the_allow_list_is_refused_on_both_sides_and_nothing_loads() {
    let nats = secured_bus();
    let m = Meet::of(&nats);
    let ran = Arc::new(AtomicBool::new(false));
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (cfg, load, seen) = (agent_cfg(&m, "a"), noted(ran.clone()), events.clone());
    let agent =
        std::thread::spawn(move || agent::run(&cfg, load, &mut |e| seen.lock().unwrap().push(e)));
    let mut c = one_agent_run(&m, "outside");
    // TEST-NET-1 (RFC 5737): no interface of this machine has it.
    c.load = Some(LoadSpec {
        addr: "192.0.2.1:80".into(),
        method: "GET".into(),
        paths: vec!["/".into()],
        headers: Vec::new(),
        order: "same".into(),
        block: 1,
        weights: Vec::new(),
        seed: 1,
        keep_alive: true,
        threads: 1,
        arrival: "constant".into(),
        timeout_ms: 1_000,
        warmup_ms: 0,
    });
    let e = join_within(
        std::thread::spawn(move || coordinator::coordinate(&c, &mut |_| {})),
        Duration::from_secs(30),
    )
    .unwrap_err();
    let line = e.to_string();
    assert!(
        line.starts_with(
            "agent a refused: target 192.0.2.1:80 outside its allow-list (127.0.0.0/8"
        ),
        "{line}"
    );
    let e = join_within(agent, Duration::from_secs(10)).unwrap_err();
    assert!(matches!(e, AgentsError::RefusedHere { .. }), "{e}");
    assert!(!ran.load(Ordering::SeqCst), "nothing may load");
    assert!(events
        .lock()
        .unwrap()
        .iter()
        .any(|e| matches!(e, AgentEvent::RefusedTarget(r) if r.contains("192.0.2.1:80"))));
}
