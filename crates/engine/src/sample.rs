//! The contract between the engine and whatever records its results.
//!
//! One [`Sample`] per request, carrying the four instants methodology.md names
//! (intended, sent, first byte, done) as nanoseconds since the run's start on one
//! monotonic clock. Keeping raw instants (not derived latencies) lets the recorder derive
//! response time, service time, send lag and TTFB without the engine choosing for it.

use serde::{Deserialize, Serialize};

/// Why a request did not produce an acceptable response. Counted by kind, never by
/// message string (style.md habit 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// TCP connect refused, unreachable or timed out.
    Connect,
    /// No complete response within the request timeout.
    Timeout,
    /// Connection reset by the peer (ECONNRESET, EPIPE) while sending or receiving.
    Reset,
    /// The server closed the connection before a complete response (EOF mid-response,
    /// or EOF before any byte on a reused connection).
    Closed,
    /// A response that is not valid HTTP/1.1: bad status line, bad headers, bad chunk
    /// framing, or headers larger than the parser's limit.
    Malformed,
    /// A well-formed response whose status is outside the accepted range.
    Status,
    /// TLS handshake or record failure (bad certificate, not TLS at all, ALPN
    /// mismatch, a broken record); the run's outcome counts the TLS failure classes.
    Tls,
    /// Compression was asked for (`Accept-Encoding`) and the response was not encoded
    /// with that coding (the server ignored it or chose another), or did not decode:
    /// measuring it would time the wrong work.
    Encoding,
    /// The decoded body did not match the expected size or SHA-256: a fast wrong
    /// answer is an error, not a result.
    Validation,
    /// Still in flight when the run ended: a censored value (`done_ns` is the end of the
    /// run, so its latency is a lower bound).
    InFlight,
}

impl ErrorKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [ErrorKind; 10] = [
        ErrorKind::Connect,
        ErrorKind::Timeout,
        ErrorKind::Reset,
        ErrorKind::Closed,
        ErrorKind::Malformed,
        ErrorKind::Status,
        ErrorKind::Tls,
        ErrorKind::Encoding,
        ErrorKind::Validation,
        ErrorKind::InFlight,
    ];

    /// Stable lower-case name used in JSON, CSV and tables.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Reset => "reset",
            ErrorKind::Closed => "closed",
            ErrorKind::Malformed => "malformed",
            ErrorKind::Status => "status",
            ErrorKind::Tls => "tls",
            ErrorKind::Encoding => "encoding",
            ErrorKind::Validation => "validation",
            ErrorKind::InFlight => "in_flight",
        }
    }

    /// Index into `ALL`, for fixed-size per-kind counters.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One request's fate. All instants are nanoseconds since the run started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// When the schedule said to send it. In a closed loop this equals `sent_ns`
    /// (there is no schedule), so response time and service time coincide.
    pub intended_ns: u64,
    /// When the first byte of the request was written.
    pub sent_ns: u64,
    /// When the first byte of the response arrived; 0 if none did.
    pub first_byte_ns: u64,
    /// When the response was complete, or when the error was detected.
    pub done_ns: u64,
    /// Time spent opening the TCP connection this request went out on, when this
    /// request had to open it (0 when it reused a kept-alive connection).
    pub connect_ns: u64,
    /// The part of `connect_ns` spent in the TLS handshake (0 without TLS or on a
    /// reused connection). `connect_ns` is the time to a usable connection, as ab
    /// counts it, so the TCP connect alone is `connect_ns - tls_handshake_ns`.
    pub tls_handshake_ns: u64,
    /// HTTP status, 0 when no status line was read.
    pub status: u16,
    /// Response bytes read from the wire for this request (headers + body + framing).
    pub wire_bytes: u64,
    /// Decoded body bytes (after removing chunked framing and, when compression was
    /// asked for, after decompression).
    pub body_bytes: u64,
    /// Body bytes as they came over the wire (still compressed); equal to
    /// `body_bytes` when no content coding was asked for.
    pub wire_body_bytes: u64,
    /// `None` for an accepted response.
    pub error: Option<ErrorKind>,
    /// Index of the request in the request source (which URL of a mix).
    pub request_index: u32,
}

impl Sample {
    /// done - intended: what a user waits for in an open loop (coordinated-omission
    /// correct; the correction is applied here once and nowhere else).
    pub fn response_ns(&self) -> u64 {
        self.done_ns.saturating_sub(self.intended_ns)
    }
    /// done - sent: the uncorrected service time.
    pub fn service_ns(&self) -> u64 {
        self.done_ns.saturating_sub(self.sent_ns)
    }
    /// sent - intended: the generator's own lateness.
    pub fn send_lag_ns(&self) -> u64 {
        self.sent_ns.saturating_sub(self.intended_ns)
    }
    /// first_byte - sent, when a byte came back.
    pub fn ttfb_ns(&self) -> Option<u64> {
        (self.first_byte_ns != 0).then(|| self.first_byte_ns.saturating_sub(self.sent_ns))
    }
}

/// Where a worker thread puts what it measures. One sink per worker thread, created by
/// the caller's factory and handed back after the run for merging, so the hot path takes
/// no lock and (for a good sink) allocates nothing.
pub trait Sink: Send {
    /// One finished (or failed, or censored) request.
    fn record(&mut self, sample: &Sample);

    /// The number of connections open across all workers changed; `open_now` is the
    /// global count right after the change, `now_ns` the instant. Used for the
    /// "most connections open at once" figure and Little's-law checks.
    fn connections(&mut self, _now_ns: u64, _open_now: u32) {}

    /// An open-loop arrival found no free connection and the `max_connections` cap
    /// stopped a new one from opening; the request waits (its latency still counts from
    /// its intended time).
    fn cap_hit(&mut self, _now_ns: u64) {}

    /// Called by the worker at least once per second of run time (and at the end) with
    /// the current instant, so a sink can close per-second windows even when no request
    /// finishes in them.
    fn tick(&mut self, _now_ns: u64) {}
}
