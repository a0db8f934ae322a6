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

use crate::bus::{self, Bus, Incoming};
use crate::clock::{self, Deadline};
use crate::load::ShareRecord;
use crate::msg::{
    self, subject, Assignment, Counters, Ending, FinalRecord, Heartbeat, Hello, ProbeReply,
    ProbeRequest, Ready, SecondRecord, Stop, PROTO,
};
use crate::AgentsError;
use futures::StreamExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// The error a load function may fail with.
pub type LoadError = Box<dyn std::error::Error + Send + Sync>;

/// How long a load may take to end once its stop flag is raised.
const LOAD_STOP_BOUND: Duration = Duration::from_secs(5);

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
}

impl AgentConfig {
    /// Defaults: an hour in the lobby, the load stopped after 1 s without the bus, runs
    /// of at most a day.
    pub fn new(bus_url: &str, name: &str) -> Self {
        AgentConfig {
            bus_url: bus_url.to_string(),
            name: name.to_string(),
            assign_bound: Duration::from_secs(3_600),
            bus_lost_after: Duration::from_secs(1),
            run_bound: Duration::from_secs(86_400),
        }
    }
}

/// What happened, for the binary's log (this crate never prints).
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// Connected and in the lobby.
    Joined,
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
        let bus = Bus::connect(&cfg.bus_url, Duration::from_secs(5)).await?;
        on_event(AgentEvent::Joined);
        let (assignment, request) = lobby(cfg, &bus).await?;
        msg::check_token("run id", &assignment.run)?;
        let stop_sub = bus.subscribe(subject::stop(&assignment.run)).await?;
        let deadline = clock::local_deadline(
            assignment.t0_ns,
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
        };
        bus.reply(&request, &ready).await?;
        on_event(AgentEvent::Assigned {
            run: assignment.run.clone(),
            late_ms,
        });
        let run = assignment.run.clone();
        let (ctx, done) = start_load(cfg, assignment, deadline, load)?;
        stream(cfg, &bus, &run, stop_sub, ctx, done, on_event).await
    })
}

/// Announces the agent each second and answers probes until an assignment comes.
async fn lobby(cfg: &AgentConfig, bus: &Bus) -> Result<(Assignment, Incoming), AgentsError> {
    let mut probes = bus.subscribe(subject::probe(&cfg.name)).await?;
    let mut assigns = bus.subscribe(subject::assign(&cfg.name)).await?;
    let hello = Hello {
        proto: PROTO,
        name: cfg.name.clone(),
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
                    bus.publish(subject::hello(), &hello).await?;
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
                return Ok((msg::decode(&m.payload)?, m));
            }
        }
    }
    Err(AgentsError::Timeout {
        action: "waiting for an assignment",
        after: cfg.assign_bound,
    })
}

/// Tells when the bus has been down for longer than a bound.
struct BusWatch {
    down_since: Option<Instant>,
    bound: Duration,
}

impl BusWatch {
    fn new(bound: Duration) -> Self {
        BusWatch {
            down_since: None,
            bound,
        }
    }

    fn lost(&mut self, bus: &Bus) -> bool {
        if bus.connected() {
            self.down_since = None;
            return false;
        }
        let since = *self.down_since.get_or_insert_with(Instant::now);
        since.elapsed() >= self.bound
    }
}

/// What the agent keeps of the running load.
struct Started {
    stop: Arc<AtomicBool>,
    records: mpsc::UnboundedReceiver<SecondRecord>,
    share: Arc<Mutex<Option<ShareRecord>>>,
}

/// Starts the load thread: it sleeps to the deadline (watching the stop flag), then
/// calls `load`; its result comes back on the returned channel.
fn start_load<F>(
    cfg: &AgentConfig,
    assignment: Assignment,
    deadline: Deadline,
    load: F,
) -> Result<(Started, oneshot::Receiver<Result<(), LoadError>>), AgentsError>
where
    F: FnOnce(LoadCtx) -> Result<(), LoadError> + Send + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, records) = mpsc::unbounded_channel();
    let (done_tx, done) = oneshot::channel();
    let delay = Duration::from_millis(assignment.delay_ms);
    let t0 = deadline.at.checked_sub(delay).unwrap_or(deadline.at);
    let name = cfg.name.clone();
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

/// What the agent has sent so far.
#[derive(Default)]
struct Sent {
    records: u64,
    last_second: Option<u64>,
    totals: Counters,
}

impl Sent {
    /// Counts one record and publishes it unless the bus is lost. A record that cannot
    /// be sent is missing at the coordinator, which says so; the load goes on.
    async fn forward(&mut self, bus: &Bus, subject: &str, rec: SecondRecord, bus_lost: bool) {
        self.records += 1;
        self.last_second = self.last_second.max(Some(rec.second));
        self.totals.add(&rec.counters);
        if !bus_lost {
            let _ = bus.publish(subject.to_string(), &rec).await;
        }
    }
}

/// Publishes the load's records and a heartbeat each second until the load ends, then
/// the final record.
async fn stream(
    cfg: &AgentConfig,
    bus: &Bus,
    run: &str,
    mut stop_sub: async_nats::Subscriber,
    mut started: Started,
    mut done: oneshot::Receiver<Result<(), LoadError>>,
    on_event: &mut dyn FnMut(AgentEvent),
) -> Result<AgentOutcome, AgentsError> {
    let until = Instant::now() + cfg.run_bound;
    let mut heartbeat = tokio::time::interval(Duration::from_secs(1));
    let mut watch_tick = tokio::time::interval(Duration::from_millis(100));
    let mut watch = BusWatch::new(cfg.bus_lost_after);
    let (mut sent, mut seq, mut stopped, mut bus_lost) = (Sent::default(), 0u64, false, false);
    let mut stop_raised: Option<Instant> = None;
    let sec_subject = subject::stream(run, &cfg.name, "sec");
    let result = loop {
        tokio::select! {
            Some(rec) = started.records.recv() => sent.forward(bus, &sec_subject, rec, bus_lost).await,
            _ = heartbeat.tick() => {
                seq += 1;
                let hb = Heartbeat { proto: PROTO, agent: cfg.name.clone(), seq, records_sent: sent.records };
                if !bus_lost && bus.connected() {
                    let _ = bus.publish(subject::stream(run, &cfg.name, "hb"), &hb).await;
                }
            }
            _ = watch_tick.tick() => {
                if !bus_lost && watch.lost(bus) {
                    bus_lost = true;
                    started.stop.store(true, Ordering::Relaxed);
                    on_event(AgentEvent::BusLost);
                }
                if Instant::now() > until {
                    started.stop.store(true, Ordering::Relaxed);
                }
                if started.stop.load(Ordering::Relaxed) {
                    let since = *stop_raised.get_or_insert_with(Instant::now);
                    if since.elapsed() > LOAD_STOP_BOUND {
                        // The load ignores its flag: leave it (its thread is detached)
                        // rather than wait without end.
                        break Err("the load did not stop within 5 s of its stop flag".into());
                    }
                }
            }
            Some(m) = stop_sub.next(), if !stopped => {
                stopped = true;
                started.stop.store(true, Ordering::Relaxed);
                let reason = msg::decode::<Stop>(&m.payload).map(|s| s.reason).unwrap_or_default();
                on_event(AgentEvent::Stopped(reason));
            }
            // A dropped sender means the load thread panicked.
            r = &mut done => break r.unwrap_or_else(|_| Err("the load thread panicked".into())),
        }
    };
    // The load thread has ended: its last records are queued.
    while let Ok(rec) = started.records.try_recv() {
        sent.forward(bus, &sec_subject, rec, bus_lost).await;
    }
    if bus_lost {
        return Err(AgentsError::BusLost);
    }
    let ending = match (&result, stopped) {
        (Err(_), _) => Ending::Failed,
        (Ok(()), true) => Ending::Stopped,
        (Ok(()), false) => Ending::Done,
    };
    let fin = FinalRecord {
        proto: PROTO,
        agent: cfg.name.clone(),
        records_sent: sent.records,
        last_second: sent.last_second,
        totals: sent.totals,
        ending,
        error: result.as_ref().err().map(|e| e.to_string()),
        share: started
            .share
            .lock()
            .ok()
            .and_then(|mut s| s.take())
            .map(Box::new),
    };
    bus.publish(subject::stream(run, &cfg.name, "final"), &fin)
        .await?;
    bus.flush(bus::SEND_BOUND).await?;
    if let Err(e) = result {
        return Err(AgentsError::Load(e));
    }
    Ok(AgentOutcome {
        run: run.to_string(),
        records_sent: sent.records,
        ending,
    })
}
