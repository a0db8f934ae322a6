//! A measured step reduced to what the study's end table needs, and the lines the
//! runner prints as each step ends.

use super::*;

/// One measured step, reduced to what the table needs.
#[derive(Debug, Clone, PartialEq)]
pub struct StepOutcome {
    /// Position in the schedule.
    pub order: usize,
    /// Index into the plan's cells.
    pub cell: usize,
    /// Repeat.
    pub repeat: u32,
    /// Offered rate (open loop).
    pub rate: Option<f64>,
    /// Completed requests per second.
    pub rps: f64,
    /// Successful requests per second.
    pub ok_rps: f64,
    /// p99 of the headline latency, ms.
    pub p99_ms: f64,
    /// Failed requests.
    pub errors: u64,
    /// Rate steps: the sustainability verdict.
    pub sustainable: Option<bool>,
    /// server-bound, generator-bound or inconclusive.
    pub label: &'static str,
    /// Cold-start steps: TTFB of the first request after the target started (validated
    /// answers only).
    pub cold_ttfb_ms: Option<f64>,
    /// Median TTFB of the step's measured (warm) requests.
    pub warm_ttfb_ms: Option<f64>,
    /// Office steps: p99 of the clients' poll sessions, the figure the users SLO judges.
    pub poll_p99_ms: Option<f64>,
    /// Office steps: the users the day played (a users search varies it per step).
    pub users: Option<u32>,
    /// Office steps of a warm day: what its lead-in cost before the window.
    pub lead_in: Option<crate::office_step::LeadInCost>,
    /// Which measurement of its planned step this is: 0 the first, 1.. the re-measures
    /// of a step noise spoiled (docs/methodology.md, "The generator checks itself").
    pub attempt: u32,
    /// Someone else took the CPU while it ran ([`machine_busy`]).
    pub machine_busy: bool,
}

impl StepOutcome {
    /// A closed-loop first attempt of cell 0 with no figures, for tests to fill in.
    #[cfg(test)]
    pub(crate) fn blank_for_tests() -> StepOutcome {
        StepOutcome {
            order: 0,
            cell: 0,
            repeat: 0,
            rate: None,
            rps: 0.0,
            ok_rps: 0.0,
            p99_ms: 0.0,
            errors: 0,
            sustainable: None,
            label: "server-bound",
            cold_ttfb_ms: None,
            warm_ttfb_ms: None,
            poll_p99_ms: None,
            users: None,
            lead_in: None,
            attempt: 0,
            machine_busy: false,
        }
    }

    /// The outcome of step `order` (cell `cell`, repeat `repeat`) from its summary. The
    /// headline p99 is response time for a rate step, service time otherwise; requests
    /// still in flight when the step ended are censored, not failures.
    pub(crate) fn of(
        order: usize,
        cell: usize,
        repeat: u32,
        rate: Option<f64>,
        s: &Summary,
        sustainable: Option<bool>,
        label: &'static str,
    ) -> StepOutcome {
        let headline = if rate.is_some() {
            "response_time"
        } else {
            "service_time"
        };
        StepOutcome {
            order,
            cell,
            repeat,
            rate,
            rps: s.throughput.requests_per_s,
            ok_rps: s.throughput.ok_per_s,
            p99_ms: s.latency.get(headline).map_or(0.0, |l| l.p99_ms),
            errors: s.requests.failed.saturating_sub(s.requests.censored),
            sustainable,
            label,
            cold_ttfb_ms: None,
            warm_ttfb_ms: None,
            poll_p99_ms: None,
            users: None,
            lead_in: None,
            attempt: 0,
            machine_busy: machine_busy(s),
        }
    }

    /// With the cold request's TTFB (validated answers only) and the warm median TTFB.
    pub(crate) fn with_ttfb(
        mut self,
        cold_ttfb_ms: Option<f64>,
        warm_ttfb_ms: Option<f64>,
    ) -> Self {
        self.cold_ttfb_ms = cold_ttfb_ms;
        self.warm_ttfb_ms = warm_ttfb_ms;
        self
    }

    /// Most of its requests failed (or none finished): no throughput or latency figure.
    pub fn mostly_failed(&self) -> bool {
        self.rps.is_nan() || self.rps <= 0.0 || self.ok_rps * 2.0 < self.rps
    }

    /// Whether this step's figures may stand for the server (volley-analysis's rule,
    /// shared with the reports): generator-bound steps never feed a capacity, a median or
    /// a USL fit.
    pub fn counts_for_server(&self) -> bool {
        sustain::counts_for_server(Some(self.label))
    }

    /// What the step says about the server (`None`: not a judged step).
    pub fn evidence(&self) -> Option<Evidence> {
        let ok = self.sustainable?;
        Some(Evidence::of(
            ok,
            self.counts_for_server(),
            self.machine_busy,
        ))
    }

    /// Volley's own limit, not noise: a closed loop generator-bound on a quiet machine
    /// (no one else took the CPU; a stall the probe saw would have labelled it
    /// machine-stalled). Another attempt on the same machine meets it again.
    pub fn generator_limit(&self) -> bool {
        self.rate.is_none()
            && !self.machine_busy
            && self.label == volley_analysis::sustain::Bound::GeneratorBound.label()
    }

    /// Noise spoiled it: generator-bound, machine-stalled, or not a pass while the
    /// machine was busy. Such a step is measured again later, up to the study's `retries`.
    /// A link-bound step is not measured again: the same link would bound it again;
    /// nor a too-short one, busy machine or not: the same plan is as short again.
    pub fn needs_remeasure(&self) -> bool {
        Evidence::needs_remeasure(self.sustainable, Some(self.label), self.machine_busy)
    }
}

/// Whether someone else took the CPU from volley while a step ran: others (steal and
/// other processes' CPU, the target's own quota left out; `volley_metrics::summary`
/// `machine`) took more than [`BUSY_PRESSURE_SHARE`] of the machine over the step, AND
/// volley's pacer ([`volley_waited`]) or the target volley started ([`target_waited`])
/// waited for a CPU in a second when others were busy. A build at nice 19 on otherwise
/// idle CPUs takes a share without taking anything from volley or its target: no
/// re-measure for it. The one test the step line, the stored verdict (`machine_busy`)
/// and the re-measuring share.
pub fn machine_busy(s: &Summary) -> bool {
    s.machine.is_some_and(|m| m.busy()) && (volley_waited(s) || target_waited(s))
}

/// A second's wait of the target's threads for a CPU at least this long counts
/// (`SecondSummary::target_wait_ms`, summed over its threads): 1% of the second. A
/// server answers within milliseconds, so a wait of that size in one second moves its
/// p99; a few milliseconds spread over a second of a busy server's threads is the
/// scheduler's ordinary hand-over.
pub const TARGET_MEANINGFUL_WAIT_MS: f64 = 10.0;

/// Whether the target volley started waited at least [`TARGET_MEANINGFUL_WAIT_MS`] for
/// a CPU in a second when others took more than [`BUSY_PRESSURE_SHARE`] of the machine:
/// starved by the machine, not by its load (docs/methodology.md, "The target's wait
/// for a CPU"). A second whose share is unknown does not count (unlike the pacer's:
/// a target without that figure was not watched). `false` when the wait was not read.
pub fn target_waited(s: &Summary) -> bool {
    s.seconds.iter().any(|x| {
        x.others_busy_share.is_some_and(|p| p > BUSY_PRESSURE_SHARE)
            && x.target_wait_ms
                .is_some_and(|w| w >= TARGET_MEANINGFUL_WAIT_MS)
    })
}

/// The target's longest wait for a CPU in a second others were busy, ms, when it
/// counts ([`target_waited`]).
fn target_wait_in_busy_second(s: &Summary) -> Option<f64> {
    s.seconds
        .iter()
        .filter(|x| x.others_busy_share.is_some_and(|p| p > BUSY_PRESSURE_SHARE))
        .filter_map(|x| x.target_wait_ms)
        .filter(|w| *w >= TARGET_MEANINGFUL_WAIT_MS)
        .max_by(f64::total_cmp)
}

/// A second's summed pacer wait for a CPU at least this long is a wait that counts
/// (`SecondSummary::pacer_wait_ms`): below the label's 1 ms lateness floor, no request
/// of that second can have been made late enough by it to change a label.
pub const MEANINGFUL_WAIT_MS: f64 = 1.0;

/// Whether volley's pacer (worker 0) waited at least [`MEANINGFUL_WAIT_MS`] for a CPU
/// in a second when others took more than [`BUSY_PRESSURE_SHARE`] of the machine (or
/// when that second's share is unknown). A run whose waits were never measured (stored
/// before they were, a kernel without schedstats) counts as having waited: others'
/// share alone decides, as it did before.
pub fn volley_waited(s: &Summary) -> bool {
    if s.seconds.iter().all(|x| x.pacer_wait_ms.is_none()) {
        return true;
    }
    s.seconds.iter().any(|x| {
        x.others_busy_share.is_none_or(|p| p > BUSY_PRESSURE_SHARE)
            && x.pacer_wait_ms.is_some_and(|w| w >= MEANINGFUL_WAIT_MS)
    })
}

/// Share of the machine's CPUs taken by someone other than volley and its target
/// (steal plus other processes' CPU) above which the machine, not the server, is the
/// likely cause of a slow second: on a shared 2-core VM another process's build stalls
/// the generator and the server alike. A target's own CPU quota, which volley set, is
/// left out (system-wide CPU pressure counted the throttled target's waiting, and
/// marked every capped step busy).
pub const BUSY_PRESSURE_SHARE: f64 = volley_metrics::summary::BUSY_SHARE;

/// A note for the step line when the worst one-second p99 broke the SLO: which second,
/// and whether someone else took the machine then, so a stall caused by other processes
/// is not read as the server's. `None` when every second met the SLO.
pub fn slow_second_note(
    seconds: &[volley_metrics::summary::SecondSummary],
    slo_ms: f64,
) -> Option<String> {
    let (i, worst) = seconds
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.p99_ms.total_cmp(&b.1.p99_ms))?;
    if worst.p99_ms <= slo_ms {
        return None;
    }
    let why = match worst.others_busy_share {
        Some(p) if p > BUSY_PRESSURE_SHARE => format!(
            "others took {:.0}% of the machine then: the machine, not the server, is the likely cause",
            p * 100.0
        ),
        Some(p) => format!(
            "others took {:.0}% of the machine then: it was quiet",
            p * 100.0
        ),
        None => "the machine's load unknown".to_string(),
    };
    Some(format!(
        "second {} of {} had p99 {:.1} ms > SLO {:.0} ms ({why})",
        i + 1,
        seconds.len(),
        worst.p99_ms,
        slo_ms
    ))
}

/// The step line's mark when someone else took the machine: steal and other
/// processes' CPU over the step, as shares of the machine's CPUs, and whether volley
/// waited for a CPU then (a share taken without volley waiting is shown, not counted);
/// and what the study's other targets took, when at least [`STUDY_SHARE_SHOWN`].
pub(crate) fn busy_mark(s: &Summary) -> String {
    let Some(m) = s.machine else {
        return String::new();
    };
    let study_share = m.study_cores / f64::from(m.cpus.max(1));
    let study = if study_share >= STUDY_SHARE_SHOWN {
        format!(
            " [the study's idle targets took {:.0}% of {} CPU(s): the study's own, not someone else's]",
            study_share * 100.0,
            m.cpus
        )
    } else {
        String::new()
    };
    if !m.busy() {
        return study;
    }
    let took = format!(
        "others took {:.0}% of {} CPU(s) (steal {:.0}%)",
        m.busy_share() * 100.0,
        m.cpus,
        m.steal_cores / f64::from(m.cpus.max(1)) * 100.0
    );
    let target = target_wait_in_busy_second(s)
        .map(|w| format!("; the target waited up to {w:.0} ms in a second for a CPU"))
        .unwrap_or_default();
    if volley_waited(s) || !target.is_empty() {
        format!(" [machine busy: {took}{target}]{study}")
    } else {
        format!(
            " [{took}, but neither volley's pacer waited {MEANINGFUL_WAIT_MS:.0} ms nor the target {TARGET_MEANINGFUL_WAIT_MS:.0} ms for a CPU in a second: not busy for this step]{study}"
        )
    }
}

/// The share of the machine the study's other targets must take for the step line to
/// show it: below 1% it is the idle servers' housekeeping (measured here: an idle
/// Apache prefork of 512 processes 0.014% of a CPU, nginx none, the built-in server's
/// debug build 0.09%).
pub const STUDY_SHARE_SHOWN: f64 = 0.01;

/// Why a step was not sustainable, as sentences with units, e.g. "sent 985 req/s of
/// the 1,000 offered (99%; 99% needed)": printed with the step, so a search walking
/// down can be read from its log. The stored verdict keeps the machine-readable fields.
pub(crate) fn reasons_text(verdict: Option<&sustain::Verdict>) -> String {
    match verdict {
        Some(v) => volley_analysis::words::sentences(&v.reasons),
        None => "no reason recorded".to_string(),
    }
}

/// A step's figures in its line. An error is never throughput: a mostly failed step
/// shows its errors only; a step where nothing completed at all (every connection
/// still connecting or waiting when it ended: no error, no reply) says so, not
/// "failed" beside "0 errors".
fn figures_words(o: &StepOutcome) -> String {
    if (o.rps.is_nan() || o.rps <= 0.0) && o.errors == 0 {
        "no request completed (no req/s or latency figure)".to_string()
    } else if o.mostly_failed() {
        "mostly failed (no req/s or latency figure)".to_string()
    } else {
        format!("{:.0} req/s, p99 {:.2} ms", o.rps, o.p99_ms)
    }
}

/// The line written when a step ends: figures, label, verdict and why not, a busy
/// machine, the slowest second of a rate step over the SLO.
pub(crate) fn step_line(
    elapsed_s: u64,
    what: &str,
    o: &StepOutcome,
    s: &Summary,
    why_not: &str,
    slo_ms: f64,
) -> String {
    let slow = o.rate.and_then(|_| slow_second_note(&s.seconds, slo_ms));
    let figures = figures_words(o);
    format!(
        "[{:>4}s] {what}: {figures}, {} errors, {}{}{}{}{}",
        elapsed_s,
        o.errors,
        o.label,
        match (o.poll_p99_ms, o.sustainable) {
            (Some(p), Some(true)) => format!(
                ", poll p99 {p:.0} ms, carries its users{}",
                lead_in_words(o.lead_in)
            ),
            (Some(p), _) => format!(
                ", poll p99 {p:.0} ms, does NOT carry its users{}",
                lead_in_words(o.lead_in)
            ),
            (None, Some(true)) => ", sustainable".to_string(),
            (None, Some(false)) => ", NOT sustainable".to_string(),
            (None, None) => String::new(),
        },
        why_not,
        busy_mark(s),
        slow.map(|n| format!("; {n}")).unwrap_or_default()
    )
}

/// A warm office day's lead-in for its step line: " (lead-in 42 s, 3120 requests, 0
/// failed)"; empty on a cold day.
fn lead_in_words(l: Option<crate::office_step::LeadInCost>) -> String {
    l.map(|l| {
        format!(
            " (lead-in {:.0} s, {} requests, {} failed)",
            l.wall_s, l.requests, l.failed_requests
        )
    })
    .unwrap_or_default()
}

/// The second line of a cold-start step: the cold request beside the warm TTFB.
pub(crate) fn cold_line(c: &ColdFigures, warm_ttfb_ms: Option<f64>) -> String {
    format!(
        "        cold: first request TTFB {:.2} ms (TCP connect {:.2}, TLS handshake {:.2}), first byte {:.0} ms after spawn; warm TTFB p50 {:.2} ms",
        c.ttfb_ms,
        c.connect_ms,
        c.tls_handshake_ms,
        c.since_spawn_ms,
        warm_ttfb_ms.unwrap_or(f64::NAN)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_line_never_calls_an_empty_step_failed_nor_gives_failures_a_rate() {
        let with = |rps: f64, ok_rps: f64| StepOutcome {
            rate: Some(100.0),
            rps,
            ok_rps,
            p99_ms: 2.5,
            sustainable: Some(false),
            label: "generator-bound",
            ..StepOutcome::blank_for_tests()
        };
        let table = [
            (
                with(0.0, 0.0),
                "no request completed (no req/s or latency figure)",
            ),
            (
                with(f64::NAN, 0.0),
                "no request completed (no req/s or latency figure)",
            ),
            (
                with(90.0, 10.0),
                "mostly failed (no req/s or latency figure)",
            ),
            (with(90.0, 90.0), "90 req/s, p99 2.50 ms"),
            // Nothing completed but errors were counted: those are failures.
            (
                StepOutcome {
                    errors: 5,
                    ..with(0.0, 0.0)
                },
                "mostly failed (no req/s or latency figure)",
            ),
        ];
        for (o, want) in table {
            assert_eq!(figures_words(&o), want, "{o:?}");
        }
    }
}
