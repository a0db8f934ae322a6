//! REPORT: calendar-multiget and calendar-query (RFC 4791 section 7), sync-collection
//! (RFC 6578). Other reports answer 403 with `DAV:supported-report`.

use std::collections::BTreeMap;

use roxmltree::Node;

use crate::error::DavError;
use crate::ical::{self, Component, TimeRange};
use crate::props::{self, PropRequest, Resource};
use crate::store::{self, Change};
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
        multiget(dav, root, &what, &mut out)?;
    } else if kind.is(CALDAV, "calendar-query") {
        query(dav, req, &res, root, &what, &mut out)?;
    } else if kind.is(DAV, "sync-collection") {
        sync(dav, &res, root, &what, &mut out)?;
    } else {
        return Err(DavError::Condition {
            status: 403,
            cond: "D:supported-report",
            reason: "supported reports: calendar-multiget, calendar-query, sync-collection",
        });
    }
    out.push_str("</D:multistatus>\n");
    Ok(DavResponse::multistatus(out))
}

/// The `DAV:prop` / `allprop` / `propname` child of a report body (default: getetag).
fn requested_props(root: Node<'_, '_>) -> PropRequest {
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

fn status_response(href: &str, status: &str) -> String {
    format!(
        "<D:response><D:href>{}</D:href><D:status>HTTP/1.1 {status}</D:status></D:response>",
        xml::escape(href)
    )
}

fn multiget(
    dav: &Dav,
    root: Node<'_, '_>,
    what: &PropRequest,
    out: &mut String,
) -> Result<(), DavError> {
    for h in xml::elements(root).filter(|n| Name::of(*n).is(DAV, "href")) {
        let href = xml::text(h);
        let found = dav
            .locate_href(&href)
            .ok()
            .and_then(|t| Resource::open(t).ok());
        match found {
            Some(r) if !r.is_dir() => out.push_str(&props::response(dav, &r, what)?),
            Some(_) => out.push_str(&status_response(&href, "403 Forbidden")),
            None => out.push_str(&status_response(&href, "404 Not Found")),
        }
    }
    Ok(())
}

// ------------------------------------------------------------------ calendar-query

#[derive(Debug, Default)]
struct CompFilter {
    name: String,
    is_not_defined: bool,
    time_range: Option<TimeRange>,
    props: Vec<PropFilter>,
    comps: Vec<CompFilter>,
}

#[derive(Debug, Default)]
struct PropFilter {
    name: String,
    is_not_defined: bool,
    time_range: Option<TimeRange>,
    text_match: Option<TextMatch>,
    params: Vec<ParamFilter>,
}

#[derive(Debug, Default)]
struct ParamFilter {
    name: String,
    is_not_defined: bool,
    text_match: Option<TextMatch>,
}

#[derive(Debug)]
struct TextMatch {
    text: String,
    negate: bool,
    /// i;octet (exact) rather than the default i;ascii-casemap.
    octet: bool,
}

impl TextMatch {
    fn matches(&self, v: &str) -> bool {
        let hit = if self.octet {
            v.contains(&self.text)
        } else {
            v.to_ascii_lowercase()
                .contains(&self.text.to_ascii_lowercase())
        };
        hit != self.negate
    }
}

fn invalid_filter(reason: &'static str) -> DavError {
    DavError::Condition {
        status: 403,
        cond: "C:valid-filter",
        reason,
    }
}

fn name_attr(n: Node<'_, '_>) -> Result<String, DavError> {
    n.attribute("name")
        .map(str::to_ascii_uppercase)
        .ok_or_else(|| invalid_filter("filter element without a name"))
}

fn parse_time_range(n: Node<'_, '_>) -> Result<TimeRange, DavError> {
    let get = |a: &str| -> Result<Option<i64>, DavError> {
        match n.attribute(a) {
            None => Ok(None),
            Some(v) => match ical::parse_datetime(v) {
                Some(t) if !t.floating => Ok(Some(t.secs)),
                _ => Err(invalid_filter(
                    "time-range start/end must be UTC date-times",
                )),
            },
        }
    };
    let tr = TimeRange {
        start: get("start")?,
        end: get("end")?,
    };
    if tr.start.is_none() && tr.end.is_none() {
        return Err(invalid_filter("time-range needs start or end"));
    }
    Ok(tr)
}

fn parse_text_match(n: Node<'_, '_>) -> Result<TextMatch, DavError> {
    let octet = match n.attribute("collation") {
        None | Some("i;ascii-casemap") => false,
        Some("i;octet") => true,
        Some(_) => {
            return Err(DavError::Condition {
                status: 403,
                cond: "C:supported-collation",
                reason: "supported collations: i;ascii-casemap, i;octet",
            })
        }
    };
    Ok(TextMatch {
        text: xml::text(n),
        negate: n.attribute("negate-condition") == Some("yes"),
        octet,
    })
}

fn parse_comp_filter(n: Node<'_, '_>) -> Result<CompFilter, DavError> {
    let mut f = CompFilter {
        name: name_attr(n)?,
        ..Default::default()
    };
    for c in xml::elements(n) {
        match Name::of(c) {
            x if x.is(CALDAV, "is-not-defined") => f.is_not_defined = true,
            x if x.is(CALDAV, "time-range") => f.time_range = Some(parse_time_range(c)?),
            x if x.is(CALDAV, "prop-filter") => f.props.push(parse_prop_filter(c)?),
            x if x.is(CALDAV, "comp-filter") => f.comps.push(parse_comp_filter(c)?),
            _ => return Err(invalid_filter("unknown element in comp-filter")),
        }
    }
    Ok(f)
}

fn parse_prop_filter(n: Node<'_, '_>) -> Result<PropFilter, DavError> {
    let mut f = PropFilter {
        name: name_attr(n)?,
        ..Default::default()
    };
    for c in xml::elements(n) {
        match Name::of(c) {
            x if x.is(CALDAV, "is-not-defined") => f.is_not_defined = true,
            x if x.is(CALDAV, "time-range") => f.time_range = Some(parse_time_range(c)?),
            x if x.is(CALDAV, "text-match") => f.text_match = Some(parse_text_match(c)?),
            x if x.is(CALDAV, "param-filter") => {
                let mut p = ParamFilter {
                    name: name_attr(c)?,
                    ..Default::default()
                };
                for g in xml::elements(c) {
                    match Name::of(g) {
                        x if x.is(CALDAV, "is-not-defined") => p.is_not_defined = true,
                        x if x.is(CALDAV, "text-match") => {
                            p.text_match = Some(parse_text_match(g)?)
                        }
                        _ => return Err(invalid_filter("unknown element in param-filter")),
                    }
                }
                f.params.push(p);
            }
            _ => return Err(invalid_filter("unknown element in prop-filter")),
        }
    }
    Ok(f)
}

/// Whether component `c` (already known to carry the filter's name) passes the
/// filter's tests (RFC 4791 section 9.7.1).
fn comp_passes(f: &CompFilter, c: &Component) -> bool {
    if let Some(tr) = &f.time_range {
        if !tr.overlaps(c) {
            return false;
        }
    }
    f.props.iter().all(|p| prop_passes(p, c))
        && f.comps
            .iter()
            .all(|sub| comp_filter_matches(sub, &c.children))
}

/// A nested comp-filter against the children of the current scope.
fn comp_filter_matches(f: &CompFilter, children: &[Component]) -> bool {
    let mut named = children.iter().filter(|c| c.name == f.name);
    if f.is_not_defined {
        return named.next().is_none();
    }
    named.any(|c| comp_passes(f, c))
}

fn prop_passes(f: &PropFilter, c: &Component) -> bool {
    let mut named = c.props.iter().filter(|p| p.name == f.name).peekable();
    if f.is_not_defined {
        return named.peek().is_none();
    }
    named.any(|p| {
        f.time_range
            .as_ref()
            .is_none_or(|tr| tr.contains_value(&p.value))
            && f.text_match.as_ref().is_none_or(|t| t.matches(&p.value))
            && f.params.iter().all(|pf| {
                let v = p.param(&pf.name);
                if pf.is_not_defined {
                    v.is_none()
                } else {
                    v.is_some_and(|v| pf.text_match.as_ref().is_none_or(|t| t.matches(v)))
                }
            })
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
    let top = xml::elements(filter_el)
        .next()
        .ok_or_else(|| invalid_filter("empty filter"))?;
    if !Name::of(top).is(CALDAV, "comp-filter") {
        return Err(invalid_filter("filter must hold one comp-filter"));
    }
    let filter = parse_comp_filter(top)?;
    let depth = props::depth(req, false).unwrap_or(1);
    let candidates = if res.is_dir() {
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
    };
    for m in candidates {
        let Ok(bytes) = std::fs::read(&m.target.path) else {
            continue;
        };
        let Ok(cal) = ical::parse(&bytes) else {
            continue;
        };
        let top_ok = if filter.is_not_defined {
            cal.name != filter.name
        } else {
            cal.name == filter.name && comp_passes(&filter, &cal)
        };
        if top_ok {
            out.push_str(&props::response(dav, &m, what)?);
        }
    }
    Ok(())
}

// ------------------------------------------------------------------ sync-collection

fn sync(
    dav: &Dav,
    res: &Resource,
    root: Node<'_, '_>,
    what: &PropRequest,
    out: &mut String,
) -> Result<(), DavError> {
    if !res.is_dir() {
        return Err(DavError::Condition {
            status: 403,
            cond: "D:supported-report",
            reason: "sync-collection applies to collections only",
        });
    }
    let journal = store::read_journal(&res.target.path);
    let token = xml::child(root, DAV, "sync-token")
        .map(xml::text)
        .unwrap_or_default();
    let token = token.trim();
    let invalid = DavError::Condition {
        status: 403,
        cond: "D:valid-sync-token",
        reason: "the sync token is unknown or no longer valid; sync again without a token",
    };
    if let Some(level) = xml::child(root, DAV, "sync-level") {
        if xml::text(level).trim() != "1" {
            return Err(DavError::Condition {
                status: 403,
                cond: "D:sync-traversal-supported",
                reason: "only sync-level 1 is supported",
            });
        }
    }
    if token.is_empty() {
        for m in res.members(dav)? {
            out.push_str(&props::response(dav, &m, what)?);
        }
    } else {
        let since = journal.parse_token(token).ok_or(invalid)?;
        let mut last: BTreeMap<&[u8], Change> = BTreeMap::new();
        for (n, change, name) in &journal.entries {
            let visible = !res.target.segs.is_empty() || dav.root_member_visible(name);
            if *n > since && visible {
                last.insert(name.as_slice(), *change);
            }
        }
        for name in last.keys() {
            let t = res.target.child(name);
            match Resource::open(t.clone()) {
                Ok(m) => out.push_str(&props::response(dav, &m, what)?),
                Err(_) => out.push_str(&status_response(&t.href(false), "404 Not Found")),
            }
        }
    }
    out.push_str(&format!(
        "<D:sync-token>{}</D:sync-token>",
        xml::escape(&journal.token())
    ));
    Ok(())
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
