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
//!
//! The bus is secured unless `bus_security = "off"` (docs/methodology.md, "Trust on the
//! bus"): a private bus gets fresh keys each step (`PrivateNats::start_secured`), each
//! agent its own credentials (in its environment here, over the SSH channel on a host)
//! and an allow-list of the step's target, so it loads nothing else.

use std::path::Path;

use volley_agents::auth::BusCredentials;
use volley_agents::local::{loopback_sources, LocalAgents, LocalTrust};
use volley_agents::server::PrivateNats;
use volley_agents::ssh::{self, Deployment, Host, RemoteProcess, SshConfig};
use volley_targets::RunningTarget;

use crate::lab::StudyLab;
use crate::plan::{BusPlan, InjectorsPlan, Plan, Seat};
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

    fn start(
        &self,
        host: &Host,
        args: &[&str],
        secret: Option<&str>,
    ) -> Result<RemoteProcess, ssh::SshError> {
        let i = self
            .hosts
            .iter()
            .position(|h| h == host)
            .expect("every host of the plan was deployed");
        self.deployment.start(i, args, secret)
    }
}

/// Each agent's credentials as JSON (`None`: the bus's security is off): from the
/// private bus's fresh keys, or from `agent_credentials` (`{name}` standing for each
/// agent's name) on an existing bus.
fn agent_secrets(
    inj: &InjectorsPlan,
    nats: Option<&PrivateNats>,
    names: &[String],
) -> Result<Vec<Option<String>>, StepError> {
    let mut secrets: Vec<Option<String>> = names
        .iter()
        .map(|n| {
            let keys = nats?.keys()?;
            keys.agent(n).map(BusCredentials::to_json)
        })
        .collect();
    if let Some(t) = &inj.agent_credentials {
        for (n, s) in names.iter().zip(secrets.iter_mut()) {
            let path = std::path::PathBuf::from(t.replace("{name}", n));
            *s = Some(
                BusCredentials::load(&path)
                    .map_err(StepError::Agents)?
                    .to_json(),
            );
        }
    }
    Ok(secrets)
}

/// The step's bus: a private nats-server where the plan listens (secured: one key per
/// agent in `names`), or the existing one it names with the coordinator's credentials.
/// Returns the server to keep alive, the URL to dial and the coordinator's credentials.
fn start_bus(
    inj: &InjectorsPlan,
    lab: Option<&StudyLab>,
    names: &[String],
) -> Result<(Option<PrivateNats>, String, Option<BusCredentials>), StepError> {
    let nats = match inj.bus_listen(lab.map(StudyLab::bus_ip)) {
        Some(a) if inj.secure_bus => {
            Some(PrivateNats::start_secured(a, names).map_err(StepError::Agents)?)
        }
        Some(a) => Some(PrivateNats::start_at(a).map_err(StepError::Agents)?),
        None => None,
    };
    let (url, auth) = match (&nats, &inj.bus) {
        (Some(n), _) => (n.url(), n.keys().map(|k| k.coordinator.clone())),
        (None, Some(BusPlan::Existing(url))) => {
            let auth = match &inj.bus_credentials {
                Some(f) => Some(BusCredentials::load(f).map_err(StepError::Agents)?),
                None => None,
            };
            (url.clone(), auth)
        }
        (None, _) => unreachable!("a bus without a server is an existing one"),
    };
    Ok((nats, url, auth))
}

/// Starts agent `name` on an ssh `host`: it dials `bus`, waits `wait` for its
/// assignment, may load only the `allow`ed targets, and signs in with `secret` (none:
/// the bus's security is off).
fn start_remote(
    hosts: &StudyHosts,
    host: &volley_agents::ssh::Host,
    bus: &str,
    name: &str,
    wait: &str,
    allow: &[String],
    secret: Option<String>,
) -> Result<RemoteProcess, StepError> {
    let mut args = vec![
        "agent", "--bus", bus, "--name", name, "--quiet", "--wait", wait,
    ];
    for a in allow {
        args.extend(["--allow-target", a]);
    }
    if secret.is_none() {
        args.push("--insecure-bus");
    }
    hosts
        .start(host, &args, secret.as_deref())
        .map_err(|e| StepError::Injectors(format!("{name}: {e}")))
}

/// A step's bus and agents; stopped on [`StepAgents::stop`] or on drop.
pub(crate) struct StepAgents {
    /// Kept for its life: dropping it stops the server.
    nats: Option<PrivateNats>,
    url: String,
    /// The coordinator's credentials (`None`: the bus's security is off).
    auth: Option<BusCredentials>,
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
        if inj.any_away(k) && target.addr.ip().is_loopback() {
            return Err(StepError::Injectors(format!(
                "the target listens on {}, loopback, which agents on other hosts cannot reach",
                target.addr
            )));
        }
        let name = |i: usize| format!("inj{}", i + 1);
        let names: Vec<String> = (0..k).map(name).collect();
        let (nats, url, auth) = start_bus(inj, lab, &names)?;
        let secrets = agent_secrets(inj, nats.as_ref(), &names)?;
        let creds = |i: usize| secrets[i].clone();
        // The agents volley starts may load the step's target (and, in a lab, its
        // delaying proxies, on the target's address at ports of their own) and nothing
        // else.
        let allow = match lab {
            Some(_) => vec![target.addr.ip().to_string()],
            None => vec![target.addr.to_string()],
        };
        let mut me = StepAgents {
            nats,
            url,
            auth,
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
        let local: Vec<usize> = (0..k).filter(|&i| inj.seat(i) == Seat::Here).collect();
        let names: Vec<String> = local.iter().map(|&i| name(i)).collect();
        let namespaces: Option<Vec<String>> =
            lab.map(|l| local.iter().map(|&i| l.injector_ns(i)).collect());
        let trust = LocalTrust {
            credentials: local.iter().map(|&i| creds(i)).collect(),
            allow: allow.clone(),
        };
        // Outside a lab every local agent shares this host's addresses: on a loopback
        // target each connects from its own (127.0.0.2, ...), so the server's log tells
        // them apart.
        let sources = match lab {
            Some(_) => Vec::new(),
            None => loopback_sources(target.addr.ip(), local.len()),
        };
        me.local = Some(
            LocalAgents::spawn(
                exe,
                &me.url,
                &names,
                wait_s,
                namespaces.as_deref(),
                &sources,
                &trust,
            )
            .map_err(StepError::Agents)?,
        );
        for i in 0..k {
            let Seat::Host(host) = inj.seat(i) else {
                continue;
            };
            let hosts = hosts
                .ok_or_else(|| StepError::Injectors("the ssh hosts were not prepared".into()))?;
            // On error `me` drops here and stops what was started.
            let p = start_remote(hosts, host, &me.url, &name(i), &wait, &allow, creds(i))?;
            me.remote.push(p);
        }
        Ok(me)
    }

    /// The URL the coordinator dials.
    pub fn bus_url(&self) -> &str {
        &self.url
    }

    /// The coordinator's credentials (`None`: the bus's security is off).
    pub fn coordinator_auth(&self) -> Option<BusCredentials> {
        self.auth.clone()
    }

    /// Which local agents' processes have exited (`None`: no local agent).
    pub fn exit_watch(&self) -> Option<volley_agents::local::ExitWatch> {
        self.local.as_ref().map(LocalAgents::exit_watch)
    }

    /// Connections the private bus refused (0 for an existing bus): all of the step's
    /// after [`StepAgents::stop`], which reads the bus's log to its end.
    pub fn refused(&self) -> u64 {
        self.nats.as_ref().map_or(0, PrivateNats::refused)
    }

    /// Stops every agent still running, here and on the hosts, then the private bus
    /// (idempotent).
    pub fn stop(&mut self) {
        if let Some(mut l) = self.local.take() {
            l.stop();
        }
        for p in self.remote.drain(..) {
            // A host that is gone has already killed its agent itself.
            let _ = p.stop();
        }
        if let Some(n) = &mut self.nats {
            n.stop();
        }
    }
}

impl Drop for StepAgents {
    fn drop(&mut self) {
        self.stop();
    }
}
