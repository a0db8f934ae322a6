//! The generator's own resource readings: process CPU time and system CPU pressure.
//!
//! Read once per second by worker 0's recorder (see `Recorder::with_resources`), so a
//! second's label can say whether the generator, not the server, was the limit.

/// CPU time (user + system) this process has used so far, in nanoseconds, from
/// `getrusage(RUSAGE_SELF)`. `None` if the call fails.
pub fn process_cpu_ns() -> Option<u64> {
    // SAFETY: getrusage writes into the zeroed struct we own; no other memory is touched.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return None;
    }
    let tv_ns = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1_000;
    Some(tv_ns(ru.ru_utime) + tv_ns(ru.ru_stime))
}

/// The CPU the calling thread is running on; `None` when the kernel does not say.
pub fn current_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu has no preconditions.
    let c = unsafe { libc::sched_getcpu() };
    u32::try_from(c).ok()
}

/// The CPU time the generator needed so far, in nanoseconds: [`process_cpu_ns`] less
/// the time its workers spent polling for a reply before sleeping
/// ([`volley_engine::busy_wait_ns`]: waiting for the server with the CPU busy, which
/// would otherwise make a closed loop against a fast server look generator-bound).
pub fn generator_cpu_ns() -> Option<u64> {
    let waited = volley_engine::busy_wait_ns();
    Some(process_cpu_ns()?.saturating_sub(waited))
}

/// Cumulative microseconds during which at least one task waited for a CPU
/// (`some total=` in `/proc/pressure/cpu`, Linux PSI). `None` where PSI is absent.
pub fn cpu_pressure_some_us() -> Option<u64> {
    use std::io::Read;
    // A stack buffer: the file is two short lines, and this runs on a worker thread.
    let mut buf = [0u8; 256];
    let mut f = std::fs::File::open("/proc/pressure/cpu").ok()?;
    let n = f.read(&mut buf).ok()?;
    parse_psi_some_total(&buf[..n])
}

/// The calling thread's cumulative run time and run delay, nanoseconds
/// (`/proc/thread-self/schedstat`: time on a CPU, then time runnable but waiting for
/// one). Read on worker 0's thread, the delay is the pacer's own wait behind other
/// tasks: what a stall probe running `SCHED_FIFO` never sees; the run time is its own
/// use of the CPU, which it cannot have waited behind. `None` where schedstats are
/// absent.
pub fn thread_schedstat_ns() -> Option<(u64, u64)> {
    use std::io::Read;
    let mut buf = [0u8; 96];
    let mut f = std::fs::File::open("/proc/thread-self/schedstat").ok()?;
    let n = f.read(&mut buf).ok()?;
    parse_schedstat(&buf[..n])
}

/// The first two fields of a `schedstat` line (`run_ns wait_ns slices`).
pub fn parse_schedstat(text: &[u8]) -> Option<(u64, u64)> {
    let mut f = std::str::from_utf8(text).ok()?.split_whitespace();
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

/// The CPU quota over this process, in cores: the smallest `quota / period` on the path
/// from its cgroup up to the root, of the v1 `cpu` controller (`cpu.cfs_quota_us`,
/// `cpu.cfs_period_us`) or of cgroup2 (`cpu.max`). `None` without a quota (or without
/// cgroups). Why: a closed loop is generator-bound when the generator used 90% of the
/// cores it could use, and a generator held to 20% of a CPU by its cgroup can use 0.2,
/// not the whole core `std::thread::available_parallelism` rounds it up to. Written
/// here, not taken from a crate: two small files read once per run, and the crates
/// that read cgroups either round to whole CPUs or bring a whole cgroup manager.
pub fn own_cpu_quota_cores() -> Option<f64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    let mut least: Option<f64> = None;
    for (dir, v2) in quota_dirs(&own, &mounts) {
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
        let cores = match v2 {
            true => read("cpu.max").and_then(|t| parse_cpu_max(&t)),
            false => read("cpu.cfs_quota_us")
                .zip(read("cpu.cfs_period_us"))
                .and_then(|(q, p)| parse_cfs_quota(&q, &p)),
        };
        if let Some(c) = cores {
            least = Some(least.map_or(c, |l: f64| l.min(c)));
        }
    }
    least
}

/// The directories whose quota bounds this process, from its `/proc/self/cgroup` and
/// `/proc/self/mounts` text: its cgroup and each parent up to the hierarchy's root, in
/// the v1 hierarchy holding `cpu` when there is one, else in cgroup2; `true` for
/// cgroup2.
pub fn quota_dirs(own: &str, mounts: &str) -> Vec<(std::path::PathBuf, bool)> {
    use volley_monitor::{cpu_share::own_path, stall::cgroup_mount};
    let found = |v2: bool| Some((cgroup_mount(mounts, v2)?, own_path(own, &["cpu"], v2)?));
    let Some(((root, path), v2)) = found(false)
        .map(|f| (f, false))
        .or_else(|| found(true).map(|f| (f, true)))
    else {
        return Vec::new();
    };
    let root = std::path::PathBuf::from(root);
    let mut dirs = Vec::new();
    let mut rel = std::path::PathBuf::from(path.trim_start_matches('/'));
    loop {
        dirs.push((root.join(&rel), v2));
        if !rel.pop() {
            break;
        }
    }
    dirs
}

/// Cores from cgroup2's `cpu.max` (`20000 100000`; `max 100000` is no quota).
pub fn parse_cpu_max(text: &str) -> Option<f64> {
    let mut f = text.split_whitespace();
    let quota: f64 = f.next()?.parse().ok()?;
    let period: f64 = f.next()?.parse().ok()?;
    (quota > 0.0 && period > 0.0).then(|| quota / period)
}

/// Cores from v1's `cpu.cfs_quota_us` and `cpu.cfs_period_us` (a quota of -1 is none).
pub fn parse_cfs_quota(quota: &str, period: &str) -> Option<f64> {
    let quota: f64 = quota.trim().parse().ok()?;
    let period: f64 = period.trim().parse().ok()?;
    (quota > 0.0 && period > 0.0).then(|| quota / period)
}

/// Extracts `total=` from the `some` line of a PSI file.
pub fn parse_psi_some_total(text: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(text).ok()?;
    let line = text.lines().find(|l| l.starts_with("some "))?;
    let total = line
        .split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?;
    total.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psi_some_total_is_parsed() {
        let text = b"some avg10=1.50 avg60=0.20 avg300=0.05 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=99\n";
        assert_eq!(parse_psi_some_total(text), Some(123456));
        assert_eq!(parse_psi_some_total(b"full avg10=0 total=3\n"), None);
        assert_eq!(parse_psi_some_total(b"some avg10=x total=abc\n"), None);
    }

    #[test]
    fn run_time_and_delay_are_the_first_two_schedstat_fields() {
        assert_eq!(parse_schedstat(b"1234 5678 9\n"), Some((1234, 5678)));
        assert_eq!(parse_schedstat(b"1234\n"), None);
        assert_eq!(parse_schedstat(b"a b c\n"), None);
    }

    #[test]
    fn process_cpu_grows_with_work() {
        let a = process_cpu_ns().unwrap();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = process_cpu_ns().unwrap();
        assert!(b >= a);
    }

    /// The quota's directories go from the process's cgroup up to the root; a v1 `cpu`
    /// hierarchy wins over cgroup2; quotas read as cores, "no quota" as none.
    #[test]
    fn the_cgroup_quota_over_the_generator_is_read_in_cores() {
        let mounts_v1 = "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n";
        let own_v1 = "5:cpu,cpuacct:/a/b\n0::/u\n";
        let dirs = quota_dirs(own_v1, mounts_v1);
        let want: Vec<(std::path::PathBuf, bool)> = ["a/b", "a", ""]
            .iter()
            .map(|p| {
                (
                    std::path::Path::new("/sys/fs/cgroup/cpu,cpuacct").join(p),
                    false,
                )
            })
            .collect();
        assert_eq!(dirs, want);
        let v2 = quota_dirs(
            "0::/user.slice/x.scope\n",
            "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n",
        );
        assert_eq!(v2.len(), 3);
        assert_eq!(
            v2[0],
            (
                std::path::PathBuf::from("/sys/fs/cgroup/user.slice/x.scope"),
                true
            )
        );
        assert_eq!(v2[2], (std::path::PathBuf::from("/sys/fs/cgroup/"), true));
        assert!(quota_dirs("0::/\n", "proc /proc proc rw 0 0\n").is_empty());
        assert_eq!(parse_cpu_max("20000 100000\n"), Some(0.2));
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(parse_cpu_max(""), None);
        assert_eq!(parse_cfs_quota("150000\n", "100000\n"), Some(1.5));
        assert_eq!(parse_cfs_quota("-1\n", "100000\n"), None);
    }
}
