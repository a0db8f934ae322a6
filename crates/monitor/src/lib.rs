//! volley-monitor: samples the target's CPU, memory, context switches, sockets and network
//! on the load's clock.
//!
//! Place in the data flow: beside the engine. A study starts a target (volley-targets),
//! starts a [`Monitor`] on the target's process tree or cgroup with the run's start
//! `Instant` as origin, runs the load, then calls [`Monitor::finish`] and stores the
//! [`MonitorReport`] (time series + summary) next to the run's latency results, so a report
//! can show "server CPU% / packets/s / RSS" beside throughput, as in seed study 003, and
//! compute server CPU-seconds per 1000 requests.
//!
//! Everything is read from `/proc`; the parsers live in [`parse`] and are pure. The sampler
//! runs in its own thread and wakes on `origin + k * interval`, so its samples line up
//! with the engine's per-second windows.
//!
//! [`headroom`] watches the other side: the load generator's own file descriptors and
//! ephemeral ports towards the target, so a run can say when it was close to failing
//! for reasons of its own. [`stall`] is the stall probe beside every load: a sleeper
//! timing its own oversleep and the guest's steal time, so the machine's stalls are
//! told from the generator's, and [`cpu_share`] what others took of each CPU beside it.
#![deny(missing_docs)]

pub mod cpu_share;
pub mod headroom;
pub mod parse;
mod sampler;
mod sockdiag;
pub mod spill;
pub mod stall;

pub use sampler::{Monitor, MonitorConfig, MonitorError, ProcessScope};

use parse::TcpStates;
use serde::{Deserialize, Serialize};

/// One interval of measurements. Rates and percentages are over the interval that ends at
/// `t_ms`; gauges (RSS, processes, fds, sockets) are read at `t_ms`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MonitorSample {
    /// End of the interval, milliseconds after the monitor's origin (the run start).
    pub t_ms: u64,
    /// Length of the interval in milliseconds.
    pub interval_ms: u64,
    /// The target's process tree; `None` when no process is monitored (external URL).
    pub target: Option<TargetSample>,
    /// System-wide CPU, run queue, interrupts and context switches (vmstat's columns).
    pub system: SystemSample,
    /// The monitored interface; `None` if it does not exist.
    pub net: Option<NetSample>,
    /// TCP sockets by state (IPv4 + IPv6), system-wide in this network namespace.
    pub tcp: TcpStates,
}

/// Resource use of the target's processes during one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetSample {
    /// User CPU in percent of one CPU (may exceed 100 on several cores).
    pub cpu_user_pct: f64,
    /// System CPU in percent of one CPU.
    pub cpu_sys_pct: f64,
    /// Sum of the processes' resident sets, in bytes. Shared pages (prefork children) are
    /// counted once per process, as `ps` does, so this overstates real memory use.
    pub rss_bytes: u64,
    /// Number of live processes in the tree or cgroup.
    pub processes: u32,
    /// Number of threads across them.
    pub threads: u64,
    /// Voluntary context switches per second (the server blocked: I/O, epoll_wait).
    pub ctx_voluntary_per_s: f64,
    /// Involuntary context switches per second (preempted: contention or CPU quota).
    pub ctx_involuntary_per_s: f64,
    /// Open file descriptors across the processes (sockets included).
    pub open_fds: u64,
    /// How long the target's threads were runnable but waited for a CPU, ms per second
    /// of the interval, summed over threads (their `schedstat` run delay; two threads
    /// each waiting the whole second give 2000): CPUs held by others, volley or one
    /// another. Beside others' CPU it tells a target the machine starved from one
    /// its load kept busy (docs/methodology.md, "The target's wait for a CPU").
    pub run_wait_ms_per_s: f64,
}

/// System-wide figures, as vmstat prints them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SystemSample {
    /// Runnable tasks (`r`).
    pub run_queue: u64,
    /// Tasks blocked on I/O (`b`).
    pub blocked: u64,
    /// Interrupts per second (`in`).
    pub interrupts_per_s: f64,
    /// Context switches per second (`cs`).
    pub context_switches_per_s: f64,
    /// User CPU, percent of all CPUs (`us`).
    pub cpu_us_pct: f64,
    /// System CPU incl. irq/softirq, percent of all CPUs (`sy`).
    pub cpu_sy_pct: f64,
    /// Idle, percent of all CPUs (`id`).
    pub cpu_id_pct: f64,
    /// I/O wait, percent of all CPUs (`wa`).
    pub cpu_wa_pct: f64,
    /// Steal, percent of all CPUs (`st`): the host ran something else.
    pub cpu_st_pct: f64,
    /// CPUs of the machine.
    pub cpus: u32,
    /// CPU time used by everything outside this volley process and its target, in
    /// percent of one CPU: all CPUs' busy time minus volley's own (getrusage) minus the
    /// target's (its cgroup or tree). Someone else's load, which a target's own CPU
    /// quota never adds to (throttled time is not busy time). `None` when volley's own
    /// time could not be read.
    pub others_cpu_pct: Option<f64>,
    /// CPU time used by the other targets this volley process started (a study's idle
    /// instances: `volley-<pid>-<n>` cgroups other than the target's), in percent of one
    /// CPU: the study's own doing, counted apart from `others_cpu_pct`. `None` when no
    /// cgroup hierarchy could be read.
    pub study_targets_cpu_pct: Option<f64>,
}

/// Traffic on one interface during the interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetSample {
    /// Interface name.
    pub interface: String,
    /// Received packets per second.
    pub rx_packets_per_s: f64,
    /// Transmitted packets per second.
    pub tx_packets_per_s: f64,
    /// Received bytes per second.
    pub rx_bytes_per_s: f64,
    /// Transmitted bytes per second.
    pub tx_bytes_per_s: f64,
}

/// The whole run in one row: the columns of seed 003's resource table plus CPU-seconds.
/// Rates are computed from the first and last readings (not a mean of per-interval
/// rates), so they are exact for the whole run whatever the interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MonitorSummary {
    /// Wall time covered, in seconds.
    pub duration_s: f64,
    /// Target user CPU over the run, percent of one CPU.
    pub cpu_user_pct: Option<f64>,
    /// Target system CPU over the run, percent of one CPU.
    pub cpu_sys_pct: Option<f64>,
    /// Target user + system CPU-seconds over the run, exact rather than in clock ticks:
    /// the cgroup's counter where the target has one, else per-thread `schedstat` sums
    /// over the tree plus the children each process reaped (workers that exited). The
    /// user/sys percentages above come from ticks and may round a short run down to 0.
    pub server_cpu_seconds: Option<f64>,
    /// Largest summed RSS seen, in bytes.
    pub max_rss_bytes: Option<u64>,
    /// `max_rss_bytes` as a percentage of `MemTotal`.
    pub mem_pct: Option<f64>,
    /// Transmitted packets per second on the interface over the run.
    pub tx_packets_per_s: Option<f64>,
    /// Transmitted bytes per second on the interface over the run.
    pub tx_bytes_per_s: Option<f64>,
    /// Largest TIME_WAIT count seen: the port-exhaustion headroom check.
    pub max_time_wait: u32,
    /// CPU used by everything outside volley and its target over the run, percent of
    /// one CPU (see [`SystemSample::others_cpu_pct`]).
    #[serde(default)]
    pub others_cpu_pct: Option<f64>,
    /// CPU used by the other targets volley started over the run, percent of one CPU
    /// (see [`SystemSample::study_targets_cpu_pct`]).
    #[serde(default)]
    pub study_targets_cpu_pct: Option<f64>,
    /// The target's threads' wait for a CPU over the run, ms per second (see
    /// [`TargetSample::run_wait_ms_per_s`]); `None` without a process to read.
    #[serde(default)]
    pub target_run_wait_ms_per_s: Option<f64>,
    /// Steal over the run, percent of one CPU.
    #[serde(default)]
    pub steal_pct: Option<f64>,
    /// CPUs of the machine.
    #[serde(default)]
    pub cpus: u32,
}

impl MonitorSummary {
    /// Server CPU-milliseconds per 1000 requests (`cpu_s / requests * 1e6`), the
    /// efficiency figure that compares servers independently of how hard they were driven.
    /// `None` without a process to measure or with no requests.
    pub fn cpu_ms_per_1000_requests(&self, requests: u64) -> Option<f64> {
        let cpu_s = self.server_cpu_seconds?;
        (requests > 0).then(|| cpu_s / requests as f64 * 1_000_000.0)
    }
}

/// What [`Monitor::finish`] returns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MonitorReport {
    /// One sample per interval, in time order.
    pub samples: Vec<MonitorSample>,
    /// The whole run.
    pub summary: MonitorSummary,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_per_1000_requests() {
        let s = MonitorSummary {
            duration_s: 2.0,
            cpu_user_pct: Some(30.0),
            cpu_sys_pct: Some(20.0),
            server_cpu_seconds: Some(1.0),
            max_rss_bytes: None,
            mem_pct: None,
            tx_packets_per_s: None,
            tx_bytes_per_s: None,
            max_time_wait: 0,
            others_cpu_pct: None,
            study_targets_cpu_pct: None,
            target_run_wait_ms_per_s: None,
            steal_pct: None,
            cpus: 2,
        };
        assert_eq!(s.cpu_ms_per_1000_requests(10_000), Some(100.0));
        assert_eq!(s.cpu_ms_per_1000_requests(0), None);
        let none = MonitorSummary {
            server_cpu_seconds: None,
            ..s
        };
        assert_eq!(none.cpu_ms_per_1000_requests(10), None);
    }
}
