//! Live windows: each worker's closed seconds sent as they close, and joined across
//! workers once every worker has passed them.
//!
//! Place in the flow: only the injector agent uses it. A study step or `volley bench`
//! reads the merged recorder after the run; an agent must publish each second while
//! the run goes, so the coordinator can store it, see the agent alive and cut phases.
//! The recorder sends each window when it closes (a later sample or the engine's tick;
//! with the intended-time key, `hold` after its second ends), in order, empty ones as a
//! bare mark, so a quiet worker still says "I am past second s". The
//! [`SecondJoiner`] releases second `s` when every worker has closed a window `>= s`,
//! and the rest at [`SecondJoiner::finish`]: every window is released exactly once,
//! and the released seconds add up to the merged recorder's.

use std::collections::BTreeMap;
use std::sync::mpsc::Sender;

use super::merge::join_second;
use super::{ClosedSecond, Recorder, SecondDigest};
use crate::hist;
use crate::MetricsError;
use volley_monitor::spill::Spill;

/// One worker's closed window, as sent while the run goes.
#[derive(Debug, Clone)]
pub struct StreamedSecond {
    /// Which worker.
    pub worker: usize,
    /// Second of run time the window covered.
    pub second: u64,
    /// Its data; `None` when the window was empty.
    pub closed: Option<ClosedSecond>,
}

/// Where a recorder sends its closed windows.
#[derive(Debug, Clone)]
pub struct SecondStream {
    worker: usize,
    tx: Sender<StreamedSecond>,
}

impl SecondStream {
    /// Worker `worker`'s end of a channel whose receiver joins the seconds.
    pub fn new(worker: usize, tx: Sender<StreamedSecond>) -> Self {
        SecondStream { worker, tx }
    }

    pub(super) fn send(&self, second: u64, closed: Option<ClosedSecond>) {
        // A receiver that has gone only means nobody publishes live windows any more;
        // the recorder keeps every window for the final figures regardless.
        let _ = self.tx.send(StreamedSecond {
            worker: self.worker,
            second,
            closed,
        });
    }
}

impl Recorder {
    /// Also sends every closed window to `stream` (once per second, off the hot path).
    pub fn with_stream(mut self, stream: SecondStream) -> Recorder {
        self.stream = self.offload_stream(Some(stream));
        self
    }

    /// Stops sending windows (after the run, so the channel can close).
    pub fn drop_stream(&mut self) {
        self.stream = self.offload_stream(None);
    }
}

/// Joins the workers' streamed windows into whole seconds, each released once.
pub struct SecondJoiner {
    workers: usize,
    /// Highest second each worker has closed.
    passed: Vec<Option<u64>>,
    pending: BTreeMap<u64, ClosedSecond>,
    serializer: hist::Encoder,
    /// The digest of every second released, when asked ([`SecondJoiner::keeping_digests`]),
    /// waiting on disk, not in memory, until taken (a long run stays flat; issue 26).
    digests: Option<Spill<SecondDigest>>,
}

impl SecondJoiner {
    /// A joiner for `workers` workers.
    pub fn new(workers: usize) -> Self {
        SecondJoiner {
            workers: workers.max(1),
            passed: vec![None; workers.max(1)],
            pending: BTreeMap::new(),
            serializer: hist::Encoder::new(),
            digests: None,
        }
    }

    /// Also keeps the digest of every second it releases, for the merged recorder of
    /// workers that kept none ([`Recorder::stream_only`], [`Recorder::set_digests`]).
    pub fn keeping_digests(mut self) -> Self {
        self.digests = Some(Spill::new());
        self
    }

    /// The digests of the seconds released so far (empty unless kept).
    pub fn take_digests(&mut self) -> Vec<SecondDigest> {
        self.digests
            .as_mut()
            .map(|d| std::mem::take(d).finish())
            .unwrap_or_default()
    }

    fn note(&mut self, released: &[ClosedSecond]) -> Result<(), MetricsError> {
        if let Some(d) = &mut self.digests {
            for c in released {
                d.push(SecondDigest::of(c)?);
            }
        }
        Ok(())
    }

    /// Takes one streamed window; returns the seconds now complete, in order.
    pub fn push(&mut self, s: StreamedSecond) -> Result<Vec<ClosedSecond>, MetricsError> {
        if s.worker < self.workers {
            let p = &mut self.passed[s.worker];
            *p = Some(p.map_or(s.second, |x| x.max(s.second)));
        }
        if let Some(c) = s.closed {
            let joined = match self.pending.remove(&c.second) {
                Some(prev) => join_second(prev, c, &mut self.serializer)?,
                None => c,
            };
            self.pending.insert(joined.second, joined);
        }
        let Some(all_passed) = self
            .passed
            .iter()
            .copied()
            .collect::<Option<Vec<u64>>>()
            .and_then(|v| v.into_iter().min())
        else {
            return Ok(Vec::new());
        };
        let rest = self.pending.split_off(&(all_passed + 1));
        let done: Vec<ClosedSecond> = std::mem::replace(&mut self.pending, rest)
            .into_values()
            .collect();
        self.note(&done)?;
        Ok(done)
    }

    /// Every second still held, in order (after the run).
    pub fn finish(&mut self) -> Result<Vec<ClosedSecond>, MetricsError> {
        let done: Vec<ClosedSecond> = std::mem::take(&mut self.pending).into_values().collect();
        self.note(&done)?;
        Ok(done)
    }
}
