//! The sampling thread: reads `/proc` into cumulative snapshots and turns each pair of
//! consecutive snapshots into a [`MonitorSample`] (a pure step, tested without `/proc`).

use crate::cpu_share::CpuSources;
use crate::parse::{self, NetDev, SysStat, TcpStates};
use crate::{MonitorReport, MonitorSample, MonitorSummary, NetSample, SystemSample, TargetSample};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Which processes count as "the target".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessScope {
    /// No process: only system-wide figures (an external target without a pid).
    None,
    /// `root_pid` and all its descendants, found by walking `/proc/*/stat` parents. The
    /// CPU time of a descendant that exited stays in the total through its reaper's
    /// children counters, as long as the reaper is in the tree (a prefork parent, nginx's
    /// master).
    Tree {
        /// The server's main process.
        root_pid: u32,
    },
    /// The pids listed in a cgroup's `cgroup.procs` (catches processes that re-parent or
    /// daemonise away from the tree). CPU time comes from the cgroup's own counter
    /// (`cpu.stat` `usage_usec` on v2, `cpuacct.usage` where cpuacct shares the directory
    /// on v1), which keeps every process that ever ran in it, exited or not; without one,
    /// from the processes as for `Tree`.
    Cgroup {
        /// The server's main process.
        root_pid: u32,
        /// Path of the cgroup's `cgroup.procs` file.
        procs_file: PathBuf,
    },
}

/// How and what to sample.
#[derive(Debug, Clone)]
pub struct MonitorConfig {
    /// Time between samples; 1 s by default, at least 100 ms.
    pub interval: Duration,
    /// Interface whose traffic is reported (`lo` for loopback benchmarks).
    pub interface: String,
    /// The target's processes.
    pub scope: ProcessScope,
    /// The load's clock: sample `k` is taken at `origin + k * interval`.
    pub origin: Instant,
}

impl MonitorConfig {
    /// Samples every second on `lo`, with `origin` as time zero.
    pub fn new(scope: ProcessScope, origin: Instant) -> Self {
        MonitorConfig {
            interval: Duration::from_secs(1),
            interface: "lo".to_string(),
            scope,
            origin,
        }
    }
}

/// Why a monitor could not start.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    /// The interval is below the 100 ms floor, where `/proc` tick resolution (10 ms) makes
    /// CPU percentages too coarse to mean anything.
    #[error("monitor interval {0:?} is below the 100 ms minimum; use 100ms or more")]
    IntervalTooShort(Duration),
    /// `/proc/stat` could not be read or parsed: not Linux, or /proc not mounted.
    #[error("cannot read /proc/stat ({0}); the monitor needs Linux with /proc mounted")]
    NoProcStat(#[source] std::io::Error),
    /// The sampling thread could not be created.
    #[error("cannot start the monitor thread: {0}")]
    Thread(std::io::Error),
}

/// A running monitor. [`Monitor::finish`] stops it and returns what it saw; dropping it
/// without `finish` stops the thread too.
pub struct Monitor {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<JoinHandle<(Vec<MonitorSample>, Snapshot, Snapshot)>>,
    mem_total_bytes: Option<u64>,
    has_target: bool,
}

impl Monitor {
    /// Takes a first reading now and starts the sampling thread.
    pub fn start(config: MonitorConfig) -> Result<Monitor, MonitorError> {
        if config.interval < Duration::from_millis(100) {
            return Err(MonitorError::IntervalTooShort(config.interval));
        }
        let reader = Reader::new(config.scope.clone(), config.interface.clone());
        let first = reader.snapshot()?;
        let mem_total_bytes = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|t| parse::parse_mem_total_bytes(&t));
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let stop2 = Arc::clone(&stop);
        let has_target = config.scope != ProcessScope::None;
        let handle = std::thread::Builder::new()
            .name("volley-monitor".into())
            .spawn(move || run(reader, config, first, &stop2))
            .map_err(MonitorError::Thread)?;
        Ok(Monitor {
            stop,
            handle: Some(handle),
            mem_total_bytes,
            has_target,
        })
    }

    /// Stops sampling (taking a last, possibly shorter, sample) and returns the series and
    /// the run summary.
    pub fn finish(mut self) -> MonitorReport {
        let (samples, first, last) = self.stop_thread();
        let summary = summarize(
            &samples,
            &first,
            &last,
            self.mem_total_bytes,
            self.has_target,
        );
        MonitorReport { samples, summary }
    }

    fn stop_thread(&mut self) -> (Vec<MonitorSample>, Snapshot, Snapshot) {
        {
            let (lock, cvar) = &*self.stop;
            *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
            cvar.notify_all();
        }
        match self.handle.take().map(|h| h.join()) {
            Some(Ok(r)) => r,
            // The thread only panics on a bug; report an empty run rather than panic again.
            _ => (Vec::new(), Snapshot::empty(), Snapshot::empty()),
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        if self.handle.is_some() {
            let _ = self.stop_thread();
        }
    }
}

fn run(
    reader: Reader,
    config: MonitorConfig,
    first: Snapshot,
    stop: &(Mutex<bool>, Condvar),
) -> (Vec<MonitorSample>, Snapshot, Snapshot) {
    let mut samples = crate::spill::Spill::<MonitorSample>::new();
    let mut prev = first.clone();
    // Next tick on the load's clock strictly after the first reading.
    let elapsed = first.at.saturating_duration_since(config.origin);
    let mut k = (elapsed.as_nanos() / config.interval.as_nanos()) as u32 + 1;
    loop {
        let deadline = config.origin + config.interval * k;
        let stopping = {
            let (lock, cvar) = stop;
            let mut stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
            while !*stopped {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                stopped = cvar
                    .wait_timeout(stopped, deadline - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            *stopped
        };
        if let Ok(snap) = reader.snapshot() {
            // A final sample shorter than 10 ms (one clock tick) would be pure noise.
            if !stopping || snap.at.duration_since(prev.at) >= Duration::from_millis(10) {
                samples.push(diff(&prev, &snap, config.origin, &config.interface));
                prev = snap;
            }
        }
        if stopping {
            return (samples.finish(), first, prev);
        }
        // Skip ticks missed while the machine was overloaded rather than bunching them.
        let now_k = (Instant::now()
            .saturating_duration_since(config.origin)
            .as_nanos()
            / config.interval.as_nanos()) as u32;
        k = (k + 1).max(now_k + 1);
    }
}

/// Cumulative counters of the target's processes at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TreeReading {
    /// Exact CPU time (user + system), the source of `server_cpu_seconds`: the cgroup's
    /// counter, or per process the larger of its threads' `schedstat` sum and its ticks,
    /// plus its reaped children's ticks.
    pub cpu_ns: u64,
    pub user_ticks: u64,
    pub sys_ticks: u64,
    pub rss_bytes: u64,
    pub processes: u32,
    pub threads: u64,
    pub ctx_voluntary: u64,
    pub ctx_involuntary: u64,
    pub open_fds: u64,
    /// Each live thread's time runnable but waiting for a CPU (its `schedstat` run
    /// delay, cumulative since it started), ns, by thread id. Kept per thread, not
    /// summed: a wait is the growth of one thread's counter between two readings
    /// ([`run_wait_ns`]). A sum would count a thread's whole past the first time it is
    /// seen: Apache prefork's 512 processes, forked at once beside seven other
    /// instances, came into the tree with seconds of start-up wait each, and a study
    /// read "the target waited up to 742203 ms in a second for a CPU".
    pub run_delay_ns: BTreeMap<u32, u64>,
}

/// The time the threads of `y` waited for a CPU since reading `x`, ns: each thread's
/// growth of its counter, for threads in both readings. A thread born since `x` counts
/// from the next interval on (its wait before that is start-up, not the target's under
/// load); one that exited takes its last interval with it.
pub(crate) fn run_wait_ns(x: &TreeReading, y: &TreeReading) -> u64 {
    y.run_delay_ns
        .iter()
        .filter_map(|(tid, now)| Some(now.saturating_sub(*x.run_delay_ns.get(tid)?)))
        .sum()
}

/// Every cumulative counter the monitor reads, at one instant.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub at: Instant,
    pub ticks_per_s: f64,
    pub tree: Option<TreeReading>,
    pub sys: SysStat,
    pub net: Option<NetDev>,
    pub tcp: TcpStates,
    /// This volley process's CPU time (every thread), ns.
    pub own_cpu_ns: Option<u64>,
    /// The CPU of the other targets this process started (a study's other instances,
    /// [`crate::cpu_share::CpuSources::study_targets_ns`]), ns.
    pub study_ns: Option<u64>,
    /// How long the CPU counters (the machine's, volley's own, the targets') took to
    /// read: time in which the machine's counter ran on and the others' did not.
    pub spread: Duration,
}

impl Snapshot {
    fn empty() -> Snapshot {
        Snapshot {
            at: Instant::now(),
            ticks_per_s: 100.0,
            tree: None,
            sys: SysStat::default(),
            net: None,
            tcp: TcpStates::default(),
            own_cpu_ns: None,
            study_ns: None,
            spread: Duration::ZERO,
        }
    }
}

struct Reader {
    scope: ProcessScope,
    interface: String,
    ticks_per_s: f64,
    page_bytes: u64,
    /// The cgroup's CPU counter, chosen once so every snapshot reads the same source.
    cgroup_cpu_file: Option<PathBuf>,
    /// Where the other targets' cgroups are, and the name of the target's own (left out).
    study: (CpuSources, Option<String>),
}

impl Reader {
    fn new(scope: ProcessScope, interface: String) -> Reader {
        // SAFETY: sysconf only reads a system constant.
        let (tck, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        Reader {
            interface,
            ticks_per_s: if tck > 0 { tck as f64 } else { 100.0 },
            page_bytes: if page > 0 { page as u64 } else { 4096 },
            cgroup_cpu_file: cgroup_cpu_file(&scope),
            study: (CpuSources::of_this_process(), own_cgroup_name(&scope)),
            scope,
        }
    }

    fn snapshot(&self) -> Result<Snapshot, MonitorError> {
        let at = Instant::now();
        let stat = std::fs::read_to_string("/proc/stat").map_err(MonitorError::NoProcStat)?;
        let sys = parse::parse_sys_stat(&stat).ok_or_else(|| {
            MonitorError::NoProcStat(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "no cpu line",
            ))
        })?;
        // Every CPU counter is read here, together, right after /proc/stat: the machine's
        // busy time less volley's own and the targets' is "others", so a counter read
        // later than the machine's leaves the time between in "others". In seed 001's
        // knob search (2026-11-29, 13 instances in namespaces, a connection per request)
        // a step's first reading took 1.6-3 s, its tree and volley's own CPU read at its
        // end: the first sample read "others took 129-181% of 2 CPU(s)" beside a target
        // read as idle, and the step was marked machine-busy. Which read was slow was not
        // measured; the socket states are the likely one (/proc/net/tcp walks every
        // socket on the machine, every namespace's TIME_WAIT included), so they come
        // last, and a reading whose counters spread anyway gives no "others".
        let own_cpu_ns = own_cpu_ns();
        let study_ns = self.study.0.study_targets_ns(self.study.1.as_deref());
        let tree = match &self.scope {
            ProcessScope::None => None,
            ProcessScope::Tree { root_pid } => Some(self.read_tree(&descendants(*root_pid))),
            ProcessScope::Cgroup {
                root_pid,
                procs_file,
            } => {
                let mut pids = std::fs::read_to_string(procs_file)
                    .map(|t| parse::parse_pid_list(&t))
                    .unwrap_or_default();
                if !pids.contains(root_pid) {
                    pids.push(*root_pid);
                }
                let mut r = self.read_tree(&pids);
                if let Some(f) = &self.cgroup_cpu_file {
                    r.cpu_ns = std::fs::read_to_string(f)
                        .ok()
                        .and_then(|t| parse::parse_cgroup_cpu_ns(&t))
                        .unwrap_or(0);
                }
                Some(r)
            }
        };
        let spread = at.elapsed();
        let net = std::fs::read_to_string("/proc/net/dev")
            .ok()
            .and_then(|t| parse::parse_net_dev(&t, &self.interface));
        let tcp = TcpStates::sample(|f| std::fs::read_to_string(f).ok());
        Ok(Snapshot {
            at,
            ticks_per_s: self.ticks_per_s,
            tree,
            sys,
            net,
            tcp,
            own_cpu_ns,
            study_ns,
            spread,
        })
    }

    /// Sums the processes' counters. Each process adds its reaped children's time too
    /// (not only the root's): a worker reaped by an intermediate process in the scope
    /// would otherwise vanish from the total when it exits.
    fn read_tree(&self, pids: &[u32]) -> TreeReading {
        let ns_per_tick = 1e9 / self.ticks_per_s;
        let mut r = TreeReading::default();
        for &pid in pids {
            let Some(st) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|t| parse::parse_proc_stat(&t))
            else {
                continue; // exited since it was listed
            };
            r.processes += 1;
            r.user_ticks += st.utime_ticks + st.cutime_ticks;
            r.sys_ticks += st.stime_ticks + st.cstime_ticks;
            // Ticks are truncated per process (a worker with 9 ms of CPU shows 0), so the
            // exact per-thread figure wins; ticks still cover threads that have exited.
            let own_ticks_ns = ((st.utime_ticks + st.stime_ticks) as f64 * ns_per_tick) as u64;
            let children_ns = ((st.cutime_ticks + st.cstime_ticks) as f64 * ns_per_tick) as u64;
            let threads_ns = threads_schedstat_ns(pid, &mut r.run_delay_ns);
            r.cpu_ns += threads_ns.max(own_ticks_ns) + children_ns;
            r.threads += st.threads;
            r.rss_bytes += st.rss_pages * self.page_bytes;
            if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
                let c = parse::parse_status_ctxt(&status);
                r.ctx_voluntary += c.voluntary;
                r.ctx_involuntary += c.involuntary;
            }
            if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
                r.open_fds += dir.count() as u64;
            }
        }
        r
    }
}

/// The cgroup's CPU counter next to its `cgroup.procs`, if it has one that parses.
fn cgroup_cpu_file(scope: &ProcessScope) -> Option<PathBuf> {
    let ProcessScope::Cgroup { procs_file, .. } = scope else {
        return None;
    };
    let dir = procs_file.parent()?;
    ["cpu.stat", "cpuacct.usage"]
        .iter()
        .map(|f| dir.join(f))
        .find(|f| {
            std::fs::read_to_string(f)
                .ok()
                .and_then(|t| parse::parse_cgroup_cpu_ns(&t))
                .is_some()
        })
}

/// The name of the cgroup volley made for the target (`volley-<pid>-<n>`, the directory
/// of its `cgroup.procs`), the same in every hierarchy it has one in.
fn own_cgroup_name(scope: &ProcessScope) -> Option<String> {
    let ProcessScope::Cgroup { procs_file, .. } = scope else {
        return None;
    };
    Some(
        procs_file
            .parent()?
            .file_name()?
            .to_string_lossy()
            .into_owned(),
    )
}

/// Exact on-CPU nanoseconds of a process's live threads (0 if it has exited); each
/// thread's time runnable but waiting for a CPU goes into `waits` by thread id.
fn threads_schedstat_ns(pid: u32, waits: &mut BTreeMap<u32, u64>) -> u64 {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    let mut cpu = 0;
    for t in dir.flatten() {
        let Ok(text) = std::fs::read_to_string(t.path().join("schedstat")) else {
            continue; // exited since it was listed
        };
        cpu += parse::parse_schedstat_ns(&text).unwrap_or(0);
        let tid = t.file_name().to_str().and_then(|n| n.parse().ok());
        if let (Some(tid), Some(wait)) = (tid, parse::parse_schedstat_wait_ns(&text)) {
            waits.insert(tid, wait);
        }
    }
    cpu
}

/// `root` and every process whose parent chain leads to it.
fn descendants(root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(st) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|t| parse::parse_proc_stat(&t))
            {
                children.entry(st.ppid).or_default().push(pid);
            }
        }
    }
    tree_from(root, &children)
}

/// Breadth-first walk of a parent -> children map (pure, tested).
fn tree_from(root: u32, children: &HashMap<u32, Vec<u32>>) -> Vec<u32> {
    let mut out = vec![root];
    let mut seen: HashSet<u32> = HashSet::from([root]);
    let mut i = 0;
    while i < out.len() {
        if let Some(kids) = children.get(&out[i]) {
            for &k in kids {
                if seen.insert(k) {
                    out.push(k);
                }
            }
        }
        i += 1;
    }
    out
}

/// CPU time (user + system) of this whole process, ns (getrusage RUSAGE_SELF).
fn own_cpu_ns() -> Option<u64> {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return None;
    }
    let ns = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1_000;
    Some(ns(ru.ru_utime) + ns(ru.ru_stime))
}

/// Percent of one CPU used by the other targets volley started between two snapshots
/// (`None` when not read).
fn study_pct(a: &Snapshot, b: &Snapshot, secs: f64) -> Option<f64> {
    let ns = b.study_ns?.checked_sub(a.study_ns?)?;
    (secs > 0.0).then(|| ns as f64 / 1e9 / secs * 100.0)
}

/// The longest a snapshot's CPU counters may take to read, as a share of the interval,
/// for [`others_pct`] to give a figure: 2% of a second at most misplaces 20 ms a CPU,
/// a fifth of the 10% share that marks a machine busy.
const MAX_SPREAD_SHARE: f64 = 0.02;

/// Percent of one CPU used by everything but this process, its target and the other
/// targets it started between two snapshots: the machine's busy ticks (user + system,
/// steal, idle and interrupt work excluded) minus volley's own CPU minus the targets',
/// never below zero.
///
/// Interrupt work (irq and softirq ticks) is left out: the kernel charges it to no
/// task, and on a load machine it is mostly the load's own packets (loopback runs the
/// receive path in softirq). Counted, it made the load look like a neighbour: Apache
/// prefork at 6,400 new connections a second read "others took 12-16% of 2 CPU(s)"
/// with nothing else running, and a capacity search could never judge the step where
/// the server failed (2026-11-28). A neighbour's own packets are left out with it: a
/// neighbour busy only in interrupts is not seen.
///
/// No figure when either snapshot's CPU counters took over [`MAX_SPREAD_SHARE`] of the
/// interval to read: the machine's busy time read first ran on while volley's and the
/// targets' were still to be read, and the difference would be counted as others'.
fn others_pct(a: &Snapshot, b: &Snapshot, secs: f64) -> Option<f64> {
    let (own_a, own_b) = (a.own_cpu_ns?, b.own_cpu_ns?);
    if secs <= 0.0 || a.spread.max(b.spread).as_secs_f64() > MAX_SPREAD_SHARE * secs {
        return None;
    }
    let ns_per_tick = 1e9 / b.ticks_per_s;
    let busy = |s: &SysStat| {
        (s.user_ticks + s.system_ticks.saturating_sub(s.irq_ticks)) as f64 * ns_per_tick
    };
    let target_ns = match (&a.tree, &b.tree) {
        (Some(x), Some(y)) => y.cpu_ns.saturating_sub(x.cpu_ns) as f64,
        _ => 0.0,
    };
    let own_ns = own_b.saturating_sub(own_a) as f64;
    let study_ns = study_pct(a, b, secs).unwrap_or(0.0) / 100.0 * secs * 1e9;
    let others_ns = (busy(&b.sys) - busy(&a.sys)).max(0.0) - own_ns - target_ns - study_ns;
    Some(others_ns.max(0.0) / 1e9 / secs * 100.0)
}

fn per_s(delta: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        delta as f64 / secs
    } else {
        0.0
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole > 0 {
        part as f64 * 100.0 / whole as f64
    } else {
        0.0
    }
}

/// One sample from two consecutive snapshots. Counters that went backwards (a process
/// left the tree and took its counters with it) count as zero for that interval.
pub(crate) fn diff(a: &Snapshot, b: &Snapshot, origin: Instant, iface: &str) -> MonitorSample {
    let dt = b.at.saturating_duration_since(a.at);
    let secs = dt.as_secs_f64();
    let target = match (&a.tree, &b.tree) {
        (Some(x), Some(y)) => Some(TargetSample {
            cpu_user_pct: per_s(y.user_ticks.saturating_sub(x.user_ticks), secs) / b.ticks_per_s
                * 100.0,
            cpu_sys_pct: per_s(y.sys_ticks.saturating_sub(x.sys_ticks), secs) / b.ticks_per_s
                * 100.0,
            rss_bytes: y.rss_bytes,
            processes: y.processes,
            threads: y.threads,
            ctx_voluntary_per_s: per_s(y.ctx_voluntary.saturating_sub(x.ctx_voluntary), secs),
            ctx_involuntary_per_s: per_s(y.ctx_involuntary.saturating_sub(x.ctx_involuntary), secs),
            open_fds: y.open_fds,
            run_wait_ms_per_s: per_s(run_wait_ns(x, y), secs) / 1e6,
        }),
        _ => None,
    };
    let total = b.sys.total_ticks.saturating_sub(a.sys.total_ticks);
    let system = SystemSample {
        run_queue: b.sys.procs_running,
        blocked: b.sys.procs_blocked,
        interrupts_per_s: per_s(b.sys.interrupts.saturating_sub(a.sys.interrupts), secs),
        context_switches_per_s: per_s(
            b.sys
                .context_switches
                .saturating_sub(a.sys.context_switches),
            secs,
        ),
        cpu_us_pct: pct(b.sys.user_ticks.saturating_sub(a.sys.user_ticks), total),
        cpu_sy_pct: pct(b.sys.system_ticks.saturating_sub(a.sys.system_ticks), total),
        cpu_id_pct: pct(b.sys.idle_ticks.saturating_sub(a.sys.idle_ticks), total),
        cpu_wa_pct: pct(b.sys.iowait_ticks.saturating_sub(a.sys.iowait_ticks), total),
        cpu_st_pct: pct(b.sys.steal_ticks.saturating_sub(a.sys.steal_ticks), total),
        cpus: b.sys.cpus,
        others_cpu_pct: others_pct(a, b, secs),
        study_targets_cpu_pct: study_pct(a, b, secs),
    };
    let net = match (a.net, b.net) {
        (Some(x), Some(y)) => Some(NetSample {
            interface: iface.to_string(),
            rx_packets_per_s: per_s(y.rx_packets.saturating_sub(x.rx_packets), secs),
            tx_packets_per_s: per_s(y.tx_packets.saturating_sub(x.tx_packets), secs),
            rx_bytes_per_s: per_s(y.rx_bytes.saturating_sub(x.rx_bytes), secs),
            tx_bytes_per_s: per_s(y.tx_bytes.saturating_sub(x.tx_bytes), secs),
        }),
        _ => None,
    };
    MonitorSample {
        t_ms: b.at.saturating_duration_since(origin).as_millis() as u64,
        interval_ms: dt.as_millis() as u64,
        target,
        system,
        net,
        tcp: b.tcp,
    }
}

/// The run summary from the first and last snapshots (exact whole-run rates) and the
/// series (maxima).
pub(crate) fn summarize(
    samples: &[MonitorSample],
    first: &Snapshot,
    last: &Snapshot,
    mem_total_bytes: Option<u64>,
    has_target: bool,
) -> MonitorSummary {
    let whole = diff(first, last, first.at, "");
    let secs = last.at.saturating_duration_since(first.at).as_secs_f64();
    let cpu_seconds = match (&first.tree, &last.tree) {
        (Some(x), Some(y)) if has_target => Some(y.cpu_ns.saturating_sub(x.cpu_ns) as f64 / 1e9),
        _ => None,
    };
    let max_rss = samples
        .iter()
        .filter_map(|s| s.target.as_ref().map(|t| t.rss_bytes))
        .chain(first.tree.as_ref().map(|t| t.rss_bytes))
        .max()
        .filter(|_| has_target);
    MonitorSummary {
        duration_s: secs,
        cpu_user_pct: whole.target.as_ref().map(|t| t.cpu_user_pct),
        cpu_sys_pct: whole.target.as_ref().map(|t| t.cpu_sys_pct),
        server_cpu_seconds: cpu_seconds,
        max_rss_bytes: max_rss,
        mem_pct: match (max_rss, mem_total_bytes) {
            (Some(r), Some(m)) if m > 0 => Some(r as f64 * 100.0 / m as f64),
            _ => None,
        },
        tx_packets_per_s: whole.net.as_ref().map(|n| n.tx_packets_per_s),
        tx_bytes_per_s: whole.net.as_ref().map(|n| n.tx_bytes_per_s),
        max_time_wait: samples.iter().map(|s| s.tcp.time_wait).max().unwrap_or(0),
        others_cpu_pct: whole.system.others_cpu_pct,
        study_targets_cpu_pct: whole.system.study_targets_cpu_pct,
        target_run_wait_ms_per_s: whole
            .target
            .as_ref()
            .filter(|_| has_target)
            .map(|t| t.run_wait_ms_per_s),
        steal_pct: (secs > 0.0).then(|| {
            last.sys.steal_ticks.saturating_sub(first.sys.steal_ticks) as f64
                / last.ticks_per_s
                / secs
                * 100.0
        }),
        cpus: last.sys.cpus,
    }
}

#[cfg(test)]
#[path = "sampler_tests.rs"]
mod tests;
