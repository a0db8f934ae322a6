//! The stall probe: a sleeper beside the load that times its own oversleep, so a late
//! second can be told the machine's (a guest descheduled by its host, a stopped
//! process) from the generator's (docs/methodology.md, "The generator checks itself").
//!
//! The idea is cyclictest's: a thread sleeps to absolute deadlines `origin + k x
//! interval` (`clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`, 500 us by default) and
//! records, per second of the load's clock, how late it woke: the longest oversleep,
//! its p99, and how many wake-ups were over 1 ms late; beside it, the guest's steal
//! time from `/proc/stat` per second.
//!
//! One sleeper per CPU the process may run on, each pinned to its CPU, as cyclictest
//! runs one thread per CPU (`-a -t`): a virtual machine's stalls are mostly per virtual
//! CPU (the host deschedules one vCPU thread at a time). Measured here with two pinned
//! `SCHED_FIFO` sleepers for 20 s: of the stalls over 1 ms on one CPU, 64-72% had no
//! stall over 0.3 ms on the other at the same time. One unpinned sleeper therefore
//! missed most stalls of the CPU the generator's worker was on, and called the
//! worker's lateness its own. A second's figures are the worst over the CPUs (which CPU
//! a late worker was on is not recorded; any CPU's stall is the machine's).
//!
//! Why it lives in volley-monitor: it is a sampler on the load's clock in its own
//! thread, like [`crate::Monitor`], reading `/proc` like the rest of this crate; the
//! harness starts it beside every load (`volley_harness::measure`), so `volley bench`,
//! `bench --target`, a study step and an agent's share all get it, and the recorder's
//! label rule (volley-metrics) reads its figures without depending on the harness.
//!
//! The probe must not share a shortage that is the generator's own: a generator short
//! of CPU (a CPU cap on its cgroup, more work than its core gives) is generator-bound,
//! and a probe throttled with it would excuse it. So the thread leaves any capped cpu
//! cgroup (cgroup v1 moves single threads: its tid goes into the hierarchy root's
//! `tasks`), then asks for `SCHED_FIFO` (a real-time sleeper preempts every ordinary
//! task and is not subject to CFS bandwidth), else nice -20. What it got is reported in
//! [`StallReport::priority`]. What it still sees is what nobody in the guest can
//! avoid: the host taking the CPU (steal), the process being stopped, interrupts.

use std::collections::VecDeque;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::cpu_share::{CpuSources, Marks, SleeperClocks};
use crate::spill::Spill;

/// The sleeper's period: 500 us, cyclictest's common choice for a busy machine (short
/// enough to catch a 1 ms stall, long enough to cost nothing measurable).
pub const DEFAULT_INTERVAL: Duration = Duration::from_micros(500);

/// An oversleep at least this long means the sleeper was held (a stall), not woken
/// with the ordinary latency of a timer wake-up (tens of microseconds here).
pub const STALLED_US: u64 = 100;

/// The sleeper's period beside a closed-loop load: 10 ms. There the probe decides no
/// label (a closed loop has no schedule to be late for; its verdict is the generator's
/// CPU), it only reports the machine's stalls and steal, and every wake-up of a
/// `SCHED_FIFO` sleeper preempts the generator on its core: at 500 us, 2,000 wake-ups
/// a second cost ~18 us each in a guest (timer exits, two context switches), 3.7% of a
/// core, which raised volley's CPU per request 1.17x without keep-alive. At 10 ms it
/// still sees every stall longer than 10 ms, for a twentieth of that.
pub const CLOSED_LOOP_INTERVAL: Duration = Duration::from_millis(10);

/// The sleeper's period for a load: [`DEFAULT_INTERVAL`] beside an open loop, whose
/// late seconds the probe may explain, [`CLOSED_LOOP_INTERVAL`] beside a closed one.
pub fn interval_for(open_loop: bool) -> Duration {
    if open_loop {
        DEFAULT_INTERVAL
    } else {
        CLOSED_LOOP_INTERVAL
    }
}

/// One second of the probe, on the load's clock (second 0 starts at the origin).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StallSecond {
    /// Second since the origin.
    pub second: u64,
    /// Wake-ups in this second.
    pub wakeups: u32,
    /// Longest stall that overlapped this second, microseconds (see [`held`]: an
    /// oversleep, or a hold while running): a stall counts in every second its interval
    /// touches, so a stall across a second's boundary is seen by both. The other figures count each
    /// wake-up once, in the second it woke in. A lower bound of the stall: the sleeper
    /// was due at its deadline, but the stall may have begun earlier.
    pub max_us: u64,
    /// Longest stall that overlapped this second, upper bound, microseconds: for a
    /// wake-up at least [`STALLED_US`] late, the time from when the sleeper went to
    /// sleep (its last instant known running) to when it woke; for any other, its
    /// oversleep. The stall began after the sleeper last ran, so this bounds it from
    /// above, as `max_us` bounds it from below (the two differ by at most one period).
    /// A load's request due during a stall of D is late by up to D, which only this
    /// bound is sure to cover. 0 in reports stored before it existed.
    #[serde(default)]
    pub bound_us: u64,
    /// 99th percentile of the oversleeps, microseconds.
    pub p99_us: u64,
    /// Wake-ups more than 1 ms late.
    pub over_1ms: u32,
    /// Steal time of the guest in this second, summed over CPUs, microseconds (`None`
    /// where `/proc/stat` has no steal column).
    pub steal_us: Option<u64>,
    /// Per CPU (index = CPU number), microseconds of its busy time in this second that
    /// neither volley's threads nor a target in a cgroup volley made could have used: a
    /// lower bound of others' use of it ([`crate::cpu_share`]). Empty when unknown (a
    /// cgroup volley made that gives no CPU figure, reports stored before it existed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others_us: Vec<u64>,
    /// Per CPU, the most of its time in this second volley and the targets it started
    /// can have used, microseconds (the pacer's own run included); empty when unknown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ours_us: Vec<u64>,
    /// Per CPU, what the targets volley started surely used of it in this second,
    /// microseconds ([`crate::cpu_share::CpuSecond::targets_us`]); empty when unknown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets_us: Vec<u64>,
    /// How long volley's own cpu cgroup was throttled in this second (a quota on
    /// volley), microseconds; `None` when volley is in no such cgroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_throttled_us: Option<u64>,
}

impl StallSecond {
    /// The longest stall's upper bound, microseconds: [`StallSecond::bound_us`], or
    /// the lower bound in a report stored before there was an upper one.
    pub fn upper_us(&self) -> u64 {
        self.bound_us.max(self.max_us)
    }
}

/// What the probe's thread obtained to stay clear of the generator's shortage.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProbePriority {
    /// It runs `SCHED_FIFO`.
    pub fifo: bool,
    /// Its nice value when not real-time (`None`: unchanged or unknown).
    pub nice: Option<i32>,
    /// It left the cpu cgroup the process was in (that cgroup had a CPU quota or was
    /// not the root).
    pub left_cgroup: bool,
}

/// The probe's figures for a whole load.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StallReport {
    /// The sleeper's period, microseconds.
    pub interval_us: u64,
    /// Sleepers that ran, one per CPU the process could run on (0 in reports stored
    /// before there was one per CPU: then a single unpinned sleeper).
    #[serde(default)]
    pub cpus: u32,
    /// How the thread was kept out of the generator's shortage.
    pub priority: ProbePriority,
    /// Every second from 0 to the last one it woke in.
    pub seconds: Vec<StallSecond>,
}

impl StallReport {
    /// The longest stall that overlapped `second`, microseconds; `None` when the probe
    /// did not run then. A request's lateness is recorded in the second it completes
    /// in and a dispatch shortfall in the second whose arrivals were pushed out, so
    /// the stall that explains either overlaps that second (see [`StallSecond::max_us`]).
    pub fn longest_near(&self, second: u64) -> Option<u64> {
        self.seconds
            .get(usize::try_from(second).ok()?)
            .filter(|x| x.second == second && (x.wakeups > 0 || x.max_us > 0))
            .map(|x| x.max_us)
    }

    /// The upper bound of the longest stall that overlapped `second` (see
    /// [`StallSecond::bound_us`]), microseconds; the lower bound where a stored report
    /// has none; `None` when the probe did not run then. This is what may excuse a
    /// load's lateness: a stall can have held it this long.
    pub fn bound_near(&self, second: u64) -> Option<u64> {
        self.seconds
            .get(usize::try_from(second).ok()?)
            .filter(|x| x.second == second && (x.wakeups > 0 || x.max_us > 0))
            .map(StallSecond::upper_us)
    }
}

/// A running probe; [`StallProbe::finish`] stops it and returns its report.
pub struct StallProbe {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<StallReport>>,
}

impl StallProbe {
    /// Starts one sleeper per CPU the process may run on (see the module docs), with
    /// seconds counted from `origin` (wake-ups before it are not recorded). Never fails
    /// the load: a probe that cannot start a thread returns an empty report at the end.
    pub fn start(origin: Instant, interval: Duration) -> StallProbe {
        let stop = Arc::new(AtomicBool::new(false));
        let cpus = allowed_cpus();
        let pins: Vec<Option<usize>> = if cpus.is_empty() {
            vec![None]
        } else {
            cpus.into_iter().map(Some).collect()
        };
        let clocks = Arc::new(SleeperClocks::new(&pins));
        let threads = pins
            .into_iter()
            .enumerate()
            .filter_map(|(i, cpu)| {
                let clocks = Arc::clone(&clocks);
                let flag = Arc::clone(&stop);
                let name = match cpu {
                    Some(c) => format!("volley-stall-{c}"),
                    None => "volley-stall-probe".into(),
                };
                // One sleeper reads the machine-wide steal and CPU use; the others
                // leave them empty.
                let machine = (i == 0).then(|| CpuSources::detect(Arc::clone(&clocks)));
                let me = Sleeper { i, clocks };
                std::thread::Builder::new()
                    .name(name)
                    .spawn(move || run(origin, interval, &flag, cpu, &me, machine))
                    .ok()
            })
            .collect();
        StallProbe { stop, threads }
    }

    /// Stops the sleepers (within one interval) and returns what they saw, merged.
    pub fn finish(mut self) -> StallReport {
        self.stop.store(true, Ordering::Relaxed);
        let reports: Vec<StallReport> = self
            .threads
            .drain(..)
            .filter_map(|t| t.join().ok())
            .collect();
        merge(reports)
    }
}

/// The sleepers' reports as one: per second, the longest stall and the p99 are the
/// worst over the CPUs (a CPU's p99 is not pooled with another's: the worst CPU's
/// stands), wake-ups and wake-ups over 1 ms are summed, steal and the CPUs' use are the one
/// sleeper's that read them (machine-wide already).
fn merge(reports: Vec<StallReport>) -> StallReport {
    let mut it = reports.into_iter();
    let Some(mut out) = it.next() else {
        return StallReport::default();
    };
    out.cpus = 1;
    for r in it {
        out.cpus += 1;
        for s in r.seconds {
            let i = s.second as usize;
            if out.seconds.len() <= i {
                push_second(
                    &mut out.seconds,
                    StallSecond {
                        second: s.second,
                        ..Default::default()
                    },
                );
            }
            let o = &mut out.seconds[i];
            o.wakeups += s.wakeups;
            o.max_us = o.max_us.max(s.max_us);
            o.bound_us = o.bound_us.max(s.bound_us);
            o.p99_us = o.p99_us.max(s.p99_us);
            o.over_1ms += s.over_1ms;
            o.steal_us = o.steal_us.or(s.steal_us);
            if o.others_us.is_empty() {
                (o.others_us, o.ours_us, o.targets_us) = (s.others_us, s.ours_us, s.targets_us);
            }
            o.own_throttled_us = o.own_throttled_us.or(s.own_throttled_us);
        }
    }
    out
}

/// The CPUs this process may run on (its affinity mask); empty when it cannot be read.
/// Public for the replay's log reader, which keeps off the workers' CPUs the same way.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills the set
    // we own for this thread (pid 0), which a new thread inherits.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET reads the set we own, for an index below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Pins the calling thread to `cpu`; best effort (a probe that cannot pin still sleeps).
pub fn pin_to(cpu: usize) {
    // SAFETY: as in `allowed_cpus`; sched_setaffinity reads the set we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

impl Drop for StallProbe {
    fn drop(&mut self) {
        // Threads still held are detached; each stops within one interval.
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Collects one second's oversleeps and closes them into a [`StallSecond`].
#[derive(Debug, Default)]
struct SecondAcc {
    late_us: Vec<u64>,
    max_us: u64,
    bound_us: u64,
    over_1ms: u32,
}

impl SecondAcc {
    /// One wake-up `late_us` after its deadline, held at most `bound_us` (see
    /// [`StallSecond::bound_us`]).
    fn add(&mut self, late_us: u64, bound_us: u64) {
        self.late_us.push(late_us);
        self.max_us = self.max_us.max(late_us);
        self.bound_us = self.bound_us.max(bound_us);
        if late_us > 1_000 {
            self.over_1ms += 1;
        }
    }

    /// The second's figures; empties the accumulator (its buffer kept).
    fn close(&mut self, second: u64, steal_us: Option<u64>) -> StallSecond {
        let out = StallSecond {
            second,
            wakeups: self.late_us.len() as u32,
            max_us: self.max_us,
            bound_us: self.bound_us,
            p99_us: p99(&mut self.late_us),
            over_1ms: self.over_1ms,
            steal_us,
            ..Default::default()
        };
        self.late_us.clear();
        self.max_us = 0;
        self.bound_us = 0;
        self.over_1ms = 0;
        out
    }
}

/// The nearest-rank 99th percentile (the value at rank ceil(0.99 n)); 0 when empty.
fn p99(v: &mut [u64]) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let rank = (v.len() * 99).div_ceil(100).max(1) - 1;
    *v.select_nth_unstable(rank).1
}

fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn sleep_until_ns(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: an absolute sleep on a timespec we own; EINTR just ends it early, and the
    // loop measures from the deadline either way.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

/// One sleeper: pinned to `cpu` when given, priority next, then the sleep loop until
/// `stop`; it reads the steal time and the CPUs' use only when given `machine`.
fn run(
    origin: Instant,
    interval: Duration,
    stop: &AtomicBool,
    cpu: Option<usize>,
    me: &Sleeper,
    machine: Option<CpuSources>,
) -> StallReport {
    if let Some(c) = cpu {
        pin_to(c);
    }
    let priority = keep_clear();
    me.clocks.publish(me.i);
    let mut wakeups: u32 = 0;
    // `Instant` is CLOCK_MONOTONIC on Linux: map the origin onto the raw clock once.
    let (now_i, now_ns) = (Instant::now(), mono_ns());
    let origin_ns = if origin >= now_i {
        now_ns + (origin - now_i).as_nanos() as u64
    } else {
        now_ns.saturating_sub((now_i - origin).as_nanos() as u64)
    };
    let step_ns = interval.as_nanos().max(1) as u64;
    let mut closed = Closed::default();
    let mut acc = SecondAcc {
        late_us: Vec::with_capacity(2 * 1_000_000_000 / step_ns as usize + 16),
        ..Default::default()
    };
    let mut current: Option<u64> = None;
    let mut marks = Marks::new(machine);
    let mut deadline = mono_ns() + step_ns;
    let mut last_woke: Option<u64> = None;
    while !stop.load(Ordering::Relaxed) {
        let slept_at = mono_ns();
        sleep_until_ns(deadline);
        let woke = mono_ns();
        if woke < deadline {
            continue; // interrupted early: sleep again to the same deadline
        }
        let (late_us, bound_us) = held(last_woke, slept_at, deadline, woke);
        last_woke = Some(woke);
        wakeups = wakeups.wrapping_add(1);
        if woke >= origin_ns {
            let second = (woke - origin_ns) / 1_000_000_000;
            // Its own CPU for the machine's figures: at each second's edge (before
            // the reading sleeper reads them) and every 64 wake-ups in between.
            if current != Some(second) || wakeups % 64 == 0 {
                me.clocks.publish(me.i);
            }
            // A stall that began in earlier seconds is theirs too.
            let began_ns = woke.saturating_sub(bound_us * 1_000).max(origin_ns);
            let first = (began_ns - origin_ns) / 1_000_000_000;
            let stall = Stall {
                first,
                late_us,
                bound_us,
            };
            closed.mark(stall);
            if current != Some(second) {
                // The machine's figures (a few hundred microseconds of file reads) at
                // an ordinary priority, so a pacer woken on this CPU meanwhile runs
                // first; the read's own run time is not a stall (the held time counts
                // from its end). The closed second's write to disk goes there too.
                if let Some(done) = current {
                    as_ordinary(&priority, || {
                        closed.push(marks.close(acc.close(done, None)), Some(stall))
                    });
                } else {
                    as_ordinary(&priority, || marks.restart());
                }
                last_woke = Some(mono_ns());
                current = Some(second);
            }
            acc.add(late_us, bound_us);
        }
        // The next deadline on the grid; after a stall longer than a period, the next
        // one after waking (cyclictest counts a stall once, not once per missed tick),
        // or after the read of the machine's figures (its wait at an ordinary priority
        // is no oversleep).
        let resumed = last_woke.unwrap_or(woke);
        deadline += step_ns;
        if deadline <= resumed {
            deadline = resumed + step_ns;
        }
    }
    if let Some(done) = current {
        closed.push(marks.close(acc.close(done, None)), None);
    }
    StallReport {
        interval_us: step_ns / 1_000,
        cpus: 1,
        priority,
        seconds: closed.finish(),
    }
}

/// How many of a sleeper's latest closed seconds stay in memory, where a stall that
/// began in them can still be marked: five minutes. A stall longer than that is
/// marked in the seconds it skipped (they are made when it ends) but not in the
/// seconds closed before it began more than this long ago.
const KEPT_SECONDS: usize = 300;

/// A stall measured at one wake-up: it began in second `first` and held the sleeper
/// `late_us` (lower bound) to `bound_us` (upper bound) microseconds.
#[derive(Debug, Clone, Copy)]
struct Stall {
    first: u64,
    late_us: u64,
    bound_us: u64,
}

impl Stall {
    /// Counts this stall in `s` when `s` is its first second or later.
    fn apply(&self, s: &mut StallSecond) {
        if s.second >= self.first {
            s.max_us = s.max_us.max(self.late_us);
            s.bound_us = s.bound_us.max(self.bound_us);
        }
    }
}

/// A sleeper's closed seconds: the latest [`KEPT_SECONDS`] in memory and the older
/// ones waiting on disk ([`crate::spill::Spill`], made when the first second leaves
/// memory, so a load shorter than that opens no file) until the load ends. Why: one second
/// is ~250 bytes with its per-CPU shares, and a `volley bench --save` or an agent at a
/// fixed rate grew 0.4 KB/s for them over an hour (issue 26: a long run's memory stays
/// flat). What [`Closed::finish`] returns has `[i].second == i`, as a `Vec` filled by
/// [`push_second`] has.
#[derive(Default)]
struct Closed {
    old: Option<Spill<StallSecond>>,
    recent: VecDeque<StallSecond>,
}

impl Closed {
    /// Seconds closed so far.
    fn len(&self) -> u64 {
        (self.old.as_ref().map_or(0, Spill::len) + self.recent.len()) as u64
    }

    /// Appends `s`, with empty seconds for any it skipped, each marked with `stall`
    /// when it falls in it (before it can leave memory).
    fn push(&mut self, s: StallSecond, stall: Option<Stall>) {
        while self.len() < s.second {
            let second = self.len();
            self.keep(
                StallSecond {
                    second,
                    ..Default::default()
                },
                stall,
            );
        }
        self.keep(s, stall);
    }

    fn keep(&mut self, mut s: StallSecond, stall: Option<Stall>) {
        if let Some(x) = stall {
            x.apply(&mut s);
        }
        self.recent.push_back(s);
        if self.recent.len() > KEPT_SECONDS {
            if let Some(oldest) = self.recent.pop_front() {
                self.old.get_or_insert_with(Spill::new).push(oldest);
            }
        }
    }

    /// Marks `stall` in every closed second in memory from its first on. Called at
    /// every wake-up, so it touches only those seconds (usually none or one).
    fn mark(&mut self, stall: Stall) {
        let front = self.len() - self.recent.len() as u64;
        let from = stall
            .first
            .saturating_sub(front)
            .min(self.recent.len() as u64) as usize;
        for s in self.recent.range_mut(from..) {
            stall.apply(s);
        }
    }

    /// Every closed second, in order.
    fn finish(self) -> Vec<StallSecond> {
        let mut out = self.old.map(Spill::finish).unwrap_or_default();
        out.extend(self.recent);
        out
    }
}

/// Which sleeper this is, and where it publishes its own CPU time.
struct Sleeper {
    i: usize,
    clocks: Arc<SleeperClocks>,
}

/// How long one wake-up says the sleeper was held: `(lower, upper)` bounds in
/// microseconds, from the last wake-up (`last_woke`, `None` on the first), the instant
/// it went to sleep, its deadline and when it woke (nanoseconds, one clock).
///
/// Two ways to be held. While sleeping: the oversleep (woke - deadline) is the lower
/// bound, and when it is at least [`STALLED_US`], the stall may have begun as soon as
/// the sleeper went to sleep, so woke - slept_at is the upper bound. While running:
/// from a wake-up to the next sleep is a few microseconds of the sleeper's own work, so
/// a longer gap is a stall measured exactly (the vCPU taken while the sleeper was on
/// it); without this, such a stall read as its length minus one period, because the
/// next deadline passed during it and the sleep returned at once.
fn held(last_woke: Option<u64>, slept_at: u64, deadline: u64, woke: u64) -> (u64, u64) {
    let running_us = last_woke.map_or(0, |w| slept_at.saturating_sub(w) / 1_000);
    let oversleep_us = woke.saturating_sub(deadline) / 1_000;
    let sleeping_hi_us = if oversleep_us >= STALLED_US {
        woke.saturating_sub(slept_at.min(deadline)) / 1_000
    } else {
        oversleep_us
    };
    (oversleep_us.max(running_us), sleeping_hi_us.max(running_us))
}

/// Appends `s`, with empty seconds for any it skipped (a stall longer than a second),
/// so `seconds[i].second == i`: the merge's counterpart of [`Closed::push`].
fn push_second(seconds: &mut Vec<StallSecond>, s: StallSecond) {
    while (seconds.len() as u64) < s.second {
        let second = seconds.len() as u64;
        seconds.push(StallSecond {
            second,
            ..Default::default()
        });
    }
    seconds.push(s);
}

/// Leaves a capped cpu cgroup, then asks for SCHED_FIFO, else nice -20 (see the
/// module docs). Each step is best effort: an unprivileged volley keeps a plain
/// sleeper, and the report says so.
fn keep_clear() -> ProbePriority {
    let left_cgroup = leave_cpu_cgroup();
    let fifo = set_policy(libc::SCHED_FIFO, FIFO_PRIORITY);
    let nice = if fifo {
        None
    } else {
        // SAFETY: PRIO_PROCESS with our own tid changes this thread's nice only.
        let tid = unsafe { libc::gettid() };
        let ok = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, -20) } == 0;
        ok.then_some(-20)
    };
    ProbePriority {
        fifo,
        nice,
        left_cgroup,
    }
}

/// Runs `f` on this thread at an ordinary priority (`SCHED_OTHER`, the nice value the
/// process has, as its pacer has), then puts `SCHED_FIFO` back: the reading sleeper's
/// once-a-second read of the machine's figures took 150-300 us at `SCHED_FIFO`, on the
/// CPU where the pacer often runs, and held a woken pacer that long (a scheduler trace
/// here, five seconds of six); at an ordinary priority the pacer's short slice preempts
/// it (docs/methodology.md, "The machine's stalls"). A sleeper that got no `SCHED_FIFO`
/// reads as it is. Best effort, as [`keep_clear`].
fn as_ordinary<T>(priority: &ProbePriority, f: impl FnOnce() -> T) -> T {
    if !priority.fifo {
        return f();
    }
    set_policy(libc::SCHED_OTHER, 0);
    let out = f();
    set_policy(libc::SCHED_FIFO, FIFO_PRIORITY);
    out
}

/// Sets the calling thread's scheduling `policy` at `priority` (0 for `SCHED_OTHER`);
/// true when the kernel took it. The one place the probe changes its policy.
fn set_policy(policy: libc::c_int, priority: libc::c_int) -> bool {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: sets this thread's (tid 0 = caller) policy from a param we own.
    unsafe { libc::sched_setscheduler(0, policy, &param) == 0 }
}

/// The sleepers' real-time priority: above every ordinary task (and a test's
/// priority-1 hog), below the kernel's own real-time threads at 99.
const FIFO_PRIORITY: libc::c_int = 50;

/// cgroup v1: moves this thread to the root of the cpu hierarchy when it is in another
/// cpu cgroup (which may carry a quota). True when it moved.
fn leave_cpu_cgroup() -> bool {
    let Ok(own) = std::fs::read_to_string("/proc/thread-self/cgroup") else {
        return false;
    };
    let Some(path) = v1_cpu_path(&own) else {
        return false;
    };
    if path == "/" {
        return false;
    }
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else {
        return false;
    };
    let Some(root) = v1_cpu_mount(&mounts) else {
        return false;
    };
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    std::fs::write(format!("{root}/tasks"), tid.to_string()).is_ok()
}

/// The thread's path in the v1 hierarchy holding the `cpu` controller, from
/// `/proc/thread-self/cgroup` (`4:cpu,cpuacct:/x`); `None` on a v2-only system.
pub fn v1_cpu_path(text: &str) -> Option<&str> {
    crate::cpu_share::own_path(text, &["cpu"], false)
}

/// Where the v1 hierarchy holding the `cpu` controller is mounted (`false`), or the
/// cgroup2 hierarchy (`true`), from `/proc/self/mounts`.
pub fn cgroup_mount(text: &str, v2: bool) -> Option<String> {
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let fits = match v2 {
            true => f.len() >= 3 && f[2] == "cgroup2",
            false => f.len() >= 4 && f[2] == "cgroup" && f[3].split(',').any(|o| o == "cpu"),
        };
        fits.then(|| f[1].to_string())
    })
}

/// [`cgroup_mount`] of the v1 `cpu` hierarchy.
fn v1_cpu_mount(text: &str) -> Option<String> {
    cgroup_mount(text, false)
}

/// The guest's steal time so far, summed over CPUs, microseconds (`/proc/stat`).
pub(crate) fn read_steal_us() -> Option<u64> {
    let mut buf = [0u8; 512];
    let mut f = std::fs::File::open("/proc/stat").ok()?;
    let n = f.read(&mut buf).ok()?;
    parse_steal_ticks(std::str::from_utf8(&buf[..n]).ok()?).map(|t| t * ticks_us())
}

/// Nanoseconds per clock tick (USER_HZ).
pub(crate) fn tick_ns() -> u64 {
    ticks_us() * 1_000
}

/// Microseconds per clock tick (USER_HZ).
fn ticks_us() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        1_000_000 / hz as u64
    } else {
        10_000
    }
}

/// The steal column (8th value) of the `cpu ` line of `/proc/stat`, in ticks.
pub fn parse_steal_ticks(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    line.split_whitespace().nth(8)?.parse().ok()
}

#[cfg(test)]
#[path = "stall_tests.rs"]
mod tests;
