//! The recorder as the engine's [`Sink`]: the per-request hot path.
//!
//! Every call first compares its instant with `edge_ns` (the next instant at which a
//! window closes, see `window.rs`), then adds to the open window its sample belongs
//! to and to the whole-run figures.

use super::*;
use volley_engine::{Sample, Sink};

fn bump(series: &mut Vec<u64>, second: u64) {
    let i = second as usize;
    if series.len() <= i {
        // Grows once per second of run time, not per request.
        series.resize(i + 1, 0);
    }
    series[i] += 1;
}

/// `s` with every instant moved `w` earlier (the warm-up boundary becomes 0). Only
/// called on measured samples, whose intended instant is >= `w`; a first byte of 0
/// means "none" and stays 0.
#[inline]
fn shifted(s: &Sample, w: u64) -> Sample {
    Sample {
        intended_ns: s.intended_ns - w,
        dispatched_ns: s.dispatched_ns.saturating_sub(w),
        sent_ns: s.sent_ns.saturating_sub(w),
        first_byte_ns: if s.first_byte_ns == 0 {
            0
        } else {
            s.first_byte_ns.saturating_sub(w)
        },
        done_ns: s.done_ns.saturating_sub(w),
        ..*s
    }
}

/// One sample in a window's or the run's counters: its outcome, status class and bytes.
#[inline]
fn count(c: &mut Counts, s: &Sample) {
    c.completed += 1;
    match s.error {
        None => c.ok += 1,
        Some(k) => c.errors[k.index()] += 1,
    }
    let class = if s.status == 0 {
        0
    } else {
        (s.status as usize / 100).clamp(1, 5)
    };
    c.status_class[class] += 1;
    c.wire_bytes += s.wire_bytes;
    c.body_bytes += s.body_bytes;
}

impl Sink for Recorder {
    #[inline]
    fn record(&mut self, s: &Sample) {
        if let Some(f) = &self.first {
            f.see(s);
        }
        if s.intended_ns < self.warmup_ns {
            self.warm.samples += 1;
            return;
        }
        // Decided before shifting: a sample never sent may carry sent_ns = 0.
        let was_sent = s.sent_ns >= s.intended_ns;
        let was_dispatched = s.dispatched_ns >= s.intended_ns;
        let s = &shifted(s, self.warmup_ns);
        self.at(s.done_ns);
        let slot = self.slot_of(s.intended_ns, s.done_ns);
        let live = &mut self.ring[slot];
        let kind = s.error;
        let responded = matches!(kind, None | Some(ErrorKind::Status));
        let censored = matches!(kind, Some(ErrorKind::Timeout | ErrorKind::InFlight));

        count(&mut live.counts, s);
        let t = &mut self.totals;
        count(&mut t.counts, s);
        t.wire_body_bytes += s.wire_body_bytes;
        t.status_codes[(s.status as usize).min(599)] += 1;
        t.first_intended_ns = t.first_intended_ns.min(s.intended_ns);
        t.last_intended_ns = t.last_intended_ns.max(s.intended_ns);
        t.last_done_ns = t.last_done_ns.max(s.done_ns);
        if s.connect_ns > 0 || kind == Some(ErrorKind::Connect) {
            t.opened += 1;
        }
        bump(&mut self.scheduled_by_second, s.intended_ns / NS_PER_S);
        if was_dispatched {
            t.dispatched += 1;
            t.first_dispatched_ns = t.first_dispatched_ns.min(s.dispatched_ns);
            t.last_dispatched_ns = t.last_dispatched_ns.max(s.dispatched_ns);
            bump(&mut self.dispatched_by_second, s.dispatched_ns / NS_PER_S);
        }
        if was_sent {
            t.sent += 1;
            t.first_sent_ns = t.first_sent_ns.min(s.sent_ns);
            t.last_sent_ns = t.last_sent_ns.max(s.sent_ns);
            bump(&mut self.sent_by_second, s.sent_ns / NS_PER_S);
            for (m, v) in [
                (Metric::SendLag, s.send_lag_ns()),
                (Metric::SchedLag, s.sched_lag_ns()),
                (Metric::ConnWait, s.conn_wait_ns()),
            ] {
                hist::record_ns(&mut live.hists[m as usize], v);
                hist::record_ns(&mut self.run[m as usize], v);
            }
        }
        if responded || censored {
            let (resp, serv) = (s.response_ns(), if was_sent { s.service_ns() } else { 0 });
            for h in [&mut live.hists[0], &mut self.run[0]] {
                hist::record_ns(h, resp);
            }
            if was_sent {
                for h in [&mut live.hists[1], &mut self.run[1]] {
                    hist::record_ns(h, serv);
                }
                hist::record_ns(&mut self.run_total, s.connect_ns.saturating_add(serv));
            }
        }
        if responded {
            if let Some(ttfb) = s.ttfb_ns() {
                for h in [&mut live.hists[2], &mut self.run[2]] {
                    hist::record_ns(h, ttfb);
                }
            }
            for h in [&mut live.hists[3], &mut self.run[3]] {
                hist::record_ns(h, s.connect_ns);
            }
            if s.tls_handshake_ns > 0 {
                hist::record_ns(&mut self.run_tls, s.tls_handshake_ns);
            }
            if s.first_byte_ns != 0 {
                hist::record_ns(
                    &mut self.run_body,
                    s.done_ns.saturating_sub(s.first_byte_ns),
                );
            }
        }
    }

    fn connections(&mut self, now_ns: u64, open_now: u32) {
        if now_ns < self.warmup_ns {
            let w = &mut self.warm;
            w.max_open = w.max_open.max(open_now);
            if now_ns >= w.last_event_ns {
                w.last_event_ns = now_ns;
                w.open_at_boundary = open_now;
            }
            return;
        }
        self.at(now_ns - self.warmup_ns);
        let slot = self.slot(self.wall_s);
        let live = &mut self.ring[slot].counts;
        live.max_open = live.max_open.max(open_now);
        self.totals.counts.max_open = self.totals.counts.max_open.max(open_now);
    }

    fn cap_hit(&mut self, now_ns: u64) {
        if now_ns < self.warmup_ns {
            self.warm.cap_hits += 1;
            return;
        }
        self.at(now_ns - self.warmup_ns);
        let slot = self.slot(self.wall_s);
        self.ring[slot].counts.cap_hits += 1;
        self.totals.counts.cap_hits += 1;
    }

    fn tick(&mut self, now_ns: u64) {
        // Before the boundary there is no measured window to close.
        if now_ns < self.warmup_ns {
            return;
        }
        self.at(now_ns - self.warmup_ns);
    }
}

impl Recorder {
    /// Brings the windows up to the measured instant `now_ns`.
    #[inline]
    fn at(&mut self, now_ns: u64) {
        if now_ns >= self.edge_ns {
            self.cross(now_ns);
        }
    }
}
