//! Typed errors of reading a log, and the causes a line is skipped for.

use std::path::PathBuf;

/// Why reading a log stopped.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        #[source]
        source: std::io::Error,
    },
    /// A `--log-format` string that cannot describe a log.
    #[error("log format: {0}")]
    Format(String),
    /// Most lines do not parse: the log is not in the format expected.
    #[error(
        "{failed} of the first {seen} lines are not in the {expected} format \
         (first at line {first_line}: {cause}); name the log's layout with --log-format"
    )]
    WrongFormat {
        /// The format the reader expected.
        expected: String,
        /// Lines that failed.
        failed: u64,
        /// Lines read.
        seen: u64,
        /// The first failing line's number.
        first_line: u64,
        /// Its cause.
        cause: SkipCause,
    },
    /// Most lines run backwards past the reorder window: the log is not in time order
    /// (reversed, or several logs concatenated).
    #[error(
        "{behind} of the first {seen} lines run backwards past the {window_s} s reorder \
         window (first at line {first_line}); sort the log or widen --reorder-window"
    )]
    Backwards {
        /// Lines behind the window.
        behind: u64,
        /// Lines read.
        seen: u64,
        /// The window, seconds.
        window_s: f64,
        /// The first such line's number.
        first_line: u64,
    },
}

/// Why one line was skipped; counted per cause with the first few line numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, thiserror::Error)]
pub enum SkipCause {
    /// The line's layout does not match the format (a literal or a field is missing).
    #[error("layout does not match the format")]
    Layout,
    /// The timestamp cannot be read.
    #[error("unreadable timestamp")]
    Time,
    /// The request line is not `METHOD TARGET [PROTOCOL]`.
    #[error("unreadable request line")]
    Request,
    /// The status is not a three-digit number.
    #[error("unreadable status")]
    Status,
    /// A size or duration is not a number.
    #[error("unreadable number")]
    Number,
    /// A JSON line that is not an object with a time and a request.
    #[error("not a JSON object with a time and a request")]
    Json,
    /// The line's instant is earlier than requests already handed on: it lies outside
    /// the reorder window.
    #[error("earlier than the reorder window")]
    Window,
}
