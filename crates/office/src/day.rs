//! A day of office work as a seeded, precomputed schedule (pure, no clock).
//!
//! A person makes `decisions_per_day` conscious decisions over an office day of
//! `office_day_s` (8 hours); each becomes an item creation, edit or deletion on one of
//! the person's devices. Decisions arrive as a Poisson process, so think times are
//! exponential, drawn from a ChaCha stream seeded by (seed, user): the same seed gives
//! the same day. Every device first runs its initial sync, then polls at its profile's
//! interval from a seeded phase. The compression factor divides every office-time
//! interval: 1 (the default) is real time, so N users are N people; `compress = 480`
//! runs 8 hours in one minute at 480 times the rate, a stress test whose N users send
//! the requests of about 480 N people (docs/methodology.md, "The office").

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
/// Polls each device makes after its first sync in a day of the default length: a
/// poll p99 over several polls of every device, and a deletion on one device seen by
/// the other's next sync more than once.
pub const DEFAULT_POLLS: f64 = 3.0;

/// The default wall-clock length of a day whose slowest profile polls every
/// `slowest_poll_s` office seconds, at `compress`: the first syncs spread over the
/// first tenth of the day ([`DayPlan::events`]), then [`DEFAULT_POLLS`] polls of the
/// slowest profile, so (polls + 1/2) intervals: at 3.5 intervals the first syncs end
/// by 0.35 of one and the third poll by 3.35. The default mix's slowest (Thunderbird,
/// 30 min) makes 105 minutes at real time, 13 s compressed 480x.
pub fn default_wall_s(slowest_poll_s: f64, compress: f64) -> f64 {
    (DEFAULT_POLLS + 0.5) * slowest_poll_s / compress
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
}

impl DayPlan {
    /// The events of user `user` with profile `profile`, in time order.
    pub fn events(&self, user: usize, profile: Profile) -> Vec<Event> {
        let mut rng = ChaCha8Rng::seed_from_u64(
            self.seed ^ (user as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        let wall_ns = (self.wall_s * 1e9) as u64;
        let poll_ns = (profile.poll_interval_s() / self.compress * 1e9).max(1e6) as u64;
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
        // Decisions per wall second.
        let rate = f64::from(self.decisions_per_day) / OFFICE_DAY_S * self.compress;
        if rate > 0.0 {
            let mut t = first_done as f64;
            loop {
                let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
                t += -u.ln() / rate * 1e9;
                if t >= wall_ns as f64 {
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
                    // Strictly after the last first sync, so every device is set up.
                    at_ns: (t as u64).max(first_done + 1),
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
        out.sort_by_key(|e| e.at_ns);
        out
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
        }
    }

    #[test]
    fn a_default_day_gives_every_device_three_polls_after_its_first_sync() {
        for compress in [1.0, 480.0] {
            let day = DayPlan {
                decisions_per_day: 250,
                compress,
                wall_s: default_wall_s(Profile::Thunderbird.poll_interval_s(), compress),
                devices: 2,
                seed: 4,
            };
            for user in 0..50 {
                for p in Profile::ALL {
                    let polls = day
                        .events(user, p)
                        .iter()
                        .filter(|e| matches!(e.action, Action::Poll { device: 0 }))
                        .count() as f64;
                    let want = (DEFAULT_POLLS * 1800.0 / p.poll_interval_s()).floor();
                    assert!(polls >= want, "{p:?} at {compress}x: {polls} polls");
                }
            }
        }
        assert_eq!(default_wall_s(1800.0, 1.0), 6300.0);
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
