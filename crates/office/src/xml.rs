//! The XML a CalDAV client sends (bodies as the clients write them) and reads
//! (multistatus answers, parsed with `roxmltree`).

const NS: &str = r#"xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav" xmlns:CS="http://calendarserver.org/ns/" xmlns:A="http://apple.com/ns/ical/""#;
const DAV: &str = "DAV:";
const CALDAV: &str = "urn:ietf:params:xml:ns:caldav";
const CS: &str = "http://calendarserver.org/ns/";

/// A PROPFIND body asking for `props` (prefixed names, e.g. `<CS:getctag/>`).
pub fn propfind(props: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="utf-8"?><D:propfind {NS}><D:prop>{props}</D:prop></D:propfind>"#
    )
}

/// A sync-collection REPORT from `token` (empty: an initial sync).
pub fn sync_collection(token: &str, props: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="utf-8"?><D:sync-collection {NS}><D:sync-token>{}</D:sync-token><D:sync-level>1</D:sync-level><D:prop>{props}</D:prop></D:sync-collection>"#,
        escape(token)
    )
}

/// A calendar-multiget of `hrefs` asking for ETag and data.
pub fn multiget<'a>(hrefs: impl Iterator<Item = &'a str>) -> String {
    let mut s = format!(
        r#"<?xml version="1.0" encoding="utf-8"?><C:calendar-multiget {NS}><D:prop><D:getetag/><C:calendar-data/></D:prop>"#
    );
    for h in hrefs {
        s.push_str("<D:href>");
        s.push_str(&escape(h));
        s.push_str("</D:href>");
    }
    s.push_str("</C:calendar-multiget>");
    s
}

/// A calendar-query for the ETags of VEVENTs, those overlapping [start, end) (UTC
/// `YYYYMMDDTHHMMSSZ`) when `range` is given, as Evolution sends it; every VEVENT
/// without (the capability probe's question).
pub fn calendar_query(range: Option<(&str, &str)>) -> String {
    let within = range.map_or_else(String::new, |(start, end)| {
        format!(r#"<C:time-range start="{start}" end="{end}"/>"#)
    });
    format!(
        r#"<?xml version="1.0" encoding="utf-8"?><C:calendar-query {NS}><D:prop><D:getetag/></D:prop><C:filter><C:comp-filter name="VCALENDAR"><C:comp-filter name="VEVENT">{within}</C:comp-filter></C:comp-filter></C:filter></C:calendar-query>"#
    )
}

/// A MKCALENDAR body.
pub fn mkcalendar(name: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="utf-8"?><C:mkcalendar {NS}><D:set><D:prop><D:displayname>{}</D:displayname><C:supported-calendar-component-set><C:comp name="VEVENT"/></C:supported-calendar-component-set></D:prop></D:set></C:mkcalendar>"#,
        escape(name)
    )
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One `DAV:response` of a multistatus, with what the office reads of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Entry {
    /// The href as a path (an absolute URL's authority removed), percent-encoded.
    pub href: String,
    /// The response-level status (sync-collection deletions: 404; truncation: 507),
    /// or the status of the propstat that carried 200 properties (200).
    pub status: u16,
    /// `DAV:getetag`, quotes kept.
    pub etag: Option<String>,
    /// `C:calendar-data`.
    pub data: Option<String>,
    /// `CS:getctag`.
    pub ctag: Option<String>,
    /// `DAV:sync-token` as a property.
    pub sync_token: Option<String>,
    /// `DAV:resourcetype` holds `DAV:collection`.
    pub collection: bool,
    /// `DAV:resourcetype` holds `C:calendar`.
    pub calendar: bool,
    /// `DAV:supported-report-set` names sync-collection.
    pub sync_report: bool,
    /// The local names of the reports `DAV:supported-report-set` lists, in order.
    pub reports: Vec<String>,
    /// The first `DAV:href` under `current-user-principal` or `calendar-home-set`.
    pub principal: Option<String>,
    /// The first `DAV:href` under `C:calendar-home-set`.
    pub home: Option<String>,
}

/// A parsed multistatus.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Multistatus {
    /// The responses, in order.
    pub entries: Vec<Entry>,
    /// The top-level `DAV:sync-token` (sync-collection).
    pub sync_token: Option<String>,
}

impl Multistatus {
    /// Whether the server truncated the answer (a 507 response, RFC 6578 3.6).
    pub fn truncated(&self) -> bool {
        self.entries.iter().any(|e| e.status == 507)
    }
}

/// Why a 207 body could not be read (counted as a `Malformed` violation).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MultistatusError {
    /// The body is not UTF-8.
    #[error("multistatus is not UTF-8")]
    NotUtf8,
    /// The body is not well-formed XML.
    #[error("bad XML: {0}")]
    BadXml(roxmltree::Error),
    /// The root element is another one (its local name).
    #[error("the answer's root is <{0}>, not DAV:multistatus")]
    Root(String),
    /// A `response` without an `href`.
    #[error("a response without href")]
    NoHref,
}

/// Parses a 207 body; `Err` names what is wrong. The one reader of multistatus answers
/// on the client side: the office's clients and the targets' DAV probe read through it.
pub fn parse_multistatus(body: &[u8]) -> Result<Multistatus, MultistatusError> {
    let text = std::str::from_utf8(body).map_err(|_| MultistatusError::NotUtf8)?;
    let doc = roxmltree::Document::parse(text).map_err(MultistatusError::BadXml)?;
    let root = doc.root_element();
    if !is(root, DAV, "multistatus") {
        return Err(MultistatusError::Root(root.tag_name().name().to_owned()));
    }
    let mut out = Multistatus::default();
    for node in root.children().filter(|n| n.is_element()) {
        if is(node, DAV, "sync-token") {
            out.sync_token = Some(node.text().unwrap_or("").trim().to_owned());
        } else if is(node, DAV, "response") {
            out.entries.push(entry(node)?);
        }
    }
    Ok(out)
}

fn is(n: roxmltree::Node<'_, '_>, ns: &str, name: &str) -> bool {
    n.is_element() && n.tag_name().name() == name && n.tag_name().namespace() == Some(ns)
}

fn child<'a, 'i>(
    n: roxmltree::Node<'a, 'i>,
    ns: &str,
    name: &str,
) -> Option<roxmltree::Node<'a, 'i>> {
    n.children().find(|c| is(*c, ns, name))
}

fn text(n: roxmltree::Node<'_, '_>) -> String {
    n.descendants()
        .filter(|d| d.is_text())
        .filter_map(|d| d.text())
        .collect::<String>()
}

/// `HTTP/1.1 404 Not Found` -> 404.
fn status_code(line: &str) -> u16 {
    line.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// An href as a path: `http://host:port/a/b` -> `/a/b`.
pub fn href_path(href: &str) -> String {
    let href = href.trim();
    match href.find("://") {
        Some(i) => match href[i + 3..].find('/') {
            Some(j) => href[i + 3 + j..].to_owned(),
            None => "/".to_owned(),
        },
        None => href.to_owned(),
    }
}

fn entry(node: roxmltree::Node<'_, '_>) -> Result<Entry, MultistatusError> {
    let href = child(node, DAV, "href").ok_or(MultistatusError::NoHref)?;
    let mut e = Entry {
        href: href_path(&text(href)),
        ..Entry::default()
    };
    if let Some(s) = child(node, DAV, "status") {
        e.status = status_code(&text(s));
    }
    for ps in node.children().filter(|c| is(*c, DAV, "propstat")) {
        let code = child(ps, DAV, "status").map_or(0, |s| status_code(&text(s)));
        if code != 200 {
            continue;
        }
        if e.status == 0 {
            e.status = 200;
        }
        let Some(prop) = child(ps, DAV, "prop") else {
            continue;
        };
        for p in prop.children().filter(|c| c.is_element()) {
            let (ns, name) = (p.tag_name().namespace().unwrap_or(""), p.tag_name().name());
            match (ns, name) {
                (DAV, "getetag") => e.etag = Some(text(p).trim().to_owned()),
                (CALDAV, "calendar-data") => e.data = Some(text(p)),
                (CS, "getctag") => e.ctag = Some(text(p).trim().to_owned()),
                (DAV, "sync-token") => e.sync_token = Some(text(p).trim().to_owned()),
                (DAV, "resourcetype") => {
                    e.collection = child(p, DAV, "collection").is_some();
                    e.calendar = child(p, CALDAV, "calendar").is_some();
                }
                (DAV, "supported-report-set") => {
                    e.sync_report = p.descendants().any(|d| is(d, DAV, "sync-collection"));
                    e.reports = p
                        .descendants()
                        .filter(|d| is(*d, DAV, "report"))
                        .filter_map(|r| r.children().find(|c| c.is_element()))
                        .map(|r| r.tag_name().name().to_owned())
                        .collect();
                }
                (DAV, "current-user-principal") => {
                    e.principal = child(p, DAV, "href").map(|h| href_path(&text(h)))
                }
                (CALDAV, "calendar-home-set") => {
                    e.home = child(p, DAV, "href").map(|h| href_path(&text(h)))
                }
                _ => {}
            }
        }
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sync_answer_parses_changes_deletions_and_the_token() {
        let body = br#"<?xml version="1.0"?><d:multistatus xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav">
          <d:response><d:href>http://h:1/u/cal/a.ics</d:href><d:propstat><d:prop><d:getetag>"e1"</d:getetag><c:calendar-data>BEGIN:VCALENDAR&#13;
END:VCALENDAR</c:calendar-data></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat>
          <d:propstat><d:prop><d:getcontenttype/></d:prop><d:status>HTTP/1.1 404 Not Found</d:status></d:propstat></d:response>
          <d:response><d:href>/u/cal/b.ics</d:href><d:status>HTTP/1.1 404 Not Found</d:status></d:response>
          <d:sync-token>tok-2</d:sync-token></d:multistatus>"#;
        let m = parse_multistatus(body).unwrap();
        assert_eq!(m.sync_token.as_deref(), Some("tok-2"));
        assert_eq!(m.entries[0].href, "/u/cal/a.ics");
        assert_eq!(m.entries[0].status, 200);
        assert_eq!(m.entries[0].etag.as_deref(), Some("\"e1\""));
        assert_eq!(
            m.entries[0].data.as_deref(),
            Some("BEGIN:VCALENDAR\r\nEND:VCALENDAR")
        );
        assert_eq!(m.entries[1].status, 404);
        assert!(!m.truncated());
    }

    #[test]
    fn collection_properties_are_read() {
        let body = br#"<D:multistatus xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav" xmlns:CS="http://calendarserver.org/ns/"><D:response><D:href>/u/cal/</D:href><D:propstat><D:prop><D:resourcetype><D:collection/><C:calendar/></D:resourcetype><CS:getctag>c1</CS:getctag><D:supported-report-set><D:supported-report><D:report><D:sync-collection/></D:report></D:supported-report></D:supported-report-set><D:current-user-principal><D:href>/u/</D:href></D:current-user-principal></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response></D:multistatus>"#;
        let e = &parse_multistatus(body).unwrap().entries[0];
        assert!(e.calendar && e.sync_report);
        assert_eq!(e.ctag.as_deref(), Some("c1"));
        assert_eq!(e.principal.as_deref(), Some("/u/"));
    }

    #[test]
    fn not_a_multistatus_is_an_error() {
        assert!(parse_multistatus(b"<html><body>hi</body></html>").is_err());
        assert!(parse_multistatus(b"plain text").is_err());
        assert!(multiget(["/a&b.ics"].into_iter()).contains("/a&amp;b.ics"));
    }
}
