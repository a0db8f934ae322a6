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
//! - a second every due agent is past (its record came, or a later one: agents send
//!   in order, [`AgentSeries::passed`]) is merged at once and handed out
//!   ([`Event::Merged`]), so a live view need not wait for the run's end, and folded
//!   into what the run's end reads of it ([`Tally`]: phases, summary rows, sums); the
//!   second and its records are then let go, unless the caller keeps every second
//!   (`CoordinatorConfig::stored_live` off). An agent's quiet second (no record) thus
//!   closes with its next record instead of waiting for the run's end. A record of a
//!   second already merged without it is counted ([`AgentReport::after_merge`]), one
//!   sent after its agent's final record ignored; neither is filed;
//! - a second waiting for a late agent holds only the records that came, as bytes
//!   ([`Backlog`] measures them): it is merged from them when it closes, so a starved
//!   agent's lag costs a few KB a second, not the ~650 KB of decoded histograms a
//!   second merged as its records arrived held (issue 26).

use crate::bus::{self, Bus, Incoming};
use crate::clock;
use crate::coordinator::{AgentReport, CoordinatorConfig, Event};
use crate::fold::Tally;
use crate::merge::{self, AgentSeries, MergedSecond, Received};
use crate::msg::{
    self, subject, Ack, Ending, FinalRecord, SecondRecord, SharePart, Stale, Stop, PROTO,
};
use crate::AgentsError;
use rangemap::RangeInclusiveSet;
use std::collections::{BTreeMap, BTreeSet};
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
    /// The most the live merge held waiting for records.
    pub(crate) backlog: Backlog,
}

/// The most the live merge held at once while seconds waited for a late agent's
/// records (a starved or slow agent; docs/methodology.md, "Several injectors").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backlog {
    /// Seconds with some record, not yet merged.
    pub seconds: usize,
    /// The records held for them (and for seconds not yet due), bytes.
    pub bytes: usize,
}

impl Backlog {
    /// Raises each figure to `now`'s where it is higher.
    fn most(&mut self, now: Backlog) {
        self.seconds = self.seconds.max(now.seconds);
        self.bytes = self.bytes.max(now.bytes);
    }
}

/// What a held record costs: its histograms' bytes and the record itself.
fn record_bytes(r: &Received) -> usize {
    let hists: usize = r.record.hists.iter().map(|(k, v)| k.len() + v.len()).sum();
    std::mem::size_of::<Received>() + hists
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
    /// Seconds with some record, not yet merged (their records are in `series`).
    pending: BTreeSet<u64>,
    /// The bytes of the records `series` holds (see [`record_bytes`]).
    held_bytes: usize,
    /// The most held at once.
    backlog: Backlog,
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
            pending: BTreeSet::new(),
            held_bytes: 0,
            backlog: Backlog::default(),
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
        let Some((i, taken)) = self.take(m.subject.as_str(), &m.payload, agents)? else {
            return Ok(());
        };
        self.last_heard[i] = Instant::now();
        let kept = !matches!(taken, Taken::FromLost);
        if m.reply.is_some() {
            let _ = bus.reply(m, &Ack { proto: PROTO, kept }).await;
        }
        if let Taken::FromLost = taken {
            self.tell_stale(bus, i, &agents[i]).await;
        }
        self.file(i, taken, agents, on_event)
    }

    /// What a message taken from agent `i` completes: a final record or a second may
    /// let seconds be merged.
    fn file(
        &mut self,
        i: usize,
        taken: Taken,
        agents: &[AgentReport],
        on_event: &mut dyn FnMut(Event),
    ) -> Result<(), AgentsError> {
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
                self.pending.insert(s);
                self.merge_ready(Some(s), on_event)?;
                let now = Backlog {
                    seconds: self.pending.len(),
                    bytes: self.held_bytes,
                };
                self.backlog.most(now);
            }
            // Heartbeats (the bulk of the messages) complete nothing; a lost agent was
            // told it is stale.
            Taken::Other | Taken::FromLost => {}
        }
        Ok(())
    }

    /// Files one message under its agent; `None` when it was not one of ours.
    fn take(
        &mut self,
        subject: &str,
        payload: &[u8],
        agents: &mut [AgentReport],
    ) -> Result<Option<(usize, Taken)>, AgentsError> {
        let Some((agent, kind)) = subject::parse_stream(&self.cfg.run, subject) else {
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
                let record: SecondRecord = msg::decode(payload)?;
                let second = record.second;
                check_second(agent, second, self.cfg.run_bound)?;
                // A record sent again (its receipt was lost with the bus) is kept once;
                // one of a second merged already, or sent after the agent's final
                // record, is not expected and changes nothing merged.
                if self.series[i].holds(second) || agents[i].final_record.is_some() {
                    return Ok(Some((i, Taken::Other)));
                }
                if self.closed.contains(&second) {
                    // Its second was merged without it (it came after a later one):
                    // counted, never held for a second that will not be merged again.
                    agents[i].after_merge += 1;
                    return Ok(Some((i, Taken::Other)));
                }
                let r = Received {
                    arrived_ms: since_t0_ms(self.t0_ns),
                    record,
                };
                self.held_bytes += record_bytes(&r);
                self.series[i].received.insert(second, r);
                self.records += 1;
                Ok(Some((i, Taken::Second(second))))
            }
            "part" => {
                let p: SharePart = msg::decode(payload)?;
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
                let mut f: FinalRecord = msg::decode(payload)?;
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

    /// Is agent `i` due to send second `s` (started, not lost, not finished before)?
    fn due(&self, i: usize, s: u64) -> bool {
        let a = &self.series[i];
        s >= a.first_s && a.lost_from_s.is_none_or(|l| s < l) && a.last_s.is_none_or(|l| s <= l)
    }

    /// Merges and hands out every pending second that each due agent is past.
    /// `upto`: a record just came for this second (it can complete it and, for an
    /// agent quiet before it, earlier ones, no later one); `None` after a final record
    /// or a loss, which may complete any of them.
    fn merge_ready(
        &mut self,
        upto: Option<u64>,
        on_event: &mut dyn FnMut(Event),
    ) -> Result<(), AgentsError> {
        let upto = upto.unwrap_or(u64::MAX);
        let ready: Vec<u64> = self
            .pending
            .range(..=upto)
            .copied()
            .filter(|&s| {
                (0..self.series.len()).all(|i| !self.due(i, s) || self.series[i].passed(s))
            })
            .collect();
        for s in ready {
            self.pending.remove(&s);
            let grace = self.cfg.late_grace_ms();
            let merged = Box::new(merge::merge_second(&self.series, s, s, grace)?);
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
                if let Some(r) = series.received.get(&s) {
                    self.held_bytes -= record_bytes(r);
                }
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
            backlog: self.backlog,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ClockOffset;
    use crate::merge::{merge, Pending};
    use crate::msg::Counters;
    use crate::phase::phases;
    use crate::share::{Share, Whole};
    use hdrhistogram::serialization::V2Serializer;
    use volley_metrics::hist;
    use volley_metrics::Metric;

    const RUN: &str = "r1";

    fn cfg() -> CoordinatorConfig {
        let whole = Whole {
            requests: None,
            rate_rps: Some(99.0),
            connections: 3,
            duration_ms: Some(300_000),
        };
        CoordinatorConfig::new("nats://127.0.0.1:1", RUN, whole, 3)
    }

    fn report(i: u32, name: &str) -> AgentReport {
        let share = Share {
            index: i,
            of: 3,
            requests: None,
            rate_milli_rps: Some(33_000),
            connections: 1,
            duration_ms: Some(300_000),
        };
        let clock = ClockOffset {
            offset_ns: 0,
            rtt_ns: 0,
            probes: 1,
        };
        AgentReport::new(name.into(), share, clock)
    }

    /// A second of 33 requests as a starved machine answers them (200 us to 8 s), in
    /// all seven histograms, as an agent sends it.
    fn starved_record(agent: &str, second: u64) -> SecondRecord {
        let mut h = hist::new_hist();
        for k in 0..33u64 {
            h.record(200 + k * k * 7_300).unwrap();
        }
        let bytes = hist::encode(&mut V2Serializer::new(), &h).unwrap();
        let hists = Metric::ALL
            .iter()
            .map(|m| {
                (
                    m.name().to_string(),
                    serde_bytes::ByteBuf::from(bytes.clone()),
                )
            })
            .collect();
        SecondRecord {
            proto: PROTO,
            agent: agent.into(),
            second,
            hists,
            counters: Counters {
                requests: 33,
                ok: 33,
                ..Counters::default()
            },
            generator_bound: false,
            counts: None,
            resources: None,
        }
    }

    fn send(st: &mut State<'_>, agents: &mut [AgentReport], kind: &str, name: &str, m: &[u8]) {
        let subject = subject::stream(RUN, name, kind);
        let (i, taken) = st.take(&subject, m, agents).unwrap().unwrap();
        st.file(i, taken, agents, &mut |_| {}).unwrap();
    }

    fn final_record(name: &str, last_second: u64, records_sent: u64) -> Vec<u8> {
        msg::encode(&FinalRecord {
            proto: PROTO,
            agent: name.into(),
            records_sent,
            last_second: Some(last_second),
            totals: Counters::default(),
            ending: Ending::Done,
            error: None,
            share: None,
            share_parts: 0,
        })
        .unwrap()
    }

    /// Issue 26: a coordinator rose to 113 MB while its agents were starved. Three
    /// agents over 300 s: b has quiet seconds (no record: nothing was intended in them),
    /// c is starved and its records come `LAG` seconds behind the others'. A quiet
    /// second closes as soon as every due agent is past it, the seconds behind c hold
    /// only records' bytes, and what is merged live is the merge of the whole run.
    #[test]
    fn a_quiet_second_closes_with_the_next_record_and_a_starved_agents_lag_holds_only_bytes() {
        const LAG: u64 = 120;
        const LAST: u64 = 299;
        let quiet = [100, 200];
        let cfg = cfg();
        let names = ["a", "b", "c"];
        let mut agents: Vec<AgentReport> = (0..3).map(|i| report(i, names[i as usize])).collect();
        let mut st = State::new(&cfg, clock::wall_ns(), &agents);
        let mut full: Vec<AgentSeries> = names.iter().map(|n| AgentSeries::new(n, 0)).collect();
        let mut sent = [0u64; 3];
        let mut feed = |st: &mut State<'_>, agents: &mut [AgentReport], i: usize, s: u64| {
            let r = starved_record(names[i], s);
            send(st, agents, "sec", names[i], &msg::encode(&r).unwrap());
            let received = Received {
                record: r,
                arrived_ms: 0,
            };
            full[i].received.insert(s, received);
            sent[i] += 1;
        };
        let mut old_most = 0;
        for t in 0..=LAST {
            feed(&mut st, &mut agents, 0, t);
            if !quiet.contains(&t) {
                feed(&mut st, &mut agents, 1, t);
            }
            if let Some(c) = t.checked_sub(LAG) {
                feed(&mut st, &mut agents, 2, c);
                if c > 0 && quiet.contains(&(c - 1)) {
                    assert!(
                        st.closed.contains(&(c - 1)),
                        "quiet second {} closed",
                        c - 1
                    );
                }
            }
            if t == LAST {
                // What the same seconds held while each was merged as its records came.
                let held = st.pending.iter().map(|&s| {
                    let mut p = Pending::new(s);
                    for a in &st.series {
                        if let Some(r) = a.received.get(&s) {
                            p.add(&a.agent, r, 0).unwrap();
                        }
                    }
                    p.decoded_bytes()
                });
                old_most = held.sum();
            }
        }
        for c in LAST + 1 - LAG..=LAST {
            feed(&mut st, &mut agents, 2, c);
        }
        assert!(
            st.pending.is_empty(),
            "every second closed before any final record: {:?}",
            st.pending
        );
        for (i, name) in names.iter().enumerate() {
            send(
                &mut st,
                &mut agents,
                "final",
                name,
                &final_record(name, LAST, sent[i]),
            );
            full[i].last_s = Some(LAST);
        }
        let most = st.backlog;
        eprintln!(
            "{} seconds waited for the starved agent at most: {} KB of records held, {} KB \
             when each waiting second was merged as its records came",
            most.seconds,
            most.bytes / 1_000,
            old_most / 1_000
        );
        assert!(most.seconds <= LAG as usize + 1, "{most:?}");
        assert!(
            most.bytes <= most.seconds * 3 * 4_000,
            "a few KB a second waiting: {most:?}"
        );
        let whole = merge(full, cfg.late_grace_ms()).unwrap();
        let live: Vec<MergedSecond> = st.kept.values().map(|m| (**m).clone()).collect();
        assert_eq!(live, whole.seconds);
        assert!(agents.iter().all(|a| a.after_merge == 0));
        let (_, cut_live) = st.tally.finish(None).unwrap();
        assert_eq!(cut_live, phases(&whole, cfg.warmup()));
    }

    /// A record of a second merged without it (it came after a later one of its
    /// agent's) is counted and not held.
    #[test]
    fn a_record_after_its_second_was_merged_is_counted_not_held() {
        let cfg = cfg();
        let mut agents: Vec<AgentReport> = ["a", "b", "c"]
            .iter()
            .enumerate()
            .map(|(i, n)| report(i as u32, n))
            .collect();
        let mut st = State::new(&cfg, clock::wall_ns(), &agents);
        let rec = |n: &str, s| msg::encode(&starved_record(n, s)).unwrap();
        for n in ["a", "b", "c"] {
            send(&mut st, &mut agents, "sec", n, &rec(n, 0));
        }
        for n in ["a", "c"] {
            send(&mut st, &mut agents, "sec", n, &rec(n, 1));
        }
        send(&mut st, &mut agents, "sec", "b", &rec("b", 2));
        assert!(st.closed.contains(&1), "b is past 1: closed without it");
        send(&mut st, &mut agents, "sec", "b", &rec("b", 1));
        assert_eq!(agents[1].after_merge, 1);
        assert!(!st.series[1].received.contains_key(&1));
        send(&mut st, &mut agents, "sec", "b", &rec("b", 0));
        assert_eq!(
            agents[1].after_merge, 1,
            "a record sent again is no new one"
        );
        assert_eq!(st.kept[&1].slots["b"], crate::merge::Slot::Missing);
    }
}
