//! Polling for a reply briefly before sleeping, and the CPU that costs, kept apart.
//!
//! Why: a worker asleep in `epoll_wait` is woken by the server's reply, and the server
//! pays for that wake-up: on loopback or in a guest the reply's send runs
//! `try_to_wake_up` and sends an inter-processor interrupt to the client's core, CPU
//! charged to the server per request. At saturation volley's worker slept about once
//! per ten requests, httperf (`--hog`, polling all the time) never, and the same
//! lighttpd paid ~1.1-1.2x the CPU per request under volley (issue 29). A worker that
//! polls without blocking for a few tens of microseconds before it sleeps, while
//! requests are in flight, is usually still polling when the reply lands: no wake-up.
//! Linux's own busy polling (`SO_BUSY_POLL`, epoll's `busy_poll_usecs`) is the same
//! idea for NIC queues; it does nothing for loopback, which has no NAPI queue, so the
//! engine does it itself. A real client can do this: it needs nothing from the server.
//!
//! The poll yields the core between its checks (`sched_yield`), so a server or any
//! other task ready on the same core runs first: it takes only time nobody else wants.
//! The price is CPU that is waiting, not working. It is counted ([`busy_wait_ns`]) so
//! that the generator's own-CPU figures used to judge it (`generator-bound` when a
//! closed loop used >= 90% of its cores) leave it out: a closed loop polling through
//! the gaps between a fast server's replies is not busy. The poll is also given up
//! where it does not pay: after [`MISSES_TO_BACK_OFF`] polls in a row that found
//! nothing (a slow server), the worker sleeps at once, and tries polling again only
//! every [`RETRY_EVERY`] sleeps, so a server answering every few milliseconds costs a
//! few polls a second, not one per request.
//!
//! The policy lives here once ([`poll_then_sleep`]); each I/O path only says how to
//! look without sleeping and how to sleep: epoll or `ppoll` with a zero or a real
//! timeout (a zero-timeout `ppoll` also leaves no entry on any socket: the server's
//! replies run no callback of ours while we poll), io_uring by peeking at its
//! completions (no system call while nothing arrived) or waiting in its ring.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The longest a worker polls before it sleeps. Replies on loopback or a LAN usually
/// follow within tens of microseconds; a poll beyond that mostly waits for a server
/// that is slower than the window anyway.
pub(crate) const WINDOW_NS: u64 = 50_000;
/// Polls in a row that ended in sleep after which polling stops paying.
pub(crate) const MISSES_TO_BACK_OFF: u32 = 4;
/// While backed off, one sleep in this many polls first, to notice a faster server.
pub(crate) const RETRY_EVERY: u32 = 64;

/// Nanoseconds all workers of this process spent polling before sleeping (whether the
/// poll found an event or not): waiting for the server, with the CPU busy.
static BUSY_WAIT_NS: AtomicU64 = AtomicU64::new(0);

/// CPU time this process's workers spent polling for replies instead of sleeping,
/// since it started, in ns. Subtract it from the process CPU time to get the CPU the
/// generator needed (what `generator-bound` judges); a counter, read twice for a span.
pub fn busy_wait_ns() -> u64 {
    BUSY_WAIT_NS.load(Ordering::Relaxed)
}

/// Adds `ns` of polling to the process's count.
pub(crate) fn add_busy_wait(ns: u64) {
    if ns > 0 {
        BUSY_WAIT_NS.fetch_add(ns, Ordering::Relaxed);
    }
}

/// One worker's choice of how long to poll before each sleep.
#[derive(Debug, Default)]
pub(crate) struct PollPolicy {
    /// Polls in a row that found nothing within the window.
    misses: u32,
    /// Sleeps without polling since the policy backed off.
    skipped: u32,
}

impl PollPolicy {
    /// How long to poll before sleeping with `in_flight` requests on the wire: nothing
    /// is coming when none is; else the window, unless polling has stopped paying.
    pub(crate) fn window_ns(&mut self, in_flight: usize) -> u64 {
        if in_flight == 0 {
            return 0;
        }
        if self.misses < MISSES_TO_BACK_OFF {
            return WINDOW_NS;
        }
        self.skipped += 1;
        if self.skipped >= RETRY_EVERY {
            self.skipped = 0;
            return WINDOW_NS;
        }
        0
    }

    /// A poll of the window ended: `found` an event, or found none and slept.
    pub(crate) fn outcome(&mut self, found: bool) {
        if found {
            self.misses = 0;
            self.skipped = 0;
        } else {
            self.misses = self.misses.saturating_add(1);
        }
    }
}

/// The longest one look (a yield and a zero-timeout poll, a few microseconds) can take
/// while this thread keeps its CPU. A look that took longer was off the CPU for most
/// of it: the yield ran someone else, or a CPU quota on volley's cgroup throttled it.
const LOOK_ON_CPU_NS: u64 = 20_000;

/// The part of one look's `elapsed` ns that was this thread polling: all of it, or
/// none when it was descheduled ([`LOOK_ON_CPU_NS`]). The count is subtracted from the
/// process's CPU time, so counting others' time (or throttled time) would leave the
/// generator less CPU than it used: under a 20% quota a closed loop read "used 0.00
/// of 0.20 core(s)". Reading the thread's CPU clock instead would cost two system
/// calls per look on the hot path.
fn polling_ns(elapsed: u64) -> u64 {
    match elapsed <= LOOK_ON_CPU_NS {
        true => elapsed,
        false => 0,
    }
}

/// Waits up to `timeout` (from `now`, on `clock`) through `wait`, which looks without
/// sleeping when given `Duration::ZERO` and else sleeps up to the duration it is given,
/// and says whether it found anything. With `in_flight` requests on the wire the first
/// look is followed by looks (the core yielded between them) for up to the policy's
/// window, and only then by the sleep for the rest of `timeout`: a reply that lands
/// within the window costs the server no wake-up of this thread.
///
/// Returns the ns spent looking after the first look (counted process-wide as well,
/// [`busy_wait_ns`]) when a window was polled, `None` when the wait went straight to
/// sleep or found something at once.
pub(crate) fn poll_then_sleep(
    policy: &mut PollPolicy,
    in_flight: usize,
    now: u64,
    timeout: Duration,
    clock: impl Fn() -> u64,
    mut wait: impl FnMut(Duration) -> io::Result<bool>,
) -> io::Result<Option<u64>> {
    let timeout_ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
    let window_ns = match timeout_ns {
        0 => 0,
        _ => policy.window_ns(in_flight),
    };
    if window_ns == 0 {
        wait(timeout)?;
        return Ok(None);
    }
    // The first look is the one the loop always makes; only what follows it is waiting.
    if wait(Duration::ZERO)? {
        return Ok(None);
    }
    let spin_end = now.saturating_add(window_ns.min(timeout_ns));
    let mut polled_at = clock();
    let mut busy_ns = 0;
    let found = loop {
        if polled_at >= spin_end {
            break false;
        }
        // Whoever else is ready on this core runs first (a server sharing it, above
        // all): the poll only takes time nobody else wants.
        std::thread::yield_now();
        let found = wait(Duration::ZERO)?;
        let looked_at = polled_at;
        polled_at = clock();
        busy_ns += polling_ns(polled_at - looked_at);
        if found {
            break true;
        }
    };
    add_busy_wait(busy_ns);
    policy.outcome(found);
    if !found {
        let left = timeout_ns.saturating_sub(polled_at.saturating_sub(now));
        wait(Duration::from_nanos(left))?;
    }
    Ok(Some(busy_ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};

    /// One wait of 5 ms with 4 requests in flight, on a clock that each look moves on
    /// by 10 us, where look number `hit` (1-based; 0: none) finds a reply. Returns the
    /// timeouts the looks were given and the busy time reported.
    fn scripted(hit: usize) -> (Vec<Duration>, Option<u64>) {
        let (clock, given) = (Cell::new(0u64), RefCell::new(Vec::new()));
        let mut p = PollPolicy::default();
        let busy = poll_then_sleep(
            &mut p,
            4,
            0,
            Duration::from_millis(5),
            || clock.get(),
            |t| {
                given.borrow_mut().push(t);
                clock.set(clock.get() + 10_000);
                Ok(given.borrow().len() == hit)
            },
        )
        .expect("wait");
        (given.into_inner(), busy)
    }

    #[test]
    fn a_reply_within_the_window_ends_the_poll_without_sleeping() {
        // The first look, then looks until the third found the reply: no sleep.
        assert_eq!(scripted(3), (vec![Duration::ZERO; 3], Some(20_000)));
    }

    /// A look during which the thread was off its CPU (the yield ran someone else, or
    /// a quota throttled it) is not counted as polling: only the looks that kept the
    /// CPU are.
    #[test]
    fn time_off_the_cpu_during_a_poll_is_not_counted_as_polling() {
        let (clock, looks) = (Cell::new(0u64), Cell::new(0usize));
        let mut p = PollPolicy::default();
        let busy = poll_then_sleep(
            &mut p,
            4,
            0,
            Duration::from_millis(5),
            || clock.get(),
            |_| {
                looks.set(looks.get() + 1);
                // Looks of 5 us, but the third one came back 30 us later (descheduled).
                let step = if looks.get() == 3 { 30_000 } else { 5_000 };
                clock.set(clock.get() + step);
                Ok(looks.get() == 5)
            },
        )
        .expect("wait");
        // Looks 2, 4 and 5 count (5 us each); look 3 took 30 us off the CPU.
        assert_eq!(busy, Some(15_000));
        assert_eq!(polling_ns(LOOK_ON_CPU_NS), LOOK_ON_CPU_NS);
        assert_eq!(polling_ns(LOOK_ON_CPU_NS + 1), 0);
    }

    #[test]
    fn a_window_that_finds_nothing_sleeps_for_the_rest_of_the_timeout() {
        let (given, busy) = scripted(0);
        let (sleep, looks) = given.split_last().expect("looks");
        assert!(looks.iter().all(|t| t.is_zero()));
        // A look every 10 us until the 50 us window from `now` was over (the first
        // look's 10 us is not waiting), then the sleep for the rest of the 5 ms.
        assert_eq!(looks.len(), 5);
        assert_eq!(*sleep, Duration::from_nanos(5_000_000 - 50_000));
        assert_eq!(busy, Some(40_000));
    }

    #[test]
    fn nothing_in_flight_or_no_time_to_wait_goes_straight_to_the_wait() {
        for (in_flight, timeout) in [(0, Duration::from_millis(5)), (4, Duration::ZERO)] {
            let mut given = Vec::new();
            let mut p = PollPolicy::default();
            let busy = poll_then_sleep(
                &mut p,
                in_flight,
                0,
                timeout,
                || 0,
                |t| {
                    given.push(t);
                    Ok(false)
                },
            )
            .expect("wait");
            assert_eq!(
                (given, busy),
                (vec![timeout], None),
                "{in_flight} in flight"
            );
        }
    }

    #[test]
    fn nothing_in_flight_means_no_poll() {
        let mut p = PollPolicy::default();
        assert_eq!(p.window_ns(0), 0);
        assert_eq!(p.window_ns(1), WINDOW_NS);
    }

    #[test]
    fn polls_that_keep_missing_stop_and_are_retried_now_and_then() {
        let mut p = PollPolicy::default();
        for _ in 0..MISSES_TO_BACK_OFF {
            assert_eq!(p.window_ns(64), WINDOW_NS);
            p.outcome(false);
        }
        // Backed off: the next RETRY_EVERY - 1 sleeps come without a poll, then one poll.
        let windows: Vec<u64> = (0..RETRY_EVERY).map(|_| p.window_ns(64)).collect();
        assert!(windows[..RETRY_EVERY as usize - 1].iter().all(|&w| w == 0));
        assert_eq!(windows[RETRY_EVERY as usize - 1], WINDOW_NS);
        // That poll finds a reply: polling pays again, at once.
        p.outcome(true);
        assert_eq!(p.window_ns(64), WINDOW_NS);
    }

    #[test]
    fn one_miss_among_hits_does_not_back_off() {
        let mut p = PollPolicy::default();
        for i in 0..100 {
            assert_eq!(p.window_ns(8), WINDOW_NS, "poll {i}");
            p.outcome(i % 3 != 0);
        }
    }

    #[test]
    fn the_busy_wait_count_only_grows() {
        let before = busy_wait_ns();
        add_busy_wait(0);
        add_busy_wait(1_500);
        assert!(busy_wait_ns() >= before + 1_500);
    }
}
