//! What the server remembers about each stored item so that listing and searching a
//! large calendar need not read every file: its content ETag, and per component type
//! the span of time its occurrences cover. Keyed by inode and checked against the
//! file's (inode, mtime, length) stamp on every use, so a changed file (every write is
//! a rename onto a new inode) is read again; nothing can go stale.
//!
//! The spans make calendar-query skip objects that cannot match a time-range: they are
//! computed with floating times read as UTC and widened by [`SLACK_S`] (more than the
//! largest UTC offset, and the `<=` edges of the VTODO rules), and a series that does
//! not end (or whose expansion hit `recur::MAX_INSTANCES`) spans to the end of time, so
//! a skip never loses a match; the full filter still decides every object read.
//!
//! Bounded to [`MAX_ITEMS`] entries; past that it starts over.

use std::collections::HashMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

use super::recur;
use super::zone::Zones;
use crate::ical::{Component, TimeRange};

/// Items remembered at most (~80 B each with the map's own overhead: ~5 MiB when full,
/// enough for one 60,000-item calendar).
const MAX_ITEMS: usize = 65_536;
/// Widening of every span: 14 h zones, day-long DATE values and inclusive edges.
const SLACK_S: i64 = 2 * 86_400;
/// Component types with spans, in [`Spans`] order.
const KINDS: [&str; 4] = ["VEVENT", "VTODO", "VJOURNAL", "VFREEBUSY"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    mtime_s: i64,
    mtime_ns: u32,
    len: u64,
}

impl Stamp {
    fn of(meta: &Metadata) -> (u64, Stamp) {
        (
            meta.ino(),
            Stamp {
                mtime_s: meta.mtime(),
                mtime_ns: u32::try_from(meta.mtime_nsec()).unwrap_or(0),
                len: meta.len(),
            },
        )
    }
}

/// The component types an object holds (a bit per [`KINDS`] entry) and the (earliest
/// start, latest end) their occurrences may touch. A valid object has one type, so one
/// span for all loses nothing in practice and keeps an entry small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Spans {
    kinds: u8,
    lo: i64,
    hi: i64,
}

impl Spans {
    /// The spans of a parsed calendar object.
    pub fn of(cal: &Component) -> Spans {
        let mut spans = Spans {
            kinds: 0,
            lo: i64::MAX,
            hi: i64::MIN,
        };
        let zones = Zones {
            cal,
            floating: chrono_tz::Tz::UTC,
        };
        for c in &cal.children {
            let Some(k) = KINDS.iter().position(|n| *n == c.name) else {
                continue;
            };
            spans.kinds |= 1 << k;
            let occ = recur::occurrences(c, cal, &zones, None, None);
            // A rule with neither COUNT nor UNTIL never ends; a capped expansion may not.
            let endless_rule = c.props.iter().any(|p| {
                p.name == "RRULE" && !p.value.contains("COUNT=") && !p.value.contains("UNTIL=")
            });
            let open_ended = recur::is_recurring(c)
                && (endless_rule || occ.len() >= usize::from(recur::MAX_INSTANCES));
            for o in &occ {
                let s = o.span;
                let times = [
                    s.dtstart.map(|t| t.secs),
                    s.event_end(),
                    s.dtend,
                    s.due,
                    s.completed,
                    s.created,
                ];
                let known: Vec<i64> = times.iter().flatten().copied().collect();
                let (lo, hi) = match (known.iter().min(), known.iter().max()) {
                    (Some(lo), Some(hi)) => (*lo, hi + s.duration.unwrap_or(0).max(0)),
                    // A to-do without any date overlaps every range.
                    _ => (i64::MIN, i64::MAX),
                };
                spans.lo = spans.lo.min(lo);
                spans.hi = spans.hi.max(hi);
            }
            if open_ended {
                spans.hi = i64::MAX;
            }
        }
        spans
    }

    /// False only when no component called `name` can overlap `tr`.
    pub fn may_overlap(&self, name: &str, tr: &TimeRange) -> bool {
        let Some(k) = KINDS.iter().position(|n| *n == name) else {
            return true;
        };
        if self.kinds & (1 << k) == 0 || self.lo > self.hi {
            return false;
        }
        let lo = self.lo.saturating_sub(SLACK_S);
        let hi = self.hi.saturating_add(SLACK_S);
        tr.start.is_none_or(|s| hi >= s) && tr.end.is_none_or(|e| lo < e)
    }
}

#[derive(Debug, Clone, Copy)]
struct Item {
    stamp: Stamp,
    /// FNV-1a 64 of the content ([`crate::strong_etag`]'s hash).
    fnv: Option<u64>,
    spans: Option<Spans>,
}

/// The per-item memory (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct ItemIndex {
    items: HashMap<u64, Item>,
}

impl ItemIndex {
    fn get(&self, meta: &Metadata) -> Option<&Item> {
        let (ino, stamp) = Stamp::of(meta);
        self.items.get(&ino).filter(|i| i.stamp == stamp)
    }

    fn entry(&mut self, meta: &Metadata) -> &mut Item {
        let (ino, stamp) = Stamp::of(meta);
        if self.items.len() >= MAX_ITEMS && !self.items.contains_key(&ino) {
            self.items.clear();
        }
        let e = self.items.entry(ino).or_insert(Item {
            stamp,
            fnv: None,
            spans: None,
        });
        if e.stamp != stamp {
            *e = Item {
                stamp,
                fnv: None,
                spans: None,
            };
        }
        e
    }

    /// The remembered ETag of the file `meta` describes.
    pub fn etag(&self, meta: &Metadata) -> Option<String> {
        let i = self.get(meta)?;
        i.fnv.map(|h| crate::etag_of(h, i.stamp.len))
    }

    /// Remembers the content hash of the file `meta` describes.
    pub fn set_fnv(&mut self, meta: &Metadata, fnv: u64) {
        self.entry(meta).fnv = Some(fnv);
    }

    /// The remembered spans of the file `meta` describes.
    pub fn spans(&self, meta: &Metadata) -> Option<Spans> {
        self.get(meta)?.spans
    }

    /// Remembers the spans of the file `meta` describes.
    pub fn set_spans(&mut self, meta: &Metadata, spans: Spans) {
        self.entry(meta).spans = Some(spans);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ical::parse;

    fn tr(a: &str, b: &str) -> TimeRange {
        TimeRange {
            start: Some(crate::ical::parse_datetime(a).unwrap().secs),
            end: Some(crate::ical::parse_datetime(b).unwrap().secs),
        }
    }

    #[test]
    fn remembered_etags_follow_every_write() {
        use crate::tests::{body, call, TempDir};
        let d = TempDir::new("index");
        let dav = crate::Dav::new(d.path());
        call(&dav, "MKCALENDAR", "/cal/", &[], b"");
        let ev = |s: &str| {
            format!("BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:x\r\nDTSTART:20240101T100000Z\r\nSUMMARY:{s}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")
        };
        let q = br#"<propfind xmlns="DAV:"><prop><getetag/></prop></propfind>"#;
        for s in ["one", "two", "owt"] {
            assert!(call(&dav, "PUT", "/cal/x.ics", &[], ev(s).as_bytes()).status < 300);
            for _ in 0..2 {
                let b = body(&call(&dav, "PROPFIND", "/cal/x.ics", &[("Depth", "0")], q));
                let want = crate::xml::escape(&crate::strong_etag(ev(s).as_bytes()));
                assert!(b.contains(&want), "{s}: {b}");
            }
        }
    }

    #[test]
    fn spans_cover_series_and_skip_only_the_impossible() {
        let text = "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:a\r\nDTSTART;TZID=Europe/Berlin:20240101T090000\r\nDURATION:PT1H\r\nRRULE:FREQ=WEEKLY;COUNT=4\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
        let s = Spans::of(&parse(text.as_bytes()).unwrap());
        assert!(s.may_overlap("VEVENT", &tr("20240122T000000Z", "20240123T000000Z")));
        assert!(!s.may_overlap("VEVENT", &tr("20240301T000000Z", "20240302T000000Z")));
        assert!(!s.may_overlap("VEVENT", &tr("20231201T000000Z", "20231202T000000Z")));
        assert!(!s.may_overlap("VTODO", &tr("20240101T000000Z", "20240102T000000Z")));
        assert!(s.may_overlap("VALARM", &tr("20300101T000000Z", "20300102T000000Z")));
        let endless = text.replace(";COUNT=4", "");
        let s = Spans::of(&parse(endless.as_bytes()).unwrap());
        assert!(s.may_overlap("VEVENT", &tr("20990101T000000Z", "20990102T000000Z")));
        let todo = "BEGIN:VCALENDAR\r\nBEGIN:VTODO\r\nUID:t\r\nEND:VTODO\r\nEND:VCALENDAR\r\n";
        let s = Spans::of(&parse(todo.as_bytes()).unwrap());
        assert!(s.may_overlap("VTODO", &tr("19900101T000000Z", "19900102T000000Z")));
    }
}
