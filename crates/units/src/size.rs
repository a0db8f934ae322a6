//! The one size syntax (`256M`, `1G`, `512K`, bare bytes), shared by `volley bench
//! --memory-max` and a study target's `memory_max`, so both accept the same text.

use thiserror::Error;

/// A size that could not be read. The message is the tail of a sentence the caller
/// starts with its key's name (`--memory-max must be a size like ...`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SizeError {
    /// Not a whole number with an optional K/M/G unit, or too large.
    #[error("must be a size like 256M or 1G, got '{0}'")]
    Syntax(String),
    /// Below 1 MiB.
    #[error("{0} is below 1M: no server fits")]
    TooSmall(String),
}

/// Parses `256M`, `1G`, `512K` (binary units, as cgroups count) or a bare byte count,
/// at least 1 MiB (below it no server even starts; the kernel would OOM-kill it at
/// once).
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || SizeError::Syntax(s.to_string());
    let n: u64 = num.parse().map_err(|_| bad())?;
    let mult: u64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        _ => return Err(bad()),
    };
    match n.checked_mul(mult) {
        Some(b) if b >= 1 << 20 => Ok(b),
        Some(_) => Err(SizeError::TooSmall(s.to_string())),
        None => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("8MB"), Ok(8 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("2048k"), Ok(2 << 20));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        for bad in ["", "M", "12X", "-1M", "1.5G", "512K", "99999999999999G"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
