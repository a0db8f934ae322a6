//! The lifetime of a managed server process: the registry [`stop_all`] walks, death
//! seen without reaping, and the shutdown that stops the group, empties the cgroups and
//! removes what was made.
//!
//! Ownership rule: volley only ever signals processes it spawned. Each managed server is
//! started as the leader of a new process group, and its main process is *not reaped*
//! until [`super::RunningTarget::stop`]: death is observed with `waitid(WNOWAIT)`, so the
//! zombie keeps the pid and the process-group id reserved and the group signal can never
//! reach a stranger that reused the number. Processes left in the target's private cgroup
//! are ours by construction (only our child joined it).

use super::RunningTarget;
use crate::cgroup::PrivateCgroups;
use crate::kind::TargetKind;
use crate::orphans::Entry;
use std::path::PathBuf;
use std::process::Child;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) kind: TargetKind,
    pub(super) child: Option<Child>,
    pub(super) external_pid: Option<u32>,
    pub(super) external_procs: Option<PathBuf>,
    pub(super) cgroups: PrivateCgroups,
    pub(super) dir: Option<PathBuf>,
    pub(super) grace: Duration,
    pub(super) stopped: bool,
    /// Precompressed siblings volley wrote into the docroot (builtin with
    /// compression), removed at stop.
    pub(super) created_files: Vec<PathBuf>,
    /// This target's entry in the ledger a later volley sweeps if this one dies
    /// without cleaning up; dropped (forgotten) once everything is removed.
    pub(super) ledger: Option<Entry>,
}

/// Live targets, for [`stop_all`]. Weak so the registry never keeps one alive.
static LIVE: Mutex<Vec<Weak<Mutex<Inner>>>> = Mutex::new(Vec::new());

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock must not stop the cleanup that follows it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Stops every target still running in this process (SIGTERM, grace, SIGKILL) and
/// removes their directories and cgroups. For the CLI's Ctrl-C handler: call it from the
/// handler's thread (ctrlc / signal-hook run handlers on a normal thread), never from a
/// raw async signal handler, since it takes locks.
pub fn stop_all() {
    let live: Vec<Weak<Mutex<Inner>>> = std::mem::take(&mut *lock(&LIVE));
    for w in live {
        if let Some(inner) = w.upgrade() {
            lock(&inner).shutdown();
        }
    }
}

pub(super) fn register(t: RunningTarget) -> RunningTarget {
    let mut live = lock(&LIVE);
    live.retain(|w| w.strong_count() > 0);
    live.push(Arc::downgrade(&t.inner));
    drop(live);
    t
}

/// How a reaped-or-not process ended, from `waitid`'s siginfo.
pub(super) fn describe_exit(code: i32, status: i32) -> String {
    match code {
        libc::CLD_EXITED => format!("exit status: {status}"),
        libc::CLD_KILLED | libc::CLD_DUMPED => {
            let name = match status {
                libc::SIGKILL => " (SIGKILL)",
                libc::SIGTERM => " (SIGTERM)",
                libc::SIGSEGV => " (SIGSEGV)",
                libc::SIGABRT => " (SIGABRT)",
                _ => "",
            };
            format!("killed by signal {status}{name}")
        }
        _ => format!("ended (code {code}, status {status})"),
    }
}

pub(super) fn signal_group(pgid: u32, sig: i32) {
    if pgid > 1 {
        // SAFETY: kill has no memory effects; a negative pid addresses our child's group.
        unsafe { libc::kill(-(pgid as i32), sig) };
    }
}

impl Inner {
    /// Nothing made yet: fields are filled in as `start` creates each thing, so dropping
    /// it on an error path removes exactly what exists.
    pub(super) fn new(kind: TargetKind, grace: Duration) -> Inner {
        Inner {
            kind,
            child: None,
            external_pid: None,
            external_procs: None,
            cgroups: PrivateCgroups::default(),
            dir: None,
            grace,
            stopped: false,
            created_files: Vec::new(),
            ledger: None,
        }
    }

    /// Writes down what was just made (no-op for external targets).
    pub(super) fn note(&self, f: impl FnOnce(&Entry)) {
        if let Some(e) = &self.ledger {
            f(e);
        }
    }

    /// Exit description if the main process has ended, without reaping it.
    pub(super) fn exit_status(&self) -> Option<String> {
        let pid = self.child.as_ref()?.id();
        // SAFETY: siginfo_t is plain data filled in by the kernel.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        let rc = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) };
        if rc != 0 {
            return None;
        }
        // SAFETY: reading fields the kernel filled in for SIGCHLD-class siginfo.
        let (si_pid, si_status) = unsafe { (info.si_pid(), info.si_status()) };
        (si_pid != 0).then(|| describe_exit(info.si_code, si_status))
    }

    /// Kills and reaps a child whose port was taken, keeping dir and cgroups for the next
    /// attempt.
    pub(super) fn reap_for_retry(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal_group(child.id(), libc::SIGKILL);
            let _ = child.wait();
        }
    }

    pub(super) fn shutdown(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        if let Some(mut child) = self.child.take() {
            let pid = child.id();
            if self.exit_status().is_none() {
                signal_group(pid, libc::SIGTERM);
                let deadline = Instant::now() + self.grace;
                while Instant::now() < deadline && !exited_nowait(pid) {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            // The leader is at most a zombie here, so the group id is still ours: this
            // reaches workers that ignored SIGTERM and never anyone else.
            signal_group(pid, libc::SIGKILL);
            let _ = child.wait();
        }
        // Anything left in our private cgroups was forked by our child.
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let pids = self.cgroups.pids();
            if pids.is_empty() || Instant::now() >= deadline {
                break;
            }
            for p in pids {
                // SAFETY: see above; p is in a cgroup only our child could join.
                unsafe { libc::kill(p as i32, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.cgroups.remove();
        for f in self.created_files.drain(..) {
            let _ = std::fs::remove_file(f);
        }
        if let Some(dir) = self.dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
        self.ledger = None;
    }
}

fn exited_nowait(pid: u32) -> bool {
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
    // SAFETY: as in Inner::exit_status.
    let rc = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) };
    rc == 0 && unsafe { info.si_pid() } != 0
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown();
    }
}
