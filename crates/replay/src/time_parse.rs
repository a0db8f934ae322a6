//! Timestamps of log lines: Common Log Format (`10/Oct/2000:13:55:36 -0700`, with an
//! optional fraction of a second as volley's own server writes), ISO 8601 (nginx
//! `$time_iso8601`) and seconds since the epoch with a fraction (`$msec`).
//!
//! Written by hand because it is the hot path (every line has one): fixed positions,
//! no allocation, and the calendar day (the `time` crate's job) looked up once per
//! distinct date, which a log repeats for hours.

use time::{Date, Month};

/// Julian day number of 1970-01-01.
const UNIX_JULIAN_DAY: i64 = 2_440_588;

/// An instant read from a log: microseconds since the epoch, and whether the log gave
/// whole seconds only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Microseconds since the Unix epoch.
    pub us: i64,
    /// The text had no fraction of a second.
    pub whole_second: bool,
}

/// The last calendar date seen and its day number since the epoch.
#[derive(Debug, Default, Clone)]
pub struct DayCache {
    key: [u8; 11],
    days: i64,
}

impl DayCache {
    fn days(&mut self, key: &[u8], y: i32, m: u8, d: u8) -> Option<i64> {
        if key.len() == 11 && key == self.key && self.days != 0 {
            return Some(self.days);
        }
        let date = Date::from_calendar_date(y, Month::try_from(m).ok()?, d).ok()?;
        let days = i64::from(date.to_julian_day()) - UNIX_JULIAN_DAY;
        if key.len() == 11 {
            self.key.copy_from_slice(key);
            self.days = days;
        }
        Some(days)
    }
}

fn digits(s: &[u8]) -> Option<u32> {
    if s.is_empty() || s.len() > 9 {
        return None;
    }
    s.iter().try_fold(0u32, |n, &b| {
        b.is_ascii_digit().then(|| n * 10 + u32::from(b - b'0'))
    })
}

fn month(s: &[u8]) -> Option<u8> {
    const NAMES: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    NAMES.iter().position(|n| n[..] == *s).map(|i| i as u8 + 1)
}

/// A fraction of a second (`.123456`) at the start of `s`: (microseconds, length).
fn fraction(s: &[u8]) -> Option<(i64, usize)> {
    if s.first() != Some(&b'.') {
        return Some((0, 0));
    }
    let n = s[1..].iter().take_while(|b| b.is_ascii_digit()).count();
    if n == 0 {
        return None;
    }
    let mut us = 0i64;
    for i in 0..6 {
        us = us * 10
            + s.get(1 + i)
                .filter(|_| i < n)
                .map_or(0, |b| i64::from(b - b'0'));
    }
    Some((us, 1 + n))
}

fn hms(s: &[u8]) -> Option<i64> {
    if s.len() != 8 || s[2] != b':' || s[5] != b':' {
        return None;
    }
    let (h, m, sec) = (digits(&s[..2])?, digits(&s[3..5])?, digits(&s[6..])?);
    (h < 24 && m < 60 && sec <= 60).then(|| i64::from(h * 3600 + m * 60 + sec))
}

/// `+hhmm`, `-hh:mm` or `Z` as seconds east of UTC.
fn zone(s: &[u8]) -> Option<i64> {
    if s == b"Z" {
        return Some(0);
    }
    let sign = match s.first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let rest = &s[1..];
    let (h, m) = match rest.len() {
        4 => (digits(&rest[..2])?, digits(&rest[2..])?),
        5 if rest[2] == b':' => (digits(&rest[..2])?, digits(&rest[3..])?),
        _ => return None,
    };
    Some(sign * i64::from(h * 3600 + m * 60))
}

/// `10/Oct/2000:13:55:36[.ffffff] -0700`.
pub fn clf(s: &[u8], cache: &mut DayCache) -> Option<Stamp> {
    if s.len() < 26 || s[2] != b'/' || s[6] != b'/' || s[11] != b':' {
        return None;
    }
    let d = digits(&s[..2])? as u8;
    let m = month(&s[3..6])?;
    let y = digits(&s[7..11])? as i32;
    let days = cache.days(&s[..11], y, m, d)?;
    let secs = hms(&s[12..20])?;
    let (frac, n) = fraction(&s[20..])?;
    let rest = &s[20 + n..];
    if rest.first() != Some(&b' ') {
        return None;
    }
    let off = zone(&rest[1..])?;
    Some(Stamp {
        us: (days * 86_400 + secs - off) * 1_000_000 + frac,
        whole_second: n == 0,
    })
}

/// `2000-10-10T13:55:36[.fff](+00:00|Z)`.
pub fn iso8601(s: &[u8], cache: &mut DayCache) -> Option<Stamp> {
    if s.len() < 20 || s[4] != b'-' || s[7] != b'-' || !matches!(s[10], b'T' | b' ') {
        return None;
    }
    let y = digits(&s[..4])? as i32;
    let m = digits(&s[5..7])? as u8;
    let d = digits(&s[8..10])? as u8;
    let days = cache.days(&s[..10], y, m, d)?;
    let secs = hms(&s[11..19])?;
    let (frac, n) = fraction(&s[19..])?;
    let off = zone(&s[19 + n..])?;
    Some(Stamp {
        us: (days * 86_400 + secs - off) * 1_000_000 + frac,
        whole_second: n == 0,
    })
}

/// Seconds since the epoch with an optional fraction: `1700000000.123`.
pub fn epoch_seconds(s: &[u8]) -> Option<Stamp> {
    let int = s.iter().take_while(|b| b.is_ascii_digit()).count();
    if int == 0 || int > 12 {
        return None;
    }
    let whole: i64 = std::str::from_utf8(&s[..int]).ok()?.parse().ok()?;
    let (frac, n) = fraction(&s[int..])?;
    (int + n == s.len()).then_some(Stamp {
        us: whole * 1_000_000 + frac,
        whole_second: n == 0,
    })
}

/// An integer count of `unit_us` since the epoch (Apache `%{msec}t`, `%{usec}t`).
pub fn epoch_units(s: &[u8], unit_us: i64) -> Option<Stamp> {
    let n: i64 = std::str::from_utf8(s).ok()?.parse().ok()?;
    (n >= 0).then_some(Stamp {
        us: n.checked_mul(unit_us)?,
        whole_second: unit_us >= 1_000_000,
    })
}

/// A duration in seconds with an optional fraction (`$request_time`: `0.005`), in
/// microseconds.
pub fn seconds_us(s: &[u8]) -> Option<u64> {
    epoch_seconds(s).and_then(|t| u64::try_from(t.us).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clf_with_zone_and_fraction() {
        let mut c = DayCache::default();
        // 2000-10-10T20:55:36Z = 971211336.
        let t = clf(b"10/Oct/2000:13:55:36 -0700", &mut c).unwrap();
        assert_eq!(
            t,
            Stamp {
                us: 971_211_336_000_000,
                whole_second: true
            }
        );
        let t = clf(b"10/Oct/2000:20:55:36.000250 +0000", &mut c).unwrap();
        assert_eq!(
            t,
            Stamp {
                us: 971_211_336_000_250,
                whole_second: false
            }
        );
        // The cached day is used for the same date, recomputed for another.
        let t = clf(b"11/Oct/2000:00:00:00 +0000", &mut c).unwrap();
        assert_eq!(t.us, 971_222_400_000_000);
        assert_eq!(clf(b"10/Foo/2000:13:55:36 -0700", &mut c), None);
        assert_eq!(clf(b"31/Feb/2000:13:55:36 -0700", &mut c), None);
        assert_eq!(clf(b"10/Oct/2000:25:55:36 -0700", &mut c), None);
        assert_eq!(clf(b"10/Oct/2000:13:55:36 0700", &mut c), None);
        assert_eq!(clf(b"10/Oct/2000:13:55:36.", &mut c), None);
    }

    #[test]
    fn iso8601_and_epoch_forms() {
        let mut c = DayCache::default();
        let t = iso8601(b"2000-10-10T13:55:36-07:00", &mut c).unwrap();
        assert_eq!(t.us, 971_211_336_000_000);
        let t = iso8601(b"2000-10-10T20:55:36.5Z", &mut c).unwrap();
        assert_eq!(
            t,
            Stamp {
                us: 971_211_336_500_000,
                whole_second: false
            }
        );
        assert_eq!(iso8601(b"2000-13-10T20:55:36Z", &mut c), None);
        let t = epoch_seconds(b"971211336.123").unwrap();
        assert_eq!(
            t,
            Stamp {
                us: 971_211_336_123_000,
                whole_second: false
            }
        );
        assert_eq!(
            epoch_seconds(b"971211336").map(|t| t.whole_second),
            Some(true)
        );
        assert_eq!(epoch_seconds(b"97x"), None);
        assert_eq!(
            epoch_units(b"971211336123", 1_000).unwrap().us,
            971_211_336_123_000
        );
        assert_eq!(seconds_us(b"0.005"), Some(5_000));
        assert_eq!(seconds_us(b"-"), None);
    }
}
