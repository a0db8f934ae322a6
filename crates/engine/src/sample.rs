//! The contract between the engine and whatever records its results.
//!
//! One [`Sample`] per request, carrying the instants docs/methodology.md names
//! (intended, sent, first byte, done) plus a fifth, `dispatched` (when the generator
//! handled the arrival), as nanoseconds since the run's start on one monotonic clock.
//! Keeping raw instants (not derived latencies) lets the recorder derive response time,
//! service time, send lag, its two parts (scheduler lag and connection wait) and TTFB
//! without the engine choosing for it.
//!
//! Why the fifth instant: in an HTTP/1.1 open loop an arrival that finds every
//! connection busy waits in the worker's queue. That wait is part of send lag, but it is
//! the *server* holding the connections, not the generator being late; without
//! `dispatched` the two were indistinguishable and a stalling server made runs look
//! generator-bound.

use serde::{Deserialize, Serialize};

/// Why a request did not produce an acceptable response. Counted by kind, never by
/// message string, so errors add up across workers and runs.
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
    /// When the generator handled the arrival: the pacer released it and the worker
    /// dispatched it (to a connection, a new connection, or the wait queue). In a closed
    /// loop this equals `sent_ns`. `intended <= dispatched <= sent` for a sent request.
    pub dispatched_ns: u64,
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

/// The `dispatched_ns` a worker stamps on a sample, one rule for both workers.
///
/// Closed loop: there is no schedule, so a request is dispatched as it is sent. Open
/// loop: clamped into [intended, sent] for a sent request, so that send lag = scheduler
/// lag + connection wait holds sample by sample; for one never sent (`sent_ns` 0: still
/// queued when the run ended) only kept at or after `intended`.
pub(crate) fn stamp_dispatched(
    open_loop: bool,
    intended_ns: u64,
    dispatched_ns: u64,
    sent_ns: u64,
) -> u64 {
    if !open_loop {
        return sent_ns;
    }
    let d = dispatched_ns.max(intended_ns);
    if sent_ns == 0 {
        d
    } else {
        d.min(sent_ns.max(intended_ns))
    }
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
    /// sent - intended: everything between the schedule and the wire, the sum of
    /// [`Sample::sched_lag_ns`] and [`Sample::conn_wait_ns`].
    pub fn send_lag_ns(&self) -> u64 {
        self.sent_ns.saturating_sub(self.intended_ns)
    }
    /// dispatched - intended: the generator's own lateness (its event loop woke late,
    /// CPU starvation, timer slack). This, not send lag, says whether the generator kept
    /// its schedule.
    pub fn sched_lag_ns(&self) -> u64 {
        self.dispatched_ns.saturating_sub(self.intended_ns)
    }
    /// sent - dispatched: the arrival waited for a usable connection (every HTTP/1.1
    /// connection busy, the one opening for it not yet connected, the cap reached) or,
    /// over HTTP/2, for a free stream slot. The server (or the pool cap) holding
    /// connections, not the generator being late.
    pub fn conn_wait_ns(&self) -> u64 {
        self.sent_ns.saturating_sub(self.dispatched_ns)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn at(intended_ns: u64, dispatched_ns: u64, sent_ns: u64) -> Sample {
        Sample {
            intended_ns,
            dispatched_ns,
            sent_ns,
            first_byte_ns: sent_ns + 10,
            done_ns: sent_ns + 20,
            connect_ns: 0,
            tls_handshake_ns: 0,
            status: 200,
            wire_bytes: 0,
            body_bytes: 0,
            wire_body_bytes: 0,
            error: None,
            request_index: 0,
        }
    }

    #[test]
    fn send_lag_splits_into_scheduler_lag_and_connection_wait() {
        // (intended, dispatched, sent) -> (sched lag, conn wait, send lag)
        let table = [
            ((100, 100, 100), (0, 0, 0)),           // on time, connection free
            ((100, 130, 130), (30, 0, 30)),         // loop woke late, connection free
            ((100, 100, 5_000), (0, 4_900, 4_900)), // on time, waited for a connection
            ((100, 150, 900), (50, 750, 800)),      // both
        ];
        for ((i, d, s), (sched, wait, lag)) in table {
            let x = at(i, d, s);
            assert_eq!(
                (x.sched_lag_ns(), x.conn_wait_ns(), x.send_lag_ns()),
                (sched, wait, lag),
                "{i} {d} {s}"
            );
            assert_eq!(x.sched_lag_ns() + x.conn_wait_ns(), x.send_lag_ns());
        }
    }

    #[test]
    fn dispatched_is_stamped_by_one_rule() {
        // (open loop, intended, dispatched, sent) -> stamped
        for (open, i, d, s, want) in [
            (false, 10, 40, 30, 30), // closed loop: as sent
            (true, 10, 20, 30, 20),  // inside [intended, sent]
            (true, 10, 5, 30, 10),   // before intended: intended
            (true, 10, 50, 30, 30),  // after sent: sent
            (true, 10, 50, 0, 50),   // never sent: kept, at or after intended
            (true, 10, 5, 0, 10),
        ] {
            assert_eq!(stamp_dispatched(open, i, d, s), want, "{open} {i} {d} {s}");
        }
    }

    #[test]
    fn out_of_order_instants_saturate_instead_of_wrapping() {
        // A never-sent sample may carry sent_ns = 0: no figure wraps around.
        let x = at(500, 600, 0);
        assert_eq!(
            (x.sched_lag_ns(), x.conn_wait_ns(), x.send_lag_ns()),
            (100, 0, 0)
        );
    }
}
