//! A recorder as bytes: what an injector agent sends at the end of its share so that the
//! coordinator can merge every agent exactly, as the workers of one run are merged.
//!
//! Nothing is summarised on the way: histograms travel as HdrHistogram V2 bytes, the
//! counters and per-second series as they are. [`Recorder::from_snapshot`] can move the
//! whole record later by whole seconds (an agent that started `k` seconds after the
//! run's T0), so that merged windows are the same instant of the run.

use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

use super::{
    ClosedSecond, Counts, Recorder, RunTotals, SecondDigest, SecondResources, Warmup, WindowKey,
    METRICS, NS_PER_S,
};
use crate::hist;
use crate::MetricsError;

/// One closed window as bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SecondSnapshot {
    /// Second of run time.
    pub second: u64,
    /// Its counters.
    pub counts: Counts,
    /// V2 bytes by metric index (empty = empty histogram).
    pub hists: Vec<ByteBuf>,
    /// Service time is stored as response time.
    pub service_is_response: bool,
    /// Generator resources, when read.
    pub resources: Option<SecondResources>,
}

/// A finished recorder as bytes (see the module doc).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecorderSnapshot {
    seconds: Vec<SecondSnapshot>,
    run: Vec<ByteBuf>,
    run_total: ByteBuf,
    run_tls: ByteBuf,
    run_body: ByteBuf,
    counts: Counts,
    status_codes: Vec<u64>,
    sent: u64,
    dispatched: u64,
    first_dispatched_ns: u64,
    last_dispatched_ns: u64,
    wire_body_bytes: u64,
    first_sent_ns: u64,
    last_sent_ns: u64,
    first_intended_ns: u64,
    last_intended_ns: u64,
    last_done_ns: u64,
    opened: u64,
    sent_by_second: Vec<u64>,
    dispatched_by_second: Vec<u64>,
    scheduled_by_second: Vec<u64>,
    warmup_ns: u64,
    warm: Warmup,
    /// What the windows are keyed by, and the samples that came after their window.
    #[serde(default)]
    window_key: WindowKey,
    #[serde(default)]
    late_samples: u64,
    /// The seconds' digests when the seconds themselves were sent as they closed and
    /// not kept (an agent's share: the coordinator has them), else empty.
    #[serde(default)]
    digests: Vec<SecondDigest>,
}

impl From<ClosedSecond> for SecondSnapshot {
    fn from(c: ClosedSecond) -> Self {
        SecondSnapshot {
            second: c.second,
            counts: c.counts,
            hists: c.hists.into_iter().map(ByteBuf::from).collect(),
            service_is_response: c.service_is_response,
            resources: c.resources,
        }
    }
}

impl TryFrom<SecondSnapshot> for ClosedSecond {
    type Error = MetricsError;

    fn try_from(s: SecondSnapshot) -> Result<Self, MetricsError> {
        let hists: [Vec<u8>; METRICS] = s
            .hists
            .into_iter()
            .map(ByteBuf::into_vec)
            .collect::<Vec<_>>()
            .try_into()
            .map_err(|_| MetricsError::Snapshot("a second without one histogram per metric"))?;
        Ok(ClosedSecond {
            second: s.second,
            counts: s.counts,
            hists,
            service_is_response: s.service_is_response,
            resources: s.resources,
        })
    }
}

/// `ns` moved `by` later, leaving the "none yet" sentinels (0 and `u64::MAX`) alone.
fn later(ns: u64, by: u64) -> u64 {
    if ns == 0 || ns == u64::MAX {
        ns
    } else {
        ns.saturating_add(by)
    }
}

fn padded(v: Vec<u64>, by: usize) -> Vec<u64> {
    let mut out = vec![0; by];
    out.extend(v);
    out
}

impl Recorder {
    /// Finishes the recorder and returns it as bytes.
    pub fn snapshot(mut self) -> Result<RecorderSnapshot, MetricsError> {
        self.finish();
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let ser = &mut self.serializer;
        let mut enc = |h: &hist::Hist| hist::encode(ser, h).map(ByteBuf::from);
        let run = self
            .run
            .iter()
            .map(&mut enc)
            .collect::<Result<Vec<_>, _>>()?;
        let (run_total, run_tls, run_body) = (
            enc(&self.run_total)?,
            enc(&self.run_tls)?,
            enc(&self.run_body)?,
        );
        let t = self.totals;
        Ok(RecorderSnapshot {
            seconds: self.closed.into_iter().map(SecondSnapshot::from).collect(),
            run,
            run_total,
            run_tls,
            run_body,
            counts: t.counts,
            status_codes: t.status_codes.to_vec(),
            sent: t.sent,
            dispatched: t.dispatched,
            first_dispatched_ns: t.first_dispatched_ns,
            last_dispatched_ns: t.last_dispatched_ns,
            wire_body_bytes: t.wire_body_bytes,
            first_sent_ns: t.first_sent_ns,
            last_sent_ns: t.last_sent_ns,
            first_intended_ns: t.first_intended_ns,
            last_intended_ns: t.last_intended_ns,
            last_done_ns: t.last_done_ns,
            opened: t.opened,
            sent_by_second: self.sent_by_second,
            dispatched_by_second: self.dispatched_by_second,
            scheduled_by_second: self.scheduled_by_second,
            warmup_ns: self.warmup_ns,
            warm: self.warm,
            window_key: self.key,
            late_samples: self.late,
            digests: self.digests,
        })
    }

    /// Rebuilds a finished recorder from `s`, every instant and second moved
    /// `shift_s` seconds later. It keeps the snapshot's window key (so merging checks
    /// it) but not its ring of open windows: it is for merging and closing, not for
    /// recording more samples.
    pub fn from_snapshot(s: RecorderSnapshot, shift_s: u64) -> Result<Recorder, MetricsError> {
        let by = shift_s * NS_PER_S;
        let pad = usize::try_from(shift_s).unwrap_or(usize::MAX);
        let dec = |b: &ByteBuf| hist::decode(b);
        let run: [hist::Hist; METRICS] = s
            .run
            .iter()
            .map(dec)
            .collect::<Result<Vec<_>, _>>()?
            .try_into()
            .map_err(|_| MetricsError::Snapshot("not one whole-run histogram per metric"))?;
        let mut status_codes = Box::new([0u64; 600]);
        for (a, b) in status_codes.iter_mut().zip(&s.status_codes) {
            *a = *b;
        }
        let closed = s
            .seconds
            .into_iter()
            .map(|mut w| {
                w.second += shift_s;
                ClosedSecond::try_from(w)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let digests = s
            .digests
            .into_iter()
            .map(|mut d| {
                d.second += shift_s;
                d
            })
            .collect::<Vec<_>>();
        let last = closed
            .last()
            .map(|c| c.second)
            .max(digests.last().map(|d| d.second));
        let mut r = Recorder::new();
        r.digests = digests;
        r.key = s.window_key;
        r.late = s.late_samples;
        r.base = last.unwrap_or(shift_s);
        r.wall_s = r.base;
        r.set_edge();
        r.started = true;
        r.closed = closed;
        r.run = run;
        r.run_total = dec(&s.run_total)?;
        r.run_tls = dec(&s.run_tls)?;
        r.run_body = dec(&s.run_body)?;
        r.totals = RunTotals {
            counts: s.counts,
            status_codes,
            sent: s.sent,
            dispatched: s.dispatched,
            first_dispatched_ns: later(s.first_dispatched_ns, by),
            last_dispatched_ns: later(s.last_dispatched_ns, by),
            wire_body_bytes: s.wire_body_bytes,
            first_sent_ns: later(s.first_sent_ns, by),
            last_sent_ns: later(s.last_sent_ns, by),
            first_intended_ns: later(s.first_intended_ns, by),
            last_intended_ns: later(s.last_intended_ns, by),
            last_done_ns: later(s.last_done_ns, by),
            opened: s.opened,
        };
        r.sent_by_second = padded(s.sent_by_second, pad);
        r.dispatched_by_second = padded(s.dispatched_by_second, pad);
        r.scheduled_by_second = padded(s.scheduled_by_second, pad);
        r.warmup_ns = s.warmup_ns;
        r.warm = s.warm;
        Ok(r)
    }
}
