//! What an agent may load: `volley agent --allow-target CIDR|HOST[:PORT]`.
//!
//! Place in the flow: the agent checks each assignment's target against its
//! [`AllowList`] before it arms anything; an assignment outside it is refused with one
//! line on both sides (docs/methodology.md, "Trust on the bus"). Without any
//! `--allow-target` an agent may load loopback and the network it reaches its bus on
//! (the subnet of the interface that carries the bus), which is where a lab's targets
//! live; anything wider is the user's explicit choice. A host name is resolved when the
//! list is made, so an entry means the addresses it had then.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use ipnet::IpNet;

/// An `--allow-target` value that names no destination, or a target outside the list.
#[derive(Debug, thiserror::Error)]
pub enum AllowError {
    /// `HOST:PORT` whose port is not a number.
    #[error("'{0}': the port must be a number 0-65535")]
    Port(String),
    /// Neither a CIDR, an address nor a host name.
    #[error(
        "'{0}' is not a CIDR, an address or HOST[:PORT] (e.g. 10.0.0.0/24, 10.0.0.5:8080, web1)"
    )]
    NotATarget(String),
    /// A host name that did not resolve.
    #[error("'{value}': {host} does not resolve: {source}")]
    Resolve {
        /// The value as given.
        value: String,
        /// The host part.
        host: String,
        /// The resolver's error.
        source: std::io::Error,
    },
    /// An assignment's target outside the list: the refusal's wording.
    #[error("target {target} outside its allow-list ({allowed})")]
    Outside {
        /// The target as assigned.
        target: String,
        /// The list's entries as shown.
        allowed: String,
    },
    /// A host name that resolved to nothing.
    #[error("'{value}': {host} has no address")]
    NoAddress {
        /// The value as given.
        value: String,
        /// The host part.
        host: String,
    },
}

/// One allowed destination: a network, and a port when the entry named one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    net: IpNet,
    port: Option<u16>,
}

/// The destinations an agent may load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowList {
    entries: Vec<Entry>,
    /// As the user wrote them (or as the default was derived), for messages.
    shown: Vec<String>,
}

impl AllowList {
    /// Loopback (127.0.0.0/8, ::1) only.
    pub fn loopback() -> Self {
        let mut me = AllowList {
            entries: Vec::new(),
            shown: Vec::new(),
        };
        for net in ["127.0.0.0/8", "::1/128"] {
            let net: IpNet = net.parse().expect("a literal network");
            me.push_net(net, None);
        }
        me
    }

    /// The default: loopback and the subnet of each interface that reaches the bus
    /// at `bus_url` (`nats://HOST:PORT`): the one whose subnet holds the bus's address,
    /// else the one the route to it leaves by.
    pub fn default_for(bus_url: &str) -> Self {
        let mut me = Self::loopback();
        let hostport = bus_url.strip_prefix("nats://").unwrap_or(bus_url);
        let bus: Vec<SocketAddr> = hostport
            .to_socket_addrs()
            .or_else(|_| format!("{hostport}:4222").to_socket_addrs())
            .map(|a| a.collect())
            .unwrap_or_default();
        let Ok(ifaces) = if_addrs::get_if_addrs() else {
            return me;
        };
        for b in &bus {
            if b.ip().is_loopback() {
                continue;
            }
            let via = route_source(*b);
            for i in &ifaces {
                let Some(net) = iface_net(i) else { continue };
                if net.contains(&b.ip()) || Some(i.ip()) == via {
                    me.push_net(net.trunc(), None);
                }
            }
        }
        me
    }

    /// Parses the `--allow-target` values: `CIDR`, `IP`, `IP:PORT`, `[IPv6]:PORT`,
    /// `HOST` or `HOST:PORT` (resolved now).
    pub fn parse(values: &[String]) -> Result<Self, AllowError> {
        let mut me = AllowList {
            entries: Vec::new(),
            shown: Vec::new(),
        };
        for v in values {
            me.add(v)?;
        }
        Ok(me)
    }

    fn add(&mut self, v: &str) -> Result<(), AllowError> {
        let v = v.trim();
        if let Ok(net) = v.parse::<IpNet>() {
            self.push_net(net.trunc(), None);
            return Ok(());
        }
        if let Ok(ip) = v.parse::<IpAddr>() {
            self.push_net(IpNet::from(ip), None);
            return Ok(());
        }
        if let Ok(sa) = v.parse::<SocketAddr>() {
            self.entries.push(Entry {
                net: IpNet::from(sa.ip()),
                port: Some(sa.port()),
            });
            self.shown.push(v.to_string());
            return Ok(());
        }
        let (host, port) = match v.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => {
                let port = p
                    .parse::<u16>()
                    .map_err(|_| AllowError::Port(v.to_string()))?;
                (h, Some(port))
            }
            _ => (v, None),
        };
        if host.is_empty() || host.contains(['/', ' ', '[', ']']) {
            return Err(AllowError::NotATarget(v.to_string()));
        }
        let addrs: Vec<SocketAddr> = (host, port.unwrap_or(0))
            .to_socket_addrs()
            .map_err(|source| AllowError::Resolve {
                value: v.to_string(),
                host: host.to_string(),
                source,
            })?
            .collect();
        if addrs.is_empty() {
            return Err(AllowError::NoAddress {
                value: v.to_string(),
                host: host.to_string(),
            });
        }
        for a in addrs {
            self.entries.push(Entry {
                net: IpNet::from(a.ip()),
                port,
            });
        }
        self.shown.push(v.to_string());
        Ok(())
    }

    fn push_net(&mut self, net: IpNet, port: Option<u16>) {
        let e = Entry { net, port };
        if !self.entries.contains(&e) {
            self.entries.push(e);
            self.shown.push(net.to_string());
        }
    }

    /// Whether `addr` may be loaded.
    pub fn allows(&self, addr: SocketAddr) -> bool {
        self.entries
            .iter()
            .any(|e| e.net.contains(&addr.ip()) && e.port.is_none_or(|p| p == addr.port()))
    }

    /// Checks an assignment's target (`IP:PORT`, or `HOST:PORT` resolved now): every
    /// address it resolves to must be allowed. The error is the refusal's wording.
    pub fn check(&self, target: &str) -> Result<(), AllowError> {
        let addrs: Vec<SocketAddr> = match target.parse::<SocketAddr>() {
            Ok(a) => vec![a],
            Err(_) => target
                .to_socket_addrs()
                .map(|a| a.collect())
                .unwrap_or_default(),
        };
        if !addrs.is_empty() && addrs.iter().all(|a| self.allows(*a)) {
            return Ok(());
        }
        Err(AllowError::Outside {
            target: target.to_string(),
            allowed: self.shown.join(", "),
        })
    }

    /// The entries as shown in messages.
    pub fn shown(&self) -> &[String] {
        &self.shown
    }
}

/// The local address the route to `to` leaves from (a UDP "connect" sends nothing).
fn route_source(to: SocketAddr) -> Option<IpAddr> {
    let any: SocketAddr = if to.is_ipv4() {
        "0.0.0.0:0".parse().ok()?
    } else {
        "[::]:0".parse().ok()?
    };
    let s = std::net::UdpSocket::bind(any).ok()?;
    s.connect(to).ok()?;
    Some(s.local_addr().ok()?.ip())
}

/// An interface's subnet.
fn iface_net(i: &if_addrs::Interface) -> Option<IpNet> {
    match &i.addr {
        if_addrs::IfAddr::V4(a) => ipnet::Ipv4Net::with_netmask(a.ip, a.netmask)
            .ok()
            .map(IpNet::V4),
        if_addrs::IfAddr::V6(a) => ipnet::Ipv6Net::with_netmask(a.ip, a.netmask)
            .ok()
            .map(IpNet::V6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(v: &[&str]) -> AllowList {
        AllowList::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn networks_addresses_and_ports() {
        let l = list(&["10.0.0.0/24", "192.0.2.7:8080", "[::1]:443", "198.51.100.9"]);
        assert!(l.check("10.0.0.200:80").is_ok());
        assert!(l.check("10.0.1.1:80").is_err());
        assert!(l.check("192.0.2.7:8080").is_ok());
        assert!(l.check("192.0.2.7:8081").is_err());
        assert!(l.check("[::1]:443").is_ok());
        assert!(l.check("[::1]:80").is_err());
        assert!(l.check("198.51.100.9:1").is_ok());
        let e = l.check("203.0.113.1:80").unwrap_err().to_string();
        assert_eq!(
            e,
            "target 203.0.113.1:80 outside its allow-list (10.0.0.0/24, 192.0.2.7:8080, [::1]:443, 198.51.100.9/32)"
        );
    }

    #[test]
    fn host_names_resolve_and_nonsense_is_refused() {
        let l = list(&["localhost:9000"]);
        assert!(l.check("127.0.0.1:9000").is_ok());
        assert!(l.check("127.0.0.1:9001").is_err());
        for bad in ["10.0.0.0/33", "web:port", "a b", "[::1]"] {
            assert!(
                AllowList::parse(&[bad.to_string()]).is_err(),
                "{bad} parsed"
            );
        }
        assert!(list(&[]).check("127.0.0.1:1").is_err(), "empty allows none");
        assert!(list(&[]).check("not an address").is_err());
    }

    #[test]
    fn the_default_is_loopback_and_the_bus_network() {
        let l = AllowList::default_for("nats://127.0.0.1:4222");
        assert!(l.check("127.0.0.5:80").is_ok());
        assert!(l.check("[::1]:80").is_ok());
        assert!(l.check("192.0.2.1:80").is_err());
        assert_eq!(l.shown(), ["127.0.0.0/8", "::1/128"]);
    }
}
