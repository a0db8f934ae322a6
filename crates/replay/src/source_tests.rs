//! The hand-over between the log reader and the workers, without a clock: what each
//! side finds, when the reader may sleep and what wakes it.

use super::*;
use std::sync::mpsc;
use std::time::Duration;
use volley_engine::RequestTemplate;

fn item(at_ns: u64) -> Item {
    let req = RequestTemplate::new("GET", "/a", "h")
        .build(0)
        .expect("valid");
    Item {
        req: Arc::new(req),
        at_ns,
        logged: Logged {
            status: Some(200),
            bytes: None,
            request_time_us: None,
            group: "/a".into(),
        },
    }
}

fn batch(n: usize) -> Vec<Item> {
    (0..n as u64).map(item).collect()
}

/// A reader's sleep ends within this (it only bounds a failure: a broken wake-up
/// fails the test rather than hanging it; no figure here is a time).
const HANG: Duration = Duration::from_secs(30);

/// Runs `wait_for_room` on a thread; its answer comes on the receiver.
fn sleeping_reader(h: &Arc<Handover>) -> mpsc::Receiver<bool> {
    let (tx, rx) = mpsc::channel();
    let h = Arc::clone(h);
    std::thread::spawn(move || {
        let _ = tx.send(h.wait_for_room());
    });
    rx
}

#[test]
fn a_worker_finds_its_batches_in_order_then_the_end() {
    let h = Handover::new(2);
    assert!(matches!(h.put(1, vec![item(5)]), Put::Room));
    assert!(matches!(h.put(1, vec![item(7)]), Put::Room));
    // Worker 0 has nothing yet, while worker 1 holds requests: not "behind".
    assert!(matches!(h.take(0), Take::Empty { behind: false }));
    let Take::Batch(b) = h.take(1) else {
        panic!("worker 1's first batch")
    };
    assert_eq!(b[0].at_ns, 5);
    let Take::Batch(b) = h.take(1) else {
        panic!("worker 1's second batch")
    };
    assert_eq!(b[0].at_ns, 7);
    // Everything handed over is taken and the reader still reads: it is behind.
    assert!(matches!(h.take(0), Take::Empty { behind: true }));
    h.finish();
    assert!(matches!(h.take(0), Take::Over));
    assert!(matches!(h.take(1), Take::Over));
}

#[test]
fn the_read_ahead_is_bounded_over_all_workers_and_refilled_at_half() {
    let h = Arc::new(Handover::new(2));
    let mut full_at = None;
    for k in 0..READ_AHEAD / BATCH {
        if let Put::Full = h.put(k % 2, batch(BATCH)) {
            full_at = Some(k);
            break;
        }
    }
    // Full after READ_AHEAD requests in all, whichever workers they went to.
    assert_eq!(full_at, Some(READ_AHEAD / BATCH - 1));
    let reader = sleeping_reader(&h);
    // Taking batches down to just above REFILL_AT does not wake the reader...
    let mut left = READ_AHEAD;
    let mut w = 0;
    while left - BATCH > REFILL_AT {
        assert!(matches!(h.take(w), Take::Batch(_)));
        left -= BATCH;
        w = 1 - w;
        assert!(reader.try_recv().is_err(), "woken with {left} queued");
    }
    // ...the batch that brings it to REFILL_AT does.
    assert!(matches!(h.take(w), Take::Batch(_)));
    assert_eq!(reader.recv_timeout(HANG), Ok(true));
}

#[test]
fn the_run_starts_once_the_read_ahead_is_full_or_the_log_has_ended() {
    let h = Arc::new(Handover::new(2));
    assert!(!h.lock().read_ahead());
    // A first batch is not the read-ahead: the reader would build the rest on the
    // workers' time, as the run starts.
    assert!(matches!(h.put(1, batch(BATCH)), Put::Room));
    assert!(!h.lock().read_ahead());
    while let Put::Room = h.put(0, batch(BATCH)) {}
    let reader = sleeping_reader(&h);
    let asleep = std::time::Instant::now();
    while !h.lock().reader_waiting {
        assert!(asleep.elapsed() < HANG, "the reader never slept for room");
        std::thread::yield_now();
    }
    assert!(h.lock().read_ahead());
    h.wait_ready();
    // Workers take; the reader, woken at REFILL_AT, reads again: the run is on.
    while let Take::Batch(_) = h.take(0) {}
    assert_eq!(reader.recv_timeout(HANG), Ok(true));
    // A log shorter than the read-ahead: its end starts the run.
    let short = Handover::new(1);
    let _ = short.put(0, batch(3));
    short.finish();
    assert!(short.lock().read_ahead());
    short.wait_ready();
}

#[test]
fn a_reader_sleeping_for_room_ends_when_every_worker_has_gone() {
    let h = Arc::new(Handover::new(2));
    while let Put::Room = h.put(0, batch(BATCH)) {}
    let reader = sleeping_reader(&h);
    // One worker gone is not the run's end: worker 0's queue is still full, so the
    // reader sleeps on; the last one gone ends it, and every batch is refused.
    h.leave(1);
    assert!(reader.try_recv().is_err());
    h.leave(0);
    assert_eq!(reader.recv_timeout(HANG), Ok(false));
    assert!(matches!(h.put(0, batch(1)), Put::Gone));
    assert!(matches!(h.put(1, batch(1)), Put::Gone));
}

#[test]
fn a_partial_batch_is_handed_over_before_the_reader_sleeps() {
    let h = Arc::new(Handover::new(2));
    let theirs = Arc::clone(&h);
    let (tx, pushed) = mpsc::channel();
    // One request for worker 1, then worker 0's batches until the read-ahead is
    // full: worker 1's lone request must not wait in the reader while it sleeps.
    std::thread::spawn(move || {
        let mut b = Batches::new(2);
        let mut ok = b.push_or_wait(&theirs, 1, item(1));
        for k in 0..READ_AHEAD {
            ok &= b.push_or_wait(&theirs, 0, item(k as u64));
        }
        let _ = tx.send(ok);
    });
    let asleep = std::time::Instant::now();
    while !h.lock().reader_waiting {
        assert!(
            asleep.elapsed() < HANG,
            "the reader never filled the read-ahead"
        );
        std::thread::yield_now();
    }
    let Take::Batch(got) = h.take(1) else {
        panic!("worker 1's request was held back")
    };
    assert_eq!(got.len(), 1);
    // Worker 0 takes what it was given; the reader wakes and hands the rest over.
    while let Take::Batch(_) = h.take(0) {}
    assert_eq!(pushed.recv_timeout(HANG), Ok(true));
}

#[test]
fn the_source_counts_a_wait_for_the_reader_once_and_not_at_the_start() {
    let h = Arc::new(Handover::new(1));
    let mut s = ReplaySource::new(Some(Arc::clone(&h)), 0, Arc::default());
    // The run's start: nothing read yet, not counted.
    assert_eq!(s.next_instant(), NextInstant::Pending);
    let _ = h.put(0, vec![item(3)]);
    assert_eq!(s.next_instant(), NextInstant::At(3));
    assert!(s.next_request().is_some());
    // Behind: counted once however often the worker asks.
    for _ in 0..3 {
        assert_eq!(s.next_instant(), NextInstant::Pending);
    }
    assert_eq!(s.fidelity.report().reader_behind, 1);
    let _ = h.put(0, vec![item(9)]);
    assert_eq!(s.next_instant(), NextInstant::At(9));
    h.finish();
    assert!(s.next_request().is_some());
    assert_eq!(s.next_instant(), NextInstant::Over);
}

/// A Combined log of `n` requests from `clients` addresses, one every 20 us, in
/// volley's own layout (microsecond stamps), in a fresh file: (its directory, removed
/// when dropped, so the caller keeps it to the test's end; the file's path).
fn log_file(name: &str, n: u64, clients: u64) -> (tempfile::TempDir, PathBuf) {
    use std::fmt::Write as _;
    let dir = tempfile::Builder::new()
        .prefix(&format!("volley-source-{name}-"))
        .tempdir()
        .expect("temp dir");
    let mut text = String::new();
    for i in 0..n {
        let us = 20 * i;
        let _ = writeln!(
            text,
            "10.0.0.{} - - [14/Nov/2023:22:13:{:02}.{:06} +0000] \"GET /p/{i} HTTP/1.1\" 200 10 \"-\" \"t\"",
            i % clients,
            us / 1_000_000,
            us % 1_000_000
        );
    }
    let path = dir.path().join("access.log");
    std::fs::write(&path, text).expect("write log");
    (dir, path)
}

fn spec(path: PathBuf) -> ReplaySpec {
    ReplaySpec {
        path,
        read: ReaderOptions::default(),
        plan: ReplayOptions::default(),
        shape: RequestShape {
            host: "h".into(),
            headers: Vec::new(),
            keep_alive: true,
        },
        repeat: false,
    }
}

/// Everything worker `w` finds until the end or an empty queue.
fn drain(h: &Handover, w: usize) -> (Vec<Item>, bool) {
    let mut got = Vec::new();
    loop {
        match h.take(w) {
            Take::Batch(b) => got.extend(b),
            Take::Empty { .. } => return (got, false),
            Take::Over => return (got, true),
        }
    }
}

#[test]
fn inline_reading_stops_at_its_slice_end_and_hands_each_client_to_its_worker_in_order() {
    let n = 1_000;
    let (_dir, path) = log_file("slices", n, 4);
    let outcome = Arc::new(Mutex::new(Outcome::default()));
    let h = Handover::inline(2, Producer::new(spec(path), Arc::clone(&outcome)));
    // A clock that advances one tick per look: a slice ending at tick 10 reads ten
    // requests, all handed over though no batch is full.
    let ticks = std::cell::Cell::new(0u64);
    let clock = || {
        ticks.set(ticks.get() + 1);
        ticks.get()
    };
    assert!(h.read_some(10, &clock));
    assert_eq!(h.lock().queued, 10);
    let mut slices = 1;
    loop {
        let until = ticks.get() + 10;
        if !h.read_some(until, &clock) {
            break;
        }
        slices += 1;
    }
    assert_eq!(slices, n.div_ceil(10), "each slice read ten requests");
    let mut all = 0;
    for w in 0..2 {
        let (items, over) = drain(&h, w);
        assert!(over, "worker {w} sees the end once the log is read");
        assert!(items.windows(2).all(|p| p[0].at_ns <= p[1].at_ns));
        // Clients 10.0.0.{0,2} are the first and third seen: clients 0 and 2.
        assert!(items
            .iter()
            .all(|i| i.req.lane.is_some_and(|l| l as usize % 2 == w)));
        all += items.len();
    }
    assert_eq!(all as u64, n);
    assert!(outcome.lock().expect("outcome").error.is_none());
}

#[test]
fn inline_reading_stops_at_the_read_ahead_and_resumes_once_a_worker_takes() {
    let (_dir, path) = log_file("ahead", READ_AHEAD as u64 + 2_000, 3);
    let h = Handover::inline(1, Producer::new(spec(path), Arc::default()));
    while h.read_some(u64::MAX, &|| 0) {}
    let queued = h.lock().queued;
    assert!(
        (READ_AHEAD..READ_AHEAD + BATCH).contains(&queued),
        "{queued}"
    );
    assert!(
        !h.read_some(u64::MAX, &|| 0),
        "a full read-ahead reads nothing"
    );
    let Take::Batch(first) = h.take(0) else {
        panic!("nothing to take")
    };
    assert!(h.read_some(u64::MAX, &|| 0));
    assert!(
        h.lock().queued >= READ_AHEAD,
        "it read up to the bound again"
    );
    let mut all = first.len();
    loop {
        let (got, over) = drain(&h, 0);
        all += got.len();
        if over {
            break;
        }
        assert!(
            h.read_some(u64::MAX, &|| 0),
            "an emptied queue is read into"
        );
    }
    assert_eq!(all, READ_AHEAD + 2_000);
}

#[test]
fn inline_reading_ends_once_every_worker_has_gone() {
    let (_dir, path) = log_file("gone", 2_000, 2);
    let h = Handover::inline(2, Producer::new(spec(path), Arc::default()));
    let ticks = std::cell::Cell::new(0u64);
    let clock = || {
        ticks.set(ticks.get() + 1);
        ticks.get()
    };
    assert!(h.read_some(10, &clock), "one slice of ten requests read");
    h.leave(0);
    assert!(!h.inline.as_ref().unwrap().lock().unwrap().producer.ended);
    h.leave(1);
    assert!(h.inline.as_ref().unwrap().lock().unwrap().producer.ended);
    assert!(!h.read_some(u64::MAX, &|| 0), "nothing more is read");
}
