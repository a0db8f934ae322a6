//! `volley study run`, `volley history` and `volley compare` driven as a user would, against
//! in-process test servers (volley-faultserver) on loopback: a known capacity found by
//! search, a study killed with SIGKILL, and an A/B comparison.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use volley_faultserver::{Behaviour, FaultServer};
use volley_store::{Status, Store};

use crate::common::{fresh_dir, output_of};
pub(crate) use crate::common::{volley_cmd as volley, write_file as write};

/// A fresh directory for the study test `tag`.
pub(crate) fn temp_dir(tag: &str) -> crate::common::TestDir {
    fresh_dir(&format!("volley-study-test-{tag}"))
}

#[test]
fn bad_study_file_names_line_and_key() {
    let dir = temp_dir("bad");
    let f = write(
        &dir,
        "bad.toml",
        "name = \"x\"\n[[target]]\nname = \"a\"\nkind = \"builtin\"\n[[workload]]\nname = \"w\"\npaths = [\"/\"]\n[steps]\nduration = \"1s\"\nrepeets = 3\n",
    );
    let out = volley()
        .args(["study", "run"])
        .arg(&f)
        .arg("--dry-run")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("line 10") && err.contains("repeets"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}

/// The study `text` written to a fresh directory `tag` and run quietly with a store of
/// its own: (the directory, removed when dropped, so the caller keeps it to the test's
/// end; the store's path; exit code, stdout, stderr).
fn quiet_study_in(
    tag: &str,
    text: &str,
) -> (crate::common::TestDir, PathBuf, Option<i32>, String, String) {
    let dir = temp_dir(tag);
    let f = write(&dir, "study.toml", text);
    let db = dir.join("v.db");
    let (code, out, err) = study_run(&f, &["--db", db.to_str().unwrap(), "--quiet"]);
    (dir, db, code, out, err)
}

/// `volley study run FILE --db DB`, which must succeed: its stdout.
pub(crate) fn study_ok(file: &Path, db: &Path) -> String {
    let (code, out, err) = output_of(
        volley()
            .args(["study", "run"])
            .arg(file)
            .arg("--db")
            .arg(db),
    );
    assert_eq!(code, Some(0), "{err}");
    out
}

/// Runs `volley study run FILE ARGS..`: (exit code, stdout, stderr).
pub(crate) fn study_run(file: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    output_of(volley().args(["study", "run"]).arg(file).args(args))
}

#[test]
fn a_plan_too_short_to_judge_is_refused_before_it_runs() {
    // The sustainability rule judges whole one-second windows and needs 3: a 1 s step
    // can never be judged, so a search would walk down to its minimum for nothing.
    let dir = temp_dir("short");
    let text = "name = \"x\"\nmode = \"search\"\n[[target]]\nname = \"a\"\nkind = \"external\"\nurl = \"http://127.0.0.1:9/\"\n[[workload]]\nname = \"w\"\npaths = [\"/\"]\n[load]\nmodel = \"open\"\n[steps]\nduration = \"1s\"\n";
    let f = write(&dir, "short.toml", text);
    let db = dir.join("v.db");
    let db = db.to_str().unwrap();
    for args in [&["--dry-run"][..], &["--db", db][..]] {
        let (code, _, err) = study_run(&f, args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(
            err.contains("too short to judge: 1 whole second measured, 3 needed"),
            "{err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
    assert!(!Path::new(db).exists(), "nothing ran, nothing stored");
    // A sweep of rates with the same steps is refused too.
    let sweep = text.replace("mode = \"search\"\n", "") + "[sweep]\nrate = [10, 20]\n";
    let f = write(&dir, "sweep.toml", &sweep);
    let (code, _, err) = study_run(&f, &["--dry-run"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("too short to judge"), "{err}");
}

#[test]
fn a_sweep_that_never_failed_claims_at_least_its_top() {
    // A server of 800 req/s swept at 100 and 200: both sustained, nothing above failed,
    // so the answer is a lower bound, in the end table and in the report's JSON.
    let server = FaultServer::start(Behaviour::TokenBucket {
        rate_per_s: 800.0,
        burst: 20,
    })
    .unwrap();
    let dir = temp_dir("atleast");
    let study = format!(
        r#"name = "below"
[[target]]
name = "bucket"
kind = "external"
url = "{}"
[[workload]]
name = "root"
paths = ["/"]
[load]
model = "open"
concurrency = 8
timeout = "2s"
[sweep]
rate = [100, 200]
[steps]
duration = "3s"
warmup = "300ms"
cooldown = "300ms"
retries = 1
"#,
        server.url("/")
    );
    let f = write(&dir, "below.toml", &study);
    // A machine too busy to judge any step (every attempt generator-bound or busy) is a
    // fact about the machine: the study is run again, at most three times in all.
    let mut attempt = 0;
    let (db, row) = loop {
        attempt += 1;
        let db = dir.join(format!("v{attempt}.db"));
        let (code, out, err) = study_run(&f, &["--db", db.to_str().unwrap(), "-q"]);
        assert_eq!(code, Some(0), "{out}\n{err}");
        let row = out
            .lines()
            .find(|l| l.starts_with("bucket"))
            .unwrap_or_else(|| panic!("{out}"))
            .to_string();
        if row.contains("no server figure") && attempt < 3 {
            std::thread::sleep(Duration::from_secs(2));
            continue;
        }
        break (db, format!("{row}\n{err}"));
    };
    if row.contains("no server figure") {
        eprintln!("the machine stayed too busy to judge a step: {row}");
        assert!(row.contains("2 steps re-measured"), "{row}");
    } else {
        // A step may stay unjudged through its re-measure: the claim is then still "at
        // least", with the reason in words.
        assert!(
            row.contains("capacity at least 200 req/s (the highest step tried)")
                || row.contains(
                    "capacity at least 100 req/s (not bounded: 1 step above could not be judged)"
                ),
            "{row}"
        );
    }
    assert!(!row.contains("first unsustainable"), "{row}");
    let json = dir.join("r.json");
    let store = Store::open(&db).unwrap();
    let run = store.list_runs().unwrap()[0].id;
    let rep = volley()
        .args(["report", &run.to_string(), "--db"])
        .arg(&db)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        rep.status.success(),
        "{}",
        String::from_utf8_lossy(&rep.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let cap = &v["targets"][0]["capacity"][0];
    assert_eq!(cap["bounded"], false, "{cap}");
    let claim = if row.contains("no server figure") {
        "none"
    } else {
        "at_least"
    };
    assert_eq!(cap["claim"]["claim"], claim, "{cap}");
    // Every attempt is stored with its number.
    for s in store.steps(run).unwrap() {
        assert!(s.parameters.extra["attempt"].is_u64(), "{:?}", s.parameters);
    }
}

/// (`retries = 0`: these tests count the steps they planned; re-measuring a step the
/// busy machine spoiled has its own tests.)
pub(crate) fn closed_study(name: &str, urls: &[String], steps: usize, repeats: u32) -> String {
    let mut s = format!("name = \"{name}\"\n");
    for (i, u) in urls.iter().enumerate() {
        s.push_str(&format!(
            "[[target]]\nname = \"t{i}\"\nkind = \"external\"\nurl = \"{u}\"\n"
        ));
    }
    let concs: Vec<String> = (1..=steps).map(|c| c.to_string()).collect();
    s.push_str(&format!(
        "[[workload]]\nname = \"w\"\npaths = [\"/\"]\n[load]\nmodel = \"closed\"\n[sweep]\nconcurrency = [{}]\n[steps]\nduration = \"1s\"\nwarmup = \"100ms\"\ncooldown = \"100ms\"\nrepeats = {repeats}\nretries = 0\n",
        concs.join(", ")
    ));
    s
}

#[test]
fn kill_9_keeps_finished_steps_and_marks_the_run_incomplete() {
    let server = FaultServer::start(Behaviour::Ok {
        body_len: 700,
        keep_alive: true,
    })
    .unwrap();
    let dir = temp_dir("kill");
    let f = write(
        &dir,
        "k.toml",
        &closed_study("kill", &[server.url("/")], 8, 1),
    );
    let db = dir.join("v.db");
    let mut child = volley()
        .args(["study", "run"])
        .arg(&f)
        .arg("--db")
        .arg(&db)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until at least two steps are stored (bounded), then SIGKILL.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let n = Store::open(&db)
            .ok()
            .and_then(|s| {
                let runs = s.list_runs().ok()?;
                Some(s.steps(runs.first()?.id).ok()?.len())
            })
            .unwrap_or(0);
        if n >= 2 {
            break;
        }
        assert!(Instant::now() < deadline, "no steps stored in 30 s");
        assert!(
            child.try_wait().unwrap().is_none(),
            "study ended before the kill"
        );
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let out = volley()
        .arg("history")
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("kill (#1)/t0") && text.contains("incomplete"),
        "{text}"
    );
    let store = Store::open(&db).unwrap();
    let run = &store.list_runs().unwrap()[0];
    assert_eq!(run.status, Status::Incomplete);
    let steps = store.steps(run.id).unwrap();
    assert!(steps.len() >= 2 && steps.len() < 8, "{}", steps.len());
    for s in &steps {
        assert!(s.summary["throughput"]["requests_per_s"].as_f64().unwrap() > 0.0);
        assert!(!store.histograms(s.id).unwrap().is_empty());
        assert!(!store.series(s.id).unwrap().is_empty());
    }
}

#[test]
fn history_and_compare_on_a_small_study() {
    let a = FaultServer::start(Behaviour::Ok {
        body_len: 700,
        keep_alive: true,
    })
    .unwrap();
    let b = FaultServer::start(Behaviour::Ok {
        body_len: 700,
        keep_alive: true,
    })
    .unwrap();
    let dir = temp_dir("cmp");
    let f = write(
        &dir,
        "ab.toml",
        &closed_study("ab", &[a.url("/"), b.url("/")], 1, 3),
    );
    let db = dir.join("v.db");
    let stdout = study_ok(&f, &db);
    assert!(stdout.contains("6 steps"), "{stdout}");
    // The end table's answer is the report's sentence, word for word.
    let answer = stdout
        .lines()
        .find_map(|l| l.strip_prefix("answer: "))
        .unwrap_or_else(|| panic!("no answer line: {stdout}"));
    let md = volley()
        .args(["report", "study:ab", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(md.contains(&format!("**{answer}**")), "{answer}\n{md}");
    let hist = volley()
        .arg("history")
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let h = String::from_utf8_lossy(&hist.stdout);
    assert!(
        h.contains("ab (#1)/t0") && h.contains("ab (#1)/t1") && h.contains("complete"),
        "{h}"
    );
    // History gives the study's answer too, the report's sentence word for word.
    assert!(
        h.contains(&format!("study ab (#1): {answer}")),
        "{answer}\n{h}"
    );
    let cmp = volley()
        .args(["compare", "ab:t0", "ab:t1", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let c = String::from_utf8_lossy(&cmp.stdout);
    assert!(
        cmp.status.success(),
        "{c}{}",
        String::from_utf8_lossy(&cmp.stderr)
    );
    // The same answer as the report's, word for word (like with like, same rule).
    assert!(c.contains(answer), "report: {answer}\ncompare: {c}");
    // One table row per run (its steps column: 3), then the ratio line.
    assert!(
        c.lines()
            .any(|l| l.starts_with("A ") && l.contains(" t0 ") && l.contains(" 3 "))
            && c.contains("A/B ratio of medians"),
        "{c}"
    );
    let ratio: f64 = c
        .split("ratio of medians: ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap();
    assert!(ratio > 0.2 && ratio < 5.0, "same server twice: {ratio}");
    let p99 = volley()
        .args(["compare", "1", "2", "--metric", "p99", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(p99.status.success());
    let bad = volley()
        .args(["compare", "1", "99", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn a_path_the_target_does_not_have_is_refused_before_the_run() {
    let (_dir, db, code, out, err) = quiet_study_in("404", "name = \"missing\"\n[[target]]\nname = \"builtin\"\nkind = \"builtin\"\n[[workload]]\nname = \"w\"\npaths = [\"/no-such-file.html\"]\n[load]\nmodel = \"closed\"\n[steps]\nduration = \"3s\"\nrepeats = 1\nretries = 0\n");
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(
        err.contains("/no-such-file.html") && err.contains("404"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    // No step was measured: nothing in the store reads as throughput.
    let store = Store::open(&db).unwrap();
    assert!(store
        .list_runs()
        .unwrap()
        .iter()
        .all(|r| store.steps(r.id).unwrap().is_empty()));
}

/// A study whose every step's requests failed measured errors, not a server: it exits
/// 1 and says why, and its answer ranks nothing. DELETE of a file the built-in server
/// does not have fails every request (4xx) without changing anything; the path check
/// asks only GET paths (other methods may change state), so the run goes ahead.
#[test]
fn a_study_whose_every_step_failed_exits_1_and_says_why() {
    let (_dir, db, code, out, err) = quiet_study_in("allfailed", "name = \"all-failed\"\n[[target]]\nname = \"builtin\"\nkind = \"builtin\"\n[[workload]]\nname = \"w\"\nmethod = \"DELETE\"\npaths = [\"/no-such-file.html\"]\n[load]\nmodel = \"closed\"\n[sweep]\nconcurrency = [1, 2]\n[steps]\nduration = \"1s\"\nwarmup = \"100ms\"\ncooldown = \"100ms\"\nrepeats = 1\nretries = 0\n");
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.contains("most requests of every step failed")
            && err.contains("measured errors, not a server"),
        "{err}"
    );
    // Both steps ran and were stored, each with its failures; no answer ranks them.
    let store = Store::open(&db).unwrap();
    let runs = store.list_runs().unwrap();
    let steps = store.steps(runs[0].id).unwrap();
    assert_eq!(steps.len(), 2, "{out}");
    for s in &steps {
        let r = &s.summary["requests"];
        assert_eq!(r["ok"], 0, "{r}");
        assert!(r["failed"].as_u64().unwrap() > 0, "{r}");
    }
    let answer = out
        .lines()
        .find_map(|l| l.strip_prefix("answer: "))
        .unwrap_or_else(|| panic!("no answer line: {out}"));
    assert!(
        answer.starts_with("No answer: most requests of every step failed"),
        "{answer}"
    );
    // No step line nor end-table row gives a figure for failures.
    let both = format!("{out}{err}");
    for l in both.lines().filter(|l| l.contains(" w c=")) {
        assert!(
            !l.contains("req/s, p99"),
            "a failed step with a figure: {l}"
        );
    }
    assert!(
        both.contains("mostly failed (no req/s or latency figure)")
            && both.contains("no server figure: most requests of its one step failed"),
        "{both}"
    );
    // The report's tables show the failures, never their rate or latency.
    let (md, html) = (db.with_extension("md"), db.with_extension("html"));
    let (code, _, err) = crate::common::volley(&[
        "report",
        "--db",
        db.to_str().unwrap(),
        "--md",
        md.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    // Nor do its charts: the failures are no point of req/s or latency.
    let html = std::fs::read_to_string(html).unwrap();
    for chart in [
        "Requests/s per workload and point",
        "Throughput vs concurrency",
    ] {
        assert!(!html.contains(chart), "{chart} drawn from failures");
    }
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.contains("**No answer: most requests"), "{md}");
    // History says the same: no answer, never a figure of failures.
    let (code, h, _) = crate::common::volley(&["history", "--db", db.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(
        h.lines()
            .any(|l| l.starts_with(&format!("study all-failed (#1): {answer}"))),
        "{answer}\n{h}"
    );
    // Each step's row in the three tables with its label (runs, throughput and p99,
    // evidence) says so, whatever the label.
    let said = md
        .lines()
        .filter(|l| l.starts_with("| builtin |") && l.contains("mostly failed: no figure"))
        .count();
    assert_eq!(said, 6, "{md}");
}

/// On loopback, a fast server and one that waits 20 ms per answer, at two load points:
/// one run each names no winner (no interval) and says how many repeats would; three
/// repeats each name the faster, with the interval of the ratio. `volley compare` of the
/// two runs gives the same sentence (issue 27: it once named the opposite winner from a
/// median of unlike steps), over the two points both measured, and shows no interval
/// from one run ("95% CI 61821 .. 61821").
#[test]
fn the_answer_names_the_faster_server_only_when_repeats_separate_them() {
    let fast = FaultServer::start(Behaviour::Ok {
        body_len: 700,
        keep_alive: true,
    })
    .unwrap();
    let slow = FaultServer::start(Behaviour::Slow {
        delay: Duration::from_millis(20),
    })
    .unwrap();
    let dir = temp_dir("answer");
    let urls = [fast.url("/"), slow.url("/")];
    for (repeats, want) in [(1, "t0 "), (3, "t0 served the most requests per second: ")] {
        let f = write(
            &dir,
            &format!("r{repeats}.toml"),
            &closed_study(&format!("answer{repeats}"), &urls, 2, repeats),
        );
        let db = dir.join(format!("r{repeats}.db"));
        let (code, out, err) = study_run(&f, &["--db", db.to_str().unwrap(), "--quiet"]);
        assert_eq!(code, Some(0), "{out}{err}");
        let answer = out
            .lines()
            .find_map(|l| l.strip_prefix("answer: "))
            .unwrap_or_else(|| panic!("no answer line: {out}"));
        assert!(answer.starts_with(want), "{repeats} repeat(s): {answer}");
        if repeats == 1 {
            assert!(
                answer.contains("from one run each") && answer.contains("repeats of each would"),
                "{answer}"
            );
        } else {
            assert!(
                answer.contains("x [") && answer.contains("(95% interval)"),
                "{answer}"
            );
        }
        let study = format!("answer{repeats}");
        let (code, c, err) = crate::common::volley(&[
            "compare",
            &format!("{study}:t0"),
            &format!("{study}:t1"),
            "--db",
            db.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{c}{err}");
        assert!(c.contains(answer), "report: {answer}\ncompare: {c}");
        // Like with like: each side's steps at the two points both measured (fewer only
        // when compare says which it left out, as the report does: a busy machine may
        // spoil a step).
        let left_out = c.contains("steps left out: ");
        for (side, target) in [("A", "t0"), ("B", "t1")] {
            let row = c
                .lines()
                .find(|l| l.starts_with(&format!("{side} ")))
                .unwrap_or_else(|| panic!("no row {side}: {c}"));
            let cells: Vec<&str> = row.split_whitespace().collect();
            let steps: u32 = cells[3].parse().unwrap_or_else(|_| panic!("{row}"));
            assert!(
                cells[2] == target && (steps == 2 * repeats || (left_out && steps < 2 * repeats)),
                "{row}\n{c}"
            );
            // An interval only from repeats.
            assert_eq!(row.contains("one run: none"), repeats == 1, "{row}");
        }
        assert!(c.contains("over 2 matched points"), "{c}");
        let one_run = c.contains("from one run each, no interval");
        assert_eq!(one_run, repeats == 1, "{c}");
        assert_eq!(c.contains("(95% CI "), repeats > 1, "{c}");
        if repeats > 1 {
            // The ratio line's interval is the answer's, not another bootstrap's.
            let nums = |s: &str| -> Vec<f64> {
                s.split(|ch: char| !(ch.is_ascii_digit() || ch == '.'))
                    .filter_map(|w| w.parse().ok())
                    .collect()
            };
            let line = c.lines().find(|l| l.contains("(95% CI ")).unwrap();
            let shown = nums(&line[line.find("(95% CI ").unwrap() + 8..]);
            let said = nums(&answer[answer.find("x [").unwrap()..answer.find(']').unwrap()]);
            assert!(
                (shown[0] - said[0]).abs() <= 0.0051 && (shown[1] - said[1]).abs() <= 0.0051,
                "{line}\n{answer}"
            );
        }
    }
}

/// A step warms up as `volley bench --warmup` does: the first part of its one run, on
/// the same connections, cut by intended instant; `requests = N` counts the measured
/// requests only, and the stored summary says what the warm-up held.
#[test]
fn a_step_warms_up_inside_its_run_and_measures_exactly_its_requests() {
    let (_dir, db, _, out, err) = quiet_study_in("warmup", "name = \"warm\"\n[[target]]\nname = \"builtin\"\nkind = \"builtin\"\n[[workload]]\nname = \"w\"\npaths = [\"/index.html\"]\n[load]\nmodel = \"closed\"\n[sweep]\nconcurrency = [2]\n[steps]\nrequests = 40\nwarmup = \"300ms\"\ncooldown = \"100ms\"\nrepeats = 1\nretries = 0\n");
    let store = Store::open(&db).unwrap();
    let runs = store.list_runs().unwrap();
    let steps = store.steps(runs[0].id).unwrap();
    assert_eq!(steps.len(), 1, "{out}{err}");
    let s = &steps[0].summary;
    assert_eq!(s["requests"]["sent"], 40, "{}", s["requests"]);
    assert_eq!(s["requests"]["ok"], 40, "{}", s["requests"]);
    let w = &s["warmup"];
    assert_eq!(w["duration_s"], 0.3, "{w}");
    // The first request of each connection is sent at the run's start, in the warm-up.
    assert!(w["requests"].as_u64().unwrap() >= 2, "{w}");
    assert!(w["open_at_boundary"].as_u64().unwrap() >= 1, "{w}");
}
