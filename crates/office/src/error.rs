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
    /// The server answers without credentials: it has no accounts to give each user.
    #[error("{url} answers PROPFIND {path} without credentials ({status}): it checks no accounts, so the users would share one tree")]
    NoAccounts {
        /// The URL probed.
        url: String,
        /// The path listed.
        path: String,
        /// Its status.
        status: u16,
    },
    /// Setting up a user's calendar failed (before anything was measured). The cause
    /// is in the message too: a study stores the message alone.
    #[error("setting up {user}'s calendar failed: {what} {cause}")]
    Setup {
        /// The account.
        user: String,
        /// The request or step that failed, e.g. "PROPFIND /".
        what: &'static str,
        /// Its last answer (status) or the transport error's kind.
        #[source]
        cause: crate::driver::Failure,
    },
    /// A warm day's lead-in could not finish: a device never completed its first sync
    /// (tried three times), or a user's calendar could not be read back after a failed
    /// request. The day was not set up, so nothing of it is the server's verdict.
    #[error("the day could not be set up: the lead-in could not finish ({why}; its failures: {failures})")]
    LeadIn {
        /// What did not finish, in words.
        why: String,
        /// The lead-in's failures by kind, in words.
        failures: String,
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
