//! Where a step's agents run and the bus they meet on: processes on this host (in the
//! lab's namespaces with `placement = "netns"`), processes on other hosts started over
//! SSH, or the pods of a Kubernetes Job that volley only waits for.
//!
//! Place in the flow: [`StudyHosts::open`] copies volley to the ssh hosts once, before
//! the targets start (a host that cannot take it fails the study before anything runs,
//! and what was copied to the others is removed); each injected step then asks
//! [`StepAgents::start`] for its bus and its `k` agents and stops them when the
//! coordinator is done. Injector `i` (from 0) runs on `hosts[i % len]`, `"local"` as a
//! process here (docs/methodology.md, "Several injectors"). On a host whose connection
//! is lost mid-run the agent is killed and the binary removed by the host's own side
//! (`volley_agents::ssh`), so the coordinator sees it lost by its heartbeats and nothing
//! is left there.

use std::path::Path;

use volley_agents::local::LocalAgents;
use volley_agents::server::PrivateNats;
use volley_agents::ssh::{self, Deployment, Host, RemoteProcess, SshConfig};
use volley_targets::RunningTarget;

use crate::lab::StudyLab;
use crate::plan::{BusPlan, InjectorsPlan, Plan};
use crate::step::StepError;
use crate::StudyError;

/// The ssh hosts of a study with volley on them; the copies are removed on
/// [`StudyHosts::close`] (or on drop).
pub(crate) struct StudyHosts {
    deployment: Deployment,
    hosts: Vec<Host>,
}

impl StudyHosts {
    /// Copies volley (`exe`, or this executable) to every remote host of the plan's
    /// `placement = "ssh"` where it is missing or of another version; `None` without
    /// remote hosts.
    pub fn open(
        plan: &Plan,
        exe: Option<&Path>,
        note: &mut dyn FnMut(&str),
    ) -> Result<Option<StudyHosts>, StudyError> {
        let Some(placement) = plan.injectors.as_ref().and_then(|i| i.ssh.as_ref()) else {
            return Ok(None);
        };
        let hosts = placement.remote_hosts();
        if hosts.is_empty() {
            return Ok(None);
        }
        let err = |e: ssh::SshError| StudyError::Invalid(format!("ssh: {e}"));
        let mut cfg = SshConfig::new().map_err(err)?;
        if let Some(e) = exe {
            cfg.local_bin = e.to_path_buf();
        }
        if let Some(d) = &placement.remote_dir {
            cfg.remote_dir.clone_from(d);
        }
        cfg.options.clone_from(&placement.options);
        let deployment = ssh::deploy(&cfg, &hosts).map_err(err)?;
        for p in deployment.hosts() {
            note(&format!(
                "{}: {} ({})",
                p.host,
                if p.copied {
                    "volley copied"
                } else {
                    "volley already there"
                },
                p.version
            ));
        }
        Ok(Some(StudyHosts { deployment, hosts }))
    }

    /// Removes the copies; a host that cannot be reached any more is named in a note.
    pub fn close(self, note: &mut dyn FnMut(&str)) {
        if let Err(e) = self.deployment.remove() {
            note(&format!("removing volley from the hosts: {e}"));
        }
    }

    fn start(&self, host: &Host, args: &[&str]) -> Result<RemoteProcess, ssh::SshError> {
        let i = self
            .hosts
            .iter()
            .position(|h| h == host)
            .expect("every host of the plan was deployed");
        self.deployment.start(i, args)
    }
}

/// A step's bus and agents; stopped on [`StepAgents::stop`] or on drop.
pub(crate) struct StepAgents {
    /// Kept for its life: dropping it stops the server.
    _nats: Option<PrivateNats>,
    url: String,
    local: Option<LocalAgents>,
    remote: Vec<RemoteProcess>,
}

impl StepAgents {
    /// Starts the bus and the agents `inj1..injk` of one step. `exe`: the volley the
    /// local agents run.
    pub fn start(
        inj: &InjectorsPlan,
        k: u32,
        exe: &Path,
        lab: Option<&StudyLab>,
        hosts: Option<&StudyHosts>,
        target: &RunningTarget,
    ) -> Result<StepAgents, StepError> {
        let k = k as usize;
        let on_host = |i: usize| inj.ssh.as_ref().and_then(|s| s.host_of(i));
        let remote_agents = inj.kubernetes || (0..k).any(|i| on_host(i).is_some());
        if remote_agents && target.addr.ip().is_loopback() {
            return Err(StepError::Injectors(format!(
                "the target listens on {}, loopback, which agents on other hosts cannot reach",
                target.addr
            )));
        }
        // In a lab the bus listens on volley's lab address; with `bus_url` where it
        // says (or it is somebody else's); otherwise on loopback.
        let (nats, url) = match (&inj.bus, lab) {
            (Some(BusPlan::Existing(url)), _) => (None, url.clone()),
            (Some(BusPlan::Private(addr)), _) => {
                let n = PrivateNats::start_at(*addr).map_err(StepError::Agents)?;
                let u = n.url();
                (Some(n), u)
            }
            (None, Some(l)) => {
                let n = PrivateNats::start_on(l.bus_ip()).map_err(StepError::Agents)?;
                let u = n.url();
                (Some(n), u)
            }
            (None, None) => {
                let n = PrivateNats::start().map_err(StepError::Agents)?;
                let u = n.url();
                (Some(n), u)
            }
        };
        let mut me = StepAgents {
            _nats: nats,
            url,
            local: None,
            remote: Vec::new(),
        };
        if inj.kubernetes {
            // The Job's pods are the agents; they dial the bus on their own.
            return Ok(me);
        }
        // An agent waits for its assignment twice as long as the coordinator waits for
        // the agents, then gives up by itself.
        let wait_s = inj.ready_timeout.as_secs().max(1) * 2;
        let wait = format!("{wait_s}s");
        let name = |i: usize| format!("inj{}", i + 1);
        let local: Vec<usize> = (0..k).filter(|&i| on_host(i).is_none()).collect();
        let names: Vec<String> = local.iter().map(|&i| name(i)).collect();
        let namespaces: Option<Vec<String>> =
            lab.map(|l| local.iter().map(|&i| l.injector_ns(i)).collect());
        me.local = Some(
            LocalAgents::spawn(exe, &me.url, &names, wait_s, namespaces.as_deref())
                .map_err(StepError::Agents)?,
        );
        for i in 0..k {
            let Some(host) = on_host(i) else { continue };
            let hosts = hosts
                .ok_or_else(|| StepError::Injectors("the ssh hosts were not prepared".into()))?;
            let n = name(i);
            let args = [
                "agent", "--bus", &me.url, "--name", &n, "--quiet", "--wait", &wait,
            ];
            // On error `me` drops here and stops what was started.
            let p = hosts
                .start(host, &args)
                .map_err(|e| StepError::Injectors(format!("{n}: {e}")))?;
            me.remote.push(p);
        }
        Ok(me)
    }

    /// The URL the coordinator dials.
    pub fn bus_url(&self) -> &str {
        &self.url
    }

    /// Stops every agent still running, here and on the hosts (idempotent).
    pub fn stop(&mut self) {
        if let Some(mut l) = self.local.take() {
            l.stop();
        }
        for p in self.remote.drain(..) {
            // A host that is gone has already killed its agent itself.
            let _ = p.stop();
        }
    }
}

impl Drop for StepAgents {
    fn drop(&mut self) {
        self.stop();
    }
}
