//! The figures of an office day: latency per operation type and per sync session
//! (from their tallies' whole-run histograms), violations by kind, and what ran.

use serde::Serialize;

use crate::check::Violations;
use crate::driver::Tally;

/// One row of a latency table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyRow {
    /// Operation or session kind.
    pub name: String,
    /// Requests (sessions) recorded.
    pub count: u64,
    /// Of those, failed (transport error or unexpected status).
    pub errors: u64,
    /// Median, milliseconds.
    pub p50_ms: f64,
    /// 99th percentile, milliseconds.
    pub p99_ms: f64,
    /// Largest, milliseconds.
    pub max_ms: f64,
}

impl LatencyRow {
    /// The row of `t`, from its latency histogram: service time for requests (each
    /// is sent when the one before it ends), response time from the scheduled instant
    /// for sessions (a late session counts its lateness).
    pub fn of(name: &str, t: &Tally) -> LatencyRow {
        let h = &t.latency;
        let ms = |us: u64| us as f64 / 1000.0;
        LatencyRow {
            name: name.to_owned(),
            count: t.completed,
            errors: t.completed.saturating_sub(t.ok),
            p50_ms: ms(h.value_at_quantile(0.5)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            max_ms: ms(h.max()),
        }
    }
}

/// What a warm day ran before its measured window: every device's first full sync,
/// then one poll interval of the day (its polls and the people's decisions), in
/// schedule order with at most [`LeadIn::in_flight`] actions at a time, as fast as the
/// server answered them (docs/methodology.md, "The office"). Its cost is reported here,
/// apart from the day's figures: a morning's first syncs are a load of their own.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeadIn {
    /// Wall-clock seconds it took.
    pub wall_s: f64,
    /// Most actions it had in flight (each waits for its answers): the bound that keeps
    /// an untimed phase from piling requests on the server.
    pub in_flight: usize,
    /// Actions run: first syncs, polls, decisions.
    pub actions: u64,
    /// Requests sent.
    pub requests: u64,
    /// Sessions by kind (`sync-initial`: each device's first full sync; `sync-poll`),
    /// service time: the lead-in is unpaced, so a session counts from its start.
    pub sessions: Vec<LatencyRow>,
    /// The worker threads' CPU time during it, seconds.
    pub generator_cpu_s: f64,
    /// Requests that failed in it (transport, 5xx, another status than due).
    pub failed_requests: u64,
    /// Its users whose state was read back from the server after a failed request
    /// (a write that failed may have been applied): the day starts from what the
    /// server holds.
    pub reconciled_users: u64,
    /// The violations of the users with a failed request, set apart from the day's:
    /// the failures and what followed from them before the window.
    pub failures: SetApart,
}

/// Violations found before the measured window, where a request failed (set-up's
/// retried requests, a lead-in's failures and their consequences): reported by kind,
/// never counted in the day's verdict (docs/methodology.md, "The office").
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SetApart {
    /// How many.
    pub total: u64,
    /// By kind, only the kinds seen.
    pub kinds: Vec<ViolationRow>,
    /// A few examples per kind.
    pub examples: Vec<String>,
}

impl SetApart {
    /// The rows of `v`, zeros left out.
    pub fn of(v: &Violations) -> SetApart {
        let (rows, total, examples) = OfficeReport::violation_rows(v);
        SetApart {
            total,
            kinds: rows.into_iter().filter(|r| r.count > 0).collect(),
            examples,
        }
    }

    /// `kind: count` pairs, e.g. "transport 3, server-error 1" ("none" when empty).
    pub fn words(&self) -> String {
        if self.kinds.is_empty() {
            return "none".into();
        }
        self.kinds
            .iter()
            .map(|r| format!("{} {}", r.kind, r.count))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A violation kind and its count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ViolationRow {
    /// Kind name ([`crate::Violation::name`]).
    pub kind: &'static str,
    /// How many.
    pub count: u64,
}

/// Users per profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProfileCount {
    /// Profile name.
    pub profile: &'static str,
    /// Users playing it.
    pub users: usize,
}

/// Everything an office day reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OfficeReport {
    /// Target URL.
    pub url: String,
    /// What the clients spoke: `caldav` (the profiles' full sequences) or `webdav`
    /// (plain WebDAV: PROPFIND, GET, PUT, DELETE).
    pub protocol: &'static str,
    /// What the server lacks for a full CalDAV client, in words (empty: nothing
    /// missing). Reported, not counted as violations.
    pub lacks: Vec<String>,
    /// Violation kinds that could not be checked on this server (the stale-write
    /// check where the server honours no precondition).
    pub checks_not_applicable: Vec<&'static str>,
    /// Writes sent without a precondition (If-Match / If-None-Match): plain WebDAV
    /// that ignores them, or a device holding only a weak ETag.
    pub unguarded_writes: u64,
    /// Virtual users.
    pub users: usize,
    /// Devices per user.
    pub devices_per_user: usize,
    /// Users per profile.
    pub profiles: Vec<ProfileCount>,
    /// Decisions per person per office day.
    pub decisions_per_day: u32,
    /// Office time / wall time.
    pub compress: f64,
    /// A cold day: every device's first sync ran inside the measured window. False: a
    /// warm day, whose first syncs ran before it ([`OfficeReport::lead_in`]).
    pub cold_start: bool,
    /// What a warm day ran before its window, reported apart; `None` on a cold day.
    pub lead_in: Option<LeadIn>,
    /// Wall-clock seconds of the set-up (every calendar found, emptied and filled).
    pub set_up_s: f64,
    /// Set-up requests that failed and were tried again, set apart from the day.
    pub set_up_failures: SetApart,
    /// Users whose calendar a previous day left was kept and read back, not emptied
    /// and refilled ([`crate::OfficeConfig::keep_calendars`]).
    pub set_up_kept: usize,
    /// Wall-clock length of the day, seconds.
    pub duration_s: f64,
    /// Wall-clock seconds from the window's start to the end of its last action
    /// (longer than `duration_s` when actions ran late): the time its requests were
    /// sent in, so their rate is `requests / wall_s`.
    pub wall_s: f64,
    /// Seed.
    pub seed: u64,
    /// Scheduled actions (syncs and decisions).
    pub actions_planned: u64,
    /// Of those, run.
    pub actions_run: u64,
    /// Of those, not run because the run's hard stop (or Ctrl-C) came first.
    pub actions_skipped: u64,
    /// Items on the server at the end (audited).
    pub items_at_end: u64,
    /// Share of the devices that polled at least twice in the measured window (the
    /// plan's note says what share a short window lets poll): "carries N users" rests
    /// on these devices' polls. 0 with no device.
    pub devices_polled_twice_share: f64,
    /// Requests sent during the day (set-up and audit excluded).
    pub requests: u64,
    /// The generator's CPU time during the day, seconds: the worker threads' user +
    /// system time, set-up and audit excluded.
    pub generator_cpu_s: f64,
    /// Latency per operation type.
    pub ops: Vec<LatencyRow>,
    /// Latency per sync session kind.
    pub sessions: Vec<LatencyRow>,
    /// Violations by kind (all kinds, zeros included).
    pub violations: Vec<ViolationRow>,
    /// Total violations: the run failed if non-zero.
    pub violations_total: u64,
    /// A few examples per kind.
    pub examples: Vec<String>,
}

impl OfficeReport {
    /// Violation rows from merged violations.
    pub fn violation_rows(v: &Violations) -> (Vec<ViolationRow>, u64, Vec<String>) {
        let rows = v
            .by_kind()
            .into_iter()
            .map(|(k, count)| ViolationRow {
                kind: k.name(),
                count,
            })
            .collect();
        let examples = v
            .examples()
            .iter()
            .map(|(k, e)| format!("{}: {e}", k.name()))
            .collect();
        (rows, v.total(), examples)
    }

    /// The count of violation kind `name`.
    pub fn violations_of(&self, name: &str) -> u64 {
        self.violations
            .iter()
            .find(|r| r.kind == name)
            .map_or(0, |r| r.count)
    }

    /// The row of op `name`.
    pub fn op(&self, name: &str) -> Option<&LatencyRow> {
        self.ops
            .iter()
            .chain(&self.sessions)
            .find(|r| r.name == name)
    }
}
