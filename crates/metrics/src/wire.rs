//! What a run's bytes travelled over, for the summary: protocol, TLS (versions,
//! resumption, what the server agreed to, failures by cause), HTTP/2 and HTTP/3 events, and the
//! cold first request (`volley bench --first-request`).
//!
//! Place in the flow: the CLI fills these from the engine's `RunOutcome` and its own
//! pre-flight handshake after `Recorder::close`, so the recorder's hot path never sees
//! them; exporters print them beside the latency tables.

use std::collections::BTreeMap;

use serde::Serialize;

/// Protocol stack of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WireReport {
    /// `http/1.1`, `h2` (over TLS, by ALPN) or `h2c` (prior knowledge, no TLS).
    pub protocol: String,
    /// TLS details; `None` over plain TCP.
    pub tls: Option<TlsReport>,
    /// HTTP/2 events; `None` over HTTP/1.1 and HTTP/3.
    pub h2: Option<H2Report>,
    /// HTTP/3 (QUIC) events; `None` otherwise (and left out of JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub h3: Option<H3Report>,
    /// The content coding asked for (`Accept-Encoding`), if any.
    pub compression: Option<String>,
    /// The I/O path the workers ran: `epoll`, `uring` (`--io uring`) or `poll`
    /// (`--io poll`, and the default for a few plain-TCP HTTP/1.1 connections).
    pub io: String,
    /// `--io uring` asked for and refused by the kernel: what it said (the run used
    /// epoll); left out of JSON otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io_refused: Option<String>,
}

/// TLS as configured and as negotiated.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TlsReport {
    /// Versions offered: `1.2`, `1.3` or `any`.
    pub versions_offered: String,
    /// Session resumption allowed (later connections may skip the full handshake).
    pub resumption: bool,
    /// Server certificate not checked (`--insecure`).
    pub insecure: bool,
    /// Version negotiated by a pre-flight handshake (`TLSv1.3`...), if it succeeded.
    pub negotiated_version: Option<String>,
    /// ALPN protocol the server agreed to in that handshake.
    pub negotiated_alpn: Option<String>,
    /// Cipher suite of that handshake.
    pub cipher_suite: Option<String>,
    /// Full (not resumed) handshakes during the run: with resumption on, about one
    /// per worker; with it off, one per connection.
    pub full_handshakes: u64,
    /// Failed handshakes or records by cause (`cert_expired`, `not_tls`,
    /// `alpn_mismatch`...); each is also counted under the `tls` error kind.
    pub failures: BTreeMap<String, u64>,
}

/// HTTP/2 connection and stream events of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct H2Report {
    /// GOAWAY frames received.
    pub goaways: u64,
    /// Streams refused by the server (REFUSED_STREAM) and re-sent once.
    pub refused_retries: u64,
    /// Streams reset by the server otherwise (each a `reset` error).
    pub stream_resets: u64,
    /// Connections ended by a protocol error (each open stream a `malformed` error).
    pub connection_errors: u64,
    /// Streams volley cancelled (RST_STREAM(CANCEL)) because they outlived the timeout;
    /// each is also a censored `timeout`. The connection kept serving other streams.
    pub cancelled_streams: u64,
}

/// HTTP/3 connection and stream events of a run: errors by kind, as QUIC has them,
/// and the handshakes by kind, timed apart.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct H3Report {
    /// GOAWAY frames received.
    pub goaways: u64,
    /// Streams reset by the server (each a `reset` error).
    pub stream_resets: u64,
    /// Connections volley closed on a protocol error of the server's (a broken
    /// frame, a QPACK section; each open stream a `malformed` error).
    pub connection_errors: u64,
    /// Streams volley cancelled because they outlived the timeout (each a `timeout`).
    pub cancelled_streams: u64,
    /// QUIC handshakes completed.
    pub handshakes: u64,
    /// QUIC handshakes that failed (TLS alert, no answer on UDP, version mismatch).
    pub handshake_failures: u64,
    /// Connections that hit the QUIC idle timeout.
    pub idle_timeouts: u64,
    /// Connections or streams lost to QPACK.
    pub qpack_errors: u64,
    /// Busy connections the server closed (CONNECTION_CLOSE).
    pub peer_closes: u64,
    /// The code of the last CONNECTION_CLOSE the server sent (QUIC transport code,
    /// or an HTTP/3 code such as 0x100 H3_NO_ERROR).
    pub last_close_code: Option<u64>,
    /// 0-RTT offered (`--early-data on`).
    pub early_data: bool,
    /// Full handshakes (1-RTT, the server's certificate checked), timed from the
    /// socket's opening to the handshake's end.
    pub handshakes_full: HandshakeReport,
    /// Resumed handshakes (1-RTT on a session ticket, no certificate).
    pub handshakes_resumed: HandshakeReport,
    /// 0-RTT handshakes: resumed, with requests in the first flight the server
    /// accepted (their TTFB no longer waits for the handshake).
    pub handshakes_0rtt: HandshakeReport,
    /// Handshakes whose early data the server refused (the requests went again
    /// after the handshake; counted under full or resumed).
    pub zero_rtt_rejected: u64,
    /// Requests sent as early data and accepted.
    pub early_requests: u64,
    /// Requests that found the server's stream limit reached and waited for it to
    /// rise (not errors: a server that never raises it leaves them to the timeout).
    pub stream_limit_waits: u64,
    /// Response field lines QPACK resolved through the server's dynamic table
    /// (0 when the server uses none, or with `VOLLEY_QPACK_TABLE=off`).
    pub qpack_dynamic_refs: u64,
    /// Entries the server inserted into that table.
    pub qpack_inserts: u64,
    /// The UDP calls that carried the datagrams (an object, not an event count).
    pub udp: UdpReport,
}

/// A run's UDP datagrams and the system calls that carried them: more than one
/// datagram a call is UDP GSO (sending) or GRO (receiving) at work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct UdpReport {
    /// Send calls.
    pub sends: u64,
    /// Datagrams those calls carried.
    pub datagrams_sent: u64,
    /// Messages read (one `recvmmsg` takes up to 8): one datagram each, or several
    /// where GRO coalesced them.
    pub reads: u64,
    /// Datagrams those messages carried.
    pub datagrams_read: u64,
}

/// Handshakes of one kind and how long they took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct HandshakeReport {
    /// How many completed.
    pub count: u64,
    /// Their mean duration, ms (0 with none).
    pub mean_ms: f64,
    /// The longest, ms.
    pub max_ms: f64,
}

/// The first request of the invocation, on a fresh connection, before the run:
/// seed 002's cold TTFB ("first of this run", not "first after the target started").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FirstRequest {
    /// Time to a usable connection (TCP connect + TLS handshake), ms.
    pub connect_ms: f64,
    /// The TLS handshake part of `connect_ms`, ms (0 without TLS).
    pub tls_handshake_ms: f64,
    /// First response byte - sent, ms (`None` when no byte came back).
    pub ttfb_ms: Option<f64>,
    /// Connect + (done - sent), ms: what the first visitor waited.
    pub total_ms: f64,
    /// HTTP status (0 when none was read).
    pub status: u16,
    /// The error kind's name when it failed.
    pub error: Option<String>,
}

impl FirstRequest {
    /// From the four instants of one sample (ns) and its connect/handshake times.
    #[allow(clippy::too_many_arguments)]
    pub fn from_instants(
        sent_ns: u64,
        first_byte_ns: u64,
        done_ns: u64,
        connect_ns: u64,
        tls_handshake_ns: u64,
        status: u16,
        error: Option<&str>,
    ) -> FirstRequest {
        let ms = |ns: u64| ns as f64 / 1e6;
        FirstRequest {
            connect_ms: ms(connect_ns),
            tls_handshake_ms: ms(tls_handshake_ns),
            ttfb_ms: (first_byte_ns != 0).then(|| ms(first_byte_ns.saturating_sub(sent_ns))),
            total_ms: ms(connect_ns.saturating_add(done_ns.saturating_sub(sent_ns))),
            status,
            error: error.map(str::to_string),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_request_times_come_from_the_instants() {
        let f = FirstRequest::from_instants(
            5_000_000, 7_000_000, 9_500_000, 3_000_000, 2_000_000, 200, None,
        );
        assert_eq!(f.connect_ms, 3.0);
        assert_eq!(f.tls_handshake_ms, 2.0);
        assert_eq!(f.ttfb_ms, Some(2.0));
        assert_eq!(f.total_ms, 7.5);
        let none = FirstRequest::from_instants(1, 0, 10, 0, 0, 0, Some("connect"));
        assert_eq!(
            (none.ttfb_ms, none.error.as_deref()),
            (None, Some("connect"))
        );
    }
}
