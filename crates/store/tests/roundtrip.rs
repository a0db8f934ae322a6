//! Everything written comes back as written; status rules and schema versioning hold.

mod common;

use common::{step, TempDir};
use serde_json::json;
use volley_store::{
    HistogramKind, NewRun, NewStudy, RunKind, SeriesSource, Status, Store, StoreError,
    SCHEMA_VERSION,
};

fn new_run(study: Option<volley_store::StudyId>) -> NewRun {
    NewRun {
        study,
        kind: if study.is_some() {
            RunKind::StudyStep
        } else {
            RunKind::Bench
        },
        target: "http://127.0.0.1:8080/".to_owned(),
        parameters: json!({"model": "open", "rate": 1000, "arrival": "poisson", "seed": 7}),
        environment: json!({"kernel": "6.1.0", "cpu": "test cpu", "governor": null}),
    }
}

#[test]
fn study_run_steps_series_histograms_round_trip() {
    let dir = TempDir::new("roundtrip");
    let (study, run, step_ids) = {
        let mut store = Store::open(dir.db()).unwrap();
        let study = store
            .begin_study(&NewStudy {
                name: "knee".into(),
                file_text: "[study]\nname = 'knee'\n".into(),
            })
            .unwrap();
        let run = store.begin_run(&new_run(Some(study))).unwrap();
        let ids: Vec<_> = (0..4)
            .map(|i| store.record_step(run, &step(i)).unwrap())
            .collect();
        store.finish_run(run, Status::Complete).unwrap();
        store.finish_study(study, Status::Complete).unwrap();
        (study, run, ids)
    };

    // Reopen: everything reads back from the file, not from memory.
    let store = Store::open(dir.db()).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    let s = store.study(study).unwrap();
    assert_eq!((s.name.as_str(), s.status), ("knee", Status::Complete));
    assert_eq!(s.file_text, "[study]\nname = 'knee'\n");
    assert!(s.finished_unix_ms.unwrap() >= s.started_unix_ms);
    assert_eq!(store.list_studies().unwrap(), vec![s]);

    let r = store.run(run).unwrap();
    let expected = new_run(Some(study));
    assert_eq!(r.study, Some(study));
    assert_eq!(r.kind, RunKind::StudyStep);
    assert_eq!(
        (r.target.as_str(), &r.parameters, &r.environment),
        (
            expected.target.as_str(),
            &expected.parameters,
            &expected.environment
        )
    );
    assert_eq!(r.status, Status::Complete);
    assert_eq!(store.list_runs().unwrap(), vec![r.clone()]);
    assert_eq!(store.runs_of_study(study).unwrap(), vec![r]);

    let steps = store.steps(run).unwrap();
    assert_eq!(steps.len(), 4);
    for (i, row) in steps.iter().enumerate() {
        let want = step(i as u32);
        assert_eq!(row.id, step_ids[i]);
        assert_eq!(row.run, run);
        assert_eq!(row.index, want.index);
        assert_eq!(row.parameters, want.parameters);
        assert_eq!(row.summary, want.summary);
        assert_eq!(row.verdict, want.verdict);
        assert_eq!(row.label, want.label);
        assert_eq!(
            (row.started_unix_ms, row.finished_unix_ms),
            (want.started_unix_ms, want.finished_unix_ms)
        );

        let mut series = store.series(row.id).unwrap();
        let mut want_series = want.series.clone();
        let key = |p: &volley_store::SeriesPoint| (p.source.as_str(), p.second);
        series.sort_by_key(key);
        want_series.sort_by_key(key);
        assert_eq!(series, want_series);

        let mut hists = store.histograms(row.id).unwrap();
        let mut want_hists = want.histograms.clone();
        let hkey = |h: &volley_store::HistogramBlob| (h.second, h.kind.as_str());
        hists.sort_by_key(hkey);
        want_hists.sort_by_key(hkey);
        assert_eq!(hists, want_hists);
    }
    // Ordering promised by the queries: whole-step histograms first, series by source.
    let hists = store.histograms(step_ids[0]).unwrap();
    assert_eq!(hists[0].second, None);
    assert_eq!(hists.last().unwrap().second, Some(2));
    assert!(hists.iter().any(|h| h.kind == HistogramKind::SendLag));
    let series = store.series(step_ids[0]).unwrap();
    assert_eq!(series[0].source, SeriesSource::Load);
    assert_eq!(series.last().unwrap().source, SeriesSource::Monitor);
}

#[test]
fn bench_run_without_study_and_unknown_step_parameters_survive() {
    let mut store = Store::open_in_memory().unwrap();
    let run = store.begin_run(&new_run(None)).unwrap();
    let mut s = step(0);
    s.parameters.extra.insert("body_bytes".into(), json!(4096));
    s.verdict = None;
    s.label = None;
    s.series.clear();
    s.histograms.clear();
    let id = store.record_step(run, &s).unwrap();
    let row = &store.steps(run).unwrap()[0];
    assert_eq!(row.parameters.extra.get("body_bytes"), Some(&json!(4096)));
    assert_eq!((row.verdict.as_ref(), row.label.as_ref()), (None, None));
    assert!(store.series(id).unwrap().is_empty());
    assert!(store.histograms(id).unwrap().is_empty());
    assert_eq!(store.run(run).unwrap().study, None);
    assert_eq!(
        store.run(run).unwrap().status,
        Status::Running,
        "this process is alive"
    );
}

#[test]
fn finished_runs_reject_steps_and_second_finish() {
    let mut store = Store::open_in_memory().unwrap();
    let run = store.begin_run(&new_run(None)).unwrap();
    store.finish_run(run, Status::Incomplete).unwrap();
    assert!(matches!(
        store.record_step(run, &step(0)),
        Err(StoreError::NotRunning { .. })
    ));
    assert!(matches!(
        store.finish_run(run, Status::Complete),
        Err(StoreError::NotRunning { .. })
    ));
    assert_eq!(store.run(run).unwrap().status, Status::Incomplete);

    let other = store.begin_run(&new_run(None)).unwrap();
    assert!(matches!(
        store.finish_run(other, Status::Running),
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        store.record_step(volley_store::RunId(999), &step(0)),
        Err(StoreError::NotFound {
            what: "run",
            id: 999
        })
    ));
    assert!(matches!(
        store.run(volley_store::RunId(999)),
        Err(StoreError::NotFound { .. })
    ));

    let study = store
        .begin_study(&NewStudy {
            name: "s".into(),
            file_text: String::new(),
        })
        .unwrap();
    store.finish_study(study, Status::Complete).unwrap();
    assert!(matches!(
        store.begin_run(&new_run(Some(study))),
        Err(StoreError::NotRunning { .. })
    ));
}

/// A run stopped before it measured anything is removed whole, the seconds it stored
/// as they closed with it; a run with a step, or one already finished, is refused.
#[test]
fn a_run_with_no_step_is_discarded_whole_and_one_with_a_step_is_kept() {
    let mut store = Store::open_in_memory().unwrap();
    let kept = store.begin_run(&new_run(None)).unwrap();
    let empty = store.begin_run(&new_run(None)).unwrap();
    let second = volley_store::LiveSecond {
        step_index: 0,
        second: 0,
        values: json!({"requests": 3}),
        histograms: vec![],
    };
    store.record_live_second(empty, &second).unwrap();
    store.discard_run(empty).unwrap();
    assert!(matches!(
        store.run(empty),
        Err(StoreError::NotFound { what: "run", .. })
    ));
    assert!(store.live_seconds(empty, 0).unwrap().is_empty());
    assert_eq!(store.list_runs().unwrap().len(), 1);

    store.record_step(kept, &step(0)).unwrap();
    assert!(matches!(
        store.discard_run(kept),
        Err(StoreError::Invalid(_))
    ));
    store.finish_run(kept, Status::Complete).unwrap();
    assert!(matches!(
        store.discard_run(kept),
        Err(StoreError::NotRunning { .. })
    ));
    assert_eq!(store.steps(kept).unwrap().len(), 1);
}

#[test]
fn a_failed_step_write_leaves_nothing_behind() {
    let mut store = Store::open_in_memory().unwrap();
    let run = store.begin_run(&new_run(None)).unwrap();
    // Two histograms for the same (kind, second) slot violate the unique index after the
    // step row and its series are inserted: the whole transaction must roll back.
    let mut bad = step(1);
    let dup = bad.histograms[0].clone();
    bad.histograms.push(dup);
    assert!(matches!(
        store.record_step(run, &bad),
        Err(StoreError::Sqlite(_))
    ));
    assert!(store.steps(run).unwrap().is_empty());
    // The same index can then be written properly; a duplicate index is refused.
    store.record_step(run, &step(1)).unwrap();
    assert!(store.record_step(run, &step(1)).is_err());
    assert_eq!(store.steps(run).unwrap().len(), 1);
}

#[test]
fn schema_is_versioned_and_newer_files_are_refused() {
    let dir = TempDir::new("schema");
    drop(Store::open(dir.db()).unwrap());
    // Reopening an up-to-date file applies nothing and keeps the version.
    assert_eq!(
        Store::open(dir.db()).unwrap().schema_version().unwrap(),
        SCHEMA_VERSION
    );
    {
        let conn = rusqlite::Connection::open(dir.db()).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let sync: i64 = conn
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .unwrap();
        assert!(
            sync >= 1,
            "a fresh connection's default; the store sets FULL on its own"
        );
    }
    match Store::open(dir.db()) {
        Err(StoreError::NewerSchema { found, supported }) => {
            assert_eq!((found, supported), (SCHEMA_VERSION + 1, SCHEMA_VERSION));
        }
        other => panic!("expected NewerSchema, got {other:?}"),
    }
}

#[test]
fn unknown_values_in_the_file_are_typed_errors() {
    let dir = TempDir::new("unknown");
    let run = {
        let store = Store::open(dir.db()).unwrap();
        let run = store.begin_run(&new_run(None)).unwrap();
        store.finish_run(run, Status::Complete).unwrap();
        run
    };
    {
        let conn = rusqlite::Connection::open(dir.db()).unwrap();
        conn.execute(
            "UPDATE runs SET parameters = 'not json' WHERE id = ?1",
            [run.0],
        )
        .unwrap();
    }
    let store = Store::open(dir.db()).unwrap();
    assert!(matches!(
        store.run(run),
        Err(StoreError::Json {
            column: "runs.parameters",
            ..
        })
    ));
}

fn capacity(end: volley_store::SearchEnd) -> volley_store::CapacityRecord {
    volley_store::CapacityRecord {
        cell: json!({"instance": "nginx cpu=25%", "workload": "root", "concurrency": 16,
                     "keepalive": true, "cpu_quota_cores": 0.25, "cores": "0"}),
        capacity_rps: Some(2987.5),
        ci_lo_rps: Some(2900.0),
        ci_hi_rps: Some(3093.75),
        confidence: 0.95,
        end,
        steps: 9,
        started_unix_ms: 1_700_000_000_000,
        finished_unix_ms: 1_700_000_042_000,
        detail: json!({"probes": [{"rate_rps": 1000.0, "sustainable": 1, "runs": 1}]}),
    }
}

#[test]
fn capacities_round_trip_in_order_and_need_a_running_run() {
    use volley_store::SearchEnd;
    let dir = TempDir::new("capacity");
    let (run, ids) = {
        let store = Store::open(dir.db()).unwrap();
        let run = store.begin_run(&new_run(None)).unwrap();
        let a = store
            .record_capacity(run, &capacity(SearchEnd::Converged))
            .unwrap();
        let mut partial = capacity(SearchEnd::Interrupted);
        partial.ci_lo_rps = None;
        partial.ci_hi_rps = None;
        let b = store.record_capacity(run, &partial).unwrap();
        store.finish_run(run, Status::Incomplete).unwrap();
        // A finished run takes no more results.
        assert!(matches!(
            store.record_capacity(run, &capacity(SearchEnd::Converged)),
            Err(StoreError::NotRunning { .. })
        ));
        (run, vec![a, b])
    };
    let store = Store::open(dir.db()).unwrap();
    let rows = store.capacities(run).unwrap();
    assert_eq!(rows.iter().map(|r| r.id).collect::<Vec<_>>(), ids);
    assert_eq!(rows[0].run, run);
    assert_eq!(rows[0].record, capacity(SearchEnd::Converged));
    assert_eq!(rows[1].record.end, SearchEnd::Interrupted);
    assert_eq!(rows[1].record.ci_lo_rps, None);
    // Bad figures are refused before anything is written.
    let other = store.begin_run(&new_run(None)).unwrap();
    let mut bad = capacity(SearchEnd::Converged);
    bad.capacity_rps = Some(f64::NAN);
    assert!(matches!(
        store.record_capacity(other, &bad),
        Err(StoreError::Invalid(_))
    ));
    bad = capacity(SearchEnd::Converged);
    bad.confidence = 95.0;
    assert!(store.record_capacity(other, &bad).is_err());
    assert!(store.capacities(other).unwrap().is_empty());
    // An end this build does not know is a typed error, not a panic.
    drop(store);
    let conn = rusqlite::Connection::open(dir.db()).unwrap();
    conn.execute_batch(
        "PRAGMA ignore_check_constraints = ON; UPDATE capacities SET search_end = 'warp'",
    )
    .unwrap();
    drop(conn);
    let store = Store::open(dir.db()).unwrap();
    assert!(matches!(
        store.capacities(run),
        Err(StoreError::UnknownValue { .. })
    ));
}
