//! The sync-collection REPORT (RFC 6578) over a collection's change journal
//! ([`store`]): an initial sync lists the members; a sync from a token reports the
//! members changed since, read from the journal's end, so a sync of an unchanged
//! collection costs O(1) and one after k changes O(k), whatever the history.
//!
//! `DAV:limit` (`nresults`) truncates: the answer then holds a 507 response for the
//! collection with `DAV:number-of-matches-within-limits`, and a token from which the
//! next sync continues. After changes, that token is the sequence number of the last
//! change sent; in an initial listing it also carries a cursor (the last name sent), and
//! the continuation lists the members after it plus the changes to those before it.

use std::collections::BTreeMap;

use roxmltree::Node;

use crate::error::DavError;
use crate::props::{self, PropRequest, Resource};
use crate::report::status_response;
use crate::store::{self, Change, Token};
use crate::xml::{self, DAV};
use crate::Dav;

fn invalid_token() -> DavError {
    DavError::Condition {
        status: 403,
        cond: "D:valid-sync-token",
        reason: "the sync token is unknown or no longer valid; sync again without a token",
    }
}

/// The `DAV:limit/DAV:nresults` of a report body.
fn limit(root: Node<'_, '_>) -> Result<Option<usize>, DavError> {
    let Some(l) = xml::child(root, DAV, "limit") else {
        return Ok(None);
    };
    let n = xml::child(l, DAV, "nresults")
        .and_then(|n| xml::text(n).trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .ok_or_else(|| DavError::BadXml("DAV:limit needs a positive DAV:nresults".into()))?;
    Ok(Some(n))
}

fn truncated(res: &Resource) -> String {
    format!(
        "<D:response><D:href>{}</D:href><D:status>HTTP/1.1 507 Insufficient Storage</D:status>\
         <D:error><D:number-of-matches-within-limits/></D:error></D:response>",
        xml::escape(&res.href())
    )
}

/// The response for member `name`: its properties, or a 404 when it is gone.
fn member(dav: &Dav, res: &Resource, name: &[u8], what: &PropRequest) -> Result<String, DavError> {
    let t = res.target.child(name);
    Ok(match Resource::open(t.clone()) {
        Ok(m) => props::response(dav, &m, what)?,
        Err(_) => status_response(&t.href(false), "404 Not Found"),
    })
}

/// The report's preconditions (RFC 6578 section 3.3): on a collection, at sync-level 1.
fn check_scope(res: &Resource, root: Node<'_, '_>) -> Result<(), DavError> {
    if !res.is_dir() {
        return Err(DavError::Condition {
            status: 403,
            cond: "D:supported-report",
            reason: "sync-collection applies to collections only",
        });
    }
    if let Some(level) = xml::child(root, DAV, "sync-level") {
        if xml::text(level).trim() != "1" {
            return Err(DavError::Condition {
                status: 403,
                cond: "D:sync-traversal-supported",
                reason: "only sync-level 1 is supported",
            });
        }
    }
    Ok(())
}

/// sync-collection on `res`, writing responses and the new token into `out`.
pub(crate) fn sync(
    dav: &Dav,
    res: &Resource,
    root: Node<'_, '_>,
    what: &PropRequest,
    out: &mut String,
) -> Result<(), DavError> {
    check_scope(res, root)?;
    let limit = limit(root)?;
    let text = xml::child(root, DAV, "sync-token")
        .map(xml::text)
        .unwrap_or_default();
    let text = text.trim();
    let dir = &res.target.path;
    let visible = |name: &[u8]| !res.target.segs.is_empty() || dav.root_member_visible(name);
    let (given, journal) = if text.is_empty() {
        (None, store::journal_state(dir)?)
    } else {
        let t = Token::parse(text).ok_or_else(invalid_token)?;
        let j = store::journal_since(dir, t.seq)?;
        if !j.accepts(&t) {
            return Err(invalid_token());
        }
        (Some(t), j)
    };
    let mut next = Token {
        epoch: journal.epoch.clone(),
        seq: journal.current(),
        cursor: None,
    };
    // Changes since the token, last change per member, in journal order.
    let mut last: BTreeMap<&[u8], (u64, Change)> = BTreeMap::new();
    for (n, change, name) in &journal.entries {
        if visible(name) {
            last.insert(name.as_slice(), (*n, *change));
        }
    }
    let listing_from = match &given {
        None => Some(None),
        Some(t) => t.cursor.clone().map(Some),
    };
    let mut changed: Vec<(u64, &[u8])> = last
        .iter()
        .filter(|(name, _)| match &listing_from {
            // In a continued listing, members after the cursor are listed below.
            Some(Some(c)) => *name <= &c.as_slice(),
            Some(None) => false,
            None => true,
        })
        .map(|(name, (n, _))| (*n, *name))
        .collect();
    changed.sort_unstable();
    if let (Some(max), None) = (limit, &listing_from) {
        if changed.len() > max {
            changed.truncate(max);
            next.seq = changed.last().map_or(next.seq, |c| c.0);
            out.push_str(&truncated(res));
        }
    }
    for (_, name) in &changed {
        out.push_str(&member(dav, res, name, what)?);
    }
    if let Some(after) = listing_from {
        let mut members: Vec<Resource> = res
            .members(dav)?
            .into_iter()
            .filter(|m| after.as_deref().is_none_or(|a| m.target.name() > Some(a)))
            .collect();
        if let Some(max) = limit {
            if members.len() > max {
                members.truncate(max);
                next.cursor = members
                    .last()
                    .and_then(|m| m.target.name())
                    .map(<[u8]>::to_vec);
                out.push_str(&truncated(res));
            }
        }
        for m in &members {
            out.push_str(&props::response(dav, m, what)?);
        }
    }
    out.push_str(&format!(
        "<D:sync-token>{}</D:sync-token>",
        xml::escape(&next.text())
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::tests::{body, call, TempDir};
    use crate::Dav;

    fn ev(uid: &str, summary: &str) -> String {
        format!("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:{uid}\r\nSUMMARY:{summary}\r\nDTSTART:20240110T100000Z\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")
    }

    fn sync(dav: &Dav, token: &str, limit: Option<usize>) -> (Vec<String>, bool, String) {
        let l = limit.map_or(String::new(), |n| {
            format!("<D:limit><D:nresults>{n}</D:nresults></D:limit>")
        });
        let q = format!(
            r#"<D:sync-collection xmlns:D="DAV:"><D:sync-token>{token}</D:sync-token><D:sync-level>1</D:sync-level>{l}<D:prop><D:getetag/></D:prop></D:sync-collection>"#
        );
        let r = call(dav, "REPORT", "/cal/", &[], q.as_bytes());
        assert_eq!(r.status, 207, "{}", body(&r));
        let b = body(&r);
        let names = b
            .split("<D:href>/cal/")
            .skip(1)
            .filter_map(|s| s.split('<').next())
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect();
        let token = b
            .split("<D:sync-token>")
            .nth(1)
            .and_then(|s| s.split('<').next())
            .unwrap()
            .to_owned();
        (names, b.contains("507 Insufficient Storage"), token)
    }

    #[test]
    fn limit_truncates_with_507_and_continues() {
        let d = TempDir::new("sync");
        let dav = Dav::new(d.path());
        assert_eq!(call(&dav, "MKCALENDAR", "/cal/", &[], b"").status, 201);
        for i in 0..5 {
            let r = call(
                &dav,
                "PUT",
                &format!("/cal/{i}.ics"),
                &[],
                ev(&i.to_string(), "x").as_bytes(),
            );
            assert_eq!(r.status, 201);
        }
        let mut seen = Vec::new();
        let (mut names, mut more, mut token) = sync(&dav, "", Some(2));
        let mut pages = 1;
        while more {
            assert_eq!(names.len(), 2, "{names:?}");
            seen.append(&mut names);
            (names, more, token) = sync(&dav, &token, Some(2));
            pages += 1;
            assert!(pages < 10);
        }
        seen.append(&mut names);
        assert_eq!(pages, 3);
        assert_eq!(seen, ["0.ics", "1.ics", "2.ics", "3.ics", "4.ics"]);
        let (names, more, same) = sync(&dav, &token, Some(2));
        assert!(names.is_empty() && !more && same == token);
        for i in [3, 1, 4] {
            call(
                &dav,
                "PUT",
                &format!("/cal/{i}.ics"),
                &[],
                ev(&i.to_string(), "y").as_bytes(),
            );
        }
        let (names, more, t2) = sync(&dav, &token, Some(2));
        assert_eq!(
            (names, more),
            (vec!["3.ics".to_owned(), "1.ics".to_owned()], true)
        );
        let (names, more, _) = sync(&dav, &t2, Some(2));
        assert_eq!((names, more), (vec!["4.ics".to_owned()], false));
        // Changes made between the pages of a listing are not lost.
        let (_, more, cursor) = sync(&dav, "", Some(3));
        assert!(more);
        call(&dav, "DELETE", "/cal/0.ics", &[], b"");
        let (names, more, _) = sync(&dav, &cursor, Some(3));
        assert_eq!(
            (names, more),
            (
                vec!["0.ics".to_owned(), "3.ics".to_owned(), "4.ics".to_owned()],
                false
            )
        );
    }

    #[test]
    fn journal_tail_reads_only_what_follows_the_token() {
        let d = TempDir::new("tail");
        for i in 0..1500u32 {
            crate::store::journal_append(
                d.path(),
                format!("item-{i}.ics").as_bytes(),
                crate::store::Change::Put,
            )
            .unwrap();
        }
        let j = crate::store::journal_since(d.path(), 1498).unwrap();
        assert_eq!(j.entries.len(), 2);
        assert_eq!(j.entries[0].2, b"item-1498.ics");
        assert_eq!(j.current(), 1500);
        assert_eq!(
            crate::store::journal_state(d.path()).unwrap().current(),
            1500
        );
        let all = crate::store::journal_since(d.path(), 0).unwrap();
        assert_eq!(all.entries.len(), 1500);
        assert_eq!(all.entries, crate::store::read_journal(d.path()).entries);
        let future = crate::store::journal_since(d.path(), 2000).unwrap();
        assert!(future
            .parse_token(&format!("urn:volley:sync:{}:2000", future.epoch))
            .is_none());
    }
}
