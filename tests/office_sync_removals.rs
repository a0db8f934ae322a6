//! RFC 6578 3.5.2: a member added and then removed between two sync-collection reports
//! MUST be reported as removed in the second one, so that a client that added it
//! learns of the removal. The built-in server and Radicale do; Xandikos 0.4.10 does not
//! (its sync token is a git tree id and its delta the difference of two trees, where
//! such a member is in neither), which is why the office counts `missed-change` and
//! `deletion-not-seen` on Xandikos (docs/methodology.md, "The office": Xandikos). Each
//! server is started by volley-targets on a free loopback port and stopped after.
//!
//! If a Xandikos upgrade starts reporting the removal, the Xandikos test fails: the
//! methodology's note and the study's expectations must then change with it.

use crate::common;

use std::time::Duration;

use volley_office::http::request;
use volley_office::xml::{self, Multistatus};
use volley_office::Account;
use volley_targets::dav::DavAccount;
use volley_targets::{RunningTarget, TargetKind};

const T: Duration = Duration::from_secs(20);

/// A sync-collection REPORT of the account's calendar from `token`.
fn sync(t: &RunningTarget, a: &DavAccount, token: &str) -> Multistatus {
    let body = xml::sync_collection(token, "<D:getetag/>");
    let r = request(
        t.addr,
        Some(&Account::from(a)),
        "REPORT",
        &a.calendar,
        &[("Depth", "1")],
        body.as_bytes(),
        T,
    )
    .unwrap();
    assert_eq!(r.status, 207, "REPORT sync-collection from `{token}`");
    xml::parse_multistatus(&r.body).unwrap()
}

/// Takes a token, adds an item and removes it, and returns what the delta from that
/// token says of the item: its status, or `None` when the delta does not mention it.
fn added_and_removed_since_the_token(kind: TargetKind) -> Option<u16> {
    let t = common::dav_target(kind, 1);
    let a = t.dav.as_ref().expect("DAV accounts").accounts[0].clone();
    let token = sync(&t, &a, "")
        .sync_token
        .expect("the initial sync gives a token");
    let path = format!("{}removal-probe.ics", a.calendar);
    let item = volley_office::item::event("removal-probe", 0, "20261126", 0, 9);
    let put = request(
        t.addr,
        Some(&Account::from(&a)),
        "PUT",
        &path,
        &[
            ("Content-Type", "text/calendar; charset=utf-8"),
            ("If-None-Match", "*"),
        ],
        item.as_bytes(),
        T,
    )
    .unwrap();
    assert!(matches!(put.status, 201 | 204), "PUT: {}", put.status);
    let del = request(
        t.addr,
        Some(&Account::from(&a)),
        "DELETE",
        &path,
        &[],
        b"",
        T,
    )
    .unwrap();
    assert!(matches!(del.status, 200 | 204), "DELETE: {}", del.status);
    let delta = sync(&t, &a, &token);
    delta
        .entries
        .iter()
        .find(|e| e.href == path)
        .map(|e| e.status)
}

#[test]
fn the_builtin_server_reports_a_member_added_and_removed_since_the_token() {
    assert_eq!(
        added_and_removed_since_the_token(TargetKind::Builtin),
        Some(404)
    );
}

#[test]
fn radicale_reports_a_member_added_and_removed_since_the_token() {
    assert_eq!(
        added_and_removed_since_the_token(TargetKind::Radicale),
        Some(404)
    );
}

#[test]
fn xandikos_leaves_a_member_added_and_removed_since_the_token_out_of_the_delta() {
    assert_eq!(
        added_and_removed_since_the_token(TargetKind::Xandikos),
        None,
        "Xandikos now reports the removal: update docs/methodology.md (\"The office\": \
         Xandikos) and this test"
    );
}
