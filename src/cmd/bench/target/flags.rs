//! The `--target` flags' own syntaxes (kind, CPU quota, memory size, core list, workers,
//! monitor interval) as clap value parsers, and the cores they split between volley and
//! the targets. Pure parsers, table-tested.

use std::time::Duration;

use volley_targets::TargetKind;

use super::list;
use crate::cmd::bench::load::values;

/// `--target KIND`.
pub(crate) fn kind(s: &str) -> Result<TargetKind, String> {
    s.parse()
        .map_err(|e: volley_targets::UnknownKind| e.to_string())
}

/// `--workers`: at least 1.
pub(crate) fn workers(s: &str) -> Result<u32, String> {
    let n = values::count(s)?;
    u32::try_from(n).map_err(|_| format!("must be at most {}, got {s}", u32::MAX))
}

/// `--monitor-interval`: at least 100 ms (a finer one would sample its own noise).
pub(super) fn monitor_interval(s: &str) -> Result<Duration, String> {
    match values::duration(s)? {
        d if d >= Duration::from_millis(100) => Ok(d),
        _ => Err(format!("must be at least 100ms, got {s}")),
    }
}

/// The cores of `--target-cpus`, sorted and distinct.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

/// `--target-cpus`: a core list, each core one this process may use.
pub(super) fn cpus(s: &str) -> Result<CpuList, String> {
    parse_cpus(s, &allowed_cpus()).map(CpuList)
}

/// Parses `25%`, `0.25` or `150%` into a share of one CPU.
pub(super) fn parse_quota(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let share = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    };
    match share {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "must be a positive share of one CPU like 25% or 0.25, got '{s}'"
        )),
    }
}

/// `--memory-max`: the one size syntax (`volley_units::parse_size`).
pub(super) fn parse_bytes(s: &str) -> Result<u64, String> {
    volley_units::parse_size(s).map_err(|e| e.to_string())
}

/// Parses `0`, `0,2`, `0-3` into sorted distinct cores, each one of `allowed` (the cores
/// this process may use: a container's cpuset need not start at 0).
pub(super) fn parse_cpus(s: &str, allowed: &[usize]) -> Result<Vec<usize>, String> {
    let bad = || format!("must be a list like 0 or 0,1 or 0-1, got '{s}'");
    let mut out = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let (a, b): (usize, usize) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        if a > b {
            return Err(bad());
        }
        for c in a..=b {
            if !allowed.contains(&c) {
                return Err(format!(
                    "core {c} does not exist or is not ours (usable cores: {})",
                    list(allowed)
                ));
            }
            out.push(c);
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Cores this process may run on (sched_getaffinity), which is what pinning splits.
pub(super) fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data filled by the kernel; CPU_ISSET reads inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .collect();
            if !cpus.is_empty() {
                return cpus;
            }
        }
    }
    (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
}

/// Pins this process (the calling thread, and every thread it starts later: the
/// engine's workers) to `cpus`, so the generator never competes with a pinned target.
pub(super) fn pin_self(cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET write inside it; the size passed
    // is the struct's own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_parse_as_shares_of_one_cpu() {
        assert_eq!(parse_quota("25%"), Ok(0.25));
        assert_eq!(parse_quota("0.5"), Ok(0.5));
        assert_eq!(parse_quota(" 150% "), Ok(1.5));
        for bad in ["0", "0%", "-25%", "x", "%", "nan"] {
            assert!(parse_quota(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn memory_sizes_use_binary_units() {
        assert_eq!(parse_bytes("256M"), Ok(256 << 20));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert_eq!(parse_bytes("2048k"), Ok(2 << 20));
        assert_eq!(parse_bytes("1048576"), Ok(1 << 20));
        for bad in ["", "M", "12X", "1K", "-1M", "99999999999999999999G"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cpu_lists_parse_and_check_the_cores_exist() {
        assert_eq!(parse_cpus("0", &[0, 1]), Ok(vec![0]));
        assert_eq!(parse_cpus("1,0,1", &[0, 1]), Ok(vec![0, 1]));
        assert_eq!(parse_cpus("0-2", &[0, 1, 2, 3]), Ok(vec![0, 1, 2]));
        assert!(parse_cpus("2", &[0, 1])
            .unwrap_err()
            .contains("does not exist"));
        assert!(
            parse_cpus("0", &[2, 3]).is_err(),
            "a core outside our cpuset is refused"
        );
        for bad in ["", "a", "2-1", "0,,1"] {
            assert!(parse_cpus(bad, &[0, 1, 2, 3]).is_err(), "{bad}");
        }
    }
}
