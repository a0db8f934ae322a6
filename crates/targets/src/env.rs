//! The environment recorded with every run (docs/methodology.md: kernel, CPU model, governor,
//! cgroup settings, server versions and configs), so a result can be judged later.

use serde::Serialize;

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
        }
    }
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
    }
}
