//! Closing a merged recorder into a [`Summary`]: the run-wide figures, the self-check,
//! the notes, and the per-second series.

use super::*;
use crate::SecondResources;
use volley_monitor::stall::StallReport;

/// The run's probe figures from its report.
fn probe_figures(r: &StallReport) -> ProbeFigures {
    let steal: Option<u64> = r.seconds.iter().map(|s| s.steal_us).sum();
    ProbeFigures {
        interval_us: r.interval_us,
        fifo: r.priority.fifo,
        nice: r.priority.nice,
        left_cgroup: r.priority.left_cgroup,
        max_stall_ms: ms(r.seconds.iter().map(|s| s.max_us).max().unwrap_or(0)),
        over_1ms: r.seconds.iter().map(|s| u64::from(s.over_1ms)).sum(),
        steal_ms: steal.map(ms),
    }
}

/// The share of the run the generator's worker 0 waited for a CPU: its run delay
/// summed over the seconds that measured it, over those seconds (each about one
/// second long). `None` when no second did.
pub(super) fn cpu_wait_share(seconds: &[SecondSummary]) -> Option<f64> {
    let waits: Vec<f64> = seconds.iter().filter_map(|s| s.pacer_wait_ms).collect();
    (!waits.is_empty()).then(|| waits.iter().sum::<f64>() / (waits.len() as f64 * 1e3))
}

/// A generator-bound run's reason names the generator-bound second where a target
/// volley started took the largest share of the pacer's core while the pacer waited.
fn name_target_beside(verdict: &mut Verdict, seconds: &[SecondSummary]) {
    if verdict.label != Bound::GeneratorBound {
        return;
    }
    let beside = seconds
        .iter()
        .filter(|s| s.label == Bound::GeneratorBound)
        .filter_map(|s| {
            let us = |ms: Option<f64>| ms.map(|m| (m * 1e3) as u64);
            let t = us(s.target_on_pacer_ms)?;
            label::target_beside(us(s.pacer_wait_ms), Some(t), 1_000_000).map(|w| (t, w))
        })
        .max_by_key(|(t, _)| *t);
    if let Some((_, words)) = beside {
        verdict.reason = format!("{}; in its worst second {words}", verdict.reason);
    }
}

impl Recorder {
    /// Derives the summary. Merge every worker's recorder into this one first.
    pub fn close(mut self, run: &RunInfo) -> Result<Summary, MetricsError> {
        self.finish();
        let merged = Recorder::merge_all(vec![self])?;
        merged.summarise(run)
    }

    pub(super) fn summarise(&self, run: &RunInfo) -> Result<Summary, MetricsError> {
        let t = &self.totals;
        let c = &t.counts;
        let measured_ns = run.elapsed_ns.saturating_sub(self.warmup_ns);
        let duration_s = measured_ns as f64 / 1e9;
        let open_rate = match &run.model {
            Model::Open { rate_per_s, .. } => Some(*rate_per_s),
            Model::Closed => None,
        };
        let (headline, headline_def) = match open_rate {
            Some(_) => (Metric::Response, RESPONSE_DEF),
            None => (Metric::Service, CLOSED_DEF),
        };
        let headline_hist = &self.run[headline as usize];

        let (non_2xx, status_codes, errors) = self.status_and_errors();

        let in_flight = c.errors[ErrorKind::InFlight.index()];
        let finished = c.completed - in_flight;
        let throughput = throughput(
            run.connections * run.streams_per_connection.max(1) as usize,
            duration_s,
            finished,
            c.ok,
        );
        let rates = self.rates(open_rate, duration_s, finished);
        let seconds = self.seconds(open_rate, headline, run.cores, run.stalls.as_ref())?;
        let waited = cpu_wait_share(&seconds);
        let (whole_verdict, cap_hits, cpu_cores_used, [lag_p99_us, sched_p99_us, wait_p99_us]) =
            self.run_check(run, open_rate, &rates, measured_ns, waited);

        let labels: Vec<Bound> = seconds.iter().map(|s| s.label).collect();
        let mut run_verdict = label::run_label(whole_verdict, &labels);
        name_target_beside(&mut run_verdict, &seconds);
        let count = |b: Bound| labels.iter().filter(|l| **l == b).count() as u64;
        let generator_bound_seconds = count(Bound::GeneratorBound);
        let machine_stalled_seconds = count(Bound::MachineStalled);

        let warmup = self.warmup_stats(run);
        let notes = self.notes(run, warmup.as_ref(), duration_s, cap_hits, &run_verdict);

        let latency = self.latency_map(open_rate.is_some());

        Ok(Summary {
            url: run.url.clone(),
            method: run.method.clone(),
            model: run.model.clone(),
            threads: run.threads,
            connections: run.connections,
            streams_per_connection: run.streams_per_connection.max(1),
            keep_alive: run.keep_alive,
            latency_definition: headline_def.to_string(),
            duration_s,
            warmup,
            requests: self.requests(non_2xx),
            errors,
            status_codes,
            bytes: self.bytes(duration_s),
            throughput,
            rates,
            connection_times: self.connection_times(),
            // ab's table is total time, connect included; an open loop (ab has none)
            // shows its headline response time, which already counts any connect.
            served_within: served_within(if open_rate.is_some() {
                headline_hist
            } else {
                &self.run_total
            }),
            served_within_definition: if open_rate.is_some() {
                RESPONSE_DEF
            } else {
                TOTAL_DEF
            }
            .to_string(),
            latency,
            spectrum: spectrum(headline_hist),
            connections_stats: self.connection_stats(run, cap_hits),
            generator: Generator {
                cpu_cores_used,
                cores: run.cores,
                cpu_pressure: run.cpu_pressure,
                send_lag_p99_ms: ms(lag_p99_us),
                sched_lag_p99_ms: ms(sched_p99_us),
                conn_wait_p99_ms: ms(wait_p99_us),
                verdict: run_verdict,
                generator_bound_seconds,
                machine_stalled_seconds,
                probe: run.stalls.as_ref().map(probe_figures),
            },
            seconds,
            stopped_early: run.stopped_early,
            notes,
            wire: None,
            first_request: None,
            headroom: None,
            machine: None,
        })
    }

    /// The measured part's request counts; requests still in flight at the end are
    /// neither completed nor failed.
    fn requests(&self, non_2xx: u64) -> Requests {
        let t = &self.totals;
        let c = &t.counts;
        let in_flight = c.errors[ErrorKind::InFlight.index()];
        Requests {
            sent: t.sent,
            completed: c.completed - in_flight,
            ok: c.ok,
            failed: c.failed() - in_flight,
            in_flight,
            censored: c.censored(),
            non_2xx,
        }
    }

    /// The warm-up's own figures, `None` when the run had no warm-up.
    fn warmup_stats(&self, run: &RunInfo) -> Option<WarmupStats> {
        (self.warmup_ns > 0).then(|| WarmupStats {
            duration_s: self.warmup_ns as f64 / 1e9,
            requests: self.warm.samples,
            connections_opened: run.connections_opened.saturating_sub(self.totals.opened),
            open_at_boundary: self.warm.open_at_boundary,
            max_open: self.warm.max_open,
            cap_hits: self.warm.cap_hits,
        })
    }

    /// Bytes moved in the measured `duration_s`, and the compression ratio when bodies
    /// came encoded.
    fn bytes(&self, duration_s: f64) -> Bytes {
        let t = &self.totals;
        let c = &t.counts;
        let kib_per_s = if duration_s > 0.0 {
            c.wire_bytes as f64 / duration_s / 1024.0
        } else {
            0.0
        };
        Bytes {
            wire_total: c.wire_bytes,
            body_total: c.body_bytes,
            transfer_kib_per_s: kib_per_s,
            wire_body_total: t.wire_body_bytes,
            compression_ratio: (t.wire_body_bytes != c.body_bytes && t.wire_body_bytes > 0)
                .then(|| c.body_bytes as f64 / t.wire_body_bytes as f64),
        }
    }

    /// ab's connection-times table (connect, processing, waiting, total).
    fn connection_times(&self) -> ConnectionTimes {
        ConnectionTimes {
            definitions: "Connect = TCP connect, plus the TLS handshake over TLS (0 on a reused connection); Processing = done - sent; Waiting = first byte - sent; Total = Connect + Processing".into(),
            connect: row(&self.run[Metric::Connect as usize]),
            processing: row(&self.run[Metric::Service as usize]),
            waiting: row(&self.run[Metric::Ttfb as usize]),
            total: row(&self.run_total),
        }
    }

    /// The whole run's self-check: the bound verdict, the connection-cap hits of the
    /// measured part, the generator's CPU in cores, and the p99 of send lag, scheduler lag
    /// and connection wait (microseconds). `wait_share` is the share of the run worker 0
    /// waited for a CPU ([`cpu_wait_share`]).
    pub(super) fn run_check(
        &self,
        run: &RunInfo,
        open_rate: Option<f64>,
        rates: &Rates,
        measured_ns: u64,
        wait_share: Option<f64>,
    ) -> (Verdict, u64, Option<f64>, [u64; 3]) {
        let c = &self.totals.counts;
        let p99 = |m: Metric| {
            let h = &self.run[m as usize];
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(0.99)
            }
        };
        let lag_p99_us = p99(Metric::SendLag);
        let sched_p99_us = p99(Metric::SchedLag);
        let wait_p99_us = p99(Metric::ConnWait);
        let cpu_cores_used = run
            .cpu_ns
            .filter(|_| measured_ns > 0)
            .map(|n| n as f64 / measured_ns as f64);
        // The engine's cap count spans a warm-up; the recorder's only the measured part.
        let cap_hits = if self.warmup_ns > 0 {
            c.cap_hits
        } else {
            run.cap_hits.max(c.cap_hits)
        };
        let verdict = label::classify_run(
            &Check {
                offered_rate_per_s: open_rate,
                scheduled: rates.scheduled_per_s.unwrap_or(rates.dispatched_per_s),
                dispatched: rates.dispatched_per_s,
                sent: rates.achieved_send_per_s,
                slack: 0.0,
                sched_lag_p99_us: sched_p99_us,
                conn_wait_p99_us: wait_p99_us,
                cap_hits,
                cpu_cores_used,
                cores: run.cores,
                cpu_pressure: run.cpu_pressure,
                cpu_wait_share: wait_share,
                // The whole run is judged from its seconds' labels (label::run_label).
                longest_stall_us: None,
                pacer_wait_us: None,
                others_on_pacer_us: None,
                ours_on_pacer_us: None,
                target_on_pacer_us: None,
            },
            measured_ns,
        );
        (
            verdict,
            cap_hits,
            cpu_cores_used,
            [lag_p99_us, sched_p99_us, wait_p99_us],
        )
    }

    /// Responses that were not 2xx, the count per status code ("none" for no status),
    /// and the count per error kind.
    #[allow(clippy::type_complexity)]
    pub(super) fn status_and_errors(
        &self,
    ) -> (u64, BTreeMap<String, u64>, BTreeMap<&'static str, u64>) {
        let t = &self.totals;
        let c = &t.counts;
        let responses: u64 = c.status_class[1..].iter().sum();
        let non_2xx = responses - c.status_class[2];
        let mut status_codes = BTreeMap::new();
        for (code, &n) in t.status_codes.iter().enumerate() {
            if n > 0 {
                let key = if code == 0 {
                    "none".to_string()
                } else {
                    code.to_string()
                };
                status_codes.insert(key, n);
            }
        }
        let errors: BTreeMap<_, _> = ErrorKind::ALL
            .iter()
            .map(|k| (k.name(), c.errors[k.index()]))
            .collect();

        (non_2xx, status_codes, errors)
    }

    /// Sent, dispatched, scheduled and reply rates over the measured span.
    pub(super) fn rates(&self, open_rate: Option<f64>, duration_s: f64, finished: u64) -> Rates {
        let t = &self.totals;
        let c = &t.counts;
        let achieved = span_rate(t.sent, t.first_sent_ns, t.last_sent_ns, duration_s);
        let dispatched = span_rate(
            t.dispatched,
            t.first_dispatched_ns,
            t.last_dispatched_ns,
            duration_s,
        );
        let scheduled = open_rate.map(|_| {
            span_rate(
                c.completed,
                t.first_intended_ns,
                t.last_intended_ns,
                duration_s,
            )
        });
        Rates {
            offered_per_s: open_rate,
            scheduled_per_s: scheduled,
            achieved_send_per_s: achieved,
            dispatched_per_s: dispatched,
            reply_per_s: if duration_s > 0.0 {
                finished as f64 / duration_s
            } else {
                0.0
            },
        }
    }

    /// The notes a reader needs beside the figures: warm-up, censored requests, an early
    /// stop, connection-cap hits and a generator-bound verdict.
    pub(super) fn notes(
        &self,
        run: &RunInfo,
        warmup: Option<&WarmupStats>,
        duration_s: f64,
        cap_hits: u64,
        run_verdict: &Verdict,
    ) -> Vec<String> {
        let c = &self.totals.counts;
        let mut notes = run.notes.clone();
        if let Some(w) = warmup {
            notes.push(format!(
                "warm-up {}s excluded: {} request(s) intended before it, {} connection(s) opened during it ({} open when measuring began, at most {}), {} connection-cap hit(s); every figure covers the {:.3} s after it",
                w.duration_s, w.requests, w.connections_opened, w.open_at_boundary, w.max_open, w.cap_hits, duration_s
            ));
        }
        // Timeouts finished (as failures); requests in flight at the end did not, so
        // ab's "Failed requests" counts the first and not the second: say which is which.
        let timeouts = c.errors[ErrorKind::Timeout.index()];
        let in_flight = c.errors[ErrorKind::InFlight.index()];
        let mut censored = Vec::new();
        if timeouts > 0 {
            censored.push(format!(
                "{timeouts} request(s) timed out (counted in Failed requests)"
            ));
        }
        if in_flight > 0 {
            censored.push(format!(
                "{in_flight} request(s) were still in flight when the run ended (neither complete nor failed)"
            ));
        }
        if !censored.is_empty() {
            notes.push(format!(
                "{}: their latencies are recorded as lower bounds (>= elapsed time) in response and service time",
                censored.join("; ")
            ));
        }
        if run.stopped_early {
            notes.push(
                "the run was stopped early: figures cover what was measured until then".into(),
            );
        }
        if cap_hits > 0 {
            notes.push(format!(
                "the connection cap ({}) was hit {cap_hits} time(s): arrivals waited for a free connection (their response time still counts from the intended instant)",
                run.max_connections
            ));
        }
        if run_verdict.label == Bound::MachineStalled {
            notes.push(format!(
                "MACHINE-STALLED: {}; the late seconds describe the machine's stalls, not the generator or the server",
                run_verdict.reason
            ));
        }
        if run_verdict.label == Bound::GeneratorBound {
            notes.push(format!(
                "GENERATOR-BOUND: {}; these figures describe the load generator, not the server",
                run_verdict.reason
            ));
        }

        notes
    }

    /// Every latency definition's statistics, each with the sentence defining it.
    pub(super) fn latency_map(&self, open: bool) -> BTreeMap<&'static str, LatencyStats> {
        let mut latency = BTreeMap::new();
        let defs = [
            (
                Metric::Response,
                if open {
                    RESPONSE_DEF
                } else {
                    CLOSED_DEF
                },
            ),
            (
                Metric::Service,
                if open {
                    SERVICE_DEF
                } else {
                    CLOSED_DEF
                },
            ),
            (
                Metric::Ttfb,
                "time to first byte = first response byte - sent",
            ),
            (
                Metric::Connect,
                "time to a usable connection: TCP connect, plus the TLS handshake over TLS (0 when reused)",
            ),
            (
                Metric::SendLag,
                "send lag = sent - intended = scheduler lag + connection wait",
            ),
            (
                Metric::SchedLag,
                "scheduler lag = dispatched - intended (the generator's own lateness: its event loop handled the arrival late)",
            ),
            (
                Metric::ConnWait,
                "connection wait = sent - dispatched (the arrival waited for a free connection or HTTP/2 stream: the server held them, or the cap was reached)",
            ),
        ];
        for (m, d) in defs {
            latency.insert(m.name(), stats(&self.run[m as usize], d));
        }
        if !self.run_tls.is_empty() {
            latency.insert(
                "tls_handshake",
                stats(
                    &self.run_tls,
                    "TLS handshake of requests that opened a TLS connection (part of connect time)",
                ),
            );
        }
        latency.insert(
            "body_transfer",
            stats(&self.run_body, "body transfer = done - first response byte"),
        );

        latency
    }

    /// Connection figures: the measured part's own after a warm-up, else the run's.
    pub(super) fn connection_stats(&self, run: &RunInfo, cap_hits: u64) -> Connections {
        let (c, t) = (&self.totals.counts, &self.totals);
        if self.warmup_ns > 0 {
            Connections {
                max_open: c.max_open.max(self.warm.open_at_boundary),
                opened: t.opened,
                cap_hits,
            }
        } else {
            Connections {
                max_open: run.max_open_connections.max(c.max_open),
                opened: run.connections_opened,
                cap_hits,
            }
        }
    }

    /// Per-second series from the closed windows (or their digests, when they were
    /// written out as they closed) and the send/schedule counts, every second from 0
    /// to the last one that saw anything.
    pub(super) fn seconds(
        &self,
        open_rate: Option<f64>,
        headline: Metric,
        cores: f64,
        stalls: Option<&StallReport>,
    ) -> Result<Vec<SecondSummary>, MetricsError> {
        let digests = self.digests()?;
        let last = digests
            .last()
            .map(|c| c.second as usize + 1)
            .unwrap_or(0)
            .max(self.sent_by_second.len())
            .max(self.dispatched_by_second.len())
            .max(self.scheduled_by_second.len());
        let mut closed = digests.iter().peekable();
        let mut out = Vec::with_capacity(last);
        for s in 0..last {
            let sec = closed.next_if(|c| c.second as usize == s);
            let sent = self.sent_by_second.get(s).copied().unwrap_or(0);
            let scheduled = self.scheduled_by_second.get(s).copied().unwrap_or(0);
            let dispatched = self.dispatched_by_second.get(s).copied().unwrap_or(0);
            let d = sec.copied().unwrap_or_default();
            let head = d.headline_us(headline);
            let counts = d.counts;
            let res = d.resources;
            let probe = stalls.and_then(|r| r.seconds.get(s));
            let pacer = pacer_cpu_figures(res, probe);
            let verdict = label::classify(&Check {
                offered_rate_per_s: open_rate,
                scheduled: scheduled as f64,
                dispatched: dispatched as f64,
                sent: sent as f64,
                slack: 1.0,
                sched_lag_p99_us: d.sched_lag_us[0],
                conn_wait_p99_us: d.conn_wait_p99_us,
                cap_hits: counts.cap_hits,
                cpu_cores_used: res.map(|r| r.cpu_cores_used),
                cores,
                cpu_pressure: res.and_then(|r| r.cpu_pressure),
                cpu_wait_share: res.and_then(|r| r.pacer_wait_ms).map(|w| w / 1e3),
                longest_stall_us: stalls.and_then(|r| r.bound_near(s as u64)),
                pacer_wait_us: pacer.wait_us,
                others_on_pacer_us: pacer.others_us,
                ours_on_pacer_us: pacer.ours_us,
                target_on_pacer_us: pacer.target_us,
            });
            out.push(SecondSummary {
                second: s as u64,
                scheduled,
                sent,
                dispatched,
                completed: counts.completed,
                ok: counts.ok,
                errors: ErrorKind::ALL
                    .iter()
                    .filter(|k| counts.errors[k.index()] > 0)
                    .map(|k| (k.name(), counts.errors[k.index()]))
                    .collect(),
                wire_bytes: counts.wire_bytes,
                max_open: counts.max_open,
                cap_hits: counts.cap_hits,
                p50_ms: ms(head[0]),
                p99_ms: ms(head[1]),
                max_ms: ms(head[2]),
                send_lag_p99_ms: ms(d.send_lag_p99_us),
                sched_lag_p99_ms: ms(d.sched_lag_us[0]),
                sched_lag_max_ms: ms(d.sched_lag_us[1]),
                conn_wait_p99_ms: ms(d.conn_wait_p99_us),
                cpu_cores_used: res.map(|r| r.cpu_cores_used),
                cpu_pressure: res.and_then(|r| r.cpu_pressure),
                probe_max_stall_ms: probe.map(|p| ms(p.max_us)),
                probe_stall_bound_ms: probe.map(|p| ms(p.upper_us())),
                pacer_wait_ms: res.and_then(|r| r.pacer_wait_ms),
                probe_p99_ms: probe.map(|p| ms(p.p99_us)),
                probe_over_1ms: probe.map(|p| p.over_1ms),
                steal_ms: probe.and_then(|p| p.steal_us).map(ms),
                others_busy_share: None,
                target_wait_ms: None,
                others_on_pacer_ms: pacer.others_us.map(ms),
                target_on_pacer_ms: pacer.target_us.map(ms),
                label: verdict.label,
            });
        }
        Ok(out)
    }
}

/// Who used the pacer's CPU in one second (see `label::neighbour_explains`),
/// microseconds; `None` where a side was not measured.
struct PacerCpu {
    /// The pacer's wait for a CPU, less any throttling of volley's own cgroup.
    wait_us: Option<u64>,
    /// The least others surely took of a CPU the pacer was seen on.
    others_us: Option<u64>,
    /// The most volley's other threads and its targets can have used of one, the
    /// pacer's own run left out.
    ours_us: Option<u64>,
    /// The most the targets volley started surely used of a CPU the pacer was on.
    target_us: Option<u64>,
}

/// [`PacerCpu`] from worker 0's readings and the probe's second.
fn pacer_cpu_figures(
    res: Option<SecondResources>,
    probe: Option<&volley_monitor::stall::StallSecond>,
) -> PacerCpu {
    let us = |ms: f64| (ms * 1e3) as u64;
    let Some(res) = res else {
        return PacerCpu {
            wait_us: None,
            others_us: None,
            ours_us: None,
            target_us: None,
        };
    };
    let throttled = probe.and_then(|p| p.own_throttled_us).unwrap_or(0);
    let seen: Vec<usize> = res.pacer_cpu_list().collect();
    let on = |v: &[u64], pick: fn(u64, u64) -> u64| {
        seen.iter()
            .map(|&c| v.get(c).copied())
            .reduce(|a, b| Some(pick(a?, b?)))
            .flatten()
    };
    let ran = res.pacer_run_ms.map(us);
    PacerCpu {
        wait_us: res.pacer_wait_ms.map(|w| us(w).saturating_sub(throttled)),
        others_us: probe.and_then(|p| on(&p.others_us, u64::min)),
        ours_us: probe
            .and_then(|p| on(&p.ours_us, u64::max))
            .zip(ran)
            .map(|(o, r)| o.saturating_sub(r)),
        target_us: probe.and_then(|p| on(&p.targets_us, u64::max)),
    }
}
