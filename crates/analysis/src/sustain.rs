//! The sustainability rule for one rate step, and the bound label.
//!
//! Place in the flow: the recorder reduces a step to a [`StepStats`]; this module turns it
//! into a [`Verdict`] that the knee search ([`crate::knee`]) and the reports consume.
//!
//! A step at offered rate L is *sustainable* (docs/methodology.md, "Sustainability of a rate step") when all hold:
//! - the generator sent at least 99% of L (otherwise we did not test L at all);
//! - replies came back at at least 99% of L (the server kept up);
//! - the error share is within the allowed share;
//! - the windowed p99 is within the SLO. "Windowed" here means: the p99 of *every*
//!   window (normally one second, after warm-up) must be within the SLO, i.e. the test is
//!   on the worst window, not on the step-wide p99. A step-wide p99 can hide a queue that
//!   built up only in the last seconds; the worst window cannot;
//! - the in-flight count shows no upward trend (see [`trend`] for the exact test).
//!
//! Past capacity an open-loop generator keeps sending at L while the server completes
//! X < L per second, so in-flight grows by roughly L - X every second. That linear rise is
//! the earliest symptom of overload, often visible before the p99 breaks the SLO.
//!
//! The bound label ([`bound_label`]) judges the generator by what is its own: its
//! *scheduler lag* (dispatched - intended) and the rate at which it *dispatched*
//! arrivals. Connection wait (sent - dispatched: every connection held by the server, or
//! the pool cap reached) is the server's doing and never makes a step generator-bound;
//! it still counts against sustainability through the send rate (a step whose requests
//! could not be *sent* at 99% of L is not sustainable: the server did not free
//! connections fast enough), and [`conn_wait_note`] reports it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The share of the offered rate that the send and reply rates must reach (99%).
pub const RATE_TOLERANCE_SHARE: f64 = 0.01;

/// What a rate step measured, reduced to the figures the rule needs. Rates are over the
/// measured part of the step (warm-up excluded); series have one entry per window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepStats {
    /// The offered rate L the schedule asked for, requests per second.
    pub offered_rate_rps: f64,
    /// Requests actually sent per second.
    pub send_rate_rps: f64,
    /// Complete responses received per second (any status; errors are judged apart).
    pub reply_rate_rps: f64,
    /// Failed requests (any error kind, including censored in-flight ones) over requests
    /// sent, in 0..=1.
    pub error_share: f64,
    /// p99 response time (measured from the intended send time) of each window.
    pub p99_per_window: Vec<Duration>,
    /// Requests in flight in each window (a mean over the window or a sample at its end;
    /// the same choice for every window).
    pub in_flight_per_window: Vec<f64>,
    /// Length of one window (normally one second).
    pub window: Duration,
    /// p99 of the generator's send lag (sent - intended) over the step; `None` when the
    /// generator did not measure it (closed loop). Judged only for records made before
    /// send lag was split (no `sched_lag_p99`).
    pub send_lag_p99: Option<Duration>,
    /// p99 of scheduler lag (dispatched - intended: the generator's own lateness), the
    /// figure the bound label judges; `None` in records made before the split.
    #[serde(default)]
    pub sched_lag_p99: Option<Duration>,
    /// p99 of connection wait (sent - dispatched: waiting for a free connection or
    /// stream). Reported, never judged against the generator.
    #[serde(default)]
    pub conn_wait_p99: Option<Duration>,
    /// Arrivals dispatched per second (the rate the generator kept); `None` in records
    /// made before the split, where the send rate stands in.
    #[serde(default)]
    pub dispatch_rate_rps: Option<f64>,
    /// Arrivals that found the connection cap reached.
    #[serde(default)]
    pub cap_hits: u64,
    /// The open loop's connection cap was hit: every connection was waiting on the
    /// server, so arrivals waited for one (HTTP/1.1 has one request per connection).
    /// See [`judge`] for what it changes.
    #[serde(default)]
    pub pool_saturated: bool,
}

/// The thresholds a step is judged against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    /// The largest acceptable error share, in 0..=1.
    pub allowed_error_share: f64,
    /// The response-time SLO every window's p99 must meet.
    pub p99_slo: Duration,
    /// The trend test's thresholds.
    pub trend: TrendRule,
    /// Fewer windows than this and the step cannot be judged (it is then unsustainable:
    /// we never claim a rate is sustainable without evidence). At least 3, because the
    /// trend test needs one degree of freedom beyond the fitted line.
    pub min_windows: usize,
}

impl Rule {
    /// A rule with the given error share and SLO and the default trend thresholds.
    pub fn new(allowed_error_share: f64, p99_slo: Duration) -> Self {
        Rule {
            allowed_error_share,
            p99_slo,
            trend: TrendRule::default(),
            min_windows: 5,
        }
    }
}

/// Thresholds of the in-flight trend test; see [`trend`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TrendRule {
    /// The rise over the whole step predicted by the fitted slope must exceed this share
    /// of the mean in-flight count (default 0.10)...
    pub min_rise_share: f64,
    /// ...and this absolute number of requests (default 2.0), so that a queue wobbling
    /// between 0 and 1 request never counts as a trend.
    pub min_rise_requests: f64,
}

impl Default for TrendRule {
    fn default() -> Self {
        TrendRule {
            min_rise_share: 0.10,
            min_rise_requests: 2.0,
        }
    }
}

/// Why a step is not sustainable. An empty list means it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Reason {
    /// The step was too short (or the series were empty) to be judged.
    TooFewWindows {
        /// Windows available (the shorter of the two series).
        windows: usize,
        /// Windows the rule requires.
        required: usize,
    },
    /// The inputs held a negative, NaN or infinite figure.
    InvalidFigures,
    /// The generator sent less than 99% of the offered rate.
    SendRateShort {
        /// Achieved send rate.
        send_rate_rps: f64,
        /// 99% of the offered rate.
        required_rps: f64,
    },
    /// Replies came back at less than 99% of the offered rate.
    ReplyRateShort {
        /// Achieved reply rate.
        reply_rate_rps: f64,
        /// 99% of the offered rate.
        required_rps: f64,
    },
    /// More errors than the rule allows.
    TooManyErrors {
        /// Observed error share.
        error_share: f64,
        /// Allowed error share.
        allowed_share: f64,
    },
    /// At least one window's p99 exceeded the SLO.
    P99OverSlo {
        /// The worst window's p99.
        worst_p99: Duration,
        /// Index of that window.
        window_index: usize,
        /// The SLO.
        slo: Duration,
    },
    /// In-flight requests kept rising through the step.
    InFlightRising(Trend),
}

/// Which side limited the step: the figures are the server's only when `ServerBound`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// The generator delivered the offered load on time: the figures describe the server.
    ServerBound,
    /// The generator fell behind its own schedule: the figures describe the generator and
    /// must never be presented as the server's.
    GeneratorBound,
    /// The figures do not allow a decision (see [`bound_label`]).
    Inconclusive,
}

impl Bound {
    /// The label stored with a step (`server-bound`, `generator-bound`, `inconclusive`).
    pub fn label(self) -> &'static str {
        match self {
            Bound::ServerBound => "server-bound",
            Bound::GeneratorBound => "generator-bound",
            Bound::Inconclusive => "inconclusive",
        }
    }
}

/// The one rule every consumer of stored steps applies (the study's end-of-run table and
/// the reports alike): a step labelled generator-bound measured the generator, so it never
/// feeds a capacity, a median, a confidence interval or a USL fit. Steps without a label
/// (old stores) and inconclusive steps are kept; the label says what to make of them.
pub fn counts_for_server(label: Option<&str>) -> bool {
    label != Some(Bound::GeneratorBound.label())
}

/// The judgement of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// True when no reason was found against the step.
    pub sustainable: bool,
    /// Every failed criterion, in the order of the rule.
    pub reasons: Vec<Reason>,
    /// Which side limited the step.
    pub bound: Bound,
    /// The in-flight trend fit, when there were enough windows to compute it.
    pub trend: Option<Trend>,
}

/// Judges one step against the rule.
pub fn judge(stats: &StepStats, rule: &Rule) -> Verdict {
    let mut reasons = Vec::new();
    let figures_ok = [
        stats.offered_rate_rps,
        stats.send_rate_rps,
        stats.reply_rate_rps,
        stats.error_share,
    ]
    .iter()
    .chain(stats.in_flight_per_window.iter())
    .all(|v| v.is_finite() && *v >= 0.0)
        && stats.offered_rate_rps > 0.0
        && !stats.window.is_zero();
    if !figures_ok {
        reasons.push(Reason::InvalidFigures);
    }
    let windows = stats
        .p99_per_window
        .len()
        .min(stats.in_flight_per_window.len());
    let required = rule.min_windows.max(3);
    if windows < required {
        reasons.push(Reason::TooFewWindows { windows, required });
    }

    let required_rps = stats.offered_rate_rps * (1.0 - RATE_TOLERANCE_SHARE);
    if stats.send_rate_rps < required_rps {
        reasons.push(Reason::SendRateShort {
            send_rate_rps: stats.send_rate_rps,
            required_rps,
        });
    }
    if stats.reply_rate_rps < required_rps {
        reasons.push(Reason::ReplyRateShort {
            reply_rate_rps: stats.reply_rate_rps,
            required_rps,
        });
    }
    if stats.error_share > rule.allowed_error_share {
        reasons.push(Reason::TooManyErrors {
            error_share: stats.error_share,
            allowed_share: rule.allowed_error_share,
        });
    }
    if let Some((window_index, worst)) = stats
        .p99_per_window
        .iter()
        .enumerate()
        .max_by_key(|(_, p99)| **p99)
    {
        if *worst > rule.p99_slo {
            reasons.push(Reason::P99OverSlo {
                worst_p99: *worst,
                window_index,
                slo: rule.p99_slo,
            });
        }
    }
    let fitted = if figures_ok {
        trend(&stats.in_flight_per_window, stats.window, &rule.trend)
    } else {
        None
    };
    if let Some(t) = fitted {
        if t.rising {
            reasons.push(Reason::InFlightRising(t));
        }
    }
    let sustainable = reasons.is_empty();
    // Past the knee the server holds every connection of the pool, arrivals wait for
    // one, and the send lag and send rate then look like a slow generator. When the
    // pool was saturated and the step failed on the server's own figures (replies,
    // errors, p99, in-flight), the lateness was the server's backlog: server-bound.
    // Labelling it generator-bound would make every overloaded step "not the server's"
    // and a capacity search could never find the edge.
    let server_failed = reasons.iter().any(|r| {
        matches!(
            r,
            Reason::ReplyRateShort { .. }
                | Reason::TooManyErrors { .. }
                | Reason::P99OverSlo { .. }
                | Reason::InFlightRising(_)
        )
    });
    let bound = if stats.pool_saturated && server_failed {
        Bound::ServerBound
    } else {
        bound_label(stats, sustainable)
    };
    Verdict {
        sustainable,
        bound,
        reasons,
        trend: fitted,
    }
}

/// The send-lag p99 above which a step is generator-bound: max(1 ms, 1% of the mean
/// inter-arrival interval 1/L). Below 1 ms the lag is scheduler noise, not overload.
pub fn send_lag_limit(offered_rate_rps: f64) -> Duration {
    let floor = Duration::from_millis(1);
    if !(offered_rate_rps.is_finite() && offered_rate_rps > 0.0) {
        return floor;
    }
    floor.max(Duration::from_secs_f64(0.01 / offered_rate_rps))
}

/// Labels a step server-bound, generator-bound or inconclusive (docs/methodology.md, "The
/// generator checks itself"):
/// - `GeneratorBound` when the dispatch rate fell more than 1% short of L, or the
///   scheduler-lag p99 exceeded [`send_lag_limit`] (the generator's own lateness;
///   connection wait is not counted, see the module docs);
/// - `Inconclusive` when the figures needed are missing or invalid (no lag
///   measurement, non-positive or non-finite rates), or when the step failed while the
///   scheduler lag was in the grey zone (above half the limit): the generator was then
///   close enough to its own limit that we cannot say which side caused the failure;
/// - `ServerBound` otherwise: the generator kept its schedule, so whatever the step shows,
///   success or failure, is the server's doing.
///
/// Records made before the split (no `sched_lag_p99`, no `dispatch_rate_rps`) are
/// judged on send lag and send rate, as they were then.
pub fn bound_label(stats: &StepStats, sustainable: bool) -> Bound {
    let l = stats.offered_rate_rps;
    let rate = stats.dispatch_rate_rps.unwrap_or(stats.send_rate_rps);
    if !(l.is_finite() && l > 0.0 && rate.is_finite()) {
        return Bound::Inconclusive;
    }
    if rate < l * (1.0 - RATE_TOLERANCE_SHARE) {
        return Bound::GeneratorBound;
    }
    let Some(lag) = stats.sched_lag_p99.or(stats.send_lag_p99) else {
        return Bound::Inconclusive;
    };
    let limit = send_lag_limit(l);
    if lag > limit {
        Bound::GeneratorBound
    } else if !sustainable && lag > limit / 2 {
        Bound::Inconclusive
    } else {
        Bound::ServerBound
    }
}

/// A sentence for the step's notes when its connection-wait p99 exceeded
/// [`send_lag_limit`]: arrivals waited for connections the server held (with the cap
/// hits), which is why the step is not labelled generator-bound although its send lag
/// is large. `None` when the wait was small or not measured.
pub fn conn_wait_note(stats: &StepStats) -> Option<String> {
    let wait = stats.conn_wait_p99?;
    let limit = send_lag_limit(stats.offered_rate_rps);
    if wait <= limit {
        return None;
    }
    let caps = if stats.cap_hits > 0 {
        format!("; the connection cap was hit {} time(s)", stats.cap_hits)
    } else {
        String::new()
    };
    Some(format!(
        "connection wait p99 {:.3} ms > {:.3} ms: arrivals waited for a free connection because the server held them{caps}; this is the server's doing, not the generator's (scheduler-lag p99 {})",
        wait.as_secs_f64() * 1e3,
        limit.as_secs_f64() * 1e3,
        stats
            .sched_lag_p99
            .map_or("not measured".to_string(), |d| format!("{:.3} ms", d.as_secs_f64() * 1e3)),
    ))
}

/// A least-squares line through the in-flight series, and whether it counts as a rise.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Trend {
    /// Fitted slope, requests per second.
    pub slope_per_s: f64,
    /// Slope over its standard error (infinite for a perfect line with a non-zero slope).
    #[serde(deserialize_with = "crate::nonfinite::null_is_infinite")]
    pub t_stat: f64,
    /// One-sided 95% critical value of Student's t for n - 2 degrees of freedom.
    #[serde(deserialize_with = "crate::nonfinite::null_is_infinite")]
    pub t_critical: f64,
    /// Slope times the step's length: the rise the line predicts over the step.
    pub rise_requests: f64,
    /// Mean in-flight count over the step.
    pub mean_in_flight: f64,
    /// True when the rise is both significant and large enough (see [`trend`]).
    pub rising: bool,
}

/// Fits in-flight = a + b t by least squares (t in seconds, one point per window) and
/// calls it a rise when BOTH:
/// - the slope is significantly positive: t = b / se(b) above the one-sided 95% critical
///   value of Student's t with n - 2 degrees of freedom; and
/// - the predicted rise over the step, b x duration, exceeds
///   max(`min_rise_share` x mean in-flight, `min_rise_requests`).
///
/// Why both: a significance test alone flags drifts that are real but harmless in long,
/// quiet steps (10.0 -> 10.3 requests over 60 s), and a size threshold alone flags noise in
/// short, jittery steps. An overloaded open-loop step passes both by a wide margin (its
/// queue grows by L - X requests every second). `None` with fewer than 3 points.
pub fn trend(in_flight: &[f64], window: Duration, rule: &TrendRule) -> Option<Trend> {
    let n = in_flight.len();
    let dt_s = window.as_secs_f64();
    if n < 3 || dt_s <= 0.0 || in_flight.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let nf = n as f64;
    let t_of = |i: usize| i as f64 * dt_s;
    let t_mean = (0..n).map(t_of).sum::<f64>() / nf;
    let y_mean = in_flight.iter().sum::<f64>() / nf;
    let sxx: f64 = (0..n).map(|i| (t_of(i) - t_mean).powi(2)).sum();
    let sxy: f64 = in_flight
        .iter()
        .enumerate()
        .map(|(i, y)| (t_of(i) - t_mean) * (y - y_mean))
        .sum();
    let slope = sxy / sxx;
    let intercept = y_mean - slope * t_mean;
    let sse: f64 = in_flight
        .iter()
        .enumerate()
        .map(|(i, y)| (y - intercept - slope * t_of(i)).powi(2))
        .sum();
    let se = (sse / (nf - 2.0) / sxx).sqrt();
    let t_stat = if se > 0.0 {
        slope / se
    } else if slope > 0.0 {
        f64::INFINITY
    } else if slope < 0.0 {
        f64::NEG_INFINITY
    } else {
        0.0
    };
    let t_critical = t_one_sided_95(n - 2);
    let rise = slope * nf * dt_s;
    let needed = (rule.min_rise_share * y_mean).max(rule.min_rise_requests);
    Some(Trend {
        slope_per_s: slope,
        t_stat,
        t_critical,
        rise_requests: rise,
        mean_in_flight: y_mean,
        rising: t_stat > t_critical && rise > needed,
    })
}

/// One-sided 95% quantile of Student's t with `df` degrees of freedom: exact table values
/// up to 30, then the Cornish-Fisher expansion around the normal quantile (error < 1e-3).
fn t_one_sided_95(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771,
        1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706,
        1.703, 1.701, 1.699, 1.697,
    ];
    if df == 0 {
        return f64::INFINITY;
    }
    if df <= TABLE.len() {
        return TABLE[df - 1];
    }
    let z = 1.644_853_6_f64;
    let d = df as f64;
    z + (z.powi(3) + z) / (4.0 * d)
        + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * d * d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_bound_steps_never_count_for_the_server() {
        assert!(!counts_for_server(Some(Bound::GeneratorBound.label())));
        assert!(counts_for_server(Some(Bound::ServerBound.label())));
        assert!(counts_for_server(Some(Bound::Inconclusive.label())));
        assert!(counts_for_server(None));
        assert_eq!(Bound::GeneratorBound.label(), "generator-bound");
    }

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// A healthy step at 1000 rps: everything on target, flat in-flight around 5.
    fn healthy() -> StepStats {
        StepStats {
            offered_rate_rps: 1000.0,
            send_rate_rps: 999.8,
            reply_rate_rps: 999.5,
            error_share: 0.0,
            p99_per_window: vec![ms(3); 10],
            in_flight_per_window: vec![5.0, 6.0, 4.0, 5.0, 5.0, 6.0, 4.0, 5.0, 6.0, 5.0],
            window: Duration::from_secs(1),
            send_lag_p99: Some(Duration::from_micros(200)),
            sched_lag_p99: Some(Duration::from_micros(150)),
            conn_wait_p99: Some(Duration::from_micros(50)),
            dispatch_rate_rps: Some(999.9),
            cap_hits: 0,
            pool_saturated: false,
        }
    }

    /// The same step as a record made before send lag was split.
    fn legacy(s: StepStats) -> StepStats {
        StepStats {
            sched_lag_p99: None,
            conn_wait_p99: None,
            dispatch_rate_rps: None,
            ..s
        }
    }

    #[test]
    fn a_stalling_server_that_holds_the_connections_is_not_a_slow_generator() {
        // A CPU-capped server stalls 90 ms in every 100: every connection is held,
        // arrivals queue, requests go out late and below the rate (send rate short,
        // send lag 90 ms), while the generator dispatched every arrival on time.
        let stalled = StepStats {
            send_rate_rps: 940.0,
            reply_rate_rps: 930.0,
            send_lag_p99: Some(ms(90)),
            sched_lag_p99: Some(Duration::from_micros(120)),
            conn_wait_p99: Some(ms(90)),
            dispatch_rate_rps: Some(999.9),
            cap_hits: 40,
            pool_saturated: true,
            p99_per_window: vec![ms(120); 10],
            ..healthy()
        };
        let v = judge(&stalled, &rule());
        assert!(!v.sustainable, "sent below 99% of L: not sustainable");
        assert!(v
            .reasons
            .iter()
            .any(|r| matches!(r, Reason::SendRateShort { .. })));
        assert_eq!(v.bound, Bound::ServerBound);
        // Even without a cap hit and with nothing else against the server.
        let quiet = StepStats {
            pool_saturated: false,
            cap_hits: 0,
            ..stalled.clone()
        };
        assert_eq!(bound_label(&quiet, true), Bound::ServerBound);
        let note = conn_wait_note(&stalled).unwrap();
        assert!(note.contains("connection wait p99 90.000 ms"), "{note}");
        assert!(note.contains("cap was hit 40 time(s)"), "{note}");
        assert_eq!(conn_wait_note(&healthy()), None);
        // Judged as before the split, the same step looked like a slow generator.
        assert_eq!(bound_label(&legacy(quiet), true), Bound::GeneratorBound);
    }

    #[test]
    fn the_generators_own_lateness_or_shortfall_is_generator_bound() {
        // Large scheduler lag: the event loop woke late.
        let late = StepStats {
            sched_lag_p99: Some(ms(4)),
            send_lag_p99: Some(ms(4)),
            ..healthy()
        };
        assert_eq!(judge(&late, &rule()).bound, Bound::GeneratorBound);
        // Dispatched more than 1% short of the schedule.
        let short = StepStats {
            dispatch_rate_rps: Some(980.0),
            ..healthy()
        };
        assert_eq!(judge(&short, &rule()).bound, Bound::GeneratorBound);
        // Exactly 1% short is still on schedule.
        let edge = StepStats {
            dispatch_rate_rps: Some(990.0),
            ..healthy()
        };
        assert_eq!(judge(&edge, &rule()).bound, Bound::ServerBound);
    }

    #[test]
    fn an_overload_that_saturates_the_pool_is_the_servers() {
        // 4000 offered to a 3000 req/s server: the pool fills, arrivals wait for a
        // connection, so the send rate falls short and the send lag soars.
        let over = StepStats {
            offered_rate_rps: 4000.0,
            send_rate_rps: 3100.0,
            reply_rate_rps: 3000.0,
            send_lag_p99: Some(ms(400)),
            p99_per_window: vec![ms(300); 10],
            in_flight_per_window: (0..10).map(|i| 50.0 * i as f64).collect(),
            pool_saturated: true,
            ..healthy()
        };
        let v = judge(&over, &rule());
        assert!(!v.sustainable);
        assert_eq!(v.bound, Bound::ServerBound);
        // The same lateness without a saturated pool is the generator's.
        let slow_generator = StepStats {
            pool_saturated: false,
            sched_lag_p99: Some(ms(400)),
            dispatch_rate_rps: Some(3100.0),
            ..over.clone()
        };
        assert_eq!(judge(&slow_generator, &rule()).bound, Bound::GeneratorBound);
        // A saturated pool with nothing against the server: the lag decides as before.
        let passed = StepStats {
            pool_saturated: true,
            send_lag_p99: Some(ms(5)),
            sched_lag_p99: Some(ms(5)),
            ..healthy()
        };
        let v = judge(&passed, &rule());
        assert!(v.sustainable);
        assert_eq!(v.bound, Bound::GeneratorBound);
    }

    fn rule() -> Rule {
        Rule::new(0.001, ms(50))
    }

    #[test]
    fn healthy_step_is_sustainable_and_server_bound() {
        let v = judge(&healthy(), &rule());
        assert!(v.sustainable, "{v:?}");
        assert!(v.reasons.is_empty());
        assert_eq!(v.bound, Bound::ServerBound);
        assert!(!v.trend.unwrap().rising);
    }

    #[test]
    fn each_criterion_fails_on_its_own() {
        let mut s = healthy();
        s.reply_rate_rps = 985.0;
        let v = judge(&s, &rule());
        assert!(!v.sustainable);
        assert!(
            matches!(v.reasons[..], [Reason::ReplyRateShort { .. }]),
            "{v:?}"
        );
        assert_eq!(v.bound, Bound::ServerBound);

        let mut s = healthy();
        s.error_share = 0.01;
        assert!(matches!(
            judge(&s, &rule()).reasons[..],
            [Reason::TooManyErrors { .. }]
        ));

        let mut s = healthy();
        s.p99_per_window[7] = ms(80);
        let v = judge(&s, &rule());
        match &v.reasons[..] {
            [Reason::P99OverSlo {
                worst_p99,
                window_index,
                ..
            }] => {
                assert_eq!((*worst_p99, *window_index), (ms(80), 7));
            }
            other => panic!("unexpected reasons {other:?}"),
        }

        let mut s = healthy();
        s.send_rate_rps = 980.0;
        let v = judge(&s, &rule());
        assert!(
            matches!(v.reasons[..], [Reason::SendRateShort { .. }]),
            "{v:?}"
        );
        // Dispatched on time: the sends were held back by busy connections.
        assert_eq!(v.bound, Bound::ServerBound);
        // Dispatched short as well: the generator fell behind.
        s.dispatch_rate_rps = Some(980.0);
        assert_eq!(judge(&s, &rule()).bound, Bound::GeneratorBound);
    }

    #[test]
    fn exactly_99_percent_passes_and_just_below_fails() {
        let mut s = healthy();
        s.send_rate_rps = 990.0;
        s.reply_rate_rps = 990.0;
        assert!(judge(&s, &rule()).sustainable);
        s.reply_rate_rps = 989.9;
        assert!(!judge(&s, &rule()).sustainable);
    }

    #[test]
    fn overload_queue_growth_is_a_rising_trend() {
        // Past capacity: 1000 offered, 950 served -> the queue grows ~50 per second.
        let mut s = healthy();
        s.in_flight_per_window = (0..10)
            .map(|i| 5.0 + 50.0 * i as f64 + (i % 3) as f64)
            .collect();
        let v = judge(&s, &rule());
        assert!(!v.sustainable);
        match &v.reasons[..] {
            [Reason::InFlightRising(t)] => {
                assert!((t.slope_per_s - 50.0).abs() < 1.0, "{t:?}");
                assert!(t.t_stat > t.t_critical);
            }
            other => panic!("unexpected reasons {other:?}"),
        }
    }

    #[test]
    fn small_significant_drift_is_not_a_trend() {
        // A perfectly steady drift of 0.01 request/s over 10 s: significant, but 0.1 request.
        let series: Vec<f64> = (0..10).map(|i| 10.0 + 0.01 * i as f64).collect();
        let t = trend(&series, Duration::from_secs(1), &TrendRule::default()).unwrap();
        assert!(t.t_stat > t.t_critical);
        assert!(!t.rising);
    }

    #[test]
    fn large_noisy_wobble_without_slope_is_not_a_trend() {
        let series = [0.0, 40.0, 2.0, 38.0, 1.0, 41.0, 0.0, 39.0, 3.0, 37.0];
        let t = trend(&series, Duration::from_secs(1), &TrendRule::default()).unwrap();
        assert!(!t.rising, "{t:?}");
    }

    #[test]
    fn known_slope_and_t_statistic() {
        // y = 2 t exactly on t = 0, 1, 2, 3: slope 2, zero residual -> infinite t.
        let t = trend(
            &[0.0, 2.0, 4.0, 6.0],
            Duration::from_secs(1),
            &TrendRule::default(),
        )
        .unwrap();
        assert!((t.slope_per_s - 2.0).abs() < 1e-12);
        assert_eq!(t.t_stat, f64::INFINITY);
        assert!((t.rise_requests - 8.0).abs() < 1e-12);
        assert!(t.rising);
        // Half-second windows: the same series is a slope of 4 per second.
        let t = trend(&[0.0, 2.0, 4.0, 6.0], ms(500), &TrendRule::default()).unwrap();
        assert!((t.slope_per_s - 4.0).abs() < 1e-12);
        assert!(trend(&[1.0, 2.0], Duration::from_secs(1), &TrendRule::default()).is_none());
    }

    #[test]
    fn t_quantiles_match_the_table_and_expansion() {
        assert_eq!(t_one_sided_95(1), 6.314);
        assert_eq!(t_one_sided_95(30), 1.697);
        // Published values: df 40 -> 1.684, df 120 -> 1.658.
        assert!((t_one_sided_95(40) - 1.684).abs() < 2e-3);
        assert!((t_one_sided_95(120) - 1.658).abs() < 2e-3);
        assert!(t_one_sided_95(0).is_infinite());
    }

    #[test]
    fn short_or_invalid_steps_are_never_sustainable() {
        let mut s = healthy();
        s.p99_per_window.truncate(2);
        let v = judge(&s, &rule());
        assert!(
            matches!(
                v.reasons[..],
                [Reason::TooFewWindows {
                    windows: 2,
                    required: 5
                }]
            ),
            "{v:?}"
        );

        let mut s = healthy();
        s.reply_rate_rps = f64::NAN;
        let v = judge(&s, &rule());
        assert!(!v.sustainable);
        assert!(v.reasons.contains(&Reason::InvalidFigures));

        let mut s = healthy();
        s.offered_rate_rps = 0.0;
        assert!(!judge(&s, &rule()).sustainable);
        assert_eq!(judge(&s, &rule()).bound, Bound::Inconclusive);
    }

    #[test]
    fn send_lag_limit_is_max_of_1ms_and_1pct_of_interval() {
        assert_eq!(send_lag_limit(1000.0), ms(1)); // 1% of 1 ms = 10 us < 1 ms
        assert_eq!(send_lag_limit(5.0), ms(2)); // 1% of 200 ms
        assert_eq!(send_lag_limit(0.0), ms(1));
    }

    #[test]
    fn bound_labels() {
        let mut s = legacy(healthy());
        s.send_lag_p99 = Some(ms(3));
        assert_eq!(bound_label(&s, true), Bound::GeneratorBound);
        s.send_lag_p99 = Some(Duration::from_micros(700)); // grey zone: above half of 1 ms
        assert_eq!(bound_label(&s, true), Bound::ServerBound);
        assert_eq!(bound_label(&s, false), Bound::Inconclusive);
        s.send_lag_p99 = None;
        assert_eq!(bound_label(&s, true), Bound::Inconclusive);
        s.send_lag_p99 = Some(Duration::from_micros(100));
        assert_eq!(bound_label(&s, false), Bound::ServerBound);
    }

    #[test]
    fn verdict_round_trips_through_json() {
        let mut s = healthy();
        s.error_share = 0.5;
        let v = judge(&s, &rule());
        let json = serde_json::to_string(&v).unwrap();
        assert!(json.contains("\"reason\":\"too_many_errors\""), "{json}");
        let back: Verdict = serde_json::from_str(&json).unwrap();
        // serde_json parses floats to within one ulp, so compare the exact parts exactly.
        assert_eq!(
            (back.sustainable, &back.reasons, back.bound),
            (v.sustainable, &v.reasons, v.bound)
        );
        let (tb, tv) = (back.trend.unwrap(), v.trend.unwrap());
        assert!((tb.rise_requests - tv.rise_requests).abs() < 1e-12);
    }
}
