//! The crate's one error type: what can go wrong between a coordinator, its agents and
//! the bus, by kind, so the binary can word it and pick an exit code.

use std::time::Duration;

/// Everything this crate can fail with.
#[derive(Debug, thiserror::Error)]
pub enum AgentsError {
    /// A share was asked of an impossible whole (no agents, fewer connections than
    /// agents, an empty or unordered segment).
    #[error("cannot split the load: {0}")]
    Share(String),
    /// A run id or agent name cannot be a subject token.
    #[error("{0}")]
    Name(String),
    /// A bus message could not be encoded.
    #[error("encoding a {what} message: {source}")]
    Encode {
        /// Which message.
        what: &'static str,
        /// The codec's error.
        #[source]
        source: rmp_serde::encode::Error,
    },
    /// A bus message could not be decoded (another program on the subject, or a peer of
    /// another protocol version).
    #[error("decoding a {what} message: {source}")]
    Decode {
        /// Which message.
        what: &'static str,
        /// The codec's error.
        #[source]
        source: rmp_serde::decode::Error,
    },
    /// A peer speaks another protocol version.
    #[error("{peer} speaks bus protocol v{theirs}, this volley speaks v{ours}")]
    Version {
        /// Who sent it.
        peer: String,
        /// Their version.
        theirs: u32,
        /// Ours.
        ours: u32,
    },
    /// A histogram in a record could not be read.
    #[error("agent {agent} second {second}: {source}")]
    Histogram {
        /// The agent whose record it was.
        agent: String,
        /// Seconds since T0.
        second: u64,
        /// The metrics crate's error.
        #[source]
        source: volley_metrics::MetricsError,
    },
    /// Merged counts differ from the sum of the agents' (a bug, never expected).
    #[error("second {second}: merged {merged} requests, agents sum to {sum}")]
    MergeMismatch {
        /// Seconds since T0.
        second: u64,
        /// What the merged window holds.
        merged: u64,
        /// What the agents' windows add up to.
        sum: u64,
    },
    /// The merged recorders hold another count than the streamed seconds (a bug, or a
    /// record lost on the bus).
    #[error("merged recorders hold {merged} requests, the streamed seconds {streamed}")]
    WholeMismatch {
        /// What the merged recorders hold.
        merged: u64,
        /// What the agents' streamed seconds add up to.
        streamed: u64,
    },
    /// A summary could not be derived from the agents' recorders.
    #[error("summary: {0}")]
    Summary(String),
    /// The NATS client failed (connect, publish, subscribe, request, flush).
    #[error("bus: {action}: {detail}")]
    Bus {
        /// What was being done.
        action: &'static str,
        /// The client's error, as text (async-nats has one error type per call).
        detail: String,
    },
    /// The bus did not answer within a bound.
    #[error("bus: {action} timed out after {after:?}")]
    Timeout {
        /// What was being waited for.
        action: &'static str,
        /// The bound.
        after: Duration,
    },
    /// Fewer agents became ready than the run needs.
    #[error(
        "{ready} of {wanted} agents ready after {waited:?} (at least {min} needed): {names:?}"
    )]
    NotEnoughAgents {
        /// Agents that were ready.
        ready: usize,
        /// Agents wanted.
        wanted: usize,
        /// The least the run accepts.
        min: usize,
        /// The bound waited.
        waited: Duration,
        /// Names of those that were ready.
        names: Vec<String>,
    },
    /// The agent lost the bus and stopped its load.
    #[error("the bus was lost; load stopped")]
    BusLost,
    /// The caller's load function failed.
    #[error("load: {0}")]
    Load(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The private `nats-server` could not be started.
    #[error("nats-server: {0}")]
    Server(String),
    /// An I/O error outside the bus (spawning a process, a thread, a runtime).
    #[error("{action}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl AgentsError {
    /// Wraps a NATS client error.
    pub(crate) fn bus(action: &'static str, e: impl std::fmt::Display) -> Self {
        AgentsError::Bus {
            action,
            detail: e.to_string(),
        }
    }
}
