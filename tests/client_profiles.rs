//! The request sequences of the calendar clients an office uses, replayed against a
//! multi-user server: discovery, calendar listing with the properties each client asks
//! for, first sync, create, change, delete, and the follow-up sync. Every request must
//! succeed with the status that client expects; every property a client needs to go on
//! (principal, home, calendar type, ctag or sync-token, ETags) must be answered 200.
//!
//! The sequences follow the clients' documented and observed traffic: Thunderbird
//! (Lightning: OPTIONS, ctag polling, calendar-query for ETags then multiget), DAVx5
//! (well-known discovery, sync-collection, multiget), Evolution (calendar-query with
//! calendar-data) and Apple Calendar (principal properties incl. principal-collection-set,
//! a PROPFIND Depth 1 of the home with its many properties, sync-collection).

use crate::common;
use crate::groupware;
use common::Served;
use groupware::{send, temp_dir, users_file};

const C: &str = r#"xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav" xmlns:CS="http://calendarserver.org/ns/" xmlns:A="http://apple.com/ns/ical/""#;

/// One step: method, path (`{home}` and `{cal}` filled in), Depth, body, expected
/// status, strings the answer must contain.
struct Step {
    method: &'static str,
    path: &'static str,
    depth: Option<&'static str>,
    headers: &'static [(&'static str, &'static str)],
    body: String,
    status: u16,
    contains: &'static [&'static str],
}

fn step(method: &'static str, path: &'static str, status: u16) -> Step {
    Step {
        method,
        path,
        depth: None,
        headers: &[],
        body: String::new(),
        status,
        contains: &[],
    }
}

fn propfind(path: &'static str, depth: &'static str, props: &str) -> Step {
    Step {
        depth: Some(depth),
        body: format!(
            r#"<?xml version="1.0" encoding="utf-8"?><D:propfind {C}><D:prop>{props}</D:prop></D:propfind>"#
        ),
        ..step("PROPFIND", path, 207)
    }
}

fn report(path: &'static str, body: String) -> Step {
    Step {
        depth: Some("1"),
        body,
        ..step("REPORT", path, 207)
    }
}

fn event(uid: &str, summary: &str) -> String {
    format!("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//client//EN\r\nBEGIN:VTIMEZONE\r\nTZID:Europe/Paris\r\nBEGIN:STANDARD\r\nDTSTART:19701025T030000\r\nTZOFFSETFROM:+0200\r\nTZOFFSETTO:+0100\r\nEND:STANDARD\r\nEND:VTIMEZONE\r\nBEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:20240101T000000Z\r\nDTSTART;TZID=Europe/Paris:20240312T100000\r\nDTEND;TZID=Europe/Paris:20240312T110000\r\nSUMMARY:{summary}\r\nBEGIN:VALARM\r\nACTION:DISPLAY\r\nTRIGGER:-PT15M\r\nDESCRIPTION:x\r\nEND:VALARM\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")
}

fn put(
    path: &'static str,
    headers: &'static [(&'static str, &'static str)],
    body: String,
    status: u16,
) -> Step {
    Step {
        headers,
        body,
        ..step("PUT", path, status)
    }
}

fn sync(token_empty: bool) -> String {
    let token = if token_empty { "" } else { "{token}" };
    format!(
        r#"<D:sync-collection {C}><D:sync-token>{token}</D:sync-token><D:sync-level>1</D:sync-level><D:prop><D:getetag/><D:getcontenttype/></D:prop></D:sync-collection>"#
    )
}

fn query(with_data: bool) -> String {
    let data = if with_data { "<C:calendar-data/>" } else { "" };
    format!(
        r#"<C:calendar-query {C}><D:prop><D:getetag/>{data}</D:prop><C:filter><C:comp-filter name="VCALENDAR"><C:comp-filter name="VEVENT"><C:time-range start="20240301T000000Z" end="20240401T000000Z"/></C:comp-filter></C:comp-filter></C:filter></C:calendar-query>"#
    )
}

fn multiget(name: &str) -> String {
    format!(
        r#"<C:calendar-multiget {C}><D:prop><D:getetag/><C:calendar-data/></D:prop><D:href>{{cal}}{name}</D:href></C:calendar-multiget>"#
    )
}

fn thunderbird() -> Vec<Step> {
    vec![
        Step { depth: Some("0"), ..step("OPTIONS", "{cal}", 200) },
        Step { contains: &["<CS:getctag>", "<C:calendar/>", "<D:current-user-privilege-set>", "C:calendar-query"], ..propfind("{cal}", "0", "<D:resourcetype/><D:owner/><D:current-user-principal/><D:current-user-privilege-set/><D:supported-report-set/><C:supported-calendar-component-set/><CS:getctag/>") },
        Step { contains: &["<C:calendar-home-set><D:href>{home}</D:href>"], ..propfind("{home}", "0", "<C:calendar-home-set/><C:calendar-user-address-set/><C:schedule-inbox-URL/><C:schedule-outbox-URL/>") },
        report("{cal}", query(false)),
        put("{cal}tb-1.ics", &[("If-None-Match", "*"), ("Content-Type", "text/calendar; charset=utf-8")], event("tb-1", "Thunderbird"), 201),
        Step { contains: &["tb-1.ics</D:href>"], ..report("{cal}", query(false)) },
        Step { contains: &["SUMMARY:Thunderbird"], ..report("{cal}", multiget("tb-1.ics")) },
        Step { contains: &["<CS:getctag>"], ..propfind("{cal}", "0", "<CS:getctag/>") },
        Step { headers: &[("If-Match", "{etag:tb-1.ics}")], ..step("DELETE", "{cal}tb-1.ics", 204) },
    ]
}

fn davx5() -> Vec<Step> {
    vec![
        Step { body: r#"<propfind xmlns="DAV:"><prop><current-user-principal/></prop></propfind>"#.into(), depth: Some("0"), ..step("PROPFIND", "/.well-known/caldav", 307) },
        Step { contains: &["<D:current-user-principal><D:href>{home}</D:href>"], ..propfind("/", "0", "<D:current-user-principal/>") },
        Step { contains: &["<C:calendar-home-set><D:href>{home}</D:href>", "<D:displayname>"], ..propfind("{home}", "0", "<D:resourcetype/><D:displayname/><C:calendar-home-set/><C:calendar-user-address-set/>") },
        Step { contains: &["<D:href>{cal}</D:href>", "<C:calendar/>", "<D:sync-token>"], ..propfind("{home}", "1", "<D:resourcetype/><D:displayname/><A:calendar-color/><C:calendar-description/><C:calendar-timezone/><C:supported-calendar-component-set/><D:current-user-privilege-set/><D:sync-token/><CS:getctag/><CS:source/>") },
        Step { depth: Some("0"), body: format!(r#"<D:propertyupdate {C}><D:set><D:prop><A:calendar-color>#FF0000FF</A:calendar-color></D:prop></D:set></D:propertyupdate>"#), contains: &["200 OK"], ..step("PROPPATCH", "{cal}", 207) },
        Step { body: sync(true), ..step("REPORT", "{cal}", 207) },
        put("{cal}dx-1.ics", &[("If-None-Match", "*"), ("Content-Type", "text/calendar")], event("dx-1", "DAVx5"), 201),
        put("{cal}dx-1.ics", &[("If-Match", "{etag:dx-1.ics}"), ("Content-Type", "text/calendar")], event("dx-1", "DAVx5 changed"), 204),
        Step { body: sync(false), contains: &["dx-1.ics</D:href>"], ..step("REPORT", "{cal}", 207) },
        Step { contains: &["SUMMARY:DAVx5 changed"], ..report("{cal}", multiget("dx-1.ics")) },
        Step { headers: &[("If-Match", "{etag:dx-1.ics}")], ..step("DELETE", "{cal}dx-1.ics", 204) },
        Step { body: sync(false), contains: &["dx-1.ics</D:href><D:status>HTTP/1.1 404"], ..step("REPORT", "{cal}", 207) },
    ]
}

fn evolution() -> Vec<Step> {
    vec![
        Step { depth: Some("0"), ..step("OPTIONS", "{cal}", 200) },
        Step { contains: &["<C:calendar/>", "<D:displayname>"], ..propfind("{cal}", "0", "<D:resourcetype/><D:displayname/><CS:getctag/><C:supported-calendar-component-set/><C:calendar-color/>") },
        put("{cal}ev-1.ics", &[("If-None-Match", "*")], event("ev-1", "Evolution"), 201),
        Step { contains: &["SUMMARY:Evolution", "BEGIN:VALARM"], ..report("{cal}", query(true)) },
        put("{cal}ev-1.ics", &[("If-Match", "{etag:ev-1.ics}")], event("ev-1", "Evolution 2"), 204),
        step("DELETE", "{cal}ev-1.ics", 204),
    ]
}

fn apple() -> Vec<Step> {
    vec![
        Step { contains: &["<D:current-user-principal><D:href>{home}</D:href>", "<D:principal-collection-set><D:href>/</D:href>"], ..propfind("/", "0", "<D:current-user-principal/><D:principal-collection-set/><D:resourcetype/>") },
        Step { contains: &["<C:calendar-home-set><D:href>{home}</D:href>", "<D:principal/>"], ..propfind("{home}", "0", "<C:calendar-home-set/><C:calendar-user-address-set/><D:displayname/><D:principal-URL/><D:resourcetype/><D:supported-report-set/><CS:email-address-set/><C:schedule-inbox-URL/><C:schedule-outbox-URL/><CS:dropbox-home-URL/><CS:notification-URL/>") },
        Step { contains: &["<D:href>{cal}</D:href>", "<CS:getctag>", "<D:sync-token>"], ..propfind("{home}", "1", "<D:resourcetype/><D:displayname/><CS:getctag/><D:sync-token/><A:calendar-color/><A:calendar-order/><C:calendar-timezone/><C:supported-calendar-component-set/><C:schedule-calendar-transp/><D:current-user-privilege-set/><D:owner/><CS:source/>") },
        Step { body: format!(r#"<C:mkcalendar {C}><D:set><D:prop><D:displayname>Work</D:displayname><A:calendar-color>#00FF00</A:calendar-color><C:supported-calendar-component-set><C:comp name="VEVENT"/></C:supported-calendar-component-set></D:prop></D:set></C:mkcalendar>"#), ..step("MKCALENDAR", "{home}work/", 201) },
        Step { contains: &["<D:displayname>Work</D:displayname>", "#00FF00"], ..propfind("{home}work/", "0", "<D:displayname/><A:calendar-color/><C:supported-calendar-component-set/>") },
        Step { body: sync(true), ..step("REPORT", "{cal}", 207) },
        put("{cal}ap-1.ics", &[("If-None-Match", "*")], event("ap-1", "Apple"), 201),
        Step { body: sync(false), contains: &["ap-1.ics</D:href>"], ..step("REPORT", "{cal}", 207) },
        Step { contains: &["UID:ap-1"], ..report("{cal}", multiget("ap-1.ics")) },
        Step { body: format!(r#"<D:principal-property-search {C} test="anyof"><D:property-search><D:prop><D:displayname/></D:prop><D:match>{{user}}</D:match></D:property-search><D:prop><D:displayname/><C:calendar-user-address-set/></D:prop></D:principal-property-search>"#), depth: Some("0"), contains: &["<D:href>{home}</D:href>"], ..step("REPORT", "/", 207) },
        step("DELETE", "{home}work/", 204),
        step("DELETE", "{cal}ap-1.ics", 204),
    ]
}

/// Replays `steps` as `user`; ETags of earlier answers fill `{etag:NAME}`.
fn replay(addr: &str, user: &str, steps: Vec<Step>) {
    let home = format!("/{user}/");
    let cal = format!("/{user}/calendar/");
    let cred = Some((user, "pw"));
    let mut token = String::new();
    let fill = |s: &str, token: &str| {
        s.replace("{home}", &home)
            .replace("{cal}", &cal)
            .replace("{user}", user)
            .replace("{token}", token)
    };
    for (n, st) in steps.into_iter().enumerate() {
        let path = fill(st.path, &token);
        let body = fill(&st.body, &token);
        let mut headers: Vec<(String, String)> = Vec::new();
        if let Some(d) = st.depth {
            headers.push(("Depth".into(), d.into()));
        }
        for (k, v) in st.headers {
            let v = match v.strip_prefix("{etag:").and_then(|r| r.strip_suffix('}')) {
                Some(name) => send(addr, cred, "GET", &format!("{cal}{name}"), &[], "")
                    .header("ETag")
                    .unwrap_or_default(),
                None => (*v).to_owned(),
            };
            headers.push(((*k).into(), v));
        }
        let hdrs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let r = send(addr, cred, st.method, &path, &hdrs, &body);
        assert_eq!(
            r.status, st.status,
            "{user} step {n} {} {path}:\n{}",
            st.method, r.body
        );
        for want in st.contains {
            let want = fill(want, &token);
            assert!(
                r.body.contains(&want),
                "{user} step {n} {} {path}: no {want:?} in\n{}",
                st.method,
                r.body
            );
        }
        if let Some(t) = r
            .body
            .split("<D:sync-token>")
            .nth(1)
            .and_then(|s| s.split('<').next())
        {
            if st.method == "REPORT" {
                token = t.to_owned();
            }
        }
    }
}

#[test]
fn thunderbird_davx5_evolution_and_apple_sequences_succeed() {
    let tmp = temp_dir("profiles");
    let root = tmp.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let users = users_file(
        &tmp,
        &[("tb", "pw"), ("dx", "pw"), ("evo", "pw"), ("mac", "pw")],
    );
    let server = Served::start(&root, &["--users", users.to_str().unwrap()]);
    replay(&server.addr, "tb", thunderbird());
    replay(&server.addr, "dx", davx5());
    replay(&server.addr, "evo", evolution());
    replay(&server.addr, "mac", apple());
}
