//! The DAV capability probe: what a WebDAV / CalDAV server offers, asked as a client
//! would and reported, never assumed (docs/methodology.md, "CalDAV and WebDAV targets").
//!
//! On one account's calendar: OPTIONS (the `DAV` classes, `calendar-access`), PROPFIND
//! Depth 0 (resource type, ctag, sync-token, supported reports), a PUT of a probe item
//! with `If-None-Match: *`, the same PUT with a stale `If-Match` (412 when conditional
//! writes are honoured) and again with `If-None-Match: *` (412 when create-only writes
//! are), a GET that must return the bytes put, REPORT sync-collection and
//! calendar-query, and a DELETE of the probe item. A server that answers neither
//! OPTIONS with a `DAV` header nor PROPFIND with 207 does not speak DAV:
//! [`DavProbeError::NotDav`].

use crate::http::{request, Reply, RequestError};
use crate::xml;
use crate::Account;
use std::net::SocketAddr;
use std::time::Duration;
use volley_engine::ErrorKind;

mod answers;

/// Whether a DAV server is up: OPTIONS `/` got any HTTP answer (readiness of the
/// CalDAV servers, which serve no file to compare; their set-up checks the rest).
pub fn responds(addr: SocketAddr, timeout: Duration) -> Result<u16, RequestError> {
    request(addr, None, "OPTIONS", "/", &[], b"", timeout).map(|r| r.status)
}

/// What one server offers on one calendar.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DavCapabilities {
    /// The collection probed (path).
    pub collection: String,
    /// The `DAV` header's classes from OPTIONS (`1`, `2`, `3`, `calendar-access`...).
    pub dav_classes: Vec<String>,
    /// The `Allow` header's methods from OPTIONS.
    pub allow: Vec<String>,
    /// `calendar-access` in the `DAV` header (RFC 4791).
    pub calendar_access: bool,
    /// The collection's resource type is a CalDAV calendar.
    pub is_calendar: bool,
    /// PROPFIND returned a `CS:getctag`.
    pub ctag: bool,
    /// PROPFIND returned a `DAV:sync-token`.
    pub sync_token: bool,
    /// Reports the collection lists in `supported-report-set`.
    pub supported_reports: Vec<String>,
    /// Status of the first PUT (`If-None-Match: *`) of the probe item.
    pub put_status: u16,
    /// That PUT answered an `ETag`.
    pub put_etag: bool,
    /// A PUT with a stale `If-Match` got 412 (conditional update honoured).
    pub conditional_put: bool,
    /// A second PUT with `If-None-Match: *` got 412 (create-only honoured).
    pub create_only_put: bool,
    /// GET returned the bytes put.
    pub get_round_trip: bool,
    /// A PROPFIND Depth 1 listing gives the item's `getetag` (how clients see what
    /// changed without a sync REPORT).
    pub listing_etags: bool,
    /// Status of REPORT sync-collection (RFC 6578).
    pub sync_collection_status: u16,
    /// That REPORT answered 207 with a new sync-token.
    pub sync_collection: bool,
    /// Status of REPORT calendar-query (RFC 4791 7.8).
    pub calendar_query_status: u16,
    /// That REPORT answered 207 listing the probe item.
    pub calendar_query: bool,
    /// Status of the probe item's DELETE.
    pub delete_status: u16,
}

impl DavCapabilities {
    /// What a CalDAV client would miss here, in words (empty: nothing).
    pub fn lacks(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        let mut no = |cond: bool, what| {
            if !cond {
                v.push(what)
            }
        };
        no(self.calendar_access, "calendar-access");
        no(self.is_calendar, "calendar collections");
        no(self.ctag, "getctag");
        no(self.sync_collection, "sync-collection REPORT");
        no(self.calendar_query, "calendar-query REPORT");
        no(self.put_etag, "ETag on PUT");
        no(self.listing_etags, "getetag in PROPFIND listings");
        no(self.conditional_put, "If-Match on PUT (412)");
        no(self.create_only_put, "If-None-Match: * on PUT (412)");
        v
    }
}

/// Why the capability probe could not say what a server offers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DavProbeError {
    /// Nothing answered.
    #[error("{url}: no answer: {reason}")]
    Unreachable {
        /// Where.
        url: String,
        /// The socket's problem.
        reason: String,
    },
    /// The server answered HTTP but not DAV.
    #[error("{url} does not speak WebDAV: {reason}")]
    NotDav {
        /// Where.
        url: String,
        /// What it answered instead.
        reason: String,
    },
    /// The credentials were refused.
    #[error("{url}: {user}'s credentials were refused (401)")]
    Unauthorized {
        /// Where.
        url: String,
        /// The account used.
        user: String,
    },
    /// The server answered DAV, incorrectly.
    #[error("{url}: {reason}")]
    Wrong {
        /// Where.
        url: String,
        /// What was wrong.
        reason: String,
    },
}

/// Probes `account`'s calendar (else its home, else `/`: [`Account::probe_path`]) on
/// `addr` (see the module doc). Every request is bounded by `timeout`; the probe item
/// is deleted at the end.
pub fn capabilities(
    addr: SocketAddr,
    account: &Account,
    timeout: Duration,
) -> Result<DavCapabilities, DavProbeError> {
    let coll = account.probe_path().to_owned();
    let p = Prober {
        addr,
        account,
        timeout,
        url: format!("http://{addr}{coll}"),
    };
    let mut caps = DavCapabilities {
        collection: coll.clone(),
        ..DavCapabilities::default()
    };
    p.discover(&mut caps)?;
    let item = format!("{coll}volley-probe-{}.ics", probe_id());
    let ics = probe_item(&item);
    let put = p.send(
        "PUT",
        &item,
        &[ICAL, ("If-None-Match", "*")],
        ics.as_bytes(),
    )?;
    caps.put_status = put.status;
    caps.put_etag = put.header("etag").is_some();
    let created = (200..300).contains(&put.status);
    // Everything after a created PUT runs before its DELETE, which is sent whatever
    // they answered, so a failed probe of a server volley does not own leaves no item.
    let checks = (|| -> Result<(), DavProbeError> {
        if created {
            p.item_checks(&mut caps, &item, &ics)?;
        }
        p.report_checks(&mut caps, &item)
    })();
    if created {
        caps.delete_status = p.send("DELETE", &item, &[], b"")?.status;
    }
    checks.map(|()| caps)
}

/// What PROPFIND Depth 0 asks of the collection.
const PROPS_CAPS: &str =
    "<D:resourcetype/><D:getetag/><CS:getctag/><D:sync-token/><D:supported-report-set/>";

/// The probe item's Content-Type.
const ICAL: (&str, &str) = ("Content-Type", "text/calendar; charset=utf-8");

/// One probe's requests: where, as whom, bounded by what.
struct Prober<'a> {
    addr: SocketAddr,
    account: &'a Account,
    timeout: Duration,
    /// The collection's URL, for the errors.
    url: String,
}

impl Prober<'_> {
    /// One request as the account; a failure names the collection's URL.
    fn send(
        &self,
        method: &'static str,
        path: &str,
        extra: &[(&'static str, &str)],
        body: &[u8],
    ) -> Result<Reply, DavProbeError> {
        let (addr, account) = (self.addr, Some(self.account));
        request(addr, account, method, path, extra, body, self.timeout).map_err(|e| {
            let (url, reason) = (self.url.clone(), e.to_string());
            match e.kind {
                ErrorKind::Malformed => DavProbeError::Wrong { url, reason },
                _ => DavProbeError::Unreachable { url, reason },
            }
        })
    }

    /// OPTIONS and PROPFIND Depth 0 on the collection: the DAV classes and methods it
    /// claims, and what it is (a calendar, with a ctag or sync-token, which reports).
    fn discover(&self, caps: &mut DavCapabilities) -> Result<(), DavProbeError> {
        let coll = &caps.collection;
        let list = |v: Option<&str>| -> Vec<String> {
            v.unwrap_or("")
                .split(',')
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .collect()
        };
        let options = self.send("OPTIONS", coll, &[], b"")?;
        caps.dav_classes = list(options.header("dav"));
        caps.allow = list(options.header("allow"));
        caps.calendar_access = caps.dav_classes.iter().any(|c| c == "calendar-access");
        let pf = self.send(
            "PROPFIND",
            coll,
            &[("Depth", "0")],
            xml::propfind(PROPS_CAPS).as_bytes(),
        )?;
        if pf.status == 401 {
            return Err(DavProbeError::Unauthorized {
                url: self.url.clone(),
                user: self.account.name.clone(),
            });
        }
        if pf.status != 207 {
            let dav = options.header("dav").map_or_else(
                || "OPTIONS has no DAV header".to_string(),
                |d| format!("OPTIONS says DAV: {d}"),
            );
            return Err(DavProbeError::NotDav {
                url: self.url.clone(),
                reason: format!("{dav} and PROPFIND Depth 0 answered {}", pf.status),
            });
        }
        let summary =
            answers::propfind_summary(&pf.body).map_err(|reason| DavProbeError::Wrong {
                url: self.url.clone(),
                reason: format!("PROPFIND: {reason}"),
            })?;
        caps.is_calendar = summary.calendar;
        caps.ctag = summary.ctag;
        caps.sync_token = summary.sync_token;
        caps.supported_reports = summary.reports;
        Ok(())
    }

    /// With the probe item created: conditional PUTs (a stale If-Match, a second
    /// create-only PUT), GET of what was put, and its ETag in a Depth 1 listing.
    fn item_checks(
        &self,
        caps: &mut DavCapabilities,
        item: &str,
        ics: &str,
    ) -> Result<(), DavProbeError> {
        let stale = self.send(
            "PUT",
            item,
            &[ICAL, ("If-Match", "\"volley-stale-etag\"")],
            ics.as_bytes(),
        )?;
        caps.conditional_put = stale.status == 412;
        let again = self.send("PUT", item, &[ICAL, ("If-None-Match", "*")], ics.as_bytes())?;
        caps.create_only_put = again.status == 412;
        let got = self.send("GET", item, &[], b"")?;
        caps.get_round_trip = got.status == 200 && same_item(&got.body, ics.as_bytes());
        let listing = self.send(
            "PROPFIND",
            &caps.collection,
            &[("Depth", "1")],
            xml::propfind("<D:getetag/>").as_bytes(),
        )?;
        let name = item.rsplit('/').next().unwrap_or("");
        caps.listing_etags =
            listing.status == 207 && answers::lists_etag(&listing.body, name).unwrap_or(false);
        Ok(())
    }

    /// The two reports clients rely on: sync-collection (with its new token) and a
    /// calendar-query that finds the probe item.
    fn report_checks(&self, caps: &mut DavCapabilities, item: &str) -> Result<(), DavProbeError> {
        let sync = self.send(
            "REPORT",
            &caps.collection,
            &[("Depth", "0")],
            xml::sync_collection("", "<D:getetag/>").as_bytes(),
        )?;
        caps.sync_collection_status = sync.status;
        caps.sync_collection =
            sync.status == 207 && answers::has_sync_token(&sync.body).unwrap_or(false);
        let query = self.send(
            "REPORT",
            &caps.collection,
            &[("Depth", "1")],
            xml::calendar_query(None).as_bytes(),
        )?;
        caps.calendar_query_status = query.status;
        caps.calendar_query = query.status == 207
            && answers::hrefs(&query.body)
                .unwrap_or_default()
                .iter()
                .any(|h| h.ends_with(item.rsplit('/').next().unwrap_or("")));
        Ok(())
    }
}

/// A number that keeps two probes (two processes, two calls) from sharing an item.
fn probe_id() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A minimal valid VEVENT (RFC 5545) whose UID is the item's path.
fn probe_item(path: &str) -> String {
    format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//volley//probe//EN\r\nBEGIN:VEVENT\r\n\
         UID:{path}\r\nDTSTAMP:20260101T000000Z\r\nDTSTART:20260105T100000Z\r\n\
         DTEND:20260105T110000Z\r\nSUMMARY:volley probe\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    )
}

/// The bytes put, or the same lines: a CalDAV server may re-serialise an item (line
/// endings, property order stay; Radicale keeps the text), so lines are compared as a
/// set, which still catches a lost or foreign item.
fn same_item(got: &[u8], put: &[u8]) -> bool {
    if got == put {
        return true;
    }
    let lines = |b: &[u8]| {
        let mut v: Vec<String> = String::from_utf8_lossy(b)
            .lines()
            .map(|l| l.trim_end().to_string())
            .filter(|l| !l.is_empty())
            .collect();
        v.sort();
        v
    };
    let (g, p) = (lines(got), lines(put));
    p.iter().all(|l| g.contains(l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lacks_names_each_missing_feature() {
        let all = DavCapabilities {
            calendar_access: true,
            is_calendar: true,
            ctag: true,
            sync_collection: true,
            calendar_query: true,
            put_etag: true,
            listing_etags: true,
            conditional_put: true,
            create_only_put: true,
            ..DavCapabilities::default()
        };
        assert!(all.lacks().is_empty());
        let plain = DavCapabilities {
            put_etag: true,
            ..DavCapabilities::default()
        };
        assert!(plain.lacks().contains(&"sync-collection REPORT"));
        assert!(!plain.lacks().contains(&"ETag on PUT"));
    }

    #[test]
    fn a_reserialised_item_still_matches_but_a_foreign_one_does_not() {
        let put = probe_item("/u/x.ics");
        assert!(same_item(put.as_bytes(), put.as_bytes()));
        let reordered = put
            .replace("SUMMARY:volley probe\r\n", "")
            .replace("END:VEVENT", "SUMMARY:volley probe\r\nEND:VEVENT");
        assert!(same_item(reordered.as_bytes(), put.as_bytes()));
        assert!(!same_item(
            probe_item("/u/y.ics").as_bytes(),
            put.as_bytes()
        ));
    }
}
