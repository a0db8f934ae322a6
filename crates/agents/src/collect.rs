//! The coordinator's collection: every agent's stream, until each has finished or is
//! lost, or the bus is gone.
//!
//! Place in the flow: [`crate::coordinator::coordinate`] calls [`collect`] after the
//! assignments. Its rules (docs/methodology.md, "Several injectors" and "When the bus
//! is away"):
//! - every record and final record is acknowledged ([`Ack`]): agents keep a record
//!   until then, so one sent while the bus was briefly away comes again, late, and fills
//!   its second; a second already held is not filed twice;
//! - an agent silent for `lost_after` (anything on its stream counts: a heartbeat, a
//!   record, a share piece) is lost: the run is degraded from the second after its last
//!   record. Silence while the coordinator's *own* bus is down, or while the coordinator
//!   itself was not run (a loaded machine), is nobody's fault: those clocks restart when
//!   the bus is back, and move on by the length of the coordinator's own stall;
//! - a lost agent is never taken back: what it sends later is refused (acknowledged as
//!   not kept, counted) and it is sent a [`Stale`] on its own subject, which stops it;
//! - the coordinator's bus down for `bus_gone_after` ends the collection: the caller
//!   gets what it has and a typed error;
//! - a second every due agent has sent is merged at once and handed out
//!   ([`Event::Merged`]), so a live view need not wait for the run's end, and folded
//!   into what the run's end reads of it ([`Tally`]: phases, summary rows, sums); the
//!   second and its records are then let go, unless the caller keeps every second
//!   (`CoordinatorConfig::stored_live` off). A record of a second already merged, or
//!   sent after its agent's final record, is not filed again.

use crate::bus::{self, Bus, Incoming};
use crate::clock;
use crate::coordinator::{AgentReport, CoordinatorConfig, Event};
use crate::fold::Tally;
use crate::merge::{AgentSeries, MergedSecond, Pending, Received};
use crate::msg::{
    self, subject, Ack, Ending, FinalRecord, SecondRecord, SharePart, Stale, Stop, PROTO,
};
use crate::AgentsError;
use rangemap::RangeInclusiveSet;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What the collection ended with.
pub(crate) struct Collected {
    /// Each agent's series.
    pub(crate) series: Vec<AgentSeries>,
    /// `Some(how long)` when it ended because the bus was gone.
    pub(crate) bus_gone: Option<Duration>,
    /// Per-second records filed.
    pub(crate) records: u64,
    /// The seconds merged live.
    pub(crate) closed: RangeInclusiveSet<u64>,
    /// Those seconds themselves, when the caller keeps every second.
    pub(crate) kept: BTreeMap<u64, Box<MergedSecond>>,
    /// What the run's end reads of the seconds merged live.
    pub(crate) tally: Tally,
}

/// A gap between two turns of the collection loop this long is the coordinator's own
/// stall, not the agents' silence (see [`collect`]).
const OWN_STALL: Duration = Duration::from_secs(1);

/// Milliseconds since T0 on this clock.
fn since_t0_ms(t0_ns: i64) -> i64 {
    (clock::wall_ns() - t0_ns) / 1_000_000
}

/// Seconds past the run's bound a record may name: a staggered agent's delay and its
/// request timeout's hold, with room to spare.
const SECOND_SLACK: u64 = 3_600;

/// A record's second must lie within the run: the merge fills every second up to the
/// last one named, so a second from far in the future (a broken or hostile peer) would
/// make it allocate without bound. Refused with a typed error instead.
pub(crate) fn check_second(
    agent: &str,
    second: u64,
    run_bound: std::time::Duration,
) -> Result<(), AgentsError> {
    let most = run_bound.as_secs().saturating_add(SECOND_SLACK);
    if second > most {
        return Err(AgentsError::Implausible {
            agent: agent.to_string(),
            detail: format!("second {second} lies past the run's bound ({most} s)"),
        });
    }
    Ok(())
}

/// A lost agent's data ends with its last record: degraded from the second after.
pub(crate) fn lost_from(s: &AgentSeries) -> u64 {
    s.last_second().map_or(s.first_s, |l| l + 1)
}

/// What [`State::take`] found on an agent's stream.
enum Taken {
    /// A per-second record, new, of this second.
    Second(u64),
    /// Its final record.
    Final,
    /// A heartbeat, a second already held, or anything else that only proves it alive.
    Other,
    /// Something from an agent already declared lost.
    FromLost,
}

/// The collection's running state.
struct State<'c> {
    cfg: &'c CoordinatorConfig,
    t0_ns: i64,
    series: Vec<AgentSeries>,
    index: BTreeMap<String, usize>,
    last_heard: Vec<Instant>,
    /// When each lost agent was last sent a [`Stale`] (at most one a second).
    stale_sent: Vec<Option<Instant>>,
    /// Seconds with some record, being merged as their records arrive.
    pending: BTreeMap<u64, Pending>,
    /// Seconds merged live.
    closed: RangeInclusiveSet<u64>,
    /// Those seconds, when the caller keeps every second (boxed: a map's nodes are half
    /// empty when filled in order, and a second is ~700 bytes).
    kept: BTreeMap<u64, Box<MergedSecond>>,
    tally: Tally,
    records: u64,
    /// Each agent's share pieces so far (a long run's share comes in several), with
    /// the count they said they come in.
    parts: Vec<(BTreeMap<u32, serde_bytes::ByteBuf>, u32)>,
}

impl<'c> State<'c> {
    /// Nothing heard yet from `agents`, each keyed by its name.
    fn new(cfg: &'c CoordinatorConfig, t0_ns: i64, agents: &[AgentReport]) -> State<'c> {
        State {
            cfg,
            t0_ns,
            series: agents
                .iter()
                .map(|a| AgentSeries::new(&a.name, a.delay_ms / 1_000))
                .collect(),
            index: agents
                .iter()
                .enumerate()
                .map(|(i, a)| (a.name.clone(), i))
                .collect(),
            last_heard: vec![Instant::now(); agents.len()],
            stale_sent: vec![None; agents.len()],
            pending: BTreeMap::new(),
            closed: RangeInclusiveSet::new(),
            kept: BTreeMap::new(),
            tally: Tally::new(
                agents.iter().map(|a| a.name.clone()).collect(),
                agents.iter().map(|a| a.delay_ms / 1_000).min().unwrap_or(0),
                cfg.warmup(),
            ),
            records: 0,
            parts: vec![(BTreeMap::new(), 0); agents.len()],
        }
    }

    /// One message from the streams: filed, acknowledged when it asks for a receipt,
    /// and what it completes merged (a final record, a second) or answered (a lost
    /// agent is told it is stale).
    async fn on_message(
        &mut self,
        bus: &Bus,
        m: &Incoming,
        agents: &mut [AgentReport],
        on_event: &mut dyn FnMut(Event),
    ) -> Result<(), AgentsError> {
        let Some((i, taken)) = self.take(m, agents)? else {
            return Ok(());
        };
        self.last_heard[i] = Instant::now();
        let kept = !matches!(taken, Taken::FromLost);
        if m.reply.is_some() {
            let _ = bus.reply(m, &Ack { proto: PROTO, kept }).await;
        }
        match taken {
            Taken::Final => {
                on_event(Event::Finished(agents[i].name.clone()));
                self.tally.end(i, self.series[i].last_second());
                self.merge_ready(None, on_event)?;
            }
            Taken::Second(s) => {
                if let Some(r) = self.series[i].received.get(&s) {
                    on_event(Event::Second(Box::new(r.clone())));
                }
                self.add_live(i, s)?;
                self.merge_ready(Some(s), on_event)?;
            }
            Taken::FromLost => self.tell_stale(bus, i, &agents[i]).await,
            // Heartbeats: the bulk of the messages, and they complete nothing.
            Taken::Other => {}
        }
        Ok(())
    }

    /// Files one message under its agent; `None` when it was not one of ours.
    fn take(
        &mut self,
        m: &Incoming,
        agents: &mut [AgentReport],
    ) -> Result<Option<(usize, Taken)>, AgentsError> {
        let Some((agent, kind)) = subject::parse_stream(&self.cfg.run, m.subject.as_str()) else {
            return Ok(None);
        };
        let Some(&i) = self.index.get(agent) else {
            return Ok(None);
        };
        if agents[i].lost_from_s.is_some() {
            if kind == "sec" {
                agents[i].refused += 1;
            }
            return Ok(Some((i, Taken::FromLost)));
        }
        match kind {
            "sec" => {
                let record: SecondRecord = msg::decode(&m.payload)?;
                let second = record.second;
                check_second(agent, second, self.cfg.run_bound)?;
                // A record sent again (its receipt was lost with the bus) is kept once;
                // one of a second merged already, or sent after the agent's final
                // record, is not expected and changes nothing merged.
                let merged = self.closed.contains(&second) || agents[i].final_record.is_some();
                if merged || self.series[i].holds(second) {
                    return Ok(Some((i, Taken::Other)));
                }
                let r = Received {
                    arrived_ms: since_t0_ms(self.t0_ns),
                    record,
                };
                self.series[i].received.insert(second, r);
                self.records += 1;
                Ok(Some((i, Taken::Second(second))))
            }
            "part" => {
                let p: SharePart = msg::decode(&m.payload)?;
                let (held, total) = &mut self.parts[i];
                if p.total == 0
                    || p.total > msg::MAX_SHARE_PARTS
                    || p.index >= p.total
                    || (*total != 0 && *total != p.total)
                {
                    return Err(AgentsError::Implausible {
                        agent: agent.to_string(),
                        detail: format!("share piece {} of {}", p.index, p.total),
                    });
                }
                *total = p.total;
                // A piece sent again (its receipt was lost with the bus) is kept once.
                held.entry(p.index).or_insert(p.bytes);
                Ok(Some((i, Taken::Other)))
            }
            "final" => {
                let mut f: FinalRecord = msg::decode(&m.payload)?;
                if f.share_parts > 0 && f.share.is_none() {
                    let (held, total) = &self.parts[i];
                    if *total != f.share_parts {
                        return Err(AgentsError::Implausible {
                            agent: agent.to_string(),
                            detail: format!(
                                "its final record says {} share pieces, its pieces {total}",
                                f.share_parts
                            ),
                        });
                    }
                    // Pieces are kept: a final record sent again is put together again.
                    f.share = Some(Box::new(msg::share_from_parts(agent, held, *total)?));
                }
                if let Some(s) = f.last_second {
                    check_second(agent, s, self.cfg.run_bound)?;
                }
                self.series[i].last_s = f.last_second;
                if f.ending == Ending::BusLost {
                    // Its load was stopped early: the run is degraded from there.
                    let from = lost_from(&self.series[i]);
                    agents[i].lost_from_s = Some(from);
                    self.series[i].lost_from_s = Some(from);
                }
                agents[i].final_record = Some(f);
                Ok(Some((i, Taken::Final)))
            }
            _ => Ok(Some((i, Taken::Other))),
        }
    }

    /// Adds agent `i`'s record of second `s` to the live merge.
    fn add_live(&mut self, i: usize, s: u64) -> Result<(), AgentsError> {
        let a = &self.series[i];
        let Some(r) = a.received.get(&s) else {
            return Ok(());
        };
        let p = self.pending.entry(s).or_insert_with(|| Pending::new(s));
        p.add(&a.agent, r, self.cfg.late_grace_ms())
    }

    /// Is agent `i` due to send second `s` (started, not lost, not finished before)?
    fn due(&self, i: usize, s: u64) -> bool {
        let a = &self.series[i];
        s >= a.first_s && a.lost_from_s.is_none_or(|l| s < l) && a.last_s.is_none_or(|l| s <= l)
    }

    /// Merges and hands out every pending second that each due agent has sent.
    /// `only`: the one second a record just came for (no other can have completed);
    /// `None` after a final record or a loss, which may complete any of them.
    fn merge_ready(
        &mut self,
        only: Option<u64>,
        on_event: &mut dyn FnMut(Event),
    ) -> Result<(), AgentsError> {
        let ready: Vec<u64> = self
            .pending
            .keys()
            .copied()
            .filter(|s| only.is_none_or(|o| o == *s))
            .filter(|&s| (0..self.series.len()).all(|i| !self.due(i, s) || self.series[i].holds(s)))
            .collect();
        for s in ready {
            let Some(p) = self.pending.remove(&s) else {
                continue;
            };
            let merged = Box::new(p.close(&self.series, s)?);
            self.tally.fold(&merged, &self.series)?;
            self.closed.insert(s..=s);
            if self.cfg.stored_live {
                // The caller stores it: what the run's end reads of it is folded.
                on_event(Event::Merged(merged));
            } else {
                on_event(Event::Merged(merged.clone()));
                self.kept.insert(s, merged);
            }
            // The merged second holds their sum, and each record was handed out
            // (`Event::Second`, stored by the study) when it came: nothing reads the
            // records again but for which seconds came with how much load, and
            // keeping them grew the coordinator by every agent's record each second
            // of a long run.
            for series in &mut self.series {
                series.retire(s);
            }
        }
        Ok(())
    }

    /// Declares agent `i` lost (no heartbeat for the bound).
    fn lose(&mut self, i: usize, a: &mut AgentReport, on_event: &mut dyn FnMut(Event)) {
        let from_s = lost_from(&self.series[i]);
        a.lost_from_s = Some(from_s);
        self.series[i].lost_from_s = Some(from_s);
        self.tally.end(i, self.series[i].last_second());
        on_event(Event::Lost {
            agent: a.name.clone(),
            from_s,
        });
    }

    /// What was collected; `bus_gone`: it ended because the bus was gone this long.
    fn collected(self, bus_gone: Option<Duration>) -> Collected {
        Collected {
            series: self.series,
            bus_gone,
            records: self.records,
            closed: self.closed,
            kept: self.kept,
            tally: self.tally,
        }
    }

    /// Tells a lost agent it is out of the run (at most once a second).
    async fn tell_stale(&mut self, bus: &Bus, i: usize, a: &AgentReport) {
        if self.stale_sent[i].is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
            return;
        }
        self.stale_sent[i] = Some(Instant::now());
        let stale = Stale {
            proto: PROTO,
            run: self.cfg.run.clone(),
            reason: format!(
                "declared lost from second {} (no heartbeat for {:?}); a lost injector is not taken back into a running measurement",
                a.lost_from_s.unwrap_or(0),
                self.cfg.lost_after
            ),
        };
        let _ = bus.publish(subject::stale(&a.name), &stale).await;
    }
}

/// Collects every agent's stream (see the module doc).
pub(crate) async fn collect(
    cfg: &CoordinatorConfig,
    bus: &Bus,
    mut streams: async_nats::Subscriber,
    t0_ns: i64,
    agents: &mut [AgentReport],
    on_event: &mut dyn FnMut(Event),
) -> Result<Collected, AgentsError> {
    let mut st = State::new(cfg, t0_ns, agents);
    let until = Instant::now() + cfg.start_lead + cfg.run_bound;
    let open = |agents: &[AgentReport]| {
        agents
            .iter()
            .any(|a| a.final_record.is_none() && a.lost_from_s.is_none())
    };
    let mut told_to_stop = false;
    let mut down_since: Option<Instant> = None;
    let mut last_check = Instant::now();
    let mut last_turn = Instant::now();
    while open(agents) && Instant::now() < until {
        // A turn of this loop waits at most 200 ms for a message; a much longer gap is
        // the coordinator's own stall (a loaded machine did not run it): the agents'
        // silence during it is not theirs, so their clocks move on by the gap.
        let gap = last_turn.elapsed();
        last_turn = Instant::now();
        if gap >= OWN_STALL {
            st.last_heard.iter_mut().for_each(|t| *t += gap);
        }
        let stop_now = cfg
            .stop
            .as_ref()
            .is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed));
        if stop_now && !told_to_stop {
            told_to_stop = true;
            let stop = Stop {
                proto: PROTO,
                reason: "the study was stopped".into(),
            };
            let _ = bus.publish(subject::stop(&cfg.run), &stop).await;
        }
        if let Some(m) = bus::next(&mut streams, Duration::from_millis(200)).await {
            st.on_message(bus, &m, agents, on_event).await?;
        }
        if !bus.connected() {
            let since = *down_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= cfg.bus_gone_after {
                return Ok(gone(st, agents, since.elapsed()));
            }
            // Nobody can be heard while our own bus is down: no one is lost for it.
            continue;
        }
        if down_since.take().is_some() {
            // The bus is back: every agent gets its full bound to be heard again.
            st.last_heard.iter_mut().for_each(|t| *t = Instant::now());
            on_event(Event::BusBack);
        }
        // Silence is judged ten times a second, not once per message (hundreds a second
        // with many agents).
        if last_check.elapsed() < Duration::from_millis(100) {
            continue;
        }
        last_check = Instant::now();
        let exited = cfg.exited.as_ref().map(|w| w.exited()).unwrap_or_default();
        for (i, a) in agents.iter_mut().enumerate() {
            let silent = st.last_heard[i].elapsed();
            // An agent volley started whose process exited sends nothing more: lost as
            // soon as its last words (a final record) have had time to arrive.
            let gone =
                silent >= crate::coordinator::EXITED_GRACE && exited.contains(&a.name.as_str());
            if a.final_record.is_none()
                && a.lost_from_s.is_none()
                && (silent >= cfg.lost_after || gone)
            {
                a.process_exited = gone;
                st.lose(i, a, on_event);
                st.merge_ready(None, on_event)?;
            }
        }
    }
    if open(agents) {
        let stop = Stop {
            proto: PROTO,
            reason: "run bound reached".into(),
        };
        let _ = bus.publish(subject::stop(&cfg.run), &stop).await;
        mark_open_lost(&mut st.series, agents);
    }
    // Published messages (the last receipts, a stop) are buffered: flush before the
    // runtime goes.
    let _ = bus.flush(bus::SEND_BOUND).await;
    Ok(st.collected(None))
}

/// Every agent still open is lost from the second after its last record.
fn mark_open_lost(series: &mut [AgentSeries], agents: &mut [AgentReport]) {
    for (a, s) in agents
        .iter_mut()
        .zip(series.iter_mut())
        .filter(|(a, _)| a.final_record.is_none() && a.lost_from_s.is_none())
    {
        let from_s = lost_from(s);
        a.lost_from_s = Some(from_s);
        s.lost_from_s = Some(from_s);
    }
}

/// The bus is gone: what was collected, every open agent lost.
fn gone(mut st: State<'_>, agents: &mut [AgentReport], after: Duration) -> Collected {
    mark_open_lost(&mut st.series, agents);
    st.collected(Some(after))
}
