//! Little's law as a consistency check on every step.
//!
//! Place in the flow: the study hands over a step's observed concurrency, throughput
//! and mean latency; the report shows the gap beside the step's figures.
//!
//! The in-flight figure must be a *time average* observed on its own, not a snapshot
//! (sent minus done at a second's end is ~0 for short requests) and not
//! sum(latencies) / duration (that is lambda x W from the same samples, so the check
//! would always pass). volley-study passes a closed loop's configured concurrency
//! (every connection always has a request outstanding) and an open loop's mean of the
//! engine's outstanding-request gauge.
//!
//! In a steady state, L = lambda x W: the mean number of requests in the system equals
//! the throughput times the mean time each spends in it. The three figures are measured
//! independently (a gauge, a counter and a histogram), so a gap above 5% means one of
//! them missed something (uncounted timeouts, dropped samples) or the step never reached
//! a steady state. The two sides must describe the same "system": in-flight counted from
//! `sent` pairs with service time; counting from `intended` (including requests queued in
//! the generator) pairs with response time.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The gap above which a step is flagged (5%, docs/methodology.md).
pub const GAP_LIMIT_SHARE: f64 = 0.05;

/// Why the check could not be made.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum LittleError {
    /// A figure was negative, NaN or infinite.
    #[error("Little's law check needs finite, non-negative figures (got {0})")]
    InvalidFigure(&'static str),
}

/// The outcome of the check.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LittleCheck {
    /// Throughput x mean latency: the in-flight count the law predicts.
    pub expected_in_flight: f64,
    /// The in-flight count measured.
    pub observed_in_flight: f64,
    /// |observed - expected| / expected; 0 when both are 0, infinite when only the
    /// prediction is 0.
    pub relative_gap: f64,
    /// True when `relative_gap` exceeds [`GAP_LIMIT_SHARE`].
    pub flagged: bool,
}

/// Checks L = lambda x W for one step.
pub fn check(
    mean_in_flight: f64,
    throughput_rps: f64,
    mean_latency: Duration,
) -> Result<LittleCheck, LittleError> {
    if !(mean_in_flight.is_finite() && mean_in_flight >= 0.0) {
        return Err(LittleError::InvalidFigure("mean in-flight"));
    }
    if !(throughput_rps.is_finite() && throughput_rps >= 0.0) {
        return Err(LittleError::InvalidFigure("throughput"));
    }
    let expected = throughput_rps * mean_latency.as_secs_f64();
    let gap = if expected > 0.0 {
        (mean_in_flight - expected).abs() / expected
    } else if mean_in_flight == 0.0 {
        0.0
    } else {
        f64::INFINITY
    };
    Ok(LittleCheck {
        expected_in_flight: expected,
        observed_in_flight: mean_in_flight,
        relative_gap: gap,
        flagged: gap > GAP_LIMIT_SHARE,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consistent_step_passes() {
        // 2000 rps x 5 ms = 10 in flight.
        let c = check(10.2, 2000.0, Duration::from_millis(5)).unwrap();
        assert!((c.expected_in_flight - 10.0).abs() < 1e-9);
        assert!((c.relative_gap - 0.02).abs() < 1e-9);
        assert!(!c.flagged);
    }

    #[test]
    fn gap_above_five_percent_is_flagged_both_ways() {
        assert!(
            check(10.6, 2000.0, Duration::from_millis(5))
                .unwrap()
                .flagged
        );
        assert!(
            check(9.4, 2000.0, Duration::from_millis(5))
                .unwrap()
                .flagged
        );
        assert!(
            !check(10.4, 2000.0, Duration::from_millis(5))
                .unwrap()
                .flagged
        );
    }

    #[test]
    fn degenerate_and_invalid_figures() {
        let idle = check(0.0, 0.0, Duration::ZERO).unwrap();
        assert_eq!((idle.relative_gap, idle.flagged), (0.0, false));
        let stuck = check(3.0, 0.0, Duration::from_millis(5)).unwrap();
        assert!(stuck.relative_gap.is_infinite() && stuck.flagged);
        assert!(check(f64::NAN, 1.0, Duration::ZERO).is_err());
        assert!(check(1.0, -1.0, Duration::ZERO).is_err());
    }
}
