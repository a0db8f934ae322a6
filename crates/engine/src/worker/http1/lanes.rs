//! Lanes: each replayed client's requests on its own connection, one at a time and in
//! the order the client sent them ([`crate::Request::lane`]).
//!
//! Place in the flow: `run -> worker (shared loop + http1 + **lanes**) -> transport`.
//! A plain open loop hands an arrival to any idle connection; a replay must not, or
//! the keep-alive reuse and per-client sequences of the log are lost. So a lane is
//! bound to one slot; an arrival whose lane is busy (its previous request is still
//! on the wire) waits for that connection, and its wait shows as connection wait
//! (sent - dispatched), never hidden: latency still counts from the logged instant.
//! A lane with no slot takes a closed one (under the cap) or an idle unbound one;
//! when the cap is reached it waits (a cap hit) until a slot frees, and the slot
//! longest parked idle by another lane is closed for it (a new client gets a new
//! connection, never another client's). Under the cap, slots go to waiting arrivals
//! in the order they came, whichever lane they belong to.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use super::{State, Worker};
use crate::conn::Transport;
use crate::{Request, Sink};

/// An arrival waiting: request, intended instant, dispatched instant.
type Queued = (Arc<Request>, u64, u64);

/// Which lane holds which slot, and the arrivals waiting per lane.
#[derive(Default)]
pub(super) struct Lanes {
    slot_of: HashMap<u32, usize>,
    lane_of: HashMap<usize, u32>,
    waiting: HashMap<u32, VecDeque<Queued>>,
    /// Lanes with arrivals waiting but no slot, oldest first.
    homeless: VecDeque<u32>,
    /// Slots whose lane has nothing to send, least recently used first (entries may
    /// be stale: checked when taken); each slot at most once (`is_parked`).
    parked: VecDeque<usize>,
    is_parked: HashSet<usize>,
    /// Arrivals waiting in all lanes.
    queued: usize,
}

impl Lanes {
    /// Arrivals waiting in all lanes.
    pub(super) fn queued(&self) -> usize {
        self.queued
    }

    /// Whether `slot` must be given work by lane (it is bound, or a lane waits for a
    /// slot).
    pub(super) fn wants(&self, slot: usize) -> bool {
        // Without lanes (every run but a replay) this costs two length checks on the
        // completion path, no hashing.
        (!self.lane_of.is_empty() && self.lane_of.contains_key(&slot)) || !self.homeless.is_empty()
    }

    fn bind(&mut self, slot: usize, lane: u32) {
        self.slot_of.insert(lane, slot);
        self.lane_of.insert(slot, lane);
    }

    fn unbind(&mut self, slot: usize) {
        if let Some(lane) = self.lane_of.remove(&slot) {
            self.slot_of.remove(&lane);
        }
    }

    fn push(&mut self, lane: u32, q: Queued) {
        self.waiting.entry(lane).or_default().push_back(q);
        self.queued += 1;
    }

    /// When the oldest waiting arrival of `lane` was dispatched.
    fn oldest(&self, lane: u32) -> Option<u64> {
        self.waiting.get(&lane)?.front().map(|q| q.2)
    }

    fn pop(&mut self, lane: u32) -> Option<Queued> {
        let queue = self.waiting.get_mut(&lane)?;
        let q = queue.pop_front();
        if queue.is_empty() {
            self.waiting.remove(&lane);
        }
        if q.is_some() {
            self.queued -= 1;
        }
        q
    }

    /// Every waiting arrival, for censoring at the end.
    pub(super) fn drain(&mut self) -> Vec<Queued> {
        self.queued = 0;
        self.homeless.clear();
        self.waiting.drain().flat_map(|(_, q)| q).collect()
    }
}

impl<S: Sink, T: Transport> Worker<'_, S, T> {
    /// Open loop: an arrival of `lane` goes on its lane's connection when that is free,
    /// else waits for it; a lane without one takes a slot, or waits for one.
    pub(super) fn dispatch_lane(&mut self, req: Arc<Request>, lane: u32, intended: u64, now: u64) {
        if let Some(&slot) = self.lanes.slot_of.get(&lane) {
            let c = &self.conns[slot];
            if c.req.is_none() && matches!(c.state, State::Idle | State::Closed) {
                self.assign(slot, req, intended, now, now);
            } else {
                self.lanes.push(lane, (req, intended, now));
            }
            return;
        }
        if self.lanes.waiting.contains_key(&lane) {
            // Already waiting for a slot: keep its order.
            self.lanes.push(lane, (req, intended, now));
            return;
        }
        match self.slot_for_lane(now) {
            Some(slot) => {
                self.lanes.bind(slot, lane);
                self.assign(slot, req, intended, now, now);
            }
            None => {
                self.core.cap_hit(now);
                self.lanes.push(lane, (req, intended, now));
                self.lanes.homeless.push_back(lane);
            }
        }
    }

    /// A slot for a lane that has none: an idle connection no lane holds, a closed slot
    /// under the cap, or the slot parked longest by another lane (closed first).
    fn slot_for_lane(&mut self, now: u64) -> Option<usize> {
        while let Some(slot) = self.idle.pop() {
            self.conns[slot].in_idle_list = false;
            if self.conns[slot].state == State::Idle && !self.lanes.lane_of.contains_key(&slot) {
                return Some(slot);
            }
        }
        if self.core.open_here < self.core.share.max_connections {
            if let Some(slot) = self.free.pop() {
                return Some(slot);
            }
        }
        while let Some(slot) = self.lanes.parked.pop_front() {
            self.lanes.is_parked.remove(&slot);
            let c = &self.conns[slot];
            let Some(&lane) = self.lanes.lane_of.get(&slot) else {
                continue;
            };
            if c.req.is_some() || self.lanes.waiting.contains_key(&lane) {
                continue;
            }
            self.lanes.unbind(slot);
            if self.conns[slot].state != State::Closed {
                self.close(slot, now);
            }
            return Some(slot);
        }
        None
    }

    /// A connection of the lane run (`slot`, idle or closed) can take work: its lane's
    /// next arrival; else, a lane waiting for a slot gets it; else it stays parked
    /// with its lane (idle) or goes back to the free slots (closed).
    pub(super) fn next_for_lane(&mut self, slot: usize, now: u64) {
        if let Some(&lane) = self.lanes.lane_of.get(&slot) {
            if let Some(mine) = self.lanes.oldest(lane) {
                // Arrivals get connections in the order they came: a lane with a
                // backlog yields its slot to a lane that has waited longer for one
                // (and waits itself, its requests still in order), so under the cap
                // one busy client cannot keep the others out.
                let theirs = self
                    .lanes
                    .homeless
                    .front()
                    .and_then(|&h| self.lanes.oldest(h));
                if theirs.is_none_or(|t| mine <= t) {
                    if let Some((req, intended, dispatched)) = self.lanes.pop(lane) {
                        return self.assign(slot, req, intended, dispatched, now);
                    }
                }
                self.lanes.homeless.push_back(lane);
            }
        }
        while let Some(lane) = self.lanes.homeless.pop_front() {
            // This slot's own lane may have queued itself above: it keeps its slot.
            let own = self.lanes.lane_of.get(&slot) == Some(&lane);
            if !own && self.lanes.slot_of.contains_key(&lane) {
                continue;
            }
            let Some((req, intended, dispatched)) = self.lanes.pop(lane) else {
                continue;
            };
            if !own {
                self.lanes.unbind(slot);
                if self.conns[slot].state != State::Closed {
                    // Another client's connection: a new client gets a new one.
                    self.close(slot, now);
                }
                self.lanes.bind(slot, lane);
            }
            return self.assign(slot, req, intended, dispatched, now);
        }
        if self.conns[slot].state == State::Closed {
            self.lanes.unbind(slot);
            self.free.push(slot);
        } else if self.lanes.lane_of.contains_key(&slot) {
            if self.lanes.is_parked.insert(slot) {
                self.lanes.parked.push_back(slot);
            }
        } else if !self.conns[slot].in_idle_list {
            self.conns[slot].in_idle_list = true;
            self.idle.push(slot);
        }
    }
}
