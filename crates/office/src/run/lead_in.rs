//! A warm day's lead-in: before the measured window, untimed, every device's first sync
//! and one poll interval of its person's day, paced, with its failures set apart from
//! the day's verdict (docs/methodology.md, the office's warm day). Split from the day's
//! run for its size; it uses the run's thread pool and helpers.

use super::*;

/// A warm day's lead-in on the day's own threads' share of users: each user's
/// [`crate::day::Schedule::lead_in`] (first syncs, then one poll interval of the day),
/// in schedule order across the thread's users, at most [`UNTIMED_IN_FLIGHT`] actions
/// at a time, recorded apart from the day. A device whose first sync failed is tried
/// twice more. A user with a failed request has its violations set apart
/// ([`LeadIn::failures`]) and its truth read back from the server
/// ([`audit::reconcile`]); a user without keeps its lead-in checks, which are the
/// server's answers. Errs when the lead-in could not finish (a device never synced, a
/// calendar could not be read back).
pub(super) fn lead_in(
    cfg: &OfficeConfig,
    plan: DayPlan,
    groups: Groups,
) -> Result<(Groups, LeadIn), OfficeError> {
    cfg.progress.enter(Phase::LeadIn, 0);
    let rec = Recorders::new();
    let rec_ref = &rec;
    let results = each_group(groups, UNTIMED_IN_FLIGHT, |mut group| {
        let cpu0 = thread_cpu_ns();
        let ctx = Ctx {
            rec: rec_ref,
            measured: true,
        };
        // Set-up's checks stay the user's; the lead-in's start empty.
        let kept: Vec<Violations> = group
            .iter_mut()
            .map(|(_, u)| std::mem::take(&mut u.violations))
            .collect();
        let mut events: Vec<(usize, Event)> = Vec::new();
        for (local, (global, user)) in group.iter_mut().enumerate() {
            let profile = user.devices[0].profile;
            name_devices(user);
            let lead = plan.schedule(*global, profile).lead_in;
            events.extend(lead.into_iter().map(|e| (local, e)));
        }
        events.sort_by_key(|(_, e)| e.at_ns);
        cfg.progress.add_total(events.len() as u64);
        let mut ran = 0u64;
        for (local, e) in &events {
            if cfg.stop.load(Ordering::Relaxed) {
                break;
            }
            let user = &mut group[*local].1;
            // Unpaced: a session counts from its own start.
            act(ctx, user, e.action, ns_since(rec_ref.origin));
            close_all(user);
            ran += 1;
            cfg.progress.step();
        }
        let mut settled = Settled {
            ran,
            ..Settled::default()
        };
        for ((_, user), kept) in group.iter_mut().zip(kept) {
            settled.settle(ctx, user, kept, &cfg.stop);
        }
        settled.cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
        (group, settled)
    })?;
    let wall_s = rec.origin.elapsed().as_secs_f64();
    let mut groups = Vec::new();
    let mut all = Settled::default();
    for (g, s) in results {
        groups.push(g);
        all.add(s);
    }
    let failures = crate::report::SetApart::of(&all.apart);
    if !all.unready.is_empty() || !all.unsettled.is_empty() {
        return Err(OfficeError::LeadIn {
            why: all.why_unfinished(cfg.devices * cfg.accounts.len()),
            failures: failures.words(),
        });
    }
    let requests = rec
        .ops
        .into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(PoisonError::into_inner)
                .completed
        })
        .sum();
    let sessions = SessionKind::ALL
        .iter()
        .zip(rec.sessions)
        .map(|(k, m)| {
            let t = m.into_inner().unwrap_or_else(PoisonError::into_inner);
            LatencyRow::of(k.name(), &t)
        })
        .collect();
    Ok((
        groups,
        LeadIn {
            wall_s,
            in_flight: UNTIMED_IN_FLIGHT,
            actions: all.ran,
            requests,
            sessions,
            generator_cpu_s: all.cpu_ns as f64 / 1e9,
            failed_requests: all.failed_requests,
            reconciled_users: all.reconciled,
            failures,
        },
    ))
}

/// What one lead-in thread left: actions run, its CPU time, the violations it set
/// apart and the users it could not bring to the window.
#[derive(Default)]
struct Settled {
    ran: u64,
    cpu_ns: u64,
    failed_requests: u64,
    reconciled: u64,
    apart: Violations,
    /// Devices (`user#device`) whose first sync never succeeded.
    unready: Vec<String>,
    /// Users whose calendar could not be read back.
    unsettled: Vec<String>,
}

/// Tries of a first sync in the lead-in, and of reading a calendar back after it,
/// before the day is given up as not set up.
const FIRST_SYNC_TRIES: usize = 3;

/// The pause before the first retry of a failed first sync or reading back, doubled
/// at the next: a server that failed a burst of requests gets a moment, as a client
/// retrying later gives it.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// Request failures: what a loaded server's failed answer is, as opposed to a check of
/// what it answered.
const REQUEST_FAILURES: [Violation; 3] = [
    Violation::Transport,
    Violation::ServerError,
    Violation::UnexpectedStatus,
];

impl Settled {
    /// Brings `user` to the window after its lead-in: a first sync that failed tried
    /// again; after a failed request its lead-in violations set apart and its truth
    /// read back from the server, else they join `kept` (set-up's); `kept` becomes
    /// the user's violations again.
    fn settle(&mut self, ctx: Ctx<'_>, user: &mut User, kept: Violations, stop: &AtomicBool) {
        for d in 0..user.devices.len() {
            for again in 1..FIRST_SYNC_TRIES {
                if user.devices[d].ready || stop.load(Ordering::Relaxed) {
                    break;
                }
                // As a client does after a failed sync: later, not at once.
                std::thread::sleep(RETRY_PAUSE * again as u32);
                session::run(ctx, user, d, ns_since(ctx.rec.origin));
                close_all(user);
            }
            if !user.devices[d].ready && !stop.load(Ordering::Relaxed) {
                self.unready.push(format!("{}#{d}", user.name));
            }
        }
        let failed: u64 = REQUEST_FAILURES
            .iter()
            .map(|k| user.violations.count(*k))
            .sum();
        if failed > 0 {
            self.failed_requests += failed;
            self.reconciled += 1;
            let untimed = Ctx {
                measured: false,
                ..ctx
            };
            let read_back = (0..FIRST_SYNC_TRIES).any(|again| {
                std::thread::sleep(RETRY_PAUSE * again as u32);
                audit::reconcile(untimed, user)
            });
            if !read_back {
                self.unsettled.push(user.name.clone());
            }
            close_all(user);
        }
        let lead = std::mem::replace(&mut user.violations, kept);
        if failed > 0 {
            self.apart.merge(lead);
        } else {
            user.violations.merge(lead);
        }
    }

    fn add(&mut self, o: Settled) {
        self.ran += o.ran;
        self.cpu_ns += o.cpu_ns;
        self.failed_requests += o.failed_requests;
        self.reconciled += o.reconciled;
        self.apart.merge(o.apart);
        self.unready.extend(o.unready);
        self.unsettled.extend(o.unsettled);
    }

    /// Why the lead-in could not finish, in words.
    fn why_unfinished(&self, devices: usize) -> String {
        let mut why = Vec::new();
        if !self.unready.is_empty() {
            why.push(format!(
                "{} of {devices} devices never completed their first sync in {FIRST_SYNC_TRIES} tries (e.g. {})",
                self.unready.len(),
                self.unready[0]
            ));
        }
        if !self.unsettled.is_empty() {
            why.push(format!(
                "{} users' calendars could not be read back after a failed request (e.g. {})",
                self.unsettled.len(),
                self.unsettled[0]
            ));
        }
        why.join("; ")
    }
}
