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
    /// A request found nobody subscribed to its subject (the coordinator is gone, or
    /// has not yet subscribed again after the bus came back).
    #[error("bus: nobody listens on {subject}")]
    NoResponders {
        /// The subject.
        subject: String,
    },
    /// The coordinator lost the bus for longer than its bound: what it had collected is
    /// in `partial` (every record was also handed to the caller as it came), the run is
    /// not finished.
    #[error("the bus was gone for {after:.1?}; the run was cut short with {records} seconds of the agents' records collected")]
    BusGone {
        /// How long it was gone when the coordinator gave up.
        after: Duration,
        /// Per-second records collected before.
        records: u64,
        /// The run as collected up to then (merged, each agent marked lost).
        partial: Box<crate::coordinator::RunResult>,
    },
    /// Nobody took this agent's records for a while although the bus was up: the
    /// coordinator is gone, and the load was stopped rather than run unrecorded.
    #[error("run {run}: nobody has taken this agent's records for {after:?}: the coordinator is gone; load stopped")]
    CoordinatorGone {
        /// The run.
        run: String,
        /// How long nobody listened.
        after: Duration,
    },
    /// The coordinator told this agent it is out of the run (it had been declared lost,
    /// and a lost agent is never taken back into a running measurement).
    #[error("run {run}: the coordinator stopped this agent: {reason}")]
    Stale {
        /// The run.
        run: String,
        /// The coordinator's reason.
        reason: String,
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
    /// A peer's message that decodes but cannot be true (a second far past the run).
    #[error("agent {agent}: {detail}")]
    Implausible {
        /// Whose.
        agent: String,
        /// What is wrong.
        detail: String,
    },
    /// Credentials that cannot be read (a missing file, bad JSON, a short key).
    #[error("bus credentials {origin}: {detail}")]
    Credentials {
        /// The file or variable they came from.
        origin: String,
        /// What is wrong.
        detail: String,
    },
    /// The bus refused this party's credentials (wrong or missing user/password) or one
    /// of its subjects (a permission it lacks).
    #[error("the bus refused the connection: {detail} (wrong or missing credentials?)")]
    BusRefused {
        /// The server's or client's words.
        detail: String,
    },
    /// TLS to the bus failed: a bus that does not speak TLS, a certificate that is
    /// expired, for another name, or from a CA this party does not trust.
    #[error("TLS to the bus failed: {detail}")]
    BusTls {
        /// The TLS library's words.
        detail: String,
    },
    /// An agent refused its assignment: the target is outside its allow-list (the
    /// coordinator's side; nothing was loaded).
    #[error("agent {agent} refused: {reason}")]
    Refused {
        /// The agent.
        agent: String,
        /// Its words.
        reason: String,
    },
    /// This agent refused the assignment it was given (its own side).
    #[error("refused run {run}: {reason}")]
    RefusedHere {
        /// The run.
        run: String,
        /// Why (the target outside the allow-list).
        reason: String,
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
