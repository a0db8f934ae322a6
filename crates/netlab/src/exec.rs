//! How volley starts the processes it owns: inside a lab namespace through `ip netns
//! exec` (which execs the program in its own place, so pid, process group and death
//! signal carry over, and bind-mounts the namespace's own `/etc/netns/NAME` files), and
//! dying with volley. The managed targets, the local agents, the private bus and the
//! delaying proxy all start this way.

use std::ffi::OsStr;
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

/// A `Command` that runs `program` inside network namespace `ns`; the caller adds
/// arguments, stdio and spawns it as with any `Command`.
pub fn command_in(ns: &str, program: impl AsRef<OsStr>) -> Command {
    let mut c = Command::new("ip");
    c.arg("netns").arg("exec").arg(ns).arg(program);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_through_ip_netns_exec() {
        let mut c = command_in("vl7-t", "python3");
        c.arg("-V");
        let args: Vec<_> = c.get_args().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(c.get_program(), "ip");
        assert_eq!(args, ["netns", "exec", "vl7-t", "python3", "-V"]);
    }
}
