//! The agent's outbox: per-second records waiting for the coordinator's receipt.
//!
//! Place in the flow: between the load, which hands the agent one record per second,
//! and the bus. NATS core is at-most-once: a record published while the connection is
//! down, or just before it drops, is gone without a word. So every record is a request
//! and leaves the outbox only when the coordinator's [`Ack`] comes back; while the bus
//! is briefly away the records wait here and go out, late, when it returns, and the
//! coordinator fills their seconds in and counts how late they were
//! (docs/methodology.md, "When the bus is away").
//!
//! The outbox is bounded ([`DEFAULT_BOUND`] records): past it the oldest record is
//! dropped and counted, so an agent cut off for long does not grow without end; the
//! coordinator then marks those seconds missing, never zero.

use crate::bus::Bus;
use crate::msg::{Ack, SecondRecord};
use crate::AgentsError;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;

/// Records an agent keeps while the bus is away: five minutes of seconds, a few
/// hundred kilobytes of histograms.
pub const DEFAULT_BOUND: usize = 300;

/// How long one record waits for its receipt before it is tried again. Short, so a
/// request sent as the bus drops holds nothing up for long; a coordinator slower than
/// this only gets the record twice (it keeps the first).
pub const ACK_BOUND: Duration = Duration::from_millis(500);

/// Records not yet acknowledged, oldest first.
#[derive(Debug)]
pub struct Outbox {
    queue: VecDeque<SecondRecord>,
    bound: usize,
    /// Records dropped because the outbox was full.
    pub dropped: u64,
    /// Records the coordinator refused (the agent had been declared lost).
    pub refused: u64,
    /// The most records it held at once (1 while the bus is healthy).
    pub most: usize,
    /// Since when the bus has answered "nobody listens" with no receipt in between:
    /// the coordinator is gone (see [`crate::streaming`]).
    pub unheard_since: Option<std::time::Instant>,
}

impl Outbox {
    /// An empty outbox of at most `bound` records (at least one).
    pub fn new(bound: usize) -> Self {
        Outbox {
            queue: VecDeque::new(),
            bound: bound.max(1),
            dropped: 0,
            refused: 0,
            most: 0,
            unheard_since: None,
        }
    }

    /// Adds a record, dropping the oldest when full.
    pub fn push(&mut self, rec: SecondRecord) {
        if self.queue.len() == self.bound {
            self.queue.pop_front();
            self.dropped += 1;
        }
        self.queue.push_back(rec);
        self.most = self.most.max(self.queue.len());
    }

    /// The oldest record not yet acknowledged.
    pub fn front(&self) -> Option<&SecondRecord> {
        self.queue.front()
    }

    /// The coordinator answered for second `second`: it leaves the outbox (unless a
    /// push dropped it meanwhile).
    pub fn acked(&mut self, second: u64, kept: bool) {
        if self.queue.front().is_some_and(|r| r.second == second) {
            self.queue.pop_front();
            if !kept {
                self.refused += 1;
            }
        }
    }

    /// Records waiting.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// The outbox shared by the agent's loop (which fills it) and its courier (which
/// empties it).
pub(crate) type Shared = Arc<Mutex<Outbox>>;

/// Locks the outbox; a poisoned lock (a panic elsewhere while it was held) still holds
/// a consistent queue, every operation on it being a single push or pop.
pub(crate) fn lock(o: &Shared) -> MutexGuard<'_, Outbox> {
    o.lock().unwrap_or_else(|p| p.into_inner())
}

/// How one delivery attempt ended.
#[derive(Debug, PartialEq)]
pub(crate) enum Delivery {
    /// Nothing waits.
    Empty,
    /// The bus is down or did not answer in time: try again later.
    Later,
    /// The bus is up but nobody collects the run's records.
    NoListener,
}

/// Sends the waiting records in order, each as a request, while the bus answers.
pub(crate) async fn deliver(bus: &Bus, subject: &str, outbox: &Shared) -> Delivery {
    loop {
        if !bus.connected() {
            return Delivery::Later;
        }
        let Some(rec) = lock(outbox).front().cloned() else {
            return Delivery::Empty;
        };
        match bus
            .request::<_, Ack>(subject.to_string(), &rec, ACK_BOUND)
            .await
        {
            Ok(ack) => {
                let mut o = lock(outbox);
                o.unheard_since = None;
                o.acked(rec.second, ack.kept);
            }
            Err(AgentsError::NoResponders { .. }) => {
                lock(outbox)
                    .unheard_since
                    .get_or_insert_with(std::time::Instant::now);
                return Delivery::NoListener;
            }
            Err(_) => return Delivery::Later,
        }
    }
}

/// The courier task: delivers whenever a record comes (`wake`) and every 200 ms, so
/// the agent's own loop (heartbeats, the bus watch, the stop flag) never waits on a
/// receipt.
pub(crate) async fn courier(bus: Bus, subject: String, outbox: Shared, wake: Arc<Notify>) {
    loop {
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
        deliver(&bus, &subject, &outbox).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::{Counters, PROTO};

    fn rec(second: u64) -> SecondRecord {
        SecondRecord {
            proto: PROTO,
            agent: "a".into(),
            second,
            hists: Default::default(),
            counters: Counters::default(),
            generator_bound: false,
            counts: None,
            resources: None,
        }
    }

    #[test]
    fn a_full_outbox_drops_its_oldest_and_counts_it() {
        let mut o = Outbox::new(3);
        for s in 0..5 {
            o.push(rec(s));
        }
        assert_eq!((o.len(), o.dropped, o.most), (3, 2, 3));
        assert_eq!(o.front().map(|r| r.second), Some(2));
    }

    #[test]
    fn only_the_acknowledged_record_leaves() {
        let mut o = Outbox::new(2);
        o.push(rec(0));
        o.push(rec(1));
        o.acked(1, true);
        assert_eq!(o.len(), 2, "a receipt for another second removes nothing");
        o.acked(0, true);
        o.acked(1, false);
        assert!(o.is_empty());
        assert_eq!(o.refused, 1);
    }
}
