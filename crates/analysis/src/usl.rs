//! The Universal Scalability Law fit for concurrency (or core-count) sweeps.
//!
//! Place in the flow: a concurrency sweep yields one (N, throughput) point per step; the
//! report shows the fitted curve, N* and the predicted peak beside the measured points.
//!
//! X(N) = lambda N / (1 + sigma (N - 1) + kappa N (N - 1))   (Gunther)
//!
//! lambda is the throughput of one unit, sigma the contention (serial share, Amdahl),
//! kappa the coherency cost (crosstalk between units, which makes throughput fall past
//! N* = sqrt((1 - sigma) / kappa)).
//!
//! Method: ordinary least squares on the throughputs themselves (not on a transformed
//! quantity, so residuals are in the units the user reads), by Levenberg-Marquardt with
//! the bounds sigma, kappa >= 0 and lambda > 0 kept by an active set: a parameter at its
//! bound whose gradient pushes it further out is frozen for that iteration. The start
//! point comes from Gunther's linearisation N / C(N) - 1 = (sigma + kappa) x + kappa x^2
//! with x = N - 1 and C(N) = X(N) / X(1), fitted by least squares through the origin; a
//! second start at (X(1), 0, 0) guards against a poor linearised guess, and the fit with
//! the smaller residual sum wins.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Fewest points accepted (docs/methodology.md: at least 6, including N = 1).
pub const MIN_POINTS: usize = 6;

/// One measured step of a concurrency sweep.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UslPoint {
    /// Concurrency (connections, workers, cores); at least 1.
    pub n: f64,
    /// Throughput measured at that concurrency (any unit; lambda comes out in it).
    pub throughput: f64,
}

/// Why the fit was refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum UslError {
    /// Too few points to fit three parameters with any confidence.
    #[error("USL fit needs at least {MIN_POINTS} points, got {0}")]
    TooFewPoints(usize),
    /// No point at N = 1, which anchors lambda.
    #[error("USL fit needs a point at N = 1")]
    NoSingleUnitPoint,
    /// Fewer than 3 distinct N values: the three parameters are not identifiable.
    #[error("USL fit needs at least 3 distinct N values, got {0}")]
    TooFewDistinctN(usize),
    /// An N below 1, a negative throughput, or a NaN/infinite value.
    #[error("invalid USL point: N = {n}, throughput = {throughput}")]
    InvalidPoint {
        /// The offending N.
        n: f64,
        /// The offending throughput.
        throughput: f64,
    },
    /// Throughput at N = 1 is zero, so nothing scales.
    #[error("USL fit needs a positive throughput at N = 1")]
    ZeroBaseline,
}

/// The fitted law and how well it fits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UslFit {
    /// Throughput of a single unit.
    pub lambda: f64,
    /// Contention coefficient (>= 0).
    pub sigma: f64,
    /// Coherency coefficient (>= 0).
    pub kappa: f64,
    /// Concurrency of peak throughput, sqrt((1 - sigma) / kappa): infinite when
    /// kappa = 0 (throughput never falls), 1 when sigma >= 1 (it falls from the start).
    pub n_star: f64,
    /// X(N*); when N* is infinite, the supremum lambda / sigma (infinite if sigma = 0 too).
    pub peak_throughput: f64,
    /// Measured minus predicted throughput, one per input point, in input order.
    pub residuals: Vec<f64>,
    /// Coefficient of determination, 1 - SSE / SST (1 when SST = 0 and the fit is exact).
    pub r_squared: f64,
    /// Levenberg-Marquardt iterations of the winning start.
    pub iterations: u32,
}

impl UslFit {
    /// Predicted throughput at concurrency `n`.
    pub fn predict(&self, n: f64) -> f64 {
        model(&[self.lambda, self.sigma, self.kappa], n)
    }
}

fn model(p: &[f64; 3], n: f64) -> f64 {
    p[0] * n / (1.0 + p[1] * (n - 1.0) + p[2] * n * (n - 1.0))
}

/// Fits the USL to the points.
pub fn fit(points: &[UslPoint]) -> Result<UslFit, UslError> {
    if points.len() < MIN_POINTS {
        return Err(UslError::TooFewPoints(points.len()));
    }
    if let Some(p) = points.iter().find(|p| {
        !(p.n.is_finite() && p.n >= 1.0 && p.throughput.is_finite() && p.throughput >= 0.0)
    }) {
        return Err(UslError::InvalidPoint {
            n: p.n,
            throughput: p.throughput,
        });
    }
    let is_one = |p: &&UslPoint| (p.n - 1.0).abs() < 1e-9;
    let ones: Vec<f64> = points.iter().filter(is_one).map(|p| p.throughput).collect();
    if ones.is_empty() {
        return Err(UslError::NoSingleUnitPoint);
    }
    let mut distinct: Vec<f64> = points.iter().map(|p| p.n).collect();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    if distinct.len() < 3 {
        return Err(UslError::TooFewDistinctN(distinct.len()));
    }
    let baseline = ones.iter().sum::<f64>() / ones.len() as f64;
    if baseline <= 0.0 {
        return Err(UslError::ZeroBaseline);
    }

    // Fit on throughput / max so the parameters are of comparable size; scale back after.
    let scale = points.iter().map(|p| p.throughput).fold(0.0, f64::max);
    let data: Vec<(f64, f64)> = points.iter().map(|p| (p.n, p.throughput / scale)).collect();
    let lambda0 = baseline / scale;
    let starts = [linearised_start(&data, lambda0), [lambda0, 0.0, 0.0]];
    let (mut best, mut best_sse, mut best_iters) = (starts[0], f64::INFINITY, 0);
    for start in starts {
        let (p, iters) = levenberg_marquardt(&data, start);
        let s = sse(&data, &p);
        if s < best_sse {
            (best, best_sse, best_iters) = (p, s, iters);
        }
    }
    // A coefficient whose term changes the denominator by less than 1e-9 (relative) even
    // at the largest N measured is indistinguishable from 0 in this data: snap it to 0
    // so that, e.g., pure Amdahl data reports kappa = 0 and an infinite N*, rather than
    // kappa = 1e-19 and N* = 2e9.
    let n_max = distinct[distinct.len() - 1];
    let denominator = 1.0 + best[1] * (n_max - 1.0) + best[2] * n_max * (n_max - 1.0);
    if best[1] * (n_max - 1.0) < 1e-9 * denominator {
        best[1] = 0.0;
    }
    if best[2] * n_max * (n_max - 1.0) < 1e-9 * denominator {
        best[2] = 0.0;
    }
    let params = [best[0] * scale, best[1], best[2]];

    let residuals: Vec<f64> = points
        .iter()
        .map(|p| p.throughput - model(&params, p.n))
        .collect();
    let mean = points.iter().map(|p| p.throughput).sum::<f64>() / points.len() as f64;
    let sst: f64 = points.iter().map(|p| (p.throughput - mean).powi(2)).sum();
    let sse_abs: f64 = residuals.iter().map(|r| r * r).sum();
    let r_squared = if sst > 0.0 {
        1.0 - sse_abs / sst
    } else if sse_abs == 0.0 {
        1.0
    } else {
        0.0
    };
    let [lambda, sigma, kappa] = params;
    let n_star = if sigma >= 1.0 {
        1.0
    } else if kappa > 0.0 {
        ((1.0 - sigma) / kappa).sqrt()
    } else {
        f64::INFINITY
    };
    let peak_throughput = if n_star.is_finite() {
        model(&params, n_star)
    } else if sigma > 0.0 {
        lambda / sigma
    } else {
        f64::INFINITY
    };
    Ok(UslFit {
        lambda,
        sigma,
        kappa,
        n_star,
        peak_throughput,
        residuals,
        r_squared,
        iterations: best_iters,
    })
}

/// Gunther's linearisation: y = N / C(N) - 1 = a x + b x^2 with x = N - 1,
/// a = sigma + kappa, b = kappa; least squares through the origin, clamped to the bounds.
fn linearised_start(data: &[(f64, f64)], lambda0: f64) -> [f64; 3] {
    let (mut sxx, mut sx3, mut sx4, mut sxy, mut sx2y) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(n, x) in data {
        if x <= 0.0 {
            continue;
        }
        let c = x / lambda0;
        let y = n / c - 1.0;
        let u = n - 1.0;
        sxx += u * u;
        sx3 += u * u * u;
        sx4 += u * u * u * u;
        sxy += u * y;
        sx2y += u * u * y;
    }
    let det = sxx * sx4 - sx3 * sx3;
    if det.abs() < 1e-300 {
        return [lambda0, 0.0, 0.0];
    }
    let a = (sxy * sx4 - sx2y * sx3) / det;
    let b = (sxx * sx2y - sx3 * sxy) / det;
    let kappa = b.max(0.0);
    [lambda0, (a - kappa).max(0.0), kappa]
}

fn sse(data: &[(f64, f64)], p: &[f64; 3]) -> f64 {
    data.iter().map(|&(n, x)| (x - model(p, n)).powi(2)).sum()
}

/// Bounded Levenberg-Marquardt; returns the parameters and the iterations used.
fn levenberg_marquardt(data: &[(f64, f64)], start: [f64; 3]) -> ([f64; 3], u32) {
    const MAX_ITERATIONS: u32 = 500;
    let mut p = start;
    let mut cost = sse(data, &p);
    let mut mu = 1e-3;
    for iteration in 1..=MAX_ITERATIONS {
        // Gradient g = J^T r and Gauss-Newton matrix H = J^T J, r = measured - model.
        let mut g = [0.0; 3];
        let mut h = [[0.0; 3]; 3];
        for &(n, x) in data {
            let d = 1.0 + p[1] * (n - 1.0) + p[2] * n * (n - 1.0);
            let f = p[0] * n / d;
            let j = [n / d, -f * (n - 1.0) / d, -f * n * (n - 1.0) / d];
            let r = x - f;
            for a in 0..3 {
                g[a] += j[a] * r;
                for b in 0..3 {
                    h[a][b] += j[a] * j[b];
                }
            }
        }
        // Active set: sigma or kappa sitting at 0 with the descent direction (+g) pointing
        // below 0 stays frozen this iteration.
        let free: Vec<usize> = (0..3)
            .filter(|&k| k == 0 || p[k] > 0.0 || g[k] > 0.0)
            .collect();
        let mut improved = false;
        while mu < 1e12 {
            let k = free.len();
            let mut a = vec![vec![0.0; k + 1]; k];
            for (ri, &i) in free.iter().enumerate() {
                for (ci, &j) in free.iter().enumerate() {
                    a[ri][ci] = h[i][j];
                }
                a[ri][ri] += mu * h[i][i].max(1e-12);
                a[ri][k] = g[i];
            }
            let Some(step) = solve(a) else {
                mu *= 10.0;
                continue;
            };
            let mut q = p;
            for (ri, &i) in free.iter().enumerate() {
                q[i] += step[ri];
            }
            q[1] = q[1].max(0.0);
            q[2] = q[2].max(0.0);
            if q[0] <= 0.0 {
                q[0] = p[0] / 2.0;
            }
            let new_cost = sse(data, &q);
            if new_cost < cost {
                let small_step =
                    (0..3).all(|i| (q[i] - p[i]).abs() <= 1e-12 * (p[i].abs() + 1e-12));
                let small_gain = cost - new_cost <= 1e-15 * cost.max(1e-300);
                p = q;
                cost = new_cost;
                mu = (mu / 10.0).max(1e-12);
                improved = true;
                if small_step || small_gain {
                    return (p, iteration);
                }
                break;
            }
            mu *= 10.0;
        }
        if !improved {
            // No step, however damped, lowers the cost: a (bounded) minimum.
            return (p, iteration);
        }
    }
    (p, MAX_ITERATIONS)
}

/// Gaussian elimination with partial pivoting on an augmented k x (k + 1) matrix.
fn solve(mut a: Vec<Vec<f64>>) -> Option<Vec<f64>> {
    let k = a.len();
    for col in 0..k {
        let pivot = (col..k).max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs()))?;
        if a[pivot][col].abs() < 1e-300 || !a[pivot][col].is_finite() {
            return None;
        }
        a.swap(col, pivot);
        let (upper, lower) = a.split_at_mut(col + 1);
        let pivot_row = &upper[col];
        for row in lower.iter_mut() {
            let factor = row[col] / pivot_row[col];
            for (cell, p) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                *cell -= factor * p;
            }
        }
    }
    let mut x = vec![0.0; k];
    for row in (0..k).rev() {
        let tail: f64 = (row + 1..k).map(|c| a[row][c] * x[c]).sum();
        x[row] = (a[row][k] - tail) / a[row][row];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const NS: [f64; 8] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 48.0, 64.0];

    fn synth(lambda: f64, sigma: f64, kappa: f64, ns: &[f64]) -> Vec<UslPoint> {
        ns.iter()
            .map(|&n| UslPoint {
                n,
                throughput: model(&[lambda, sigma, kappa], n),
            })
            .collect()
    }

    fn close(got: f64, want: f64, share: f64) -> bool {
        (got - want).abs() <= share * want.abs()
    }

    #[test]
    fn recovers_exact_parameters() {
        let f = fit(&synth(1000.0, 0.05, 0.001, &NS)).unwrap();
        assert!(close(f.lambda, 1000.0, 1e-6), "{f:?}");
        assert!(close(f.sigma, 0.05, 1e-5), "{f:?}");
        assert!(close(f.kappa, 0.001, 1e-5), "{f:?}");
        let n_star = (0.95f64 / 0.001).sqrt();
        assert!(close(f.n_star, n_star, 1e-5));
        assert!(close(
            f.peak_throughput,
            model(&[1000.0, 0.05, 0.001], n_star),
            1e-6
        ));
        assert!(f.r_squared > 0.999_999);
        assert!(
            f.residuals.iter().all(|r| r.abs() < 1e-3),
            "{:?}",
            f.residuals
        );
        assert_eq!(f.residuals.len(), NS.len());
    }

    #[test]
    fn recovers_other_regimes() {
        // Nearly linear scaling, and heavy crosstalk peaking early.
        for (l, s, k) in [
            (250.0, 0.001, 0.000_01),
            (50_000.0, 0.2, 0.02),
            (7.0, 0.5, 0.0005),
        ] {
            let f = fit(&synth(l, s, k, &NS)).unwrap();
            assert!(close(f.lambda, l, 1e-4), "{f:?}");
            assert!((f.sigma - s).abs() < 1e-4, "{f:?}");
            assert!(close(f.kappa, k, 1e-3), "{f:?}");
        }
    }

    #[test]
    fn amdahl_data_gives_zero_kappa_and_infinite_n_star() {
        let f = fit(&synth(1000.0, 0.1, 0.0, &NS)).unwrap();
        assert_eq!(f.kappa, 0.0, "{f:?}");
        assert!((f.sigma - 0.1).abs() < 1e-6);
        assert!(f.n_star.is_infinite());
        assert!(close(f.peak_throughput, 1000.0 / f.sigma, 1e-9));
        // Perfectly linear data: both coefficients 0, unbounded peak.
        let f = fit(&synth(10.0, 0.0, 0.0, &NS)).unwrap();
        assert_eq!((f.sigma, f.kappa), (0.0, 0.0), "{f:?}");
        assert!(f.n_star.is_infinite() && f.peak_throughput.is_infinite());
    }

    #[test]
    fn superlinear_data_is_held_at_the_bound() {
        // X grows faster than N (sigma would be negative): the fit keeps sigma = 0.
        let pts: Vec<UslPoint> = NS
            .iter()
            .map(|&n| UslPoint {
                n,
                throughput: 100.0 * n.powf(1.05),
            })
            .collect();
        let f = fit(&pts).unwrap();
        assert!(f.sigma >= 0.0 && f.kappa >= 0.0, "{f:?}");
        assert_eq!(f.sigma, 0.0, "{f:?}");
    }

    #[test]
    fn noisy_data_recovers_within_tolerance() {
        // 2% multiplicative noise, two repeats per N, ten seeds.
        for seed in 0..10 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let pts: Vec<UslPoint> = NS
                .iter()
                .chain(NS.iter())
                .map(|&n| {
                    let noise = 1.0 + 0.02 * (2.0 * rng.random::<f64>() - 1.0);
                    UslPoint {
                        n,
                        throughput: model(&[1000.0, 0.05, 0.001], n) * noise,
                    }
                })
                .collect();
            let f = fit(&pts).unwrap();
            assert!(close(f.lambda, 1000.0, 0.05), "seed {seed}: {f:?}");
            assert!((f.sigma - 0.05).abs() < 0.02, "seed {seed}: {f:?}");
            assert!(close(f.kappa, 0.001, 0.3), "seed {seed}: {f:?}");
            assert!(close(f.n_star, 30.8, 0.2), "seed {seed}: {f:?}");
            assert!(f.r_squared > 0.95, "seed {seed}: {f:?}");
        }
    }

    #[test]
    fn refuses_inadequate_input() {
        let good = synth(1000.0, 0.05, 0.001, &NS);
        assert_eq!(fit(&good[..5]), Err(UslError::TooFewPoints(5)));
        assert_eq!(fit(&good[1..7]), Err(UslError::NoSingleUnitPoint));
        let two_ns: Vec<UslPoint> = [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]
            .iter()
            .map(|&n| UslPoint { n, throughput: n })
            .collect();
        assert_eq!(fit(&two_ns), Err(UslError::TooFewDistinctN(2)));
        let mut bad = good.clone();
        bad[3].throughput = f64::NAN;
        assert!(matches!(fit(&bad), Err(UslError::InvalidPoint { .. })));
        let mut bad = good.clone();
        bad[2].n = 0.5;
        assert!(matches!(fit(&bad), Err(UslError::InvalidPoint { .. })));
        let mut zero = good;
        zero[0].throughput = 0.0;
        assert_eq!(fit(&zero), Err(UslError::ZeroBaseline));
    }

    #[test]
    fn predict_matches_the_model() {
        let f = fit(&synth(1000.0, 0.05, 0.001, &NS)).unwrap();
        assert!(close(f.predict(1.0), 1000.0, 1e-6));
        assert!(close(
            f.predict(10.0),
            model(&[1000.0, 0.05, 0.001], 10.0),
            1e-5
        ));
    }
}
