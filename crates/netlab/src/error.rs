//! The lab's typed errors.

/// Why a lab could not be built, measured or removed.
#[derive(Debug, thiserror::Error)]
pub enum NetlabError {
    /// `ip` or `tc` could not be started.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// Which.
        program: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `ip` or `tc` refused (not root, a kernel without the feature).
    #[error("`{command}` failed: {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// What it said.
        stderr: String,
    },
    /// A socket or namespace operation failed.
    #[error("{action}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A kernel setting of an injector namespace was refused or did not take.
    #[error("injector namespace: {0}")]
    Tune(#[from] crate::tune::TuneError),
    /// A bounded wait ran out.
    #[error("link measurement: {0}")]
    Timeout(&'static str),
}
