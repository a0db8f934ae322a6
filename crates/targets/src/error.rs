//! Typed errors: each message names the cause and what to do about it.

use crate::TargetKind;
use std::path::PathBuf;
use std::time::Duration;

/// Why a target could not be started or configured. Whatever the variant, nothing the
/// attempt created (process, temp dir, cgroup) is left behind.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The server's binary is not on this machine.
    #[error("{kind} is not installed ({program} not found); run {}", kind.install_hint())]
    NotInstalled {
        /// Which server.
        kind: TargetKind,
        /// The program looked for.
        program: String,
    },
    /// The server exited while starting, usually because it rejected the configuration.
    #[error("{kind} exited while starting ({exit_status}): {first_line}")]
    Rejected {
        /// Which server.
        kind: TargetKind,
        /// How it exited.
        exit_status: String,
        /// The first error line of its output (stderr or error log).
        first_line: String,
    },
    /// The port never answered within the start timeout.
    #[error(
        "{kind} did not answer on {url} within {timeout:?}; last problem: {last}; \
         raise the start timeout or check {dir}"
    )]
    StartTimeout {
        /// Which server.
        kind: TargetKind,
        /// The URL that was probed.
        url: String,
        /// How long volley waited.
        timeout: Duration,
        /// The last connection or validation problem seen.
        last: String,
        /// The private directory (removed by the time the error is seen; named for logs).
        dir: PathBuf,
    },
    /// The server answered, but not with the known file: a fast wrong answer is an error.
    #[error("{kind} answered {url} incorrectly: {reason}")]
    WrongAnswer {
        /// Which server.
        kind: TargetKind,
        /// The URL that was probed.
        url: String,
        /// What differed (status, Content-Type, Content-Length or body).
        reason: String,
    },
    /// Every attempt to find a free port collided with another listener.
    #[error("{kind}: port still in use after {attempts} attempts; another process keeps taking free ports")]
    PortInUse {
        /// Which server.
        kind: TargetKind,
        /// Attempts made.
        attempts: u32,
    },
    /// The built-in server did not print `listening on http(s)://ADDR/` first.
    #[error("the built-in server printed {line:?} instead of 'listening on http(s)://ADDR/'")]
    BadBanner {
        /// What it printed.
        line: String,
    },
    /// No usable cgroup controller for a requested limit.
    #[error("no {controller} cgroup controller is mounted; mount cgroup v1 {controller} or cgroup v2 with it enabled, or drop the limit")]
    NoCgroupController {
        /// `cpu`, `cpuset` or `memory`.
        controller: &'static str,
    },
    /// The cgroup tree exists but volley may not create or write to it.
    #[error(
        "no permission for cgroup {path}: {source}; run as root or delegate a cgroup to this user"
    )]
    CgroupPermission {
        /// The directory or file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The kernel refused a limit value.
    #[error("the kernel refused {value:?} for {path}: {source}; choose a value in range (CPU quota >= 1 ms per period, cores that exist)")]
    LimitRefused {
        /// The cgroup file.
        path: PathBuf,
        /// The value written.
        value: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A limit value that makes no sense before asking the kernel.
    #[error("invalid limit: {0}")]
    InvalidLimit(String),
    /// A spec that is incomplete for its kind (an external target without a URL...).
    #[error("invalid target: {0}")]
    InvalidSpec(String),
    /// The kind cannot do what the spec asks (HTTP/2 on the built-in server, Brotli on
    /// Caddy 2.6) or a module it needs is not installed.
    #[error("{kind} cannot {what}: {fix}")]
    Unsupported {
        /// Which server.
        kind: TargetKind,
        /// What was asked.
        what: String,
        /// Why not, and what to do.
        fix: String,
    },
    /// A server knob (or raw text) the kind cannot express, or a bad knob value.
    #[error(transparent)]
    Knob(#[from] crate::config::KnobError),
    /// The throw-away certificates could not be made, or the given ones not read.
    #[error("TLS set-up for the target: {0}")]
    Tls(#[from] volley_tls::TlsConfigError),
    /// A file-system or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What volley was doing.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl TargetError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> TargetError {
        let what = what.into();
        move |source| TargetError::Io { what, source }
    }
}

/// The target stopped while it should have been serving.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{kind} (pid {pid}) died: {exit_status}; last log lines:\n{log_tail}")]
pub struct TargetDied {
    /// Which server.
    pub kind: TargetKind,
    /// Its main process.
    pub pid: u32,
    /// How it ended (`exit status: 1`, `signal: 9 (SIGKILL)`).
    pub exit_status: String,
    /// The last lines of its stderr and error log.
    pub log_tail: String,
}
