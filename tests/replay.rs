//! Access logs replayed: `volley bench --replay` of a generated log with known instants
//! against the built-in server, its own log read back (`volley log phases` on its own
//! is in `log_phases.rs`). Every client's loop is bounded in count and time;
//! assertions are on counts, sets and orders; the one timing bound (each request
//! within a generous lag of its scaled instant) is far above any honest lateness.

use crate::common::{Served, BUILTIN_SIZES};

/// Clients of the generated log, their requests, and the gap between two of one client.
const CLIENTS: [&str; 3] = ["10.0.0.1", "10.0.0.2", "10.0.0.3"];
const PER_CLIENT: u64 = 20;
const GAP_MS: u64 = 200;

/// A Combined log with microsecond stamps (volley's own layout): client `k`'s request
/// `i` at `i * GAP_MS + 7k` ms, to `/index.html?c=k&i=i` (200, 5 bytes), every fifth
/// one to `/missing?c=k&i=i` (404); lines in start order.
fn known_log() -> (String, Vec<(u64, String)>) {
    let mut reqs: Vec<(u64, String, &str, u16, u64)> = Vec::new();
    for (k, ip) in CLIENTS.iter().enumerate() {
        for i in 0..PER_CLIENT {
            let at_us = (i * GAP_MS + 7 * k as u64) * 1_000;
            let (path, status, bytes) = if i % 5 == 4 {
                ("/missing", 404, 0)
            } else {
                ("/index.html", 200, 5)
            };
            reqs.push((at_us, format!("{path}?c={k}&i={i}"), ip, status, bytes));
        }
    }
    reqs.sort();
    let mut text = String::new();
    for (at_us, target, ip, status, bytes) in &reqs {
        text += &format!(
            "{ip} - - [01/Jan/2026:00:00:{:02}.{:06} +0000] \"GET {target} HTTP/1.1\" {status} {bytes} \"-\" \"test/1\"\n",
            at_us / 1_000_000,
            at_us % 1_000_000
        );
    }
    let planned = reqs.into_iter().map(|(at, t, ..)| (at, t)).collect();
    (text, planned)
}

/// A directory with the known log and a docroot, and the built-in server on it with its
/// access log on.
struct KnownSite {
    log: std::path::PathBuf,
    /// The log's requests: (instant µs, target).
    planned: Vec<(u64, String)>,
    served_log: std::path::PathBuf,
    served: Served,
    /// Last, so it is removed after the server serving from it has stopped (fields drop
    /// in order).
    dir: crate::common::TestDir,
}

fn known_site(name: &str) -> KnownSite {
    let dir = tempdir(name);
    std::fs::create_dir_all(dir.join("root")).unwrap();
    std::fs::write(dir.join("root/index.html"), "hello").unwrap();
    let (text, planned) = known_log();
    let log = dir.join("known.log");
    std::fs::write(&log, text).unwrap();
    let served_log = dir.join("served.log");
    let served = Served::start(
        &dir.join("root"),
        &["--access-log", served_log.to_str().unwrap()],
    );
    KnownSite {
        log,
        planned,
        served_log,
        served,
        dir,
    }
}

/// A run of `bench --replay` over the known log (with `more` lines appended) against
/// the built-in server, `args` after the URL, and the server stopped.
struct Replayed {
    /// The test's directory (log, docroot, server log), removed when dropped: the caller
    /// binds it to a name (`dir: _dir`), so it lasts to the test's end.
    dir: crate::common::TestDir,
    log: std::path::PathBuf,
    planned: Vec<(u64, String)>,
    served_log: std::path::PathBuf,
    /// The run's `--json` document.
    doc: serde_json::Value,
}

fn replay_known(name: &str, more: &str, args: &[&str]) -> Replayed {
    let KnownSite {
        dir,
        log,
        planned,
        served_log,
        mut served,
    } = known_site(name);
    let mut text = std::fs::read_to_string(&log).unwrap();
    text += more;
    std::fs::write(&log, text).unwrap();
    let url = format!("http://{}/", served.addr);
    let mut all = vec!["bench", "--replay", log.to_str().unwrap(), &url];
    all.extend_from_slice(args);
    all.extend(["--json", "-q"]);
    let (code, json, err) = crate::common::volley(&all);
    assert!(
        served.stop().is_some_and(|s| s.success()),
        "serve did not stop cleanly"
    );
    assert_eq!(code, 0, "{err}");
    Replayed {
        dir,
        log,
        planned,
        served_log,
        doc: serde_json::from_str(&json).unwrap(),
    }
}

/// Asserts that every replayed request in the server's log from logged client k came
/// from 127.0.0.(2 + k) (`--client-addresses`); returns how many clients it saw. Lines
/// of no logged client (a path check before the run) are passed over.
fn clients_by_address(served_log: &std::path::Path) -> usize {
    let mut clients = std::collections::BTreeSet::new();
    for line in std::fs::read_to_string(served_log).unwrap().lines() {
        let (_, target) = served_line(line);
        let Some(k) = target.split("c=").nth(1).and_then(|c| c.split('&').next()) else {
            continue;
        };
        let from = line.split(' ').next().unwrap();
        let want = format!("127.0.0.{}", 2 + k.parse::<u8>().unwrap());
        assert_eq!(from, want, "{line}");
        clients.insert(k.to_string());
    }
    clients.len()
}

/// A line of the built-in server's log: its instant (µs into the minute) and target.
fn served_line(line: &str) -> (u64, String) {
    let stamp = line
        .split('[')
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap();
    let secs = stamp.rsplit(':').next().unwrap();
    let (s, frac) = secs.split_once('.').unwrap();
    let minute: u64 = stamp.split(':').nth(2).unwrap().parse().unwrap();
    let us = (minute * 60 + s.parse::<u64>().unwrap()) * 1_000_000 + frac.parse::<u64>().unwrap();
    let target = line.split('"').nth(1).unwrap().split(' ').nth(1).unwrap();
    (us, target.to_string())
}

/// A generated log with known instants replayed at 2x against the built-in server with
/// its access log on: every logged request arrives once, each client's in its logged
/// order, each within a bounded lag of its scaled instant; statuses agree with the log;
/// each client from its own loopback address (`--client-addresses`), so the server's
/// log read back by `volley log phases` has the replayed log's phases.
#[test]
fn replay_sends_every_logged_request_in_client_order_at_its_scaled_instant() {
    let Replayed {
        dir: _dir,
        log,
        planned,
        served_log,
        doc,
    } = replay_known(
        "bench",
        "",
        // Two workers: on a machine of two CPUs (this one, CI's) no CPU is left for a
        // reader thread, so the workers read the log in their idle slices.
        &["--speed", "2", "-t", "2", "--client-addresses"],
    );
    let replay = &doc["replay"];
    let n = planned.len() as u64;
    assert_eq!(replay["planned"].as_u64(), Some(n), "{replay}");
    assert_eq!(replay["clients"].as_u64(), Some(3), "{replay}");
    let fid = &replay["fidelity"];
    assert_eq!(fid["requests"].as_u64(), Some(n), "{fid}");
    assert_eq!(fid["same_status_percent"].as_f64(), Some(100.0), "{fid}");
    assert!(fid["send_lag_ms"]["p99"].as_f64().is_some(), "{fid}");
    // One connection per logged client (kept alive), none more.
    let run = &doc["runs"][0];
    assert_eq!(
        run["connections_stats"]["opened"].as_u64(),
        Some(3),
        "{run}"
    );
    assert_eq!(run["requests"]["completed"].as_u64(), Some(n), "{run}");

    // The server's own log: every request once, each client's in its order.
    let lines: Vec<(u64, String)> = std::fs::read_to_string(&served_log)
        .unwrap()
        .lines()
        .map(served_line)
        .collect();
    let mut got: Vec<&str> = lines.iter().map(|(_, t)| t.as_str()).collect();
    got.sort_unstable();
    let mut want: Vec<&str> = planned.iter().map(|(_, t)| t.as_str()).collect();
    want.sort_unstable();
    assert_eq!(got, want, "every logged request arrives exactly once");
    for k in 0..CLIENTS.len() {
        let order: Vec<&str> = lines
            .iter()
            .map(|(_, t)| t.as_str())
            .filter(|t| t.contains(&format!("c={k}&")))
            .collect();
        let logged: Vec<String> = (0..PER_CLIENT)
            .map(|i| {
                let path = if i % 5 == 4 {
                    "/missing"
                } else {
                    "/index.html"
                };
                format!("{path}?c={k}&i={i}")
            })
            .collect();
        assert_eq!(order, logged, "client {k} in its logged order");
    }
    // Each arrives at its instant / 2, up to one common offset (the server's clock
    // and start-up), within a bound far above honest lateness on a busy machine.
    let at: std::collections::HashMap<&str, u64> =
        planned.iter().map(|(us, t)| (t.as_str(), us / 2)).collect();
    let offsets: Vec<i64> = lines
        .iter()
        .map(|(us, t)| *us as i64 - at[t.as_str()] as i64)
        .collect();
    let spread_ms = (offsets.iter().max().unwrap() - offsets.iter().min().unwrap()) / 1_000;
    assert!(
        spread_ms < 500,
        "requests strayed {spread_ms} ms from their scaled instants"
    );

    assert_eq!(
        clients_by_address(&served_log),
        CLIENTS.len(),
        "every client replayed"
    );

    // The server's log read back has the replayed log's phases, client for client.
    let phases = |file: &std::path::Path| -> Vec<(usize, u64)> {
        let (code, json, err) =
            crate::common::volley(&["log", "phases", "--json", file.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        let read: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(read["requests"].as_u64(), Some(n), "{json}");
        read["phases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let clients = p["clients"].as_array().unwrap().len();
                (clients, p["requests"].as_u64().unwrap())
            })
            .collect()
    };
    // Phases are cut at whole seconds of the log's clock: the known log starts on a
    // second, the served one wherever the wall clock was, so a client starting (or
    // ending) a few milliseconds before the others may fall in a second of its own. Up
    // to those edges (a request or two per client), the served phases are the logged.
    let (logged, served_phases) = (phases(&log), phases(&served_log));
    assert_eq!(logged.len(), 1, "the known log is one phase: {logged:?}");
    let main = served_phases.iter().max_by_key(|(_, n)| *n).unwrap();
    let edges: u64 = served_phases.iter().map(|(_, n)| n).sum::<u64>() - main.1;
    assert!(
        main.0 == logged[0].0 && edges <= 2 * CLIENTS.len() as u64,
        "{served_phases:?} vs {logged:?}"
    );
}

/// The example log replayed against the pages `volley log example --docroot` writes:
/// every answer has the logged status, and every page its logged size.
#[test]
fn the_example_log_replayed_against_its_site_answers_as_logged() {
    let dir = tempdir("site");
    let (log, root) = example_site(&dir, "20s");
    let text = std::fs::read_to_string(&log).unwrap();
    let (lines, pages) = (
        text.lines().count() as f64,
        text.lines().filter(|l| l.contains("\" 200 ")).count() as f64,
    );
    let mut served = Served::start(&root, &[]);
    let url = format!("http://{}/", served.addr);
    let (code, json, err) = crate::common::volley(&[
        "bench",
        "--replay",
        log.to_str().unwrap(),
        &url,
        "--speed",
        "10",
        "--json",
        "-q",
    ]);
    assert!(
        served.stop().is_some_and(|s| s.success()),
        "serve did not stop cleanly"
    );
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let fid = &doc["replay"]["fidelity"];
    assert_eq!(fid["requests"].as_f64(), Some(lines), "{fid}");
    assert_eq!(fid["same_status_percent"].as_f64(), Some(100.0), "{fid}");
    // Pages are their logged size; the server's own 404 page need not be.
    let same = fid["same_bytes_percent"].as_f64().unwrap();
    assert!(
        same >= 100.0 * pages / lines - 1e-9,
        "{same} vs {pages} of {lines}: {fid}"
    );
    assert!(doc["replay"]["unreached"].is_null(), "{doc}");
}

/// `--repeat 2 --save`: two replays of the log, each compared with it in full, kept in
/// the results store as one bench run of two steps that `volley history` lists and
/// `volley report` reads back, each step with its fidelity.
#[test]
fn replay_repeats_are_saved_and_read_back_by_history_and_report() {
    let dir = tempdir("save");
    std::fs::create_dir_all(dir.join("root")).unwrap();
    std::fs::write(dir.join("root/index.html"), "hello").unwrap();
    let (text, planned) = known_log();
    let log = dir.join("known.log");
    std::fs::write(&log, text).unwrap();
    let db = dir.join("v.db");
    let mut served = Served::start(&dir.join("root"), &[]);
    let url = format!("http://{}/", served.addr);
    let (code, json, err) = crate::common::volley(&[
        "bench",
        "--replay",
        log.to_str().unwrap(),
        &url,
        "--speed",
        "4",
        "--repeat",
        "2",
        "--cooldown",
        "0s",
        "--save",
        "--db",
        db.to_str().unwrap(),
        "--label",
        "replayed-known",
        "--json",
        "-q",
    ]);
    assert!(
        served.stop().is_some_and(|s| s.success()),
        "serve did not stop cleanly"
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("saved as run 1"), "{err}");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let n = planned.len() as u64;
    assert_eq!(doc["runs"].as_array().unwrap().len(), 2, "{doc}");
    let runs = doc["replay"]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{doc}");
    for r in runs {
        assert_eq!(r["fidelity"]["requests"].as_u64(), Some(n), "{r}");
        assert_eq!(
            r["fidelity"]["same_status_percent"].as_f64(),
            Some(100.0),
            "{r}"
        );
    }

    let (code, out, err) = crate::common::volley(&["history", "--db", db.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("replayed-known"), "{out}");
    let report = dir.join("r.json");
    let (code, _, err) = crate::common::volley(&[
        "report",
        "1",
        "--db",
        db.to_str().unwrap(),
        "--json",
        report.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let rep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let steps = rep["targets"][0]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{rep}");
    let store = volley_store::Store::open(&db).unwrap();
    let run = store.list_runs().unwrap()[0].id;
    let stored = store.steps(run).unwrap();
    assert_eq!(stored.len(), 2);
    for s in &stored {
        let r = &s.summary["replay"];
        assert_eq!(r["fidelity"]["requests"].as_u64(), Some(n), "{r}");
        assert_eq!(r["planned"].as_u64(), Some(n), "{r}");
        assert_eq!(s.summary["requests"]["completed"].as_u64(), Some(n));
    }
}

/// `--replay` with `--target builtin`: the managed server started on the pages the
/// example log asks for, the log replayed against it, every answer as logged.
#[test]
fn replay_against_a_managed_target_answers_as_logged() {
    let dir = tempdir("target");
    let (log, root) = example_site(&dir, "10s");
    let lines = std::fs::read_to_string(&log).unwrap().lines().count() as u64;
    let (code, json, err) = crate::common::volley(&[
        "bench",
        "--replay",
        log.to_str().unwrap(),
        "--target",
        "builtin",
        "--docroot",
        root.to_str().unwrap(),
        "--speed",
        "10",
        "--json",
        "-q",
    ]);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["replay"]["planned"].as_u64(), Some(lines), "{doc}");
    let t = &doc["targets"][0];
    assert_eq!(t["kind"], "builtin", "{t}");
    let fid = &t["replay"]["fidelity"];
    assert_eq!(fid["requests"].as_u64(), Some(lines), "{fid}");
    assert_eq!(fid["same_status_percent"].as_f64(), Some(100.0), "{fid}");
    assert!(t["replay"]["unreached"].is_null(), "{t}");
    assert_eq!(
        doc["runs"][0]["requests"]["completed"].as_u64(),
        Some(lines)
    );
}

/// `n` requests 1 ms apart, each from its own address but "10.9.9.9", which comes
/// first and last.
pub(crate) fn many_clients_log(n: u64) -> String {
    let mut text = String::new();
    for i in 0..n {
        let ip = match i {
            0 => "10.9.9.9".to_string(),
            _ if i == n - 1 => "10.9.9.9".to_string(),
            _ => format!("10.1.{}.{}", i / 256, i % 256),
        };
        let at_us = i * 1_000;
        text += &format!(
            "{ip} - - [01/Jan/2026:00:00:{:02}.{:06} +0000] \"GET /index.html?i={i} HTTP/1.1\" 200 5 \"-\" \"test/1\"\n",
            at_us / 1_000_000,
            at_us % 1_000_000
        );
    }
    text
}

/// A log of 3,000 distinct client addresses replayed with a table of 64: the planner
/// forgets the idle-longest half whenever it is full (said before the run and counted
/// in `--json`), every request is still sent and compared, and a client that returns
/// after being forgotten replays as a new one.
#[test]
fn a_log_of_many_clients_replays_in_a_bounded_client_table() {
    let dir = tempdir("many");
    std::fs::create_dir_all(dir.join("root")).unwrap();
    std::fs::write(dir.join("root/index.html"), "hello").unwrap();
    let n = 3_000u64;
    let log = dir.join("many.log");
    std::fs::write(&log, many_clients_log(n)).unwrap();
    let report = dir.join("r.json");
    let mut served = Served::start(&dir.join("root"), &[]);
    let url = format!("http://{}/", served.addr);
    let (code, out, err) = crate::common::volley(&[
        "bench",
        "--replay",
        log.to_str().unwrap(),
        &url,
        "--max-clients",
        "64",
        "--speed",
        "2",
        "--json",
        report.to_str().unwrap(),
    ]);
    assert!(
        served.stop().is_some_and(|s| s.success()),
        "serve did not stop cleanly"
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("client addresses forgotten"), "{out}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let r = &doc["replay"];
    assert_eq!(r["max_clients"].as_u64(), Some(64), "{r}");
    // Each new address past the first 64 found the table full every 32nd time.
    let dropped = r["clients_dropped"].as_u64().unwrap();
    assert!(dropped >= n - 64 - 32, "{r}");
    // 2,998 addresses once, 10.9.9.9 twice (forgotten in between).
    assert_eq!(r["clients"].as_u64(), Some(n), "{r}");
    assert_eq!(r["fidelity"]["requests"].as_u64(), Some(n), "{r}");
    assert_eq!(
        doc["runs"][0]["requests"]["completed"].as_u64(),
        Some(n),
        "{doc}"
    );
}

/// The shaping flags reach the run: `--from` cuts the log's first second, `--only-status
/// 200` its 404s, `--max-gap` shortens its 186 ms gaps, `--clients 1` folds the three
/// clients onto one connection (so the server sees the kept requests in the log's
/// order), and a logged POST goes without a body and is counted as such.
#[test]
fn replay_windows_filters_shortens_and_folds_as_asked() {
    // A POST of client 0 at 3.9 s, after every GET (lines stay in start order).
    let post = "10.0.0.1 - - [01/Jan/2026:00:00:03.900000 +0000] \"POST /index.html?c=0&i=99 HTTP/1.1\" 200 5 \"-\" \"test/1\"\n";
    let Replayed {
        dir: _dir,
        planned,
        served_log,
        doc,
        ..
    } = replay_known(
        "shaped",
        post,
        &[
            "--from",
            "1s",
            "--only-status",
            "200",
            "--max-gap",
            "50ms",
            "--clients",
            "1",
        ],
    );
    let r = &doc["replay"];
    // Kept: offsets from 1 s on, logged 200 (every fifth request was a 404), and the POST.
    let mut kept: Vec<(u64, String)> = planned
        .into_iter()
        .filter(|(at, t)| *at >= 1_000_000 && !t.starts_with("/missing"))
        .collect();
    kept.push((3_900_000, "/index.html?c=0&i=99".into()));
    let n = kept.len() as u64;
    assert_eq!(n, 3 * 12 + 1);
    assert_eq!(r["planned"].as_u64(), Some(n), "{r}");
    assert_eq!(r["outside_window"].as_u64(), Some(3 * 5), "{r}");
    assert_eq!(r["sent_without_body"].as_u64(), Some(1), "{r}");
    assert!(r["gaps_shortened"].as_u64().unwrap() > 0, "{r}");
    // Unshortened the window spans 2.9 s; each gap of 86 ms or more becomes 50 ms.
    let span = r["span_s"].as_f64().unwrap();
    assert!(span < 2.0, "{r}");
    assert_eq!(r["fidelity"]["requests"].as_u64(), Some(n), "{r}");
    assert_eq!(
        doc["runs"][0]["connections_stats"]["opened"].as_u64(),
        Some(1),
        "{doc}"
    );
    // One connection, one request at a time: the server saw them in the log's order.
    let served_targets: Vec<String> = std::fs::read_to_string(&served_log)
        .unwrap()
        .lines()
        .map(|l| served_line(l).1)
        .filter(|t| t.contains("c="))
        .collect();
    let want: Vec<String> = kept.into_iter().map(|(_, t)| t).collect();
    assert_eq!(served_targets, want);
}

/// Bad replays stop before any load with one line, exit 2: an unreadable, empty or
/// unparsable log, one that runs backwards past the reorder window, filters that leave
/// nothing, --loop without an end.
#[test]
fn replay_refuses_bad_input_with_one_line() {
    let dir = tempdir("bench-bad");
    let empty = dir.join("empty.log");
    std::fs::write(&empty, "").unwrap();
    let junk = dir.join("junk.log");
    std::fs::write(&junk, "this is not\nan access log\n").unwrap();
    let good = dir.join("good.log");
    std::fs::write(&good, known_log().0).unwrap();
    // Most lines earlier than a second already handed on (60 s, released when 200 s
    // was read): past the 10 s reorder window.
    let backwards = dir.join("backwards.log");
    let line = |s: u32| {
        format!(
            "10.0.0.1 - - [01/Jan/2026:00:{:02}:{:02} +0000] \"GET / HTTP/1.1\" 200 5\n",
            s / 60,
            s % 60
        )
    };
    let text: String = [60, 200, 10, 11, 12].into_iter().map(line).collect();
    std::fs::write(&backwards, text).unwrap();
    let (missing, good) = (dir.join("missing.log"), good.to_str().unwrap().to_string());
    let url = "http://127.0.0.1:9/";
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec![missing.to_str().unwrap()], "cannot read"),
        (vec![empty.to_str().unwrap()], "no requests in the log"),
        (vec![junk.to_str().unwrap()], "--log-format"),
        (vec![backwards.to_str().unwrap()], "reorder window"),
        (vec![&good, "--only-method", "PUT"], "nothing to replay"),
        (vec![&good, "--only-path", "^/nowhere"], "nothing to replay"),
        (vec![&good, "--loop"], "give -d or -n"),
        (
            vec![&good, "--rate", "10"],
            "cannot be combined with --rate",
        ),
        (vec![&good, "--max-clients", "1"], "--max-clients"),
    ];
    for (extra, says) in cases {
        let mut args = vec!["bench", "--replay"];
        args.extend(extra.iter().copied());
        args.push(url);
        let (code, _, err) = crate::common::volley(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // Loopback client addresses reach only a loopback target: refused before any load.
    let args = [
        "bench",
        "--replay",
        &good,
        "--client-addresses",
        "http://[::1]:9/",
    ];
    let (code, _, err) = crate::common::volley(&args);
    assert_eq!((code, err.lines().count()), (2, 1), "{err}");
    assert!(err.contains("not on IPv4 loopback"), "{err}");
}

/// A study's `kind = "replay"` workload: a rate step against the built-in server plays
/// the log at speed rate / its mean rate, every answer counted; the plan names the
/// log's mean rate, and request keys on a replay workload are refused in one line.
#[test]
fn a_replay_study_step_plays_its_log_at_the_steps_speed() {
    let dir = tempdir("study");
    // 60 requests of three clients, 100 ms apart: 10 req/s at speed 1, all to a page
    // the sizes fixture has.
    let text: String = (0..60u64)
        .map(|i| {
            format!(
                "10.0.0.{} - - [01/Jan/2026:00:00:{:02}.{:06} +0000] \"GET /index.html?i={i} HTTP/1.1\" 200 5 \"-\" \"t\"\n",
                i % 3,
                i / 10,
                (i % 10) * 100_000
            )
        })
        .collect();
    let log = dir.join("site.log");
    std::fs::write(&log, text).unwrap();
    let study = |extra: &str| {
        format!(
            r#"
name = "replay-test"
{BUILTIN_SIZES}
[[workload]]
name = "site"
kind = "replay"
log = "{}"
{extra}
[load]
model = "open"
[sweep]
rate = [20]
[steps]
duration = "3s"
warmup = "0s"
cooldown = "0s"
retries = 0
[slo]
p99 = "2s"
"#,
            log.display()
        )
    };
    let file = dir.join("replay.toml");
    std::fs::write(&file, study("")).unwrap();
    let db = dir.join("r.db");
    let (code, out, err) = crate::common::volley(&[
        "study",
        "run",
        file.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    // 60 requests, 59 gaps over 5.9 s.
    assert!(out.contains("mean 10.0 req/s = speed 1"), "{out}");
    let both = format!("{out}\n{err}");
    let step = both
        .lines()
        .find(|l| l.contains("builtin site rate=20") && l.contains("req/s"))
        .unwrap_or_else(|| panic!("no step line: {both}"));
    assert!(step.contains(" 0 errors"), "{step}");

    std::fs::write(&file, study("paths = [\"/x\"]")).unwrap();
    let (code, _, err) =
        crate::common::volley(&["study", "run", file.to_str().unwrap(), "--dry-run"]);
    assert_eq!((code, err.trim().lines().count()), (2, 1), "{err}");
    assert!(err.contains("paths is not a replay key"), "{err}");
}

/// A study's replay with `client_addresses = true` against the built-in server on
/// loopback (an external target, its access log on): the plan says so, and every
/// replayed request of logged client k reached the server from 127.0.0.(2 + k), as
/// `bench --replay --client-addresses` sends them. The step is shorter than the log at
/// its speed, so no client comes back in a second pass.
#[test]
fn a_replay_study_gives_each_client_its_own_loopback_address() {
    let KnownSite {
        dir,
        log,
        served_log,
        mut served,
        ..
    } = known_site("study-addrs");
    // 60 requests over 3.814 s: speed 1 is 15.5 req/s; 15 req/s plays it in ~3.9 s,
    // longer than the 3 s step (the shortest a rate step may be).
    let study = format!(
        r#"
name = "replay-addrs"
[[target]]
name = "served"
kind = "external"
url = "http://{}/index.html"
[[workload]]
name = "known"
kind = "replay"
log = "{}"
client_addresses = true
[load]
model = "open"
[sweep]
rate = [15]
[steps]
duration = "3s"
warmup = "0s"
cooldown = "0s"
retries = 0
[slo]
p99 = "2s"
"#,
        served.addr,
        log.display()
    );
    let file = dir.join("addrs.toml");
    std::fs::write(&file, study).unwrap();
    let db = dir.join("a.db");
    let (code, out, err) = crate::common::volley(&[
        "study",
        "run",
        file.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(
        served.stop().is_some_and(|s| s.success()),
        "serve did not stop cleanly"
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("from its own loopback address (127.0.0.2 on"),
        "{out}"
    );
    assert_eq!(
        clients_by_address(&served_log),
        CLIENTS.len(),
        "every client replayed"
    );
}

pub(crate) fn tempdir(name: &str) -> crate::common::TestDir {
    crate::common::fresh_dir(&format!("volley-replay-{name}"))
}

/// `volley log example` in `dir`: a log of `span` at 10 requests a second and the pages
/// it asks for; returns the log's and the docroot's paths.
fn example_site(dir: &std::path::Path, span: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let (log, root) = (dir.join("example.log"), dir.join("root"));
    let (code, _, err) = crate::common::volley(&[
        "log",
        "example",
        log.to_str().unwrap(),
        "--span",
        span,
        "--rate",
        "10",
        "--docroot",
        root.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    (log, root)
}
