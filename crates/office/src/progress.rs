//! How far an office run is, as counters the caller may read from another thread (a
//! progress bar): the library only counts, it never draws.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// The phases of a run, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before anything: the OPTIONS probe.
    Starting,
    /// Each user's calendar found or made, emptied and filled (untimed).
    SetUp,
    /// A warm day's lead-in: every device's first sync and one poll interval of the
    /// day before the window (untimed; [`crate::day::Schedule::lead_in`]).
    LeadIn,
    /// The measured day, then each thread's audit of its users' calendars (untimed).
    Day,
    /// Done.
    Done,
}

impl Phase {
    const ALL: [Phase; 5] = [
        Phase::Starting,
        Phase::SetUp,
        Phase::LeadIn,
        Phase::Day,
        Phase::Done,
    ];

    /// A word for a progress line.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::SetUp => "set-up",
            Phase::LeadIn => "lead-in",
            Phase::Day => "day",
            Phase::Done => "done",
        }
    }
}

/// Shared counters: the phase, and how many of its units (users in set-up and audit,
/// actions in the lead-in and during the day) are done of how many.
#[derive(Debug, Default)]
pub struct Progress {
    phase: AtomicU8,
    done: AtomicU64,
    total: AtomicU64,
}

/// One reading of [`Progress`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgressSnapshot {
    /// The current phase.
    pub phase: Phase,
    /// Units done in it.
    pub done: u64,
    /// Units it has.
    pub total: u64,
}

impl Progress {
    /// Enters `phase` with `total` units, none done.
    pub(crate) fn enter(&self, phase: Phase, total: u64) {
        self.done.store(0, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
        let i = Phase::ALL.iter().position(|p| *p == phase).unwrap_or(0);
        self.phase.store(i as u8, Ordering::Release);
    }

    /// `n` more units in the current phase (each day thread adds its actions).
    pub(crate) fn add_total(&self, n: u64) {
        self.total.fetch_add(n, Ordering::Relaxed);
    }

    /// One more unit done.
    pub(crate) fn step(&self) {
        self.done.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> ProgressSnapshot {
        let phase =
            Phase::ALL[usize::from(self.phase.load(Ordering::Acquire)).min(Phase::ALL.len() - 1)];
        ProgressSnapshot {
            phase,
            done: self.done.load(Ordering::Relaxed),
            total: self.total.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_reset_their_counts() {
        let p = Progress::default();
        assert_eq!(p.snapshot().phase, Phase::Starting);
        p.enter(Phase::SetUp, 3);
        p.step();
        assert_eq!(
            p.snapshot(),
            ProgressSnapshot {
                phase: Phase::SetUp,
                done: 1,
                total: 3
            }
        );
        p.enter(Phase::Day, 10);
        assert_eq!((p.snapshot().phase, p.snapshot().done), (Phase::Day, 0));
    }
}
