//! One logged request.

/// One request as a log line recorded it, with its start instant resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Line number in the file (1-based).
    pub line: u64,
    /// The client address as logged (`-` when the format has none).
    pub client: String,
    /// Start instant, microseconds since the Unix epoch: the logged instant, less the
    /// request time when the format logs the end (nginx), spread over its second when
    /// the log has whole seconds only.
    pub at_us: i64,
    /// Request method.
    pub method: String,
    /// Request target (path and query) as logged.
    pub target: String,
    /// Protocol of the request line (`HTTP/1.1`), when logged.
    pub protocol: Option<String>,
    /// Status sent, when logged.
    pub status: Option<u16>,
    /// Body bytes sent, when logged (`-` is 0).
    pub bytes: Option<u64>,
    /// Time the server took, when logged (`$request_time`, `%D`, `%T`).
    pub request_time_us: Option<u64>,
    /// Host the request named, when logged.
    pub host: Option<String>,
    /// Referer header, when logged.
    pub referer: Option<String>,
    /// User-Agent header, when logged.
    pub user_agent: Option<String>,
}
