//! TLS under the HTTP/1.1 worker: a [`Transport`] that runs a rustls session (from
//! `volley-tls`) over a non-blocking mio socket.
//!
//! Place in the flow: `worker -> **TlsTransport** -> TCP`. The connect is reported
//! complete only once the handshake is, so the worker charges TCP connect plus
//! handshake to the request that opened the connection (ab's "Connect" column) and
//! [`Transport::handshake_ns`] says how much of it was TLS. One [`TlsConnector`] per
//! worker holds one `rustls::ClientConfig`, so with resumption on its session cache is
//! shared by that worker's connections and workers never contend on a cache lock.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use mio::net::TcpStream;
use volley_tls::rustls::ClientConfig;
use volley_tls::{ClientTls, TlsConfigError, TlsFailure, TlsSession, TlsStream};

use crate::conn::{tcp_connected, Transport};
use crate::ErrorKind;

/// TLS failures by class ([`TlsFailure::name`]), shared by every connection of a run.
/// Failures are rare (a connection fails once), so a mutex costs nothing measurable.
#[derive(Debug, Default, Clone)]
pub struct TlsFailureCounts(Arc<Mutex<BTreeMap<&'static str, u64>>>);

impl TlsFailureCounts {
    /// Counts one failure of class `name`.
    pub fn add(&self, name: &'static str) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *map.entry(name).or_insert(0) += 1;
    }

    /// A copy of the counts so far.
    pub fn snapshot(&self) -> BTreeMap<&'static str, u64> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// What a worker's TLS connections share: the client config (and so its session
/// cache), the server name, whether ALPN must agree, and the failure counters.
#[derive(Debug, Clone)]
pub struct TlsConnector {
    config: Arc<ClientConfig>,
    server_name: String,
    require_alpn: bool,
    failures: TlsFailureCounts,
    /// Full (not resumed) handshakes completed, for tests and reports on resumption.
    full_handshakes: Arc<std::sync::atomic::AtomicU64>,
}

impl TlsConnector {
    /// One worker's connector. `server_name` is the URL's host (SNI and certificate
    /// check); `require_alpn` makes a handshake without an agreed protocol a failure.
    pub fn new(
        tls: &ClientTls,
        server_name: &str,
        require_alpn: bool,
        failures: TlsFailureCounts,
        full_handshakes: Arc<std::sync::atomic::AtomicU64>,
    ) -> Result<TlsConnector, TlsConfigError> {
        // Check the name once here, so a bad host is a config error, not a failure
        // per connection.
        volley_tls::server_name(server_name)?;
        Ok(TlsConnector {
            config: tls.client_config()?,
            server_name: server_name.to_string(),
            require_alpn,
            failures,
            full_handshakes,
        })
    }

    /// The rustls config (for QUIC, which runs its own TLS over it).
    pub(crate) fn rustls_config(&self) -> Arc<ClientConfig> {
        self.config.clone()
    }

    /// The name the server's certificate is checked against (and SNI).
    pub(crate) fn server_name(&self) -> &str {
        &self.server_name
    }

    /// Counts one failure of class `name` (QUIC handshakes fail inside quinn-proto,
    /// which reports a TLS alert code rather than a rustls error).
    pub(crate) fn count_class(&self, name: &'static str) {
        self.failures.add(name);
    }

    /// A new client session for one connection.
    pub(crate) fn session(&self) -> io::Result<TlsSession> {
        TlsSession::new(self.config.clone(), &self.server_name)
            .map(|s| s.require_alpn(self.require_alpn))
            .map_err(io::Error::other)
    }

    /// Counts `err` if it carries a TLS failure; returns whether it did.
    pub(crate) fn count(&self, err: &io::Error) -> bool {
        match TlsFailure::in_io(err) {
            Some(f) => {
                self.failures.add(f.name());
                true
            }
            None => false,
        }
    }

    /// Notes a completed handshake.
    pub(crate) fn handshake_done(&self, resumed: bool) {
        if !resumed {
            self.full_handshakes
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// TLS over a non-blocking TCP socket.
#[derive(Debug)]
pub struct TlsTransport {
    stream: TlsStream<TcpStream>,
    connector: TlsConnector,
    tcp_up: bool,
    /// When the TCP connect finished, i.e. the handshake started.
    handshake_start: Option<Instant>,
    handshake_ns: u64,
    /// This connection's failure was counted already (one per connection).
    failure_counted: bool,
}

impl TlsTransport {
    fn check<T>(&mut self, r: io::Result<T>) -> io::Result<T> {
        if let Err(e) = &r {
            if !self.failure_counted && self.connector.count(e) {
                self.failure_counted = true;
                // Tell the server why (an alert), as a real client does; best effort.
                let _ = self.stream.flush_tls();
            }
        }
        r
    }

    /// The TLS session (negotiated version, ALPN, resumption).
    pub fn session(&self) -> &TlsSession {
        self.stream.session()
    }
}

impl Transport for TlsTransport {
    type Connector = TlsConnector;

    const SCHEME: &'static str = "https";

    fn connect(
        connector: &TlsConnector,
        addr: SocketAddr,
        from: Option<IpAddr>,
    ) -> io::Result<Self> {
        let tcp = crate::conn::tcp_connect(addr, from)?;
        tcp.set_nodelay(true)?;
        Ok(TlsTransport {
            stream: TlsStream::new(connector.session()?, tcp),
            connector: connector.clone(),
            tcp_up: false,
            handshake_start: None,
            handshake_ns: 0,
            failure_counted: false,
        })
    }

    fn source(&mut self) -> &mut dyn mio::event::Source {
        self.stream.get_mut()
    }

    fn finish_connect(&mut self) -> io::Result<bool> {
        if !self.tcp_up {
            if !tcp_connected(self.stream.get_ref())? {
                return Ok(false);
            }
            self.tcp_up = true;
            self.handshake_start = Some(Instant::now());
        }
        let r = self.stream.handshake();
        match self.check(r)? {
            false => Ok(false),
            true => {
                if let Some(start) = self.handshake_start {
                    self.handshake_ns = start.elapsed().as_nanos() as u64;
                }
                self.connector
                    .handshake_done(self.stream.session().resumed());
                Ok(true)
            }
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let r = self.stream.read(buf);
        self.check(r)
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let r = self.stream.write(buf);
        self.check(r)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush_tls().map(|_| ())
    }

    fn handshake_ns(&self) -> u64 {
        self.handshake_ns
    }

    fn error_kind(err: &io::Error, default: ErrorKind) -> ErrorKind {
        if TlsFailure::in_io(err).is_some() {
            ErrorKind::Tls
        } else {
            default
        }
    }

    fn idle_readable(&mut self) -> bool {
        // Post-handshake messages (TLS 1.3 session tickets) carry no application data:
        // reading them yields WouldBlock, and the connection stays usable.
        let mut probe = [0u8; 1];
        match self.stream.read(&mut probe) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => true,
            Err(e) => {
                let _ = self.check(Err::<(), _>(e));
                false
            }
            Ok(_) => false,
        }
    }
}
