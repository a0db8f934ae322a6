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
