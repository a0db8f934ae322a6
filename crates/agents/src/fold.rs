//! What the run's end reads of the merged seconds, folded in as each second closes.
//!
//! Place in the flow: inside the coordinator's collection, after [`crate::merge`]. A
//! merged second is handed out (and stored, with `CoordinatorConfig::stored_live`) the
//! moment it closes; what the run's end still needs of it is folded in then: its part
//! of the phases ([`Cutter`]), its summary row ([`SecondDigest`]: the merged
//! recorder's per-second series), its sums (the whole run when every injector was lost
//! before its final record), its late records and its number. The second itself can
//! then go: a long run's coordinator holds a digest a second (as `volley bench --save`
//! does), not the seconds (issue 26: +2 KB/s over an hour while it kept them slimmed).

use crate::merge::{AgentSeries, MergedSecond, Slot};
use crate::phase::{Cutter, Phase, PhaseSecond};
use crate::AgentsError;
use std::time::Duration;
use volley_metrics::hist::{self, Hist};
use volley_metrics::{ClosedSecond, Counts, Metric, SecondDigest};

/// The run's end figures of the merged seconds folded so far.
#[derive(Debug)]
pub(crate) struct Tally {
    /// The agents, in share order.
    names: Vec<String>,
    /// The run's first second: one before it is no part of the merge.
    first_s: u64,
    /// The summary row of each present second with full counters, in the order the
    /// seconds closed.
    digests: Vec<SecondDigest>,
    /// Merged seconds some agent was present in.
    present: u64,
    /// Of those, the ones a present agent sent without full counters (no digest, no
    /// sums can be made of them).
    uncounted: u64,
    /// The sums of the present seconds with full counters.
    totals: Option<Totals>,
    /// The latest second merged.
    last_s: Option<u64>,
    /// Per agent (share order): its records that came late, and the latest, ms past
    /// the grace.
    late: Vec<(u64, u64)>,
    cutter: Cutter,
}

/// Counters and histograms of several seconds, added.
#[derive(Debug)]
struct Totals {
    counts: Counts,
    hists: Vec<Hist>,
}

fn histogram(second: u64, source: volley_metrics::MetricsError) -> AgentsError {
    AgentsError::Histogram {
        agent: "(merged)".to_string(),
        second,
        source,
    }
}

impl Tally {
    /// Nothing folded yet, for agents `names` (share order) due from `first_s` on,
    /// warming up for `warmup` before their place.
    pub(crate) fn new(names: Vec<String>, first_s: u64, warmup: Duration) -> Tally {
        Tally {
            late: vec![(0, 0); names.len()],
            cutter: Cutter::new(names.clone(), first_s, warmup),
            names,
            first_s,
            digests: Vec::new(),
            present: 0,
            uncounted: 0,
            totals: None,
            last_s: None,
        }
    }

    /// Per agent (share order): its records that came late, and the latest of them, ms
    /// past the grace.
    pub(crate) fn late(&self) -> &[(u64, u64)] {
        &self.late
    }

    /// Folds in second `m`, merged from the records `agents` still hold of it (call
    /// before they are let go).
    pub(crate) fn fold(
        &mut self,
        m: &MergedSecond,
        agents: &[AgentSeries],
    ) -> Result<(), AgentsError> {
        if m.second < self.first_s {
            return Ok(());
        }
        self.last_s = self.last_s.max(Some(m.second));
        for l in &m.late {
            if let Some(i) = self.names.iter().position(|n| *n == l.agent) {
                let (n, most) = &mut self.late[i];
                *n += 1;
                *most = (*most).max(l.late_ms);
            }
        }
        if m.slots.values().any(|s| *s == Slot::Present) {
            self.present += 1;
            match m.closed() {
                Some(c) => self.add(&c)?,
                None => self.uncounted += 1,
            }
        }
        self.cutter.push(PhaseSecond::of(m, agents));
        Ok(())
    }

    fn add(&mut self, c: &ClosedSecond) -> Result<(), AgentsError> {
        let err = |e| histogram(c.second, e);
        self.digests.push(SecondDigest::of(c).map_err(err)?);
        let t = self.totals.get_or_insert_with(|| Totals {
            counts: Counts::default(),
            hists: Metric::ALL.iter().map(|_| hist::new_hist()).collect(),
        });
        t.counts.add(&c.counts);
        for (m, into) in Metric::ALL.iter().zip(&mut t.hists) {
            hist::add(into, &c.hist(*m).map_err(err)?).map_err(err)?;
        }
        Ok(())
    }

    /// Agent `i` sends nothing more (its final record came, or it was lost);
    /// `last_held`: the last second it holds a record of.
    pub(crate) fn end(&mut self, i: usize, last_held: Option<u64>) {
        self.cutter.end(i, last_held);
    }

    /// The figures of every second folded, and the phases: once every second of the run
    /// has been folded.
    pub(crate) fn finish(
        self,
        degraded_from_s: Option<u64>,
    ) -> Result<(Folded, Vec<Phase>), AgentsError> {
        let totals = match self.totals {
            Some(t) => {
                let mut enc = hist::Encoder::new();
                let mut hists = Metric::ALL.map(|_| Vec::new());
                for (bytes, h) in hists.iter_mut().zip(&t.hists) {
                    *bytes = hist::encode(&mut enc, h).map_err(|e| histogram(0, e))?;
                }
                Some(ClosedSecond {
                    second: 0,
                    counts: t.counts,
                    hists,
                    service_is_response: false,
                    resources: None,
                })
            }
            None => None,
        };
        let folded = Folded {
            digests: self.digests,
            present: self.present,
            uncounted: self.uncounted,
            totals,
            last_s: self.last_s,
        };
        Ok((folded, self.cutter.finish(degraded_from_s)))
    }
}

/// What the run's end reads of all the merged seconds, folded as they closed.
#[derive(Debug, Clone, Default)]
pub struct Folded {
    /// The summary row of each present second with full counters (see
    /// [`volley_metrics::Recorder::set_digests`]).
    pub digests: Vec<SecondDigest>,
    /// Merged seconds some agent was present in.
    pub present: u64,
    /// Of those, the ones a present agent sent without full counters.
    pub uncounted: u64,
    /// The present seconds with full counters added into one (its `second` is 0).
    pub totals: Option<ClosedSecond>,
    /// The latest second merged.
    pub last_s: Option<u64>,
}
