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
    /// Seconds the per-second rule labelled generator-bound (volley-metrics' label);
    /// `None` in records made before the stall probe.
    #[serde(default)]
    pub generator_bound_seconds: Option<u64>,
    /// Seconds labelled machine-stalled: late, and the stall probe beside the load was
    /// held as long (volley-metrics' label). See [`bound_label`] for what it changes.
    #[serde(default)]
    pub machine_stalled_seconds: Option<u64>,
    /// SYNs the listener dropped over the step because its accept queue was full
    /// (`TcpExt` `ListenOverflows` of the namespace the target listens in); `None` when
    /// not read (a target outside volley's namespaces, records made before).
    #[serde(default)]
    pub listen_overflows: Option<u64>,
    /// Most sockets towards the target at once (any state, TIME_WAIT included) and the
    /// ports in `ip_local_port_range`: every port taken means connects found none free
    /// (EADDRNOTAVAIL). `None` when not counted.
    #[serde(default)]
    pub ports_used_of_range: Option<(u64, u64)>,
    /// Connections the generator opened over the step, the measure of how much the
    /// listener's overflows refused ([`connect_cause`]); `None` when not counted.
    #[serde(default)]
    pub connections_opened: Option<u64>,
    /// Connects that failed at once because no local port was free (EADDRNOTAVAIL),
    /// counted by the generator; `None` when not counted (records made before).
    #[serde(default)]
    pub connects_without_port: Option<u64>,
    /// Sockets towards the target in TIME_WAIT at the step's end (each holds a port);
    /// `None` when not counted.
    #[serde(default)]
    pub time_wait: Option<u64>,
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

/// Which side limited the step (or a second of it, `volley_metrics::label`): the figures
/// are the server's only when `ServerBound`.
///
/// Serialised as its label (`server-bound`, ...), the form the stored summaries and the
/// text reports use. Stores written before the step verdict and the per-second labels
/// shared this type hold the step verdict's `bound` in snake case (`server_bound`): the
/// aliases keep reading them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bound {
    /// The generator delivered the offered load on time: the figures describe the server.
    #[serde(alias = "server_bound")]
    ServerBound,
    /// The generator fell behind its own schedule: the figures describe the generator and
    /// must never be presented as the server's.
    #[serde(alias = "generator_bound")]
    GeneratorBound,
    /// The figures do not allow a decision (see [`bound_label`]).
    Inconclusive,
    /// The generator fell behind, but only in seconds where the stall probe beside it
    /// was held up as long: the machine stalled (neither the generator nor the server).
    /// Like generator-bound, the figures are not the server's.
    #[serde(alias = "machine_stalled")]
    MachineStalled,
}

impl Bound {
    /// The label stored with a step (`server-bound`, `generator-bound`, `inconclusive`,
    /// `machine-stalled`).
    pub fn label(self) -> &'static str {
        match self {
            Bound::ServerBound => "server-bound",
            Bound::GeneratorBound => "generator-bound",
            Bound::Inconclusive => "inconclusive",
            Bound::MachineStalled => "machine-stalled",
        }
    }
}

/// The label stored with a step whose load was cut short by its injectors, not by the
/// server: every injector was lost before it sent its run's record, so the step holds
/// only the seconds that reached the coordinator. Kept, never judged.
pub const INCOMPLETE: &str = "incomplete";

/// The label stored with a step under a CPU cap volley set that measured too little
/// time for the cap to hold (the study's `step::evidence`, ten periods of the quota):
/// the kernel counts a quota per period, so its figure is a burst at full speed, not
/// the capped server's. Kept, never judged, and not measured again: the same plan is
/// as short the next time.
pub const TOO_SHORT: &str = "too-short";

/// The one rule every consumer of stored steps applies (the study's end-of-run table and
/// the reports alike): a step labelled generator-bound measured the generator, one
/// labelled machine-stalled measured the machine's stalls, one labelled link-bound
/// (`crate::link`) the link volley shaped, one labelled too-short ([`TOO_SHORT`]) a
/// burst its CPU cap never held, and one labelled incomplete ([`INCOMPLETE`]) lost its
/// injectors, so none ever feeds a capacity, a median, a confidence interval, a
/// ranking or a USL fit. Steps without a label (old stores) and inconclusive steps are
/// kept; the label says what to make of them.
pub fn counts_for_server(label: Option<&str>) -> bool {
    not_the_servers(label).is_none()
}

/// The label of a step whose figures are not the server's (generator-bound,
/// machine-stalled, link-bound, too-short, incomplete), as the one static string a report marks
/// its row with; `None` for a step that counts for the server.
pub fn not_the_servers(label: Option<&str>) -> Option<&'static str> {
    [
        Bound::GeneratorBound.label(),
        Bound::MachineStalled.label(),
        crate::link::LABEL,
        TOO_SHORT,
        INCOMPLETE,
    ]
    .into_iter()
    .find(|k| label == Some(*k))
}

/// Whether measuring the step again could give the server's figure: generator-bound,
/// machine-stalled and incomplete steps (lost injectors, a fault) were spoiled by noise,
/// a link-bound or too-short one was not ([`bound_again`]).
pub fn spoiled_by_noise(label: Option<&str>) -> bool {
    !counts_for_server(label) && !bound_again(label)
}

/// Whether a step is not the server's for a reason another attempt would meet again:
/// link-bound (the same link bounds it the next time too) or too-short (the same plan
/// is as short). Such a step is never measured again, nor rerun by a search.
pub fn bound_again(label: Option<&str>) -> bool {
    label == Some(crate::link::LABEL) || label == Some(TOO_SHORT)
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

/// Share of the CPU the server could use above which its CPU is evidence that it bound
/// the step (80%).
pub const SERVER_CPU_SHARE: f64 = 0.8;

/// What the server's side showed during a step, for [`server_evidence`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerSide {
    /// The step failed on the server's own figures (replies short, errors, p99 over
    /// the SLO, in-flight rising): its queue grew.
    pub failed_on_server: bool,
    /// The server's CPU over the step, percent of one CPU; `None` when not measured.
    pub cpu_pct: Option<f64>,
    /// The CPUs the server could use, in cores: its quota or pinned cores, else the
    /// machine's CPUs less what the generator used beside it (the caller floors that
    /// one at half a core; a quota is taken as it is, however small: a server at its
    /// 25% cap used all it could).
    pub available_cores: f64,
}

/// What the server's side says of a step the generator rule calls server-bound, each
/// outcome with its reason in words.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerEvidence {
    /// The server bound the step: why (its queue grew, or its CPU neared what it could use).
    Shown(String),
    /// Nothing shows the server was the limit: why the step is inconclusive instead.
    Inconclusive(String),
}

/// Why a step the generator rule calls server-bound really is (docs/methodology.md,
/// "The generator checks itself"): the server's side must show it, by its queue growing
/// (the step failed on the server's own figures) or by its CPU at
/// [`SERVER_CPU_SHARE`] of what it could use. [`ServerEvidence::Inconclusive`] gives why the
/// step is inconclusive instead: the generator kept up, and nothing shows that the server
/// was the limit (the offered rate, a round trip or a think time may have been).
pub fn server_evidence(side: &ServerSide) -> ServerEvidence {
    if side.failed_on_server {
        return ServerEvidence::Shown("the step failed on the server's own figures".to_string());
    }
    let avail = side.available_cores;
    match side.cpu_pct {
        Some(pct) if pct / 100.0 >= SERVER_CPU_SHARE * avail => ServerEvidence::Shown(format!(
            "the server used {pct:.1}% of a CPU, at least {:.0}% of the {avail:.2} core(s) it could use",
            SERVER_CPU_SHARE * 100.0
        )),
        Some(pct) => ServerEvidence::Inconclusive(format!(
            "inconclusive: the generator kept up, and the server used {pct:.1}% of a CPU, under {:.0}% of the {avail:.2} core(s) it could use, and its queue did not grow: nothing shows the server was the limit",
            SERVER_CPU_SHARE * 100.0
        )),
        None => ServerEvidence::Inconclusive("inconclusive: the generator kept up, but the server's CPU was not measured and its queue did not grow: nothing shows the server was the limit".to_string()),
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
/// A step the rule calls `GeneratorBound` is `MachineStalled` instead when its seconds
/// say the lateness was the machine's: no second was generator-bound and at least one
/// was machine-stalled (the same rule as a run's label in volley-metrics). One
/// generator-bound second keeps the step generator-bound.
///
/// The kernel's counters come first ([`connect_cause`]): a connect that found no free
/// port makes the step `GeneratorBound`; an accept queue that overflowed makes a late
/// step, or a failed one with its lag in the grey zone, `ServerBound`.
///
/// Records made before the split (no `sched_lag_p99`, no `dispatch_rate_rps`) are
/// judged on send lag and send rate, as they were then.
pub fn bound_label(stats: &StepStats, sustainable: bool) -> Bound {
    // Connects that found no free port never reached the server: whatever else the
    // step shows, its failures include the generator's machine's.
    if stats.connects_without_port.is_some_and(|n| n > 0) {
        return Bound::GeneratorBound;
    }
    let queue_full = connect_cause(stats) == Some(ConnectCause::AcceptQueueFull);
    match own_bound(stats, sustainable) {
        Bound::GeneratorBound if queue_full => Bound::ServerBound,
        // A failed step whose lag sat in the grey zone (a punctual pacer by the rule
        // otherwise): the kernel saw the listener drop SYNs, which answers the doubt.
        Bound::Inconclusive
            if queue_full && !sustainable && own_bound(stats, true) == Bound::ServerBound =>
        {
            Bound::ServerBound
        }
        Bound::GeneratorBound
            if stats.generator_bound_seconds == Some(0)
                && stats.machine_stalled_seconds.is_some_and(|n| n > 0) =>
        {
            Bound::MachineStalled
        }
        b => b,
    }
}

/// Why connections waited in connect, by the kernel's counters (docs/methodology.md,
/// "Connects that wait: whose failure").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectCause {
    /// The listener's accept queue overflowed and no connect lacked a port: SYNs were
    /// dropped and retransmitted (1 s, 3 s, ...), so connects, and the generator's
    /// workers in them, waited on the server. The server's failure.
    AcceptQueueFull,
    /// Every local port towards the target was taken (TIME_WAIT holds them), so connects
    /// found none free: the generator's, or the machine's, shortage, whatever the
    /// listener did.
    NoFreePort,
}

/// Share of the step's connections the listener must have refused (SYNs dropped) for its
/// full accept queue to be the cause: a few dropped SYNs beside a generator short of
/// CPU do not make the generator's lateness the server's (1%).
pub const OVERFLOW_SHARE: f64 = 0.01;

/// The cause the kernel's counters name for connect waits in a step, if any: no free
/// port first (a connect that failed with EADDRNOTAVAIL, or every port of the range
/// taken at the end: then the generator could not have offered the load whatever the
/// server did), else an accept queue that refused at least [`OVERFLOW_SHARE`] of the
/// step's connections (at least one). `None` when neither was counted.
pub fn connect_cause(stats: &StepStats) -> Option<ConnectCause> {
    if stats.connects_without_port.is_some_and(|n| n > 0) {
        return Some(ConnectCause::NoFreePort);
    }
    let (used, range) = stats.ports_used_of_range?;
    let floor = (stats.connections_opened.unwrap_or(0) as f64 * OVERFLOW_SHARE).max(1.0);
    if used >= range {
        Some(ConnectCause::NoFreePort)
    } else if stats.listen_overflows.is_some_and(|n| n as f64 >= floor) {
        Some(ConnectCause::AcceptQueueFull)
    } else {
        None
    }
}

/// A sentence for the step's notes naming [`connect_cause`] with its count.
pub fn connect_cause_note(stats: &StepStats) -> Option<String> {
    Some(match connect_cause(stats)? {
        ConnectCause::AcceptQueueFull => {
            let late = if own_bound(stats, true) == Bound::GeneratorBound {
                ", so the generator's lateness was the server's doing"
            } else {
                ""
            };
            format!(
                "the server's accept queue overflowed ({} SYN(s) dropped, TcpExt ListenOverflows): connects waited in SYN retransmits{late}",
                stats.listen_overflows.unwrap_or(0)
            )
        }
        ConnectCause::NoFreePort => no_free_port_note(
            stats.connects_without_port,
            stats.ports_used_of_range,
            stats.time_wait,
        ),
    })
}

/// The words for connects that found no free local port: `failed` connects that failed
/// with EADDRNOTAVAIL, and the sockets towards the target that held the range
/// (`(used, range)`, `time_wait` of them in TIME_WAIT). One wording for a study step and
/// a `volley bench` run alike.
pub fn no_free_port_note(
    failed: Option<u64>,
    ports_used_of_range: Option<(u64, u64)>,
    time_wait: Option<u64>,
) -> String {
    let failed = match failed {
        Some(n) if n > 0 => {
            format!("{n} connect(s) failed for want of a free local port (EADDRNOTAVAIL); ")
        }
        _ => String::new(),
    };
    let held = match (ports_used_of_range, time_wait) {
        (Some((used, range)), Some(tw)) => format!(
            "{used} sockets towards the target held ports of the {range} in the local range, {tw} of them in TIME_WAIT"
        ),
        (Some((used, range)), None) => format!(
            "{used} sockets towards the target held ports of the {range} in the local range (TIME_WAIT included)"
        ),
        _ => "the sockets towards the target were not counted".to_string(),
    };
    format!("{failed}{held}: the generator's machine ran out of ports, not the server")
}

/// The step's note for [`connect_cause`] when the cause decided its label or explains
/// its failure: a connect that found no free port; a step late by its own figures
/// (dispatch short or scheduler lag over the limit) whose connects waited behind the
/// accept queue or found the ports taken; or a step that was not `sustainable` while
/// the accept queue overflowed, whatever the pacer did (a server-bound step that failed
/// because the listener dropped SYNs says so, with the count). A step that kept its
/// schedule and its rate needs no such note.
pub fn connect_note(stats: &StepStats, sustainable: bool) -> Option<String> {
    let no_port = stats.connects_without_port.is_some_and(|n| n > 0);
    let queue = !sustainable && connect_cause(stats) == Some(ConnectCause::AcceptQueueFull);
    if no_port || queue || own_bound(stats, true) == Bound::GeneratorBound {
        connect_cause_note(stats)
    } else {
        None
    }
}

/// [`bound_label`] from the step's own figures, before its seconds are consulted.
fn own_bound(stats: &StepStats, sustainable: bool) -> Bound {
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
#[path = "sustain_tests.rs"]
mod tests;
