//! A window reused second after second (histograms reset only where used, one deflate
//! state for every encode) must store exactly what a fresh recorder stores.

use super::tests::ok;
use super::*;
use volley_engine::{Sample, Sink};

/// A sample that failed before it was sent: counters only, no histogram.
fn unsent(done_ms: u64) -> Sample {
    let mut s = ok(done_ms, 1);
    s.dispatched_ns = 0;
    s.sent_ns = 0;
    s.first_byte_ns = 0;
    s.status = 0;
    s.error = Some(ErrorKind::Connect);
    s
}

/// Seconds of every shape, with empty seconds between: one sample; many spread
/// samples; a failure with no latency at all (a window of counters and empty
/// histograms); a censored request (response and service time, nothing else); open-loop
/// samples sent late (service time differs from response time); latencies past a
/// second (their intended second is earlier than their completion second). In
/// completion order.
fn day() -> Vec<Sample> {
    let mut v = vec![ok(300, 2)];
    let mut x: u64 = 3;
    for i in 0..50 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        v.push(ok(2_000 + i * 19, 1 + (x >> 40) % 900));
    }
    v.push(unsent(3_400));
    let mut censored = ok(4_900, 700);
    censored.error = Some(ErrorKind::InFlight);
    censored.first_byte_ns = 0;
    censored.status = 0;
    v.push(censored);
    for (done, lag) in [(7_100, 40), (7_500, 3), (7_900, 250)] {
        let mut s = ok(done, 60);
        s.intended_ns -= lag * 1_000_000;
        v.push(s);
    }
    v.push(ok(9_800, 1_500));
    v.push(ok(10_200, 1_900));
    v.sort_by_key(|s| s.done_ns);
    v
}

fn keyed(key: WindowKey) -> Recorder {
    Recorder::new().with_window_key(key)
}

/// Every key's window of `s`.
fn second_of(key: WindowKey, s: &Sample) -> u64 {
    if key.by_intended() {
        s.intended_ns / NS_PER_S
    } else {
        s.done_ns / NS_PER_S
    }
}

#[test]
fn reused_windows_store_what_fresh_recorders_store() {
    let keys = [
        WindowKey::Completion,
        WindowKey::Intended {
            hold: Duration::from_secs(2),
        },
    ];
    for key in keys {
        let samples = day();
        let mut reused = keyed(key);
        for s in &samples {
            reused.record(s);
        }
        reused.tick(30 * NS_PER_S);
        reused.finish();
        // One fresh recorder per second: nothing in it was ever used before.
        let mut fresh: Vec<Recorder> = Vec::new();
        let mut seconds: Vec<u64> = samples.iter().map(|s| second_of(key, s)).collect();
        seconds.sort_unstable();
        seconds.dedup();
        for sec in &seconds {
            let mut r = keyed(key);
            for s in samples.iter().filter(|s| second_of(key, s) == *sec) {
                r.record(s);
            }
            r.finish();
            fresh.push(r);
        }
        let want: Vec<ClosedSecond> = fresh
            .iter()
            .flat_map(|r| r.closed_seconds().iter().cloned())
            .collect();
        assert_eq!(reused.closed_seconds(), &want[..], "{key:?}");
        let stored: Vec<u64> = want.iter().map(|c| c.second).collect();
        assert_eq!(stored, seconds, "{key:?}: an empty second is not stored");
        let merged = Recorder::merge_all(fresh).unwrap();
        assert_eq!(
            reused.snapshot().unwrap(),
            merged.snapshot().unwrap(),
            "{key:?}"
        );
    }
}

#[test]
fn a_window_of_counters_only_stores_no_histogram_bytes() {
    let mut r = Recorder::new();
    r.record(&unsent(1_200));
    r.record(&ok(2_100, 5));
    r.finish();
    let c = &r.closed_seconds()[0];
    assert_eq!(c.counts.completed, 1);
    assert!(c.hists.iter().all(Vec::is_empty));
    let next = &r.closed_seconds()[1];
    assert_eq!(next.hist(Metric::Response).unwrap().len(), 1);
    assert_eq!(next.hist(Metric::Ttfb).unwrap().len(), 1);
}

#[test]
fn one_sample_seconds_after_a_busy_one_hold_only_their_own_sample() {
    let mut r = Recorder::new();
    for i in 0..1_000 {
        r.record(&ok(400 + i / 2, 1 + i % 300));
    }
    r.record(&ok(1_500, 7));
    r.record(&ok(5_500, 9));
    r.finish();
    let c = r.closed_seconds();
    assert_eq!(c.len(), 3);
    for (w, lat_us) in [(&c[1], 7_000), (&c[2], 9_000)] {
        for m in [Metric::Response, Metric::Service, Metric::Ttfb] {
            let h = w.hist(m).unwrap();
            assert_eq!(h.len(), 1, "{m:?}");
            let v = if m == Metric::Ttfb {
                lat_us / 2
            } else {
                lat_us
            };
            assert!(h.equivalent(h.max(), v), "{m:?}: {}", h.max());
        }
    }
}

#[test]
fn windows_closed_on_the_encoder_thread_are_those_closed_inline() {
    let keys = [
        WindowKey::Completion,
        WindowKey::Intended {
            hold: Duration::from_secs(2),
        },
    ];
    for key in keys {
        let samples = day();
        let (mut inline, mut off) = (keyed(key), keyed(key).with_offload());
        for s in &samples {
            inline.record(s);
            off.record(s);
        }
        inline.tick(30 * NS_PER_S);
        off.tick(30 * NS_PER_S);
        inline.finish();
        off.finish();
        assert!(!inline.closed_seconds().is_empty());
        assert_eq!(off.closed_seconds(), inline.closed_seconds(), "{key:?}");
        // Finished: a second finish (merge and close both call it) changes nothing.
        off.finish();
        assert_eq!(off.closed_seconds(), inline.closed_seconds(), "{key:?}");
        assert_eq!(
            off.snapshot().unwrap(),
            inline.snapshot().unwrap(),
            "{key:?}"
        );
    }
}

#[test]
fn an_encoder_that_falls_behind_holds_few_histogram_sets_and_loses_no_window() {
    // Three hundred one-sample seconds recorded with no pause: the encoder may get no
    // CPU until the worker waits for a set back, yet every second arrives, in order,
    // and streamed once each.
    let (tx, rx) = std::sync::mpsc::channel();
    let mut off = Recorder::new()
        .with_stream(super::stream::SecondStream::new(0, tx))
        .with_offload();
    let mut inline = Recorder::new();
    for sec in 0..300u64 {
        let s = ok(sec * 1_000 + 500, 1 + sec % 40);
        off.record(&s);
        inline.record(&s);
    }
    off.finish();
    inline.finish();
    off.drop_stream();
    assert_eq!(off.closed_seconds().len(), 300);
    assert_eq!(off.closed_seconds(), inline.closed_seconds());
    let streamed: Vec<u64> = rx.try_iter().map(|w| w.second).collect();
    assert_eq!(streamed, (0..300).collect::<Vec<u64>>());
}
