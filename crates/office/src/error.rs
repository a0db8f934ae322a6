//! Why an office run could not start or could not be judged.

use std::net::SocketAddr;

/// A run that cannot start (bad configuration, a server that is not CalDAV). Problems
/// found *during* the day are not errors: they are counted ([`crate::Violation`]).
#[derive(Debug, thiserror::Error)]
pub enum OfficeError {
    /// A configuration value that makes no office (zero users, no profile, ...).
    #[error("{0}")]
    Config(String),
    /// A profile name that does not exist.
    #[error("unknown profile `{0}` (known: thunderbird, davx5, evolution, apple)")]
    UnknownProfile(String),
    /// The target URL is not `http://host[:port]/...`.
    #[error("target URL `{0}` must be http://host[:port]/path")]
    Url(String),
    /// Nothing listens there.
    #[error("cannot connect to {addr}")]
    Connect {
        /// The address tried.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The server answered, but not as a CalDAV server does.
    #[error("{url} does not speak CalDAV: {why}")]
    NotCalDav {
        /// The URL probed.
        url: String,
        /// What was wrong, in a few words.
        why: String,
    },
    /// Setting up a user's calendar failed (before anything was measured).
    #[error("setting up {user}'s calendar failed: {why}")]
    Setup {
        /// The account.
        user: String,
        /// What failed.
        why: String,
    },
    /// The trace file cannot be created.
    #[error("cannot create the trace file {}", path.display())]
    Trace {
        /// The path asked for.
        path: std::path::PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Starting a worker thread failed.
    #[error("cannot start a worker thread")]
    Thread(#[source] std::io::Error),
    /// Merging or closing the recorders failed.
    #[error("recording failed")]
    Metrics(#[from] volley_metrics::MetricsError),
}
