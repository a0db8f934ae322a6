//! Resource limits and cleanup paths with a real server (nginx): pinning and memory limit
//! applied before exec, a quota the kernel refuses, cleanup on panic and on `stop_all`.

use std::path::Path;
use std::time::Duration;
use volley_targets::{start, CpuQuota, TargetError, TargetKind, TargetSpec};

fn nginx_installed() -> bool {
    if volley_targets::kind::find_program("nginx").is_none() {
        eprintln!("skipping: nginx is not installed (scripts/install-servers.sh)");
        return false;
    }
    true
}

fn cgroup_unavailable(e: &TargetError) -> bool {
    matches!(
        e,
        TargetError::NoCgroupController { .. } | TargetError::CgroupPermission { .. }
    )
}

fn status_field(pid: u32, key: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
        .unwrap()
}

fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

#[test]
fn pinning_and_memory_limit_reach_the_workers() {
    if !nginx_installed() {
        return;
    }
    let mut spec = TargetSpec::new(TargetKind::Nginx);
    spec.settings.workers = 2;
    spec.limits.cpus = Some(vec![0]);
    spec.limits.memory_max_bytes = Some(256 << 20);
    let t = match start(&spec) {
        Ok(t) => t,
        Err(e) if cgroup_unavailable(&e) => {
            eprintln!("skipping: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let pid = t.pid.unwrap();
    // The master may answer before it has forked every worker: wait (bounded).
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    let mut workers = children_of(pid);
    while workers.len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        workers = children_of(pid);
    }
    assert_eq!(workers.len(), 2, "nginx workers: {workers:?}");
    // Joined before exec, so the forked workers inherit pinning and cgroups.
    for p in std::iter::once(pid).chain(workers.iter().copied()) {
        assert_eq!(status_field(p, "Cpus_allowed_list:"), "0", "pid {p}");
    }
    let procs = std::fs::read_to_string(t.procs_file().unwrap()).unwrap();
    for w in &workers {
        assert!(
            procs.lines().any(|l| l.trim() == w.to_string()),
            "{w} not in cgroup"
        );
    }
    let settings = t.cgroup_settings();
    assert!(settings
        .writes
        .iter()
        .any(|(f, v)| f.ends_with("cpuset.cpus") && v == "0"));
    assert!(settings
        .writes
        .iter()
        .any(|(f, v)| f.contains("memory") && v == &(256u64 << 20).to_string()));
    let record = t.record(&spec.limits);
    assert_eq!(record.kind, TargetKind::Nginx);
    assert!(record.environment.kernel.starts_with("Linux"));
    let dirs = t.cgroup_dirs();
    // cpuset and memory, plus a cpuacct one where v1 mounts that controller alone.
    let cpuacct_alone = std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[2] == "cgroup" && f[3].split(',').any(|o| o == "cpuacct")
        });
    assert_eq!(dirs.len(), 2 + usize::from(cpuacct_alone), "{dirs:?}");
    assert!(t.stop().is_empty());
    for d in dirs {
        assert!(!d.exists(), "{}", d.display());
    }
}

#[test]
fn quota_the_kernel_refuses_is_a_typed_error_and_leaves_no_cgroup() {
    if !nginx_installed() {
        return;
    }
    // 0.5 of a 1 ms period = 500 us of quota, below the kernel's 1 ms minimum.
    let mut spec = TargetSpec::new(TargetKind::Nginx);
    spec.limits.cpu_quota = Some(CpuQuota {
        share_of_one_cpu: 0.5,
        period: Duration::from_millis(1),
    });
    let before = leftover_cgroups();
    match start(&spec) {
        Err(TargetError::LimitRefused { path, value, .. }) => {
            assert!(path.ends_with("cpu.cfs_quota_us") || path.ends_with("cpu.max"));
            assert!(value.starts_with("500"), "{value}");
        }
        Err(e) if cgroup_unavailable(&e) => eprintln!("skipping: {e}"),
        other => panic!("expected LimitRefused, got {other:?}"),
    }
    assert_eq!(leftover_cgroups(), before);
}

/// This process's cgroups under the cpu hierarchy.
fn leftover_cgroups() -> Vec<String> {
    let tag = format!("volley-{}-", std::process::id());
    let mut v: Vec<String> = std::fs::read_dir("/sys/fs/cgroup/cpu")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&tag))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn a_panic_while_running_still_stops_the_target() {
    if !nginx_installed() {
        return;
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let r = std::panic::catch_unwind(move || {
        let t = start(&TargetSpec::new(TargetKind::Nginx)).unwrap();
        tx.send((t.pid.unwrap(), t.dir.clone())).unwrap();
        panic!("study failed mid-run");
    });
    assert!(r.is_err());
    let (pid, dir) = rx.recv().unwrap();
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
    assert!(!dir.exists());
}
