//! `volley report` end to end: a store written through `volley-store`, the real binary,
//! its files and its error lines and exit codes.

use serde_json::json;
use std::path::Path;
use std::process::{Command, Output};
use volley_store::{
    NewRun, NewStudy, RunKind, SeriesPoint, SeriesSource, Status, StepParameters, StepRecord, Store,
};

/// The test's own directory for its store and reports, removed when the test ends.
fn scratch_dir() -> crate::common::TestDir {
    crate::common::fresh_dir("volley-report-cli")
}

fn volley(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A study with two targets and two rate steps each.
fn write_store(path: &Path) {
    let mut store = Store::open(path).unwrap();
    let study = store
        .begin_study(&NewStudy {
            name: "cli".into(),
            file_text: String::new(),
        })
        .unwrap();
    for (target, replies) in [("builtin", [100.0, 150.0]), ("nginx", [100.0, 200.0])] {
        let run = store
            .begin_run(&NewRun {
                study: Some(study),
                kind: RunKind::StudyStep,
                target: target.into(),
                parameters: json!({}),
                environment: json!({"kernel": "test"}),
            })
            .unwrap();
        for (i, (rate, reply)) in [100.0, 200.0].into_iter().zip(replies).enumerate() {
            store
                .record_step(
                    run,
                    &StepRecord {
                        index: i as u32,
                        parameters: StepParameters {
                            rate_rps: Some(rate),
                            ..StepParameters::default()
                        },
                        summary: json!({
                            "model": {"kind": "open", "rate_per_s": rate},
                            "latency_definition": "response time = done - intended",
                            "duration_s": 5.0,
                            "requests": {"completed": (reply * 5.0) as u64,
                                         "ok": (reply * 5.0) as u64},
                            "throughput": {"requests_per_s": reply},
                            "rates": {"achieved_send_per_s": rate, "reply_per_s": reply},
                            "latency": {"response_time": {"min_ms": 1.0, "mean_ms": 2.0,
                                "p50_ms": 2.0, "p99_ms": 5.0, "max_ms": 9.0}},
                            "connections_stats": {"max_open": 4, "cap_hits": 0}
                        }),
                        verdict: Some(json!({"sustain": {"sustainable": reply >= 0.99 * rate,
                            "reasons": [], "bound": "server_bound", "trend": null}})),
                        label: Some("server-bound".into()),
                        started_unix_ms: i as i64 * 10_000,
                        finished_unix_ms: i as i64 * 10_000 + 5_000,
                        series: (0..5)
                            .map(|s| SeriesPoint {
                                second: s,
                                source: SeriesSource::Load,
                                values: json!({"second": s, "completed": reply as u64,
                                    "p50_ms": 2.0, "p99_ms": 5.0, "max_ms": 9.0}),
                            })
                            .collect(),
                        histograms: Vec::new(),
                    },
                )
                .unwrap();
        }
        store.finish_run(run, Status::Complete).unwrap();
    }
    store.finish_study(study, Status::Complete).unwrap();
}

#[test]
fn writes_html_markdown_and_json_for_a_study() {
    let dir = scratch_dir();
    let db = dir.join("study.db");
    write_store(&db);
    let (html, md, js) = (dir.join("r.html"), dir.join("r.md"), dir.join("r.json"));
    let o = volley(&[
        "report",
        "study:1",
        "--db",
        db.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "--md",
        md.to_str().unwrap(),
        "--json",
        js.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.contains("| Rate (req/s) | builtin replies/s | nginx replies/s |"));
    assert!(md.contains("| 200 | 150.0 | 200.0 |"), "{md}");
    assert!(
        md.contains("| builtin | all steps | 100.0 | 200.0 | 2 | 0 | 0 | - |"),
        "{md}"
    );
    let html = std::fs::read_to_string(html).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<svg"));
    assert!(html.contains("Replies/s vs requests/s"));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(js).unwrap()).unwrap();
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["targets"].as_array().unwrap().len(), 2);

    // No output flag: Markdown on stdout. A single run works too.
    let o = volley(&["report", "2", "--db", db.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("# volley report: run 2: nginx"), "{out}");
}

#[test]
fn mistakes_get_one_line_and_exit_2() {
    let dir = scratch_dir();
    let missing = dir.join("missing.db");
    let o = volley(&["report", "1", "--db", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o).trim(),
        format!(
            "volley: no results store at {} (pass --db PATH)",
            missing.display()
        )
    );
    assert!(!missing.exists(), "a report must not create a store");

    let empty = dir.join("empty.db");
    drop(Store::open(&empty).unwrap());
    let o = volley(&["report", "1", "--db", empty.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("holds no runs yet"), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1);

    let db = dir.join("errors.db");
    write_store(&db);
    for (what, expected) in [
        (
            "7",
            "volley: no run 7 in the results store (see `volley history`)",
        ),
        (
            "study:9",
            "volley: no study 9 in the results store (see `volley history`)",
        ),
        (
            "nginx",
            "volley: 'nginx' is not a run id or study:ID (see `volley history`)",
        ),
    ] {
        let o = volley(&["report", what, "--db", db.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{what}");
        assert_eq!(stderr(&o).trim(), expected);
    }
}

#[test]
fn no_run_given_means_the_newest_and_open_uses_the_browser() {
    let dir = scratch_dir();
    let db = dir.join("latest.db");
    write_store(&db);
    let o = volley(&["report", "--db", db.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("# volley report: study 1: cli"), "{out}");

    // A browser that writes down what it was asked to open.
    let seen = dir.join("browser-saw.txt");
    let browser = dir.join("browser.sh");
    std::fs::write(
        &browser,
        format!("#!/bin/sh\nprintf '%s' \"$1\" > '{}'\n", seen.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&browser, std::fs::Permissions::from_mode(0o755)).unwrap();
    let html = dir.join("opened.html");
    let o = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["report", "--db", db.to_str().unwrap(), "--open", "--html"])
        .arg(&html)
        .env("BROWSER", &browser)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap(),
        html.to_str().unwrap()
    );
    assert!(std::fs::read_to_string(&html)
        .unwrap()
        .contains("<!DOCTYPE html>"));

    // No browser at all: the report is still written, and the user is told where.
    let o = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["report", "1", "--db", db.to_str().unwrap(), "--open"])
        // The report goes to the temporary directory: this test's own, so it goes too.
        .env("TMPDIR", &*dir)
        .env_remove("BROWSER")
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("no browser to open"), "{err}");
    let written = err
        .lines()
        .find_map(|l| l.strip_prefix("volley: wrote html report to "))
        .unwrap();
    assert!(std::fs::read_to_string(written)
        .unwrap()
        .contains("run 1: builtin"));
    assert!(Path::new(written).starts_with(&*dir), "{written}");
}

#[test]
fn report_and_compare_read_one_selector_grammar() {
    let dir = scratch_dir();
    let db = dir.join("selectors.db");
    write_store(&db);
    let db = db.to_str().unwrap();
    // The study by id or name, one of its targets, for both commands.
    for what in ["study:1", "study:cli"] {
        let o = volley(&["report", what, "--db", db]);
        assert!(o.status.success(), "{what}: {}", stderr(&o));
    }
    for (what, title) in [
        ("study:1:nginx", "# volley report: run 2: nginx"),
        ("study:cli:builtin", "# volley report: run 1: builtin"),
        ("cli:nginx", "# volley report: run 2: nginx"),
        ("label:nginx", "# volley report: run 2: nginx"),
    ] {
        let o = volley(&["report", what, "--db", db]);
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.starts_with(title), "{what}: {out}");
    }
    let o = volley(&["compare", "study:1:builtin", "study:1:nginx", "--db", db]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("builtin") && out.contains("nginx"), "{out}");
    for what in ["study:1:caddy", "study:nope", "label:nope"] {
        let o = volley(&["compare", what, "1", "--db", db]);
        assert_eq!(o.status.code(), Some(2), "{what}");
        assert_eq!(stderr(&o).lines().count(), 1, "{what}: {}", stderr(&o));
    }
    // A study of two runs names neither alone.
    let o = volley(&["compare", "study:1", "1", "--db", db]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("study:1:"), "{}", stderr(&o));
}

/// `volley history` of a run with several searches (here two variants) says what each
/// searched, as `volley compare` meets them; a run with one search shows it alone.
#[test]
fn history_names_each_search_of_a_run_with_several() {
    let dir = scratch_dir();
    let db = dir.join("searches.db");
    let store = Store::open(&db).unwrap();
    for (target, variants) in [
        ("tuned-web", &["default", "tuned"][..]),
        ("single", &["default"][..]),
    ] {
        let run = store
            .begin_run(&NewRun {
                study: None,
                kind: RunKind::StudyStep,
                target: target.into(),
                parameters: json!({}),
                environment: json!({}),
            })
            .unwrap();
        for (i, v) in variants.iter().enumerate() {
            let rps = 1000.0 + 500.0 * i as f64;
            store
                .record_capacity(
                    run,
                    &volley_store::CapacityRecord {
                        cell: json!({"workload": "w", "concurrency": 16, "variant": v}),
                        capacity_rps: Some(rps),
                        ci_lo_rps: Some(rps - 50.0),
                        ci_hi_rps: Some(rps + 50.0),
                        confidence: 0.95,
                        end: volley_store::SearchEnd::Converged,
                        steps: 7,
                        started_unix_ms: 0,
                        finished_unix_ms: 1,
                        detail: json!({}),
                    },
                )
                .unwrap();
        }
        store.finish_run(run, Status::Complete).unwrap();
    }
    drop(store);
    let o = volley(&["history", "--db", db.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let row = |target: &str| {
        out.lines()
            .find(|l| l.contains(target))
            .unwrap_or_else(|| panic!("no row for {target}: {out}"))
            .to_string()
    };
    let tuned = row("tuned-web");
    assert!(
        tuned.contains("workload w, concurrency 16, variant default: 1000 req/s")
            && tuned.contains("workload w, concurrency 16, variant tuned: 1500 req/s"),
        "{tuned}"
    );
    let one = row("single");
    assert!(
        !one.contains("workload w") && one.contains("1000 req/s"),
        "{one}"
    );
}
