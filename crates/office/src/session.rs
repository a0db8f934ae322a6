//! Each profile's sync sessions, request by request (docs/methodology.md, "The
//! office"): the initial sync (discovery, full listing, fetch of everything) and the
//! poll. `listing` does the reading; `writes` the uploads DAVx5 makes at sync time;
//! on plain WebDAV every profile syncs as `plain` says.

use std::collections::BTreeSet;

use crate::driver::{Ctx, MULTI};
use crate::http::Request;
use crate::listing::{self, parse};
use crate::ops::{Op, SessionKind};
use crate::profile::Profile;
use crate::state::User;
use crate::writes;
use crate::xml::{self, Entry};

const TB_CAL: &str = "<D:resourcetype/><D:owner/><D:current-user-principal/><D:current-user-privilege-set/><D:supported-report-set/><C:supported-calendar-component-set/><CS:getctag/><D:sync-token/>";
const TB_PRINCIPAL: &str = "<C:calendar-home-set/><C:calendar-user-address-set/><C:schedule-inbox-URL/><C:schedule-outbox-URL/>";
const DX_ROOT: &str = "<D:current-user-principal/>";
const DX_PRINCIPAL: &str =
    "<D:resourcetype/><D:displayname/><C:calendar-home-set/><C:calendar-user-address-set/>";
const DX_HOME: &str = "<D:resourcetype/><D:displayname/><A:calendar-color/><C:calendar-description/><C:calendar-timezone/><C:supported-calendar-component-set/><D:current-user-privilege-set/><D:sync-token/><CS:getctag/><CS:source/>";
const DX_CAL: &str = "<CS:getctag/><D:sync-token/><D:supported-report-set/>";
const DX_POLL: &str = "<CS:getctag/><D:sync-token/>";
const EV_CAL: &str = "<D:resourcetype/><D:displayname/><CS:getctag/><C:supported-calendar-component-set/><A:calendar-color/>";
const CTAG: &str = "<CS:getctag/>";
const AP_ROOT: &str = "<D:current-user-principal/><D:principal-collection-set/><D:resourcetype/>";
const AP_PRINCIPAL: &str = "<C:calendar-home-set/><C:calendar-user-address-set/><D:displayname/><D:principal-URL/><D:resourcetype/><D:supported-report-set/>";
const AP_HOME: &str = "<D:resourcetype/><D:displayname/><CS:getctag/><D:sync-token/><A:calendar-color/><A:calendar-order/><C:supported-calendar-component-set/><D:current-user-privilege-set/><D:supported-report-set/>";
const AP_POLL: &str = "<CS:getctag/><D:sync-token/>";

/// Evolution lists five weeks either side of today.
const EVOLUTION_WEEKS: i64 = 5;

/// Runs one sync session of device `d` (its initial sync until one succeeded, else a
/// poll), records it, and checks the device against the truth when it succeeded.
pub fn run(ctx: Ctx<'_>, user: &mut User, d: usize, intended_ns: u64) {
    let start = crate::http::ns_since(ctx.rec.origin);
    let kind = if user.devices[d].ready {
        SessionKind::Poll
    } else {
        SessionKind::Initial
    };
    let profile = user.devices[d].profile;
    let outcome = match (kind, profile) {
        _ if !user.server.caldav => {
            crate::plain::sync(ctx, user, d, kind == SessionKind::Initial).then_some(None)
        }
        (SessionKind::Initial, Profile::Thunderbird) => thunderbird_initial(ctx, user, d),
        (SessionKind::Initial, Profile::Davx5) => davx5_initial(ctx, user, d),
        (SessionKind::Initial, Profile::Evolution) => evolution_initial(ctx, user, d),
        (SessionKind::Initial, Profile::Apple) => apple_initial(ctx, user, d),
        (SessionKind::Poll, Profile::Thunderbird) => thunderbird_poll(ctx, user, d),
        (SessionKind::Poll, Profile::Davx5) => davx5_poll(ctx, user, d),
        (SessionKind::Poll, Profile::Evolution) => evolution_poll(ctx, user, d),
        (SessionKind::Poll, Profile::Apple) => apple_poll(ctx, user, d),
    };
    if ctx.measured {
        ctx.rec
            .record_session(kind, intended_ns, start, outcome.is_some());
    }
    if let Some(seen) = outcome {
        user.devices[d].ready = true;
        let own_missing = match seen {
            Some(seen) => listing::own_missing(user, d, &seen),
            None => Vec::new(),
        };
        user.devices[d].written.clear();
        listing::verify(ctx, user, d, own_missing);
    }
}

/// A session's result: `None` if a request failed; else the names a sync-collection
/// delta mentioned (`Some(None)` when the session used no delta, or learned nothing new).
type Outcome = Option<Option<BTreeSet<String>>>;

/// PROPFIND `path` with `props` at `depth`; the parsed entries.
fn propfind(
    ctx: Ctx<'_>,
    user: &mut User,
    d: usize,
    path: String,
    depth: &'static str,
    props: &str,
) -> Option<Vec<Entry>> {
    let op = if depth == "0" {
        Op::PropfindD0
    } else {
        Op::PropfindD1
    };
    let req = Request::new(op, "PROPFIND", path)
        .depth(depth)
        .xml(xml::propfind(props));
    let reply = ctx.call(&mut user.devices[d], &mut user.violations, req, MULTI)?;
    Some(parse(user, &reply.body, "PROPFIND")?.entries)
}

/// The entry for `path` in a listing.
fn entry_for<'a>(entries: &'a [Entry], path: &str) -> Option<&'a Entry> {
    entries.iter().find(|e| e.href == path)
}

/// Reads the calendar's ctag and sync support from a Depth 0 answer; returns whether
/// the ctag changed since the device last saw it (a missing ctag counts as changed).
fn note_ctag(user: &mut User, d: usize, entries: &[Entry]) -> bool {
    let cal = user.cal.clone();
    let dev = &mut user.devices[d];
    let Some(e) = entry_for(entries, &cal).or(entries.first()) else {
        return true;
    };
    if e.sync_report {
        dev.sync_offered = true;
    }
    let changed = e.ctag.is_none() || e.ctag != dev.ctag;
    dev.ctag = e.ctag.clone();
    changed
}

/// Discovery from the server root: current-user-principal, then the principal's
/// calendar-home-set.
fn discover(
    ctx: Ctx<'_>,
    user: &mut User,
    d: usize,
    root_props: &str,
    principal_props: &str,
) -> Option<()> {
    let root = propfind(ctx, user, d, "/".into(), "0", root_props)?;
    let principal = root
        .iter()
        .find_map(|e| e.principal.clone())
        .unwrap_or_else(|| user.principal.clone());
    propfind(ctx, user, d, principal, "0", principal_props)?;
    Some(())
}

fn full_listing(ctx: Ctx<'_>, user: &mut User, d: usize) -> Outcome {
    if user.devices[d].sync_offered {
        Some(Some(listing::sync_collection(ctx, user, d)?))
    } else {
        listing::etag_listing(ctx, user, d).then_some(None)
    }
}

fn thunderbird_initial(ctx: Ctx<'_>, user: &mut User, d: usize) -> Outcome {
    let cal = user.cal.clone();
    let entries = propfind(ctx, user, d, cal.clone(), "0", TB_CAL)?;
    note_ctag(user, d, &entries);
    let req = Request::new(Op::Options, "OPTIONS", cal);
    ctx.call(&mut user.devices[d], &mut user.violations, req, &[200, 204])?;
    let principal = entries
        .iter()
        .find_map(|e| e.principal.clone())
        .unwrap_or_else(|| user.principal.clone());
    propfind(ctx, user, d, principal, "0", TB_PRINCIPAL)?;
    full_listing(ctx, user, d)
}

fn thunderbird_poll(ctx: Ctx<'_>, user: &mut User, d: usize) -> Outcome {
    if user.devices[d].sync_offered {
        return Some(Some(listing::sync_collection(ctx, user, d)?));
    }
    let cal = user.cal.clone();
    let entries = propfind(ctx, user, d, cal, "0", CTAG)?;
    if !note_ctag(user, d, &entries) {
        return Some(None);
    }
    listing::etag_listing(ctx, user, d).then_some(None)
}

fn davx5_initial(ctx: Ctx<'_>, user: &mut User, d: usize) -> Outcome {
    discover(ctx, user, d, DX_ROOT, DX_PRINCIPAL)?;
    let home = user.home.clone();
    propfind(ctx, user, d, home, "1", DX_HOME)?;
    let cal = user.cal.clone();
    let entries = propfind(ctx, user, d, cal, "0", DX_CAL)?;
    note_ctag(user, d, &entries);
    full_listing(ctx, user, d)
}

fn davx5_poll(ctx: Ctx<'_>, user: &mut User, d: usize) -> Outcome {
    let cal = user.cal.clone();
    let entries = propfind(ctx, user, d, cal, "0", DX_POLL)?;
    let changed = note_ctag(user, d, &entries);
    let uploaded = writes::upload_pending(ctx, user, d)?;
    if !changed && !uploaded {
        return Some(None);
    }
    full_listing(ctx, user, d)
}

fn evolution_query(ctx: Ctx<'_>, user: &mut User, d: usize) -> Outcome {
    let (start, end) = window(&user.today);
    let req = Request::new(Op::ReportQuery, "REPORT", user.cal.clone())
        .depth("1")
        .xml(xml::calendar_query(Some((&start, &end))));
    let reply = ctx.call(&mut user.devices[d], &mut user.violations, req, MULTI)?;
    let ms = parse(user, &reply.body, "calendar-query")?;
    let mut seen = BTreeSet::new();
    let names = listing::apply(user, d, &ms, &mut seen);
    listing::drop_unlisted(user, d, &seen);
    let batch = user.devices[d].profile.multiget_batch();
    listing::fetch(ctx, user, d, &names, batch).then_some(None)
}

/// Evolution's time-range, `EVOLUTION_WEEKS` either side of `today` (`YYYYMMDD`).
fn window(today: &str) -> (String, String) {
    let day = |weeks: i64| format!("{}T000000Z", crate::item::shift_date(today, weeks * 7));
    (day(-EVOLUTION_WEEKS), day(EVOLUTION_WEEKS))
}

fn evolution_initial(ctx: Ctx<'_>, user: &mut User, d: usize) -> Outcome {
    let cal = user.cal.clone();
    let entries = propfind(ctx, user, d, cal, "0", EV_CAL)?;
    note_ctag(user, d, &entries);
    evolution_query(ctx, user, d)
}

fn evolution_poll(ctx: Ctx<'_>, user: &mut User, d: usize) -> Outcome {
    let cal = user.cal.clone();
    let entries = propfind(ctx, user, d, cal, "0", CTAG)?;
    if !note_ctag(user, d, &entries) {
        return Some(None);
    }
    evolution_query(ctx, user, d)
}

/// Apple Calendar reads its calendars from a Depth 1 PROPFIND of the home (getctag,
/// sync-token per calendar). Its newer home-level sync-collection is not used: neither
/// the built-in server nor Radicale reports a calendar's content changes in its home's
/// delta, so a client relying on it would never see a change there.
fn apple_initial(ctx: Ctx<'_>, user: &mut User, d: usize) -> Outcome {
    discover(ctx, user, d, AP_ROOT, AP_PRINCIPAL)?;
    let home = user.home.clone();
    let entries = propfind(ctx, user, d, home, "1", AP_HOME)?;
    note_ctag(user, d, &entries);
    full_listing(ctx, user, d)
}

fn apple_poll(ctx: Ctx<'_>, user: &mut User, d: usize) -> Outcome {
    let home = user.home.clone();
    let entries = propfind(ctx, user, d, home, "1", AP_POLL)?;
    let cal = user.cal.clone();
    let changed = match entry_for(&entries, &cal) {
        Some(e) => {
            // The ctag when the server has one, else the calendar's sync-token.
            let dev = &mut user.devices[d];
            let changed = match &e.ctag {
                Some(c) => dev.ctag.as_ref() != Some(c),
                None => e.sync_token.is_none() || e.sync_token != dev.token,
            };
            dev.ctag = e.ctag.clone();
            changed
        }
        None => true,
    };
    if !changed {
        return Some(None);
    }
    full_listing(ctx, user, d)
}

#[cfg(test)]
mod tests {
    #[test]
    fn evolution_window_is_five_weeks_each_side() {
        assert_eq!(
            super::window("20261126"),
            ("20261022T000000Z".into(), "20261231T000000Z".into())
        );
    }
}
