//! What a step's bytes travelled over, read from its stored `summary.wire`
//! (`volley_metrics::WireReport`): TLS handshakes, HTTP/3 handshakes by kind with their
//! times, and the HTTP/2 and HTTP/3 events by kind.
//!
//! Place in the flow: `load` calls [`read`] for every step; a step stored without a wire
//! report (before steps had one, an injected or office step) gets `None`. Read apart
//! from the rest of the summary, so an odd wire blanks only itself.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A step's wire, as the report shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WireFacts {
    /// `http/1.1`, `h2`, `h2c` or `h3`.
    pub protocol: String,
    /// Full TLS handshakes over TCP (resumed ones are the rest); `None` without TLS or
    /// over h3, whose handshakes are in `h3`.
    pub tls_full_handshakes: Option<u64>,
    /// HTTP/3: the QUIC handshakes by kind.
    pub h3: Option<H3Handshakes>,
    /// HTTP/2 or HTTP/3 events that happened (goaways, stream resets, connection
    /// errors, idle timeouts, QPACK errors...), by their stored name; zeros left out.
    pub events: BTreeMap<String, u64>,
}

/// An h3 step's QUIC handshakes by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct H3Handshakes {
    /// Full (1-RTT, the certificate checked).
    #[serde(rename = "handshakes_full")]
    pub full: HandshakeKind,
    /// Resumed on a session ticket.
    #[serde(rename = "handshakes_resumed")]
    pub resumed: HandshakeKind,
    /// 0-RTT: resumed with early requests the server accepted.
    #[serde(rename = "handshakes_0rtt")]
    pub zero_rtt: HandshakeKind,
    /// Handshakes whose early data the server refused.
    pub zero_rtt_rejected: u64,
    /// Requests sent as accepted early data.
    pub early_requests: u64,
    /// Handshakes that failed.
    pub handshake_failures: u64,
}

/// Handshakes of one kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HandshakeKind {
    /// How many completed.
    pub count: u64,
    /// Their mean duration, ms.
    pub mean_ms: f64,
    /// The longest, ms.
    pub max_ms: f64,
}

/// Counters of `h2`/`h3` that are handshakes or settings, not events.
const NOT_EVENTS: [&str; 4] = [
    "handshakes",
    "early_data",
    "early_requests",
    "last_close_code",
];

/// The step's wire from its stored summary; `None` when it has none.
pub(super) fn read(summary: &Value) -> Option<WireFacts> {
    let w = summary.get("wire").filter(|w| w.is_object())?;
    let protocol = w.get("protocol")?.as_str()?.to_string();
    let h3 = w
        .get("h3")
        .filter(|h| h.is_object())
        .map(|h| serde_json::from_value::<H3Handshakes>(h.clone()).unwrap_or_default());
    let tls_full_handshakes = match h3 {
        Some(_) => None,
        None => w.pointer("/tls/full_handshakes").and_then(Value::as_u64),
    };
    let mut events = BTreeMap::new();
    for part in ["h2", "h3"] {
        let Some(obj) = w.get(part).and_then(Value::as_object) else {
            continue;
        };
        for (name, v) in obj {
            let counted = !NOT_EVENTS.contains(&name.as_str())
                && !name.starts_with("handshakes_")
                && !name.starts_with("zero_rtt");
            match v.as_u64() {
                Some(n) if counted && n > 0 => {
                    events.insert(name.clone(), n);
                }
                _ => {}
            }
        }
    }
    Some(WireFacts {
        protocol,
        tls_full_handshakes,
        h3,
        events,
    })
}

impl WireFacts {
    /// The handshakes in words: "2 full (3.1 ms), 398 resumed (1.2 ms), 0 0-RTT" over
    /// h3, "2 full TLS" over TCP; `None` without TLS.
    pub fn handshakes(&self) -> Option<String> {
        if let Some(h) = &self.h3 {
            let kind = |k: &HandshakeKind, name: &str| match k.count {
                0 => format!("0 {name}"),
                n => format!("{n} {name} ({:.1} ms)", k.mean_ms),
            };
            let mut s = format!(
                "{}, {}, {}",
                kind(&h.full, "full"),
                kind(&h.resumed, "resumed"),
                kind(&h.zero_rtt, "0-RTT")
            );
            if h.zero_rtt_rejected > 0 {
                s.push_str(&format!(", 0-RTT refused {}", h.zero_rtt_rejected));
            }
            if h.handshake_failures > 0 {
                s.push_str(&format!(", {} failed", h.handshake_failures));
            }
            return Some(s);
        }
        self.tls_full_handshakes.map(|n| format!("{n} full TLS"))
    }

    /// The events in words ("goaways 1, stream_resets 3"), `-` when none happened.
    pub fn events_text(&self) -> String {
        if self.events.is_empty() {
            return "-".into();
        }
        let parts: Vec<String> = self
            .events
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_h3_wire_reads_its_handshakes_by_kind_and_its_events() {
        let s = json!({"wire": {
            "protocol": "h3",
            "tls": {"full_handshakes": 0},
            "h2": null,
            "h3": {"goaways": 0, "stream_resets": 2, "connection_errors": 0,
                   "cancelled_streams": 0, "handshakes": 5, "handshake_failures": 0,
                   "idle_timeouts": 1, "qpack_errors": 0, "peer_closes": 0,
                   "last_close_code": 256, "early_data": true,
                   "handshakes_full": {"count": 1, "mean_ms": 3.04, "max_ms": 3.04},
                   "handshakes_resumed": {"count": 1, "mean_ms": 1.5, "max_ms": 1.5},
                   "handshakes_0rtt": {"count": 3, "mean_ms": 0.9, "max_ms": 1.0},
                   "zero_rtt_rejected": 0, "early_requests": 3}
        }});
        let w = read(&s).unwrap();
        assert_eq!(w.protocol, "h3");
        let h = w.h3.unwrap();
        assert_eq!((h.full.count, h.resumed.count, h.zero_rtt.count), (1, 1, 3));
        assert_eq!(h.early_requests, 3);
        assert_eq!(
            w.handshakes().unwrap(),
            "1 full (3.0 ms), 1 resumed (1.5 ms), 3 0-RTT (0.9 ms)"
        );
        assert_eq!(w.events_text(), "idle_timeouts 1, stream_resets 2");
    }

    #[test]
    fn tls_over_tcp_and_missing_or_odd_wires() {
        let h2 = json!({"wire": {"protocol": "h2", "tls": {"full_handshakes": 2},
            "h2": {"goaways": 1, "refused_retries": 0}}});
        let w = read(&h2).unwrap();
        assert_eq!(w.handshakes().as_deref(), Some("2 full TLS"));
        assert_eq!(w.events_text(), "goaways 1");
        let plain = read(&json!({"wire": {"protocol": "http/1.1", "tls": null}})).unwrap();
        assert_eq!(
            (plain.handshakes(), plain.events_text()),
            (None, "-".into())
        );
        assert_eq!(read(&json!({"duration_s": 1.0})), None);
        assert_eq!(read(&json!({"wire": "odd"})), None);
        // An odd h3 part blanks only its own figures.
        let odd = read(&json!({"wire": {"protocol": "h3", "h3": {"handshakes_full": 7}}}));
        assert_eq!(odd.unwrap().h3, Some(H3Handshakes::default()));
    }
}
