//! The methods that change the tree: PUT, DELETE, MKCOL, MKCALENDAR, COPY, MOVE.
//! Each runs under the handler's write lock and journals member changes in the parent
//! collection's `.volley-sync` (see [`store`]).

use std::fs;
use std::io;
use std::path::Path;

use crate::caldav::validate::{self, UidIndex};
use crate::error::DavError;
use crate::props::{self, Resource};
use crate::store::{self, Change};
use crate::xml::{self, Name, CALDAV};
use crate::{Dav, DavRequest, DavResponse, Target};

/// Whether header value `list` (a comma-separated entity-tag list or `*`) matches the
/// current tag, with strong comparison (weak tags never match, RFC 9110 section 8.8.3.2).
fn etag_list_matches(list: &str, current: Option<&str>) -> bool {
    let Some(cur) = current else { return false };
    list.split(',').map(str::trim).any(|t| t == "*" || t == cur)
}

/// Checks If-Match and If-None-Match against the current tag (None: no resource).
fn check_conditions(req: &DavRequest<'_>, current: Option<&str>) -> Result<(), DavError> {
    if let Some(im) = req.header("If-Match") {
        if !etag_list_matches(im, current) {
            return Err(DavError::PreconditionFailed(
                "If-Match does not match the current entity tag",
            ));
        }
    }
    if let Some(inm) = req.header("If-None-Match") {
        if etag_list_matches(inm, current) {
            return Err(DavError::PreconditionFailed(
                "If-None-Match matched an existing entity",
            ));
        }
    }
    Ok(())
}

/// The parent directory of `t`, which must exist and be a directory (409 otherwise).
fn parent_dir(t: &Target) -> Result<&Path, DavError> {
    if t.segs.is_empty() {
        return Err(DavError::MethodNotAllowed("the root cannot be replaced"));
    }
    let parent = t
        .path
        .parent()
        .ok_or(DavError::Conflict("no parent collection"))?;
    if !parent.is_dir() {
        return Err(DavError::Conflict("parent collection does not exist"));
    }
    Ok(parent)
}

fn journal(t: &Target, change: Change) -> Result<(), DavError> {
    if let (Some(parent), Some(name)) = (t.path.parent(), t.name()) {
        store::journal_append(parent, name, change)?;
    }
    Ok(())
}

/// PUT: atomic replace with conditional headers; 201 or 204 with the new ETag. Into a
/// calendar, the body must pass `caldav::validate` first.
pub(crate) fn put(
    dav: &Dav,
    req: &DavRequest<'_>,
    uids: &mut UidIndex,
) -> Result<DavResponse, DavError> {
    let t = dav.locate(req.target)?;
    let parent = parent_dir(&t)?;
    let existing = match fs::metadata(&t.path) {
        Ok(m) if m.is_dir() => return Err(DavError::MethodNotAllowed("PUT on a collection")),
        Ok(_) => Some(fs::read(&t.path)?),
        Err(_) => None,
    };
    let current = existing.as_deref().map(crate::strong_etag);
    check_conditions(req, current.as_deref())?;
    let meta = store::read_meta(parent);
    let mut uid = None;
    let old_uid = match meta.calendar {
        true => existing.as_deref().and_then(validate::uid_of),
        false => None,
    };
    if meta.calendar {
        let o = validate::check(req.body, &meta.accepted_components())?;
        let name = t.name().unwrap_or_default();
        let same_uid = old_uid.as_deref() == Some(o.uid.as_str());
        if !same_uid {
            if let Some(other) = uids.conflict(parent, name, &o.uid) {
                let mut segs = t.segs.clone();
                segs.pop();
                segs.push(other);
                return Err(DavError::UidConflict(crate::href_of(&segs, false)));
            }
        }
        uid = Some(o.uid);
    }
    store::atomic_write(&t.path, req.body)?;
    journal(&t, Change::Put)?;
    if uid.is_some() {
        uids.record(parent, &t.path, old_uid.as_deref(), uid.as_deref());
    }
    let mut r = DavResponse::empty(if existing.is_some() { 204 } else { 201 });
    r.headers
        .push(("ETag".into(), crate::strong_etag(req.body)));
    Ok(r)
}

/// DELETE: a file (with its dead properties) or a whole collection; 204.
pub(crate) fn delete(
    dav: &Dav,
    req: &DavRequest<'_>,
    uids: &mut UidIndex,
) -> Result<DavResponse, DavError> {
    let t = dav.locate(req.target)?;
    if t.segs.is_empty() {
        return Err(DavError::MethodNotAllowed("the root cannot be deleted"));
    }
    let meta = fs::symlink_metadata(&t.path).map_err(|_| DavError::NotFound)?;
    if meta.is_dir() {
        if req.header("If-Match").is_some() {
            return Err(DavError::PreconditionFailed(
                "collections have no entity tag",
            ));
        }
        fs::remove_dir_all(&t.path)?;
        uids.clear();
    } else {
        if req.header("If-Match").is_some() || req.header("If-None-Match").is_some() {
            let current = fs::read(&t.path).ok().map(|b| crate::strong_etag(&b));
            check_conditions(req, current.as_deref())?;
        }
        let old_uid = match t.path.parent() {
            Some(p) if crate::is_calendar_collection(p) => {
                fs::read(&t.path).ok().as_deref().and_then(validate::uid_of)
            }
            _ => None,
        };
        fs::remove_file(&t.path)?;
        store::remove_props(&t.path);
        if let (Some(parent), Some(old)) = (t.path.parent(), old_uid) {
            uids.record(parent, &t.path, Some(&old), None);
        }
    }
    if let Some(parent) = t.path.parent() {
        store::fsync_dir(parent)?;
    }
    journal(&t, Change::Delete)?;
    Ok(DavResponse::empty(204))
}

/// Common checks of MKCOL and MKCALENDAR: nothing there yet, parent exists.
fn new_collection_target(dav: &Dav, req: &DavRequest<'_>) -> Result<Target, DavError> {
    let t = dav.locate(req.target)?;
    if fs::symlink_metadata(&t.path).is_ok() {
        return Err(DavError::MethodNotAllowed(
            "a resource already exists at this URL",
        ));
    }
    parent_dir(&t)?;
    Ok(t)
}

fn create_dir(t: &Target) -> Result<(), DavError> {
    fs::create_dir(&t.path).map_err(|e| match e.kind() {
        io::ErrorKind::AlreadyExists => {
            DavError::MethodNotAllowed("a resource already exists at this URL")
        }
        io::ErrorKind::NotFound => DavError::Conflict("parent collection does not exist"),
        _ => e.into(),
    })?;
    if let Some(parent) = t.path.parent() {
        store::fsync_dir(parent)?;
    }
    Ok(())
}

/// MKCOL: 201; 405 if something exists; 409 without a parent; 415 with a body (we do
/// not implement extended MKCOL, RFC 5689).
pub(crate) fn mkcol(dav: &Dav, req: &DavRequest<'_>) -> Result<DavResponse, DavError> {
    let t = new_collection_target(dav, req)?;
    if !req.body.is_empty() {
        return Err(DavError::UnsupportedMediaType(
            "MKCOL with a body is not supported",
        ));
    }
    create_dir(&t)?;
    journal(&t, Change::Put)?;
    Ok(DavResponse::empty(201))
}

/// MKCALENDAR (RFC 4791 section 5.3.1): like MKCOL plus the calendar marker; an
/// optional `C:mkcalendar` body sets the display name and dead properties.
pub(crate) fn mkcalendar(dav: &Dav, req: &DavRequest<'_>) -> Result<DavResponse, DavError> {
    let t = dav.locate(req.target)?;
    if fs::symlink_metadata(&t.path).is_ok() {
        return Err(DavError::Condition {
            status: 403,
            cond: "D:resource-must-be-null",
            reason: "a resource already exists at this URL",
        });
    }
    parent_dir(&t)?;
    let doc = if req.body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        Some(xml::parse(req.body)?)
    };
    if let Some(d) = &doc {
        if Name::of(d.root_element()) != Name::new(CALDAV, "mkcalendar") {
            return Err(DavError::BadXml("root element is not C:mkcalendar".into()));
        }
    }
    create_dir(&t)?;
    let mut displayname = None;
    if let Some(d) = &doc {
        let res = Resource::open(t.clone())?;
        displayname = props::apply_creation_props(&res, d.root_element())?;
    }
    let components = doc.as_ref().and_then(|d| {
        d.descendants()
            .find(|n| Name::of(*n).is(CALDAV, "supported-calendar-component-set"))
            .map(|set| {
                xml::elements(set)
                    .filter(|c| Name::of(*c).is(CALDAV, "comp"))
                    .filter_map(|c| c.attribute("name").map(str::to_ascii_uppercase))
                    .collect::<Vec<_>>()
            })
    });
    let meta = store::CollectionMeta {
        calendar: true,
        displayname,
        components,
    };
    store::write_meta(&t.path, &meta)?;
    journal(&t, Change::Put)?;
    Ok(DavResponse::empty(201))
}

/// COPY and MOVE (RFC 4918 sections 9.8, 9.9): Destination on this server, Overwrite
/// (default T), Depth 0 or infinity for collections. Dead properties travel along.
pub(crate) fn copy_move(
    dav: &Dav,
    req: &DavRequest<'_>,
    is_move: bool,
) -> Result<DavResponse, DavError> {
    let src = dav.locate(req.target)?;
    let src_meta = fs::metadata(&src.path).map_err(|_| DavError::NotFound)?;
    if src.segs.is_empty() && is_move {
        return Err(DavError::Refused);
    }
    let dest_h = req
        .header("Destination")
        .ok_or_else(|| DavError::BadRequest("no Destination header".into()))?;
    let dest = dav.locate_href(dest_h)?;
    if dest.segs.is_empty() || dest.segs.starts_with(&src.segs) || src.segs.starts_with(&dest.segs)
    {
        return Err(DavError::Refused);
    }
    let overwrite = !req
        .header("Overwrite")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("F"));
    let dest_parent = parent_dir(&dest)?;
    let existed = fs::symlink_metadata(&dest.path).is_ok();
    if existed {
        if !overwrite {
            return Err(DavError::PreconditionFailed(
                "destination exists and Overwrite is F",
            ));
        }
        remove_any(&dest.path)?;
    }
    let shallow = req.header("Depth").map(str::trim) == Some("0");
    if is_move {
        fs::rename(&src.path, &dest.path)?;
        if !src_meta.is_dir() {
            move_props(&src.path, &dest.path)?;
        }
        if let Some(p) = src.path.parent() {
            store::fsync_dir(p)?;
        }
    } else if src_meta.is_dir() {
        copy_tree(&src.path, &dest.path, shallow)?;
    } else {
        fs::copy(&src.path, &dest.path)?;
        fs::File::open(&dest.path)?.sync_all()?;
        let p = store::read_props(&src.path, false);
        store::write_props(&dest.path, false, &p)?;
    }
    store::fsync_dir(dest_parent)?;
    if is_move {
        journal(&src, Change::Delete)?;
    }
    journal(&dest, Change::Put)?;
    Ok(DavResponse::empty(if existed { 204 } else { 201 }))
}

fn remove_any(p: &Path) -> io::Result<()> {
    if fs::symlink_metadata(p)?.is_dir() {
        fs::remove_dir_all(p)
    } else {
        fs::remove_file(p)?;
        store::remove_props(p);
        Ok(())
    }
}

fn move_props(src: &Path, dest: &Path) -> io::Result<()> {
    let p = store::read_props(src, false);
    store::write_props(dest, false, &p)?;
    store::remove_props(src);
    Ok(())
}

/// Copies a directory: its internal files (marker, own dead properties) always, the
/// members too unless `shallow`. The journal is not copied: the copy is a new
/// collection with its own history.
fn copy_tree(src: &Path, dest: &Path, shallow: bool) -> io::Result<()> {
    fs::create_dir(dest)?;
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        let name = entry.file_name();
        let bytes = std::os::unix::ffi::OsStrExt::as_bytes(name.as_os_str());
        let ft = entry.file_type()?;
        let internal = store::is_internal_name(bytes);
        if ft.is_symlink() || name == store::SYNC_FILE || (shallow && !internal) {
            continue;
        }
        if bytes.starts_with(b".volley-tmp-") {
            continue;
        }
        let (s, d) = (entry.path(), dest.join(&name));
        if ft.is_dir() {
            copy_tree(&s, &d, shallow && name != store::PROPS_DIR)?;
        } else {
            fs::copy(&s, &d)?;
        }
    }
    if shallow {
        // Member property sidecars were copied with .volley-props; drop them again.
        let pd = dest.join(store::PROPS_DIR);
        if let Ok(rd) = fs::read_dir(&pd) {
            for e in rd.flatten() {
                if e.file_name() != ".xml" {
                    let _ = fs::remove_file(e.path());
                }
            }
        }
    }
    store::fsync_dir(dest)
}

#[cfg(test)]
mod tests {
    use crate::tests::{body, call, TempDir};
    use crate::{strong_etag, Dav};
    use std::fs;

    fn setup() -> (TempDir, Dav) {
        let d = TempDir::new("methods");
        let dav = Dav::new(d.path());
        (d, dav)
    }

    #[test]
    fn put_creates_replaces_and_honours_conditions() {
        let (d, dav) = setup();
        let r = call(&dav, "PUT", "/a.txt", &[("If-None-Match", "*")], b"one");
        assert_eq!(r.status, 201);
        assert_eq!(r.header("ETag"), Some(strong_etag(b"one").as_str()));
        assert_eq!(
            call(&dav, "PUT", "/a.txt", &[("If-None-Match", "*")], b"x").status,
            412
        );
        assert_eq!(
            call(&dav, "PUT", "/a.txt", &[("If-Match", "\"stale\"")], b"x").status,
            412
        );
        assert_eq!(
            call(&dav, "PUT", "/b.txt", &[("If-Match", "*")], b"x").status,
            412
        );
        let tag = strong_etag(b"one");
        let r = call(&dav, "PUT", "/a.txt", &[("If-Match", &tag)], b"two");
        assert_eq!(r.status, 204);
        assert_eq!(fs::read(d.path().join("a.txt")).unwrap(), b"two");
        assert_eq!(call(&dav, "PUT", "/missing/a.txt", &[], b"x").status, 409);
        assert_eq!(call(&dav, "PUT", "/", &[], b"x").status, 405);
        assert_eq!(call(&dav, "PUT", "/.volley-sync", &[], b"x").status, 403);
        // No temp files are left behind, and the write was journalled.
        let names: Vec<String> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.iter().all(|n| !n.starts_with(".volley-tmp")),
            "{names:?}"
        );
        assert_eq!(crate::store::read_journal(d.path()).current(), 2);
    }

    #[test]
    fn put_into_calendar_requires_icalendar() {
        let (d, dav) = setup();
        crate::make_calendar(&d.path().join("cal"), "Cal").unwrap();
        let r = call(&dav, "PUT", "/cal/x.ics", &[], b"not ical");
        assert_eq!(r.status, 403);
        assert!(body(&r).contains("C:valid-calendar-data"));
        let ok = b"BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:1\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
        assert_eq!(call(&dav, "PUT", "/cal/x.ics", &[], ok).status, 201);
    }

    #[test]
    fn delete_files_and_collections() {
        let (d, dav) = setup();
        assert_eq!(call(&dav, "DELETE", "/nope", &[], b"").status, 404);
        assert_eq!(call(&dav, "DELETE", "/", &[], b"").status, 405);
        call(&dav, "MKCOL", "/c/", &[], b"");
        call(&dav, "PUT", "/c/f", &[], b"x");
        call(&dav, "PROPPATCH", "/c/f", &[], br#"<propertyupdate xmlns='DAV:'><set><prop><a xmlns='urn:a'>1</a></prop></set></propertyupdate>"#);
        assert!(d.path().join("c/.volley-props/f.xml").exists());
        assert_eq!(
            call(&dav, "DELETE", "/c/f", &[("If-Match", "\"no\"")], b"").status,
            412
        );
        assert_eq!(call(&dav, "DELETE", "/c/f", &[], b"").status, 204);
        assert!(!d.path().join("c/.volley-props/f.xml").exists());
        let j = crate::store::read_journal(&d.path().join("c"));
        assert_eq!(j.entries.last().unwrap().1, crate::store::Change::Delete);
        assert_eq!(call(&dav, "DELETE", "/c/", &[], b"").status, 204);
        assert!(!d.path().join("c").exists());
    }

    #[test]
    fn mkcol_rules() {
        let (d, dav) = setup();
        assert_eq!(call(&dav, "MKCOL", "/c/", &[], b"").status, 201);
        assert_eq!(call(&dav, "MKCOL", "/c/", &[], b"").status, 405);
        assert_eq!(call(&dav, "MKCOL", "/x/y/", &[], b"").status, 409);
        let r = call(&dav, "MKCOL", "/b/", &[], b"<x/>");
        assert_eq!(r.status, 415);
        assert!(!r.body.is_empty());
        fs::write(d.path().join("plain"), b"x").unwrap();
        assert_eq!(call(&dav, "MKCOL", "/plain", &[], b"").status, 405);
        assert_eq!(call(&dav, "MKCOL", "/plain/sub/", &[], b"").status, 409);
    }

    #[test]
    fn mkcalendar_sets_marker_and_displayname() {
        let (d, dav) = setup();
        let b = br#"<?xml version="1.0"?><C:mkcalendar xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:set><D:prop><D:displayname>Work &amp; more</D:displayname><C:calendar-description>d</C:calendar-description></D:prop></D:set></C:mkcalendar>"#;
        assert_eq!(call(&dav, "MKCALENDAR", "/work/", &[], b).status, 201);
        assert!(crate::is_calendar_collection(&d.path().join("work")));
        let r = call(&dav, "PROPFIND", "/work/", &[("Depth", "0")], br#"<propfind xmlns="DAV:"><prop><displayname/><resourcetype/><calendar-description xmlns="urn:ietf:params:xml:ns:caldav"/></prop></propfind>"#);
        let s = body(&r);
        assert!(
            s.contains("<D:displayname>Work &amp; more</D:displayname>"),
            "{s}"
        );
        assert!(
            s.contains("<C:calendar/>") && s.contains(">d</e:calendar-description>"),
            "{s}"
        );
        assert_eq!(call(&dav, "MKCALENDAR", "/work/", &[], b"").status, 403);
        assert_eq!(call(&dav, "MKCALENDAR", "/x/y/", &[], b"").status, 409);
        assert_eq!(call(&dav, "MKCALENDAR", "/z/", &[], b"<bad").status, 400);
    }

    #[test]
    fn copy_and_move_carry_properties() {
        let (d, dav) = setup();
        call(&dav, "PUT", "/p", &[], b"data");
        call(&dav, "PROPPATCH", "/p", &[], br#"<propertyupdate xmlns='DAV:'><set><prop><a xmlns='urn:a'>1</a></prop></set></propertyupdate>"#);
        assert_eq!(
            call(&dav, "COPY", "/p", &[("Destination", "http://h/q")], b"").status,
            201
        );
        assert_eq!(
            call(
                &dav,
                "COPY",
                "/p",
                &[("Destination", "/q"), ("Overwrite", "F")],
                b""
            )
            .status,
            412
        );
        assert_eq!(
            call(&dav, "MOVE", "/q", &[("Destination", "/r")], b"").status,
            201
        );
        assert!(!d.path().join("q").exists());
        let q = br#"<propfind xmlns="DAV:"><prop><a xmlns="urn:a"/></prop></propfind>"#;
        assert!(body(&call(&dav, "PROPFIND", "/r", &[("Depth", "0")], q)).contains(">1</e:a>"));
        assert_eq!(
            call(&dav, "MOVE", "/r", &[("Destination", "/p")], b"").status,
            204
        );
        assert_eq!(
            call(&dav, "COPY", "/p", &[("Destination", "/no/p")], b"").status,
            409
        );
        assert_eq!(call(&dav, "COPY", "/p", &[], b"").status, 400);
        assert_eq!(
            call(&dav, "COPY", "/nope", &[("Destination", "/x")], b"").status,
            404
        );
        call(&dav, "MKCOL", "/c/", &[], b"");
        call(&dav, "PUT", "/c/m", &[], b"m");
        assert_eq!(
            call(
                &dav,
                "COPY",
                "/c/",
                &[("Destination", "/c2/"), ("Depth", "0")],
                b""
            )
            .status,
            201
        );
        assert!(!d.path().join("c2/m").exists());
        assert_eq!(
            call(&dav, "COPY", "/c/", &[("Destination", "/c3/")], b"").status,
            201
        );
        assert!(d.path().join("c3/m").exists());
        assert_eq!(
            call(&dav, "MOVE", "/c/", &[("Destination", "/c/sub/")], b"").status,
            403
        );
    }
}
