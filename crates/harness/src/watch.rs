//! One load against a managed target, watched: the monitor on the target's process tree
//! or cgroup (on the load's clock), the CFS throttling counters before and after, and a
//! death watch that ends the load as soon as the target dies (rather than measuring
//! seconds of refused connections) or an outside stop is asked for (Ctrl-C).
//!
//! Place in the flow: around the measured run. The caller's closure runs the load (a
//! [`crate::measure`], with whatever comes before it: a cold request, a pre-flight);
//! [`watch`] returns its result with the server's side of the run beside it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use volley_metrics::summary::MachineLoad;
use volley_metrics::Summary;
use volley_monitor::{Monitor, MonitorConfig, MonitorReport, ProcessScope};
use volley_targets::{RunningTarget, TargetDied, ThrottleStats};

use crate::HarnessError;

/// How often the death watch looks at the target and the outside stop flag.
const WATCH_EVERY: Duration = Duration::from_millis(50);

/// What to watch and how.
pub struct Watch<'a> {
    /// The target under load.
    pub target: &'a RunningTarget,
    /// Time between monitor samples.
    pub monitor_interval: Duration,
    /// A monitor that cannot start fails the run (`volley bench --target`, which prints
    /// the server's figures) rather than leaving it without server figures (a study step
    /// records their absence).
    pub monitor_required: bool,
    /// The load's own stop flag (its `LoadConfig::stop_flag`): set when the target dies
    /// or `outside_stop` is set.
    pub load_stop: Arc<AtomicBool>,
    /// A stop asked from outside (Ctrl-C); a target stopped by it did not die.
    pub outside_stop: Arc<AtomicBool>,
    /// The load's warm-up ([`volley_engine::StopCondition::warmup`]): the monitor and the
    /// throttling counters start this long after the load closure does, at the boundary
    /// the load's figures start from, so the server's figures cover the same seconds
    /// and a monitor sample's `t_ms` counts from the load's first measured second.
    pub warmup: Duration,
}

/// The load's result with the server's side of it.
pub struct Watched<T> {
    /// What the load closure returned.
    pub load: T,
    /// The monitor's report (`None` when it could not start and was not required).
    pub monitor: Option<MonitorReport>,
    /// Throttling during the load (delta of the cgroup's counters); `None` without a quota.
    pub throttling: Option<ThrottleStats>,
    /// The target died during the load.
    pub died: Option<TargetDied>,
}

impl<T> Watched<T> {
    /// The same server's side with the load's result turned into another value.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Watched<U> {
        Watched {
            load: f(self.load),
            monitor: self.monitor,
            throttling: self.throttling,
            died: self.died,
        }
    }
}

/// The monitor's view of `target`: its cgroup when volley made one, else its process
/// tree, else nothing (an external URL).
pub fn scope_of(target: &RunningTarget) -> ProcessScope {
    match (target.pid, target.procs_file()) {
        (Some(root_pid), Some(procs_file)) => ProcessScope::Cgroup {
            root_pid,
            procs_file,
        },
        (Some(root_pid), None) => ProcessScope::Tree { root_pid },
        (None, _) => ProcessScope::None,
    }
}

/// Runs `load` with the monitor, the throttling counters and the death watch around it.
pub fn watch<T>(w: &Watch<'_>, load: impl FnOnce() -> T) -> Result<Watched<T>, HarnessError> {
    let target = w.target;
    let start_monitor = || {
        let throttle0 = target.throttle_stats();
        let mut mcfg = MonitorConfig::new(scope_of(target), Instant::now());
        mcfg.interval = w.monitor_interval;
        (Monitor::start(mcfg), throttle0)
    };
    // Without a warm-up the monitor starts before the load, so a required one that
    // cannot start fails the run before any request is sent.
    let early = match w.warmup.is_zero().then(start_monitor) {
        Some((Err(e), _)) if w.monitor_required => return Err(HarnessError::Monitor(e)),
        early => early,
    };
    let done = AtomicBool::new(false);
    let (load, died, late) = std::thread::scope(|s| {
        let watcher = s.spawn(|| death_watch(w, &done));
        let (boundary, done) = (Instant::now() + w.warmup, &done);
        let late = (!w.warmup.is_zero())
            .then(|| s.spawn(move || crate::rest::wait_until(boundary, done).then(start_monitor)));
        let out = load();
        done.store(true, Ordering::Relaxed);
        let late = late.and_then(|h| h.join().ok().flatten());
        (out, watcher.join().unwrap_or(None), late)
    });
    let (monitor, throttle0) = match early.or(late) {
        Some((Ok(m), t)) => (Some(m.finish()), t),
        Some((Err(e), _)) if w.monitor_required => return Err(HarnessError::Monitor(e)),
        Some((Err(_), t)) => (None, t),
        None => (None, None),
    };
    let throttling = match (throttle0, target.throttle_stats()) {
        (Some(a), Some(b)) => Some(b.since(&a)),
        _ => None,
    };
    // A death the watcher missed (in its last tick), unless the outside stop ended it.
    let died = died.or_else(|| {
        if w.outside_stop.load(Ordering::Relaxed) {
            None
        } else {
            target.check().err()
        }
    });
    Ok(Watched {
        load,
        monitor,
        throttling,
        died,
    })
}

/// Until `done`: stops the load when the outside stop is set (no death) or the target
/// dies (the death returned).
fn death_watch(w: &Watch<'_>, done: &AtomicBool) -> Option<TargetDied> {
    while !done.load(Ordering::Relaxed) {
        if w.outside_stop.load(Ordering::Relaxed) {
            w.load_stop.store(true, Ordering::Relaxed);
            return None;
        }
        if let Err(d) = w.target.check() {
            w.load_stop.store(true, Ordering::Relaxed);
            return Some(d);
        }
        std::thread::sleep(WATCH_EVERY);
    }
    None
}

/// Fills in what someone else took of the machine during the run, from the monitor
/// that watched it: the whole run's [`Summary::machine`] and each second's
/// `others_busy_share` and the target's `target_wait_ms` (the monitor's samples whose
/// middle falls in that second, weighted by their length). A target its cgroup
/// `throttling` shows was throttled gets no `target_wait_ms`: the kernel keeps a
/// throttled task queued, so its run delay holds the quota volley set, not a
/// neighbour's doing (a wait of 569 ms in a second was read from nginx at a 5% quota). Steal plus the CPU of processes outside volley and its
/// target: the target's own CPU quota, which volley set, never makes the machine busy,
/// nor do the other targets volley started (a study's idle instances, kept apart in
/// `MachineLoad::study_cores`).
pub fn fill_machine(
    summary: &mut Summary,
    monitor: Option<&MonitorReport>,
    throttling: Option<&ThrottleStats>,
) {
    let throttled = throttling.is_some_and(|t| t.nr_throttled > 0);
    let Some(r) = monitor else { return };
    let cpus = r.summary.cpus;
    if let Some(others) = r.summary.others_cpu_pct {
        summary.machine = Some(MachineLoad {
            cpus,
            others_cores: others / 100.0,
            steal_cores: r.summary.steal_pct.unwrap_or(0.0) / 100.0,
            study_cores: r.summary.study_targets_cpu_pct.unwrap_or(0.0) / 100.0,
        });
    }
    for sec in &mut summary.seconds {
        let (lo, hi) = (sec.second * 1000, (sec.second + 1) * 1000);
        let in_second = |m: &&volley_monitor::MonitorSample| {
            let mid = m.t_ms.saturating_sub(m.interval_ms / 2);
            (lo..hi).contains(&mid) && m.interval_ms > 0
        };
        sec.others_busy_share = weighted(r.samples.iter().filter(in_second), |m| {
            let others = m.system.others_cpu_pct?;
            let load = MachineLoad {
                cpus: m.system.cpus,
                others_cores: others / 100.0,
                steal_cores: m.system.cpu_st_pct * f64::from(m.system.cpus) / 100.0,
                study_cores: m.system.study_targets_cpu_pct.unwrap_or(0.0) / 100.0,
            };
            Some(load.busy_share())
        });
        // The target's wait for a CPU, per second of its samples: the second's own.
        sec.target_wait_ms = weighted(r.samples.iter().filter(in_second), |m| {
            m.target.as_ref().map(|t| t.run_wait_ms_per_s)
        })
        .filter(|_| !throttled);
    }
}

/// The mean of `value` over `samples` that have one, weighted by their length.
fn weighted<'a>(
    samples: impl Iterator<Item = &'a volley_monitor::MonitorSample>,
    value: impl Fn(&volley_monitor::MonitorSample) -> Option<f64>,
) -> Option<f64> {
    let (weight, sum) = samples.fold((0.0, 0.0), |(w, s), m| match value(m) {
        Some(v) => (w + m.interval_ms as f64, s + v * m.interval_ms as f64),
        None => (w, s),
    });
    (weight > 0.0).then(|| sum / weight)
}
