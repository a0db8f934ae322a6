//! Calendar items: the ~700 B events the office writes, and how a read-back copy is
//! compared with what was written.
//!
//! Servers may store an item as sent (the built-in server) or re-serialise it
//! (Radicale refolds lines and may reorder properties), so "read back equal" compares
//! the event's identifying and edited properties through the built-in server's own
//! iCalendar parser (`volley_dav::ical`), not the bytes.

use volley_dav::ical;

/// The properties compared between what was written and what is read back.
const COMPARED: [&str; 6] = [
    "UID",
    "SEQUENCE",
    "SUMMARY",
    "DESCRIPTION",
    "DTSTART",
    "LOCATION",
];

/// One item's text: `uid`, revision `seq`, starting `day_offset` days from `today`
/// (`YYYYMMDD`) at `hour`. About 700 bytes, the size seed 000 measured for real items.
pub fn event(uid: &str, seq: u32, today: &str, day_offset: i64, hour: u32) -> String {
    let date = shift_date(today, day_offset);
    format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//volley//office//EN\r\nBEGIN:VEVENT\r\n\
         UID:{uid}\r\nDTSTAMP:20240101T000000Z\r\nSEQUENCE:{seq}\r\n\
         DTSTART:{date}T{hour:02}0000Z\r\nDURATION:PT1H\r\n\
         SUMMARY:Meeting {uid} revision {seq}\r\nLOCATION:Room {room}\r\n\
         DESCRIPTION:Agenda for revision {seq}: review the open points\\, agree on next \
         steps\\, assign owners and dates. Bring the figures from last week.\r\n\
         ORGANIZER;CN=Office:mailto:office@example.org\r\n\
         ATTENDEE;CN=Team;ROLE=REQ-PARTICIPANT;PARTSTAT=ACCEPTED:mailto:team@example.org\r\n\
         CATEGORIES:Work,Meetings\r\nCLASS:PUBLIC\r\nTRANSP:OPAQUE\r\nSTATUS:CONFIRMED\r\n\
         CREATED:20240101T000000Z\r\nLAST-MODIFIED:20240101T000000Z\r\n\
         BEGIN:VALARM\r\nACTION:DISPLAY\r\nTRIGGER:-PT15M\r\nDESCRIPTION:Reminder\r\n\
         END:VALARM\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
        room = 100 + seq % 50,
    )
}

/// The compared properties of an item's first VEVENT, or `None` if it does not parse.
pub fn fingerprint(text: &str) -> Option<Vec<(String, String)>> {
    let cal = ical::parse(text.as_bytes()).ok()?;
    let ev = cal.children.iter().find(|c| c.name == "VEVENT")?;
    Some(
        COMPARED
            .iter()
            .map(|n| {
                let v = ev.prop(n).map(|p| p.value.clone()).unwrap_or_default();
                ((*n).to_owned(), v)
            })
            .collect(),
    )
}

/// Whether `read` is the item `written` (same compared properties).
pub fn same(written: &str, read: &str) -> bool {
    if written == read {
        return true;
    }
    match (fingerprint(written), fingerprint(read)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// `YYYYMMDD` moved by `days` (proleptic Gregorian, through the `time` crate).
pub(crate) fn shift_date(today: &str, days: i64) -> String {
    let parsed = (|| {
        let y: i32 = today.get(0..4)?.parse().ok()?;
        let m: u8 = today.get(4..6)?.parse().ok()?;
        let d: u8 = today.get(6..8)?.parse().ok()?;
        let month = time::Month::try_from(m).ok()?;
        time::Date::from_calendar_date(y, month, d).ok()
    })();
    let date = parsed.unwrap_or(time::Date::MIN) + time::Duration::days(days);
    format!(
        "{:04}{:02}{:02}",
        date.year(),
        u8::from(date.month()),
        date.day()
    )
}

/// Today (UTC) as `YYYYMMDD`: items are dated around it, as Evolution's window is.
pub fn today() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{:04}{:02}{:02}",
        now.year(),
        u8::from(now.month()),
        now.day()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_is_about_700_bytes_and_parses() {
        let e = event("u1-7", 3, "20261126", -20, 9);
        assert!((600..800).contains(&e.len()), "{}", e.len());
        let f = fingerprint(&e).unwrap();
        assert!(f.contains(&("DTSTART".into(), "20261106T090000Z".into())));
        assert!(f.contains(&("SEQUENCE".into(), "3".into())));
    }

    #[test]
    fn refolded_copies_are_the_same_and_revisions_differ() {
        let a = event("u1-7", 3, "20261126", 0, 9);
        // A server that folds long lines at 75 octets (RFC 5545 3.1).
        let folded = a.replace("review the open", "review the\r\n  open");
        assert!(same(&a, &folded));
        assert!(!same(&a, &event("u1-7", 4, "20261126", 0, 9)));
        assert!(!same(&a, "not a calendar"));
    }

    #[test]
    fn dates_cross_months_and_years() {
        assert_eq!(shift_date("20261231", 1), "20270101");
        assert_eq!(shift_date("20260301", -1), "20260228");
    }
}
