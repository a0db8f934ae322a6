//! Clock offsets between the coordinator and an agent, NTP-style, and the agent's start
//! deadline.
//!
//! Place in the flow: after the agents are ready and before the assignment. Each probe
//! has four wall-clock stamps in nanoseconds since the Unix epoch: `t0` the coordinator
//! sends, `t1` the agent receives, `t2` the agent replies, `t3` the coordinator
//! receives. Then
//!
//! ```text
//! rtt    = (t3 - t0) - (t2 - t1)
//! offset = ((t1 - t0) + (t2 - t3)) / 2      (agent clock - coordinator clock)
//! ```
//!
//! The error of `offset` is at most `rtt / 2`, so of several probes the one with the
//! lowest round trip wins. The agent then turns the coordinator's T0 into its own
//! monotonic deadline (wall clocks may step; `Instant` does not).

use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// One probe's four stamps, nanoseconds since the Unix epoch on each side's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    /// Coordinator sends.
    pub t0: i64,
    /// Agent receives.
    pub t1: i64,
    /// Agent replies.
    pub t2: i64,
    /// Coordinator receives.
    pub t3: i64,
}

impl Probe {
    /// Network round trip, the agent's own handling time taken out.
    pub fn rtt_ns(&self) -> i64 {
        (self.t3 - self.t0) - (self.t2 - self.t1)
    }

    /// Agent clock minus coordinator clock.
    pub fn offset_ns(&self) -> i64 {
        ((self.t1 - self.t0) + (self.t2 - self.t3)) / 2
    }
}

/// The estimate kept for one agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockOffset {
    /// Agent clock minus coordinator clock, nanoseconds.
    pub offset_ns: i64,
    /// Round trip of the probe it came from, nanoseconds (the offset's error is at most
    /// half of it).
    pub rtt_ns: i64,
    /// Probes that answered.
    pub probes: u32,
}

/// The offset from the probe with the lowest round trip; `None` without probes. Probes
/// with a negative round trip (a clock stepped mid-probe) are discarded.
pub fn best_offset(probes: &[Probe]) -> Option<ClockOffset> {
    let best = probes
        .iter()
        .filter(|p| p.rtt_ns() >= 0)
        .min_by_key(|p| p.rtt_ns())?;
    Some(ClockOffset {
        offset_ns: best.offset_ns(),
        rtt_ns: best.rtt_ns(),
        probes: probes.len() as u32,
    })
}

/// Wall clock now, nanoseconds since the Unix epoch (0 before 1970, which no host has).
pub fn wall_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Where an agent's load starts, on its own monotonic clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    /// When to start.
    pub at: Instant,
    /// How much later than asked that is (the assignment arrived after its start
    /// instant): zero when on time.
    pub late: Duration,
}

/// Turns the coordinator's start instant `t0_ns` (its clock) plus this agent's
/// `offset_ns` and its own `delay` into a deadline on this agent's monotonic clock,
/// given a simultaneous reading of its wall (`now_wall_ns`) and monotonic (`now`)
/// clocks. A deadline already past starts now and says how late.
pub fn local_deadline(
    t0_ns: i64,
    offset_ns: i64,
    delay: Duration,
    now_wall_ns: i64,
    now: Instant,
) -> Deadline {
    let start_wall = t0_ns
        .saturating_add(offset_ns)
        .saturating_add(delay.as_nanos() as i64);
    let ahead_ns = start_wall.saturating_sub(now_wall_ns);
    if ahead_ns >= 0 {
        Deadline {
            at: now + Duration::from_nanos(ahead_ns as u64),
            late: Duration::ZERO,
        }
    } else {
        Deadline {
            at: now,
            late: Duration::from_nanos(ahead_ns.unsigned_abs()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    /// A probe against an agent whose clock is `off` ahead, with one-way delays `up`
    /// and `down` and `hold` spent in the agent.
    fn probe(t0: i64, off: i64, up: i64, hold: i64, down: i64) -> Probe {
        let t1 = t0 + up + off;
        let t2 = t1 + hold;
        let t3 = t2 - off + down;
        Probe { t0, t1, t2, t3 }
    }

    #[test]
    fn symmetric_paths_give_the_exact_offset() {
        let cases = [(0, 1), (250 * MS, 1), (-3_000 * MS, 2), (7, 5)];
        for (off, one_way_ms) in cases {
            let p = probe(1_000 * MS, off, one_way_ms * MS, MS / 10, one_way_ms * MS);
            assert_eq!(p.offset_ns(), off);
            assert_eq!(p.rtt_ns(), 2 * one_way_ms * MS);
        }
    }

    #[test]
    fn lowest_round_trip_wins() {
        let off = 40 * MS;
        let probes = [
            probe(0, off, 9 * MS, MS, MS), // asymmetric, rtt 10 ms: off by 4 ms
            probe(100 * MS, off, MS / 2, MS, MS / 2), // rtt 1 ms, symmetric: exact
            probe(200 * MS, off, 3 * MS, MS, 5 * MS), // rtt 8 ms
        ];
        let best = best_offset(&probes).unwrap();
        assert_eq!(
            best,
            ClockOffset {
                offset_ns: off,
                rtt_ns: MS,
                probes: 3
            }
        );
        assert_eq!(probes[0].offset_ns(), off + 4 * MS);
    }

    #[test]
    fn no_usable_probe_is_none() {
        assert_eq!(best_offset(&[]), None);
        let stepped = Probe {
            t0: 10,
            t1: 5,
            t2: 100,
            t3: 20,
        };
        assert!(stepped.rtt_ns() < 0);
        assert_eq!(best_offset(&[stepped]), None);
    }

    #[test]
    fn deadline_from_t0_offset_and_delay() {
        let now = Instant::now();
        let wall = 10_000 * MS;
        let ms = |v: u64| Duration::from_millis(v);
        // (t0, offset, delay, want ahead, want late)
        let cases = [
            (wall + 500 * MS, 0, ms(0), ms(500), ms(0)),
            (wall + 500 * MS, 200 * MS, ms(1_000), ms(1_700), ms(0)),
            (wall + 500 * MS, -200 * MS, ms(0), ms(300), ms(0)),
            (wall - 300 * MS, 0, ms(100), ms(0), ms(200)),
            (wall, 0, ms(0), ms(0), ms(0)),
        ];
        for (t0, off, delay, ahead, late) in cases {
            let d = local_deadline(t0, off, delay, wall, now);
            assert_eq!(d.at - now, ahead, "t0={t0} off={off} delay={delay:?}");
            assert_eq!(d.late, late);
        }
    }
}
