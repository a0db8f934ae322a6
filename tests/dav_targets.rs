//! The managed DAV targets, really started: Radicale and Xandikos from volley's venv
//! (scripts/install-caldav.sh), and nginx (dav + dav-ext), Apache (mod_dav_fs) and
//! lighttpd (mod_webdav) with `dav` on, each on a free loopback port with accounts.
//! Each gets a PROPFIND / PUT / GET / REPORT round trip as its users, the capability
//! probe's answers are checked per server (plain WebDAV's missing REPORT and
//! calendar-access are reported, not hidden), and after stop nothing is left running
//! and the private directory is gone. scripts/test installs every server first, so a
//! missing one fails here rather than being skipped.

use crate::common;
use std::net::SocketAddr;

use common::volley;
use std::time::Duration;
use volley_office::capabilities::capabilities;
use volley_office::http::{request, Reply};
use volley_office::Account;
use volley_targets::dav::DavAccount;
use volley_targets::{start, DavSettings, RunningTarget, TargetKind, TargetSpec};

const T: Duration = Duration::from_secs(10);

fn spec(kind: TargetKind, users: u32) -> TargetSpec {
    let mut s = TargetSpec::new(kind);
    s.settings.dav = Some(DavSettings {
        users,
        seed_items: 0,
    });
    s.start_timeout = Duration::from_secs(30);
    s
}

fn started(kind: TargetKind, users: u32) -> RunningTarget {
    start(&spec(kind, users)).unwrap_or_else(|e| panic!("{kind} did not start: {e}"))
}

fn item(uid: &str) -> String {
    format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//volley//test//EN\r\nBEGIN:VEVENT\r\n\
         UID:{uid}\r\nDTSTAMP:20260101T000000Z\r\nDTSTART:20260302T090000Z\r\n\
         DTEND:20260302T093000Z\r\nSUMMARY:standup {uid}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    )
}

fn call(
    addr: SocketAddr,
    a: &DavAccount,
    method: &'static str,
    path: &str,
    extra: &[(&'static str, &str)],
    body: &str,
) -> Reply {
    request(
        addr,
        Some(&Account::from(a)),
        method,
        path,
        extra,
        body.as_bytes(),
        T,
    )
    .unwrap_or_else(|e| panic!("{method} {path} as {}: {e}", a.name))
}

fn text(r: &Reply) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

const PROPFIND_ETAGS: &str = "<?xml version=\"1.0\"?><D:propfind xmlns:D=\"DAV:\">\
<D:prop><D:getetag/><D:resourcetype/></D:prop></D:propfind>";

const SYNC: &str = "<?xml version=\"1.0\"?><D:sync-collection xmlns:D=\"DAV:\">\
<D:sync-token/><D:sync-level>1</D:sync-level><D:prop><D:getetag/></D:prop></D:sync-collection>";

/// PUT (create-only) then GET back, then PROPFIND Depth 1 lists it: as every account.
fn round_trip(kind: TargetKind, t: &RunningTarget) {
    let dav = t.dav.as_ref().expect("a DAV target reports its accounts");
    for a in &dav.accounts {
        let path = format!("{}{}-meeting.ics", a.calendar, a.name);
        let body = item(&format!("{}-meeting", a.name));
        let ct = ("Content-Type", "text/calendar; charset=utf-8");
        let put = call(
            t.addr,
            a,
            "PUT",
            &path,
            &[ct, ("If-None-Match", "*")],
            &body,
        );
        assert!(
            put.status == 201 || put.status == 204,
            "{kind}: PUT as {} answered {}: {}",
            a.name,
            put.status,
            text(&put)
        );
        let got = call(t.addr, a, "GET", &path, &[], "");
        assert_eq!(got.status, 200, "{kind}: GET {path}");
        let got = text(&got);
        for line in body.lines() {
            assert!(
                got.contains(line.trim_end()),
                "{kind}: {line:?} missing in {got}"
            );
        }
        let list = call(
            t.addr,
            a,
            "PROPFIND",
            &a.calendar,
            &[("Depth", "1")],
            PROPFIND_ETAGS,
        );
        assert_eq!(list.status, 207, "{kind}: PROPFIND Depth 1 {}", a.calendar);
        assert!(
            text(&list).contains(&format!("{}-meeting.ics", a.name)),
            "{kind}: {}",
            text(&list)
        );
    }
}

/// user1 with a wrong password gets 401 on its own calendar.
fn refuses_a_wrong_password(kind: TargetKind, t: &RunningTarget) {
    let mut wrong = t.dav.as_ref().unwrap().accounts[0].clone();
    wrong.password = "not-the-password".into();
    let (cal, depth) = (wrong.calendar.clone(), ("Depth", "0"));
    let r = call(t.addr, &wrong, "PROPFIND", &cal, &[depth], PROPFIND_ETAGS);
    assert_eq!(r.status, 401, "{kind} took a wrong password");
}

/// Processes whose process group is `pgid` (a managed server leads its own group, so
/// this is the server and every worker it forked).
fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|st| {
                    // Fields after the command's closing parenthesis: state, ppid, pgrp.
                    let rest = st.rsplit_once(')')?.1;
                    rest.split_whitespace().nth(2)?.parse::<u32>().ok()
                })
                == Some(pgid)
        })
        .collect()
}

/// Stops `t` and checks its whole process group is gone and its directory removed (the
/// group is seen alive first, so the check can fail).
fn stop_and_check(kind: TargetKind, t: RunningTarget) {
    let pid = t.pid.expect("a managed target has a pid");
    assert!(
        group_members(pid).contains(&pid),
        "{kind}: pid {pid} not seen running"
    );
    let dir = t.dir.clone();
    t.stop();
    let left = group_members(pid);
    assert!(
        left.is_empty(),
        "{kind}: processes {left:?} of group {pid} still running after stop"
    );
    assert!(!dir.exists(), "{kind}: {} left behind", dir.display());
}

#[test]
fn radicale_and_xandikos_serve_each_user_a_calendar_and_offer_caldav() {
    for kind in [TargetKind::Radicale, TargetKind::Xandikos] {
        let t = started(kind, 3);
        assert!(
            t.version
                .as_deref()
                .is_some_and(|v| v.starts_with(kind.name())),
            "{:?}",
            t.version
        );
        let dav = t.dav.clone().unwrap();
        assert_eq!(dav.accounts.len(), 3);
        round_trip(kind, &t);
        let (u1, u2) = (&dav.accounts[0], &dav.accounts[1]);
        // Sync works on a calendar volley made at start.
        let sync = call(t.addr, u1, "REPORT", &u1.calendar, &[("Depth", "0")], SYNC);
        assert_eq!(sync.status, 207, "{kind}: sync-collection: {}", text(&sync));
        assert!(text(&sync).contains("sync-token"), "{kind}");
        // One user cannot read another's calendar.
        let foreign = call(
            t.addr,
            u2,
            "PROPFIND",
            &u1.calendar,
            &[("Depth", "0")],
            PROPFIND_ETAGS,
        );
        assert!(
            foreign.status == 403 || foreign.status == 404 || foreign.status == 500,
            "{kind}: user2 read user1's calendar: {}",
            foreign.status
        );
        if kind == TargetKind::Radicale {
            assert!(dav.checks_passwords);
            refuses_a_wrong_password(kind, &t);
        } else {
            // Xandikos over plain HTTP trusts X-Remote-User and checks no password; a
            // client that sends Basic credentials alone is refused (0.4.10 answers 500,
            // its unhandled ForbiddenError): it must send the account's headers.
            assert!(!dav.checks_passwords);
            let mut bare = u1.clone();
            bare.headers.clear();
            let r = call(
                t.addr,
                &bare,
                "PROPFIND",
                &u1.calendar,
                &[("Depth", "0")],
                PROPFIND_ETAGS,
            );
            assert!(
                r.status >= 400,
                "xandikos served a request without X-Remote-User: {}",
                r.status
            );
        }
        let caps =
            capabilities(t.addr, &Account::from(u1), T).unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert!(caps.calendar_access && caps.is_calendar, "{kind}: {caps:?}");
        assert!(
            caps.sync_collection && caps.calendar_query,
            "{kind}: {caps:?}"
        );
        assert!(
            caps.conditional_put && caps.create_only_put,
            "{kind}: {caps:?}"
        );
        assert!(
            caps.put_etag && caps.get_round_trip && caps.ctag,
            "{kind}: {caps:?}"
        );
        assert!(caps.lacks().is_empty(), "{kind} lacks {:?}", caps.lacks());
        assert!((200..300).contains(&caps.delete_status), "{kind}: {caps:?}");
        stop_and_check(kind, t);
    }
}

/// What a plain WebDAV server was seen to offer (nginx 1.22 + dav-ext, Apache 2.4
/// mod_dav_fs, lighttpd 1.4.69 mod_webdav): none has calendars or REPORT; they differ on
/// ETags and conditional writes. Asserted as seen, so a change is noticed.
struct Plain {
    kinds: &'static [TargetKind],
    dav_classes: &'static [&'static str],
    put_etag: bool,
    listing_etags: bool,
    conditional: bool,
    report_status: u16,
}

const PLAIN: [Plain; 3] = [
    Plain {
        kinds: &[TargetKind::Nginx],
        dav_classes: &["1"],
        put_etag: false,
        listing_etags: false,
        conditional: false,
        report_status: 405,
    },
    Plain {
        kinds: &[TargetKind::ApacheEvent, TargetKind::ApachePrefork],
        dav_classes: &["1", "2"],
        put_etag: false,
        listing_etags: true,
        conditional: true,
        report_status: 501,
    },
    Plain {
        kinds: &[TargetKind::Lighttpd],
        dav_classes: &["1", "2", "3"],
        put_etag: true,
        listing_etags: true,
        conditional: true,
        report_status: 501,
    },
];

#[test]
fn plain_webdav_servers_round_trip_and_report_what_they_lack() {
    for (want, &kind) in PLAIN
        .iter()
        .flat_map(|w| w.kinds.iter().map(move |k| (w, k)))
    {
        let t = started(kind, 2);
        assert!(t.config_text.contains("/dav"), "{kind}: {}", t.config_text);
        round_trip(kind, &t);
        let dav = t.dav.clone().unwrap();
        assert!(dav.checks_passwords);
        refuses_a_wrong_password(kind, &t);
        let calendar = &dav.accounts[0].calendar;
        let anonymous = request(t.addr, None, "GET", calendar, &[], b"", T).unwrap();
        assert_eq!(
            anonymous.status, 401,
            "{kind} let an anonymous GET into /dav/"
        );
        let caps = capabilities(t.addr, &Account::from(&dav.accounts[0]), T)
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        let lacks = caps.lacks();
        eprintln!("{kind}: lacks {lacks:?}");
        assert_eq!(caps.dav_classes, want.dav_classes, "{kind}");
        assert!(
            caps.get_round_trip && caps.put_status == 201,
            "{kind}: {caps:?}"
        );
        // Reported, not hidden: no CalDAV, no REPORT at all.
        for missing in [
            "calendar-access",
            "calendar collections",
            "getctag",
            "sync-collection REPORT",
            "calendar-query REPORT",
        ] {
            assert!(
                lacks.contains(&missing),
                "{kind}: {missing} not reported in {lacks:?}"
            );
        }
        assert_eq!(caps.sync_collection_status, want.report_status, "{kind}");
        assert_eq!(caps.calendar_query_status, want.report_status, "{kind}");
        assert_eq!(caps.put_etag, want.put_etag, "{kind}: {caps:?}");
        assert_eq!(caps.listing_etags, want.listing_etags, "{kind}: {caps:?}");
        assert_eq!(caps.conditional_put, want.conditional, "{kind}: {caps:?}");
        assert_eq!(caps.create_only_put, want.conditional, "{kind}: {caps:?}");
        assert_eq!(caps.delete_status, 204, "{kind}");
        // The docroot stays read-only: DAV is only under /dav/.
        let a = &dav.accounts[0];
        let r = call(t.addr, a, "PUT", "/index.html", &[], "overwritten");
        assert!(
            r.status >= 400,
            "{kind}: PUT outside /dav/ answered {}",
            r.status
        );
        stop_and_check(kind, t);
    }
}

fn one_line_usage_error(args: &[&str], needle: &str) {
    let (code, out, err) = volley(args);
    assert_eq!(code, 2, "{args:?}: stdout {out} stderr {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
}

#[test]
fn a_server_without_dav_and_bad_dav_specs_are_one_line_errors() {
    // nginx without `dav`: OPTIONS has no DAV header, PROPFIND gets 405.
    let t = start(&TargetSpec::new(TargetKind::Nginx)).unwrap();
    assert!(t.dav.is_none());
    let url = format!("http://{}/", t.addr);
    one_line_usage_error(&["targets", "--dav-probe", &url], "does not speak WebDAV");
    t.stop();
    one_line_usage_error(&["targets", "--dav-probe", "caddy"], "cannot serve WebDAV");
    one_line_usage_error(&["targets", "--dav-probe", "iis"], "unknown target kind");
    one_line_usage_error(
        &["targets", "--dav-probe", "http://10.1.2.3/"],
        "not a loopback address",
    );
    one_line_usage_error(
        &[
            "targets",
            "--dav-probe",
            "http://127.0.0.1:1/",
            "--user",
            "x",
        ],
        "NAME:PASSWORD",
    );
    one_line_usage_error(
        &["targets", "--show-config", "caddy", "--dav"],
        "cannot serve WebDAV",
    );
    // The library refuses bad specs before anything is made, in one line each.
    let refused = |s: TargetSpec| match start(&s) {
        Ok(t) => {
            let kind = t.kind;
            t.stop();
            panic!("{kind} started with a bad spec")
        }
        Err(e) => {
            let line = e.to_string();
            assert_eq!(line.lines().count(), 1, "{line}");
            line
        }
    };
    assert!(refused(spec(TargetKind::Radicale, 0)).contains("outside 1..="));
    assert!(refused(spec(TargetKind::Xandikos, 10_001)).contains("outside 1..="));
    assert!(refused(spec(TargetKind::Caddy, 2)).contains("cannot serve WebDAV"));
    let mut tls = spec(TargetKind::Radicale, 1);
    tls.tls = Some(volley_targets::TlsSource::Generate);
    assert!(refused(tls).contains("plain HTTP"));
    let mut missing = spec(TargetKind::Xandikos, 1);
    missing.program = Some("/nonexistent/xandikos".into());
    assert!(refused(missing).contains("install-caldav.sh"));
}

#[test]
fn the_cli_probe_starts_probes_and_stops_a_managed_kind() {
    let (code, out, err) = volley(&["targets", "--dav-probe", "lighttpd", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["collection"], "/dav/user1/calendar/");
    assert_eq!(v["calendar_access"], false);
    assert_eq!(v["conditional_put"], true);
    let (code, out, err) = volley(&["targets", "--dav-probe", "radicale"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("radicale 3.9.0 at http://127.0.0.1:"),
        "{out}"
    );
    assert!(out.contains("lacks nothing a CalDAV client uses"), "{out}");
}
