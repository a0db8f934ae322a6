//! The one duration parser of the command line and the study files: `30s`, `500ms`,
//! `250us`, `2m`, `1h` or a bare number of seconds, so a duration means the same in
//! `volley bench`, `volley serve` and a study.

use std::time::Duration;

use thiserror::Error;

/// A duration that could not be read; the message names the text and gives examples.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid duration '{0}' (examples: 30s, 500ms, 2m)")]
pub struct DurationError(pub String);

/// Parses `30s`, `500ms`, `250us`, `2m`, `1h` or a bare number of seconds. Zero is a
/// duration here; callers that need a positive one say so in their own words.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || DurationError(s.to_string());
    let v: f64 = num.parse().map_err(|_| bad())?;
    let secs = match unit.trim() {
        "" | "s" => v,
        "ms" => v / 1e3,
        "us" => v / 1e6,
        "m" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(bad()),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_bare_seconds() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration(" 1.5 "), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        for bad in ["-1s", "ten", "5d", "5 parsecs", "", "s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_duration("ten").unwrap_err().to_string(),
            "invalid duration 'ten' (examples: 30s, 500ms, 2m)"
        );
    }
}
