//! The exact merge of several agents' per-second records.
//!
//! Place in the flow: the coordinator's last step before [`crate::phase`]. Windows are
//! keyed by whole seconds since T0 of the intended send time, the same instant for
//! every agent (clock offsets are taken out by the start deadline). Histograms are
//! added bucket by bucket (never averaged percentiles); the merged request count of
//! every second is checked against the sum of the agents'. Each agent's own series is
//! kept beside the merge. A second an agent was due to send and did not is *missing*,
//! and a second after the agent was lost is *lost*: both are named, never read as zero.

use crate::msg::{Counters, SecondRecord};
use crate::AgentsError;
use rangemap::RangeInclusiveSet;
use serde::Serialize;
use std::collections::BTreeMap;
use volley_metrics::hist::{self, Hist};

/// One record as the coordinator received it.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// The record.
    pub record: SecondRecord,
    /// When it arrived, ms since T0 on the coordinator's clock.
    pub arrived_ms: i64,
}

/// One agent's series as collected.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSeries {
    /// Its name.
    pub agent: String,
    /// The first second it was due to send (its start delay, whole seconds).
    pub first_s: u64,
    /// The last second it said it sent (its final record); `None` without one.
    pub last_s: Option<u64>,
    /// From which second on it was lost (no heartbeat for the bound); `None` if never.
    pub lost_from_s: Option<u64>,
    /// Its records by second, until the coordinator's live merge has merged their
    /// second (then they are folded into `merged`).
    pub received: BTreeMap<u64, Received>,
    /// What the run's end still reads of the records the live merge has merged and
    /// let go: the merged second holds their sums, the store the records (handed out
    /// as they came).
    pub merged: Retired,
}

/// The records of one agent that were merged and let go, reduced to what the run's end
/// reads of them: which seconds came (as ranges: a long run's agent holds one or a
/// few, not a node per second), how many requests they held, and the first and last
/// second that held load (the agent's active span, for the phases).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Retired {
    /// The seconds whose records came.
    pub seconds: RangeInclusiveSet<u64>,
    /// The requests of those records.
    pub requests: u64,
    /// The first and last of those seconds with `requests > 0`.
    pub loaded: Option<(u64, u64)>,
}

/// `span` widened by `s`.
pub(crate) fn widen(span: Option<(u64, u64)>, s: u64) -> Option<(u64, u64)> {
    Some(span.map_or((s, s), |(f, l)| (f.min(s), l.max(s))))
}

impl AgentSeries {
    /// An empty series due from `first_s`.
    pub fn new(agent: &str, first_s: u64) -> Self {
        AgentSeries {
            agent: agent.to_string(),
            first_s,
            last_s: None,
            lost_from_s: None,
            received: BTreeMap::new(),
            merged: Retired::default(),
        }
    }

    /// First and last second in which it sent load (`requests > 0`).
    pub fn active(&self) -> Option<(u64, u64)> {
        let loaded = self
            .received
            .iter()
            .filter(|(_, r)| r.record.counters.requests > 0);
        loaded.fold(self.merged.loaded, |span, (s, _)| widen(span, *s))
    }

    /// Whether its record of second `s` came (held or merged).
    pub fn holds(&self, s: u64) -> bool {
        self.received.contains_key(&s) || self.merged.seconds.contains(&s)
    }

    /// Whether it is past second `s`: its record of `s` came, or one of a later second.
    /// An agent sends its records in second order, each only once the one before was
    /// received ([`crate::outbox`]), so a later record means no record of `s` is coming:
    /// it had nothing in `s` (no request intended in it) or dropped it from a full
    /// outbox. Either way `s` is missing for it, and waiting longer holds `s` for nothing.
    pub fn passed(&self, s: u64) -> bool {
        self.holds(s) || self.last_second().is_some_and(|l| l > s)
    }

    /// Every second whose record came, in order.
    pub fn seconds(&self) -> Vec<u64> {
        let merged = self.merged.seconds.iter().flat_map(|r| r.clone());
        let mut all: Vec<u64> = merged.chain(self.received.keys().copied()).collect();
        all.sort_unstable();
        all
    }

    /// The requests of every record that came.
    pub fn requests(&self) -> u64 {
        let held: u64 = self
            .received
            .values()
            .map(|r| r.record.counters.requests)
            .sum();
        held + self.merged.requests
    }

    /// The latest second whose record came.
    pub fn last_second(&self) -> Option<u64> {
        let held = self.received.keys().next_back().copied();
        held.max(self.merged.seconds.last().map(|r| *r.end()))
    }

    /// Lets go of the record of second `s`, once merged, keeping what the run's end
    /// reads of it ([`Retired`]).
    pub(crate) fn retire(&mut self, s: u64) {
        if let Some(r) = self.received.remove(&s) {
            let m = &mut self.merged;
            m.seconds.insert(s..=s);
            m.requests += r.record.counters.requests;
            if r.record.counters.requests > 0 {
                m.loaded = widen(m.loaded, s);
            }
        }
    }
}

/// What one agent contributed to one merged second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Slot {
    /// Its record is in the sum.
    Present,
    /// It was due and never sent one.
    Missing,
    /// It had been lost by then.
    Lost,
}

/// A record that arrived after its second's grace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Late {
    /// Whose.
    pub agent: String,
    /// By how much past the end of its second plus the grace, ms.
    pub late_ms: u64,
}

/// One second of the whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct MergedSecond {
    /// Seconds since T0.
    pub second: u64,
    /// The sum of the present agents' counters.
    pub counters: Counters,
    /// The sum of their histograms, by metric name, packed.
    pub hists: BTreeMap<String, Packed>,
    /// Each due agent's part in it.
    pub slots: BTreeMap<String, Slot>,
    /// Records that came late (they are in the sum all the same).
    pub late: Vec<Late>,
    /// Present agents whose generator bounded this second.
    pub generator_bound: Vec<String>,
    /// The sum of the present agents' full counters; `None` when one of them sent
    /// none (then the merged recorder cannot be rebuilt from the merged seconds).
    pub counts: Option<volley_metrics::Counts>,
    /// The first present agent's generator resources, as the recorders' merge keeps.
    pub resources: Option<volley_metrics::SecondResources>,
}

impl MergedSecond {
    /// Its merged histogram of metric `name`, if it has one.
    pub fn hist(&self, name: &str) -> Option<&Packed> {
        self.hists.get(name)
    }

    /// This second as a recorder's closed window (its histograms' bytes as they are),
    /// when every present agent sent its full counters.
    pub fn closed(&self) -> Option<volley_metrics::ClosedSecond> {
        use volley_metrics::Metric;
        let counts = self.counts?;
        let hists =
            Metric::ALL.map(|m| self.hist(m.name()).map(|p| p.0.clone()).unwrap_or_default());
        Some(volley_metrics::ClosedSecond {
            second: self.second,
            counts,
            hists,
            service_is_response: false,
            resources: self.resources,
        })
    }
}

/// A merged histogram in its compact byte form ([`hist::encode`], compressed V2).
///
/// Why packed: a merged second may be held a while (to the run's end when the caller
/// does not store it as it closes, or behind an earlier second the phases wait for),
/// and one decoded histogram holds 2,048 to ~23,500 `u32` counts (8 to 94 KB, by the
/// longest latency it holds) however few requests it counted. Seven metrics a second
/// made a 60-minute injected run's coordinator grow by ~650 KB a second, 2.3 GB an
/// hour; packed, a second of a few hundred requests is a few hundred bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Packed(Vec<u8>);

impl Packed {
    /// Packs `h`.
    pub fn pack(h: &Hist) -> Result<Packed, volley_metrics::MetricsError> {
        hist::encode(&mut hist::Encoder::new(), h).map(Packed)
    }

    /// The histogram, decoded into the standard shape.
    pub fn unpack(&self) -> Result<Hist, volley_metrics::MetricsError> {
        hist::decode(&self.0)
    }
}

/// The merged run, with each agent's own series kept.
#[derive(Debug, Clone)]
pub struct Merged {
    /// Every second from the first due to the last, in order.
    pub seconds: Vec<MergedSecond>,
    /// The agents' series, as given.
    pub agents: Vec<AgentSeries>,
    /// The first second some agent was lost from: the run is degraded from there.
    pub degraded_from_s: Option<u64>,
}

fn decode_hist(agent: &str, second: u64, bytes: &[u8]) -> Result<Hist, AgentsError> {
    hist::decode(bytes).map_err(|source| AgentsError::Histogram {
        agent: agent.to_string(),
        second,
        source,
    })
}

fn add_hist(agent: &str, second: u64, into: &mut Hist, from: &Hist) -> Result<(), AgentsError> {
    hist::add(into, from).map_err(|source| AgentsError::Histogram {
        agent: agent.to_string(),
        second,
        source,
    })
}

/// Which part `a` plays in `second` of a run whose last second is `run_last`.
fn slot(a: &AgentSeries, second: u64, run_last: u64) -> Option<Slot> {
    if a.holds(second) {
        return Some(Slot::Present);
    }
    let due_until = a.last_s.unwrap_or(run_last);
    match a.lost_from_s {
        Some(l) if second >= l && second >= a.first_s => Some(Slot::Lost),
        _ if (a.first_s..=due_until).contains(&second) => Some(Slot::Missing),
        _ => None,
    }
}

/// Merges the agents' series; records later than `grace_ms` after the end of their
/// second are flagged with how late they were.
pub fn merge(agents: Vec<AgentSeries>, grace_ms: u64) -> Result<Merged, AgentsError> {
    let degraded_from_s = degraded_from(&agents);
    let mut seconds = Vec::new();
    if let Some((first, last)) = span(&agents) {
        for second in first..=last {
            seconds.push(merge_second(&agents, second, last, grace_ms)?);
        }
    }
    Ok(Merged {
        seconds,
        agents,
        degraded_from_s,
    })
}

/// The run's first second (the earliest any agent was due) and its last (the latest
/// any agent sent or said it sent); `None` before both are known.
pub(crate) fn span(agents: &[AgentSeries]) -> Option<(u64, u64)> {
    let received = agents.iter().filter_map(AgentSeries::last_second);
    let last = received.chain(agents.iter().filter_map(|a| a.last_s)).max();
    Some((agents.iter().map(|a| a.first_s).min()?, last?))
}

/// The first second some agent was lost from.
pub(crate) fn degraded_from(agents: &[AgentSeries]) -> Option<u64> {
    agents.iter().filter_map(|a| a.lost_from_s).min()
}

/// Merges one second of the agents' series (`run_last`: the last second of the run
/// so far, for agents without a final record).
pub(crate) fn merge_second(
    agents: &[AgentSeries],
    second: u64,
    run_last: u64,
    grace_ms: u64,
) -> Result<MergedSecond, AgentsError> {
    let mut p = Pending::new(second);
    for a in agents {
        if let Some(r) = a.received.get(&second) {
            p.add(&a.agent, r, grace_ms)?;
        }
    }
    p.close(agents, run_last)
}

/// One second being merged record by record. Only for as long as one merge lasts: a
/// second waiting for a late record keeps that record's bytes, never a `Pending`, whose
/// decoded histograms (seven, 8 to 94 KB each) made every second held behind a starved
/// agent cost up to ~650 KB (issue 26: a coordinator at 113 MB).
#[derive(Debug)]
pub(crate) struct Pending {
    out: MergedSecond,
    /// The histograms' sums while records arrive, packed into `out` at the close.
    hists: BTreeMap<String, Hist>,
    /// Each histogram's count, summed over the records added (checked at the close).
    sums: BTreeMap<String, u64>,
}

impl Pending {
    /// An empty second.
    pub(crate) fn new(second: u64) -> Self {
        Pending {
            out: MergedSecond {
                second,
                counters: Counters::default(),
                hists: BTreeMap::new(),
                slots: BTreeMap::new(),
                late: Vec::new(),
                generator_bound: Vec::new(),
                counts: Some(volley_metrics::Counts::default()),
                resources: None,
            },
            hists: BTreeMap::new(),
            sums: BTreeMap::new(),
        }
    }

    /// Adds `agent`'s record of this second; records later than `grace_ms` after the
    /// second's end are flagged with how late they were.
    pub(crate) fn add(
        &mut self,
        agent: &str,
        r: &Received,
        grace_ms: u64,
    ) -> Result<(), AgentsError> {
        let second = self.out.second;
        let out = &mut self.out;
        out.slots.insert(agent.to_string(), Slot::Present);
        out.counters.add(&r.record.counters);
        out.counts = match (out.counts.as_mut(), &r.record.counts) {
            (Some(sum), Some(c)) => {
                sum.add(c);
                out.counts
            }
            _ => None,
        };
        out.resources = out.resources.or(r.record.resources);
        for (name, bytes) in &r.record.hists {
            let h = decode_hist(agent, second, bytes)?;
            *self.sums.entry(name.clone()).or_default() += h.len();
            let into = self
                .hists
                .entry(name.clone())
                .or_insert_with(hist::new_hist);
            add_hist(agent, second, into, &h)?;
        }
        let due_ms = (second as i64 + 1) * 1_000 + grace_ms as i64;
        if r.arrived_ms > due_ms {
            out.late.push(Late {
                agent: agent.to_string(),
                late_ms: (r.arrived_ms - due_ms) as u64,
            });
        }
        if r.record.generator_bound {
            out.generator_bound.push(agent.to_string());
        }
        Ok(())
    }

    /// The bytes its decoded histograms hold (what a second waiting in this form costs).
    #[cfg(test)]
    pub(crate) fn decoded_bytes(&self) -> usize {
        let counts: usize = self.hists.values().map(Hist::distinct_values).sum();
        counts * std::mem::size_of::<u32>()
    }

    /// The merged second: every other agent's part named (missing, lost, or not due),
    /// the sums checked against the agents' records.
    pub(crate) fn close(
        mut self,
        agents: &[AgentSeries],
        run_last: u64,
    ) -> Result<MergedSecond, AgentsError> {
        for a in agents {
            if let Some(s) = slot(a, self.out.second, run_last) {
                self.out.slots.insert(a.agent.clone(), s);
            }
        }
        let sums = self.sums.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        check_sums(&self.out, &self.hists, agents, &sums)?;
        let second = self.out.second;
        for (name, h) in &self.hists {
            let packed = Packed::pack(h).map_err(|source| AgentsError::Histogram {
                agent: "(merged)".to_string(),
                second,
                source,
            })?;
            self.out.hists.insert(name.clone(), packed);
        }
        Ok(self.out)
    }
}

/// Merged counts equal the agents' sums: requests, and every histogram's count.
fn check_sums(
    out: &MergedSecond,
    hists: &BTreeMap<String, Hist>,
    agents: &[AgentSeries],
    hist_sums: &BTreeMap<&str, u64>,
) -> Result<(), AgentsError> {
    let requests: u64 = agents
        .iter()
        .filter_map(|a| a.received.get(&out.second))
        .map(|r| r.record.counters.requests)
        .sum();
    if out.counters.requests != requests {
        return Err(AgentsError::MergeMismatch {
            second: out.second,
            merged: out.counters.requests,
            sum: requests,
        });
    }
    for (name, h) in hists {
        let sum = hist_sums.get(name.as_str()).copied().unwrap_or(0);
        if h.len() != sum {
            return Err(AgentsError::MergeMismatch {
                second: out.second,
                merged: h.len(),
                sum,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::msg::{PROTO, RESPONSE_TIME};
    use hdrhistogram::serialization::V2Serializer;
    use serde_bytes::ByteBuf;

    /// A record of `n` requests at `latency_us` each (`errors` of them failed).
    pub(crate) fn record(
        agent: &str,
        second: u64,
        n: u64,
        latency_us: u64,
        errors: u64,
    ) -> SecondRecord {
        let mut h = hist::new_hist();
        if n > 0 {
            h.record_n(latency_us, n as u32).unwrap();
        }
        let bytes = hist::encode(&mut V2Serializer::new(), &h).unwrap();
        SecondRecord {
            proto: PROTO,
            agent: agent.into(),
            second,
            hists: [(RESPONSE_TIME.to_string(), ByteBuf::from(bytes))].into(),
            counters: Counters {
                requests: n,
                ok: n - errors,
                errors,
                ..Counters::default()
            },
            generator_bound: false,
            counts: None,
            resources: None,
        }
    }

    /// A series with records for `seconds`, `n` requests each, arriving on time.
    pub(crate) fn series(
        agent: &str,
        seconds: std::ops::RangeInclusive<u64>,
        n: u64,
        latency_us: u64,
    ) -> AgentSeries {
        let mut a = AgentSeries::new(agent, *seconds.start());
        a.last_s = Some(*seconds.end());
        for s in seconds {
            let record = record(agent, s, n, latency_us, 0);
            a.received.insert(
                s,
                Received {
                    record,
                    arrived_ms: (s as i64 + 1) * 1_000 + 100,
                },
            );
        }
        a
    }

    #[test]
    fn merged_is_the_sum_and_each_series_is_kept() {
        let agents = vec![
            series("a", 0..=4, 100, 1_000),
            series("b", 1..=3, 50, 3_000),
        ];
        let m = merge(agents, 1_000).unwrap();
        assert_eq!(m.seconds.len(), 5);
        let reqs: Vec<u64> = m.seconds.iter().map(|s| s.counters.requests).collect();
        assert_eq!(reqs, [100, 150, 150, 150, 100]);
        let s2 = &m.seconds[2];
        let h = &s2.hists[RESPONSE_TIME].unpack().unwrap();
        assert_eq!(h.len(), 150);
        assert_eq!(
            h.count_between(2_900, 3_100),
            50,
            "b's latencies added, not averaged"
        );
        assert_eq!(m.agents.len(), 2);
        assert_eq!(m.agents[1].received.len(), 3);
        assert_eq!(m.seconds[0].slots.len(), 1, "b not yet due at second 0");
        assert!(m.degraded_from_s.is_none());
    }

    #[test]
    fn a_second_never_sent_is_missing_not_zero() {
        let mut b = series("b", 0..=4, 10, 500);
        b.received.remove(&2);
        let m = merge(vec![series("a", 0..=4, 10, 500), b], 1_000).unwrap();
        assert_eq!(m.seconds[2].slots["b"], Slot::Missing);
        assert_eq!(m.seconds[2].slots["a"], Slot::Present);
        assert_eq!(m.seconds[2].counters.requests, 10);
        assert_eq!(m.seconds[1].slots["b"], Slot::Present);
    }

    #[test]
    fn a_lost_agent_is_lost_from_its_second_and_its_data_before_is_kept() {
        let mut b = series("b", 0..=2, 10, 500);
        b.last_s = None;
        b.lost_from_s = Some(3);
        let m = merge(vec![series("a", 0..=5, 10, 500), b], 1_000).unwrap();
        assert_eq!(m.degraded_from_s, Some(3));
        let slots: Vec<Slot> = m.seconds.iter().map(|s| s.slots["b"]).collect();
        use Slot::*;
        assert_eq!(slots, [Present, Present, Present, Lost, Lost, Lost]);
        assert_eq!(m.seconds[4].counters.requests, 10);
    }

    #[test]
    fn late_records_fill_their_second_and_say_how_late() {
        let mut b = series("b", 0..=2, 10, 500);
        b.received.get_mut(&1).unwrap().arrived_ms = 4_500;
        let m = merge(vec![series("a", 0..=2, 10, 500), b], 1_000).unwrap();
        assert_eq!(m.seconds[1].counters.requests, 20);
        assert_eq!(
            m.seconds[1].late,
            [Late {
                agent: "b".into(),
                late_ms: 1_500
            }]
        );
        assert!(m.seconds[0].late.is_empty());
    }

    #[test]
    fn a_second_merged_record_by_record_is_the_second_merged_at_the_end() {
        let mut b = series("b", 0..=2, 7, 3_000);
        b.received.get_mut(&1).unwrap().arrived_ms = 5_000;
        let agents = vec![series("a", 0..=2, 10, 500), b];
        let mut p = Pending::new(1);
        for a in agents.iter().rev() {
            p.add(&a.agent, &a.received[&1], 1_000).unwrap();
        }
        let live = p.close(&agents, 1).unwrap();
        assert_eq!(live.late.len(), 1);
        let whole = merge(agents, 1_000).unwrap();
        assert_eq!(live, whole.seconds[1]);
    }

    #[test]
    fn bad_bytes_and_empty_input() {
        let mut a = series("a", 0..=0, 1, 1);
        let r = a.received.get_mut(&0).unwrap();
        r.record
            .hists
            .insert(RESPONSE_TIME.into(), ByteBuf::from(vec![9u8, 9, 9]));
        assert!(matches!(
            merge(vec![a], 0),
            Err(AgentsError::Histogram { second: 0, .. })
        ));
        assert!(merge(Vec::new(), 0).unwrap().seconds.is_empty());
    }
}
