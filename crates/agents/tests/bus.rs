//! Agents and a coordinator over a real `nats-server` on loopback (started by each
//! test, `scripts/install-deps.sh` installs it): the exact merge, staggered phases, an
//! agent killed mid-run, too few agents, failing and deaf loads (the bus going away is in
//! `bus_away.rs`).

use crate::common;

use common::{
    agent_cfg, coord_cfg, join_within, merged_requests, second_record, spawn_coordinator,
    spawn_coordinator_events, Meet,
};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use volley_agents::agent::{self, LoadCtx, LoadError};
use volley_agents::coordinator::{Event, RunResult};
use volley_agents::load::ShareRecord;
use volley_agents::merge::{Merged, MergedSecond, Slot};
use volley_agents::msg::{Ending, RESPONSE_TIME};
use volley_agents::phase;
use volley_agents::share::segment;
use volley_agents::AgentsError;
use volley_metrics::Recorder;

/// When a synthetic load saw its stop flag.
type StopSeen = Arc<Mutex<Option<Instant>>>;

/// A synthetic load: each second of its share it emits a record of its exact part of
/// the requests at a latency of its own (1 ms + 0.1 ms per share index).
fn synthetic(
    stop_seen: StopSeen,
) -> impl FnOnce(LoadCtx) -> Result<(), LoadError> + Send + 'static {
    move |ctx: LoadCtx| {
        let share = ctx.assignment.share;
        let secs = share.duration_ms.ok_or("synthetic load needs a duration")? / 1_000;
        let total = share
            .requests
            .ok_or("synthetic load needs a request count")?;
        let latency_us = 1_000 + 100 * u64::from(share.index);
        for k in 0..secs {
            let end = ctx.started + Duration::from_secs(k + 1);
            while Instant::now() < end {
                if ctx.should_stop() {
                    *stop_seen.lock().unwrap() = Some(Instant::now());
                    return Ok(());
                }
                std::thread::sleep(
                    end.saturating_duration_since(Instant::now())
                        .min(Duration::from_millis(20)),
                );
            }
            let n = segment(total, k as u32, secs as u32);
            ctx.emit(second_record(&ctx, k, n, latency_us)?);
        }
        Ok(())
    }
}

type AgentThread = JoinHandle<Result<agent::AgentOutcome, AgentsError>>;

fn spawn_agent(m: &Meet, name: &str) -> (AgentThread, StopSeen) {
    let seen = StopSeen::default();
    let (cfg, load) = (agent_cfg(m, name), synthetic(seen.clone()));
    (
        std::thread::spawn(move || agent::run(&cfg, load, &mut |_| {})),
        seen,
    )
}

/// Three agents staggered by 2 s, 3,000 requests over 5 s each; the coordinator keeps
/// every merged second, or (`stored_live`) hands each out and keeps none. The run and
/// every event.
fn staggered_run(stored_live: bool) -> (RunResult, Vec<Event>) {
    let nats = common::secured_bus();
    let agents: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|n| spawn_agent(&Meet::of(&nats), n))
        .collect();
    let mut cfg = coord_cfg(&Meet::of(&nats), "stagger", 3_000, 5);
    cfg.stagger = Duration::from_secs(2);
    cfg.stored_live = stored_live;
    let (coord, events) = spawn_coordinator_events(cfg);
    let r = join_within(coord, Duration::from_secs(40)).expect("run");
    for (h, _) in agents {
        let out = join_within(h, Duration::from_secs(10)).expect("agent");
        assert_eq!((out.records_sent, out.ending), (5, Ending::Done));
    }
    (r, events.try_iter().collect())
}

/// The merged seconds handed out, in order.
fn handed_out(events: &[Event]) -> Vec<MergedSecond> {
    let mut live: Vec<MergedSecond> = events
        .iter()
        .filter_map(|e| match e {
            Event::Merged(m) => Some((**m).clone()),
            _ => None,
        })
        .collect();
    live.sort_by_key(|m| m.second);
    live
}

#[test]
fn three_staggered_agents_merge_exactly_into_phases_1_2_3_2_1() {
    let (r, events) = staggered_run(false);
    // Shares add up to the whole, and so does the merge, second by second.
    assert_eq!(
        r.agents
            .iter()
            .map(|a| a.share.requests.unwrap())
            .sum::<u64>(),
        3_000
    );
    assert_eq!(merged_requests(&r), 3_000);
    for s in &r.merged.seconds {
        // The agents' records of this second, as they were handed out when they came.
        let sum: u64 = events
            .iter()
            .filter_map(|e| match e {
                Event::Second(x) if x.record.second == s.second => Some(x.record.counters.requests),
                _ => None,
            })
            .sum();
        assert_eq!(s.counters.requests, sum, "second {}", s.second);
        assert_eq!(
            s.hists
                .get(RESPONSE_TIME)
                .map_or(0, |h| h.unpack().unwrap().len()),
            sum
        );
        assert!(
            s.slots.values().all(|&v| v == Slot::Present),
            "second {}: {:?}",
            s.second,
            s.slots
        );
    }
    assert_eq!(r.merged.seconds.len(), 9);
    // Each second was merged live, as soon as every due agent had sent it, and the live
    // merge is the final one.
    let live = handed_out(&events);
    assert_eq!(live.len(), 9);
    for m in &live {
        let end = &r.merged.seconds[m.second as usize];
        assert_eq!((&m.counters, &m.slots), (&end.counters, &end.slots));
        assert_eq!(m.hists[RESPONSE_TIME], end.hists[RESPONSE_TIME]);
    }
    assert_eq!(r.merged.degraded_from_s, None);
    let counts: Vec<usize> = r.phases.iter().map(|p| p.injectors.len()).collect();
    assert_eq!(counts, [1, 2, 3, 2, 1], "{:#?}", r.phases);
    assert_eq!(
        (r.phases[0].figures.start_s, r.phases[4].figures.end_s),
        (0, 8)
    );
    // Cut as the seconds closed, the phases are those cut from the whole merge.
    assert_eq!(r.phases, phase::phases(&r.merged, Duration::ZERO));
    assert!(r
        .agents
        .iter()
        .all(|a| a.final_record.is_some() && a.lost_from_s.is_none() && !a.clock_warning));
}

#[test]
fn a_coordinator_whose_seconds_are_stored_as_they_close_keeps_none_and_cuts_the_same_phases() {
    let (r, events) = staggered_run(true);
    assert!(
        r.merged.seconds.is_empty(),
        "{} seconds kept",
        r.merged.seconds.len()
    );
    let live = handed_out(&events);
    assert_eq!(live.len(), 9);
    assert_eq!(live.iter().map(|m| m.counters.requests).sum::<u64>(), 3_000);
    // Each agent's records are let go once merged: which seconds came, as ranges.
    for a in &r.merged.agents {
        assert!(
            a.received.is_empty(),
            "{}: {:?}",
            a.agent,
            a.received.keys()
        );
        assert_eq!(a.merged.seconds.iter().count(), 1, "{}", a.agent);
        assert_eq!(a.seconds().len(), 5);
        assert_eq!(a.requests(), 1_000);
    }
    // The phases, cut as the seconds closed, are those cut at the end from the seconds
    // handed out.
    let whole = Merged {
        seconds: live,
        agents: r.merged.agents.clone(),
        degraded_from_s: None,
    };
    assert_eq!(r.phases, phase::phases(&whole, Duration::ZERO));
    assert_eq!(r.phases.len(), 5);
    // The synthetic load sends no full counters: no summary row can be made of them.
    assert_eq!((r.folded.present, r.folded.uncounted), (9, 9));
    assert!(r.folded.digests.is_empty());
    assert_eq!(r.folded.last_s, Some(8));
}

/// In the kill test's child process (this test binary re-run with the env set): runs
/// the victim agent and returns true; in the test itself, false.
fn run_as_child_agent() -> bool {
    let (Ok(url), Ok(name)) = (
        std::env::var("VOLLEY_TEST_AGENT_URL"),
        std::env::var("VOLLEY_TEST_AGENT_NAME"),
    ) else {
        return false;
    };
    let _ = agent::run(
        &agent_cfg(&Meet::from_env(&url, &name), &name),
        synthetic(StopSeen::default()),
        &mut |_| {},
    );
    true
}

/// The child agent: this test binary, running only the kill test, with the env that
/// makes it the victim agent ([`run_as_child_agent`]).
struct ChildAgent(Child);

impl ChildAgent {
    fn spawn(m: &Meet, name: &str) -> Self {
        let exe = std::env::current_exe().expect("test binary path");
        let child = Command::new(exe)
            .args([
                // A name filter (no --exact): the test's full name starts with its module.
                "an_agent_killed_mid_run_degrades_the_run_from_that_second",
                "--test-threads=1",
                "--quiet",
            ])
            .env("VOLLEY_TEST_AGENT_URL", &m.url)
            // As a study hands a local agent its credentials: in its environment.
            .env(
                volley_agents::auth::CREDENTIALS_ENV,
                m.agents[name].to_json(),
            )
            .env("VOLLEY_TEST_AGENT_NAME", name)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("spawn child agent");
        ChildAgent(child)
    }
}

impl Drop for ChildAgent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn an_agent_killed_mid_run_degrades_the_run_from_that_second() {
    if run_as_child_agent() {
        return;
    }
    let nats = common::secured_bus();
    let mut victim = ChildAgent::spawn(&Meet::of(&nats), "victim");
    let agents: Vec<_> = ["a", "b"]
        .iter()
        .map(|n| spawn_agent(&Meet::of(&nats), n))
        .collect();
    let mut cfg = coord_cfg(&Meet::of(&nats), "kill", 6_000, 7);
    cfg.ready_bound = Duration::from_secs(30);
    let started = Instant::now();
    let coord = spawn_coordinator(cfg);
    // Ready, probes and the 1.5 s lead take about 2 s; kill after ~3 s of load.
    std::thread::sleep(Duration::from_secs(5));
    let _ = victim.0.kill();
    let _ = victim.0.wait();
    let r = join_within(coord, Duration::from_secs(40)).expect("run");
    assert!(started.elapsed() < Duration::from_secs(40));
    for (h, _) in agents {
        assert_eq!(
            join_within(h, Duration::from_secs(10))
                .expect("agent")
                .ending,
            Ending::Done
        );
    }
    let v = r
        .agents
        .iter()
        .find(|a| a.name == "victim")
        .expect("victim ran");
    let from = v.lost_from_s.expect("victim lost");
    assert!(v.final_record.is_none());
    // About 3 s of load ran before the kill (0 only on a machine too busy to start it).
    assert!(from < 7, "lost from {from}");
    assert_eq!(r.merged.degraded_from_s, Some(from));
    let vs = r
        .merged
        .agents
        .iter()
        .find(|a| a.agent == "victim")
        .unwrap();
    assert_eq!(
        vs.seconds(),
        (0..from).collect::<Vec<_>>(),
        "its data up to then kept"
    );
    for s in &r.merged.seconds {
        let want = if s.second < from {
            Slot::Present
        } else {
            Slot::Lost
        };
        assert_eq!(s.slots["victim"], want, "second {}", s.second);
        assert_eq!(
            (s.slots["a"], s.slots["b"]),
            (Slot::Present, Slot::Present),
            "the others intact"
        );
    }
    for a in r.agents.iter().filter(|a| a.name != "victim") {
        assert_eq!(a.final_record.as_ref().unwrap().records_sent, 7);
    }
}

#[test]
fn too_few_agents_is_a_clear_error_unless_min_agents_allows() {
    let nats = common::secured_bus();
    let (h, _) = spawn_agent(&Meet::of(&nats), "lonely");
    let mut cfg = coord_cfg(&Meet::of(&nats), "few", 100, 1);
    cfg.ready_bound = Duration::from_secs(3);
    let e = join_within(spawn_coordinator(cfg), Duration::from_secs(10)).unwrap_err();
    assert!(
        matches!(
            e,
            AgentsError::NotEnoughAgents {
                ready: 1,
                wanted: 3,
                ..
            }
        ),
        "{e}"
    );
    // With min_agents = 1 the same lobby agent runs alone.
    let mut cfg = coord_cfg(&Meet::of(&nats), "one", 100, 1);
    (cfg.min_agents, cfg.ready_bound) = (1, Duration::from_secs(3));
    cfg.whole.connections = 1;
    let r = join_within(spawn_coordinator(cfg), Duration::from_secs(20)).expect("run of one");
    assert_eq!(r.agents.len(), 1);
    assert_eq!(merged_requests(&r), 100);
    assert_eq!(
        join_within(h, Duration::from_secs(10))
            .expect("agent")
            .ending,
        Ending::Done
    );
}

#[test]
fn a_failing_load_ends_with_a_final_record_that_says_why() {
    let nats = common::secured_bus();
    let cfg = agent_cfg(&Meet::of(&nats), "bad");
    let h = std::thread::spawn(move || {
        agent::run(&cfg, |_ctx: LoadCtx| Err("boom".into()), &mut |_| {})
    });
    let mut ccfg = coord_cfg(&Meet::of(&nats), "fail", 10, 1);
    (ccfg.agents, ccfg.min_agents) = (1, 1);
    let r = join_within(spawn_coordinator(ccfg), Duration::from_secs(20)).expect("run");
    let fin = r.agents[0].final_record.as_ref().expect("final record");
    assert_eq!(
        (fin.ending, fin.error.as_deref()),
        (Ending::Failed, Some("boom"))
    );
    assert_eq!(fin.records_sent, 0);
    let e = join_within(h, Duration::from_secs(10)).unwrap_err();
    assert!(matches!(e, AgentsError::Load(_)), "{e}");
}

/// A long run's share outgrows the bus's largest message (NATS's default 1 MB, about
/// 15 minutes of seconds): it travels in pieces and arrives whole. Before, an hour-long
/// injected run ended with "no agent sent its recorder" and no step was stored.
#[test]
fn a_share_larger_than_a_bus_message_arrives_whole_in_pieces() {
    let nats = common::secured_bus();
    let cfg = agent_cfg(&Meet::of(&nats), "big");
    // 2.5 MB of notes: ten pieces of at most 256 KB, over twice the bus's 1 MB limit.
    let note = "n".repeat(2_500_000);
    let sent = note.clone();
    let h = std::thread::spawn(move || {
        agent::run(
            &cfg,
            move |ctx: LoadCtx| {
                ctx.finish_with(ShareRecord {
                    recorder: Recorder::new().snapshot()?,
                    info: common::run_info(vec![sent]),
                    offset_s: 0,
                });
                Ok(())
            },
            &mut |_| {},
        )
    });
    let mut ccfg = coord_cfg(&Meet::of(&nats), "big", 10, 1);
    (ccfg.agents, ccfg.min_agents) = (1, 1);
    let r = join_within(spawn_coordinator(ccfg), Duration::from_secs(30)).expect("run");
    let fin = r.agents[0].final_record.as_ref().expect("final record");
    assert_eq!(fin.share_parts, 10);
    let share = fin.share.as_ref().expect("the share, put back together");
    assert_eq!(share.info.notes, [note]);
    assert_eq!(
        join_within(h, Duration::from_secs(10))
            .expect("agent")
            .ending,
        Ending::Done
    );
}

#[test]
fn a_load_that_ignores_stop_is_left_after_the_bound_and_the_agent_ends() {
    let nats = common::secured_bus();
    let cfg = agent_cfg(&Meet::of(&nats), "deaf");
    let deaf = |_ctx: LoadCtx| -> Result<(), LoadError> {
        std::thread::sleep(Duration::from_secs(15));
        Ok(())
    };
    let h = std::thread::spawn(move || agent::run(&cfg, deaf, &mut |_| {}));
    let mut ccfg = coord_cfg(&Meet::of(&nats), "deaf", 10, 1);
    (ccfg.agents, ccfg.min_agents, ccfg.run_bound) = (1, 1, Duration::from_secs(1));
    ccfg.lost_after = Duration::from_secs(30);
    let r = join_within(spawn_coordinator(ccfg), Duration::from_secs(20)).expect("run");
    // The coordinator's bound ended the run: it said stop and marked the agent lost.
    assert!(r.agents[0].lost_from_s.is_some());
    let stop_sent = Instant::now();
    let e = join_within(h, Duration::from_secs(10)).unwrap_err();
    assert!(matches!(e, AgentsError::Load(_)), "{e}");
    assert!(stop_sent.elapsed() < Duration::from_secs(8));
}
