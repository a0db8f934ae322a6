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
        Server::start_with(handler)
    }

    /// As [`Server::start`], with a handler that carries state (cloned per connection).
    pub fn start_with<F>(handler: F) -> Server
    where
        F: Fn(TcpStream) + Clone + Send + 'static,
    {
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
                        let handler = handler.clone();
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
        source_ip: volley_engine::SourceIp::Kernel,
        threads,
        connections: c,
        max_connections: c,
        keep_alive: true,
        model: LoadModel::Closed,
        stop: StopCondition {
            warmup: Duration::ZERO,
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
        warmup: Duration::ZERO,
        requests: None,
        duration: Some(duration),
    };
}

/// Debian's nginx binary; tests that need it skip with a printed reason without it.
pub const NGINX: &str = "/usr/sbin/nginx";

/// An nginx started by a test with a TLS+h2 and an h2c listener; killed on drop, then its
/// private directory removed by the directory's own guard (fields drop after `drop`).
pub struct Nginx {
    pub child: std::process::Child,
    pub dir: NginxDir,
    pub tls_port: u16,
    pub h2c_port: u16,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An nginx's private directory in the temporary directory, removed with everything in
/// it when dropped: when the test ends, and also when it panics before nginx starts.
/// Derefs to its `Path`.
pub struct NginxDir(tempfile::TempDir);

impl std::ops::Deref for NginxDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        self.0.path()
    }
}

/// A free loopback port (bound and released: the caller binds it next).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A fresh private directory for one nginx (`PREFIX-XXXXXX`, a random suffix per call).
/// Mode 0755 like a directory made with `create_dir`: nginx's workers may run as another
/// user than the test and must reach the docroot inside it.
pub fn nginx_dir(prefix: &str) -> NginxDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix(&format!("{prefix}-"))
        .tempdir()
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    NginxDir(dir)
}

/// Writes `conf` into `dir`, starts nginx on it in the foreground (one process, so a
/// kill stops everything) and waits up to 10 s for both listeners, failing the test with
/// nginx's error log if they never open.
pub fn spawn_nginx(dir: NginxDir, conf: &str, tls_port: u16, h2c_port: u16) -> Nginx {
    let conf_path = dir.join("nginx.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let child = std::process::Command::new(NGINX)
        .arg("-p")
        .arg(&*dir)
        .arg("-c")
        .arg(&conf_path)
        .arg("-e")
        .arg(dir.join("error.log"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn nginx");
    let nginx = Nginx {
        child,
        dir,
        tls_port,
        h2c_port,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    for port in [tls_port, h2c_port] {
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            let log = std::fs::read_to_string(nginx.dir.join("error.log")).unwrap_or_default();
            assert!(Instant::now() < deadline, "nginx did not start: {log}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    nginx
}
