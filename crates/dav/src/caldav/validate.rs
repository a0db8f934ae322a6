//! What a PUT into a calendar collection must satisfy (RFC 4791 section 5.3.2): one
//! VCALENDAR that parses, whose RRULEs and times parse (`C:valid-calendar-data`); one
//! component type and one UID besides VTIMEZONEs (`C:valid-calendar-object-resource`);
//! a type the calendar accepts (`C:supported-calendar-component`); a UID no other
//! resource of the calendar has (`C:no-uid-conflict`, answered with that resource's
//! href). Invalid data is refused, never stored, so later reads never meet it.
//!
//! The UID check uses [`UidIndex`], a per-calendar map built by one scan and kept up to
//! date by the writes themselves (all under the handler's write lock), so a PUT costs
//! O(1) instead of reading every sibling (a PUT that does conflict lists the directory
//! once, to name the holder). A calendar whose directory changed behind the
//! handler's back (its mtime differs from the one recorded) is scanned again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::recur;
use super::zone::Zones;
use crate::error::DavError;
use crate::ical::{self, Component};

/// Calendars whose UIDs are kept in memory at most; past this the index starts over.
const MAX_CALENDARS: usize = 256;

/// The type and UID of a valid calendar object resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Object {
    pub comp: String,
    pub uid: String,
}

fn bad_data(reason: &'static str) -> DavError {
    DavError::Condition {
        status: 403,
        cond: "C:valid-calendar-data",
        reason,
    }
}

fn bad_object(reason: &'static str) -> DavError {
    DavError::Condition {
        status: 403,
        cond: "C:valid-calendar-object-resource",
        reason,
    }
}

/// The object's type and UID, if `cal` is one valid calendar object.
pub(crate) fn object_of(cal: &Component) -> Result<Object, DavError> {
    let mut found: Option<Object> = None;
    let zones = Zones {
        cal,
        floating: chrono_tz::Tz::UTC,
    };
    for c in cal.children.iter().filter(|c| c.name != "VTIMEZONE") {
        for name in ["DTSTART", "DTEND", "DUE", "RECURRENCE-ID"] {
            if c.prop(name).is_some() && zones.prop(c, name).is_none() {
                return Err(bad_data(
                    "a DTSTART, DTEND, DUE or RECURRENCE-ID is not a date or date-time",
                ));
            }
        }
        if c.props
            .iter()
            .any(|p| p.name == "RRULE" && !recur::rule_parses(&p.value))
        {
            return Err(bad_data("an RRULE does not parse"));
        }
        let uid = c
            .prop("UID")
            .map(|p| p.value.trim().to_owned())
            .filter(|u| !u.is_empty())
            .ok_or_else(|| bad_object("a component has no UID"))?;
        match &found {
            None => {
                found = Some(Object {
                    comp: c.name.clone(),
                    uid,
                })
            }
            Some(o) if o.comp != c.name => {
                return Err(bad_object("more than one component type in one resource"))
            }
            Some(o) if o.uid != uid => return Err(bad_object("more than one UID in one resource")),
            Some(_) => {}
        }
    }
    found.ok_or_else(|| bad_object("no VEVENT, VTODO, VJOURNAL or VFREEBUSY component"))
}

/// Checks a PUT body for a calendar accepting `accepted` component types.
pub(crate) fn check(body: &[u8], accepted: &[String]) -> Result<Object, DavError> {
    let cal = ical::parse(body)
        .map_err(|_| bad_data("the body is not one iCalendar VCALENDAR object"))?;
    let o = object_of(&cal)?;
    if !accepted.iter().any(|a| a.eq_ignore_ascii_case(&o.comp)) {
        return Err(DavError::Condition {
            status: 403,
            cond: "C:supported-calendar-component",
            reason: "this calendar does not accept this component type",
        });
    }
    Ok(o)
}

/// The UID of stored object bytes (None: not a valid object).
pub(crate) fn uid_of(bytes: &[u8]) -> Option<String> {
    object_of(&ical::parse(bytes).ok()?).ok().map(|o| o.uid)
}

struct Calendar {
    mtime: Option<SystemTime>,
    /// FNV-1a 64 of a UID -> inode of the member holding it.
    by_uid: HashMap<u64, u64>,
}

/// Per-calendar UID maps (see the module docs). A UID is kept as its 64-bit hash and
/// its member as an inode (16 bytes an item, where names and UIDs as strings took over
/// 150): a hit is confirmed by reading that member's UID, so a hash collision can
/// never refuse a PUT, and the member's name is found by its inode only then.
#[derive(Default)]
pub(crate) struct UidIndex {
    calendars: HashMap<PathBuf, Calendar>,
}

impl std::fmt::Debug for UidIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UidIndex({} calendars)", self.calendars.len())
    }
}

fn mtime(dir: &Path) -> Option<SystemTime> {
    std::fs::metadata(dir).and_then(|m| m.modified()).ok()
}

fn uid_hash(uid: &str) -> u64 {
    crate::fnv1a(uid.as_bytes())
}

/// The members of `dir` that are plain files, with their inodes.
fn members(dir: &Path) -> impl Iterator<Item = (Vec<u8>, u64, PathBuf)> {
    use std::os::unix::fs::DirEntryExt;
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| {
            let name = std::os::unix::ffi::OsStrExt::as_bytes(e.file_name().as_os_str()).to_vec();
            (name, e.ino(), e.path())
        })
        .filter(|(name, _, _)| !crate::store::is_internal_name(name))
}

impl UidIndex {
    fn fresh(&mut self, dir: &Path) -> &mut Calendar {
        let now = mtime(dir);
        let stale = self.calendars.get(dir).is_none_or(|c| c.mtime != now);
        if stale {
            if self.calendars.len() >= MAX_CALENDARS {
                self.calendars.clear();
            }
            let mut cal = Calendar {
                mtime: now,
                by_uid: HashMap::new(),
            };
            for (_, ino, path) in members(dir) {
                if let Some(uid) = std::fs::read(path).ok().as_deref().and_then(uid_of) {
                    cal.by_uid.insert(uid_hash(&uid), ino);
                }
            }
            self.calendars.insert(dir.to_owned(), cal);
        }
        self.calendars
            .get_mut(dir)
            .expect("inserted above when missing")
    }

    /// The member of `dir` other than `name` that holds `uid`, if any.
    pub fn conflict(&mut self, dir: &Path, name: &[u8], uid: &str) -> Option<Vec<u8>> {
        let h = uid_hash(uid);
        let ino = *self.fresh(dir).by_uid.get(&h)?;
        let holder = members(dir).find(|(_, i, _)| *i == ino);
        match holder {
            Some((n, _, _)) if n.as_slice() == name => None,
            Some((n, _, path)) => {
                let same = std::fs::read(path).ok().as_deref().and_then(uid_of);
                (same.as_deref() == Some(uid)).then_some(n)
            }
            None => {
                // Gone behind our back: forget it.
                if let Some(cal) = self.calendars.get_mut(dir) {
                    cal.by_uid.remove(&h);
                }
                None
            }
        }
    }

    /// Records that the member at `path` in `dir` changed from holding `old` to `new`
    /// (None: none, or deleted).
    pub fn record(&mut self, dir: &Path, path: &Path, old: Option<&str>, new: Option<&str>) {
        let Some(cal) = self.calendars.get_mut(dir) else {
            return;
        };
        if let Some(old) = old {
            cal.by_uid.remove(&uid_hash(old));
        }
        if let Some(new) = new {
            use std::os::unix::fs::MetadataExt;
            if let Ok(m) = std::fs::metadata(path) {
                cal.by_uid.insert(uid_hash(new), m.ino());
            }
        }
        cal.mtime = mtime(dir);
    }

    /// Forgets everything (a collection was moved, copied or deleted).
    pub fn clear(&mut self) {
        self.calendars.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(body: &str) -> Result<Object, DavError> {
        check(body.as_bytes(), &["VEVENT".into(), "VTODO".into()])
    }

    fn cond(e: DavError) -> &'static str {
        match e {
            DavError::Condition { cond, .. } => cond,
            _ => "other",
        }
    }

    #[test]
    fn uid_index_follows_rewrites_renames_and_deletes() {
        use crate::tests::{body, call, TempDir};
        let d = TempDir::new("uids");
        let dav = crate::Dav::new(d.path());
        call(&dav, "MKCALENDAR", "/cal/", &[], b"");
        let ev = |uid: &str, s: &str| {
            format!("BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:{uid}\r\nSUMMARY:{s}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")
        };
        let put = |name: &str, uid: &str, s: &str| {
            call(
                &dav,
                "PUT",
                &format!("/cal/{name}"),
                &[],
                ev(uid, s).as_bytes(),
            )
        };
        assert_eq!(put("a.ics", "u1", "x").status, 201);
        // The holder rewritten (a new inode) is still found, and named.
        assert_eq!(put("a.ics", "u1", "y").status, 204);
        let r = put("b.ics", "u1", "x");
        assert_eq!(r.status, 403);
        assert!(
            body(&r).contains("<D:href>/cal/a.ics</D:href>"),
            "{}",
            body(&r)
        );
        // a.ics moves to another UID: u1 is free.
        assert_eq!(put("a.ics", "u2", "x").status, 204);
        assert_eq!(put("b.ics", "u1", "x").status, 201);
        assert_eq!(put("c.ics", "u2", "x").status, 403);
        // Deleting a.ics frees u2.
        assert_eq!(call(&dav, "DELETE", "/cal/a.ics", &[], b"").status, 204);
        assert_eq!(put("c.ics", "u2", "x").status, 201);
    }

    #[test]
    fn put_bodies_are_checked() {
        let ev = |extra: &str| {
            format!("BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:a\r\nDTSTART:20240101T100000Z\r\n{extra}END:VEVENT\r\nEND:VCALENDAR\r\n")
        };
        assert_eq!(
            obj(&ev("")).unwrap(),
            Object {
                comp: "VEVENT".into(),
                uid: "a".into()
            }
        );
        assert_eq!(cond(obj("nope").unwrap_err()), "C:valid-calendar-data");
        assert_eq!(
            cond(obj(&ev("RRULE:FREQ=OFTEN\r\n")).unwrap_err()),
            "C:valid-calendar-data"
        );
        assert_eq!(
            cond(obj(&ev("DTEND:tomorrow\r\n")).unwrap_err()),
            "C:valid-calendar-data"
        );
        let two = "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:a\r\nEND:VEVENT\r\nBEGIN:VEVENT\r\nUID:b\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
        assert_eq!(
            cond(obj(two).unwrap_err()),
            "C:valid-calendar-object-resource"
        );
        let none = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nEND:VCALENDAR\r\n";
        assert_eq!(
            cond(obj(none).unwrap_err()),
            "C:valid-calendar-object-resource"
        );
        let j = "BEGIN:VCALENDAR\r\nBEGIN:VJOURNAL\r\nUID:j\r\nEND:VJOURNAL\r\nEND:VCALENDAR\r\n";
        assert_eq!(cond(obj(j).unwrap_err()), "C:supported-calendar-component");
    }
}
