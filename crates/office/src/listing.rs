//! Reading the server's view into a device's mirror: listings (PROPFIND Depth 1,
//! calendar-query, sync-collection), fetches (calendar-multiget), and the check that
//! follows every sync: the mirror must equal the truth.

use std::collections::{BTreeMap, BTreeSet};

use crate::check::Violation;
use crate::driver::{Ctx, MULTI};
use crate::http::Request;
use crate::item;
use crate::ops::Op;
use crate::state::{MirrorItem, User};
use crate::xml::{self, Multistatus};

/// Properties of an ETag listing.
pub const ETAGS: &str = "<D:getetag/><D:getcontenttype/>";
/// Most rounds of a truncated sync-collection before the client gives up.
const MAX_SYNC_ROUNDS: usize = 100;

/// Parses a 207 body, counting a malformed one.
pub fn parse(user: &mut User, body: &[u8], what: &str) -> Option<Multistatus> {
    match xml::parse_multistatus(body) {
        Ok(m) => Some(m),
        Err(e) => {
            user.violations
                .add_each(Violation::Malformed, || format!("{what}: {e}"));
            None
        }
    }
}

/// Applies a listing's entries to device `d`'s mirror; returns the names to fetch
/// (new, or with another ETag than the mirror's). `seen` gathers every item name the
/// listing mentions; deletions (404 entries of a sync delta) leave the mirror.
pub fn apply(
    user: &mut User,
    d: usize,
    ms: &Multistatus,
    seen: &mut BTreeSet<String>,
) -> Vec<String> {
    let mut fetch = Vec::new();
    let mut this_listing = BTreeSet::new();
    for e in &ms.entries {
        let Some(name) = user.item_name(&e.href) else {
            continue;
        };
        if !this_listing.insert(name.clone()) {
            user.violations.add(Violation::Duplicate, &name, || {
                format!("{name} listed twice in one answer")
            });
        }
        seen.insert(name.clone());
        let dev = &mut user.devices[d];
        match e.status {
            404 => {
                dev.mirror.remove(&name);
            }
            200 => {
                let known = dev.mirror.get(&name).and_then(|m| m.etag.as_ref());
                if e.etag.is_none() || known != e.etag.as_ref() {
                    fetch.push(name);
                }
            }
            _ => {}
        }
    }
    fetch
}

/// Drops mirror items a full listing did not mention.
pub fn drop_unlisted(user: &mut User, d: usize, seen: &BTreeSet<String>) {
    user.devices[d].mirror.retain(|n, _| seen.contains(n));
}

/// Fetches `names` with calendar-multiget, `batch` hrefs at a time, into the mirror.
/// Returns false if a request failed.
pub fn fetch(ctx: Ctx<'_>, user: &mut User, d: usize, names: &[String], batch: usize) -> bool {
    for chunk in names.chunks(batch.max(1)) {
        let paths: Vec<String> = chunk.iter().map(|n| user.item_path(n)).collect();
        let req = Request::new(Op::ReportMultiget, "REPORT", user.cal.clone())
            .depth("1")
            .xml(xml::multiget(paths.iter().map(String::as_str)));
        let Some(reply) = ctx.call(&mut user.devices[d], &mut user.violations, req, MULTI) else {
            return false;
        };
        let Some(ms) = parse(user, &reply.body, "calendar-multiget") else {
            return false;
        };
        for e in &ms.entries {
            let Some(name) = user.item_name(&e.href) else {
                continue;
            };
            let dev = &mut user.devices[d];
            match (e.status, &e.data) {
                (200, Some(data)) => {
                    if let Some(old) = dev.mirror.get(&name) {
                        if old.etag.is_some() && old.etag != e.etag && item::same(&old.data, data) {
                            user.violations.add(
                                Violation::EtagChangedWithoutContent,
                                &name,
                                || {
                                    format!(
                                        "{name}: ETag {:?} -> {:?}, content unchanged",
                                        old.etag, e.etag
                                    )
                                },
                            );
                        }
                    }
                    // A cheap shape check: a full parse of every fetched item would
                    // cost more than the request; items that differ from the truth
                    // are parsed when compared.
                    let shaped = data.trim_start().starts_with("BEGIN:VCALENDAR")
                        && data.trim_end().ends_with("END:VCALENDAR");
                    if let Some(t) = user.truth.items.get(&name) {
                        // The version the truth holds, fetched: it must read as written
                        // (unless the server kept the tag across an edit, counted as
                        // `etag-unchanged` where it happened).
                        let current = e.etag.is_some() && e.etag == t.etag;
                        let reused = t.old_etags.iter().any(|o| Some(o) == e.etag.as_ref());
                        if current && !reused && !item::same(&t.data, data) {
                            user.violations.add(Violation::ReadMismatch, &name, || {
                                format!(
                                    "{name}: multiget returned other content for its current ETag"
                                )
                            });
                        }
                    }
                    if !shaped {
                        user.violations.add(Violation::Malformed, &name, || {
                            format!("{name}: calendar-data does not parse")
                        });
                    }
                    user.devices[d].mirror.insert(
                        name,
                        MirrorItem {
                            etag: e.etag.clone(),
                            data: data.clone(),
                        },
                    );
                }
                (404, _) => {
                    dev.mirror.remove(&name);
                }
                _ => {}
            }
        }
    }
    true
}

/// A PROPFIND Depth 1 ETag listing of the calendar into the mirror (full: unlisted
/// items leave), then a fetch of what changed.
pub fn etag_listing(ctx: Ctx<'_>, user: &mut User, d: usize) -> bool {
    let req = Request::new(Op::PropfindD1, "PROPFIND", user.cal.clone())
        .depth("1")
        .xml(xml::propfind(ETAGS));
    let Some(reply) = ctx.call(&mut user.devices[d], &mut user.violations, req, MULTI) else {
        return false;
    };
    let Some(ms) = parse(user, &reply.body, "PROPFIND Depth 1") else {
        return false;
    };
    let mut seen = BTreeSet::new();
    let names = apply(user, d, &ms, &mut seen);
    drop_unlisted(user, d, &seen);
    if !user.server.caldav {
        // Plain WebDAV has no multiget.
        return crate::plain::fetch(ctx, user, d, &names);
    }
    let batch = user.devices[d].profile.multiget_batch();
    fetch(ctx, user, d, &names, batch)
}

/// A sync-collection from the device's token (none: an initial listing), repeated while
/// the server truncates, then a fetch of what changed. Returns the names the deltas
/// mentioned, or `None` if a request failed. An invalid token (403/409) restarts from
/// an initial listing, as clients do.
pub fn sync_collection(ctx: Ctx<'_>, user: &mut User, d: usize) -> Option<BTreeSet<String>> {
    let mut seen = BTreeSet::new();
    let mut fetch_names = Vec::new();
    let mut full = user.devices[d].token.is_none();
    for _ in 0..MAX_SYNC_ROUNDS {
        let token = user.devices[d].token.clone().unwrap_or_default();
        let req = Request::new(Op::ReportSync, "REPORT", user.cal.clone())
            .depth("1")
            .xml(xml::sync_collection(&token, ETAGS));
        let reply = ctx.call(
            &mut user.devices[d],
            &mut user.violations,
            req,
            &[207, 403, 409],
        )?;
        if reply.status != 207 {
            if token.is_empty() {
                return None;
            }
            user.devices[d].token = None;
            full = true;
            continue;
        }
        let ms = parse(user, &reply.body, "sync-collection")?;
        fetch_names.extend(apply(user, d, &ms, &mut seen));
        user.devices[d].token = ms.sync_token.clone();
        if !ms.truncated() || ms.sync_token.is_none() {
            break;
        }
    }
    if full {
        drop_unlisted(user, d, &seen);
    }
    fetch_names.sort();
    fetch_names.dedup();
    let batch = user.devices[d].profile.multiget_batch();
    fetch(ctx, user, d, &fetch_names, batch).then_some(seen)
}

/// What a device got wrong after a sync, before the server is asked to attribute it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gap {
    /// The truth has it, the mirror does not.
    Missing,
    /// Both have it, with different content.
    Stale,
    /// Deleted in the truth, still in the mirror.
    NotDeleted,
    /// In the mirror, never in the truth.
    Extra,
    /// Written by this device since its last token, absent from the delta.
    DeltaOmitted,
}

/// The check after every successful sync of device `d`: its mirror must equal the
/// truth, and its delta must list its own writes (`own_missing`). Each gap is
/// attributed with a fresh ETag listing of the calendar (a checker's request, timed as
/// PROPFIND Depth 1): an item the server has but the device missed is a missed change;
/// one the server lacks is lost; a changed item listed with the device's old ETag is
/// an unchanged ETag.
pub fn verify(ctx: Ctx<'_>, user: &mut User, d: usize, own_missing: Vec<String>) {
    let mut gaps: Vec<(String, Gap)> = Vec::new();
    {
        let dev = &user.devices[d];
        for (name, t) in &user.truth.items {
            match dev.mirror.get(name) {
                None => gaps.push((name.clone(), Gap::Missing)),
                Some(m) if !item::same(&t.data, &m.data) => gaps.push((name.clone(), Gap::Stale)),
                Some(_) => {}
            }
        }
        for name in dev.mirror.keys() {
            if !user.truth.items.contains_key(name) {
                let gap = if user.truth.deleted.contains(name) {
                    Gap::NotDeleted
                } else {
                    Gap::Extra
                };
                gaps.push((name.clone(), gap));
            }
        }
        for name in own_missing {
            gaps.push((name, Gap::DeltaOmitted));
        }
    }
    if gaps.is_empty() {
        return;
    }
    let Some(server) = server_etags(ctx, user, d) else {
        return;
    };
    for (name, gap) in gaps {
        let on_server = server.get(&name);
        let in_truth = user.truth.items.contains_key(&name);
        let kind = match gap {
            Gap::Missing | Gap::DeltaOmitted if in_truth => {
                if on_server.is_some() {
                    Violation::MissedChange
                } else {
                    Violation::Lost
                }
            }
            Gap::DeltaOmitted if on_server.is_none() => Violation::MissedChange,
            Gap::DeltaOmitted | Gap::Missing => Violation::Unexpected,
            Gap::Stale => {
                let mirror_etag = user.devices[d]
                    .mirror
                    .get(&name)
                    .and_then(|m| m.etag.clone());
                let reused =
                    user.truth.items.get(&name).is_some_and(|t| {
                        t.old_etags.iter().any(|o| Some(o) == mirror_etag.as_ref())
                    });
                match on_server {
                    // The server lists the tag the device holds: it kept the tag across
                    // an edit, or it serves other content under the current tag.
                    Some(tag) if *tag == mirror_etag && reused => Violation::EtagUnchanged,
                    Some(tag) if *tag == mirror_etag => Violation::ReadMismatch,
                    _ => Violation::MissedChange,
                }
            }
            Gap::NotDeleted if on_server.is_none() => Violation::DeletionNotSeen,
            Gap::NotDeleted | Gap::Extra => Violation::Unexpected,
        };
        let profile = user.devices[d].profile.name();
        user.violations.add(kind, &name, || {
            format!("{name}: {gap:?} on a {profile} device after its sync")
        });
    }
}

/// The calendar's items and ETags as the server lists them now.
pub fn server_etags(
    ctx: Ctx<'_>,
    user: &mut User,
    d: usize,
) -> Option<BTreeMap<String, Option<String>>> {
    let req = Request::new(Op::PropfindD1, "PROPFIND", user.cal.clone())
        .depth("1")
        .xml(xml::propfind(ETAGS));
    let reply = ctx.call(&mut user.devices[d], &mut user.violations, req, MULTI)?;
    let ms = parse(user, &reply.body, "PROPFIND Depth 1")?;
    Some(
        ms.entries
            .iter()
            .filter(|e| e.status == 200)
            .filter_map(|e| Some((user.item_name(&e.href)?, e.etag.clone())))
            .collect(),
    )
}
