//! Running an office day: set-up (untimed), the day on worker threads, the audit
//! (untimed), then the recorders merged into one report.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use volley_metrics::Recorder;

use crate::check::{Violation, Violations};
use crate::day::{Action, DayPlan, Event};
use crate::driver::{Ctx, Recorders, Tally};
use crate::http::{ns_since, Conn};
use crate::ops::{Op, SessionKind};
use crate::profile::{Mix, Profile};
use crate::progress::{Phase, Progress};
use crate::report::{LatencyRow, LeadIn, OfficeReport, ProfileCount};
use crate::state::{Device, Pending, Server, Truth, User};
use crate::trace::Trace;
use crate::{audit, session, setup, writes, Account, OfficeError};

mod group;
mod lead_in;
use group::{day, Outcome};
use lead_in::lead_in;

/// Each thread's users, with their index among the accounts.
type Groups = Vec<Vec<(usize, User)>>;

/// Most worker threads; users beyond are shared round-robin.
const MAX_THREADS: usize = 256;

/// An office day to run.
#[derive(Debug, Clone)]
pub struct OfficeConfig {
    /// The server's URL (`http://host:port/`); discovery starts at its root.
    pub url: String,
    /// Every virtual user's account (paths and headers as the server lays them out).
    pub accounts: Vec<Account>,
    /// Profiles by weight.
    pub mix: Mix,
    /// Decisions per person per office day.
    pub decisions_per_day: u32,
    /// Office time / wall time.
    pub compress: f64,
    /// Wall-clock length of the measured window.
    pub duration: Duration,
    /// A cold day: every device's first sync inside the window, as on a morning when
    /// every client starts at once. False (the default): a warm day, whose devices run
    /// their first sync and one poll interval before the window, untimed and reported
    /// apart, so the window is the steady state from its first second
    /// ([`crate::day`]).
    pub cold_start: bool,
    /// Devices per person (2: a deletion on one must be seen by the other).
    pub devices: usize,
    /// Seed of the day.
    pub seed: u64,
    /// Items each calendar holds when the day starts.
    pub initial_items: u64,
    /// Take a calendar a previous day left (only the user's own items) as it stands,
    /// topped up to `initial_items`, instead of emptying and refilling it: a study's
    /// users search sets up only the users its smaller days did not have
    /// ([`crate::setup::prepare`]). False: every calendar starts from the same items.
    pub keep_calendars: bool,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Set to end the day early (Ctrl-C).
    pub stop: Arc<AtomicBool>,
    /// Also send `X-Remote-User: <account>` (a server that trusts a proxy's identity
    /// instead of checking Basic credentials, as volley runs Xandikos).
    pub remote_user_header: bool,
    /// Write a line per exchange of every device here ([`crate::trace`]); none: no
    /// trace, at the cost of one branch per request.
    pub trace: Option<PathBuf>,
    /// Counters of how far the run is, for a progress bar the caller draws.
    pub progress: Arc<Progress>,
    /// How long one thread runs a group of users' day before a fresh thread takes over
    /// from the next event ([`THREAD_SPAN`]).
    pub thread_span: Duration,
}

/// How long one thread runs a group of users' day, by default, before a fresh thread
/// takes over from the next event.
///
/// Why: glibc keeps a cache of freed small blocks per thread (up to seven of each size)
/// that only the thread's end gives back to the heap, and the blocks it holds pin the
/// pages around them; a device thread that lives all day holds more of them hour by
/// hour. Four 12-minute office studies of 50 users at once, RSS growth from minute 5
/// to 11: threads that live all day 1.71 KB/s, spans of a minute 0.25 KB/s, glibc's
/// per-thread cache turned off (`GLIBC_TUNABLES=glibc.malloc.tcache_count=0`, which a
/// process cannot set for itself once started) 0.60 KB/s (docs/methodology.md,
/// "Nothing silently dropped", a long run). A fresh thread costs tens of microseconds,
/// once a minute per group.
pub const THREAD_SPAN: Duration = Duration::from_secs(60);

/// Items each calendar holds when the day starts, by default.
pub const INITIAL_ITEMS: u64 = 20;

impl OfficeConfig {
    /// Defaults: 250 decisions a day at real time (compression 1: N users are N
    /// people), a warm day of the default length for the default mix
    /// ([`crate::day::default_wall_s`]: 30 minutes), two devices per person, 20 items
    /// to start with; `(name, password)` accounts whose paths are discovered
    /// ([`Account::new`]).
    pub fn new(url: &str, accounts: Vec<(String, String)>) -> OfficeConfig {
        let accounts = accounts
            .into_iter()
            .map(|(name, password)| Account::new(name, password))
            .collect();
        OfficeConfig::with_accounts(url, accounts)
    }

    /// The defaults of [`OfficeConfig::new`] with accounts as given.
    pub fn with_accounts(url: &str, accounts: Vec<Account>) -> OfficeConfig {
        OfficeConfig {
            url: url.to_owned(),
            accounts,
            mix: Mix::default(),
            decisions_per_day: 250,
            compress: 1.0,
            duration: Duration::from_secs_f64(crate::day::default_wall_s(
                Mix::default().slowest_poll_s(),
                1.0,
                false,
            )),
            cold_start: false,
            devices: 2,
            seed: 1,
            initial_items: INITIAL_ITEMS,
            keep_calendars: false,
            timeout: Duration::from_secs(30),
            stop: Arc::new(AtomicBool::new(false)),
            remote_user_header: false,
            trace: None,
            progress: Arc::default(),
            thread_span: THREAD_SPAN,
        }
    }

    /// The headers `a`'s devices send: its own, and `X-Remote-User` when
    /// [`OfficeConfig::remote_user_header`] asks for it and the account has none.
    fn headers_of(&self, a: &Account) -> Vec<(String, String)> {
        let mut h = a.headers.clone();
        if self.remote_user_header
            && !h
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("X-Remote-User"))
        {
            h.push(("X-Remote-User".into(), a.name.clone()));
        }
        h
    }

    fn check(&self) -> Result<(), OfficeError> {
        let bad = |s: &str| Err(OfficeError::Config(s.to_owned()));
        if self.accounts.is_empty() {
            return bad("the office needs at least one user");
        }
        if !(self.compress.is_finite() && self.compress > 0.0) {
            return bad("the compression factor must be a positive number");
        }
        if self.duration.is_zero() {
            return bad("the day must last longer than zero");
        }
        if self.devices == 0 {
            return bad("each user needs at least one device");
        }
        for a in &self.accounts {
            // The name is the Basic user-id (no colon, RFC 7617) and the prefix of the
            // user's item names in paths.
            if a.name.is_empty()
                || a.name
                    .contains(|c: char| c == ':' || c == '/' || c.is_whitespace() || c.is_control())
            {
                return Err(OfficeError::Config(format!(
                    "account name `{}` must be non-empty, without ':', '/' or spaces",
                    a.name.escape_debug()
                )));
            }
            let paths = [&a.principal, &a.home, &a.calendar];
            if let Some(p) = paths
                .into_iter()
                .flatten()
                .find(|p| !(p.starts_with('/') && p.ends_with('/')) || has_control(p))
            {
                return Err(OfficeError::Config(format!(
                    "account {}: path `{}` must start and end with / (no control characters)",
                    a.name,
                    p.escape_debug()
                )));
            }
            if let Some((n, _)) = a.headers.iter().find(|(n, v)| {
                n.is_empty()
                    || n.contains(|c: char| c == ':' || c.is_whitespace())
                    || has_control(n)
                    || has_control(v)
            }) {
                return Err(OfficeError::Config(format!(
                    "account {}: header `{}` is not a valid header",
                    a.name,
                    n.escape_debug()
                )));
            }
        }
        Ok(())
    }
}

/// A finished day: the report and the recorders behind it (for a results store).
pub struct OfficeRun {
    /// Figures and violations.
    pub report: OfficeReport,
    /// Every request, with its per-second windows: the day's series.
    pub all: Recorder,
    /// Whole-run figures per operation type (service time).
    pub ops: Vec<(Op, Tally)>,
    /// Whole-run figures per session kind (response time).
    pub sessions: Vec<(SessionKind, Tally)>,
}

/// Runs the day. Errors only when the day cannot start (bad configuration, a server
/// that is not CalDAV, a calendar that cannot be set up); problems during the day are
/// violations in the report.
pub fn run(cfg: &OfficeConfig) -> Result<OfficeRun, OfficeError> {
    run_streaming(cfg, None)
}

/// [`run`] that, given a `stream`, sends each closed second of every request to it as
/// the day goes and keeps none ([`Recorders::streaming`]): the returned
/// [`OfficeRun::all`] then has no closed second and has dropped the stream, so the
/// receiver's loop ends with the day.
pub fn run_streaming(
    cfg: &OfficeConfig,
    stream: Option<volley_metrics::SecondStream>,
) -> Result<OfficeRun, OfficeError> {
    cfg.check()?;
    let (host, addr) = setup::parse_url(&cfg.url)?;
    let account0 = Account {
        headers: cfg.headers_of(&cfg.accounts[0]),
        ..cfg.accounts[0].clone()
    };
    let caldav = setup::probe(&cfg.url, addr, &host, &account0)?;
    // Conditional writes: assumed (and checked) on CalDAV; probed on plain WebDAV
    // after set-up, which writes without them.
    let server = Server {
        caldav,
        conditional: caldav,
    };
    let trace = match &cfg.trace {
        Some(p) => Some(Trace::create(p).map_err(|source| OfficeError::Trace {
            path: p.clone(),
            source,
        })?),
        None => None,
    };
    let profiles = cfg.mix.assign(cfg.accounts.len());
    let threads = cfg.accounts.len().min(MAX_THREADS);
    let today = crate::item::today();
    let mut groups: Groups = (0..threads).map(|_| Vec::new()).collect();
    for i in 0..cfg.accounts.len() {
        let devices = (0..cfg.devices)
            .map(|_| {
                let a = &cfg.accounts[i];
                let mut conn = Conn::new(addr, &host, &a.name, &a.password, cfg.timeout)
                    .with_headers(&cfg.headers_of(a));
                conn.set_agent("volley-office/setup".into());
                conn.set_trace(trace.clone());
                Device::new(profiles[i], conn)
            })
            .collect();
        groups[i % threads].push((i, new_user(&cfg.accounts[i], devices, &today, server)));
    }
    let (groups, set_up) = set_up(cfg, groups, server)?;
    let plan = DayPlan {
        decisions_per_day: cfg.decisions_per_day,
        compress: cfg.compress,
        wall_s: cfg.duration.as_secs_f64(),
        devices: cfg.devices,
        seed: cfg.seed,
        cold: cfg.cold_start,
    };
    let (groups, lead_in) = if cfg.cold_start {
        (groups, None)
    } else {
        let (g, l) = lead_in(cfg, plan, groups)?;
        (g, Some(l))
    };
    let rec = Recorders::streaming(stream);
    cfg.progress.enter(Phase::Day, 0);
    let outcomes = std::thread::scope(|s| {
        let handles: Vec<_> = groups
            .into_iter()
            .map(|group| {
                let rec = &rec;
                s.spawn(move || {
                    day(
                        Ctx {
                            rec,
                            measured: true,
                        },
                        plan,
                        cfg,
                        group,
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().ok())
            .collect::<Vec<_>>()
    });
    if outcomes.len() != threads {
        return Err(OfficeError::Config("a worker thread panicked".into()));
    }
    let outcomes = group::audit(&rec, outcomes)?;
    if let Some(t) = &trace {
        t.flush();
    }
    cfg.progress.enter(Phase::Done, 0);
    let mut run = merge(cfg, &profiles, set_up.server, set_up.lacks, rec, outcomes);
    // The last windows go to the stream, if any, and the stream is let go.
    run.all.finish();
    run.all.drop_stream();
    run.report.lead_in = lead_in;
    run.report.set_up_s = set_up.wall_s;
    run.report.set_up_failures = set_up.failures;
    run.report.set_up_kept = set_up.kept;
    Ok(run)
}

/// Most actions the untimed phases (set-up, lead-in) keep in flight, one per thread,
/// each waiting for its answers: they are set-up, not load. More would only pile
/// requests on the server without finishing sooner (a server that answers one request
/// at a time, Radicale's storage, then times them out: at 32 in flight Radicale timed
/// out lead-in requests of 250 people on a busy machine, and those failures were
/// counted against the day). Eight keeps two cores busy on the built-in server.
const UNTIMED_IN_FLIGHT: usize = 8;

/// `f` on every group, on at most `threads` threads, results in group order.
fn each_group<G: Send, T: Send>(
    groups: Vec<G>,
    threads: usize,
    f: impl Fn(G) -> T + Sync,
) -> Result<Vec<T>, OfficeError> {
    let threads = groups.len().min(threads).max(1);
    let queue = Mutex::new(groups.into_iter().enumerate().collect::<Vec<_>>());
    let done = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let next = queue.lock().unwrap_or_else(PoisonError::into_inner).pop();
                        let Some((i, group)) = next else { break };
                        done.push((i, f(group)));
                    }
                    done
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| OfficeError::Config("a set-up or audit thread panicked".into()))
            })
            .collect::<Result<Vec<_>, _>>()
    })?;
    let mut all: Vec<(usize, T)> = done.into_iter().flatten().collect();
    all.sort_by_key(|(i, _)| *i);
    Ok(all.into_iter().map(|(_, t)| t).collect())
}

/// Closes `user`'s connections between the unpaced actions of set-up and lead-in: the
/// generator then holds at most one connection per worker thread, instead of every
/// device's idle one, which a server with a connection cap (Radicale's
/// `max_connections`) would count against the users being set up.
fn close_all(user: &mut User) {
    for d in &mut user.devices {
        d.conn.close();
    }
}

/// Each device's User-Agent from here on: its profile and number.
fn name_devices(user: &mut User) {
    let profile = user.devices[0].profile;
    for (d, dev) in user.devices.iter_mut().enumerate() {
        dev.conn
            .set_agent(format!("volley-office/{}#{d}", profile.name()));
    }
}

/// Runs one scheduled action of `user` (a session scheduled at `intended_ns`).
fn act(ctx: Ctx<'_>, user: &mut User, action: Action, intended_ns: u64) {
    match action {
        Action::InitialSync { device } | Action::Poll { device } => {
            session::run(ctx, user, device, intended_ns)
        }
        Action::Decide {
            device,
            what,
            pick,
            stale_probe,
        } => writes::decide(
            ctx,
            user,
            device,
            Pending {
                what,
                pick,
                stale_probe,
            },
        ),
    }
}

/// A user as the day starts: paths from its account (or the usual layout), no truth
/// yet, its devices' connections made but not opened.
fn new_user(a: &Account, devices: Vec<Device>, today: &str, server: Server) -> User {
    let name = &a.name;
    let principal = a.principal.clone().unwrap_or_else(|| format!("/{name}/"));
    let home = a.home.clone().unwrap_or_else(|| principal.clone());
    User {
        name: name.clone(),
        cal: a
            .calendar
            .clone()
            .unwrap_or_else(|| format!("{home}calendar/")),
        principal,
        home,
        truth: Truth::default(),
        devices,
        next_item: 0,
        violations: Violations::default(),
        today: today.to_string(),
        server,
        unguarded: 0,
    }
}

/// What set-up left besides the users: the server's survey, its wall time and the
/// failed (and retried) requests set apart from the day.
struct SetUp {
    server: Server,
    lacks: Vec<String>,
    wall_s: f64,
    failures: crate::report::SetApart,
    kept: usize,
}

/// The untimed set-up on the day's own threads' share of users, then the survey of
/// what the server offers (conditional writes, what a CalDAV client would lack), told
/// to every user. A request that failed and was tried again is set-up's, not the
/// day's: each user's violations start the lead-in (or the window) empty.
fn set_up(
    cfg: &OfficeConfig,
    groups: Groups,
    mut server: Server,
) -> Result<(Groups, SetUp), OfficeError> {
    cfg.progress.enter(Phase::SetUp, cfg.accounts.len() as u64);
    let untimed = Recorders::new();
    let untimed = &untimed;
    let groups = each_group(groups, UNTIMED_IN_FLIGHT, |mut group| {
        let ctx = Ctx {
            rec: untimed,
            measured: false,
        };
        let mut kept = 0;
        for (i, u) in group.iter_mut() {
            let account = &cfg.accounts[*i];
            kept += usize::from(setup::prepare(
                ctx,
                u,
                account,
                cfg.initial_items,
                cfg.keep_calendars,
            )?);
            close_all(u);
            cfg.progress.step();
        }
        Ok::<_, OfficeError>((group, kept))
    })?
    .into_iter()
    .collect::<Result<Vec<_>, _>>()?;
    let kept = groups.iter().map(|(_, k)| k).sum();
    let mut groups: Groups = groups.into_iter().map(|(g, _)| g).collect();
    let first = groups
        .first_mut()
        .and_then(|g| g.first_mut())
        .map(|(_, u)| u)
        .ok_or_else(|| OfficeError::Config("the office needs at least one user".into()))?;
    let (conditional, lacks) = setup::survey(
        Ctx {
            rec: untimed,
            measured: false,
        },
        first,
    )?;
    server.conditional = conditional;
    let mut failed = Violations::default();
    for (_, u) in groups.iter_mut().flatten() {
        u.server = server;
        failed.merge(std::mem::take(&mut u.violations));
    }
    let set_up = SetUp {
        server,
        lacks,
        wall_s: untimed.origin.elapsed().as_secs_f64(),
        failures: crate::report::SetApart::of(&failed),
        kept,
    };
    Ok((groups, set_up))
}

/// The threads' outcomes and recorders merged into the day's report.
fn merge(
    cfg: &OfficeConfig,
    profiles: &[Profile],
    server: Server,
    lacks: Vec<String>,
    rec: Recorders,
    outcomes: Vec<Outcome>,
) -> OfficeRun {
    let mut violations = Violations::default();
    let (mut planned, mut ran, mut skipped, mut items, mut cpu_ns) = (0, 0, 0, 0, 0);
    let (mut devices, mut polled_twice) = (0, 0);
    let mut end_ns = 0;
    let mut unguarded = 0;
    for o in outcomes {
        planned += o.planned;
        ran += o.ran;
        skipped += o.skipped;
        items += o.items;
        cpu_ns += o.cpu_ns;
        devices += o.polls.iter().map(Vec::len).sum::<usize>();
        polled_twice += o.polls.iter().flatten().filter(|&&n| n >= 2).count();
        end_ns = end_ns.max(o.end_ns);
        for u in o.users {
            unguarded += u.unguarded;
            violations.merge(u.violations);
        }
    }
    let ops: Vec<(Op, Tally)> = Op::ALL
        .iter()
        .zip(rec.ops)
        .map(|(op, m)| (*op, m.into_inner().unwrap_or_else(PoisonError::into_inner)))
        .collect();
    let sessions: Vec<(SessionKind, Tally)> = SessionKind::ALL
        .iter()
        .zip(rec.sessions)
        .map(|(k, m)| (*k, m.into_inner().unwrap_or_else(PoisonError::into_inner)))
        .collect();
    let op_rows: Vec<LatencyRow> = ops
        .iter()
        .filter(|(op, t)| *op != Op::Mkcalendar || t.completed > 0)
        .map(|(op, t)| LatencyRow::of(op.name(), t))
        .collect();
    let session_rows = sessions
        .iter()
        .map(|(k, t)| LatencyRow::of(k.name(), t))
        .collect();
    let (vrows, vtotal, examples) = OfficeReport::violation_rows(&violations);
    let report = OfficeReport {
        url: cfg.url.clone(),
        protocol: if server.caldav { "caldav" } else { "webdav" },
        lacks,
        checks_not_applicable: if server.conditional {
            Vec::new()
        } else {
            vec![crate::Violation::StaleWriteAccepted.name()]
        },
        unguarded_writes: unguarded,
        users: cfg.accounts.len(),
        devices_per_user: cfg.devices,
        profiles: cfg
            .mix
            .parts()
            .iter()
            .map(|(p, _)| ProfileCount {
                profile: p.name(),
                users: profiles.iter().filter(|q| *q == p).count(),
            })
            .collect(),
        decisions_per_day: cfg.decisions_per_day,
        compress: cfg.compress,
        cold_start: cfg.cold_start,
        lead_in: None,
        set_up_s: 0.0,
        set_up_failures: crate::report::SetApart::default(),
        set_up_kept: 0,
        duration_s: cfg.duration.as_secs_f64(),
        wall_s: end_ns as f64 / 1e9,
        seed: cfg.seed,
        actions_planned: planned,
        actions_run: ran,
        actions_skipped: skipped,
        items_at_end: items,
        devices_polled_twice_share: polled_twice as f64 / devices.max(1) as f64,
        requests: op_rows.iter().map(|r| r.count).sum(),
        generator_cpu_s: cpu_ns as f64 / 1e9,
        ops: op_rows,
        sessions: session_rows,
        violations: vrows,
        violations_total: vtotal,
        examples,
    };
    OfficeRun {
        report,
        all: rec.all.into_inner().unwrap_or_else(PoisonError::into_inner),
        ops,
        sessions,
    }
}

/// Whether `s` holds a control character (CR, LF...): it would break the request head.
fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

/// CPU time of the calling thread (user + system), nanoseconds. The workers' times
/// summed are the generator's cost of the day: set-up, audit and the idle main thread
/// left out. std has no thread CPU clock, hence libc.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant Linux knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(a: Account) -> Result<(), OfficeError> {
        OfficeConfig::with_accounts("http://127.0.0.1:9/", vec![a]).check()
    }

    #[test]
    fn account_paths_and_headers_that_would_break_a_request_are_refused() {
        let ok = Account {
            principal: Some("/u/".into()),
            home: Some("/u/calendars/".into()),
            calendar: Some("/u/calendars/calendar/".into()),
            headers: vec![("X-Remote-User".into(), "u".into())],
            ..Account::new("u", "p")
        };
        assert!(with(ok.clone()).is_ok());
        let bad_path = Account {
            calendar: Some("u/calendar".into()),
            ..ok.clone()
        };
        assert!(matches!(with(bad_path), Err(OfficeError::Config(m)) if m.contains("u/calendar")));
        let bad_header = Account {
            headers: vec![("X-Remote-User".into(), "u\r\nX-Evil: 1".into())],
            ..ok.clone()
        };
        assert!(matches!(with(bad_header), Err(OfficeError::Config(m)) if m.contains("header")));
        let bad_name = Account {
            headers: vec![("Bad Name".into(), "v".into())],
            ..ok
        };
        assert!(with(bad_name).is_err());
        assert!(with(Account::new("a:b", "p")).is_err());
        assert!(with(Account::new("", "p")).is_err());
    }

    #[test]
    fn remote_user_joins_an_accounts_headers_once() {
        let mut cfg = OfficeConfig::new("http://127.0.0.1:9/", vec![("u".into(), "p".into())]);
        assert!(cfg.headers_of(&cfg.accounts[0]).is_empty());
        cfg.remote_user_header = true;
        assert_eq!(
            cfg.headers_of(&cfg.accounts[0]),
            [("X-Remote-User".to_string(), "u".to_string())]
        );
        cfg.accounts[0].headers = vec![("x-remote-user".into(), "other".into())];
        assert_eq!(cfg.headers_of(&cfg.accounts[0]).len(), 1);
    }
}
