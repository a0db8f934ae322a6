//! `volley bench --caldav`: a short office day of 20 users against the built-in
//! server (started in-process by bench), every correctness check passing and every
//! operation type used, its first syncs before the window (a warm day) or inside it
//! (a cold one); 2000 people at real time set up and run on this machine; a
//! server without accounts refused before anything is written; and bad input refused
//! with one line and exit 2.

use std::process::Command;

use serde_json::json;

use crate::common;

use volley_faultserver::{Behaviour, FaultServer};

fn volley() -> Command {
    Command::new(env!("CARGO_BIN_EXE_volley"))
}

/// Runs `volley bench --caldav ... --json -` and returns (exit code, JSON, stderr).
fn office(args: &[&str]) -> (i32, serde_json::Value, String) {
    let out = volley()
        .args(["bench", "--json", "-"])
        .args(args)
        .output()
        .expect("run volley");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap_or(-1),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn op<'a>(j: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    j["ops"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["name"] == name))
        .unwrap_or_else(|| panic!("no row {name} in {j}"))
}

#[test]
fn twenty_users_pass_every_check_against_the_builtin_server() {
    // Compressed 480x: 15 s hold several polls of every device.
    let (code, j, err) = office(&[
        "--caldav",
        "20",
        "--compress",
        "480",
        "--duration",
        "15s",
        "--seed",
        "5",
    ]);
    assert_eq!(code, 0, "stderr: {err}\n{j}");
    assert_eq!(j["violations_total"], 0, "{j}");
    assert_eq!(j["users"], 20);
    // OPTIONS is only in Thunderbird's first sync, which ran before the window.
    for name in [
        "propfind-d0",
        "propfind-d1",
        "report-sync",
        "report-multiget",
        "report-query",
        "get",
        "put-create",
        "put-update",
        "delete",
    ] {
        let row = op(&j, name);
        assert!(row["count"].as_u64().unwrap() > 0, "{name}: {row}");
        assert_eq!(row["errors"], 0, "{name}: {row}");
        assert!(row["p99_ms"].as_f64().unwrap() > 0.0, "{name}: {row}");
    }
    // A warm day: the two devices' first syncs of each user ran before the window,
    // reported apart; the window holds polls only (15 s at 480x: several of each
    // device, one every 1.875 or 3.75 s).
    assert_eq!(j["cold_start"], false, "{j}");
    let lead = &j["lead_in"]["sessions"];
    assert_eq!(lead[0]["name"], "sync-initial");
    assert_eq!(lead[0]["count"], 40, "{j}");
    assert_eq!(lead[0]["errors"], 0, "{j}");
    assert_eq!(
        lead[1]["count"], 40,
        "one poll of each device before the window: {j}"
    );
    assert!(j["lead_in"]["requests"].as_u64().unwrap() > 40 * 3, "{j}");
    let sessions = j["sessions"].as_array().unwrap();
    assert_eq!(sessions[0]["name"], "sync-initial");
    assert_eq!(sessions[0]["count"], 0, "{j}");
    assert!(sessions[1]["count"].as_u64().unwrap() >= 40 * 4, "{j}");
    assert_eq!(sessions[1]["errors"], 0, "{j}");
    assert_eq!(j["actions_skipped"], 0);
    assert!(j["items_at_end"].as_u64().unwrap() > 20 * 20);
    // Every device polled several times in the window: the stored answer says so.
    assert_eq!(j["devices_polled_twice_share"], 1.0, "{j}");
}

/// A cold day (a morning when every client starts at once) keeps every device's first
/// sync inside the window, judged beside the polls, with nothing before it.
#[test]
fn a_cold_day_runs_every_first_sync_inside_its_window() {
    let (code, j, err) = office(&[
        "--caldav",
        "10",
        "--caldav-cold-start",
        "--compress",
        "480",
        "--duration",
        "10s",
        "--seed",
        "6",
    ]);
    assert_eq!(code, 0, "stderr: {err}\n{j}");
    assert_eq!(j["violations_total"], 0, "{j}");
    assert_eq!(
        (&j["cold_start"], &j["lead_in"]),
        (&json!(true), &json!(null)),
        "{j}"
    );
    let sessions = j["sessions"].as_array().unwrap();
    assert_eq!(sessions[0]["name"], "sync-initial");
    assert_eq!(sessions[0]["count"], 20, "{j}");
    assert!(sessions[1]["count"].as_u64().unwrap() > 20, "{j}");
}

#[test]
fn the_same_seed_plans_the_same_day() {
    let args = [
        "--caldav",
        "3",
        "--compress",
        "480",
        "--duration",
        "3s",
        "--seed",
        "9",
    ];
    let (a, b) = (office(&args), office(&args));
    assert_eq!((a.0, b.0), (0, 0), "{}{}", a.2, b.2);
    assert_eq!(a.1["actions_planned"], b.1["actions_planned"]);
    assert_eq!(
        op(&a.1, "put-create")["count"],
        op(&b.1, "put-create")["count"]
    );
}

#[test]
fn a_trace_has_one_line_per_request_with_each_devices_sync_tokens() {
    let dir = crate::common::fresh_dir("volley-office-trace");
    let path = dir.join("trace.txt");
    let p = path.to_str().unwrap();
    let (code, j, err) = office(&[
        "--caldav",
        "2",
        "--profile",
        "thunderbird",
        // Thunderbird polls every 30 office minutes: about once a second here.
        "--compress",
        "1920",
        "--duration",
        "4s",
        "--seed",
        "4",
        "--caldav-trace",
        p,
    ]);
    assert_eq!(code, 0, "stderr: {err}\n{j}");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // The day's requests, plus the untimed set-up and audit.
    let day: u64 = j["requests"].as_u64().unwrap();
    assert!(
        lines.len() as u64 > day,
        "{} lines, {day} requests",
        lines.len()
    );
    assert!(lines.iter().all(|l| l.contains(" -> ")), "{text}");
    for user in ["office1", "office2"] {
        for device in ["thunderbird#0", "thunderbird#1"] {
            let who = format!(" {user} volley-office/{device} ");
            // Every sync after the first starts from the token the previous one got.
            let tokens: Vec<(&str, &str)> = lines
                .iter()
                .filter(|l| l.contains(&who) && l.contains(" from-token="))
                .map(|l| {
                    let field = |k: &str| l.split(k).nth(1).unwrap().split(' ').next().unwrap();
                    (field(" from-token="), field(" token="))
                })
                .collect();
            assert!(tokens.len() >= 2, "{who}: {tokens:?}\n{text}");
            assert_eq!(tokens[0].0, "-", "the first sync has no token");
            for w in tokens.windows(2) {
                assert_eq!(w[1].0, w[0].1, "{who}: {tokens:?}");
            }
        }
    }
    assert!(
        lines
            .iter()
            .any(|l| l.contains(" PUT ") && l.contains("if-none-match=*")),
        "{text}"
    );
}

#[test]
fn account_path_templates_put_each_users_calendar_where_they_say() {
    let dir = crate::common::fresh_dir("volley-office-tpl");
    let path = dir.join("trace.txt");
    // The built-in server provisions `/<user>/calendar/`; `work/` is made at set-up
    // (MKCALENDAR), as on a server whose layout differs from the default.
    let (code, j, err) = office(&[
        "--caldav",
        "2",
        "--profile",
        "thunderbird,evolution",
        "--compress",
        "480",
        "--duration",
        "3s",
        "--caldav-home-template",
        "/{user}/",
        "--caldav-calendar-template",
        "/{user}/work/",
        "--caldav-trace",
        path.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(code, 0, "stderr: {err}\n{j}");
    assert_eq!(j["violations_total"], 0, "{j}");
    for user in ["office1", "office2"] {
        let mk = format!(" {user} volley-office/setup MKCALENDAR /{user}/work/ -> 201");
        assert!(text.contains(&mk), "{mk}\n{text}");
        let put = format!(" PUT /{user}/work/{user}-");
        assert!(text.contains(&put), "{put}\n{text}");
    }
    // Nothing was written to the default calendar.
    assert!(
        !text
            .lines()
            .any(|l| l.contains("/calendar/") && (l.contains(" PUT ") || l.contains(" DELETE "))),
        "{text}"
    );
}

fn usage_line(args: &[&str], needle: &str) {
    let out = volley().arg("bench").args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    usage_line(
        &["--caldav", "0"],
        "--caldav must be from 1 to 100000 users, got 0",
    );
    usage_line(
        &["--caldav", "many"],
        "--caldav must be a number of users, got 'many'",
    );
    usage_line(
        &["--caldav", "2", "--decisions", "-1"],
        "--decisions must be a whole number of decisions, got '-1'",
    );
    usage_line(
        &["--caldav", "2", "--profile", "outlook"],
        "unknown profile `outlook`",
    );
    usage_line(&["--caldav", "2", "--compress", "-3"], "--compress");
    usage_line(
        &[
            "--caldav",
            "2",
            "--caldav-trace",
            "/nonexistent-dir/trace.txt",
        ],
        "cannot create the trace file",
    );
    usage_line(
        &["--caldav", "2", "--caldav-home-template", "/dav/shared/"],
        "must contain {user}",
    );
    usage_line(
        &["--caldav", "1", "--caldav-calendar-template", "{user}/cal"],
        "must start and end with /",
    );
    // A plain HTTP server (answers 200 to everything, no DAV header) is not CalDAV.
    let plain = FaultServer::start(Behaviour::Ok {
        body_len: 700,
        keep_alive: true,
    })
    .unwrap();
    usage_line(&["--caldav", "2", &plain.url("/")], "does not speak CalDAV");
    // Nothing listening.
    let addr = plain.addr();
    drop(plain);
    usage_line(
        &["--caldav", "2", &format!("http://{addr}/")],
        "cannot connect",
    );
}

/// 2000 people at real time: 4000 devices, each with its kept-alive connection, on the
/// office's bounded worker threads, against the in-process built-in server. More new
/// logins than the server's credential verifier queues get 429 with `Retry-After` in
/// set-up, which waits as clients do (80 users used to fail there). Before the window
/// every device runs its first sync and one poll interval of the day (about 8 to 16
/// decisions per person), unpaced; the 90 s window is then the steady state of 2000
/// people, in which about a tenth of the devices poll (every 15 or 30 min, at seeded
/// phases). 2 items per calendar keep the untimed set-up short; the point is that every
/// user is set up, every action runs and every check passes.
#[test]
fn two_thousand_people_at_real_time_are_set_up_and_run_within_the_machines_means() {
    let (code, j, err) = office(&[
        "--caldav",
        "2000",
        "--compress",
        "1",
        "--duration",
        "90s",
        "--caldav-items",
        "2",
        "--seed",
        "3",
    ]);
    assert_eq!(code, 0, "stderr: {err}\n{j}");
    assert_eq!(j["violations_total"], 0, "{j}");
    assert_eq!(
        (j["users"].as_u64(), j["compress"].as_f64()),
        (Some(2000), Some(1.0))
    );
    let lead = &j["lead_in"];
    assert_eq!(lead["sessions"][0]["name"], "sync-initial");
    assert_eq!(lead["sessions"][0]["count"], 4000, "{j}");
    assert_eq!(lead["sessions"][0]["errors"], 0, "{j}");
    assert_eq!(lead["sessions"][1]["count"], 4000, "{j}");
    // Every device polls once in an interval: 90 s of 15 min and of 30 min.
    let polls = j["sessions"][1]["count"].as_u64().unwrap();
    assert!((150..=700).contains(&polls), "{polls} polls: {j}");
    assert_eq!(j["sessions"][1]["errors"], 0, "{j}");
    assert_eq!(j["actions_skipped"], 0, "{j}");
    assert_eq!(j["actions_run"], j["actions_planned"], "{j}");
}

/// `volley serve` without `--users` lets anyone list its tree: the office would make
/// every user's calendar a folder of one shared tree (and count hundreds of
/// violations). It is refused with one line before anything is written.
#[test]
fn a_server_without_accounts_is_refused_before_anything_is_written() {
    let root = crate::common::fresh_dir("volley-office-anon");
    std::fs::write(root.join("index.html"), "hello").unwrap();
    let served = common::Served::start(&root, &[]);
    let url = format!("{}/", served.base);
    let out = volley()
        .args(["bench", "--caldav", "3", &url])
        .output()
        .unwrap();
    drop(served);
    let mut left: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("checks no accounts"), "{err}");
    assert_eq!(left, ["index.html"], "nothing written");
}

/// `--caldav N --save`: the day is kept as a bench run of one step (its requests over
/// the window, the office report beside them), which `volley history` lists and
/// `volley report` reads; it used to be dropped without a word.
#[test]
fn a_saved_office_day_is_a_bench_run_history_and_report_read() {
    let dir = crate::common::fresh_dir("volley-office-save");
    let db = dir.join("db.sqlite");
    let db_arg = db.to_str().unwrap();
    let out = volley()
        .args([
            "bench",
            "--caldav",
            "3",
            "--compress",
            "480",
            "--duration",
            "4s",
        ])
        .args(["--save", "--db", db_arg, "--label", "office-day", "--quiet"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("saved as run 1"), "{err}");
    let store = volley_store::Store::open(&db).unwrap();
    let runs = store.list_runs().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].parameters["users"], 3, "{:?}", runs[0].parameters);
    assert_eq!(runs[0].parameters["compress"], 480.0);
    let steps = store.steps(runs[0].id).unwrap();
    assert_eq!(steps.len(), 1);
    let s = &steps[0].summary;
    assert_eq!(s["requests"]["completed"], s["office"]["requests"], "{s}");
    assert_eq!(s["office"]["users"], 3);
    assert!(!store.histograms(steps[0].id).unwrap().is_empty());
    drop(store);
    let read = |args: &[&str]| {
        let o = volley().args(args).args(["--db", db_arg]).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert!(read(&["history"]).contains("office-day"));
    assert!(read(&["report", "1"]).starts_with("# volley report: run 1: "));
}

/// A built-in CalDAV server with three users, and a cold 4-second office day of theirs
/// at 960x seeded `seed`: the server stops when the first value drops.
fn short_cold_day(seed: u64) -> (volley_targets::RunningTarget, volley_office::OfficeConfig) {
    let target = common::dav_target(volley_targets::TargetKind::Builtin, 3);
    let accounts = common::office_accounts(&target, 3);
    let mut cfg =
        volley_office::OfficeConfig::with_accounts(&format!("http://{}/", target.addr), accounts);
    cfg.compress = 960.0;
    cfg.cold_start = true;
    cfg.duration = std::time::Duration::from_secs(4);
    cfg.seed = seed;
    (target, cfg)
}

/// `run_streaming` (what a study's office step uses, issue 26): each second of the day
/// goes to the stream as it closes and the returned recorder keeps none, so a long
/// day's memory does not grow by a second's histograms every second; the streamed
/// seconds, joined, hold every request of the day, each second once.
#[test]
fn a_streamed_office_day_sends_every_second_and_keeps_none() {
    let (_target, cfg) = short_cold_day(3);
    let (tx, rx) = std::sync::mpsc::channel();
    let run = volley_office::run_streaming(&cfg, Some(volley_metrics::SecondStream::new(0, tx)))
        .expect("the day runs");
    // The day let its stream go: this loop ends.
    let mut joiner = volley_metrics::SecondJoiner::new(1);
    let mut seconds = Vec::new();
    for s in rx {
        seconds.extend(joiner.push(s).unwrap());
    }
    seconds.extend(joiner.finish().unwrap());
    assert!(run.all.closed_seconds().is_empty(), "the day kept seconds");
    let streamed: u64 = seconds.iter().map(|c| c.counts.completed).sum();
    assert!(streamed > 0, "nothing streamed");
    assert_eq!(streamed, run.all.completed(), "every request, once");
    assert_eq!(streamed, run.report.requests, "the report's requests");
    let at: Vec<u64> = seconds.iter().map(|c| c.second).collect();
    assert!(
        at.windows(2).all(|w| w[0] < w[1]),
        "each second once: {at:?}"
    );
}

/// A group of users' day is run in spans, each on a fresh thread (glibc's per-thread
/// cache of freed blocks goes back to the heap when a thread ends): a day handed from
/// thread to thread every 300 ms runs every action it planned, in order, with nothing
/// lost or doubled at the hand-overs and no check failing.
#[test]
fn a_day_handed_from_thread_to_thread_runs_every_action_once() {
    let (_target, mut cfg) = short_cold_day(5);
    cfg.thread_span = std::time::Duration::from_millis(300);
    let run = volley_office::run(&cfg).expect("the day runs");
    let r = &run.report;
    assert!(
        r.actions_planned > 10,
        "{} actions planned",
        r.actions_planned
    );
    assert_eq!(r.actions_run, r.actions_planned, "every action ran");
    assert_eq!(r.actions_skipped, 0);
    assert_eq!(r.violations_total, 0, "{:?}", r.violations);
    assert!(r.requests > 0);
}
