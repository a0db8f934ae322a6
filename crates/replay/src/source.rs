//! A log as the engine's request source: the planned requests of [`crate::schedule`],
//! each at its instant, on its client's lane ([`volley_engine::Request::lane`]).
//!
//! Place in the flow: `log -> reader -> planner -> **source** -> engine`. One reader
//! thread (the producer) streams the file through the [`Planner`], builds each
//! request's bytes once, and hands it to the worker that owns its client (client
//! index modulo workers, so a client's requests stay in one worker and in order), in
//! batches, through one bounded [`Handover`]: memory is its depth, whatever the log's
//! size. Each worker's [`RequestSource`] peeks its next request's instant for the
//! engine's scheduled pacer ([`volley_engine::LoadModel::Scheduled`]) and compares each
//! answer with the logged one ([`Fidelity`]), merged once when the worker ends.
//!
//! The reader must never be what a worker waits for, nor take the worker's core when
//! an arrival is due (docs/methodology.md, "Replaying a log"): it reads far ahead
//! ([`READ_AHEAD`], all of it before the run's clock starts), sleeps until the workers
//! have taken half of that ([`REFILL_AT`], so it wakes a few times a second at 50k
//! req/s, not per batch), and runs on a CPU of its own when the process may use more
//! CPUs than it has workers (`keep_off_the_workers`). When it may not, there is no
//! reader thread: the workers read the log themselves, in slices of the gaps between
//! their arrivals that the engine offers ([`RequestSource::idle`],
//! `Handover::read_some`), whichever worker is idle first.

use crate::fidelity::{Answer, Fidelity, Logged};
use crate::producer::Producer;
use crate::schedule::{Planner, ReplayOptions};
use crate::{LogError, LogReader, ReaderOptions};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use volley_engine::{NextInstant, Request, RequestSource, Sample, SourceFactory};

/// Requests read ahead, all workers together: at ~400 bytes each (the request's bytes,
/// method and target, the logged answer) about 13 MB at most, whatever the log's size;
/// at 50k req/s, 0.65 s of schedule, so a reader held off its core for that long
/// still hands each request over before it is due. 4,096 per worker before: 82 ms
/// at 50k req/s, and a wake-up of the reader per batch.
pub const READ_AHEAD: usize = 32_768;

/// The reader, once the read-ahead is full, sleeps until the workers hold no more than
/// this: it then reads [`READ_AHEAD`] / 2 requests in one go (a few wake-ups a second
/// at 50k req/s) rather than one batch each time a worker takes one.
pub const REFILL_AT: usize = READ_AHEAD / 2;

/// Requests handed over at once: one lock, no wake-up, per batch. One channel message
/// per request once cost a context switch per request between the reader and a worker
/// on a shared core, more than the parsing. Before the reader sleeps it hands every
/// partial batch over, so a batch holds no request back.
const BATCH: usize = 256;

/// One planned request on its way to a worker.
pub(crate) struct Item {
    pub(crate) req: Arc<Request>,
    pub(crate) at_ns: u64,
    pub(crate) logged: Logged,
}

/// The reader's queues to the workers, one lock for all: the bound is on the total,
/// so a worker whose clients are quiet for a while never holds the reader back from
/// another whose clients are busy (a bound per worker did).
///
/// Written here rather than taken from a channel crate: what it needs beyond a bounded
/// channel is the hysteresis (wake the reader at [`REFILL_AT`], not at each free slot)
/// and the total over several queues, a few lines over a `Mutex` and a `Condvar`.
struct Handover {
    state: Mutex<Queues>,
    /// The reader waits here for room.
    room: Condvar,
    /// The run's start waits here for the reader's read-ahead.
    ready: Condvar,
    /// No reader thread: the workers read the log in their idle slices
    /// ([`Handover::read_some`]), whichever gets the lock.
    inline: Option<Mutex<Inline>>,
}

/// The reading the workers share when there is no reader thread.
struct Inline {
    producer: Producer,
    batches: Batches,
}

struct Queues {
    batches: Vec<VecDeque<Vec<Item>>>,
    /// Requests in all queues.
    queued: usize,
    reader_waiting: bool,
    /// The reader has handed over all it will.
    done: bool,
    /// Workers that have ended; a request for one ends the reader (the run has ended).
    gone: Vec<bool>,
}

impl Queues {
    /// The reader has read all it reads ahead: it sleeps for room, or has ended.
    fn read_ahead(&self) -> bool {
        self.reader_waiting || self.done
    }
}

/// What became of a batch the reader handed over.
enum Put {
    /// Queued, and there is room for more.
    Room,
    /// Queued, and the read-ahead is full: the reader hands its partial batches over
    /// and [`Handover::wait_for_room`].
    Full,
    /// Its worker has ended, so has the run.
    Gone,
}

/// What a worker finds in its queue.
enum Take {
    Batch(Vec<Item>),
    /// Nothing yet; `behind`: the workers had taken everything the reader had
    /// handed over (it is behind them, not merely ahead of this worker's next
    /// client's request).
    Empty {
        behind: bool,
    },
    /// Nothing more: the reader has ended.
    Over,
}

impl Handover {
    fn new(workers: usize) -> Handover {
        Handover {
            state: Mutex::new(Queues {
                batches: (0..workers).map(|_| VecDeque::new()).collect(),
                queued: 0,
                reader_waiting: false,
                done: false,
                gone: vec![false; workers],
            }),
            room: Condvar::new(),
            ready: Condvar::new(),
            inline: None,
        }
    }

    /// A hand-over whose workers read the log themselves, through `producer`.
    fn inline(workers: usize, producer: Producer) -> Handover {
        let mut h = Handover::new(workers);
        h.inline = Some(Mutex::new(Inline {
            producer,
            batches: Batches::new(workers),
        }));
        h
    }

    /// A worker's slice of the reading, without a reader thread: reads until `until_ns`
    /// on `clock` or the read-ahead is full, and hands what it read over (partial
    /// batches too, so nothing read waits for a later slice). False when it read
    /// nothing: another worker holds the reading, the read-ahead is full, the log has
    /// ended, or there is no inline reading.
    fn read_some(&self, until_ns: u64, clock: &dyn Fn() -> u64) -> bool {
        let Some(inline) = &self.inline else {
            return false;
        };
        let Ok(mut guard) = inline.try_lock() else {
            return false;
        };
        let Inline { producer, batches } = &mut *guard;
        if producer.ended || self.lock().queued >= READ_AHEAD {
            return false;
        }
        let workers = batches.bufs.len();
        let mut read = false;
        loop {
            match producer.next() {
                Ok(Some((client, item))) => {
                    read = true;
                    match batches.push(self, client % workers, item) {
                        Put::Room => {}
                        Put::Full => break,
                        Put::Gone => {
                            producer.stop();
                            break;
                        }
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    producer.fail(&e);
                    break;
                }
            }
            if clock() >= until_ns {
                break;
            }
        }
        batches.flush(self);
        if producer.ended {
            self.finish();
        }
        read
    }

    fn workers(&self) -> usize {
        self.lock().gone.len()
    }

    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `batch` for worker `w` (the reader).
    fn put(&self, w: usize, batch: Vec<Item>) -> Put {
        let mut q = self.lock();
        if q.gone[w] {
            return Put::Gone;
        }
        q.queued += batch.len();
        q.batches[w].push_back(batch);
        if q.queued >= READ_AHEAD {
            Put::Full
        } else {
            Put::Room
        }
    }

    /// Sleeps until the workers hold [`REFILL_AT`] requests or fewer, or every worker
    /// has gone (then `false`).
    fn wait_for_room(&self) -> bool {
        let mut q = self.lock();
        while q.queued > REFILL_AT && !q.gone.iter().all(|g| *g) {
            q.reader_waiting = true;
            // The read-ahead is full: the run may start (`wait_ready`).
            self.ready.notify_all();
            q = self.room.wait(q).unwrap_or_else(|e| e.into_inner());
        }
        !q.gone.iter().all(|g| *g)
    }

    /// The reader has ended.
    fn finish(&self) {
        self.lock().done = true;
        self.ready.notify_all();
    }

    /// Sleeps until the reader has filled its read-ahead (it then sleeps for room), or
    /// ended: all it reads before the run is read on no worker's time.
    fn wait_ready(&self) {
        let mut q = self.lock();
        while !q.read_ahead() {
            q = self.ready.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Worker `w`'s next batch.
    fn take(&self, w: usize) -> Take {
        let mut q = self.lock();
        match q.batches[w].pop_front() {
            Some(batch) => {
                q.queued -= batch.len();
                self.wake_reader(&mut q);
                Take::Batch(batch)
            }
            None if q.done => Take::Over,
            None => Take::Empty {
                behind: q.queued == 0,
            },
        }
    }

    /// Worker `w` has ended: its queue is dropped, and a reader waiting for room it
    /// held is woken.
    ///
    /// Once every worker has gone, the inline reading ends too: its reader and the
    /// reorder window it holds (up to the window's seconds of log) go now, not when
    /// the factory makes the next run's. The queues' lock is let go first: a worker's
    /// slice takes the reading's lock, then the queues'.
    fn leave(&self, w: usize) {
        let all_gone = {
            let mut q = self.lock();
            q.gone[w] = true;
            let left: usize = q.batches[w].drain(..).map(|b| b.len()).sum();
            q.queued -= left;
            self.room.notify_one();
            q.gone.iter().all(|g| *g)
        };
        if let Some(inline) = self.inline.as_ref().filter(|_| all_gone) {
            inline
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .producer
                .stop();
        }
    }

    fn wake_reader(&self, q: &mut Queues) {
        if q.reader_waiting && (q.queued <= REFILL_AT || q.gone.iter().all(|g| *g)) {
            q.reader_waiting = false;
            self.room.notify_one();
        }
    }
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
pub(crate) struct Outcome {
    fidelity: Fidelity,
    /// A failure of the reader during the run (the CLI reads the log once before,
    /// so this is rare: a file changed under it).
    pub(crate) error: Option<String>,
    /// Requests built that the engine refused (a target with a space, say).
    pub(crate) unbuildable: u64,
}

/// The engine's [`SourceFactory`] for a replay.
pub struct ReplayFactory {
    spec: ReplaySpec,
    /// The current run's hand-over, made by `make` for worker 0.
    handover: Mutex<Option<Arc<Handover>>>,
    outcome: Arc<Mutex<Outcome>>,
}

impl ReplayFactory {
    /// A factory for `spec`; the file is read when the run starts (each run reads it
    /// anew, so repeats replay the same log).
    pub fn new(spec: ReplaySpec) -> ReplayFactory {
        ReplayFactory {
            spec,
            handover: Mutex::new(None),
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

    /// Starts the reading for a run with `workers` workers: a reader thread on a CPU of
    /// its own when the process may use more CPUs than it has workers, else the
    /// workers' own idle slices (the module doc).
    fn start(&self, workers: usize) -> Arc<Handover> {
        let producer = Producer::new(self.spec.clone(), Arc::clone(&self.outcome));
        let cpus = volley_monitor::stall::allowed_cpus();
        let Some(&spare) = cpus.last().filter(|_| cpus.len() > workers) else {
            let handover = Arc::new(Handover::inline(workers, producer));
            // The read-ahead is read before the run's clock starts, on no worker's
            // time between arrivals.
            while handover.read_some(u64::MAX, &|| 0) {}
            return handover;
        };
        let handover = Arc::new(Handover::new(workers));
        let theirs = Arc::clone(&handover);
        let spawned = std::thread::Builder::new()
            .name("volley-replay-reader".into())
            .spawn(move || {
                // Whatever happens to the reader (a panic too), the workers see its end.
                struct Finish(Arc<Handover>);
                impl Drop for Finish {
                    fn drop(&mut self) {
                        self.0.finish();
                    }
                }
                let finish = Finish(theirs);
                let theirs = &finish.0;
                keep_off_the_workers(spare);
                let mut producer = producer;
                if let Err(e) = produce(&mut producer, theirs) {
                    producer.fail(&e);
                }
            });
        if let Err(e) = spawned {
            handover.finish();
            let mut o = self.outcome.lock().unwrap_or_else(|e| e.into_inner());
            o.error = Some(format!("cannot start the log reader: {e}"));
        } else {
            // The engine makes its sources before its clock starts: wait here for the
            // reader's whole read-ahead (a reorder window read, then READ_AHEAD
            // requests built), so neither the schedule's first arrivals wait for that
            // read nor does the reader take the workers' CPU for it as the run starts.
            handover.wait_ready();
        }
        handover
    }
}

/// The reader thread's place beside the workers (the module doc): on `cpu`, the last
/// the process may use, which no worker needs, as a batch thread (`SCHED_BATCH`: its
/// wake-ups never preempt anyone). Best effort: a kernel that refuses leaves the
/// reader as it was.
///
/// Without a spare CPU the reader once shared a worker's as an idle-class thread
/// (`SCHED_IDLE`), meant to run on the time the worker left; but a pacing worker at a
/// high rate never leaves its CPU (it polls through the gaps between arrivals), and
/// the reader got 1% of it: at 50k req/s on one CPU the worker ran out of requests
/// every second and sent 5.6k req/s, its lag growing a second per second. A batch
/// thread there held the CPU to the next tick (4 ms) once it had it. Hence the
/// workers' own idle slices then ([`Handover::read_some`]).
fn keep_off_the_workers(cpu: usize) {
    // SAFETY: sched_getscheduler and sched_setscheduler on the calling thread (pid 0),
    // with a sched_param we own; SCHED_BATCH takes priority 0.
    unsafe {
        if libc::sched_getscheduler(0) == libc::SCHED_OTHER {
            let param = libc::sched_param { sched_priority: 0 };
            libc::sched_setscheduler(0, libc::SCHED_BATCH, &param);
        }
    }
    volley_monitor::stall::pin_to(cpu);
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

/// Each worker's batch being filled, on the reader's side of the [`Handover`].
struct Batches {
    bufs: Vec<Vec<Item>>,
}

impl Batches {
    fn new(workers: usize) -> Batches {
        Batches {
            bufs: (0..workers).map(|_| Vec::with_capacity(BATCH)).collect(),
        }
    }

    /// Adds `item` to worker `w`'s batch, and hands the batch over once it is full:
    /// what became of it (`Room` while it is still filling).
    fn push(&mut self, handover: &Handover, w: usize, item: Item) -> Put {
        self.bufs[w].push(item);
        if self.bufs[w].len() < BATCH {
            return Put::Room;
        }
        let batch = std::mem::replace(&mut self.bufs[w], Vec::with_capacity(BATCH));
        handover.put(w, batch)
    }

    /// The reader thread's [`Batches::push`]: sleeps while the read-ahead is full,
    /// after handing its partial batches over; false once that worker (or every
    /// worker) has gone: the run's limit came.
    fn push_or_wait(&mut self, handover: &Handover, w: usize, item: Item) -> bool {
        match self.push(handover, w, item) {
            Put::Room => true,
            Put::Gone => false,
            Put::Full => {
                // About to sleep: no request waits in a partial batch meanwhile.
                self.flush(handover);
                handover.wait_for_room()
            }
        }
    }

    /// Hands over every partial batch (before the reader sleeps, at the end of a
    /// worker's slice of reading, and at the log's end).
    fn flush(&mut self, handover: &Handover) {
        for (w, buf) in self.bufs.iter_mut().enumerate() {
            if !buf.is_empty() {
                let _ = handover.put(w, std::mem::take(buf));
            }
        }
    }
}

/// The reader thread: reads the log and sends each planned request to its worker, in
/// batches, sleeping while the read-ahead is full; ends when the log ends or every
/// worker has gone.
fn produce(producer: &mut Producer, handover: &Handover) -> Result<(), LogError> {
    let workers = handover.workers();
    let mut batches = Batches::new(workers);
    while let Some((client, item)) = producer.next()? {
        if !batches.push_or_wait(handover, client % workers, item) {
            producer.stop();
            return Ok(());
        }
    }
    batches.flush(handover);
    Ok(())
}

impl SourceFactory for ReplayFactory {
    fn make(&self, worker: usize, workers: usize) -> Box<dyn RequestSource> {
        let mut current = self.handover.lock().unwrap_or_else(|e| e.into_inner());
        if worker == 0 || current.as_ref().is_none_or(|h| h.workers() != workers) {
            // The engine makes its sources before its clock starts: `start` returns
            // once the read-ahead is read.
            *current = Some(self.start(workers));
        }
        Box::new(ReplaySource::new(
            current.clone().filter(|_| worker < workers),
            worker,
            Arc::clone(&self.outcome),
        ))
    }
}

/// One worker's share of the replay.
struct ReplaySource {
    /// `None`: nothing to take (a worker index past the run's count).
    handover: Option<Arc<Handover>>,
    worker: usize,
    /// The batch being taken from, in order.
    batch: std::vec::IntoIter<Item>,
    next: Option<Item>,
    /// A first request came (an empty queue before it is the run's start, not the
    /// reader falling behind).
    started: bool,
    /// Waiting for the reader (counted once per wait).
    waiting: bool,
    /// The log's word on each request in flight, by request index.
    logged: HashMap<u32, Logged>,
    seq: u32,
    fidelity: Fidelity,
    outcome: Arc<Mutex<Outcome>>,
}

impl ReplaySource {
    fn new(
        handover: Option<Arc<Handover>>,
        worker: usize,
        outcome: Arc<Mutex<Outcome>>,
    ) -> ReplaySource {
        ReplaySource {
            handover,
            worker,
            batch: Vec::new().into_iter(),
            next: None,
            started: false,
            waiting: false,
            logged: HashMap::new(),
            seq: 0,
            fidelity: Fidelity::default(),
            outcome,
        }
    }
}

impl RequestSource for ReplaySource {
    fn next_instant(&mut self) -> NextInstant {
        if self.next.is_none() {
            self.next = self.batch.next();
        }
        if self.next.is_none() {
            let Some(handover) = &self.handover else {
                return NextInstant::Over;
            };
            match handover.take(self.worker) {
                Take::Batch(batch) => {
                    self.batch = batch.into_iter();
                    self.next = self.batch.next();
                    self.waiting = false;
                }
                Take::Empty { behind } => {
                    if behind && self.started && !self.waiting {
                        self.waiting = true;
                        self.fidelity.reader_behind();
                    }
                    return NextInstant::Pending;
                }
                Take::Over => return NextInstant::Over,
            }
        }
        self.started = true;
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

    fn idle(&mut self, until_ns: u64, clock: &dyn Fn() -> u64) -> bool {
        self.handover
            .as_ref()
            .is_some_and(|h| h.read_some(until_ns, clock))
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
        if let Some(h) = &self.handover {
            h.leave(self.worker);
        }
        let mut o = self.outcome.lock().unwrap_or_else(|e| e.into_inner());
        o.fidelity.merge(&self.fidelity);
    }
}

#[cfg(test)]
#[path = "source_tests.rs"]
mod tests;
