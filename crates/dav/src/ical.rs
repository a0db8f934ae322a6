//! Just enough iCalendar (RFC 5545) for CalDAV: content lines unfolded into a component
//! tree and written back ([`write`]), DATE / DATE-TIME / DURATION values, and the
//! time-range type of queries. Zones, recurrence and the RFC 4791 section 9.9 overlap
//! rules live in `caldav` (`zone`, `recur`).

/// One parsed property line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prop {
    /// Upper-cased name.
    pub name: String,
    /// Parameters (upper-cased name, raw value).
    pub params: Vec<(String, String)>,
    /// Raw value.
    pub value: String,
}

impl Prop {
    /// The value of parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A component (VCALENDAR, VEVENT, ...) with its properties and subcomponents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Component {
    /// Upper-cased name.
    pub name: String,
    /// Properties in order.
    pub props: Vec<Prop>,
    /// Subcomponents in order.
    pub children: Vec<Component>,
}

impl Component {
    /// The first property called `name`.
    pub fn prop(&self, name: &str) -> Option<&Prop> {
        self.props.iter().find(|p| p.name == name)
    }
}

/// Why text is not iCalendar.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IcalError {
    /// Not UTF-8.
    #[error("not UTF-8")]
    NotUtf8,
    /// A line without a colon.
    #[error("line {0} has no ':'")]
    NoColon(usize),
    /// END without matching BEGIN, or input ending inside a component.
    #[error("unbalanced BEGIN/END")]
    Unbalanced,
    /// The object is not one VCALENDAR.
    #[error("not a VCALENDAR object")]
    NotCalendar,
}

/// Parses an iCalendar object (one VCALENDAR).
pub fn parse(bytes: &[u8]) -> Result<Component, IcalError> {
    let text = std::str::from_utf8(bytes).map_err(|_| IcalError::NotUtf8)?;
    let mut lines: Vec<String> = Vec::new();
    for raw in text.split('\n') {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        if let Some(cont) = raw.strip_prefix([' ', '\t']) {
            if let Some(last) = lines.last_mut() {
                last.push_str(cont);
                continue;
            }
        }
        if !raw.is_empty() {
            lines.push(raw.to_owned());
        }
    }
    let mut stack: Vec<Component> = Vec::new();
    let mut done: Option<Component> = None;
    for (i, line) in lines.iter().enumerate() {
        let prop = parse_line(line).ok_or(IcalError::NoColon(i + 1))?;
        match prop.name.as_str() {
            "BEGIN" => {
                if done.is_some() {
                    return Err(IcalError::NotCalendar);
                }
                stack.push(Component {
                    name: prop.value.to_ascii_uppercase(),
                    ..Default::default()
                })
            }
            "END" => {
                let c = stack.pop().ok_or(IcalError::Unbalanced)?;
                if !c.name.eq_ignore_ascii_case(&prop.value) {
                    return Err(IcalError::Unbalanced);
                }
                match stack.last_mut() {
                    Some(parent) => parent.children.push(c),
                    None => done = Some(c),
                }
            }
            _ => match stack.last_mut() {
                Some(c) => c.props.push(prop),
                None => return Err(IcalError::NotCalendar),
            },
        }
    }
    if !stack.is_empty() {
        return Err(IcalError::Unbalanced);
    }
    match done {
        Some(c) if c.name == "VCALENDAR" => Ok(c),
        _ => Err(IcalError::NotCalendar),
    }
}

/// Writes a component as iCalendar text: CRLF line ends, lines folded at 75 octets
/// (RFC 5545 section 3.1), parameter values quoted when they hold `:`, `;` or `,`.
pub fn write(c: &Component) -> String {
    let mut out = String::new();
    write_into(c, &mut out);
    out
}

fn write_into(c: &Component, out: &mut String) {
    fold(out, &format!("BEGIN:{}", c.name));
    for p in &c.props {
        let mut line = p.name.clone();
        for (k, v) in &p.params {
            line.push(';');
            line.push_str(k);
            line.push('=');
            if v.contains([':', ';', ',']) {
                line.push('"');
                line.push_str(v);
                line.push('"');
            } else {
                line.push_str(v);
            }
        }
        line.push(':');
        line.push_str(&p.value);
        fold(out, &line);
    }
    for child in &c.children {
        write_into(child, out);
    }
    fold(out, &format!("END:{}", c.name));
}

fn fold(out: &mut String, line: &str) {
    let mut room = 75;
    let mut used = 0;
    for ch in line.chars() {
        if used + ch.len_utf8() > room {
            out.push_str("\r\n ");
            room = 74;
            used = 0;
        }
        out.push(ch);
        used += ch.len_utf8();
    }
    out.push_str("\r\n");
}

/// `NAME;P=V;Q="a:b":value`, with quoted parameter values that may hold ':' and ';'.
fn parse_line(line: &str) -> Option<Prop> {
    let mut in_quote = false;
    let mut colon = None;
    for (i, c) in line.char_indices() {
        match c {
            '"' => in_quote = !in_quote,
            ':' if !in_quote => {
                colon = Some(i);
                break;
            }
            _ => {}
        }
    }
    let colon = colon?;
    let (head, value) = (&line[..colon], &line[colon + 1..]);
    let mut parts = split_unquoted(head, ';').into_iter();
    let name = parts.next()?.trim().to_ascii_uppercase();
    if name.is_empty() {
        return None;
    }
    let params = parts
        .filter_map(|p| {
            let (k, v) = p.split_once('=')?;
            Some((
                k.trim().to_ascii_uppercase(),
                v.trim_matches('"').to_owned(),
            ))
        })
        .collect();
    Some(Prop {
        name,
        params,
        value: value.to_owned(),
    })
}

fn split_unquoted(s: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_quote = false;
    for (i, c) in s.char_indices() {
        if c == '"' {
            in_quote = !in_quote;
        } else if c == sep && !in_quote {
            out.push(&s[start..i]);
            start = i + 1;
        }
    }
    out.push(&s[start..]);
    out
}

/// A point in time read from iCalendar: seconds since the Unix epoch, read as UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instant {
    /// Seconds since 1970-01-01T00:00:00Z (if the value was UTC).
    pub secs: i64,
    /// A DATE value (whole day), not a DATE-TIME.
    pub is_date: bool,
    /// Not UTC (floating or TZID): the true instant may be up to 14 h either side.
    pub floating: bool,
}

/// Parses `YYYYMMDD`, `YYYYMMDDTHHMMSS` or `YYYYMMDDTHHMMSSZ`.
pub fn parse_datetime(v: &str) -> Option<Instant> {
    let v = v.trim();
    let b = v.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = v.get(r)?;
        if s.bytes().all(|c| c.is_ascii_digit()) {
            s.parse().ok()
        } else {
            None
        }
    };
    let (y, m, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let days = days_since_epoch(y, m, d)?;
    if b.len() == 8 {
        return Some(Instant {
            secs: days * 86_400,
            is_date: true,
            floating: true,
        });
    }
    if b.get(8) != Some(&b'T') || !(b.len() == 15 || (b.len() == 16 && b[15] == b'Z')) {
        return None;
    }
    let (h, mi, s) = (num(9..11)?, num(11..13)?, num(13..15)?);
    if h > 23 || mi > 59 || s > 60 {
        return None;
    }
    Some(Instant {
        secs: days * 86_400 + h * 3600 + mi * 60 + s,
        is_date: false,
        floating: b.len() == 15,
    })
}

/// Days from 1970-01-01 to day `d` of month `m` of year `y`. A day past the month's end
/// runs on into the next month (`20240231` is 2 March), as the lenient reading of
/// calendar data always did.
fn days_since_epoch(y: i64, m: i64, d: i64) -> Option<i64> {
    let month = time::Month::try_from(u8::try_from(m).ok()?).ok()?;
    let first = time::Date::from_calendar_date(i32::try_from(y).ok()?, month, 1).ok()?;
    let epoch = time::Date::from_calendar_date(1970, time::Month::January, 1).ok()?;
    Some(i64::from(first.to_julian_day() - epoch.to_julian_day()) + d - 1)
}

/// Parses an RFC 5545 DURATION (`P1D`, `-PT1H30M`, `P2W`) into seconds.
pub fn parse_duration(v: &str) -> Option<i64> {
    let v = v.trim();
    let (sign, rest) = match v.as_bytes().first()? {
        b'-' => (-1, &v[1..]),
        b'+' => (1, &v[1..]),
        _ => (1, v),
    };
    let rest = rest.strip_prefix('P')?;
    let mut total: i64 = 0;
    let mut num: i64 = 0;
    let mut have_num = false;
    let mut in_time = false;
    let mut any = false;
    for c in rest.chars() {
        match c {
            '0'..='9' => {
                num = num
                    .checked_mul(10)?
                    .checked_add(i64::from(c as u8 - b'0'))?;
                have_num = true;
            }
            'T' if !in_time && !have_num => in_time = true,
            'W' | 'D' | 'H' | 'M' | 'S' if have_num => {
                let unit = match (c, in_time) {
                    ('W', false) => 604_800,
                    ('D', false) => 86_400,
                    ('H', true) => 3600,
                    ('M', true) => 60,
                    ('S', true) => 1,
                    _ => return None,
                };
                total = total.checked_add(num.checked_mul(unit)?)?;
                num = 0;
                have_num = false;
                any = true;
            }
            _ => return None,
        }
    }
    if have_num || !any {
        return None;
    }
    Some(sign * total)
}

/// A time-range filter: `[start, end)` in Unix seconds; open ends are `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeRange {
    /// Inclusive start.
    pub start: Option<i64>,
    /// Exclusive end.
    pub end: Option<i64>,
}

impl TimeRange {
    /// Whether component `c` overlaps the range (RFC 4791 section 9.9), every instance
    /// of a series considered, floating times and TZIDs without a VTIMEZONE at hand
    /// read as described in `caldav::zone` with UTC as the floating zone. Components
    /// other than VEVENT, VTODO, VJOURNAL and VFREEBUSY match.
    pub fn overlaps(&self, c: &Component) -> bool {
        let cal = Component::default();
        let zones = crate::caldav::zone::Zones {
            cal: &cal,
            floating: chrono_tz::Tz::UTC,
        };
        crate::caldav::recur::overlaps(c, &cal, &zones, self)
    }

    /// Whether a single property value (a date-time, floating read as UTC) lies in the
    /// range.
    pub fn contains_value(&self, v: &str) -> bool {
        match parse_datetime(v) {
            Some(t) => self.contains(t.secs),
            None => false,
        }
    }

    /// Whether instant `secs` lies in `[start, end)`.
    pub fn contains(&self, secs: i64) -> bool {
        self.start.is_none_or(|s| secs >= s) && self.end.is_none_or(|e| secs < e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVENT: &str = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:1\r\nDTSTART:20240110T100000Z\r\nDTEND:20240110T110000Z\r\nSUMMARY;LANGUAGE=en:Long sum\r\n mary: with colon\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";

    fn utc(v: &str) -> i64 {
        parse_datetime(v).unwrap().secs
    }

    fn range(a: &str, b: &str) -> TimeRange {
        TimeRange {
            start: Some(utc(a)),
            end: Some(utc(b)),
        }
    }

    #[test]
    fn parses_unfolded_lines_and_tree() {
        let cal = parse(EVENT.as_bytes()).unwrap();
        assert_eq!(cal.children.len(), 1);
        let ev = &cal.children[0];
        assert_eq!(
            ev.prop("SUMMARY").unwrap().value,
            "Long summary: with colon"
        );
        assert_eq!(ev.prop("SUMMARY").unwrap().param("LANGUAGE"), Some("en"));
        assert_eq!(
            parse(b"BEGIN:VCALENDAR\nBEGIN:VEVENT\nEND:VCALENDAR\n"),
            Err(IcalError::Unbalanced)
        );
        assert_eq!(parse(b"hello"), Err(IcalError::NoColon(1)));
        assert_eq!(
            parse(b"BEGIN:VEVENT\nEND:VEVENT\n"),
            Err(IcalError::NotCalendar)
        );
        assert_eq!(parse(b"\xff"), Err(IcalError::NotUtf8));
    }

    #[test]
    fn write_round_trips_and_folds() {
        let cal = parse(EVENT.as_bytes()).unwrap();
        let long = Prop {
            name: "DESCRIPTION".into(),
            params: vec![("X-A".into(), "a:b".into())],
            value: "\u{e9}".repeat(60),
        };
        let mut cal2 = cal.clone();
        cal2.children[0].props.push(long);
        let text = write(&cal2);
        assert!(text.lines().all(|l| l.len() <= 76), "{text}");
        assert!(text.contains("DESCRIPTION;X-A=\"a:b\":"));
        assert_eq!(parse(text.as_bytes()).unwrap(), cal2);
        assert_eq!(parse(write(&cal).as_bytes()).unwrap(), cal);
    }

    #[test]
    fn datetimes_and_durations() {
        assert_eq!(utc("19700101T000001Z"), 1);
        assert!(parse_datetime("20240110").unwrap().is_date);
        assert!(parse_datetime("20241310T000000Z").is_none());
        assert!(parse_datetime("2024011").is_none());
        assert_eq!(parse_duration("PT1H30M"), Some(5400));
        assert_eq!(parse_duration("-P1W"), Some(-604_800));
        assert_eq!(parse_duration("P1DT1S"), Some(86_401));
        assert_eq!(parse_duration("P"), None);
        assert_eq!(parse_duration("PT1D"), None);
        assert_eq!(parse_duration("P99999999999999999999D"), None);
    }

    #[test]
    fn event_overlap_rules() {
        let ev = &parse(EVENT.as_bytes()).unwrap().children[0];
        assert!(range("20240110T000000Z", "20240111T000000Z").overlaps(ev));
        assert!(range("20240110T105959Z", "20240110T120000Z").overlaps(ev));
        assert!(!range("20240110T110000Z", "20240110T120000Z").overlaps(ev));
        assert!(!range("20240109T000000Z", "20240110T100000Z").overlaps(ev));
        let open = TimeRange {
            start: None,
            end: Some(utc("20240110T100001Z")),
        };
        assert!(open.overlaps(ev));
        let dur = parse(b"BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:20240110T100000Z\nDURATION:PT2H\nEND:VEVENT\nEND:VCALENDAR\n").unwrap();
        assert!(range("20240110T113000Z", "20240110T120000Z").overlaps(&dur.children[0]));
        assert!(!range("20240110T120000Z", "20240110T130000Z").overlaps(&dur.children[0]));
        let day = parse(b"BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART;VALUE=DATE:20240110\nEND:VEVENT\nEND:VCALENDAR\n").unwrap();
        assert!(range("20240110T200000Z", "20240110T210000Z").overlaps(&day.children[0]));
        assert!(!range("20240113T000000Z", "20240114T000000Z").overlaps(&day.children[0]));
    }

    #[test]
    fn todo_and_recurrence_rules() {
        let todo = parse(
            b"BEGIN:VCALENDAR\nBEGIN:VTODO\nDUE:20240110T100000Z\nEND:VTODO\nEND:VCALENDAR\n",
        )
        .unwrap();
        assert!(range("20240110T000000Z", "20240110T100000Z").overlaps(&todo.children[0]));
        assert!(!range("20240111T000000Z", "20240112T000000Z").overlaps(&todo.children[0]));
        let bare =
            parse(b"BEGIN:VCALENDAR\nBEGIN:VTODO\nSUMMARY:x\nEND:VTODO\nEND:VCALENDAR\n").unwrap();
        assert!(range("20240111T000000Z", "20240112T000000Z").overlaps(&bare.children[0]));
        let rec = parse(b"BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:20240101T100000Z\nDTEND:20240101T110000Z\nRRULE:FREQ=WEEKLY;UNTIL=20240201T000000Z\nEND:VEVENT\nEND:VCALENDAR\n").unwrap();
        assert!(range("20240115T000000Z", "20240116T000000Z").overlaps(&rec.children[0]));
        assert!(!range("20240301T000000Z", "20240302T000000Z").overlaps(&rec.children[0]));
        assert!(!range("20231201T000000Z", "20231202T000000Z").overlaps(&rec.children[0]));
    }
}
