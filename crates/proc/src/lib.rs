//! volley-proc: process hygiene for everything volley starts (managed targets, local
//! agents, the private bus, the delaying proxy, a remote agent's watcher): each dies
//! with volley, so nothing volley started outlives it and goes on loading or serving;
//! and [`shell_quote`], the one way volley writes a word for a POSIX shell (the remote
//! agents' ssh scripts, the commands it prints for the user to run next).
//!
//! Place in the flow: beside the targets and the agents, at every `spawn`. Lab
//! namespaces add `volley_netlab::exec::command_in` on top; the death signal carries
//! over through `ip netns exec`.
#![deny(missing_docs)]

use std::os::unix::process::CommandExt;
use std::process::Command;

/// Makes `cmd`'s process receive SIGTERM when volley's spawning thread ends, even by
/// SIGKILL, so nothing volley started outlives it and goes on loading or serving.
/// SIGTERM, not SIGKILL, so a server's master can stop its own workers. Call it before
/// any other `pre_exec` of the command: the hooks run in order.
pub fn die_with_parent(cmd: &mut Command) {
    let parent = std::process::id();
    // SAFETY: between fork and exec the closure only makes async-signal-safe calls
    // (prctl, getppid) on values copied before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() as u32 != parent {
                // The parent died between fork and prctl: nobody would signal us.
                return Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
            }
            Ok(())
        });
    }
}

/// `s` as one POSIX shell word: as is when it holds only characters no shell treats
/// specially, else in single quotes (a quote inside becomes `'\''`).
///
/// Written here rather than taken from a crate: `shell-words` leaves `{a,b}` and `!`
/// bare (bash expands them) and `shlex` switches to double quotes around a `'`; an
/// allow-list and one quoting style are safe in every shell and read the same each
/// time.
pub fn shell_quote(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::shell_quote;

    #[test]
    fn words_stay_one_word() {
        assert_eq!(
            shell_quote("/tmp/volley-1/volley.db"),
            "/tmp/volley-1/volley.db"
        );
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote("{a,b}"), "'{a,b}'");
        assert_eq!(shell_quote("x!"), "'x!'");
        assert_eq!(shell_quote(""), "''");
    }
}
