//! Bounded loopback servers and a collecting sink for the engine's integration tests.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use volley_engine::{
    Arrival, ErrorKind, ListSourceFactory, LoadConfig, LoadModel, Order, RequestTemplate, Sample,
    Sink, StatusRange, StopCondition,
};

/// Keeps every sample and event.
#[derive(Default)]
pub struct Collect {
    pub samples: Vec<Sample>,
    pub cap_hits: u64,
    pub ticks: u64,
    pub connection_events: u64,
}

impl Sink for Collect {
    fn record(&mut self, sample: &Sample) {
        self.samples.push(*sample);
    }
    fn connections(&mut self, _now_ns: u64, _open_now: u32) {
        self.connection_events += 1;
    }
    fn cap_hit(&mut self, _now_ns: u64) {
        self.cap_hits += 1;
    }
    fn tick(&mut self, _now_ns: u64) {
        self.ticks += 1;
    }
}

pub fn all_samples(sinks: &[Collect]) -> Vec<Sample> {
    sinks
        .iter()
        .flat_map(|s| s.samples.iter().copied())
        .collect()
}

pub fn count(samples: &[Sample], kind: Option<ErrorKind>) -> usize {
    samples.iter().filter(|s| s.error == kind).count()
}

/// A TCP server on 127.0.0.1:0 that hands each connection to `handler` on its own
/// thread. Bounded: it stops accepting after 20 s or when dropped, and handlers get
/// socket timeouts.
pub struct Server {
    pub addr: SocketAddr,
    pub accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    pub fn start(handler: fn(TcpStream)) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        let (stop2, accepted2) = (Arc::clone(&stop), Arc::clone(&accepted));
        let thread = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(20);
            while !stop2.load(Ordering::Relaxed) && Instant::now() < deadline {
                match listener.accept() {
                    Ok((s, _)) => {
                        accepted2.fetch_add(1, Ordering::Relaxed);
                        let _ = s.set_nonblocking(false);
                        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                        let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
                        std::thread::spawn(move || handler(s));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        Server {
            addr,
            accepted,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one request head (tests send no bodies). False on EOF or error.
pub fn read_request(s: &mut TcpStream) -> bool {
    let mut buf = Vec::with_capacity(512);
    let mut byte = [0u8; 256];
    loop {
        match s.read(&mut byte) {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&byte[..n]),
        }
        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
            return true;
        }
    }
}

/// Keep-alive server answering 200 "ok" to every request.
pub fn ok_handler(mut s: TcpStream) {
    while read_request(&mut s) {
        if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .is_err()
        {
            return;
        }
    }
}

/// A closed-loop keep-alive config against `addr` with `n` requests on `c` connections.
pub fn config(addr: SocketAddr, threads: usize, c: usize, n: u64) -> LoadConfig {
    let req = RequestTemplate::new("GET", "/", &addr.to_string())
        .build(0)
        .expect("request");
    LoadConfig {
        addr,
        threads,
        connections: c,
        max_connections: c,
        keep_alive: true,
        model: LoadModel::Closed,
        stop: StopCondition {
            requests: Some(n),
            duration: Some(Duration::from_secs(15)),
        },
        timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(2),
        accept_status: StatusRange::default(),
        source: Arc::new(ListSourceFactory::new(vec![req], Order::Same).expect("source")),
        stop_flag: Arc::new(AtomicBool::new(false)),
    }
}

/// Open loop at `rate` for `duration`.
pub fn open(cfg: &mut LoadConfig, rate: f64, duration: Duration) {
    cfg.model = LoadModel::Open {
        rate,
        arrival: Arrival::Constant,
        seed: 1,
    };
    cfg.stop = StopCondition {
        requests: None,
        duration: Some(duration),
    };
}
