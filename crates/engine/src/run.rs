//! The entry point: validate a [`LoadConfig`], start the workers, collect their sinks.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use crate::conn::Tcp;
use crate::pacer::{Pacer, Schedule};
use crate::worker::{Plan, Shared, Worker};
use crate::{EngineError, Live, LoadConfig, LoadModel, Sink};

/// What a run hands back: each worker's sink (in worker order, for merging) and the
/// run-wide figures no single sink can know.
#[derive(Debug)]
pub struct RunOutcome<S> {
    /// One sink per worker thread, in worker order.
    pub sinks: Vec<S>,
    /// From the shared start instant to the moment the last worker finished.
    pub elapsed_ns: u64,
    /// Most connections open at once across all workers.
    pub max_open_connections: u32,
    /// Open-loop arrivals that found no free connection and were held by the cap.
    pub cap_hits: u64,
    /// True when `stop_flag` ended the run before its stop condition.
    pub stopped_early: bool,
    /// TCP connections opened (including failed attempts).
    pub connections_opened: u64,
    /// Requests re-sent once on a fresh connection because a kept-alive connection had
    /// been closed by the server while idle (EOF or reset before any response byte).
    pub idle_close_retries: u64,
}

/// Runs one load step to completion and returns every worker's sink.
///
/// Blocks the calling thread until the stop condition is met (or `cfg.stop_flag` is
/// set). Worker `i`'s sink is made by `make_sink(i)` on the calling thread, moved into
/// the worker, and handed back in `RunOutcome::sinks[i]`.
///
/// Closed loop: `min(threads, connections)` workers (a worker without a connection
/// would have nothing to do). Open loop: `threads` workers, each at `rate / threads`
/// with its share of `connections` and of the cap `max(max_connections, connections)`
/// (at least one connection per worker, so a cap below the thread count is exceeded
/// by the difference).
pub fn run<S, F>(cfg: &LoadConfig, make_sink: F, live: &Live) -> Result<RunOutcome<S>, EngineError>
where
    S: Sink + 'static,
    F: Fn(usize) -> S,
{
    validate(cfg)?;
    let workers = match cfg.model {
        LoadModel::Closed => cfg.threads.min(cfg.connections),
        LoadModel::Open { .. } => cfg.threads,
    };
    let end_ns = cfg
        .stop
        .duration
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let cap_total = cfg.max_connections.max(cfg.connections);
    let plans: Vec<Plan> = (0..workers)
        .map(|i| {
            let connections = share(cfg.connections, workers, i);
            match cfg.model {
                LoadModel::Closed => Plan {
                    connections,
                    max_connections: connections,
                    pacer: None,
                },
                LoadModel::Open {
                    rate,
                    arrival,
                    seed,
                } => Plan {
                    connections,
                    max_connections: share(cap_total, workers, i).max(1),
                    pacer: Some(Pacer::new(
                        Schedule::new(arrival, rate, seed, i, workers),
                        end_ns,
                    )),
                },
            }
        })
        .collect();
    let sinks: Vec<S> = (0..workers).map(&make_sink).collect();
    let shared = Shared {
        cfg,
        live,
        start: Instant::now(),
        end_ns,
        open: AtomicU32::new(0),
        max_open: AtomicU32::new(0),
        tickets: AtomicU64::new(0),
        abort: AtomicBool::new(false),
    };
    let results = std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(workers);
        for (i, (sink, plan)) in sinks.into_iter().zip(plans).enumerate() {
            let source = cfg.source.make(i, workers);
            let shared = &shared;
            let worker = Worker::<S, Tcp>::new(shared, sink, source, plan)
                .map_err(|source| EngineError::Worker { worker: i, source })?;
            let spawned = std::thread::Builder::new()
                .name(format!("volley-worker-{i}"))
                .spawn_scoped(scope, move || worker.run());
            match spawned {
                Ok(h) => handles.push(h),
                Err(source) => {
                    shared.abort.store(true, Ordering::Relaxed);
                    return Err(EngineError::Worker { worker: i, source });
                }
            }
        }
        let mut out = Vec::with_capacity(workers);
        for (i, h) in handles.into_iter().enumerate() {
            match h.join() {
                Ok(r) => out.push(r),
                Err(_) => {
                    let source = std::io::Error::other("worker thread panicked");
                    return Err(EngineError::Worker { worker: i, source });
                }
            }
        }
        Ok(out)
    });
    let elapsed_ns = shared.start.elapsed().as_nanos() as u64;
    let results = results?;
    let mut outcome = RunOutcome {
        sinks: Vec::with_capacity(workers),
        elapsed_ns,
        max_open_connections: shared.max_open.load(Ordering::Relaxed),
        cap_hits: 0,
        stopped_early: false,
        connections_opened: 0,
        idle_close_retries: 0,
    };
    for (sink, stats) in results {
        outcome.sinks.push(sink);
        outcome.cap_hits += stats.cap_hits;
        outcome.connections_opened += stats.connections_opened;
        outcome.idle_close_retries += stats.idle_close_retries;
        outcome.stopped_early |= stats.stopped_early;
    }
    live.set_open(0);
    Ok(outcome)
}

/// `total` split over `parts`: the first `total % parts` get one more.
fn share(total: usize, parts: usize, i: usize) -> usize {
    total / parts + usize::from(i < total % parts)
}

fn validate(cfg: &LoadConfig) -> Result<(), EngineError> {
    if cfg.threads == 0 {
        return Err(EngineError::ZeroThreads);
    }
    if cfg.stop.requests.is_none() && cfg.stop.duration.is_none() {
        return Err(EngineError::NoStopCondition);
    }
    if cfg.timeout.is_zero() {
        return Err(EngineError::ZeroTimeout);
    }
    if cfg.connect_timeout.is_zero() {
        return Err(EngineError::ZeroConnectTimeout);
    }
    match cfg.model {
        LoadModel::Closed if cfg.connections == 0 => Err(EngineError::ZeroConnections),
        LoadModel::Open { .. } if cfg.connections.max(cfg.max_connections) == 0 => {
            Err(EngineError::ZeroConnections)
        }
        LoadModel::Open { rate, .. } if !(rate.is_finite() && rate > 0.0) => {
            Err(EngineError::BadRate(rate))
        }
        _ => Ok(()),
    }
}
