//! Time formats the server writes and reads: HTTP-date (RFC 9110 §5.6.7) for Date,
//! Last-Modified and the conditional request fields, and the Apache access-log
//! timestamp.
//!
//! HTTP-dates go through `httpdate` (IMF-fixdate out; IMF-fixdate, RFC 850 and asctime
//! in). The event loop formats Date once per second per thread into a fixed array
//! (`worker`'s cached header), so the hot path still neither formats nor allocates.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// 9999-12-31T23:59:59Z, the last instant an HTTP-date can name.
pub const MAX_SECS: u64 = 253_402_300_799;

fn push2(out: &mut [u8], at: usize, v: u32) {
    out[at] = b'0' + (v / 10 % 10) as u8;
    out[at + 1] = b'0' + (v % 10) as u8;
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` for `secs` since the epoch (29 bytes).
pub fn http_date(secs: u64) -> [u8; 29] {
    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    // `HttpDate` holds years 1970..=9999 (and panics outside); IMF-fixdate is always 29
    // bytes there. A file stamped later still gets a valid date.
    let secs = secs.min(MAX_SECS);
    let date = httpdate::HttpDate::from(UNIX_EPOCH + Duration::from_secs(secs));
    let _ = write!(&mut out[..], "{date}");
    out
}

/// Parses an HTTP-date in any of the three forms a recipient must accept (IMF-fixdate,
/// RFC 850, asctime); anything else gives `None`, which callers treat as "condition
/// absent", as RFC 9110 §13.1.3 says for an invalid date.
pub fn parse_http_date(s: &[u8]) -> Option<u64> {
    let t = httpdate::parse_http_date(std::str::from_utf8(s).ok()?).ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_secs())
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
    let secs = secs.min(MAX_SECS);
    let t = time::OffsetDateTime::from_unix_timestamp(secs as i64)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let (y, m, d) = (t.year(), u8::from(t.month()), t.day());
    let rem = (secs % 86_400) as u32;
    let mut out = *b"01/Jan/1970:00:00:00";
    push2(&mut out, 0, u32::from(d));
    out[3..6].copy_from_slice(MONTHS[usize::from(m - 1)]);
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
        // The obsolete forms of RFC 9110 §5.6.7 are accepted too.
        assert_eq!(
            parse_http_date(b"Sunday, 06-Nov-94 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(
            parse_http_date(b"Sun Nov  6 08:49:37 1994"),
            Some(784_111_777)
        );
        assert_eq!(parse_http_date(b"Sun, 06 Xyz 1994 08:49:37 GMT"), None);
        assert_eq!(parse_http_date(b""), None);
    }
}
