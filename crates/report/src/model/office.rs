//! The office parts of a run: each `caldav` step's judgement (read from its stored
//! verdict and summary) and, per office workload, the answer "carries N users": the
//! most users carried below the first count that was not, as volley_study's end table
//! says it (docs/methodology.md, "The office in a study").

use serde::Serialize;
use serde_json::Value;
use volley_analysis::{knee, words};

use super::StepReport;

/// One office day as judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OfficeStep {
    /// Virtual users.
    pub users: u32,
    /// Office time / wall time of the day: 1 is real time (the users are people); F
    /// makes each user send the requests of F people.
    pub compress: f64,
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
    /// What a warm day ran before its window; `None` on a cold day.
    pub lead_in: Option<LeadInCost>,
}

/// The cost of a warm day's lead-in (its first syncs and one poll interval before the
/// window, untimed by it), read from the day's stored office report.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LeadInCost {
    /// Wall-clock seconds.
    pub wall_s: f64,
    /// Requests sent.
    pub requests: u64,
    /// Requests that failed, set apart from the day's verdict.
    pub failed_requests: u64,
    /// Violations set apart with them (the failures and what followed from them).
    pub set_apart: u64,
}

impl LeadInCost {
    /// The stored report's `lead_in` (`null` on a cold day). Days stored before
    /// failures were set apart have none.
    fn read(l: &Value) -> Option<LeadInCost> {
        Some(LeadInCost {
            wall_s: l["wall_s"].as_f64()?,
            requests: l["requests"].as_u64().unwrap_or(0),
            failed_requests: l["failed_requests"].as_u64().unwrap_or(0),
            set_apart: l["failures"]["total"].as_u64().unwrap_or(0),
        })
    }

    /// For a table cell: "42 s, 3120 requests, 0 failed".
    pub fn words(&self) -> String {
        format!(
            "{:.0} s, {} requests, {} failed",
            self.wall_s, self.requests, self.failed_requests
        )
    }
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
    /// A larger count was seen not carried because of the server (a figure); else the
    /// answer is "at least" (docs/methodology.md, "Saturation").
    pub bounded: bool,
    /// Days above the answer that could not be judged for the server.
    pub unjudged_above: u32,
    /// A smaller count than the answer was not carried.
    pub non_monotone: bool,
    /// Office time / wall time of its days (1: real time, the users are people).
    pub compress: f64,
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
        // Verdicts stored before `compress` joined them: the day's own report has it.
        compress: v["compress"]
            .as_f64()
            .or_else(|| summary["office"]["compress"].as_f64())
            .unwrap_or(1.0),
        carries: v["carries"].as_bool().unwrap_or(false),
        poll_p99_ms: v["poll_p99_ms"].as_f64(),
        slo_ms: v["slo_ms"].as_f64().unwrap_or(0.0),
        violations: v["violations"].as_u64().unwrap_or(0),
        decisions_per_day: v["decisions_per_day"].as_u64().unwrap_or(0),
        reasons: strings(&v["reasons"]),
        lacks: strings(&summary["office"]["lacks"]),
        lead_in: LeadInCost::read(&summary["office"]["lead_in"]),
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
        // Each day's evidence as the study's end table reads it: a day the generator or
        // a busy machine spoiled cannot show the server failed.
        let judged: Vec<(f64, knee::Evidence)> = steps
            .iter()
            .filter(|x| x.workload.as_ref() == Some(w))
            .filter_map(|x| {
                let o = x.office.as_ref()?;
                let e = x.evidence().unwrap_or(if o.carries {
                    knee::Evidence::Sustained
                } else {
                    knee::Evidence::ServerFailed
                });
                Some((f64::from(o.users), e))
            })
            .collect();
        let c = knee::sweep_evidence(&judged);
        let claim = c.claim();
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
            bounded: match searched {
                Some(r) => crate::compare::stored_claim(r).bounded(),
                None => claim.bounded(),
            },
            unjudged_above: c.unjudged_above,
            non_monotone: c.non_monotone,
            compress: o.compress,
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
    /// What may be claimed of the answer (a sweep's: a search's is `bounded` alone).
    fn claim(&self) -> knee::Claim {
        match (self.users_carried, self.first_not_carried) {
            (None, _) => knee::Claim::None,
            (Some(n), Some(f)) if self.bounded => knee::Claim::Capacity {
                value: f64::from(n),
                failed_at: f64::from(f),
            },
            (Some(n), _) => knee::Claim::AtLeast {
                value: f64::from(n),
                unjudged_above: self.unjudged_above,
            },
        }
    }

    /// The answer in one sentence, as the study's end table says it.
    pub fn sentence(&self, target: &str) -> String {
        if let Some(s) = &self.search {
            return self.searched_sentence(target, s);
        }
        match self.users_carried {
            Some(n) => format!(
                "{target} carries {} ({}{}) at {} decisions/person/day with poll p99 under {:.0} ms and no correctness violation{}",
                words::users_claimed(f64::from(n), self.bounded, self.compress),
                self.workload,
                words::users_bound(&self.claim()),
                self.decisions_per_day,
                self.slo_ms,
                if self.non_monotone {
                    " (non-monotone: a smaller count was not carried)"
                } else {
                    ""
                }
            ),
            None => format!(
                "{target} carries none of the user counts tried ({}, {}: poll p99 under {:.0} ms and no correctness violation failed at every count)",
                self.workload,
                words::pace(self.compress),
                self.slo_ms
            ),
        }
    }

    /// The answer of a users search, as the study's end table says it.
    fn searched_sentence(&self, target: &str, s: &UsersSearch) -> String {
        let end = match s.end.as_str() {
            "converged" => String::new(),
            "reached_max_rate" => ", not bounded: the most the search tries".to_string(),
            other => format!(", search ended: {}", other.replace('_', " ")),
        };
        let hi = s.ci_hi.map_or("unbounded".to_string(), |h| h.to_string());
        match self.users_carried {
            Some(n) => format!(
                "{target} carries {} ({}; searched, 95% CI [{}, {hi}] users, {} days{end}) at {} decisions/person/day with poll p99 under {:.0} ms and no correctness violation",
                words::users_claimed(f64::from(n), self.bounded, self.compress),
                self.workload,
                s.ci_lo.unwrap_or(n),
                s.steps,
                self.decisions_per_day,
                self.slo_ms
            ),
            None => format!(
                "{target} carries none of the user counts tried ({}, {}; searched, {} days{end}: poll p99 under {:.0} ms and no correctness violation failed at every count)",
                self.workload,
                words::pace(self.compress),
                s.steps,
                self.slo_ms
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(compress: f64) -> OfficeAnswer {
        OfficeAnswer {
            workload: "office".into(),
            users_carried: Some(50),
            first_not_carried: Some(100),
            bounded: true,
            unjudged_above: 0,
            non_monotone: false,
            compress,
            decisions_per_day: 250,
            slo_ms: 1000.0,
            search: None,
        }
    }

    #[test]
    fn an_answer_says_people_and_names_its_compression() {
        assert!(answer(1.0)
            .sentence("builtin")
            .starts_with("builtin carries 50 users at their real pace (office; 100 not carried)"));
        assert!(answer(480.0).sentence("builtin").starts_with(
            "builtin carries the request rate of about 24,000 people, with the data of 50 \
             (office time compressed 480x) (office; 100 not carried)"
        ));
        let none = OfficeAnswer {
            users_carried: None,
            ..answer(480.0)
        };
        assert!(
            none.sentence("b").contains("compressed 480x"),
            "{}",
            none.sentence("b")
        );
        assert_eq!(
            serde_json::to_value(answer(480.0)).unwrap()["compress"],
            480.0
        );
    }

    #[test]
    fn an_unbounded_answer_says_at_least_and_why() {
        let top = OfficeAnswer {
            first_not_carried: None,
            bounded: false,
            ..answer(1.0)
        };
        assert!(
            top.sentence("builtin").starts_with(
                "builtin carries at least 50 users at their real pace \
                 (office; not bounded: 50 was the most tried)"
            ),
            "{}",
            top.sentence("builtin")
        );
        let spoiled = OfficeAnswer {
            unjudged_above: 2,
            ..top
        };
        assert!(
            spoiled
                .sentence("b")
                .contains("(office; not bounded: 2 days above could not be judged)"),
            "{}",
            spoiled.sentence("b")
        );
    }

    #[test]
    fn a_step_reads_its_compression_from_the_verdict_or_an_older_summary() {
        let verdict = json!({"office": {"users": 5, "carries": true, "compress": 480.0}});
        let step = read(Some(&verdict), &json!({})).unwrap();
        assert_eq!((step.users, step.compress), (5, 480.0));
        // Stored before the verdict had it: the day's report in the summary says it.
        let old = json!({"office": {"users": 5, "carries": true}});
        let summary = json!({"office": {"compress": 960.0}});
        assert_eq!(read(Some(&old), &summary).unwrap().compress, 960.0);
        assert_eq!(read(Some(&old), &json!({})).unwrap().compress, 1.0);
    }

    #[test]
    fn a_warm_days_lead_in_is_read_with_its_failures_and_a_cold_day_has_none() {
        let verdict = json!({"office": {"users": 5, "carries": true}});
        let warm = json!({"office": {"lead_in": {
            "wall_s": 41.6, "requests": 3120, "failed_requests": 4,
            "failures": {"total": 6, "kinds": [], "examples": []}
        }}});
        let l = read(Some(&verdict), &warm).unwrap().lead_in.unwrap();
        assert_eq!((l.requests, l.failed_requests, l.set_apart), (3120, 4, 6));
        assert_eq!(l.words(), "42 s, 3120 requests, 4 failed");
        let cold = json!({"office": {"lead_in": null}});
        assert_eq!(read(Some(&verdict), &cold).unwrap().lead_in, None);
        // Stored before failures were set apart: no failures, still the cost.
        let older = json!({"office": {"lead_in": {"wall_s": 3.0, "requests": 10}}});
        let l = read(Some(&verdict), &older).unwrap().lead_in.unwrap();
        assert_eq!((l.requests, l.failed_requests), (10, 0));
    }
}
