//! How long a plan takes: the per-step estimate (request-count steps at the offered,
//! measured, stated or guessed rate), the capacity search's step count, and the
//! [`RateBook`] the progress ETA learns from. Pure: no clock.

use std::time::Duration;

use volley_analysis::bootstrap::median;

use super::{Cell, Plan, PlannedStep};

impl Plan {
    /// The request rate a request-count step of `cell` is expected to run at, and where
    /// that figure comes from: the offered rate (open loop), what finished steps of the
    /// same family measured (`book`), the study's `expected_rate`, or the fallback guess
    /// of [`GUESS_RPS_PER_CONNECTION`].
    pub fn request_rate(&self, cell: &Cell, book: &RateBook) -> (f64, RateSource) {
        if let Some(r) = cell.rate {
            return (r, RateSource::Offered);
        }
        if let Some(r) = book.rate(cell) {
            return (r, RateSource::Measured);
        }
        if let Some(r) = self.workloads[cell.workload].expected_rate {
            return (r, RateSource::Stated);
        }
        (
            GUESS_RPS_PER_CONNECTION * f64::from(cell.concurrency.max(1)),
            RateSource::Guess,
        )
    }

    /// Rough length of one step of `cell`, for the plan: warm-up, the measured part,
    /// cool-down. A request-count step lasts requests / [`Plan::request_rate`] (capped by
    /// the step's duration when it has both: the first limit reached ends it).
    pub fn step_estimate(&self, cell: &Cell) -> Duration {
        self.step_estimate_learned(cell, &RateBook::default())
    }

    /// [`Plan::step_estimate`] with the rates measured so far: the ETA's estimate.
    pub fn step_estimate_learned(&self, cell: &Cell, book: &RateBook) -> Duration {
        let t = &self.timing;
        t.warmup
            .saturating_add(self.measured_estimate(cell, book))
            .saturating_add(t.cooldown)
            .saturating_add(self.office_untimed(cell))
    }

    /// How long the measured part of one step of `cell` lasts, by its duration or its
    /// request count at [`Plan::request_rate`] (the first limit reached when it has both).
    pub fn measured_estimate(&self, cell: &Cell, book: &RateBook) -> Duration {
        let t = &self.timing;
        let w = &self.workloads[cell.workload];
        let duration = t.measured(w.rated(self.mode));
        // An office day lasts its duration; request counts are the http workloads'.
        let requests = match w.office {
            Some(_) => None,
            None => w.requests.or(t.requests),
        };
        let by_count = requests.map(|n| {
            let (rate, _) = self.request_rate(cell, book);
            Duration::try_from_secs_f64(n as f64 / rate.max(1e-3)).unwrap_or(Duration::MAX)
        });
        match (duration, by_count) {
            (Some(d), Some(c)) => d.min(c),
            (Some(d), None) => d,
            (None, Some(c)) => c,
            (None, None) => Duration::ZERO,
        }
    }

    /// What an office day of `cell` spends outside its window, for the estimate: its
    /// set-up and a warm day's lead-in, [`untimed_requests`] at [`untimed_rps`] of its
    /// server (zero for http cells). A searched cell's days are taken at the mean of
    /// the search's first two counts (its start and the double, capped at its most);
    /// their calendars are set up once, at the larger count (a larger day keeps the
    /// calendars a smaller one left), that set-up shared among the search's days.
    pub fn office_untimed(&self, cell: &Cell) -> Duration {
        let Some(office) = &self.workloads[cell.workload].office else {
            return Duration::ZERO;
        };
        let kind = self.targets[self.instances[cell.instance].target].kind;
        let (set_up, lead_in) = untimed_requests(office, kind);
        let requests = match (self.search_of_cell(cell), cell.users) {
            (Some(s), _) => {
                let hi = (2.0 * s.start_rate)
                    .min(s.opts.max_rate_rps)
                    .max(s.start_rate);
                let days = f64::from(self.search_steps_for(s));
                lead_in * (s.start_rate + hi) / 2.0 + set_up * hi / days
            }
            (None, Some(u)) => (set_up + lead_in) * f64::from(u),
            (None, None) => set_up + lead_in,
        };
        Duration::try_from_secs_f64(requests / untimed_rps(kind)).unwrap_or(Duration::MAX)
    }

    /// Days a users search with settings `s` is assumed to take (the middle of its
    /// range, as [`Plan::cell_search_steps`]).
    fn search_steps_for(&self, s: &super::SearchPlan) -> u32 {
        let (lo, hi) = steps_range(s);
        (lo + hi).div_ceil(2).max(1)
    }

    /// The part of [`Plan::estimate`] that is office days' set-up and lead-in.
    pub fn office_untimed_total(&self) -> Duration {
        let swept = self
            .steps
            .iter()
            .map(|s| self.office_untimed(&self.cells[s.cell]));
        let searched = self.searched_cells().into_iter().map(|ci| {
            self.office_untimed(&self.cells[ci]) * self.cell_search_steps(ci) * self.cell_passes(ci)
        });
        swept.chain(searched).sum()
    }

    /// The users search that plays `cell`'s workload, if it is searched.
    fn search_of_cell(&self, cell: &Cell) -> Option<&super::SearchPlan> {
        self.users_search_of(self.workloads[cell.workload].office.as_ref()?)
    }

    /// Time left for `steps` (the rest of a sweep), each estimated with the rates
    /// measured so far.
    pub fn remaining_estimate(&self, steps: &[PlannedStep], book: &RateBook) -> Duration {
        steps
            .iter()
            .map(|s| self.step_estimate_learned(&self.cells[s.cell], book))
            .fold(Duration::ZERO, Duration::saturating_add)
    }

    /// Steps one capacity search is expected to take, `(fewest, most)`, from its
    /// settings. Fewest: the start passes, the next doubling fails, then
    /// b = ceil(log2(1 / resolution)) bisections (the bracket [c, 2c] halves each time
    /// until it is within the resolution), each decided by a bare majority of the
    /// repeats. Most: doubling all the way to the maximum rate, every decision near the
    /// edge needing all its repeats. Both capped by the step budget. Where the capacity
    /// lies is unknown in advance, hence a range.
    pub fn search_steps_range(&self) -> Option<(u32, u32)> {
        self.search
            .as_ref()
            .or(self.users_search.as_ref())
            .map(steps_range)
    }

    /// Steps per search the estimate and the ETA assume: the middle of
    /// [`Plan::search_steps_range`].
    pub fn search_steps_estimate(&self) -> u32 {
        self.search_steps_range()
            .map_or(SEARCH_STEPS_FALLBACK, |(lo, hi)| (lo + hi).div_ceil(2))
    }

    /// Steps the search of cell `ci` is assumed to take (the middle of its range).
    pub fn cell_search_steps(&self, ci: usize) -> u32 {
        self.search_of(ci)
            .map(steps_range)
            .map_or(SEARCH_STEPS_FALLBACK, |(lo, hi)| (lo + hi).div_ceil(2))
    }

    /// Whole searches of cell `ci` (`[search] passes`; 1 for a cell not searched).
    pub fn cell_passes(&self, ci: usize) -> u32 {
        self.search_of(ci).map_or(1, |s| s.passes)
    }

    /// Rough length of the whole study: the targets' starts ([`Plan::target_start_total`]),
    /// the sweep's steps, then [`Plan::cell_search_steps`] steps per searched cell.
    pub fn estimate(&self) -> Duration {
        let searched: Duration = self
            .searched_cells()
            .into_iter()
            .map(|ci| {
                self.step_estimate(&self.cells[ci])
                    * self.cell_search_steps(ci)
                    * self.cell_passes(ci)
            })
            .sum();
        self.remaining_estimate(&self.steps, &RateBook::default())
            .saturating_add(searched)
            .saturating_add(self.target_start_total())
    }

    /// What starting the study's targets costs in DAV accounts, for the estimate: each
    /// instance starts once with [`Plan::dav_users`] accounts, each made in turn at
    /// [`start_per_account`] of its kind. Seed 000's 4000 accounts on the built-in server
    /// and 500 calendars on Radicale took 4.6 min here, which no estimate said before.
    pub fn target_start_total(&self) -> Duration {
        self.instances
            .iter()
            .filter_map(|i| {
                let kind = self.targets[i.target].kind;
                let accounts = self.dav_users(i.target)?;
                Some(start_per_account(kind) * accounts)
            })
            .fold(Duration::ZERO, Duration::saturating_add)
    }
}

/// Time a DAV target's start spends per account before it can serve (the target's
/// `dav::set_up`, one request at a time; a stated constant per kind, not measured by the
/// plan). Radicale's calendars are written into its storage before it starts, so it
/// only reads each back: 31 ms per account for 1,000 measured here (35-43 ms at load 7
/// when it made each with MKCALENDAR; 4 or 16 at a time were no faster: its storage
/// lock takes them in turn); Xandikos, which makes a git
/// repository per calendar on its first request, is taken alike. The built-in server
/// provisions a home and a calendar (about 4 fsyncs) before its banner, then answers
/// the read-back: about 60 ms, what is left of seed 000's measured 4.6 min (4000
/// built-in accounts, 500 Radicale calendars) once Radicale's 20 s are taken off. The
/// plain WebDAV servers only answer the read-back.
pub fn start_per_account(kind: volley_targets::TargetKind) -> Duration {
    match kind {
        volley_targets::TargetKind::Builtin => Duration::from_millis(60),
        k if k.is_caldav_server() => Duration::from_millis(40),
        _ => Duration::from_millis(5),
    }
}

/// Steps one search with settings `s` is expected to take, `(fewest, most)`: see
/// [`Plan::search_steps_range`].
fn steps_range(s: &super::SearchPlan) -> (u32, u32) {
    let o = &s.opts;
    let bisections = if o.resolution_share > 0.0 {
        (1.0 / o.resolution_share).log2().ceil().max(0.0) as u32
    } else {
        // Only an absolute resolution: assume the bracket starts near the start rate.
        (s.start_rate / o.resolution_rps.max(1e-9))
            .log2()
            .ceil()
            .max(0.0) as u32
    };
    let doublings = (o.max_rate_rps / s.start_rate).log2().ceil().max(0.0) as u32;
    let need = o.repeats / 2 + 1;
    let fewest = 1 + need * (1 + bisections);
    let most = doublings + 1 + o.repeats * (1 + bisections);
    (fewest.min(o.max_steps), most.min(o.max_steps))
}

/// Items each calendar holds when an office day starts (`volley_office::OfficeConfig`'s
/// default, which a study's office step keeps).
const OFFICE_ITEMS: f64 = volley_office::INITIAL_ITEMS as f64;

/// Set-up requests per person on seeded storage: the calendar's PROPFIND, its listing,
/// and the read-back that takes it as a previous day's (a listing and a multiget;
/// `volley_office` set-up's `adopt`), the principal found once more where the account
/// does not give it.
pub const SEEDED_SET_UP: f64 = 4.0;

/// Requests one person's untimed parts of an office day send to a server of `kind`,
/// roughly, as (set-up, lead-in): set-up finds (or makes) the calendar, lists and
/// empties it and writes its items one PUT each (about 4 + items); on a server whose
/// storage volley seeds with those items ([`super::seeded_items`]: Radicale) it finds
/// the calendar, lists it and reads it back (about [`SEEDED_SET_UP`]); a warm day's
/// lead-in runs two first syncs (about 6 requests each), a poll of each device (about
/// 3) and one interval's decisions (about 1.5 requests each). A cold day has no lead-in.
pub fn untimed_requests(
    office: &super::OfficeLoad,
    kind: volley_targets::TargetKind,
) -> (f64, f64) {
    let set_up = if super::seeded_items(kind) > 0 {
        SEEDED_SET_UP
    } else {
        4.0 + OFFICE_ITEMS
    };
    let decisions = f64::from(office.decisions) * office.mix.slowest_poll_s()
        / volley_office::day::OFFICE_DAY_S;
    let lead_in = match office.cold_start {
        true => 0.0,
        false => 2.0 * (6.0 + 3.0) + 1.5 * decisions,
    };
    (set_up, lead_in)
}

/// Requests per second an office day's untimed parts are assumed to get from a server
/// of `kind` (a guess, said in the plan; at most 8 in flight, each waiting for its
/// answer): the Python CalDAV servers (Radicale, Xandikos) about 50, which write each
/// item with its own file and lock (Radicale here, beside other loads: 27 req/s in
/// set-up, 55 in the lead-in); the others about 500 (the built-in server: 410 and
/// 985).
pub fn untimed_rps(kind: volley_targets::TargetKind) -> f64 {
    if kind.is_caldav_server() {
        50.0
    } else {
        500.0
    }
}

/// Requests per second per connection assumed for a request-count step when the study
/// states no `expected_rate` and nothing has been measured yet: a small static file over
/// keep-alive on loopback. Slow requests (Brotli 11, big bodies, CPU caps) need
/// `expected_rate`.
pub const GUESS_RPS_PER_CONNECTION: f64 = 2000.0;

/// Steps per search assumed when the plan has no search settings.
const SEARCH_STEPS_FALLBACK: u32 = 12;

/// Where [`Plan::request_rate`] got its figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateSource {
    /// The step's offered rate (open loop).
    Offered,
    /// The median of finished steps of the same family.
    Measured,
    /// The study file's `expected_rate`.
    Stated,
    /// [`GUESS_RPS_PER_CONNECTION`] per connection.
    Guess,
}

/// Requests per second measured by finished steps, per family: one (target instance,
/// workload) pair, i.e. target, workload, CPU quota and cores. Concurrency and
/// keep-alive vary within a family; under a CPU cap (seed 002) throughput barely moves
/// with them, and elsewhere the family's median is still far closer than a fixed guess.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RateBook {
    measured: std::collections::BTreeMap<(usize, usize), Vec<f64>>,
}

impl RateBook {
    /// Notes a finished step of `cell` that completed `rps` requests per second
    /// (non-positive or non-finite figures, e.g. a step that failed outright, are
    /// ignored: they would predict an endless step).
    pub fn record(&mut self, cell: &Cell, rps: f64) {
        if rps.is_finite() && rps > 0.0 {
            self.measured
                .entry((cell.instance, cell.workload))
                .or_default()
                .push(rps);
        }
    }

    /// The median measured rate of `cell`'s family, if any step of it finished.
    pub fn rate(&self, cell: &Cell) -> Option<f64> {
        let v = self.measured.get(&(cell.instance, cell.workload))?;
        (!v.is_empty()).then(|| median(v))
    }
}
