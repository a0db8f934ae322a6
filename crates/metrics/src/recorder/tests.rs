use super::*;
use volley_engine::{Sample, Sink};

/// A sample finishing at `done_ms` after `lat_ms`, sent on schedule.
pub(crate) fn ok(done_ms: u64, lat_ms: u64) -> Sample {
    let done_ns = done_ms * 1_000_000;
    let start = done_ns - lat_ms * 1_000_000;
    Sample {
        intended_ns: start,
        dispatched_ns: start,
        sent_ns: start,
        first_byte_ns: start + lat_ms * 500_000,
        done_ns,
        connect_ns: 0,
        tls_handshake_ns: 0,
        status: 200,
        wire_bytes: 100,
        body_bytes: 60,
        wire_body_bytes: 60,
        error: None,
        request_index: 0,
    }
}

#[test]
fn seconds_close_on_later_samples_and_ticks() {
    let mut r = Recorder::new();
    r.record(&ok(100, 5));
    r.record(&ok(900, 5));
    assert!(r.closed_seconds().is_empty());
    r.record(&ok(1_100, 5));
    assert_eq!(r.closed_seconds().len(), 1);
    assert_eq!(r.closed_seconds()[0].counts.completed, 2);
    r.tick(3_500_000_000);
    assert_eq!(r.closed_seconds().len(), 2);
    assert_eq!(r.closed_seconds()[1].second, 1);
    r.finish();
    // Second 3 had nothing: not stored.
    assert_eq!(r.closed_seconds().len(), 2);
    let h = r.closed_seconds()[0].hist(Metric::Response).unwrap();
    assert_eq!(h.len(), 2);
    assert!(h.equivalent(h.max(), 5_000));
}

#[test]
fn censored_samples_count_and_enter_response_time() {
    let mut r = Recorder::new();
    let mut s = ok(2_000, 1_500);
    s.error = Some(ErrorKind::InFlight);
    s.first_byte_ns = 0;
    s.status = 0;
    r.record(&s);
    let mut t = ok(2_000, 30);
    t.error = Some(ErrorKind::Connect);
    r.record(&t);
    r.finish();
    assert_eq!(r.totals.counts.censored(), 1);
    assert_eq!(r.totals.counts.failed(), 2);
    assert_eq!(
        r.run[Metric::Response as usize].len(),
        1,
        "connect error has no latency"
    );
    assert!(r.run[Metric::Response as usize].max() >= 1_499_000);
    assert_eq!(r.run[Metric::Ttfb as usize].len(), 0);
    assert_eq!(r.run[Metric::SendLag as usize].len(), 2, "both were sent");
}

#[test]
fn merge_adds_histograms_and_joins_seconds() {
    let mut a = Recorder::new();
    let mut b = Recorder::new();
    a.record(&ok(500, 1));
    a.record(&ok(2_500, 2));
    b.record(&ok(1_500, 3));
    b.record(&ok(2_600, 4));
    b.connections(2_600_000_000, 7);
    let m = Recorder::merge_all(vec![a, b]).unwrap();
    let secs: Vec<u64> = m.closed_seconds().iter().map(|c| c.second).collect();
    assert_eq!(secs, vec![0, 1, 2]);
    let s2 = &m.closed_seconds()[2];
    assert_eq!(s2.counts.completed, 2);
    assert_eq!(s2.counts.max_open, 7);
    assert_eq!(s2.hist(Metric::Response).unwrap().len(), 2);
    assert_eq!(m.run[0].len(), 4);
    assert_eq!(m.totals.counts.completed, 4);
}

#[test]
fn closed_loop_service_time_is_stored_once_and_merges_correctly() {
    let mut a = Recorder::new();
    a.record(&ok(100, 3)); // closed loop: intended = sent
    let mut b = Recorder::new();
    let mut late = ok(200, 4);
    late.intended_ns -= 2_000_000; // open loop, 2 ms late: service != response
    b.record(&late);
    a.finish();
    b.finish();
    assert!(a.closed_seconds()[0].service_is_response);
    assert!(a.closed_seconds()[0].hists[Metric::Service as usize].is_empty());
    assert!(!b.closed_seconds()[0].service_is_response);
    let m = Recorder::merge_all(vec![a, b]).unwrap();
    let sec = &m.closed_seconds()[0];
    assert!(!sec.service_is_response);
    let (resp, serv) = (
        sec.hist(Metric::Response).unwrap(),
        sec.hist(Metric::Service).unwrap(),
    );
    assert_eq!((resp.len(), serv.len()), (2, 2));
    assert!(resp.equivalent(resp.max(), 6_000));
    assert!(serv.equivalent(serv.max(), 4_000));
}

#[test]
fn warmup_samples_and_events_are_kept_out_of_measured_figures() {
    // Warm-up 2 s: 30 samples intended before it (each 50 ms late, 40 ms long),
    // 10 after it (on time, 3 ms), and one intended just before the boundary that
    // finishes after it: warm-up too, since attribution is by intended instant.
    let mut r = Recorder::new().with_warmup(Duration::from_secs(2));
    for i in 0..30u64 {
        let mut s = ok(100 + i * 60, 40);
        s.intended_ns -= 50_000_000;
        s.connect_ns = 1_000;
        r.record(&s);
    }
    let mut straddle = ok(2_100, 150);
    straddle.connect_ns = 1_000;
    r.record(&straddle);
    r.connections(500_000_000, 64);
    r.connections(1_500_000_000, 512);
    r.cap_hit(1_000_000_000);
    r.cap_hit(1_200_000_000);
    r.tick(1_900_000_000);
    for i in 0..10u64 {
        r.record(&ok(2_010 + i * 250, 3));
    }
    r.cap_hit(2_500_000_000);
    r.connections(2_600_000_000, 100);
    r.finish();

    assert_eq!(r.warmup().samples, 31);
    assert_eq!(r.warmup().cap_hits, 2);
    assert_eq!(r.warmup().max_open, 512);
    assert_eq!(r.warmup().open_at_boundary, 512);
    let t = &r.totals;
    assert_eq!((t.counts.completed, t.sent), (10, 10));
    assert_eq!(t.counts.cap_hits, 1);
    assert_eq!(t.counts.max_open, 100);
    assert_eq!(t.opened, 0, "no measured request opened a connection");
    assert_eq!(r.run[Metric::Response as usize].len(), 10);
    assert!(
        r.run[Metric::Response as usize].max() < 3_100,
        "no 40 ms sample"
    );
    assert!(r.run[Metric::SendLag as usize].max() == 0, "no late sample");
    // Instants are measured from the boundary: the first measured sample was
    // intended at 2.007 s of run time, 7 ms after it.
    assert_eq!(t.first_intended_ns, 7_000_000);
    // Seconds start at the boundary: done at 2.01..4.26 s -> seconds 0, 1, 2.
    let secs: Vec<(u64, u64)> = r
        .closed_seconds()
        .iter()
        .map(|c| (c.second, c.counts.completed))
        .collect();
    assert_eq!(secs, vec![(0, 4), (1, 4), (2, 2)]);
    assert_eq!(r.sent_by_second, vec![4, 4, 2]);
    assert_eq!(r.scheduled_by_second, vec![4, 4, 2]);
}

#[test]
fn warmup_merges_and_refuses_mixed_boundaries() {
    let w = Duration::from_millis(500);
    let mut a = Recorder::new().with_warmup(w);
    let mut b = Recorder::new().with_warmup(w);
    a.record(&ok(100, 10));
    a.connections(300_000_000, 8);
    b.connections(400_000_000, 6);
    b.cap_hit(450_000_000);
    b.record(&ok(700, 10));
    let m = Recorder::merge_all(vec![a, b]).unwrap();
    assert_eq!(m.warmup().samples, 1);
    assert_eq!(m.warmup().cap_hits, 1);
    assert_eq!(m.warmup().max_open, 8);
    assert_eq!(m.warmup().open_at_boundary, 6, "the latest event wins");
    assert_eq!(m.completed(), 1);

    let plain = Recorder::new();
    let err = Recorder::merge_all(vec![Recorder::new().with_warmup(w), plain]);
    assert!(matches!(err, Err(MetricsError::WarmupMismatch { .. })));
}

#[test]
fn measured_requests_that_open_connections_are_counted() {
    let mut r = Recorder::new().with_warmup(Duration::from_secs(1));
    let mut opened = ok(1_500, 5);
    opened.connect_ns = 200_000;
    r.record(&opened);
    let mut refused = ok(1_600, 1);
    refused.error = Some(ErrorKind::Connect);
    r.record(&refused);
    r.record(&ok(1_700, 1));
    let mut warm = ok(900, 5);
    warm.connect_ns = 200_000;
    r.record(&warm);
    assert_eq!(r.totals.opened, 2);
}

#[test]
fn memory_is_flat_in_requests() {
    // 200k requests over 20 seconds: live histograms are reused, and what is kept per
    // closed second is a few hundred bytes, whatever the request count.
    let mut r = Recorder::new();
    for i in 0..200_000u64 {
        let done_ms = 1 + i / 10; // 10 per ms
        r.record(&ok(done_ms + 10, 1 + i % 7));
    }
    r.finish();
    assert_eq!(r.completed(), 200_000);
    assert_eq!(r.closed_seconds().len(), 21);
    let per_second = r.stored_bytes() / r.closed_seconds().len();
    assert!(per_second < 1_000, "stored {per_second} bytes per second");
}

/// Two workers' worth of samples over three seconds, with one error.
fn busy(worker: u64) -> Recorder {
    let mut r = Recorder::new();
    for i in 0..30u64 {
        let mut s = ok(50 + i * 100 + worker, 5 + i % 7);
        if i == 17 {
            s.error = Some(ErrorKind::Status);
            s.status = 503;
        }
        r.record(&s);
    }
    r
}

fn summary_json(r: Recorder) -> serde_json::Value {
    let info = crate::summary::tests::info(crate::Model::Closed, 3_000);
    serde_json::to_value(r.close(&info).unwrap()).unwrap()
}

#[test]
fn a_snapshot_rebuilds_the_same_summary() {
    let snap = busy(0).snapshot().unwrap();
    let back = Recorder::from_snapshot(snap, 0).unwrap();
    assert_eq!(summary_json(back), summary_json(busy(0)));
}

#[test]
fn a_shifted_snapshot_moves_every_window_and_merges_by_instant() {
    let snap = busy(0).snapshot().unwrap();
    let moved = Recorder::from_snapshot(snap, 4).unwrap();
    let seconds: Vec<u64> = moved.closed_seconds().iter().map(|c| c.second).collect();
    assert_eq!(seconds, vec![4, 5, 6]);
    assert_eq!(moved.sent_by_second[..4], [0, 0, 0, 0]);
    let mut merged = busy(1);
    merged.merge(moved).unwrap();
    assert_eq!(merged.completed(), 60);
    let seconds: Vec<u64> = merged.closed_seconds().iter().map(|c| c.second).collect();
    assert_eq!(
        seconds,
        vec![0, 1, 2, 4, 5, 6],
        "shifted windows stay apart"
    );
}

#[test]
fn streamed_windows_are_joined_once_each_and_add_up_to_the_merge() {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut a = Recorder::new().with_stream(SecondStream::new(0, tx.clone()));
    let mut b = Recorder::new().with_stream(SecondStream::new(1, tx));
    let mut joiner = SecondJoiner::new(2);
    let mut released: Vec<ClosedSecond> = Vec::new();
    let drain = |j: &mut SecondJoiner, out: &mut Vec<ClosedSecond>| {
        while let Ok(s) = rx.try_recv() {
            out.extend(j.push(s).unwrap());
        }
    };
    for i in 0..30u64 {
        a.record(&ok(50 + i * 100, 5));
        if i < 12 {
            b.record(&ok(60 + i * 100, 9));
        }
    }
    drain(&mut joiner, &mut released);
    // b is still in second 1 (it has not closed it): nothing past second 0 is whole.
    assert_eq!(
        released.iter().map(|c| c.second).collect::<Vec<_>>(),
        vec![0]
    );
    b.tick(2_100_000_000);
    drain(&mut joiner, &mut released);
    assert_eq!(
        released.len(),
        2,
        "b's tick closes second 1 and releases it"
    );
    a.finish();
    b.finish();
    drain(&mut joiner, &mut released);
    released.extend(joiner.finish().unwrap());
    let seconds: Vec<u64> = released.iter().map(|c| c.second).collect();
    assert_eq!(seconds, vec![0, 1, 2], "each second once, in order");
    let streamed: u64 = released.iter().map(|c| c.counts.completed).sum();
    a.drop_stream();
    b.drop_stream();
    let merged = Recorder::merge_all(vec![a, b]).unwrap();
    assert_eq!(streamed, merged.completed());
    assert_eq!(streamed, 42);
}

/// Two workers' samples, varied in latency and outcome, over 4 seconds.
fn feed(a: &mut Recorder, b: &mut Recorder) {
    for i in 0..40u64 {
        a.record(&ok(50 + i * 100, 1 + i % 7));
        let mut s = ok(70 + i * 95, 3 + i % 11);
        if i % 9 == 0 {
            s.error = Some(ErrorKind::Status);
            s.status = 503;
        }
        b.record(&s);
    }
    a.finish();
    b.finish();
}

#[test]
fn stream_only_recorders_keep_no_second_and_their_digests_give_the_same_summary() {
    use crate::summary::tests::info;
    use crate::Model;
    let (mut a, mut b) = (Recorder::new(), Recorder::new());
    feed(&mut a, &mut b);
    let full = Recorder::merge_all(vec![a, b]).unwrap();
    let model = Model::Open {
        rate_per_s: 20.0,
        arrival: "constant".into(),
    };
    let expected = full.close(&info(model.clone(), 4_000)).unwrap();

    let (tx, rx) = std::sync::mpsc::channel();
    let mut a = Recorder::new()
        .with_stream(SecondStream::new(0, tx.clone()))
        .stream_only();
    let mut b = Recorder::new()
        .with_stream(SecondStream::new(1, tx))
        .stream_only();
    feed(&mut a, &mut b);
    assert!(a.closed_seconds().is_empty() && b.closed_seconds().is_empty());
    a.drop_stream();
    b.drop_stream();
    let mut merged = Recorder::merge_all(vec![a, b]).unwrap();
    let mut joiner = SecondJoiner::new(2).keeping_digests();
    let mut released = 0;
    for s in rx {
        released += joiner.push(s).unwrap().len();
    }
    released += joiner.finish().unwrap().len();
    assert_eq!(released, 4);
    merged.set_digests(joiner.take_digests());
    let got = merged.close(&info(model, 4_000)).unwrap();
    assert_eq!(got.seconds, expected.seconds);
    assert_eq!(got.requests, expected.requests);
    assert_eq!(got.latency, expected.latency);
}

#[test]
fn a_snapshot_carries_digests_moved_with_its_shift() {
    let mut r = busy(0);
    r.finish();
    let d: Vec<SecondDigest> = r
        .closed_seconds()
        .iter()
        .map(|c| SecondDigest::of(c).unwrap())
        .collect();
    r.closed.clear();
    r.set_digests(d.clone());
    let moved = Recorder::from_snapshot(r.snapshot().unwrap(), 3).unwrap();
    let seconds: Vec<u64> = moved.kept_digests().iter().map(|x| x.second).collect();
    assert_eq!(seconds, vec![3, 4, 5]);
    assert_eq!(moved.kept_digests()[1].response_us, d[1].response_us);
}
