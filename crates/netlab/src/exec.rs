//! How volley starts a process inside a lab namespace: through `ip netns exec`, which
//! execs the program in its own place, so pid, process group and death signal
//! (`volley_proc::die_with_parent`) carry over, and bind-mounts the namespace's own
//! `/etc/netns/NAME` files. The managed targets, the local agents, the private bus and
//! the delaying proxy all start this way when they run in a lab.

use std::ffi::OsStr;
use std::process::Command;

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
