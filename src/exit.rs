//! The one place that turns a command's result into an exit code and an error line.

use std::fmt;
use std::process::ExitCode;

/// A mistake in what the user asked for (bad flag value, invalid URL, missing file):
/// exit code 2, like clap's own usage errors. Every other error is a failed run: 1.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Shorthand for returning a usage error from a command.
#[allow(unused_macros)]
macro_rules! usage {
    ($($arg:tt)*) => {
        return Err(anyhow::Error::new($crate::exit::UsageError(format!($($arg)*))))
    };
}
#[allow(unused_imports)]
pub(crate) use usage;

/// Prints `volley: <error>: <cause>...` on one line and picks the exit code.
pub fn finish(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) => {
            let line = e
                .chain()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(": ");
            eprintln!("volley: {line}");
            if e.chain().any(|c| c.is::<UsageError>()) {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
