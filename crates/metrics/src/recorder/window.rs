//! Which per-second window a sample goes in, and when a window is final.
//!
//! Two keys (docs/methodology.md, "Per-second windows"):
//! - [`WindowKey::Completion`] (the default: `volley bench`, study steps): a sample goes
//!   in the second it completed in. One window is open at a time; it closes as soon as
//!   a later instant is seen.
//! - [`WindowKey::Intended`] (the injector agents): a sample goes in the second it was
//!   meant to be sent in (the open-loop schedule's instant; in a closed loop the actual
//!   send). A request sent in second `s` may complete up to a timeout later, so window
//!   `s` stays open until `(s + 1) s + hold`: several windows are open at once, in a
//!   ring of `ceil(hold) + 2` windows allocated when the key is set. A sample whose
//!   window has already closed (it completed more than `hold` after its second ended:
//!   it waited for a connection before its timeout started, or the hold was cut to
//!   [`MAX_HOLD`]) is counted in [`Recorder::late_samples`] and recorded in the oldest
//!   open window, so that the windows still add up to every sample recorded.
//!
//! Both keys run the same code: completion is the ring of one window with no hold, in
//! which every sample goes in the open window. The hot path compares the sample's
//! completion instant with the next instant at which anything closes (`edge_ns`), and
//! only crossing it (once per second) does work.
//!
//! Events that are not requests (connection counts, cap hits) and the generator's
//! resource readings go in the window of the wall-clock second they happened in: with
//! the intended key that is the second whose load the generator was offering then.

use std::time::Duration;

use super::{ClosedSecond, Counts, Recorder, SecondResources, METRICS, NS_PER_S};
use crate::hist::{self, Hist};
use crate::resources;

/// The longest hold the ring is sized for. Each open window holds seven full-range
/// histograms (about 0.66 MB). Measured with `examples/flat_memory.rs` (two workers,
/// 5 million requests): a 10 s hold adds 7 MB of RSS per worker, a 60 s hold 39 MB. A
/// longer timeout gets this hold, and slower requests become late samples (counted).
pub const MAX_HOLD: Duration = Duration::from_secs(60);

/// What a per-second window is keyed by (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum WindowKey {
    /// The second a sample completed in; a window closes when its second ends.
    #[default]
    Completion,
    /// The second a sample was meant to be sent in; a window stays open for `hold`
    /// (the request timeout) after its second ends, and is final then.
    Intended {
        /// How long after its second a window waits for the requests sent in it.
        hold: Duration,
    },
}

impl WindowKey {
    /// Whether windows are keyed by intended send time.
    pub fn by_intended(self) -> bool {
        matches!(self, WindowKey::Intended { .. })
    }

    /// The hold, cut to [`MAX_HOLD`], in ns (0 for completion).
    fn hold_ns(self) -> u64 {
        match self {
            WindowKey::Completion => 0,
            WindowKey::Intended { hold } => hold.min(MAX_HOLD).as_nanos() as u64,
        }
    }
}

/// One open window: the live counters and histograms of one second.
pub(crate) struct Window {
    pub(crate) counts: Counts,
    pub(crate) hists: [Hist; METRICS],
    pub(crate) resources: Option<SecondResources>,
}

impl Window {
    pub(crate) fn new() -> Window {
        Window {
            counts: Counts::default(),
            hists: std::array::from_fn(|_| hist::new_hist()),
            resources: None,
        }
    }

    fn is_empty(&self) -> bool {
        self.resources.is_none()
            && self.counts == Counts::default()
            && self.hists.iter().all(Hist::is_empty)
    }

    /// Empties the window for its next second. Resetting a histogram zeroes its whole
    /// count array (8 KB, up to 94 KB once grown to the hour); one that holds nothing is all zeros already (every
    /// record adds to its total), so only the histograms this second used are reset.
    fn reset(&mut self) {
        self.counts = Counts::default();
        self.resources = None;
        for h in self.hists.iter_mut().filter(|h| !h.is_empty()) {
            h.reset();
        }
    }
}

/// Where worker 0 is in its once-per-second resource readings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResourceMark {
    at_ns: u64,
    cpu_ns: u64,
    psi_us: Option<u64>,
    /// Worker 0's own run time and run delay (schedstat).
    sched_ns: Option<(u64, u64)>,
    /// The CPU worker 0 was on (`sched_getcpu`, a vDSO call): which CPU's neighbours
    /// it may have waited behind.
    on_cpu: Option<u32>,
}

fn read_mark(now_ns: u64) -> Option<ResourceMark> {
    Some(ResourceMark {
        at_ns: now_ns,
        cpu_ns: resources::generator_cpu_ns()?,
        psi_us: resources::cpu_pressure_some_us(),
        sched_ns: resources::thread_schedstat_ns(),
        on_cpu: resources::current_cpu(),
    })
}

impl Recorder {
    /// Keys this recorder's per-second windows by `key` (default
    /// [`WindowKey::Completion`]). Give every worker the same key: merging recorders
    /// keyed differently is refused. Set it before the first sample: it sizes the ring
    /// of open windows (allocated here, never on the hot path) and empties it.
    pub fn with_window_key(mut self, key: WindowKey) -> Recorder {
        self.key = key;
        self.hold_ns = key.hold_ns();
        self.by_intended = key.by_intended();
        // Open at once: the seconds from (now - hold) to now, both partial.
        let open = if self.by_intended {
            self.hold_ns.div_ceil(NS_PER_S) as usize + 2
        } else {
            1
        };
        self.ring = (0..open).map(|_| Window::new()).collect();
        self.head = 0;
        self
    }

    /// How this recorder's windows are keyed.
    pub fn window_key(&self) -> WindowKey {
        self.key
    }

    /// Samples that arrived after their intended second's window had closed, and were
    /// put in the oldest window still open (always 0 with the completion key).
    pub fn late_samples(&self) -> u64 {
        self.late
    }

    /// The ring slot of `second`, which must be open (`base <= second < base + len`).
    #[inline]
    pub(super) fn slot(&self, second: u64) -> usize {
        let len = self.ring.len();
        let i = self.head + ((second.saturating_sub(self.base)) as usize).min(len - 1);
        if i >= len {
            i - len
        } else {
            i
        }
    }

    /// The slot a sample goes in; counts it late when its window has closed.
    #[inline]
    pub(super) fn slot_of(&mut self, intended_ns: u64, done_ns: u64) -> usize {
        if !self.by_intended {
            return self.head;
        }
        // intended <= done for every sample; min() keeps a malformed one in the ring.
        let mut second = intended_ns.min(done_ns) / NS_PER_S;
        if second < self.base {
            self.late += 1;
            second = self.base;
        }
        self.slot(second)
    }

    /// The oldest second still open at `now_ns`: every second whose end plus the hold
    /// is later than `now_ns`.
    fn first_open(&self, now_ns: u64) -> u64 {
        now_ns.saturating_sub(self.hold_ns) / NS_PER_S
    }

    /// Called when an instant reaches `edge_ns`: starts the recorder, reads resources
    /// when the wall-clock second changes, closes every window whose hold has passed.
    pub(super) fn cross(&mut self, now_ns: u64) {
        let now_s = now_ns / NS_PER_S;
        if !self.started {
            self.started = true;
            self.wall_s = now_s;
            self.base = self.first_open(now_ns);
            if self.measure_resources {
                self.mark = read_mark(now_ns);
            }
        }
        if now_s > self.wall_s {
            if self.measure_resources {
                let i = self.slot(self.wall_s);
                if let Some(r) = self.read_resources(now_ns) {
                    self.ring[i].resources = Some(r);
                }
            }
            self.wall_s = now_s;
        }
        let new_base = self.first_open(now_ns).max(self.base);
        let stop = new_base.min(self.base + self.ring.len() as u64);
        while self.base < stop {
            self.close_slot(self.head, self.base, true);
            self.head = (self.head + 1) % self.ring.len();
            self.base += 1;
        }
        // A jump past the whole ring leaves every window empty: any rotation will do.
        self.base = new_base;
        self.set_edge();
    }

    /// The next instant at which the wall-clock second changes or window `base` closes.
    pub(super) fn set_edge(&mut self) {
        self.edge_ns = (self.wall_s + 1)
            .saturating_mul(NS_PER_S)
            .min((self.base + 1).saturating_mul(NS_PER_S) + self.hold_ns);
    }

    /// The generator's CPU since the last reading, as cores, and its CPU pressure.
    fn read_resources(&mut self, now_ns: u64) -> Option<SecondResources> {
        let (prev, next) = (self.mark?, read_mark(now_ns)?);
        let dt_ns = next.at_ns.saturating_sub(prev.at_ns);
        if dt_ns == 0 {
            return None;
        }
        let pressure = match (prev.psi_us, next.psi_us) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 * 1e3 / dt_ns as f64),
            _ => None,
        };
        let (ran, waited) = match (prev.sched_ns, next.sched_ns) {
            (Some(a), Some(b)) => (
                Some(b.0.saturating_sub(a.0) as f64 / 1e6),
                Some(b.1.saturating_sub(a.1) as f64 / 1e6),
            ),
            _ => (None, None),
        };
        self.mark = Some(next);
        Some(SecondResources {
            cpu_cores_used: next.cpu_ns.saturating_sub(prev.cpu_ns) as f64 / dt_ns as f64,
            cpu_pressure: pressure,
            pacer_wait_ms: waited,
            pacer_run_ms: ran,
            pacer_cpus: [prev.on_cpu, next.on_cpu]
                .into_iter()
                .flatten()
                .filter(|&c| c < 64)
                .fold(0, |m, c| m | 1 << c),
        })
    }

    /// Encodes and stores the window in `slot` as second `second`, then resets it for
    /// reuse. `mark_empty`: an empty window is still streamed as a bare mark (while the
    /// run goes, so a quiet worker says it is past that second).
    fn close_slot(&mut self, slot: usize, second: u64, mark_empty: bool) {
        let empty = self.ring[slot].is_empty();
        if (mark_empty || !empty) && self.offload_slot(slot, second, empty) {
            return;
        }
        let w = &mut self.ring[slot];
        if empty {
            if let (true, Some(stream)) = (mark_empty, &self.stream) {
                stream.send(second, None);
            }
            return;
        }
        let closed = super::offload::encode(
            &mut self.serializer,
            second,
            w.counts,
            &w.hists,
            w.resources,
            &mut self.error,
        );
        w.reset();
        if let Some(stream) = &self.stream {
            stream.send(second, Some(closed.clone()));
        }
        self.keep(closed);
    }

    /// Adds a closed window to the list, which stays sorted with one entry per second:
    /// a second closes twice only if samples arrive after [`Recorder::finish`], and
    /// then the two are joined. A [`Recorder::stream_only`] recorder keeps none.
    pub(super) fn keep(&mut self, closed: ClosedSecond) {
        if !self.keep_closed {
            // Written out by the stream's receiver, which keeps its digest.
            return;
        }
        let at = match self.closed.last() {
            None => Err(0),
            Some(last) if last.second < closed.second => Err(self.closed.len()),
            Some(_) => self
                .closed
                .binary_search_by_key(&closed.second, |c| c.second),
        };
        match at {
            Err(i) => self.closed.insert(i, closed),
            Ok(i) => {
                let prev = std::mem::replace(&mut self.closed[i], closed);
                match super::merge::join_second(prev, self.closed[i].clone(), &mut self.serializer)
                {
                    Ok(j) => self.closed[i] = j,
                    Err(e) => {
                        self.error.get_or_insert(e);
                    }
                }
            }
        }
    }

    /// Closes every open window that holds anything, in order, without waiting for its
    /// hold (the run is over). Called by merge and close; harmless to call twice. No
    /// resource reading: no real instant is known here, and one would be misattributed.
    pub fn finish(&mut self) {
        if !self.started {
            return;
        }
        for off in 0..self.ring.len() as u64 {
            let second = self.base + off;
            let slot = self.slot(second);
            self.close_slot(slot, second, false);
        }
        self.join_offload();
    }
}
