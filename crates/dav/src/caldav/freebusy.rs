//! The free-busy-query REPORT (RFC 4791 section 7.10): the busy time of a calendar's
//! events in a range as one VFREEBUSY, merged per type. Transparent and cancelled
//! events are free; tentative ones are BUSY-TENTATIVE; VFREEBUSY objects stored in the
//! calendar contribute their FREEBUSY periods.

use std::collections::BTreeMap;

use chrono_tz::Tz;
use roxmltree::Node;

use super::filter::parse_time_range;
use super::recur;
use super::zone::{utc_text, Zones};
use crate::error::DavError;
use crate::ical::{self, Component, TimeRange};
use crate::xml::{self, CALDAV};

/// Busy periods by FBTYPE.
type Busy = BTreeMap<String, Vec<(i64, i64)>>;

fn add(busy: &mut Busy, kind: &str, a: i64, b: i64, tr: &TimeRange) {
    let a = tr.start.map_or(a, |s| a.max(s));
    let b = tr.end.map_or(b, |e| b.min(e));
    if b > a {
        busy.entry(kind.to_owned()).or_default().push((a, b));
    }
}

fn collect(cal: &Component, floating: Tz, tr: &TimeRange, busy: &mut Busy) {
    let z = Zones { cal, floating };
    for c in &cal.children {
        match c.name.as_str() {
            "VEVENT" => {
                let value = |n: &str| c.prop(n).map(|p| p.value.trim().to_ascii_uppercase());
                if value("TRANSP").as_deref() == Some("TRANSPARENT")
                    || value("STATUS").as_deref() == Some("CANCELLED")
                {
                    continue;
                }
                let kind = if value("STATUS").as_deref() == Some("TENTATIVE") {
                    "BUSY-TENTATIVE"
                } else {
                    "BUSY"
                };
                for o in recur::occurrences(c, cal, &z, tr.start, tr.end) {
                    if let (Some(s), Some(e)) = (o.span.dtstart, o.span.event_end()) {
                        if o.span.overlaps("VEVENT", tr) {
                            add(busy, kind, s.secs, e, tr);
                        }
                    }
                }
            }
            "VFREEBUSY" => {
                for p in c.props.iter().filter(|p| p.name == "FREEBUSY") {
                    let kind = p.param("FBTYPE").unwrap_or("BUSY").to_ascii_uppercase();
                    if kind == "FREE" {
                        continue;
                    }
                    for period in p.value.split(',') {
                        let Some((a, b)) = period.split_once('/') else {
                            continue;
                        };
                        let Some(start) = z.value(a, None) else {
                            continue;
                        };
                        let end = match ical::parse_duration(b) {
                            Some(d) => start.secs + d,
                            None => match z.value(b, None) {
                                Some(t) => t.secs,
                                None => continue,
                            },
                        };
                        add(busy, &kind, start.secs, end, tr);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Parses the `C:time-range` of a free-busy-query (both ends required, section 7.10).
pub(crate) fn parse_query(root: Node<'_, '_>) -> Result<TimeRange, DavError> {
    let tr = xml::child(root, CALDAV, "time-range")
        .map(parse_time_range)
        .transpose()?;
    match tr {
        Some(tr) if tr.start.is_some() && tr.end.is_some() => Ok(tr),
        _ => Err(DavError::Condition {
            status: 403,
            cond: "C:valid-filter",
            reason: "free-busy-query needs a time-range with start and end",
        }),
    }
}

/// The VFREEBUSY answering `tr` over the given calendar objects (raw bytes; those that
/// are not iCalendar are skipped).
pub(crate) fn answer<'a>(
    objects: impl Iterator<Item = Vec<u8>> + 'a,
    floating: Tz,
    tr: &TimeRange,
    now_s: i64,
) -> String {
    let mut busy = Busy::new();
    for bytes in objects {
        if let Ok(cal) = ical::parse(&bytes) {
            collect(&cal, floating, tr, &mut busy);
        }
    }
    let mut out = String::from(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//volley//CalDAV//EN\r\nBEGIN:VFREEBUSY\r\n",
    );
    out.push_str(&format!("DTSTAMP:{}\r\n", utc_text(now_s)));
    out.push_str(&format!(
        "DTSTART:{}\r\nDTEND:{}\r\n",
        utc_text(tr.start.unwrap_or(0)),
        utc_text(tr.end.unwrap_or(0))
    ));
    for (kind, mut periods) in busy {
        periods.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::new();
        for (a, b) in periods {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        for (a, b) in merged {
            out.push_str(&format!(
                "FREEBUSY;FBTYPE={kind}:{}/{}\r\n",
                utc_text(a),
                utc_text(b)
            ));
        }
    }
    out.push_str("END:VFREEBUSY\r\nEND:VCALENDAR\r\n");
    out
}
