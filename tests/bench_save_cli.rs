//! `volley bench --save`: a bench run kept in the store is listed by `volley history`,
//! compared by `volley compare` and reported by `volley report`, as a study's runs are.
//! Against an in-process test server on loopback.

use std::path::Path;
use std::process::Command;

use volley_faultserver::{Behaviour, FaultServer};
use volley_store::{RunKind, SeriesSource, Status, Store};

fn volley(args: &[&str], db: &Path) -> (String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(args)
        .arg("--db")
        .arg(db)
        .env_remove("COLUMNS")
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert!(o.status.success(), "{args:?}\n{out}\n{err}");
    (out, err)
}

#[test]
fn saved_bench_runs_work_with_history_compare_and_report() {
    let server = FaultServer::start(Behaviour::Ok {
        body_len: 700,
        keep_alive: true,
    })
    .unwrap();
    let dir = crate::common::fresh_dir("volley-bench-save");
    let db = dir.join("v.db");
    let url = server.url("/");
    let (_, err) = volley(
        &[
            "bench",
            &url,
            "-k",
            "-c",
            "2",
            "-d",
            "1s",
            "--repeat",
            "2",
            "--cooldown",
            "0s",
            "-q",
            "--save",
            "--label",
            "before",
        ],
        &db,
    );
    assert!(err.contains("saved as run 1 in"), "{err}");
    volley(
        &[
            "bench", &url, "-k", "-c", "4", "--rate", "200", "-d", "1s", "-q", "--save",
        ],
        &db,
    );

    // What was stored: a bench run, no study, one step per measured run, with series
    // and histograms.
    let store = Store::open(&db).unwrap();
    let runs = store.list_runs().unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs
        .iter()
        .all(|r| r.kind == RunKind::Bench && r.study.is_none()));
    assert!(runs.iter().all(|r| r.status == Status::Complete));
    assert_eq!(
        (runs[0].target.as_str(), runs[1].target.as_str()),
        ("before", url.as_str())
    );
    assert_eq!(runs[1].parameters["rate"], 200.0);
    let steps = store.steps(runs[0].id).unwrap();
    assert_eq!(steps.len(), 2);
    for s in &steps {
        assert!(s.summary["throughput"]["requests_per_s"].as_f64().unwrap() > 0.0);
        assert!(!store.histograms(s.id).unwrap().is_empty());
        let series = store.series(s.id).unwrap();
        assert!(series.iter().any(|p| p.source == SeriesSource::Load));
    }
    drop(store);

    let (h, _) = volley(&["history"], &db);
    assert!(
        h.contains("bench/before") && h.contains(&format!("bench/{url}")),
        "{h}"
    );
    // Each saved run's answer, the sentence its report gives.
    let (md, _) = volley(&["report", "1"], &db);
    let answer = h
        .lines()
        .find_map(|l| l.strip_prefix("run 1 (before): "))
        .unwrap_or_else(|| panic!("no answer of run 1: {h}"));
    assert!(
        answer.starts_with("before: ") && md.contains(&format!("**{answer}**")),
        "{answer}\n{md}"
    );

    // A closed loop and an open loop share no point: compare says so in one line
    // rather than ranking unlike figures (like with like, docs/methodology.md).
    let unlike = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["compare", "1", "2", "--metric", "p99", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&unlike.stderr);
    assert_eq!(unlike.status.code(), Some(2), "{err}");
    assert!(err.contains("share no measured point"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // A run against itself matches every point.
    let (c, _) = volley(&["compare", "1", "1", "--metric", "p99"], &db);
    assert!(c.contains("A/B ratio of medians"), "{c}");
    assert!(
        c.lines()
            .any(|l| l.starts_with("A ") && l.contains("before")),
        "{c}"
    );

    let html = dir.join("r.html");
    let (_, err) = volley(&["report", "1", "--html", html.to_str().unwrap()], &db);
    assert!(err.contains("wrote html report"), "{err}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("run 1: before"), "{page}");
    // No run named: the newest, the rate run.
    let (md, _) = volley(&["report"], &db);
    assert!(md.starts_with("# volley report: run 2: "), "{md}");
}

#[test]
fn save_flags_need_save() {
    let o = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["bench", "http://127.0.0.1:9/", "--label", "x"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// A run whose every answer failed (a server answering 503 to everything) is a result
/// too: stored whole, errors by kind included, and reported (not "nothing to report");
/// the command still exits 1 since nothing succeeded.
#[test]
fn a_run_whose_every_answer_failed_is_stored_and_reported() {
    let server = FaultServer::start(Behaviour::Status(503)).unwrap();
    let dir = crate::common::fresh_dir("volley-bench-save-503");
    let db = dir.join("v.db");
    let o = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args([
            "bench",
            &server.url("/"),
            "-c",
            "2",
            "-d",
            "1s",
            "-q",
            "--save",
            "--db",
        ])
        .arg(&db)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no request succeeded") && err.contains("saved as run 1"),
        "{err}"
    );
    let store = Store::open(&db).unwrap();
    let run = &store.list_runs().unwrap()[0];
    assert_eq!(run.status, Status::Complete);
    let steps = store.steps(run.id).unwrap();
    assert_eq!(steps.len(), 1);
    let s = &steps[0].summary;
    assert_eq!(s["requests"]["ok"], 0, "{s}");
    assert!(s["errors"]["status"].as_u64().unwrap() > 0, "{s}");
    drop(store);
    let (md, _) = volley(&["report"], &db);
    assert!(md.starts_with("# volley report: run 1: "), "{md}");
    assert!(
        !md.contains("nothing to report") && md.contains("| Failed |"),
        "{md}"
    );
}

/// The path is checked by the run's own first answer, with no request of its own: a
/// URL the server answers 404 ends the run at that answer (one line, exit 2, far fewer
/// requests than asked, the saved run removed: history lists none), and a path it has
/// sends exactly the run's requests, so the server's count equals volley's.
#[test]
fn bench_checks_the_path_by_its_first_answer_and_sends_nothing_extra() {
    use crate::common::volley as run;
    let missing = FaultServer::start(Behaviour::Status(404)).unwrap();
    let dir = crate::common::fresh_dir("volley-bench-404");
    let db = dir.join("v.db");
    let gone = missing.url("/gone.html");
    let (code, _, err) = run(&[
        "bench",
        &gone,
        "-n",
        "5000",
        "-c",
        "1",
        "--save",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("GET /gone.html answered 404 (its first answer in the run)")
            && err.contains("measured nothing"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    let sent = missing.stats().requests;
    assert!(
        (1..100).contains(&sent),
        "the run stopped at its first answers, not after 5000: {sent}"
    );
    // It measured nothing: the saved run is removed, and history lists none.
    let store = Store::open(&db).unwrap();
    assert!(store.list_runs().unwrap().is_empty());
    drop(store);
    let (code, out, err) = run(&["history", "--db", db.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("(no runs yet)"), "{out}");
    // With --first-request, its cold request is the check: refused before the run,
    // with that one request and no other.
    let (code, _, err) = run(&["bench", &gone, "-n", "50", "--first-request"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("answered 404 (the cold request"), "{err}");
    assert_eq!(missing.stats().requests - sent, 1);

    // A path it has: the server sees the run's 50 requests and no other.
    let ok = FaultServer::start(Behaviour::Ok {
        body_len: 700,
        keep_alive: true,
    })
    .unwrap();
    let (code, out, err) = run(&["bench", &ok.url("/"), "-n", "50", "-c", "2", "--json", "-"]);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let r = json.get("runs").and_then(|r| r.get(0)).unwrap_or(&json);
    assert_eq!(r["requests"]["completed"], 50, "{r}");
    assert_eq!(ok.stats().requests, 50, "no request beside the run's");

    // A 503 first is the server's trouble, not the path: the run goes on and is
    // measured (every request of it), exit 1 since none succeeded.
    let busy = FaultServer::start(Behaviour::Status(503)).unwrap();
    let (code, _, _) = run(&["bench", &busy.url("/"), "-n", "40", "-c", "1", "-q"]);
    assert_eq!(code, 1);
    assert_eq!(busy.stats().requests, 40);
}

/// With `--target`, a path the served docroot does not have is refused before any
/// server starts: one line, exit 2 (a study checks its paths before its first step).
#[test]
fn bench_target_checks_the_path_before_anything_starts() {
    let o = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args([
            "bench",
            "--target",
            "builtin",
            "--path",
            "/no-such.html",
            "-n",
            "5",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("/no-such.html") && err.contains("404"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}

/// Each second is stored as it closes: a `bench --save` killed mid-run (SIGKILL, no
/// chance to write anything at the end) leaves every second it had closed in the store,
/// with its histograms, and the next open marks the run incomplete (issue 26).
#[test]
fn a_bench_save_killed_mid_run_keeps_its_seconds_and_is_marked_cut_short() {
    let server = FaultServer::start(Behaviour::Ok {
        body_len: 100,
        keep_alive: true,
    })
    .unwrap();
    let dir = crate::common::fresh_dir("volley-bench-save-kill");
    let db = dir.join("v.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args([
            "bench",
            &server.url("/"),
            "-k",
            "--rate",
            "40",
            "-d",
            "120s",
            "-q",
            "--save",
            "--db",
        ])
        .arg(&db)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait (bounded) until at least 3 seconds are stored, read from another connection
    // while the run goes.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut stored = 0;
    while stored < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(300));
        if let Ok(store) = Store::open_read(&db) {
            if let Some(run) = store.list_runs().ok().and_then(|r| r.first().cloned()) {
                stored = store.live_seconds(run.id, 0).map_or(0, |s| s.len());
            }
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(stored >= 3, "only {stored} seconds stored within 60 s");

    let store = Store::open(&db).unwrap();
    store.mark_incomplete_on_open().unwrap();
    let run = &store.list_runs().unwrap()[0];
    assert_eq!(run.status, Status::Incomplete);
    assert!(store.steps(run.id).unwrap().is_empty());
    let seconds = store.live_seconds(run.id, 0).unwrap();
    assert!(seconds.len() >= stored, "{} < {stored}", seconds.len());
    let requests: u64 = seconds
        .iter()
        .map(|s| s.values["counts"]["completed"].as_u64().unwrap())
        .sum();
    assert!(
        requests >= 40,
        "{requests} requests in {} seconds",
        seconds.len()
    );
    for (i, s) in seconds.iter().enumerate() {
        assert_eq!(s.second as usize, i, "every second in order, none skipped");
        assert_eq!(s.histograms.len(), 7, "second {i}: one histogram per kind");
    }
    drop(store);
    // The history lists it as cut short.
    let (out, _) = volley(&["history"], &db);
    assert!(out.contains("incomplete"), "{out}");
}
