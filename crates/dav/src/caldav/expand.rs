//! The calendar-data transforms of RFC 4791 section 9.6: `C:expand` (every instance in
//! the range as its own component, times in UTC, no rules or VTIMEZONE) and
//! `C:limit-recurrence-set` (the series' master plus only the overrides that touch the
//! range). Other calendar-data options (`C:comp`/`C:prop` subsets) return the whole
//! object, which RFC 4791 allows a server to do.

use chrono::TimeZone;
use chrono_tz::Tz;
use roxmltree::Node;

use super::filter::parse_time_range;
use super::recur::{self, Span};
use super::zone::{utc_text, Zones};
use crate::error::DavError;
use crate::ical::{self, Component, Prop, TimeRange};
use crate::xml::{self, Name, CALDAV, DAV};

/// What a REPORT's `C:calendar-data` asks for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum DataSpec {
    /// Every instance in the range.
    Expand(TimeRange),
    /// The master and the overrides touching the range.
    Limit(TimeRange),
}

/// The `C:expand` or `C:limit-recurrence-set` inside `D:prop/C:calendar-data` of a
/// REPORT body, if any (both need start and end, section 9.6.5).
pub(crate) fn parse_spec(root: Node<'_, '_>) -> Result<Option<DataSpec>, DavError> {
    let Some(data) =
        xml::child(root, DAV, "prop").and_then(|p| xml::child(p, CALDAV, "calendar-data"))
    else {
        return Ok(None);
    };
    for c in xml::elements(data) {
        let n = Name::of(c);
        let expand = n.is(CALDAV, "expand");
        if expand || n.is(CALDAV, "limit-recurrence-set") {
            let tr = parse_time_range(c)?;
            if tr.start.is_none() || tr.end.is_none() {
                return Err(DavError::Condition {
                    status: 403,
                    cond: "C:valid-filter",
                    reason: "expand and limit-recurrence-set need start and end",
                });
            }
            return Ok(Some(if expand {
                DataSpec::Expand(tr)
            } else {
                DataSpec::Limit(tr)
            }));
        }
    }
    Ok(None)
}

/// Replaces every `name` property of `c` with one holding `value`.
fn set(c: &mut Component, name: &str, params: Vec<(String, String)>, value: String) {
    let at = c.props.iter().position(|p| p.name == name);
    c.props.retain(|p| p.name != name);
    let p = Prop {
        name: name.into(),
        params,
        value,
    };
    match at {
        Some(i) if i <= c.props.len() => c.props.insert(i, p),
        _ => c.props.push(p),
    }
}

/// A time as written in expanded data: UTC date-time, or a DATE in the floating zone.
fn time_prop(c: &mut Component, name: &str, secs: i64, is_date: bool, floating: Tz) {
    if is_date {
        let day = floating
            .timestamp_opt(secs, 0)
            .single()
            .map(|d| d.format("%Y%m%d").to_string())
            .unwrap_or_default();
        set(c, name, vec![("VALUE".into(), "DATE".into())], day);
    } else {
        set(c, name, Vec::new(), utc_text(secs));
    }
}

fn expand(cal: &Component, z: &Zones<'_>, tr: &TimeRange) -> Component {
    let mut out = Component {
        name: cal.name.clone(),
        props: cal.props.clone(),
        children: Vec::new(),
    };
    for child in cal.children.iter().filter(|c| c.name != "VTIMEZONE") {
        for o in recur::occurrences(child, cal, z, tr.start, tr.end) {
            if !o.span.overlaps(&child.name, tr) {
                continue;
            }
            let mut c = o.comp.clone();
            c.props
                .retain(|p| !matches!(p.name.as_str(), "RRULE" | "RDATE" | "EXDATE" | "EXRULE"));
            let Span { dtstart, .. } = o.span;
            if let Some(ds) = dtstart {
                time_prop(&mut c, "DTSTART", ds.secs, ds.is_date, z.floating);
                if let Some(e) = o.span.dtend {
                    time_prop(&mut c, "DTEND", e, ds.is_date, z.floating);
                }
                if let Some(d) = o.span.due {
                    time_prop(&mut c, "DUE", d, ds.is_date, z.floating);
                }
                if let (Some(rid), true) = (
                    o.rid,
                    recur::is_recurring(child) || o.comp.prop("RECURRENCE-ID").is_some(),
                ) {
                    time_prop(&mut c, "RECURRENCE-ID", rid, ds.is_date, z.floating);
                }
            }
            out.children.push(c);
        }
    }
    out
}

fn limit(cal: &Component, z: &Zones<'_>, tr: &TimeRange) -> Component {
    let mut out = cal.clone();
    out.children.retain(|c| {
        let Some(rid) = z.prop(c, "RECURRENCE-ID") else {
            return true;
        };
        tr.contains(rid.secs) || Span::of(c, z).overlaps(&c.name, tr)
    });
    out
}

/// The calendar data of `bytes` as `spec` asks (None: not iCalendar, send as stored).
pub(crate) fn transform(bytes: &[u8], spec: &DataSpec, floating: Tz) -> Option<Vec<u8>> {
    let cal = ical::parse(bytes).ok()?;
    let z = Zones {
        cal: &cal,
        floating,
    };
    let out = match spec {
        DataSpec::Expand(tr) => expand(&cal, &z, tr),
        DataSpec::Limit(tr) => limit(&cal, &z, tr),
    };
    Some(ical::write(&out).into_bytes())
}
