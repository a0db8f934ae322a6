//! Who was the bottleneck: the pure labelling rule of docs/methodology.md "The generator
//! checks itself", applied to the whole run and to each second.
//!
//! Open loop (a schedule exists). Send lag (sent - intended) has two parts: *scheduler
//! lag* (dispatched - intended: the generator's event loop handled the arrival late) and
//! *connection wait* (sent - dispatched: the arrival waited for a free connection or
//! stream, because the server held them all or the pool cap was reached). Only the first
//! is the generator's fault:
//! - *generator-bound* when scheduler-lag p99 > max(1 ms, 1% of the mean inter-arrival
//!   interval 1/R), or when fewer requests were *dispatched* than the schedule asked for
//!   by more than 1% (per second we also allow one request of slack, because a dispatch
//!   a few microseconds late can cross a second boundary without anyone being slow);
//! - *machine-stalled* instead of generator-bound when the stall probe beside the load
//!   (`volley_monitor::stall`) saw that lateness too: its longest stall near the window,
//!   plus 100 us, >= the lateness that made the window late (the scheduler-lag p99, or for
//!   a dispatch shortfall of k requests at rate R, k / R). A stall of D ms makes every
//!   request due during it late while the sleeper counts it once, so the comparison is
//!   with the probe's longest stall, not its p99. Neither the generator nor the server
//!   caused such a window: the machine did (a host taking the CPU, a stopped process);
//!   and also when the pacer's own wait for a CPU (its run delay) covers that lateness
//!   while others surely took at least that long of the CPU it was on, and more of it
//!   than volley's other threads and the targets it started can have (its busy time
//!   less volley's and the targets' CPU: `volley_monitor::cpu_share`): a neighbour
//!   held the pacer's CPU. volley short of CPU itself (its own work, a target it
//!   started on the same core, a quota on volley) leaves others no such share and
//!   stays generator-bound;
//! - *inconclusive* when nothing was scheduled in the window;
//! - otherwise *server-bound*: the generator kept its schedule, so latency and
//!   throughput are the server's. Connection wait never makes a window generator-bound
//!   (a server that stalls holds every connection, arrivals queue, and send lag grows
//!   although the generator was punctual); when its p99 exceeds the same threshold the
//!   reason says so, with the cap hits, so the reader sees the queueing.
//!
//! Closed loop (no schedule; each connection waits for its reply): the only sign of a
//! saturated generator is its CPU. With `cores` = min(worker threads, CPUs available):
//! - *generator-bound* when the process used >= 90% of `cores` (it could not have gone
//!   faster);
//! - *server-bound* when it used <= 70% of `cores` and it was not short of a CPU: its
//!   worker 0 waited for one (schedstat run delay) less than
//!   [`CLOSED_WAIT_SHARE`] of the window. A reply that arrives while the worker waits
//!   is read late, so that wait bounds what the generator can have taken off the
//!   server's figure. Where run delay is not measured (a kernel without schedstats),
//!   machine-wide CPU pressure below 50% stands in, as before; it is the weaker sign,
//!   because it counts every task's wait, a target throttled by the CPU cap volley set
//!   included (a 25% cap read as 67% pressure on every step of seed 002);
//! - *inconclusive* otherwise, or when CPU was not measured. Between 70% and 90% the
//!   generator may be limited by scheduling rather than work; a generator that waited
//!   for a CPU fought the server or others for it (common on loopback), and neither is
//!   cleanly "the" bottleneck.

use serde::Serialize;
/// The verdict for one window (a second or the whole run): the step verdict's type, so a
/// second and a step are labelled in the same words.
pub use volley_analysis::sustain::Bound;

/// What the rule looks at, for one window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Check {
    /// Offered rate in requests/s for an open loop; `None` for a closed loop.
    pub offered_rate_per_s: Option<f64>,
    /// What the schedule asked for in the window: a count of requests by intended
    /// instant (per second) or a rate in requests/s (whole run).
    pub scheduled: f64,
    /// What the generator dispatched (handled on time or late, whether or not a
    /// connection was free), in the same unit as `scheduled`: the count the schedule is
    /// held against.
    pub dispatched: f64,
    /// What was actually sent, in the same unit as `scheduled`; reported, not judged
    /// (sends held back by busy connections are the server's doing).
    pub sent: f64,
    /// Extra shortfall tolerated on top of 1%, in the same unit: one request for
    /// per-second windows (boundary crossing), 0 for whole-run rates.
    pub slack: f64,
    /// 99th percentile of scheduler lag (dispatched - intended), microseconds.
    pub sched_lag_p99_us: u64,
    /// 99th percentile of connection wait (sent - dispatched), microseconds.
    pub conn_wait_p99_us: u64,
    /// Arrivals that found the connection cap reached, in the window.
    pub cap_hits: u64,
    /// CPU cores' worth of time the generator process used (1.0 = one core busy).
    pub cpu_cores_used: Option<f64>,
    /// Cores the generator could use: min(worker threads, CPUs available).
    pub cores: f64,
    /// Share of wall time some task waited for a CPU (0..1), if PSI is available.
    pub cpu_pressure: Option<f64>,
    /// Share of the window the generator's worker 0 was runnable but waited for a CPU
    /// (0..1, its schedstat run delay, a quota on volley's own cgroup included: that is
    /// a shortage too); the closed-loop rule's sign of a generator short of CPU. `None`
    /// when not measured.
    pub cpu_wait_share: Option<f64>,
    /// The upper bound of the stall probe's longest stall near the window,
    /// microseconds (see `StallReport::bound_near`); `None` when no probe ran.
    pub longest_stall_us: Option<u64>,
    /// How long the pacer (worker 0) was runnable but waited for a CPU in the window,
    /// microseconds, less any throttling of volley's own cgroup (a quota on volley is
    /// its own shortage); `None` when not measured.
    pub pacer_wait_us: Option<u64>,
    /// CPU time others surely took of the CPU(s) the pacer was on in the window,
    /// microseconds: its busy time less all of volley's CPU and the CPU of the targets
    /// volley started (`volley_monitor::cpu_share`); `None` when not known.
    pub others_on_pacer_us: Option<u64>,
    /// The most of the pacer's CPU(s) volley's other threads and the targets it started
    /// can have used in the window, microseconds (the pacer's own run left out: it never
    /// waits behind itself); `None` when not known.
    pub ours_on_pacer_us: Option<u64>,
    /// What the targets volley started surely used of the pacer's CPU(s) in the
    /// window, microseconds (`volley_monitor::cpu_share`'s per-CPU figures); `None`
    /// when not known.
    pub target_on_pacer_us: Option<u64>,
}

/// Slack between the probe's longest stall and the lateness it must explain: after a
/// stall the pacer still has to send what fell due during it, and its wake-up costs
/// tens of microseconds. The stall itself is taken at its upper bound (from when the
/// held sleeper last ran), so the 500 us grid of the sleeper needs no slack of its own.
pub const STALL_SLACK_US: u64 = 100;

/// Whether the probe's `longest_stall_us` explains a lateness of `late_us`.
pub fn stall_explains(longest_stall_us: Option<u64>, late_us: f64) -> bool {
    longest_stall_us.is_some_and(|d| (d + STALL_SLACK_US) as f64 >= late_us)
}

/// Whether others on the pacer's CPU explain a lateness of `late_us` (docs/methodology.md,
/// "A neighbour on the pacer's CPU"): the pacer waited for its CPU at least that long
/// (its run delay, plus [`STALL_SLACK_US`]); others surely took at least that long of
/// the CPU it was on; and more of it than volley's other threads and its targets can
/// have. When volley itself, or a target it started, filled the CPU, others' sure share
/// is near 0 or below ours, and the lateness stays the generator's.
pub fn neighbour_explains(c: &Check, late_us: f64) -> bool {
    match (c.pacer_wait_us, c.others_on_pacer_us, c.ours_on_pacer_us) {
        (Some(wait), Some(others), Some(ours)) => {
            wait > 0
                && (wait + STALL_SLACK_US) as f64 >= late_us
                && others as f64 >= late_us
                && others > ours
        }
        _ => false,
    }
}

/// The reason's words for a lateness others on the pacer's CPU explain.
fn neighbour_reason(c: &Check) -> String {
    format!(
        "the pacer waited {:.3} ms for its CPU while others (processes outside volley and the targets it started; a server volley did not start counts here) took at least {:.3} ms of it, volley's other threads and its targets at most {:.3} ms: the machine was busy, not the generator",
        c.pacer_wait_us.unwrap_or(0) as f64 / 1e3,
        c.others_on_pacer_us.unwrap_or(0) as f64 / 1e3,
        c.ours_on_pacer_us.unwrap_or(0) as f64 / 1e3
    )
}

/// Share of the pacer's core a target volley started must have taken in a window for
/// a generator-bound reason to name it (5%): below that its part of the wait is small.
pub const TARGET_BESIDE_SHARE: f64 = 0.05;

/// The words for a generator short of CPU beside its own target (docs/methodology.md,
/// "A neighbour on the pacer's CPU"): the pacer waited for its CPU (at least
/// [`STALL_SLACK_US`]) and a target volley started took at least
/// [`TARGET_BESIDE_SHARE`] of that CPU in the window of `window_us`. That lateness is
/// the generator's (the target is the study's own), but the reader should see who took
/// the core: the cure is another core for the target (`--target-cpus`), not a faster
/// generator. `None` otherwise.
pub fn target_beside(
    pacer_wait_us: Option<u64>,
    target_on_pacer_us: Option<u64>,
    window_us: u64,
) -> Option<String> {
    let (wait, target) = (pacer_wait_us?, target_on_pacer_us?);
    let share = target as f64 / window_us.max(1) as f64;
    (wait >= STALL_SLACK_US && share >= TARGET_BESIDE_SHARE).then(|| {
        format!(
            "the target ran beside the generator and took {:.0}% of its core (the pacer waited {:.3} ms for it)",
            share.min(1.0) * 100.0,
            wait as f64 / 1e3
        )
    })
}

/// `; ` and [`target_beside`]'s words for a one-second window, or nothing.
fn target_note(c: &Check) -> String {
    target_beside(c.pacer_wait_us, c.target_on_pacer_us, 1_000_000)
        .map(|t| format!("; {t}"))
        .unwrap_or_default()
}

/// A verdict and the reason for it, in words a user can check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// The label.
    pub label: Bound,
    /// Why, with the numbers compared.
    pub reason: String,
}

/// Scheduler-lag p99 threshold in microseconds: max(1 ms, 1% of 1/R).
pub fn lag_threshold_us(rate_per_s: f64) -> f64 {
    let interval_us = if rate_per_s > 0.0 {
        1e6 / rate_per_s
    } else {
        f64::INFINITY
    };
    (0.01 * interval_us).max(1_000.0)
}

/// "2 core(s)", or "0.20 core(s) (its CPU quota)" when a cgroup quota holds the
/// generator to part of a CPU.
pub fn cores_text(cores: f64) -> String {
    match (cores - cores.round()).abs() < 1e-9 {
        true => format!("{cores:.0} core(s)"),
        false => format!("{cores:.2} core(s) (its CPU quota)"),
    }
}

/// Applies the rule in the module docs.
pub fn classify(c: &Check) -> Verdict {
    match c.offered_rate_per_s {
        Some(rate) => classify_open(c, rate),
        None => classify_closed(c),
    }
}

/// The shortest measured closed loop whose generator CPU share is read (100 ms). A
/// run's CPU includes the fixed cost of starting its threads and connections, about 2-3
/// ms here: a 500-request burst of 3 ms "used 1.26 of 1 core" and read generator-bound
/// (seed 000's ab steps, every one of them), while 80 ms of the same load used 0.34.
/// Over 100 ms that cost is a few percent of a core.
pub const CLOSED_MIN_MEASURED_NS: u64 = 100_000_000;

/// [`classify`] of a whole run measured for `measured_ns`: a closed loop shorter than
/// [`CLOSED_MIN_MEASURED_NS`] is inconclusive (its figures kept, who limited them not
/// known) instead of judged from a CPU share its start-up dominates.
pub fn classify_run(c: &Check, measured_ns: u64) -> Verdict {
    if c.offered_rate_per_s.is_none() && measured_ns < CLOSED_MIN_MEASURED_NS {
        let used = c
            .cpu_cores_used
            .map(|u| {
                format!(
                    " (the generator's {u:.2} of {} counts its start-up)",
                    cores_text(c.cores)
                )
            })
            .unwrap_or_default();
        return Verdict {
            label: Bound::Inconclusive,
            reason: format!(
                "closed loop measured {:.1} ms: too short to tell whose limit it was{used}; at least {} ms needed",
                measured_ns as f64 / 1e6,
                CLOSED_MIN_MEASURED_NS / 1_000_000
            ),
        };
    }
    classify(c)
}

/// An open loop at `rate` req/s: did the generator keep its schedule (scheduler lag and
/// dispatched against scheduled), and if not, did the stall probe see the machine stall?
fn classify_open(c: &Check, rate: f64) -> Verdict {
    let v = |label, reason: String| Verdict { label, reason };
    if c.scheduled <= 0.0 && c.dispatched <= 0.0 && c.sent <= 0.0 {
        return v(
            Bound::Inconclusive,
            "nothing scheduled in this window".into(),
        );
    }
    let limit_us = lag_threshold_us(rate);
    let wait = conn_wait_note(c, limit_us);
    if c.sched_lag_p99_us as f64 > limit_us {
        if stall_explains(c.longest_stall_us, c.sched_lag_p99_us as f64) {
            return v(
                Bound::MachineStalled,
                format!(
                    "scheduler-lag p99 {:.3} ms > {:.3} ms, and the stall probe beside the load was held {:.3} ms: the machine stalled, not the generator{wait}",
                    c.sched_lag_p99_us as f64 / 1e3,
                    limit_us / 1e3,
                    c.longest_stall_us.unwrap_or(0) as f64 / 1e3
                ),
            );
        }
        if neighbour_explains(c, c.sched_lag_p99_us as f64) {
            return v(
                Bound::MachineStalled,
                format!(
                    "scheduler-lag p99 {:.3} ms > {:.3} ms, and {}{wait}",
                    c.sched_lag_p99_us as f64 / 1e3,
                    limit_us / 1e3,
                    neighbour_reason(c)
                ),
            );
        }
        return v(
            Bound::GeneratorBound,
            format!(
                "scheduler-lag p99 {:.3} ms > {:.3} ms (max of 1 ms and 1% of 1/R){}{wait}",
                c.sched_lag_p99_us as f64 / 1e3,
                limit_us / 1e3,
                target_note(c)
            ),
        );
    }
    let allowed_short = 0.01 * c.scheduled + c.slack;
    if c.dispatched + allowed_short < c.scheduled {
        // k requests short at rate R: the pacer lost k / R seconds.
        let late_us = (c.scheduled - c.dispatched) / rate.max(1e-9) * 1e6;
        if stall_explains(c.longest_stall_us, late_us) {
            return v(
                Bound::MachineStalled,
                format!(
                    "dispatched {:.1} vs {:.1} scheduled ({:.3} ms of arrivals), and the stall probe beside the load was held {:.3} ms: the machine stalled, not the generator{wait}",
                    c.dispatched,
                    c.scheduled,
                    late_us / 1e3,
                    c.longest_stall_us.unwrap_or(0) as f64 / 1e3
                ),
            );
        }
        if neighbour_explains(c, late_us) {
            return v(
                Bound::MachineStalled,
                format!(
                    "dispatched {:.1} vs {:.1} scheduled ({:.3} ms of arrivals), and {}{wait}",
                    c.dispatched,
                    c.scheduled,
                    late_us / 1e3,
                    neighbour_reason(c)
                ),
            );
        }
        return v(
            Bound::GeneratorBound,
            format!(
                "dispatched {:.1} vs {:.1} scheduled (more than 1% short){}{wait}",
                c.dispatched,
                c.scheduled,
                target_note(c)
            ),
        );
    }
    v(
        Bound::ServerBound,
        format!(
            "kept the schedule: dispatched {:.1} vs {:.1} scheduled ({:.1} sent), scheduler-lag p99 {:.3} ms <= {:.3} ms{wait}",
            c.dispatched,
            c.scheduled,
            c.sent,
            c.sched_lag_p99_us as f64 / 1e3,
            limit_us / 1e3
        ),
    )
}

/// Share of a closed-loop window the generator's worker 0 may wait for a CPU and the
/// window still be called server-bound (10%): a wait can only delay reading replies,
/// so it takes at most that share off the figure; the same 10% as a busy machine's
/// share of others (`summary::BUSY_SHARE`).
pub const CLOSED_WAIT_SHARE: f64 = 0.1;

/// A closed loop: the generator's CPU share of its cores, and whether it waited for a
/// CPU (its own run delay; machine-wide CPU pressure where that is not measured).
fn classify_closed(c: &Check) -> Verdict {
    let v = |label, reason: String| Verdict { label, reason };
    let Some(used) = c.cpu_cores_used else {
        return v(
            Bound::Inconclusive,
            "closed loop and generator CPU not measured".into(),
        );
    };
    let cores = c.cores.max(1e-9);
    let share = used / cores;
    if share >= 0.9 {
        return v(
            Bound::GeneratorBound,
            format!(
                "closed loop: generator used {used:.2} of {} ({:.0}% >= 90%)",
                cores_text(c.cores),
                share * 100.0
            ),
        );
    }
    let (waited, sign) = match c.cpu_wait_share {
        Some(w) => (
            w >= CLOSED_WAIT_SHARE,
            format!(
                "its worker 0 waited for a CPU {:.1}% of the time",
                w * 100.0
            ),
        ),
        None => {
            let pressure = c.cpu_pressure.unwrap_or(0.0);
            (
                pressure >= 0.5,
                format!(
                    "CPU pressure {:.0}% (the generator's own wait for a CPU not measured)",
                    pressure * 100.0
                ),
            )
        }
    };
    let head = format!(
        "closed loop: generator used {used:.2} of {} ({:.0}%",
        cores_text(c.cores),
        share * 100.0
    );
    match (share <= 0.7, waited) {
        (true, false) => v(Bound::ServerBound, format!("{head} <= 70%), {sign}")),
        (true, true) => v(
            Bound::Inconclusive,
            format!("{head} <= 70%), but {sign}: it was short of a CPU, not only waiting for the server"),
        ),
        (false, _) => v(
            Bound::Inconclusive,
            format!("{head}, between 70% and 90%: it may have been limited by scheduling), {sign}"),
        ),
    }
}

/// The whole run's label from its own check and its seconds' labels: a run the whole-run
/// figures call generator-bound is *machine-stalled* when none of its seconds was
/// generator-bound and at least one was machine-stalled (its lateness all fell in
/// seconds the probe saw stalled too). Any generator-bound second keeps the run
/// generator-bound; every other verdict stands as it is (a run that kept its schedule
/// overall stays server-bound though some seconds stalled: they are counted apart).
pub fn run_label(whole: Verdict, seconds: &[Bound]) -> Verdict {
    if whole.label != Bound::GeneratorBound {
        return whole;
    }
    let count = |b: Bound| seconds.iter().filter(|s| **s == b).count();
    let (late, stalled) = (count(Bound::GeneratorBound), count(Bound::MachineStalled));
    if late > 0 || stalled == 0 {
        return whole;
    }
    Verdict {
        label: Bound::MachineStalled,
        reason: format!(
            "{}; every late second ({stalled}) was the machine's (the stall probe saw it stall too, or others held the pacer's CPU), none was the generator's own",
            whole.reason
        ),
    }
}

/// The part of a reason that reports connection wait when its p99 is over `limit_us`
/// (empty otherwise): the server held the connections, which is not the generator's
/// lateness but is worth seeing.
fn conn_wait_note(c: &Check, limit_us: f64) -> String {
    if (c.conn_wait_p99_us as f64) <= limit_us {
        return String::new();
    }
    let caps = if c.cap_hits > 0 {
        format!(", the connection cap was hit {} time(s)", c.cap_hits)
    } else {
        String::new()
    };
    format!(
        "; connection wait p99 {:.3} ms: arrivals waited for a free connection (the server held them{caps}), not a late generator",
        c.conn_wait_p99_us as f64 / 1e3
    )
}

#[cfg(test)]
#[path = "label_tests.rs"]
mod tests;
