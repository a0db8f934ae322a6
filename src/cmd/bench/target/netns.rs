//! `--sysctl` and `--route`: the target in a network namespace volley makes, with kernel
//! settings written there and read back, and the load in a namespace of its own, so no
//! setting touches the host and the traffic never crosses the host's loopback.
//!
//! Design: a tuning lab of `volley_netlab` (`Lab::create_tuning`): one namespace with the
//! target's lab address on its own `lo` and the settings, entered by volley's main
//! thread before any target starts (`volley_netlab::enter`), so the probe, the cold
//! request and every engine worker it starts connect from inside it over its loopback,
//! as they would on the host's (a veth and bridge between load and target cost a fifth
//! of the throughput: bench/netns.py). Everything is checked before any target starts; a
//! refused key is a usage error (exit 2) naming it.

use volley_netlab::enter::Entered;
use volley_netlab::lab::Lab;
pub(super) use volley_netlab::tune::NsRecord;
use volley_netlab::tune::{self, RouteSettings, Sysctl};
use volley_targets::{LabSlot, NetnsPlace};

use crate::exit::usage;

/// `--sysctl`'s value parser.
pub(crate) fn parse_sysctl(s: &str) -> Result<Sysctl, String> {
    s.parse().map_err(|e: tune::TuneError| e.to_string())
}

/// `--route`'s value parser: `quickack=true|false`.
pub(crate) fn parse_route(s: &str) -> Result<RouteSettings, String> {
    let (k, v) = s.split_once('=').unwrap_or((s, ""));
    let on = match v.trim() {
        "true" | "on" | "1" => true,
        "false" | "off" | "0" => false,
        _ => return Err(format!("--route quickack takes true or false, got '{s}'")),
    };
    match k.trim() {
        "quickack" => Ok(RouteSettings { quickack: Some(on) }),
        other => Err(format!("unknown route setting '{other}' (known: quickack)")),
    }
}

/// The lab of one `bench --target` run; the main thread is inside its load namespace
/// until this drops (then the lab is removed).
pub(super) struct TunedLab {
    // Field order is drop order: leave the namespace, then remove the lab.
    _entered: Entered,
    lab: Lab,
    _slot: LabSlot,
    pub record: NsRecord,
}

impl TunedLab {
    /// Where targets start.
    pub fn place(&self) -> NetnsPlace {
        NetnsPlace {
            ns: self.lab.target_ns(),
            ip: self.lab.target_addr().into(),
        }
    }
}

/// Builds the lab and applies the settings, or says (exit 2) which key was refused.
pub(super) fn build(sysctls: &[Sysctl], route: RouteSettings) -> anyhow::Result<TunedLab> {
    if !volley_targets::config::running_as_root() {
        let key = sysctls.first().map_or_else(
            || "--route quickack".to_string(),
            |s| format!("--sysctl {}", s.key),
        );
        usage!("{key} needs root: volley sets it inside a network namespace it makes");
    }
    let slot = LabSlot::take()?;
    let lab = Lab::create_tuning(slot.slot())
        .map_err(|e| anyhow::anyhow!("cannot build the target's namespace: {e}"))?;
    let ns = lab.target_ns();
    let applied = match tune::apply_sysctls(&ns, sysctls) {
        Ok(a) => a,
        Err(e) => usage!("{e}"),
    };
    let routes = match tune::apply_routes(&ns, "lo", route) {
        Ok(r) => r,
        Err(e) => usage!("{e}"),
    };
    let entered = Entered::enter(&ns)
        .map_err(|e| anyhow::anyhow!("cannot enter the load's namespace: {e}"))?;
    Ok(TunedLab {
        _entered: entered,
        record: lab.record(applied, routes),
        lab,
        _slot: slot,
    })
}
