//! The office parts of a run: each `caldav` step's judgement (read from its stored
//! verdict and summary) and, per office workload, the answer "carries N users": the
//! most users carried below the first count that was not, as volley_study's end table
//! says it (docs/methodology.md, "The office in a study").

use serde::Serialize;
use serde_json::Value;
use volley_analysis::knee;

use super::StepReport;

/// One office day as judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OfficeStep {
    /// Virtual users.
    pub users: u32,
    /// Poll p99 within the SLO, errors within bound, no correctness violation.
    pub carries: bool,
    /// p99 of the clients' poll sessions, ms.
    pub poll_p99_ms: Option<f64>,
    /// The SLO it was judged against, ms.
    pub slo_ms: f64,
    /// Correctness violations (every kind).
    pub violations: u64,
    /// Decisions per person per day.
    pub decisions_per_day: u64,
    /// Why it did not carry its users.
    pub reasons: Vec<String>,
    /// What the server lacks for a full CalDAV client (plain WebDAV), when reported.
    pub lacks: Vec<String>,
}

/// The answer for one office workload on one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OfficeAnswer {
    /// The workload's name.
    pub workload: String,
    /// The most users carried below the first count that was not; `None`: none.
    pub users_carried: Option<u32>,
    /// The smallest count above it that was not carried (the answer's interval is
    /// between the two); `None`: every count above was carried or none was tried.
    pub first_not_carried: Option<u32>,
    /// A smaller count than the answer was not carried.
    pub non_monotone: bool,
    /// Decisions per person per day.
    pub decisions_per_day: u64,
    /// The poll p99 SLO, ms.
    pub slo_ms: f64,
    /// The users search that gave the answer, when one ended (else the answer is its
    /// days' sweep capacity).
    pub search: Option<UsersSearch>,
}

/// A users search as stored (the store's `capacities` row with unit "users").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsersSearch {
    /// Lower end of the 95% interval, users.
    pub ci_lo: Option<u32>,
    /// Upper end (`None`: unbounded above or no interval).
    pub ci_hi: Option<u32>,
    /// How it ended (converged, reached_max_rate: the most users it tries, ...).
    pub end: String,
    /// Days it ran.
    pub steps: u32,
}

/// The office judgement of a stored step, if it is an office day.
pub(super) fn read(verdict: Option<&Value>, summary: &Value) -> Option<OfficeStep> {
    let v = verdict?.get("office")?;
    let strings = |x: &Value| -> Vec<String> {
        x.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    Some(OfficeStep {
        users: v["users"].as_u64().and_then(|u| u32::try_from(u).ok())?,
        carries: v["carries"].as_bool().unwrap_or(false),
        poll_p99_ms: v["poll_p99_ms"].as_f64(),
        slo_ms: v["slo_ms"].as_f64().unwrap_or(0.0),
        violations: v["violations"].as_u64().unwrap_or(0),
        decisions_per_day: v["decisions_per_day"].as_u64().unwrap_or(0),
        reasons: strings(&v["reasons"]),
        lacks: strings(&summary["office"]["lacks"]),
    })
}

/// One answer per office workload of the run, in first-step order.
pub(super) fn answers(
    steps: &[StepReport],
    searches: &[volley_store::CapacityRow],
) -> Vec<OfficeAnswer> {
    let mut out: Vec<OfficeAnswer> = Vec::new();
    for s in steps {
        let (Some(o), Some(w)) = (&s.office, &s.workload) else {
            continue;
        };
        if out.iter().any(|a| &a.workload == w) {
            continue;
        }
        let judged: Vec<(f64, bool)> = steps
            .iter()
            .filter(|x| x.workload.as_ref() == Some(w))
            .filter_map(|x| x.office.as_ref().map(|o| (f64::from(o.users), o.carries)))
            .collect();
        let c = knee::sweep_capacity(&judged);
        let users = |v: Option<f64>| v.map(|u| u as u32);
        let searched = searches
            .iter()
            .map(|r| &r.record)
            .find(|r| r.cell.get("workload").and_then(Value::as_str) == Some(w.as_str()))
            .filter(|r| r.end != volley_store::SearchEnd::Interrupted);
        out.push(OfficeAnswer {
            workload: w.clone(),
            users_carried: match searched {
                Some(r) => users(r.capacity_rps),
                None => users(c.capacity_rps),
            },
            first_not_carried: users(c.first_unsustainable_above_rps),
            non_monotone: c.non_monotone,
            decisions_per_day: o.decisions_per_day,
            slo_ms: o.slo_ms,
            search: searched.map(|r| UsersSearch {
                ci_lo: users(r.ci_lo_rps),
                ci_hi: users(r.ci_hi_rps),
                end: r.end.as_str().to_string(),
                steps: r.steps,
            }),
        });
    }
    out
}

impl OfficeAnswer {
    /// The answer in one sentence, as the study's end table says it.
    pub fn sentence(&self, target: &str) -> String {
        if let Some(s) = &self.search {
            return self.searched_sentence(target, s);
        }
        // A count is claimed only below one not carried (docs/methodology.md,
        // "Capacity"), else "at least".
        let at_least = if self.first_not_carried.is_none() {
            "at least "
        } else {
            ""
        };
        match self.users_carried {
            Some(n) => format!(
                "{target} carries {at_least}{n} users ({}{}) at {} decisions/person/day with poll p99 under {:.0} ms and no correctness violation{}",
                self.workload,
                self.first_not_carried
                    .map_or("; the most tried".to_string(), |u| format!("; {u} not carried")),
                self.decisions_per_day,
                self.slo_ms,
                if self.non_monotone {
                    " (non-monotone: a smaller count was not carried)"
                } else {
                    ""
                }
            ),
            None => format!(
                "{target} carries none of the user counts tried ({}: poll p99 under {:.0} ms and no correctness violation failed at every count)",
                self.workload, self.slo_ms
            ),
        }
    }

    /// The answer of a users search, as the study's end table says it.
    fn searched_sentence(&self, target: &str, s: &UsersSearch) -> String {
        let end = match s.end.as_str() {
            "converged" => String::new(),
            "reached_max_rate" => ", the most the search tries".to_string(),
            other => format!(", search ended: {}", other.replace('_', " ")),
        };
        let hi = s.ci_hi.map_or("unbounded".to_string(), |h| h.to_string());
        // Only a converged search saw a count above its answer not carried.
        let at_least = if s.end == "converged" {
            ""
        } else {
            "at least "
        };
        match self.users_carried {
            Some(n) => format!(
                "{target} carries {at_least}{n} users ({}; searched, 95% CI [{}, {hi}], {} days{end}) at {} decisions/person/day with poll p99 under {:.0} ms and no correctness violation",
                self.workload,
                s.ci_lo.unwrap_or(n),
                s.steps,
                self.decisions_per_day,
                self.slo_ms
            ),
            None => format!(
                "{target} carries none of the user counts tried ({}; searched, {} days{end}: poll p99 under {:.0} ms and no correctness violation failed at every count)",
                self.workload, s.steps, self.slo_ms
            ),
        }
    }
}
