//! Correctness violations, counted by kind (docs/methodology.md, "The office").
//!
//! Every check the office makes ends here when it fails; a run with any violation
//! fails. Each (item, kind) is counted once, so one lost item is one violation however
//! many later syncs notice it; a few examples per kind are kept for the report.

use std::collections::BTreeSet;

/// What went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Violation {
    /// An item read back (GET, multiget) differs from what was last written.
    ReadMismatch,
    /// A PUT changed an item's content but the ETag it reported did not change.
    EtagUnchanged,
    /// An item's ETag changed although nobody changed its content.
    EtagChangedWithoutContent,
    /// A write with a stale If-Match was accepted instead of refused with 412.
    StaleWriteAccepted,
    /// A write or read the server should have accepted was refused (4xx).
    UnexpectedStatus,
    /// A 5xx answer.
    ServerError,
    /// The connection failed (connect, reset, closed, timeout, malformed answer).
    Transport,
    /// A sync-collection delta left out a change made since its token: an item added,
    /// changed or removed, including one the device added and removed itself since the
    /// token (RFC 6578 3.5.2: it must still be reported removed).
    MissedChange,
    /// A deletion made on one device was still shown by another after its sync
    /// (including an item that other device added after its token, which the delta
    /// must report removed, RFC 6578 3.5.2).
    DeletionNotSeen,
    /// An acknowledged item is not on the server.
    Lost,
    /// One UID stored under two names, or one name listed twice.
    Duplicate,
    /// An item on the server nobody wrote (or one deleted and back again).
    Unexpected,
    /// An answer that does not parse (multistatus or calendar data).
    Malformed,
}

impl Violation {
    /// Every kind, in report order.
    pub const ALL: [Violation; 13] = [
        Violation::ReadMismatch,
        Violation::EtagUnchanged,
        Violation::EtagChangedWithoutContent,
        Violation::StaleWriteAccepted,
        Violation::UnexpectedStatus,
        Violation::ServerError,
        Violation::Transport,
        Violation::MissedChange,
        Violation::DeletionNotSeen,
        Violation::Lost,
        Violation::Duplicate,
        Violation::Unexpected,
        Violation::Malformed,
    ];

    /// The name reports and tests use.
    pub fn name(self) -> &'static str {
        match self {
            Violation::ReadMismatch => "read-mismatch",
            Violation::EtagUnchanged => "etag-unchanged",
            Violation::EtagChangedWithoutContent => "etag-changed-without-content",
            Violation::StaleWriteAccepted => "stale-write-accepted",
            Violation::UnexpectedStatus => "unexpected-status",
            Violation::ServerError => "server-error",
            Violation::Transport => "transport",
            Violation::MissedChange => "missed-change",
            Violation::DeletionNotSeen => "deletion-not-seen",
            Violation::Lost => "lost",
            Violation::Duplicate => "duplicate",
            Violation::Unexpected => "unexpected",
            Violation::Malformed => "malformed",
        }
    }
}

/// Examples kept per kind.
const EXAMPLES: usize = 3;

/// Violations of one user (or, merged, of the run).
#[derive(Debug, Clone, Default)]
pub struct Violations {
    counts: [u64; Violation::ALL.len()],
    examples: Vec<(Violation, String)>,
    /// (item or request key, kind) already counted.
    seen: BTreeSet<(String, Violation)>,
}

impl Violations {
    /// Counts `kind` for `key` (an item name, or a unique request id) once.
    pub fn add(&mut self, kind: Violation, key: &str, detail: impl FnOnce() -> String) {
        if !self.seen.insert((key.to_owned(), kind)) {
            return;
        }
        self.counts[kind as usize] += 1;
        if self.examples.iter().filter(|(k, _)| *k == kind).count() < EXAMPLES {
            self.examples.push((kind, detail()));
        }
    }

    /// Counts `kind` without de-duplication (request failures: each is its own).
    pub fn add_each(&mut self, kind: Violation, detail: impl FnOnce() -> String) {
        self.counts[kind as usize] += 1;
        if self.examples.iter().filter(|(k, _)| *k == kind).count() < EXAMPLES {
            self.examples.push((kind, detail()));
        }
    }

    /// How many of `kind`.
    pub fn count(&self, kind: Violation) -> u64 {
        self.counts[kind as usize]
    }

    /// All kinds with their counts (zeros included).
    pub fn by_kind(&self) -> Vec<(Violation, u64)> {
        Violation::ALL
            .iter()
            .map(|k| (*k, self.count(*k)))
            .collect()
    }

    /// The total.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Kept examples.
    pub fn examples(&self) -> &[(Violation, String)] {
        &self.examples
    }

    /// Adds another user's violations.
    pub fn merge(&mut self, o: Violations) {
        for (a, b) in self.counts.iter_mut().zip(o.counts) {
            *a += b;
        }
        for (k, e) in o.examples {
            if self.examples.iter().filter(|(x, _)| *x == k).count() < EXAMPLES {
                self.examples.push((k, e));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_is_counted_once_per_kind() {
        let mut v = Violations::default();
        v.add(Violation::Lost, "a.ics", || "a".into());
        v.add(Violation::Lost, "a.ics", || "again".into());
        v.add(Violation::ReadMismatch, "a.ics", || "b".into());
        v.add_each(Violation::ServerError, || "500".into());
        v.add_each(Violation::ServerError, || "500".into());
        assert_eq!(v.count(Violation::Lost), 1);
        assert_eq!(v.count(Violation::ServerError), 2);
        assert_eq!(v.total(), 4);
        let mut w = Violations::default();
        w.add(Violation::Lost, "a.ics", || "other user".into());
        v.merge(w);
        assert_eq!(v.count(Violation::Lost), 2);
    }
}
