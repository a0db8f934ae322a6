//! Live counters for a progress line, read by the CLI while workers run.
//!
//! Workers keep private counts and publish them in batches (every few milliseconds), so
//! the hot path touches no shared cache line per request; each counter sits on its own
//! cache line so publishing from several workers does not false-share with readers.
//!
//! Besides counts, workers publish the time integral of their in-flight count
//! ([`InFlightIntegral`]): the mean number of requests outstanding over any window is
//! then (integral at its end - integral at its start) / its length, exactly, however
//! rarely the counters are read. Snapshots of an instantaneous count cannot give that:
//! workers publish right after handling completions, so at low rates the snapshots were
//! biased toward "nothing outstanding" (a 94.5% Little's-law gap at 250 req/s).

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
    in_flight_integral_ns: Padded<AtomicU64>,
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
    /// Sum over workers of the time integral of the in-flight count (requests that
    /// hold a connection or a stream: connecting for it, writing, or waiting for its
    /// response), in request-nanoseconds, up to each worker's last publication.
    pub in_flight_integral_ns: u64,
}

impl LiveSnapshot {
    /// Mean requests in flight between `earlier` and `self`, over `window` (the
    /// window the two snapshots bound; `None` when it is empty). Little's L, measured
    /// independently of the latency histograms.
    pub fn mean_in_flight_since(&self, earlier: &LiveSnapshot, window_ns: u64) -> Option<f64> {
        (window_ns > 0).then(|| {
            self.in_flight_integral_ns
                .saturating_sub(earlier.in_flight_integral_ns) as f64
                / window_ns as f64
        })
    }
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
            in_flight_integral_ns: self.in_flight_integral_ns.0.load(Ordering::Relaxed),
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

    /// Adds a worker's in-flight integral accumulated since its last publication.
    pub(crate) fn publish_in_flight(&self, integral_ns: u64) {
        if integral_ns != 0 {
            self.in_flight_integral_ns
                .0
                .fetch_add(integral_ns, Ordering::Relaxed);
        }
    }

    /// Records the global open-connection count after a change.
    pub(crate) fn set_open(&self, open: u32) {
        self.open_connections.0.store(open, Ordering::Relaxed);
    }
}

/// One worker's time integral of its in-flight count: at every change of the count,
/// the old count times the time since the previous change is added (a left Riemann sum
/// of a step function, which is exact for a step function).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct InFlightIntegral {
    count: u64,
    last_ns: u64,
    integral_ns: u64,
    published_ns: u64,
}

impl InFlightIntegral {
    /// The count is `count` from `now_ns` on. Call after every change (several changes
    /// at one instant may share one call). An instant earlier than the last one (two
    /// clock reads taken out of order) adds nothing rather than wrapping.
    pub fn set(&mut self, now_ns: u64, count: u64) {
        let dt = now_ns.saturating_sub(self.last_ns);
        self.integral_ns = self
            .integral_ns
            .saturating_add(self.count.saturating_mul(dt));
        self.last_ns = self.last_ns.max(now_ns);
        self.count = count;
    }

    /// The integral from the start to `now_ns`.
    pub fn at(&mut self, now_ns: u64) -> u64 {
        self.set(now_ns, self.count);
        self.integral_ns
    }

    /// The part of the integral up to `now_ns` not handed out before: what the worker
    /// adds to [`Live`] when it publishes.
    pub fn unpublished(&mut self, now_ns: u64) -> u64 {
        let total = self.at(now_ns);
        let new = total - self.published_ns;
        self.published_ns = total;
        new
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
                open_connections: 7,
                in_flight_integral_ns: 0,
            }
        );
    }

    #[test]
    fn integral_of_a_known_step_function() {
        // Count: 0 on [0,10), 2 on [10,30), 5 on [30,31), 1 on [31,50), read at 50 and 60.
        // Integral at 50: 0*10 + 2*20 + 5*1 + 1*19 = 64; at 60: 64 + 1*10 = 74.
        let mut i = InFlightIntegral::default();
        i.set(10, 1);
        i.set(10, 2); // two changes at one instant
        i.set(30, 5);
        i.set(31, 1);
        assert_eq!(i.at(50), 64);
        assert_eq!(i.unpublished(50), 64);
        assert_eq!(i.unpublished(60), 10);
        assert_eq!(i.unpublished(60), 0);
        // A clock read out of order adds nothing and does not move time backwards.
        i.set(55, 0);
        assert_eq!(i.at(70), 74);
    }

    #[test]
    fn mean_in_flight_is_the_integral_difference_over_the_window() {
        let live = Live::new();
        let start = live.snapshot();
        live.publish_in_flight(3_000);
        live.publish_in_flight(1_000);
        let end = live.snapshot();
        assert_eq!(end.mean_in_flight_since(&start, 1_000), Some(4.0));
        assert_eq!(end.mean_in_flight_since(&start, 0), None);
    }
}
