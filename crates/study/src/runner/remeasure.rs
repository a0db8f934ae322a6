//! The sweep's queue of steps noise spoiled, measured again later (pure: its order is
//! table-tested without a clock).

use std::collections::VecDeque;

use crate::plan::Plan;
use crate::step::StepOutcome;

/// A planned step to measure again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Remeasure {
    pub cell: usize,
    pub repeat: u32,
    /// 1 for the first re-measure.
    pub attempt: u32,
    /// Steps run before it may run.
    due: usize,
}

/// The sweep's queue of steps noise spoiled (docs/methodology.md, "The generator checks
/// itself"). A spoiled step is measured again *later*, not at once: a stall or a
/// neighbour's burst lasts a while, so the next [`Remeasures::gap`] planned steps run
/// first, and a re-measure spoiled again goes to the back of the queue. Each step gets
/// at most `retries` re-measures. Pure (no clock), so its order is tested alone.
#[derive(Debug, Clone)]
pub(super) struct Remeasures {
    queue: VecDeque<Remeasure>,
    retries: u32,
    gap: usize,
}

impl Remeasures {
    pub(super) fn new(plan: &Plan) -> Self {
        Remeasures {
            queue: VecDeque::new(),
            retries: plan.retries,
            gap: Self::gap(plan),
        }
    }

    /// Planned steps between a spoiled step and its re-measure: a round of the
    /// instances (so each target runs between), at least 3.
    fn gap(plan: &Plan) -> usize {
        plan.instances.len().max(3)
    }

    /// Step (`cell`, `repeat`), measured for the `attempt`-th time (0: first), was
    /// spoiled after `run` steps in all: queue its next attempt if it has one left.
    pub(super) fn spoiled(&mut self, cell: usize, repeat: u32, attempt: u32, run: usize) {
        if attempt < self.retries {
            self.queue.push_back(Remeasure {
                cell,
                repeat,
                attempt: attempt + 1,
                due: run + self.gap,
            });
        }
    }

    /// The first queued re-measure that is due after `run` steps.
    pub(super) fn due(&mut self, run: usize) -> Option<Remeasure> {
        let i = self.queue.iter().position(|r| r.due <= run)?;
        self.queue.remove(i)
    }

    /// The next re-measure, due or not (the planned steps are over).
    pub(super) fn next(&mut self) -> Option<Remeasure> {
        self.queue.pop_front()
    }

    pub(super) fn len(&self) -> usize {
        self.queue.len()
    }
}

/// Whether a step run while others took the CPU stays spoiled by that (unjudged, and
/// measured again) once its result is known. A carried office day is carried (a pass is
/// a pass, and a day is long to run again); a step whose target died is the server's
/// failure whatever else ran (a busy machine slows a server, it does not kill it, and
/// `restart = "next-step"` searches must hear the death). Only a failure with neither
/// stays the machine's (docs/methodology.md, "Re-measuring what noise spoiled").
pub(super) fn busy_spoils(machine_busy: bool, office_carried: bool, target_died: bool) -> bool {
    machine_busy && !office_carried && !target_died
}

/// Whether the attempts of one planned step so far (`attempts`, in order, the last
/// just measured) show volley's own limit rather than noise
/// ([`StepOutcome::generator_limit`]) at least twice. A further attempt
/// meets that limit again on the same machine, so it is not queued: the built-in
/// server out-running volley's one client core in `studies/002-h2-vs-h3.toml` was
/// measured three times in 19 of its 48 cells, 86 of 230 steps for no new figure.
/// A rate step is not covered: its pacer's lateness may pass with the noise.
pub(super) fn generator_limit_seen_twice(attempts: &[&StepOutcome]) -> bool {
    attempts.len() >= 2 && attempts.iter().all(|o| o.generator_limit())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sweep of `steps` planned steps, each spoiled when `spoiled(step, attempt)`:
    /// the order the runner measures them in, as (planned step, attempt).
    fn order(
        steps: usize,
        retries: u32,
        gap: usize,
        spoiled: impl Fn(usize, u32) -> bool,
    ) -> Vec<(usize, u32)> {
        let mut q = Remeasures {
            queue: VecDeque::new(),
            retries,
            gap,
        };
        let (mut out, mut planned, mut run) = (Vec::new(), 0..steps, 0);
        loop {
            let (step, attempt) = match q.due(run) {
                Some(r) => (r.cell, r.attempt),
                None => match planned.next() {
                    Some(s) => (s, 0),
                    None => match q.next() {
                        Some(r) => (r.cell, r.attempt),
                        None => break,
                    },
                },
            };
            run += 1;
            out.push((step, attempt));
            if spoiled(step, attempt) {
                q.spoiled(step, 0, attempt, run);
            }
            assert!(run < 1000, "the queue must end");
        }
        out
    }

    #[test]
    fn a_busy_machine_spoils_only_failures_the_server_cannot_be_blamed_for() {
        // (machine busy, office day carried, target died) -> still spoiled
        let table = [
            ((false, false, false), false),
            ((true, false, false), true),
            ((true, true, false), false),
            ((true, false, true), false),
            ((false, false, true), false),
        ];
        for ((busy, carried, died), spoiled) in table {
            assert_eq!(
                busy_spoils(busy, carried, died),
                spoiled,
                "{busy} {carried} {died}"
            );
        }
    }

    #[test]
    fn a_spoiled_step_is_measured_again_later_interleaved_with_the_rest() {
        // Step 1 spoiled once: re-measured after 3 more planned steps, not at once.
        assert_eq!(
            order(6, 2, 3, |s, a| s == 1 && a == 0),
            [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (1, 1), (5, 0)]
        );
        // Spoiled every time: two re-measures, then no more; the last ones run after the
        // plan, the queue in order.
        assert_eq!(
            order(3, 2, 3, |s, _| s == 2),
            [(0, 0), (1, 0), (2, 0), (2, 1), (2, 2)]
        );
        // retries = 0: nothing is measured again.
        assert_eq!(order(3, 0, 3, |_, _| true), [(0, 0), (1, 0), (2, 0)]);
        // Two spoiled steps at the end of the plan take turns.
        assert_eq!(
            order(2, 2, 3, |_, _| true),
            [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
        );
    }

    /// Stops only on a closed loop generator-bound on a quiet machine twice; a busy or
    /// stalled attempt, a rate step, or one attempt alone still gets its re-measure.
    #[test]
    fn a_generator_limit_seen_twice_on_a_quiet_machine_is_not_measured_a_third_time() {
        let at = |rate: Option<f64>, label: &'static str, busy: bool| StepOutcome {
            rate,
            label,
            machine_busy: busy,
            ..crate::step::StepOutcome::blank_for_tests()
        };
        let gen = at(None, "generator-bound", false);
        let busy_gen = at(None, "generator-bound", true);
        let stalled = at(None, "machine-stalled", false);
        let rated = at(Some(100.0), "generator-bound", false);
        let table: [(&[&StepOutcome], bool); 7] = [
            (&[&gen], false),
            (&[&gen, &gen], true),
            (&[&gen, &gen, &gen], true),
            (&[&busy_gen, &gen], false),
            (&[&gen, &busy_gen], false),
            (&[&stalled, &gen], false),
            (&[&rated, &rated], false),
        ];
        for (i, (attempts, stop)) in table.iter().enumerate() {
            assert_eq!(generator_limit_seen_twice(attempts), *stop, "row {i}");
        }
    }
}
