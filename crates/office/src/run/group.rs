//! One group of users' day on its threads: the events in order, each span of the day on
//! a fresh thread ([`super::THREAD_SPAN`]); then, every group's day over, the audit.

use super::*;

/// What one group of users' threads did.
pub(super) struct Outcome {
    pub(super) users: Vec<User>,
    pub(super) planned: u64,
    pub(super) ran: u64,
    pub(super) skipped: u64,
    pub(super) items: u64,
    /// CPU time of the group's span threads during the day (audit excluded), nanoseconds.
    pub(super) cpu_ns: u64,
    /// When its last action ended, nanoseconds after the window began.
    pub(super) end_ns: u64,
    /// Polls each device ran in the window, per user (in `users`' order).
    pub(super) polls: Vec<Vec<u32>>,
}

/// One group's share of the day: its users' events in time order, each span on a fresh
/// thread while this one waits (the audit follows, [`audit`]).
pub(super) fn day(
    ctx: Ctx<'_>,
    plan: DayPlan,
    cfg: &OfficeConfig,
    group: Vec<(usize, User)>,
) -> Outcome {
    let mut events: Vec<(usize, Event)> = Vec::new();
    let mut users: Vec<User> = Vec::with_capacity(group.len());
    for (local, (global, mut user)) in group.into_iter().enumerate() {
        let profile: Profile = user.devices[0].profile;
        name_devices(&mut user);
        events.extend(plan.events(global, profile).into_iter().map(|e| (local, e)));
        users.push(user);
    }
    events.sort_by_key(|(_, e)| e.at_ns);
    let wall_ns = u64::try_from(cfg.duration.as_nanos()).unwrap_or(u64::MAX);
    // A slow server makes actions late; past this, the rest are skipped (and counted).
    let hard_stop_ns = wall_ns.saturating_add((wall_ns / 2).max(10_000_000_000));
    let planned = events.len() as u64;
    cfg.progress.add_total(planned);
    let mut polls: Vec<Vec<u32>> = users.iter().map(|u| vec![0; u.devices.len()]).collect();
    // The day runs in spans, each on a fresh thread (this one waits): see THREAD_SPAN.
    let span_ns = u64::try_from(cfg.thread_span.as_nanos())
        .unwrap_or(u64::MAX)
        .max(1);
    // `ran`: how many events have run, and the index of the next one.
    let (mut ran, mut cpu_ns) = (0usize, 0u64);
    while ran < events.len() {
        let span_end = ns_since(ctx.rec.origin).saturating_add(span_ns);
        let rest = &events[ran..];
        let (users, polls) = (&mut users, &mut polls);
        let span = std::thread::scope(|s| {
            s.spawn(|| {
                let cpu0 = thread_cpu_ns();
                let r = run_span(ctx, cfg, rest, hard_stop_ns, span_end, users, polls);
                (r, thread_cpu_ns().saturating_sub(cpu0))
            })
            .join()
        });
        let ((n, more), cpu) = match span {
            Ok(x) => x,
            // The same failure a panic of this thread would be: the caller counts it.
            Err(panic) => std::panic::resume_unwind(panic),
        };
        ran += n;
        cpu_ns += cpu;
        if !more {
            break;
        }
    }
    let ran = ran as u64;
    let end_ns = ns_since(ctx.rec.origin);
    Outcome {
        users,
        planned,
        ran,
        skipped: planned - ran,
        items: 0,
        cpu_ns,
        end_ns,
        polls,
    }
}

/// The end-of-day audit of every group's users, once every group's day has ended, on
/// at most [`UNTIMED_IN_FLIGHT`] threads: like set-up and lead-in it is not load, and
/// each group auditing as its own day ended put one connection per group on the
/// server at once (dozens at real time), more than a server that serves a few at a
/// time accepts: Radicale (8 connections, a listen backlog of 5) dropped the rest's
/// SYNs, their connects backed off past the timeout, and 36 audit requests of 250
/// people counted as transport violations of a day that had served every request.
pub(super) fn audit(rec: &Recorders, outcomes: Vec<Outcome>) -> Result<Vec<Outcome>, OfficeError> {
    // Not timed: nothing it sends is recorded.
    let ctx = Ctx {
        rec,
        measured: false,
    };
    each_group(outcomes, UNTIMED_IN_FLIGHT, |mut o: Outcome| {
        o.items = o
            .users
            .iter_mut()
            .map(|u| {
                u.devices[0].conn.set_agent("volley-office/audit".into());
                audit::audit(ctx, u) as u64
            })
            .sum();
        o
    })
}

/// Runs `events` in order until `span_end` (the next event then waits for a fresh
/// thread), a stop, the hard stop or the end. Returns how many ran and whether more may.
fn run_span(
    ctx: Ctx<'_>,
    cfg: &OfficeConfig,
    events: &[(usize, Event)],
    hard_stop_ns: u64,
    span_end: u64,
    users: &mut [User],
    polls: &mut [Vec<u32>],
) -> (usize, bool) {
    for (i, (local, e)) in events.iter().enumerate() {
        if cfg.stop.load(Ordering::Relaxed) || ns_since(ctx.rec.origin) > hard_stop_ns {
            return (i, false);
        }
        if ns_since(ctx.rec.origin) >= span_end {
            return (i, true);
        }
        if !sleep_until(ctx, e.at_ns.min(span_end), &cfg.stop) {
            return (i, false);
        }
        if e.at_ns > span_end {
            return (i, true);
        }
        act(ctx, &mut users[*local], e.action, e.at_ns);
        if let Action::Poll { device } = e.action {
            polls[*local][device] += 1;
        }
        cfg.progress.step();
    }
    (events.len(), false)
}

/// Sleeps until `at_ns` after the origin, in slices so a stop is seen; false if stopped.
fn sleep_until(ctx: Ctx<'_>, at_ns: u64, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = ns_since(ctx.rec.origin);
        if now >= at_ns {
            return true;
        }
        std::thread::sleep(Duration::from_nanos((at_ns - now).min(250_000_000)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_ends_before_an_event_past_it_and_at_a_stop_without_acting() {
        let cfg = OfficeConfig::new("http://127.0.0.1:9/", vec![("u".into(), "p".into())]);
        let rec = Recorders::new();
        let ctx = Ctx {
            rec: &rec,
            measured: false,
        };
        let poll = |at_ns| {
            (
                0,
                Event {
                    at_ns,
                    user: 0,
                    action: Action::Poll { device: 0 },
                },
            )
        };
        // No user to act for: an event acted on would index past the slice and panic.
        let (users, polls): (&mut [User], &mut [Vec<u32>]) = (&mut [], &mut []);
        let later = [poll(3_600_000_000_000)];
        let now = ns_since(rec.origin);
        // Due after the span: the span ends at its end, for a fresh thread to go on.
        assert_eq!(
            run_span(ctx, &cfg, &later, u64::MAX, now + 1_000_000, users, polls),
            (0, true)
        );
        // A span already over hands on at once.
        assert_eq!(
            run_span(ctx, &cfg, &later, u64::MAX, 0, users, polls),
            (0, true)
        );
        // Past the hard stop, or stopped: the day ends.
        assert_eq!(
            run_span(ctx, &cfg, &later, 0, u64::MAX, users, polls),
            (0, false)
        );
        cfg.stop.store(true, Ordering::Relaxed);
        assert_eq!(
            run_span(ctx, &cfg, &later, u64::MAX, u64::MAX, users, polls),
            (0, false)
        );
        assert_eq!(
            run_span(ctx, &cfg, &[], u64::MAX, u64::MAX, users, polls),
            (0, false)
        );
    }
}
