//! The bus going away under a running measurement, with a real `nats-server` on
//! loopback that each test starts, kills and (for the brief outages) restarts on the
//! same port: the load stops within 2 s of losing the bus (issue 13), records buffered
//! while the bus is briefly away arrive late and fill their seconds (issue 14), and the
//! coordinator that loses the bus for good returns what it has with a typed error.
//!
//! The agents run a counting load: it counts a "request" every 5 ms on a counter the
//! test reads (the agents' own counters), and reports each second's count in its
//! record, so "nothing lost" is an equality between the merge and the counters.

use crate::common;

use common::{
    agent_cfg, coord_cfg, join_within, merged_requests, second_record, spawn_coordinator_events,
    Meet,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use volley_agents::agent::{self, AgentConfig, AgentOutcome, LoadCtx, LoadError};
use volley_agents::coordinator::Event;
use volley_agents::merge::Slot;
use volley_agents::msg::Ending;
use volley_agents::AgentsError;

/// The counting load (see the module doc): runs its share's duration, or until its
/// stop flag, and records every request it counted (a stopped second too).
fn counting(count: Arc<AtomicU64>) -> impl FnOnce(LoadCtx) -> Result<(), LoadError> + Send {
    move |ctx: LoadCtx| {
        let secs = ctx.assignment.share.duration_ms.ok_or("needs a duration")? / 1_000;
        for k in 0..secs {
            let end = ctx.started + Duration::from_secs(k + 1);
            let mut n = 0;
            while Instant::now() < end && !ctx.should_stop() {
                count.fetch_add(1, Ordering::Relaxed);
                n += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            ctx.emit(second_record(&ctx, k, n, 1_000)?);
            if ctx.should_stop() {
                break;
            }
        }
        Ok(())
    }
}

type AgentThread = JoinHandle<Result<AgentOutcome, AgentsError>>;

/// Three counting agents with `tune` applied to their configuration.
fn spawn_agents(m: &Meet, tune: impl Fn(&mut AgentConfig)) -> Vec<(AgentThread, Arc<AtomicU64>)> {
    ["a", "b", "c"]
        .iter()
        .map(|name| {
            let count = Arc::new(AtomicU64::new(0));
            let mut cfg = agent_cfg(m, name);
            tune(&mut cfg);
            let load = counting(count.clone());
            let h = std::thread::spawn(move || agent::run(&cfg, load, &mut |_| {}));
            (h, count)
        })
        .collect()
}

/// Waits (at most 30 s) for the first second merged live: every agent's load runs.
fn wait_for_merged(events: &Receiver<Event>) {
    let until = Instant::now() + Duration::from_secs(30);
    while Instant::now() < until {
        if let Ok(Event::Merged(_)) = events.recv_timeout(Duration::from_millis(100)) {
            return;
        }
    }
    panic!("no second was merged within 30 s");
}

fn counts(agents: &[(AgentThread, Arc<AtomicU64>)]) -> Vec<u64> {
    agents
        .iter()
        .map(|(_, c)| c.load(Ordering::Relaxed))
        .collect()
}

/// Sleeps until `at`.
fn sleep_until(at: Instant) {
    std::thread::sleep(at.saturating_duration_since(Instant::now()));
}

#[test]
fn the_bus_gone_stops_every_load_within_2_s_and_the_coordinator_returns_what_it_has() {
    let mut nats = common::secured_bus();
    let agents = spawn_agents(&Meet::of(&nats), |c| {
        c.resend_bound = Duration::from_secs(3)
    });
    let mut cfg = coord_cfg(&Meet::of(&nats), "gone", 30_000, 30);
    cfg.bus_gone_after = Duration::from_secs(3);
    let (coord, events) = spawn_coordinator_events(cfg);
    wait_for_merged(&events);
    let before = counts(&agents);
    nats.stop();
    let killed = Instant::now();
    // The spec's bound: 2 s after the bus went, no agent sends load any more.
    sleep_until(killed + Duration::from_secs(2));
    let at_bound = counts(&agents);
    sleep_until(killed + Duration::from_millis(3_500));
    let later = counts(&agents);
    assert_eq!(at_bound, later, "load went on past 2 s without the bus");
    assert!(
        before.iter().zip(&at_bound).all(|(b, a)| a >= b) && before.iter().all(|&b| b > 0),
        "every load ran: {before:?}"
    );
    for (h, _) in agents {
        let r = join_within(h, Duration::from_secs(10));
        assert!(matches!(r, Err(AgentsError::BusLost)), "{r:?}");
    }
    let e = join_within(coord, Duration::from_secs(15)).unwrap_err();
    let AgentsError::BusGone {
        records, partial, ..
    } = &e
    else {
        panic!("{e}");
    };
    assert!(*records >= 3, "what it had: {records} records");
    assert_eq!(
        partial
            .merged
            .agents
            .iter()
            .map(|a| a.seconds().len() as u64)
            .sum::<u64>(),
        *records
    );
    assert!(partial.agents.iter().all(|a| a.lost_from_s.is_some()));
    assert!(merged_requests(partial) > 0);
    assert!(!e.to_string().contains('\n'), "one line: {e}");
}

#[test]
fn records_buffered_while_the_bus_is_briefly_away_fill_their_seconds_late() {
    let mut nats = common::secured_bus();
    // The load goes on through a 2.5 s outage (its bound is 5 s here).
    let agents = spawn_agents(&Meet::of(&nats), |c| {
        c.bus_lost_after = Duration::from_secs(5)
    });
    let mut cfg = coord_cfg(&Meet::of(&nats), "brief", 30_000, 8);
    cfg.late_grace = Duration::from_millis(500);
    let (coord, events) = spawn_coordinator_events(cfg);
    wait_for_merged(&events);
    nats.stop();
    std::thread::sleep(Duration::from_millis(2_500));
    nats.restart().expect("nats-server again on its port");
    let mut total = 0;
    let mut buffered = Vec::new();
    for (h, c) in agents {
        let o = join_within(h, Duration::from_secs(30)).expect("agent");
        assert_eq!((o.ending, o.dropped), (Ending::Done, 0));
        buffered.push(o.most_buffered);
        total += c.load(Ordering::Relaxed);
    }
    assert!(buffered.iter().all(|&b| b >= 2), "buffered: {buffered:?}");
    let r = join_within(coord, Duration::from_secs(30)).expect("run");
    assert_eq!(merged_requests(&r), total, "every counted request merged");
    assert_eq!(r.merged.degraded_from_s, None);
    for s in &r.merged.seconds {
        assert!(
            s.slots.values().all(|&v| v == Slot::Present),
            "second {}: {:?}",
            s.second,
            s.slots
        );
    }
    for a in &r.agents {
        assert!(a.lost_from_s.is_none() && a.refused == 0, "{a:?}");
        assert!(
            a.late_seconds >= 1 && a.max_late_ms > 0,
            "{}: {} late, max {} ms",
            a.name,
            a.late_seconds,
            a.max_late_ms
        );
    }
}

#[test]
fn a_bus_away_past_the_agents_bound_stops_the_load_and_the_buffered_seconds_still_arrive() {
    let mut nats = common::secured_bus();
    // The default 1 s bound: a 3 s outage stops the load.
    let agents = spawn_agents(&Meet::of(&nats), |_| {});
    let cfg = coord_cfg(&Meet::of(&nats), "away", 30_000, 30);
    let (coord, events) = spawn_coordinator_events(cfg);
    wait_for_merged(&events);
    nats.stop();
    let killed = Instant::now();
    sleep_until(killed + Duration::from_secs(2));
    let at_bound = counts(&agents);
    sleep_until(killed + Duration::from_secs(3));
    assert_eq!(counts(&agents), at_bound, "load went on past 2 s");
    nats.restart().expect("nats-server again on its port");
    let mut total = 0;
    for (h, c) in agents {
        let r = join_within(h, Duration::from_secs(20));
        assert!(matches!(r, Err(AgentsError::BusLost)), "{r:?}");
        total += c.load(Ordering::Relaxed);
    }
    assert_eq!(
        total,
        at_bound.iter().sum::<u64>(),
        "no load after the bound"
    );
    let r = join_within(coord, Duration::from_secs(20)).expect("run");
    // Every counted request arrived, late, with the final records.
    assert_eq!(merged_requests(&r), total);
    for a in &r.agents {
        let fin = a
            .final_record
            .as_ref()
            .expect("final record after the bus came back");
        assert_eq!(fin.ending, Ending::BusLost);
        let last = fin.last_second.expect("it sent seconds");
        assert_eq!(
            a.lost_from_s,
            Some(last + 1),
            "degraded after its load stopped"
        );
        assert!(a.late_seconds >= 1, "{a:?}");
    }
    assert!(r.merged.degraded_from_s.is_some());
}

/// In the orphan test's child process (this test binary re-run with the env set): runs
/// the coordinator the test then kills, and returns true; in the test itself, false.
fn run_as_child_coordinator() -> bool {
    let Ok(url) = std::env::var("VOLLEY_TEST_COORD_URL") else {
        return false;
    };
    let m = Meet {
        url,
        coordinator: std::env::var(volley_agents::auth::CREDENTIALS_ENV)
            .ok()
            .map(|j| volley_agents::auth::BusCredentials::from_json(&j, "env").unwrap()),
        agents: Default::default(),
    };
    let _ =
        volley_agents::coordinator::coordinate(&coord_cfg(&m, "orphan", 30_000, 30), &mut |_| {});
    true
}

#[test]
fn agents_whose_coordinator_dies_stop_their_load() {
    if run_as_child_coordinator() {
        return;
    }
    let nats = common::secured_bus();
    let agents = spawn_agents(&Meet::of(&nats), |c| {
        c.resend_bound = Duration::from_secs(3)
    });
    let mut coord = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            // A name filter (no --exact): the test's full name starts with its module.
            "agents_whose_coordinator_dies_stop_their_load",
            "--test-threads=1",
            "--quiet",
        ])
        .env("VOLLEY_TEST_COORD_URL", nats.url())
        .env(
            volley_agents::auth::CREDENTIALS_ENV,
            nats.keys().expect("secured").coordinator.to_json(),
        )
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn the child coordinator");
    // Bounded wait until every load runs, then a second more for receipts to flow.
    let until = Instant::now() + Duration::from_secs(30);
    while counts(&agents).contains(&0) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(1_500));
    let _ = coord.kill();
    let _ = coord.wait();
    for (h, c) in agents {
        let r = join_within(h, Duration::from_secs(20));
        assert!(
            matches!(r, Err(AgentsError::CoordinatorGone { .. })),
            "{r:?}"
        );
        // The agent ends after its load: the count is final, and far from the 30 s
        // share (about 200 a second) that nobody would have recorded.
        let n = c.load(Ordering::Relaxed);
        assert!(n > 0 && n < 200 * 15, "{n} requests");
    }
}
