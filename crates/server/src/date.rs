//! Time formats the server writes and reads: HTTP-date (RFC 9110 IMF-fixdate) for Date,
//! Last-Modified and If-Modified-Since, and the Apache access-log timestamp.
//!
//! Hand-written (days-from-civil arithmetic) because the hot path formats Date once per
//! second per thread and must not allocate.

use std::time::{SystemTime, UNIX_EPOCH};

const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Days since 1970-01-01 of a civil date (inverse of [`civil`]).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn push2(out: &mut [u8], at: usize, v: u32) {
    out[at] = b'0' + (v / 10 % 10) as u8;
    out[at + 1] = b'0' + (v % 10) as u8;
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` for `secs` since the epoch (29 bytes).
pub fn http_date(secs: u64) -> [u8; 29] {
    let days = (secs / 86_400) as i64;
    let rem = (secs % 86_400) as u32;
    let (y, m, d) = civil(days);
    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    out[..3].copy_from_slice(DAYS[days.rem_euclid(7) as usize]);
    push2(&mut out, 5, d);
    out[8..11].copy_from_slice(MONTHS[(m - 1) as usize]);
    let y = y.clamp(0, 9999) as u32;
    push2(&mut out, 12, y / 100);
    push2(&mut out, 14, y % 100);
    push2(&mut out, 17, rem / 3600);
    push2(&mut out, 20, rem / 60 % 60);
    push2(&mut out, 23, rem % 60);
    out
}

/// Parses an IMF-fixdate; other (obsolete) formats give `None`, which callers treat as
/// "condition absent", as RFC 9110 allows for an invalid date.
pub fn parse_http_date(s: &[u8]) -> Option<u64> {
    if s.len() != 29 || &s[3..5] != b", " || &s[25..] != b" GMT" {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let b = s.get(r)?;
        if !b.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(b.iter().fold(0u32, |a, &d| a * 10 + u32::from(d - b'0')))
    };
    let d = num(5..7)?;
    let m = MONTHS.iter().position(|m| m[..] == s[8..11])? as u32 + 1;
    let y = num(12..16)?;
    let (hh, mm, ss) = (num(17..19)?, num(20..22)?, num(23..25)?);
    if !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 || y < 1970 {
        return None;
    }
    let days = days_from_civil(i64::from(y), m, d);
    Some(days as u64 * 86_400 + u64::from(hh * 3600 + mm * 60 + ss))
}

/// Seconds and microseconds since the epoch, now.
pub fn now_unix() -> (u64, u32) {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs(), d.subsec_micros())
}

/// Apache log timestamp without the brackets, to the second: `10/Oct/2000:13:55:36`
/// (20 bytes); the caller appends `.uuuuuu +0000` (times are UTC).
pub fn clf_seconds(secs: u64) -> [u8; 20] {
    let days = (secs / 86_400) as i64;
    let rem = (secs % 86_400) as u32;
    let (y, m, d) = civil(days);
    let mut out = *b"01/Jan/1970:00:00:00";
    push2(&mut out, 0, d);
    out[3..6].copy_from_slice(MONTHS[(m - 1) as usize]);
    let y = y.clamp(0, 9999) as u32;
    push2(&mut out, 7, y / 100);
    push2(&mut out, 9, y % 100);
    push2(&mut out, 12, rem / 3600);
    push2(&mut out, 15, rem / 60 % 60);
    push2(&mut out, 18, rem % 60);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_dates() {
        assert_eq!(&http_date(784_111_777), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(&http_date(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(&http_date(951_782_400), b"Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(&clf_seconds(971_186_136), b"10/Oct/2000:13:55:36");
    }

    #[test]
    fn parse_round_trips() {
        for secs in [0u64, 784_111_777, 951_782_400, 1_700_000_000, 4_102_444_799] {
            assert_eq!(parse_http_date(&http_date(secs)), Some(secs));
        }
        assert_eq!(parse_http_date(b"Sunday, 06-Nov-94 08:49:37 GMT"), None);
        assert_eq!(parse_http_date(b"Sun, 06 Xyz 1994 08:49:37 GMT"), None);
        assert_eq!(parse_http_date(b""), None);
    }
}
