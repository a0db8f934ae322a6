//! A short scheduler slice for the open-loop worker, so its wake-ups are not queued
//! behind a neighbour's time slice (docs/methodology.md, "The generator checks itself").
//!
//! The pacer sleeps until just before each arrival. When it wakes, Linux's fair
//! scheduler (EEVDF, 6.6+) lets the task already running on that core finish its slice
//! (1.4 ms by default on this project's 2-core guest) before the waking worker runs,
//! unless the worker asked for a shorter one: since 6.12 a task may set its own slice
//! (`sched_setattr`, `sched_runtime` of a `SCHED_OTHER` task, 0.1 to 100 ms), and a
//! waking task with a shorter slice than the running one preempts it. A scheduler
//! trace of an open loop at 5000 req/s here (`perf sched timehist`) showed the worker
//! runnable but waiting 0.3-3.9 ms while ordinary tasks (a shell, mkdir) finished their
//! slices on its core, and the `SCHED_FIFO` stall probe beside it woke on time: lateness
//! the probe cannot see. Whether the short slice removes it was not measurable on the
//! busy machine it was written on (a sleeper beside a busy loop overslept p50 69-317 us
//! with either slice); `bench/stall.py --baseline` measures it.
//!
//! The slice changes when the worker runs, not how much: its weight (nice value) stays,
//! so a neighbour keeps its share of the core. Nothing is asked of the target. Only the
//! open loop asks (a closed loop has no schedule to keep, and a short slice costs it
//! context switches when it competes), only for a `SCHED_OTHER` thread (a user's
//! `chrt` or `nice` stays theirs), and a kernel that refuses (before 6.12 the field is
//! ignored; seccomp may refuse the call) leaves the default: best effort.
//!
//! Written here rather than taken from a crate: it is one system call that neither libc
//! (no wrapper) nor the maintained scheduling crates expose with `sched_runtime`.

/// The slice the open-loop worker asks for: the kernel's minimum, 100 us, about one
/// wake-up latency, the same margin the arrival timer wakes early by.
pub(crate) const WORKER_SLICE_NS: u64 = 100_000;

/// `struct sched_attr` (include/uapi/linux/sched/types.h), version 1 (56 bytes).
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

/// The request for `slice_ns` from a thread of `policy` at `nice`: `None` unless the
/// thread is `SCHED_OTHER` (a real-time, batch or idle thread keeps what its user
/// chose); the nice value is passed again because `sched_setattr` sets it too.
fn slice_attr(policy: i32, nice: i32, slice_ns: u64) -> Option<SchedAttr> {
    (policy == libc::SCHED_OTHER).then(|| SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        sched_policy: libc::SCHED_OTHER as u32,
        sched_nice: nice,
        sched_runtime: slice_ns,
        ..SchedAttr::default()
    })
}

/// Asks for a `slice_ns` fair-scheduler slice for the calling thread, keeping its
/// policy (only `SCHED_OTHER` is changed) and its nice value; true when the kernel
/// took it.
#[cfg(target_os = "linux")]
pub(crate) fn request_slice(slice_ns: u64) -> bool {
    // SAFETY: sched_getscheduler(0) reads the calling thread's policy, no pointers.
    let policy = unsafe { libc::sched_getscheduler(0) };
    // getpriority may return -1 legitimately, so errno tells a failure apart.
    // SAFETY: errno is thread-local; getpriority and gettid take no pointers.
    let nice = unsafe {
        *libc::__errno_location() = 0;
        let n = libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t);
        if n == -1 && *libc::__errno_location() != 0 {
            return false;
        }
        n
    };
    let Some(mut attr) = slice_attr(policy, nice, slice_ns) else {
        return false;
    };
    // SAFETY: `attr` is a valid, fully initialised sched_attr of the size it declares
    // and outlives the call; pid 0 is the calling thread; flags 0.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            0,
            &mut attr as *mut SchedAttr,
            0u32,
        )
    };
    rc == 0
}

/// Elsewhere there is no such call: the default slice stays.
#[cfg(not(target_os = "linux"))]
pub(crate) fn request_slice(_slice_ns: u64) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_is_the_kernels_version_1_layout() {
        assert_eq!(std::mem::size_of::<SchedAttr>(), 56);
    }

    /// Only an ordinary thread asks, and it keeps its nice value (a `nice -n 5
    /// volley` stays at 5); a user's real-time, batch or idle policy is left alone.
    #[test]
    fn only_ordinary_threads_ask_and_keep_their_nice_value() {
        let cases = [
            (libc::SCHED_OTHER, 0, true),
            (libc::SCHED_OTHER, 5, true),
            (libc::SCHED_OTHER, -3, true),
            (libc::SCHED_FIFO, 0, false),
            (libc::SCHED_RR, 0, false),
            (libc::SCHED_BATCH, 0, false),
            (libc::SCHED_IDLE, 0, false),
        ];
        for (policy, nice, asks) in cases {
            let got = slice_attr(policy, nice, WORKER_SLICE_NS);
            assert_eq!(got.is_some(), asks, "policy {policy}");
            if let Some(a) = got {
                assert_eq!(a.sched_policy, libc::SCHED_OTHER as u32);
                assert_eq!(a.sched_nice, nice);
                assert_eq!(a.sched_runtime, WORKER_SLICE_NS);
                assert_eq!(a.size, 56);
            }
        }
    }
}
