//! A study's network lab (`[injectors] placement = "netns"`): built before the targets
//! start, each injector link measured and kept, removed when the study ends.
//!
//! Place in the flow: `runner::run` opens it first; the targets start in its target
//! namespace (`volley_targets::NetnsPlace`), each injected step starts its agents in the
//! injector namespaces and its bus on volley's own lab address, and every such step's
//! stored summary carries the links as set and as measured (`links[]`).

use serde_json::{json, Value};
use volley_netlab::lab::{self, Lab};
use volley_netlab::plan::{root_addr, target_addr};
use volley_targets::NetnsPlace;

use crate::plan::Plan;
use crate::StudyError;

/// The lab of one study run.
pub(crate) struct StudyLab {
    lab: Lab,
    /// Where the targets run.
    pub place: NetnsPlace,
    /// Per injector: its link as set and as measured.
    pub links: Vec<Value>,
}

/// Bytes to move when measuring a link: two seconds at its rate (at least 1 MB), or
/// 20 MB unshaped.
fn probe_bytes(rate_bit: Option<u64>) -> u64 {
    rate_bit.map_or(20_000_000, |r| (r / 8 * 2).max(1_000_000))
}

impl StudyLab {
    /// Sweeps what a killed volley left, builds the plan's lab and measures each link;
    /// `None` when the study has no netns injectors.
    pub fn open(plan: &Plan, note: &mut dyn FnMut(&str)) -> Result<Option<StudyLab>, StudyError> {
        let Some(links) = plan.injectors.as_ref().and_then(|i| i.netns_links.as_ref()) else {
            return Ok(None);
        };
        let err = |e: volley_netlab::NetlabError| StudyError::Invalid(format!("network lab: {e}"));
        for ns in lab::sweep().map_err(err)? {
            note(&format!(
                "removed network namespace {ns} left by a volley that was killed"
            ));
        }
        let mut lab = Lab::create(links).map_err(err)?;
        lab.link_root().map_err(err)?;
        let mut measured = Vec::new();
        for (i, l) in links.iter().enumerate() {
            let m =
                volley_netlab::measure::measure(&lab, i, probe_bytes(l.rate_bit)).map_err(err)?;
            note(&format!(
                "link of inj{}: {} set, measured {:.2} Mbit/s, RTT {:.3} ms",
                i + 1,
                l.rate_bit.map_or("unshaped".to_string(), |r| format!(
                    "{:.1} Mbit/s",
                    r as f64 / 1e6
                )),
                m.throughput_bit / 1e6,
                m.rtt_ms
            ));
            measured.push(json!({
                "injector": format!("inj{}", i + 1),
                "namespace": lab.injector_ns(i),
                "rate_bit": l.rate_bit,
                "measured": m,
            }));
        }
        Ok(Some(StudyLab {
            place: NetnsPlace {
                ns: lab.target_ns(),
                ip: target_addr().into(),
            },
            links: measured,
            lab,
        }))
    }

    /// Injector `i`'s namespace.
    pub fn injector_ns(&self, i: usize) -> String {
        self.lab.injector_ns(i)
    }

    /// Where the bus listens for agents in the lab.
    pub fn bus_ip(&self) -> std::net::IpAddr {
        root_addr().into()
    }
}
