//! Many simulated agents and one coordinator on a real bus, for `bench/agents_scale.py`
//! (issue 14's scale question: how many agents can one coordinator merge in time?).
//!
//! `agents_scale sim BUS N SECS`: N agents in this process (one thread each, the real
//! [`agent::run`] with its own bus connection, outbox and heartbeats), whose load sends
//! no HTTP: each second it emits a record with seven synthetic HDR histograms of 1000
//! values each, deflated as the recorder streams them, so the coordinator decodes and
//! adds what it would in a real run.
//!
//! `agents_scale coord BUS N SECS`: the real [`coordinator::coordinate`] for N agents.
//! It prints `ready` when the first second is merged live (the bench samples its CPU
//! from there), then one JSON line with the merge delays when the run is over, and
//! waits for stdin to close so the bench can read its CPU before it exits.
//!
//! Merge delay of second s: from the arrival of the last agent's record for s to
//! [`Event::Merged`] for s. Lag: from the end of second s to that event (includes the
//! bus, the agents' send and the coordinator's queue).

use hdrhistogram::serialization::V2DeflateSerializer;
use serde_bytes::ByteBuf;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::time::{Duration, Instant};
use volley_agents::agent::{self, AgentConfig, LoadCtx, LoadError};
use volley_agents::clock;
use volley_agents::coordinator::{self, CoordinatorConfig, Event};
use volley_agents::msg::{Counters, SecondRecord, PROTO};
use volley_agents::share::Whole;
use volley_metrics::{hist, Metric};

fn usage() -> ! {
    eprintln!("usage: agents_scale sim|coord BUS_URL AGENTS SECONDS");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 4 {
        usage();
    }
    let (Ok(n), Ok(secs)) = (args[2].parse::<usize>(), args[3].parse::<u64>()) else {
        usage()
    };
    match args[0].as_str() {
        "sim" => sim(&args[1], n),
        "coord" => coord(&args[1], n, secs),
        _ => usage(),
    }
}

/// One second's synthetic histograms: 1000 values spread from 0.2 to 50 ms, moved by
/// the agent and the second so that no two records are alike.
fn synthetic_record(ctx: &LoadCtx, k: u64) -> Result<SecondRecord, LoadError> {
    let mut hists = BTreeMap::new();
    let seed = u64::from(ctx.assignment.share.index) * 31 + k;
    let mut ser = V2DeflateSerializer::new();
    for (j, m) in Metric::ALL.iter().enumerate() {
        let mut h = hist::new_hist();
        for i in 0..1_000u64 {
            let v = 200 + (i * 7_919 + seed * 104_729 + j as u64 * 13) % 50_000;
            h.record(v)?;
        }
        let bytes = hist::encode(&mut ser, &h)?;
        hists.insert(m.name().to_string(), ByteBuf::from(bytes));
    }
    Ok(SecondRecord {
        proto: PROTO,
        agent: String::new(),
        second: ctx.second_of(ctx.started + Duration::from_secs(k)),
        hists,
        counters: Counters {
            requests: 1_000,
            ok: 1_000,
            ..Counters::default()
        },
        generator_bound: false,
        counts: None,
        resources: None,
    })
}

/// The simulated load: a record at the end of each second of its share.
fn synthetic(ctx: LoadCtx) -> Result<(), LoadError> {
    let secs = ctx.assignment.share.duration_ms.ok_or("needs a duration")? / 1_000;
    for k in 0..secs {
        let end = ctx.started + Duration::from_secs(k + 1);
        while Instant::now() < end {
            if ctx.should_stop() {
                return Ok(());
            }
            std::thread::sleep(
                end.saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(100)),
            );
        }
        ctx.emit(synthetic_record(&ctx, k)?);
    }
    Ok(())
}

fn sim(bus: &str, n: usize) {
    let threads: Vec<_> = (1..=n)
        .map(|i| {
            let mut cfg = AgentConfig::new(bus, &format!("sim{i}"));
            cfg.assign_bound = Duration::from_secs(120);
            std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || agent::run(&cfg, synthetic, &mut |_| {}))
                .expect("agent thread")
        })
        .collect();
    let mut failed = 0;
    for t in threads {
        if !matches!(t.join(), Ok(Ok(_))) {
            failed += 1;
        }
    }
    eprintln!("agents_scale sim: {n} agents, {failed} failed");
    std::process::exit(i32::from(failed > 0));
}

/// Percentile `p` (0..=100) of sorted values.
fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i]
}

fn coord(bus: &str, n: usize, secs: u64) {
    let whole = Whole {
        requests: None,
        rate_rps: None,
        connections: n as u64,
        duration_ms: Some(secs * 1_000),
    };
    let mut cfg = CoordinatorConfig::new(bus, "scale", whole, n);
    cfg.ready_bound = Duration::from_secs(120);
    cfg.max_offset = Duration::from_secs(1);
    // Probes and assignments go one agent after another: T0 leaves them time.
    cfg.start_lead = Duration::from_millis(2_000 + 20 * n as u64);
    let mut last_arrival: BTreeMap<u64, Instant> = BTreeMap::new();
    let mut delays_us = Vec::new();
    let mut merged_wall: Vec<(u64, i64)> = Vec::new();
    let mut ready = false;
    let r = coordinator::coordinate(&cfg, &mut |e| match e {
        Event::Second(r) => {
            last_arrival.insert(r.record.second, Instant::now());
        }
        Event::Merged(m) => {
            let now = Instant::now();
            if let Some(t) = last_arrival.get(&m.second) {
                delays_us.push(now.duration_since(*t).as_secs_f64() * 1e6);
            }
            merged_wall.push((m.second, clock::wall_ns()));
            if !ready {
                ready = true;
                println!("ready");
                let _ = std::io::stdout().flush();
            }
        }
        _ => {}
    });
    let r = match r {
        Ok(r) => r,
        Err(e) => {
            eprintln!("agents_scale coord: {e}");
            std::process::exit(1);
        }
    };
    let mut lags_ms: Vec<f64> = merged_wall
        .iter()
        .map(|(s, w)| (w - r.t0_ns) as f64 / 1e6 - (*s as f64 + 1.0) * 1_000.0)
        .collect();
    delays_us.sort_by(f64::total_cmp);
    lags_ms.sort_by(f64::total_cmp);
    let requests: u64 = r.merged.seconds.iter().map(|s| s.counters.requests).sum();
    let out = serde_json::json!({
        "agents": r.agents.len(),
        "seconds": r.merged.seconds.len(),
        "merged_live": delays_us.len(),
        "requests": requests,
        "lost": r.agents.iter().filter(|a| a.lost_from_s.is_some()).count(),
        "late_seconds": r.agents.iter().map(|a| a.late_seconds).sum::<u64>(),
        "merge_delay_us": {"p50": pct(&delays_us, 50.0), "p99": pct(&delays_us, 99.0),
                           "max": pct(&delays_us, 100.0)},
        "lag_ms": {"p50": pct(&lags_ms, 50.0), "p99": pct(&lags_ms, 99.0),
                   "max": pct(&lags_ms, 100.0)},
    });
    println!("{out}");
    let _ = std::io::stdout().flush();
    // The bench reads this process's CPU now; it closes stdin when done.
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
}
