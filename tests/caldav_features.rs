//! The CalDAV features real clients need, each through the real binary in multi-user
//! mode: zones and floating times, recurrence (RRULE, RDATE, EXDATE, overrides) in
//! calendar-query, VALARM time-ranges, expand and limit-recurrence-set, PUT
//! preconditions, free-busy, sync-collection limits, principal reports.

use crate::common;
use crate::groupware;
use common::Served;
use groupware::{send, temp_dir, users_file, Reply};

const ALICE: Option<(&str, &str)> = Some(("alice", "pw"));
const CAL: &str = "/alice/calendar/";

const BERLIN: &str = "BEGIN:VTIMEZONE\r\nTZID:Europe/Berlin\r\nBEGIN:DAYLIGHT\r\nTZOFFSETFROM:+0100\r\nTZOFFSETTO:+0200\r\nTZNAME:CEST\r\nDTSTART:19700329T020000\r\nRRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU\r\nEND:DAYLIGHT\r\nBEGIN:STANDARD\r\nTZOFFSETFROM:+0200\r\nTZOFFSETTO:+0100\r\nTZNAME:CET\r\nDTSTART:19701025T030000\r\nRRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU\r\nEND:STANDARD\r\nEND:VTIMEZONE\r\n";

struct Office {
    _tmp: crate::common::TestDir,
    server: Served,
}

fn office(tag: &str) -> Office {
    let tmp = temp_dir(tag);
    let root = tmp.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let users = users_file(&tmp, &[("alice", "pw")]);
    let server = Served::start(&root, &["--users", users.to_str().unwrap()]);
    Office { _tmp: tmp, server }
}

impl Office {
    fn put(&self, name: &str, body: &str) -> Reply {
        send(
            &self.server.addr,
            ALICE,
            "PUT",
            &format!("{CAL}{name}"),
            &[],
            body,
        )
    }

    fn report(&self, path: &str, body: &str) -> Reply {
        send(
            &self.server.addr,
            ALICE,
            "REPORT",
            path,
            &[("Depth", "1")],
            body,
        )
    }

    /// The names of the calendar objects a calendar-query with this VEVENT-level
    /// filter content finds.
    fn find(&self, inner: &str, extra: &str) -> Vec<String> {
        let q = format!(
            r#"<C:calendar-query xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop><D:getetag/></D:prop><C:filter><C:comp-filter name="VCALENDAR"><C:comp-filter name="VEVENT">{inner}</C:comp-filter></C:comp-filter></C:filter>{extra}</C:calendar-query>"#
        );
        let r = self.report(CAL, &q);
        assert_eq!(r.status, 207, "{}", r.body);
        let mut names: Vec<String> = r
            .body
            .split(&format!("<D:href>{CAL}"))
            .skip(1)
            .filter_map(|s| s.split('<').next().map(str::to_owned))
            .collect();
        names.sort();
        names
    }
}

fn range(a: &str, b: &str) -> String {
    format!(r#"<C:time-range start="{a}" end="{b}"/>"#)
}

fn cal(body: &str) -> String {
    format!("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\n{body}END:VCALENDAR\r\n")
}

/// Weekly on Mondays at 09:00 Berlin time, six times from 4 March 2024 (DST begins on
/// 31 March, so the last two are at 07:00Z instead of 08:00Z), without 18 March.
fn weekly() -> String {
    cal(&format!("{BERLIN}BEGIN:VEVENT\r\nUID:weekly\r\nDTSTAMP:20240101T000000Z\r\nDTSTART;TZID=Europe/Berlin:20240304T090000\r\nDTEND;TZID=Europe/Berlin:20240304T100000\r\nRRULE:FREQ=WEEKLY;COUNT=6\r\nEXDATE;TZID=Europe/Berlin:20240318T090000\r\nSUMMARY:Team\r\nEND:VEVENT\r\n"))
}

#[test]
fn tzid_weekly_rrule_with_exdate_matches_exactly_the_right_instances() {
    let o = office("weekly");
    assert_eq!(o.put("weekly.ics", &weekly()).status, 201);
    let single = cal("BEGIN:VEVENT\r\nUID:lunch\r\nDTSTAMP:20240101T000000Z\r\nDTSTART:20240318T120000Z\r\nDTEND:20240318T130000Z\r\nEND:VEVENT\r\n");
    assert_eq!(o.put("lunch.ics", &single).status, 201);
    let cases: &[(&str, &str, &[&str])] = &[
        // The excluded Monday: only the lunch.
        ("20240318T000000Z", "20240319T000000Z", &["lunch.ics"]),
        // 25 March, winter time: 08:00Z-09:00Z.
        ("20240325T083000Z", "20240325T084500Z", &["weekly.ics"]),
        ("20240325T070000Z", "20240325T080000Z", &[]),
        // 1 April, summer time: 07:00Z-08:00Z, not 08:00Z.
        ("20240401T073000Z", "20240401T074500Z", &["weekly.ics"]),
        ("20240401T083000Z", "20240401T084500Z", &[]),
        // 8 April is the sixth and last; 15 April is past COUNT.
        ("20240408T070000Z", "20240408T071000Z", &["weekly.ics"]),
        ("20240415T000000Z", "20240416T000000Z", &[]),
        // Tuesdays never match.
        ("20240305T000000Z", "20240306T000000Z", &[]),
    ];
    for (a, b, want) in cases {
        assert_eq!(o.find(&range(a, b), ""), *want, "range {a}..{b}");
    }
    // Expanded over the whole series: exactly five instances, in UTC.
    let q = r#"<C:calendar-query xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop><C:calendar-data><C:expand start="20240301T000000Z" end="20240501T000000Z"/></C:calendar-data></D:prop><C:filter><C:comp-filter name="VCALENDAR"><C:comp-filter name="VEVENT"><C:prop-filter name="UID"><C:text-match collation="i;octet">weekly</C:text-match></C:prop-filter></C:comp-filter></C:comp-filter></C:filter></C:calendar-query>"#;
    let r = o.report(CAL, q);
    assert_eq!(r.status, 207);
    let rids: Vec<&str> = r
        .body
        .split("RECURRENCE-ID:")
        .skip(1)
        .filter_map(|s| s.get(..16))
        .collect();
    assert_eq!(
        rids,
        [
            "20240304T080000Z",
            "20240311T080000Z",
            "20240325T080000Z",
            "20240401T070000Z",
            "20240408T070000Z"
        ],
        "{}",
        r.body
    );
    assert!(
        !r.body.contains("RRULE") && !r.body.contains("VTIMEZONE"),
        "{}",
        r.body
    );
}

#[test]
fn floating_times_follow_the_query_timezone() {
    let o = office("floating");
    let ev = cal("BEGIN:VEVENT\r\nUID:f\r\nDTSTAMP:20240101T000000Z\r\nDTSTART:20240110T090000\r\nDTEND:20240110T100000\r\nEND:VEVENT\r\n");
    assert_eq!(o.put("f.ics", &ev).status, 201);
    let ny = "<C:timezone>BEGIN:VCALENDAR\r\nBEGIN:VTIMEZONE\r\nTZID:America/New_York\r\nEND:VTIMEZONE\r\nEND:VCALENDAR\r\n</C:timezone>";
    let utc_nine = range("20240110T083000Z", "20240110T093000Z");
    let ny_nine = range("20240110T133000Z", "20240110T143000Z");
    assert_eq!(o.find(&utc_nine, ""), ["f.ics"]);
    assert!(o.find(&ny_nine, "").is_empty());
    assert_eq!(o.find(&ny_nine, ny), ["f.ics"]);
    assert!(o.find(&utc_nine, ny).is_empty());
}

#[test]
fn overridden_instances_and_rdates_are_found_where_they_are() {
    let o = office("override");
    let series = cal("BEGIN:VEVENT\r\nUID:s\r\nDTSTAMP:20240101T000000Z\r\nDTSTART:20240110T090000Z\r\nDURATION:PT1H\r\nRRULE:FREQ=DAILY;COUNT=3\r\nRDATE:20240120T090000Z\r\nEND:VEVENT\r\nBEGIN:VEVENT\r\nUID:s\r\nDTSTAMP:20240101T000000Z\r\nRECURRENCE-ID:20240111T090000Z\r\nDTSTART:20240111T150000Z\r\nDURATION:PT1H\r\nSUMMARY:moved\r\nEND:VEVENT\r\n");
    assert_eq!(o.put("s.ics", &series).status, 201);
    assert!(o
        .find(&range("20240111T090000Z", "20240111T100000Z"), "")
        .is_empty());
    assert_eq!(
        o.find(&range("20240111T150000Z", "20240111T153000Z"), ""),
        ["s.ics"]
    );
    assert_eq!(
        o.find(&range("20240112T090000Z", "20240112T093000Z"), ""),
        ["s.ics"]
    );
    assert_eq!(
        o.find(&range("20240120T090000Z", "20240120T093000Z"), ""),
        ["s.ics"]
    );
    assert!(o
        .find(&range("20240113T000000Z", "20240120T000000Z"), "")
        .is_empty());
    // limit-recurrence-set: the master and only the override touching the range.
    let q = |a: &str, b: &str| {
        format!(
            r#"<C:calendar-multiget xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop><C:calendar-data><C:limit-recurrence-set start="{a}" end="{b}"/></C:calendar-data></D:prop><D:href>{CAL}s.ics</D:href></C:calendar-multiget>"#
        )
    };
    let r = o.report(CAL, &q("20240111T000000Z", "20240112T000000Z"));
    assert!(
        r.body.contains("RRULE:FREQ=DAILY") && r.body.contains("SUMMARY:moved"),
        "{}",
        r.body
    );
    let r = o.report(CAL, &q("20240115T000000Z", "20240116T000000Z"));
    assert!(
        r.body.contains("RRULE:FREQ=DAILY") && !r.body.contains("SUMMARY:moved"),
        "{}",
        r.body
    );
}

#[test]
fn valarm_time_ranges_test_each_trigger() {
    let o = office("alarm");
    let ev = cal("BEGIN:VEVENT\r\nUID:al\r\nDTSTAMP:20240101T000000Z\r\nDTSTART:20240110T100000Z\r\nDTEND:20240110T110000Z\r\nRRULE:FREQ=DAILY;COUNT=2\r\nBEGIN:VALARM\r\nACTION:DISPLAY\r\nDESCRIPTION:soon\r\nTRIGGER:-PT15M\r\nEND:VALARM\r\nEND:VEVENT\r\n");
    assert_eq!(o.put("al.ics", &ev).status, 201);
    let plain = cal("BEGIN:VEVENT\r\nUID:plain\r\nDTSTAMP:20240101T000000Z\r\nDTSTART:20240110T100000Z\r\nDTEND:20240110T110000Z\r\nEND:VEVENT\r\n");
    assert_eq!(o.put("plain.ics", &plain).status, 201);
    let alarm = |a, b| {
        format!(
            r#"<C:comp-filter name="VALARM">{}</C:comp-filter>"#,
            range(a, b)
        )
    };
    assert_eq!(
        o.find(&alarm("20240110T094000Z", "20240110T095000Z"), ""),
        ["al.ics"]
    );
    assert!(o
        .find(&alarm("20240110T095000Z", "20240110T100000Z"), "")
        .is_empty());
    // The second instance's alarm.
    assert_eq!(
        o.find(&alarm("20240111T094500Z", "20240111T094600Z"), ""),
        ["al.ics"]
    );
    assert!(o
        .find(&alarm("20240112T094500Z", "20240112T094600Z"), "")
        .is_empty());
}

#[test]
fn put_preconditions_refuse_and_store_nothing() {
    let o = office("put");
    let ev = |uid: &str| {
        cal(&format!("BEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:20240101T000000Z\r\nDTSTART:20240110T100000Z\r\nEND:VEVENT\r\n"))
    };
    assert_eq!(o.put("a.ics", &ev("same")).status, 201);
    let r = o.put("b.ics", &ev("same"));
    assert_eq!(r.status, 403);
    assert!(
        r.body
            .contains(&format!("<C:no-uid-conflict><D:href>{CAL}a.ics</D:href>")),
        "{}",
        r.body
    );
    assert_eq!(o.put("a.ics", &ev("same")).status, 204);
    for (name, body, cond) in [
        (
            "c.ics",
            "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:c\r\nEND:VCALENDAR\r\n".to_owned(),
            "C:valid-calendar-data",
        ),
        ("d.ics", "hello".to_owned(), "C:valid-calendar-data"),
        (
            "e.ics",
            ev("e").replace("DTSTART:", "RRULE:FREQ=NEVER\r\nDTSTART:"),
            "C:valid-calendar-data",
        ),
        (
            "f.ics",
            cal("BEGIN:VEVENT\r\nDTSTART:20240110T100000Z\r\nEND:VEVENT\r\n"),
            "C:valid-calendar-object-resource",
        ),
    ] {
        let r = o.put(name, &body);
        assert_eq!(r.status, 403, "{name}");
        assert!(r.body.contains(cond), "{name}: {}", r.body);
        let path = format!("{CAL}{name}");
        assert_eq!(
            send(&o.server.addr, ALICE, "GET", &path, &[], "").status,
            404,
            "{name} was stored"
        );
    }
    // supported-calendar-component-set chosen at MKCALENDAR, reported and enforced.
    let mk = r#"<C:mkcalendar xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:set><D:prop><D:displayname>Tasks</D:displayname><C:supported-calendar-component-set><C:comp name="VTODO"/></C:supported-calendar-component-set></D:prop></D:set></C:mkcalendar>"#;
    assert_eq!(
        send(
            &o.server.addr,
            ALICE,
            "MKCALENDAR",
            "/alice/tasks/",
            &[],
            mk
        )
        .status,
        201
    );
    let pf = r#"<propfind xmlns="DAV:"><prop><C:supported-calendar-component-set xmlns:C="urn:ietf:params:xml:ns:caldav"/></prop></propfind>"#;
    let r = send(
        &o.server.addr,
        ALICE,
        "PROPFIND",
        "/alice/tasks/",
        &[("Depth", "0")],
        pf,
    );
    assert!(
        r.body
            .contains(r#"<C:comp name="VTODO"/></C:supported-calendar-component-set>"#),
        "{}",
        r.body
    );
    assert!(!r.body.contains("VEVENT"), "{}", r.body);
    let r = send(
        &o.server.addr,
        ALICE,
        "PUT",
        "/alice/tasks/x.ics",
        &[],
        &ev("x"),
    );
    assert_eq!(r.status, 403);
    assert!(
        r.body.contains("C:supported-calendar-component"),
        "{}",
        r.body
    );
    let todo = cal("BEGIN:VTODO\r\nUID:t\r\nDTSTAMP:20240101T000000Z\r\nEND:VTODO\r\n");
    assert_eq!(
        send(
            &o.server.addr,
            ALICE,
            "PUT",
            "/alice/tasks/t.ics",
            &[],
            &todo
        )
        .status,
        201
    );
}

#[test]
fn free_busy_query_merges_busy_time() {
    let o = office("fb");
    let ev = |uid: &str, s: &str, e: &str, extra: &str| {
        cal(&format!("BEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:20240101T000000Z\r\nDTSTART:{s}\r\nDTEND:{e}\r\n{extra}END:VEVENT\r\n"))
    };
    for (n, body) in [
        ("a", ev("a", "20240110T100000Z", "20240110T110000Z", "")),
        (
            "b",
            ev(
                "b",
                "20240109T090000Z",
                "20240109T100000Z",
                "RRULE:FREQ=DAILY;COUNT=3\r\n",
            ),
        ),
        (
            "c",
            ev(
                "c",
                "20240110T120000Z",
                "20240110T130000Z",
                "STATUS:TENTATIVE\r\n",
            ),
        ),
        (
            "d",
            ev(
                "d",
                "20240110T140000Z",
                "20240110T150000Z",
                "TRANSP:TRANSPARENT\r\n",
            ),
        ),
        (
            "e",
            ev(
                "e",
                "20240110T160000Z",
                "20240110T170000Z",
                "STATUS:CANCELLED\r\n",
            ),
        ),
    ] {
        assert_eq!(o.put(&format!("{n}.ics"), &body).status, 201);
    }
    let q = r#"<C:free-busy-query xmlns:C="urn:ietf:params:xml:ns:caldav"><C:time-range start="20240110T000000Z" end="20240111T000000Z"/></C:free-busy-query>"#;
    let r = o.report(CAL, q);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r
        .header("Content-Type")
        .is_some_and(|t| t.starts_with("text/calendar")));
    let fb: Vec<&str> = r
        .body
        .lines()
        .filter(|l| l.starts_with("FREEBUSY"))
        .collect();
    assert_eq!(
        fb,
        [
            "FREEBUSY;FBTYPE=BUSY:20240110T090000Z/20240110T110000Z",
            "FREEBUSY;FBTYPE=BUSY-TENTATIVE:20240110T120000Z/20240110T130000Z"
        ],
        "{}",
        r.body
    );
    let bad = r#"<C:free-busy-query xmlns:C="urn:ietf:params:xml:ns:caldav"/>"#;
    assert_eq!(o.report(CAL, bad).status, 403);
}

#[test]
fn sync_limit_and_principal_reports() {
    let o = office("reports");
    for i in 0..3 {
        let body = cal(&format!("BEGIN:VEVENT\r\nUID:u{i}\r\nDTSTAMP:20240101T000000Z\r\nDTSTART:20240110T100000Z\r\nEND:VEVENT\r\n"));
        assert_eq!(o.put(&format!("{i}.ics"), &body).status, 201);
    }
    let sync = r#"<D:sync-collection xmlns:D="DAV:"><D:sync-token/><D:sync-level>1</D:sync-level><D:limit><D:nresults>2</D:nresults></D:limit><D:prop><D:getetag/></D:prop></D:sync-collection>"#;
    let r = o.report(CAL, sync);
    assert_eq!(r.status, 207);
    assert!(
        r.body.contains("507 Insufficient Storage")
            && r.body.contains("number-of-matches-within-limits"),
        "{}",
        r.body
    );
    assert_eq!(r.body.matches("<D:getetag>").count(), 2, "{}", r.body);
    let pps = r#"<D:principal-property-search xmlns:D="DAV:"><D:property-search><D:prop><D:displayname/></D:prop><D:match>ALI</D:match></D:property-search><D:prop><D:displayname/></D:prop></D:principal-property-search>"#;
    let r = send(&o.server.addr, ALICE, "REPORT", "/", &[("Depth", "0")], pps);
    assert_eq!(r.status, 207);
    assert!(r.body.contains("<D:href>/alice/</D:href>"), "{}", r.body);
    let none = pps.replace("ALI", "bob");
    let r = send(
        &o.server.addr,
        ALICE,
        "REPORT",
        "/",
        &[("Depth", "0")],
        &none,
    );
    assert_eq!(r.status, 207);
    assert!(!r.body.contains("<D:response>"), "{}", r.body);
    let set = r#"<D:principal-search-property-set xmlns:D="DAV:"/>"#;
    assert_eq!(
        send(&o.server.addr, ALICE, "REPORT", "/", &[], set).status,
        200
    );
    let other = r#"<D:acl-principal-prop-set xmlns:D="DAV:"/>"#;
    let r = send(&o.server.addr, ALICE, "REPORT", "/alice/", &[], other);
    assert_eq!(r.status, 403);
    assert!(r.body.contains("<D:supported-report/>"), "{}", r.body);
}
