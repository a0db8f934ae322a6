//! Local injectors: `volley agent` processes on this host, one per injector, that die
//! with the volley that started them.
//!
//! Place in the flow: what a study's `placement = "local"` starts before the
//! coordinator gathers its agents. Each child gets `PR_SET_PDEATHSIG` (SIGTERM when
//! its parent ends, even by SIGKILL), so no injector outlives its study and goes on
//! sending load nobody records; [`LocalAgents`] kills and reaps them on drop.

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
    /// credentials and allow-list of `trust`.
    pub fn spawn(
        exe: &Path,
        bus_url: &str,
        names: &[String],
        wait_s: u64,
        namespaces: Option<&[String]>,
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
            die_with_parent(&mut cmd);
            let child = cmd.spawn().map_err(|source| AgentsError::Io {
                action: "starting a local agent",
                source,
            })?;
            me.children.push((name.clone(), child));
        }
        Ok(me)
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

impl Drop for LocalAgents {
    fn drop(&mut self) {
        self.stop();
    }
}
