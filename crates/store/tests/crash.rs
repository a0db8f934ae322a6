//! A writer killed with SIGKILL mid-study loses nothing it finished.
//!
//! This test binary plays both parts (harness = false): run normally it is the parent,
//! which re-executes itself with `VOLLEY_STORE_CRASH_CHILD=<db>` to become a child that
//! records steps as fast as it can, printing each step's index once `record_step` has
//! returned. The parent reads those lines, checks that a second process opening the
//! store does not mistake the live run for an abandoned one, kills the child with
//! SIGKILL (`Child::kill`), and reopens the store: every step the child reported must be
//! there intact, and the run and study must be marked incomplete.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{step, TempDir};
use serde_json::json;
use volley_store::{NewRun, NewStudy, RunId, RunKind, Status, Store, StudyId};

const CHILD_ENV: &str = "VOLLEY_STORE_CRASH_CHILD";
/// The child stops on its own after this many steps, so it can never run unbounded.
const CHILD_MAX_STEPS: u32 = 20_000;
/// The parent kills the child after this many reported steps.
const KILL_AFTER_STEPS: usize = 25;

fn main() {
    match std::env::var(CHILD_ENV) {
        Ok(db) => child(&db),
        Err(_) => {
            parent();
            println!("test crash::killed_writer_loses_no_finished_step ... ok");
        }
    }
}

fn child(db: &str) {
    let mut store = Store::open(db).expect("child: open store");
    let study = store
        .begin_study(&NewStudy {
            name: "crash".into(),
            file_text: "rates = [1, 2]".into(),
        })
        .expect("child: begin study");
    let run = store
        .begin_run(&NewRun {
            study: Some(study),
            kind: RunKind::StudyStep,
            target: "builtin".into(),
            parameters: json!({}),
            environment: json!({}),
        })
        .expect("child: begin run");
    println!("study {} run {}", study.0, run.0);
    for i in 0..CHILD_MAX_STEPS {
        let id = store
            .record_step(run, &step(i))
            .expect("child: record step");
        println!("step {i} {}", id.0);
    }
    // Only reached if the parent never killed us; the parent then fails on EOF.
    std::process::exit(3);
}

fn parent() {
    let dir = TempDir::new("crash");
    let exe = std::env::current_exe().expect("current exe");
    let mut child = Command::new(exe)
        .env(CHILD_ENV, dir.db())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");
    // A thread drains the child's stdout all the time, so the child never blocks on a
    // full pipe: when the kill lands it is busy writing, most likely mid-transaction.
    let stdout = child.stdout.take().expect("child stdout");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let timeout = std::time::Duration::from_secs(60);
    let header = rx.recv_timeout(timeout).expect("child header");
    let ids: Vec<i64> = header
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let (study, run) = (StudyId(ids[0]), RunId(ids[1]));

    let parse = |line: &str| -> Option<(u32, i64)> {
        let mut words = line.split_whitespace();
        (words.next()? == "step").then_some(())?;
        Some((words.next()?.parse().ok()?, words.next()?.parse().ok()?))
    };
    let mut reported = Vec::new();
    while reported.len() < KILL_AFTER_STEPS {
        let line = rx
            .recv_timeout(timeout)
            .expect("child ended or stalled early");
        reported.extend(parse(&line));
        if reported.len() == 5 {
            // A reader opening the store while the writer lives must leave its run alone.
            let reader = Store::open(dir.db()).expect("open while child writes");
            assert_eq!(reader.run(run).unwrap().status, Status::Running);
            assert_eq!(reader.study(study).unwrap().status, Status::Running);
        }
    }
    child.kill().expect("SIGKILL child");
    let exit = child.wait().expect("reap child");
    assert!(!exit.success(), "child must have been killed, got {exit:?}");
    reader.join().expect("stdout reader");
    // Every complete line the child printed before dying names a step it was told is
    // durable (a torn last line does not parse and is ignored).
    reported.extend(rx.try_iter().filter_map(|l| parse(&l)));

    let store = Store::open(dir.db()).expect("reopen after kill");
    let run_row = store.run(run).unwrap();
    assert_eq!(run_row.status, Status::Incomplete);
    assert!(run_row.finished_unix_ms.is_some());
    assert_eq!(store.study(study).unwrap().status, Status::Incomplete);

    let steps = store.steps(run).unwrap();
    // The child may have committed one more step than it managed to print.
    assert!(
        steps.len() >= reported.len(),
        "{} stored < {} reported",
        steps.len(),
        reported.len()
    );
    for (index, id) in &reported {
        let row = steps
            .iter()
            .find(|s| s.index == *index)
            .expect("reported step is stored");
        assert_eq!(row.id.0, *id);
        let want = step(*index);
        assert_eq!(row.summary, want.summary);
        assert_eq!(store.series(row.id).unwrap().len(), want.series.len());
        let hists = store.histograms(row.id).unwrap();
        assert_eq!(hists.len(), want.histograms.len());
        for h in &want.histograms {
            assert!(
                hists.contains(h),
                "histogram {:?}/{:?} of step {index} intact",
                h.kind,
                h.second
            );
        }
    }
    // Every stored step is whole: no step row without its series and histograms.
    for row in &steps {
        assert_eq!(
            store.series(row.id).unwrap().len(),
            6,
            "step {} partial",
            row.index
        );
        assert_eq!(
            store.histograms(row.id).unwrap().len(),
            5,
            "step {} partial",
            row.index
        );
    }
    drop(store);
    let conn = rusqlite::Connection::open(dir.db()).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    println!(
        "crash: {} steps reported, {} stored, run and study incomplete",
        reported.len(),
        steps.len()
    );
}
