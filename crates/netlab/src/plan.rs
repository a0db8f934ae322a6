//! The pure plan of a lab: names, addresses and tbf shaping parameters. No I/O, so it is
//! table-tested without root.

use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;

/// Every name the lab gives starts with this, then the owner's pid: a sweep after a
/// SIGKILL can tell a volley namespace from anybody else's by name alone.
pub const PREFIX: &str = "vl";

/// Interface names are at most 15 bytes (IFNAMSIZ - 1); the one lab name that is an
/// interface, `vl<pid>-<slot>r` in volley's own namespace, fits for pids up to 7 digits.
pub const IFNAME_MAX: usize = 15;

/// Injector groups a lab can address: .2 ..= .251 of its /24.
pub const MAX_INJECTORS: usize = 250;

/// The names and addresses of one lab, unique per (volley pid, lab slot). The slot is
/// taken from the ledger every volley on the machine shares (`volley_targets::LabSlot`),
/// so no two live labs hold the same addresses: two studies with namespaces at once
/// would otherwise both route 10.213.0.0/16 from the host, and one would load the
/// other's target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Names {
    /// Owner pid the names carry.
    pub pid: u32,
    /// The lab's slot: its addresses are 10.213.SLOT.0/24.
    pub slot: u8,
}

impl Names {
    /// Names of lab `slot` owned by process `pid`.
    pub fn new(pid: u32, slot: u8) -> Names {
        Names { pid, slot }
    }
    fn base(&self) -> String {
        format!("{PREFIX}{}-{}", self.pid, self.slot)
    }
    /// The target's namespace.
    pub fn target_ns(&self) -> String {
        format!("{}t", self.base())
    }
    /// Injector group `i`'s namespace.
    pub fn injector_ns(&self, i: usize) -> String {
        format!("{}i{i}", self.base())
    }
    /// The bridge's namespace.
    pub fn bridge_ns(&self) -> String {
        format!("{}b", self.base())
    }
    /// The root namespace's end of the control link (see [`Names::root_addr`]).
    pub fn root_link(&self) -> String {
        format!("{}r", self.base())
    }
    /// The target's address: 10.213.SLOT.1, only ever configured inside the lab.
    pub fn target_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 213, self.slot, 1)
    }
    /// volley's own address on the lab, when the lab is linked to its namespace: the
    /// coordinator's bus listens here, and the target is reached from here.
    pub fn root_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 213, self.slot, 254)
    }
    /// Address of injector group `i` (below [`MAX_INJECTORS`]): 10.213.SLOT.(2 + i).
    pub fn injector_addr(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 213, self.slot, 2 + i.min(MAX_INJECTORS - 1) as u8)
    }
    /// The lab's prefix length (one /24 per slot).
    pub const PREFIX_LEN: u8 = 24;
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
        let n = Names::new(4_194_304, 255);
        for s in [n.target_ns(), n.injector_ns(99), n.bridge_ns()] {
            assert!(s.starts_with("vl4194304-255"), "{s}");
        }
        assert!(n.root_link().len() <= IFNAME_MAX, "{}", n.root_link());
    }

    #[test]
    fn each_slot_has_its_own_addresses() {
        let (a, b) = (Names::new(7, 0), Names::new(7, 1));
        assert_eq!(a.target_addr(), Ipv4Addr::new(10, 213, 0, 1));
        assert_eq!(b.target_addr(), Ipv4Addr::new(10, 213, 1, 1));
        assert_eq!(b.root_addr(), Ipv4Addr::new(10, 213, 1, 254));
        assert_eq!(a.injector_addr(0), Ipv4Addr::new(10, 213, 0, 2));
        assert_eq!(a.injector_addr(249), Ipv4Addr::new(10, 213, 0, 251));
        assert_ne!(a.target_ns(), b.target_ns());
        assert_ne!(a.root_link(), b.root_link());
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
