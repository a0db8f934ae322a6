//! Bootstrap confidence interval of an A/B ratio of medians, for `volley compare`.
//!
//! Place in the flow: per-run figures (throughput, p99) of two configurations come out of
//! the store; the comparison report shows median(A) / median(B) with its 95% interval.
//!
//! Each run is one unit of replication, so the inputs are per-run values. The two sides
//! are resampled independently (unpaired): in each of `resamples` replicates we draw
//! |A| values from A and |B| values from B with replacement and take the ratio of their
//! medians; the interval is the 2.5th and 97.5th percentiles of those ratios (percentile
//! bootstrap). Unpaired resampling is right when A and B runs were interleaved but not
//! matched one-to-one; it ignores any pairing and so is, if anything, conservative. An
//! A/A comparison through the same function shows the noise floor: its interval should
//! contain 1. [`paired_ratio_of_medians_ci`] resamples whole interleaved trials instead.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use thiserror::Error;

use crate::bootstrap::{median, percentile_interval, Estimate};

/// Why a ratio could not be computed.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum RatioError {
    /// One side has no values.
    #[error("ratio of medians needs at least one value on each side")]
    Empty,
    /// A value is NaN, infinite or negative, or a B value is zero (a resampled median of
    /// B could then be zero and the ratio undefined).
    #[error("ratio of medians needs finite values, A >= 0 and B > 0 (got {0})")]
    InvalidValue(f64),
}

/// median(a) / median(b) with its unpaired percentile-bootstrap 95% interval, from
/// `resamples` replicates of a generator seeded by `seed` (so a rebuilt report shows the
/// same interval).
pub fn ratio_of_medians_ci(
    a: &[f64],
    b: &[f64],
    resamples: usize,
    seed: u64,
) -> Result<Estimate, RatioError> {
    if a.is_empty() || b.is_empty() {
        return Err(RatioError::Empty);
    }
    if let Some(v) = a.iter().find(|v| !(v.is_finite() && **v >= 0.0)) {
        return Err(RatioError::InvalidValue(*v));
    }
    if let Some(v) = b.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
        return Err(RatioError::InvalidValue(*v));
    }
    let point = median(a) / median(b);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut da, mut db) = (vec![0.0; a.len()], vec![0.0; b.len()]);
    let mut ratios = Vec::with_capacity(resamples.max(1));
    for _ in 0..resamples.max(1) {
        for d in da.iter_mut() {
            *d = a[rng.random_range(0..a.len())];
        }
        for d in db.iter_mut() {
            *d = b[rng.random_range(0..b.len())];
        }
        ratios.push(median(&da) / median(&db));
    }
    Ok(percentile_interval(point, ratios))
}

/// The paired variant, for interleaved trials where `pairs[i]` = (A, B) of trial i ran
/// back to back: each replicate resamples whole trials, so noise shared by both halves
/// of a trial (a busy neighbour, a thermal swing) cancels out of the ratio and the
/// interval is narrower than the unpaired one when that noise dominates.
pub fn paired_ratio_of_medians_ci(
    pairs: &[(f64, f64)],
    resamples: usize,
    seed: u64,
) -> Result<Estimate, RatioError> {
    if pairs.is_empty() {
        return Err(RatioError::Empty);
    }
    for &(a, b) in pairs {
        if !(a.is_finite() && a >= 0.0) {
            return Err(RatioError::InvalidValue(a));
        }
        if !(b.is_finite() && b > 0.0) {
            return Err(RatioError::InvalidValue(b));
        }
    }
    let (a, b): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
    let point = median(&a) / median(&b);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut da, mut db) = (vec![0.0; pairs.len()], vec![0.0; pairs.len()]);
    let mut ratios = Vec::with_capacity(resamples.max(1));
    for _ in 0..resamples.max(1) {
        for (x, y) in da.iter_mut().zip(db.iter_mut()) {
            let (pa, pb) = pairs[rng.random_range(0..pairs.len())];
            (*x, *y) = (pa, pb);
        }
        ratios.push(median(&da) / median(&db));
    }
    Ok(percentile_interval(point, ratios))
}

/// The A/B ratio over several points at once (workloads, concurrencies, variants measured
/// by both sides): the geometric mean over points of median(A_p) / median(B_p), with its
/// percentile-bootstrap 95% interval. Each replicate resamples every point's runs within
/// the point, A and B independently (runs of one point are the units of replication;
/// points are fixed by the study, not drawn). One point reduces to
/// [`ratio_of_medians_ci`]. Why the geometric mean: ratios multiply, so 2x at one point
/// and 0.5x at another average to 1, not to 1.25.
pub fn pooled_ratio_ci(
    points: &[(Vec<f64>, Vec<f64>)],
    resamples: usize,
    seed: u64,
) -> Result<Estimate, RatioError> {
    if points.is_empty() || points.iter().any(|(a, b)| a.is_empty() || b.is_empty()) {
        return Err(RatioError::Empty);
    }
    for (a, b) in points {
        if let Some(v) = a.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
            return Err(RatioError::InvalidValue(*v));
        }
        if let Some(v) = b.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
            return Err(RatioError::InvalidValue(*v));
        }
    }
    let geo = |logs: &[f64]| (logs.iter().sum::<f64>() / logs.len() as f64).exp();
    let logs: Vec<f64> = points
        .iter()
        .map(|(a, b)| (median(a) / median(b)).ln())
        .collect();
    let point = geo(&logs);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut draws: Vec<(Vec<f64>, Vec<f64>)> = points
        .iter()
        .map(|(a, b)| (vec![0.0; a.len()], vec![0.0; b.len()]))
        .collect();
    let mut ratios = Vec::with_capacity(resamples.max(1));
    let mut logs = vec![0.0; points.len()];
    for _ in 0..resamples.max(1) {
        for (((a, b), (da, db)), l) in points.iter().zip(draws.iter_mut()).zip(logs.iter_mut()) {
            for d in da.iter_mut() {
                *d = a[rng.random_range(0..a.len())];
            }
            for d in db.iter_mut() {
                *d = b[rng.random_range(0..b.len())];
            }
            *l = (median(da) / median(db)).ln();
        }
        ratios.push(geo(&logs));
    }
    Ok(percentile_interval(point, ratios))
}

/// Run-to-run coefficient of variation assumed when a study has one run per target and
/// so no spread of its own to go by (docs/methodology.md, "Repeats and noise"): 5%, what
/// A/A runs of the same server on a shared 2-core machine show for throughput.
pub const ASSUMED_RUN_CV: f64 = 0.05;

/// Fewest repeats worth asking for: with fewer than 5 runs a side, the percentile
/// bootstrap of a median is little more than the range of the runs.
pub const MIN_REPEATS: usize = 5;

/// How many runs per side a ratio `ratio` (A/B of medians) needs before its 95% interval
/// can exclude 1, when single runs vary by the coefficient of variation `cv`: the
/// median of n runs has a standard error of about 1.25 cv / sqrt(n) (the median's
/// efficiency against the mean, sqrt(pi/2)), the log of a ratio of two such medians
/// sqrt(2) times that, and the interval excludes 1 when |ln ratio| exceeds 1.96 of
/// those: n >= (1.96 x 1.25 x sqrt(2) x cv / |ln ratio|)^2. At least [`MIN_REPEATS`];
/// `None` when the ratio is 1 (or not finite): no number of repeats separates equals.
pub fn repeats_needed(ratio: f64, cv: f64) -> Option<usize> {
    let effect = ratio.ln().abs();
    if !(effect.is_finite() && effect > 1e-9 && cv.is_finite() && cv >= 0.0) {
        return None;
    }
    let se_per_run = 1.96 * std::f64::consts::FRAC_PI_2.sqrt() * std::f64::consts::SQRT_2 * cv;
    let n = (se_per_run / effect).powi(2).ceil();
    // Beyond a million runs the answer is "never", not a number to plan by.
    (n < 1e6).then(|| (n as usize).max(MIN_REPEATS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_ratio_is_the_point_estimate() {
        let a = [20.0, 22.0, 21.0, 19.0, 20.5];
        let b = [10.0, 11.0, 10.5, 9.5, 10.25];
        let e = ratio_of_medians_ci(&a, &b, 2000, 3).unwrap();
        assert!((e.median - 2.0).abs() < 1e-12);
        assert!(e.lo <= e.median && e.median <= e.hi);
        assert!(e.lo > 1.7 && e.hi < 2.3, "{e:?}");
        assert_eq!(e, ratio_of_medians_ci(&a, &b, 2000, 3).unwrap(), "seeded");
    }

    #[test]
    fn a_a_interval_contains_one_and_separated_samples_exclude_it() {
        let a = [100.0, 104.0, 97.0, 101.0, 99.0, 103.0, 98.0];
        let a2 = [102.0, 98.0, 100.0, 96.0, 104.0, 101.0, 99.0];
        let aa = ratio_of_medians_ci(&a, &a2, 2000, 9).unwrap();
        assert!(aa.lo < 1.0 && 1.0 < aa.hi, "{aa:?}");
        let faster: Vec<f64> = a.iter().map(|v| v * 1.3).collect();
        let ab = ratio_of_medians_ci(&faster, &a2, 2000, 9).unwrap();
        assert!(ab.lo > 1.0, "{ab:?}");
    }

    #[test]
    fn constant_sides_give_a_point_interval() {
        let e = ratio_of_medians_ci(&[6.0; 4], &[3.0; 5], 500, 1).unwrap();
        assert_eq!((e.lo, e.median, e.hi), (2.0, 2.0, 2.0));
    }

    #[test]
    fn pairing_cancels_shared_trial_noise() {
        // Trial-to-trial swings of +-30% hit A and B alike; A is always 1.2 x B.
        let swing = [1.0, 1.3, 0.7, 1.25, 0.75, 1.1, 0.9, 1.2];
        let pairs: Vec<(f64, f64)> = swing.iter().map(|s| (120.0 * s, 100.0 * s)).collect();
        let paired = paired_ratio_of_medians_ci(&pairs, 2000, 5).unwrap();
        assert!((paired.median - 1.2).abs() < 1e-9, "{paired:?}");
        // Every resampled trial has ratio 1.2 and medians scale alike: a point interval.
        assert!((paired.hi - paired.lo) < 1e-9, "{paired:?}");
        let (a, b): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
        let unpaired = ratio_of_medians_ci(&a, &b, 2000, 5).unwrap();
        assert!(unpaired.hi - unpaired.lo > 0.2, "{unpaired:?}");
        assert_eq!(
            paired_ratio_of_medians_ci(&[], 10, 1),
            Err(RatioError::Empty)
        );
        assert!(paired_ratio_of_medians_ci(&[(1.0, 0.0)], 10, 1).is_err());
    }

    #[test]
    fn rejects_empty_and_invalid_sides() {
        assert_eq!(
            ratio_of_medians_ci(&[], &[1.0], 10, 1),
            Err(RatioError::Empty)
        );
        assert_eq!(
            ratio_of_medians_ci(&[1.0], &[], 10, 1),
            Err(RatioError::Empty)
        );
        assert_eq!(
            ratio_of_medians_ci(&[1.0], &[0.0], 10, 1),
            Err(RatioError::InvalidValue(0.0))
        );
        assert!(ratio_of_medians_ci(&[f64::NAN], &[1.0], 10, 1).is_err());
        assert!(ratio_of_medians_ci(&[-1.0], &[1.0], 10, 1).is_err());
    }

    #[test]
    fn pooled_ratio_is_the_geometric_mean_of_the_points() {
        let one =
            pooled_ratio_ci(&[(vec![20.0, 22.0, 21.0], vec![10.0, 11.0, 10.5])], 2000, 3).unwrap();
        assert!((one.median - 2.0).abs() < 1e-12, "{one:?}");
        // 2x at one point, 0.5x at the other: no difference overall.
        let two = pooled_ratio_ci(
            &[
                (vec![20.0, 20.5, 19.5], vec![10.0, 10.2, 9.8]),
                (vec![10.0, 10.2, 9.8], vec![20.0, 20.5, 19.5]),
            ],
            2000,
            3,
        )
        .unwrap();
        assert!((two.median - 1.0).abs() < 1e-12, "{two:?}");
        assert!(two.lo < 1.0 && 1.0 < two.hi, "{two:?}");
        assert_eq!(pooled_ratio_ci(&[], 10, 1), Err(RatioError::Empty));
        assert_eq!(
            pooled_ratio_ci(&[(vec![1.0], vec![])], 10, 1),
            Err(RatioError::Empty)
        );
        assert!(pooled_ratio_ci(&[(vec![0.0], vec![1.0])], 10, 1).is_err());
    }

    #[test]
    fn repeats_needed_grows_as_the_ratio_nears_one() {
        // (ratio, cv, runs per side)
        let table = [
            (1.39, 0.05, Some(MIN_REPEATS)),
            (1.10, 0.05, Some(MIN_REPEATS)),
            (1.02, 0.05, Some(77)),
            (0.98, 0.05, Some(74)),
            (1.02, 0.10, Some(308)),
            (1.0, 0.05, None),
            (f64::NAN, 0.05, None),
        ];
        for (ratio, cv, want) in table {
            assert_eq!(repeats_needed(ratio, cv), want, "ratio {ratio} cv {cv}");
        }
    }
}
