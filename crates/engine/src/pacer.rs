//! Open-loop pacing: when each request should go out.
//!
//! The schedule is precomputed from the rate and a seed, so a run can be repeated
//! exactly, and it never looks at responses (that is what makes the loop open: a slow
//! server cannot slow the arrivals down, which is how coordinated omission is avoided).
//! [`Pacer::pace`] is a pure function of (elapsed, sent) in the manner of vegeta's pacer,
//! so it is table-tested below without a clock.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::{Arrival, NextInstant};

/// A scheduled source whose next instant is not read yet is asked again this soon
/// (its reader normally runs far ahead, so this is rare: a slow disk, a huge line).
pub const PENDING_RETRY_NS: u64 = 100_000;

const NS_PER_S: f64 = 1e9;

/// The arrival times of one worker's share of an open-loop run.
///
/// With `workers` workers at a total rate `R`, worker `i` sends at `R / workers`. For a
/// constant schedule its arrivals are phase-shifted by `i / R`, so the union over
/// workers is evenly spaced `1/R` apart, exactly as a single sender would be. For
/// Poisson, each worker draws its own exponential gaps from `seed` mixed with `i`; the
/// superposition of independent Poisson processes is again Poisson with rate `R`.
#[derive(Debug, Clone)]
pub struct Schedule {
    arrival: Arrival,
    /// Total rate across workers, requests per second.
    rate_per_s: f64,
    worker: u64,
    workers: u64,
    seed: u64,
    /// Poisson only: the rng positioned after arrival `next_k - 1`.
    rng: ChaCha8Rng,
    /// Poisson only: index of the arrival `next_ns` belongs to.
    next_k: u64,
    /// Poisson only: intended time of arrival `next_k`, in exact (unrounded) ns.
    next_ns: f64,
}

impl Schedule {
    /// The schedule of worker `worker` of `workers` at a total `rate_per_s`.
    /// `rate_per_s` must be positive and finite (checked by [`crate::run`]).
    pub fn new(
        arrival: Arrival,
        rate_per_s: f64,
        seed: u64,
        worker: usize,
        workers: usize,
    ) -> Self {
        let workers = workers.max(1) as u64;
        let worker = worker as u64;
        let mut s = Schedule {
            arrival,
            rate_per_s,
            worker,
            workers,
            seed,
            rng: Self::rng_for(seed, worker),
            next_k: 0,
            next_ns: 0.0,
        };
        s.reset_poisson();
        s
    }

    fn rng_for(seed: u64, worker: u64) -> ChaCha8Rng {
        // Distinct, well-mixed streams per worker (golden-ratio increment as in splitmix64).
        ChaCha8Rng::seed_from_u64(seed ^ worker.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    fn reset_poisson(&mut self) {
        self.rng = Self::rng_for(self.seed, self.worker);
        self.next_k = 0;
        self.next_ns = 0.0;
        if self.arrival == Arrival::Poisson {
            self.next_ns = self.gap_ns();
        }
    }

    /// One exponential gap at this worker's rate: -ln(U) / (R / workers).
    fn gap_ns(&mut self) -> f64 {
        // U in (0, 1]: 1 - [0, 1) avoids ln(0).
        let u: f64 = 1.0 - self.rng.random::<f64>();
        -u.ln() * NS_PER_S * self.workers as f64 / self.rate_per_s
    }

    /// Intended send time of this worker's `k`-th arrival (0-based), ns since the run
    /// started. Constant: `(k * workers + worker) / R`. Poisson: the running sum of the
    /// first `k + 1` gaps; cheap when `k` moves forward one at a time (as the engine
    /// uses it), recomputed from the seed if asked to go back.
    pub fn intended_ns(&mut self, k: u64) -> u64 {
        match self.arrival {
            Arrival::Constant => {
                let slot = k as f64 * self.workers as f64 + self.worker as f64;
                (slot * NS_PER_S / self.rate_per_s) as u64
            }
            Arrival::Poisson => {
                if k < self.next_k {
                    self.reset_poisson();
                }
                while self.next_k < k {
                    self.next_ns += self.gap_ns();
                    self.next_k += 1;
                }
                self.next_ns as u64
            }
        }
    }
}

/// What a worker should do about its next arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// The next arrival is due (or overdue): send it; the value is its intended time.
    SendNow(u64),
    /// The next arrival is this many ns in the future.
    Wait(u64),
    /// The schedule is over: its next arrival falls after the end of the run, and the
    /// run's end has come.
    Done,
}

/// A [`Schedule`] bounded by the run's duration, or (a replay) the instants the request
/// source gives, bounded the same way.
#[derive(Debug, Clone)]
pub struct Pacer {
    /// `None`: the source's own instants ([`crate::LoadModel::Scheduled`]).
    schedule: Option<Schedule>,
    end_ns: Option<u64>,
}

impl Pacer {
    /// Paces `schedule` until `end_ns` (exclusive); `None` means no time limit.
    pub fn new(schedule: Schedule, end_ns: Option<u64>) -> Self {
        Pacer {
            schedule: Some(schedule),
            end_ns,
        }
    }

    /// Paces the instants a scheduled source gives, until `end_ns` (exclusive).
    pub fn scheduled(end_ns: Option<u64>) -> Self {
        Pacer {
            schedule: None,
            end_ns,
        }
    }

    /// True when the instants come from the source ([`Pacer::pace_next`]).
    pub fn is_scheduled(&self) -> bool {
        self.schedule.is_none()
    }

    /// What to do about a scheduled source's next request, due at `next`: like
    /// [`Pacer::pace`], but a schedule that is over ends the worker at once (a replay
    /// ends with its log, not at the duration limit), and one not yet read waits
    /// [`PENDING_RETRY_NS`]. Pure: no clock, no I/O.
    pub fn pace_next(&self, elapsed_ns: u64, next: NextInstant) -> Pace {
        match next {
            NextInstant::Over => Pace::Done,
            NextInstant::Pending => Pace::Wait(PENDING_RETRY_NS),
            NextInstant::At(due_ns) if self.end_ns.is_some_and(|end| due_ns >= end) => Pace::Done,
            NextInstant::At(due_ns) if due_ns <= elapsed_ns => Pace::SendNow(due_ns),
            NextInstant::At(due_ns) => Pace::Wait(due_ns - elapsed_ns),
        }
    }

    /// Given the time since the run started and how many arrivals this worker has
    /// already sent (or queued), what to do next. Depends on nothing else: no clock,
    /// no I/O.
    pub fn pace(&mut self, elapsed_ns: u64, sent: u64) -> Pace {
        let Some(schedule) = self.schedule.as_mut() else {
            return Pace::Done;
        };
        let due_ns = schedule.intended_ns(sent);
        if let Some(end) = self.end_ns.filter(|end| due_ns >= *end) {
            // No arrival is left, but the run lasts until its end: an open-loop step of
            // 1 s at 1 req/s measures one request over a second, not over the 5 ms its
            // answer took (which would print 200 req/s).
            return match end.checked_sub(elapsed_ns).filter(|left| *left > 0) {
                Some(left) => Pace::Wait(left),
                None => Pace::Done,
            };
        }
        if due_ns <= elapsed_ns {
            Pace::SendNow(due_ns)
        } else {
            Pace::Wait(due_ns - elapsed_ns)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_schedule_single_worker() {
        let mut s = Schedule::new(Arrival::Constant, 1000.0, 0, 0, 1);
        assert_eq!(s.intended_ns(0), 0);
        assert_eq!(s.intended_ns(1), 1_000_000);
        assert_eq!(s.intended_ns(1000), 1_000_000_000);
    }

    #[test]
    fn constant_schedules_interleave_across_workers() {
        // 4 workers at 1000/s in total: worker i sends at (4k + i) ms.
        let mut all: Vec<u64> = (0..4)
            .flat_map(|w| {
                let mut s = Schedule::new(Arrival::Constant, 1000.0, 0, w, 4);
                (0..10).map(move |k| s.intended_ns(k)).collect::<Vec<_>>()
            })
            .collect();
        all.sort_unstable();
        let want: Vec<u64> = (0..40).map(|k| k * 1_000_000).collect();
        assert_eq!(all, want);
    }

    #[test]
    fn scheduled_pace_table() {
        // A replay whose run may last 10 ms.
        let p = Pacer::scheduled(Some(10_000_000));
        let cases: [(u64, NextInstant, Pace); 7] = [
            (0, NextInstant::At(0), Pace::SendNow(0)),
            (0, NextInstant::At(2_000), Pace::Wait(2_000)),
            // Behind: overdue requests go at once with their logged instants.
            (5_000, NextInstant::At(2_000), Pace::SendNow(2_000)),
            (5_000, NextInstant::Pending, Pace::Wait(PENDING_RETRY_NS)),
            // The log ends: the worker ends, however long the run could still last.
            (5_000, NextInstant::Over, Pace::Done),
            // A request past the run's end is never sent.
            (5_000, NextInstant::At(10_000_000), Pace::Done),
            (
                9_999_999,
                NextInstant::At(9_999_999),
                Pace::SendNow(9_999_999),
            ),
        ];
        for (elapsed, next, want) in cases {
            assert_eq!(p.pace_next(elapsed, next), want, "{elapsed} {next:?}");
        }
        assert!(p.is_scheduled());
        assert_eq!(Pacer::scheduled(None).clone().pace(0, 0), Pace::Done);
    }

    #[test]
    fn pace_table() {
        // 1000 req/s constant, run ends at 10 ms.
        let mut p = Pacer::new(
            Schedule::new(Arrival::Constant, 1000.0, 0, 0, 1),
            Some(10_000_000),
        );
        let cases: [(u64, u64, Pace); 10] = [
            (0, 0, Pace::SendNow(0)),
            (0, 1, Pace::Wait(1_000_000)),
            (999_999, 1, Pace::Wait(1)),
            (1_000_000, 1, Pace::SendNow(1_000_000)),
            // Behind schedule: overdue arrivals are sent at once with their own times.
            (5_500_000, 2, Pace::SendNow(2_000_000)),
            (5_500_000, 6, Pace::Wait(500_000)),
            (9_999_999, 9, Pace::SendNow(9_000_000)),
            // No arrival left before the end: wait for the end, then done.
            (9_999_999, 10, Pace::Wait(1)),
            (10_000_000, 10, Pace::Done),
            (12_000_000, 10, Pace::Done),
        ];
        for (elapsed, sent, want) in cases {
            assert_eq!(p.pace(elapsed, sent), want, "elapsed={elapsed} sent={sent}");
        }
    }

    #[test]
    fn pace_without_end_never_done() {
        let mut p = Pacer::new(Schedule::new(Arrival::Constant, 1.0, 0, 0, 1), None);
        assert_eq!(p.pace(0, 1_000_000), Pace::Wait(1_000_000 * 1_000_000_000));
    }

    #[test]
    fn poisson_is_seeded_and_repeatable() {
        let mut a = Schedule::new(Arrival::Poisson, 10_000.0, 42, 0, 1);
        let mut b = Schedule::new(Arrival::Poisson, 10_000.0, 42, 0, 1);
        let mut c = Schedule::new(Arrival::Poisson, 10_000.0, 43, 0, 1);
        let ta: Vec<u64> = (0..100).map(|k| a.intended_ns(k)).collect();
        let tb: Vec<u64> = (0..100).map(|k| b.intended_ns(k)).collect();
        let tc: Vec<u64> = (0..100).map(|k| c.intended_ns(k)).collect();
        assert_eq!(ta, tb);
        assert_ne!(ta, tc);
        assert!(
            ta.windows(2).all(|w| w[0] <= w[1]),
            "arrival times must not go back"
        );
        // Going back recomputes the same values from the seed.
        assert_eq!(a.intended_ns(5), ta[5]);
    }

    #[test]
    fn poisson_mean_rate_matches() {
        // 100k arrivals at 1000/s should span ~100 s; the sample mean of n exponential
        // gaps has relative sd 1/sqrt(n) = 0.3%, so 2% is > 6 sd: a deterministic check
        // (fixed seed) that the gap formula has the right scale.
        let mut s = Schedule::new(Arrival::Poisson, 1000.0, 7, 0, 1);
        let last = s.intended_ns(99_999) as f64 / 1e9;
        assert!((last - 100.0).abs() < 2.0, "span {last} s");
    }

    #[test]
    fn poisson_workers_split_the_rate() {
        // Each of 4 workers runs at R/4, so its 25k arrivals span ~100 s at R = 1000.
        let mut s = Schedule::new(Arrival::Poisson, 1000.0, 7, 3, 4);
        let last = s.intended_ns(24_999) as f64 / 1e9;
        assert!((last - 100.0).abs() < 4.0, "span {last} s");
    }
}
