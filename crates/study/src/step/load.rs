//! A step's engine configuration and wire: the workload, the cell and the target made
//! into what `volley_engine` runs (a replay workload's schedule included).

use super::*;

/// The engine configuration of one step.
pub(crate) fn load_config(
    w: &Workload,
    cell: &Cell,
    rate: Option<f64>,
    addr: SocketAddr,
    stop: StopCondition,
    stop_flag: Arc<AtomicBool>,
) -> Result<LoadConfig, StepError> {
    let host = addr.to_string();
    if let Some(r) = &w.replay {
        return replay_config(w, r, cell, rate, addr, stop, stop_flag);
    }
    let mut built: Vec<Request> = Vec::with_capacity(w.paths.len());
    for (i, p) in w.paths.iter().enumerate() {
        let mut tpl = RequestTemplate::new(&w.method, p, &host).keep_alive(cell.keepalive);
        for (n, v) in &w.headers {
            tpl = tpl.header(n, v);
        }
        if let Some(b) = &w.body {
            tpl = tpl.body(b.clone());
        }
        built.push(tpl.build(i as u32).map_err(StepError::Request)?);
    }
    let source = ListSourceFactory::new(built, w.order.clone()).map_err(StepError::Request)?;
    let model = match rate {
        Some(rate) => LoadModel::Open {
            rate,
            arrival: w.load.arrival,
            seed: w.load.seed,
        },
        None => LoadModel::Closed,
    };
    Ok(LoadConfig {
        addr,
        source_ip: volley_engine::SourceIp::Kernel,
        threads: w.load.threads as usize,
        connections: cell.concurrency as usize,
        max_connections: w.load.max_connections.max(cell.concurrency) as usize,
        keep_alive: cell.keepalive,
        model,
        stop,
        timeout: w.load.timeout,
        connect_timeout: w.load.timeout.min(Duration::from_secs(10)),
        accept_status: StatusRange::default(),
        source: Arc::new(source),
        stop_flag,
    })
}

/// A replay step's engine configuration: the log at speed `rate` / its mean rate, on
/// the instants it gives (looped to fill the step), each logged client on its own
/// connection; every status is an answer (a logged 404 is the site's).
fn replay_config(
    w: &Workload,
    r: &crate::plan::ReplayLoad,
    cell: &Cell,
    rate: Option<f64>,
    addr: SocketAddr,
    stop: StopCondition,
    stop_flag: Arc<AtomicBool>,
) -> Result<LoadConfig, StepError> {
    let Some(rate) = rate else {
        return Err(StepError::Replay(format!(
            "workload '{}' replays a log: give its steps rates (speed = rate / {:.1} req/s, the log's mean rate)",
            w.name, r.mean_rate
        )));
    };
    let spec = ReplaySpec {
        path: r.log.clone(),
        read: ReaderOptions::default(),
        plan: ReplayOptions {
            speed: rate / r.mean_rate,
            ..ReplayOptions::default()
        },
        shape: RequestShape {
            host: addr.to_string(),
            headers: w.headers.clone(),
            keep_alive: true,
        },
        repeat: true,
    };
    // Offered: what the schedule holds within the step, not the log's mean (a step
    // of its quiet start offers less, one of a burst more).
    let offered = match stop.duration {
        Some(d) if !d.is_zero() => {
            let n = scheduled_within(&spec, d).map_err(|e| StepError::Replay(e.to_string()))?;
            (n as f64 / d.as_secs_f64()).max(f64::MIN_POSITIVE)
        }
        _ => rate,
    };
    // The plan refused targets known to be elsewhere; this is the address as resolved.
    let source_ip = match r.client_addresses {
        true if matches!(addr.ip(), std::net::IpAddr::V4(v4) if v4.is_loopback()) => {
            volley_engine::SourceIp::LoopbackPerLane
        }
        true => {
            return Err(StepError::Replay(format!(
                "workload '{}': client_addresses gives each replayed client a loopback address; the target is at {}, not on IPv4 loopback",
                w.name,
                addr.ip()
            )))
        }
        false => volley_engine::SourceIp::Kernel,
    };
    Ok(LoadConfig {
        addr,
        source_ip,
        threads: w.load.threads as usize,
        connections: 0,
        max_connections: w.load.max_connections.max(cell.concurrency) as usize,
        keep_alive: true,
        model: LoadModel::Scheduled { rate: offered },
        stop,
        timeout: w.load.timeout,
        connect_timeout: w.load.timeout.min(Duration::from_secs(10)),
        accept_status: StatusRange { min: 100, max: 599 },
        source: Arc::new(ReplayFactory::new(spec)),
        stop_flag,
    })
}

/// The engine's protocol stack for a workload against a target: TLS trusting the
/// target's own CA (or any certificate with `insecure`), the name checked being the
/// address (the throw-away certificates name 127.0.0.1 and ::1), HTTP/1.1 or h2.
///
/// Compression is asked by the Accept-Encoding header the plan adds, and with
/// `compressed` set every HTTP/1.1 response is decoded by the engine (`Wire::body`): a
/// response not carrying the coding asked for, or not decoding, is an `encoding` error
/// (docs/methodology.md: a fast wrong answer is an error), and the summary shows wire beside
/// decoded body bytes. The HTTP/2 worker does not see DATA payloads, so there the
/// targets' start-up probe remains the check that the encoding is applied.
pub(crate) fn wire_for(
    w: &Workload,
    cell: &Cell,
    addr: SocketAddr,
    ca_file: Option<&std::path::Path>,
) -> Wire {
    let def = &w.load.wire;
    let tls = def.tls.then(|| TlsTarget {
        client: volley_engine::volley_tls::ClientTls {
            insecure: def.insecure,
            ca_file: ca_file.map(std::path::Path::to_path_buf),
            ..Default::default()
        },
        server_name: addr.ip().to_string(),
    });
    Wire {
        tls,
        // A swept protocol (`sweep.protocol`) overrides the workload's own.
        http: match (cell.protocol, def.h2_streams) {
            (Some(Protocol::H1), _) => HttpVersion::Http1,
            (Some(Protocol::H2), _) => HttpVersion::H2 {
                streams: def.streams,
            },
            (Some(Protocol::H3), _) => HttpVersion::H3 {
                streams: def.streams,
            },
            (None, Some(streams)) => HttpVersion::H2 { streams },
            (None, None) => HttpVersion::Http1,
        },
        body: BodySpec {
            coding: def.compressed.map(|e| match e {
                Encoding::Br => Coding::Br,
                Encoding::Gzip => Coding::Gzip,
            }),
            ..Default::default()
        },
        ..Wire::default()
    }
}
