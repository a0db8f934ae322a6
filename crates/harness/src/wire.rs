//! What a run's bytes travelled over, read from the engine's outcome: the summary's
//! [`WireReport`] (protocol, TLS, HTTP/2 and HTTP/3 events, QUIC handshakes by kind).
//!
//! Place in the flow: after [`crate::measure`], before the summary is printed or
//! stored. `volley bench` and every study step call [`report`], so a stored step says
//! what `bench` prints: how many h3 handshakes were full, resumed or 0-RTT and how
//! long each kind took, and the h2/h3 errors by kind.

use volley_engine::{HandshakeTimes, HttpVersion, RunOutcome, Wire};
use volley_metrics::{H2Report, H3Report, HandshakeReport, TlsReport, UdpReport, WireReport};

/// What one TLS handshake agreed to: version, ALPN and cipher suite, each if known.
pub type Negotiated = (Option<String>, Option<String>, Option<String>);

/// `http/1.1`, `h2` (over TLS), `h2c` (prior knowledge) or `h3`.
pub fn protocol(wire: &Wire) -> &'static str {
    match (wire.http, wire.tls.is_some()) {
        (HttpVersion::Http1, _) => "http/1.1",
        (HttpVersion::H2 { .. }, true) => "h2",
        (HttpVersion::H2 { .. }, false) => "h2c",
        (HttpVersion::H3 { .. }, _) => "h3",
    }
}

/// The run's wire report. `negotiated`: what a handshake of the caller's own agreed to
/// (bench's pre-flight), if it made one; over h3 the run's own QUIC handshakes say it.
pub fn report<S>(
    wire: &Wire,
    outcome: &RunOutcome<S>,
    negotiated: Option<Negotiated>,
) -> WireReport {
    let h3 = matches!(wire.http, HttpVersion::H3 { .. });
    // HTTP/3 has no TCP pre-flight: what its completed QUIC handshakes agreed to is
    // fixed (TLS 1.3, ALPN h3, both required by the handshake itself).
    let quic = (h3 && outcome.h2.quic_handshakes > 0)
        .then(|| (Some("TLSv1.3".to_string()), Some("h3".to_string()), None));
    let tls = wire.tls.as_ref().map(|t| {
        let (version, alpn, cipher) = negotiated.or(quic).unwrap_or_default();
        TlsReport {
            versions_offered: t.client.versions.to_string(),
            resumption: t.client.resumption,
            insecure: t.client.insecure,
            negotiated_version: version,
            negotiated_alpn: alpn,
            cipher_suite: cipher,
            full_handshakes: outcome.tls_full_handshakes,
            failures: outcome
                .tls_failures
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
        }
    });
    let e = &outcome.h2;
    let h2 = matches!(wire.http, HttpVersion::H2 { .. }).then_some(H2Report {
        goaways: e.goaways,
        refused_retries: e.refused_retries,
        stream_resets: e.stream_resets,
        connection_errors: e.connection_errors,
        cancelled_streams: e.cancelled_streams,
    });
    let h3 = h3.then_some(H3Report {
        goaways: e.goaways,
        stream_resets: e.stream_resets,
        connection_errors: e.connection_errors,
        cancelled_streams: e.cancelled_streams,
        handshakes: e.quic_handshakes,
        handshake_failures: e.handshake_failures,
        idle_timeouts: e.idle_timeouts,
        qpack_errors: e.qpack_errors,
        peer_closes: e.peer_closes,
        last_close_code: e.last_close_code,
        early_data: wire.tls.as_ref().is_some_and(|t| t.client.early_data),
        handshakes_full: kind(&e.handshake_full),
        handshakes_resumed: kind(&e.handshake_resumed),
        handshakes_0rtt: kind(&e.handshake_0rtt),
        zero_rtt_rejected: e.zero_rtt_rejected,
        early_requests: e.early_requests,
        stream_limit_waits: e.stream_limit_waits,
        qpack_dynamic_refs: e.qpack_dynamic_refs,
        qpack_inserts: e.qpack_inserts,
        udp: UdpReport {
            sends: e.udp_sends,
            datagrams_sent: e.udp_datagrams_sent,
            reads: e.udp_reads,
            datagrams_read: e.udp_datagrams_read,
        },
    });
    WireReport {
        protocol: protocol(wire).to_string(),
        tls,
        h2,
        h3,
        compression: wire.body.coding.map(|c| c.token().to_string()),
        io: outcome.io.name().to_string(),
        io_refused: outcome.io_refused.as_ref().map(ToString::to_string),
    }
}

/// One kind of QUIC handshake for the report, in ms.
fn kind(t: &HandshakeTimes) -> HandshakeReport {
    let ms = |ns: u64| ns as f64 / 1e6;
    HandshakeReport {
        count: t.count,
        mean_ms: ms(t.mean_ns()),
        max_ms: ms(t.max_ns),
    }
}
