//! A closed second reduced to what its row of the summary's per-second series needs.
//!
//! Why: a long run that keeps every closed second's histograms grows by about 1 KB a
//! second (issue 26: a 60-minute `bench --save` went from 16.6 to 20.6 MB). A caller
//! that writes each second out as it closes (`volley bench --save` to the store, an
//! injector agent to the bus) runs its workers' recorders with
//! [`Recorder::stream_only`], joins the streamed windows with a [`SecondJoiner`]
//! that keeps a [`SecondDigest`] of each joined second, and hands the digests to the
//! merged recorder ([`Recorder::set_digests`]) before closing it. Quantiles cannot be
//! added, so a digest is taken of a second already joined across workers.
//!
//! [`SecondJoiner`]: super::SecondJoiner

use serde::{Deserialize, Serialize};

use super::{ClosedSecond, Counts, Metric, Recorder, SecondResources};
use crate::hist::Hist;
use crate::MetricsError;

/// One joined second's counters and the quantiles its summary row shows.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct SecondDigest {
    /// Second of run time.
    pub second: u64,
    /// Its counters.
    pub counts: Counts,
    /// Generator resources, when read.
    pub resources: Option<SecondResources>,
    /// Response time (done - intended) p50, p99 and max, microseconds.
    pub response_us: [u64; 3],
    /// Service time (done - sent) p50, p99 and max, microseconds.
    pub service_us: [u64; 3],
    /// Send lag p99, microseconds.
    pub send_lag_p99_us: u64,
    /// Scheduler lag p99 and max, microseconds.
    pub sched_lag_us: [u64; 2],
    /// Connection wait p99, microseconds.
    pub conn_wait_p99_us: u64,
}

fn q(h: &Hist, p: f64) -> u64 {
    if h.is_empty() {
        0
    } else {
        h.value_at_quantile(p)
    }
}

fn max(h: &Hist) -> u64 {
    if h.is_empty() {
        0
    } else {
        h.max()
    }
}

impl SecondDigest {
    /// The digest of one closed (joined) second.
    pub fn of(c: &ClosedSecond) -> Result<SecondDigest, MetricsError> {
        let (resp, serv) = (c.hist(Metric::Response)?, c.hist(Metric::Service)?);
        let (lag, sched, wait) = (
            c.hist(Metric::SendLag)?,
            c.hist(Metric::SchedLag)?,
            c.hist(Metric::ConnWait)?,
        );
        Ok(SecondDigest {
            second: c.second,
            counts: c.counts,
            resources: c.resources,
            response_us: [q(&resp, 0.5), q(&resp, 0.99), max(&resp)],
            service_us: [q(&serv, 0.5), q(&serv, 0.99), max(&serv)],
            send_lag_p99_us: q(&lag, 0.99),
            sched_lag_us: [q(&sched, 0.99), max(&sched)],
            conn_wait_p99_us: q(&wait, 0.99),
        })
    }

    /// p50, p99 and max of the headline definition.
    pub(crate) fn headline_us(&self, headline: Metric) -> [u64; 3] {
        if headline == Metric::Service {
            self.service_us
        } else {
            self.response_us
        }
    }
}

impl Recorder {
    /// Keeps no closed second: each goes only to the recorder's stream (set one with
    /// [`Recorder::with_stream`]), whose receiver writes it out and keeps its digest.
    /// Call before [`Recorder::with_offload`], whose encoder thread follows the choice.
    /// The merged recorder then needs [`Recorder::set_digests`] before it is closed, or
    /// its summary has every second empty.
    pub fn stream_only(mut self) -> Recorder {
        self.keep_closed = false;
        self
    }

    /// Whether closed seconds are kept (false after [`Recorder::stream_only`]).
    pub fn keeps_closed(&self) -> bool {
        self.keep_closed
    }

    /// The per-second series' source when the closed seconds were written out as they
    /// closed: the digests of the joined seconds, in order.
    pub fn set_digests(&mut self, mut digests: Vec<SecondDigest>) {
        digests.sort_by_key(|d| d.second);
        self.digests = digests;
    }

    /// Puts back closed seconds kept elsewhere (the coordinator's merged seconds of a
    /// run whose agents kept none), in place of any the recorder has.
    pub fn set_closed_seconds(&mut self, mut closed: Vec<ClosedSecond>) {
        closed.sort_by_key(|c| c.second);
        self.closed = closed;
        self.digests.clear();
    }

    /// The digests the per-second series is made from: the ones set, else one per
    /// closed second.
    pub(crate) fn digests(&self) -> Result<Vec<SecondDigest>, MetricsError> {
        if !self.digests.is_empty() {
            return Ok(self.digests.clone());
        }
        self.closed.iter().map(SecondDigest::of).collect()
    }

    /// The digests set (empty unless [`Recorder::set_digests`] was called or the
    /// recorder came from a snapshot that carried some).
    pub fn kept_digests(&self) -> &[SecondDigest] {
        &self.digests
    }

    /// A recorder made of closed seconds alone: its counters and whole-run histograms
    /// are the seconds' sums. For a run whose recorders never came (every injector lost
    /// before its final record): the seconds that reached the coordinator are all that
    /// is known of it, so figures the seconds do not carry (sends, status codes, the
    /// TLS and body histograms) stay empty rather than guessed. With `digests` (the
    /// seconds were stored as they closed, and some of their histograms dropped since)
    /// the per-second series is the digests' and no closed second is kept.
    pub fn from_seconds(
        closed: Vec<ClosedSecond>,
        digests: Vec<SecondDigest>,
    ) -> Result<Recorder, MetricsError> {
        let mut r = Recorder::new();
        for c in &closed {
            r.totals.counts.add(&c.counts);
            for m in Metric::ALL {
                crate::hist::add(&mut r.run[m as usize], &c.hist(m)?)?;
            }
        }
        if digests.is_empty() {
            r.set_closed_seconds(closed);
        } else {
            r.set_digests(digests);
        }
        Ok(r)
    }
}
