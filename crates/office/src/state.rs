//! What each virtual user knows: the truth (every acknowledged write, in order) and
//! each device's mirror of the calendar, as a real client keeps it.
//!
//! A user's devices are served by one thread one action at a time, so the truth is
//! exact: after a device syncs, its mirror must equal the truth as it stood when the
//! sync started. That is how one device's deletion is checked to be seen by the other
//! device's next sync (the built-in server's accounts reach only their own home, so
//! the office checks visibility across a person's two devices, not across people).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::check::Violations;
use crate::day::Decision;
use crate::http::Conn;
use crate::profile::Profile;

/// An item's text, shared: the truth and every device's mirror holding the same version
/// hold one allocation, and a device's copy that differs (read back refolded, or an
/// older revision) is its own. Why: each of ~1,100 items was kept three times (the
/// truth and two mirrors, ~1.1 KB each), and a long day's calendars grow with its
/// creations (issue 26).
pub type Text = Arc<str>;

/// An item as last acknowledged by the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TruthItem {
    /// The item's number (its UID is `<user>-<n>`).
    pub n: u64,
    /// Its revision (SEQUENCE).
    pub seq: u32,
    /// The text last written.
    pub data: Text,
    /// The ETag the server gave for it, if it gave one.
    pub etag: Option<String>,
    /// ETags it had before (the stale ones a stale write uses), the latest
    /// [`OLD_ETAGS`].
    pub old_etags: Vec<String>,
}

/// How many of an item's former ETags are kept (for stale writes and the check that a
/// server never hands an old one back). Bounded: an item edited all day would otherwise
/// keep every ETag it ever had, and a long day's client grow with its edits (issue 26).
pub const OLD_ETAGS: usize = 16;

/// Every item the server acknowledged, by name (`<uid>.ics`).
#[derive(Debug, Clone, Default)]
pub struct Truth {
    /// Live items.
    pub items: BTreeMap<String, TruthItem>,
    /// Names deleted (acknowledged).
    pub deleted: BTreeSet<String>,
}

impl Truth {
    /// `read`, the text a device read of item `name`, as the device keeps it: the
    /// truth's own allocation when it is byte for byte the text last acknowledged,
    /// else a copy of its own.
    pub fn share(&self, name: &str, read: &str) -> Text {
        match self.items.get(name) {
            Some(t) if *t.data == *read => Arc::clone(&t.data),
            _ => Text::from(read),
        }
    }
}

/// A device's copy of one item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorItem {
    /// The ETag the device holds (None: it must fetch one before a conditional write).
    pub etag: Option<String>,
    /// The text the device holds.
    pub data: Text,
}

/// A decision DAVx5 keeps until its next sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    /// Create, edit or delete.
    pub what: Decision,
    /// Picks the item.
    pub pick: u64,
    /// A stale write first.
    pub stale_probe: bool,
}

/// One calendar client of a user.
pub struct Device {
    /// The client it plays.
    pub profile: Profile,
    /// Its connection.
    pub conn: Conn,
    /// Its copy of the calendar.
    pub mirror: BTreeMap<String, MirrorItem>,
    /// The last sync token, if it syncs with sync-collection.
    pub token: Option<String>,
    /// The last getctag.
    pub ctag: Option<String>,
    /// Whether the calendar offers sync-collection (from supported-report-set).
    pub sync_offered: bool,
    /// The initial sync succeeded.
    pub ready: bool,
    /// Names this device wrote since its last sync token: the next delta must list them.
    pub written: BTreeSet<String>,
    /// Decisions not yet uploaded (DAVx5).
    pub pending: Vec<Pending>,
}

impl Device {
    /// A device that has not synced yet.
    pub fn new(profile: Profile, conn: Conn) -> Device {
        Device {
            profile,
            conn,
            mirror: BTreeMap::new(),
            token: None,
            ctag: None,
            sync_offered: false,
            ready: false,
            written: BTreeSet::new(),
            pending: Vec::new(),
        }
    }
}

/// A person of the office.
pub struct User {
    /// Account name.
    pub name: String,
    /// Principal path (from discovery).
    pub principal: String,
    /// Calendar home path.
    pub home: String,
    /// The calendar the office writes to (path ending in `/`).
    pub cal: String,
    /// What the server acknowledged.
    pub truth: Truth,
    /// The person's devices.
    pub devices: Vec<Device>,
    /// Next item number.
    pub next_item: u64,
    /// What went wrong for this user.
    pub violations: Violations,
    /// `YYYYMMDD` the items are dated around.
    pub today: String,
    /// What the server offers (learned at set-up; the same for every user).
    pub server: Server,
    /// Writes sent without a precondition (plain WebDAV that does not honour one, or
    /// a device holding only a weak ETag): no stale write could be refused.
    pub unguarded: u64,
}

/// What the server offers the clients (docs/methodology.md, "The office": plain
/// WebDAV).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Server {
    /// `calendar-access` in the `DAV` header: the profiles' CalDAV sequences. Without
    /// it, plain WebDAV: PROPFIND, GET, PUT and DELETE only.
    pub caldav: bool,
    /// Conditional writes are honoured (a stale `If-Match`, and `If-None-Match: *` on
    /// an existing item, get 412). Assumed, and checked, on a CalDAV server; probed on
    /// plain WebDAV.
    pub conditional: bool,
}

impl User {
    /// The name of an item path under the calendar, or `None` for the calendar itself
    /// and anything outside it.
    pub fn item_name(&self, href: &str) -> Option<String> {
        let rest = href.strip_prefix(&self.cal)?;
        (!rest.is_empty() && !rest.contains('/')).then(|| rest.to_owned())
    }

    /// The number `n` of an item named `<user>-<n>.ics`.
    pub fn item_number(&self, name: &str) -> Option<u64> {
        name.strip_prefix(&self.name)?
            .strip_prefix('-')?
            .strip_suffix(".ics")?
            .parse()
            .ok()
    }

    /// The path of item `name`.
    pub fn item_path(&self, name: &str) -> String {
        format!("{}{name}", self.cal)
    }

    /// The text of item `n` at revision `seq`, dated within four weeks of today, to be
    /// shared by the truth and the mirror of the device that writes it.
    pub fn item_text(&self, n: u64, seq: u32) -> Text {
        Text::from(item_text(&self.name, &self.today, n, seq))
    }
}

/// The name of `user`'s item `n`, `<user>-<n>.ics` ([`User::item_number`] reads it back).
pub fn item_name(user: &str, n: u64) -> String {
    format!("{user}-{n}.ics")
}

/// The text of `user`'s item `n` at revision `seq`, dated within four weeks of `today`
/// (`YYYYMMDD`): what the office writes, and what a server's storage seeded before its
/// start holds (`volley_targets`' Radicale fixture), so set-up can take it as its own.
pub fn item_text(user: &str, today: &str, n: u64, seq: u32) -> String {
    let offset = (n.wrapping_mul(7) % 57) as i64 - 28;
    let hour = 8 + (n % 9) as u32;
    crate::item::event(&format!("{user}-{n}"), seq, today, offset, hour)
}

/// A user of two Thunderbird devices whose connections never open, on a CalDAV server
/// that honours preconditions: for tests that drive the state without a server.
#[cfg(test)]
pub(crate) fn offline_user(name: &str, cal: &str) -> User {
    let device = || {
        let conn = Conn::new(
            "127.0.0.1:9".parse().expect("an address"),
            "localhost",
            name,
            "x",
            std::time::Duration::from_secs(1),
        );
        Device::new(Profile::Thunderbird, conn)
    };
    User {
        name: name.into(),
        principal: format!("/{name}/"),
        home: format!("/{name}/calendars/"),
        cal: cal.into(),
        truth: Truth::default(),
        devices: vec![device(), device()],
        next_item: 0,
        violations: Violations::default(),
        today: "20261126".into(),
        server: Server {
            caldav: true,
            conditional: true,
        },
        unguarded: 0,
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
