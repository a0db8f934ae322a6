//! Merging recorders: every worker's recorder added into one, second by second, before
//! the summary is derived (histograms added, never percentiles averaged).

use super::*;

impl Recorder {
    /// Adds `other` (another worker's recorder) into this one: whole-run histograms
    /// added, per-second windows merged by second index.
    pub fn merge(&mut self, mut other: Recorder) -> Result<(), MetricsError> {
        self.finish();
        other.finish();
        if let Some(e) = self.error.take().or(other.error.take()) {
            return Err(e);
        }
        if self.warmup_ns != other.warmup_ns {
            // Their seconds are shifted by different amounts: adding them would mix
            // windows that are not the same wall-clock second.
            return Err(MetricsError::WarmupMismatch {
                a_ns: self.warmup_ns,
                b_ns: other.warmup_ns,
            });
        }
        if self.key.by_intended() != other.key.by_intended() {
            // Same seconds, different meaning: one by completion, one by intended send.
            return Err(MetricsError::WindowKeyMismatch);
        }
        self.warm.add(&other.warm);
        self.late += other.late;
        for (a, b) in self.run.iter_mut().zip(other.run.iter()) {
            hist::add(a, b)?;
        }
        hist::add(&mut self.run_total, &other.run_total)?;
        hist::add(&mut self.run_tls, &other.run_tls)?;
        hist::add(&mut self.run_body, &other.run_body)?;
        let (a, b) = (&mut self.totals, &other.totals);
        a.counts.add(&b.counts);
        for (x, y) in a.status_codes.iter_mut().zip(b.status_codes.iter()) {
            *x += y;
        }
        a.sent += b.sent;
        a.dispatched += b.dispatched;
        a.first_dispatched_ns = a.first_dispatched_ns.min(b.first_dispatched_ns);
        a.last_dispatched_ns = a.last_dispatched_ns.max(b.last_dispatched_ns);
        a.wire_body_bytes += b.wire_body_bytes;
        a.first_sent_ns = a.first_sent_ns.min(b.first_sent_ns);
        a.last_sent_ns = a.last_sent_ns.max(b.last_sent_ns);
        a.first_intended_ns = a.first_intended_ns.min(b.first_intended_ns);
        a.last_intended_ns = a.last_intended_ns.max(b.last_intended_ns);
        a.last_done_ns = a.last_done_ns.max(b.last_done_ns);
        a.opened += b.opened;
        add_series(&mut self.sent_by_second, &other.sent_by_second);
        add_series(&mut self.dispatched_by_second, &other.dispatched_by_second);
        add_series(&mut self.scheduled_by_second, &other.scheduled_by_second);
        self.closed = merge_seconds(
            std::mem::take(&mut self.closed),
            other.closed,
            &mut self.serializer,
        )?;
        // Digests are quantiles, which cannot be added: one side's digests stand only
        // when the other has none; two sides' are dropped, and the caller puts back
        // the joined seconds (the coordinator's, `set_closed_seconds`).
        self.digests = match (self.digests.is_empty(), other.digests.is_empty()) {
            (_, true) => std::mem::take(&mut self.digests),
            (true, false) => other.digests,
            (false, false) => Vec::new(),
        };
        self.started |= other.started;
        self.base = self.base.max(other.base);
        self.wall_s = self.wall_s.max(other.wall_s);
        self.set_edge();
        Ok(())
    }

    /// Merges a list of per-worker recorders into one.
    pub fn merge_all(recorders: Vec<Recorder>) -> Result<Recorder, MetricsError> {
        let mut it = recorders.into_iter();
        let mut first = it.next().unwrap_or_default();
        first.finish();
        for r in it {
            first.merge(r)?;
        }
        if let Some(e) = first.error.take() {
            return Err(e);
        }
        Ok(first)
    }
}

pub(super) fn add_series(into: &mut Vec<u64>, from: &[u64]) {
    if into.len() < from.len() {
        into.resize(from.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(from) {
        *a += b;
    }
}

pub(super) fn merge_seconds(
    a: Vec<ClosedSecond>,
    b: Vec<ClosedSecond>,
    ser: &mut hist::Encoder,
) -> Result<Vec<ClosedSecond>, MetricsError> {
    use std::cmp::Ordering;
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    loop {
        let order = match (a.peek(), b.peek()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(x), Some(y)) => x.second.cmp(&y.second),
        };
        match order {
            Ordering::Less => out.extend(a.next()),
            Ordering::Greater => out.extend(b.next()),
            Ordering::Equal => {
                if let (Some(x), Some(y)) = (a.next(), b.next()) {
                    out.push(join_second(x, y, ser)?);
                }
            }
        }
    }
    Ok(out)
}

/// Two workers' records of the same second, added.
pub(super) fn join_second(
    mut x: ClosedSecond,
    mut y: ClosedSecond,
    ser: &mut hist::Encoder,
) -> Result<ClosedSecond, MetricsError> {
    x.unshare();
    y.unshare();
    x.counts.add(&y.counts);
    for (xb, yb) in x.hists.iter_mut().zip(y.hists) {
        if yb.is_empty() {
            continue;
        }
        if xb.is_empty() {
            *xb = yb;
            continue;
        }
        let mut h = hist::decode(xb)?;
        hist::add(&mut h, &hist::decode(&yb)?)?;
        *xb = hist::encode(ser, &h)?;
    }
    x.resources = x.resources.or(y.resources);
    x.share();
    Ok(x)
}
