//! Phases: the intervals of a run during which the same injectors were active.
//!
//! Place in the flow: after [`crate::merge`], the figures a power test (R99) reads.
//! Each agent is active from the first to the last second in which it sent load; the
//! run is cut wherever that set changes. An injector's first and last active seconds
//! are partial (it started or stopped inside them), so every such second is left out
//! of the phase it falls in, and each phase lists the seconds it left out. A phase in
//! which some injector judged itself generator-bound is marked: its figures describe
//! the generator, not the server.

use crate::merge::{Merged, Packed, Slot};
use crate::msg::RESPONSE_TIME;
use serde::Serialize;
use std::collections::BTreeSet;
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

/// Cuts a merged run into phases (the cut itself is `volley_analysis::phase`, shared
/// with `volley log phases`).
pub fn phases(m: &Merged) -> Vec<Phase> {
    let active: Vec<(&str, (u64, u64))> = m
        .agents
        .iter()
        .filter_map(|a| a.active().map(|span| (a.agent.as_str(), span)))
        .collect();
    let spans: Vec<(u64, u64)> = active.iter().map(|&(_, span)| span).collect();
    cut(&spans)
        .into_iter()
        .map(|c| {
            let injectors = c.members.iter().map(|&i| active[i].0.to_string()).collect();
            phase(m, injectors, c)
        })
        .collect()
}

fn phase(m: &Merged, injectors: Vec<String>, c: Cut) -> Phase {
    let (start_s, end_s) = (c.start_s, c.end_s);
    let mut h = hist::new_hist();
    let (mut requests, mut errors, mut seconds, mut missing) = (0, 0, 0, 0);
    let mut bound: BTreeSet<String> = BTreeSet::new();
    let kept = m
        .seconds
        .iter()
        .filter(|s| (start_s..=end_s).contains(&s.second) && !c.left_out_s.contains(&s.second));
    for s in kept {
        seconds += 1;
        requests += s.counters.requests;
        errors += s.counters.errors;
        if let Some(Ok(r)) = s.hist(RESPONSE_TIME).map(Packed::unpack) {
            // Same shape and range everywhere: adding cannot fail.
            let _ = hist::add(&mut h, &r);
        }
        missing += injectors
            .iter()
            .filter(|i| matches!(s.slots.get(*i), Some(Slot::Missing | Slot::Lost) | None))
            .count() as u64;
        bound.extend(s.generator_bound.iter().cloned());
    }
    let ms = |us: f64| (!h.is_empty()).then(|| hist::us_to_ms(us));
    let (mean_ms, p99_ms) = (ms(h.mean()), ms(h.value_at_quantile(0.99) as f64));
    Phase {
        degraded: m.degraded_from_s.is_some_and(|d| start_s >= d),
        generator_bound: !bound.is_empty(),
        bound_injectors: bound.into_iter().collect(),
        injectors,
        figures: Figures::new(c, seconds, requests, mean_ms, p99_ms),
        p50_ms: ms(h.value_at_quantile(0.5) as f64),
        errors,
        missing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::tests::{record, series};
    use crate::merge::{merge, Received};

    #[test]
    fn a_staggered_start_of_three_gives_1_2_3_2_1() {
        let agents = vec![
            series("a", 0..=9, 100, 1_000),
            series("b", 2..=11, 100, 1_000),
            series("c", 4..=13, 100, 1_000),
        ];
        let ps = phases(&merge(agents, 1_000).unwrap());
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
        let only_partial = phases(&merge(vec![series("a", 0..=1, 5, 1_000)], 0).unwrap());
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
        let ps = phases(
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
        let ps = phases(&merge(vec![series("a", 0..=9, 10, 1_000), b], 0).unwrap());
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
        let ps = phases(&merge(vec![a, b], 0).unwrap());
        assert_eq!(ps.len(), 2);
        assert_eq!(ps[0].injectors, ["a", "b"]);
        assert_eq!((ps[0].missing, ps[0].errors), (1, 3));
        assert!(!ps[0].degraded);
        assert_eq!(ps[1].injectors, ["a"]);
        assert!(ps[1].degraded);
    }
}
