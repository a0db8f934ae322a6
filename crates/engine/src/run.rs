//! The entry point: validate a [`LoadConfig`], start the workers, collect their sinks.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::pacer::{Pacer, Schedule};
use crate::tls::{TlsConnector, TlsFailureCounts};
use crate::worker::Ring;
use crate::worker::{self, duration_ns, H2Stats, Shared, WorkerShare, WorkerStats};
use crate::{EngineError, HttpVersion, IoPath, Live, LoadConfig, LoadModel, Sink, Wire};

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
    /// Of those, connects that failed because no local port was free (EADDRNOTAVAIL:
    /// TIME_WAIT or other sockets held the whole `ip_local_port_range`): the generator's
    /// machine ran short, not the server (each is also a `Connect` sample).
    pub connects_without_port: u64,
    /// Requests re-sent once on a fresh connection because a kept-alive connection had
    /// been closed by the server while idle (EOF or reset before any response byte).
    pub idle_close_retries: u64,
    /// TLS failures by class (`volley_tls::TlsFailure::name`: `cert_expired`,
    /// `not_tls`, `alpn_mismatch`...); each is also a `Tls` sample.
    pub tls_failures: BTreeMap<&'static str, u64>,
    /// Full (not resumed) TLS handshakes completed: with resumption on, only the
    /// first connection of each worker should need one.
    pub tls_full_handshakes: u64,
    /// HTTP/2 connection and stream events (all zero over HTTP/1.1).
    pub h2: H2Stats,
    /// Open loop: workers the kernel gave the short scheduler slice they asked for, so
    /// their wake-ups preempt a neighbour's slice (docs/methodology.md, "The generator
    /// checks itself"); 0 in a closed loop or where the kernel ignores the request.
    pub short_slice_workers: usize,
    /// The I/O path the workers ran (never [`IoPath::Auto`]): [`IoPath::Uring`] only
    /// when asked for and the kernel allowed it.
    pub io: IoPath,
    /// io_uring was asked for and the kernel refused it (`kernel.io_uring_disabled`, a
    /// seccomp filter, an old kernel): what it said. The run then ran on epoll.
    pub io_refused: Option<std::io::Error>,
    /// Nanoseconds the workers spent polling for a reply before sleeping: waiting with
    /// the CPU busy (see [`crate::busy_wait_ns`], the process-wide count).
    pub busy_wait_ns: u64,
    /// How many such polls there were (each at most the window long).
    pub busy_waits: u64,
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
    run_with(cfg, &Wire::default(), make_sink, live)
}

/// How many workers (and sinks) a run of `cfg` has (see [`run`]): what a receiver of
/// their streamed windows waits for.
pub fn workers(cfg: &LoadConfig) -> usize {
    match cfg.model {
        LoadModel::Closed => cfg.threads.min(cfg.connections),
        LoadModel::Open { .. } | LoadModel::Scheduled { .. } => cfg.threads,
    }
}

/// [`run`] over a chosen protocol stack: TLS HTTP/1.1 goes to the HTTP/1.1 worker with
/// the TLS transport, HTTP/2 (h2 over TLS, or h2c) to the HTTP/2 worker, where each
/// connection carries many streams.
pub fn run_with<S, F>(
    cfg: &LoadConfig,
    wire: &Wire,
    make_sink: F,
    live: &Live,
) -> Result<RunOutcome<S>, EngineError>
where
    S: Sink + 'static,
    F: Fn(usize) -> S,
{
    validate(cfg)?;
    if matches!(
        wire.http,
        HttpVersion::H2 { streams: 0 } | HttpVersion::H3 { streams: 0 }
    ) {
        return Err(EngineError::ZeroStreams);
    }
    if matches!(wire.http, HttpVersion::H3 { .. }) && wire.tls.is_none() {
        return Err(EngineError::H3NeedsTls);
    }
    let workers = workers(cfg);
    let end_ns = cfg.stop.duration.map(duration_ns);
    let mut shares = worker_shares(cfg, workers, end_ns);
    let tls_failures = TlsFailureCounts::default();
    let full_handshakes = Arc::new(AtomicU64::new(0));
    let connectors = tls_connectors(wire, workers, &tls_failures, &full_handshakes)?;
    let plain_http1 = wire.tls.is_none() && wire.http == HttpVersion::Http1;
    let slots = shares.iter().map(WorkerShare::slots).max().unwrap_or(0);
    let io = wire.io.resolve(plain_http1, slots);
    let (rings, io_refused) = rings(io, plain_http1, &shares)?;
    let sinks: Vec<S> = (0..workers).map(&make_sink).collect();
    // Made before the clock starts: a source may read ahead before it can give its
    // first request (a replay's log reader reads a whole reorder window first), and
    // that must not make the schedule's first arrivals late.
    let sources: Vec<_> = (0..workers).map(|i| cfg.source.make(i, workers)).collect();
    let shared = Shared {
        cfg,
        live,
        start: Instant::now(),
        end_ns,
        open: AtomicU32::new(0),
        max_open: AtomicU32::new(0),
        tickets: AtomicU64::new(reserve_initial_tickets(cfg, &mut shares)),
        abort: AtomicBool::new(false),
        body: wire.body,
        io,
    };
    let io = match (io, rings.is_empty()) {
        (IoPath::Uring, true) => IoPath::Epoll,
        (io, _) => io,
    };
    let results = run_workers(
        &shared, wire.http, sinks, sources, shares, connectors, rings,
    );
    let elapsed_ns = shared.start.elapsed().as_nanos() as u64;
    let results = results?;
    let mut outcome = RunOutcome {
        sinks: Vec::with_capacity(workers),
        elapsed_ns,
        max_open_connections: shared.max_open.load(Ordering::Relaxed),
        cap_hits: 0,
        stopped_early: false,
        connections_opened: 0,
        connects_without_port: 0,
        idle_close_retries: 0,
        tls_failures: tls_failures.snapshot(),
        tls_full_handshakes: full_handshakes.load(Ordering::Relaxed),
        h2: H2Stats::default(),
        short_slice_workers: 0,
        io,
        io_refused,
        busy_wait_ns: 0,
        busy_waits: 0,
    };
    for (sink, stats, h2) in results {
        outcome.short_slice_workers += usize::from(stats.short_slice);
        outcome.h2.add(&h2);
        outcome.sinks.push(sink);
        outcome.cap_hits += stats.cap_hits;
        outcome.connections_opened += stats.connections_opened;
        outcome.connects_without_port += stats.connects_without_port;
        outcome.idle_close_retries += stats.idle_close_retries;
        outcome.busy_wait_ns += stats.busy_wait_ns;
        outcome.busy_waits += stats.busy_waits;
        outcome.stopped_early |= stats.stopped_early;
    }
    live.set_open(0);
    Ok(outcome)
}

/// The ALPN token of HTTP/3 (RFC 9114 §3.1).
pub const ALPN_H3: &str = "h3";

/// Each worker's share of the connections, of the cap and (open loop) of the rate,
/// with its own pacer over its interleaved part of the one seeded schedule.
fn worker_shares(cfg: &LoadConfig, workers: usize, end_ns: Option<u64>) -> Vec<WorkerShare> {
    let cap_total = cfg.max_connections.max(cfg.connections);
    (0..workers)
        .map(|i| {
            let connections = share(cfg.connections, workers, i);
            match cfg.model {
                LoadModel::Closed => WorkerShare {
                    connections,
                    reserved: 0,
                    max_connections: connections,
                    pacer: None,
                },
                LoadModel::Open {
                    rate,
                    arrival,
                    seed,
                } => WorkerShare {
                    connections,
                    reserved: 0,
                    max_connections: share(cap_total, workers, i).max(1),
                    pacer: Some(Pacer::new(
                        Schedule::new(arrival, rate, seed, i, workers),
                        end_ns,
                    )),
                },
                LoadModel::Scheduled { .. } => WorkerShare {
                    connections,
                    reserved: 0,
                    max_connections: share(cap_total, workers, i).max(1),
                    pacer: Some(Pacer::scheduled(end_ns)),
                },
            }
        })
        .collect()
}

/// With TLS, one connector (one rustls config, one session cache) per worker, offering
/// by ALPN the protocol the run speaks; none without TLS.
fn tls_connectors(
    wire: &Wire,
    workers: usize,
    tls_failures: &TlsFailureCounts,
    full_handshakes: &Arc<AtomicU64>,
) -> Result<Vec<TlsConnector>, EngineError> {
    let Some(t) = &wire.tls else {
        return Ok(Vec::new());
    };
    let mut client = t.client.clone();
    let (alpn, required) = match wire.http {
        HttpVersion::H2 { .. } => (volley_tls::ALPN_H2, true),
        // QUIC runs TLS 1.3 only, and a server must agree to h3 (RFC 9114 §3.1).
        HttpVersion::H3 { .. } => {
            client.versions = volley_tls::VersionPolicy::Tls13;
            (ALPN_H3, true)
        }
        HttpVersion::Http1 => (volley_tls::ALPN_HTTP11, false),
    };
    client.alpn = vec![alpn.to_string()];
    let connectors = (0..workers)
        .map(|_| {
            TlsConnector::new(
                &client,
                &t.server_name,
                required,
                tls_failures.clone(),
                full_handshakes.clone(),
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(connectors)
}

/// `--io uring`: one ring per worker, made before any thread starts so that a refusal
/// is known before the run, which then runs on epoll throughout (with what the kernel
/// said); no rings with epoll or ppoll, which like io_uring drives plain-TCP HTTP/1.1
/// only (`io` is the path resolved from [`IoPath::Auto`]).
fn rings(
    io: IoPath,
    plain_http1: bool,
    shares: &[WorkerShare],
) -> Result<(Vec<Ring>, Option<std::io::Error>), EngineError> {
    if io.plain_http1_only() && !plain_http1 {
        return Err(EngineError::IoNeedsPlainHttp1(io.name()));
    }
    if io != IoPath::Uring {
        return Ok((Vec::new(), None));
    }
    let made = shares
        .iter()
        .map(|s| Ring::new(s.slots()))
        .collect::<Result<Vec<_>, _>>();
    Ok(match made {
        Ok(rings) => (rings, None),
        Err(e) => (Vec::new(), Some(e)),
    })
}

/// Starts one thread per worker and waits for all; when a worker cannot start, the
/// ones already running are told to stop (`abort`).
fn run_workers<S: Sink + 'static>(
    shared: &Shared<'_>,
    http: HttpVersion,
    sinks: Vec<S>,
    sources: Vec<Box<dyn crate::RequestSource>>,
    shares: Vec<WorkerShare>,
    connectors: Vec<TlsConnector>,
    rings: Vec<Ring>,
) -> Result<Vec<(S, WorkerStats, H2Stats)>, EngineError> {
    let workers = sinks.len();
    let mut connectors = connectors.into_iter();
    let mut rings = rings.into_iter();
    std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(workers);
        let jobs = sinks.into_iter().zip(sources).zip(shares).enumerate();
        for (i, ((sink, source), share)) in jobs {
            let link = match (connectors.next(), rings.next()) {
                (Some(tls), _) => worker::Link::Tls(tls),
                (None, Some(ring)) => worker::Link::Uring(Arc::new(ring)),
                (None, None) => worker::Link::Tcp,
            };
            let job = worker::job(shared, sink, source, share, http, link)
                .map_err(|source| EngineError::Worker { worker: i, source })?;
            let spawned = std::thread::Builder::new()
                .name(format!("volley-worker-{i}"))
                .spawn_scoped(scope, job);
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
    })
}

/// Closed loop with a request limit: sets aside, in worker order, one ticket per
/// initial connection (while tickets last) and returns how many were reserved, the
/// shared ticket counter's starting value.
fn reserve_initial_tickets(cfg: &LoadConfig, shares: &mut [WorkerShare]) -> u64 {
    let (LoadModel::Closed, Some(limit)) = (cfg.model, cfg.stop.requests) else {
        return 0;
    };
    if !cfg.stop.warmup.is_zero() {
        // The initial requests are the warm-up's: they need no ticket.
        return 0;
    }
    let mut left = limit;
    for share in shares.iter_mut() {
        share.reserved = (share.connections as u64).min(left);
        left -= share.reserved;
    }
    limit - left
}

/// `total` split over `parts`: the first `total % parts` get one more.
fn share(total: usize, parts: usize, i: usize) -> usize {
    total / parts + usize::from(i < total % parts)
}

fn validate(cfg: &LoadConfig) -> Result<(), EngineError> {
    if cfg.threads == 0 {
        return Err(EngineError::ZeroThreads);
    }
    // A scheduled source ends with its schedule; the other models need a limit.
    let ends_itself = matches!(cfg.model, LoadModel::Scheduled { .. });
    if cfg.stop.requests.is_none() && cfg.stop.duration.is_none() && !ends_itself {
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
        LoadModel::Open { .. } | LoadModel::Scheduled { .. }
            if cfg.connections.max(cfg.max_connections) == 0 =>
        {
            Err(EngineError::ZeroConnections)
        }
        LoadModel::Open { rate, .. } | LoadModel::Scheduled { rate }
            if !(rate.is_finite() && rate > 0.0) =>
        {
            Err(EngineError::BadRate(rate))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ListSourceFactory, Order, RequestTemplate, StatusRange, StopCondition};
    use std::sync::Arc;
    use std::time::Duration;

    fn closed(requests: Option<u64>) -> LoadConfig {
        let req = RequestTemplate::new("GET", "/", "h")
            .build(0)
            .expect("request");
        LoadConfig {
            addr: "127.0.0.1:9".parse().expect("addr"),
            source_ip: crate::SourceIp::Kernel,
            threads: 2,
            connections: 4,
            max_connections: 4,
            keep_alive: true,
            model: LoadModel::Closed,
            stop: StopCondition {
                warmup: Duration::ZERO,
                requests,
                duration: Some(Duration::from_secs(1)),
            },
            timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            accept_status: StatusRange::default(),
            source: Arc::new(ListSourceFactory::new(vec![req], Order::Same).expect("source")),
            stop_flag: Arc::new(AtomicBool::new(false)),
        }
    }

    fn shares(conns: &[usize]) -> Vec<WorkerShare> {
        conns
            .iter()
            .map(|&connections| WorkerShare {
                connections,
                reserved: 0,
                max_connections: connections,
                pacer: None,
            })
            .collect()
    }

    #[test]
    fn initial_tickets_are_reserved_per_worker_while_they_last() {
        // (request limit, connections per worker, reserved per worker, total reserved)
        type Case = (Option<u64>, &'static [usize], &'static [u64], u64);
        let cases: [Case; 4] = [
            (Some(500), &[2, 2], &[2, 2], 4),
            (Some(3), &[2, 2], &[2, 1], 3),
            (Some(1), &[1, 1, 1], &[1, 0, 0], 1),
            (None, &[2, 2], &[0, 0], 0),
        ];
        for (requests, conns, want, total) in cases {
            let mut p = shares(conns);
            assert_eq!(reserve_initial_tickets(&closed(requests), &mut p), total);
            let got: Vec<u64> = p.iter().map(|p| p.reserved).collect();
            assert_eq!(got, want, "{requests:?} {conns:?}");
        }
    }
}
