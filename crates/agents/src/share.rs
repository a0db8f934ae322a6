//! Exact shares of one study's load, in k6's execution-segment manner.
//!
//! Place in the flow: the coordinator's first step. Agent `i` of `n` owns the segment
//! `[i/n, (i+1)/n)` of the whole; its share of a total `T` is
//! `floor(T * (i+1)/n) - floor(T * i/n)`. The shares telescope, so they add up to `T`
//! exactly for any `n`, and equal segments differ by at most one unit. Rates are split
//! in thousandths of a request per second so fractional rates stay exact too.

use crate::AgentsError;
use serde::{Deserialize, Serialize};

/// The whole load of one run, before splitting.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Whole {
    /// Requests to send in all, when the run is bounded by a count.
    pub requests: Option<u64>,
    /// Open-loop arrival rate in all, requests per second (`None`: closed loop).
    pub rate_rps: Option<f64>,
    /// Connections in all.
    pub connections: u64,
    /// How long every agent runs, when the run is bounded by time (not split).
    pub duration_ms: Option<u64>,
}

/// One agent's part of the whole.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Share {
    /// Which segment (0-based).
    pub index: u32,
    /// Of how many.
    pub of: u32,
    /// Requests this agent sends.
    pub requests: Option<u64>,
    /// Its rate in thousandths of a request per second (exact; see [`Share::rate_rps`]).
    pub rate_milli_rps: Option<u64>,
    /// Its connections.
    pub connections: u64,
    /// How long it runs.
    pub duration_ms: Option<u64>,
}

impl Share {
    /// The rate in requests per second.
    pub fn rate_rps(&self) -> Option<f64> {
        self.rate_milli_rps.map(|m| m as f64 / 1_000.0)
    }
}

/// `floor(total * num / den)` without overflow.
fn scale(total: u64, num: u64, den: u64) -> u64 {
    (u128::from(total) * u128::from(num) / u128::from(den)) as u64
}

/// Agent `index`'s part of `total` when the whole is cut into `of` equal segments.
pub fn segment(total: u64, index: u32, of: u32) -> u64 {
    let (i, n) = (u64::from(index), u64::from(of));
    scale(total, i + 1, n) - scale(total, i, n)
}

/// Splits `whole` into `n` exact shares. Every agent needs at least one connection, so
/// fewer connections than agents is an error; a request count below `n` leaves some
/// agents none, which is allowed (they then only measure their idle clock).
pub fn split(whole: &Whole, n: u32) -> Result<Vec<Share>, AgentsError> {
    if n == 0 {
        return Err(AgentsError::Share("no agents".into()));
    }
    if whole.connections < u64::from(n) {
        return Err(AgentsError::Share(format!(
            "{} connections cannot be shared by {n} agents (each needs one)",
            whole.connections
        )));
    }
    let rate_milli = match whole.rate_rps {
        Some(r) if !(r.is_finite() && r > 0.0) => {
            return Err(AgentsError::Share(format!("rate {r} is not positive")))
        }
        Some(r) => Some((r * 1_000.0).round() as u64),
        None => None,
    };
    Ok((0..n)
        .map(|i| Share {
            index: i,
            of: n,
            requests: whole.requests.map(|t| segment(t, i, n)),
            rate_milli_rps: rate_milli.map(|t| segment(t, i, n)),
            connections: segment(whole.connections, i, n),
            duration_ms: whole.duration_ms,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_add_up_exactly_and_differ_by_at_most_one() {
        for total in [
            0u64,
            1,
            2,
            7,
            10,
            99,
            100,
            5_000,
            60_000,
            1_000_003,
            u64::MAX / 3,
        ] {
            for n in 1..=17u32 {
                let parts: Vec<u64> = (0..n).map(|i| segment(total, i, n)).collect();
                assert_eq!(
                    parts.iter().map(|&p| u128::from(p)).sum::<u128>(),
                    u128::from(total),
                    "T={total} n={n}"
                );
                let (lo, hi) = (parts.iter().min().unwrap(), parts.iter().max().unwrap());
                assert!(hi - lo <= 1, "T={total} n={n}: {parts:?}");
            }
        }
    }

    #[test]
    fn table_of_known_splits() {
        let cases: [(u64, u32, &[u64]); 5] = [
            (10, 3, &[3, 3, 4]),
            (
                5_000,
                12,
                &[416, 417, 417, 416, 417, 417, 416, 417, 417, 416, 417, 417],
            ),
            (2, 4, &[0, 1, 0, 1]),
            (12, 4, &[3, 3, 3, 3]),
            (1, 1, &[1]),
        ];
        for (total, n, want) in cases {
            let got: Vec<u64> = (0..n).map(|i| segment(total, i, n)).collect();
            assert_eq!(got, want, "T={total} n={n}");
        }
    }

    #[test]
    fn split_shares_every_figure_exactly() {
        let whole = Whole {
            requests: Some(60_001),
            rate_rps: Some(1234.5),
            connections: 50,
            duration_ms: Some(10_000),
        };
        for n in 1..=12 {
            let shares = split(&whole, n).unwrap();
            assert_eq!(shares.len(), n as usize);
            assert_eq!(
                shares.iter().map(|s| s.requests.unwrap()).sum::<u64>(),
                60_001
            );
            assert_eq!(
                shares
                    .iter()
                    .map(|s| s.rate_milli_rps.unwrap())
                    .sum::<u64>(),
                1_234_500
            );
            assert_eq!(shares.iter().map(|s| s.connections).sum::<u64>(), 50);
            assert!(shares
                .iter()
                .all(|s| s.duration_ms == Some(10_000) && s.of == n));
        }
    }

    #[test]
    fn impossible_wholes_are_typed_errors() {
        let whole = Whole {
            requests: Some(10),
            rate_rps: None,
            connections: 2,
            duration_ms: None,
        };
        assert!(matches!(split(&whole, 0), Err(AgentsError::Share(_))));
        assert!(matches!(split(&whole, 3), Err(AgentsError::Share(_))));
        let bad_rate = Whole {
            rate_rps: Some(-1.0),
            connections: 3,
            ..whole
        };
        assert!(matches!(split(&bad_rate, 3), Err(AgentsError::Share(_))));
        let closed = split(
            &Whole {
                connections: 3,
                ..whole
            },
            3,
        )
        .unwrap();
        assert!(closed.iter().all(|s| s.rate_rps().is_none()));
    }
}
