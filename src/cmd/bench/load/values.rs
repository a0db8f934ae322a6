//! The value syntaxes of `volley bench`'s flags, as clap value parsers: each flag's text
//! becomes its typed value while clap parses the command line, so the rest of bench never
//! sees a flag string. A bad value is clap's `ValueValidation` error, which `main` prints
//! as one line and exit 2 (src/exit.rs). Durations and sizes keep volley's one syntax
//! (`parse_duration`, `parse_size`). Pure functions, table-tested.

use std::time::Duration;

use volley_engine::{Coding, HttpUrl};
use volley_units::parse_duration;

/// A whole number of at least 1 (-n, -c, -t, --repeat, --block, --workers ...).
pub fn count(s: &str) -> Result<u64, String> {
    at_least(s, 1)
}

/// A whole number of at least 0 (--seed).
pub fn whole(s: &str) -> Result<u64, String> {
    at_least(s, 0)
}

fn at_least(s: &str, min: u64) -> Result<u64, String> {
    match s.trim().parse::<i128>() {
        Ok(v) if v >= min as i128 && v <= u64::MAX as i128 => Ok(v as u64),
        Ok(_) => Err(format!("must be at least {min}, got {s}")),
        Err(_) => Err(format!("must be a whole number, got '{s}'")),
    }
}

/// A duration in volley's syntax (`10s`, `500ms`, `2m`), zero allowed (--warmup,
/// --cooldown).
pub fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// A duration longer than zero (-d, --timeout).
pub fn positive_duration(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d.is_zero() => Err(format!("must be longer than zero, got {s}")),
        d => Ok(d),
    }
}

/// A request rate: a positive, finite number per second.
pub fn rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!(
            "must be a positive number of requests per second, got '{s}'"
        )),
    }
}

/// `--compressed`: br, gzip or zstd (case-insensitive).
pub fn coding(s: &str) -> Result<Coding, String> {
    Coding::parse(s).ok_or_else(|| format!("must be br, gzip or zstd, got '{s}'"))
}

/// `--expect-sha256`: 64 hex digits.
pub fn sha256(s: &str) -> Result<[u8; 32], String> {
    volley_engine::decode::parse_sha256(s)
        .ok_or_else(|| format!("must be 64 hex digits, got '{s}'"))
}

/// An extra request header, `Name: value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Field name, trimmed.
    pub name: String,
    /// Field value, trimmed.
    pub value: String,
}

/// `-H 'Name: value'`.
pub fn header(s: &str) -> Result<Header, String> {
    match s.split_once(':') {
        Some((n, v)) if !n.trim().is_empty() => Ok(Header {
            name: n.trim().to_string(),
            value: v.trim().to_string(),
        }),
        _ => Err(format!("expects 'Name: value', got '{s}'")),
    }
}

/// Bench's positional argument: a whole URL, or (with `--target`, where the target
/// picks host and port) a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Where {
    /// `http[s]://host[:port]/path`.
    Url(HttpUrl),
    /// `/path?query`.
    Path(String),
}

impl Where {
    /// The URL, when a whole one was given.
    pub fn url(&self) -> Option<&HttpUrl> {
        match self {
            Where::Url(u) => Some(u),
            Where::Path(_) => None,
        }
    }

    /// The path and query loaded.
    pub fn path(&self) -> String {
        match self {
            Where::Url(u) => u.path_and_query(),
            Where::Path(p) => p.clone(),
        }
    }
}

/// A URL, or a path starting with '/'.
pub fn where_(s: &str) -> Result<Where, String> {
    if s.starts_with('/') {
        if s.contains(|c: char| c.is_whitespace() || c.is_control()) {
            return Err(format!("invalid path '{s}': whitespace in path"));
        }
        let path = s.split('#').next().unwrap_or("/");
        return Ok(Where::Path(path.to_string()));
    }
    HttpUrl::parse(s).map(Where::Url).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_numbers() {
        assert_eq!(count("100"), Ok(100));
        assert!(count("0").unwrap_err().contains("at least 1"));
        assert!(count("-5").unwrap_err().contains("at least 1"));
        assert!(count("x").unwrap_err().contains("whole number"));
        assert_eq!(whole("0"), Ok(0));
        assert_eq!(rate("12.5"), Ok(12.5));
        for bad in ["0", "-10", "nan", "inf", "x"] {
            assert!(rate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_and_checks() {
        assert_eq!(positive_duration("2s"), Ok(Duration::from_secs(2)));
        assert!(positive_duration("0s")
            .unwrap_err()
            .contains("longer than zero"));
        assert_eq!(duration("0s"), Ok(Duration::ZERO));
        assert!(duration("ten").is_err());
        assert_eq!(coding("BR"), Ok(Coding::Br));
        assert!(coding("lzma").unwrap_err().contains("br, gzip or zstd"));
        assert!(sha256("beef").is_err());
        assert!(sha256(&"ab".repeat(32)).is_ok());
    }

    #[test]
    fn headers_and_places() {
        assert_eq!(
            header(" X-A :  b c ").unwrap(),
            Header {
                name: "X-A".into(),
                value: "b c".into()
            }
        );
        assert!(header("no colon here").is_err());
        assert!(header(": v").is_err());
        assert_eq!(where_("/a?b#c"), Ok(Where::Path("/a?b".into())));
        assert!(where_("/a b").is_err());
        let w = where_("http://[::1]:8/x?y").unwrap();
        assert_eq!(w.path(), "/x?y");
        assert_eq!(w.url().unwrap().port(), 8);
        assert!(where_("not a url").is_err());
    }
}
