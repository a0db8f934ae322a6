//! The coordinator: gathers agents, starts them together, collects and merges.
//!
//! Place in the flow: the side of `volley` that owns a multi-injector run. It waits
//! (bounded) for the wanted number of agents in the lobby, or starts with fewer when
//! `min_agents` allows; probes each agent's clock ([`clock::best_offset`]); splits the
//! load ([`share::split`]); sends each its share, one start instant T0 and its own
//! delay; then collects records, heartbeats and final records until every agent has
//! finished or been declared lost (silent for `lost_after`). The result is the
//! exact [`merge`] and its [`phase`]s, folded as the seconds close ([`crate::fold`]).

use crate::auth::BusCredentials;
use crate::bus::{self, Bus};
use crate::clock::{self, ClockOffset, Probe};
pub use crate::collect::Backlog;
use crate::collect::{self, Collected};
use crate::fold::{Folded, Tally};
use crate::load::LoadSpec;
use crate::merge::{self, AgentSeries, Merged, MergedSecond, Received, Slot};
use crate::msg::{
    self, subject, Assignment, FinalRecord, Hello, ProbeReply, ProbeRequest, Ready,
    SignedAssignment, Stop, PROTO,
};
use crate::phase::Phase;
use crate::share::{self, Share, Whole};
use crate::AgentsError;
use rangemap::RangeInclusiveSet;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// How a run is coordinated.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// `nats://HOST:PORT`.
    pub bus_url: String,
    /// The run's id (a subject token).
    pub run: String,
    /// The whole load.
    pub whole: Whole,
    /// Agents wanted.
    pub agents: usize,
    /// The fewest the run starts with once `ready_bound` has passed.
    pub min_agents: usize,
    /// How long to wait for agents.
    pub ready_bound: Duration,
    /// Clock probes per agent.
    pub probes: u32,
    /// Bound of one probe or assignment request.
    pub request_bound: Duration,
    /// An offset beyond this is warned about (and stored).
    pub max_offset: Duration,
    /// T0 is this long after the assignments are sent, so every agent has it in time.
    pub start_lead: Duration,
    /// Agent `i` starts `i * stagger` after T0 (zero: all together).
    pub stagger: Duration,
    /// An agent silent this long (no heartbeat, record or piece) is lost; see
    /// [`lost_grace`] for the bound a study uses.
    pub lost_after: Duration,
    /// A record later than this after its second ended is flagged late.
    pub late_grace: Duration,
    /// The longest the collection may last after T0.
    pub run_bound: Duration,
    /// The coordinator's own bus down this long ends the run with
    /// [`AgentsError::BusGone`] (shorter outages only make records late).
    pub bus_gone_after: Duration,
    /// What every agent loads (`None`: the agents' load functions know).
    pub load: Option<LoadSpec>,
    /// Per share index, another address to load instead of `load.addr` (an injector
    /// behind a delaying proxy).
    pub addrs: Vec<Option<String>>,
    /// Raised from outside (Ctrl-C, the target died): the agents are told to stop and
    /// their data up to then is collected.
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// The coordinator's credentials on a secured bus (and the key its assignments are
    /// signed with); `None`: the bus's security is off.
    pub auth: Option<BusCredentials>,
    /// The caller stores every merged second the moment it is handed out
    /// ([`Event::Merged`]; with this set, the seconds merged at the run's end are handed
    /// out too): the coordinator then keeps none of them, only what the run's end reads
    /// ([`crate::fold`]: a summary row a second, the phases cut as they go), so its
    /// memory stays flat over a long run. Off: [`RunResult::merged`] holds them all.
    pub stored_live: bool,
    /// The agents whose processes this volley started (`None`: none, or all remote):
    /// one whose process exited and that has been silent for [`EXITED_GRACE`] is lost
    /// then, not after `lost_after` (docs/methodology.md, "When the bus is away").
    pub exited: Option<crate::local::ExitWatch>,
}

/// How long an agent whose process exited may stay silent before it is lost: its final
/// record, sent just before it exits, arrives well within it.
pub const EXITED_GRACE: Duration = Duration::from_secs(2);

impl CoordinatorConfig {
    /// The agents' warm-up ([`LoadSpec::warmup_ms`]): it runs before T0.
    pub(crate) fn warmup(&self) -> Duration {
        Duration::from_millis(self.load.as_ref().map_or(0, |l| l.warmup_ms))
    }

    /// The late grace in ms, as the merge takes it.
    pub(crate) fn late_grace_ms(&self) -> u64 {
        self.late_grace.as_millis() as u64
    }

    /// Defaults for `agents` agents, all required: 30 s to be ready, 8 probes,
    /// 2 s start lead, lost after 10 s ([`LOST_AFTER`]), records late after 2 s, runs of
    /// at most a day,
    /// the bus gone after 10 s.
    pub fn new(bus_url: &str, run: &str, whole: Whole, agents: usize) -> Self {
        CoordinatorConfig {
            bus_url: bus_url.to_string(),
            run: run.to_string(),
            whole,
            agents,
            min_agents: agents,
            ready_bound: Duration::from_secs(30),
            probes: 8,
            request_bound: Duration::from_secs(2),
            max_offset: Duration::from_millis(50),
            start_lead: Duration::from_secs(2),
            stagger: Duration::ZERO,
            lost_after: LOST_AFTER,
            late_grace: Duration::from_secs(2),
            run_bound: Duration::from_secs(86_400),
            bus_gone_after: Duration::from_secs(10),
            load: None,
            addrs: Vec::new(),
            stop: None,
            auth: None,
            stored_live: false,
            exited: None,
        }
    }
}

/// The shortest silence that loses an agent: ten heartbeats. Three (3 s) lost every
/// agent of an hour-long injected run on a loaded machine at second 90, although none
/// had died: a process starved of CPU for a few seconds is silent exactly like a dead
/// one.
pub const LOST_AFTER: Duration = Duration::from_secs(10);

/// The longest silence a long step waits out before losing an agent.
pub const LOST_AFTER_MOST: Duration = Duration::from_secs(60);

/// How long an agent may be silent before it is lost, for a step of `step` (`None`:
/// a step bounded by a request count): one sixtieth of the step, at least
/// [`LOST_AFTER`] and at most [`LOST_AFTER_MOST`] (an hour's step: 60 s).
///
/// Why scaled, and why a long grace costs little: where the run is degraded from does
/// not depend on the grace (it is the second after the agent's last record), and the
/// agent's seconds up to then are kept either way. The grace only decides how long a
/// stalled agent's silence is waited out, and how long the live merge of the seconds it
/// owes waits for it. A long step loses more to an agent dropped for a stall than it
/// loses to a minute's wait.
pub fn lost_grace(step: Option<Duration>) -> Duration {
    step.map_or(LOST_AFTER, |d| d / 60)
        .clamp(LOST_AFTER, LOST_AFTER_MOST)
}

/// What happened, for the binary's log (this crate never prints).
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// An agent is in the lobby.
    Joined(String),
    /// Its clock was measured; `beyond_bound` when past `max_offset`.
    Clock {
        /// The agent.
        agent: String,
        /// The estimate.
        offset: ClockOffset,
        /// Past the configured bound (a warning; the offset is used and stored).
        beyond_bound: bool,
    },
    /// It answered no probe and is left out of the run.
    NoClock(String),
    /// It took its assignment.
    Assigned {
        /// The agent.
        agent: String,
        /// Its delay after T0, ms.
        delay_ms: u64,
    },
    /// Silent for `lost_after`: degraded from `from_s`.
    Lost {
        /// The agent.
        agent: String,
        /// First second without its data.
        from_s: u64,
    },
    /// Its final record came.
    Finished(String),
    /// One of its per-second records arrived (to be stored at once, beside the merge).
    Second(Box<Received>),
    /// Every due agent has sent this second: it is merged, ahead of the run's end.
    Merged(Box<MergedSecond>),
    /// The coordinator's bus came back after being away (heartbeat clocks restart).
    BusBack,
}

/// One agent as the run saw it. Serialised as a study stores each injector of a step
/// (its `injectors[]`, in this order; the final record is the study's to summarise).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AgentReport {
    /// Its name.
    pub name: String,
    /// Its share.
    pub share: Share,
    /// Its start after T0, ms.
    pub delay_ms: u64,
    /// How late its assignment arrived, ms.
    pub late_ms: u64,
    /// Its clock offset.
    pub clock: ClockOffset,
    /// The offset was past `max_offset`.
    pub clock_warning: bool,
    /// Its final record, if it sent one.
    #[serde(skip)]
    pub final_record: Option<FinalRecord>,
    /// From which second it was lost.
    pub lost_from_s: Option<u64>,
    /// It was lost because its process, one this volley started, exited
    /// ([`CoordinatorConfig::exited`]), not after a silence.
    pub process_exited: bool,
    /// Its seconds that arrived past the grace (sent again after the bus was away, or
    /// slow): filled in all the same.
    pub late_seconds: u64,
    /// The latest of them, ms past its second's end plus the grace (0: none late).
    pub max_late_ms: u64,
    /// Records it sent after it had been declared lost, refused (never merged).
    #[serde(rename = "refused_after_lost")]
    pub refused: u64,
    /// Its records of a second already merged without them (they came after a later
    /// record of its own, which agents never send): counted, never merged. Stored only
    /// when some came.
    #[serde(skip_serializing_if = "is_zero")]
    pub after_merge: u64,
}

impl AgentReport {
    /// An agent just assigned: its share and clock, nothing late, lost or refused yet
    /// (the run fills those in as it goes).
    pub fn new(name: String, share: Share, clock: ClockOffset) -> AgentReport {
        AgentReport {
            name,
            share,
            delay_ms: 0,
            late_ms: 0,
            clock,
            clock_warning: false,
            final_record: None,
            lost_from_s: None,
            process_exited: false,
            late_seconds: 0,
            max_late_ms: 0,
            refused: 0,
            after_merge: 0,
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The whole run.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The run's id.
    pub run: String,
    /// T0, coordinator wall clock, ns since the epoch.
    pub t0_ns: i64,
    /// Each agent, in share order.
    pub agents: Vec<AgentReport>,
    /// The exact merge (each agent's series kept inside; its seconds only when the
    /// caller did not store them as they closed, [`CoordinatorConfig::stored_live`]).
    pub merged: Merged,
    /// What the run's end reads of every merged second, folded as they closed.
    pub folded: Folded,
    /// Phases by active injector set.
    pub phases: Vec<Phase>,
    /// The most the live merge held at once waiting for late records.
    pub backlog: Backlog,
}

/// Runs one coordinated run; blocks until it is over.
pub fn coordinate(
    cfg: &CoordinatorConfig,
    on_event: &mut dyn FnMut(Event),
) -> Result<RunResult, AgentsError> {
    msg::check_token("run id", &cfg.run)?;
    let rt = bus::runtime()?;
    rt.block_on(async {
        let bus = Bus::connect(&cfg.bus_url, Duration::from_secs(5), cfg.auth.as_ref()).await?;
        let streams = bus.subscribe(subject::all_streams(&cfg.run)).await?;
        let Lobby { names, nonces } = gather(cfg, &bus, on_event).await?;
        let clocks = probe_all(cfg, &bus, names, on_event).await?;
        let (t0_ns, mut agents) = assign(cfg, &bus, clocks, &nonces, on_event).await?;
        let c = collect::collect(cfg, &bus, streams, t0_ns, &mut agents, on_event).await?;
        let Collected {
            series,
            bus_gone,
            records,
            closed,
            kept,
            mut tally,
            backlog,
        } = c;
        let merged = merge_rest(cfg, series, (&closed, kept), &mut tally, on_event)?;
        count_late(&mut agents, &tally);
        let (folded, phases) = tally.finish(merged.degraded_from_s)?;
        let result = RunResult {
            run: cfg.run.clone(),
            t0_ns,
            agents,
            merged,
            folded,
            phases,
            backlog,
        };
        match bus_gone {
            Some(after) => Err(AgentsError::BusGone {
                after,
                records,
                partial: Box::new(result),
            }),
            None => Ok(result),
        }
    })
}

/// The run's end: merges the seconds the live merge never closed (some due agent's
/// record never came) and folds them into `tally`, in order; with
/// [`CoordinatorConfig::stored_live`] hands out those some agent was present in (the
/// caller stores them as it stored the live ones), and otherwise keeps every second,
/// the ones `closed` live (`kept`) among them.
fn merge_rest(
    cfg: &CoordinatorConfig,
    series: Vec<AgentSeries>,
    (closed, mut kept): (&RangeInclusiveSet<u64>, BTreeMap<u64, Box<MergedSecond>>),
    tally: &mut Tally,
    on_event: &mut dyn FnMut(Event),
) -> Result<Merged, AgentsError> {
    let mut seconds = Vec::new();
    if let Some((first, last)) = merge::span(&series) {
        for s in first..=last {
            if closed.contains(&s) {
                seconds.extend(kept.remove(&s).map(|m| *m));
                continue;
            }
            let m = merge::merge_second(&series, s, last, cfg.late_grace_ms())?;
            tally.fold(&m, &series)?;
            if !cfg.stored_live {
                seconds.push(m);
            } else if m.slots.values().any(|x| *x == Slot::Present) {
                on_event(Event::Merged(Box::new(m)));
            }
        }
    }
    Ok(Merged {
        seconds,
        degraded_from_s: merge::degraded_from(&series),
        agents: series,
    })
}

/// Each agent's late seconds, as the merged seconds flagged them.
fn count_late(agents: &mut [AgentReport], tally: &Tally) {
    for (a, &(n, most)) in agents.iter_mut().zip(tally.late()) {
        a.late_seconds += n;
        a.max_late_ms = a.max_late_ms.max(most);
    }
}

/// The agents gathered in the lobby.
struct Lobby {
    /// Their names, in name order (`inj2` before `inj10`).
    names: Vec<String>,
    /// Each name's nonce of its latest hello, echoed in its assignment.
    nonces: HashMap<String, String>,
}

/// Waits for `cfg.agents` distinct names in the lobby, or `min_agents` at the bound.
async fn gather(
    cfg: &CoordinatorConfig,
    bus: &Bus,
    on_event: &mut dyn FnMut(Event),
) -> Result<Lobby, AgentsError> {
    let mut lobby = bus.subscribe(subject::lobby()).await?;
    let mut nonces = HashMap::new();
    let until = Instant::now() + cfg.ready_bound;
    let mut names: Vec<String> = Vec::new();
    while names.len() < cfg.agents {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let Some(m) = bus::next(&mut lobby, left).await else {
            continue;
        };
        // Anything else on the lobby subject (another version, another program) is
        // not an agent of ours.
        let Ok(h) = msg::decode::<Hello>(&m.payload) else {
            continue;
        };
        // A hello under another agent's name is not that agent (on a secured bus
        // each may publish only its own hello subject).
        if subject::parse_hello(&m.subject) != Some(h.name.as_str()) {
            continue;
        }
        nonces.insert(h.name.clone(), h.nonce.clone());
        if msg::valid_token(&h.name) && !names.contains(&h.name) {
            on_event(Event::Joined(h.name.clone()));
            names.push(h.name);
        }
    }
    Ok(Lobby {
        names: enough(cfg, names)?,
        nonces,
    })
}

fn enough(cfg: &CoordinatorConfig, mut names: Vec<String>) -> Result<Vec<String>, AgentsError> {
    // Shares and start delays follow the names' order, not the order the agents
    // happened to join in: `inj2` before `inj10`, so a staggered run starts as named.
    names.sort_by(|a, b| (a.len(), a).cmp(&(b.len(), b)));
    if names.len() >= cfg.min_agents.max(1) {
        Ok(names)
    } else {
        Err(AgentsError::NotEnoughAgents {
            ready: names.len(),
            wanted: cfg.agents,
            min: cfg.min_agents,
            waited: cfg.ready_bound,
            names,
        })
    }
}

/// Probes each agent's clock; an agent that answers none is left out.
async fn probe_all(
    cfg: &CoordinatorConfig,
    bus: &Bus,
    names: Vec<String>,
    on_event: &mut dyn FnMut(Event),
) -> Result<Vec<(String, ClockOffset)>, AgentsError> {
    let mut out = Vec::new();
    for name in names {
        let mut probes = Vec::new();
        for seq in 0..cfg.probes {
            let t0 = clock::wall_ns();
            let q = ProbeRequest { proto: PROTO, seq };
            let Ok(r) = bus
                .request::<_, ProbeReply>(subject::probe(&name), &q, cfg.request_bound)
                .await
            else {
                continue;
            };
            let t3 = clock::wall_ns();
            if r.seq == seq {
                probes.push(Probe {
                    t0,
                    t1: r.t1,
                    t2: r.t2,
                    t3,
                });
            }
        }
        match clock::best_offset(&probes) {
            Some(offset) => {
                let beyond_bound =
                    offset.offset_ns.unsigned_abs() > cfg.max_offset.as_nanos() as u64;
                on_event(Event::Clock {
                    agent: name.clone(),
                    offset,
                    beyond_bound,
                });
                out.push((name, offset));
            }
            None => on_event(Event::NoClock(name)),
        }
    }
    let names: Vec<String> = out.iter().map(|(n, _)| n.clone()).collect();
    enough(cfg, names)?;
    Ok(out)
}

/// Splits the load, picks T0 and sends every agent its assignment.
async fn assign(
    cfg: &CoordinatorConfig,
    bus: &Bus,
    clocks: Vec<(String, ClockOffset)>,
    nonces: &HashMap<String, String>,
    on_event: &mut dyn FnMut(Event),
) -> Result<(i64, Vec<AgentReport>), AgentsError> {
    let shares = share::split(&cfg.whole, clocks.len() as u32)?;
    let t0_ns = clock::wall_ns() + (cfg.start_lead + cfg.warmup()).as_nanos() as i64;
    let mut agents = Vec::new();
    for (i, ((name, offset), share)) in clocks.into_iter().zip(shares).enumerate() {
        let delay_ms = (cfg.stagger * i as u32).as_millis() as u64;
        let a = Assignment {
            proto: PROTO,
            run: cfg.run.clone(),
            share,
            t0_ns,
            offset_ns: offset.offset_ns,
            delay_ms,
            load: cfg.load.clone().map(|mut l| {
                if let Some(Some(a)) = cfg.addrs.get(i) {
                    l.addr.clone_from(a);
                }
                l
            }),
            agent: name.clone(),
            nonce: nonces.get(&name).cloned().unwrap_or_default(),
        };
        let signed = sign(cfg, &a)?;
        let ready = bus
            .request::<_, Ready>(subject::assign(&name), &signed, cfg.request_bound)
            .await;
        let ready = match ready {
            Ok(Ready {
                refused: Some(reason),
                ..
            }) => Err(AgentsError::Refused {
                agent: name.clone(),
                reason,
            }),
            r => r,
        };
        let ready = match ready {
            Ok(r) => r,
            Err(e) => {
                // Those already assigned must not run alone.
                let stop = Stop {
                    proto: PROTO,
                    reason: format!("agent {name} did not take its assignment"),
                };
                let _ = bus.publish(subject::stop(&cfg.run), &stop).await;
                // Published messages are buffered: flush before the runtime goes.
                let _ = bus.flush(bus::SEND_BOUND).await;
                return Err(e);
            }
        };
        on_event(Event::Assigned {
            agent: name.clone(),
            delay_ms,
        });
        agents.push(AgentReport {
            clock_warning: offset.offset_ns.unsigned_abs() > cfg.max_offset.as_nanos() as u64,
            delay_ms,
            late_ms: ready.late_ms,
            ..AgentReport::new(name, share, offset)
        });
    }
    Ok((t0_ns, agents))
}

/// An assignment as it travels: its bytes, signed with the study's key when the bus
/// is secured.
fn sign(cfg: &CoordinatorConfig, a: &Assignment) -> Result<SignedAssignment, AgentsError> {
    let body = msg::encode(a)?;
    let mac = match &cfg.auth {
        Some(c) => c.sign(&body)?,
        None => Vec::new(),
    };
    Ok(SignedAssignment {
        proto: PROTO,
        body: body.into(),
        mac: mac.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::lost_from;
    use crate::merge::{tests::series, AgentSeries};

    fn cfg(agents: usize, min_agents: usize) -> CoordinatorConfig {
        let whole = Whole {
            requests: Some(10),
            rate_rps: None,
            connections: 4,
            duration_ms: None,
        };
        let mut c = CoordinatorConfig::new("nats://127.0.0.1:1", "r1", whole, agents);
        c.min_agents = min_agents;
        c
    }

    #[test]
    fn the_lost_grace_is_a_sixtieth_of_the_step_between_10_and_60_s() {
        let s = Duration::from_secs;
        assert_eq!(lost_grace(None), s(10));
        assert_eq!(lost_grace(Some(s(30))), s(10));
        assert_eq!(lost_grace(Some(s(1_200))), s(20));
        assert_eq!(lost_grace(Some(s(3_600))), s(60));
        assert_eq!(lost_grace(Some(s(86_400))), s(60));
    }

    #[test]
    fn min_agents_decides_whether_fewer_may_start() {
        let two = vec!["a".to_string(), "b".to_string()];
        assert_eq!(enough(&cfg(3, 2), two.clone()).unwrap(), two);
        let e = enough(&cfg(3, 3), two).unwrap_err();
        assert!(matches!(
            e,
            AgentsError::NotEnoughAgents {
                ready: 2,
                wanted: 3,
                min: 3,
                ..
            }
        ));
        assert!(
            enough(&cfg(3, 0), Vec::new()).is_err(),
            "a run needs one agent"
        );
    }

    #[test]
    fn a_lost_agent_is_degraded_from_the_second_after_its_last_record() {
        assert_eq!(lost_from(&series("a", 2..=5, 1, 1)), 6);
        assert_eq!(
            lost_from(&AgentSeries::new("a", 3)),
            3,
            "nothing sent: from its start"
        );
    }
}
