//! What an agent loads, and how it runs its share: through the harness's one measured
//! run, the same call `volley bench` and study steps make.
//!
//! Place in the flow: the coordinator puts a [`LoadSpec`] in every assignment; the
//! agent's [`run_share`] turns spec + share into the engine's `LoadConfig`, runs it with
//! a recorder per worker whose closed windows stream out as they close, publishes each
//! whole second (joined across its workers) as a [`SecondRecord`], and ends with its
//! whole recorder as bytes ([`ShareRecord`]) so the coordinator can merge every agent
//! exactly.
//!
//! Windows are the recorder's, keyed by intended send time since the agent's own start
//! and held open for the request timeout ([`WindowKey::Intended`]), so that merged
//! seconds hold the load offered in them; moved by the agent's start offset after T0 in
//! whole seconds (stagger steps are whole seconds, see docs/methodology.md, "Several
//! injectors" and "Per-second windows").

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;
use volley_engine::{
    Arrival, ListSourceFactory, Live, LoadConfig, LoadModel, Order, RequestTemplate, StatusRange,
    StopCondition, Wire,
};
use volley_metrics::{
    ClosedSecond, Metric, RecorderSnapshot, RunInfo, SecondDigest, SecondJoiner, WindowKey,
};

use crate::agent::{LoadCtx, LoadError};
use crate::msg::{Counters, SecondRecord, PROTO};
use crate::share::Share;

/// The load every agent of a run sends, before splitting (plain HTTP/1.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadSpec {
    /// The target, `IP:PORT`.
    pub addr: String,
    /// The method.
    pub method: String,
    /// The paths, sent in `order`.
    pub paths: Vec<String>,
    /// Extra header fields.
    pub headers: Vec<(String, String)>,
    /// `"same"`, `"sequential"`, `"random"` or `"weighted"`.
    pub order: String,
    /// `"sequential"`: consecutive copies of each path (seed 003's L2 sends 1000 of
    /// each).
    #[serde(default = "one")]
    pub block: u64,
    /// `"weighted"`: one weight per path.
    #[serde(default)]
    pub weights: Vec<f64>,
    /// Seed of the random order and of Poisson arrivals; agent `i` uses `seed + i`.
    pub seed: u64,
    /// Reuse connections.
    pub keep_alive: bool,
    /// Worker threads per agent.
    pub threads: u32,
    /// Open-loop arrivals: `"constant"` or `"poisson"`.
    pub arrival: String,
    /// Per-request timeout, ms.
    pub timeout_ms: u64,
    /// Warm-up before the measured share, ms: the first part of the same engine run on
    /// the same connections, left out of every figure by intended instant, as any
    /// step's (docs/methodology.md, "Several injectors"). The agent starts that long
    /// before its place after T0, so its measured seconds begin there.
    #[serde(default)]
    pub warmup_ms: u64,
}

/// An agent's whole share as bytes, sent once with its final record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShareRecord {
    /// Its merged recorder.
    pub recorder: RecorderSnapshot,
    /// The run facts its summary is closed with.
    pub info: RunInfo,
    /// Its start after T0, whole seconds: the shift of its windows.
    pub offset_s: u64,
}

fn one() -> u64 {
    1
}

/// The request order of agent `index`: the spec's, with the random seeds moved by the
/// agent's index so that agents do not send the same sequence.
fn order_of(spec: &LoadSpec, index: u32) -> Result<Order, LoadError> {
    let seed = spec.seed.wrapping_add(u64::from(index));
    Ok(match spec.order.as_str() {
        "same" => Order::Same,
        "sequential" => Order::Sequential {
            block: spec.block.max(1),
        },
        "random" => Order::Random { seed },
        "weighted" => Order::Weighted {
            weights: spec.weights.clone(),
            seed,
        },
        other => return Err(format!("unknown order {other:?}").into()),
    })
}

/// The engine configuration of `share` of `spec`.
pub fn config(
    spec: &LoadSpec,
    share: &Share,
    stop_flag: Arc<AtomicBool>,
) -> Result<LoadConfig, LoadError> {
    let addr: SocketAddr = spec
        .addr
        .parse()
        .map_err(|e| format!("target address {:?}: {e}", spec.addr))?;
    let host = addr.to_string();
    let mut built = Vec::with_capacity(spec.paths.len());
    for (i, p) in spec.paths.iter().enumerate() {
        let mut tpl = RequestTemplate::new(&spec.method, p, &host).keep_alive(spec.keep_alive);
        for (n, v) in &spec.headers {
            tpl = tpl.header(n, v);
        }
        built.push(tpl.build(i as u32)?);
    }
    let seed = spec.seed.wrapping_add(u64::from(share.index));
    let order = order_of(spec, share.index)?;
    let arrival = match spec.arrival.as_str() {
        "constant" => Arrival::Constant,
        "poisson" => Arrival::Poisson,
        other => return Err(format!("unknown arrival {other:?}").into()),
    };
    let model = match share.rate_rps() {
        Some(rate) => LoadModel::Open {
            rate,
            arrival,
            seed,
        },
        None => LoadModel::Closed,
    };
    let connections = share.connections.max(1) as usize;
    let timeout = Duration::from_millis(spec.timeout_ms.max(1));
    let warmup = Duration::from_millis(spec.warmup_ms);
    Ok(LoadConfig {
        addr,
        source_ip: volley_engine::SourceIp::Kernel,
        threads: (spec.threads.max(1) as usize).min(connections),
        connections,
        max_connections: connections,
        keep_alive: spec.keep_alive,
        model,
        stop: StopCondition {
            warmup,
            requests: share.requests,
            duration: share.duration_ms.map(|d| Duration::from_millis(d) + warmup),
        },
        timeout,
        connect_timeout: timeout.min(Duration::from_secs(10)),
        accept_status: StatusRange::default(),
        source: Arc::new(ListSourceFactory::new(built, order)?),
        stop_flag,
    })
}

/// One joined second as a bus record, moved `offset_s` seconds after T0.
pub fn second_record(c: &ClosedSecond, offset_s: u64, generator_bound: bool) -> SecondRecord {
    let mut hists = std::collections::BTreeMap::new();
    for m in Metric::ALL {
        let bytes = if m == Metric::Service && c.service_is_response {
            &c.hists[Metric::Response as usize]
        } else {
            &c.hists[m as usize]
        };
        hists.insert(m.name().to_string(), ByteBuf::from(bytes.clone()));
    }
    let mut errors_by_kind = std::collections::BTreeMap::new();
    for k in volley_engine::ErrorKind::ALL {
        let n = c.counts.errors[k.index()];
        if n > 0 {
            errors_by_kind.insert(k.name().to_string(), n);
        }
    }
    SecondRecord {
        proto: PROTO,
        agent: String::new(),
        second: c.second + offset_s,
        hists,
        counters: Counters {
            requests: c.counts.completed,
            ok: c.counts.ok,
            errors: c.counts.failed(),
            errors_by_kind,
            wire_bytes: c.counts.wire_bytes,
        },
        generator_bound,
        counts: Some(c.counts),
        resources: c.resources,
    }
}

/// The agent's share, run through the harness (see the module doc).
pub fn run_share(ctx: LoadCtx) -> Result<(), LoadError> {
    let spec = ctx
        .assignment
        .load
        .clone()
        .ok_or("the assignment names no load")?;
    let share = ctx.assignment.share;
    let mut cfg = config(&spec, &share, ctx.stop_flag())?;
    if let Some(ip) = ctx.source_ip {
        cfg.source_ip = volley_engine::SourceIp::Fixed(ip);
    }
    // The run started its warm-up before its place: its measured seconds begin there.
    let offset_s = (ctx.started + Duration::from_millis(spec.warmup_ms))
        .saturating_duration_since(ctx.t0)
        .as_secs_f64()
        .round() as u64;
    let (tx, rx) = mpsc::channel();
    let live = Live::new();
    let url = format!(
        "http://{}{}",
        spec.addr,
        spec.paths.first().map_or("/", |p| p)
    );
    let measured = std::thread::scope(|scope| {
        let publisher = scope.spawn(|| publish(rx, cfg.threads, offset_s, &ctx));
        let m = volley_harness::measure::Measure {
            cfg: &cfg,
            wire: &Wire::default(),
            live: &live,
            url,
            method: spec.method.clone(),
            stream: Some(volley_harness::measure::LiveWindows {
                tx,
                key: WindowKey::Intended { hold: cfg.timeout },
                // The coordinator has every second as it closes: the share's final
                // record carries only their digests (issue 26: long runs stay flat).
                stream_only: true,
            }),
            first_answers: None,
        };
        let r = volley_harness::measure::measure(&m);
        drop(m);
        let published = publisher.join();
        (r, published)
    });
    let mut run = measured.0?;
    let digests = measured.1.map_err(|_| "the publisher thread panicked")??;
    run.recorder.set_digests(digests);
    let late = run.recorder.late_samples();
    if late > 0 {
        run.info.notes.push(format!(
            "{late} requests ended more than the timeout ({} ms) after their intended second: \
             the live per-second records count them in the oldest second still open",
            spec.timeout_ms
        ));
    }
    ctx.finish_with(ShareRecord {
        recorder: run.recorder.snapshot()?,
        info: run.info,
        offset_s,
    });
    Ok(())
}

/// Joins the workers' windows and emits each whole second until every sender is gone;
/// returns the seconds' digests (the share's own per-second series).
fn publish(
    rx: mpsc::Receiver<volley_metrics::StreamedSecond>,
    workers: usize,
    offset_s: u64,
    ctx: &LoadCtx,
) -> Result<Vec<SecondDigest>, LoadError> {
    let mut joiner = SecondJoiner::new(workers).keeping_digests();
    for s in rx {
        for c in joiner.push(s)? {
            ctx.emit(second_record(&c, offset_s, false));
        }
    }
    for c in joiner.finish()? {
        ctx.emit(second_record(&c, offset_s, false));
    }
    Ok(joiner.take_digests())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(order: &str) -> LoadSpec {
        LoadSpec {
            addr: "127.0.0.1:1".into(),
            method: "GET".into(),
            paths: vec!["/a".into(), "/b".into()],
            headers: Vec::new(),
            order: order.into(),
            block: 1000,
            weights: vec![3.0, 1.0],
            seed: 7,
            keep_alive: false,
            threads: 1,
            arrival: "constant".into(),
            timeout_ms: 1000,
            warmup_ms: 0,
        }
    }

    #[test]
    fn the_warm_up_is_the_first_part_of_the_same_run_and_the_share_follows_it() {
        let share = Share {
            index: 0,
            of: 1,
            requests: None,
            rate_milli_rps: Some(10_000),
            connections: 2,
            duration_ms: Some(5_000),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let mut s = spec("same");
        let cold = config(&s, &share, stop.clone()).unwrap().stop;
        assert_eq!(cold.warmup, Duration::ZERO);
        assert_eq!(cold.duration, Some(Duration::from_secs(5)));
        s.warmup_ms = 2_000;
        let warm = config(&s, &share, stop).unwrap().stop;
        assert_eq!(warm.warmup, Duration::from_secs(2));
        assert_eq!(
            warm.duration,
            Some(Duration::from_secs(7)),
            "5 s measured after it"
        );
    }

    #[test]
    fn each_agent_keeps_the_workloads_order_with_its_own_seed() {
        assert_eq!(
            order_of(&spec("sequential"), 2).unwrap(),
            Order::Sequential { block: 1000 }
        );
        assert_eq!(
            order_of(&spec("weighted"), 2).unwrap(),
            Order::Weighted {
                weights: vec![3.0, 1.0],
                seed: 9
            }
        );
        assert_eq!(
            order_of(&spec("random"), 0).unwrap(),
            Order::Random { seed: 7 }
        );
        assert_eq!(order_of(&spec("same"), 5).unwrap(), Order::Same);
        assert!(order_of(&spec("sideways"), 0).is_err());
    }
}
