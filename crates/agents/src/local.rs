//! Local injectors: `volley agent` processes on this host, one per injector, that die
//! with the volley that started them.
//!
//! Place in the flow: what a study's `placement = "local"` starts before the
//! coordinator gathers its agents. Each child gets `PR_SET_PDEATHSIG` (SIGTERM when
//! its parent ends, even by SIGKILL), so no injector outlives its study and goes on
//! sending load nobody records; [`LocalAgents`] kills and reaps them on drop.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::AgentsError;

/// Makes `cmd` receive SIGTERM when this process ends.
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

/// Agent processes this volley started (killed and reaped on drop).
#[derive(Debug)]
pub struct LocalAgents {
    children: Vec<(String, Child)>,
}

impl LocalAgents {
    /// Starts one `volley agent --bus URL --name NAME --quiet` per name, from the
    /// volley executable `exe`, waiting at most `wait` for an assignment; agent `i` in
    /// network namespace `namespaces[i]` when given (through `ip netns exec`, which
    /// execs the agent in its own place: pid and death signal carry over).
    pub fn spawn(
        exe: &Path,
        bus_url: &str,
        names: &[String],
        wait_s: u64,
        namespaces: Option<&[String]>,
    ) -> Result<Self, AgentsError> {
        let mut me = LocalAgents {
            children: Vec::new(),
        };
        for (i, name) in names.iter().enumerate() {
            let mut cmd = match namespaces.and_then(|n| n.get(i)) {
                Some(ns) => {
                    let mut c = Command::new("ip");
                    c.args(["netns", "exec", ns]).arg(exe);
                    c
                }
                None => Command::new(exe),
            };
            cmd.args(["agent", "--bus", bus_url, "--name", name, "--quiet"])
                .args(["--wait", &format!("{wait_s}s")])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit());
            die_with_parent(&mut cmd);
            let child = cmd.spawn().map_err(|source| AgentsError::Io {
                action: "starting a local agent",
                source,
            })?;
            me.children.push((name.clone(), child));
        }
        Ok(me)
    }

    /// The process ids, by agent name.
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.children
            .iter()
            .map(|(n, c)| (n.clone(), c.id()))
            .collect()
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
