//! The end-of-day audit: a fresh client lists and fetches every user's calendar and
//! compares it with the truth. Nothing acknowledged may be missing, nothing deleted may
//! be back, nothing may be there twice, every item must read back as last written.
//! Items are read by calendar-multiget, or by GET on plain WebDAV.

use std::collections::BTreeMap;

use crate::check::Violation;
use crate::driver::{Ctx, MULTI};
use crate::http::Request;
use crate::item;
use crate::listing::{self, parse};
use crate::ops::Op;
use crate::state::{MirrorItem, Text, Truth, TruthItem, User};
use crate::xml;

/// Audits `user` through device 0's connection (not timed); returns the item count.
pub fn audit(ctx: Ctx<'_>, user: &mut User) -> usize {
    let Some(server) = listing::server_etags(ctx, user, 0) else {
        return 0;
    };
    let names: Vec<String> = server.keys().cloned().collect();
    let Some(read) = read_items(ctx, user, &names) else {
        return server.len();
    };
    let mut uids: BTreeMap<String, String> = BTreeMap::new();
    for (name, data) in &read {
        let uid = item::fingerprint(data)
            .and_then(|f| f.into_iter().find(|(k, _)| k == "UID").map(|(_, v)| v));
        if let Some(uid) = uid {
            if let Some(first) = uids.insert(uid.clone(), name.clone()) {
                user.violations.add(Violation::Duplicate, name, || {
                    format!("UID {uid} stored as {first} and {name}")
                });
            }
        }
    }
    let truth = std::mem::take(&mut user.truth);
    for (name, t) in &truth.items {
        match read.get(name) {
            None if !server.contains_key(name) => {
                user.violations.add(Violation::Lost, name, || {
                    format!("audit: {name} was acknowledged and is not on the server")
                })
            }
            None => user.violations.add(Violation::Lost, name, || {
                format!("audit: {name} is listed but cannot be fetched")
            }),
            Some(data) if !item::same(&t.data, data) => {
                user.violations.add(Violation::ReadMismatch, name, || {
                    format!(
                        "audit: {name} differs from its last write (revision {})",
                        t.seq
                    )
                })
            }
            Some(_) => {}
        }
    }
    for name in server.keys() {
        if !truth.items.contains_key(name) {
            let why = if truth.deleted.contains(name) {
                "was deleted and is back"
            } else {
                "was never written"
            };
            user.violations.add(Violation::Unexpected, name, || {
                format!("audit: {name} {why}")
            });
        }
    }
    let count = server.len();
    user.truth = truth;
    count
}

/// The text of each of `names` in `user`'s calendar, by calendar-multiget 100 at a time,
/// or GET on plain WebDAV (device 0's connection); `None` when a request failed.
fn read_items(ctx: Ctx<'_>, user: &mut User, names: &[String]) -> Option<BTreeMap<String, String>> {
    if !user.server.caldav {
        return crate::plain::read_all(ctx, user, names);
    }
    let mut read = BTreeMap::new();
    for chunk in names.chunks(100) {
        let paths: Vec<String> = chunk.iter().map(|n| user.item_path(n)).collect();
        let req = Request::new(Op::ReportMultiget, "REPORT", user.cal.clone())
            .depth("1")
            .xml(xml::multiget(paths.iter().map(String::as_str)));
        let reply = ctx.call(&mut user.devices[0], &mut user.violations, req, MULTI)?;
        for e in parse(user, &reply.body, "audit multiget")?.entries {
            if let (Some(name), Some(data)) = (user.item_name(&e.href), e.data) {
                read.insert(name, data);
            }
        }
    }
    Some(read)
}

/// Takes what the server holds as `user`'s truth (untimed), after a lead-in in which
/// one of its requests failed: a write that timed out or was reset may or may not have
/// been applied, and every later check of the day would count that doubt against the
/// server (docs/methodology.md, "The office": the lead-in's failures). Every listed
/// item is read back and becomes the truth, and every device's copy, with the ETag
/// listed; an item the truth held that is gone counts as deleted. False when the calendar cannot be read back
/// (a request failed, or an item is listed that none of the user's devices could have
/// written): the lead-in could not finish.
pub fn reconcile(ctx: Ctx<'_>, user: &mut User) -> bool {
    let Some(server) = listing::server_etags(ctx, user, 0) else {
        return false;
    };
    let names: Vec<String> = server.keys().cloned().collect();
    let Some(mut read) = read_items(ctx, user, &names) else {
        return false;
    };
    let old = std::mem::take(&mut user.truth);
    let mut truth = Truth {
        items: BTreeMap::new(),
        deleted: old.deleted,
    };
    for (name, etag) in server {
        let (Some(n), Some(data)) = (user.item_number(&name), read.remove(&name)) else {
            user.truth = Truth {
                items: old.items,
                deleted: truth.deleted,
            };
            return false;
        };
        let seq = sequence_of(&data);
        let mut old_etags = Vec::new();
        if let Some(before) = old.items.get(&name) {
            old_etags.clone_from(&before.old_etags);
            old_etags.extend(before.etag.clone().filter(|e| Some(e) != etag.as_ref()));
        }
        truth.deleted.remove(&name);
        truth.items.insert(
            name,
            TruthItem {
                n,
                seq,
                data: data.into(),
                etag,
                old_etags,
            },
        );
    }
    for name in old.items.into_keys() {
        if !truth.items.contains_key(&name) {
            truth.deleted.insert(name);
        }
    }
    // Every device's copy becomes what the server holds too: a device that saw an
    // item the truth did not yet hold may have dropped it, and its next delta (from a
    // later token) would never bring it back. Their tokens stay: a delta from an older
    // token only repeats what the copy already has.
    for dev in &mut user.devices {
        dev.mirror = truth
            .items
            .iter()
            .map(|(name, t)| {
                let copy = MirrorItem {
                    etag: t.etag.clone(),
                    data: Text::clone(&t.data),
                };
                (name.clone(), copy)
            })
            .collect();
        dev.written.clear();
    }
    user.truth = truth;
    true
}

/// An item's SEQUENCE (its revision), 0 when it has none.
fn sequence_of(data: &str) -> u32 {
    item::fingerprint(data)
        .and_then(|f| f.into_iter().find(|(k, _)| k == "SEQUENCE"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0)
}
