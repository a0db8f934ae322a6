//! An example access log from a seeded model of a site, for replay studies and for
//! the reader's own tests and benchmarks: the same seed writes the same bytes.
//!
//! The model: arrivals are a Poisson process whose rate follows a day's shape
//! compressed into the log's span (a trough at a fifth of the mean and a peak at 1.8
//! times it), with bursts of five times the rate for a few seconds; three heavy
//! clients send about 30% of the requests and a crowd of 200 the rest; pages are
//! chosen by a Zipf-like popularity over 50 paths, and about 10% of requests ask for
//! a path that does not exist (404). Lines are in volley's own Combined layout with
//! microsecond stamps and a `%D`-style request time is not written (Combined has
//! none), so the log reads with the default format.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::io::Write;
use std::time::Duration;

/// What to generate.
#[derive(Debug, Clone)]
pub struct SiteModel {
    /// Seed: the same seed and settings write the same log.
    pub seed: u64,
    /// The log's span; a whole day's shape is compressed into it.
    pub span: Duration,
    /// Mean requests per second over the span.
    pub mean_rate: f64,
    /// First instant, seconds since the epoch.
    pub start_unix_s: u64,
}

impl Default for SiteModel {
    fn default() -> SiteModel {
        SiteModel {
            seed: 1,
            span: Duration::from_secs(600),
            mean_rate: 50.0,
            // 2026-01-01T00:00:00Z.
            start_unix_s: 1_767_225_600,
        }
    }
}

const PAGES: usize = volley_fixtures::SITE_PAGES;
const CROWD: u32 = 200;
const HEAVY: [&str; 3] = ["198.51.100.7", "198.51.100.8", "203.0.113.50"];
const BURSTS: u32 = 5;
const BURST_S: f64 = 4.0;
const BURST_FACTOR: f64 = 5.0;

/// The rate at `t` seconds into a span of `span_s`: the day's shape and the bursts.
fn rate_at(m: &SiteModel, t: f64, span_s: f64) -> f64 {
    let day = 1.0 - 0.8 * (2.0 * std::f64::consts::PI * t / span_s).cos();
    let burst = (0..BURSTS).any(|k| {
        let at = span_s * (f64::from(k) + 0.5) / f64::from(BURSTS);
        (at..at + BURST_S).contains(&t)
    });
    m.mean_rate * day * if burst { BURST_FACTOR } else { 1.0 }
}

/// Writes the log; returns the lines written.
pub fn write_site_log(m: &SiteModel, out: &mut impl Write) -> std::io::Result<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(m.seed);
    let span_s = m.span.as_secs_f64();
    let peak = m.mean_rate * 1.8 * BURST_FACTOR;
    let weights: Vec<f64> = (1..=PAGES).map(|i| 1.0 / i as f64).collect();
    let total: f64 = weights.iter().sum();
    let mut t = 0.0;
    let mut lines = 0;
    loop {
        // Thinning (Lewis and Shedler): candidates at the peak rate, each kept with
        // probability rate(t) / peak.
        t += -(1.0 - rng.random::<f64>()).ln() / peak;
        if t >= span_s {
            return Ok(lines);
        }
        if rng.random::<f64>() * peak > rate_at(m, t, span_s) {
            continue;
        }
        let client = if rng.random::<f64>() < 0.3 {
            HEAVY[rng.random_range(0..HEAVY.len())].to_string()
        } else {
            let c = rng.random_range(0..CROWD);
            format!("10.{}.{}.{}", 20 + c / 250, c % 250, 1 + c % 7)
        };
        let (path, status, bytes) = if rng.random::<f64>() < 0.1 {
            (format!("/missing/{}", rng.random_range(0..1_000)), 404, 153)
        } else {
            let mut x = rng.random::<f64>() * total;
            let page = weights.iter().position(|w| {
                x -= w;
                x < 0.0
            });
            let page = page.unwrap_or(PAGES - 1);
            (format!("/page/{page}.html"), 200, page_bytes(page))
        };
        let at_us = (m.start_unix_s as f64 * 1e6 + t * 1e6) as u64;
        writeln!(
            out,
            "{client} - - [{}] \"GET {path} HTTP/1.1\" {status} {bytes} \"-\" \"volley-example/1\"",
            clf(at_us)
        )?;
        lines += 1;
    }
}

/// The logged size of page `page`: the `site` fixture's (`volley_fixtures::Fixture::Site`),
/// so a replay against that docroot gets the logged sizes.
fn page_bytes(page: usize) -> u64 {
    volley_fixtures::site_page_bytes(page)
}

/// Writes the pages the example log asks for under `dir`: the `site` fixture set
/// (`page/N.html` each of its logged size, and an index), so that a server serving `dir`
/// answers the log as logged (the `/missing/` paths stay missing). Returns the files
/// written.
pub fn write_site_pages(dir: &std::path::Path) -> Result<u64, volley_fixtures::FixtureError> {
    let m = volley_fixtures::generate(&volley_fixtures::Fixture::Site, dir, 1)?;
    Ok(m.files.len() as u64)
}

/// `01/Jan/2026:00:00:00.000000 +0000` for microseconds since the epoch.
fn clf(us: u64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = (us / 1_000_000) as i64;
    let date =
        time::OffsetDateTime::from_unix_timestamp(secs).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:02}/{}/{}:{:02}:{:02}:{:02}.{:06} +0000",
        date.day(),
        MONTHS[usize::from(u8::from(date.month())) - 1],
        date.year(),
        date.hour(),
        date.minute(),
        date.second(),
        us % 1_000_000
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LogReader, ReaderOptions};
    use std::collections::HashMap;

    #[test]
    fn the_model_reads_back_with_its_shape_and_is_reproducible() {
        let m = SiteModel {
            span: Duration::from_secs(200),
            mean_rate: 40.0,
            ..SiteModel::default()
        };
        let mut a = Vec::new();
        let n = write_site_log(&m, &mut a).unwrap();
        let mut b = Vec::new();
        write_site_log(&m, &mut b).unwrap();
        assert_eq!(a, b, "same seed, same bytes");
        let mut r =
            LogReader::from_read("x", std::io::Cursor::new(a), ReaderOptions::default()).unwrap();
        let recs: Vec<_> = r.by_ref().collect::<Result<_, _>>().unwrap();
        assert_eq!((recs.len() as u64, r.skips().total()), (n, 0));
        // Poisson counts: mean 8,000 plus the bursts' extra; well inside +-10%.
        let expected = 40.0 * 200.0 + 40.0 * 4.0 * 4.0 * 5.0;
        assert!(
            (n as f64 - expected).abs() < 0.1 * expected,
            "{n} vs {expected}"
        );
        let missing = recs.iter().filter(|r| r.status == Some(404)).count() as f64;
        assert!((missing / n as f64 - 0.1).abs() < 0.02, "{missing}");
        let mut by_client: HashMap<&str, u64> = HashMap::new();
        for r in &recs {
            *by_client.entry(r.client.as_str()).or_default() += 1;
        }
        let heavy: u64 = HEAVY.iter().map(|h| by_client[h]).sum();
        assert!((heavy as f64 / n as f64 - 0.3).abs() < 0.03, "{heavy}");
        // The day's trough (start and end) is quieter than its peak (middle).
        let at = |from: f64| {
            let lo = recs[0].at_us + (from * 1e6) as i64;
            recs.iter()
                .filter(|r| (lo..lo + 10_000_000).contains(&r.at_us))
                .count()
        };
        assert!(at(0.0) * 3 < at(80.0), "{} vs {}", at(0.0), at(80.0));
        assert_eq!(
            clf(1_767_225_600_000_250),
            "01/Jan/2026:00:00:00.000250 +0000"
        );
    }
}
