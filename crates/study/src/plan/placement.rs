//! `[injectors]` keys for agents on other machines, resolved: `placement = "ssh"` (the
//! `hosts`, their OpenSSH options and binary directory), `placement = "kubernetes"` (the
//! Job's pods, which volley waits for), the bus they dial (`bus_url`, `bus`) and how long
//! to wait for them (`ready_timeout`). Every error names its key.
//!
//! The rules, as the README and docs/methodology.md ("Several injectors") state them:
//! injector `i` (from 0) runs on `hosts[i % len]`, so two entries serve any count and a
//! host named twice runs two agents; the literal host `"local"` runs that injector as a
//! process on this host. Agents on other hosts dial `bus_url`: with `bus = "private"`
//! (the ssh default) volley starts its nats-server listening on that address, with
//! `bus = "existing"` (the kubernetes default) it uses the server there.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::resolve::invalid;
use super::{BusPlan, InjectorsPlan, SshPlacement};
use crate::spec::{self, InjectorsDef, StudyFile};
use crate::StudyError;

/// How long agents may take to join, by default: a process on a host starts in well
/// under a second; a pod may first be scheduled and pull its image.
const READY_DEFAULT: Duration = Duration::from_secs(30);
const READY_DEFAULT_KUBERNETES: Duration = Duration::from_secs(300);

/// Resolves the placement keys of `[injectors]` for `placement` (already checked to be a
/// known one) into the plan's placement fields; the caller fills the rest (`stagger`,
/// `each`, `min_agents`, `netns_links`). `counts` are the injector counts, `steps` the
/// study's step count.
pub(super) fn resolve_remote(
    d: &InjectorsDef,
    file: &StudyFile,
    placement: &str,
    counts: &[u32],
    steps: usize,
) -> Result<InjectorsPlan, StudyError> {
    let ssh_keys = [
        ("hosts", d.hosts.is_some()),
        ("ssh_options", d.ssh_options.is_some()),
        ("remote_dir", d.remote_dir.is_some()),
    ];
    if placement != "ssh" {
        if let Some((key, _)) = ssh_keys.iter().find(|(_, set)| *set) {
            return Err(invalid(format!(
                "injectors.{key} needs placement = \"ssh\""
            )));
        }
    }
    if placement == "netns" && (d.bus_url.is_some() || d.bus.is_some()) {
        return Err(invalid(
            "injectors.bus_url: placement = \"netns\" runs its bus on the lab's own address",
        ));
    }
    let most = counts.iter().copied().max().unwrap_or(1);
    let ssh = match placement {
        "ssh" => Some(resolve_ssh(d, most)?),
        _ => None,
    };
    let kubernetes = placement == "kubernetes";
    let remote = kubernetes
        || ssh
            .as_ref()
            .is_some_and(|s| s.hosts.iter().any(Option::is_some));
    let bus = resolve_bus(d, kubernetes, remote)?;
    let (secure_bus, bus_credentials) = resolve_security(d, bus.as_ref())?;
    let agent_credentials = resolve_agent_credentials(d, bus.as_ref(), secure_bus, kubernetes)?;
    if kubernetes && secure_bus && matches!(bus, Some(BusPlan::Private(_))) {
        return Err(invalid(
            "injectors.bus: the Job's agents hold the keys of the manifest's bus, not of a private one volley makes per step; use bus = \"existing\" with bus_credentials, or bus_security = \"off\"",
        ));
    }
    if remote {
        if let Some(t) = file
            .targets
            .iter()
            .find(|t| t.kind.get_ref().as_str() != "external")
        {
            return Err(invalid(format!(
                "injectors.placement = \"{placement}\": target '{}' is {} and listens on this host's loopback, which agents on other hosts cannot reach; use kind = \"external\" with a url they reach",
                t.name,
                t.kind.get_ref()
            )));
        }
    }
    if kubernetes {
        // Each pod of the Job runs one `volley agent`, which ends with its run; the Job
        // does not restart it (restartPolicy Never), so there is one step to give them.
        if counts.len() != 1 {
            return Err(invalid(
                "injectors.count: with placement = \"kubernetes\" give one count, the Job's --injectors",
            ));
        }
        if steps != 1 {
            return Err(invalid(format!(
                "injectors.placement = \"kubernetes\": the Job's agents run one step and exit, and this study has {steps} steps (one target, one rate, one concurrency, repeats = 1)"
            )));
        }
    }
    let ready_timeout = match &d.ready_timeout {
        Some(t) => spec::parse_duration(t)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                invalid(format!(
                    "injectors.ready_timeout must be a duration such as \"30s\" or \"5m\", got \"{t}\""
                ))
            })?,
        None if kubernetes => READY_DEFAULT_KUBERNETES,
        None => READY_DEFAULT,
    };
    Ok(InjectorsPlan {
        stagger: Duration::ZERO,
        each: false,
        min_agents: None,
        netns_links: None,
        ssh,
        kubernetes,
        bus,
        ready_timeout,
        secure_bus,
        bus_credentials,
        agent_credentials,
    })
}

/// `agent_credentials`: on a secured existing bus, the agents volley starts need theirs
/// (a Kubernetes Job's pods have the manifests' Secret instead).
fn resolve_agent_credentials(
    d: &InjectorsDef,
    bus: Option<&BusPlan>,
    secure: bool,
    kubernetes: bool,
) -> Result<Option<String>, StudyError> {
    let existing = matches!(bus, Some(BusPlan::Existing(_)));
    match (&d.agent_credentials, existing && secure && !kubernetes) {
        (Some(_), false) => Err(invalid(
            "injectors.agent_credentials is for the agents volley starts on a secured bus = \"existing\"",
        )),
        (None, true) => Err(invalid(
            "injectors.agent_credentials: the agents volley starts need their credentials on a secured existing bus (\"{name}\" in the path stands for each agent's name), or bus_security = \"off\"",
        )),
        (a, _) => Ok(a.clone()),
    }
}

/// `bus_security` and `bus_credentials`: whether the bus is secured (the default) and,
/// for an existing one, the coordinator's credentials (read now, so a bad file fails
/// the study before anything runs).
fn resolve_security(
    d: &InjectorsDef,
    bus: Option<&BusPlan>,
) -> Result<(bool, Option<std::path::PathBuf>), StudyError> {
    let secure = match d.bus_security.as_deref() {
        None | Some("on") => true,
        Some("off") => false,
        Some(other) => {
            return Err(invalid(format!(
                "injectors.bus_security must be \"on\" or \"off\", got \"{other}\""
            )))
        }
    };
    let existing = matches!(bus, Some(BusPlan::Existing(_)));
    match (&d.bus_credentials, existing, secure) {
        (Some(_), false, _) => Err(invalid(
            "injectors.bus_credentials is for bus = \"existing\": volley makes its private bus's own",
        )),
        (Some(_), true, false) => Err(invalid(
            "injectors.bus_credentials: bus_security = \"off\" uses none",
        )),
        (None, true, true) => Err(invalid(
            "injectors.bus_credentials: bus = \"existing\" is secured by default; give the coordinator's credentials file (volley agents manifest writes one), or bus_security = \"off\" for a bus on a network where everyone is trusted",
        )),
        (Some(f), true, true) => {
            let path = std::path::PathBuf::from(f);
            volley_agents::auth::BusCredentials::load(&path)
                .map_err(|e| invalid(format!("injectors.bus_credentials: {e}")))?;
            Ok((true, Some(path)))
        }
        (None, _, s) => Ok((s, None)),
    }
}

/// Where one injector runs: the placement decision, made here only; `deploy` carries it
/// out and the printed plan states it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Seat<'a> {
    /// A `volley agent` process on this host (in its namespace of the lab with
    /// `placement = "netns"`).
    Here,
    /// A `volley agent` on this host of `placement = "ssh"`, started over SSH.
    Host(&'a volley_agents::ssh::Host),
    /// A pod of the Kubernetes Job: volley starts nothing and waits for it on the bus.
    Pod,
}

impl super::InjectorsPlan {
    /// Where injector `i` (from 0) runs: with `placement = "ssh"` on `hosts[i % len]`
    /// (`"local"`: here), with `"kubernetes"` in a pod of the Job, otherwise here.
    pub fn seat(&self, i: usize) -> Seat<'_> {
        if self.kubernetes {
            return Seat::Pod;
        }
        match self.ssh.as_ref().and_then(|s| s.host_of(i)) {
            Some(h) => Seat::Host(h),
            None => Seat::Here,
        }
    }

    /// Whether any of `k` injectors runs on another machine (which cannot reach a target
    /// on this host's loopback).
    pub fn any_away(&self, k: usize) -> bool {
        (0..k).any(|i| self.seat(i) != Seat::Here)
    }

    /// Where volley's own bus listens: the `bus_url` of a private bus, volley's address
    /// in the lab (`lab_bus_ip`, a free port), else loopback; `None` for an existing bus
    /// (somebody else's).
    pub fn bus_listen(&self, lab_bus_ip: Option<IpAddr>) -> Option<SocketAddr> {
        match (&self.bus, lab_bus_ip) {
            (Some(BusPlan::Existing(_)), _) => None,
            (Some(BusPlan::Private(addr)), _) => Some(*addr),
            (None, Some(ip)) => Some(SocketAddr::new(ip, 0)),
            (None, None) => Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        }
    }

    /// Where the injectors run and which bus they dial, for the printed plan; `None`
    /// for injectors on this host's loopback or in the lab.
    pub fn placement_line(&self) -> Option<String> {
        let bus = match &self.bus {
            Some(BusPlan::Private(a)) if a.port() == 0 => {
                format!("volley's nats-server on {}, a free port", a.ip())
            }
            Some(BusPlan::Private(a)) => format!("volley's nats-server on {a}"),
            Some(BusPlan::Existing(u)) => format!("the nats-server at {u}"),
            None => "volley's nats-server on loopback".into(),
        };
        let bus = if self.secure_bus {
            format!("{bus} (TLS, per-study credentials)")
        } else {
            format!("{bus} (in the clear: bus_security = \"off\")")
        };
        let wait = format!("waiting up to {:?} for them", self.ready_timeout);
        if self.kubernetes {
            return Some(format!(
                "injectors: the Kubernetes Job's agents (agent-0..), started by you; bus {bus}; {wait}"
            ));
        }
        let Some(ssh) = self.ssh.as_ref() else {
            // Injectors on this host are the default, unremarkable; a bus in the clear
            // is said wherever they run.
            return (!self.secure_bus)
                .then(|| format!("injectors: on this host; bus {bus}; {wait}"));
        };
        let hosts: Vec<String> = ssh
            .hosts
            .iter()
            .map(|h| h.as_ref().map_or("local".into(), ToString::to_string))
            .collect();
        Some(format!(
            "injectors: injector i on hosts[i % {}] = {} over ssh; bus {bus}; {wait}",
            hosts.len(),
            hosts.join(", ")
        ))
    }
}

/// `hosts`, `ssh_options` and `remote_dir` of `placement = "ssh"`.
fn resolve_ssh(d: &InjectorsDef, most: u32) -> Result<SshPlacement, StudyError> {
    let Some(entries) = d.hosts.as_ref().filter(|h| !h.is_empty()) else {
        return Err(invalid(
            "injectors.hosts: placement = \"ssh\" needs hosts = [\"user@host[:port]\", ...] (or \"local\" for this host)",
        ));
    };
    if entries.len() > most as usize {
        return Err(invalid(format!(
            "injectors.hosts lists {} hosts, more than the largest count ({most}): injector i runs on hosts[i % len], so the extra hosts would never be used",
            entries.len()
        )));
    }
    let mut hosts = Vec::new();
    for e in entries {
        hosts.push(match e.as_str() {
            "local" => None,
            h => Some(
                h.parse::<volley_agents::ssh::Host>()
                    .map_err(|e| invalid(format!("injectors.hosts: {e}")))?,
            ),
        });
    }
    let options = d.ssh_options.clone().unwrap_or_default();
    for o in &options {
        check_ssh_option(o).map_err(|e| invalid(format!("injectors.ssh_options: {e}")))?;
    }
    let remote_dir = match &d.remote_dir {
        Some(r) if r.trim().is_empty() || r.contains(['\n', '\0']) => {
            return Err(invalid(format!(
                "injectors.remote_dir must be a directory path, got {r:?}"
            )))
        }
        r => r.clone(),
    };
    Ok(SshPlacement {
        hosts,
        options,
        remote_dir,
    })
}

/// Why a text is not one OpenSSH `-o` option.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SshOptionError {
    /// Not `Key=Value` or `Key Value`.
    #[error("{0:?} is not an OpenSSH option such as \"IdentityFile=/path/key\"")]
    Shape(String),
    /// A newline or NUL in it.
    #[error("{0:?} spans lines")]
    Lines(String),
}

/// One OpenSSH `-o` option: `Key=Value` or `Key Value`, on one line.
pub fn check_ssh_option(o: &str) -> Result<(), SshOptionError> {
    let key = o.split(['=', ' ']).next().unwrap_or_default();
    let has_value = o.len() > key.len() + 1;
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric()) || !has_value {
        return Err(SshOptionError::Shape(o.to_string()));
    }
    if o.contains(['\n', '\0']) {
        return Err(SshOptionError::Lines(o.to_string()));
    }
    Ok(())
}

/// `bus_url` and `bus`: which server, where. `remote`: some agent runs on another host.
fn resolve_bus(
    d: &InjectorsDef,
    kubernetes: bool,
    remote: bool,
) -> Result<Option<BusPlan>, StudyError> {
    let private = match d.bus.as_deref() {
        None => !kubernetes,
        Some("private") => true,
        Some("existing") => false,
        Some(other) => {
            return Err(invalid(format!(
                "injectors.bus must be \"private\" or \"existing\", got \"{other}\""
            )))
        }
    };
    let Some(url) = &d.bus_url else {
        if remote {
            return Err(invalid(
                "injectors.bus_url: agents on other hosts need the bus address they dial, e.g. bus_url = \"nats://10.0.0.5\" (this host's address on their network)",
            ));
        }
        if !private {
            return Err(invalid("injectors.bus = \"existing\" needs bus_url"));
        }
        return Ok(None);
    };
    let bad = || {
        invalid(format!(
            "injectors.bus_url must be nats://ADDR[:PORT], got \"{url}\""
        ))
    };
    let rest = url.strip_prefix("nats://").ok_or_else(bad)?;
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().map_err(|_| bad())?),
        None => (rest, 0),
    };
    let name_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_".contains(&b));
    if !name_ok {
        return Err(bad());
    }
    if private {
        let ip: IpAddr = host.parse().map_err(|_| {
            invalid(format!(
                "injectors.bus_url: with bus = \"private\" volley's nats-server listens on its address, so it must be an IP address of this host, got \"{host}\""
            ))
        })?;
        if ip.is_unspecified() {
            return Err(invalid(format!(
                "injectors.bus_url: {ip} is not an address agents can dial; give this host's address on their network"
            )));
        }
        if remote && ip.is_loopback() {
            return Err(invalid(format!(
                "injectors.bus_url: {ip} is loopback, which agents on other hosts cannot reach"
            )));
        }
        if kubernetes && port == 0 {
            return Err(invalid(
                "injectors.bus_url: with kubernetes and bus = \"private\", give the port the manifests' --bus names",
            ));
        }
        return Ok(Some(BusPlan::Private(SocketAddr::new(ip, port))));
    }
    // The agents of ssh hosts would dial their own loopback. (With kubernetes the
    // coordinator may well reach the cluster's server through a port-forward.)
    let loopback = host == "localhost" || host.parse::<IpAddr>().is_ok_and(|i| i.is_loopback());
    if loopback && !kubernetes && remote {
        return Err(invalid(format!(
            "injectors.bus_url: {host} is loopback, which agents on other hosts cannot reach"
        )));
    }
    let port = if port == 0 { 4222 } else { port };
    Ok(Some(BusPlan::Existing(format!("nats://{host}:{port}"))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{resolve, InjectorsPlan};

    const EXTERNAL: &str = "name = \"p\"\n[[target]]\nname = \"x\"\nkind = \"external\"\nurl = \"http://10.0.0.9:8080/\"\n[[workload]]\nname = \"w\"\npaths = [\"/\"]\n[steps]\nduration = \"3s\"\nREPEATS\n[injectors]\n";

    fn injectors(table: &str, repeats: u32) -> Result<InjectorsPlan, crate::StudyError> {
        let text = EXTERNAL.replace("REPEATS", &format!("repeats = {repeats}")) + table;
        let f = crate::spec::parse(&text)?;
        resolve(&f, &text, 1.0).map(|p| p.injectors.unwrap())
    }

    #[test]
    fn kubernetes_waits_for_one_step_on_an_existing_bus() {
        let k = "count = 3\nplacement = \"kubernetes\"\nbus_url = \"nats://127.0.0.1:4222\"\nbus_security = \"off\"\n";
        let p = injectors(k, 1).unwrap();
        assert!(p.kubernetes && p.ssh.is_none());
        assert_eq!(
            p.bus,
            Some(BusPlan::Existing("nats://127.0.0.1:4222".into()))
        );
        assert_eq!(p.ready_timeout, READY_DEFAULT_KUBERNETES);
        let e = injectors(&k.replace("count = 3", "count = [1, 2]"), 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("injectors.count"), "{e}");
        let e = injectors(k, 2).unwrap_err().to_string();
        assert!(
            e.contains("injectors.placement") && e.contains("2 steps"),
            "{e}"
        );
        // A private bus for the pods must listen where the manifests said.
        let private = format!("{k}bus = \"private\"\n");
        let e = injectors(&private.replace("127.0.0.1:4222", "10.0.0.1"), 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("injectors.bus_url") && e.contains("port"), "{e}");
        let e = injectors(&private, 1).unwrap_err().to_string();
        assert!(e.contains("loopback"), "{e}");
        let p = injectors(&private.replace("127.0.0.1", "10.0.0.1"), 1).unwrap();
        assert_eq!(
            p.bus,
            Some(BusPlan::Private("10.0.0.1:4222".parse().unwrap()))
        );
    }

    #[test]
    fn the_bus_is_secured_unless_turned_off_and_an_existing_one_needs_credentials() {
        let local = injectors("count = 2\n", 1).unwrap();
        assert!(local.secure_bus && local.bus_credentials.is_none());
        assert_eq!(local.placement_line(), None);
        let off = injectors("count = 2\nbus_security = \"off\"\n", 1).unwrap();
        assert!(!off.secure_bus);
        assert!(off
            .placement_line()
            .unwrap()
            .contains("in the clear: bus_security = \"off\""));
        let e = injectors("count = 2\nbus_security = \"maybe\"\n", 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("injectors.bus_security must be"), "{e}");
        let k = "count = 3\nplacement = \"kubernetes\"\nbus_url = \"nats://127.0.0.1:4222\"\n";
        let e = injectors(k, 1).unwrap_err().to_string();
        assert!(
            e.contains("injectors.bus_credentials") && e.contains("secured"),
            "{e}"
        );
        let e = injectors(
            &format!("{k}bus_credentials = \"/nonexistent/c.json\"\n"),
            1,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("/nonexistent/c.json"), "{e}");
        let e = injectors("count = 2\nbus_credentials = \"c.json\"\n", 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is for bus = \"existing\""), "{e}");
        let private = format!("{k}bus = \"private\"\n").replace("127.0.0.1", "10.0.0.1");
        let e = injectors(&private, 1).unwrap_err().to_string();
        assert!(e.contains("bus = \"existing\" with bus_credentials"), "{e}");
    }

    #[test]
    fn the_seat_of_each_injector_and_where_the_bus_listens_are_decided_here() {
        let t = "count = [2, 3]\nplacement = \"ssh\"\nhosts = [\"local\", \"root@10.0.0.2:2222\"]\nbus_url = \"nats://10.0.0.1\"\n";
        let p = injectors(t, 1).unwrap();
        let seats: Vec<String> = (0..3)
            .map(|i| match p.seat(i) {
                Seat::Here => "here".to_string(),
                Seat::Host(h) => h.to_string(),
                Seat::Pod => "pod".to_string(),
            })
            .collect();
        assert_eq!(seats, ["here", "root@10.0.0.2:2222", "here"]);
        assert!(!p.any_away(1) && p.any_away(2));
        // A private bus listens where bus_url says, lab or not.
        let lab: Option<IpAddr> = Some("10.213.0.1".parse().unwrap());
        assert_eq!(p.bus_listen(lab), Some("10.0.0.1:0".parse().unwrap()));
        let local = injectors("count = 2\n", 1).unwrap();
        assert_eq!(local.seat(1), Seat::Here);
        assert!(!local.any_away(2));
        assert_eq!(local.bus_listen(lab), Some("10.213.0.1:0".parse().unwrap()));
        assert_eq!(local.bus_listen(None), Some("127.0.0.1:0".parse().unwrap()));
        let k = "count = 3\nplacement = \"kubernetes\"\nbus_url = \"nats://127.0.0.1:4222\"\nbus_security = \"off\"\n";
        let pods = injectors(k, 1).unwrap();
        assert_eq!(pods.seat(0), Seat::Pod);
        assert!(pods.any_away(1));
        // The pods dial an existing bus: volley starts none.
        assert_eq!(pods.bus_listen(None), None);
    }

    #[test]
    fn ssh_hosts_take_injectors_in_turn_and_local_stays_here() {
        let t = "count = [2, 3]\nplacement = \"ssh\"\nhosts = [\"local\", \"root@10.0.0.2:2222\"]\nbus_url = \"nats://10.0.0.1\"\nready_timeout = \"10s\"\n";
        let p = injectors(t, 1).unwrap();
        let ssh = p.ssh.clone().unwrap();
        let remote: Vec<String> = ssh.remote_hosts().iter().map(|h| h.to_string()).collect();
        assert_eq!(remote, ["root@10.0.0.2:2222"]);
        let on: Vec<Option<String>> = (0..3)
            .map(|i| ssh.host_of(i).map(|h| h.to_string()))
            .collect();
        assert_eq!(on, [None, Some("root@10.0.0.2:2222".into()), None]);
        assert_eq!(p.bus, Some(BusPlan::Private("10.0.0.1:0".parse().unwrap())));
        assert_eq!(p.ready_timeout, Duration::from_secs(10));
        assert_eq!(
            p.placement_line().unwrap(),
            "injectors: injector i on hosts[i % 2] = local, root@10.0.0.2:2222 over ssh; bus volley's nats-server on 10.0.0.1, a free port (TLS, per-study credentials); waiting up to 10s for them"
        );
        // Only local hosts: no bus address needed.
        let p = injectors("count = 2\nplacement = \"ssh\"\nhosts = [\"local\"]\n", 1).unwrap();
        assert_eq!(p.bus, None);
        let e = injectors(&t.replace("10.0.0.1", "0.0.0.0"), 1)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("injectors.bus_url") && e.contains("0.0.0.0"),
            "{e}"
        );
        let e = injectors(
            &t.replace(
                "nats://10.0.0.1",
                "nats://localhost:4222\"\nbus = \"existing",
            ),
            1,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("injectors.bus_url") && e.contains("loopback"),
            "{e}"
        );
    }

    #[test]
    fn ssh_options_are_key_value_on_one_line() {
        for ok in ["Port=2222", "IdentityFile /k", "BatchMode=yes"] {
            assert!(check_ssh_option(ok).is_ok(), "{ok}");
        }
        for bad in ["", "Port", "Port=", "-oProxy=x", "=x", "A=b\nc"] {
            assert!(check_ssh_option(bad).is_err(), "{bad:?}");
        }
    }
}
