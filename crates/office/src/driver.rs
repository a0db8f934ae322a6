//! Sending one request of a device, judging its status, and recording its latency in
//! the recorder of its operation type.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use volley_engine::{ErrorKind, Sample, Sink};
use volley_metrics::hist::{self, Hist};
use volley_metrics::{Metric, Recorder, SecondStream};

use crate::check::{Violation, Violations};
use crate::http::{ns_since, Reply, Request};
use crate::ops::{Op, SessionKind};
use crate::state::Device;

/// Success answers of writes.
pub const WRITE_OK: &[u16] = &[200, 201, 204];
/// A multistatus.
pub const MULTI: &[u16] = &[207];

/// The run's recorders, shared by every worker thread: one of every request, whose
/// per-second windows are the day's series (`volley_metrics::Recorder`: lossless
/// per-second HDR histograms), and a [`Tally`] per operation type and per
/// sync-session kind, whole-run figures only. Why only one keeps seconds: a recorder
/// keeps every closed second (about 1 KB each), and a dozen of them grew a 60-minute
/// office day by 2.4 KB/s although only their merge was ever stored (issue 26). One
/// lock per recorder, held for a few histogram increments.
pub struct Recorders {
    /// Every measured request, per second.
    pub all: Mutex<Recorder>,
    /// By [`Op::index`]: service time.
    pub ops: Vec<Mutex<Tally>>,
    /// By [`SessionKind`] order: response time from the scheduled instant.
    pub sessions: Vec<Mutex<Tally>>,
    /// Instant 0 of every sample.
    pub origin: Instant,
}

impl Recorders {
    /// Empty recorders with instant 0 now.
    pub fn new() -> Recorders {
        Recorders::streaming(None)
    }

    /// [`Recorders::new`] whose every-request recorder, given a `stream`, keeps no
    /// closed second but sends each as it closes (a study stores them live, so a long
    /// day's memory does not grow by a second's histograms every second; issue 26).
    pub fn streaming(stream: Option<SecondStream>) -> Recorders {
        let all = match stream {
            Some(s) => Recorder::new().stream_only().with_stream(s),
            None => Recorder::new(),
        };
        Recorders {
            all: Mutex::new(all),
            ops: Op::ALL
                .iter()
                .map(|_| Mutex::new(Tally::new(Metric::Service)))
                .collect(),
            sessions: SessionKind::ALL
                .iter()
                .map(|_| Mutex::new(Tally::new(Metric::Response)))
                .collect(),
            origin: Instant::now(),
        }
    }

    fn record_op(&self, op: Op, s: &Sample) {
        self.ops[op.index()]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(s);
        self.all
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(s);
    }

    /// Records a sync session scheduled at `intended_ns` that started at `start_ns`.
    pub fn record_session(&self, kind: SessionKind, intended_ns: u64, start_ns: u64, ok: bool) {
        let done = ns_since(self.origin);
        let s = Sample {
            intended_ns,
            dispatched_ns: start_ns.max(intended_ns),
            sent_ns: start_ns.max(intended_ns),
            first_byte_ns: 0,
            done_ns: done.max(start_ns),
            connect_ns: 0,
            tls_handshake_ns: 0,
            status: if ok { 200 } else { 500 },
            wire_bytes: 0,
            body_bytes: 0,
            wire_body_bytes: 0,
            error: (!ok).then_some(ErrorKind::Status),
            request_index: kind as u32,
        };
        let i = SessionKind::ALL
            .iter()
            .position(|k| *k == kind)
            .unwrap_or(0);
        self.sessions[i]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(&s);
    }
}

impl Default for Recorders {
    fn default() -> Self {
        Recorders::new()
    }
}

/// Whole-run figures of one operation type or session kind, all its report row shows
/// ([`crate::LatencyRow`]): how many, how many accepted, one latency histogram.
/// Nothing per second: a `Recorder` in its place counted sends, dispatches and
/// arrivals a second and kept a deflate state to encode seconds no one stored; 13 of
/// them held ~3.5 MB and grew a long day by ~0.4 KB/s (issue 26).
#[derive(Debug, Clone)]
pub struct Tally {
    metric: Metric,
    /// Samples recorded, whatever their outcome.
    pub completed: u64,
    /// Of those, accepted answers.
    pub ok: u64,
    /// [`Tally::metric`] of the samples that have one, microseconds.
    pub latency: Hist,
}

impl Tally {
    /// Empty, timing by `metric`: [`Metric::Service`] (done - sent) or else
    /// [`Metric::Response`] (done - intended).
    pub fn new(metric: Metric) -> Tally {
        Tally {
            metric,
            completed: 0,
            ok: 0,
            latency: hist::new_hist(),
        }
    }

    /// Counts `s`, and times it as a `Recorder`'s whole-run histogram does: an answer
    /// (an unexpected status too) or a request cut off by its timeout has a latency;
    /// a request that failed before an answer (connect, reset) has none, and one never
    /// sent no service time.
    pub fn record(&mut self, s: &Sample) {
        self.completed += 1;
        self.ok += u64::from(s.error.is_none());
        let timed = matches!(
            s.error,
            None | Some(ErrorKind::Status | ErrorKind::Timeout | ErrorKind::InFlight)
        );
        let ns = match self.metric {
            Metric::Service => (s.sent_ns >= s.intended_ns).then(|| s.service_ns()),
            _ => Some(s.response_ns()),
        };
        if let Some(ns) = ns.filter(|_| timed) {
            hist::record_ns(&mut self.latency, ns);
        }
    }
}

/// What a worker needs to send requests: the recorders, and whether this phase is
/// measured (set-up and the final audit are not).
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    /// Where samples go.
    pub rec: &'a Recorders,
    /// Record samples (false during set-up and audit).
    pub measured: bool,
}

impl Ctx<'_> {
    /// Sends `req` on `dev`'s connection. Returns the reply when its status is one of
    /// `expect`; otherwise counts a violation (transport, 5xx, other status) and returns
    /// `None`. The sample is recorded in the op's recorder either way, an unexpected
    /// status as a status error.
    pub fn call(
        &self,
        dev: &mut Device,
        v: &mut Violations,
        req: Request,
        expect: &[u16],
    ) -> Option<Reply> {
        self.attempt(dev, v, req, expect, false).ok()
    }

    /// [`Ctx::call`] that says why it failed. With `patient`, a 429 or 503 carrying
    /// `Retry-After` is the server asking the client to come back later (RFC 6585 4,
    /// RFC 9110 10.2.3), as the built-in server's credential verifier does when
    /// hundreds of new accounts log in at once: it is returned as [`Failure::Busy`]
    /// for the caller to wait, and counted as no violation.
    pub fn attempt(
        &self,
        dev: &mut Device,
        v: &mut Violations,
        req: Request,
        expect: &[u16],
        patient: bool,
    ) -> Result<Reply, Failure> {
        let (result, mut sample) = dev.conn.exchange(&req, self.rec.origin);
        let out = match result {
            Err(kind) => {
                v.add_each(Violation::Transport, || {
                    format!("{} {}: {kind:?}", req.method, req.path)
                });
                Err(Failure::Transport(kind))
            }
            Ok(reply) if expect.contains(&reply.status) => Ok(reply),
            Ok(reply) => {
                sample.error = Some(ErrorKind::Status);
                let wait = matches!(reply.status, 429 | 503)
                    .then(|| reply.header("Retry-After").and_then(retry_after))
                    .flatten();
                match wait {
                    Some(after) if patient => Err(Failure::Busy {
                        status: reply.status,
                        after,
                    }),
                    _ => {
                        let kind = if reply.status >= 500 {
                            Violation::ServerError
                        } else {
                            Violation::UnexpectedStatus
                        };
                        v.add_each(kind, || {
                            format!(
                                "{} {} answered {} (expected {expect:?})",
                                req.method, req.path, reply.status
                            )
                        });
                        Err(Failure::Status {
                            status: reply.status,
                            expected: expect.to_vec(),
                        })
                    }
                }
            }
        };
        if self.measured {
            self.rec.record_op(req.op, &sample);
        }
        out
    }
}

/// Why one request did not get an expected answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// No answer: the connection failed, timed out or closed.
    #[error("no answer ({0:?})")]
    Transport(ErrorKind),
    /// An answer with another status.
    #[error("answered {status} (expected {expected:?})")]
    Status {
        /// The status received.
        status: u16,
        /// The statuses that would have done.
        expected: Vec<u16>,
    },
    /// An answer whose multistatus could not be read (counted as a violation).
    #[error("its multistatus could not be read")]
    Unreadable,
    /// 429 or 503 with `Retry-After`: come back later.
    #[error("answered {status} with Retry-After {} s", after.as_secs())]
    Busy {
        /// 429 or 503.
        status: u16,
        /// How long the server asked to wait.
        after: Duration,
    },
}

/// A `Retry-After` in delta-seconds (RFC 9110 10.2.3); the HTTP-date form is read as
/// one second, since a server under load that dates its answer means "soon".
fn retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    match v.parse::<u64>() {
        Ok(s) => Some(Duration::from_secs(s)),
        Err(_) if !v.is_empty() => Some(Duration::from_secs(1)),
        Err(_) => None,
    }
}

/// The strong ETag of a reply, if it has one (a weak one cannot guard a write).
pub fn strong_etag(r: &Reply) -> Option<String> {
    r.header("ETag")
        .filter(|e| e.starts_with('"'))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use volley_engine::{ErrorKind, Sample, Sink};
    use volley_metrics::{Metric, Recorder};

    use super::Tally;

    /// A request intended at `at_ms`, sent `lag_ms` later, done `took_ms` after that.
    fn sample(at_ms: u64, lag_ms: u64, took_ms: u64, error: Option<ErrorKind>) -> Sample {
        let ms = 1_000_000;
        Sample {
            intended_ns: at_ms * ms,
            dispatched_ns: (at_ms + lag_ms) * ms,
            sent_ns: (at_ms + lag_ms) * ms,
            first_byte_ns: 0,
            done_ns: (at_ms + lag_ms + took_ms) * ms,
            connect_ns: 0,
            tls_handshake_ns: 0,
            status: if error.is_none() { 200 } else { 0 },
            wire_bytes: 0,
            body_bytes: 0,
            wire_body_bytes: 0,
            error,
            request_index: 0,
        }
    }

    /// A tally's row figures are a recorder's whole-run figures of the same samples
    /// (answers, an unexpected status, a timeout, a connect failure, one never sent),
    /// over several seconds, for both metrics: it replaced one per operation type.
    #[test]
    fn a_tally_counts_and_times_as_a_recorders_whole_run_figures() {
        let mut never_sent = sample(2_500, 0, 0, Some(ErrorKind::Timeout));
        never_sent.sent_ns = 0;
        let samples = [
            sample(0, 0, 12, None),
            sample(400, 30, 250, None),
            sample(1_200, 5, 40, Some(ErrorKind::Status)),
            sample(1_900, 0, 10_000, Some(ErrorKind::Timeout)),
            sample(2_000, 0, 3, Some(ErrorKind::Connect)),
            never_sent,
            sample(3_100, 900, 7, None),
        ];
        for metric in [Metric::Service, Metric::Response] {
            let mut r = Recorder::new().stream_only();
            let mut t = Tally::new(metric);
            for s in &samples {
                r.record(s);
                t.record(s);
            }
            r.finish();
            assert_eq!((t.completed, t.ok), (r.completed(), r.ok()), "{metric:?}");
            let h = r.whole_run(metric);
            assert_eq!(t.latency.len(), h.len(), "{metric:?}");
            for q in [0.5, 0.99, 1.0] {
                assert_eq!(
                    t.latency.value_at_quantile(q),
                    h.value_at_quantile(q),
                    "{metric:?} {q}"
                );
            }
        }
    }
}
