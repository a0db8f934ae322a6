//! How faithfully a replay followed its log: the replayed schedule against the log's
//! (send lag), and the answers against the logged ones (status, body size, and each
//! path group's latency beside the logged request time).
//!
//! Pure and mergeable: each worker's replay source adds its answers to its own
//! [`Fidelity`] without a lock, and the workers' are merged once at the end (the
//! engine's habit for recorders). Memory is bounded: histograms, a status-pair table
//! (statuses are few) and at most [`MAX_GROUPS`] path groups (later ones are pooled).

use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Path groups kept apart; requests of later groups are pooled under [`OTHER_GROUP`].
pub const MAX_GROUPS: usize = 32;
/// The pooled group's name.
pub const OTHER_GROUP: &str = "(other)";
/// Latencies kept from 1 us to an hour at 3 significant digits (volley's own bounds);
/// a longer one is clamped, not lost.
const HIGH_US: u64 = 3_600_000_000;

fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGH_US, 3).expect("constant bounds")
}

fn put(h: &mut Histogram<u64>, us: u64) {
    h.saturating_record(us.clamp(1, HIGH_US));
}

/// What the log said of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    /// The logged status.
    pub status: Option<u16>,
    /// The logged body size.
    pub bytes: Option<u64>,
    /// The logged request time, µs.
    pub request_time_us: Option<u64>,
    /// The path group ([`path_group`]), shared: the reader interns each group's name
    /// once, so a request carries no allocation of its own for it.
    pub group: Arc<str>,
}

/// What the replay got for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    /// Sent - intended, µs; `None` when the request was never sent.
    pub send_lag_us: Option<u64>,
    /// The status received; 0 when none (a transport failure).
    pub status: u16,
    /// Body bytes as they came over the wire (what a server logs as bytes sent).
    pub body_bytes: u64,
    /// Done - intended, µs (open loop: what a user waits).
    pub response_us: u64,
}

/// The group a request target is counted in: its first path segment (`/img/1.png`
/// and `/img/2.png` are `/img/`; `/about` is `/about`), query left out.
pub fn path_group(target: &str) -> String {
    let path = target.split(['?', '#']).next().unwrap_or("/");
    let rest = path.strip_prefix('/').unwrap_or(path);
    match rest.find('/') {
        Some(i) => format!("/{}/", &rest[..i]),
        None => format!("/{rest}"),
    }
}

#[derive(Debug, Clone)]
struct Group {
    requests: u64,
    replayed_us: Histogram<u64>,
    logged_us: Histogram<u64>,
}

impl Group {
    fn new() -> Group {
        Group {
            requests: 0,
            replayed_us: new_hist(),
            logged_us: new_hist(),
        }
    }
}

/// The comparison so far (one per worker, merged once).
#[derive(Debug, Clone)]
pub struct Fidelity {
    send_lag_us: Histogram<u64>,
    unsent: u64,
    /// (logged status or 0, received status or 0) -> requests.
    statuses: BTreeMap<(u16, u16), u64>,
    /// Responses with the logged status and a logged size.
    bytes_compared: u64,
    bytes_same: u64,
    bytes_within_10pct: u64,
    groups: BTreeMap<String, Group>,
    /// Times a worker had none of its requests read ahead ([`Fidelity::reader_behind`]).
    reader_behind: u64,
}

impl Default for Fidelity {
    fn default() -> Fidelity {
        Fidelity {
            send_lag_us: new_hist(),
            unsent: 0,
            statuses: BTreeMap::new(),
            bytes_compared: 0,
            bytes_same: 0,
            bytes_within_10pct: 0,
            groups: BTreeMap::new(),
            reader_behind: 0,
        }
    }
}

impl Fidelity {
    /// Adds one request's answer.
    pub fn add(&mut self, logged: &Logged, got: Answer) {
        match got.send_lag_us {
            Some(lag) => put(&mut self.send_lag_us, lag),
            None => self.unsent += 1,
        }
        *self
            .statuses
            .entry((logged.status.unwrap_or(0), got.status))
            .or_default() += 1;
        if let (Some(s), Some(b)) = (logged.status, logged.bytes) {
            if s == got.status {
                self.bytes_compared += 1;
                self.bytes_same += u64::from(b == got.body_bytes);
                // Within 10% of the logged size (a dynamic page's date, a counter).
                self.bytes_within_10pct += u64::from(b.abs_diff(got.body_bytes) * 10 <= b);
            }
        }
        if got.status == 0 {
            return;
        }
        let g = self.group(&logged.group);
        g.requests += 1;
        put(&mut g.replayed_us, got.response_us);
        if let Some(t) = logged.request_time_us {
            put(&mut g.logged_us, t);
        }
    }

    /// A worker found none of its requests read ahead while the log reader was still
    /// reading, after its first: it waited for the reader, so an arrival due meanwhile
    /// went late because of the reader, not the worker or the server (said in the
    /// report, so a replay's lag is never blamed on the wrong part).
    pub fn reader_behind(&mut self) {
        self.reader_behind += 1;
    }

    /// Adds another worker's comparison.
    pub fn merge(&mut self, o: &Fidelity) {
        self.reader_behind += o.reader_behind;
        let _ = self.send_lag_us.add(&o.send_lag_us);
        self.unsent += o.unsent;
        for (k, n) in &o.statuses {
            *self.statuses.entry(*k).or_default() += n;
        }
        self.bytes_compared += o.bytes_compared;
        self.bytes_same += o.bytes_same;
        self.bytes_within_10pct += o.bytes_within_10pct;
        for (name, g) in &o.groups {
            let mine = self.group(name);
            mine.requests += g.requests;
            let _ = mine.replayed_us.add(&g.replayed_us);
            let _ = mine.logged_us.add(&g.logged_us);
        }
    }

    /// The group `name`'s figures, or [`OTHER_GROUP`]'s once [`MAX_GROUPS`] are kept.
    /// Called for every answer on the worker's path: a known group is found without
    /// allocating; only a new group's name is copied.
    fn group(&mut self, name: &str) -> &mut Group {
        let key = if self.groups.contains_key(name) || self.groups.len() < MAX_GROUPS {
            name
        } else {
            OTHER_GROUP
        };
        if !self.groups.contains_key(key) {
            self.groups.insert(key.to_string(), Group::new());
        }
        self.groups.get_mut(key).expect("inserted above")
    }

    /// Requests compared.
    pub fn requests(&self) -> u64 {
        self.statuses.values().sum()
    }

    /// The figures, as printed and as `--json` gives them.
    pub fn report(&self) -> FidelityReport {
        let total = self.requests();
        let share = |n: u64| {
            if total == 0 {
                0.0
            } else {
                100.0 * n as f64 / total as f64
            }
        };
        let same: u64 = self
            .statuses
            .iter()
            .filter(|((l, g), _)| l == g)
            .map(|(_, n)| n)
            .sum();
        let mut differ: Vec<StatusDiff> = self
            .statuses
            .iter()
            .filter(|((l, g), _)| l != g)
            .map(|(&(logged, got), &n)| StatusDiff {
                logged,
                got,
                requests: n,
                percent: share(n),
            })
            .collect();
        differ.sort_by_key(|d| std::cmp::Reverse(d.requests));
        let lag = &self.send_lag_us;
        let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1e3;
        let send_lag_ms = (!lag.is_empty()).then(|| LagReport {
            p50: ms(lag, 0.5),
            p90: ms(lag, 0.9),
            p99: ms(lag, 0.99),
            max: lag.max() as f64 / 1e3,
        });
        let mut groups: Vec<GroupReport> = self
            .groups
            .iter()
            .map(|(name, g)| GroupReport {
                group: name.clone(),
                requests: g.requests,
                replayed_mean_ms: g.replayed_us.mean() / 1e3,
                replayed_p99_ms: ms(&g.replayed_us, 0.99),
                logged_mean_ms: (!g.logged_us.is_empty()).then(|| g.logged_us.mean() / 1e3),
                logged_p99_ms: (!g.logged_us.is_empty()).then(|| ms(&g.logged_us, 0.99)),
            })
            .collect();
        groups.sort_by(|a, b| b.requests.cmp(&a.requests).then(a.group.cmp(&b.group)));
        let pct = |n: u64| {
            (self.bytes_compared > 0).then(|| 100.0 * n as f64 / self.bytes_compared as f64)
        };
        FidelityReport {
            requests: total,
            unsent: self.unsent,
            send_lag_ms,
            same_status_percent: share(same),
            status_differences: differ,
            bytes_compared: self.bytes_compared,
            same_bytes_percent: pct(self.bytes_same),
            bytes_within_10_percent: pct(self.bytes_within_10pct),
            groups,
            reader_behind: self.reader_behind,
        }
    }
}

/// Send lag percentiles, ms.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LagReport {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

/// Requests answered with another status than the logged one.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StatusDiff {
    /// The logged status (0: none logged).
    pub logged: u16,
    /// The status received (0: no response).
    pub got: u16,
    /// Requests.
    pub requests: u64,
    /// Share of the compared requests, percent.
    pub percent: f64,
}

/// One path group's latency beside the logged request time.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GroupReport {
    /// The group ([`path_group`]).
    pub group: String,
    /// Responses received in it.
    pub requests: u64,
    /// Replayed response time (from the intended instant), mean, ms.
    pub replayed_mean_ms: f64,
    /// Its 99th percentile, ms.
    pub replayed_p99_ms: f64,
    /// The logged request time, mean, ms (`None`: the log has none).
    pub logged_mean_ms: Option<f64>,
    /// Its 99th percentile, ms.
    pub logged_p99_ms: Option<f64>,
}

/// The fidelity of one replay.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FidelityReport {
    /// Requests compared (every planned request that was sent or censored).
    pub requests: u64,
    /// Of them, never sent (still waiting when the run ended).
    pub unsent: u64,
    /// Send lag (sent - intended) percentiles, ms.
    pub send_lag_ms: Option<LagReport>,
    /// Answers with the logged status, percent.
    pub same_status_percent: f64,
    /// The other pairs, most frequent first.
    pub status_differences: Vec<StatusDiff>,
    /// Answers with the logged status whose size the log had.
    pub bytes_compared: u64,
    /// Of them, the same body size, percent.
    pub same_bytes_percent: Option<f64>,
    /// Of them, within 10% of the logged size, percent.
    pub bytes_within_10_percent: Option<f64>,
    /// Path groups, most requests first.
    pub groups: Vec<GroupReport>,
    /// Times a worker waited for the log reader ([`Fidelity::reader_behind`]).
    pub reader_behind: u64,
}

impl FidelityReport {
    /// The report as text lines (no trailing newline), e.g. "97.2% same status; 2.1%
    /// 404 where the log had 200".
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "replay fidelity ({} requests compared with the log{}):",
            self.requests,
            if self.unsent > 0 {
                format!(", {} never sent", self.unsent)
            } else {
                String::new()
            }
        )];
        if let Some(l) = &self.send_lag_ms {
            out.push(format!(
                "  send lag vs the log's schedule: p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
                l.p50, l.p90, l.p99, l.max
            ));
        }
        if self.reader_behind > 0 {
            out.push(format!(
                "  the log reader fell behind {} time(s): a worker had no request read ahead and waited for it",
                self.reader_behind
            ));
        }
        let mut status = format!("  status: {:.1}% same status", self.same_status_percent);
        for d in self.status_differences.iter().take(5) {
            let got = match d.got {
                0 => "no response".to_string(),
                s => s.to_string(),
            };
            let logged = match d.logged {
                0 => "no status".to_string(),
                s => s.to_string(),
            };
            status.push_str(&format!(
                "; {:.1}% {got} where the log had {logged}",
                d.percent
            ));
        }
        out.push(status);
        if let (Some(same), Some(near)) = (self.same_bytes_percent, self.bytes_within_10_percent) {
            out.push(format!(
                "  body size: {same:.1}% same as logged, {near:.1}% within 10% (of {} answers with the logged status)",
                self.bytes_compared
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logged(status: u16, bytes: u64, rt_ms: Option<u64>, target: &str) -> Logged {
        Logged {
            status: Some(status),
            bytes: Some(bytes),
            request_time_us: rt_ms.map(|m| m * 1000),
            group: path_group(target).into(),
        }
    }

    fn got(status: u16, bytes: u64, lag_us: u64, ms: u64) -> Answer {
        Answer {
            send_lag_us: Some(lag_us),
            status,
            body_bytes: bytes,
            response_us: ms * 1000,
        }
    }

    #[test]
    fn groups_by_first_segment() {
        assert_eq!(path_group("/img/1.png?x=1"), "/img/");
        assert_eq!(path_group("/about"), "/about");
        assert_eq!(path_group("/"), "/");
        assert_eq!(path_group("/a/b/c"), "/a/");
    }

    #[test]
    fn statuses_sizes_and_groups_compared_and_merged() {
        let mut a = Fidelity::default();
        let mut b = Fidelity::default();
        for i in 0..8 {
            a.add(
                &logged(200, 100, Some(5), "/img/x"),
                got(200, 100, 10 + i, 2),
            );
        }
        a.add(&logged(200, 100, Some(5), "/img/y"), got(404, 20, 10, 1));
        b.add(&logged(200, 100, None, "/about"), got(200, 105, 10, 3));
        b.add(
            &logged(404, 10, None, "/gone"),
            Answer {
                send_lag_us: None,
                status: 0,
                body_bytes: 0,
                response_us: 9000,
            },
        );
        a.merge(&b);
        let r = a.report();
        assert_eq!((r.requests, r.unsent), (11, 1));
        // 9 of 11 with the logged status.
        assert!((r.same_status_percent - 900.0 / 11.0).abs() < 1e-9);
        let pairs: Vec<(u16, u16, u64)> = r
            .status_differences
            .iter()
            .map(|d| (d.logged, d.got, d.requests))
            .collect();
        assert_eq!(pairs, [(200, 404, 1), (404, 0, 1)]);
        // 9 answers with the logged status and size: 8 exact, 1 within 10%.
        assert_eq!(r.bytes_compared, 9);
        assert!((r.same_bytes_percent.unwrap() - 800.0 / 9.0).abs() < 1e-9);
        assert!((r.bytes_within_10_percent.unwrap() - 100.0).abs() < 1e-9);
        // Histograms keep 3 significant digits: 5 ms reads back within 0.1%.
        let g: Vec<(&str, u64, Option<u64>)> = r
            .groups
            .iter()
            .map(|g| {
                (
                    g.group.as_str(),
                    g.requests,
                    g.logged_mean_ms.map(|m| m.round() as u64),
                )
            })
            .collect();
        assert_eq!(g, [("/img/", 9, Some(5)), ("/about", 1, None)]);
        let text = r.lines().join("\n");
        assert!(
            text.contains("81.8% same status; 9.1% 404 where the log had 200"),
            "{text}"
        );
    }

    #[test]
    fn groups_past_the_cap_are_pooled() {
        let mut f = Fidelity::default();
        for i in 0..(MAX_GROUPS + 5) {
            f.add(&logged(200, 1, None, &format!("/p{i}")), got(200, 1, 1, 1));
        }
        let r = f.report();
        assert_eq!(r.groups.len(), MAX_GROUPS + 1);
        let other = r.groups.iter().find(|g| g.group == OTHER_GROUP).unwrap();
        assert_eq!(other.requests, 5);
    }
}
