//! A sub-millisecond wake-up for the open-loop pacer.
//!
//! epoll's timeout is whole milliseconds (mio rounds up), far coarser than the send-lag
//! target (p99 <= 100 us). The first version therefore busy-polled epoll for the last
//! millisecond before every arrival, which at 500 req/s or more kept a core 100% busy
//! whatever the rate. A `CLOCK_MONOTONIC` timerfd in the same epoll set wakes the loop
//! at the arrival with microsecond precision instead, and the loop only busy-polls the
//! last [`EARLY_WAKE_NS`] (the wake-up latency of a sleeping thread) before the send
//! instant: at most that much CPU per inter-arrival gap.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};

/// The timer wakes the loop this long before the next arrival; the loop busy-polls
/// from there on. About one scheduler wake-up latency of an idle core.
pub(crate) const EARLY_WAKE_NS: u64 = 100_000;

/// A one-shot monotonic timer whose expiry is a readable event in the worker's poll.
pub(crate) struct ArrivalTimer {
    fd: OwnedFd,
    /// Nanoseconds-since-run-start instant the timer is armed for, so the same instant
    /// is not re-armed on every loop turn (one `timerfd_settime` per distinct arrival).
    armed_for_ns: Option<u64>,
}

impl ArrivalTimer {
    /// Creates the timer and registers it under `token` (edge-triggered, as mio does:
    /// re-arming resets the expiry count, so each expiry raises a new edge without the
    /// count ever being read).
    pub(crate) fn new(registry: &Registry, token: Token) -> io::Result<Self> {
        // SAFETY: timerfd_create has no memory-safety preconditions; a negative return
        // is an error, otherwise the fd is new and owned by nobody else.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh, valid descriptor that only this value will close.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        registry.register(&mut SourceFd(&fd.as_raw_fd()), token, Interest::READABLE)?;
        Ok(ArrivalTimer {
            fd,
            armed_for_ns: None,
        })
    }

    /// Arms the timer to fire `in_ns` from now (`in_ns` > 0), for the arrival at
    /// `at_ns` (run time); a no-op when it is already armed for that arrival.
    pub(crate) fn arm(&mut self, at_ns: u64, in_ns: u64) -> io::Result<()> {
        if self.armed_for_ns == Some(at_ns) {
            return Ok(());
        }
        // A zero it_value would disarm the timer instead.
        let in_ns = in_ns.max(1);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (in_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (in_ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: the fd is a valid timerfd, `spec` outlives the call, and a null old
        // value is allowed.
        let rc =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        self.armed_for_ns = Some(at_ns);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll};
    use std::time::Duration;

    #[test]
    fn expiry_is_an_event_and_rearming_raises_a_new_one() {
        let mut poll = Poll::new().expect("poll");
        let mut timer = ArrivalTimer::new(poll.registry(), Token(7)).expect("timer");
        let mut events = Events::with_capacity(4);
        for round in 0..3u64 {
            timer.arm(round, 1_000).expect("arm");
            // Bounded wait: the timer fires after 1 us, the poll gives up after 5 s.
            poll.poll(&mut events, Some(Duration::from_secs(5)))
                .expect("poll");
            let tokens: Vec<Token> = events.iter().map(|e| e.token()).collect();
            assert_eq!(tokens, vec![Token(7)], "round {round}");
        }
    }
}

/// How long a worker's event loop may sleep in epoll, shared by the HTTP/1.1 and HTTP/2
/// workers (a pure function of the loop's deadlines, so it is table-tested without a
/// clock).
///
/// The loop must wake for the next housekeeping pass, the end of the run and, in an open
/// loop, the next arrival (`wait_ns`, `None` in a closed loop). epoll's timeout has
/// millisecond granularity, so when an arrival is near the loop sleeps only until
/// `spin_window_ns` before it and then polls with a zero timeout; `deferred` work (a
/// connection to reopen) means "do not sleep at all".
pub(crate) fn poll_timeout(
    now_ns: u64,
    next_housekeeping_ns: u64,
    wait_ns: Option<u64>,
    end_ns: Option<u64>,
    deferred: bool,
    spin_window_ns: u64,
) -> Duration {
    let mut timeout_ns = next_housekeeping_ns.saturating_sub(now_ns);
    if let Some(w) = wait_ns {
        timeout_ns = timeout_ns.min(w);
    }
    if let Some(end) = end_ns {
        timeout_ns = timeout_ns.min(end.saturating_sub(now_ns));
    }
    if deferred {
        Duration::ZERO
    } else if timeout_ns > 2 * spin_window_ns {
        Duration::from_nanos(timeout_ns - spin_window_ns)
    } else if wait_ns.is_some() {
        Duration::ZERO
    } else {
        Duration::from_nanos(timeout_ns)
    }
}

#[cfg(test)]
mod poll_timeout_tests {
    use super::poll_timeout;
    use std::time::Duration;

    const MS: u64 = 1_000_000;

    /// (now, housekeeping, wait, end, deferred, expected sleep)
    type Case = (u64, u64, Option<u64>, Option<u64>, bool, Duration);

    #[test]
    fn table() {
        let cases: [Case; 7] = [
            // closed loop, housekeeping far: sleep until it, less the spin window
            (0, 5 * MS, None, None, false, Duration::from_nanos(4 * MS)),
            // closed loop, housekeeping near: sleep exactly until it
            (0, MS, None, None, false, Duration::from_nanos(MS)),
            // arrival far: sleep until 1 ms before it
            (
                0,
                50 * MS,
                Some(10 * MS),
                None,
                false,
                Duration::from_nanos(9 * MS),
            ),
            // arrival near: do not sleep, poll
            (0, 50 * MS, Some(MS), None, false, Duration::ZERO),
            // the end of the run comes first
            (
                10 * MS,
                50 * MS,
                None,
                Some(13 * MS),
                false,
                Duration::from_nanos(2 * MS),
            ),
            // deferred work: never sleep
            (0, 50 * MS, None, None, true, Duration::ZERO),
            // deadlines already past
            (9 * MS, 5 * MS, None, Some(MS), false, Duration::ZERO),
        ];
        for (now, hk, wait, end, deferred, want) in cases {
            assert_eq!(
                poll_timeout(now, hk, wait, end, deferred, MS),
                want,
                "now {now} hk {hk} wait {wait:?} end {end:?} deferred {deferred}"
            );
        }
    }
}
