//! Why a run could not start. Failed requests are never `EngineError`s: they are
//! [`crate::Sample`]s with an [`crate::ErrorKind`], so the caller decides what a run with
//! no successful request means.

use thiserror::Error;

/// A configuration the engine refuses, or a resource it could not get.
#[derive(Debug, Error)]
pub enum EngineError {
    /// `threads` was 0.
    #[error("the number of worker threads must be at least 1")]
    ZeroThreads,
    /// No connection could ever be opened (0 connections and, in an open loop, a cap of 0).
    #[error("the number of connections must be at least 1")]
    ZeroConnections,
    /// Neither a request count nor a duration was given, so the run would never end.
    #[error("a stop condition is required: a request count or a duration")]
    NoStopCondition,
    /// Open-loop rate not a positive finite number.
    #[error("the open-loop rate must be a positive number of requests per second, got {0}")]
    BadRate(f64),
    /// The connect timeout was zero: every connect would fail before it could start.
    #[error("the connect timeout must be greater than zero")]
    ZeroConnectTimeout,
    /// The per-request timeout was zero.
    #[error("the request timeout must be greater than zero")]
    ZeroTimeout,
    /// The TLS options could not be turned into a client configuration (an
    /// unreadable CA or certificate file, a host that is no valid server name).
    #[error("TLS setup: {0}")]
    Tls(#[from] volley_tls::TlsConfigError),
    /// HTTP/2 or HTTP/3 was asked for with zero streams per connection.
    #[error("the number of streams per connection must be at least 1")]
    ZeroStreams,
    /// HTTP/3 was asked for without TLS: QUIC always runs TLS 1.3.
    #[error("HTTP/3 needs an https:// target (QUIC always runs TLS 1.3)")]
    H3NeedsTls,
    /// io_uring or ppoll (the name given) was asked for over TLS, HTTP/2 or HTTP/3,
    /// which keep epoll: running them on epoll instead would report a path that did
    /// not run.
    #[error("--io {0} drives plain-TCP HTTP/1.1 only (TLS, HTTP/2 and HTTP/3 keep epoll)")]
    IoNeedsPlainHttp1(&'static str),
    /// The OS refused a worker thread or its event queue.
    #[error("could not start worker {worker}: {source}")]
    Worker {
        /// Index of the worker that failed.
        worker: usize,
        /// What the OS said.
        source: std::io::Error,
    },
}
