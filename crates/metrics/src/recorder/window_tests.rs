//! Window keys, table-driven and clock-free: every instant is given.

use super::tests::ok;
use super::*;
use volley_engine::{Sample, Sink};

const MS: u64 = 1_000_000;

/// A sample intended at `intended_ms` that completed at `done_ms`, sent on schedule.
fn at(intended_ms: u64, done_ms: u64) -> Sample {
    let mut s = ok(done_ms, done_ms - intended_ms);
    s.first_byte_ns = s.done_ns;
    s
}

fn intended(hold_ms: u64) -> Recorder {
    Recorder::new().with_window_key(WindowKey::Intended {
        hold: Duration::from_millis(hold_ms),
    })
}

/// (second, completed) of every closed window.
fn windows(r: &Recorder) -> Vec<(u64, u64)> {
    r.closed_seconds()
        .iter()
        .map(|c| (c.second, c.counts.completed))
        .collect()
}

/// (intended ms, done ms) in completion order, and the second each lands in by key.
const SAMPLES: [(u64, u64, u64, u64); 7] = [
    // intended, done, by intended, by completion
    (100, 150, 0, 0),
    (900, 1_200, 0, 1),
    (2_000, 2_001, 2, 2),
    (950, 2_400, 0, 2),
    (1_100, 2_500, 1, 2),
    (1_999, 3_100, 1, 3),
    (3_500, 3_600, 3, 3),
];

fn per_second(key_col: usize) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    let mut keys: Vec<u64> = SAMPLES
        .iter()
        .map(|s| if key_col == 2 { s.2 } else { s.3 })
        .collect();
    keys.sort();
    for k in keys {
        match out.last_mut() {
            Some((s, n)) if *s == k => *n += 1,
            _ => out.push((k, 1)),
        }
    }
    out
}

#[test]
fn samples_land_in_the_window_of_their_key() {
    // Hold 2 s: every sample here completes within it, so none is late.
    let mut by_intended = intended(2_000);
    let mut by_done = Recorder::new();
    for &(i, d, _, _) in &SAMPLES {
        by_intended.record(&at(i, d));
        by_done.record(&at(i, d));
    }
    by_intended.finish();
    by_done.finish();
    assert_eq!(windows(&by_intended), per_second(2));
    assert_eq!(windows(&by_done), per_second(3));
    assert_eq!(by_intended.late_samples(), 0);
    // Latencies travel with their sample: second 0 holds 50 ms, 300 ms and 1450 ms.
    let h = by_intended.closed_seconds()[0]
        .hist(Metric::Response)
        .unwrap();
    assert_eq!(h.len(), 3);
    assert!(h.equivalent(h.max(), 1_450_000));
}

#[test]
fn a_window_closes_only_after_its_hold() {
    // Hold 1.5 s: second s is final at (s + 1) s + 1.5 s. One sample in each of
    // seconds 0..=2, then ticks; some rows record a sample (intended, done) after
    // their tick, into a window still open. (tick ms, sample, seconds closed by then)
    type Row = (u64, Option<(u64, u64)>, &'static [u64]);
    let table: [Row; 10] = [
        (1_000, None, &[]),
        (2_000, None, &[]),
        (2_499, None, &[]),
        (2_500, None, &[0]),
        (3_000, Some((1_900, 3_000)), &[0]),
        (3_499, None, &[0]),
        (3_500, None, &[0, 1]),
        (3_600, Some((2_200, 3_700)), &[0, 1]),
        (4_499, None, &[0, 1]),
        (4_500, None, &[0, 1, 2]),
    ];
    let mut r = intended(1_500);
    r.tick(0);
    for s in [0u64, 1, 2] {
        r.record(&at(s * 1_000 + 10, s * 1_000 + 20));
    }
    for (tick_ms, sample, closed) in table {
        r.tick(tick_ms * MS);
        if let Some((i, d)) = sample {
            r.record(&at(i, d));
        }
        let seconds: Vec<u64> = r.closed_seconds().iter().map(|c| c.second).collect();
        assert_eq!(seconds, closed, "after a tick at {tick_ms} ms");
    }
    r.finish();
    assert_eq!(windows(&r), vec![(0, 1), (1, 2), (2, 2)]);
    assert_eq!(r.late_samples(), 0);
}

#[test]
fn a_sample_past_its_hold_is_late_and_goes_in_the_oldest_open_window() {
    // Hold 1 s: window 0 is final at 2 s, window 1 at 3 s.
    let mut r = intended(1_000);
    r.record(&at(100, 200));
    r.record(&at(1_200, 2_900)); // second 1, within its hold: not late
    r.record(&at(300, 2_950)); // second 0, closed at 2 s: late, into second 1
    r.record(&at(400, 4_200)); // second 0 again: the oldest open is now 3
    r.record(&at(3_100, 4_300));
    r.finish();
    assert_eq!(r.late_samples(), 2);
    assert_eq!(windows(&r), vec![(0, 1), (1, 2), (3, 2)]);
    let in_windows: u64 = windows(&r).iter().map(|w| w.1).sum();
    assert_eq!(in_windows, r.completed(), "a late sample is never dropped");
}

#[test]
fn the_default_key_is_completion_and_never_late() {
    let build = |r: Recorder| {
        let mut r = r;
        for &(i, d, _, _) in &SAMPLES {
            r.record(&at(i, d));
        }
        r.finish();
        r
    };
    let default = build(Recorder::new());
    let explicit = build(Recorder::new().with_window_key(WindowKey::Completion));
    assert_eq!(default.window_key(), WindowKey::Completion);
    assert_eq!(default.closed_seconds(), explicit.closed_seconds());
    assert_eq!(default.late_samples(), 0);
}

/// `n` samples with latencies up to 2.5 s from a cheap LCG, in completion order.
fn spread(n: u64, seed: u64) -> Vec<Sample> {
    let mut x = seed;
    let mut v: Vec<Sample> = (0..n)
        .map(|i| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let lat_ms = 1 + (x >> 33) % 2_500;
            let intended_ms = 1 + i * 7;
            let mut s = at(intended_ms, intended_ms + lat_ms);
            if (x >> 20) % 11 == 0 {
                s.error = Some(ErrorKind::Timeout);
            }
            s
        })
        .collect();
    v.sort_by_key(|s| s.done_ns);
    v
}

#[test]
fn windows_add_up_to_every_sample_recorded_whatever_the_key() {
    // (key, workers): a hold shorter than some latencies makes late samples, which
    // must still be in some window.
    let keys = [
        WindowKey::Completion,
        WindowKey::Intended {
            hold: Duration::from_millis(500),
        },
        WindowKey::Intended {
            hold: Duration::from_secs(3),
        },
    ];
    for key in keys {
        let workers: Vec<Recorder> = (0..3u64)
            .map(|w| {
                let mut r = Recorder::new().with_window_key(key);
                for s in spread(2_000, 11 + w) {
                    r.record(&s);
                    if s.done_ns % 3 == 0 {
                        r.tick(s.done_ns + 10 * MS);
                    }
                }
                r
            })
            .collect();
        let late: u64 = workers.iter().map(Recorder::late_samples).sum();
        let m = Recorder::merge_all(workers).unwrap();
        let in_windows: u64 = m.closed_seconds().iter().map(|c| c.counts.completed).sum();
        let response: u64 = m
            .closed_seconds()
            .iter()
            .map(|c| c.hist(Metric::Response).unwrap().len())
            .sum();
        assert_eq!(in_windows, 6_000, "{key:?}");
        assert_eq!(m.completed(), 6_000, "{key:?}");
        assert_eq!(response, m.run[Metric::Response as usize].len(), "{key:?}");
        assert_eq!(m.late_samples(), late, "{key:?}: merged late = sum");
        match key {
            WindowKey::Completion => assert_eq!(late, 0),
            WindowKey::Intended { hold } if hold >= Duration::from_millis(2_500) => {
                assert_eq!(late, 0, "every latency fits in a 3 s hold")
            }
            WindowKey::Intended { .. } => assert!(late > 0, "2.5 s latencies, 0.5 s hold"),
        }
        let seconds: Vec<u64> = m.closed_seconds().iter().map(|c| c.second).collect();
        assert!(
            seconds.windows(2).all(|p| p[0] < p[1]),
            "{key:?}: in order, once"
        );
    }
}

#[test]
fn streamed_intended_windows_come_out_in_order_after_their_hold() {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut r = intended(1_000).with_stream(SecondStream::new(0, tx));
    let mut joiner = SecondJoiner::new(1);
    let mut released: Vec<(u64, u64)> = Vec::new();
    let samples = spread(600, 5);
    let mut checked = 0;
    for s in &samples {
        r.record(s);
        while let Ok(w) = rx.try_recv() {
            // Window w.second is streamed only once its hold has passed.
            assert!(s.done_ns >= (w.second + 2) * NS_PER_S);
            checked += 1;
            for c in joiner.push(w).unwrap() {
                released.push((c.second, c.counts.completed));
            }
        }
    }
    assert!(checked > 0);
    r.finish();
    r.drop_stream();
    while let Ok(w) = rx.try_recv() {
        for c in joiner.push(w).unwrap() {
            released.push((c.second, c.counts.completed));
        }
    }
    released.extend(
        joiner
            .finish()
            .unwrap()
            .into_iter()
            .map(|c| (c.second, c.counts.completed)),
    );
    assert_eq!(released, windows(&r), "each window once, in order");
    assert_eq!(released.iter().map(|w| w.1).sum::<u64>(), 600);
}

#[test]
fn events_go_in_the_wall_clock_second_and_keys_do_not_mix() {
    let mut r = intended(2_000);
    r.record(&at(500, 600));
    r.connections(1_500 * MS, 9);
    r.cap_hit(1_600 * MS);
    r.record(&at(700, 1_700));
    r.finish();
    let w = r.closed_seconds();
    assert_eq!(
        (w[0].second, w[0].counts.completed, w[0].counts.max_open),
        (0, 2, 0)
    );
    assert_eq!(
        (w[1].second, w[1].counts.max_open, w[1].counts.cap_hits),
        (1, 9, 1)
    );

    let snap = r.snapshot().unwrap();
    let back = Recorder::from_snapshot(snap, 0).unwrap();
    assert!(
        back.window_key().by_intended(),
        "the key survives a snapshot"
    );
    let err = Recorder::merge_all(vec![back, Recorder::new()]);
    assert!(matches!(err, Err(MetricsError::WindowKeyMismatch)));
}
