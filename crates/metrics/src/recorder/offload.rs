//! Closing a window off the pacing thread.
//!
//! Closing a second encodes seven histograms with DEFLATE, compares two of them and
//! zeroes the ones used (8 KB each, up to 94 KB for one that grew to the hour's range):
//! up to a few hundred microseconds that,
//! done on a worker's own thread, make every request due at that instant late by as
//! much, once a second (docs/methodology.md, "The generator checks itself": volley's
//! lateness must be the machine's, not its own bookkeeping's). With
//! [`Recorder::with_offload`] a worker only swaps the window's histograms for empty ones
//! and hands the full ones to its encoder thread, which runs at the lowest scheduling
//! class (`SCHED_IDLE`): on a core shared with the worker it runs in the worker's idle
//! gaps and yields to it at once, on another core it runs beside it.
//!
//! The encoder resets each histogram it encoded and hands it back for reuse, so a run
//! holds a bounded number of histogram sets. When [`MAX_OUTSTANDING`] sets are in the
//! encoder's hands (a worker so busy the encoder never got a gap), the worker waits for
//! one back: the encoding then costs what it cost inline, never unbounded memory. Every
//! window, empty marks included, goes through the encoder in order, so a live stream
//! sees the seconds in the order they closed.

use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;

use super::stream::SecondStream;
use super::{ClosedSecond, Counts, Metric, Recorder, SecondResources, METRICS};
use crate::hist::{self, Hist};
use crate::MetricsError;

/// Histogram sets in the encoder's hands before a worker waits for one back.
const MAX_OUTSTANDING: usize = 4;

/// One window's contents, or an empty window's mark, for the encoder. At most one job a
/// second per worker crosses the channel, so a Close's size beside the small variants
/// costs nothing worth an allocation per second to shrink it.
#[expect(
    clippy::large_enum_variant,
    reason = "one job a second; boxing Close would allocate on every window close"
)]
enum Job {
    Close {
        second: u64,
        counts: Counts,
        /// Boxed: seven histograms' headers are most of a job's size.
        hists: Box<[Hist; METRICS]>,
        resources: Option<SecondResources>,
    },
    /// An empty window, streamed as a bare mark.
    Mark(u64),
    /// Stream the windows closed from now on to this stream too.
    Stream(SecondStream),
    /// Stop streaming.
    DropStream,
}

/// What the encoder hands back when the worker is done with it.
struct Encoded {
    closed: Vec<ClosedSecond>,
    error: Option<MetricsError>,
}

/// A worker's encoder thread and the channels to it.
pub(super) struct Offload {
    jobs: Sender<Job>,
    spares: Receiver<[Hist; METRICS]>,
    /// Histogram sets sent and not yet handed back.
    outstanding: usize,
    thread: JoinHandle<Encoded>,
}

impl Offload {
    /// Starts the encoder, which takes over `stream`; `keep`: it also keeps every
    /// window it encodes, for the worker to take at the end.
    fn start(stream: Option<SecondStream>, keep: bool) -> std::io::Result<Offload> {
        let (jobs, rx) = mpsc::channel::<Job>();
        let (back, spares) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("volley-encode".into())
            .spawn(move || {
                lowest_priority();
                encode_loop(rx, back, stream, keep)
            })?;
        Ok(Offload {
            jobs,
            spares,
            outstanding: 0,
            thread,
        })
    }

    /// An empty histogram set for the window just handed over: one the encoder gave
    /// back, else a new one while few are out, else (the encoder never got the CPU) the
    /// next one the encoder gives back.
    fn spare(&mut self) -> [Hist; METRICS] {
        if let Ok(h) = self.spares.try_recv() {
            self.outstanding -= 1;
            return h;
        }
        if self.outstanding < MAX_OUTSTANDING {
            return std::array::from_fn(|_| hist::new_hist());
        }
        match self.spares.recv() {
            Ok(h) => {
                self.outstanding -= 1;
                h
            }
            // The encoder is gone (it cannot panic short of a bug): carry on with a
            // new set rather than stop the run.
            Err(_) => std::array::from_fn(|_| hist::new_hist()),
        }
    }
}

/// Puts the calling thread in `SCHED_IDLE`; if refused, at nice 19. Best effort: the
/// encoder works at any priority, only the worker's pacing would suffer.
fn lowest_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid, initialised struct.
    let idle = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } == 0;
    if !idle {
        // SAFETY: plain syscall on the calling thread's id.
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, 19);
        }
    }
}

fn encode_loop(
    rx: Receiver<Job>,
    back: Sender<[Hist; METRICS]>,
    mut stream: Option<SecondStream>,
    keep: bool,
) -> Encoded {
    let mut ser = hist::Encoder::new();
    let mut out = Encoded {
        closed: Vec::new(),
        error: None,
    };
    for job in rx {
        match job {
            Job::Close {
                second,
                counts,
                mut hists,
                resources,
            } => {
                let closed = encode(&mut ser, second, counts, &hists, resources, &mut out.error);
                for h in hists.iter_mut().filter(|h| !h.is_empty()) {
                    h.reset();
                }
                // The worker may have finished and stopped taking spares: fine.
                let _ = back.send(*hists);
                if keep {
                    if let Some(s) = &stream {
                        s.send(second, Some(closed.clone()));
                    }
                    out.closed.push(closed);
                } else if let Some(s) = &stream {
                    s.send(second, Some(closed));
                }
            }
            Job::Mark(second) => {
                if let Some(s) = &stream {
                    s.send(second, None);
                }
            }
            Job::Stream(s) => stream = Some(s),
            Job::DropStream => stream = None,
        }
    }
    out
}

/// One window as stored: its histograms encoded, the service-time one left out when it
/// equals the response-time one. The first encode failure goes in `error`.
pub(super) fn encode(
    ser: &mut hist::Encoder,
    second: u64,
    counts: Counts,
    h: &[Hist; METRICS],
    resources: Option<SecondResources>,
    error: &mut Option<MetricsError>,
) -> ClosedSecond {
    let mut hists: [Vec<u8>; METRICS] = Default::default();
    let (r, s) = (Metric::Response as usize, Metric::Service as usize);
    let same = h[s] == h[r];
    for (i, x) in h.iter().enumerate() {
        if same && i == s {
            continue;
        }
        match hist::encode(ser, x) {
            Ok(b) => hists[i] = b,
            Err(e) => {
                error.get_or_insert(e);
            }
        }
    }
    ClosedSecond {
        second,
        counts,
        hists,
        service_is_response: same && !h[r].is_empty(),
        resources,
    }
}

impl Recorder {
    /// Closes windows on an encoder thread of this recorder's own instead of the
    /// worker's thread (see the module doc). Give it to recorders that a load's workers
    /// record into; a recorder used on one thread after the run needs none. If the
    /// thread cannot be started, windows are closed inline as before.
    pub fn with_offload(mut self) -> Recorder {
        if self.offload.is_none() {
            if let Ok(o) = Offload::start(self.stream.take(), self.keep_closed) {
                self.offload = Some(o);
            }
        }
        self
    }

    /// Hands the window in `slot` to the encoder, if there is one; `false` when the
    /// caller must close it inline.
    pub(super) fn offload_slot(&mut self, slot: usize, second: u64, empty: bool) -> bool {
        let Some(o) = &mut self.offload else {
            return false;
        };
        let job = if empty {
            Job::Mark(second)
        } else {
            let w = &mut self.ring[slot];
            let fresh = o.spare();
            let hists = Box::new(std::mem::replace(&mut w.hists, fresh));
            let job = Job::Close {
                second,
                counts: w.counts,
                hists,
                resources: w.resources,
            };
            w.counts = Counts::default();
            w.resources = None;
            o.outstanding += 1;
            job
        };
        if o.jobs.send(job).is_err() {
            // Only if the encoder died; its windows are lost, and finish says so.
            self.error.get_or_insert(MetricsError::EncoderLost);
        }
        true
    }

    /// Routes a stream change through the encoder when it holds the stream.
    pub(super) fn offload_stream(&mut self, stream: Option<SecondStream>) -> Option<SecondStream> {
        let Some(o) = &self.offload else {
            return stream;
        };
        let _ = o.jobs.send(match stream {
            Some(s) => Job::Stream(s),
            None => Job::DropStream,
        });
        None
    }

    /// Waits for the encoder to finish every window handed to it and keeps them.
    pub(super) fn join_offload(&mut self) {
        let Some(o) = self.offload.take() else {
            return;
        };
        drop(o.jobs);
        match o.thread.join() {
            Ok(done) => {
                if let Some(e) = done.error {
                    self.error.get_or_insert(e);
                }
                for c in done.closed {
                    self.keep(c);
                }
            }
            Err(_) => {
                self.error.get_or_insert(MetricsError::EncoderLost);
            }
        }
    }
}
