//! The one place that turns a command's result into an exit code and an error line:
//! 0 success, 1 a failed run, 2 a usage error, 130 an interrupted run. Commands return
//! errors of the types here (or any other error, a failed run); no other file picks a
//! code.

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

/// A failed run whose command already words its own line (an agent names itself, not
/// `volley`): the line is printed as it is, exit code 1.
#[derive(Debug)]
pub struct Failed(pub String);

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failed {}

/// The exit code of an interrupted run (128 + SIGINT).
const INTERRUPTED_CODE: u8 = 130;

/// Ends the process as an interrupted run, for the one place that cannot return an
/// error (the second Ctrl-C's handler exits the process from its own thread).
pub fn exit_interrupted() -> ! {
    std::process::exit(i32::from(INTERRUPTED_CODE))
}

/// A command line clap refused, or `--help`/`--version`: a bad flag value is one usage
/// line ([`bad_value_line`], exit 2); otherwise clap prints it (help and version to
/// stdout, errors to stderr) and the code follows clap's convention, 0 for help and
/// version, 2 for a usage error.
pub fn clap_error(e: &clap::Error) -> ExitCode {
    // A bad flag value is one line like every other usage error; the rest of clap's
    // errors keep its usage block.
    if let Some(line) = bad_value_line(e) {
        return finish(Err(UsageError(line).into()));
    }
    let _ = e.print();
    ExitCode::from(if e.use_stderr() { 2 } else { 0 })
}

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
/// [`UsageError`], 130 for [`Interrupted`], 1 for every other error ([`Failed`] printed as
/// it is).
pub fn finish(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) if e.is::<Interrupted>() => {
            let line = e.to_string();
            if !line.is_empty() {
                eprintln!("volley: {line}");
            }
            ExitCode::from(INTERRUPTED_CODE)
        }
        Err(e) if e.is::<Failed>() => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
        Err(e) if broken_stdout(&e) => ExitCode::SUCCESS,
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

/// Whether `e` is a write that failed because whoever read stdout is gone (`| head -1`):
/// the end of the output the reader asked for, not a failure, so the command ends
/// quietly with success (as `main` does for `println!`'s panic). Only when stdout is
/// that closed pipe: a broken pipe elsewhere (a socket, a child) stays an error.
fn broken_stdout(e: &anyhow::Error) -> bool {
    let pipe = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    });
    pipe && stdout_closed()
}

/// Whether stdout is a pipe with no reader left: poll(2) reports POLLERR on the write
/// end of such a pipe.
fn stdout_closed() -> bool {
    let mut fd = libc::pollfd {
        fd: libc::STDOUT_FILENO,
        events: 0,
        revents: 0,
    };
    // SAFETY: one pollfd of our own, a zero timeout; poll only writes `revents`.
    let ready = unsafe { libc::poll(&mut fd, 1, 0) };
    ready == 1 && fd.revents & libc::POLLERR != 0
}
