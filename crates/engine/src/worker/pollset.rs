//! `--io poll`: the plain-TCP HTTP/1.1 worker waits on its sockets with `ppoll(2)`
//! over the connections it has, instead of keeping them in an epoll set.
//!
//! Place in the flow: `run -> worker (shared loop + http1) -> **pollset** -> TCP`. The
//! worker, its transport and its reads and writes are epoll's; only the wait changes.
//!
//! Why: on loopback a reply's delivery into the client's socket runs in the *server's*
//! context (the receive softirq runs in the sender's), and it wakes whatever waits on
//! that socket. An epoll client keeps an entry on every socket's wait queue for the
//! connection's whole life, so every reply runs the epoll callback (`ep_poll_callback`
//! under `sock_def_readable`, interrupts off) on the server's CPU: 4.8% of lighttpd's
//! samples under volley and wrk, 0.4% under httperf, whose `select()` has an entry
//! only while it is inside the call (`bench/engine.py` on issue 29: the server's CPU
//! per request 1.06-1.11x httperf's). A `ppoll` with a zero timeout registers nothing,
//! so the polling before a sleep ([`crate::busy_wait`]) leaves the server nothing to
//! run; a sleeping `ppoll` registers for the length of the sleep, as `select()` does.
//! Across a real network the client's own machine runs that callback, so this path
//! matters where client and server share a machine.
//!
//! The price is the client's: each look walks every watched socket (O(connections),
//! tens of nanoseconds each), where epoll returns only the ready ones. Hence an option
//! for the small connection counts a saturated loopback server needs, not the default.
//!
//! Readiness is level-triggered here, where the epoll path is edge-triggered: a socket
//! is watched for what its connection waits for ([`Interest`]), never for writability
//! once its request is written, or every look would find every socket writable.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// What a connection waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interest {
    /// A reply, or the server's close of an idle connection.
    Read,
    /// Room to write (a connect completing, a request not yet all written), and a
    /// reply, which may come before the write is seen to finish.
    ReadWrite,
    /// A connect completing.
    Write,
}

impl Interest {
    fn events(self) -> libc::c_short {
        match self {
            Interest::Read => libc::POLLIN,
            Interest::ReadWrite => libc::POLLIN | libc::POLLOUT,
            Interest::Write => libc::POLLOUT,
        }
    }
}

/// The sockets one look watches, rebuilt before every wait from the connections'
/// states (a few dozen entries: cheaper than keeping a table in step with every
/// connect, close and state change).
#[derive(Debug, Default)]
pub(crate) struct PollFds {
    fds: Vec<libc::pollfd>,
    slots: Vec<usize>,
}

impl PollFds {
    /// Empties the set for the next look.
    pub(crate) fn clear(&mut self) {
        self.fds.clear();
        self.slots.clear();
    }

    /// Watches `fd` of connection `slot` for `interest`.
    pub(crate) fn watch(&mut self, slot: usize, fd: RawFd, interest: Interest) {
        self.fds.push(libc::pollfd {
            fd,
            events: interest.events(),
            revents: 0,
        });
        self.slots.push(slot);
    }

    /// Waits up to `timeout` (a zero one only looks, registering nothing) and says
    /// whether any socket is ready.
    pub(crate) fn wait(&mut self, timeout: Duration) -> io::Result<bool> {
        let ts = libc::timespec {
            tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: `fds` is a live, exclusively borrowed array of `len` pollfds; `ts`
        // outlives the call; a null signal mask leaves the thread's mask alone.
        let n = unsafe {
            libc::ppoll(
                self.fds.as_mut_ptr(),
                self.fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n > 0)
    }

    /// The ready sockets of the last wait as (slot, readable, writable), the shape
    /// the epoll path gives: a hang-up or an error reads as both, so the connection
    /// meets it on its next read or write.
    pub(crate) fn ready(&self, out: &mut Vec<(usize, bool, bool)>) {
        let broken = libc::POLLHUP | libc::POLLERR | libc::POLLNVAL;
        for (p, &slot) in self.fds.iter().zip(&self.slots) {
            if p.revents == 0 {
                continue;
            }
            let readable = p.revents & (libc::POLLIN | libc::POLLRDHUP | broken) != 0;
            let writable = p.revents & (libc::POLLOUT | broken) != 0;
            out.push((slot, readable, writable));
        }
    }
}

/// Open loop under `ppoll`: the sleep before an arrival ends on `ppoll`'s timeout,
/// which the kernel may defer by the thread's timer slack (50 us by default, half the
/// early wake-up the pacer allows); the epoll path's timerfd has none. Asks for 1 ns
/// for this (the worker's) thread; refused, the pacer's early wake-up still covers
/// most of it.
pub(crate) fn exact_timeouts() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches no memory.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    /// Readiness follows what each socket is watched for: a socket with bytes waiting
    /// reads as readable, a writable socket watched only for reading is not reported,
    /// and a socket whose peer closed reads as both (its next read meets the end).
    #[test]
    fn readiness_is_what_each_socket_is_watched_for() {
        let (a, mut a_peer) = UnixStream::pair().unwrap();
        let (b, _b_peer) = UnixStream::pair().unwrap();
        let (c, c_peer) = UnixStream::pair().unwrap();
        let (d, _d_peer) = UnixStream::pair().unwrap();
        a_peer.write_all(b"reply").unwrap();
        drop(c_peer);
        let mut fds = PollFds::default();
        fds.watch(3, a.as_raw_fd(), Interest::Read);
        fds.watch(5, b.as_raw_fd(), Interest::Read);
        fds.watch(7, c.as_raw_fd(), Interest::Read);
        fds.watch(9, d.as_raw_fd(), Interest::Write);
        assert!(fds.wait(Duration::ZERO).unwrap());
        let mut ready = Vec::new();
        fds.ready(&mut ready);
        assert_eq!(
            ready,
            vec![(3, true, false), (7, true, true), (9, false, true)]
        );

        fds.clear();
        fds.watch(5, b.as_raw_fd(), Interest::Read);
        assert!(!fds.wait(Duration::ZERO).unwrap(), "nothing to read on b");
        ready.clear();
        fds.ready(&mut ready);
        assert!(ready.is_empty());
    }
}
