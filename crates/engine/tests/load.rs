//! End-to-end runs of the engine against small loopback servers, each on both I/O
//! paths: as written (epoll), and again in [`uring`] through io_uring (`--io uring`),
//! which must pass the same tests.

use crate::common;

use std::cell::Cell;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use volley_engine::{
    run_with, EngineError, ErrorKind, IoPath, Live, LoadConfig, LoadModel, RunOutcome, Sample,
    Sink, StopCondition, Wire,
};

thread_local! {
    /// The I/O path this test thread's runs take (each test has its own thread).
    static IO: Cell<IoPath> = const { Cell::new(IoPath::Epoll) };
}

/// `volley_engine::run` on this thread's I/O path; a run asked to use io_uring or
/// ppoll must have used it, unless the kernel refused io_uring (then the test says so
/// and checks epoll).
fn run<S: Sink + 'static>(
    cfg: &LoadConfig,
    make_sink: impl Fn(usize) -> S,
    live: &Live,
) -> Result<RunOutcome<S>, EngineError> {
    let io = IO.get();
    let wire = Wire {
        io,
        ..Wire::default()
    };
    let out = run_with(cfg, &wire, make_sink, live)?;
    match &out.io_refused {
        Some(e) => eprintln!("io_uring refused here ({e}): this test ran on epoll"),
        None => assert_eq!(out.io, io, "the I/O path asked for ran"),
    }
    Ok(out)
}

/// The listed tests of this file again in module `$module`, on I/O path `$io`.
macro_rules! again_on {
    ($module:ident, $io:expr, [$($name:ident),* $(,)?]) => {
        mod $module {
            use super::IoPath;
            $(
                #[test]
                fn $name() {
                    super::IO.set($io);
                    super::$name();
                }
            )*
        }
    };
}

/// The tests of this file again, through io_uring and through ppoll.
macro_rules! on_every_io_path {
    ($($name:ident),* $(,)?) => {
        again_on!(uring, IoPath::Uring, [$($name),*]);
        again_on!(poll, IoPath::Poll, [$($name),*]);
    };
}

on_every_io_path!(
    closed_keep_alive_sends_exactly_n,
    with_a_warmup_the_request_limit_counts_measured_requests_only,
    non_keep_alive_opens_one_connection_per_request,
    client_closes_when_server_says_close_but_stays_open,
    open_loop_follows_the_schedule,
    open_loop_first_arrivals_wait_for_the_initial_pool,
    open_loop_poisson_is_reproducible_in_intended_times,
    server_that_never_answers_gives_timeouts,
    refused_port_gives_connect_errors,
    close_mid_body_is_closed,
    garbage_is_malformed,
    unaccepted_status_is_status_error_and_connection_is_reused,
    stop_flag_ends_early_with_in_flight_samples,
    connection_cap_is_reported,
    idle_closed_keep_alive_connection_is_retried_not_an_error,
    invalid_configs_are_refused,
    waiting_for_a_slow_server_polls_a_little_counts_it_and_backs_off,
);

#[test]
fn closed_keep_alive_sends_exactly_n() {
    let server = Server::start(ok_handler);
    let cfg = config(server.addr, 2, 4, 500);
    let live = Live::new();
    let out = run(&cfg, |_| Collect::default(), &live).expect("run");
    let samples = all_samples(&out.sinks);
    assert_eq!(samples.len(), 500);
    assert_eq!(count(&samples, None), 500);
    assert!(samples
        .iter()
        .all(|s| s.status == 200 && s.body_bytes == 2 && s.wire_bytes == 40));
    assert!(samples.iter().all(|s| s.intended_ns == s.sent_ns));
    assert!(samples
        .iter()
        .all(|s| s.sent_ns <= s.first_byte_ns && s.first_byte_ns <= s.done_ns));
    let opened: Vec<_> = samples.iter().filter(|s| s.connect_ns > 0).collect();
    assert_eq!(
        opened.len(),
        4,
        "{opened:?} {} opened",
        out.connections_opened
    );
    assert_eq!(out.connections_opened, 4);
    assert_eq!(out.max_open_connections, 4);
    assert!(!out.stopped_early);
    let snap = live.snapshot();
    assert_eq!(
        (snap.started, snap.done, snap.errors, snap.open_connections),
        (500, 500, 0, 0)
    );
    assert!(out.sinks.iter().all(|s| s.ticks >= 1));
}

#[test]
fn with_a_warmup_the_request_limit_counts_measured_requests_only() {
    // Closed loop: requests intended before the boundary take no ticket, so exactly
    // `requests` are intended at or after it, however many the warm-up sent.
    let server = Server::start(ok_handler);
    let mut cfg = config(server.addr, 2, 4, 300);
    cfg.stop.warmup = Duration::from_millis(200);
    let out = run(&cfg, |_| Collect::default(), &Live::new()).expect("run");
    let samples = all_samples(&out.sinks);
    let boundary = cfg.stop.warmup.as_nanos() as u64;
    let measured = samples.iter().filter(|s| s.intended_ns >= boundary).count();
    assert_eq!(measured, 300);
    assert_eq!(count(&samples, None), samples.len(), "all answered");
    assert!(
        samples.len() >= 304,
        "the warm-up sent {}",
        samples.len() - 300
    );

    // Open loop at 2000/s (an arrival every 500 us): the 100 ms warm-up holds arrivals
    // 0..200 of the schedule, and the limit then admits 200 more.
    let mut cfg = config(server.addr, 2, 4, 0);
    cfg.max_connections = 64;
    open(&mut cfg, 2000.0, Duration::from_secs(15));
    cfg.stop.requests = Some(200);
    cfg.stop.warmup = Duration::from_millis(100);
    let out = run(&cfg, |_| Collect::default(), &Live::new()).expect("run");
    let samples = all_samples(&out.sinks);
    let (warm, measured): (Vec<Sample>, Vec<Sample>) =
        samples.iter().partition(|s| s.intended_ns < 100_000_000);
    assert_eq!((warm.len(), measured.len()), (200, 200));
    assert!(!out.stopped_early);
}

#[test]
fn non_keep_alive_opens_one_connection_per_request() {
    let server = Server::start(ok_handler);
    let mut cfg = config(server.addr, 1, 2, 50);
    cfg.keep_alive = false;
    let out = run(&cfg, |_| Collect::default(), &Live::new()).expect("run");
    let samples = all_samples(&out.sinks);
    assert_eq!(count(&samples, None), 50);
    assert_eq!(out.connections_opened, 50);
    assert!(samples.iter().all(|s| s.connect_ns > 0));
    assert_eq!(server.accepted.load(Ordering::Relaxed), 50);
}

/// Says `Connection: close` but never closes: the client must close by itself. Counts
/// the client's closes in `seen` (per test: the epoll and io_uring runs of one test
/// run at once).
fn close_but_stay_open_handler(seen: Arc<AtomicUsize>) -> impl Fn(TcpStream) + Clone + Send {
    move |mut s: TcpStream| {
        if read_request(&mut s) {
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok");
            // EOF, not the 5 s read timeout (an error), is what counts.
            let mut byte = [0u8; 16];
            if matches!(std::io::Read::read(&mut s, &mut byte), Ok(0)) {
                seen.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[test]
fn client_closes_when_server_says_close_but_stays_open() {
    let seen = Arc::new(AtomicUsize::new(0));
    let server = Server::start_with(close_but_stay_open_handler(Arc::clone(&seen)));
    let mut cfg = config(server.addr, 1, 2, 6);
    cfg.keep_alive = false;
    // A client that waited for the server's FIN would wait for the request timeout,
    // longer than the whole run may last, and finish far fewer than 6 requests.
    cfg.timeout = Duration::from_secs(30);
    let out = run(&cfg, |_| Collect::default(), &Live::new()).expect("run");
    let samples = all_samples(&out.sinks);
    assert_eq!(count(&samples, None), 6, "{samples:?}");
    assert!(!out.stopped_early);
    assert_eq!(out.connections_opened, 6);
    drop(server);
    // Every handler sees EOF (the client's close); handler threads may still be
    // finishing, so wait for them (bounded by their own 5 s read timeout).
    let deadline = std::time::Instant::now() + Duration::from_secs(6);
    while seen.load(Ordering::Relaxed) < 6 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(seen.load(Ordering::Relaxed), 6);
}

#[test]
fn open_loop_follows_the_schedule() {
    let server = Server::start(ok_handler);
    let mut cfg = config(server.addr, 2, 4, 0);
    cfg.max_connections = 64;
    open(&mut cfg, 2000.0, Duration::from_millis(500));
    let out = run(&cfg, |_| Collect::default(), &Live::new()).expect("run");
    let mut samples = all_samples(&out.sinks);
    // Every arrival of the schedule in [0, 500 ms) has exactly one sample.
    assert_eq!(samples.len(), 1000);
    samples.sort_by_key(|s| s.intended_ns);
    for (k, s) in samples.iter().enumerate() {
        assert_eq!(s.intended_ns, k as u64 * 500_000, "arrival {k}");
        // Sent at or after its instant; or never sent (still queued at the end, which a
        // busy machine can cause): then `sent_ns` is 0 and the sample is censored.
        assert!(
            s.sent_ns >= s.intended_ns || (s.sent_ns == 0 && s.error == Some(ErrorKind::InFlight)),
            "arrival {k}: sent {} before intended {}",
            s.sent_ns,
            s.intended_ns
        );
    }
    // Only arrivals near the end may still be in flight when it comes; none may fail
    // otherwise. "Near" is half the run, not a few milliseconds: how many are still
    // out depends on the machine's stalls in the last instants (a loaded CI machine
    // left more than 10 of 1000), which no assertion here should time.
    for s in samples
        .iter()
        .filter(|s| s.error == Some(ErrorKind::InFlight))
    {
        assert!(
            s.intended_ns >= 250_000_000,
            "arrival at {} ns still in flight at the end",
            s.intended_ns
        );
    }
    assert_eq!(
        count(&samples, None) + count(&samples, Some(ErrorKind::InFlight)),
        1000
    );
}

#[test]
fn open_loop_first_arrivals_wait_for_the_initial_pool() {
    let server = Server::start(ok_handler);
    let mut cfg = config(server.addr, 1, 4, 0);
    cfg.max_connections = 64;
    open(&mut cfg, 1000.0, Duration::from_millis(50));
    let out = run(&cfg, |_| Collect::default(), &Live::new()).expect("run");
    let samples = all_samples(&out.sinks);
    // The arrival at t = 0 comes while the 4 initial connections are still
    // connecting: it goes out on one of them instead of opening a fifth.
    let first = samples
        .iter()
        .find(|s| s.intended_ns == 0)
        .expect("arrival 0");
    assert_eq!(first.error, None, "{first:?}");
    assert_eq!(first.connect_ns, 0, "{first:?}");
    assert!(out.connections_opened >= 4);
}

#[test]
fn open_loop_poisson_is_reproducible_in_intended_times() {
    let server = Server::start(ok_handler);
    let mut cfg = config(server.addr, 1, 2, 0);
    open(&mut cfg, 1000.0, Duration::from_millis(200));
    cfg.model = LoadModel::Open {
        rate: 1000.0,
        arrival: volley_engine::Arrival::Poisson,
        seed: 5,
    };
    let a = all_samples(
        &run(&cfg, |_| Collect::default(), &Live::new())
            .expect("run")
            .sinks,
    );
    let b = all_samples(
        &run(&cfg, |_| Collect::default(), &Live::new())
            .expect("run")
            .sinks,
    );
    let times = |v: &[volley_engine::Sample]| {
        let mut t: Vec<u64> = v.iter().map(|s| s.intended_ns).collect();
        t.sort_unstable();
        t
    };
    assert_eq!(times(&a), times(&b));
    assert!(!a.is_empty());
}

fn silent_handler(mut s: TcpStream) {
    // Reads the request and never answers; returns when the client goes away.
    let _ = read_request(&mut s);
    let _ = read_request(&mut s);
}

#[test]
fn server_that_never_answers_gives_timeouts() {
    let server = Server::start(silent_handler);
    let mut cfg = config(server.addr, 1, 2, 2);
    cfg.timeout = Duration::from_millis(100);
    let out = run(&cfg, |_| Collect::default(), &Live::new()).expect("run");
    let samples = all_samples(&out.sinks);
    assert_eq!(samples.len(), 2);
    assert_eq!(count(&samples, Some(ErrorKind::Timeout)), 2);
    assert!(samples.iter().all(|s| s.done_ns - s.sent_ns >= 100_000_000));
}

#[test]
fn refused_port_gives_connect_errors() {
    let addr = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let cfg = config(addr, 1, 1, 5);
    let out = run(&cfg, |_| Collect::default(), &Live::new()).expect("run");
    let samples = all_samples(&out.sinks);
    assert_eq!(samples.len(), 5);
    assert_eq!(count(&samples, Some(ErrorKind::Connect)), 5);
}

fn short_body_handler(mut s: TcpStream) {
    if read_request(&mut s) {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort");
    }
}

#[test]
fn close_mid_body_is_closed() {
    let server = Server::start(short_body_handler);
    let out = run(
        &config(server.addr, 1, 1, 3),
        |_| Collect::default(),
        &Live::new(),
    )
    .expect("run");
    let samples = all_samples(&out.sinks);
    assert_eq!(count(&samples, Some(ErrorKind::Closed)), 3, "{samples:?}");
    assert!(samples.iter().all(|s| s.status == 200 && s.body_bytes == 5));
}

fn garbage_handler(mut s: TcpStream) {
    if read_request(&mut s) {
        let _ = s.write_all(b"SSH-2.0-nope\r\n\r\n");
    }
}

#[test]
fn garbage_is_malformed() {
    let server = Server::start(garbage_handler);
    let out = run(
        &config(server.addr, 1, 1, 3),
        |_| Collect::default(),
        &Live::new(),
    )
    .expect("run");
    assert_eq!(
        count(&all_samples(&out.sinks), Some(ErrorKind::Malformed)),
        3
    );
}

fn status_handler(mut s: TcpStream) {
    while read_request(&mut s) {
        let _ = s.write_all(b"HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy");
    }
}

#[test]
fn unaccepted_status_is_status_error_and_connection_is_reused() {
    let server = Server::start(status_handler);
    let out = run(
        &config(server.addr, 1, 1, 10),
        |_| Collect::default(),
        &Live::new(),
    )
    .expect("run");
    let samples = all_samples(&out.sinks);
    assert_eq!(count(&samples, Some(ErrorKind::Status)), 10);
    assert!(samples.iter().all(|s| s.status == 503));
    assert_eq!(out.connections_opened, 1);
}

#[test]
fn stop_flag_ends_early_with_in_flight_samples() {
    let server = Server::start(silent_handler);
    let mut cfg = config(server.addr, 1, 3, 1_000);
    cfg.stop = StopCondition {
        warmup: Duration::ZERO,
        requests: None,
        duration: Some(Duration::from_secs(15)),
    };
    cfg.timeout = Duration::from_secs(10);
    let flag = Arc::clone(&cfg.stop_flag);
    let setter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        flag.store(true, Ordering::Relaxed);
    });
    let out = run(&cfg, |_| Collect::default(), &Live::new()).expect("run");
    setter.join().expect("setter");
    let samples = all_samples(&out.sinks);
    assert!(out.stopped_early);
    assert_eq!(samples.len(), 3);
    assert_eq!(count(&samples, Some(ErrorKind::InFlight)), 3);
    assert!(samples
        .iter()
        .all(|s| s.done_ns >= s.sent_ns && s.first_byte_ns == 0));
}

fn slow_handler(mut s: TcpStream) {
    while read_request(&mut s) {
        std::thread::sleep(Duration::from_millis(50));
        if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .is_err()
        {
            return;
        }
    }
}

#[test]
fn connection_cap_is_reported() {
    let server = Server::start(slow_handler);
    let mut cfg = config(server.addr, 1, 1, 0);
    cfg.max_connections = 2;
    open(&mut cfg, 200.0, Duration::from_millis(300));
    let out = run(&cfg, |_| Collect::default(), &Live::new()).expect("run");
    // 200/s with 50 ms service needs ~10 connections; 2 cannot keep up.
    assert!(out.cap_hits > 0);
    assert_eq!(out.sinks[0].cap_hits, out.cap_hits);
    assert!(out.max_open_connections <= 2);
    let samples = all_samples(&out.sinks);
    assert_eq!(samples.len(), 60);
    // Queued requests count from their intended time: send lag shows the wait.
    assert!(samples.iter().any(|s| s.send_lag_ns() >= 50_000_000));
}

fn one_shot_handler(mut s: TcpStream) {
    // Answers one request as if keep-alive, then closes: the next request on the
    // client's reused connection meets EOF with no byte of a response.
    if read_request(&mut s) {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    }
}

#[test]
fn idle_closed_keep_alive_connection_is_retried_not_an_error() {
    let server = Server::start(one_shot_handler);
    let out = run(
        &config(server.addr, 1, 1, 20),
        |_| Collect::default(),
        &Live::new(),
    )
    .expect("run");
    let samples = all_samples(&out.sinks);
    assert_eq!(samples.len(), 20);
    assert_eq!(
        count(&samples, None),
        20,
        "{:?}",
        samples.iter().find(|s| s.error.is_some())
    );
    assert!(out.connections_opened >= 20);
}

#[test]
fn invalid_configs_are_refused() {
    let addr = "127.0.0.1:9".parse().expect("addr");
    let mut cfg = config(addr, 0, 1, 1);
    assert!(matches!(
        run(&cfg, |_| Collect::default(), &Live::new()),
        Err(EngineError::ZeroThreads)
    ));
    cfg.threads = 1;
    cfg.connections = 0;
    assert!(matches!(
        run(&cfg, |_| Collect::default(), &Live::new()),
        Err(EngineError::ZeroConnections)
    ));
    cfg.connections = 1;
    cfg.connect_timeout = Duration::ZERO;
    assert!(matches!(
        run(&cfg, |_| Collect::default(), &Live::new()),
        Err(EngineError::ZeroConnectTimeout)
    ));
    cfg.connect_timeout = Duration::from_secs(1);
    cfg.stop = StopCondition::default();
    assert!(matches!(
        run(&cfg, |_| Collect::default(), &Live::new()),
        Err(EngineError::NoStopCondition)
    ));
    open(&mut cfg, -1.0, Duration::from_secs(1));
    assert!(matches!(
        run(&cfg, |_| Collect::default(), &Live::new()),
        Err(EngineError::BadRate(_))
    ));
}

#[test]
fn waiting_for_a_slow_server_polls_a_little_counts_it_and_backs_off() {
    let server = Server::start(slow_handler);
    let cfg = config(server.addr, 1, 1, 20);
    let before = volley_engine::busy_wait_ns();
    let out = run(&cfg, |_| Collect::default(), &Live::new()).expect("run");
    assert_eq!(count(&all_samples(&out.sinks), None), 20);
    // Every reply took 50 ms, so a poll of the 50 us window almost never finds one: four
    // polls, then one in 64 sleeps (the loop also wakes every 5 ms for housekeeping; a
    // reply that happens to land in a retry's window starts four more). Polling at
    // every sleep would be at least one per request.
    assert!(
        out.busy_waits > 0,
        "a request in flight polls before it sleeps"
    );
    assert!(
        out.busy_waits <= 16,
        "{} polls for 20 requests: the back-off did not hold",
        out.busy_waits
    );
    assert!(out.busy_wait_ns > 0);
    // The process-wide count the generator's CPU figures subtract has it too.
    assert!(volley_engine::busy_wait_ns() - before >= out.busy_wait_ns);
}
