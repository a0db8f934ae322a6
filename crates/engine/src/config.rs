//! What to run: the resolved configuration the engine executes.
//!
//! This is the resolved ("hiargs") side, kept apart from raw flags: the CLI parses raw flags and resolves
//! them (URL parsed, host resolved, body files read) into these values; the engine never
//! sees a flag or a path.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// How arrivals are timed in an open loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Evenly spaced, 1/R apart.
    Constant,
    /// Exponential inter-arrival times with mean 1/R (a Poisson process).
    Poisson,
}

/// Closed loop (ab, wrk: each connection sends its next request when the previous one
/// finishes) or open loop (httperf, wrk2: requests are sent on a precomputed schedule
/// whatever the server does).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LoadModel {
    /// `connections` connections, each with one request outstanding.
    Closed,
    /// `rate` requests per second in total, scheduled from `seed`.
    Open {
        /// Requests per second across all threads.
        rate: f64,
        /// Spacing of arrivals.
        arrival: Arrival,
        /// Seed of the schedule (Poisson) so a run can be repeated exactly.
        seed: u64,
    },
    /// Open loop on the instants the request source gives
    /// ([`RequestSource::next_instant`]): a replayed log. Each worker sends its
    /// source's requests at their own instants, whatever the server does.
    Scheduled {
        /// The schedule's mean rate, requests per second, for the report and the
        /// generator's self-check (the instants themselves come from the source).
        rate: f64,
    },
}

/// When a scheduled source's next request is due ([`LoadModel::Scheduled`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextInstant {
    /// At this many ns after the run's start.
    At(u64),
    /// Not known yet (the schedule is still being read): ask again shortly.
    Pending,
    /// The schedule is over.
    Over,
}

/// When the run ends: whichever limit comes first. At least one must be set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StopCondition {
    /// Measured requests to start (ab's `-n`): those intended at or after `warmup`.
    pub requests: Option<u64>,
    /// Wall-clock length of the run (wrk's `-d`), the warm-up included.
    pub duration: Option<Duration>,
    /// The start of the run that is load but not measurement (docs/methodology.md,
    /// "Warm-up"): requests intended before it take no place of `requests`, so `-n N`
    /// with a warm-up measures N requests, as an ab or hey user expects, and the
    /// recorder leaves them out of every figure by the same intended instant.
    pub warmup: Duration,
}

/// Which statuses count as success; anything else is [`crate::ErrorKind::Status`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusRange {
    /// Lowest accepted status, inclusive.
    pub min: u16,
    /// Highest accepted status, inclusive.
    pub max: u16,
}

impl Default for StatusRange {
    /// 2xx and 3xx are accepted, as wrk counts "Non-2xx or 3xx responses".
    fn default() -> Self {
        StatusRange { min: 200, max: 399 }
    }
}

/// One request, prepared once: the exact bytes to write, so the hot path only copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Method, kept to frame the response (a HEAD response has no body).
    pub method: String,
    /// Request target as sent (path and query).
    pub path: String,
    /// The serialised request: request line, headers, blank line, body.
    pub bytes: Vec<u8>,
    /// Index of this request in its source (reported in [`crate::Sample::request_index`]).
    pub index: u32,
    /// Requests of one lane (a replayed log's client) go over HTTP/1.1 on that lane's
    /// own connection, one at a time and in order, as the client sent them; `None`:
    /// any connection.
    pub lane: Option<u32>,
}

/// Supplies the requests one worker sends, in order. Study workloads (a CalDAV client
/// session, say) implement it too; that is why it may look at responses.
pub trait RequestSource: Send {
    /// The next request to send, or `None` when this source has nothing more to send
    /// (the worker then stops starting requests).
    fn next_request(&mut self) -> Option<Arc<Request>>;

    /// Whether [`RequestSource::on_response`] needs the response body; when false the
    /// engine does not keep bodies at all.
    fn wants_body(&self) -> bool {
        false
    }

    /// A response to `request` finished (successfully or not; `status` is 0 when there
    /// was none). `body` is empty unless [`RequestSource::wants_body`] is true.
    fn on_response(&mut self, _request: &Request, _status: u16, _body: &[u8]) {}

    /// [`LoadModel::Scheduled`] only: when the request [`RequestSource::next_request`]
    /// returns next is due. Other models never ask.
    fn next_instant(&mut self) -> NextInstant {
        NextInstant::Over
    }

    /// The sample of a request of this source, as the sink gets it (a replay compares
    /// it with the log). Called just before [`RequestSource::on_response`].
    fn on_sample(&mut self, _request: &Request, _sample: &crate::Sample) {}

    /// [`LoadModel::Scheduled`] only: the worker has nothing due before `until_ns` (on
    /// `clock`, ns since the run's start) and would otherwise wait. A source with work
    /// of its own (a replay reading its log when no CPU is left for a thread of its
    /// own) does a slice of it here, on the worker's time between arrivals rather than
    /// as a thread that takes the worker's core when an arrival is due, and stops by
    /// `until_ns`. True when it did any work: the worker then looks at its sockets
    /// without sleeping and comes back.
    fn idle(&mut self, _until_ns: u64, _clock: &dyn Fn() -> u64) -> bool {
        false
    }
}

/// Makes one [`RequestSource`] per worker thread. `worker` is the thread's index and
/// `workers` the thread count, so a source can split a shared sequence between threads.
pub trait SourceFactory: Send + Sync {
    /// A fresh source for worker `worker` of `workers`.
    fn make(&self, worker: usize, workers: usize) -> Box<dyn RequestSource>;
}

/// The source address of a run's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SourceIp {
    /// The kernel's choice.
    #[default]
    Kernel,
    /// This address of this host, for every connection.
    Fixed(IpAddr),
    /// Each lane (a replayed client) from its own loopback address, lane `L` from
    /// 127.0.0.2 + `L` (wrapping within 127/8), so that a loopback server's log tells
    /// the replayed clients apart as the replayed log did; a connection of no lane
    /// gets the kernel's choice. Only for a target on IPv4 loopback.
    LoopbackPerLane,
}

impl SourceIp {
    /// The address a connection of `lane` binds to (`None`: the kernel's choice).
    pub fn for_lane(self, lane: Option<u32>) -> Option<IpAddr> {
        match (self, lane) {
            (SourceIp::Kernel, _) | (SourceIp::LoopbackPerLane, None) => None,
            (SourceIp::Fixed(ip), _) => Some(ip),
            (SourceIp::LoopbackPerLane, Some(l)) => {
                // 127.0.0.2 ..= 127.255.255.254: 2^24 - 3 addresses.
                const FIRST: u32 = 0x7f00_0002;
                const COUNT: u32 = (1 << 24) - 3;
                Some(IpAddr::V4(std::net::Ipv4Addr::from(FIRST + l % COUNT)))
            }
        }
    }
}

/// Everything one load run needs, resolved.
#[derive(Clone)]
pub struct LoadConfig {
    /// Where to connect (one host:port per run).
    pub addr: SocketAddr,
    /// Where to connect from. Injectors on one host each take their own address, and
    /// a replay may give each logged client its own, so that a server's log tells
    /// them apart (docs/methodology.md, "Several injectors").
    pub source_ip: SourceIp,
    /// Worker threads; connections and open-loop rate are split evenly across them.
    pub threads: usize,
    /// Closed loop: the number of connections (ab's `-c`). Open loop: connections opened
    /// up front (more are opened on demand up to `max_connections`).
    pub connections: usize,
    /// Open loop: cap on connections open at once (Little's law says about R x W are
    /// needed; the cap is reported whenever it is hit).
    pub max_connections: usize,
    /// Reuse connections (ab's `-k`). When false the client closes the socket itself
    /// after each response, since many servers ignore `Connection: close`.
    pub keep_alive: bool,
    /// Closed or open loop.
    pub model: LoadModel,
    /// When to stop.
    pub stop: StopCondition,
    /// Per-request limit from send to done; past it the request is a Timeout.
    pub timeout: Duration,
    /// Limit on a TCP connect; past it the request is a Connect error.
    pub connect_timeout: Duration,
    /// Statuses counted as success.
    pub accept_status: StatusRange,
    /// The requests to send.
    pub source: Arc<dyn SourceFactory>,
    /// Set from outside (Ctrl-C) to end the run early; what was measured is kept and
    /// requests still in flight are recorded as [`crate::ErrorKind::InFlight`].
    pub stop_flag: Arc<AtomicBool>,
}

/// The HTTP version spoken on every connection of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpVersion {
    /// HTTP/1.1, one request outstanding per connection (no pipelining).
    #[default]
    Http1,
    /// HTTP/2: over TLS the server must agree to `h2` by ALPN; without TLS it is
    /// prior-knowledge h2c. Each connection carries up to `streams` requests at once,
    /// so in a closed loop `connections x streams` requests are outstanding.
    H2 {
        /// Concurrent streams per connection (also capped by the server's
        /// SETTINGS_MAX_CONCURRENT_STREAMS).
        streams: u32,
    },
    /// HTTP/3 over QUIC (UDP, same port number): TLS 1.3 with ALPN `h3` is part of
    /// the QUIC handshake, so a TLS target is required. Each connection carries up
    /// to `streams` requests at once, as for HTTP/2.
    H3 {
        /// Concurrent request streams per connection (also capped by the server's
        /// initial_max_streams_bidi).
        streams: u32,
    },
}

/// TLS for a run: the client options and the name the server is checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsTarget {
    /// Versions, trust, client certificate, resumption, ALPN (the ALPN list is
    /// replaced by the engine to match [`HttpVersion`]).
    pub client: volley_tls::ClientTls,
    /// The URL's host: sent as SNI (for DNS names) and checked against the
    /// certificate.
    pub server_name: String,
}

/// The protocol stack under the requests: TLS or not, HTTP/1.1, HTTP/2 or HTTP/3.
///
/// Kept apart from [`LoadConfig`] (how much load, when to stop) because it says how
/// the bytes travel rather than how many requests go; the default is plain HTTP/1.1,
/// which is what [`crate::run`] uses. [`crate::run_with`] takes one explicitly.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Wire {
    /// `None`: plain TCP.
    pub tls: Option<TlsTarget>,
    /// HTTP/1.1, HTTP/2 or HTTP/3.
    pub http: HttpVersion,
    /// Content coding and expected body every response must meet, over HTTP/1.1
    /// and HTTP/2 alike; the default checks nothing.
    pub body: crate::BodySpec,
    /// How the workers wait and move bytes: chosen by the run ([`IoPath::Auto`], the
    /// default), or epoll, io_uring or `ppoll` as asked.
    pub io: IoPath,
}

/// How a worker waits for its sockets and moves their bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoPath {
    /// The default: [`IoPath::Poll`] for plain-TCP HTTP/1.1 with at most
    /// [`POLL_UP_TO_SLOTS`] connection slots a worker, else [`IoPath::Epoll`]. A run
    /// reports the path it resolved to, never this.
    #[default]
    Auto,
    /// epoll (through mio) and a `read` and a `write` per request: what TLS, HTTP/2,
    /// HTTP/3 and many connections run on, and what a refused io_uring falls back to.
    Epoll,
    /// io_uring: one `io_uring_enter` per loop turn submits the turn's sends and takes
    /// its completions, receives are multishot into a ring of provided buffers. Plain
    /// TCP HTTP/1.1 only: TLS, HTTP/2 and HTTP/3 refuse it
    /// ([`crate::EngineError::IoNeedsPlainHttp1`]).
    Uring,
    /// `ppoll` over the connections at every look, with epoll's reads and writes: no
    /// socket stays registered, so on loopback the server's reply runs no readiness
    /// callback of the client's (the cost the epoll path leaves the server; see the
    /// worker's `pollset`). Plain-TCP HTTP/1.1 only, like io_uring; each look walks
    /// every connection, so it suits tens of connections, not thousands.
    Poll,
}

/// [`IoPath::Auto`] takes `ppoll` up to this many connection slots a worker: each look
/// walks them all (tens of ns each), where epoll returns the ready ones only. At 64
/// connections `ppoll` cost the generator no more CPU per request than epoll and
/// spared the server its epoll callback (`bench/engine.py`); past that the walk grows
/// with every connection while the saving per reply stays the same.
pub const POLL_UP_TO_SLOTS: usize = 64;

impl IoPath {
    /// The name in flags and JSON: `auto`, `epoll`, `uring` or `poll`.
    pub fn name(self) -> &'static str {
        match self {
            IoPath::Auto => "auto",
            IoPath::Epoll => "epoll",
            IoPath::Uring => "uring",
            IoPath::Poll => "poll",
        }
    }

    /// io_uring and ppoll drive plain-TCP HTTP/1.1 only: TLS, HTTP/2 and HTTP/3 asking
    /// for them are refused, never run on epoll under their name.
    pub fn plain_http1_only(self) -> bool {
        matches!(self, IoPath::Uring | IoPath::Poll)
    }

    /// The path a run takes: [`IoPath::Auto`] resolved for plain-TCP HTTP/1.1
    /// (`plain_http1`) with at most `slots` connection slots in any worker; any other
    /// path as asked.
    pub fn resolve(self, plain_http1: bool, slots: usize) -> IoPath {
        match self {
            IoPath::Auto if plain_http1 && slots <= POLL_UP_TO_SLOTS => IoPath::Poll,
            IoPath::Auto => IoPath::Epoll,
            io => io,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Auto takes ppoll for plain-TCP HTTP/1.1 up to the slot limit and epoll past it
    /// or for anything else; a path asked for is kept whatever the run.
    #[test]
    fn auto_resolves_to_poll_for_few_plain_http1_connections_else_epoll() {
        let cases = [
            (IoPath::Auto, true, 1, IoPath::Poll),
            (IoPath::Auto, true, POLL_UP_TO_SLOTS, IoPath::Poll),
            (IoPath::Auto, true, POLL_UP_TO_SLOTS + 1, IoPath::Epoll),
            (IoPath::Auto, false, 1, IoPath::Epoll),
            (IoPath::Epoll, true, 1, IoPath::Epoll),
            (IoPath::Uring, true, 10_000, IoPath::Uring),
            (IoPath::Poll, true, 10_000, IoPath::Poll),
            (IoPath::Poll, false, 1, IoPath::Poll),
        ];
        for (asked, plain, slots, ran) in cases {
            assert_eq!(
                asked.resolve(plain, slots),
                ran,
                "{asked:?} {plain} {slots}"
            );
        }
        assert_eq!(IoPath::default(), IoPath::Auto);
    }

    #[test]
    fn each_lane_has_its_own_loopback_address_within_127_8() {
        let ip = |s: SourceIp, l| s.for_lane(l).map(|a: IpAddr| a.to_string());
        let per = SourceIp::LoopbackPerLane;
        assert_eq!(ip(per, Some(0)).as_deref(), Some("127.0.0.2"));
        assert_eq!(ip(per, Some(254)).as_deref(), Some("127.0.1.0"));
        let last = (1 << 24) - 4;
        assert_eq!(ip(per, Some(last)).as_deref(), Some("127.255.255.254"));
        assert_eq!(ip(per, Some(last + 1)).as_deref(), Some("127.0.0.2"));
        assert_eq!(ip(per, None), None);
        let one = SourceIp::Fixed("127.0.0.9".parse().unwrap());
        assert_eq!(ip(one, Some(3)).as_deref(), Some("127.0.0.9"));
        assert_eq!(ip(SourceIp::Kernel, Some(3)), None);
    }
}
