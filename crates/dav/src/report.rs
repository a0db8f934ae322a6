//! REPORT: calendar-multiget, calendar-query and free-busy-query (RFC 4791 section 7),
//! sync-collection (RFC 6578), principal-property-search and
//! principal-search-property-set (RFC 3744 section 9, answered for the account's own
//! principal only). Other reports answer 403 with `DAV:supported-report`.

use chrono_tz::Tz;
use roxmltree::Node;

use crate::caldav::expand::{self, DataSpec};
use crate::caldav::filter::{self, invalid_filter};
use crate::caldav::freebusy;
use crate::caldav::index::Spans;
use crate::caldav::zone::{self, Zones};
use crate::error::DavError;
use crate::ical;
use crate::props::{self, PropRequest, Resource};
use crate::store;
use crate::xml::{self, Name, CALDAV, DAV};
use crate::{Dav, DavRequest, DavResponse};

/// REPORT dispatch on the body's root element.
pub(crate) fn report(dav: &Dav, req: &DavRequest<'_>) -> Result<DavResponse, DavError> {
    let target = dav.locate(req.target)?;
    let res = Resource::open(target)?;
    let doc = xml::parse(req.body)?;
    let root = doc.root_element();
    let kind = Name::of(root);
    let what = requested_props(root);
    let mut out = String::from(xml::MULTISTATUS_OPEN);
    if kind.is(CALDAV, "calendar-multiget") {
        let spec = expand::parse_spec(root)?;
        let floating = floating_zone(&res, root);
        multiget(dav, root, &what, spec, floating, &mut out)?;
    } else if kind.is(CALDAV, "calendar-query") {
        query(dav, req, &res, root, &what, &mut out)?;
    } else if kind.is(CALDAV, "free-busy-query") {
        return free_busy(dav, &res, root);
    } else if kind.is(DAV, "sync-collection") {
        crate::sync::sync(dav, &res, root, &what, &mut out)?;
    } else if kind.is(DAV, "principal-property-search") {
        crate::principal::search(dav, root, &what, &mut out)?;
    } else if kind.is(DAV, "principal-search-property-set") {
        return Ok(crate::principal::search_property_set());
    } else {
        return Err(DavError::Condition {
            status: 403,
            cond: "D:supported-report",
            reason: "supported reports: calendar-multiget, calendar-query, free-busy-query, \
                     sync-collection, principal-property-search, principal-search-property-set",
        });
    }
    out.push_str("</D:multistatus>\n");
    Ok(DavResponse::multistatus(out))
}

/// The `DAV:prop` / `allprop` / `propname` child of a report body (default: getetag).
pub(crate) fn requested_props(root: Node<'_, '_>) -> PropRequest {
    for c in xml::elements(root) {
        let n = Name::of(c);
        if n.is(DAV, "prop") {
            return PropRequest::Props(props::prop_names(c));
        } else if n.is(DAV, "allprop") {
            return PropRequest::AllProp(Vec::new());
        } else if n.is(DAV, "propname") {
            return PropRequest::PropName;
        }
    }
    PropRequest::Props(vec![Name::new(DAV, "getetag")])
}

pub(crate) fn status_response(href: &str, status: &str) -> String {
    format!(
        "<D:response><D:href>{}</D:href><D:status>HTTP/1.1 {status}</D:status></D:response>",
        xml::escape(href)
    )
}

/// The zone floating times are read in (RFC 4791 sections 5.2.2 and 9.8): the query's
/// `C:timezone` (a VTIMEZONE) or `C:timezone-id` (RFC 7809), else the calendar's
/// `C:calendar-timezone` property, else UTC.
fn floating_zone(res: &Resource, root: Node<'_, '_>) -> Tz {
    if let Some(id) = xml::child(root, CALDAV, "timezone-id") {
        if let Some(tz) = zone::iana(&xml::text(id)) {
            return tz;
        }
    }
    let from_text = |text: &str| {
        let cal = ical::parse(text.as_bytes()).ok()?;
        let vtz = cal.children.iter().find(|c| c.name == "VTIMEZONE")?;
        zone::of_vtimezone(vtz)
    };
    if let Some(tz) = xml::child(root, CALDAV, "timezone").and_then(|n| from_text(&xml::text(n))) {
        return tz;
    }
    let dir = if res.is_dir() {
        res.target.path.clone()
    } else {
        res.target.path.parent().map(Into::into).unwrap_or_default()
    };
    let dead = store::read_props(&dir, true);
    dead.get(&Name::new(CALDAV, "calendar-timezone"))
        .and_then(|v| {
            xml::parse(v.as_bytes())
                .ok()
                .map(|d| xml::text(d.root_element()))
        })
        .and_then(|t| from_text(&t))
        .unwrap_or(Tz::UTC)
}

/// The `<D:response>` of one resource, its calendar data transformed as `spec` says.
fn response(
    dav: &Dav,
    m: &Resource,
    what: &PropRequest,
    spec: Option<DataSpec>,
    floating: Tz,
) -> Result<String, DavError> {
    match spec {
        None => props::response(dav, m, what),
        Some(spec) => {
            let f = move |raw: &[u8]| {
                expand::transform(raw, &spec, floating).unwrap_or_else(|| raw.to_vec())
            };
            props::response_with(dav, m, what, Some(&f))
        }
    }
}

fn multiget(
    dav: &Dav,
    root: Node<'_, '_>,
    what: &PropRequest,
    spec: Option<DataSpec>,
    floating: Tz,
    out: &mut String,
) -> Result<(), DavError> {
    for h in xml::elements(root).filter(|n| Name::of(*n).is(DAV, "href")) {
        let href = xml::text(h);
        let target = match dav.locate_href(&href) {
            Err(e) if e.status() == 403 && dav.user().is_some() => {
                out.push_str(&status_response(&href, "403 Forbidden"));
                continue;
            }
            t => t.ok(),
        };
        match target.and_then(|t| Resource::open(t).ok()) {
            Some(r) if !r.is_dir() => out.push_str(&response(dav, &r, what, spec, floating)?),
            Some(_) => out.push_str(&status_response(&href, "403 Forbidden")),
            None => out.push_str(&status_response(&href, "404 Not Found")),
        }
    }
    Ok(())
}

// ------------------------------------------------------------------ calendar-query

/// The calendar object resources a query or free-busy report on `res` looks at.
fn candidates(dav: &Dav, req: &DavRequest<'_>, res: &Resource) -> Result<Vec<Resource>, DavError> {
    let depth = props::depth(req, false).unwrap_or(1);
    Ok(if res.is_dir() {
        if depth == 0 {
            Vec::new()
        } else {
            res.members(dav)?
                .into_iter()
                .filter(|m| !m.is_dir())
                .collect()
        }
    } else {
        vec![Resource::open(res.target.clone())?]
    })
}

fn query(
    dav: &Dav,
    req: &DavRequest<'_>,
    res: &Resource,
    root: Node<'_, '_>,
    what: &PropRequest,
    out: &mut String,
) -> Result<(), DavError> {
    let filter_el = xml::child(root, CALDAV, "filter")
        .ok_or_else(|| invalid_filter("calendar-query without filter"))?;
    let filter = filter::parse_filter(filter_el)?;
    let spec = expand::parse_spec(root)?;
    let floating = floating_zone(res, root);
    let required = filter::required_range(&filter);
    for m in candidates(dav, req, res)? {
        if let Some((name, tr)) = &required {
            let spans = dav.items().spans(&m.meta);
            if spans.is_some_and(|s| !s.may_overlap(name, tr)) {
                continue;
            }
        }
        let Ok(bytes) = std::fs::read(&m.target.path) else {
            continue;
        };
        let Ok(cal) = ical::parse(&bytes) else {
            continue;
        };
        if required.is_some() {
            dav.items().set_spans(&m.meta, Spans::of(&cal));
        }
        let zones = Zones {
            cal: &cal,
            floating,
        };
        if filter::matches(&filter, &cal, &zones) {
            out.push_str(&response(dav, &m, what, spec, floating)?);
        }
    }
    Ok(())
}

/// free-busy-query: 200 with a `text/calendar` VFREEBUSY (not a multistatus).
fn free_busy(dav: &Dav, res: &Resource, root: Node<'_, '_>) -> Result<DavResponse, DavError> {
    let tr = freebusy::parse_query(root)?;
    let floating = floating_zone(res, root);
    let members = if res.is_dir() {
        res.members(dav)?
    } else {
        vec![Resource::open(res.target.clone())?]
    };
    let objects = members
        .into_iter()
        .filter(|m| !m.is_dir())
        .filter_map(|m| std::fs::read(&m.target.path).ok());
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let body = freebusy::answer(objects, floating, &tr, now_s);
    Ok(DavResponse {
        status: 200,
        headers: vec![("Content-Type".into(), "text/calendar; charset=utf-8".into())],
        body: body.into_bytes(),
    })
}

#[cfg(test)]
mod tests {
    use crate::tests::{body, call, TempDir};
    use crate::Dav;

    const EV1: &str = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:e1\r\nSUMMARY:Standup\r\nDTSTART:20240110T100000Z\r\nDTEND:20240110T110000Z\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
    const EV2: &str = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:e2\r\nSUMMARY:Review\r\nDTSTART:20240301T100000Z\r\nDURATION:PT1H\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
    const TODO: &str = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VTODO\r\nUID:t1\r\nDUE:20240110T120000Z\r\nSTATUS:NEEDS-ACTION\r\nEND:VTODO\r\nEND:VCALENDAR\r\n";

    fn setup() -> (TempDir, Dav) {
        let d = TempDir::new("report");
        let dav = Dav::new(d.path());
        assert_eq!(call(&dav, "MKCALENDAR", "/cal/", &[], b"").status, 201);
        for (n, b) in [("e1.ics", EV1), ("e2.ics", EV2), ("t1.ics", TODO)] {
            assert_eq!(
                call(&dav, "PUT", &format!("/cal/{n}"), &[], b.as_bytes()).status,
                201
            );
        }
        (d, dav)
    }

    /// The body of a Depth 1 REPORT on `/cal/`.
    fn report_cal(dav: &Dav, q: &[u8]) -> String {
        body(&call(dav, "REPORT", "/cal/", &[("Depth", "1")], q))
    }

    fn query(range: &str, comp: &str) -> String {
        format!(
            r#"<C:calendar-query xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop><D:getetag/></D:prop><C:filter><C:comp-filter name="VCALENDAR"><C:comp-filter name="{comp}">{range}</C:comp-filter></C:comp-filter></C:filter></C:calendar-query>"#
        )
    }

    #[test]
    fn calendar_query_time_range() {
        let (_d, dav) = setup();
        let q = query(
            r#"<C:time-range start="20240110T000000Z" end="20240111T000000Z"/>"#,
            "VEVENT",
        );
        let b = report_cal(&dav, q.as_bytes());
        assert!(
            b.contains("/cal/e1.ics") && !b.contains("e2.ics") && !b.contains("t1.ics"),
            "{b}"
        );
        let q = query(
            r#"<C:time-range start="20240110T000000Z" end="20240111T000000Z"/>"#,
            "VTODO",
        );
        let b = report_cal(&dav, q.as_bytes());
        assert!(b.contains("t1.ics") && !b.contains("e1.ics"), "{b}");
        let b = report_cal(&dav, query("", "VEVENT").as_bytes());
        assert!(
            b.contains("e1.ics") && b.contains("e2.ics") && !b.contains("t1.ics"),
            "{b}"
        );
        let pf =
            r#"<C:prop-filter name="SUMMARY"><C:text-match>review</C:text-match></C:prop-filter>"#;
        let b = report_cal(&dav, query(pf, "VEVENT").as_bytes());
        assert!(b.contains("e2.ics") && !b.contains("e1.ics"), "{b}");
        let pf = r#"<C:prop-filter name="COMPLETED"><C:is-not-defined/></C:prop-filter>"#;
        let b = report_cal(&dav, query(pf, "VTODO").as_bytes());
        assert!(b.contains("t1.ics"), "{b}");
        let bad = query(r#"<C:time-range start="2024"/>"#, "VEVENT");
        let r = call(&dav, "REPORT", "/cal/", &[("Depth", "1")], bad.as_bytes());
        assert_eq!(r.status, 403);
        assert!(body(&r).contains("C:valid-filter"));
    }

    #[test]
    fn multiget_returns_data_and_404s() {
        let (_d, dav) = setup();
        let q = r#"<C:calendar-multiget xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop><D:getetag/><C:calendar-data/></D:prop><D:href>/cal/e1.ics</D:href><D:href>http://localhost/cal/none.ics</D:href><D:href>/../etc/passwd</D:href></C:calendar-multiget>"#;
        let r = call(&dav, "REPORT", "/cal/", &[("Depth", "1")], q.as_bytes());
        assert_eq!(r.status, 207);
        let b = body(&r);
        assert!(
            b.contains("<D:href>/cal/e1.ics</D:href>") && b.contains("SUMMARY:Standup"),
            "{b}"
        );
        assert!(
            b.contains("<D:href>http://localhost/cal/none.ics</D:href><D:status>HTTP/1.1 404"),
            "{b}"
        );
        assert!(
            b.contains("<D:href>/../etc/passwd</D:href><D:status>HTTP/1.1 404"),
            "{b}"
        );
    }

    #[test]
    fn sync_collection_reports_changes_and_deletions() {
        let (_d, dav) = setup();
        let sync = |tok: &str| {
            format!(
                r#"<D:sync-collection xmlns:D="DAV:"><D:sync-token>{tok}</D:sync-token><D:sync-level>1</D:sync-level><D:prop><D:getetag/></D:prop></D:sync-collection>"#
            )
        };
        let b = body(&call(&dav, "REPORT", "/cal/", &[], sync("").as_bytes()));
        assert!(
            b.contains("e1.ics") && b.contains("e2.ics") && b.contains("t1.ics"),
            "{b}"
        );
        let token = b
            .split("<D:sync-token>")
            .nth(1)
            .unwrap()
            .split('<')
            .next()
            .unwrap()
            .to_owned();
        let b = body(&call(&dav, "REPORT", "/cal/", &[], sync(&token).as_bytes()));
        assert!(!b.contains(".ics"), "no changes expected: {b}");
        assert_eq!(call(&dav, "DELETE", "/cal/e1.ics", &[], b"").status, 204);
        assert_eq!(
            call(
                &dav,
                "PUT",
                "/cal/e2.ics",
                &[],
                EV2.replace("Review", "Retro").as_bytes()
            )
            .status,
            204
        );
        let b = body(&call(&dav, "REPORT", "/cal/", &[], sync(&token).as_bytes()));
        assert!(
            b.contains("<D:href>/cal/e1.ics</D:href><D:status>HTTP/1.1 404 Not Found</D:status>"),
            "{b}"
        );
        assert!(
            b.contains("<D:href>/cal/e2.ics</D:href><D:propstat>"),
            "{b}"
        );
        assert!(!b.contains("t1.ics"), "{b}");
        let ctag = body(&call(&dav, "PROPFIND", "/cal/", &[("Depth", "0")], br#"<propfind xmlns="DAV:"><prop><getctag xmlns="http://calendarserver.org/ns/"/></prop></propfind>"#));
        let new_token = b
            .split("<D:sync-token>")
            .nth(1)
            .unwrap()
            .split('<')
            .next()
            .unwrap();
        assert!(ctag.contains(new_token), "{ctag}");
        for bad in [
            "urn:volley:sync:zz:1",
            "http://example.com/",
            "urn:volley:sync:0:5",
        ] {
            let r = call(&dav, "REPORT", "/cal/", &[], sync(bad).as_bytes());
            assert_eq!(r.status, 403, "{bad}");
            assert!(body(&r).contains("D:valid-sync-token"));
        }
    }

    #[test]
    fn unknown_report_and_bad_xml() {
        let (_d, dav) = setup();
        let r = call(
            &dav,
            "REPORT",
            "/cal/",
            &[],
            br#"<D:expand-property xmlns:D="DAV:"/>"#,
        );
        assert_eq!(r.status, 403);
        assert!(body(&r).contains("D:supported-report"));
        assert_eq!(call(&dav, "REPORT", "/cal/", &[], b"").status, 400);
        assert_eq!(call(&dav, "REPORT", "/none/", &[], b"<x/>").status, 404);
    }
}
