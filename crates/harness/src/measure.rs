//! One measured run: engine + per-worker recorders + the generator's own CPU and
//! pressure readings -> a merged [`Recorder`] and the [`RunInfo`] that closes it.
//!
//! Place in the flow: the one call between a resolved [`LoadConfig`] and a
//! [`volley_metrics::Summary`], shared by `volley bench` and every study step, so both measure a
//! run the same way (same warm-up boundary, same self-check window, same run facts).
//! The caller keeps what differs: what it shows while the run goes (a progress line, a
//! gauge), the notes it adds, and whether it needs the per-second histograms before
//! closing (the study stores them).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use thiserror::Error;
use volley_engine::{
    Arrival, EngineError, HttpVersion, Live, LiveSnapshot, LoadConfig, LoadModel, RunOutcome, Wire,
};

use volley_metrics::{
    resources, MetricsError, Model, Recorder, RunInfo, SecondStream, StreamedSecond, WindowKey,
};
use volley_monitor::stall::{self, StallProbe, StallReport};

/// Why a run could not be measured (failed requests are data, never this).
#[derive(Debug, Error)]
pub enum MeasureError {
    /// The engine could not run the load.
    #[error("cannot run the load: {0}")]
    Engine(#[from] EngineError),
    /// The workers' recorders could not be merged.
    #[error("cannot merge the workers' results: {0}")]
    Merge(#[from] MetricsError),
}

/// What to run and how to describe it.
pub struct Measure<'a> {
    /// The load.
    pub cfg: &'a LoadConfig,
    /// TLS, HTTP version and body checks.
    pub wire: &'a Wire,
    /// Live counters the caller may watch (progress line, in-flight gauge).
    pub live: &'a Live,
    /// The URL the summary names.
    pub url: String,
    /// The method the summary names.
    pub method: String,
    /// Where each worker's closed windows are also sent while the run goes, and what
    /// they are keyed by (the injector agent publishes them, `volley bench --save`
    /// stores them); `None` for study steps.
    pub stream: Option<LiveWindows>,
    /// The run's first answers checked as they come (`volley_engine::first`: `bench
    /// URL`'s path check, which sends no request of its own); `None` elsewhere.
    pub first_answers: Option<std::sync::Arc<volley_engine::FirstAnswers>>,
}

/// The injector agent's live windows: where each worker sends them as they close, and
/// the key they are cut by (docs/methodology.md, "Per-second windows").
pub struct LiveWindows {
    /// The receiving end joins the workers' windows.
    pub tx: std::sync::mpsc::Sender<StreamedSecond>,
    /// Every worker's window key.
    pub key: WindowKey,
    /// The workers keep no closed second ([`Recorder::stream_only`]): the receiver
    /// writes each one out as it closes and gives the merged recorder their digests
    /// ([`Recorder::set_digests`]), so a long run's memory stays flat.
    pub stream_only: bool,
}

/// A finished run, not yet closed: callers add notes to `info`, read histograms from
/// `recorder`, then `recorder.close(&info)`.
pub struct MeasuredRun {
    /// All workers' recorders, merged.
    pub recorder: Recorder,
    /// The run's facts for [`Recorder::close`]; `notes` empty.
    pub info: RunInfo,
    /// The engine's outcome, its sinks moved into `recorder`.
    pub outcome: RunOutcome<Recorder>,
    /// Mean requests in flight over the measured part of the run (from the warm-up
    /// boundary), from the workers' time integrals of their in-flight counts; `None`
    /// when that part is empty.
    ///
    /// Why an integral: each worker adds in_flight x (now - last change) at every change
    /// of its count, so the mean is exact whatever the rate. Snapshots of the live
    /// counters (the previous gauge) were taken right after workers published, which is
    /// right after they handled completions, so at low rates they were biased toward
    /// "nothing outstanding" (a 94.5% gap at 250 req/s). Why not sum(response times) /
    /// duration: that *is* lambda x W computed from the same samples, and Little's check
    /// would pass whatever was lost; the integral is kept apart from the latency
    /// histograms, like the number of busy servers an operator would count.
    pub mean_in_flight: Option<f64>,
}

/// Runs `m.cfg` with one [`Recorder::for_worker`] per worker and returns the merged
/// recorder and the run's facts.
///
/// The warm-up is `m.cfg.stop.warmup`: the recorders leave out what was intended before
/// it ([`Recorder::with_warmup`]), and the generator's CPU time, CPU pressure and the
/// workers' in-flight integral are read at that boundary (or the start) and at the end,
/// so its self-check and Little's check cover the measured period only. The stall
/// probe (`volley_monitor::stall`) runs beside the load (every 500 us beside an open
/// loop, every 10 ms beside a closed one: [`stall::interval_for`]), its seconds counted
/// from the warm-up boundary like the recorder's, and goes into [`RunInfo::stalls`],
/// where the label rule reads it.
pub fn measure(m: &Measure<'_>) -> Result<MeasuredRun, MeasureError> {
    let mut cpu0 = resources::generator_cpu_ns();
    let mut psi0 = resources::cpu_pressure_some_us();
    let start = Instant::now();
    let open_loop = matches!(m.cfg.model, LoadModel::Open { .. });
    let live0 = m.live.snapshot();
    let warmup = m.cfg.stop.warmup;
    let probe = StallProbe::start(start + warmup, stall::interval_for(open_loop));
    let done = AtomicBool::new(false);
    let (outcome, boundary) = std::thread::scope(|scope| {
        let marks = (!warmup.is_zero())
            .then(|| scope.spawn(|| boundary_marks(start + warmup, m.live, &done)));
        let r = volley_engine::run_with(
            m.cfg,
            m.wire,
            |w| {
                let r = Recorder::for_worker(w).with_warmup(warmup);
                let r = match &m.first_answers {
                    Some(f) => r.with_first_answers(std::sync::Arc::clone(f)),
                    None => r,
                };
                // Windows close on an encoder thread, off the pacing path (issue 28).
                match &m.stream {
                    Some(l) => {
                        let r = r
                            .with_window_key(l.key)
                            .with_stream(SecondStream::new(w, l.tx.clone()));
                        if l.stream_only {
                            r.stream_only()
                        } else {
                            r
                        }
                    }
                    None => r,
                }
                .with_offload()
            },
            m.live,
        );
        done.store(true, Ordering::Relaxed);
        (r, marks.and_then(|h| h.join().ok().flatten()))
    });
    let live1 = m.live.snapshot();
    let stalls = probe.finish();
    let mut outcome = outcome?;
    let (mut measured_from, mut live_from) = (start, live0);
    if let Some(b) = boundary {
        (measured_from, cpu0, psi0, live_from) = (b.at, b.cpu_ns, b.psi_us, b.live);
    }
    let measured_ns = outcome
        .elapsed_ns
        .saturating_sub((measured_from - start).as_nanos() as u64);
    let mean_in_flight = live1.mean_in_flight_since(&live_from, measured_ns);
    let wall_ns = measured_from.elapsed().as_nanos().max(1) as f64;
    let cpu_ns = match (cpu0, resources::generator_cpu_ns()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let cpu_pressure = match (psi0, resources::cpu_pressure_some_us()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 * 1e3 / wall_ns),
        _ => None,
    };
    let sinks = std::mem::take(&mut outcome.sinks);
    let mut info = run_info(m, &outcome, sinks.len(), cpu_ns, cpu_pressure);
    info.stalls = Some(stalls_of(stalls, outcome.elapsed_ns, warmup));
    let mut recorder = Recorder::merge_all(sinks)?;
    // Every window has been sent by now; the caller's receiver sees the channel close
    // once its own sender goes.
    recorder.drop_stream();
    Ok(MeasuredRun {
        recorder,
        info,
        outcome,
        mean_in_flight,
    })
}

/// The [`RunInfo`] of a run of `m.cfg` that used `workers` workers.
fn run_info(
    m: &Measure<'_>,
    outcome: &RunOutcome<Recorder>,
    workers: usize,
    cpu_ns: Option<u64>,
    cpu_pressure: Option<f64>,
) -> RunInfo {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (model, max_connections) = model_of(m.cfg);
    RunInfo {
        url: m.url.clone(),
        method: m.method.clone(),
        model,
        threads: workers,
        connections: m.cfg.connections,
        streams_per_connection: match m.wire.http {
            HttpVersion::H2 { streams } | HttpVersion::H3 { streams } => streams.max(1),
            HttpVersion::Http1 => 1,
        },
        max_connections,
        keep_alive: m.cfg.keep_alive,
        elapsed_ns: outcome.elapsed_ns,
        connections_opened: outcome.connections_opened,
        max_open_connections: outcome.max_open_connections,
        cap_hits: outcome.cap_hits,
        stopped_early: outcome.stopped_early,
        cpu_ns,
        cpu_pressure,
        cores: generator_cores(workers, cpus),
        notes: Vec::new(),
        stalls: None,
    }
}

/// The cores a run's `workers` could use: one each, no more than the CPUs it may run
/// on, nor than the CPU quota over its cgroup (0.2 under a 20% cap: a closed loop
/// held there is generator-bound, docs/methodology.md "The generator checks itself").
fn generator_cores(workers: usize, cpus: usize) -> f64 {
    let whole = workers.min(cpus).max(1) as f64;
    match volley_metrics::resources::own_cpu_quota_cores() {
        Some(q) if q < whole => q,
        _ => whole,
    }
}

/// The probe's report cut to the recorder's seconds: none past the load's end (the
/// probe stops a little after the engine does).
fn stalls_of(mut r: StallReport, elapsed_ns: u64, warmup: Duration) -> StallReport {
    let measured_ns = (elapsed_ns as u128).saturating_sub(warmup.as_nanos());
    let seconds = measured_ns.div_ceil(1_000_000_000) as usize;
    r.seconds.truncate(seconds.max(1));
    r
}

/// The summary's load model, and the connection cap that applies to it (a closed loop
/// never opens more than its connections).
pub fn model_of(cfg: &LoadConfig) -> (Model, usize) {
    match cfg.model {
        LoadModel::Closed => (Model::Closed, cfg.connections),
        LoadModel::Open { rate, arrival, .. } => (
            Model::Open {
                rate_per_s: rate,
                arrival: match arrival {
                    Arrival::Constant => "constant".into(),
                    Arrival::Poisson => "poisson".into(),
                },
            },
            cfg.max_connections,
        ),
        // A replay: the log's own instants, at their mean rate.
        LoadModel::Scheduled { rate } => (
            Model::Open {
                rate_per_s: rate,
                arrival: "replay".into(),
            },
            cfg.max_connections,
        ),
    }
}

/// Waits until `at` (or until `done`) and reads the process CPU time and the CPU
/// pressure there: the start of the measured period. `None` when the run ended first.
fn boundary_marks(at: Instant, live: &Live, done: &AtomicBool) -> Option<Boundary> {
    if !crate::rest::wait_until(at, done) {
        return None;
    }
    Some(Boundary {
        at: Instant::now(),
        cpu_ns: resources::generator_cpu_ns(),
        psi_us: resources::cpu_pressure_some_us(),
        live: live.snapshot(),
    })
}

/// The readings taken at the warm-up boundary.
struct Boundary {
    at: Instant,
    cpu_ns: Option<u64>,
    psi_us: Option<u64>,
    live: LiveSnapshot,
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::Arc;

    use volley_engine::{ListSourceFactory, Order, RequestTemplate, StatusRange, StopCondition};

    use super::*;

    /// A loopback server answering `n` requests with a fixed 200, one per connection.
    fn tiny_server(n: usize) -> (std::net::SocketAddr, std::thread::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            for _ in 0..n {
                let Ok((mut s, _)) = l.accept() else { return };
                let mut buf = [0u8; 1024];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(k) => got.extend_from_slice(&buf[..k]),
                    }
                }
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
            }
        });
        (addr, h)
    }

    /// A closed loop of `n` requests on `conns` connections (one worker each), one
    /// connection per request.
    fn closed(addr: std::net::SocketAddr, n: u64, conns: usize) -> LoadConfig {
        let req = RequestTemplate::new("GET", "/", &addr.to_string())
            .keep_alive(false)
            .build(0)
            .unwrap();
        LoadConfig {
            addr,
            source_ip: volley_engine::SourceIp::Kernel,
            threads: conns,
            connections: conns,
            max_connections: conns,
            keep_alive: false,
            model: LoadModel::Closed,
            stop: StopCondition {
                warmup: Duration::ZERO,
                requests: Some(n),
                duration: Some(Duration::from_secs(10)),
            },
            timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            accept_status: StatusRange::default(),
            source: Arc::new(ListSourceFactory::new(vec![req], Order::Same).unwrap()),
            stop_flag: Arc::new(AtomicBool::new(false)),
        }
    }

    #[test]
    fn a_closed_run_is_merged_and_described() {
        let (addr, server) = tiny_server(5);
        let cfg = closed(addr, 5, 1);
        let m = measure(&Measure {
            cfg: &cfg,
            wire: &Wire::default(),
            live: &Live::new(),
            url: format!("http://{addr}/"),
            method: "GET".into(),
            stream: None,
            first_answers: None,
        })
        .unwrap();
        server.join().unwrap();
        assert!(m.outcome.sinks.is_empty(), "sinks moved into the recorder");
        assert_eq!(m.info.threads, 1);
        assert_eq!((m.info.connections, m.info.max_connections), (1, 1));
        assert_eq!(m.info.connections_opened, 5);
        assert!(matches!(m.info.model, Model::Closed));
        let summary = m.recorder.close(&m.info).unwrap();
        assert_eq!(summary.requests.ok, 5);
    }

    #[test]
    fn live_windows_carry_their_key_to_every_worker_and_only_the_stream_has_them() {
        let (addr, server) = tiny_server(6);
        let cfg = closed(addr, 6, 2);
        let (tx, rx) = std::sync::mpsc::channel();
        let key = WindowKey::Intended { hold: cfg.timeout };
        let m = measure(&Measure {
            cfg: &cfg,
            wire: &Wire::default(),
            live: &Live::new(),
            url: format!("http://{addr}/"),
            method: "GET".into(),
            stream: Some(LiveWindows {
                tx,
                key,
                stream_only: true,
            }),
            first_answers: None,
        })
        .unwrap();
        server.join().unwrap();
        assert!(
            m.recorder.closed_seconds().is_empty(),
            "stream-only workers keep no second"
        );
        assert_eq!(
            m.recorder.window_key(),
            key,
            "merged from intended-keyed workers"
        );
        let streamed: u64 = rx
            .iter()
            .filter_map(|s| s.closed)
            .map(|c| c.counts.completed)
            .sum();
        assert_eq!(streamed, 6);
        assert_eq!(m.recorder.completed(), 6);
    }

    #[test]
    fn open_models_carry_their_rate_and_the_pool_cap() {
        let (addr, _) = (std::net::SocketAddr::from(([127, 0, 0, 1], 9)), ());
        let cfg = LoadConfig {
            addr,
            source_ip: volley_engine::SourceIp::Kernel,
            threads: 1,
            connections: 2,
            max_connections: 64,
            keep_alive: true,
            model: LoadModel::Open {
                rate: 250.0,
                arrival: Arrival::Poisson,
                seed: 1,
            },
            stop: StopCondition {
                warmup: Duration::ZERO,
                requests: Some(1),
                duration: None,
            },
            timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            accept_status: StatusRange::default(),
            source: Arc::new(
                ListSourceFactory::new(
                    vec![RequestTemplate::new("GET", "/", "h").build(0).unwrap()],
                    Order::Same,
                )
                .unwrap(),
            ),
            stop_flag: Arc::new(AtomicBool::new(false)),
        };
        let (model, cap) = model_of(&cfg);
        assert_eq!(cap, 64);
        match model {
            Model::Open {
                rate_per_s,
                arrival,
            } => assert_eq!((rate_per_s, arrival.as_str()), (250.0, "poisson")),
            Model::Closed => panic!("open expected"),
        }
        let closed = LoadConfig {
            model: LoadModel::Closed,
            ..cfg
        };
        assert_eq!(model_of(&closed).1, 2);
    }
}
