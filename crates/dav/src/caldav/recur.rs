//! Occurrences of calendar components: a component with RRULE/RDATE expanded by the
//! `rrule` crate in its own zone (EXDATEs removed, instances replaced by the object's
//! RECURRENCE-ID overrides), or a single occurrence; and the RFC 4791 section 9.9 table
//! that says when one occurrence overlaps a time range.
//!
//! UNTIL is rewritten to UTC before `rrule` sees it (RFC 5545 allows a DATE or a local
//! time there; `rrule` insists on UTC for zoned starts). A rule `rrule` refuses
//! (e.g. UNTIL before DTSTART) leaves the component with its first occurrence only, so
//! stored data never makes a query fail. Expansion is bounded to [`MAX_INSTANCES`] per
//! component and query window.

use chrono::TimeZone;
use rrule::{RRule, RRuleSet, Unvalidated};

use super::zone::{utc_text, Time, Zones};
use crate::ical::{parse_duration, Component, TimeRange};

/// Instances expanded per component and window at most.
pub(crate) const MAX_INSTANCES: u16 = 2000;
const DAY_S: i64 = 86_400;

/// The times of one component, or of one instance of it, that section 9.9 reads.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Span {
    pub dtstart: Option<Time>,
    pub dtend: Option<i64>,
    pub duration: Option<i64>,
    pub due: Option<i64>,
    pub completed: Option<i64>,
    pub created: Option<i64>,
}

impl Span {
    /// The times of `c` read in `zones`.
    pub fn of(c: &Component, zones: &Zones<'_>) -> Span {
        let secs = |n| zones.prop(c, n).map(|t| t.secs);
        Span {
            dtstart: zones.prop(c, "DTSTART"),
            dtend: secs("DTEND"),
            duration: c.prop("DURATION").and_then(|p| parse_duration(&p.value)),
            due: secs("DUE"),
            completed: secs("COMPLETED"),
            created: secs("CREATED"),
        }
    }

    /// The same span moved so that it starts at `start` (an instance of a series).
    pub fn at(&self, start: i64) -> Span {
        let Some(ds) = self.dtstart else { return *self };
        let shift = start - ds.secs;
        Span {
            dtstart: Some(Time { secs: start, ..ds }),
            dtend: self.dtend.map(|v| v + shift),
            due: self.due.map(|v| v + shift),
            ..*self
        }
    }

    /// The effective end of an event (RFC 4791 section 9.9's VEVENT rows): DTEND, or
    /// DTSTART + DURATION, or the end of a DATE's day, or DTSTART itself.
    pub fn event_end(&self) -> Option<i64> {
        let ds = self.dtstart?;
        Some(if let Some(e) = self.dtend {
            e
        } else if let Some(d) = self.duration {
            ds.secs + d.max(0)
        } else if ds.is_date {
            ds.secs + DAY_S
        } else {
            ds.secs
        })
    }

    /// Whether this occurrence of a component called `name` overlaps `tr`.
    pub fn overlaps(&self, name: &str, tr: &TimeRange) -> bool {
        let s = tr.start.unwrap_or(i64::MIN);
        let e = tr.end.unwrap_or(i64::MAX);
        let ds = self.dtstart.map(|t| t.secs);
        match name {
            "VEVENT" => {
                let (Some(start), Some(end)) = (ds, self.event_end()) else {
                    return false;
                };
                if end > start {
                    s < end && e > start
                } else {
                    s <= start && e > start
                }
            }
            "VTODO" => self.todo_overlaps(s, e),
            "VJOURNAL" => match self.dtstart {
                Some(t) if t.is_date => s < t.secs + DAY_S && e > t.secs,
                Some(t) => s <= t.secs && e > t.secs,
                None => false,
            },
            "VFREEBUSY" => match (ds, self.dtend) {
                (Some(a), Some(b)) => s < b && e > a,
                _ => false,
            },
            _ => true,
        }
    }

    fn todo_overlaps(&self, s: i64, e: i64) -> bool {
        let ds = self.dtstart.map(|t| t.secs);
        match (ds, self.duration, self.due) {
            (Some(ds), Some(d), _) => s <= ds + d && (e > ds || e >= ds + d),
            (Some(ds), None, Some(du)) => (s < du || s <= ds) && (e > ds || e >= du),
            (Some(ds), None, None) => s <= ds && e > ds,
            (None, _, Some(du)) => s < du && e >= du,
            (None, _, None) => match (self.completed, self.created) {
                (Some(co), Some(cr)) => (s <= cr || s <= co) && (e >= cr || e >= co),
                (Some(co), None) => s <= co && e >= co,
                (None, Some(cr)) => e > cr,
                (None, None) => true,
            },
        }
    }
}

/// One occurrence: the component that describes it (the master or an override) and
/// its times; `rid` is the RECURRENCE-ID of an instance of a series.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Occurrence<'a> {
    pub comp: &'a Component,
    pub span: Span,
    pub rid: Option<i64>,
}

/// Whether `c` is the master of a series.
pub(crate) fn is_recurring(c: &Component) -> bool {
    c.prop("RECURRENCE-ID").is_none() && (c.prop("RRULE").is_some() || c.prop("RDATE").is_some())
}

/// RECURRENCE-IDs of the overrides of master `c` in `cal` (same name and UID).
fn overridden(c: &Component, cal: &Component, zones: &Zones<'_>) -> Vec<i64> {
    let uid = c.prop("UID").map(|p| p.value.as_str());
    cal.children
        .iter()
        .filter(|o| o.name == c.name && o.prop("UID").map(|p| p.value.as_str()) == uid)
        .filter_map(|o| zones.prop(o, "RECURRENCE-ID"))
        .map(|t| t.secs)
        .collect()
}

/// An RRULE value with its UNTIL rewritten in UTC (a DATE UNTIL includes its day).
fn until_in_utc(rule: &str, start: Time, zones: &Zones<'_>) -> String {
    rule.split(';')
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if k.eq_ignore_ascii_case("UNTIL") => {
                let tzid = (start.tz != chrono_tz::Tz::UTC).then(|| start.tz.name());
                let z = Zones {
                    floating: start.tz,
                    ..*zones
                };
                match z.value(v, tzid) {
                    Some(t) if t.is_date => format!("UNTIL={}", utc_text(t.secs + DAY_S - 1)),
                    Some(t) => format!("UNTIL={}", utc_text(t.secs)),
                    None => kv.to_owned(),
                }
            }
            _ => kv.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// The dates of an RDATE or EXDATE property (PERIOD values contribute their start).
fn date_list(c: &Component, name: &str, zones: &Zones<'_>) -> Vec<i64> {
    c.props
        .iter()
        .filter(|p| p.name == name)
        .flat_map(|p| {
            let tzid = p.param("TZID");
            p.value
                .split(',')
                .filter_map(move |v| zones.value(v.split('/').next().unwrap_or(v), tzid))
                .map(|t| t.secs)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Whether an RRULE value parses (for PUT validation; the rule's consistency with
/// DTSTART is not required there, see the module docs).
pub(crate) fn rule_parses(rule: &str) -> bool {
    rule.parse::<RRule<Unvalidated>>().is_ok()
}

/// The instance starts of master `c` in `[from, to]`, or None when its rules cannot be
/// expanded.
fn instance_starts(
    c: &Component,
    zones: &Zones<'_>,
    start: Time,
    from: Option<i64>,
    to: Option<i64>,
) -> Option<Vec<i64>> {
    let tz = rrule::Tz::Tz(start.tz);
    let at = |secs: i64| tz.timestamp_opt(secs, 0).single();
    let mut set = RRuleSet::new(at(start.secs)?);
    for p in c.props.iter().filter(|p| p.name == "RRULE") {
        let rule: RRule<Unvalidated> = until_in_utc(&p.value, start, zones).parse().ok()?;
        set = set.rrule(rule.validate(at(start.secs)?).ok()?);
    }
    for r in date_list(c, "RDATE", zones) {
        set = set.rdate(at(r)?);
    }
    for x in date_list(c, "EXDATE", zones) {
        set = set.exdate(at(x)?);
    }
    if let Some(f) = from {
        set = set.after(at(f)?);
    }
    if let Some(t) = to {
        set = set.before(at(t)?);
    }
    Some(
        set.all(MAX_INSTANCES)
            .dates
            .iter()
            .map(|d| d.timestamp())
            .collect(),
    )
}

/// The occurrences of `c` (a child of `cal`) that may lie in `[from, to)`: every
/// instance of a series starting there (widened by the series' length so that a long
/// event begun earlier is found), or `c` itself.
pub(crate) fn occurrences<'a>(
    c: &'a Component,
    cal: &'a Component,
    zones: &Zones<'_>,
    from: Option<i64>,
    to: Option<i64>,
) -> Vec<Occurrence<'a>> {
    let span = Span::of(c, zones);
    let single = || {
        vec![Occurrence {
            comp: c,
            span,
            rid: zones.prop(c, "RECURRENCE-ID").map(|t| t.secs),
        }]
    };
    let Some(start) = span.dtstart else {
        return single();
    };
    if !is_recurring(c) {
        return single();
    }
    let len = span
        .event_end()
        .or(span.due)
        .map_or(0, |e| (e - start.secs).max(0))
        .max(DAY_S);
    let Some(starts) = instance_starts(c, zones, start, from.map(|f| f - len), to) else {
        return single();
    };
    let skip = overridden(c, cal, zones);
    starts
        .into_iter()
        .filter(|s| !skip.contains(s))
        .map(|s| Occurrence {
            comp: c,
            span: span.at(s),
            rid: Some(s),
        })
        .collect()
}

/// Whether any occurrence of `c` overlaps `tr`.
pub(crate) fn overlaps(c: &Component, cal: &Component, zones: &Zones<'_>, tr: &TimeRange) -> bool {
    occurrences(c, cal, zones, tr.start, tr.end)
        .iter()
        .any(|o| o.span.overlaps(&c.name, tr))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ical::parse;

    fn utc(v: &str) -> i64 {
        crate::ical::parse_datetime(v).unwrap().secs
    }

    const SERIES: &str = "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:w\r\nDTSTART;TZID=Europe/Berlin:20240108T090000\r\nDTEND;TZID=Europe/Berlin:20240108T100000\r\nRRULE:FREQ=WEEKLY;COUNT=10\r\nEXDATE;TZID=Europe/Berlin:20240122T090000\r\nRDATE;TZID=Europe/Berlin:20240125T150000\r\nEND:VEVENT\r\nBEGIN:VEVENT\r\nUID:w\r\nRECURRENCE-ID;TZID=Europe/Berlin:20240129T090000\r\nDTSTART;TZID=Europe/Berlin:20240130T140000\r\nDTEND;TZID=Europe/Berlin:20240130T150000\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";

    #[test]
    fn weekly_series_with_exdate_rdate_and_override() {
        let cal = parse(SERIES.as_bytes()).unwrap();
        let zones = Zones {
            cal: &cal,
            floating: chrono_tz::Tz::UTC,
        };
        let master = &cal.children[0];
        let got: Vec<String> = occurrences(
            master,
            &cal,
            &zones,
            Some(utc("20240101T000000Z")),
            Some(utc("20240206T000000Z")),
        )
        .iter()
        .map(|o| utc_text(o.span.dtstart.unwrap().secs))
        .collect();
        // Berlin is UTC+1 in winter; the 22nd is excluded, the 29th overridden.
        assert_eq!(
            got,
            [
                "20240108T080000Z",
                "20240115T080000Z",
                "20240125T140000Z",
                "20240205T080000Z"
            ]
        );
        let tr = |a, b| TimeRange {
            start: Some(utc(a)),
            end: Some(utc(b)),
        };
        assert!(overlaps(
            master,
            &cal,
            &zones,
            &tr("20240115T083000Z", "20240115T090000Z")
        ));
        assert!(!overlaps(
            master,
            &cal,
            &zones,
            &tr("20240122T000000Z", "20240123T000000Z")
        ));
        assert!(!overlaps(
            master,
            &cal,
            &zones,
            &tr("20240129T000000Z", "20240130T000000Z")
        ));
        let over = &cal.children[1];
        assert!(overlaps(
            over,
            &cal,
            &zones,
            &tr("20240130T130000Z", "20240130T133000Z")
        ));
        // COUNT=10 ends the series on 2024-03-11 (one EXDATE inside it).
        assert!(overlaps(
            master,
            &cal,
            &zones,
            &tr("20240311T000000Z", "20240312T000000Z")
        ));
        assert!(!overlaps(
            master,
            &cal,
            &zones,
            &tr("20240318T000000Z", "20240319T000000Z")
        ));
    }

    #[test]
    fn until_as_date_and_bad_rules_degrade() {
        let text = "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:d\r\nDTSTART;VALUE=DATE:20240101\r\nRRULE:FREQ=DAILY;UNTIL=20240103\r\nEND:VEVENT\r\nBEGIN:VEVENT\r\nUID:b\r\nDTSTART:20240105T100000Z\r\nRRULE:FREQ=DAILY;UNTIL=20230101T000000Z\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
        let cal = parse(text.as_bytes()).unwrap();
        let zones = Zones {
            cal: &cal,
            floating: chrono_tz::Tz::UTC,
        };
        let n = occurrences(&cal.children[0], &cal, &zones, None, None).len();
        assert_eq!(n, 3);
        let bad = occurrences(&cal.children[1], &cal, &zones, None, None);
        assert_eq!(bad.len(), 1);
        assert!(rule_parses("FREQ=WEEKLY;BYDAY=MO,WE"));
        assert!(!rule_parses("FREQ=SOMETIMES"));
    }
}
