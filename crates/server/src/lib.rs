//! volley-server: the built-in event-driven HTTP/1.1 and HTTP/2 server behind
//! `volley serve`.
//!
//! Place in the flow: a *target*, beside the engine. `volley serve`, `volley demo` and
//! studies start it (in-process through [`Server::bind`] / [`Server::spawn`], or as a
//! child process); the engine then loads it over loopback.
//!
//! Shape: one mio (epoll) event loop per thread sharing one listener (`worker`), each
//! connection's buffers and socket I/O (`conn`), the answers written into them
//! (`respond`), a zero-allocation request-head parser ([`parse`]), a per-thread cache of small files
//! with preformatted header blocks ([`files`]), and an optional buffered access log
//! ([`log`]). With [`ServerConfig::tls`] every connection is HTTPS (a rustls session
//! driven by the same loop, `tls`). HTTP/2 (`h2`) is spoken when TLS ALPN selects it or
//! a plain connection opens with the h2c preface; what to answer is decided once for
//! every protocol (`answer`), so they differ only in framing. With
//! [`ServerConfig::http3`] each thread also answers HTTP/3 on a UDP socket of the same
//! port number (`h3`: QUIC through quinn-proto, driven by the same loop), and the
//! HTTP/1.1 and HTTP/2 answers advertise it with `Alt-Svc`. Methods `volley_dav::Dav::handles` claims are handed to the DAV handler;
//! every file lookup goes through `volley_docroot::path::resolve`.
#![deny(missing_docs)]

mod answer;
mod conn;
pub mod date;
pub mod files;
#[doc(hidden)]
pub mod fuzzing;
mod gate;
mod h2;
mod h3;
pub mod log;
pub mod parse;
mod respond;
mod tls;
mod worker;

pub use volley_tls::certs::CertPaths;
pub use volley_tls::ServerTls;

use std::fs::{File, OpenOptions};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use worker::{Limits, Shared, Worker};

/// Resolved configuration of one server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Directory to serve.
    pub root: PathBuf,
    /// Address to bind; port 0 picks a free port (see [`Server::local_addr`]).
    pub listen: SocketAddr,
    /// Event-loop threads (at least 1).
    pub threads: usize,
    /// Access log file (appended to), if any.
    pub access_log: Option<PathBuf>,
    /// Open connections beyond this are answered 503 and closed.
    pub max_connections: usize,
    /// A client that has not sent a complete header block within this is closed (408).
    pub header_timeout: Duration,
    /// An idle keep-alive connection is closed after this.
    pub idle_timeout: Duration,
    /// Larger request bodies get 413.
    pub max_body_bytes: u64,
    /// Files up to this size are cached in memory.
    pub max_cached_file_bytes: u64,
    /// Serve HTTPS with this certificate and key instead of plain HTTP. ALPN is set
    /// here whatever the options say: `h2, http/1.1` with [`ServerConfig::http2`], else
    /// `http/1.1` alone.
    pub tls: Option<ServerTls>,
    /// Speak HTTP/2 (static files and DAV): over TLS when ALPN selects `h2`, and
    /// h2c when a plain connection opens with the client preface. Off: HTTP/1.1 only.
    pub http2: bool,
    /// Multi-user mode: every request needs Basic credentials of one of these accounts
    /// and reaches only `/` and that account's home (`volley_dav::auth`). None: the
    /// anonymous single-user server.
    pub auth: Option<Arc<volley_dav::auth::Auth>>,
    /// Speak HTTP/3 too: QUIC on UDP at the same port number (needs
    /// [`ServerConfig::tls`]: QUIC always runs TLS 1.3), advertised by `Alt-Svc` on the
    /// HTTP/1.1 and HTTP/2 answers.
    pub http3: bool,
    /// Without accounts, take writes (PUT, DELETE, MKCOL, MOVE, ...) from anyone. Off
    /// (the default): an anonymous server is read-only and answers them 405 with the
    /// methods it allows ([`volley_dav::Dav::read_only`]), so serving a directory never
    /// makes it a drop box by accident. With [`ServerConfig::auth`] writes need an
    /// account anyway and this is ignored.
    pub writable: bool,
}

impl ServerConfig {
    /// Defaults for serving `root` on a free loopback port.
    pub fn new(root: impl Into<PathBuf>) -> ServerConfig {
        ServerConfig {
            root: root.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            threads: 1,
            access_log: None,
            max_connections: 10_000,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_body_bytes: 16 << 20,
            max_cached_file_bytes: 256 << 10,
            tls: None,
            http2: true,
            http3: false,
            auth: None,
            writable: false,
        }
    }

    /// Whether this server takes writes: accounts are configured, or anonymous writes
    /// were asked for ([`ServerConfig::writable`]).
    pub fn takes_writes(&self) -> bool {
        self.auth.is_some() || self.writable
    }
}

/// Why the server could not start. Messages leave the cause to `source()`, so a
/// printed error chain names each cause once.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The root is missing or not a directory.
    #[error("root {0} is not a directory")]
    Root(PathBuf),
    /// Binding the listening socket failed.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// Binding HTTP/3's UDP socket at the TCP port number failed (another program
    /// holds that UDP port).
    #[error("cannot listen on {addr} over UDP for HTTP/3")]
    BindUdp {
        /// The address (the TCP listener's, port included).
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The access log could not be opened.
    #[error("cannot open access log {path}")]
    AccessLog {
        /// The log path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A bad configuration value.
    #[error("invalid configuration: {0}")]
    Config(&'static str),
    /// The certificate, key or TLS options were refused.
    #[error("TLS setup failed")]
    Tls(#[from] volley_tls::TlsConfigError),
    /// Setting up an event loop failed.
    #[error("event loop setup failed")]
    Io(#[from] std::io::Error),
}

/// A bound, not yet running server.
#[derive(Debug)]
pub struct Server {
    config: ServerConfig,
    listener: std::net::TcpListener,
    local_addr: SocketAddr,
    log_file: Option<Arc<Mutex<File>>>,
    tls: Option<Arc<volley_tls::rustls::ServerConfig>>,
    /// HTTP/3: the QUIC configuration and one UDP socket per thread.
    quic: Option<(h3::QuicConfig, Vec<std::net::UdpSocket>)>,
}

/// Writes a throw-away CA and a server certificate for localhost / 127.0.0.1 / ::1
/// into `dir` (for `volley serve --tls-self-signed`); clients trust `ca`.
pub fn self_signed_set(dir: &Path) -> Result<CertPaths, ServerError> {
    Ok(volley_tls::certs::write_local_set(dir)?)
}

impl Server {
    /// Validates `config` and binds the listening socket (so the port is known before
    /// any thread starts).
    pub fn bind(config: ServerConfig) -> Result<Server, ServerError> {
        if !config.root.is_dir() {
            return Err(ServerError::Root(config.root));
        }
        if config.threads == 0 {
            return Err(ServerError::Config("threads must be at least 1"));
        }
        if config.max_connections == 0 {
            return Err(ServerError::Config("max connections must be at least 1"));
        }
        if config.header_timeout.is_zero() || config.idle_timeout.is_zero() {
            return Err(ServerError::Config("timeouts must be positive"));
        }
        // Certificates first: a bad key should not leave a bound port behind.
        let tls = match &config.tls {
            Some(options) => {
                let mut options = options.clone();
                options.alpn = if config.http2 {
                    vec![
                        volley_tls::ALPN_H2.to_string(),
                        volley_tls::ALPN_HTTP11.to_string(),
                    ]
                } else {
                    vec![volley_tls::ALPN_HTTP11.to_string()]
                };
                Some(options.server_config()?)
            }
            None => None,
        };
        let quic_config = match (&config.tls, config.http3) {
            (Some(tls), true) => Some(h3::quic_config(tls, config.idle_timeout)?),
            (None, true) => return Err(ServerError::Config("HTTP/3 needs TLS")),
            (_, false) => None,
        };
        let listener =
            std::net::TcpListener::bind(config.listen).map_err(|source| ServerError::Bind {
                addr: config.listen,
                source,
            })?;
        listener.set_nonblocking(true)?;
        let local_addr = listener.local_addr()?;
        let quic = match quic_config {
            Some(q) => {
                let socks = (0..config.threads)
                    .map(|_| bind_udp(local_addr))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|source| ServerError::BindUdp {
                        addr: local_addr,
                        source,
                    })?;
                Some((q, socks))
            }
            None => None,
        };
        let log_file = match &config.access_log {
            Some(path) => {
                let f = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|source| ServerError::AccessLog {
                        path: path.clone(),
                        source,
                    })?;
                Some(Arc::new(Mutex::new(f)))
            }
            None => None,
        };
        Ok(Server {
            config,
            listener,
            local_addr,
            log_file,
            tls,
            quic,
        })
    }

    /// The bound address (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `https` when serving TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// Starts the worker threads and returns at once.
    pub fn spawn(self) -> Result<ServerHandle, ServerError> {
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            active: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
        });
        let limits = Limits {
            max_connections: self.config.max_connections,
            header_timeout: self.config.header_timeout,
            idle_timeout: self.config.idle_timeout,
            max_body_bytes: self.config.max_body_bytes,
            http2: self.config.http2,
            alt_svc: self.quic.as_ref().map(|_| {
                format!("h3=\":{}\"; ma=86400", self.local_addr.port())
                    .into_bytes()
                    .into_boxed_slice()
            }),
        };
        let (quic_config, mut udp) = match self.quic {
            Some((c, socks)) => (Some(c), socks),
            None => (None, Vec::new()),
        };
        let mut handle = ServerHandle {
            shared: shared.clone(),
            wakers: Vec::new(),
            answered: Vec::new(),
            threads: Vec::new(),
        };
        for n in 0..self.config.threads {
            let listener = mio::net::TcpListener::from_std(self.listener.try_clone()?);
            let cache =
                files::Cache::new(self.config.root.clone(), self.config.max_cached_file_bytes);
            let mut dav = volley_dav::Dav::new(self.config.root.clone());
            if !self.config.takes_writes() {
                dav = dav.read_only();
            }
            let log = self.log_file.clone().map(log::AccessLog::new);
            let quic = match (&quic_config, udp.pop()) {
                (Some(c), Some(sock)) => Some(h3::QuicSide::new(
                    sock,
                    c,
                    usize::try_from(self.config.max_body_bytes).unwrap_or(usize::MAX),
                    self.config.max_connections,
                )?),
                _ => None,
            };
            let worker = Worker::new(
                mio::Poll::new()?,
                listener,
                cache,
                dav,
                self.config.auth.clone(),
                shared.clone(),
                log,
                limits.clone(),
                self.tls.clone(),
                quic,
            )?;
            handle.wakers.push(worker.waker()?);
            handle.answered.push(worker.answered());
            let t = std::thread::Builder::new()
                .name(format!("volley-serve-{n}"))
                .spawn(move || worker.run())?;
            handle.threads.push(t);
        }
        Ok(handle)
    }
}

/// A UDP socket on `addr`'s port number for one thread's QUIC endpoint. SO_REUSEPORT
/// lets every thread bind it; the kernel then sends each client (address and port) to
/// one socket, so a connection's datagrams stay with the thread that holds it. A
/// receive buffer of a few MB rides out bursts (the kernel caps it at rmem_max).
fn bind_udp(addr: SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    sock.set_reuse_port(true)?;
    let _ = sock.set_recv_buffer_size(4 << 20);
    let _ = sock.set_send_buffer_size(4 << 20);
    sock.bind(&addr.into())?;
    sock.set_nonblocking(true)?;
    Ok(sock.into())
}

/// A running server; [`ServerHandle::shutdown`] (or drop) stops and joins it.
#[derive(Debug)]
pub struct ServerHandle {
    shared: Arc<Shared>,
    wakers: Vec<Arc<mio::Waker>>,
    answered: Vec<Arc<AtomicU64>>,
    threads: Vec<JoinHandle<()>>,
}

impl ServerHandle {
    /// Requests answered so far by each event-loop thread, in thread order: shows how
    /// the kernel spread connections over the threads sharing the listener.
    pub fn answered_per_thread(&self) -> Vec<u64> {
        self.answered
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .collect()
    }

    /// Stops every worker, closes connections, flushes the access log and joins.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        for w in &self.wakers {
            let _ = w.wake();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop();
    }
}
