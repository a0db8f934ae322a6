//! The target's time per request without the links volley shaped, measured from this
//! host just before a shaped step: the "unshaped time" of the link-bound rule
//! (docs/methodology.md, "Which side bound a step"; `volley_analysis::link`).
//!
//! Why measure it: behind a link with an added delay, a step's time per request is
//! the delay plus what the server takes; without the server's own part the rule can
//! only say link-bound when the delay alone is most of the time. The injectors reach the
//! target through the shaped link; this host reaches it over the lab's own veth, which
//! volley does not shape, so the same requests at the same concurrency from here give
//! the server's part.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use volley_engine::{Live, Sample, Sink, StopCondition, Wire};
use volley_targets::RunningTarget;

use crate::plan::{Cell, Workload};
use crate::step::{load_config, wire_for};

/// Requests of the measurement, at most: enough for a mean of per-request times.
const REQUESTS: u64 = 200;

/// How long it may take, at most: a bounded cost before each shaped step.
const LIMIT: Duration = Duration::from_secs(2);

/// Sums of the accepted requests' times: (done - sent + connect) in ns, and their count.
struct Sums(Arc<Mutex<(u128, u64)>>);

impl Sink for Sums {
    fn record(&mut self, s: &Sample) {
        if s.error.is_some() || s.done_ns < s.sent_ns {
            return;
        }
        let mut sums = self.0.lock().unwrap_or_else(|e| e.into_inner());
        sums.0 += u128::from(s.done_ns - s.sent_ns + s.connect_ns);
        sums.1 += 1;
    }
}

/// The mean time per request (service time plus the request's connect time, the same
/// definition as the step's `per_request_ms`) of the step's requests sent from this host
/// in a closed loop at the step's concurrency, as the stored `unshaped` object
/// (`per_request_ms`, `requests`); `None` when no request succeeded. Closed-loop: the
/// server's time per request, whatever the step's rate. A load that cannot run leaves
/// the rule without the unshaped time (the step itself then says why), never fails it.
pub(crate) fn measure(
    w: &Workload,
    cell: &Cell,
    target: &RunningTarget,
    stop_flag: &Arc<AtomicBool>,
) -> Option<super::extra::Unshaped> {
    let wire: Wire = wire_for(w, cell, target.addr, target.ca_file.as_deref());
    let stop = StopCondition {
        warmup: Duration::ZERO,
        requests: Some(REQUESTS),
        duration: Some(LIMIT),
    };
    let cfg = load_config(w, cell, None, target.addr, stop, Arc::clone(stop_flag)).ok()?;
    let sums = Arc::new(Mutex::new((0u128, 0u64)));
    volley_engine::run_with(&cfg, &wire, |_| Sums(Arc::clone(&sums)), &Live::new()).ok()?;
    let (total_ns, n) = *sums.lock().unwrap_or_else(|e| e.into_inner());
    (n > 0).then(|| super::extra::Unshaped {
        per_request_ms: total_ns as f64 / n as f64 / 1e6,
        requests: n,
        from: "this host, outside the shaped links, just before the step",
    })
}
