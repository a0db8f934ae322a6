//! The one place that turns a command's result into an exit code and an error line:
//! 0 success, 1 a failed run, 2 a usage error, 130 an interrupted run.

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

/// A run the user stopped (Ctrl-C) after what was measured was printed and written:
/// exit code 130 (128 + SIGINT), as a shell reports a process killed by Ctrl-C. The
/// message, if any, is printed like an error line.
#[derive(Debug)]
pub struct Interrupted(pub String);

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Interrupted {}

/// The exit code of an interrupted run, for the one place that cannot return an error
/// (the second Ctrl-C's handler exits the process from its own thread).
pub const INTERRUPTED_CODE: i32 = 130;

/// Shorthand for returning a usage error from a command.
#[allow(unused_macros)]
macro_rules! usage {
    ($($arg:tt)*) => {
        return Err(anyhow::Error::new($crate::exit::UsageError(format!($($arg)*))))
    };
}
#[allow(unused_imports)]
pub(crate) use usage;

/// A clap error about one flag's value (a value parser refused it, or it is not one of
/// the flag's choices) as one line: `--requests must be at least 1, got 0`,
/// `--order must be same, sequential, random or weighted, got 'sideways'`. `None` for
/// every other clap error (missing argument, unknown flag, help, version).
pub fn bad_value_line(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let text = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    // "--requests <N>" or "[URL]": the flag's name without its value placeholder.
    let arg = text(ContextKind::InvalidArg)?;
    let flag = arg.split([' ', '=']).next().unwrap_or(&arg);
    let flag = flag.trim_matches(['[', ']', '<', '>']);
    match e.kind() {
        ErrorKind::ValueValidation => {
            let why = std::error::Error::source(e).map(ToString::to_string)?;
            // A sentence about the value reads on from the flag's name; an error that
            // names its subject itself (an invalid URL) stands alone.
            Some(if why.starts_with("invalid URL") {
                why
            } else if why.starts_with("must ") || why.starts_with("expects ") {
                format!("{flag} {why}")
            } else {
                format!("{flag}: {why}")
            })
        }
        ErrorKind::InvalidValue => {
            let value = text(ContextKind::InvalidValue).unwrap_or_default();
            let choices = match e.get(ContextKind::ValidValue) {
                Some(ContextValue::Strings(v)) => v.clone(),
                _ => return None,
            };
            let list = match choices.split_last() {
                Some((last, [])) => last.clone(),
                Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                None => return None,
            };
            Some(format!("{flag} must be {list}, got '{value}'"))
        }
        _ => None,
    }
}

/// Prints `volley: <error>: <cause>...` on one line and picks the exit code: 2 for a
/// [`UsageError`], 130 for [`Interrupted`], 1 for every other error.
pub fn finish(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) if e.is::<Interrupted>() => {
            let line = e.to_string();
            if !line.is_empty() {
                eprintln!("volley: {line}");
            }
            ExitCode::from(INTERRUPTED_CODE as u8)
        }
        Err(e) => {
            // Errors that show their cause in their own text would print it twice
            // through the chain: a cause already in the line is left out.
            let mut line = String::new();
            for c in e.chain().map(|c| c.to_string()) {
                if line.is_empty() {
                    line = c;
                } else if !line.contains(&c) {
                    line = format!("{line}: {c}");
                }
            }
            eprintln!("volley: {line}");
            if e.chain().any(|c| c.is::<UsageError>()) {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
