//! Nothing orphaned: what a volley process made for its targets is written down before
//! it is made, so that if volley dies without cleaning up (`kill -9`, OOM, a power cut of
//! the terminal) the next volley can stop and remove it.
//!
//! Place in the flow: [`start`](crate::start) notes each target's private directory,
//! cgroups, spawned pids and precompressed files in a *ledger* file keyed by volley's
//! pid (`<state dir>/<pid>.json`), and forgets the target when it is stopped. At the
//! start of `volley bench --target` and `volley study run` the binary calls
//! [`sweep_orphans`], which reads the ledgers of volley processes that are gone and
//! stops and removes what they list, and prints what it removed.
//!
//! Safety rule, as for a live target: only what a volley recorded is touched. A pid is
//! signalled only while it is still the recorded process (same start time in
//! `/proc/PID/stat`, so a reused number is left alone) or, once it is gone, as the id of
//! the process group its workers still hold (the kernel does not hand out a pid that is
//! still a group's id, so that group can only be ours). Processes in a cgroup volley
//! created are ours by construction: only volley's child joined it.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One process as recorded: its pid and its start time in clock ticks since boot
/// (`/proc/PID/stat` field 22), which together name it even after the pid is reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Proc {
    pid: u32,
    start_ticks: u64,
}

/// What one target made.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Made {
    id: u64,
    kind: String,
    dir: Option<PathBuf>,
    cgroups: Vec<PathBuf>,
    pids: Vec<Proc>,
    files: Vec<PathBuf>,
}

/// One volley process's ledger file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Ledger {
    owner: Option<Proc>,
    targets: Vec<Made>,
    /// Network lab slots held (each a /24 of lab addresses, `volley_netlab::plan`).
    #[serde(default)]
    labs: Vec<u8>,
}

static OURS: Mutex<Ledger> = Mutex::new(Ledger {
    owner: None,
    targets: Vec::new(),
    labs: Vec::new(),
});
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Where ledgers live: `$VOLLEY_STATE_DIR`, else `$XDG_RUNTIME_DIR/volley`, else
/// `/tmp/volley-state`. Every volley on the machine must agree, so no per-run choice.
pub fn state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("VOLLEY_STATE_DIR") {
        return PathBuf::from(d);
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) => PathBuf::from(d).join("volley"),
        None => PathBuf::from("/tmp/volley-state"),
    }
}

/// The fields of `/proc/PID/stat` the sweep needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    zombie: bool,
    pgrp: u32,
    start_ticks: u64,
}

fn stat_of(pid: u32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Pure part of [`stat_of`]: state (field 3), process group (5) and start time in
/// ticks since boot (22), counted after the last `)` since the command name may
/// contain spaces and parentheses.
fn parse_stat(stat: &str) -> Option<Stat> {
    let f: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    Some(Stat {
        zombie: *f.first()? == "Z",
        pgrp: f.get(2)?.parse().ok()?,
        start_ticks: f.get(19)?.parse().ok()?,
    })
}

fn start_ticks(pid: u32) -> Option<u64> {
    stat_of(pid).map(|s| s.start_ticks)
}

fn proc_of(pid: u32) -> Option<Proc> {
    start_ticks(pid).map(|start_ticks| Proc { pid, start_ticks })
}

/// Still the recorded process, and still running (a zombie has let go of everything).
fn alive(p: &Proc) -> bool {
    stat_of(p.pid).is_some_and(|s| s.start_ticks == p.start_ticks && !s.zombie)
}

/// Running members of process group `pgrp`.
fn group_members(pgrp: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| stat_of(pid).is_some_and(|s| s.pgrp == pgrp && !s.zombie))
        .collect()
}

/// Writes this process's ledger (or removes it when it lists nothing). Best effort: a
/// ledger that cannot be written only loses the after-crash sweep, never a run.
fn save(ledger: &Ledger) {
    let me = std::process::id();
    let dir = state_dir();
    let file = dir.join(format!("{me}.json"));
    if ledger.targets.is_empty() && ledger.labs.is_empty() {
        let _ = std::fs::remove_file(file);
        return;
    }
    let Ok(text) = serde_json::to_vec_pretty(ledger) else {
        return;
    };
    let tmp = dir.join(format!("{me}.json.tmp"));
    if std::fs::create_dir_all(&dir).is_ok() && std::fs::write(&tmp, text).is_ok() {
        let _ = std::fs::rename(&tmp, &file);
    }
}

fn ours() -> std::sync::MutexGuard<'static, Ledger> {
    OURS.lock().unwrap_or_else(|e| e.into_inner())
}

/// A target's entry in this process's ledger; forgotten on drop (after its cleanup).
#[derive(Debug)]
pub(crate) struct Entry {
    id: u64,
}

impl Entry {
    /// Adds an empty entry for a target of `kind` that is about to be made.
    pub(crate) fn open(kind: &str) -> Entry {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let mut l = ours();
        if l.owner.is_none() {
            l.owner = proc_of(std::process::id());
        }
        l.targets.push(Made {
            id,
            kind: kind.to_string(),
            ..Made::default()
        });
        save(&l);
        Entry { id }
    }

    fn update(&self, f: impl FnOnce(&mut Made)) {
        let mut l = ours();
        if let Some(m) = l.targets.iter_mut().find(|m| m.id == self.id) {
            f(m);
            save(&l);
        }
    }

    /// The private directory, before anything is written into it.
    pub(crate) fn dir(&self, dir: &Path) {
        self.update(|m| m.dir = Some(dir.to_path_buf()));
    }

    /// The cgroup directories, before the child joins them.
    pub(crate) fn cgroups(&self, dirs: Vec<PathBuf>) {
        self.update(|m| m.cgroups = dirs);
    }

    /// Files written outside the private directory (precompressed siblings).
    pub(crate) fn files(&self, files: &[PathBuf]) {
        self.update(|m| m.files = files.to_vec());
    }

    /// The process just spawned (replacing one reaped for a retry).
    pub(crate) fn spawned(&self, pid: u32) {
        let p = proc_of(pid);
        self.update(|m| m.pids = p.into_iter().collect());
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        let mut l = ours();
        l.targets.retain(|m| m.id != self.id);
        save(&l);
    }
}

/// A directory volley makes for a run outside any target (a generated docroot), noted
/// in this process's ledger before it is made and forgotten on drop, so that a volley
/// killed mid-run (a test's or a user's SIGKILL) leaves nothing that the next volley's
/// [`sweep_orphans`] does not remove. Only a `volley-*` directory is ever removed.
#[derive(Debug)]
pub struct NotedDir {
    _entry: Entry,
}

impl NotedDir {
    /// Notes `dir`, made for `what` (shown by the sweep: "removed docroot directory ...").
    pub fn note(what: &str, dir: &Path) -> NotedDir {
        let entry = Entry::open(what);
        entry.dir(dir);
        NotedDir { _entry: entry }
    }
}

/// A network lab slot this process holds: its addresses (`volley_netlab::plan::Names`)
/// are no other live volley's. Recorded in this process's ledger while held, freed on
/// drop; a dead volley's slots are free again at once (its ledger no longer counts) and
/// its ledger is removed by [`sweep_orphans`].
#[derive(Debug)]
pub struct LabSlot {
    slot: u8,
}

impl LabSlot {
    /// The slot number (0..=255).
    pub fn slot(&self) -> u8 {
        self.slot
    }

    /// Takes the lowest slot no live volley's ledger holds. Every volley on the machine
    /// takes slots under one lock file in the state directory, so two starting at once
    /// cannot take the same one.
    pub fn take() -> Result<LabSlot, crate::TargetError> {
        let dir = state_dir();
        std::fs::create_dir_all(&dir).map_err(crate::TargetError::io(format!(
            "creating the state directory {}",
            dir.display()
        )))?;
        let lock_path = dir.join("labs.lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(crate::TargetError::io(format!(
                "opening {}",
                lock_path.display()
            )))?;
        // SAFETY: flock on an open fd; the lock goes when `lock` is closed.
        if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) } != 0 {
            return Err(crate::TargetError::io("locking the lab slots")(
                std::io::Error::last_os_error(),
            ));
        }
        let mut held: Vec<u8> = live_ledgers().into_iter().flat_map(|l| l.labs).collect();
        let mut l = ours();
        held.extend(l.labs.iter().copied());
        let slot = (0..=u8::MAX).find(|s| !held.contains(s)).ok_or_else(|| {
            crate::TargetError::InvalidSpec(
                "all 256 network lab slots are held by live volley processes".into(),
            )
        })?;
        if l.owner.is_none() {
            l.owner = proc_of(std::process::id());
        }
        l.labs.push(slot);
        save(&l);
        drop(lock);
        Ok(LabSlot { slot })
    }
}

impl Drop for LabSlot {
    fn drop(&mut self) {
        let mut l = ours();
        l.labs.retain(|s| *s != self.slot);
        save(&l);
    }
}

/// The ledgers of other volley processes that are still alive.
fn live_ledgers() -> Vec<Ledger> {
    let Ok(entries) = std::fs::read_dir(state_dir()) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let pid: u32 = name.to_str()?.strip_suffix(".json")?.parse().ok()?;
            (pid != std::process::id()).then_some(())?;
            let l: Ledger = serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok()?;
            l.owner.as_ref().is_some_and(alive).then_some(l)
        })
        .collect()
}

/// One thing [`sweep_orphans`] stopped or removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    /// The pid of the volley that made it and died.
    pub owner: u32,
    /// The target kind it belonged to.
    pub kind: String,
    /// What it was.
    pub what: Leftover,
}

/// The kinds of things a dead volley can leave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leftover {
    /// A process (SIGKILLed), or the process group of a gone leader.
    Process(u32),
    /// A cgroup directory.
    Cgroup(PathBuf),
    /// The private directory (config, logs, certificates).
    Dir(PathBuf),
    /// A file written beside the docroot's own (a precompressed sibling).
    File(PathBuf),
}

impl std::fmt::Display for Removed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (k, o) = (&self.kind, self.owner);
        match &self.what {
            Leftover::Process(p) => write!(f, "stopped {k} process {p} left by volley {o}"),
            Leftover::Cgroup(d) => write!(f, "removed {k} cgroup {} of volley {o}", d.display()),
            Leftover::Dir(d) => write!(f, "removed {k} directory {} of volley {o}", d.display()),
            Leftover::File(p) => write!(f, "removed {k} file {} of volley {o}", p.display()),
        }
    }
}

/// Stops and removes what volley processes that are gone left behind (their ledgers
/// say what), removes their ledgers, and returns what it did. Ledgers of live volleys
/// (same pid *and* start time) are left alone; so is this process's own.
pub fn sweep_orphans() -> Vec<Removed> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(state_dir()) else {
        return out;
    };
    for e in entries.flatten() {
        let path = e.path();
        let Some(owner) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if owner == std::process::id() {
            continue;
        }
        let Ok(text) = std::fs::read(&path) else {
            continue;
        };
        let Ok(ledger) = serde_json::from_slice::<Ledger>(&text) else {
            // Not ours to judge: a torn write is replaced by rename, never left half.
            continue;
        };
        if ledger.owner.as_ref().is_some_and(alive) {
            continue;
        }
        for made in &ledger.targets {
            sweep_one(owner, made, &mut out);
        }
        let _ = std::fs::remove_file(&path);
    }
    out
}

fn sweep_one(owner: u32, made: &Made, out: &mut Vec<Removed>) {
    let mut note = |what: Leftover| {
        out.push(Removed {
            owner,
            kind: made.kind.clone(),
            what,
        })
    };
    for p in &made.pids {
        // The number still names our leader (running or a zombie), or nobody: then the
        // group id is held only by its (our) workers. Otherwise it names a stranger.
        let ours = start_ticks(p.pid).is_none_or(|t| t == p.start_ticks);
        if !ours {
            continue;
        }
        let mut members = group_members(p.pid);
        if alive(p) && !members.contains(&p.pid) {
            members.push(p.pid);
        }
        for pid in members {
            if kill(pid as i32) {
                note(Leftover::Process(pid));
            }
        }
    }
    for cg in &made.cgroups {
        if !cg.exists() {
            continue;
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let pids = cgroup_pids(cg);
            if pids.is_empty() || Instant::now() >= deadline {
                break;
            }
            for pid in pids {
                if kill(pid as i32) {
                    note(Leftover::Process(pid));
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let deadline = Instant::now() + Duration::from_secs(1);
        while std::fs::remove_dir(cg).is_err() && cg.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if !cg.exists() {
            note(Leftover::Cgroup(cg.clone()));
        }
    }
    for f in &made.files {
        if std::fs::remove_file(f).is_ok() {
            note(Leftover::File(f.clone()));
        }
    }
    // Only a directory of volley's naming: a damaged ledger cannot make it delete
    // anything else.
    if let Some(dir) = made.dir.as_ref().filter(|d| is_private_dir(d)) {
        if std::fs::remove_dir_all(dir).is_ok() {
            note(Leftover::Dir(dir.clone()));
        }
    }
}

fn is_private_dir(d: &Path) -> bool {
    d.is_absolute()
        && d.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("volley-"))
}

fn cgroup_pids(cg: &Path) -> Vec<u32> {
    std::fs::read_to_string(cg.join("cgroup.procs"))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// SIGKILL to a pid (or a group, negative); true when it reached someone.
fn kill(pid: i32) -> bool {
    // SAFETY: kill has no memory effects; callers pass only recorded pids and groups.
    pid != 0 && pid != -1 && unsafe { libc::kill(pid, libc::SIGKILL) } == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_is_field_22_after_the_name() {
        let stat = "4242 (odd) name)) Z 1 4243 4242 0 -1 4194560 100 0 0 0 \
                    5 3 0 0 20 0 1 0 987654 1000 10 18446744073709551615";
        let want = Stat {
            zombie: true,
            pgrp: 4243,
            start_ticks: 987654,
        };
        assert_eq!(parse_stat(stat), Some(want));
        assert_eq!(parse_stat("garbage"), None);
        let me = start_ticks(std::process::id()).unwrap();
        assert!(alive(&Proc {
            pid: std::process::id(),
            start_ticks: me
        }));
        assert!(!alive(&Proc {
            pid: std::process::id(),
            start_ticks: me + 1
        }));
    }

    #[test]
    fn only_volley_named_absolute_dirs_are_removed() {
        assert!(is_private_dir(Path::new("/tmp/volley-nginx-1-0")));
        assert!(!is_private_dir(Path::new("/tmp/nginx")));
        assert!(!is_private_dir(Path::new("volley-x")));
        assert!(!is_private_dir(Path::new("/")));
    }

    #[test]
    fn a_ledger_written_before_lab_slots_reads_as_holding_none() {
        let old = r#"{"owner":{"pid":7,"start_ticks":9},"targets":[]}"#;
        assert!(serde_json::from_str::<Ledger>(old).unwrap().labs.is_empty());
    }

    #[test]
    fn ledger_round_trips() {
        let l = Ledger {
            owner: Some(Proc {
                pid: 7,
                start_ticks: 9,
            }),
            targets: vec![Made {
                id: 1,
                kind: "nginx".into(),
                dir: Some("/tmp/volley-nginx-7-0".into()),
                cgroups: vec!["/sys/fs/cgroup/x".into()],
                pids: vec![Proc {
                    pid: 8,
                    start_ticks: 10,
                }],
                files: vec![],
            }],
            labs: vec![3],
        };
        let text = serde_json::to_vec(&l).unwrap();
        assert_eq!(serde_json::from_slice::<Ledger>(&text).unwrap(), l);
    }
}
