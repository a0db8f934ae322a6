//! A step's target: the one that died brought back (`restart = "next-step"`), and the
//! fresh one a cold-start step times its first request against.

use volley_targets::RunningTarget;

use super::target_spec::{cold_spec, spec_for};
use super::StudyRun;
use crate::plan::Workload;
use crate::spec::Restart;

impl StudyRun<'_> {
    /// Whether instance `inst`'s target can take the next step: it is alive, or it died
    /// (noted) and its `restart = "next-step"` started it again (noted). The death
    /// itself is stored with the step during which the death watch saw it.
    pub(super) fn alive(&mut self, inst: usize) -> bool {
        let plan = self.plan;
        let current = self.restarted[inst]
            .as_ref()
            .or(self.running[inst].as_ref());
        let Some(target) = current else {
            return false;
        };
        let Err(died) = target.check() else {
            return true;
        };
        let label = plan.instance_label(inst);
        (self.note)(&format!("{label}: {died}"));
        if plan.targets[plan.instances[inst].target].restart != Restart::NextStep {
            return false;
        }
        // The dead one's cgroup and files go first; then it starts as at the study's
        // start (from the variant's namespace, which `step` has entered).
        self.restarted[inst] = None;
        let own = self.vlabs.place(inst);
        let netns = own.as_ref().or(self.lab.map(|l| &l.place));
        let spec = spec_for(plan, inst, self.docroot, self.exe, netns);
        match volley_targets::start(&spec) {
            Ok(t) => {
                (self.note)(&format!(
                    "{label}: restarted for the next step (restart = \"next-step\")"
                ));
                self.restarted[inst] = Some(t);
                true
            }
            Err(e) => {
                (self.note)(&format!("{label}: cannot restart: {e}"));
                false
            }
        }
    }

    /// Cold start: a target of its own, started now, so the step's first request is the
    /// first after start (the up-front instance keeps serving other workloads). `Err`:
    /// it could not start (noted).
    pub(super) fn fresh_target(
        &mut self,
        inst: usize,
        w: &Workload,
    ) -> Result<Option<RunningTarget>, ()> {
        if !w.cold_start {
            return Ok(None);
        }
        let own = self.vlabs.place(inst);
        let netns = own.as_ref().or(self.lab.map(|l| &l.place));
        let spec = cold_spec(self.plan, inst, w, self.docroot, self.exe, netns);
        match volley_targets::start(&spec) {
            Ok(t) => Ok(Some(t)),
            Err(e) => {
                (self.note)(&format!(
                    "{}: cannot start a fresh target for the cold request: {e}",
                    self.plan.instance_label(inst)
                ));
                Err(())
            }
        }
    }
}
