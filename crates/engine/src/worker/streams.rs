//! What the HTTP/2 and HTTP/3 workers do alike with a connection's streams: find the
//! ones that outlived the timeout (and whether the connection is dead), take every
//! request off a connection, and turn a request that ended on a stream into its
//! [`Sample`] for the sink and the source.
//!
//! Place in the flow: beside [`super::shared`] (the loop both share), under
//! [`super::h2`] and [`super::h3`], whose `Flight`s differ in what their protocol needs
//! (a refusal retried once; request bytes, early data, a response reader) but not in
//! this.

use std::collections::HashMap;
use std::hash::Hash;

use super::shared::{Stamps, WorkerCore};
use crate::conn::Transport;
use crate::{ErrorKind, Request, Sample, Sink};

/// A request on a stream, as this module needs to see it.
pub(super) trait OnStream {
    /// Its instants.
    fn stamps(&self) -> &Stamps;
}

/// The streams of one connection sent at least `timeout_ns` before `now`, taken out of
/// `streams`, and whether the connection is dead: every stream late and not one byte
/// received (`last_read_ns`) since the oldest of them went out. A dead connection is
/// replaced; otherwise the server is alive and only slow on these streams, which are
/// cancelled so their slots serve the next requests. Empty when none is late.
pub(super) fn take_late<K: Copy + Eq + Hash, F: OnStream>(
    streams: &mut HashMap<K, F>,
    now: u64,
    timeout_ns: u64,
    last_read_ns: u64,
) -> (Vec<(K, F)>, bool) {
    let late: Vec<K> = streams
        .iter()
        .filter(|(_, f)| now.saturating_sub(f.stamps().sent_ns) >= timeout_ns)
        .map(|(&id, _)| id)
        .collect();
    if late.is_empty() {
        return (Vec::new(), false);
    }
    let oldest_sent_ns = late
        .iter()
        .filter_map(|id| streams.get(id))
        .map(|f| f.stamps().sent_ns)
        .min()
        .unwrap_or(now);
    let dead = late.len() == streams.len() && last_read_ns <= oldest_sent_ns;
    let taken = late
        .into_iter()
        .filter_map(|id| streams.remove(&id).map(|f| (id, f)))
        .collect();
    (taken, dead)
}

/// Every request on a connection (its streams) and waiting for it (`pending`), taken.
pub(super) fn take_all<K, F>(streams: &mut HashMap<K, F>, pending: &mut Vec<F>) -> Vec<F> {
    let mut all: Vec<F> = streams.drain().map(|(_, f)| f).collect();
    all.append(pending);
    all
}

/// What a request that ended on a stream counted.
pub(super) struct Ended {
    /// Its final status (0 when none came).
    pub status: u16,
    /// Bytes of its response on the wire (frames included).
    pub wire_bytes: u64,
    /// Body bytes as received.
    pub body_bytes: u64,
    /// Body bytes after decoding (`body_bytes` without a decoder).
    pub decoded_bytes: u64,
}

/// Records the sample of `req`, which ended at `now` with `error`, to the sink and
/// the source (a replay compares it with its log), and takes it off the worker's
/// in-flight count. A request still waiting for a stream when the run ends was never
/// sent: `sent_ns` 0 says so (not counted as sent, no send lag or service time; see
/// the HTTP/1.1 worker's `censor`); other failures before the first byte are stamped
/// `now`.
pub(super) fn record<S: Sink, T: Transport>(
    core: &mut WorkerCore<'_, S, T>,
    req: &Request,
    mut at: Stamps,
    ended: Ended,
    error: Option<ErrorKind>,
    now: u64,
) {
    let never_sent = at.sent_ns == 0 && error == Some(ErrorKind::InFlight);
    if at.sent_ns == 0 && !never_sent {
        at.sent_ns = now;
    }
    let sample = Sample {
        wire_bytes: ended.wire_bytes,
        body_bytes: ended.decoded_bytes,
        wire_body_bytes: ended.body_bytes,
        request_index: req.index,
        ..at.sample(core.open_loop, now, ended.status, error)
    };
    core.record(&sample);
    core.source.on_sample(req, &sample);
    core.source.on_response(req, ended.status, &[]);
    core.in_flight = core.in_flight.saturating_sub(1);
}
