//! Live counters for a progress line, read by the CLI while workers run.
//!
//! Workers keep private counts and publish them in batches (every few milliseconds), so
//! the hot path touches no shared cache line per request; each counter sits on its own
//! cache line so publishing from several workers does not false-share with readers.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// One atomic on its own 64-byte line.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Padded<T>(T);

/// Shared, cheaply updated progress counters. Create one with [`Live::new`], pass it to
/// [`crate::run`], and call [`Live::snapshot`] from another thread.
#[derive(Debug, Default)]
pub struct Live {
    started: Padded<AtomicU64>,
    done: Padded<AtomicU64>,
    errors: Padded<AtomicU64>,
    open_connections: Padded<AtomicU32>,
}

/// A point-in-time copy of [`Live`]. Counts lag the truth by at most one publishing
/// interval (about 10 ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LiveSnapshot {
    /// Requests started so far.
    pub started: u64,
    /// Requests finished so far (successfully or not).
    pub done: u64,
    /// Finished requests that carried an error.
    pub errors: u64,
    /// Connections open right now, across all workers.
    pub open_connections: u32,
}

impl Live {
    /// All counters at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Current values. Relaxed loads: the four numbers are not a consistent cut, which a
    /// progress line does not need.
    pub fn snapshot(&self) -> LiveSnapshot {
        LiveSnapshot {
            started: self.started.0.load(Ordering::Relaxed),
            done: self.done.0.load(Ordering::Relaxed),
            errors: self.errors.0.load(Ordering::Relaxed),
            open_connections: self.open_connections.0.load(Ordering::Relaxed),
        }
    }

    /// Adds a worker's batch of counts.
    pub(crate) fn publish(&self, started: u64, done: u64, errors: u64) {
        if started != 0 {
            self.started.0.fetch_add(started, Ordering::Relaxed);
        }
        if done != 0 {
            self.done.0.fetch_add(done, Ordering::Relaxed);
        }
        if errors != 0 {
            self.errors.0.fetch_add(errors, Ordering::Relaxed);
        }
    }

    /// Records the global open-connection count after a change.
    pub(crate) fn set_open(&self, open: u32) {
        self.open_connections.0.store(open, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_accumulates_and_snapshot_reads() {
        let live = Live::new();
        live.publish(3, 2, 1);
        live.publish(1, 0, 0);
        live.set_open(7);
        assert_eq!(
            live.snapshot(),
            LiveSnapshot {
                started: 4,
                done: 2,
                errors: 1,
                open_connections: 7
            }
        );
    }
}
