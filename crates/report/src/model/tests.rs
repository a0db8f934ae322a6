use super::*;
use volley_store::StudyId;

#[test]
fn selector_parses_runs_and_studies() {
    assert_eq!(Selector::parse("12").unwrap(), Selector::Run(RunId(12)));
    assert_eq!(
        Selector::parse("study:3").unwrap(),
        Selector::Study(StudyId(3))
    );
    assert!(matches!(
        Selector::parse("study:x"),
        Err(ReportError::BadSelector(_))
    ));
    assert!(matches!(
        Selector::parse("nginx"),
        Err(ReportError::BadSelector(_))
    ));
}

#[test]
fn percentile_points_rise_and_end_at_max() {
    let mut h = hist::new_hist();
    for v in 1..=10_000u64 {
        h.record(v).unwrap();
    }
    let pts = percentile_points(&h);
    assert_eq!(pts[0].0, 0.0);
    assert!(pts.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
    let (p, ms) = *pts.last().unwrap();
    assert!(p > 99.98 && p < 100.0, "{p}");
    assert!((ms - 10.0).abs() < 0.02, "{ms}");
    // p90 of 1..=10000 us is ~9 ms.
    let p90 = pts.iter().find(|(p, _)| (*p - 90.0).abs() < 1e-9).unwrap();
    assert!((p90.1 - 9.0).abs() < 0.02, "{p90:?}");
}

#[test]
fn lenient_reading_tolerates_missing_and_odd_fields() {
    let s: StoredSummary = lenient(&serde_json::json!({"duration_s": 2.0, "requests": 5}));
    // A wrong-shaped field makes the whole value fall back to default.
    assert_eq!(s.duration_s, 0.0);
    let s: StoredSummary = lenient(&serde_json::json!({"duration_s": 2.0}));
    assert_eq!(s.duration_s, 2.0);
    assert_eq!(s.requests.completed, 0);
}

#[test]
fn series_fields_are_read_one_by_one() {
    let v = serde_json::json!({"p99_ms": 2.5, "completed": 10.5, "target": {"rss_bytes": 4096}});
    assert_eq!(field(&v, &["p99_ms"]), Some(2.5));
    assert_eq!(field(&v, &["completed"]), Some(10.5));
    assert_eq!(field(&v, &["target", "rss_bytes"]), Some(4096.0));
    assert_eq!(field(&v, &["net", "tx_bytes_per_s"]), None);
}

#[test]
fn trim_num_drops_trailing_zeros() {
    assert_eq!(trim_num(0.5), "0.5");
    assert_eq!(trim_num(2.0), "2");
    assert_eq!(trim_num(1.25), "1.25");
}

#[test]
fn latest_is_the_newest_study_or_stand_alone_run() {
    use volley_store::{NewRun, NewStudy, RunKind};
    let store = Store::open_in_memory().unwrap();
    assert!(matches!(
        Selector::latest(&store),
        Err(ReportError::EmptyStore)
    ));
    let study = store
        .begin_study(&NewStudy {
            name: "s".into(),
            file_text: String::new(),
        })
        .unwrap();
    let run = |study| NewRun {
        study,
        kind: RunKind::Bench,
        target: "t".into(),
        parameters: serde_json::json!({}),
        environment: serde_json::json!({}),
    };
    // A study's own runs never stand alone.
    store.begin_run(&run(Some(study))).unwrap();
    assert_eq!(Selector::latest(&store).unwrap(), Selector::Study(study));
    std::thread::sleep(std::time::Duration::from_millis(5));
    let bench = store.begin_run(&run(None)).unwrap();
    assert_eq!(Selector::latest(&store).unwrap(), Selector::Run(bench));
    assert_eq!(Selector::Run(bench).to_string(), bench.to_string());
    assert_eq!(
        Selector::parse(&Selector::Study(study).to_string()).unwrap(),
        Selector::Study(study)
    );
}
