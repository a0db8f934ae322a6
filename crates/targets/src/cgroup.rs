//! Private cgroups: CPU quota, cpuset pinning and a memory limit for one target, on
//! cgroup v1 or v2, whichever holds the controller on this machine.
//!
//! The child joins its cgroups *before exec* (it writes `0`, meaning "me", into
//! `cgroup.procs` files opened by the parent), so every worker it forks later inherits
//! the limits; joining after spawn would race with nginx or Apache forking workers that
//! would escape the quota.

use crate::TargetError;
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Limits to place on a target. `Default` is "no limits" (no cgroup is created).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ResourceLimits {
    /// Cores the target may run on (cpuset cgroup and `sched_setaffinity` before exec).
    pub cpus: Option<Vec<usize>>,
    /// CFS bandwidth cap.
    pub cpu_quota: Option<CpuQuota>,
    /// Memory limit in bytes.
    pub memory_max_bytes: Option<u64>,
}

impl ResourceLimits {
    /// True when any limit needs a cgroup.
    pub fn needs_cgroup(&self) -> bool {
        self.cpus.is_some() || self.cpu_quota.is_some() || self.memory_max_bytes.is_some()
    }
}

/// A CPU bandwidth cap: `share_of_one_cpu` of one CPU per `period` (0.25 = 25%).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CpuQuota {
    /// Fraction of one CPU, e.g. 0.25, 0.35, 0.41, 0.65; above 1.0 spans several CPUs.
    pub share_of_one_cpu: f64,
    /// The CFS period. 100 ms is the kernel default; shorter periods stall less per
    /// throttle (a 50% cap on 100 ms can stall 50 ms) at more scheduling cost.
    pub period: Duration,
}

impl CpuQuota {
    /// `share` of one CPU on the kernel's default 100 ms period.
    pub fn of_one_cpu(share: f64) -> CpuQuota {
        CpuQuota {
            share_of_one_cpu: share,
            period: Duration::from_millis(100),
        }
    }

    /// Periods a load must measure for this quota to be what it measured (ten): the
    /// kernel counts a quota per period, so a burst shorter than one runs at full
    /// speed, and over a span of D a capped server can get up to one period's quota
    /// beyond its share of D; ten periods hold that to a tenth. Seed 002's built-in
    /// server answered 250 requests in 11 ms "at 25% of a CPU" (20,000 req/s) and never
    /// met its cap.
    pub const PERIODS_TO_HOLD: u32 = 10;

    /// The least a load must measure for this quota to hold:
    /// [`CpuQuota::PERIODS_TO_HOLD`] periods (1 s on the kernel's 100 ms period). A
    /// study refuses or warns about steps planned shorter, before it starts any.
    pub fn span_to_hold(&self) -> Duration {
        self.period * Self::PERIODS_TO_HOLD
    }

    /// Why a load that measured `measured_s` seconds cannot show a server held to this
    /// quota: it measured under [`CpuQuota::PERIODS_TO_HOLD`] periods (less 5%: a 1 s
    /// load ends a millisecond or two early by the engine's clock). `None` when it
    /// measured enough.
    pub fn too_short(&self, measured_s: f64) -> Option<String> {
        let need = self.span_to_hold();
        (measured_s < 0.95 * need.as_secs_f64()).then(|| {
            format!(
                "too short for its CPU cap: the load measured {:.0} ms, under {} periods of its CPU cap ({:.1} s): the kernel counts a quota per {:.0} ms period, and a burst shorter than that runs at full speed, so this figure is not the capped server's; give the load more requests or a longer duration",
                measured_s * 1e3,
                Self::PERIODS_TO_HOLD,
                need.as_secs_f64(),
                self.period.as_secs_f64() * 1e3
            )
        })
    }

    /// (quota_us, period_us) as the kernel wants them.
    pub fn to_us(self) -> Result<(u64, u64), TargetError> {
        let period_us = self.period.as_micros() as u64;
        if !(self.share_of_one_cpu.is_finite() && self.share_of_one_cpu > 0.0) {
            return Err(TargetError::InvalidLimit(format!(
                "CPU share {} must be a positive fraction of one CPU (0.25 = 25%)",
                self.share_of_one_cpu
            )));
        }
        if !(1_000..=1_000_000).contains(&period_us) {
            return Err(TargetError::InvalidLimit(format!(
                "CFS period {:?} must be between 1 ms and 1 s",
                self.period
            )));
        }
        let quota_us = (self.share_of_one_cpu * period_us as f64).round() as u64;
        Ok((quota_us, period_us))
    }
}

/// cgroup v1 (one hierarchy per controller) or v2 (unified).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CgroupVersion {
    /// Legacy per-controller hierarchies (`cpu.cfs_quota_us`).
    V1,
    /// Unified hierarchy (`cpu.max`).
    V2,
}

/// Where one controller is mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    /// Mount point.
    pub mount: PathBuf,
    /// v1 or v2.
    pub version: CgroupVersion,
}

/// The controllers volley uses and where they live.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgroupLayout {
    /// The `cpu` controller (quota, throttling statistics).
    pub cpu: Option<Hierarchy>,
    /// The `cpuset` controller (pinning).
    pub cpuset: Option<Hierarchy>,
    /// The `memory` controller.
    pub memory: Option<Hierarchy>,
    /// The v1 `cpuacct` controller: where a target without limits gets its own cgroup
    /// (exact CPU time in `cpuacct.usage`, and every process it forked listed).
    pub cpuacct: Option<Hierarchy>,
}

impl CgroupLayout {
    /// Reads `/proc/mounts` (and a v2 mount's `cgroup.controllers`).
    pub fn detect() -> CgroupLayout {
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
        parse_mounts(&mounts, |p| {
            std::fs::read_to_string(p.join("cgroup.controllers")).unwrap_or_default()
        })
    }

    fn get(&self, controller: &str) -> Option<&Hierarchy> {
        match controller {
            "cpu" => self.cpu.as_ref(),
            "cpuset" => self.cpuset.as_ref(),
            "memory" => self.memory.as_ref(),
            "cpuacct" => self.cpuacct.as_ref(),
            _ => None,
        }
    }
}

/// Which hierarchy holds each controller, from `/proc/mounts` text. A controller bound to
/// a v1 hierarchy cannot also be active in v2, so v1 wins when both are mounted (this
/// machine's hybrid layout: v1 controllers plus an empty cgroup2 at /sys/fs/cgroup/unified).
pub fn parse_mounts(mounts: &str, v2_controllers: impl Fn(&Path) -> String) -> CgroupLayout {
    let mut out = CgroupLayout::default();
    let mut v2: Vec<(PathBuf, String)> = Vec::new();
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 {
            continue;
        }
        let (mount, fstype, opts) = (PathBuf::from(f[1]), f[2], f[3]);
        match fstype {
            "cgroup" => {
                for opt in opts.split(',') {
                    let h = Some(Hierarchy {
                        mount: mount.clone(),
                        version: CgroupVersion::V1,
                    });
                    match opt {
                        "cpu" => out.cpu = h,
                        "cpuset" => out.cpuset = h,
                        "memory" => out.memory = h,
                        "cpuacct" => out.cpuacct = h,
                        _ => {}
                    }
                }
            }
            "cgroup2" => {
                let ctl = v2_controllers(&mount);
                v2.push((mount, ctl));
            }
            _ => {}
        }
    }
    for (mount, ctl) in v2 {
        let has = |c: &str| ctl.split_whitespace().any(|x| x == c);
        let h = || {
            Some(Hierarchy {
                mount: mount.clone(),
                version: CgroupVersion::V2,
            })
        };
        if out.cpu.is_none() && has("cpu") {
            out.cpu = h();
        }
        if out.cpuset.is_none() && has("cpuset") {
            out.cpuset = h();
        }
        if out.memory.is_none() && has("memory") {
            out.memory = h();
        }
    }
    out
}

/// The first cgroup2 mount in `/proc/mounts` text (the whole tree on a v2 machine,
/// `/sys/fs/cgroup/unified` on a hybrid one).
pub fn cgroup2_mount(mounts: &str) -> Option<PathBuf> {
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 3 && f[2] == "cgroup2").then(|| PathBuf::from(f[1]))
    })
}

/// This process's path inside a hierarchy, from `/proc/self/cgroup` text: new cgroups
/// are created below it, so volley stays inside whatever limits it was itself given.
pub fn own_path(proc_self_cgroup: &str, controller: &str, version: CgroupVersion) -> String {
    for line in proc_self_cgroup.lines() {
        let mut it = line.splitn(3, ':');
        let (_, ctls, path) = match (it.next(), it.next(), it.next()) {
            (Some(a), Some(b), Some(c)) => (a, b, c),
            _ => continue,
        };
        let matches = match version {
            CgroupVersion::V2 => ctls.is_empty(),
            CgroupVersion::V1 => ctls.split(',').any(|c| c == controller),
        };
        if matches {
            return path.to_string();
        }
    }
    "/".to_string()
}

/// CFS throttling counters of the target's cpu cgroup, cumulative since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ThrottleStats {
    /// Enforcement periods that elapsed with the group runnable.
    pub nr_periods: u64,
    /// Periods in which the group hit its quota and was stopped.
    pub nr_throttled: u64,
    /// Total time stopped, in microseconds (v1 reports ns, converted).
    pub throttled_us: u64,
}

impl ThrottleStats {
    /// Counters accumulated since `earlier` (for one run or step).
    pub fn since(&self, earlier: &ThrottleStats) -> ThrottleStats {
        ThrottleStats {
            nr_periods: self.nr_periods.saturating_sub(earlier.nr_periods),
            nr_throttled: self.nr_throttled.saturating_sub(earlier.nr_throttled),
            throttled_us: self.throttled_us.saturating_sub(earlier.throttled_us),
        }
    }
}

/// Parses a `cpu.stat` file of either version (v1 `throttled_time` ns, v2
/// `throttled_usec`).
pub fn parse_cpu_stat(text: &str) -> ThrottleStats {
    let mut s = ThrottleStats::default();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(k), Some(v)) = (it.next(), it.next().and_then(|v| v.parse::<u64>().ok())) else {
            continue;
        };
        match k {
            "nr_periods" => s.nr_periods = v,
            "nr_throttled" => s.nr_throttled = v,
            "throttled_time" => s.throttled_us = v / 1000,
            "throttled_usec" => s.throttled_us = v,
            _ => {}
        }
    }
    s
}

/// The settings actually written, recorded with each run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CgroupSettings {
    /// Each created cgroup directory with its version.
    pub dirs: Vec<(PathBuf, CgroupVersion)>,
    /// `file = value` lines as written.
    pub writes: Vec<(String, String)>,
}

/// The cgroups created for one target; removed by [`PrivateCgroups::remove`].
#[derive(Debug, Default)]
pub struct PrivateCgroups {
    dirs: Vec<(PathBuf, CgroupVersion, &'static str)>,
    /// `cgroup.procs` files opened for writing, for the child to join before exec.
    join_files: Vec<File>,
    /// What was written, for the run's environment record.
    pub settings: CgroupSettings,
}

static NEXT_CGROUP: AtomicU32 = AtomicU32::new(0);

/// `volley-<pid>-<n>`: unique per target of this process.
fn new_name() -> String {
    format!(
        "volley-{}-{}",
        std::process::id(),
        NEXT_CGROUP.fetch_add(1, Ordering::Relaxed)
    )
}

impl PrivateCgroups {
    /// Creates `volley-<pid>-<n>` in each hierarchy a limit needs and writes the limits.
    /// Without limits, one cgroup all the same (v1 `cpuacct`, else cgroup2) when the
    /// machine lets volley make one: every managed target has its own, so the monitor
    /// reads its exact CPU time and a sweep after a crash finds every process it forked.
    /// On error, whatever was created is removed before returning.
    pub fn create(limits: &ResourceLimits) -> Result<PrivateCgroups, TargetError> {
        let mut cg = PrivateCgroups::default();
        let layout = CgroupLayout::detect();
        if !limits.needs_cgroup() {
            // Best effort: without permission the target runs as before, unconfined.
            if cg.create_tracking(&layout).is_err() {
                cg.remove();
                cg = PrivateCgroups::default();
            }
            return Ok(cg);
        }
        match cg.create_inner(limits, &layout) {
            Ok(()) => Ok(cg),
            Err(e) => {
                cg.remove();
                Err(e)
            }
        }
    }

    /// The cgroup of a target without limits: nothing written but membership.
    fn create_tracking(&mut self, layout: &CgroupLayout) -> Result<(), TargetError> {
        let mounts = || std::fs::read_to_string("/proc/mounts").unwrap_or_default();
        let (h, controller) = match (&layout.cpuacct, cgroup2_mount(&mounts())) {
            (Some(h), _) => (h.clone(), "cpuacct"),
            (None, Some(mount)) => (
                Hierarchy {
                    mount,
                    version: CgroupVersion::V2,
                },
                "unified",
            ),
            (None, None) => return Ok(()),
        };
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let parent = h
            .mount
            .join(own_path(&own, controller, h.version).trim_start_matches('/'));
        let dir = parent.join(new_name());
        std::fs::create_dir(&dir).map_err(|source| permission(&dir, source))?;
        self.dirs.push((dir.clone(), h.version, "cpuacct"));
        self.settings.dirs.push((dir, h.version));
        self.open_join_files()
    }

    fn open_join_files(&mut self) -> Result<(), TargetError> {
        for (dir, _, _) in &self.dirs {
            let procs = dir.join("cgroup.procs");
            let f = OpenOptions::new()
                .write(true)
                .open(&procs)
                .map_err(|source| permission(&procs, source))?;
            self.join_files.push(f);
        }
        Ok(())
    }

    fn create_inner(
        &mut self,
        limits: &ResourceLimits,
        layout: &CgroupLayout,
    ) -> Result<(), TargetError> {
        let name = new_name();
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        // One directory per distinct hierarchy (v2 puts all controllers in one).
        let mut wanted: Vec<&'static str> = Vec::new();
        // On v1 the `cpu` controller counts no CPU time (its `cpu.stat` holds throttling
        // only): a `cpuacct` cgroup beside the limits gives the target's exact CPU, per
        // CPU, so the monitor and the neighbour rule count it as the target's and not as
        // a neighbour's. First, so `procs_file` (the monitor's scope) is the one that
        // counts. Co-mounted `cpu,cpuacct` is one directory, made once.
        let v1_cpuacct = layout
            .cpuacct
            .as_ref()
            .is_some_and(|h| h.version == CgroupVersion::V1);
        if v1_cpuacct {
            wanted.push("cpuacct");
        }
        if limits.cpu_quota.is_some() {
            wanted.push("cpu");
        }
        if limits.cpus.is_some() {
            wanted.push("cpuset");
        }
        if limits.memory_max_bytes.is_some() {
            wanted.push("memory");
        }
        for controller in wanted {
            let h = layout
                .get(controller)
                .ok_or(TargetError::NoCgroupController { controller })?;
            let own_rel = own_path(&own, controller, h.version);
            let parent = h.mount.join(own_rel.trim_start_matches('/'));
            let dir = parent.join(&name);
            if !self.dirs.iter().any(|(d, _, _)| *d == dir) {
                if h.version == CgroupVersion::V2 {
                    // The controller must be enabled for the parent's children.
                    let _ = std::fs::write(
                        parent.join("cgroup.subtree_control"),
                        format!("+{controller}"),
                    );
                }
                std::fs::create_dir(&dir).map_err(|source| permission(&dir, source))?;
                self.dirs.push((dir.clone(), h.version, controller));
                self.settings.dirs.push((dir.clone(), h.version));
            }
            self.configure(controller, &dir, &parent, h.version, limits)?;
        }
        self.open_join_files()
    }

    fn configure(
        &mut self,
        controller: &str,
        dir: &Path,
        parent: &Path,
        version: CgroupVersion,
        limits: &ResourceLimits,
    ) -> Result<(), TargetError> {
        match (controller, version) {
            ("cpu", v) => {
                let Some(q) = limits.cpu_quota else {
                    return Ok(());
                };
                let (quota_us, period_us) = q.to_us()?;
                if v == CgroupVersion::V1 {
                    // Period first: the kernel checks quota against the current period.
                    self.write(dir, "cpu.cfs_period_us", &period_us.to_string())?;
                    self.write(dir, "cpu.cfs_quota_us", &quota_us.to_string())?;
                } else {
                    self.write(dir, "cpu.max", &format!("{quota_us} {period_us}"))?;
                }
            }
            ("cpuset", v) => {
                let Some(cpus) = &limits.cpus else {
                    return Ok(());
                };
                if cpus.is_empty() {
                    return Err(TargetError::InvalidLimit("empty CPU list".into()));
                }
                let list: Vec<String> = cpus.iter().map(|c| c.to_string()).collect();
                if v == CgroupVersion::V1 {
                    // A v1 cpuset starts empty: it needs memory nodes before any task.
                    let mems = std::fs::read_to_string(parent.join("cpuset.mems"))
                        .unwrap_or_else(|_| "0".into());
                    self.write(dir, "cpuset.mems", mems.trim())?;
                }
                self.write(dir, "cpuset.cpus", &list.join(","))?;
            }
            ("memory", v) => {
                let Some(bytes) = limits.memory_max_bytes else {
                    return Ok(());
                };
                let file = if v == CgroupVersion::V1 {
                    "memory.limit_in_bytes"
                } else {
                    "memory.max"
                };
                self.write(dir, file, &bytes.to_string())?;
            }
            _ => {}
        }
        Ok(())
    }

    fn write(&mut self, dir: &Path, file: &str, value: &str) -> Result<(), TargetError> {
        let path = dir.join(file);
        std::fs::write(&path, value).map_err(|source| match source.kind() {
            ErrorKind::PermissionDenied => permission(&path, source),
            _ => TargetError::LimitRefused {
                path: path.clone(),
                value: value.to_string(),
                source,
            },
        })?;
        self.settings
            .writes
            .push((path.display().to_string(), value.to_string()));
        Ok(())
    }

    /// Raw fds of the `cgroup.procs` files, for the child to write `0` into before exec.
    pub(crate) fn join_fds(&self) -> Vec<i32> {
        use std::os::fd::AsRawFd;
        self.join_files.iter().map(|f| f.as_raw_fd()).collect()
    }

    /// Closes the parent's copies of the join files once the child has exec'd.
    pub(crate) fn close_join_files(&mut self) {
        self.join_files.clear();
    }

    /// Path of the `cgroup.procs` of the first cgroup (for the monitor's scope).
    pub fn procs_file(&self) -> Option<PathBuf> {
        self.dirs.first().map(|(d, _, _)| d.join("cgroup.procs"))
    }

    /// Every pid still in any of the cgroups.
    pub fn pids(&self) -> Vec<u32> {
        let mut out: Vec<u32> = Vec::new();
        for (d, _, _) in &self.dirs {
            if let Ok(t) = std::fs::read_to_string(d.join("cgroup.procs")) {
                out.extend(t.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Throttling counters of the cpu cgroup, if one was created.
    pub fn throttle_stats(&self) -> Option<ThrottleStats> {
        let (dir, _, _) = self.dirs.iter().find(|(_, _, c)| *c == "cpu")?;
        std::fs::read_to_string(dir.join("cpu.stat"))
            .ok()
            .map(|t| parse_cpu_stat(&t))
    }

    /// The cgroup directories created.
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|(d, _, _)| d.clone()).collect()
    }

    /// Removes the directories. The kernel refuses (EBUSY) while a task is still exiting,
    /// so this retries for up to a second. Returns the directories it could not remove.
    pub fn remove(&mut self) -> Vec<PathBuf> {
        self.join_files.clear();
        let deadline = Instant::now() + Duration::from_secs(1);
        let mut left = Vec::new();
        for (dir, _, _) in self.dirs.drain(..).rev() {
            loop {
                match std::fs::remove_dir(&dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == ErrorKind::NotFound => break,
                    Err(_) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    Err(_) => {
                        left.push(dir);
                        break;
                    }
                }
            }
        }
        left
    }
}

impl Drop for PrivateCgroups {
    fn drop(&mut self) {
        self.remove();
    }
}

fn permission(path: &Path, source: std::io::Error) -> TargetError {
    match source.kind() {
        ErrorKind::NotFound | ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => {
            TargetError::CgroupPermission {
                path: path.to_path_buf(),
                source,
            }
        }
        _ => TargetError::Io {
            what: format!("creating cgroup {}", path.display()),
            source,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "tmpfs /sys/fs/cgroup tmpfs rw 0 0\n\
        cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n\
        cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0\n\
        cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n\
        cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";

    #[test]
    fn hybrid_layout_uses_v1_controllers() {
        let l = parse_mounts(HYBRID, |_| String::new());
        assert_eq!(
            l.cpu,
            Some(Hierarchy {
                mount: "/sys/fs/cgroup/cpu".into(),
                version: CgroupVersion::V1
            })
        );
        assert_eq!(
            l.cpuset.unwrap().mount,
            PathBuf::from("/sys/fs/cgroup/cpuset")
        );
        assert_eq!(l.memory.unwrap().version, CgroupVersion::V1);
    }

    #[test]
    fn pure_v2_layout() {
        let l = parse_mounts("cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n", |_| {
            "cpuset cpu io memory pids\n".into()
        });
        assert_eq!(l.cpu.unwrap().version, CgroupVersion::V2);
        assert_eq!(l.memory.unwrap().mount, PathBuf::from("/sys/fs/cgroup"));
        let none = parse_mounts("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n", |_| "pids".into());
        assert_eq!(none, CgroupLayout::default());
    }

    #[test]
    fn own_path_per_controller() {
        let t = "9:name=systemd:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/user.slice\n";
        assert_eq!(own_path(t, "memory", CgroupVersion::V1), "/process_api/abc");
        assert_eq!(own_path(t, "cpu", CgroupVersion::V1), "/");
        assert_eq!(own_path(t, "cpu", CgroupVersion::V2), "/user.slice");
        assert_eq!(own_path("", "cpu", CgroupVersion::V1), "/");
    }

    #[test]
    fn cpu_stat_both_versions() {
        let v1 = "nr_periods 40\nnr_throttled 12\nthrottled_time 3000000\nnr_bursts 0\n";
        assert_eq!(
            parse_cpu_stat(v1),
            ThrottleStats {
                nr_periods: 40,
                nr_throttled: 12,
                throttled_us: 3000
            }
        );
        let v2 = "usage_usec 1\nnr_periods 5\nnr_throttled 2\nthrottled_usec 700\n";
        let s = parse_cpu_stat(v2);
        assert_eq!(s.throttled_us, 700);
        assert_eq!(
            s.since(&ThrottleStats {
                nr_periods: 1,
                nr_throttled: 5,
                throttled_us: 100
            }),
            ThrottleStats {
                nr_periods: 4,
                nr_throttled: 0,
                throttled_us: 600
            }
        );
    }

    /// Ten periods of the quota (1 s on the kernel's 100 ms) or more hold the cap; a
    /// shorter load cannot show it.
    #[test]
    fn a_capped_load_must_measure_ten_periods_of_its_quota() {
        let q = CpuQuota::of_one_cpu(0.25);
        let fast = CpuQuota {
            period: Duration::from_millis(10),
            ..q
        };
        let table = [
            (q, 0.011, true), // seed 002's built-in server: 250 requests in 11 ms
            (q, 0.9, true),
            (q, 0.998, false), // a 1 s load, ended early by the engine's clock
            (q, 1.0, false),
            (q, 3.7, false),
            (fast, 0.45, false),
            (fast, 0.05, true),
        ];
        for (quota, measured_s, short) in table {
            let why = quota.too_short(measured_s);
            assert_eq!(why.is_some(), short, "{measured_s} s, {quota:?}: {why:?}");
        }
        let why = q.too_short(0.011).unwrap();
        assert!(
            why.starts_with(
                "too short for its CPU cap: the load measured 11 ms, under 10 periods of its CPU cap (1.0 s)"
            ),
            "{why}"
        );
    }

    #[test]
    fn quota_conversion_and_validation() {
        assert_eq!(
            CpuQuota::of_one_cpu(0.25).to_us().unwrap(),
            (25_000, 100_000)
        );
        assert_eq!(
            CpuQuota::of_one_cpu(0.41).to_us().unwrap(),
            (41_000, 100_000)
        );
        assert!(CpuQuota::of_one_cpu(0.0).to_us().is_err());
        assert!(CpuQuota::of_one_cpu(f64::NAN).to_us().is_err());
        let short = CpuQuota {
            share_of_one_cpu: 0.5,
            period: Duration::from_micros(10),
        };
        assert!(short.to_us().is_err());
    }

    /// A quota on v1 comes with a cpuacct cgroup, listed first (the monitor's scope), whose
    /// per-CPU counter reads, so the target's CPU is counted as the target's.
    #[test]
    fn v1_quota_gets_a_cpuacct_cgroup_beside_it() {
        let layout = CgroupLayout::detect();
        let Some(acct) = layout
            .cpuacct
            .clone()
            .filter(|h| h.version == CgroupVersion::V1)
        else {
            eprintln!("skipping: no v1 cpuacct here");
            return;
        };
        let limits = ResourceLimits {
            cpu_quota: Some(CpuQuota::of_one_cpu(0.5)),
            ..Default::default()
        };
        let mut cg = match PrivateCgroups::create(&limits) {
            Ok(cg) => cg,
            Err(e @ TargetError::CgroupPermission { .. }) => {
                eprintln!("skipping: {e}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        let dirs = cg.dirs();
        assert!(dirs[0].starts_with(&acct.mount), "{dirs:?}");
        assert!(std::fs::read_to_string(dirs[0].join("cpuacct.usage_percpu")).is_ok());
        assert!(
            cg.throttle_stats().is_some(),
            "the cpu cgroup is still found"
        );
        let co_mounted = layout.cpu.as_ref().map(|h| &h.mount) == Some(&acct.mount);
        assert_eq!(dirs.len(), if co_mounted { 1 } else { 2 }, "{dirs:?}");
        assert!(cg.remove().is_empty());
        assert!(dirs.iter().all(|d| !d.exists()));
    }

    #[test]
    fn no_limits_creates_one_membership_cgroup_at_most() {
        let mut cg = PrivateCgroups::create(&ResourceLimits::default()).unwrap();
        let dirs = cg.dirs();
        assert!(dirs.len() <= 1, "{dirs:?}");
        assert!(cg.settings.writes.is_empty(), "no limit is written");
        assert!(cg.remove().is_empty());
        assert!(dirs.iter().all(|d| !d.exists()));
        assert_eq!(
            cgroup2_mount("cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n"),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
    }
}
