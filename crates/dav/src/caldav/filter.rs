//! calendar-query filters (RFC 4791 section 9.7): parsed from the REPORT body, then
//! matched against a calendar object with every time read in its zone and every
//! instance of a series considered (`recur`); VALARM time-ranges test each trigger of
//! each instance of the alarm's parent (section 9.9).

use roxmltree::Node;

use super::recur::{self, Occurrence};
use super::zone::Zones;
use crate::error::DavError;
use crate::ical::{self, Component, TimeRange};
use crate::xml::{self, Name, CALDAV};

#[derive(Debug, Default)]
pub(crate) struct CompFilter {
    pub name: String,
    pub is_not_defined: bool,
    pub time_range: Option<TimeRange>,
    props: Vec<PropFilter>,
    comps: Vec<CompFilter>,
}

#[derive(Debug, Default)]
struct PropFilter {
    name: String,
    is_not_defined: bool,
    time_range: Option<TimeRange>,
    text_match: Option<TextMatch>,
    params: Vec<ParamFilter>,
}

#[derive(Debug, Default)]
struct ParamFilter {
    name: String,
    is_not_defined: bool,
    text_match: Option<TextMatch>,
}

#[derive(Debug)]
struct TextMatch {
    text: String,
    negate: bool,
    /// i;octet (exact) rather than the default i;ascii-casemap.
    octet: bool,
}

impl TextMatch {
    fn matches(&self, v: &str) -> bool {
        let hit = if self.octet {
            v.contains(&self.text)
        } else {
            v.to_ascii_lowercase()
                .contains(&self.text.to_ascii_lowercase())
        };
        hit != self.negate
    }
}

pub(crate) fn invalid_filter(reason: &'static str) -> DavError {
    DavError::Condition {
        status: 403,
        cond: "C:valid-filter",
        reason,
    }
}

fn name_attr(n: Node<'_, '_>) -> Result<String, DavError> {
    n.attribute("name")
        .map(str::to_ascii_uppercase)
        .ok_or_else(|| invalid_filter("filter element without a name"))
}

pub(crate) fn parse_time_range(n: Node<'_, '_>) -> Result<TimeRange, DavError> {
    let get = |a: &str| -> Result<Option<i64>, DavError> {
        match n.attribute(a) {
            None => Ok(None),
            Some(v) => match ical::parse_datetime(v) {
                Some(t) if !t.floating => Ok(Some(t.secs)),
                _ => Err(invalid_filter(
                    "time-range start/end must be UTC date-times",
                )),
            },
        }
    };
    let tr = TimeRange {
        start: get("start")?,
        end: get("end")?,
    };
    if tr.start.is_none() && tr.end.is_none() {
        return Err(invalid_filter("time-range needs start or end"));
    }
    Ok(tr)
}

fn parse_text_match(n: Node<'_, '_>) -> Result<TextMatch, DavError> {
    let octet = match n.attribute("collation") {
        None | Some("i;ascii-casemap") => false,
        Some("i;octet") => true,
        Some(_) => {
            return Err(DavError::Condition {
                status: 403,
                cond: "C:supported-collation",
                reason: "supported collations: i;ascii-casemap, i;octet",
            })
        }
    };
    Ok(TextMatch {
        text: xml::text(n),
        negate: n.attribute("negate-condition") == Some("yes"),
        octet,
    })
}

fn parse_comp_filter(n: Node<'_, '_>) -> Result<CompFilter, DavError> {
    let mut f = CompFilter {
        name: name_attr(n)?,
        ..Default::default()
    };
    for c in xml::elements(n) {
        match Name::of(c) {
            x if x.is(CALDAV, "is-not-defined") => f.is_not_defined = true,
            x if x.is(CALDAV, "time-range") => f.time_range = Some(parse_time_range(c)?),
            x if x.is(CALDAV, "prop-filter") => f.props.push(parse_prop_filter(c)?),
            x if x.is(CALDAV, "comp-filter") => f.comps.push(parse_comp_filter(c)?),
            _ => return Err(invalid_filter("unknown element in comp-filter")),
        }
    }
    Ok(f)
}

fn parse_prop_filter(n: Node<'_, '_>) -> Result<PropFilter, DavError> {
    let mut f = PropFilter {
        name: name_attr(n)?,
        ..Default::default()
    };
    for c in xml::elements(n) {
        match Name::of(c) {
            x if x.is(CALDAV, "is-not-defined") => f.is_not_defined = true,
            x if x.is(CALDAV, "time-range") => f.time_range = Some(parse_time_range(c)?),
            x if x.is(CALDAV, "text-match") => f.text_match = Some(parse_text_match(c)?),
            x if x.is(CALDAV, "param-filter") => {
                let mut p = ParamFilter {
                    name: name_attr(c)?,
                    ..Default::default()
                };
                for g in xml::elements(c) {
                    match Name::of(g) {
                        x if x.is(CALDAV, "is-not-defined") => p.is_not_defined = true,
                        x if x.is(CALDAV, "text-match") => {
                            p.text_match = Some(parse_text_match(g)?)
                        }
                        _ => return Err(invalid_filter("unknown element in param-filter")),
                    }
                }
                f.params.push(p);
            }
            _ => return Err(invalid_filter("unknown element in prop-filter")),
        }
    }
    Ok(f)
}

/// Parses the `C:filter` of a calendar-query: one top-level comp-filter.
pub(crate) fn parse_filter(filter_el: Node<'_, '_>) -> Result<CompFilter, DavError> {
    let top = xml::elements(filter_el)
        .next()
        .ok_or_else(|| invalid_filter("empty filter"))?;
    if !Name::of(top).is(CALDAV, "comp-filter") {
        return Err(invalid_filter("filter must hold one comp-filter"));
    }
    parse_comp_filter(top)
}

/// The component name and time-range every match must overlap, when the filter has one
/// at its second level (VCALENDAR > VEVENT with a time-range): what lets a query skip
/// objects by their remembered spans (`index`).
pub(crate) fn required_range(f: &CompFilter) -> Option<(&str, TimeRange)> {
    if f.is_not_defined {
        return None;
    }
    f.comps
        .iter()
        .find(|c| !c.is_not_defined && c.time_range.is_some())
        .and_then(|c| c.time_range.map(|tr| (c.name.as_str(), tr)))
}

/// Whether calendar object `cal` passes filter `f` (whose name is VCALENDAR's).
pub(crate) fn matches(f: &CompFilter, cal: &Component, zones: &Zones<'_>) -> bool {
    if f.is_not_defined {
        return cal.name != f.name;
    }
    cal.name == f.name && comp_passes(f, cal, None, zones)
}

/// Whether component `c` (already known to carry the filter's name) passes the
/// filter's tests; `parent` is the component `c` sits in (VALARM's event or to-do).
fn comp_passes(f: &CompFilter, c: &Component, parent: Option<&Component>, z: &Zones<'_>) -> bool {
    if let Some(tr) = &f.time_range {
        let hit = match (c.name.as_str(), parent) {
            ("VALARM", Some(p)) => alarm_overlaps(c, p, z, tr),
            _ => recur::overlaps(c, z.cal, z, tr),
        };
        if !hit {
            return false;
        }
    }
    f.props.iter().all(|p| prop_passes(p, c, z))
        && f.comps.iter().all(|sub| comp_filter_matches(sub, c, z))
}

/// A nested comp-filter against the children of `scope`.
fn comp_filter_matches(f: &CompFilter, scope: &Component, z: &Zones<'_>) -> bool {
    let mut named = scope.children.iter().filter(|c| c.name == f.name);
    if f.is_not_defined {
        return named.next().is_none();
    }
    named.any(|c| comp_passes(f, c, Some(scope), z))
}

/// The trigger offsets of `alarm` relative to its parent's start or end: `(related to
/// end, offsets in seconds)`, or an absolute first trigger; REPEAT adds `DURATION`
/// steps (RFC 5545 section 3.6.6).
fn alarm_overlaps(alarm: &Component, parent: &Component, z: &Zones<'_>, tr: &TimeRange) -> bool {
    let Some(trigger) = alarm.prop("TRIGGER") else {
        return false;
    };
    let repeat: i64 = alarm
        .prop("REPEAT")
        .and_then(|p| p.value.trim().parse().ok())
        .unwrap_or(0)
        .clamp(0, 1000);
    let step = alarm
        .prop("DURATION")
        .and_then(|p| ical::parse_duration(&p.value))
        .unwrap_or(0);
    let fires = |first: i64| (0..=repeat).any(|k| tr.contains(first + k * step));
    if trigger
        .param("VALUE")
        .is_some_and(|v| v.eq_ignore_ascii_case("DATE-TIME"))
    {
        return z.value(&trigger.value, None).is_some_and(|t| fires(t.secs));
    }
    let Some(offset) = ical::parse_duration(&trigger.value) else {
        return false;
    };
    let to_end = trigger
        .param("RELATED")
        .is_some_and(|v| v.eq_ignore_ascii_case("END"));
    let reach = offset.abs() + repeat * step.abs() + 366 * 86_400;
    let from = tr.start.map(|s| s - reach);
    let to = tr.end.map(|e| e + reach);
    let occ: Vec<Occurrence<'_>> = recur::occurrences(parent, z.cal, z, from, to);
    occ.iter().any(|o| {
        let anchor = if to_end {
            o.span.event_end().or(o.span.due)
        } else {
            o.span.dtstart.map(|t| t.secs)
        };
        anchor.is_some_and(|a| fires(a + offset))
    })
}

fn prop_passes(f: &PropFilter, c: &Component, z: &Zones<'_>) -> bool {
    let mut named = c.props.iter().filter(|p| p.name == f.name).peekable();
    if f.is_not_defined {
        return named.peek().is_none();
    }
    named.any(|p| {
        f.time_range.as_ref().is_none_or(|tr| {
            z.value(&p.value, p.param("TZID"))
                .is_some_and(|t| tr.contains(t.secs))
        }) && f.text_match.as_ref().is_none_or(|t| t.matches(&p.value))
            && f.params.iter().all(|pf| {
                let v = p.param(&pf.name);
                if pf.is_not_defined {
                    v.is_none()
                } else {
                    v.is_some_and(|v| pf.text_match.as_ref().is_none_or(|t| t.matches(v)))
                }
            })
    })
}
