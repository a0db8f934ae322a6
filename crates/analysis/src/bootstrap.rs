//! Bootstrap confidence intervals for the median of a handful of runs.
//!
//! Each run is one unit of replication (requests inside a run are correlated), so the
//! interval is computed over per-run values, never over requests. With K runs we resample
//! K values with replacement B times, take each resample's median, and report the 2.5th
//! and 97.5th percentiles of those medians (the percentile bootstrap). The generator is
//! seeded so a report rebuilt later shows the same interval.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Bootstrap resamples for every interval volley shows (bench's `--repeat` table, the
/// report's repeats and answer, `volley compare`, the study's end table): one count, so
/// the same runs give the same interval wherever they are read. 10,000 keeps the 2.5th
/// and 97.5th percentiles of a median stable to well under 1% run to run, and costs
/// milliseconds for the handful of runs a point has.
pub const RESAMPLES: usize = 10_000;

/// A point estimate with its 95% confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// The median of the observed values.
    pub median: f64,
    /// Lower end of the 95% interval.
    pub lo: f64,
    /// Upper end of the 95% interval.
    pub hi: f64,
}

/// Median of a slice (NaN-free input); the mean of the two middle values for even lengths.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Percentile-bootstrap 95% interval of the median, with `resamples` draws from a
/// generator seeded by `seed`. One value gives a zero-width interval; none gives NaN.
pub fn median_ci(values: &[f64], resamples: usize, seed: u64) -> Estimate {
    let m = median(values);
    if values.len() < 2 {
        return Estimate {
            median: m,
            lo: m,
            hi: m,
        };
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut medians = Vec::with_capacity(resamples);
    let mut draw = vec![0.0; values.len()];
    for _ in 0..resamples.max(1) {
        for d in draw.iter_mut() {
            *d = values[rng.random_range(0..values.len())];
        }
        medians.push(median(&draw));
    }
    percentile_interval(m, medians)
}

/// The point estimate with the 2.5th and 97.5th percentiles of the replicates' statistics
/// (the percentile bootstrap), shared by the median and the ratio intervals.
pub(crate) fn percentile_interval(point: f64, mut replicates: Vec<f64>) -> Estimate {
    replicates.sort_by(f64::total_cmp);
    let at = |q: f64| replicates[((replicates.len() - 1) as f64 * q).round() as usize];
    Estimate {
        median: point,
        lo: at(0.025),
        hi: at(0.975),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn ci_brackets_the_median_and_is_reproducible() {
        let v = [10.0, 11.0, 9.5, 10.5, 12.0, 9.0, 10.2];
        let a = median_ci(&v, 2000, 7);
        let b = median_ci(&v, 2000, 7);
        assert_eq!(a, b);
        assert!(a.lo <= a.median && a.median <= a.hi);
        assert!(a.lo >= 9.0 && a.hi <= 12.0);
        assert!(a.hi > a.lo);
    }

    #[test]
    fn ci_of_constant_values_is_a_point() {
        let e = median_ci(&[5.0; 6], 500, 1);
        assert_eq!((e.lo, e.median, e.hi), (5.0, 5.0, 5.0));
    }
}
