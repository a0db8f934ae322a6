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
use crate::state::User;
use crate::xml;

/// Audits `user` through device 0's connection (not timed); returns the item count.
pub fn audit(ctx: Ctx<'_>, user: &mut User) -> usize {
    let Some(server) = listing::server_etags(ctx, user, 0) else {
        return 0;
    };
    let mut read: BTreeMap<String, String> = BTreeMap::new();
    let names: Vec<String> = server.keys().cloned().collect();
    let multiget = user.server.caldav;
    if !multiget {
        match crate::plain::read_all(ctx, user, &names) {
            Some(r) => read = r,
            None => return server.len(),
        }
    }
    for chunk in names.chunks(100).filter(|_| multiget) {
        let paths: Vec<String> = chunk.iter().map(|n| user.item_path(n)).collect();
        let req = Request::new(Op::ReportMultiget, "REPORT", user.cal.clone())
            .depth("1")
            .xml(xml::multiget(paths.iter().map(String::as_str)));
        let Some(reply) = ctx.call(&mut user.devices[0], &mut user.violations, req, MULTI) else {
            return server.len();
        };
        let Some(ms) = parse(user, &reply.body, "audit multiget") else {
            return server.len();
        };
        for e in ms.entries {
            if let (Some(name), Some(data)) = (user.item_name(&e.href), e.data) {
                read.insert(name, data);
            }
        }
    }
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
