//! What the DAV probe reads of multistatus answers (RFC 4918 section 13): which
//! properties came back with 200, the resource type, the reports a collection lists, a
//! sync-token. The XML is read by the one client-side reader, [`crate::xml`] (namespaced,
//! with roxmltree); this module keeps the probe's questions.

use crate::xml::{parse_multistatus, MultistatusError};

/// What a PROPFIND Depth 0 said about one collection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PropfindSummary {
    /// `resourcetype` holds `DAV:collection`.
    pub collection: bool,
    /// `resourcetype` holds `C:calendar`.
    pub calendar: bool,
    /// `CS:getctag` came back with a value.
    pub ctag: bool,
    /// `DAV:sync-token` came back with a value.
    pub sync_token: bool,
    /// Local names of the reports in `supported-report-set`.
    pub reports: Vec<String>,
}

/// Why an answer says nothing to the probe: not a multistatus, or one without a
/// response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AnswerError {
    /// Not a multistatus.
    #[error(transparent)]
    Multistatus(#[from] MultistatusError),
    /// A multistatus with no `response` element.
    #[error("multistatus without a response")]
    NoResponse,
}

/// A property that came back with a value (not empty).
fn has_value(v: &Option<String>) -> bool {
    v.as_deref().is_some_and(|t| !t.trim().is_empty())
}

/// The properties of the first `response` that came back in a 200 propstat.
pub(crate) fn propfind_summary(body: &[u8]) -> Result<PropfindSummary, AnswerError> {
    let ms = parse_multistatus(body)?;
    let e = ms.entries.first().ok_or(AnswerError::NoResponse)?;
    Ok(PropfindSummary {
        collection: e.collection,
        calendar: e.calendar,
        ctag: has_value(&e.ctag),
        sync_token: has_value(&e.sync_token),
        reports: e.reports.clone(),
    })
}

/// Whether a sync-collection answer carries its new `DAV:sync-token` (RFC 6578 3.2).
pub(crate) fn has_sync_token(body: &[u8]) -> Result<bool, MultistatusError> {
    Ok(has_value(&parse_multistatus(body)?.sync_token))
}

/// Whether the response whose href ends with `name` carries a `DAV:getetag` in a 200
/// propstat (what an ETag-driven client reads from a Depth 1 listing).
pub(crate) fn lists_etag(body: &[u8], name: &str) -> Result<bool, MultistatusError> {
    Ok(parse_multistatus(body)?
        .entries
        .iter()
        .any(|e| e.href.ends_with(name) && has_value(&e.etag)))
}

/// The hrefs of a multistatus's responses, as paths.
pub(crate) fn hrefs(body: &[u8]) -> Result<Vec<String>, MultistatusError> {
    Ok(parse_multistatus(body)?
        .entries
        .into_iter()
        .map(|e| e.href)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from Xandikos 0.4.10 (trimmed): a calendar's PROPFIND Depth 0.
    const XANDIKOS: &str = r#"<ns0:multistatus xmlns:ns0="DAV:" xmlns:ns1="http://calendarserver.org/ns/" xmlns:ns3="urn:ietf:params:xml:ns:caldav"><ns0:response><ns0:href>/user1/calendars/calendar/</ns0:href><ns0:propstat><ns0:status>HTTP/1.1 200 OK</ns0:status><ns0:prop><ns0:resourcetype><ns0:collection /><ns3:calendar /></ns0:resourcetype><ns1:getctag>ae44</ns1:getctag><ns0:supported-report-set><ns0:supported-report><ns0:report><ns3:calendar-multiget /></ns0:report></ns0:supported-report><ns0:supported-report><ns0:report><ns0:sync-collection /></ns0:report></ns0:supported-report></ns0:supported-report-set><ns0:sync-token>ae44</ns0:sync-token></ns0:prop></ns0:propstat></ns0:response></ns0:multistatus>"#;

    #[test]
    fn a_calendar_answer_is_read_by_namespace() {
        let s = propfind_summary(XANDIKOS.as_bytes()).unwrap();
        assert!(s.collection && s.calendar && s.ctag && s.sync_token);
        assert_eq!(s.reports, ["calendar-multiget", "sync-collection"]);
        assert_eq!(
            hrefs(XANDIKOS.as_bytes()).unwrap(),
            ["/user1/calendars/calendar/"]
        );
    }

    #[test]
    fn a_404_propstat_and_a_plain_directory_show_nothing() {
        let body = r#"<?xml version="1.0"?><D:multistatus xmlns:D="DAV:"><D:response><D:href>/dav/u/</D:href>
<D:propstat><D:prop><D:resourcetype><D:collection/></D:resourcetype></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>
<D:propstat><D:prop><x:getctag xmlns:x="http://calendarserver.org/ns/"/><D:sync-token/></D:prop><D:status>HTTP/1.1 404 Not Found</D:status></D:propstat>
</D:response></D:multistatus>"#;
        let s = propfind_summary(body.as_bytes()).unwrap();
        assert!(s.collection && !s.calendar && !s.ctag && !s.sync_token);
        assert!(s.reports.is_empty());
        // The same element names in another namespace are not DAV's.
        let fake = r#"<m:multistatus xmlns:m="urn:other"><m:response/></m:multistatus>"#;
        assert!(propfind_summary(fake.as_bytes())
            .unwrap_err()
            .to_string()
            .contains("not DAV:multistatus"));
        assert!(propfind_summary(b"<html>nope").is_err());
    }

    #[test]
    fn sync_token_of_a_sync_collection_answer() {
        let body = r#"<d:multistatus xmlns:d="DAV:"><d:sync-token>http://x/sync/1</d:sync-token></d:multistatus>"#;
        assert!(has_sync_token(body.as_bytes()).unwrap());
        let none = r#"<d:multistatus xmlns:d="DAV:"></d:multistatus>"#;
        assert!(!has_sync_token(none.as_bytes()).unwrap());
    }
}
