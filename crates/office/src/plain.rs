//! The clients on plain WebDAV (a server whose `DAV` header lacks `calendar-access`:
//! nginx dav-ext, Apache mod_dav, lighttpd mod_webdav): no principal to discover, no
//! REPORT, so every profile syncs the one way such a server allows
//! (docs/methodology.md, "The office": plain WebDAV). The first sync reads the
//! collection (PROPFIND Depth 0), every sync lists it (PROPFIND Depth 1 with getetag)
//! and GETs what is new or changed; DAVx5 still uploads first. Without getetag in the
//! listing (nginx) every item is fetched on every sync: that is what such a server
//! costs a correct client, and it shows in the sync latency.

use std::collections::BTreeMap;

use crate::check::Violation;
use crate::driver::{Ctx, MULTI};
use crate::http::Request;
use crate::item;
use crate::listing::{self, parse};
use crate::ops::Op;
use crate::state::{MirrorItem, User};
use crate::writes;
use crate::xml;

/// What a client reads of the collection at its first sync.
const COLLECTION: &str =
    "<D:resourcetype/><D:displayname/><D:getetag/><CS:getctag/><D:sync-token/>";

/// A sync of device `d`: the first one reads the collection, DAVx5 uploads its
/// pending decisions, then the listing and the fetch. False if a request failed.
pub fn sync(ctx: Ctx<'_>, user: &mut User, d: usize, initial: bool) -> bool {
    if initial {
        let req = Request::new(Op::PropfindD0, "PROPFIND", user.cal.clone())
            .depth("0")
            .xml(xml::propfind(COLLECTION));
        let Some(reply) = ctx.call(&mut user.devices[d], &mut user.violations, req, MULTI) else {
            return false;
        };
        if parse(user, &reply.body, "PROPFIND Depth 0").is_none() {
            return false;
        }
    } else if user.devices[d].profile.uploads_at_sync()
        && writes::upload_pending(ctx, user, d).is_none()
    {
        return false;
    }
    listing::etag_listing(ctx, user, d)
}

/// Whether two ETags name the same version by weak comparison (RFC 9110 8.8.3.2):
/// Apache marks an ETag weak for a second after a write and strong later, the same
/// version all along.
fn same_version(a: &str, b: &str) -> bool {
    a.trim_start_matches("W/") == b.trim_start_matches("W/")
}

/// GETs `names` into device `d`'s mirror, checking each as a multiget's items are
/// checked ([`check_read`]). False if a request failed.
pub fn fetch(ctx: Ctx<'_>, user: &mut User, d: usize, names: &[String]) -> bool {
    for name in names {
        let req = Request::new(Op::Get, "GET", user.item_path(name));
        let Some(reply) = ctx.call(
            &mut user.devices[d],
            &mut user.violations,
            req,
            &[200, 404, 410],
        ) else {
            return false;
        };
        if reply.status != 200 {
            // Deleted since the listing.
            user.devices[d].mirror.remove(name);
            continue;
        }
        let data = user
            .truth
            .share(name, &String::from_utf8_lossy(&reply.body));
        let etag = reply.header("ETag").map(str::to_owned);
        check_read(user, d, name, etag.as_deref(), &data);
        user.devices[d]
            .mirror
            .insert(name.clone(), MirrorItem { etag, data });
    }
    true
}

/// The checks a multiget's items get (`listing::fetch`), on one GET: the ETag changed
/// only if the content did (by weak comparison, see [`same_version`]); what the
/// truth's current ETag names reads as last written (unless the server kept the tag
/// across an edit, counted where it happened); it is shaped like iCalendar (a cheap
/// check: items differing from the truth are parsed when compared).
fn check_read(user: &mut User, d: usize, name: &str, etag: Option<&str>, data: &str) {
    if let Some(old) = user.devices[d].mirror.get(name) {
        if let (Some(o), Some(n)) = (old.etag.as_deref(), etag) {
            if !same_version(o, n) && item::same(&old.data, data) {
                let (o, n) = (o.to_owned(), n.to_owned());
                user.violations
                    .add(Violation::EtagChangedWithoutContent, name, || {
                        format!("{name}: ETag {o} -> {n}, content unchanged")
                    });
            }
        }
    }
    if let (Some(t), Some(tag)) = (user.truth.items.get(name), etag) {
        let current = t.etag.as_deref().is_some_and(|c| same_version(c, tag));
        let reused = t.old_etags.iter().any(|o| same_version(o, tag));
        if current && !reused && !item::same(&t.data, data) {
            user.violations.add(Violation::ReadMismatch, name, || {
                format!("{name}: GET returned other content for its current ETag")
            });
        }
    }
    let shaped = data.trim_start().starts_with("BEGIN:VCALENDAR")
        && data.trim_end().ends_with("END:VCALENDAR");
    if !shaped {
        user.violations.add(Violation::Malformed, name, || {
            format!("{name}: GET answered something that is not iCalendar")
        });
    }
}

/// The audit's reads: each of `names` by GET (no multiget on plain WebDAV). `None` if
/// a request failed.
pub fn read_all(
    ctx: Ctx<'_>,
    user: &mut User,
    names: &[String],
) -> Option<BTreeMap<String, String>> {
    let mut read = BTreeMap::new();
    for name in names {
        let req = Request::new(Op::Get, "GET", user.item_path(name));
        let reply = ctx.call(&mut user.devices[0], &mut user.violations, req, &[200, 404])?;
        if reply.status == 200 {
            read.insert(
                name.clone(),
                String::from_utf8_lossy(&reply.body).into_owned(),
            );
        }
    }
    Some(read)
}

#[cfg(test)]
mod tests {
    #[test]
    fn weak_and_strong_forms_of_one_etag_are_the_same_version() {
        assert!(super::same_version("W/\"27-61\"", "\"27-61\""));
        assert!(super::same_version("\"a\"", "\"a\""));
        assert!(!super::same_version("W/\"27-61\"", "\"27-62\""));
    }
}
