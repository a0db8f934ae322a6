//! Typed errors of the recorder. The binary adds context and picks the exit code.

use thiserror::Error;

/// What can go wrong while merging, closing or exporting recorded results.
#[derive(Debug, Error)]
pub enum MetricsError {
    /// Two histograms could not be added (a count overflowed or bounds are incompatible).
    #[error("cannot merge histograms: {0}")]
    Merge(String),
    /// A per-second window's stored bytes could not be encoded or decoded.
    #[error("cannot {action} a per-second histogram: {detail}")]
    Codec {
        /// "encode" or "decode".
        action: &'static str,
        /// The codec's own message.
        detail: String,
    },
    /// Two recorders with different warm-up boundaries were merged: their seconds are
    /// shifted differently and cannot be added.
    #[error("cannot merge recorders with different warm-ups ({a_ns} ns and {b_ns} ns)")]
    WarmupMismatch {
        /// This recorder's boundary, ns.
        a_ns: u64,
        /// The other recorder's boundary, ns.
        b_ns: u64,
    },
    /// A recorder keyed by completion time was merged with one keyed by intended send
    /// time: their windows of the same second hold different requests.
    #[error("cannot merge recorders whose per-second windows are keyed differently")]
    WindowKeyMismatch,
    /// A worker's window encoder thread ended before the run did: its seconds are lost.
    #[error("the per-second window encoder stopped before the run ended")]
    EncoderLost,
    /// A recorder snapshot does not have the recorder's shape.
    #[error("malformed recorder snapshot: {0}")]
    Snapshot(&'static str),
    /// Writing an export failed.
    #[error("cannot write {format} output: {source}")]
    Write {
        /// Which exporter was writing ("text", "json", "csv").
        format: &'static str,
        /// The I/O error underneath.
        #[source]
        source: std::io::Error,
    },
}
