//! `volley bench --caldav USERS [URL]`: an office day of CalDAV clients (the
//! `volley-office` workload) against a server, the built-in one in-process when no URL
//! is given. Prints latency per operation type and per sync session, and violations by
//! kind; any violation fails the run (exit 1). Bad input exits 2 with one line.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use volley_analysis::words;
use volley_metrics::Recorder;
use volley_office::{Account, LatencyRow, Mix, OfficeConfig, OfficeError, OfficeReport, OfficeRun};
use volley_store::StepParameters;

use super::load::values::Where;
use super::load::LoadArgs;
use super::save::{SaveArgs, Saver};
use super::target::TargetArgs;
use crate::cmd::table;
use crate::exit::usage;
use volley_targets::config::MAX_DAV_USERS;
use volley_targets::{
    CpuQuota, DavSettings, ResourceLimits, RunningTarget, TargetKind, TargetSpec,
};

/// The office's flags, typed by clap (a bad value: one line, exit 2).
#[derive(clap::Args, Debug, Default, Clone)]
pub struct CaldavArgs {
    /// Run an office day of this many CalDAV users instead of a GET load (against the
    /// URL, or the built-in server started in-process without one). The devices run
    /// their first sync and one poll interval before the measured window (reported
    /// apart); without --duration the window lets every device poll once: 30 minutes
    /// at real time for the default mix (Thunderbird polls every 30).
    #[arg(long, value_name = "USERS", allow_hyphen_values = true, value_parser = parse_users)]
    pub caldav: Option<u32>,
    /// Client profiles by weight: thunderbird, davx5, evolution, apple, e.g.
    /// `thunderbird:3,davx5`.
    #[arg(long, value_name = "NAME[:WEIGHT],...", value_parser = parse_mix,
          default_value = "thunderbird,davx5,evolution,apple", requires = "caldav")]
    pub profile: Mix,
    /// Decisions per person per office day.
    #[arg(long, value_name = "N", default_value_t = 250, requires = "caldav",
          value_parser = parse_decisions, allow_hyphen_values = true)]
    pub decisions: u32,
    /// Office time / wall time. 1 is real time: N users are N people. F > 1 is a stress
    /// test: each user sends the requests of F people (480 runs 8 hours in a minute).
    #[arg(long, value_name = "F", value_parser = parse_compress, default_value_t = 1.0,
          requires = "caldav", allow_hyphen_values = true)]
    pub compress: f64,
    /// A cold day: every device's first sync inside the measured window (spread over
    /// its first tenth), as on a morning when every client starts at once; without
    /// --duration then 45 minutes at real time for the default mix.
    #[arg(long, requires = "caldav")]
    pub caldav_cold_start: bool,
    /// Items each user's calendar holds when the day starts (written in the untimed
    /// set-up; fewer make a large office quicker to set up).
    #[arg(long, value_name = "N", default_value_t = 20, requires = "caldav")]
    pub caldav_items: u64,
    /// Password of every office account `office1..officeN` on an external server.
    #[arg(long, value_name = "PASSWORD", default_value = "office")]
    pub caldav_password: String,
    /// Also send `X-Remote-User: <account>` (a server behind a trusted authenticating
    /// proxy, as volley runs Xandikos).
    #[arg(long)]
    pub caldav_remote_user: bool,
    /// Write one line per request of every device to FILE: request line, Depth,
    /// If-Match/If-None-Match, the sync-token a sync starts from, status, ETag, and a
    /// multistatus's token and hrefs (for telling a server's fault from the checker's).
    #[arg(long, value_name = "FILE")]
    pub caldav_trace: Option<PathBuf>,
    /// Each account's calendar home, `{user}` standing for its name, e.g. `/dav/{user}/`
    /// for a plain WebDAV tree (default: found by discovery on CalDAV, else `/<user>/`).
    #[arg(long, value_name = "TEMPLATE")]
    pub caldav_home_template: Option<String>,
    /// Each account's calendar, `{user}` standing for its name, e.g.
    /// `/{user}/calendars/calendar/` for Xandikos (default: `calendar/` in the home,
    /// made when missing).
    #[arg(long, value_name = "TEMPLATE")]
    pub caldav_calendar_template: Option<String>,
}

impl CaldavArgs {
    /// Whether `--caldav` was given.
    pub fn is_set(&self) -> bool {
        self.caldav.is_some()
    }
}

/// Most users `--caldav` takes: 100,000 people hold 200,000 connections, past what
/// one process's file descriptors allow.
const MAX_USERS: u32 = 100_000;

/// `--caldav`: a number of users, 1 to [`MAX_USERS`].
fn parse_users(s: &str) -> Result<u32, String> {
    match s.trim().parse::<i64>() {
        Ok(n) if (1..=i64::from(MAX_USERS)).contains(&n) => Ok(n as u32),
        Ok(_) => Err(format!("must be from 1 to {MAX_USERS} users, got {s}")),
        Err(_) => Err(format!("must be a number of users, got '{s}'")),
    }
}

/// `--decisions`: a whole number of decisions per person per day.
fn parse_decisions(s: &str) -> Result<u32, String> {
    s.trim()
        .parse::<u32>()
        .map_err(|_| format!("must be a whole number of decisions, got '{s}'"))
}

/// `--profile`'s value, parsed once into the mix the office runs.
fn parse_mix(s: &str) -> Result<Mix, String> {
    Mix::parse(s).map_err(|e| e.to_string())
}

/// `--compress`: a positive, finite factor.
fn parse_compress(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("must be a positive number, got '{s}'")),
    }
}

/// The built-in server with one account per user, in a private directory.
struct Builtin {
    handle: Option<volley_server::ServerHandle>,
    dir: PathBuf,
    url: String,
    /// The directory (the accounts' password hashes among its files) noted in this
    /// volley's ledger before it is made: a `bench --caldav` killed mid-day cannot
    /// remove it, and the next volley's sweep does. Dropped after the directory.
    _noted: volley_targets::NotedDir,
}

impl Drop for Builtin {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start_builtin(accounts: &[(String, String)]) -> anyhow::Result<Builtin> {
    // What a killed volley left (its own such directory among them) goes first.
    crate::cmd::sweep_leftovers();
    let dir = std::env::temp_dir().join(format!("volley-office-{}", std::process::id()));
    let noted = volley_targets::NotedDir::note("office server", &dir);
    let root = dir.join("root");
    let mut guard = Builtin {
        handle: None,
        dir,
        url: String::new(),
        _noted: noted,
    };
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let mut text = String::new();
    // Every account has the same password: one hash serves them all (a salted hash
    // verifies its password whoever's line it is on), so thousands of accounts cost one
    // hashing. Cost 4: the cheapest bcrypt; the verifier's cache makes later requests
    // free.
    let mut hashes: Vec<(&str, String)> = Vec::new();
    for (name, password) in accounts {
        let hash = match hashes.iter().find(|(p, _)| *p == password.as_str()) {
            Some((_, h)) => h.clone(),
            None => {
                let h = volley_dav::auth::hash_password(password.as_bytes(), 4)?;
                hashes.push((password, h.clone()));
                h
            }
        };
        text.push_str(&format!("{name}:{hash}\n"));
        volley_dav::provision(&root, name)?;
    }
    let users = volley_dav::auth::Users::parse(&guard.dir.join("users"), &text)?;
    let mut config = volley_server::ServerConfig::new(&root);
    config.auth = Some(volley_dav::auth::Auth::start(&users)?);
    config.threads = 2;
    let server = volley_server::Server::bind(config)?;
    guard.url = format!("http://{}/", server.local_addr());
    guard.handle = Some(server.spawn()?);
    Ok(guard)
}

/// What a path template's account name is written as.
const USER: &str = "{user}";

/// A path template of `flag`, checked: with more than one user it must name `{user}`,
/// or every user would share one calendar (and each one's set-up would empty the
/// others'). The office checks the expanded paths' shape.
fn template<'a>(
    flag: &str,
    t: &'a Option<String>,
    users: usize,
) -> anyhow::Result<Option<&'a str>> {
    match t.as_deref() {
        Some(t) if users > 1 && !t.contains(USER) => {
            usage!(
                "{flag} must contain {USER} (the account's name): {users} users would share `{t}`"
            )
        }
        t => Ok(t),
    }
}

/// The server the office runs against, kept serving until dropped: the built-in one
/// started in-process, a managed target (stopped, its cgroups and directory removed, by
/// its own `Drop`), or none (a URL given). Held for its `Drop` alone.
#[allow(dead_code)]
enum Served {
    External,
    Builtin(Builtin),
    Target(Box<RunningTarget>),
}

impl Served {
    /// Whether the target's calendars were written into its storage, items included,
    /// before it started (`CalendarSetup::Seeded`): set-up then reads them back as its
    /// own instead of emptying and refilling them.
    fn seeded(&self) -> bool {
        matches!(self, Served::Target(t) if t.dav.as_ref().is_some_and(|d| matches!(d.calendars, volley_targets::dav::CalendarSetup::Seeded { .. })))
    }
}

/// The URL and accounts of a URL's server (`office1..officeN`, `--caldav-password`),
/// or of the built-in server started with those accounts when no URL is given.
fn destination(
    c: &CaldavArgs,
    load: &LoadArgs,
    users: usize,
) -> anyhow::Result<(String, Vec<Account>, Served)> {
    let accounts: Vec<(String, String)> = (1..=users)
        .map(|i| (format!("office{i}"), c.caldav_password.clone()))
        .collect();
    let (url, served) = match &load.url {
        Some(Where::Url(u)) => (u.to_string(), Served::External),
        Some(Where::Path(p)) => {
            usage!("'{p}' is a path: give the whole URL (http://host:port{p}), or no URL for the built-in server")
        }
        None => {
            let b = start_builtin(&accounts)?;
            (b.url.clone(), Served::Builtin(b))
        }
    };
    let home = template("--caldav-home-template", &c.caldav_home_template, users)?;
    let calendar = template(
        "--caldav-calendar-template",
        &c.caldav_calendar_template,
        users,
    )?;
    let accounts = accounts
        .into_iter()
        .map(|(name, password)| Account {
            home: home.map(|t| t.replace(USER, &name)),
            calendar: calendar.map(|t| t.replace(USER, &name)),
            ..Account::new(name, password)
        })
        .collect();
    Ok((url, accounts, served))
}

/// `--caldav N --target KIND`: the managed server started with `N` DAV accounts of its
/// own (the same accounts a study's office step uses: `volley_targets::dav`), their
/// paths and credentials taken from it, so nothing about them is asked of the user.
fn managed(
    kind: TargetKind,
    c: &CaldavArgs,
    load: &LoadArgs,
    t: &TargetArgs,
    users: usize,
) -> anyhow::Result<(String, Vec<Account>, Served)> {
    if load.url.is_some() {
        usage!("--caldav --target {kind} starts its own server: drop the URL");
    }
    // A GET load's target flags that mean nothing to an office day are refused, not
    // silently dropped.
    let unused = [
        ("--docroot", t.docroot.is_some()),
        ("--fixture", t.fixture.is_some()),
        ("--path", t.path.is_some()),
        ("--show-config", t.show_config),
        ("--tls", t.tls),
        ("--set", !t.set.is_empty()),
    ];
    if let Some((flag, _)) = unused.iter().find(|(_, given)| *given) {
        usage!("{flag} is for a GET load's target, not with --caldav");
    }
    if c.caldav_home_template.is_some() || c.caldav_calendar_template.is_some() {
        usage!("--caldav --target {kind}: the target's accounts name their own paths; drop the templates");
    }
    if !kind.is_caldav_server() && !kind.supports_plain_dav() && kind != TargetKind::Builtin {
        usage!("{kind} cannot serve WebDAV (supported: builtin, nginx, apache-event, apache-prefork, lighttpd, radicale, xandikos)");
    }
    let Ok(dav_users) = u32::try_from(users) else {
        usage!("--caldav {users}: too many accounts for a managed target");
    };
    if dav_users > MAX_DAV_USERS {
        usage!("--caldav {users}: a managed target makes at most {MAX_DAV_USERS} accounts");
    }
    if let Some(program) = kind.program() {
        if volley_targets::kind::find_program(program).is_none() {
            return Err(volley_targets::TargetError::NotInstalled {
                kind,
                program: program.to_string(),
            }
            .into());
        }
    }
    let mut spec = TargetSpec::new(kind);
    // Radicale's calendars and first items are written into its storage before it
    // starts (a PUT each took half an hour for 2,000 people); set-up then takes them
    // as a previous day's (`keep_calendars`, below).
    let seed_items = if kind == TargetKind::Radicale {
        c.caldav_items
    } else {
        0
    };
    spec.settings.dav = Some(DavSettings {
        users: dav_users,
        seed_items,
    });
    spec.settings.workers = t.workers;
    // The caps a GET load's target takes (volley itself is not pinned here).
    spec.limits = ResourceLimits {
        cpus: t.target_cpus.as_ref().map(|c| c.0.clone()),
        cpu_quota: t.cpu_quota.map(CpuQuota::of_one_cpu),
        memory_max_bytes: t.memory_max,
    };
    let target =
        volley_targets::start(&spec).map_err(|e| anyhow::anyhow!("cannot start {kind}: {e}"))?;
    if !load.quiet {
        let with = format!(" with {users} DAV account(s)");
        eprintln!("{}", super::target::started_line(&target, &with));
    }
    let accounts: Vec<Account> = target
        .dav
        .as_ref()
        .map(|d| d.accounts.iter().take(users).map(Account::from).collect())
        .unwrap_or_default();
    if accounts.len() < users {
        anyhow::bail!(
            "{kind} started with {} DAV account(s), {users} asked",
            accounts.len()
        );
    }
    let url = format!("http://{}/", target.addr);
    Ok((url, accounts, Served::Target(Box::new(target))))
}

/// Runs `volley bench --caldav`.
pub fn run(
    c: CaldavArgs,
    load: LoadArgs,
    target: &TargetArgs,
    save: &SaveArgs,
) -> anyhow::Result<ExitCode> {
    let users = c.caldav.unwrap_or(1) as usize;
    let mix = c.profile.clone();
    let (url, accounts, served) = match target.targets.as_slice() {
        [] => destination(&c, &load, users)?,
        [kind] => managed(*kind, &c, &load, target, users)?,
        _ => usage!("--caldav runs against one --target at a time (run it once per kind)"),
    };
    let mut cfg = OfficeConfig::with_accounts(&url, accounts);
    cfg.mix = mix;
    cfg.remote_user_header = c.caldav_remote_user;
    cfg.trace = c.caldav_trace.clone();
    cfg.decisions_per_day = c.decisions;
    cfg.initial_items = c.caldav_items;
    cfg.keep_calendars = served.seeded();
    cfg.compress = c.compress;
    cfg.cold_start = c.caldav_cold_start;
    cfg.timeout = load.timeout;
    cfg.duration = match load.duration {
        Some(d) => d,
        // Every device polls K times in the window.
        None => Duration::from_secs_f64(volley_office::day::default_wall_s(
            cfg.mix.slowest_poll_s(),
            cfg.compress,
            cfg.cold_start,
        )),
    };
    if let Some(seed) = load.seed {
        cfg.seed = seed;
    }
    {
        let stop = Arc::clone(&cfg.stop);
        let _ = ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed));
    }
    let finished = AtomicBool::new(false);
    let result = std::thread::scope(|scope| {
        if crate::cmd::progress::wanted(load.quiet) {
            let (progress, day, finished) = (&cfg.progress, cfg.duration, &finished);
            scope.spawn(move || crate::cmd::progress::office(progress, day, finished));
        }
        let r = volley_office::run(&cfg);
        finished.store(true, Ordering::Relaxed);
        r
    });
    let run = match result {
        Ok(r) => r,
        Err(e @ OfficeError::NoAccounts { .. }) => usage!(
            "{e} (the built-in server has accounts with `volley serve --users FILE`, see `volley passwd`)"
        ),
        Err(
            e @ (OfficeError::Config(_)
            | OfficeError::UnknownProfile(_)
            | OfficeError::Url(_)
            | OfficeError::NotCalDav { .. }),
        ) => usage!("{e}"),
        Err(e @ (OfficeError::Connect { .. } | OfficeError::Trace { .. })) => usage!(
            "{e}: {}",
            std::error::Error::source(&e)
                .map(ToString::to_string)
                .unwrap_or_default()
        ),
        Err(e) => return Err(e.into()),
    };
    drop(served);
    let OfficeRun { report, all, .. } = run;
    let saved = save_day(save, &cfg, &report, all)?;
    match load.json.as_deref() {
        Some("-") => println!("{}", serde_json::to_string_pretty(&report)?),
        Some(path) => {
            std::fs::write(path, serde_json::to_string_pretty(&report)?)
                .with_context(|| format!("cannot write {path}"))?;
        }
        None => {}
    }
    if !load.quiet && load.json.as_deref() != Some("-") {
        print!("{}", text(&report));
    }
    if let Some(line) = saved {
        eprintln!("volley: {line}");
    }
    if cfg.stop.load(Ordering::Relaxed) {
        return Err(
            crate::exit::Interrupted("interrupted; printed what was measured".into()).into(),
        );
    }
    if report.violations_total > 0 {
        anyhow::bail!(
            "{} correctness violation(s) in the office day (see the table above)",
            report.violations_total
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `--save`: the day as a bench run of one step, as a study stores an office day: its
/// requests (the recorder of every request) over the window's own time, the office
/// report under the summary's `office` key, the day's settings as the run's parameters.
/// So `volley history`, `compare` and `report` read it. The line saying where it is.
fn save_day(
    save: &SaveArgs,
    cfg: &OfficeConfig,
    r: &OfficeReport,
    all: Recorder,
) -> anyhow::Result<Option<String>> {
    let parameters = serde_json::json!({
        "url": cfg.url,
        "method": "CALDAV",
        "model": "closed",
        "users": r.users,
        "devices_per_user": r.devices_per_user,
        "compress": r.compress,
        "decisions_per_day": r.decisions_per_day,
        "cold_start": r.cold_start,
        "duration_s": r.duration_s,
        "seed": r.seed,
        "timeout_s": cfg.timeout.as_secs_f64(),
    });
    let environment = serde_json::to_value(volley_targets::Environment::capture())?;
    let Some(mut saver) = Saver::begin_with(save, &cfg.url, parameters, environment)? else {
        return Ok(None);
    };
    let merged = Recorder::merge_all(vec![all])?;
    let histograms = volley_harness::stored::histograms(&merged)?;
    let stopped = cfg.stop.load(Ordering::Relaxed);
    let info = volley_study::office_run_info(
        &cfg.url,
        r.users * r.devices_per_user,
        Duration::from_secs_f64(r.wall_s),
        stopped,
        r.generator_cpu_s,
    );
    let summary = merged.close(&info)?;
    let mut summary_json = serde_json::to_value(&summary)?;
    summary_json["office"] = serde_json::to_value(r)?;
    let mut extra = serde_json::Map::new();
    extra.insert("users".into(), r.users.into());
    extra.insert("compress".into(), r.compress.into());
    let parameters = StepParameters {
        concurrency: u32::try_from(r.users).ok(),
        keepalive: Some(true),
        extra,
        ..StepParameters::default()
    };
    let series = volley_harness::stored::series(&summary, None);
    saver.step_with(parameters, &summary, summary_json, series, histograms)?;
    Ok(Some(saver.finish(!stopped)?))
}

fn latency_table(title: &str, rows: &[LatencyRow]) -> String {
    let mut t = table::new([title, "count", "errors", "p50 ms", "p99 ms", "max ms"]);
    for r in rows {
        t.add_row([
            r.name.clone(),
            r.count.to_string(),
            r.errors.to_string(),
            format!("{:.2}", r.p50_ms),
            format!("{:.2}", r.p99_ms),
            format!("{:.2}", r.max_ms),
        ]);
    }
    table::align_right(&mut t, &[1, 2, 3, 4, 5]);
    table::render(&t)
}

/// The text report.
fn text(r: &OfficeReport) -> String {
    let profiles: Vec<String> = r
        .profiles
        .iter()
        .map(|p| format!("{} {}", p.users, p.profile))
        .collect();
    let mut s = format!(
        "office day against {}: {} ({}), {} devices each, {} decisions/day, \
         {} for {}, seed {}\n\
         actions: {} planned, {} run, {} skipped; {} requests; {} items at the end; \
         generator CPU {:.2} s\n",
        r.url,
        words::users(r.users as f64, r.compress),
        profiles.join(", "),
        r.devices_per_user,
        r.decisions_per_day,
        words::pace(r.compress),
        words::duration(Duration::from_secs_f64(r.duration_s)),
        r.seed,
        r.actions_planned,
        r.actions_run,
        r.actions_skipped,
        r.requests,
        r.items_at_end,
        r.generator_cpu_s,
    );
    if r.protocol != "caldav" {
        s.push_str(&format!(
            "plain WebDAV: the clients use PROPFIND, GET, PUT and DELETE only; \
             {} writes without a precondition\n",
            r.unguarded_writes
        ));
    }
    if !r.lacks.is_empty() {
        s.push_str(&format!("the server lacks: {}\n", r.lacks.join(", ")));
    }
    if !r.checks_not_applicable.is_empty() {
        s.push_str(&format!(
            "not applicable here: {}\n",
            r.checks_not_applicable.join(", ")
        ));
    }
    s.push_str(&format!("set-up: {:.1} s", r.set_up_s));
    if r.set_up_kept > 0 {
        s.push_str(&format!(
            " ({} calendars a previous day left kept as they stood)",
            r.set_up_kept
        ));
    }
    if r.set_up_failures.total > 0 {
        s.push_str(&format!(
            "; {} failed requests tried again, set apart from the day ({})",
            r.set_up_failures.total,
            r.set_up_failures.words()
        ));
    }
    s.push('\n');
    match &r.lead_in {
        Some(l) => {
            s.push_str(&format!(
                "warm day: before the window, untimed by it: every device's first sync and \
                 one poll interval, {} actions, {} requests in {:.1} s (at most {} at a time), \
                 generator CPU {:.2} s\n",
                l.actions, l.requests, l.wall_s, l.in_flight, l.generator_cpu_s
            ));
            if l.failures.total > 0 {
                s.push_str(&format!(
                    "  lead-in failures, set apart from the day: {} failed requests, {} \
                     violations ({}); {} users read back from the server before the window\n",
                    l.failed_requests,
                    l.failures.total,
                    l.failures.words(),
                    l.reconciled_users
                ));
                for e in &l.failures.examples {
                    s.push_str(&format!("  e.g. {e}\n"));
                }
            }
        }
        None => s.push_str("cold day: every device's first sync inside the window\n"),
    }
    s.push('\n');
    s.push_str("latency per request (service time)\n");
    s.push_str(&latency_table("operation", &r.ops));
    s.push_str("\nlatency per sync session (from its scheduled instant)\n");
    s.push_str(&latency_table("session", &r.sessions));
    if let Some(l) = &r.lead_in {
        s.push_str("\nbefore the window, per sync session (service time, unpaced)\n");
        s.push_str(&latency_table("session", &l.sessions));
    }
    s.push_str(&format!("\nviolations: {}\n", r.violations_total));
    for v in r.violations.iter().filter(|v| v.count > 0) {
        s.push_str(&format!("  {:<30} {}\n", v.kind, v.count));
    }
    for e in &r.examples {
        s.push_str(&format!("  e.g. {e}\n"));
    }
    s
}
