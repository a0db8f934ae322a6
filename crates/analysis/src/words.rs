//! The sustainability reasons as sentences a person reads: figures with their units and
//! thousands separators ("sent 1,005 req/s of the 1,600 offered (63%; 99% needed)").
//! Printed by the study's step lines and the reports; the machine-readable form is the
//! [`Reason`] itself, serialised into the stored verdict and JSON reports unchanged.

use std::time::Duration;

use num_format::{Locale, ToFormattedString};

use crate::sustain::{Reason, RATE_TOLERANCE_SHARE};

/// A count or rate as people write it: whole and with thousands separators from 100 up
/// ("1,600"), one decimal below (9.5), no trailing ".0".
pub fn number(x: f64) -> String {
    if !x.is_finite() {
        return "?".to_string();
    }
    if x.abs() >= 100.0 {
        let n = x.round() as i64;
        return n.to_formatted_string(&Locale::en);
    }
    let s = format!("{x:.1}");
    s.strip_suffix(".0").map_or(s.clone(), str::to_string)
}

/// An office answer's users in people: at real time (`compress` 1) "50 users at their
/// real pace"; compressed, what the figure stands for: "the request rate of about
/// 24,000 people, with the data of 50 (office time compressed 480x)", since each
/// simulated user then sends the requests of `compress` people while the data (items,
/// connections, memory) grow with the users simulated (docs/methodology.md, "The
/// office"). The one wording of the end table, the reports and `bench --caldav`.
pub fn users(n: f64, compress: f64) -> String {
    if compress == 1.0 {
        format!("{} users at their real pace", number(n))
    } else {
        format!(
            "the request rate of about {} people, with the data of {} ({})",
            number(n * compress),
            number(n),
            pace(compress)
        )
    }
}

/// An office answer's users with what may be claimed of them (docs/methodology.md,
/// "Saturation"): "at least ..." unless a larger count was seen to fail because of the
/// server, so a day count the sweep never bounded is not read as the server's limit.
pub fn users_claimed(n: f64, bounded: bool, compress: f64) -> String {
    let users = users(n, compress);
    if bounded {
        users
    } else {
        format!("at least {users}")
    }
}

/// What bounds an office sweep's answer, as the text in its parentheses ends: "; 100 not
/// carried", "; not bounded: 50 was the most tried", "; not bounded: 2 days above could
/// not be judged".
pub fn users_bound(claim: &crate::knee::Claim) -> String {
    use crate::knee::Claim;
    match *claim {
        Claim::Capacity { failed_at, .. } => format!("; {} not carried", number(failed_at)),
        Claim::AtLeast {
            value,
            unjudged_above: 0,
        } => format!("; not bounded: {} was the most tried", number(value)),
        Claim::AtLeast { unjudged_above, .. } => format!(
            "; not bounded: {unjudged_above} day{} above could not be judged",
            if unjudged_above == 1 { "" } else { "s" }
        ),
        Claim::None => String::new(),
    }
}

/// How an office day's time runs: "at real time" or "office time compressed 480x".
pub fn pace(compress: f64) -> String {
    if compress == 1.0 {
        "at real time".to_string()
    } else {
        format!("office time compressed {}x", number(compress))
    }
}

/// A latency with the unit that keeps it short: "850 us", "2.16 ms", "200 ms", "2.16 s"
/// (three significant figures).
pub fn duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    let three = |v: f64, unit: &str| {
        let digits = if v >= 100.0 {
            0
        } else if v >= 10.0 {
            1
        } else {
            2
        };
        let t = format!("{v:.digits$}");
        let t = if t.contains('.') {
            t.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            t
        };
        format!("{t} {unit}")
    };
    if s >= 1.0 {
        three(s, "s")
    } else if s >= 1e-3 {
        three(s * 1e3, "ms")
    } else {
        three(s * 1e6, "us")
    }
}

/// A share in 0..=1 as a percentage: "63%", "0.5%" below 10%.
fn percent(share: f64) -> String {
    let p = share * 100.0;
    if p.abs() >= 10.0 || p == 0.0 {
        format!("{p:.0}%")
    } else {
        format!("{}%", number(p))
    }
}

/// One reason as a sentence with units.
pub fn sentence(r: &Reason) -> String {
    // The rule stores 99% of the offered rate; the sentence names the offered rate.
    let offered = |required: f64| required / (1.0 - RATE_TOLERANCE_SHARE);
    let needed = percent(1.0 - RATE_TOLERANCE_SHARE);
    match r {
        Reason::TooFewWindows { windows, required } => format!(
            "too short to judge: {windows} whole second{} measured, {required} needed",
            if *windows == 1 { "" } else { "s" }
        ),
        Reason::InvalidFigures => {
            "the figures were invalid (not a number, or negative), so the step was not judged"
                .to_string()
        }
        Reason::SendRateShort {
            send_rate_rps,
            required_rps,
        } => {
            let o = offered(*required_rps);
            format!(
                "sent {} req/s of the {} offered ({}; {needed} needed)",
                number(*send_rate_rps),
                number(o),
                percent(send_rate_rps / o)
            )
        }
        Reason::ReplyRateShort {
            reply_rate_rps,
            required_rps,
        } => {
            let o = offered(*required_rps);
            format!(
                "replies came back at {} req/s of the {} offered ({}; {needed} needed)",
                number(*reply_rate_rps),
                number(o),
                percent(reply_rate_rps / o)
            )
        }
        Reason::TooManyErrors {
            error_share,
            allowed_share,
        } => format!(
            "{} of requests failed, more than the {} allowed",
            percent(*error_share),
            percent(*allowed_share)
        ),
        Reason::P99OverSlo {
            worst_p99,
            window_index,
            slo,
        } => format!(
            "p99 {} in second {} exceeds the {} SLO",
            duration(*worst_p99),
            window_index + 1,
            duration(*slo)
        ),
        Reason::InFlightRising(t) => format!(
            "in-flight requests rose by {}/s ({} over the step, {} on average)",
            number(t.slope_per_s),
            number(t.rise_requests),
            number(t.mean_in_flight)
        ),
    }
}

/// Every reason, as one line of sentences joined by "; ".
pub fn sentences(reasons: &[Reason]) -> String {
    reasons.iter().map(sentence).collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sustain::Trend;

    #[test]
    fn office_users_say_people_and_name_their_compression() {
        assert_eq!(users(50.0, 1.0), "50 users at their real pace");
        assert_eq!(
            users(50.0, 480.0),
            "the request rate of about 24,000 people, with the data of 50 (office time compressed 480x)"
        );
        assert_eq!(pace(1.0), "at real time");
        assert_eq!(pace(2.5), "office time compressed 2.5x");
    }

    #[test]
    fn figures_get_units_and_separators() {
        assert_eq!(number(1005.05), "1,005");
        assert_eq!(number(1_234_567.0), "1,234,567");
        assert_eq!(number(9.54), "9.5");
        assert_eq!(number(3.0), "3");
        assert_eq!(duration(Duration::from_millis(200)), "200 ms");
        assert_eq!(duration(Duration::from_micros(2_160_000)), "2.16 s");
        assert_eq!(duration(Duration::from_micros(2_160)), "2.16 ms");
        assert_eq!(duration(Duration::from_micros(45_300)), "45.3 ms");
        assert_eq!(duration(Duration::from_nanos(850_000)), "850 us");
        assert_eq!(percent(0.628), "63%");
        assert_eq!(percent(0.005), "0.5%");
    }

    #[test]
    fn the_issue_s_example_reads_as_sentences() {
        let reasons = [
            Reason::SendRateShort {
                send_rate_rps: 1005.0507,
                required_rps: 1584.0,
            },
            Reason::P99OverSlo {
                worst_p99: Duration::from_millis(2160),
                window_index: 4,
                slo: Duration::from_millis(200),
            },
            Reason::InFlightRising(Trend {
                slope_per_s: 85.2,
                t_stat: f64::INFINITY,
                t_critical: 1.9,
                rise_requests: 511.0,
                mean_in_flight: 260.0,
                rising: true,
            }),
        ];
        assert_eq!(
            sentences(&reasons),
            "sent 1,005 req/s of the 1,600 offered (63%; 99% needed); \
             p99 2.16 s in second 5 exceeds the 200 ms SLO; \
             in-flight requests rose by 85.2/s (511 over the step, 260 on average)"
        );
        let errors = Reason::TooManyErrors {
            error_share: 0.034,
            allowed_share: 0.01,
        };
        assert_eq!(
            sentence(&errors),
            "3.4% of requests failed, more than the 1% allowed"
        );
        assert_eq!(
            sentence(&Reason::TooFewWindows {
                windows: 1,
                required: 5
            }),
            "too short to judge: 1 whole second measured, 5 needed"
        );
    }
}

#[cfg(test)]
mod stored {
    use crate::sustain::Reason;

    #[test]
    fn a_stored_infinite_t_reads_back() {
        // serde_json writes t = inf as null (the issue's `t_stat=null`).
        let v = serde_json::json!({"reason": "in_flight_rising", "slope_per_s": 85.0,
            "t_stat": null, "t_critical": 1.94, "rise_requests": 500.0,
            "mean_in_flight": 200.0, "rising": true});
        let r: Reason = serde_json::from_value(v).unwrap();
        let Reason::InFlightRising(t) = r else {
            panic!("{r:?}")
        };
        assert!(t.t_stat.is_infinite());
    }
}
