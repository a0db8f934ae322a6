//! A day of office work as a seeded, precomputed schedule (pure, no clock).
//!
//! A person makes `decisions_per_day` conscious decisions over an office day of
//! `office_day_s` (8 hours); each becomes an item creation, edit or deletion on one of
//! the person's devices. Decisions arrive as a Poisson process, so think times are
//! exponential, drawn from a ChaCha stream seeded by (seed, user): the same seed gives
//! the same day. The compression factor divides every office-time interval: 1 (the
//! default) is real time, so N users are N people; `compress = 480` runs 8 hours in one
//! minute at 480 times the rate, a stress test whose N users send the requests of about
//! 480 N people (docs/methodology.md, "The office").
//!
//! Two ways to start a day. A *warm* day (the default) measures the steady state of
//! people already at work: before the window, untimed, each device runs its first sync
//! and then one poll interval of the person's life (its polls at a seeded phase, the
//! person's decisions), so at the window's first second every device last polled one
//! seeded phase ago with a full interval's changes behind it, and the window needs only
//! [`POLLS`] polls of every device. A *cold* day starts with every device's first sync
//! inside the window (spread over its first tenth), as on a morning when every client
//! starts at once.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::profile::Profile;

/// Share of decisions that create an item; edits and deletions follow.
pub const CREATE_SHARE: f64 = 0.35;
/// Share of decisions that edit an item.
pub const EDIT_SHARE: f64 = 0.50;
/// Share of edits that first try a deliberately stale write (If-Match with an ETag the
/// item had before its last change), which the server must refuse with 412.
pub const STALE_PROBE_SHARE: f64 = 0.05;
/// An office day, seconds.
pub const OFFICE_DAY_S: f64 = 8.0 * 3600.0;
/// Polls every device makes in the measured window of a day of the default length
/// (K in docs/methodology.md, "The office"). One: on a warm day each of them is a
/// steady-state poll (its delta covers one whole interval of the person's decisions),
/// so one poll per device already samples every device's experience, 2N polls for N
/// people; a second would double every study's days for no new kind of sample.
pub const POLLS: f64 = 1.0;

/// The default wall-clock length of a day whose slowest profile polls every
/// `slowest_poll_s` office seconds, at `compress`. Warm: [`POLLS`] intervals of the
/// slowest profile, in which every device polls exactly [`POLLS`] times (its phase is
/// uniform in one interval): 30 minutes for the default mix at real time (Thunderbird),
/// 15 without Thunderbird, 3.75 s compressed 480x. Cold: the first syncs spread over
/// the first tenth of the day, then [`POLLS`] intervals, so (polls + 1/2) intervals.
pub fn default_wall_s(slowest_poll_s: f64, compress: f64, cold: bool) -> f64 {
    let intervals = if cold { POLLS + 0.5 } else { POLLS };
    intervals * slowest_poll_s / compress
}

/// What a decision does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// A new item.
    Create,
    /// A change to an item the device shows.
    Edit,
    /// A deletion of an item the device shows.
    Delete,
}

/// One scheduled thing a user does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The device's first sync: discovery, full listing, fetch of everything.
    InitialSync {
        /// Which of the user's devices.
        device: usize,
    },
    /// A poll.
    Poll {
        /// Which of the user's devices.
        device: usize,
    },
    /// A decision made on a device.
    Decide {
        /// Which of the user's devices.
        device: usize,
        /// Create, edit or delete.
        what: Decision,
        /// A random number that picks the item (edit, delete).
        pick: u64,
        /// An edit that first tries a stale write.
        stale_probe: bool,
    },
}

/// One scheduled action of one user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// When, nanoseconds after the day starts (wall clock, compressed).
    pub at_ns: u64,
    /// Which user (index).
    pub user: usize,
    /// What.
    pub action: Action,
}

/// The parameters of a day.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DayPlan {
    /// Decisions per person per (office) day.
    pub decisions_per_day: u32,
    /// Office time / wall time.
    pub compress: f64,
    /// Wall-clock length of the run, seconds.
    pub wall_s: f64,
    /// Devices per person (each with the person's profile).
    pub devices: usize,
    /// Seed of every random choice.
    pub seed: u64,
    /// A cold day: every device's first sync inside the window (false: a warm day,
    /// first syncs and one interval of life before it, untimed).
    pub cold: bool,
}

/// A user's schedule: what runs untimed before the window, then the window.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Schedule {
    /// Before the window (warm day), in order, unpaced: `at_ns` only orders them
    /// (nanoseconds after the lead-in starts, at the day's pace). Empty on a cold day.
    pub lead_in: Vec<Event>,
    /// The measured window, `at_ns` after it starts.
    pub window: Vec<Event>,
}

impl DayPlan {
    /// The measured window's events of user `user` with profile `profile`, in time
    /// order ([`DayPlan::schedule`]'s window).
    pub fn events(&self, user: usize, profile: Profile) -> Vec<Event> {
        self.schedule(user, profile).window
    }

    /// The schedule of user `user` with profile `profile`.
    pub fn schedule(&self, user: usize, profile: Profile) -> Schedule {
        let mut rng = ChaCha8Rng::seed_from_u64(
            self.seed ^ (user as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        let wall_ns = (self.wall_s * 1e9) as u64;
        let poll_ns = (profile.poll_interval_s() / self.compress * 1e9).max(1e6) as u64;
        if !self.cold {
            return self.warm(&mut rng, user, wall_ns, poll_ns);
        }
        // First syncs spread over the first tenth of the run (or one poll interval).
        let spread_ns = poll_ns.min(wall_ns / 10).max(1);
        let mut out = Vec::new();
        let mut first_done = 0;
        for device in 0..self.devices {
            let t0 = rng.random_range(0..spread_ns);
            first_done = first_done.max(t0);
            out.push(Event {
                at_ns: t0,
                user,
                action: Action::InitialSync { device },
            });
            let mut t = t0 + poll_ns;
            while t < wall_ns {
                out.push(Event {
                    at_ns: t,
                    user,
                    action: Action::Poll { device },
                });
                t += poll_ns;
            }
        }
        self.decisions(&mut rng, user, first_done as f64, wall_ns, &mut out);
        out.sort_by_key(|e| e.at_ns);
        Schedule {
            lead_in: Vec::new(),
            window: out,
        }
    }

    /// A warm day, on a clock that starts one poll interval (`poll_ns`) before the
    /// window: each device's first sync at 0, its polls from a seeded phase in that
    /// first interval on, the person's decisions from 0 on; what falls before the
    /// window is the lead-in.
    fn warm(&self, rng: &mut ChaCha8Rng, user: usize, wall_ns: u64, poll_ns: u64) -> Schedule {
        let end_ns = poll_ns + wall_ns;
        let mut all = Vec::new();
        for device in 0..self.devices {
            all.push(Event {
                at_ns: 0,
                user,
                action: Action::InitialSync { device },
            });
            let mut t = rng.random_range(1..poll_ns.max(2));
            while t < end_ns {
                all.push(Event {
                    at_ns: t,
                    user,
                    action: Action::Poll { device },
                });
                t += poll_ns;
            }
        }
        self.decisions(rng, user, 0.0, end_ns, &mut all);
        // Stable: the first syncs stay first.
        all.sort_by_key(|e| e.at_ns);
        let split = all.partition_point(|e| e.at_ns < poll_ns);
        let mut window = all.split_off(split);
        for e in &mut window {
            e.at_ns -= poll_ns;
        }
        Schedule {
            lead_in: all,
            window,
        }
    }

    /// The person's decisions after `from_ns`, before `end_ns` (Poisson at the day's
    /// pace), each strictly after `from_ns`.
    fn decisions(
        &self,
        rng: &mut ChaCha8Rng,
        user: usize,
        from_ns: f64,
        end_ns: u64,
        out: &mut Vec<Event>,
    ) {
        // Decisions per wall second.
        let rate = f64::from(self.decisions_per_day) / OFFICE_DAY_S * self.compress;
        if rate <= 0.0 {
            return;
        }
        let mut t = from_ns;
        loop {
            let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
            t += -u.ln() / rate * 1e9;
            if t >= end_ns as f64 {
                break;
            }
            let r: f64 = rng.random();
            let what = if r < CREATE_SHARE {
                Decision::Create
            } else if r < CREATE_SHARE + EDIT_SHARE {
                Decision::Edit
            } else {
                Decision::Delete
            };
            let stale_probe = what == Decision::Edit && rng.random_bool(STALE_PROBE_SHARE);
            out.push(Event {
                // Strictly after `from_ns`: every device is set up by then.
                at_ns: (t as u64).max(from_ns as u64 + 1),
                user,
                action: Action::Decide {
                    device: rng.random_range(0..self.devices),
                    what,
                    pick: rng.random(),
                    stale_probe,
                },
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(seed: u64) -> DayPlan {
        DayPlan {
            decisions_per_day: 250,
            compress: 480.0,
            wall_s: 60.0,
            devices: 2,
            seed,
            cold: true,
        }
    }

    fn count(ev: &[Event], f: impl Fn(&Action) -> bool) -> usize {
        ev.iter().filter(|e| f(&e.action)).count()
    }

    #[test]
    fn a_default_cold_day_gives_every_device_its_polls_after_its_first_sync() {
        for compress in [1.0, 480.0] {
            let day = DayPlan {
                wall_s: default_wall_s(Profile::Thunderbird.poll_interval_s(), compress, true),
                compress,
                ..plan(4)
            };
            for user in 0..50 {
                for p in Profile::ALL {
                    let s = day.schedule(user, p);
                    assert!(s.lead_in.is_empty());
                    let polls =
                        count(&s.window, |a| matches!(a, Action::Poll { device: 0 })) as f64;
                    let want = (POLLS * 1800.0 / p.poll_interval_s()).floor();
                    assert!(polls >= want, "{p:?} at {compress}x: {polls} polls");
                }
            }
        }
        assert_eq!(default_wall_s(1800.0, 1.0, true), 2700.0);
        assert_eq!(default_wall_s(1800.0, 1.0, false), 1800.0);
    }

    #[test]
    fn a_warm_day_is_set_up_before_its_window_and_polls_every_device_k_times() {
        for compress in [1.0, 480.0] {
            let slowest = Profile::Thunderbird.poll_interval_s();
            let day = DayPlan {
                wall_s: default_wall_s(slowest, compress, false),
                compress,
                cold: false,
                ..plan(5)
            };
            for user in 0..50 {
                for p in Profile::ALL {
                    let s = day.schedule(user, p);
                    // The lead-in: both first syncs first, then one poll of each device
                    // within one interval, and the person's decisions.
                    assert!(s.lead_in[..2]
                        .iter()
                        .all(|e| matches!(e.action, Action::InitialSync { .. })));
                    for d in 0..2 {
                        assert_eq!(count(&s.lead_in, |a| *a == Action::Poll { device: d }), 1);
                        assert_eq!(
                            count(&s.window, |a| *a == Action::InitialSync { device: d }),
                            0
                        );
                        let per_window = (slowest / p.poll_interval_s()) * POLLS;
                        assert_eq!(
                            count(&s.window, |a| *a == Action::Poll { device: d }) as f64,
                            per_window,
                            "{p:?} at {compress}x"
                        );
                    }
                    assert!(s.window.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));
                    assert!(s
                        .window
                        .last()
                        .is_none_or(|e| (e.at_ns as f64) < day.wall_s * 1e9));
                }
            }
        }
    }

    #[test]
    fn a_warm_windows_decisions_run_at_the_days_pace_from_its_first_second() {
        // 250 decisions in 8 h at 480x: 4.34 a second; a 60 s window holds about 260
        // per person, its first 10 s about 43, as many as any other 10 s.
        let day = DayPlan {
            cold: false,
            ..plan(9)
        };
        let (mut first, mut all) = (0, 0);
        for user in 0..40 {
            for e in day.events(user, Profile::Evolution) {
                if matches!(e.action, Action::Decide { .. }) {
                    all += 1;
                    if e.at_ns < 10_000_000_000 {
                        first += 1;
                    }
                }
            }
        }
        let per_user = all as f64 / 40.0;
        assert!((230.0..290.0).contains(&per_user), "{per_user}");
        let share = f64::from(first) / f64::from(all);
        assert!((0.13..0.21).contains(&share), "{share}");
    }

    #[test]
    fn same_seed_same_day_other_seed_other_day() {
        let a = plan(7).events(3, Profile::Davx5);
        assert_eq!(a, plan(7).events(3, Profile::Davx5));
        assert_ne!(a, plan(8).events(3, Profile::Davx5));
        assert_ne!(a, plan(7).events(4, Profile::Davx5));
    }

    #[test]
    fn a_compressed_day_keeps_its_counts() {
        // 250 decisions in 8 h, compressed 480x into 60 s: about 250 decisions, and
        // a 15-minute poll every 1.875 s on each of the two devices.
        let mut decisions = 0;
        let mut polls = 0;
        for user in 0..40 {
            for e in plan(1).events(user, Profile::Apple) {
                match e.action {
                    Action::Decide { .. } => decisions += 1,
                    Action::Poll { .. } => polls += 1,
                    Action::InitialSync { .. } => {}
                }
            }
        }
        let per_user = decisions as f64 / 40.0;
        assert!((225.0..275.0).contains(&per_user), "{per_user}");
        let polls_per_device = polls as f64 / 80.0;
        assert!(
            (29.0..=32.0).contains(&polls_per_device),
            "{polls_per_device}"
        );
    }

    #[test]
    fn decisions_follow_every_first_sync_and_events_are_ordered() {
        let ev = plan(3).events(0, Profile::Thunderbird);
        let last_first = ev
            .iter()
            .filter(|e| matches!(e.action, Action::InitialSync { .. }))
            .map(|e| e.at_ns)
            .max()
            .unwrap();
        assert!(ev
            .iter()
            .filter(|e| matches!(e.action, Action::Decide { .. }))
            .all(|e| e.at_ns > last_first));
        assert!(ev.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));
        let edits = ev
            .iter()
            .filter(|e| {
                matches!(
                    e.action,
                    Action::Decide {
                        what: Decision::Edit,
                        ..
                    }
                )
            })
            .count();
        assert!(edits > 50, "{edits}");
    }
}
