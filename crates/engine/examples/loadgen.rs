//! Sanity load generator for comparing the engine with wrk by hand:
//!
//! `cargo run --release -p volley-engine --example loadgen -- ADDR[/PATH] CONNS SECONDS [RATE] [close]`
//!
//! Closed loop unless RATE (req/s, open loop) is given and non-zero; `close` turns
//! keep-alive off. Prints throughput, errors and (open loop) send-lag p99.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use volley_engine::{
    run, Arrival, ListSourceFactory, Live, LoadConfig, LoadModel, Order, RequestTemplate, Sample,
    Sink, StatusRange, StopCondition,
};

/// Counts, plus send lags in a preallocated vector (sanity tool, not the recorder).
struct Tally {
    ok: u64,
    errors: u64,
    service_ns: u64,
    lags_ns: Vec<u64>,
}

impl Sink for Tally {
    fn record(&mut self, s: &Sample) {
        if s.error.is_none() {
            self.ok += 1;
            self.service_ns += s.service_ns();
        } else {
            self.errors += 1;
        }
        if self.lags_ns.len() < self.lags_ns.capacity() {
            self.lags_ns.push(s.send_lag_ns());
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: loadgen ADDR[/PATH] CONNS SECONDS [RATE] [close]");
        std::process::exit(2);
    }
    let parsed = (|| -> Option<_> {
        let (addr, path) = match args[1].find('/') {
            Some(i) => (&args[1][..i], args[1][i..].to_string()),
            None => (args[1].as_str(), "/".to_string()),
        };
        let addr: std::net::SocketAddr = addr.parse().ok()?;
        let conns: usize = args[2].parse().ok()?;
        let secs: f64 = args[3].parse().ok()?;
        let rate: f64 = args.get(4).map_or(Some(0.0), |r| r.parse().ok())?;
        Some((addr, path, conns, secs, rate))
    })();
    let Some((addr, path, conns, secs, rate)) = parsed else {
        eprintln!("loadgen: bad arguments");
        std::process::exit(2);
    };
    let keep_alive = args.get(5).map(String::as_str) != Some("close");
    let req = RequestTemplate::new("GET", &path, &addr.to_string())
        .keep_alive(keep_alive)
        .build(0)
        .expect("valid request");
    let model = if rate > 0.0 {
        LoadModel::Open {
            rate,
            arrival: Arrival::Constant,
            seed: 1,
        }
    } else {
        LoadModel::Closed
    };
    let cfg = LoadConfig {
        addr,
        source_ip: volley_engine::SourceIp::Kernel,
        threads: 1,
        connections: conns,
        max_connections: conns * 4,
        keep_alive,
        model,
        stop: StopCondition {
            warmup: Duration::ZERO,
            requests: None,
            duration: Some(Duration::from_secs_f64(secs)),
        },
        timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(2),
        accept_status: StatusRange::default(),
        source: Arc::new(ListSourceFactory::new(vec![req], Order::Same).expect("source")),
        stop_flag: Arc::new(AtomicBool::new(false)),
    };
    let lag_cap = if rate > 0.0 {
        (rate * secs * 1.1) as usize
    } else {
        0
    };
    let mk = |_| Tally {
        ok: 0,
        errors: 0,
        service_ns: 0,
        lags_ns: Vec::with_capacity(lag_cap),
    };
    let out = match run(&cfg, mk, &Live::new()) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("loadgen: {e}");
            std::process::exit(1);
        }
    };
    let t = &out.sinks[0];
    let secs_run = out.elapsed_ns as f64 / 1e9;
    println!(
        "requests {} ok, {} errors in {:.3} s: {:.0} req/s, mean service {:.1} us, {} connections opened, {} idle-close retries, cap hits {}",
        t.ok,
        t.errors,
        secs_run,
        t.ok as f64 / secs_run,
        t.service_ns as f64 / t.ok.max(1) as f64 / 1e3,
        out.connections_opened,
        out.idle_close_retries,
        out.cap_hits,
    );
    if rate > 0.0 {
        let mut lags = t.lags_ns.clone();
        lags.sort_unstable();
        let p = |q: f64| {
            lags.get(((lags.len() as f64 * q) as usize).min(lags.len().saturating_sub(1)))
                .copied()
                .unwrap_or(0)
        };
        println!(
            "open loop: offered {rate:.0} req/s, achieved send {:.0} req/s, send lag p50 {:.1} us p99 {:.1} us max {:.1} us",
            lags.len() as f64 / secs_run,
            p(0.5) as f64 / 1e3,
            p(0.99) as f64 / 1e3,
            lags.last().copied().unwrap_or(0) as f64 / 1e3
        );
    }
}
