//! A study's network lab (`[injectors] placement = "netns"`): built before the targets
//! start, each injector link measured and kept, removed when the study ends.
//!
//! Place in the flow: `runner::run` opens it first; the targets start in its target
//! namespace (`volley_targets::NetnsPlace`), each injected step starts its agents in the
//! injector namespaces and its bus on volley's own lab address, and every such step's
//! stored summary carries the links as set and as measured (`links[]`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;

use volley_netlab::lab::{Lab, LinkSpec};
use volley_netlab::proxy::DelayProxies;
use volley_targets::{LabSlot, NetnsPlace};

use crate::plan::Plan;
use crate::StudyError;

/// Why injector `i` has no address to load through.
#[derive(Debug, thiserror::Error)]
pub enum LabAddrError {
    /// Its link has a delay but the lab started no delaying proxy.
    #[error("no delaying proxy was started")]
    NoProxy,
    /// The delaying proxy refused the new route.
    #[error(transparent)]
    Proxy(#[from] volley_netlab::NetlabError),
}

/// The lab of one study run.
pub(crate) struct StudyLab {
    /// Delaying proxies, when some link has a delay; dropped before the lab.
    proxies: RefCell<Option<DelayProxies>>,
    /// Proxy address by (target, delay): made once, used by every step.
    proxied: RefCell<HashMap<(SocketAddr, u64), SocketAddr>>,
    /// The link of each injector.
    specs: Vec<LinkSpec>,
    lab: Lab,
    /// The lab's addresses, held in the ledger while the lab lives (dropped after it).
    _slot: LabSlot,
    /// Where the targets run.
    pub place: NetnsPlace,
    /// Per injector: its link as set and as measured.
    pub links: Vec<crate::step::extra::LinkRecord>,
}

/// Bytes to move when measuring a link: two seconds at its rate (at least 1 MB), or
/// 20 MB unshaped.
fn probe_bytes(rate_bit: Option<u64>) -> u64 {
    rate_bit.map_or(20_000_000, |r| (r / 8 * 2).max(1_000_000))
}

impl StudyLab {
    /// Builds the plan's lab and measures each link; `None` when the study has no netns
    /// injectors. (What a killed volley left is swept once, at `volley study run`'s
    /// start, before anything else.)
    pub fn open(plan: &Plan, note: &mut dyn FnMut(&str)) -> Result<Option<StudyLab>, StudyError> {
        let Some(links) = plan.injectors.as_ref().and_then(|i| i.netns_links.as_ref()) else {
            return Ok(None);
        };
        let err = |e: volley_netlab::NetlabError| StudyError::Invalid(format!("network lab: {e}"));
        let slot = LabSlot::take().map_err(|e| StudyError::Invalid(format!("network lab: {e}")))?;
        let mut lab = Lab::create(slot.slot(), links).map_err(err)?;
        lab.link_root().map_err(err)?;
        let mut measured = Vec::new();
        for (i, l) in links.iter().enumerate() {
            let m =
                volley_netlab::measure::measure(&lab, i, probe_bytes(l.rate_bit)).map_err(err)?;
            let rate = l.rate_bit.map_or("unshaped".to_string(), |r| {
                format!("{:.1} Mbit/s", r as f64 / 1e6)
            });
            let delay = l
                .delay_ms
                .map(|d| format!(" with {d} ms added (the RTT below is the bridge's)"))
                .unwrap_or_default();
            note(&format!(
                "link of inj{}: {rate} set{delay}, measured {:.2} Mbit/s, RTT {:.3} ms",
                i + 1,
                m.throughput_bit / 1e6,
                m.rtt_ms
            ));
            measured.push(crate::step::extra::LinkRecord {
                injector: format!("inj{}", i + 1),
                namespace: lab.injector_ns(i),
                rate_bit: l.rate_bit,
                delay_ms: l.delay_ms,
                measured: m,
            });
        }
        // The bridge's round trip is measured above; a delay is added on top of it by a
        // proxy per (target, delay), made when a step first needs it.
        let proxies = if links.iter().any(|l| l.delay_ms.is_some()) {
            Some(DelayProxies::start(&lab).map_err(err)?)
        } else {
            None
        };
        Ok(Some(StudyLab {
            proxies: RefCell::new(proxies),
            proxied: RefCell::new(HashMap::new()),
            specs: links.clone(),
            place: NetnsPlace {
                ns: lab.target_ns(),
                ip: lab.target_addr().into(),
            },
            links: measured,
            lab,
            _slot: slot,
        }))
    }

    /// The address injector `i` loads for `target`: the target itself, or a proxy
    /// that delays its responses when the injector's link has a delay.
    pub fn addr_for(
        &self,
        i: usize,
        target: SocketAddr,
    ) -> Result<Option<SocketAddr>, LabAddrError> {
        let Some(delay) = self.specs.get(i).and_then(|l| l.delay_ms) else {
            return Ok(None);
        };
        if let Some(a) = self.proxied.borrow().get(&(target, delay)) {
            return Ok(Some(*a));
        }
        let mut proxies = self.proxies.borrow_mut();
        let p = proxies.as_mut().ok_or(LabAddrError::NoProxy)?;
        let a = p.add(target, delay)?;
        self.proxied.borrow_mut().insert((target, delay), a);
        Ok(Some(a))
    }

    /// Injector `i`'s namespace.
    pub fn injector_ns(&self, i: usize) -> String {
        self.lab.injector_ns(i)
    }

    /// Where the bus listens for agents in the lab.
    pub fn bus_ip(&self) -> std::net::IpAddr {
        self.lab.root_addr().into()
    }
}
