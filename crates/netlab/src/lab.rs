//! Building and removing a lab: one namespace for the target, one per injector group, and
//! a bridge in a namespace of its own, joined by veth pairs; tbf shaping on each
//! injector's link, both directions. The root namespace gets one interface only when
//! asked ([`Lab::link_root`]: volley's own address on the lab, for the bus and for
//! reaching the target), and it goes with the bridge's namespace.
//!
//! Every name carries the owner's pid (`vl<pid>-...`, see [`crate::plan::Names`]), so
//! [`sweep`] can remove what a volley killed by SIGKILL left behind without a ledger:
//! a lab namespace whose pid is no longer alive is deleted, one whose pid lives is left
//! alone (it may be another volley's).

use std::process::Command;

use crate::plan::{tbf, Names, MAX_INJECTORS, PREFIX};
use crate::NetlabError;

/// One injector group's link to the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkSpec {
    /// Bandwidth each way, bits per second (`None`: unshaped).
    pub rate_bit: Option<u64>,
    /// The round trip the link is meant to have, ms: sizes the tbf queue.
    pub rtt_ms: u64,
    /// Round trip added by a delaying proxy ([`crate::proxy`]), ms (`None`: none).
    pub delay_ms: Option<u64>,
}

/// What every injector namespace is given, written and read back there (never on the
/// host): `net.ipv4.tcp_tw_reuse = 1`. volley closes a connection-per-request
/// connection itself as soon as the response is complete, so the TIME_WAIT sockets sit
/// on the generator's ports; the host reuses them for new connects only on loopback
/// (its default, 2, means "loopback only"), and a lab's injector reaches its target
/// over a veth, so at ~10,000 new connections a second the injector ran out of ports
/// within a few steps and its connects (and its send rate) collapsed: the generator's
/// own limit, read as generator-bound, hiding the server's. With reuse on, the
/// injector's ports behave as the host's do on loopback (docs/methodology.md,
/// "Server knobs").
pub fn injector_sysctls() -> Vec<crate::tune::Sysctl> {
    crate::tune::Sysctl::new("net.ipv4.tcp_tw_reuse", "1")
        .into_iter()
        .collect()
}

/// A lab that exists: removed on drop.
#[derive(Debug)]
pub struct Lab {
    names: Names,
    links: Vec<LinkSpec>,
    namespaces: Vec<String>,
    root_linked: bool,
    /// The generator's settings in a tuning lab, as read back ([`Lab::create_tuning`]).
    generator: Vec<crate::tune::AppliedSysctl>,
}

/// Runs `ip`/`tc` with `args`; a failure names the command and what it said.
fn run(program: &str, args: &[&str]) -> Result<(), NetlabError> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|source| NetlabError::Spawn {
            program: program.to_string(),
            source,
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(NetlabError::Command {
            command: format!("{program} {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

impl Lab {
    /// Builds lab `slot` (its addresses: [`Names`]; take the slot from
    /// `volley_targets::LabSlot` so no live lab holds the same) with one injector group
    /// per link (needs root: `CAP_NET_ADMIN`).
    pub fn create(slot: u8, links: &[LinkSpec]) -> Result<Lab, NetlabError> {
        if links.len() > MAX_INJECTORS {
            return Err(NetlabError::Command {
                command: "lab".into(),
                stderr: format!("at most {MAX_INJECTORS} injector groups per lab"),
            });
        }
        let mut lab = Lab {
            names: Names::new(std::process::id(), slot),
            links: links.to_vec(),
            namespaces: Vec::new(),
            root_linked: false,
            generator: Vec::new(),
        };
        // On error, `lab` drops here and removes what was made so far.
        lab.build()?;
        Ok(lab)
    }

    /// Builds a tuning lab for slot `slot`: the target's namespace alone, its address
    /// ([`Names::target_addr`]) on the namespace's own `lo`, and the generator's setting
    /// ([`injector_sysctls`]) written there. The load enters this same namespace
    /// ([`Lab::target_ns`]), so its traffic is loopback traffic, as on the host: a veth
    /// and a bridge between load and target cost a fifth of the built-in server's
    /// throughput at saturation (bench/netns.py), and "tuned vs default" must measure
    /// the tuning, not the path. The kernel settings of a variant then hold for both
    /// ends, as they would on one tuned host; the server-side ones (`somaxconn`, the SYN
    /// backlog) act on the listener only. tcp_tw_reuse is set because the loopback
    /// exemption of its default (2) goes by 127.0.0.0/8 addresses, not by the device.
    pub fn create_tuning(slot: u8) -> Result<Lab, NetlabError> {
        let mut lab = Lab {
            names: Names::new(std::process::id(), slot),
            links: Vec::new(),
            namespaces: Vec::new(),
            root_linked: false,
            generator: Vec::new(),
        };
        let t = lab.names.target_ns();
        lab.add_ns(t.clone())?;
        let addr = format!("{}/32", lab.names.target_addr());
        run("ip", &["-n", &t, "addr", "add", &addr, "dev", "lo"])?;
        lab.generator = crate::tune::apply_sysctls(&t, &injector_sysctls())?;
        Ok(lab)
    }

    /// What the target's namespace holds, for the store: the variant's `sysctls` and
    /// `routes` as applied, and the generator's settings unless a variant set the key.
    pub fn record(
        &self,
        sysctls: Vec<crate::tune::AppliedSysctl>,
        routes: Vec<String>,
    ) -> crate::tune::NsRecord {
        let generator_sysctls = self
            .generator
            .iter()
            .filter(|g| sysctls.iter().all(|s| s.key != g.key))
            .cloned()
            .collect();
        crate::tune::NsRecord {
            ns: self.target_ns(),
            sysctls,
            routes,
            generator_sysctls,
        }
    }

    fn add_ns(&mut self, name: String) -> Result<(), NetlabError> {
        run("ip", &["netns", "add", &name])?;
        self.namespaces.push(name.clone());
        run("ip", &["-n", &name, "link", "set", "lo", "up"])
    }

    fn build(&mut self) -> Result<(), NetlabError> {
        let b = self.names.bridge_ns();
        let t = self.names.target_ns();
        self.add_ns(b.clone())?;
        self.add_ns(t.clone())?;
        run(
            "ip",
            &["-n", &b, "link", "add", "name", "br0", "type", "bridge"],
        )?;
        run("ip", &["-n", &b, "link", "set", "br0", "up"])?;
        let len = Names::PREFIX_LEN;
        self.join(&t, "pt", &format!("{}/{len}", self.names.target_addr()))?;
        for i in 0..self.links.len() {
            let ns = self.names.injector_ns(i);
            self.add_ns(ns.clone())?;
            let port = format!("p{i}");
            let addr = self.names.injector_addr(i);
            self.join(&ns, &port, &format!("{addr}/{len}"))?;
            crate::tune::apply_sysctls(&ns, &injector_sysctls())?;
            if let Some(rate) = self.links[i].rate_bit {
                let q = tbf(rate, self.links[i].rtt_ms);
                // Download (bridge -> injector) and upload (injector -> bridge).
                shape(&b, &port, q)?;
                shape(&ns, "eth0", q)?;
            }
        }
        Ok(())
    }

    /// A veth pair: `eth0` with `addr` inside `ns`, `port` on the bridge.
    fn join(&self, ns: &str, port: &str, addr: &str) -> Result<(), NetlabError> {
        let b = self.names.bridge_ns();
        run(
            "ip",
            &[
                "-n", &b, "link", "add", "name", port, "type", "veth", "peer", "name", "eth0",
                "netns", ns,
            ],
        )?;
        run(
            "ip",
            &["-n", &b, "link", "set", "dev", port, "master", "br0", "up"],
        )?;
        run("ip", &["-n", ns, "addr", "add", addr, "dev", "eth0"])?;
        run("ip", &["-n", ns, "link", "set", "eth0", "up"])
    }

    /// Joins volley's own namespace to the bridge: an interface named
    /// [`Names::root_link`] with [`Names::root_addr`], so volley reaches the target
    /// and the agents reach volley's bus. Unshaped.
    pub fn link_root(&mut self) -> Result<(), NetlabError> {
        let b = self.names.bridge_ns();
        let root = self.names.root_link();
        run(
            "ip",
            &[
                "link", "add", "name", &root, "type", "veth", "peer", "name", "pr", "netns", &b,
            ],
        )?;
        self.root_linked = true;
        run(
            "ip",
            &["-n", &b, "link", "set", "dev", "pr", "master", "br0", "up"],
        )?;
        let addr = format!("{}/{}", self.names.root_addr(), Names::PREFIX_LEN);
        run("ip", &["addr", "add", &addr, "dev", &root])?;
        run("ip", &["link", "set", "dev", &root, "up"])
    }

    /// The target's namespace.
    pub fn target_ns(&self) -> String {
        self.names.target_ns()
    }

    /// The lab's names and addresses.
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// The target's address inside the lab.
    pub fn target_addr(&self) -> std::net::Ipv4Addr {
        self.names.target_addr()
    }

    /// volley's own address on the lab (after [`Lab::link_root`]).
    pub fn root_addr(&self) -> std::net::Ipv4Addr {
        self.names.root_addr()
    }

    /// Injector group `i`'s namespace.
    pub fn injector_ns(&self, i: usize) -> String {
        self.names.injector_ns(i)
    }

    /// Removes every namespace (their veths, bridge and qdiscs go with them).
    pub fn remove(&mut self) {
        if std::mem::take(&mut self.root_linked) {
            let _ = run("ip", &["link", "del", &self.names.root_link()]);
        }
        for ns in self.namespaces.drain(..).rev() {
            let _ = run("ip", &["netns", "del", &ns]);
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.remove();
    }
}

/// tbf on `dev` in `ns`.
fn shape(ns: &str, dev: &str, q: crate::plan::Tbf) -> Result<(), NetlabError> {
    let (rate, burst, limit) = (
        format!("{}bit", q.rate_bit),
        q.burst_bytes.to_string(),
        q.limit_bytes.to_string(),
    );
    run(
        "tc",
        &[
            "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", &rate, "burst",
            &burst, "limit", &limit,
        ],
    )
}

/// The pid in a lab namespace name (`vl<pid>-...`), if it is one.
pub fn owner_of(ns: &str) -> Option<u32> {
    ns.strip_prefix(PREFIX)?.split_once('-')?.0.parse().ok()
}

/// Removes the lab namespaces whose owner is no longer alive; returns their names.
pub fn sweep() -> Result<Vec<String>, NetlabError> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map_err(|source| NetlabError::Spawn {
            program: "ip".into(),
            source,
        })?;
    let mut removed = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let ns = line.split_whitespace().next().unwrap_or("");
        let Some(pid) = owner_of(ns) else { continue };
        if std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        run("ip", &["netns", "del", ns])?;
        removed.push(ns.to_string());
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_read_from_lab_names_only() {
        assert_eq!(owner_of("vl1234-t"), Some(1234));
        assert_eq!(owner_of("vl1234-0t"), Some(1234));
        assert_eq!(owner_of("vl1234-17i10"), Some(1234));
        assert_eq!(owner_of("volley-x"), None);
        assert_eq!(owner_of("vlx-t"), None);
        assert_eq!(owner_of("other"), None);
    }
}
