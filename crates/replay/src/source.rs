//! A log as the engine's request source: the planned requests of [`crate::schedule`],
//! each at its instant, on its client's lane ([`volley_engine::Request::lane`]).
//!
//! Place in the flow: `log -> reader -> planner -> **source** -> engine`. One reader
//! thread (the producer) streams the file through the [`Planner`], builds each
//! request's bytes once, and hands it to the worker that owns its client (client
//! index modulo workers, so a client's requests stay in one worker and in order) over
//! a bounded channel, in batches: memory is the channels' depth, whatever the log's
//! size. Each
//! worker's [`RequestSource`] peeks its next request's instant for the engine's
//! scheduled pacer ([`volley_engine::LoadModel::Scheduled`]) and compares each answer
//! with the logged one ([`Fidelity`]), merged once when the worker ends.

use crate::fidelity::{path_group, Answer, Fidelity, Logged};
use crate::schedule::{Planner, ReplayOptions};
use crate::{LogError, LogReader, ReaderOptions};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex};
use volley_engine::{NextInstant, Request, RequestSource, RequestTemplate, Sample, SourceFactory};

/// Requests read ahead per worker: enough that the reader is never what a worker
/// waits for, few enough that memory stays small (a request is ~200 bytes).
const DEPTH: usize = 4096;

/// Requests handed over at once. One channel message per request cost a wake-up (a
/// context switch on a shared core) per request between the reader and a worker:
/// at 20k req/s on one core that, not the parsing, was most of the reader's time.
/// The reader never waits for the log, only for a full queue, and it hands every
/// partial batch over before it waits, so a batch holds no request back.
const BATCH: usize = 256;

/// One planned request on its way to a worker.
struct Item {
    req: Arc<Request>,
    at_ns: u64,
    logged: Logged,
}

/// What every request carries besides its method and target.
#[derive(Debug, Clone)]
pub struct RequestShape {
    /// The Host header: the replay target's (the logged host is not sent).
    pub host: String,
    /// Extra headers given by the user (`-H`); none is invented from the log.
    pub headers: Vec<(String, String)>,
    /// Keep-alive (false: `Connection: close` on every request).
    pub keep_alive: bool,
}

/// A replay's inputs: the log, how to read and plan it, and the request shape.
#[derive(Debug, Clone)]
pub struct ReplaySpec {
    /// The log file.
    pub path: PathBuf,
    /// How to read it.
    pub read: ReaderOptions,
    /// What to replay and how fast.
    pub plan: ReplayOptions,
    /// Host and headers.
    pub shape: RequestShape,
    /// Replay the log again and again (until the run's limit); each pass starts one
    /// mean gap after the previous pass's last request.
    pub repeat: bool,
}

/// What the reader thread and the workers leave for the caller.
#[derive(Debug, Default)]
struct Outcome {
    fidelity: Fidelity,
    /// A failure of the reader during the run (the CLI reads the log once before,
    /// so this is rare: a file changed under it).
    error: Option<String>,
    /// Requests built that the engine refused (a target with a space, say).
    unbuildable: u64,
}

/// The engine's [`SourceFactory`] for a replay.
pub struct ReplayFactory {
    spec: ReplaySpec,
    /// The receivers of the current run, taken by `make`.
    receivers: Mutex<Vec<Option<Receiver<Vec<Item>>>>>,
    outcome: Arc<Mutex<Outcome>>,
}

impl ReplayFactory {
    /// A factory for `spec`; the file is read when the run starts (each run reads it
    /// anew, so repeats replay the same log).
    pub fn new(spec: ReplaySpec) -> ReplayFactory {
        ReplayFactory {
            spec,
            receivers: Mutex::new(Vec::new()),
            outcome: Arc::new(Mutex::new(Outcome::default())),
        }
    }

    /// The comparison with the log so far (complete once the run has ended), and
    /// resets it for the next run.
    pub fn take_fidelity(&self) -> Fidelity {
        let mut o = self.outcome.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut o.fidelity)
    }

    /// A failure of the reader during the last run, if any.
    pub fn take_error(&self) -> Option<String> {
        let mut o = self.outcome.lock().unwrap_or_else(|e| e.into_inner());
        o.error.take()
    }

    /// Starts the reader thread for a run with `workers` workers.
    fn start(&self, workers: usize) -> Vec<Option<Receiver<Vec<Item>>>> {
        let (txs, rxs): (Vec<_>, Vec<_>) =
            (0..workers).map(|_| sync_channel(DEPTH / BATCH)).unzip();
        let spec = self.spec.clone();
        let outcome = Arc::clone(&self.outcome);
        std::thread::Builder::new()
            .name("volley-replay-reader".into())
            .spawn(move || {
                if let Err(e) = produce(&spec, &txs, &outcome) {
                    let mut o = outcome.lock().unwrap_or_else(|e| e.into_inner());
                    o.error = Some(e.to_string());
                }
            })
            .map(|_| ())
            .unwrap_or_else(|e| {
                let mut o = self.outcome.lock().unwrap_or_else(|e| e.into_inner());
                o.error = Some(format!("cannot start the log reader: {e}"));
            });
        rxs.into_iter().map(Some).collect()
    }
}

/// Requests the replay of `spec` schedules before `window` (passes of a looped log
/// included), read by the same rule as the run: the offered load of a step of that
/// length, which a log's own shape (a quiet start, a burst) makes differ from its mean.
pub fn scheduled_within(spec: &ReplaySpec, window: std::time::Duration) -> Result<u64, LogError> {
    let end_ns = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX);
    let (mut offset_ns, mut n) = (0u64, 0u64);
    loop {
        let mut planner = Planner::new(spec.plan.clone());
        let mut last_ns = offset_ns;
        for r in LogReader::open(&spec.path, spec.read.clone())? {
            let Some(p) = planner.plan(r?) else { continue };
            last_ns = offset_ns + p.intended_us * 1_000;
            if last_ns >= end_ns {
                return Ok(n);
            }
            n += 1;
        }
        let planned = planner.counts().planned;
        if !spec.repeat || planned == 0 {
            return Ok(n);
        }
        offset_ns = last_ns + (last_ns - offset_ns) / planned.max(1);
    }
}

/// Each worker's batch being filled, and its queue.
struct Batches<'a> {
    txs: &'a [SyncSender<Vec<Item>>],
    bufs: Vec<Vec<Item>>,
}

impl Batches<'_> {
    /// Queues `item` for worker `w`; `false` once that worker has gone (the run's
    /// limit came, so the run has ended).
    fn push(&mut self, w: usize, item: Item) -> bool {
        self.bufs[w].push(item);
        if self.bufs[w].len() < BATCH {
            return true;
        }
        let batch = std::mem::replace(&mut self.bufs[w], Vec::with_capacity(BATCH));
        match self.txs[w].try_send(batch) {
            Ok(()) => true,
            Err(TrySendError::Disconnected(_)) => false,
            Err(TrySendError::Full(batch)) => {
                // About to wait: hand every other worker its partial batch first, so
                // none runs dry while this one's queue is full.
                for (o, tx) in self.txs.iter().enumerate() {
                    if o != w && !self.bufs[o].is_empty() {
                        let part = std::mem::take(&mut self.bufs[o]);
                        if let Err(TrySendError::Full(part)) = tx.try_send(part) {
                            self.bufs[o] = part;
                        }
                    }
                }
                self.txs[w].send(batch).is_ok()
            }
        }
    }

    /// Hands over every partial batch (the log's end): waits for room as needed.
    fn flush(&mut self) {
        for (w, tx) in self.txs.iter().enumerate() {
            let part = std::mem::take(&mut self.bufs[w]);
            if !part.is_empty() {
                let _ = tx.send(part);
            }
        }
    }
}

/// Reads the log (again and again with `repeat`) and sends each planned request to its
/// worker, in batches; ends when the log ends or every worker has gone.
fn produce(
    spec: &ReplaySpec,
    txs: &[SyncSender<Vec<Item>>],
    outcome: &Mutex<Outcome>,
) -> Result<(), LogError> {
    let workers = txs.len().max(1);
    let mut batches = Batches {
        txs,
        bufs: (0..txs.len()).map(|_| Vec::with_capacity(BATCH)).collect(),
    };
    let mut offset_ns = 0u64;
    let mut unbuildable = 0;
    let result = (|| {
        loop {
            let reader = LogReader::open(&spec.path, spec.read.clone())?;
            let mut planner = Planner::new(spec.plan.clone());
            let mut last_ns = 0u64;
            for r in reader {
                let Some(p) = planner.plan(r?) else { continue };
                let at_ns = offset_ns + p.intended_us * 1_000;
                last_ns = at_ns;
                let t = RequestTemplate {
                    method: p.method,
                    path: p.target,
                    host: spec.shape.host.clone(),
                    headers: spec.shape.headers.clone(),
                    body: None,
                    keep_alive: spec.shape.keep_alive,
                };
                let Ok(mut req) = t.build(0) else {
                    unbuildable += 1;
                    continue;
                };
                req.lane = Some(p.client as u32);
                let logged = Logged {
                    status: p.logged_status,
                    bytes: p.logged_bytes,
                    request_time_us: p.logged_request_time_us,
                    group: path_group(&req.path),
                };
                let item = Item {
                    req: Arc::new(req),
                    at_ns,
                    logged,
                };
                if !batches.push(p.client % workers, item) {
                    // That worker has ended (the run's limit came): so has the run.
                    return Ok(());
                }
            }
            let planned = planner.counts().planned;
            if !spec.repeat || planned == 0 {
                batches.flush();
                return Ok(());
            }
            // The next pass starts one mean gap after this one's last request.
            offset_ns = last_ns + (last_ns - offset_ns) / planned.max(1);
        }
    })();
    outcome
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .unbuildable += unbuildable;
    result
}

impl SourceFactory for ReplayFactory {
    fn make(&self, worker: usize, workers: usize) -> Box<dyn RequestSource> {
        let mut rxs = self.receivers.lock().unwrap_or_else(|e| e.into_inner());
        if worker == 0 || rxs.len() != workers {
            *rxs = self.start(workers);
        }
        let rx = rxs.get_mut(worker).and_then(Option::take);
        Box::new(ReplaySource {
            rx,
            batch: Vec::new().into_iter(),
            next: None,
            logged: HashMap::new(),
            seq: 0,
            fidelity: Fidelity::default(),
            outcome: Arc::clone(&self.outcome),
        })
    }
}

/// One worker's share of the replay.
struct ReplaySource {
    rx: Option<Receiver<Vec<Item>>>,
    /// The batch being taken from, in order.
    batch: std::vec::IntoIter<Item>,
    next: Option<Item>,
    /// The log's word on each request in flight, by request index.
    logged: HashMap<u32, Logged>,
    seq: u32,
    fidelity: Fidelity,
    outcome: Arc<Mutex<Outcome>>,
}

impl RequestSource for ReplaySource {
    fn next_instant(&mut self) -> NextInstant {
        if self.next.is_none() {
            self.next = self.batch.next();
        }
        if self.next.is_none() {
            let Some(rx) = &self.rx else {
                return NextInstant::Over;
            };
            match rx.try_recv() {
                Ok(batch) => {
                    self.batch = batch.into_iter();
                    self.next = self.batch.next();
                }
                Err(TryRecvError::Empty) => return NextInstant::Pending,
                Err(TryRecvError::Disconnected) => return NextInstant::Over,
            }
        }
        self.next
            .as_ref()
            .map_or(NextInstant::Over, |i| NextInstant::At(i.at_ns))
    }

    fn next_request(&mut self) -> Option<Arc<Request>> {
        if self.next.is_none() {
            let _ = self.next_instant();
        }
        let item = self.next.take()?;
        // The index names the request until its sample comes back; the bytes are
        // shared, so the index is set on a copy only when another holds the Arc.
        let mut req = item.req;
        let index = self.seq;
        self.seq = self.seq.wrapping_add(1);
        Arc::make_mut(&mut req).index = index;
        self.logged.insert(index, item.logged);
        Some(req)
    }

    fn on_sample(&mut self, request: &Request, s: &Sample) {
        let Some(logged) = self.logged.remove(&request.index) else {
            return;
        };
        let us = |ns: u64| ns / 1_000;
        self.fidelity.add(
            &logged,
            Answer {
                send_lag_us: (s.sent_ns > 0).then(|| us(s.sent_ns.saturating_sub(s.intended_ns))),
                status: s.status,
                body_bytes: s.wire_body_bytes,
                response_us: us(s.done_ns.saturating_sub(s.intended_ns)),
            },
        );
    }
}

impl Drop for ReplaySource {
    fn drop(&mut self) {
        let mut o = self.outcome.lock().unwrap_or_else(|e| e.into_inner());
        o.fidelity.merge(&self.fidelity);
    }
}
