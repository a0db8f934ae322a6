//! A log turned into a replay schedule: which logged requests are sent, when, and on
//! which client's connection(s).
//!
//! Pure and streaming (one record in, at most one planned request out), so a log of
//! any size is planned in the memory of its client table. The engine's replay source
//! consumes [`Planned`] requests: each on the connection(s) of its `client` slot, in
//! order, at its intended instant (open loop: latency counts from that instant).
//!
//! Time: a request's offset is its logged start less the first planned one's (the
//! replay starts at once, whatever the window and filters left out), less every quiet
//! stretch's excess over `max_gap` (a night in the log never becomes a night of
//! silence), divided by `speed`. `from`/`to` select a window of the log by offset
//! before anything else; the method, status and path filters then apply, and the
//! gaps they leave are quiet stretches like any other.
//!
//! Clients: each logged client address gets a connection group (its index in order of
//! first appearance). The table of addresses is bounded ([`ReplayOptions::max_clients`]):
//! when a new address finds it full, the half of the table idle longest (by last logged
//! request) is dropped, and a dropped client that comes back starts again as a new
//! client, on a new connection, as a browser does after its keep-alive connection timed
//! out. So a log with millions of distinct addresses plans in the memory of the table,
//! and [`PlanCounts::clients_dropped`] says how often that happened.

use crate::record::Record;
use std::collections::HashMap;
use std::time::Duration;

/// A status filter: one status (`404`) or a class (`5xx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusMatch {
    /// Exactly this status.
    Exact(u16),
    /// Any status of this hundred (`5` for `5xx`).
    Class(u8),
}

/// A status filter that is neither a status nor a class.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is neither a status (404) nor a class (5xx)")]
pub struct BadStatusMatch(pub String);

impl std::str::FromStr for StatusMatch {
    type Err = BadStatusMatch;

    fn from_str(s: &str) -> Result<StatusMatch, BadStatusMatch> {
        let bad = || BadStatusMatch(s.to_string());
        match s.as_bytes() {
            [c @ b'1'..=b'5', b'x' | b'X', b'x' | b'X'] => Ok(StatusMatch::Class(c - b'0')),
            _ => match s.parse::<u16>() {
                Ok(n @ 100..=599) => Ok(StatusMatch::Exact(n)),
                _ => Err(bad()),
            },
        }
    }
}

impl StatusMatch {
    fn matches(self, status: u16) -> bool {
        match self {
            StatusMatch::Exact(s) => s == status,
            StatusMatch::Class(c) => status / 100 == u16::from(c),
        }
    }
}

/// What to replay and how fast.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// 2.0 replays twice as fast as logged. Positive and finite.
    pub speed: f64,
    /// The longest quiet stretch kept; longer ones shrink to it (before `speed`).
    pub max_gap: Option<Duration>,
    /// Start of the window of the log replayed, as an offset from its first request.
    pub from: Option<Duration>,
    /// End of that window (exclusive).
    pub to: Option<Duration>,
    /// Methods kept (empty: all), compared without case.
    pub methods: Vec<String>,
    /// Statuses kept (empty: all); a line without a status is kept only when empty.
    pub statuses: Vec<StatusMatch>,
    /// Paths kept (none: all): a regular expression searched in the origin-form target.
    pub path: Option<regex::Regex>,
    /// Fold the logged clients onto this many connection groups (none: one per client).
    pub clients: Option<usize>,
    /// Client addresses remembered at once (at least 2): past it, those idle longest
    /// are forgotten (see the module doc).
    pub max_clients: usize,
}

/// The client table's default bound: ~100 bytes an address, so ~6.5 MB, and 64 times
/// the connections a replay opens by default (a client idle past the 65,536 most
/// recent ones has long lost its connection to the cap anyway).
pub const MAX_CLIENTS: usize = 65_536;

impl Default for ReplayOptions {
    fn default() -> ReplayOptions {
        ReplayOptions {
            speed: 1.0,
            max_gap: None,
            from: None,
            to: None,
            methods: Vec::new(),
            statuses: Vec::new(),
            path: None,
            clients: None,
            max_clients: MAX_CLIENTS,
        }
    }
}

/// One request to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// When to send it, µs after the replay's start.
    pub intended_us: u64,
    /// The connection group: the logged client's index in order of first appearance,
    /// folded modulo `clients` when asked.
    pub client: usize,
    /// Method.
    pub method: String,
    /// Origin-form target (path and query); an absolute-form target's scheme and host
    /// are dropped, since the replay's target supplies them.
    pub target: String,
    /// The status the log had, to compare the answer with.
    pub logged_status: Option<u16>,
    /// The body size the log had.
    pub logged_bytes: Option<u64>,
    /// The request time the log had, µs.
    pub logged_request_time_us: Option<u64>,
    /// The log line.
    pub line: u64,
}

/// What planning left out, and what the user should be told.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanCounts {
    /// Requests planned.
    pub planned: u64,
    /// Outside `--from`/`--to`.
    pub outside_window: u64,
    /// Left out by the method, status or path filters.
    pub filtered: u64,
    /// Targets that cannot be sent to another host (`*`, `CONNECT host:port`).
    pub not_replayable: u64,
    /// Planned requests whose method usually carries a body (POST, PUT, PATCH): a log
    /// has no bodies, so they are sent without one.
    pub bodiless: u64,
    /// Quiet stretches shortened to `max_gap`.
    pub gaps_shortened: u64,
    /// Logged clients among the planned requests: distinct addresses, unless the
    /// client table dropped some (then a returning address counts again).
    pub clients: u64,
    /// Addresses dropped from the full client table (idle longest); their later
    /// requests, if any, replayed as a new client's on a new connection.
    pub clients_dropped: u64,
}

/// A remembered client: its connection group and its last logged instant.
#[derive(Debug, Clone, Copy)]
struct Seen {
    index: usize,
    last_us: i64,
}

/// Plans records (in start order, as [`crate::LogReader`] gives them) one at a time.
#[derive(Debug)]
pub struct Planner {
    opts: ReplayOptions,
    first_us: Option<i64>,
    first_kept_us: Option<i64>,
    prev_kept_us: Option<i64>,
    shrunk_us: i64,
    clients: HashMap<String, Seen>,
    counts: PlanCounts,
}

impl Planner {
    /// A planner; `opts.speed` must be positive and finite (the CLI checks it).
    pub fn new(opts: ReplayOptions) -> Planner {
        Planner {
            opts,
            first_us: None,
            first_kept_us: None,
            prev_kept_us: None,
            shrunk_us: 0,
            clients: HashMap::new(),
            counts: PlanCounts::default(),
        }
    }

    /// What was planned and left out so far.
    pub fn counts(&self) -> &PlanCounts {
        &self.counts
    }

    /// The record's place in the replay, or `None` when it is left out.
    pub fn plan(&mut self, r: Record) -> Option<Planned> {
        let first = *self.first_us.get_or_insert(r.at_us);
        let offset = Duration::from_micros((r.at_us - first).max(0) as u64);
        if self.opts.from.is_some_and(|f| offset < f) || self.opts.to.is_some_and(|t| offset >= t) {
            self.counts.outside_window += 1;
            return None;
        }
        let Some(target) = origin_form(&r.target) else {
            self.counts.not_replayable += 1;
            return None;
        };
        if !self.kept(&r, &target) {
            self.counts.filtered += 1;
            return None;
        }
        if let (Some(prev), Some(max)) = (self.prev_kept_us, self.opts.max_gap) {
            let gap = r.at_us - prev;
            let max = max.as_micros() as i64;
            if gap > max {
                self.shrunk_us += gap - max;
                self.counts.gaps_shortened += 1;
            }
        }
        let start = *self.first_kept_us.get_or_insert(r.at_us);
        self.prev_kept_us = Some(r.at_us);
        let logged = (r.at_us - start - self.shrunk_us).max(0) as f64;
        let index = self.client_index(r.client, r.at_us);
        self.counts.planned += 1;
        if matches!(r.method.as_str(), "POST" | "PUT" | "PATCH") {
            self.counts.bodiless += 1;
        }
        Some(Planned {
            intended_us: (logged / self.opts.speed).round() as u64,
            client: self.opts.clients.map_or(index, |n| index % n.max(1)),
            method: r.method,
            target,
            logged_status: r.status,
            logged_bytes: r.bytes,
            logged_request_time_us: r.request_time_us,
            line: r.line,
        })
    }

    /// The connection group of `client`, logged at `at_us`: its own while remembered,
    /// else the next new one (the table made room first when full).
    fn client_index(&mut self, client: String, at_us: i64) -> usize {
        if let Some(seen) = self.clients.get_mut(&client) {
            seen.last_us = seen.last_us.max(at_us);
            return seen.index;
        }
        if self.clients.len() >= self.opts.max_clients.max(2) {
            self.forget_idle_half();
        }
        let index = self.counts.clients as usize;
        self.counts.clients += 1;
        self.clients.insert(
            client,
            Seen {
                index,
                last_us: at_us,
            },
        );
        index
    }

    /// Drops the half of the client table idle longest. Halving (not one at a time)
    /// keeps the cost at O(1) per new client, amortised: one O(n) pass frees n/2 places.
    fn forget_idle_half(&mut self) {
        let mut last: Vec<i64> = self.clients.values().map(|s| s.last_us).collect();
        let keep = last.len() / 2;
        let cut_at = last.len() - keep;
        let (_, &mut cut, _) = last.select_nth_unstable(cut_at);
        // Strictly older than the cut go; of those at the cut, enough go to leave
        // `keep` (ties are common with whole-second stamps).
        let older = last.iter().filter(|&&t| t < cut).count();
        let mut ties_to_drop = cut_at - older;
        let before = self.clients.len();
        self.clients.retain(|_, s| {
            if s.last_us < cut {
                false
            } else if s.last_us == cut && ties_to_drop > 0 {
                ties_to_drop -= 1;
                false
            } else {
                true
            }
        });
        self.counts.clients_dropped += (before - self.clients.len()) as u64;
    }

    /// Addresses remembered now (at most `max_clients`).
    pub fn clients_remembered(&self) -> usize {
        self.clients.len()
    }

    /// The filters, the path one on the origin-form target.
    fn kept(&self, r: &Record, target: &str) -> bool {
        let o = &self.opts;
        (o.methods.is_empty() || o.methods.iter().any(|m| m.eq_ignore_ascii_case(&r.method)))
            && (o.statuses.is_empty()
                || r.status
                    .is_some_and(|s| o.statuses.iter().any(|m| m.matches(s))))
            && o.path.as_ref().is_none_or(|re| re.is_match(target))
    }
}

/// `/path?q` as is; `http://host/path?q` as `/path?q`; `*` and authority-form: none.
fn origin_form(target: &str) -> Option<String> {
    if target.starts_with('/') {
        return Some(target.to_string());
    }
    let rest = target
        .strip_prefix("http://")
        .or_else(|| target.strip_prefix("https://"))?;
    Some(match rest.find(['/', '?']) {
        Some(i) if rest[i..].starts_with('/') => rest[i..].to_string(),
        Some(i) => format!("/{}", &rest[i..]),
        None => "/".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(line: u64, client: &str, at_ms: i64, method: &str, target: &str, status: u16) -> Record {
        Record {
            line,
            client: client.into(),
            at_us: 1_700_000_000_000_000 + at_ms * 1_000,
            method: method.into(),
            target: target.into(),
            protocol: None,
            status: Some(status),
            bytes: Some(10),
            request_time_us: None,
            host: None,
            referer: None,
            user_agent: None,
        }
    }

    fn log() -> Vec<Record> {
        vec![
            rec(1, "a", 0, "GET", "/", 200),
            rec(2, "b", 100, "POST", "/api", 201),
            rec(3, "a", 200, "GET", "http://old.example/x?y", 404),
            rec(4, "c", 60_200, "GET", "/late", 200),
            rec(5, "b", 60_300, "CONNECT", "old.example:443", 200),
            rec(6, "a", 60_400, "GET", "/img/1.png", 500),
        ]
    }

    fn plan(opts: ReplayOptions) -> (Vec<(u64, usize, String)>, PlanCounts) {
        let mut p = Planner::new(opts);
        let out = log()
            .into_iter()
            .filter_map(|r| p.plan(r))
            .map(|p| (p.intended_us, p.client, p.target))
            .collect();
        (out, p.counts().clone())
    }

    #[test]
    fn logged_instants_scaled_with_gaps_shortened_and_clients_kept_apart() {
        let (got, counts) = plan(ReplayOptions::default());
        let at: Vec<(u64, usize)> = got.iter().map(|g| (g.0, g.1)).collect();
        assert_eq!(
            at,
            [
                (0, 0),
                (100_000, 1),
                (200_000, 0),
                (60_200_000, 2),
                (60_400_000, 0)
            ]
        );
        // Host and scheme are the replay target's; CONNECT has no origin-form.
        assert_eq!(got[2].2, "/x?y");
        assert_eq!(
            (counts.not_replayable, counts.bodiless, counts.clients),
            (1, 1, 3)
        );

        let fast = ReplayOptions {
            speed: 2.0,
            max_gap: Some(Duration::from_secs(1)),
            clients: Some(2),
            ..ReplayOptions::default()
        };
        let (got, counts) = plan(fast);
        let at: Vec<(u64, usize)> = got.iter().map(|g| (g.0, g.1)).collect();
        // The 60 s quiet stretch becomes 1 s, then everything runs twice as fast;
        // client c (index 2) folds onto group 0.
        assert_eq!(
            at,
            [
                (0, 0),
                (50_000, 1),
                (100_000, 0),
                (600_000, 0),
                (700_000, 0)
            ]
        );
        assert_eq!(counts.gaps_shortened, 1);
    }

    #[test]
    fn window_and_filters_leave_requests_out_and_count_them() {
        let (got, counts) = plan(ReplayOptions {
            from: Some(Duration::from_millis(150)),
            to: Some(Duration::from_secs(61)),
            methods: vec!["get".into()],
            statuses: vec!["2xx".parse().unwrap(), "404".parse().unwrap()],
            path: Some(regex::Regex::new("^/(x|late)").unwrap()),
            ..ReplayOptions::default()
        });
        // The replay starts at the first request kept.
        let at: Vec<(u64, &str)> = got.iter().map(|g| (g.0, g.2.as_str())).collect();
        assert_eq!(at, [(0, "/x?y"), (60_000_000, "/late")]);
        assert_eq!(
            (counts.outside_window, counts.filtered, counts.planned),
            (2, 1, 2)
        );
        assert_eq!(counts.not_replayable, 1);
        assert!("600".parse::<StatusMatch>().is_err());
        assert!("6xx".parse::<StatusMatch>().is_err());
    }

    #[test]
    fn a_million_clients_plan_in_a_bounded_table_and_the_idle_longest_are_forgotten() {
        let mut p = Planner::new(ReplayOptions {
            max_clients: 1_000,
            ..ReplayOptions::default()
        });
        // "heavy" comes back every 100 requests, so it is never among the idle half;
        // "once" comes at the start and again at the end, long forgotten by then.
        let mut heavy = std::collections::HashSet::new();
        let mut once = Vec::new();
        for i in 0..1_000_000i64 {
            let who = match i {
                _ if i % 100 == 0 => "heavy".to_string(),
                1 | 999_999 => "once".to_string(),
                _ => format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255),
            };
            let is_once = who == "once";
            let is_heavy = who == "heavy";
            let planned = p.plan(rec(i as u64, &who, i, "GET", "/", 200)).unwrap();
            assert!(p.clients_remembered() <= 1_000);
            if is_heavy {
                heavy.insert(planned.client);
            }
            if is_once {
                once.push(planned.client);
            }
        }
        let c = p.counts();
        assert_eq!(heavy.len(), 1, "a busy client keeps its connection group");
        assert_eq!(once.len(), 2);
        assert_ne!(
            once[0], once[1],
            "a forgotten client comes back as a new one"
        );
        // Every new address past the first 1,000 found the table full half the time.
        assert!(c.clients_dropped >= 1_000_000 - 10_000 - 1_000, "{c:?}");
        // 989,998 addresses seen once, "heavy" once, "once" twice.
        assert_eq!(c.clients, 989_998 + 1 + 2);
    }

    #[test]
    fn forgetting_keeps_the_most_recent_half_even_when_all_instants_tie() {
        let mut p = Planner::new(ReplayOptions {
            max_clients: 4,
            ..ReplayOptions::default()
        });
        for (i, who) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            p.plan(rec(i as u64, who, 0, "GET", "/", 200)).unwrap();
        }
        // The fifth found 4 remembered, all at one instant: two were dropped.
        assert_eq!(p.clients_remembered(), 3);
        assert_eq!(p.counts().clients_dropped, 2);
        assert_eq!(p.counts().clients, 5);
    }
}
