//! Local injectors: `volley agent` processes on this host, one per injector, that die
//! with the volley that started them.
//!
//! Place in the flow: what a study's `placement = "local"` starts before the
//! coordinator gathers its agents. Each child gets `PR_SET_PDEATHSIG` (SIGTERM when
//! its parent ends, even by SIGKILL), so no injector outlives its study and goes on
//! sending load nobody records; [`LocalAgents`] kills and reaps them on drop.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use volley_netlab::exec::command_in;
use volley_proc::die_with_parent;

use crate::auth::CREDENTIALS_ENV;
use crate::AgentsError;

/// How the local agents join the bus and what they may load.
#[derive(Debug, Clone, Default)]
pub struct LocalTrust {
    /// Agent `i`'s credentials (one line of JSON, [`crate::auth::BusCredentials`]),
    /// handed over in its environment (readable by this user only, unlike argv);
    /// `None`: the bus's security is off and the agents are started `--insecure-bus`.
    pub credentials: Option<Vec<String>>,
    /// `--allow-target` values every agent gets (empty: the agent's default).
    pub allow: Vec<String>,
}

/// The source addresses of `count` agents on this host loading a target at `target`:
/// one loopback address each from 127.0.0.2 up when the target is on IPv4 loopback
/// (every 127/8 address reaches it, and the server's log then tells the agents apart,
/// as seed 003 cut its log by which injectors were active), else none (the kernel
/// picks, as an address that is not this host's could not be bound).
pub fn loopback_sources(target: IpAddr, count: usize) -> Vec<IpAddr> {
    if !matches!(target, IpAddr::V4(v4) if v4.is_loopback()) {
        return Vec::new();
    }
    let first = u32::from(Ipv4Addr::new(127, 0, 0, 2));
    (0..count as u32)
        .map(|i| IpAddr::V4(Ipv4Addr::from(first + i)))
        .collect()
}

/// Agent processes this volley started (killed and reaped on drop).
#[derive(Debug)]
pub struct LocalAgents {
    children: Vec<(String, Child)>,
}

impl LocalAgents {
    /// Starts one `volley agent --bus URL --name NAME --quiet` per name, from the
    /// volley executable `exe`, waiting at most `wait` for an assignment; agent `i` in
    /// network namespace `namespaces[i]` when given (through `ip netns exec`, which
    /// execs the agent in its own place: pid and death signal carry over), with the
    /// credentials and allow-list of `trust`; agent `i` connecting from
    /// `source_ips[i]` when given (`--source-ip`: agents on one host told apart in the
    /// server's log).
    pub fn spawn(
        exe: &Path,
        bus_url: &str,
        names: &[String],
        wait_s: u64,
        namespaces: Option<&[String]>,
        source_ips: &[IpAddr],
        trust: &LocalTrust,
    ) -> Result<Self, AgentsError> {
        let mut me = LocalAgents {
            children: Vec::new(),
        };
        for (i, name) in names.iter().enumerate() {
            let mut cmd = match namespaces.and_then(|n| n.get(i)) {
                Some(ns) => command_in(ns, exe),
                None => Command::new(exe),
            };
            cmd.args(["agent", "--bus", bus_url, "--name", name, "--quiet"])
                .args(["--wait", &format!("{wait_s}s")])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit());
            match trust.credentials.as_ref().and_then(|c| c.get(i)) {
                Some(c) => {
                    cmd.env(CREDENTIALS_ENV, c);
                }
                None => {
                    cmd.arg("--insecure-bus");
                }
            }
            for a in &trust.allow {
                cmd.args(["--allow-target", a]);
            }
            if let Some(ip) = source_ips.get(i) {
                cmd.args(["--source-ip", &ip.to_string()]);
            }
            die_with_parent(&mut cmd);
            let child = cmd.spawn().map_err(|source| AgentsError::Io {
                action: "starting a local agent",
                source,
            })?;
            me.children.push((name.clone(), child));
        }
        Ok(me)
    }

    /// Which of these agents' processes have exited, for the coordinator
    /// ([`crate::coordinator::CoordinatorConfig::exited`]).
    pub fn exit_watch(&self) -> ExitWatch {
        ExitWatch {
            pids: self
                .children
                .iter()
                .map(|(name, c)| (name.clone(), c.id()))
                .collect(),
        }
    }

    /// Kills and reaps every agent still running (idempotent).
    pub fn stop(&mut self) {
        for (_, c) in &mut self.children {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
        self.children.clear();
    }
}

/// The agent processes this volley started, by name and pid: an agent whose process
/// has exited sends nothing more, so the coordinator need not wait out the silence
/// bound to call it lost. The processes are reaped only by [`LocalAgents::stop`], so
/// until then an exited agent stays a zombie under its own pid (never another
/// process's): its state is read from `/proc/PID/stat`, no signal is sent.
#[derive(Debug, Clone, Default)]
pub struct ExitWatch {
    pids: Vec<(String, u32)>,
}

impl ExitWatch {
    /// The names of the agents whose process has exited (a zombie, or gone).
    pub fn exited(&self) -> Vec<&str> {
        self.pids
            .iter()
            .filter(|(_, pid)| exited(*pid))
            .map(|(name, _)| name.as_str())
            .collect()
    }
}

/// Whether process `pid` has exited: its `/proc` entry is gone or its state is `Z`.
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which may hold spaces and parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_none_or(|state| state == "Z" || state == "X"),
        Err(_) => true,
    }
}

impl Drop for LocalAgents {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_target_gives_each_agent_its_own_address_and_others_none() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let got: Vec<String> = loopback_sources(lo, 3)
            .iter()
            .map(IpAddr::to_string)
            .collect();
        assert_eq!(got, ["127.0.0.2", "127.0.0.3", "127.0.0.4"]);
        // Past .255 the next octet carries: still 127/8, still loopback.
        let many = loopback_sources(lo, 300);
        assert_eq!(many[299].to_string(), "127.0.1.45");
        assert!(loopback_sources("10.0.0.1".parse().unwrap(), 3).is_empty());
        assert!(loopback_sources("::1".parse().unwrap(), 3).is_empty());
    }
}
