//! Kernel settings of study variants (`[[variant]] sysctl = {...}`, `route = {...}`):
//! each instance whose variant has them gets a lab of its own (its slot's addresses),
//! the settings written and read back in its target namespace before any target
//! starts, and its steps run from a thread entered into that same namespace (the load
//! and the target meet on its loopback), as `volley bench --target --sysctl` does
//! (docs/methodology.md, "Server knobs").
//!
//! When any variant has kernel settings, every variant's instances get a lab, the
//! default's with nothing set, so "tuned vs default" compares the tuning, not the place
//! (bench/netns.py measures a lab against the host's loopback).

use volley_netlab::enter::Entered;
use volley_netlab::lab::Lab;
use volley_netlab::tune::{self, NsRecord};
use volley_targets::{LabSlot, NetnsPlace};

use crate::plan::Plan;
use crate::StudyError;

/// One instance's lab.
struct InstanceLab {
    lab: Lab,
    _slot: LabSlot,
    record: NsRecord,
}

/// The labs of the study's instances, by instance (`None`: no kernel settings).
pub(super) struct VariantLabs {
    labs: Vec<Option<InstanceLab>>,
}

impl VariantLabs {
    /// Builds a lab per instance whose variant sets sysctls or routes and applies them;
    /// a refused key (global, not taken, a value the kernel refuses) or no root is
    /// [`StudyError::Refused`], before any target starts.
    pub fn open(plan: &Plan) -> Result<VariantLabs, StudyError> {
        let kernel = |v: &crate::plan::Variant| !v.sysctls.is_empty() || v.route.quickack.is_some();
        let Some(tuned) = plan.variants.iter().find(|v| kernel(v)) else {
            return Ok(VariantLabs {
                labs: plan.instances.iter().map(|_| None).collect(),
            });
        };
        if !volley_targets::config::running_as_root() {
            // Name the key, as every other refusal of a kernel value does: the reader
            // looks for it in the study file.
            let key = tuned.sysctls.first().map_or_else(
                || "route quickack".to_string(),
                |s| format!("sysctl {}", s.key),
            );
            return Err(StudyError::Refused(format!(
                "variant '{}' sets {key}: that needs root (volley sets it inside a network namespace it makes)",
                tuned.name
            )));
        }
        let mut labs = Vec::new();
        for inst in &plan.instances {
            let Some(v) = inst.variant.map(|v| &plan.variants[v]) else {
                labs.push(None);
                continue;
            };
            let lab_err = |e: volley_netlab::NetlabError| {
                StudyError::Invalid(format!("variant '{}': network lab: {e}", v.name))
            };
            let slot = LabSlot::take()
                .map_err(|e| StudyError::Invalid(format!("variant '{}': {e}", v.name)))?;
            let lab = Lab::create_tuning(slot.slot()).map_err(lab_err)?;
            let ns = lab.target_ns();
            let refused =
                |e: tune::TuneError| StudyError::Refused(format!("variant '{}': {e}", v.name));
            let sysctls = tune::apply_sysctls(&ns, &v.sysctls).map_err(refused)?;
            let routes = tune::apply_routes(&ns, "lo", v.route).map_err(refused)?;
            labs.push(Some(InstanceLab {
                record: lab.record(sysctls, routes),
                lab,
                _slot: slot,
            }));
        }
        Ok(VariantLabs { labs })
    }

    /// Where instance `i` starts, when its variant has a lab.
    pub fn place(&self, i: usize) -> Option<NetnsPlace> {
        self.labs.get(i)?.as_ref().map(|l| NetnsPlace {
            ns: l.lab.target_ns(),
            ip: l.lab.target_addr().into(),
        })
    }

    /// What instance `i`'s namespace holds, as read back.
    pub fn record(&self, i: usize) -> Option<&NsRecord> {
        self.labs.get(i)?.as_ref().map(|l| &l.record)
    }

    /// Moves the calling thread into instance `i`'s namespace until the guard
    /// drops (`None` when the instance has no lab).
    pub fn enter(&self, i: usize) -> Result<Option<Entered>, StudyError> {
        let Some(l) = self.labs.get(i).and_then(Option::as_ref) else {
            return Ok(None);
        };
        Entered::enter(&l.lab.target_ns())
            .map(Some)
            .map_err(|e| StudyError::Invalid(format!("entering the load namespace: {e}")))
    }
}
