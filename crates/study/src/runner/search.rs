//! The capacity searches of a study in search mode: one `knee::Search` per cell,
//! run round-robin by the runner so they interleave; how a finished step feeds its
//! search (steps noise spoiled are rerun, then heard by their best evidence, or as
//! neither pass nor fail), and the row each search leaves in the store, finished or cut
//! short.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{json, Value};
use volley_analysis::knee::{Capacity, Evidence, Search, SearchEnd};
use volley_analysis::sustain;
use volley_store::{CapacityRecord, SearchEnd as StoredEnd};

use super::{cores_text, now_ms, rest, Progress, StudyRun};
use crate::plan::Plan;
use crate::StudyError;

/// Rest before a rerun of a spoiled step (on top of the cool-down): a machine busy with someone
/// else's work for a moment gets that moment to pass.
const GENERATOR_RERUN_REST: Duration = Duration::from_secs(1);

/// What a finished rate step tells the capacity search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StepSignal {
    /// The sustainability verdict (rate steps only).
    pub sustainable: Option<bool>,
    /// The step's bound label (`server-bound`, `generator-bound`, `inconclusive`).
    pub label: &'static str,
    /// Someone else took the CPU while it ran.
    pub machine_busy: bool,
}

/// What the search loop does with a finished step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SearchInput {
    /// Run the same rate again.
    Rerun,
    /// Tell the search whether the rate was sustainable.
    Observe(bool),
    /// No attempt could be judged for the server: neither pass nor fail.
    Unjudged,
}

/// The search's use of the attempts at one rate so far (`attempts`, oldest first), by
/// the rule the reports apply (`volley_analysis::knee::Evidence`): a pass is heard at
/// once whatever its label (latency counts from the intended send time and a pass sent
/// at least 99% of the rate, so a late generator, a stalled or busy machine only made it
/// harder: a rerun costs a step and cannot make it more of a pass; a sweep still
/// re-measures a late pass, for figures that describe the server alone); an attempt
/// noise did not spoil is observed as its verdict says (inconclusive ones included, as
/// the reports keep them); a spoiled failure (generator-bound, machine-stalled, or
/// failed while the machine was busy) is rerun until `retries` reruns were made (none
/// when the study is stopping), then the rate could not be judged.
pub(crate) fn search_input(attempts: &[StepSignal], retries: u32, stopping: bool) -> SearchInput {
    let Some(last) = attempts.last() else {
        return SearchInput::Unjudged;
    };
    let label = Some(last.label);
    if last.sustainable != Some(true) && sustain::bound_again(label) {
        // Link-bound or too-short: not the server's, and another attempt would meet
        // the same link, the same short plan.
        return SearchInput::Unjudged;
    }
    if last.sustainable == Some(true)
        || !Evidence::needs_remeasure(last.sustainable, label, last.machine_busy)
    {
        return SearchInput::Observe(last.sustainable == Some(true));
    }
    if (attempts.len() as u32) <= retries && !stopping {
        SearchInput::Rerun
    } else {
        SearchInput::Unjudged
    }
}

/// One cell's capacity search (one pass of it) while the study runs.
pub(super) struct ActiveSearch {
    cell: usize,
    /// Which of the cell's whole searches this is (0-based; `[search] passes`).
    pass: u32,
    /// The cell's searches in all (the pass is said and stored only beside others).
    passes: u32,
    search: Search,
    /// Wall clock when its first step started.
    started_ms: Option<i64>,
    /// Steps run, reruns of spoiled steps included.
    steps_run: u32,
    /// Its row is in the store.
    recorded: bool,
    /// Its target died (noted): the search ends here, the others go on.
    dead: bool,
}

impl ActiveSearch {
    fn new(cell: usize, pass: u32, passes: u32, search: Search) -> Self {
        ActiveSearch {
            cell,
            pass,
            passes,
            search,
            started_ms: None,
            steps_run: 0,
            recorded: false,
            dead: false,
        }
    }
}

/// Confidence level of the search's interval (`knee::Capacity`: 2.5th and 97.5th
/// percentiles of the bootstrap replicates).
const SEARCH_CONFIDENCE: f64 = 0.95;

/// The identity of a cell as stored with its search result (docs/store-conventions.md,
/// "capacities"): the same names and formats as the step parameters, so a report can
/// match the row to the cell's steps.
pub(crate) fn cell_identity(plan: &Plan, ci: usize) -> Value {
    let cell = &plan.cells[ci];
    let inst = &plan.instances[cell.instance];
    json!({
        "target": plan.targets[inst.target].name,
        "instance": plan.instance_label(cell.instance),
        "workload": plan.workloads[cell.workload].name,
        "concurrency": cell.concurrency,
        "keepalive": cell.keepalive,
        "cpu_quota_cores": inst.cpu_quota,
        "cores": inst.cores.map(cores_text),
        "variant": inst.variant.map(|v| plan.variants[v].name.clone()),
        "protocol": plan.protocol_of(cell),
        // A users search stores users where a rate search stores req/s, and how fast
        // its office time ran (1: people at their pace; F: each user sends F people's
        // requests), which history and compare say beside the count.
        "unit": if plan.searches_users(ci) { "users" } else { "req/s" },
        "compress": plan.workloads[cell.workload]
            .office
            .as_ref()
            .filter(|o| o.search)
            .map(|o| o.compress),
    })
}

/// The stored row of a search: its answer when it ended (`cap`), or, cut short, the
/// largest rate decided sustainable so far with no interval.
fn capacity_record(
    plan: &Plan,
    a: &ActiveSearch,
    cap: Option<&Capacity>,
    finished_ms: i64,
) -> CapacityRecord {
    let mut cell = cell_identity(plan, a.cell);
    if a.passes > 1 {
        // Stored beside the cell (docs/store-conventions.md, "capacities"): a report
        // reads a cell's passes together.
        cell["pass"] = json!(a.pass);
        cell["passes"] = json!(a.passes);
    }
    let started_unix_ms = a.started_ms.unwrap_or(finished_ms);
    match cap {
        Some(c) => CapacityRecord {
            cell,
            capacity_rps: c.capacity_rps,
            ci_lo_rps: Some(c.ci_lo_rps),
            ci_hi_rps: c.ci_hi_rps,
            confidence: SEARCH_CONFIDENCE,
            end: match c.end {
                SearchEnd::Converged => StoredEnd::Converged,
                SearchEnd::ReachedMaxRate => StoredEnd::ReachedMaxRate,
                SearchEnd::BelowMinRate => StoredEnd::BelowMinRate,
                SearchEnd::StepBudgetExhausted => StoredEnd::StepBudgetExhausted,
                SearchEnd::GeneratorBound => StoredEnd::GeneratorBound,
            },
            steps: a.steps_run,
            started_unix_ms,
            finished_unix_ms: finished_ms,
            detail: serde_json::to_value(c).unwrap_or(Value::Null),
        },
        None => {
            let history = a.search.history();
            CapacityRecord {
                cell,
                capacity_rps: volley_analysis::knee::sweep_capacity(history).capacity_rps,
                ci_lo_rps: None,
                ci_hi_rps: None,
                confidence: SEARCH_CONFIDENCE,
                end: StoredEnd::Interrupted,
                steps: a.steps_run,
                started_unix_ms,
                finished_unix_ms: finished_ms,
                detail: json!({ "history": history }),
            }
        }
    }
}

impl StudyRun<'_> {
    /// Search mode: one capacity search per cell with a running target and pass
    /// (`[search] passes`), round-robin (one rate each per round) so they interleave:
    /// every cell's first pass, then every cell's second, in each round (A B A B), so
    /// the passes of two variants see the same minutes. `Ok(false)`: stopped early.
    pub(super) fn search(&mut self) -> Result<bool, StudyError> {
        let plan = self.plan;
        let cells: Vec<(usize, &crate::plan::SearchPlan)> = plan
            .searched_cells()
            .into_iter()
            .filter(|&ci| self.running[plan.cells[ci].instance].is_some())
            .filter_map(|ci| Some((ci, plan.search_of(ci)?)))
            .collect();
        let most = cells.iter().map(|(_, sp)| sp.passes).max().unwrap_or(1);
        for pass in 0..most {
            for &(ci, sp) in cells.iter().filter(|(_, sp)| pass < sp.passes) {
                let s = Search::new(sp.start_rate, sp.opts.clone())
                    .map_err(|e| StudyError::Invalid(e.to_string()))?;
                self.active.push(ActiveSearch::new(ci, pass, sp.passes, s));
            }
        }
        // After a sweep's steps (a sweep with users searches), the count goes on.
        let swept = plan.steps.len();
        let expected: usize = self
            .active
            .iter()
            .map(|a| plan.cell_search_steps(a.cell) as usize)
            .sum();
        let mut done_steps = swept;
        let going = |a: &ActiveSearch| !a.search.is_done() && !a.dead;
        while self.active.iter().any(going) {
            for k in 0..self.active.len() {
                if self.active[k].dead {
                    continue;
                }
                let Some(rate) = self.active[k].search.next_rate() else {
                    continue;
                };
                if self.stop.load(Ordering::Relaxed) {
                    return Ok(false);
                }
                let est = plan.step_estimate(&plan.cells[self.active[k].cell]);
                let total = (done_steps + 6).max(swept + expected);
                let p = Progress {
                    done: done_steps,
                    total,
                    eta: est * (total - done_steps) as u32,
                };
                if !self.search_rate(k, rate, p, &mut done_steps)? {
                    if self.stop.load(Ordering::Relaxed) {
                        return Ok(false);
                    }
                    // Its target died (the step noted it): this search ends, unfinished
                    // (stored as interrupted if it ran a step); the others go on, as
                    // a sweep goes on with the other targets.
                    self.active[k].dead = true;
                }
            }
        }
        // A search cut short by its target leaves the study incomplete.
        Ok(!self.active.iter().any(|a| a.dead))
    }

    /// One rate of search `k`: its step (rerun while a spoiled failure), what the search
    /// hears of it, and the search's answer stored the moment it ends. `Ok(false)`: the
    /// study stops (Ctrl-C, a dead target).
    fn search_rate(
        &mut self,
        k: usize,
        rate: f64,
        p: Progress,
        done_steps: &mut usize,
    ) -> Result<bool, StudyError> {
        let plan = self.plan;
        let ci = self.active[k].cell;
        self.pass = (self.active[k].passes > 1).then_some(self.active[k].pass);
        let repeat = self.active[k]
            .search
            .history()
            .iter()
            .filter(|(r, _)| *r == rate)
            .count() as u32;
        // A spoiled failure measured the generator or the machine, not the server
        // (`knee::Evidence`): rerun it, up to the study's `retries` times after a rest,
        // and if no attempt can be judged it is neither a pass nor a fail.
        let mut attempts: Vec<StepSignal> = Vec::new();
        self.active[k].started_ms.get_or_insert_with(now_ms);
        let heard = loop {
            let attempt = attempts.len() as u32;
            let Some(sig) = self.step(ci, repeat, Some(rate), "search", attempt, p)? else {
                break None;
            };
            self.active[k].steps_run += 1;
            attempts.push(sig);
            let stopping = self.stop.load(Ordering::Relaxed);
            match search_input(&attempts, plan.retries, stopping) {
                SearchInput::Rerun => {
                    *done_steps += 1;
                    rest(GENERATOR_RERUN_REST, self.stop);
                }
                other => break Some(other),
            }
        };
        self.pass = None;
        let retries = attempts.len().saturating_sub(1);
        let a = &mut self.active[k];
        let observed = match heard {
            Some(SearchInput::Observe(ok)) => a.search.observe(rate, ok),
            // Stopping: an unjudged step ends nothing, the search is stored as
            // interrupted, not as an unjudged end.
            Some(_) if self.stop.load(Ordering::Relaxed) => return Ok(false),
            Some(_) => {
                let unit = if plan.searches_users(ci) {
                    "users"
                } else {
                    "req/s"
                };
                let why = match attempts.last().map(|s| s.label) {
                    Some(l) if sustain::bound_again(Some(l)) => {
                        format!("{l}, not measured again: another attempt would meet the same")
                    }
                    _ => format!("after {retries} rerun(s): generator-bound, machine-stalled or on a busy machine"),
                };
                (self.note)(&format!(
                    "search {}: {rate:.0} {unit} could not be judged for the server ({why}): the edge cannot be looked for above this on this machine",
                    plan.instance_label(plan.cells[ci].instance)
                ));
                a.search.observe_unjudged(rate, attempts.len() as u32)
            }
            None => return Ok(false),
        };
        observed.map_err(|e| StudyError::Invalid(e.to_string()))?;
        *done_steps += 1;
        if let Some(c) = a.search.capacity() {
            // The search's answer is stored the moment it ends: a study killed later
            // keeps it.
            let record = capacity_record(plan, a, Some(&c), now_ms());
            let run = self.run_of_target[&plan.instances[plan.cells[ci].instance].target];
            self.store.record_capacity(run, &record)?;
            a.recorded = true;
            self.searches.push((ci, c));
        }
        Ok(true)
    }

    /// Searches cut short (Ctrl-C, a dead target, an engine error) keep a row saying
    /// so, with what they had decided; a search that never ran a step leaves none.
    pub(super) fn store_unfinished_searches(&mut self) {
        let plan = self.plan;
        let finished_ms = now_ms();
        for a in self
            .active
            .iter()
            .filter(|a| !a.recorded && a.steps_run > 0)
        {
            let run = self.run_of_target[&plan.instances[plan.cells[a.cell].instance].target];
            let record = capacity_record(plan, a, None, finished_ms);
            if let Err(e) = self.store.record_capacity(run, &record) {
                (self.note)(&format!("could not store the unfinished search: {e}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(sustainable: bool, label: &'static str, machine_busy: bool) -> StepSignal {
        StepSignal {
            sustainable: Some(sustainable),
            label,
            machine_busy,
        }
    }

    #[test]
    fn the_search_hears_steps_by_their_best_evidence() {
        use SearchInput::*;
        let quiet = |ok, label| sig(ok, label, false);
        let busy = |ok| sig(ok, "server-bound", true);
        let gen = |ok| quiet(ok, "generator-bound");
        let stalled = |ok| quiet(ok, "machine-stalled");
        // (attempts oldest first, retries, stopping) -> what the search hears.
        let table: Vec<(Vec<StepSignal>, u32, bool, SearchInput)> = vec![
            // Server-bound and inconclusive steps on a quiet machine count at once.
            (vec![quiet(true, "server-bound")], 2, false, Observe(true)),
            (vec![quiet(false, "server-bound")], 2, false, Observe(false)),
            (vec![quiet(false, "inconclusive")], 2, false, Observe(false)),
            // A pass is heard at once, whoever was late or busy: no rerun.
            (vec![gen(true)], 2, false, Observe(true)),
            (vec![stalled(true)], 2, false, Observe(true)),
            (vec![busy(true)], 2, false, Observe(true)),
            // A spoiled failure: rerun while reruns are left.
            (vec![gen(false)], 2, false, Rerun),
            (vec![stalled(false)], 2, false, Rerun),
            (vec![busy(false)], 2, false, Rerun),
            (vec![gen(false), stalled(false)], 2, false, Rerun),
            // A later attempt decides: a quiet one as its verdict says, a pass as a pass.
            (
                vec![gen(false), quiet(false, "server-bound")],
                2,
                false,
                Observe(false),
            ),
            (vec![busy(false), gen(true)], 2, false, Observe(true)),
            (
                vec![gen(false), busy(false), stalled(true)],
                2,
                false,
                Observe(true),
            ),
            // Out of reruns with no pass: a failure on a busy machine, or while volley
            // was late, is not the server's.
            (
                vec![gen(false), busy(false), stalled(false)],
                2,
                false,
                Unjudged,
            ),
            (vec![gen(false)], 0, false, Unjudged),
            // No rerun while the study is stopping.
            (vec![gen(false)], 2, true, Unjudged),
            (vec![gen(true)], 2, true, Observe(true)),
            // A failure another attempt would meet again (the same shaped link, the
            // same plan too short for its CPU cap): not the server's, and not rerun.
            (vec![quiet(false, "link-bound")], 2, false, Unjudged),
            (vec![sig(false, "link-bound", true)], 2, false, Unjudged),
            (vec![quiet(false, "too-short")], 2, false, Unjudged),
            (vec![quiet(true, "link-bound")], 2, false, Observe(true)),
        ];
        for (attempts, retries, stopping, want) in table {
            assert_eq!(
                search_input(&attempts, retries, stopping),
                want,
                "{attempts:?} retries={retries} stopping={stopping}"
            );
        }
    }

    #[test]
    fn a_search_is_stored_with_its_interval_or_as_interrupted() {
        let text = r#"
name = "s"
mode = "search"
[[target]]
name = "n"
kind = "nginx"
cpu_quota = 0.5
cores = 2
[[workload]]
name = "w"
paths = ["/x"]
[steps]
duration = "3s"
[search]
start_rate = 100
repeats = 1
"#;
        let plan = crate::resolve(&crate::parse(text).unwrap(), text, 1.0).unwrap();
        let sp = plan.search.clone().unwrap();
        let mut a = ActiveSearch::new(0, 0, 1, Search::new(sp.start_rate, sp.opts).unwrap());
        a.started_ms = Some(1_000);
        // Capacity 1000 req/s: 100..800 pass, 1600 fails, then bisection.
        let mut partial = None;
        while let Some(rate) = a.search.next_rate() {
            a.search.observe(rate, rate <= 1000.0).unwrap();
            a.steps_run += 1;
            if a.steps_run == 5 {
                partial = Some(capacity_record(&plan, &a, None, 2_000));
            }
        }
        let c = a.search.capacity().unwrap();
        let done = capacity_record(&plan, &a, Some(&c), 9_000);
        assert_eq!(done.end, StoredEnd::Converged);
        assert_eq!(done.capacity_rps, c.capacity_rps);
        assert_eq!(done.ci_lo_rps, Some(c.ci_lo_rps));
        assert_eq!(done.ci_hi_rps, c.ci_hi_rps);
        assert_eq!(done.confidence, 0.95);
        assert_eq!(done.steps, a.steps_run);
        assert_eq!(
            (done.started_unix_ms, done.finished_unix_ms),
            (1_000, 9_000)
        );
        assert_eq!(done.detail["end"], "converged");
        assert_eq!(
            done.cell,
            json!({"target": "n", "instance": "n cpu=50% cores=2", "workload": "w",
                   "concurrency": 1, "keepalive": true, "cpu_quota_cores": 0.5,
                   "cores": "0-1", "variant": null, "protocol": "h1", "unit": "req/s",
                   "compress": null})
        );
        // Cut short after 100, 200, 400, 800 passed and 1600 failed: 800 so far, no CI.
        let partial = partial.unwrap();
        assert_eq!(partial.end, StoredEnd::Interrupted);
        assert_eq!(partial.capacity_rps, Some(800.0));
        assert_eq!((partial.ci_lo_rps, partial.ci_hi_rps), (None, None));
        assert_eq!(partial.steps, 5);
    }
}
