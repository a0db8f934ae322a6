//! The pure plan of a lab: names, addresses and tbf shaping parameters. No I/O, so it is
//! table-tested without root.

use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;

/// Every name the lab gives starts with this, then the owner's pid: a sweep after a
/// SIGKILL can tell a volley namespace from anybody else's by name alone.
pub const PREFIX: &str = "vl";

/// Interface names are at most 15 bytes (IFNAMSIZ - 1); `vl<pid>-<role><n>` fits for
/// pids up to 7 digits and 99 injectors.
pub const IFNAME_MAX: usize = 15;

/// The names of one lab's pieces, unique per volley pid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Names {
    /// Owner pid the names carry.
    pub pid: u32,
}

impl Names {
    /// Names of the lab owned by process `pid`.
    pub fn new(pid: u32) -> Names {
        Names { pid }
    }
    /// The target's namespace.
    pub fn target_ns(&self) -> String {
        format!("{PREFIX}{}-t", self.pid)
    }
    /// Injector group `i`'s namespace.
    pub fn injector_ns(&self, i: usize) -> String {
        format!("{PREFIX}{}-i{i}", self.pid)
    }
    /// The bridge's namespace.
    pub fn bridge_ns(&self) -> String {
        format!("{PREFIX}{}-b", self.pid)
    }
    /// The root namespace's end of the control link (see [`root_addr`]).
    pub fn root_link(&self) -> String {
        format!("{PREFIX}{}-r", self.pid)
    }
}

/// Lab addresses: 10.213.0.0/16, only ever configured inside the lab's namespaces.
/// The target is 10.213.0.1, injector group `i` is 10.213.(1 + i / 250).(2 + i % 250).
pub fn target_addr() -> Ipv4Addr {
    Ipv4Addr::new(10, 213, 0, 1)
}

/// volley's own address on the lab, when the lab is linked to its namespace: the
/// coordinator's bus listens here, and the target is reached from here.
pub fn root_addr() -> Ipv4Addr {
    Ipv4Addr::new(10, 213, 0, 254)
}

/// Address of injector group `i` (see [`target_addr`]).
pub fn injector_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 213, 1 + (i / 250) as u8, 2 + (i % 250) as u8)
}

/// tbf parameters for one direction of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tbf {
    /// Rate in bits per second.
    pub rate_bit: u64,
    /// Bucket size in bytes: at least rate / HZ (250 assumed) and one 64 KiB segment.
    pub burst_bytes: u64,
    /// Queue limit in bytes: at least the bandwidth-delay product, so the link can be
    /// kept full at its RTT, and at least two bursts.
    pub limit_bytes: u64,
}

/// tbf parameters for `rate_bit` with a round trip of `rtt_ms` (0 when unshaped).
pub fn tbf(rate_bit: u64, rtt_ms: u64) -> Tbf {
    let burst_bytes = (rate_bit / 8 / 250).max(65_536);
    let bdp = rate_bit / 8 * rtt_ms.max(1) / 1000;
    Tbf {
        rate_bit,
        burst_bytes,
        limit_bytes: bdp.max(2 * burst_bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_and_carry_the_pid() {
        let n = Names::new(4_194_304);
        for s in [n.target_ns(), n.injector_ns(99), n.bridge_ns()] {
            assert!(s.len() <= IFNAME_MAX, "{s}");
            assert!(s.starts_with("vl4194304-"));
        }
    }

    #[test]
    fn addresses_stay_in_the_lab_range() {
        assert_eq!(injector_addr(0), Ipv4Addr::new(10, 213, 1, 2));
        assert_eq!(injector_addr(251), Ipv4Addr::new(10, 213, 2, 3));
        assert_ne!(injector_addr(0), target_addr());
    }

    #[test]
    fn tbf_limit_covers_the_bandwidth_delay_product() {
        // 10 Mbit, 68 ms: BDP 85 000 B < 2 bursts of 64 KiB.
        assert_eq!(tbf(10_000_000, 68).limit_bytes, 131_072);
        // 1 Gbit, 100 ms: BDP 12.5 MB.
        let t = tbf(1_000_000_000, 100);
        assert_eq!(t.burst_bytes, 500_000);
        assert_eq!(t.limit_bytes, 12_500_000);
    }
}
