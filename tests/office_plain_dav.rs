//! Short office days of 10 users against plain WebDAV: nginx (dav + dav-ext), Apache
//! (event MPM, mod_dav_fs) and lighttpd (mod_webdav), each started by volley_targets
//! with `dav` on and accounts at `/dav/<name>/calendar/`. Such a server has no
//! calendar-access and no REPORT, so every profile syncs by PROPFIND Depth 1 and GET,
//! and writes by PUT and DELETE. Every check that applies must pass; what the server
//! lacks is in the report, naming REPORT; where conditional PUT is not honoured
//! (nginx) the stale-write check is reported not applicable instead of failing.
//! scripts/install-deps.sh installs the servers; a missing one fails here.

use crate::common;

use std::time::Duration;

use volley_office::{OfficeConfig, OfficeReport};
use volley_targets::TargetKind;

fn day(kind: TargetKind) -> (OfficeReport, serde_json::Value) {
    let target = common::dav_target(kind, 10);
    let accounts = common::office_accounts(&target, 10);
    assert!(
        accounts[0].principal.is_none(),
        "plain WebDAV has no principal"
    );
    let mut cfg = OfficeConfig::with_accounts(&format!("http://{}/", target.addr), accounts);
    cfg.decisions_per_day = 100;
    cfg.compress = 480.0;
    // A cold day: the first syncs' requests are counted with the rest.
    cfg.cold_start = true;
    cfg.duration = Duration::from_secs(8);
    cfg.initial_items = 10;
    cfg.seed = 5;
    let r = volley_office::run(&cfg)
        .unwrap_or_else(|e| panic!("{kind}: the day did not start: {e}"))
        .report;
    let j = serde_json::to_value(&r).unwrap();
    (r, j)
}

fn op<'a>(r: &'a OfficeReport, name: &str) -> &'a volley_office::LatencyRow {
    r.ops.iter().find(|o| o.name == name).unwrap()
}

fn lacks(r: &OfficeReport, what: &str) -> bool {
    r.lacks.iter().any(|l| l.starts_with(what))
}

#[test]
fn plain_webdav_servers_pass_every_applicable_check_and_say_what_they_lack() {
    for kind in [
        TargetKind::Nginx,
        TargetKind::ApacheEvent,
        TargetKind::Lighttpd,
    ] {
        let (r, j) = day(kind);
        assert_eq!(r.protocol, "webdav", "{kind}: {j}");
        assert_eq!(r.violations_total, 0, "{kind}: {j}");
        for what in [
            "REPORT sync-collection",
            "REPORT calendar-multiget",
            "calendar-access",
        ] {
            assert!(lacks(&r, what), "{kind} should lack {what}: {j}");
        }
        // The PROPFIND/GET/PUT path only, every request answered as expected.
        for name in [
            "propfind-d0",
            "propfind-d1",
            "get",
            "put-create",
            "put-update",
            "delete",
        ] {
            assert!(op(&r, name).count > 0, "{kind}: no {name}: {j}");
        }
        for name in ["report-sync", "report-multiget", "report-query", "options"] {
            assert_eq!(op(&r, name).count, 0, "{kind}: {name} sent: {j}");
        }
        for o in &r.ops {
            assert_eq!(o.errors, 0, "{kind}: {}: {j}", o.name);
        }
        assert_eq!(
            r.sessions[0].count, 20,
            "{kind}: every device's first sync: {j}"
        );
        assert!(r.items_at_end >= 10 * 10, "{kind}: {j}");
        // What each server was found to honour: nginx ignores If-Match and
        // If-None-Match and lists no getetag; Apache and lighttpd honour both.
        let conditional = !lacks(&r, "conditional PUT");
        match kind {
            TargetKind::Nginx => {
                assert!(!conditional, "{j}");
                assert!(lacks(&r, "getetag in PROPFIND"), "{j}");
                assert_eq!(r.checks_not_applicable, ["stale-write-accepted"], "{j}");
                assert!(r.unguarded_writes > 0, "{j}");
            }
            _ => {
                assert!(conditional, "{kind}: {j}");
                assert!(r.checks_not_applicable.is_empty(), "{kind}: {j}");
            }
        }
    }
}
