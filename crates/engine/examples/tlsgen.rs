//! Sanity runs of the engine over TLS / HTTP/2 beside h2load or wrk, until
//! `volley bench` has the flags: closed loop, keep-alive, one thread.
//!
//! `cargo run --release -p volley-engine --example tlsgen -- ADDR PATH CA_FILE|- h1|h2|h2c C STREAMS SECONDS`

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use volley_engine::{
    run_with, HttpVersion, ListSourceFactory, Live, LoadConfig, LoadModel, Order, RequestTemplate,
    Sample, Sink, StatusRange, StopCondition, TlsTarget, Wire,
};

#[derive(Default)]
struct Count {
    ok: u64,
    failed: u64,
}

impl Sink for Count {
    fn record(&mut self, s: &Sample) {
        if s.error.is_none() {
            self.ok += 1;
        } else {
            self.failed += 1;
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() != 7 {
        return Err("usage: ADDR PATH CA_FILE|- h1|h2|h2c C STREAMS SECONDS".into());
    }
    let addr = a[0].parse()?;
    let (c, streams, secs): (usize, u32, u64) = (a[4].parse()?, a[5].parse()?, a[6].parse()?);
    let tls = Some(TlsTarget {
        client: volley_tls::ClientTls {
            // `-` trusts any certificate (a lab target's self-made one).
            insecure: a[2] == "-",
            ca_file: (a[2] != "-").then(|| a[2].clone().into()),
            ..Default::default()
        },
        server_name: "localhost".into(),
    });
    let wire = match a[3].as_str() {
        "h1" => Wire {
            tls,
            http: HttpVersion::Http1,
            ..Wire::default()
        },
        "h2" => Wire {
            tls,
            http: HttpVersion::H2 { streams },
            ..Wire::default()
        },
        "h2c" => Wire {
            tls: None,
            http: HttpVersion::H2 { streams },
            ..Wire::default()
        },
        other => return Err(format!("unknown mode {other}").into()),
    };
    let req = RequestTemplate::new("GET", &a[1], "localhost").build(0)?;
    let cfg = LoadConfig {
        addr,
        source_ip: volley_engine::SourceIp::Kernel,
        threads: 1,
        connections: c,
        max_connections: c,
        keep_alive: true,
        model: LoadModel::Closed,
        stop: StopCondition {
            warmup: Duration::ZERO,
            requests: None,
            duration: Some(Duration::from_secs(secs)),
        },
        timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(2),
        accept_status: StatusRange::default(),
        source: Arc::new(ListSourceFactory::new(vec![req], Order::Same)?),
        stop_flag: Arc::new(AtomicBool::new(false)),
    };
    let out = run_with(&cfg, &wire, |_| Count::default(), &Live::new())?;
    let ok: u64 = out.sinks.iter().map(|s| s.ok).sum();
    let failed: u64 = out.sinks.iter().map(|s| s.failed).sum();
    let secs = out.elapsed_ns as f64 / 1e9;
    println!(
        "volley {} c={c} m={streams}: {:.0} req/s ok={ok} failed={failed} tls_failures={:?}",
        a[3],
        ok as f64 / secs,
        out.tls_failures
    );
    Ok(())
}
