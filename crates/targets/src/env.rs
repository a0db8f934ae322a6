//! The environment recorded with every run (docs/methodology.md: kernel, CPU model, governor,
//! cgroup settings, server versions and configs, the host's network settings), so a
//! result can be judged later.

use std::collections::BTreeMap;

use serde::Serialize;

/// The host's kernel settings that shape a web server's figures, recorded with every run
/// (issue 23). The global ones cannot be tuned per namespace (a variant asking for one is
/// refused, `volley_netlab::tune`), so the host's value is what every run, in a lab or
/// not, ran with: socket buffer caps and defaults, the input queue every packet (veth
/// ones too) waits in, TCP's memory pressure thresholds, the file limits. The
/// per-namespace ones are the host's own values, which a target on the host runs with
/// (a variant's lab records its own as read back): the accept and SYN queues' caps, the
/// client's port range and how soon its closed connections free their ports.
pub const HOST_SYSCTLS: &[&str] = &[
    // Global: one value for the machine.
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.rmem_default",
    "net.core.wmem_default",
    "net.core.netdev_max_backlog",
    "net.ipv4.tcp_mem",
    "fs.file-max",
    "fs.nr_open",
    // Per namespace: the host's.
    "net.core.somaxconn",
    "net.ipv4.tcp_max_syn_backlog",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_tw_reuse",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_syncookies",
];

/// The machine a run happened on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Environment {
    /// `uname -srm`, e.g. `Linux 6.1.0 x86_64`.
    pub kernel: String,
    /// First `model name` of /proc/cpuinfo.
    pub cpu_model: Option<String>,
    /// CPUs this process may run on.
    pub cores: usize,
    /// cpufreq governor of cpu0; `None` where cpufreq is not exposed (most VMs).
    pub governor: Option<String>,
    /// [`HOST_SYSCTLS`] as this process reads them (a key the kernel lacks is left out);
    /// a vector's numbers separated by single spaces.
    pub sysctls: BTreeMap<String, String>,
}

impl Environment {
    /// Reads the kernel, CPU and governor of this machine.
    pub fn capture() -> Environment {
        Environment {
            kernel: uname(),
            cpu_model: std::fs::read_to_string("/proc/cpuinfo")
                .ok()
                .and_then(|t| cpu_model(&t)),
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            governor: std::fs::read_to_string(
                "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
            )
            .ok()
            .map(|s| s.trim().to_string()),
            sysctls: HOST_SYSCTLS
                .iter()
                .filter_map(|k| Some((k.to_string(), sysctl(k)?)))
                .collect(),
        }
    }
}

/// A sysctl as this process's namespaces show it, whitespace collapsed
/// (`net.ipv4.tcp_mem` reads "185337\t247117\t370674"); `None` when the kernel lacks it.
fn sysctl(key: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/sys/{}", key.replace('.', "/"))).ok()?;
    Some(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// The `model name` from /proc/cpuinfo text (pure, tested).
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "model name").then(|| v.trim().to_string())
    })
}

fn uname() -> String {
    // SAFETY: utsname is plain data filled in by the kernel; its fields are NUL-terminated.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".into();
    }
    let field = |f: &[libc::c_char]| -> String {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!(
        "{} {} {}",
        field(&u.sysname),
        field(&u.release),
        field(&u.machine)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_model_from_cpuinfo() {
        let t = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n";
        assert_eq!(cpu_model(t).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(cpu_model("processor : 0\n"), None);
    }

    #[test]
    fn capture_reports_this_kernel() {
        let e = Environment::capture();
        assert!(e.kernel.starts_with("Linux "));
        assert!(e.cores >= 1);
        // The host's network settings, as /proc/sys holds them.
        let max = std::fs::read_to_string("/proc/sys/net/core/rmem_max").unwrap();
        assert_eq!(e.sysctls["net.core.rmem_max"], max.trim());
        let mem = &e.sysctls["net.ipv4.tcp_mem"];
        assert_eq!(mem.split(' ').count(), 3, "{mem}");
        assert!(e.sysctls.keys().all(|k| HOST_SYSCTLS.contains(&k.as_str())));
    }
}
