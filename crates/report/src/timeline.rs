//! A step's figures on the run's time axis, for the charts over time. A stored second
//! is a count of the requests that finished in it, which reads as a rate only when the
//! second is whole: a step shorter than a second is drawn as one point with its table
//! figures (its one stored second holds a fraction of a second's requests), and the last
//! second of a step that ends mid-second is scaled to the part it covers and marked
//! partial. Lines never join two steps: between them the target rested or another ran.

use crate::model::StepReport;

/// Partial seconds covering less than this (seconds) are not drawn: a handful of
/// requests over a few milliseconds is no rate. The step's table row still counts them.
pub const MIN_PARTIAL_S: f64 = 0.1;

/// What a point stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PointKind {
    /// A whole second.
    Second,
    /// The step's last second, covering less than a second: its count scaled to it.
    Partial,
    /// A step shorter than a second: one point, the step's own figures.
    Step,
}

/// One point over time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimePoint {
    /// Seconds since the run's first step started.
    pub t_s: f64,
    /// Requests finished per second.
    pub rps: f64,
    /// Headline latency p50, ms.
    pub p50_ms: f64,
    /// p99, ms.
    pub p99_ms: f64,
    /// Max, ms.
    pub max_ms: f64,
    /// Whole second, partial second or whole step.
    pub kind: PointKind,
}

/// The points of one step, in time order; none for a step whose requests mostly failed
/// (an error is never throughput: its gap breaks the line, its table row says why).
pub fn points(s: &StepReport) -> Vec<TimePoint> {
    if s.mostly_failed() {
        return Vec::new();
    }
    let step_point = || TimePoint {
        t_s: s.start_offset_s + s.duration_s / 2.0,
        rps: s.requests_per_s,
        p50_ms: s.latency.p50_ms,
        p99_ms: s.latency.p99_ms,
        max_ms: s.latency.max_ms,
        kind: PointKind::Step,
    };
    if s.duration_s > 0.0 && s.duration_s < 1.0 {
        return vec![step_point()];
    }
    let mut out: Vec<TimePoint> = s
        .seconds
        .iter()
        .filter_map(|p| {
            // Second k of the step covers [k, k + 1) of its measured duration.
            let k = (p.t_s - s.start_offset_s).round();
            let covered = (s.duration_s - k).min(1.0);
            let whole = covered >= 1.0 - 1e-6 || s.duration_s <= 0.0;
            if !whole && covered < MIN_PARTIAL_S {
                return None;
            }
            Some(TimePoint {
                t_s: p.t_s,
                rps: if whole {
                    p.completed as f64
                } else {
                    p.completed as f64 / covered
                },
                p50_ms: p.p50_ms,
                p99_ms: p.p99_ms,
                max_ms: p.max_ms,
                kind: if whole {
                    PointKind::Second
                } else {
                    PointKind::Partial
                },
            })
        })
        .collect();
    out.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    out
}

/// The points of several steps as line segments: one per step, in time order.
pub fn segments<'a>(steps: impl IntoIterator<Item = &'a StepReport>) -> Vec<Vec<TimePoint>> {
    let mut out: Vec<Vec<TimePoint>> = steps
        .into_iter()
        .map(points)
        .filter(|p| !p.is_empty())
        .collect();
    out.sort_by(|a, b| a[0].t_s.total_cmp(&b[0].t_s));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{LatencyFigures, SecondPoint};

    fn step(start: f64, duration_s: f64, seconds: &[u64], rps: f64) -> StepReport {
        let mut s = StepReport::blank();
        s.start_offset_s = start;
        s.duration_s = duration_s;
        s.requests_per_s = rps;
        s.completed = seconds.iter().sum::<u64>().max(1);
        s.ok = s.completed;
        s.latency = LatencyFigures {
            p99_ms: 2.0,
            ..LatencyFigures::default()
        };
        s.seconds = seconds
            .iter()
            .enumerate()
            .map(|(k, &n)| SecondPoint {
                t_s: start + k as f64,
                completed: n,
                p50_ms: 1.0,
                p99_ms: 2.0,
                max_ms: 3.0,
            })
            .collect();
        s
    }

    #[test]
    fn a_step_whose_requests_mostly_failed_has_no_point() {
        let mut s = step(0.0, 2.0, &[900, 900], 900.0);
        assert_eq!(points(&s).len(), 2);
        s.ok = 100;
        s.failed = 1700;
        assert!(points(&s).is_empty());
        assert!(segments([&s]).is_empty());
    }

    #[test]
    fn a_step_shorter_than_a_second_is_one_point_with_its_table_figure() {
        // 0.053 s at 94,328 req/s: its one stored second holds ~5,000 requests.
        let p = points(&step(10.0, 0.053, &[5_000], 94_328.0));
        assert_eq!(p.len(), 1);
        assert_eq!((p[0].rps, p[0].kind), (94_328.0, PointKind::Step));
        assert!((p[0].t_s - 10.0265).abs() < 1e-9);
    }

    #[test]
    fn a_partial_last_second_is_scaled_and_marked_and_a_sliver_is_left_out() {
        // 3.5 s: three whole seconds and half of a fourth.
        let p = points(&step(0.0, 3.5, &[100, 100, 100, 40], 97.0));
        assert_eq!(p.len(), 4);
        assert!(p[..3].iter().all(|x| x.kind == PointKind::Second));
        assert_eq!((p[3].rps, p[3].kind), (80.0, PointKind::Partial));
        // 3.0004 s (a `-d 3s` run): the fourth second covers 0.4 ms and is not drawn.
        let p = points(&step(0.0, 3.0004, &[100, 100, 100, 1], 100.0));
        assert_eq!(p.len(), 3);
    }

    #[test]
    fn segments_never_join_two_steps() {
        let a = step(0.0, 2.0, &[10, 10], 10.0);
        let b = step(30.0, 2.0, &[20, 20], 20.0);
        let c = step(60.0, 0.5, &[3], 6.0);
        let segs = segments([&c, &a, &b]);
        assert_eq!(segs.len(), 3);
        assert_eq!(segs[0][0].t_s, 0.0);
        assert_eq!(segs[2][0].kind, PointKind::Step);
    }
}
