//! A short office day of 20 users against Xandikos, started by volley_targets with 20
//! DAV accounts: each user's calendar at `/<name>/calendars/calendar/`, every request
//! carrying the account's `X-Remote-User` (Xandikos trusts that header, as behind its
//! authenticating proxy). Every correctness check must pass, with every profile's
//! CalDAV sequence (sync-collection, multiget, calendar-query) in use.
//! scripts/install-deps.sh installs Xandikos into the venv; a missing one fails here.

use crate::common;

use std::time::Duration;

use volley_office::{Mix, OfficeConfig};
use volley_targets::TargetKind;

#[test]
fn twenty_users_pass_every_check_against_xandikos() {
    let target = common::dav_target(TargetKind::Xandikos, 20);
    let accounts = common::office_accounts(&target, 20);
    assert!(accounts[0]
        .headers
        .iter()
        .any(|(n, _)| n == "X-Remote-User"));
    let mut cfg = OfficeConfig::with_accounts(&format!("http://{}/", target.addr), accounts);
    cfg.mix = Mix::default();
    // Xandikos is a Python server committing each write to git, several times slower
    // than Radicale: a light day (60 decisions, a third of it in 15 s, 5 items to start
    // with) keeps the test short while every operation type still runs.
    cfg.decisions_per_day = 60;
    cfg.compress = 480.0;
    // A cold day: the first syncs' requests are counted with the rest.
    cfg.cold_start = true;
    cfg.duration = Duration::from_secs(15);
    cfg.initial_items = 5;
    cfg.seed = 11;
    let run = volley_office::run(&cfg).expect("the day starts");
    let r = run.report;
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(r.protocol, "caldav", "{j}");
    assert_eq!(r.violations_total, 0, "{j}");
    assert!(r.lacks.is_empty(), "Xandikos offers everything: {j}");
    assert!(r.checks_not_applicable.is_empty(), "{j}");
    assert_eq!(r.unguarded_writes, 0, "{j}");
    for op in &r.ops {
        assert!(op.count > 0, "{} never ran: {j}", op.name);
        assert_eq!(op.errors, 0, "{}: {j}", op.name);
    }
    // Every device of every user made its first sync.
    assert_eq!(r.sessions[0].count, 40, "{j}");
    assert!(r.items_at_end >= 20, "{j}");
}
