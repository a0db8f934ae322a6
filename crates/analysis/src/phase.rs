//! Phases: a run cut into intervals during which the same members were active.
//!
//! Members are injectors (`volley_agents::phase`) or the client addresses of a server's
//! access log (`volley_replay::phases`). Each member is active from its first to its
//! last second; the run is cut wherever that set changes. A member's first and last
//! seconds are partial (it started or stopped inside them), so every such second is
//! left out of the figures of the phase it falls in, and each phase lists them.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// One interval with the same set of active members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// Indices of the active members in the spans given to [`cut`], ascending.
    pub members: Vec<usize>,
    /// First second (inclusive).
    pub start_s: u64,
    /// Last second (inclusive).
    pub end_s: u64,
    /// Seconds of `start_s..=end_s` in which some member started or stopped.
    pub left_out_s: Vec<u64>,
}

/// A phase's span and the figures of its covered seconds: the part every kind of phase
/// has (the injectors' `volley_agents::phase::Phase`, a log's
/// `volley_replay::phases::LogPhase`, the report's reading of the stored ones). Each
/// flattens it into its own serialised form, so the keys stand where they always did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// First second (inclusive).
    pub start_s: u64,
    /// Last second (inclusive).
    pub end_s: u64,
    /// Seconds of `start_s..=end_s` left out because a member started or stopped in them.
    #[serde(default)]
    pub left_out_s: Vec<u64>,
    /// Seconds the figures cover.
    #[serde(default)]
    pub seconds: u64,
    /// Requests in the covered seconds.
    pub requests: u64,
    /// Requests per second over the covered seconds (`None`: none covered).
    pub rps: Option<f64>,
    /// Mean response (or logged request) time, ms (`None`: no time recorded).
    pub mean_ms: Option<f64>,
    /// 99th percentile of the same time, ms.
    pub p99_ms: Option<f64>,
}

impl Figures {
    /// The figures of cut `c`: `seconds` covered holding `requests`, and the latency
    /// figures (ms) of those requests; the rate is derived here, once.
    pub fn new(
        c: Cut,
        seconds: u64,
        requests: u64,
        mean_ms: Option<f64>,
        p99_ms: Option<f64>,
    ) -> Figures {
        Figures {
            start_s: c.start_s,
            end_s: c.end_s,
            left_out_s: c.left_out_s,
            seconds,
            requests,
            rps: (seconds > 0).then(|| requests as f64 / seconds as f64),
            mean_ms,
            p99_ms,
        }
    }
}

/// Cuts the members' active spans `(first second, last second)` into phases; seconds
/// with no member active belong to none.
pub fn cut(spans: &[(u64, u64)]) -> Vec<Cut> {
    let mut cuts: BTreeSet<u64> = BTreeSet::new();
    let mut partial: BTreeSet<u64> = BTreeSet::new();
    for &(f, l) in spans {
        cuts.insert(f);
        cuts.insert(l + 1);
        partial.insert(f);
        partial.insert(l);
    }
    let cuts: Vec<u64> = cuts.into_iter().collect();
    cuts.windows(2)
        .filter_map(|w| {
            let (start_s, end_s) = (w[0], w[1] - 1);
            let members: Vec<usize> = spans
                .iter()
                .enumerate()
                .filter(|(_, &(f, l))| f <= start_s && end_s <= l)
                .map(|(i, _)| i)
                .collect();
            (!members.is_empty()).then(|| Cut {
                members,
                start_s,
                end_s,
                left_out_s: partial.range(start_s..=end_s).copied().collect(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staggered_members_give_1_2_3_2_1_with_their_edges_left_out() {
        let cuts = cut(&[(0, 9), (2, 11), (4, 13)]);
        let shape: Vec<(Vec<usize>, u64, u64, Vec<u64>)> = cuts
            .into_iter()
            .map(|c| (c.members, c.start_s, c.end_s, c.left_out_s))
            .collect();
        assert_eq!(
            shape,
            [
                (vec![0], 0, 1, vec![0]),
                (vec![0, 1], 2, 3, vec![2]),
                (vec![0, 1, 2], 4, 9, vec![4, 9]),
                (vec![1, 2], 10, 11, vec![11]),
                (vec![2], 12, 13, vec![13]),
            ]
        );
    }

    #[test]
    fn a_gap_with_nobody_active_is_no_phase() {
        let cuts = cut(&[(0, 1), (5, 6)]);
        let spans: Vec<(u64, u64)> = cuts.iter().map(|c| (c.start_s, c.end_s)).collect();
        assert_eq!(spans, [(0, 1), (5, 6)]);
        assert!(cut(&[]).is_empty());
        assert_eq!(cut(&[(3, 3)])[0].left_out_s, [3]);
    }
}
