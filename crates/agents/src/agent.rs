//! The agent: one injector on the bus.
//!
//! Place in the flow: what `volley agent --bus URL --name NAME` runs. It announces
//! itself in the lobby each second, answers clock probes, takes its [`Assignment`],
//! arms its start on its own monotonic clock ([`clock::local_deadline`]) and then runs
//! the caller's load function in a thread of its own. While the load runs, the agent
//! publishes each [`SecondRecord`] the load emits, a heartbeat each second, and a
//! [`FinalRecord`] at the end. If the bus stays down for `bus_lost_after` it raises the
//! load's stop flag, so the load ends within that plus its own polling interval (the
//! issue's bound is 2 s).

use crate::allow::AllowList;
use crate::auth::BusCredentials;
use crate::bus::{self, Bus, Incoming};
use crate::clock::{self, Deadline};
use crate::load::ShareRecord;
use crate::msg::{
    self, subject, Assignment, Ending, Hello, ProbeReply, ProbeRequest, Ready, SecondRecord,
    SignedAssignment, PROTO,
};
use crate::AgentsError;
use futures::StreamExt;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// The error a load function may fail with.
pub type LoadError = Box<dyn std::error::Error + Send + Sync>;

/// How an agent behaves.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// `nats://HOST:PORT`.
    pub bus_url: String,
    /// Its name on the bus (a subject token).
    pub name: String,
    /// How long to wait in the lobby for an assignment.
    pub assign_bound: Duration,
    /// How long the bus may be down before the load is stopped.
    pub bus_lost_after: Duration,
    /// The longest a run may last once assigned (the load is stopped past it).
    pub run_bound: Duration,
    /// Records kept while the bus is away (see [`crate::outbox`]).
    pub outbox_bound: usize,
    /// How long, once the load has ended, the agent waits for the bus to take its
    /// buffered records and final record before it exits without them.
    pub resend_bound: Duration,
    /// Its credentials on a secured bus (TLS, user and password, the study's
    /// assignment key); `None`: the bus's security is off, and unsigned assignments are
    /// taken.
    pub auth: Option<BusCredentials>,
    /// What it may load; an assignment outside is refused.
    pub allow: AllowList,
    /// The source address its connections come from (`None`: the kernel's choice).
    /// Agents on one host each take their own so that the server's log tells them
    /// apart.
    pub source_ip: Option<IpAddr>,
}

impl AgentConfig {
    /// Defaults: an hour in the lobby, the load stopped after 1 s without the bus, runs
    /// of at most a day, 300 records kept while the bus is away and 10 s to send them
    /// once the load has ended; no credentials (set `auth`), and the default allow-list
    /// (loopback and the bus's own network, [`AllowList::default_for`]).
    pub fn new(bus_url: &str, name: &str) -> Self {
        AgentConfig {
            bus_url: bus_url.to_string(),
            name: name.to_string(),
            assign_bound: Duration::from_secs(3_600),
            bus_lost_after: Duration::from_secs(1),
            run_bound: Duration::from_secs(86_400),
            outbox_bound: crate::outbox::DEFAULT_BOUND,
            resend_bound: Duration::from_secs(10),
            auth: None,
            allow: AllowList::default_for(bus_url),
            source_ip: None,
        }
    }
}

/// What happened, for the binary's log (this crate never prints).
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// Connected and in the lobby.
    Joined,
    /// An assignment was refused and the agent stays in the lobby: not signed with the
    /// study's key (forged), or not for this agent process (replayed). Why.
    Refused(String),
    /// The assignment's target is outside the allow-list: refused, nothing loaded, the
    /// agent exits with [`AgentsError::RefusedHere`]. Why.
    RefusedTarget(String),
    /// Assigned; the load starts at the deadline (`late_ms` past it when > 0).
    Assigned {
        /// The run.
        run: String,
        /// How late the assignment came, ms.
        late_ms: u64,
    },
    /// The coordinator said stop.
    Stopped(String),
    /// The bus was down too long; the load's stop flag is raised.
    BusLost,
    /// Nobody has taken its records for 3 s while the bus is up: the coordinator is
    /// gone, the load's stop flag is raised.
    CoordinatorGone,
    /// The coordinator said this agent is out of the run (declared lost): the load's
    /// stop flag is raised and the agent exits with [`AgentsError::Stale`].
    Stale(String),
}

/// What the load function is given.
#[derive(Debug)]
pub struct LoadCtx {
    /// Its assignment (share, T0, delay).
    pub assignment: Assignment,
    /// T0 on this agent's monotonic clock.
    pub t0: Instant,
    /// When the load was started (T0 + its delay, or later if the assignment was late).
    pub started: Instant,
    /// The source address to connect from ([`AgentConfig::source_ip`]).
    pub source_ip: Option<IpAddr>,
    stop: Arc<AtomicBool>,
    records: mpsc::UnboundedSender<SecondRecord>,
    name: String,
    share: Arc<Mutex<Option<ShareRecord>>>,
}

impl LoadCtx {
    /// True once the load must stop (bus lost, coordinator's stop, run bound).
    pub fn should_stop(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The stop flag itself, for a load that hands it to its own threads.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Whole seconds since T0 of an intended send instant: the key of its window.
    pub fn second_of(&self, intended: Instant) -> u64 {
        intended.saturating_duration_since(self.t0).as_secs()
    }

    /// Keeps the whole share, sent with the final record.
    pub fn finish_with(&self, record: ShareRecord) {
        if let Ok(mut s) = self.share.lock() {
            *s = Some(record);
        }
    }

    /// Hands one closed second to the agent to publish (its `agent` and `proto` are
    /// filled in). Never blocks.
    pub fn emit(&self, mut rec: SecondRecord) {
        rec.agent.clone_from(&self.name);
        rec.proto = PROTO;
        // The receiver lives until the load thread ends; a send after that is moot.
        let _ = self.records.send(rec);
    }
}

/// How an agent's run went.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentOutcome {
    /// The run's id.
    pub run: String,
    /// Second records published.
    pub records_sent: u64,
    /// How the load ended.
    pub ending: Ending,
    /// The most records that waited at once for the bus (1 when it never went away).
    pub most_buffered: usize,
    /// Records dropped because the outbox was full.
    pub dropped: u64,
}

/// Joins the bus, waits for one assignment, runs `load` for it and reports; blocks
/// until the run is over. `Err(BusLost)` when the bus went away (the load was stopped
/// first).
pub fn run<F>(
    cfg: &AgentConfig,
    load: F,
    on_event: &mut dyn FnMut(AgentEvent),
) -> Result<AgentOutcome, AgentsError>
where
    F: FnOnce(LoadCtx) -> Result<(), LoadError> + Send + 'static,
{
    msg::check_token("agent name", &cfg.name)?;
    let rt = bus::runtime()?;
    rt.block_on(async {
        let bus = Bus::connect(&cfg.bus_url, Duration::from_secs(5), cfg.auth.as_ref()).await?;
        on_event(AgentEvent::Joined);
        let (assignment, request) = lobby(cfg, &bus, on_event).await?;
        let stop_sub = bus.subscribe(subject::stop(&assignment.run)).await?;
        let deadline = clock::local_deadline(
            assignment
                .t0_ns
                .saturating_sub(assignment.warmup().as_nanos() as i64),
            assignment.offset_ns,
            Duration::from_millis(assignment.delay_ms),
            clock::wall_ns(),
            Instant::now(),
        );
        let late_ms = deadline.late.as_millis() as u64;
        let ready = Ready {
            proto: PROTO,
            name: cfg.name.clone(),
            late_ms,
            refused: None,
        };
        bus.reply(&request, &ready).await?;
        on_event(AgentEvent::Assigned {
            run: assignment.run.clone(),
            late_ms,
        });
        let run = assignment.run.clone();
        let (ctx, done) = start_load(cfg, assignment, deadline, load)?;
        let stale_sub = bus.subscribe(subject::stale(&cfg.name)).await?;
        let subs = crate::streaming::Subs {
            stop: stop_sub,
            stale: stale_sub,
        };
        crate::streaming::stream(cfg, &bus, &run, subs, ctx, done, on_event).await
    })
}

/// Announces the agent each second and answers probes until an assignment it takes
/// comes; refuses forged and replayed ones (and stays), and one whose target is outside
/// its allow-list (and ends).
async fn lobby(
    cfg: &AgentConfig,
    bus: &Bus,
    on_event: &mut dyn FnMut(AgentEvent),
) -> Result<(Assignment, Incoming), AgentsError> {
    let mut probes = bus.subscribe(subject::probe(&cfg.name)).await?;
    let mut assigns = bus.subscribe(subject::assign(&cfg.name)).await?;
    let hello = Hello {
        proto: PROTO,
        name: cfg.name.clone(),
        nonce: crate::auth::random_token(16)?,
    };
    let until = Instant::now() + cfg.assign_bound;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut watch = BusWatch::new(cfg.bus_lost_after);
    while Instant::now() < until {
        tokio::select! {
            _ = tick.tick() => {
                if watch.lost(bus) {
                    return Err(AgentsError::BusLost);
                }
                if bus.connected() {
                    bus.publish(subject::hello(&cfg.name), &hello).await?;
                }
            }
            Some(m) = probes.next() => {
                let t1 = clock::wall_ns();
                // A probe that cannot be read goes unanswered: the coordinator's own
                // bound then counts it as lost, and the agent stays available.
                if let Ok(q) = msg::decode::<ProbeRequest>(&m.payload) {
                    let reply = ProbeReply { proto: PROTO, seq: q.seq, t1, t2: clock::wall_ns() };
                    bus.reply(&m, &reply).await?;
                }
            }
            Some(m) = assigns.next() => {
                match take(cfg, &hello.nonce, &m.payload) {
                    Ok(a) => {
                        if let Some(reason) = a.load.as_ref().and_then(|l| cfg.allow.check(&l.addr).err()).map(|e| e.to_string()) {
                            refuse(cfg, bus, &m, &reason).await;
                            on_event(AgentEvent::RefusedTarget(reason.clone()));
                            return Err(AgentsError::RefusedHere { run: a.run, reason });
                        }
                        return Ok((a, m));
                    }
                    Err(refusal) => {
                        let reason = refusal.to_string();
                        refuse(cfg, bus, &m, &reason).await;
                        on_event(AgentEvent::Refused(reason));
                    }
                }
            }
        }
    }
    Err(AgentsError::Timeout {
        action: "waiting for an assignment",
        after: cfg.assign_bound,
    })
}

/// Why an agent refused an assignment; its wording is the refusal both sides print.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    /// The bytes are not an assignment, or its run id cannot be a subject token.
    #[error("{0}")]
    Malformed(#[from] AgentsError),
    /// Not signed with the study's key.
    #[error("an assignment not signed with this study's key (forged?)")]
    Unsigned,
    /// For another agent, or carrying an earlier lobby's nonce.
    #[error("an assignment of run {run:?} for another agent or an earlier lobby (replayed?)")]
    NotOurs {
        /// The run it names.
        run: String,
    },
}

/// The assignment in `payload` if this agent may take it: signed with the study's key
/// (when the agent has credentials), for this agent, carrying this lobby's nonce, with a
/// run id that can be a subject token.
pub(crate) fn take(cfg: &AgentConfig, nonce: &str, payload: &[u8]) -> Result<Assignment, Refusal> {
    let s: SignedAssignment = msg::decode(payload)?;
    if let Some(auth) = &cfg.auth {
        if !auth.verify(&s.body, &s.mac) {
            return Err(Refusal::Unsigned);
        }
    }
    let a: Assignment = msg::decode(&s.body)?;
    if a.agent != cfg.name || a.nonce != nonce {
        return Err(Refusal::NotOurs { run: a.run });
    }
    msg::check_token("run id", &a.run)?;
    Ok(a)
}

/// Answers an assignment with a refusal (best effort: a forger may not listen).
async fn refuse(cfg: &AgentConfig, bus: &Bus, m: &Incoming, reason: &str) {
    let no = Ready {
        proto: PROTO,
        name: cfg.name.clone(),
        late_ms: 0,
        refused: Some(reason.to_string()),
    };
    let _ = bus.reply(m, &no).await;
    let _ = bus.flush(bus::SEND_BOUND).await;
}

/// Tells when the bus has been down for longer than a bound.
pub(crate) struct BusWatch {
    down_since: Option<Instant>,
    bound: Duration,
    /// The bus was down at some check.
    pub(crate) was_away: bool,
}

impl BusWatch {
    pub(crate) fn new(bound: Duration) -> Self {
        BusWatch {
            down_since: None,
            bound,
            was_away: false,
        }
    }

    pub(crate) fn lost(&mut self, bus: &Bus) -> bool {
        if bus.connected() {
            self.down_since = None;
            return false;
        }
        self.was_away = true;
        let since = *self.down_since.get_or_insert_with(Instant::now);
        since.elapsed() >= self.bound
    }
}

/// What the agent keeps of the running load.
pub(crate) struct Started {
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) records: mpsc::UnboundedReceiver<SecondRecord>,
    pub(crate) share: Arc<Mutex<Option<ShareRecord>>>,
}

/// The load thread's result.
pub(crate) type Done = oneshot::Receiver<Result<(), LoadError>>;

/// Starts the load thread: it sleeps to the deadline (watching the stop flag), then
/// calls `load`; its result comes back on the returned channel.
fn start_load<F>(
    cfg: &AgentConfig,
    assignment: Assignment,
    deadline: Deadline,
    load: F,
) -> Result<(Started, Done), AgentsError>
where
    F: FnOnce(LoadCtx) -> Result<(), LoadError> + Send + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, records) = mpsc::unbounded_channel();
    let (done_tx, done) = oneshot::channel();
    let delay = Duration::from_millis(assignment.delay_ms);
    // The deadline is T0 + delay less the warm-up.
    let t0 = deadline.at.checked_sub(delay).unwrap_or(deadline.at) + assignment.warmup();
    let name = cfg.name.clone();
    let source_ip = cfg.source_ip;
    let flag = stop.clone();
    let share = Arc::new(Mutex::new(None));
    let kept = share.clone();
    std::thread::Builder::new()
        .name(format!("agent-load-{name}"))
        .spawn(move || {
            while Instant::now() < deadline.at && !flag.load(Ordering::Relaxed) {
                let left = deadline.at.saturating_duration_since(Instant::now());
                std::thread::sleep(left.min(Duration::from_millis(50)));
            }
            let result = if flag.load(Ordering::Relaxed) {
                Ok(())
            } else {
                let ctx = LoadCtx {
                    assignment,
                    t0,
                    started: Instant::now(),
                    source_ip,
                    stop: flag,
                    records: tx,
                    name,
                    share: kept,
                };
                load(ctx)
            };
            let _ = done_tx.send(result);
        })
        .map_err(|source| AgentsError::Io {
            action: "starting the load thread",
            source,
        })?;
    Ok((
        Started {
            stop,
            records,
            share,
        },
        done,
    ))
}
