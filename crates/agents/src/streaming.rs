//! The agent's running phase: records out through the outbox, a heartbeat each second,
//! the bus watched, and the final record.
//!
//! Place in the flow: [`crate::agent::run`] calls [`stream`] once the load thread is
//! armed. Three rules shape it (docs/methodology.md, "When the bus is away"):
//! - a record leaves the [`Outbox`] only on the coordinator's receipt, so seconds
//!   produced while the bus is briefly away are sent, late, when it returns;
//! - the bus down for `bus_lost_after` raises the load's stop flag at once (issue 13's
//!   2 s rule: never load nobody records), and the agent then waits at most
//!   `resend_bound` for the bus to take what it buffered and its final record;
//! - records the bus answers with "nobody listens" for 3 s while it is up mean the
//!   coordinator is gone (killed, say, with the agent on another host): the load is
//!   stopped and the agent exits with [`AgentsError::CoordinatorGone`];
//! - a [`Stale`] message for this run on the agent's own subject (it was declared lost)
//!   stops the load; the agent sends nothing more and exits with
//!   [`AgentsError::Stale`].

use crate::agent::{AgentConfig, AgentEvent, AgentOutcome, BusWatch, Done, LoadError, Started};
use crate::bus::{self, Bus};
use crate::msg::{
    self, subject, Ack, Counters, Ending, FinalRecord, Heartbeat, SecondRecord, SharePart, Stale,
    Stop, PROTO,
};
use crate::outbox::{self, Delivery, Outbox, Shared};
use crate::AgentsError;
use futures::StreamExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// How long a load may take to end once its stop flag is raised.
const LOAD_STOP_BOUND: Duration = Duration::from_secs(5);

/// How long the bus may answer "nobody listens" to every record, while it is up,
/// before the coordinator is taken for gone and the load stopped: never load nobody
/// records. Longer than a coordinator needs to subscribe again after a reconnect.
const COORDINATOR_GONE: Duration = Duration::from_secs(3);

/// After the bus came back, how long "nobody listens" is taken for a coordinator that
/// has not yet subscribed again rather than for one that is gone.
const RESUBSCRIBE_GRACE: Duration = Duration::from_secs(2);

/// The subscriptions the running agent listens on.
pub(crate) struct Subs {
    /// The run's stop broadcast.
    pub(crate) stop: async_nats::Subscriber,
    /// This agent's own [`Stale`] subject.
    pub(crate) stale: async_nats::Subscriber,
}

/// What the agent has produced so far.
#[derive(Default)]
struct Sent {
    records: u64,
    last_second: Option<u64>,
    totals: Counters,
}

impl Sent {
    /// Counts one record and queues it for the courier.
    fn queue(&mut self, outbox: &Shared, rec: SecondRecord) {
        self.records += 1;
        self.last_second = self.last_second.max(Some(rec.second));
        self.totals.add(&rec.counters);
        outbox::lock(outbox).push(rec);
    }
}

/// How the running loop ended, beside the load's own result.
#[derive(Default)]
struct Ended {
    stopped: bool,
    bus_lost: bool,
    stale: Option<String>,
    bus_was_away: bool,
    coordinator_gone: bool,
}

impl Ended {
    /// The coordinator's `stop`: the load is told to stop, the reason said.
    fn on_stop(&mut self, payload: &[u8], stop: &AtomicBool, on_event: &mut dyn FnMut(AgentEvent)) {
        self.stopped = true;
        stop.store(true, Ordering::Relaxed);
        let reason = msg::decode::<Stop>(payload)
            .map(|s| s.reason)
            .unwrap_or_default();
        on_event(AgentEvent::Stopped(reason));
    }

    /// The coordinator declared an agent stale: if this one, in this run (a Stale of
    /// another run, an older one on the same bus, is not for us), its load stops.
    fn on_stale(
        &mut self,
        payload: &[u8],
        run: &str,
        stop: &AtomicBool,
        on_event: &mut dyn FnMut(AgentEvent),
    ) {
        if let Ok(s) = msg::decode::<Stale>(payload) {
            if s.run == run {
                stop.store(true, Ordering::Relaxed);
                on_event(AgentEvent::Stale(s.reason.clone()));
                self.stale = Some(s.reason);
            }
        }
    }

    /// The errors that end the agent's part at once: the coordinator is gone (nobody
    /// takes its records) or declared it stale (nothing more of the run is wanted).
    fn out_of_run(&mut self, run: &str) -> Result<(), AgentsError> {
        if self.coordinator_gone {
            return Err(AgentsError::CoordinatorGone {
                run: run.to_string(),
                after: COORDINATOR_GONE,
            });
        }
        if let Some(reason) = self.stale.take() {
            return Err(AgentsError::Stale {
                run: run.to_string(),
                reason,
            });
        }
        Ok(())
    }

    /// How the run ended for the final record; a failed load wins.
    fn ending(&self, load_ok: bool) -> Ending {
        match (load_ok, self.stopped, self.bus_lost) {
            (false, _, _) => Ending::Failed,
            (true, _, true) => Ending::BusLost,
            (true, true, false) => Ending::Stopped,
            (true, false, false) => Ending::Done,
        }
    }
}

/// The running loop's 100 ms checks.
struct Checks {
    watch: BusWatch,
    /// The run's bound: past it the load is told to stop.
    until: Instant,
    /// When the stop flag was first seen raised.
    stop_raised: Option<Instant>,
}

impl Checks {
    /// Raises the load's stop flag when the bus is lost, the run's bound has passed or
    /// the coordinator is gone (saying so once each); `Err` when the load has ignored
    /// its flag for [`LOAD_STOP_BOUND`]: it is left (its thread is detached) rather than
    /// waited for without end.
    fn tick(
        &mut self,
        end: &mut Ended,
        bus: &Bus,
        stop: &AtomicBool,
        outbox: &Shared,
        on_event: &mut dyn FnMut(AgentEvent),
    ) -> Result<(), LoadError> {
        if !end.bus_lost && self.watch.lost(bus) {
            end.bus_lost = true;
            stop.store(true, Ordering::Relaxed);
            on_event(AgentEvent::BusLost);
        }
        if Instant::now() > self.until {
            stop.store(true, Ordering::Relaxed);
        }
        let unheard = outbox::lock(outbox).unheard_since;
        if !end.coordinator_gone && unheard.is_some_and(|t| t.elapsed() >= COORDINATOR_GONE) {
            end.coordinator_gone = true;
            stop.store(true, Ordering::Relaxed);
            on_event(AgentEvent::CoordinatorGone);
        }
        if stop.load(Ordering::Relaxed) {
            let since = *self.stop_raised.get_or_insert_with(Instant::now);
            if since.elapsed() > LOAD_STOP_BOUND {
                return Err("the load did not stop within 5 s of its stop flag".into());
            }
        }
        Ok(())
    }
}

/// Streams the load's records and a heartbeat each second until the load ends, then
/// delivers what is left and the final record (see the module doc).
pub(crate) async fn stream(
    cfg: &AgentConfig,
    bus: &Bus,
    run: &str,
    mut subs: Subs,
    mut started: Started,
    mut done: Done,
    on_event: &mut dyn FnMut(AgentEvent),
) -> Result<AgentOutcome, AgentsError> {
    let mut heartbeat = tokio::time::interval(Duration::from_secs(1));
    let mut watch_tick = tokio::time::interval(Duration::from_millis(100));
    let mut checks = Checks {
        watch: BusWatch::new(cfg.bus_lost_after),
        until: Instant::now() + cfg.run_bound,
        stop_raised: None,
    };
    let (mut sent, mut seq, mut end) = (Sent::default(), 0u64, Ended::default());
    let sec_subject = subject::stream(run, &cfg.name, "sec");
    let outbox: Shared = Arc::new(Mutex::new(Outbox::new(cfg.outbox_bound)));
    let wake = Arc::new(Notify::new());
    let courier = tokio::spawn(outbox::courier(
        bus.clone(),
        sec_subject.clone(),
        outbox.clone(),
        wake.clone(),
    ));
    let result: Result<(), LoadError> = loop {
        tokio::select! {
            Some(rec) = started.records.recv() => {
                sent.queue(&outbox, rec);
                wake.notify_one();
            }
            _ = heartbeat.tick() => {
                seq += 1;
                let hb = Heartbeat { proto: PROTO, agent: cfg.name.clone(), seq, records_sent: sent.records };
                if bus.connected() {
                    let _ = bus.publish(subject::stream(run, &cfg.name, "hb"), &hb).await;
                }
            }
            _ = watch_tick.tick() => {
                if let Err(e) = checks.tick(&mut end, bus, &started.stop, &outbox, on_event) {
                    break Err(e);
                }
            }
            Some(m) = subs.stop.next(), if !end.stopped => {
                end.on_stop(&m.payload, &started.stop, on_event);
            }
            Some(m) = subs.stale.next(), if end.stale.is_none() => {
                end.on_stale(&m.payload, run, &started.stop, on_event);
            }
            // A dropped sender means the load thread panicked.
            r = &mut done => break r.unwrap_or_else(|_| Err("the load thread panicked".into())),
        }
    };
    courier.abort();
    // The load thread has ended: its last records are queued.
    while let Ok(rec) = started.records.try_recv() {
        sent.queue(&outbox, rec);
    }
    end.bus_was_away = checks.watch.was_away;
    end.out_of_run(run)?;
    let ending = end.ending(result.is_ok());
    let share = started.share.lock().ok().and_then(|mut s| s.take());
    let parts = match &share {
        Some(sh) => msg::share_parts(&cfg.name, sh)?,
        None => Vec::new(),
    };
    let fin = FinalRecord {
        proto: PROTO,
        agent: cfg.name.clone(),
        records_sent: sent.records,
        last_second: sent.last_second,
        totals: sent.totals,
        ending,
        error: result.as_ref().err().map(|e| e.to_string()),
        share_parts: parts.len() as u32,
        share: if parts.is_empty() {
            share.map(Box::new)
        } else {
            None
        },
    };
    let delivered = finish(cfg, bus, run, &sec_subject, &outbox, (&parts, &fin), &end).await;
    if end.bus_lost {
        return Err(AgentsError::BusLost);
    }
    if let Err(e) = result {
        return Err(AgentsError::Load(e));
    }
    delivered?;
    let o = outbox::lock(&outbox);
    Ok(AgentOutcome {
        run: run.to_string(),
        records_sent: sent.records,
        ending,
        most_buffered: o.most,
        dropped: o.dropped,
    })
}

/// Delivers the buffered records, then the share's pieces (if it came in any), then the
/// final record, while the bus is there:
/// within `resend_bound` after a bus loss, and otherwise until the coordinator is seen
/// to be gone (nobody listens, and the bus never went away, or came back more than
/// [`RESUBSCRIBE_GRACE`] ago).
async fn finish(
    cfg: &AgentConfig,
    bus: &Bus,
    run: &str,
    sec_subject: &str,
    outbox: &Shared,
    (parts, fin): (&[SharePart], &FinalRecord),
    end: &Ended,
) -> Result<(), AgentsError> {
    let until = Instant::now() + cfg.resend_bound;
    let final_subject = subject::stream(run, &cfg.name, "final");
    let part_subject = subject::stream(run, &cfg.name, "part");
    let mut parts_acked = 0;
    let mut up_since = bus.connected().then(Instant::now);
    while Instant::now() < until {
        if !bus.connected() {
            up_since = None;
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        let up = *up_since.get_or_insert_with(Instant::now);
        let mut outcome = outbox::deliver(bus, sec_subject, outbox).await;
        while outcome == Delivery::Empty && parts_acked < parts.len() {
            match bus
                .request::<_, Ack>(part_subject.clone(), &parts[parts_acked], outbox::ACK_BOUND)
                .await
            {
                Ok(_) => parts_acked += 1,
                Err(AgentsError::NoResponders { .. }) => outcome = Delivery::NoListener,
                Err(_) => outcome = Delivery::Later,
            }
        }
        if outcome == Delivery::Empty {
            outcome = match bus
                .request::<_, Ack>(final_subject.clone(), fin, outbox::ACK_BOUND)
                .await
            {
                Ok(_) => return bus.flush(bus::SEND_BOUND).await,
                Err(AgentsError::NoResponders { .. }) => Delivery::NoListener,
                Err(_) => Delivery::Later,
            };
        }
        let away = end.bus_was_away || end.bus_lost;
        if outcome == Delivery::NoListener && (!away || up.elapsed() > RESUBSCRIBE_GRACE) {
            return Err(AgentsError::NoResponders {
                subject: final_subject,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(AgentsError::Timeout {
        action: "delivering the buffered records and the final record",
        after: cfg.resend_bound,
    })
}
