//! Who else used each CPU: per second, the CPU time of each CPU that neither volley's
//! own threads nor a target volley started in a cgroup of its own could have used, so
//! a pacer that waited for its CPU can be told waiting behind a neighbour from waiting
//! behind volley's own work (docs/methodology.md, "A neighbour on the pacer's CPU").
//!
//! Evidence the kernel gives without debugfs or BPF, read once a second by the stall
//! probe's first sleeper:
//! - each CPU's busy time: the v1 `cpuacct` hierarchy root's `cpuacct.usage_percpu`
//!   (every task's run time, nanoseconds), else `/proc/stat`'s `cpuN` lines (user, nice,
//!   system, irq, softirq, steal; clock ticks, so one tick is taken off each second's
//!   figure to keep it a lower bound);
//! - volley's own CPU, all threads (`CLOCK_PROCESS_CPUTIME_ID`): the built-in server,
//!   the probe and every worker included. Which CPU each thread used is not known, so
//!   all of it is taken off every CPU: what remains is others' for sure. Only the
//!   probe's own sleepers, each pinned to its CPU, say where they ran (each publishes
//!   its thread's CPU time, [`SleeperClocks`]): each is taken off its own CPU only (at
//!   500 us, one costs 3-4% of its CPU in this guest, as much as a light neighbour);
//! - the targets volley started in cgroups it made (`volley-<pid>-<n>`, beside this
//!   process's own cgroup): per CPU from a v1 `cpuacct` one, as a total from a cgroup2
//!   one's `cpu.stat` (taken off every CPU). A cgroup volley made that gives neither (a
//!   v1 `cpu` one for a quota, without `cpuacct`) makes the second's figures unknown:
//!   the target's share on the pacer's CPU could not be told from a neighbour's;
//! - how long volley's own cpu cgroup was throttled (a quota someone set on volley),
//!   from its `cpu.stat`: a wait for a quota is the generator's shortage.
//!
//! A target volley did not start (a URL) is not known: its CPU counts as others'.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::stall::StallSecond;

/// Cumulative readings at one instant, nanoseconds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CpuMark {
    /// The probe's sleepers' own CPU per CPU they are pinned to (index = CPU number).
    pub sleepers_ns: Vec<u64>,
    /// Busy time per CPU (index = CPU number).
    pub busy_ns: Vec<u64>,
    /// How much each CPU's busy time may overstate it (one clock tick from
    /// `/proc/stat`, 0 from `cpuacct`).
    pub busy_slack_ns: u64,
    /// volley's own CPU, all threads.
    pub own_ns: u64,
    /// The targets' CPU per CPU (cgroups with per-CPU figures), and in total (cgroups
    /// with only a total); `None`: a cgroup volley made gave neither.
    pub targets: Option<TargetsNs>,
    /// Throttled time of volley's own cpu cgroup; `None` when it has no such cgroup.
    pub own_throttled_ns: Option<u64>,
}

/// The targets' CPU in volley's cgroups, cumulative nanoseconds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TargetsNs {
    /// Per CPU, summed over the cgroups that give per-CPU figures.
    pub per_cpu: Vec<u64>,
    /// Summed over the cgroups that give only a total.
    pub total: u64,
}

/// What one second's two marks say (see [`others_between`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CpuSecond {
    /// Per CPU, microseconds of its busy time that neither volley nor its targets
    /// could have used (a lower bound of others' use); empty when unknown.
    pub others_us: Vec<u64>,
    /// Per CPU, the most volley and its targets can have used of it, microseconds
    /// (everything of theirs that may have run there); empty when unknown.
    pub ours_us: Vec<u64>,
    /// Per CPU, what the targets volley started surely used of it, microseconds (their
    /// per-CPU figures; a cgroup2 target's total says no CPU and is left out); empty
    /// when unknown.
    pub targets_us: Vec<u64>,
    /// How long volley's own cpu cgroup was throttled, microseconds.
    pub own_throttled_us: Option<u64>,
}

/// Others' CPU per CPU between two marks: busy - slack - volley's CPU that may have
/// run there (all of it but the sleepers pinned elsewhere) - the targets' CPU on that
/// CPU (and their CPU-only total), each at least 0; and the most of it volley and its
/// targets can have used.
pub fn others_between(a: &CpuMark, b: &CpuMark) -> CpuSecond {
    let own_throttled_us = match (a.own_throttled_ns, b.own_throttled_ns) {
        (Some(x), Some(y)) => Some(y.saturating_sub(x) / 1_000),
        _ => None,
    };
    let at = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0);
    let (mut others_us, mut ours_us, mut targets_us) = (Vec::new(), Vec::new(), Vec::new());
    if let (Some(ta), Some(tb)) = (&a.targets, &b.targets) {
        if a.busy_ns.len() == b.busy_ns.len() {
            let sleepers: Vec<u64> = (0..b.sleepers_ns.len())
                .map(|i| at(&b.sleepers_ns, i).saturating_sub(at(&a.sleepers_ns, i)))
                .collect();
            // volley's CPU outside its pinned sleepers: it may have run anywhere.
            let loose = b
                .own_ns
                .saturating_sub(a.own_ns)
                .saturating_sub(sleepers.iter().sum());
            let total = tb.total.saturating_sub(ta.total);
            for i in 0..b.busy_ns.len() {
                let busy = b.busy_ns[i].saturating_sub(a.busy_ns[i]);
                let target = at(&tb.per_cpu, i).saturating_sub(at(&ta.per_cpu, i));
                let ours = loose + at(&sleepers, i) + target + total;
                others_us.push(busy.saturating_sub(b.busy_slack_ns + ours) / 1_000);
                ours_us.push(ours / 1_000);
                targets_us.push(target / 1_000);
            }
        }
    }
    CpuSecond {
        others_us,
        ours_us,
        targets_us,
        own_throttled_us,
    }
}

/// Each probe sleeper's own CPU time (`CLOCK_THREAD_CPUTIME_ID`), published by the
/// sleeper now and then for the one that reads the machine's figures, with the CPU it
/// is pinned to.
#[derive(Debug, Default)]
pub struct SleeperClocks {
    slots: Vec<(Option<usize>, AtomicU64)>,
}

impl SleeperClocks {
    /// One slot per sleeper, with the CPU it is pinned to (`None`: unpinned).
    pub fn new(pins: &[Option<usize>]) -> SleeperClocks {
        SleeperClocks {
            slots: pins.iter().map(|&p| (p, AtomicU64::new(0))).collect(),
        }
    }

    /// Sleeper `i` publishes its own CPU time so far (called on its own thread).
    pub fn publish(&self, i: usize) {
        if let (Some((_, slot)), Some(ns)) = (self.slots.get(i), cpu_clock_ns(CLOCK_THREAD)) {
            slot.store(ns, Ordering::Relaxed);
        }
    }

    /// The pinned sleepers' CPU per CPU (index = CPU number).
    fn per_cpu(&self) -> Vec<u64> {
        let mut out = Vec::new();
        for (cpu, ns) in &self.slots {
            if let Some(c) = *cpu {
                if out.len() <= c {
                    out.resize(c + 1, 0);
                }
                out[c] += ns.load(Ordering::Relaxed);
            }
        }
        out
    }
}

/// The machine-wide readings one sleeper takes at each second's edge: steal time and
/// who used each CPU (this module); nothing for a sleeper without sources.
pub(crate) struct Marks {
    sources: Option<CpuSources>,
    steal_us: Option<u64>,
    cpu: Option<CpuMark>,
}

impl Marks {
    pub(crate) fn new(sources: Option<CpuSources>) -> Marks {
        let mut m = Marks {
            sources,
            steal_us: None,
            cpu: None,
        };
        m.restart();
        m
    }

    /// Takes fresh marks: a second starts here.
    pub(crate) fn restart(&mut self) {
        if let Some(src) = &self.sources {
            self.steal_us = crate::stall::read_steal_us();
            self.cpu = src.mark();
        }
    }

    /// Fills `s` with what changed since the last marks, and takes new ones.
    pub(crate) fn close(&mut self, mut s: StallSecond) -> StallSecond {
        let Some(src) = &self.sources else { return s };
        let (steal, cpu) = (crate::stall::read_steal_us(), src.mark());
        if let (Some(a), Some(b)) = (self.steal_us, steal) {
            s.steal_us = Some(b.saturating_sub(a));
        }
        if let (Some(a), Some(b)) = (&self.cpu, &cpu) {
            let c = others_between(a, b);
            (s.others_us, s.ours_us, s.targets_us, s.own_throttled_us) =
                (c.others_us, c.ours_us, c.targets_us, c.own_throttled_us);
        }
        (self.steal_us, self.cpu) = (steal, cpu);
        s
    }
}

/// Where the readings come from, found once when the probe starts.
#[derive(Debug, Clone, Default)]
pub struct CpuSources {
    /// The v1 `cpuacct` hierarchy's root (all tasks' per-CPU time).
    cpuacct_root: Option<PathBuf>,
    /// Directories under which volley makes its targets' cgroups: this process's own
    /// cgroup in each hierarchy, and whether that hierarchy is cgroup2.
    parents: Vec<(PathBuf, bool)>,
    /// volley's own cpu cgroup (`cpu.stat`), when it is not a hierarchy's root.
    own_cpu_cgroup: Option<PathBuf>,
    /// Prefix of the cgroups this process makes: `volley-<pid>-`.
    prefix: String,
    /// The probe's sleepers' own CPU.
    clocks: Option<Arc<SleeperClocks>>,
}

impl CpuSources {
    /// Reads `/proc/self/mounts` and `/proc/self/cgroup` (of the process, not of the
    /// probe's thread, which may have left its cgroup); the sleepers publish their CPU
    /// in `clocks`.
    pub fn detect(clocks: Arc<SleeperClocks>) -> CpuSources {
        CpuSources {
            clocks: Some(clocks),
            ..CpuSources::of_this_process()
        }
    }

    /// [`CpuSources::detect`] from the two files' text and this process's id.
    pub fn from_text(mounts: &str, own_cgroup: &str, pid: u32) -> CpuSources {
        let mut out = CpuSources {
            prefix: format!("volley-{pid}-"),
            ..Default::default()
        };
        for line in mounts.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 4 || (f[2] != "cgroup" && f[2] != "cgroup2") {
                continue;
            }
            let (mount, v2) = (Path::new(f[1]), f[2] == "cgroup2");
            let ctrls: Vec<&str> = f[3].split(',').collect();
            let own = own_path(own_cgroup, &ctrls, v2);
            let Some(own) = own else { continue };
            let dir = mount.join(own.trim_start_matches('/'));
            if !v2 && ctrls.contains(&"cpuacct") {
                out.cpuacct_root = Some(mount.to_path_buf());
            }
            if (ctrls.contains(&"cpu") || v2) && own != "/" && out.own_cpu_cgroup.is_none() {
                out.own_cpu_cgroup = Some(dir.clone());
            }
            out.parents.push((dir, v2));
        }
        out
    }

    /// The readings now; `None` when volley's own CPU cannot be read.
    pub fn mark(&self) -> Option<CpuMark> {
        let (busy_ns, busy_slack_ns) = match self
            .cpuacct_root
            .as_ref()
            .and_then(|r| read(&r.join("cpuacct.usage_percpu")))
            .map(|t| parse_percpu(&t))
        {
            Some(v) if !v.is_empty() => (v, 0),
            _ => {
                let tick = crate::stall::tick_ns();
                let stat = read(Path::new("/proc/stat"))?;
                (parse_stat_busy_ticks(&stat, tick), tick)
            }
        };
        Some(CpuMark {
            sleepers_ns: self
                .clocks
                .as_ref()
                .map(|c| c.per_cpu())
                .unwrap_or_default(),
            busy_ns,
            busy_slack_ns,
            own_ns: cpu_clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)?,
            targets: self.targets(),
            own_throttled_ns: self
                .own_cpu_cgroup
                .as_ref()
                .and_then(|d| read(&d.join("cpu.stat")))
                .and_then(|t| parse_throttled_ns(&t)),
        })
    }

    /// The CPU of the cgroups this process made (see [`CpuMark::targets`]).
    fn targets(&self) -> Option<TargetsNs> {
        let mut out = TargetsNs::default();
        for (parent, v2) in &self.parents {
            let Ok(entries) = std::fs::read_dir(parent) else {
                continue;
            };
            for e in entries.flatten() {
                if !e.file_name().to_string_lossy().starts_with(&self.prefix) {
                    continue;
                }
                let dir = e.path();
                if let Some(t) = read(&dir.join("cpuacct.usage_percpu")) {
                    let v = parse_percpu(&t);
                    if out.per_cpu.len() < v.len() {
                        out.per_cpu.resize(v.len(), 0);
                    }
                    out.per_cpu.iter_mut().zip(v).for_each(|(a, b)| *a += b);
                } else if *v2 {
                    let stat = read(&dir.join("cpu.stat"))?;
                    out.total += crate::parse::parse_cgroup_cpu_ns(&stat)?;
                } else if self
                    .cpuacct_root
                    .as_ref()
                    .is_some_and(|r| dir.starts_with(r))
                {
                    return None; // a cpuacct cgroup that could not be read
                } else {
                    // A v1 cgroup in a hierarchy without cpuacct (a quota, a cpuset):
                    // its tasks are counted by the cpuacct one volley made beside it,
                    // if any; else unknown.
                    let twin = self.cpuacct_root.as_ref().and_then(|r| {
                        self.parents
                            .iter()
                            .find(|(p, _)| p.starts_with(r))
                            .map(|(p, _)| p.join(e.file_name()))
                    });
                    if !twin.is_some_and(|t| t.exists()) {
                        return None;
                    }
                }
            }
        }
        Some(out)
    }
}

impl CpuSources {
    /// The CPU of the targets this process started in cgroups of its own
    /// (`volley-<pid>-<n>`), all but the one named `except` (the step's own target),
    /// nanoseconds, cumulative: each cgroup counted once by name (a target's cgroups
    /// in several hierarchies share it), from the first of its directories with a CPU
    /// counter (v1 `cpuacct.usage`, cgroup2 `cpu.stat`'s `usage_usec`). A study's other
    /// instances are its own doing, not someone else's load (docs/methodology.md, "A
    /// busy machine"): the monitor counts them apart. `None` without any cgroup
    /// hierarchy to look in.
    pub fn study_targets_ns(&self, except: Option<&str>) -> Option<u64> {
        if self.parents.is_empty() {
            return None;
        }
        let mut seen = std::collections::HashSet::new();
        let mut total = 0u64;
        for (parent, _) in &self.parents {
            let Ok(entries) = std::fs::read_dir(parent) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if !name.starts_with(&self.prefix) || Some(name.as_str()) == except {
                    continue;
                }
                if seen.contains(&name) {
                    continue;
                }
                let ns = ["cpuacct.usage", "cpu.stat"].iter().find_map(|f| {
                    read(&e.path().join(f)).and_then(|t| crate::parse::parse_cgroup_cpu_ns(&t))
                });
                if let Some(ns) = ns {
                    total += ns;
                    seen.insert(name);
                }
            }
        }
        Some(total)
    }

    /// [`CpuSources::from_text`] from this process's `/proc/self/mounts` and
    /// `/proc/self/cgroup`, without the probe's sleepers (the monitor's view).
    pub fn of_this_process() -> CpuSources {
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        CpuSources::from_text(&mounts, &own, std::process::id())
    }
}

/// This process's path in the hierarchy with controllers `ctrls` (or the cgroup2 one),
/// from `/proc/self/cgroup` text.
pub fn own_path<'a>(own_cgroup: &'a str, ctrls: &[&str], v2: bool) -> Option<&'a str> {
    own_cgroup.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, c, path) = (f.next()?, f.next()?, f.next()?);
        let hit = if v2 {
            c.is_empty()
        } else {
            c.split(',').any(|x| ctrls.contains(&x))
        };
        hit.then_some(path)
    })
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

const CLOCK_THREAD: libc::clockid_t = libc::CLOCK_THREAD_CPUTIME_ID;

/// A CPU-time clock (the process's, every thread, or the calling thread's), ns.
fn cpu_clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// `cpuacct.usage_percpu`: one number per CPU, nanoseconds.
pub fn parse_percpu(text: &str) -> Vec<u64> {
    text.split_whitespace()
        .map_while(|x| x.parse().ok())
        .collect()
}

/// Busy time per CPU from `/proc/stat`'s `cpuN` lines (user, nice, system, irq,
/// softirq, steal), in nanoseconds at `tick_ns` per tick; index = CPU number.
pub fn parse_stat_busy_ticks(text: &str, tick_ns: u64) -> Vec<u64> {
    let mut out = Vec::new();
    for l in text.lines() {
        let mut f = l.split_whitespace();
        let Some(cpu) = f
            .next()
            .and_then(|n| n.strip_prefix("cpu"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let v: Vec<u64> = f.map_while(|x| x.parse().ok()).collect();
        let busy: u64 = [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| v.get(i)).sum();
        if out.len() <= cpu {
            out.resize(cpu + 1, 0);
        }
        out[cpu] = busy * tick_ns;
    }
    out
}

/// Throttled time from a `cpu.stat`: v1 `throttled_time` (ns), cgroup2 `throttled_usec`.
pub fn parse_throttled_ns(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        let v: u64 = v.trim().parse().ok()?;
        match k {
            "throttled_time" => Some(v),
            "throttled_usec" => Some(v * 1_000),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(busy: &[u64], own: u64, per_cpu: &[u64], total: u64) -> CpuMark {
        CpuMark {
            sleepers_ns: Vec::new(),
            busy_ns: busy.to_vec(),
            busy_slack_ns: 0,
            own_ns: own,
            targets: Some(TargetsNs {
                per_cpu: per_cpu.to_vec(),
                total,
            }),
            own_throttled_ns: None,
        }
    }

    #[test]
    fn others_are_what_neither_volley_nor_its_targets_could_have_used() {
        const MS: u64 = 1_000_000;
        let a = mark(&[0, 0], 0, &[0, 0], 0);
        // (busy per CPU, volley's CPU, target per CPU, target total) -> others, us.
        type Row<'a> = (&'a [u64], u64, &'a [u64], u64, &'a [u64]);
        let rows: [Row; 5] = [
            // A neighbour busy on CPU 1; volley used 100 ms somewhere.
            (
                &[120 * MS, 950 * MS],
                100 * MS,
                &[0, 0],
                0,
                &[20_000, 850_000],
            ),
            // volley alone, more work than its core gives: nothing left for others.
            (&[1_000 * MS, 50 * MS], 1_000 * MS, &[0, 0], 0, &[0, 0]),
            // Its managed target on the same core: taken off that CPU only.
            (&[1_000 * MS, 0], 300 * MS, &[700 * MS, 0], 0, &[0, 0]),
            // A cgroup2 target gives only a total: taken off every CPU.
            (
                &[900 * MS, 900 * MS],
                100 * MS,
                &[],
                600 * MS,
                &[200_000, 200_000],
            ),
            // Unknown CPUs of the targets' list count 0.
            (
                &[500 * MS, 500 * MS],
                0,
                &[400 * MS],
                0,
                &[100_000, 500_000],
            ),
        ];
        for (busy, own, per_cpu, total, want) in rows {
            let b = mark(busy, own, per_cpu, total);
            assert_eq!(others_between(&a, &b).others_us, want, "{busy:?} {own}");
        }
        // Ticks overstate by up to one tick: taken off.
        let mut b = mark(&[30 * MS, 0], 0, &[0, 0], 0);
        b.busy_slack_ns = 10 * MS;
        assert_eq!(others_between(&a, &b).others_us, [20_000, 0]);
        // What volley and its targets can have used of each CPU.
        let b = mark(&[1_000 * MS, 0], 300 * MS, &[600 * MS, 0], 0);
        assert_eq!(others_between(&a, &b).ours_us, [900_000, 300_000]);
        // What the targets surely used of each CPU: their per-CPU figures alone.
        assert_eq!(others_between(&a, &b).targets_us, [600_000, 0]);
        // The probe's sleepers, pinned, count on their own CPU only: 40 ms on CPU 0
        // and 40 ms on CPU 1 of volley's 100 ms; a neighbour took 90 ms of CPU 1.
        let mut b = mark(&[60 * MS, 150 * MS], 100 * MS, &[0, 0], 0);
        b.sleepers_ns = vec![40 * MS, 40 * MS];
        let c = others_between(&a, &b);
        assert_eq!(
            (c.others_us, c.ours_us),
            (vec![0, 90_000], vec![60_000, 60_000])
        );
        // A cgroup volley made that says nothing: unknown, never guessed.
        let mut b = mark(&[30 * MS, 0], 0, &[0, 0], 0);
        b.targets = None;
        assert!(others_between(&a, &b).others_us.is_empty());
    }

    #[test]
    fn own_throttling_is_a_delta() {
        let mut a = mark(&[0], 0, &[], 0);
        let mut b = a.clone();
        assert_eq!(others_between(&a, &b).own_throttled_us, None);
        a.own_throttled_ns = Some(5_000_000);
        b.own_throttled_ns = Some(12_000_000);
        assert_eq!(others_between(&a, &b).own_throttled_us, Some(7_000));
    }

    #[test]
    fn files_are_parsed() {
        assert_eq!(
            parse_percpu("33148934879435 34022879388106 \n"),
            [33148934879435, 34022879388106]
        );
        let stat = "cpu  10 0 20 300 4 0 1 77 0 0\ncpu0 5 1 10 150 2 3 1 40 0 0\n\
                    cpu1 5 0 10 150 2 0 0 37 0 0\nintr 5\n";
        assert_eq!(
            parse_stat_busy_ticks(stat, 10),
            [(5 + 1 + 10 + 3 + 1 + 40) * 10, (5 + 10 + 37) * 10]
        );
        assert_eq!(
            parse_throttled_ns("nr_periods 4\nnr_throttled 2\nthrottled_time 900\n"),
            Some(900)
        );
        assert_eq!(
            parse_throttled_ns("usage_usec 1\nthrottled_usec 3\n"),
            Some(3_000)
        );
        assert_eq!(
            crate::parse::parse_cgroup_cpu_ns("usage_usec 17\nuser_usec 9\n"),
            Some(17_000)
        );
    }

    #[test]
    fn sources_follow_the_mounts_and_own_cgroups() {
        let mounts = "cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n\
                      cgroup /sys/fs/cgroup/cpuacct cgroup rw,cpuacct 0 0\n\
                      cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n";
        let own = "2:cpuacct:/\n1:cpu:/capped\n0::/\n";
        let s = CpuSources::from_text(mounts, own, 42);
        assert_eq!(
            s.cpuacct_root.as_deref(),
            Some(Path::new("/sys/fs/cgroup/cpuacct"))
        );
        assert_eq!(
            s.own_cpu_cgroup.as_deref(),
            Some(Path::new("/sys/fs/cgroup/cpu/capped"))
        );
        assert_eq!(s.prefix, "volley-42-");
        assert_eq!(s.parents.len(), 3);
        let s = CpuSources::from_text(mounts, "2:cpuacct:/\n1:cpu:/\n0::/\n", 42);
        assert_eq!(s.own_cpu_cgroup, None, "a root has no quota");
    }
}
