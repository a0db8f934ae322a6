//! Time zones of iCalendar values: a `TZID` parameter resolved to an IANA zone
//! (`chrono-tz`), through the object's own VTIMEZONE when the id is not one, and
//! floating times read in the zone the query names (CALDAV:timezone), UTC by default.
//!
//! Resolution of a TZID, first hit wins: the id itself (`Europe/Berlin`); any tail of
//! it after a `/` (`/mozilla.org/20050126_1/Europe/Berlin`); the VTIMEZONE's
//! `X-LIC-LOCATION`; a fixed `Etc/GMT±h` zone from the VTIMEZONE's STANDARD offset when
//! that is a whole hour; else the floating zone. The last two are approximations for
//! custom zones without an IANA name (rare: every mainstream client sends IANA ids).

use chrono::{NaiveDate, NaiveDateTime, TimeZone};
use chrono_tz::Tz;

use crate::ical::Component;

/// A DATE or DATE-TIME value resolved to an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Time {
    /// Seconds since the Unix epoch (UTC).
    pub secs: i64,
    /// A DATE (whole day) rather than a DATE-TIME.
    pub is_date: bool,
    /// The zone whose wall clock the value was written in (UTC for `Z` values).
    pub tz: Tz,
}

/// The zones an object's values are read in.
#[derive(Clone, Copy)]
pub(crate) struct Zones<'a> {
    /// The VCALENDAR (its VTIMEZONE children resolve custom TZIDs).
    pub cal: &'a Component,
    /// The zone of floating times and dates.
    pub floating: Tz,
}

/// Resolves a TZID without looking at any VTIMEZONE.
pub(crate) fn iana(tzid: &str) -> Option<Tz> {
    let id = tzid.trim().trim_matches('"');
    if let Ok(tz) = id.parse::<Tz>() {
        return Some(tz);
    }
    id.match_indices('/')
        .find_map(|(i, _)| id[i + 1..].parse::<Tz>().ok())
}

/// The zone a VTIMEZONE describes, when it can be named.
pub(crate) fn of_vtimezone(vtz: &Component) -> Option<Tz> {
    if let Some(tz) = vtz.prop("TZID").and_then(|p| iana(&p.value)) {
        return Some(tz);
    }
    if let Some(tz) = vtz.prop("X-LIC-LOCATION").and_then(|p| iana(&p.value)) {
        return Some(tz);
    }
    let std = vtz.children.iter().find(|c| c.name == "STANDARD")?;
    let off = std.prop("TZOFFSETTO")?.value.trim().to_owned();
    let (sign, digits) = match off.as_bytes().first()? {
        b'-' => (-1, &off[1..]),
        b'+' => (1, &off[1..]),
        _ => (1, off.as_str()),
    };
    let hours: i32 = digits.get(..2)?.parse().ok()?;
    if digits.get(2..4).is_some_and(|m| m != "00") {
        return None;
    }
    // Etc/GMT zones have POSIX's inverted sign: Etc/GMT-1 is UTC+1.
    let name = match sign * hours {
        0 => "Etc/GMT".to_owned(),
        h if h > 0 => format!("Etc/GMT-{h}"),
        h => format!("Etc/GMT+{}", -h),
    };
    name.parse().ok()
}

impl Zones<'_> {
    /// The zone of a TZID parameter value.
    pub fn tz(&self, tzid: &str) -> Tz {
        if let Some(tz) = iana(tzid) {
            return tz;
        }
        self.cal
            .children
            .iter()
            .filter(|c| c.name == "VTIMEZONE")
            .find(|c| {
                c.prop("TZID")
                    .is_some_and(|p| p.value.trim() == tzid.trim())
            })
            .and_then(of_vtimezone)
            .unwrap_or(self.floating)
    }

    /// Reads `YYYYMMDD`, `YYYYMMDDTHHMMSS` (in `tzid`'s zone, or floating) or
    /// `YYYYMMDDTHHMMSSZ`.
    pub fn value(&self, v: &str, tzid: Option<&str>) -> Option<Time> {
        let v = v.trim();
        if v.len() == 8 {
            let d = NaiveDate::parse_from_str(v, "%Y%m%d").ok()?;
            let tz = self.floating;
            return Some(Time {
                secs: local_secs(tz, d.and_hms_opt(0, 0, 0)?),
                is_date: true,
                tz,
            });
        }
        let (body, utc) = match v.strip_suffix('Z') {
            Some(b) => (b, true),
            None => (v, false),
        };
        let naive = NaiveDateTime::parse_from_str(body, "%Y%m%dT%H%M%S").ok()?;
        let tz = if utc {
            Tz::UTC
        } else {
            tzid.map_or(self.floating, |id| self.tz(id))
        };
        Some(Time {
            secs: local_secs(tz, naive),
            is_date: false,
            tz,
        })
    }

    /// The first value of property `name` of `c`.
    pub fn prop(&self, c: &Component, name: &str) -> Option<Time> {
        let p = c.prop(name)?;
        self.value(&p.value, p.param("TZID"))
    }
}

/// The UTC instant of wall-clock time `t` in `tz`: the earlier of two in a fall-back
/// overlap, shifted past a spring-forward gap (RFC 5545 section 3.3.5).
pub(crate) fn local_secs(tz: Tz, t: NaiveDateTime) -> i64 {
    match tz.from_local_datetime(&t) {
        chrono::LocalResult::Single(d) => d.timestamp(),
        chrono::LocalResult::Ambiguous(a, _) => a.timestamp(),
        chrono::LocalResult::None => {
            let later = t + chrono::Duration::hours(1);
            tz.from_local_datetime(&later)
                .earliest()
                .map_or_else(|| t.and_utc().timestamp(), |d| d.timestamp())
        }
    }
}

/// `secs` as an iCalendar UTC DATE-TIME (`20240110T090000Z`).
pub(crate) fn utc_text(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .map(|d| d.format("%Y%m%dT%H%M%SZ").to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ical::parse;

    const CAL: &str = "BEGIN:VCALENDAR\r\nBEGIN:VTIMEZONE\r\nTZID:Custom Berlin\r\nX-LIC-LOCATION:Europe/Berlin\r\nEND:VTIMEZONE\r\nBEGIN:VTIMEZONE\r\nTZID:Plus Three\r\nBEGIN:STANDARD\r\nTZOFFSETTO:+0300\r\nEND:STANDARD\r\nEND:VTIMEZONE\r\nEND:VCALENDAR\r\n";

    #[test]
    fn tzids_resolve_through_names_and_vtimezones() {
        let cal = parse(CAL.as_bytes()).unwrap();
        let z = Zones {
            cal: &cal,
            floating: Tz::UTC,
        };
        let summer = |id| z.value("20240710T120000", Some(id)).unwrap().secs;
        let utc_noon = z.value("20240710T120000Z", None).unwrap().secs;
        assert_eq!(summer("Europe/Berlin"), utc_noon - 2 * 3600);
        assert_eq!(
            summer("/mozilla.org/20050126_1/Europe/Berlin"),
            utc_noon - 2 * 3600
        );
        assert_eq!(summer("Custom Berlin"), utc_noon - 2 * 3600);
        assert_eq!(summer("Plus Three"), utc_noon - 3 * 3600);
        assert_eq!(summer("Nowhere"), utc_noon);
        let ny = Zones {
            cal: &cal,
            floating: "America/New_York".parse().unwrap(),
        };
        assert_eq!(
            ny.value("20240710T120000", None).unwrap().secs,
            utc_noon + 4 * 3600
        );
        let day = ny.value("20240710", None).unwrap();
        assert!(day.is_date);
        assert_eq!(day.secs, utc_noon - 12 * 3600 + 4 * 3600);
        // Spring-forward gap: 02:30 does not exist in Berlin on 2024-03-31.
        let gap = z.value("20240331T023000", Some("Europe/Berlin")).unwrap();
        assert_eq!(utc_text(gap.secs), "20240331T013000Z");
        assert_eq!(utc_text(utc_noon), "20240710T120000Z");
    }
}
