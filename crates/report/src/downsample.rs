//! Largest-Triangle-Three-Buckets downsampling (Steinarsson 2013), so a long per-second
//! series draws as at most one point per few pixels while keeping its peaks: each bucket
//! keeps the point that forms the largest triangle with the previous kept point and the
//! next bucket's average.

/// Reduces `points` (sorted by x) to at most `threshold` points. The first and last points
/// are always kept; series already short enough, or thresholds below 3, are returned as is.
pub fn lttb(points: &[(f64, f64)], threshold: usize) -> Vec<(f64, f64)> {
    let n = points.len();
    if threshold >= n || threshold < 3 {
        return points.to_vec();
    }
    let mut out = Vec::with_capacity(threshold);
    out.push(points[0]);
    // Buckets over the interior points 1..n-1.
    let every = (n - 2) as f64 / (threshold - 2) as f64;
    let mut a = 0usize;
    for i in 0..threshold - 2 {
        let start = (i as f64 * every) as usize + 1;
        let end = (((i + 1) as f64 * every) as usize + 1).min(n - 1);
        let next_start = end;
        let next_end = (((i + 2) as f64 * every) as usize + 1).min(n);
        let next = &points[next_start..next_end.max(next_start + 1).min(n)];
        let (ax, ay) = points[a];
        let cnt = next.len() as f64;
        let avg_x = next.iter().map(|p| p.0).sum::<f64>() / cnt;
        let avg_y = next.iter().map(|p| p.1).sum::<f64>() / cnt;
        let mut best = start;
        let mut best_area = -1.0;
        for (j, &(x, y)) in points
            .iter()
            .enumerate()
            .take(end.max(start + 1))
            .skip(start)
        {
            let area = ((ax - avg_x) * (y - ay) - (ax - x) * (avg_y - ay)).abs();
            if area > best_area {
                best_area = area;
                best = j;
            }
        }
        out.push(points[best]);
        a = best;
    }
    out.push(points[n - 1]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_series_is_unchanged() {
        let pts = vec![(0.0, 1.0), (1.0, 2.0), (2.0, 0.0)];
        assert_eq!(lttb(&pts, 10), pts);
        assert_eq!(lttb(&pts, 2), pts);
    }

    #[test]
    fn keeps_ends_size_and_spike() {
        let mut pts: Vec<(f64, f64)> = (0..10_000).map(|i| (i as f64, 1.0)).collect();
        pts[4_321].1 = 500.0;
        let out = lttb(&pts, 200);
        assert_eq!(out.len(), 200);
        assert_eq!(out[0], pts[0]);
        assert_eq!(*out.last().unwrap(), pts[9_999]);
        assert!(out.contains(&(4_321.0, 500.0)), "the spike must survive");
        assert!(out.windows(2).all(|w| w[0].0 < w[1].0), "x stays sorted");
    }
}
