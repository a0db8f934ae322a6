//! Phases: the intervals of a run during which the same injectors were active.
//!
//! Place in the flow: after [`crate::merge`], the figures a power test (R99) reads.
//! Each agent is active from the first to the last second in which it sent load; the
//! run is cut wherever that set changes. An injector's first and last active seconds
//! are partial (it started or stopped inside them), so every such second is left out
//! of the phase it falls in, and each phase lists the seconds it left out; so are the
//! seconds in which a later injector warmed up (its load reached the server, not the
//! figures). A phase in
//! which some injector judged itself generator-bound is marked: its figures describe
//! the generator, not the server.

use crate::merge::{widen, AgentSeries, Merged, MergedSecond, Packed, Slot};
use crate::msg::RESPONSE_TIME;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;
use volley_analysis::phase::{cut, Cut, Figures};
use volley_metrics::hist;

/// One phase, in the JSON names of `phases[]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Phase {
    /// The active injectors, by name.
    pub injectors: Vec<String>,
    /// Its seconds since T0 (the boundary seconds left out) and the response-time
    /// figures of the covered ones.
    #[serde(flatten)]
    pub figures: Figures,
    /// Median response time, ms.
    pub p50_ms: Option<f64>,
    /// Failed requests in the covered seconds.
    pub errors: u64,
    /// Some injector was generator-bound in a covered second.
    pub generator_bound: bool,
    /// Which ones.
    pub bound_injectors: Vec<String>,
    /// Covered (second, injector) pairs with no record (missing or lost): the figures
    /// are short by them.
    pub missing: u64,
    /// The phase starts at or after the second the run became degraded.
    pub degraded: bool,
}

/// Cuts a whole merged run into phases at once (the cut itself is
/// `volley_analysis::phase`, shared with `volley log phases`). The coordinator cuts as
/// the seconds close ([`Cutter`]), to the same phases.
pub fn phases(m: &Merged, warmup: Duration) -> Vec<Phase> {
    let active: Vec<(&str, (u64, u64))> = m
        .agents
        .iter()
        .filter_map(|a| a.active().map(|span| (a.agent.as_str(), span)))
        .collect();
    let spans: Vec<(u64, u64)> = active.iter().map(|&(_, span)| span).collect();
    // Each injector warmed up in the whole seconds before its first active one.
    let warm_s = warm_seconds(warmup);
    let warming: BTreeSet<u64> = spans
        .iter()
        .flat_map(|&(first, _)| first.saturating_sub(warm_s)..first)
        .collect();
    cut(&spans)
        .into_iter()
        .map(|mut c| {
            c.left_out_s.extend(warming.range(c.start_s..=c.end_s));
            c.left_out_s.sort_unstable();
            c.left_out_s.dedup();
            let injectors: Vec<String> =
                c.members.iter().map(|&i| active[i].0.to_string()).collect();
            let mut acc = Acc::default();
            let kept = m.seconds.iter().filter(|s| {
                (c.start_s..=c.end_s).contains(&s.second) && !c.left_out_s.contains(&s.second)
            });
            for s in kept {
                let absent = |i: &&String| {
                    matches!(s.slots.get(*i), Some(Slot::Missing | Slot::Lost) | None)
                };
                let missing = injectors.iter().filter(absent).count() as u64;
                let counts = (s.counters.requests, s.counters.errors);
                acc.add(counts, s.hist(RESPONSE_TIME), missing, &s.generator_bound);
            }
            acc.phase(injectors, c, m.degraded_from_s)
        })
        .collect()
}

/// The whole seconds a warm-up of `warmup` covers before an injector's first active one.
fn warm_seconds(warmup: Duration) -> u64 {
    warmup.as_secs() + u64::from(warmup.subsec_nanos() > 0)
}

/// The figures of one phase's covered seconds, added up second by second.
#[derive(Debug, Default)]
struct Acc {
    hist: Option<hist::Hist>,
    requests: u64,
    errors: u64,
    seconds: u64,
    missing: u64,
    bound: BTreeSet<String>,
}

impl Acc {
    /// Adds one covered second: its counters, response times, the phase's injectors
    /// with no record in it, and the ones generator-bound in it.
    fn add(
        &mut self,
        (requests, errors): (u64, u64),
        response: Option<&Packed>,
        missing: u64,
        bound: &[String],
    ) {
        self.seconds += 1;
        self.requests += requests;
        self.errors += errors;
        let h = self.hist.get_or_insert_with(hist::new_hist);
        if let Some(Ok(r)) = response.map(Packed::unpack) {
            // Same shape and range everywhere: adding cannot fail.
            let _ = hist::add(h, &r);
        }
        self.missing += missing;
        self.bound.extend(bound.iter().cloned());
    }

    /// The phase of `injectors` over cut `c`.
    fn phase(self, injectors: Vec<String>, c: Cut, degraded_from_s: Option<u64>) -> Phase {
        let h = self.hist.unwrap_or_else(hist::new_hist);
        let ms = |us: f64| (!h.is_empty()).then(|| hist::us_to_ms(us));
        let (mean_ms, p99_ms) = (ms(h.mean()), ms(h.value_at_quantile(0.99) as f64));
        Phase {
            degraded: degraded_from_s.is_some_and(|d| c.start_s >= d),
            generator_bound: !self.bound.is_empty(),
            bound_injectors: self.bound.into_iter().collect(),
            injectors,
            p50_ms: ms(h.value_at_quantile(0.5) as f64),
            figures: Figures::new(c, self.seconds, self.requests, mean_ms, p99_ms),
            errors: self.errors,
            missing: self.missing,
        }
    }
}

/// What the phases read of one merged second, taken when it closes (its records are
/// let go then).
#[derive(Debug, Clone)]
pub(crate) struct PhaseSecond {
    second: u64,
    /// Per agent, in share order: its record of this second held load.
    loaded: Vec<bool>,
    /// Per agent: no record of it in this second (missing, lost, or not due).
    absent: Vec<bool>,
    requests: u64,
    errors: u64,
    response: Option<Packed>,
    bound: Vec<String>,
}

impl PhaseSecond {
    /// Second `m`, with the records of `agents` (share order) that it was merged from.
    pub(crate) fn of(m: &MergedSecond, agents: &[AgentSeries]) -> PhaseSecond {
        let loaded = agents.iter().map(|a| {
            a.received
                .get(&m.second)
                .is_some_and(|r| r.record.counters.requests > 0)
        });
        let present = |a: &AgentSeries| m.slots.get(&a.agent) == Some(&Slot::Present);
        PhaseSecond {
            second: m.second,
            loaded: loaded.collect(),
            absent: agents.iter().map(|a| !present(a)).collect(),
            requests: m.counters.requests,
            errors: m.counters.errors,
            response: m.hist(RESPONSE_TIME).cloned(),
            bound: m.generator_bound.clone(),
        }
    }
}

/// The phase being added up.
#[derive(Debug)]
struct Open {
    members: Vec<usize>,
    start_s: u64,
    end_s: u64,
    left_out_s: Vec<u64>,
    acc: Acc,
}

/// Phases cut as the merged seconds close, so a long run's coordinator holds a few
/// seconds and the open phase's sums, not every second to the end (issue 26).
///
/// The seconds are taken in order (one that closed early waits for those before it). A
/// second is folded into its phase once its injectors and its being left out or not are
/// known: for each injector that has loaded, whether it loads again after it (it is
/// then no last second) or has ended ([`Cutter::end`]); for each that has not, whether
/// it could still start within the warm-up after it. In a steady run that is the
/// latest second or two; an injector idle for a while holds back the seconds since it
/// last loaded. The phases are those of [`phases`] cut at the end of the same seconds.
#[derive(Debug)]
pub(crate) struct Cutter {
    names: Vec<String>,
    warm_s: u64,
    /// Per agent: the first and latest second it loaded in, of the seconds taken.
    loaded: Vec<Option<(u64, u64)>>,
    /// Per agent whose series is closed (its final record came, or it was lost): the
    /// last second it holds a record of.
    ends: Vec<Option<Option<u64>>>,
    /// Every second before this one has been taken.
    next_s: u64,
    /// Seconds that closed before an earlier one, waiting for it.
    waiting: BTreeMap<u64, PhaseSecond>,
    /// Seconds taken, not yet folded.
    tail: VecDeque<PhaseSecond>,
    open: Option<Open>,
    cut: Vec<(Vec<String>, Cut, Acc)>,
}

impl Cutter {
    /// A cut of the seconds from `first_s` on of agents `names` (share order) warming
    /// up for `warmup` before their place.
    pub(crate) fn new(names: Vec<String>, first_s: u64, warmup: Duration) -> Cutter {
        Cutter {
            loaded: vec![None; names.len()],
            ends: vec![None; names.len()],
            names,
            warm_s: warm_seconds(warmup),
            next_s: first_s,
            waiting: BTreeMap::new(),
            tail: VecDeque::new(),
            open: None,
            cut: Vec::new(),
        }
    }

    /// Seconds held (waiting or not yet folded): what the cut costs in memory.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.waiting.len() + self.tail.len()
    }

    /// Takes one merged second (in any order; one before the first is no part of the
    /// run, as in [`crate::merge::merge`]).
    pub(crate) fn push(&mut self, s: PhaseSecond) {
        if s.second >= self.next_s {
            self.waiting.insert(s.second, s);
        }
        while let Some(s) = self.waiting.remove(&self.next_s) {
            self.take(s);
        }
        self.fold_known(false);
    }

    /// Agent `i` sends nothing more; `last_held`: the last second it holds a record of.
    pub(crate) fn end(&mut self, i: usize, last_held: Option<u64>) {
        if let Some(e) = self.ends.get_mut(i) {
            *e = Some(last_held);
        }
        self.fold_known(false);
    }

    /// The phases, once every second has been pushed; `degraded_from_s` as the merge
    /// says.
    pub(crate) fn finish(mut self, degraded_from_s: Option<u64>) -> Vec<Phase> {
        for s in std::mem::take(&mut self.waiting).into_values() {
            self.take(s);
        }
        self.fold_known(true);
        self.close();
        self.cut
            .into_iter()
            .map(|(injectors, c, acc)| acc.phase(injectors, c, degraded_from_s))
            .collect()
    }

    fn take(&mut self, s: PhaseSecond) {
        for (span, _) in self.loaded.iter_mut().zip(&s.loaded).filter(|(_, l)| **l) {
            *span = widen(*span, s.second);
        }
        self.next_s = s.second + 1;
        self.tail.push_back(s);
    }

    fn fold_known(&mut self, at_end: bool) {
        while let Some(s) = self.tail.front() {
            let Some((members, left_out)) = self.known(s.second, at_end) else {
                return;
            };
            if let Some(s) = self.tail.pop_front() {
                self.fold(s, members, left_out);
            }
        }
    }

    /// Second `s`'s active injectors and whether it is left out, once known.
    fn known(&self, s: u64, at_end: bool) -> Option<(Vec<usize>, bool)> {
        let mut members = Vec::new();
        let mut left_out = false;
        for (i, span) in self.loaded.iter().enumerate() {
            // Ended, and every second it holds a record of taken: its span is whole.
            let ended = at_end || self.ends[i].is_some_and(|l| l.is_none_or(|l| l < self.next_s));
            match *span {
                Some((first, latest)) if first <= s => {
                    // Active at s while it loads again at or after s.
                    if latest < s || (latest == s && !ended) {
                        if !ended {
                            return None;
                        }
                        continue;
                    }
                    members.push(i);
                    left_out |= first == s || latest == s;
                }
                // Not started by s: s is left out if it falls in its warm-up.
                Some((first, _)) => left_out |= first - s <= self.warm_s,
                // Not started in any second taken: it could still start within the
                // warm-up after s.
                None if !ended && s + self.warm_s >= self.next_s => return None,
                None => {}
            }
        }
        Some((members, left_out))
    }

    fn fold(&mut self, s: PhaseSecond, members: Vec<usize>, left_out: bool) {
        if self.open.as_ref().is_some_and(|o| o.members != members) {
            self.close();
        }
        if members.is_empty() {
            return;
        }
        let o = self.open.get_or_insert_with(|| Open {
            members,
            start_s: s.second,
            end_s: s.second,
            left_out_s: Vec::new(),
            acc: Acc::default(),
        });
        o.end_s = s.second;
        if left_out {
            o.left_out_s.push(s.second);
        } else {
            let missing = o.members.iter().filter(|&&i| s.absent[i]).count() as u64;
            let counts = (s.requests, s.errors);
            o.acc.add(counts, s.response.as_ref(), missing, &s.bound);
        }
    }

    fn close(&mut self) {
        if let Some(o) = self.open.take() {
            let injectors = o.members.iter().map(|&i| self.names[i].clone()).collect();
            let c = Cut {
                members: o.members,
                start_s: o.start_s,
                end_s: o.end_s,
                left_out_s: o.left_out_s,
            };
            self.cut.push((injectors, c, o.acc));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::tests::{record, series};
    use crate::merge::{merge, Merged, Received};

    /// An agent due from `first_s` whose seconds held `n[k]` requests each, 1 ms each.
    fn loads(agent: &str, first_s: u64, n: &[u64]) -> AgentSeries {
        let mut a = AgentSeries::new(agent, first_s);
        for (k, &n) in n.iter().enumerate() {
            let s = first_s + k as u64;
            let received = Received {
                record: record(agent, s, n, 1_000 + 250 * k as u64, n / 10),
                arrived_ms: (s as i64 + 1) * 1_000 + 100,
            };
            a.received.insert(s, received);
        }
        a.last_s = Some(first_s + n.len() as u64 - 1);
        a
    }

    /// Agents a, b and c, each from 2 s after the one before to `last` seconds later,
    /// `n` requests a second at their own latency.
    fn staggered(last: u64, n: u64, latency_us: [u64; 3]) -> Vec<AgentSeries> {
        let names = ["a", "b", "c"].into_iter().zip(latency_us).enumerate();
        names
            .map(|(i, (name, us))| {
                let first = 2 * i as u64;
                series(name, first..=first + last, n, us)
            })
            .collect()
    }

    /// The order the merged seconds close in.
    #[derive(Debug, Clone, Copy)]
    enum Close {
        InOrder,
        /// 1, 0, 3, 2, ...: each second waits for the one before it.
        Swapped,
        /// Second 2 closes last (a record that came at the run's end).
        TwoLast,
    }

    /// The phases as the coordinator cuts them: each second pushed as it closes, each
    /// agent ended (`end_early`) once the second of its last record is in, else only at
    /// the finish; with the most seconds the cut held at once.
    fn cut_live(
        m: &Merged,
        warmup: Duration,
        close: Close,
        end_early: bool,
    ) -> (Vec<Phase>, usize) {
        let names = m.agents.iter().map(|a| a.agent.clone()).collect();
        let first = m.agents.iter().map(|a| a.first_s).min().unwrap_or(0);
        let mut c = Cutter::new(names, first, warmup);
        let mut order: Vec<&MergedSecond> = m.seconds.iter().collect();
        match close {
            Close::InOrder => {}
            Close::Swapped => order.chunks_mut(2).for_each(|p| p.reverse()),
            Close::TwoLast => {
                if let Some(k) = order.iter().position(|s| s.second == 2) {
                    let two = order.remove(k);
                    order.push(two);
                }
            }
        }
        let mut most = 0;
        for s in order {
            c.push(PhaseSecond::of(s, &m.agents));
            for (i, a) in m.agents.iter().enumerate() {
                if end_early && a.last_second() == Some(s.second) {
                    c.end(i, a.last_second());
                }
            }
            most = most.max(c.held());
        }
        (c.finish(m.degraded_from_s), most)
    }

    #[test]
    fn phases_cut_as_the_seconds_close_are_the_phases_cut_at_the_end() {
        let staggered = || staggered(9, 100, [1_000, 2_000, 3_000]);
        let bound = || {
            let mut b = series("b", 2..=7, 10, 1_000);
            b.received.get_mut(&4).unwrap().record.generator_bound = true;
            vec![series("a", 0..=9, 10, 1_000), b]
        };
        let lost = || {
            let mut b = series("b", 0..=3, 10, 1_000);
            b.received.remove(&2);
            b.last_s = None;
            b.lost_from_s = Some(4);
            vec![series("a", 0..=9, 10, 1_000), b]
        };
        // b had nothing in seconds 4 and 8 (no record, not lost); c was starved: its
        // records came two minutes late.
        let quiet_and_starved = || {
            let mut b = series("b", 0..=11, 10, 1_000);
            b.received.remove(&4);
            b.received.remove(&8);
            let mut c = series("c", 1..=11, 10, 2_000);
            c.received
                .values_mut()
                .for_each(|r| r.arrived_ms += 120_000);
            vec![series("a", 0..=11, 10, 1_000), b, c]
        };
        let ms = Duration::from_millis;
        let cases: Vec<(&str, Vec<AgentSeries>, Duration)> = vec![
            (
                "a quiet second and a starved agent",
                quiet_and_starved(),
                ms(1_000),
            ),
            ("staggered 1 2 3 2 1", staggered(), Duration::ZERO),
            ("staggered, 1.5 s warm-up", staggered(), ms(1_500)),
            ("a 3 s warm-up spans a whole phase", staggered(), ms(3_000)),
            (
                "a warm-up inside a long phase",
                vec![
                    series("a", 0..=19, 10, 1_000),
                    series("b", 8..=19, 10, 1_000),
                ],
                ms(2_500),
            ),
            ("generator-bound", bound(), Duration::ZERO),
            ("missing and lost", lost(), ms(1_000)),
            (
                "idle seconds at the edges and inside",
                vec![
                    loads("a", 0, &[0, 0, 5, 5, 0, 0, 0, 5, 5, 0]),
                    loads("b", 0, &[5, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
                    loads("c", 3, &[0, 0, 0, 0, 0, 0, 0]),
                ],
                ms(2_000),
            ),
            (
                "nobody active in between",
                vec![loads("a", 0, &[5, 5, 5]), loads("b", 6, &[5, 5, 5])],
                ms(1_000),
            ),
            (
                "only partial seconds",
                vec![series("a", 0..=1, 5, 1_000)],
                ms(500),
            ),
            (
                "nothing loaded",
                vec![loads("a", 0, &[0, 0, 0])],
                Duration::ZERO,
            ),
        ];
        for (name, agents, warmup) in cases {
            let m = merge(agents, 1_000).unwrap();
            let at_end = phases(&m, warmup);
            for close in [Close::InOrder, Close::Swapped, Close::TwoLast] {
                for end_early in [false, true] {
                    let (live, _) = cut_live(&m, warmup, close, end_early);
                    assert_eq!(live, at_end, "{name}, {close:?}, ended early: {end_early}");
                }
            }
        }
    }

    #[test]
    fn a_steady_run_is_cut_holding_a_second_or_two_whatever_its_length() {
        // Three agents staggered by 2 s over ten minutes, with a 2 s warm-up.
        let m = merge(staggered(600, 30, [1_000; 3]), 1_000).unwrap();
        let warmup = Duration::from_secs(2);
        let (live, most) = cut_live(&m, warmup, Close::Swapped, true);
        assert_eq!(live, phases(&m, warmup));
        assert_eq!(live[2].figures.seconds, 600 - 4 - 1);
        assert!(most <= 4, "held {most} seconds at once");
    }

    fn phases_of(m: &Merged) -> Vec<Phase> {
        phases(m, Duration::ZERO)
    }

    #[test]
    fn a_later_injectors_warm_up_seconds_are_left_out_of_the_phase_they_fall_in() {
        let m = merge(
            vec![
                series("a", 0..=9, 100, 1_000),
                series("b", 4..=13, 100, 1_000),
            ],
            1_000,
        )
        .unwrap();
        // b warmed up for 1.5 s before its second 4: seconds 2 and 3 held its load.
        let ps = phases(&m, Duration::from_millis(1_500));
        assert_eq!(ps[0].injectors, ["a"]);
        assert_eq!(ps[0].figures.left_out_s, [0, 2, 3]);
        assert_eq!((ps[0].figures.seconds, ps[0].figures.requests), (1, 100));
        assert_eq!(ps[1].figures.left_out_s, [4, 9]);
        // Without a warm-up only the boundary seconds are.
        assert_eq!(phases_of(&m)[0].figures.left_out_s, [0]);
    }

    #[test]
    fn a_staggered_start_of_three_gives_1_2_3_2_1() {
        let ps = phases_of(&merge(staggered(9, 100, [1_000; 3]), 1_000).unwrap());
        let shape: Vec<(usize, u64, u64)> = ps
            .iter()
            .map(|p| (p.injectors.len(), p.figures.start_s, p.figures.end_s))
            .collect();
        assert_eq!(
            shape,
            [(1, 0, 1), (2, 2, 3), (3, 4, 9), (2, 10, 11), (1, 12, 13)]
        );
        assert_eq!(ps[2].injectors, ["a", "b", "c"]);
        assert_eq!(ps[3].injectors, ["b", "c"]);
        // Starts and ends are partial seconds and are left out, and said.
        assert_eq!(ps[0].figures.left_out_s, [0]);
        assert_eq!(ps[2].figures.left_out_s, [4, 9]);
        assert_eq!(ps[4].figures.left_out_s, [13]);
        assert_eq!((ps[2].figures.seconds, ps[2].figures.requests), (4, 1_200));
        assert_eq!(ps[2].figures.rps, Some(300.0));
        assert_eq!(ps[1].figures.rps, Some(200.0));
        assert_eq!(ps[2].p50_ms, Some(1.0));
        assert_eq!((ps[4].figures.seconds, ps[4].figures.rps), (1, Some(100.0)));
        let only_partial = phases_of(&merge(vec![series("a", 0..=1, 5, 1_000)], 0).unwrap());
        assert_eq!(only_partial[0].figures.left_out_s, [0, 1]);
        assert_eq!(
            (only_partial[0].figures.rps, only_partial[0].figures.p99_ms),
            (None, None)
        );
        assert!(ps
            .iter()
            .all(|p| !p.generator_bound && p.missing == 0 && !p.degraded));
    }

    #[test]
    fn latencies_of_a_phase_come_from_added_histograms() {
        let ps = phases_of(
            &merge(
                vec![
                    series("a", 0..=5, 90, 1_000),
                    series("b", 0..=5, 10, 50_000),
                ],
                0,
            )
            .unwrap(),
        );
        assert_eq!(ps.len(), 1);
        let p = &ps[0];
        assert_eq!(p.p50_ms, Some(1.0));
        assert!(
            (p.figures.p99_ms.unwrap() - 50.0).abs() < 0.1,
            "{:?}",
            p.figures.p99_ms
        );
        assert!(
            (p.figures.mean_ms.unwrap() - 5.9).abs() < 0.05,
            "{:?}",
            p.figures.mean_ms
        );
    }

    #[test]
    fn generator_bound_injectors_mark_their_phase() {
        let mut b = series("b", 2..=7, 10, 1_000);
        b.received.get_mut(&4).unwrap().record.generator_bound = true;
        let ps = phases_of(&merge(vec![series("a", 0..=9, 10, 1_000), b], 0).unwrap());
        let marked: Vec<bool> = ps.iter().map(|p| p.generator_bound).collect();
        assert_eq!(marked, [false, true, false]);
        assert_eq!(ps[1].bound_injectors, ["b"]);
    }

    #[test]
    fn missing_and_lost_seconds_are_counted_and_degraded_phases_marked() {
        let mut b = series("b", 0..=3, 10, 1_000);
        b.received.remove(&2);
        b.last_s = None;
        b.lost_from_s = Some(4);
        let mut a = series("a", 0..=9, 10, 1_000);
        a.received.insert(
            2,
            Received {
                record: record("a", 2, 10, 1_000, 3),
                arrived_ms: 3_000,
            },
        );
        let ps = phases_of(&merge(vec![a, b], 0).unwrap());
        assert_eq!(ps.len(), 2);
        assert_eq!(ps[0].injectors, ["a", "b"]);
        assert_eq!((ps[0].missing, ps[0].errors), (1, 3));
        assert!(!ps[0].degraded);
        assert_eq!(ps[1].injectors, ["a"]);
        assert!(ps[1].degraded);
    }
}
