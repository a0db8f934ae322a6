//! Several injectors through the real binary: `volley study run` with an `[injectors]`
//! table starts a private nats-server (installed by scripts/install-deps.sh) and `volley
//! agent` processes on this host, against a `volley serve` the test starts with its
//! access log on. Traffic stays on loopback; every run is bounded by its study file.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::Served;
use serde_json::Value;
use volley_store::Store;

use crate::common::TestDir;

/// A private directory for one test (`volley-inj-TAG-...`), removed when dropped.
pub(crate) fn temp_dir(tag: &str) -> TestDir {
    crate::common::fresh_dir(&format!("volley-inj-{tag}"))
}

/// A docroot with one small page.
pub(crate) fn docroot(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("www");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.html"), "<p>volley</p>\n".repeat(20)).unwrap();
    root
}

pub(crate) fn study(dir: &Path, body: &str) -> std::path::PathBuf {
    let f = dir.join("s.toml");
    std::fs::write(&f, body).unwrap();
    f
}

/// A study of the `volley serve` at `base` (an external target) loading `/a.html`;
/// `rest` is its `[load]`, `[injectors]` and `[steps]`.
pub(crate) fn served_study(name: &str, base: &str, rest: &str) -> String {
    format!(
        "name = \"{name}\"\n[[target]]\nname = \"served\"\nkind = \"external\"\nurl = \"{base}/a.html\"\n[[workload]]\nname = \"w\"\npaths = [\"/a.html\"]\n{rest}"
    )
}

/// A fresh directory `tag`, a `volley serve` of [`docroot`] in it, and the study
/// `name` of that server ([`served_study`] with `rest`) written there.
pub(crate) fn served_study_in(
    tag: &str,
    name: &str,
    rest: &str,
) -> (TestDir, Served, std::path::PathBuf) {
    let dir = temp_dir(tag);
    let root = docroot(dir.path());
    let server = Served::start(&root, &[]);
    let file = study(dir.path(), &served_study(name, &server.base, rest));
    (dir, server, file)
}

/// `volley study run FILE --db DB`, for the caller to run or spawn.
pub(crate) fn study_command(file: &Path, db: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_volley"));
    c.args(["study", "run"]).arg(file).arg("--db").arg(db);
    c
}

pub(crate) fn run_study(file: &Path, db: &Path) -> std::process::Output {
    study_command(file, db).output().expect("run volley study")
}

/// Checks `done` every 100 ms, at most `tries` times (bounded: a test that waits for
/// something that never happens fails on its own assertion afterwards).
pub(crate) fn wait_until(tries: u32, mut done: impl FnMut() -> bool) {
    for _ in 0..tries {
        if done() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The summaries of every step of the study's only run.
pub(crate) fn step_summaries(db: &Path) -> Vec<Value> {
    let store = Store::open(db).unwrap();
    let runs = store.list_runs().unwrap();
    assert_eq!(runs.len(), 1, "one target, one run");
    store
        .steps(runs[0].id)
        .unwrap()
        .into_iter()
        .map(|s| s.summary)
        .collect()
}

pub(crate) fn completed(summary: &Value) -> u64 {
    summary["requests"]["completed"].as_u64().unwrap()
}

/// Three local injectors at 40 req/s each, staggered by `stagger` and active for
/// `duration` after a `warmup`, against a `volley serve` with its access log on: the study's directory,
/// the server's log and the store, once the study ran and the server stopped.
fn staggered_study(
    tag: &str,
    stagger: &str,
    duration: &str,
    warmup: &str,
) -> (TestDir, PathBuf, PathBuf) {
    let dir = temp_dir(tag);
    let log = dir.path().join("access.log");
    let root = docroot(dir.path());
    let mut server = Served::start(&root, &["--access-log", log.to_str().unwrap()]);
    let rest = format!(
        "[load]\nmodel = \"open\"\nrate = 40\nconcurrency = 2\n[injectors]\ncount = 3\n\
         stagger = \"{stagger}\"\nshare = \"each\"\n[steps]\nduration = \"{duration}\"\n\
         warmup = \"{warmup}\"\ncooldown = \"0s\"\n"
    );
    let file = study(dir.path(), &served_study("inj", &server.base, &rest));
    let db = dir.path().join("v.db");
    let out = run_study(&file, &db);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.stop();
    (dir, log, db)
}

#[test]
fn staggered_injectors_merge_exactly_and_phase_one_two_three_two_one() {
    let (dir, log, db) = staggered_study("phases", "1s", "4s", "0s");
    let steps = step_summaries(&db);
    assert_eq!(steps.len(), 1);
    let s = &steps[0];
    let merged = completed(s);
    let injectors = s["injectors"].as_array().unwrap();
    assert_eq!(injectors.len(), 3);
    let sum: u64 = injectors.iter().map(|i| completed(&i["summary"])).sum();
    let lines = common::load_lines(&log);
    assert!(merged > 0);
    assert_eq!(merged, sum, "merged == sum of the injectors'");
    assert_eq!(merged, s["streamed_requests"].as_u64().unwrap());
    assert_eq!(merged, lines, "merged == the server's access log lines");
    // The server's own log, cut by client address, gives the same phases.
    server_log_phases(dir.path(), &log, merged);
    // Each injector's own seconds were stored as they arrived, beside the merged step.
    let store = Store::open(&db).unwrap();
    let run = store.list_runs().unwrap()[0].id;
    let seconds = store.injector_seconds(run, 0).unwrap();
    for i in injectors {
        let name = i["name"].as_str().unwrap();
        let stored: u64 = seconds
            .iter()
            .filter(|s| s.injector == name)
            .map(|s| s.values["requests"].as_u64().unwrap())
            .sum();
        assert_eq!(stored, completed(&i["summary"]), "{name}'s stored seconds");
        // Its own per-second series comes from the digests its final record carried
        // (the agents keep no closed second): every second it loaded has its latency.
        let own = i["summary"]["seconds"].as_array().unwrap();
        assert!(
            own.iter()
                .filter(|x| x["completed"].as_u64().unwrap() > 0)
                .all(|x| x["p99_ms"].as_f64().unwrap() > 0.0),
            "{name}: {own:?}"
        );
    }
    // The merged step's seconds were rebuilt from the coordinator's merged seconds:
    // they add up to the merged count, and their histograms are stored.
    let per_second: u64 = s["seconds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["completed"].as_u64().unwrap())
        .sum();
    assert_eq!(per_second, s["streamed_requests"].as_u64().unwrap());
    let step = store.steps(run).unwrap()[0].id;
    let hists = store.histograms(step).unwrap();
    assert!(
        hists.iter().filter(|h| h.second.is_some()).count() >= 7 * 5,
        "per-second histograms of the merged step"
    );
    // The bus was secured (the default): no note says otherwise. Every party had its
    // credentials, so the bus refused none (volley's own start-up check of the bus
    // once counted as a refusal in every step; issue 26).
    assert!(
        !s["notes"].to_string().contains("in the clear"),
        "{}",
        s["notes"]
    );
    assert!(
        !s["notes"].to_string().contains("the bus refused"),
        "{}",
        s["notes"]
    );
    let active: Vec<usize> = s["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["injectors"].as_array().unwrap().len())
        .collect();
    assert_eq!(active, vec![1, 2, 3, 2, 1], "{}", s["phases"]);
    let first: Vec<&str> = s["phases"][0]["injectors"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(first, vec!["inj1"], "injectors start in name order");
    // The issue's JSON names are all there.
    for key in [
        "injectors",
        "start_s",
        "end_s",
        "requests",
        "rps",
        "p50_ms",
        "p99_ms",
        "errors",
    ] {
        assert!(s["phases"][2].get(key).is_some(), "phases[] lacks {key}");
    }
    // The reports carry the seed's table and each injector's own figures.
    let (md, json, html) = (
        dir.path().join("r.md"),
        dir.path().join("r.json"),
        dir.path().join("r.html"),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["report", "1", "--db"])
        .arg(&db)
        .arg("--md")
        .arg(&md)
        .arg("--json")
        .arg(&json)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.contains("## Phases"), "{md}");
    assert!(md.contains("| 3 (inj1 inj2 inj3) |"), "{md}");
    assert!(
        md.contains("## Injectors") && md.contains("| inj3 |"),
        "{md}"
    );
    assert!(md.contains("left out s"), "{md}");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let step = &json["targets"][0]["steps"][0];
    assert_eq!(step["phases"].as_array().unwrap().len(), 5);
    assert_eq!(step["injectors"], 3);
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(html.contains("Phases: intervals with the same active injectors"));
}

/// An injected step warms up as any step does, inside each agent's own run
/// (docs/methodology.md, "Several injectors"): the server's log holds the measured
/// requests and the agents' warm-ups and nothing else (no warm-up run from this host),
/// the merged step's warm-up is the sum of the agents', and the second before a later
/// agent's first (its warm-up's load, uncounted) is left out of the phase it falls in.
#[test]
fn an_injected_step_warms_up_inside_each_agents_run() {
    let (_dir, log, db) = staggered_study("warm", "2s", "3s", "1s");
    let steps = step_summaries(&db);
    let s = &steps[0];
    let injectors = s["injectors"].as_array().unwrap();
    let warm: Vec<u64> = injectors
        .iter()
        .map(|i| i["summary"]["warmup"]["requests"].as_u64().unwrap())
        .collect();
    assert!(
        warm.iter().all(|&w| w > 0),
        "each agent warmed up: {warm:?}"
    );
    let warm: u64 = warm.iter().sum();
    assert_eq!(
        s["warmup"]["requests"].as_u64(),
        Some(warm),
        "{}",
        s["warmup"]
    );
    assert_eq!(
        common::load_lines(&log),
        completed(s) + warm,
        "the server saw the measured requests and the warm-ups"
    );
    let left_out: Vec<u64> = s["phases"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["left_out_s"].as_array().unwrap().clone())
        .map(|x| x.as_u64().unwrap())
        .collect();
    for i in injectors {
        let first = i["offset_s"].as_u64().unwrap();
        if first > 0 {
            assert!(
                left_out.contains(&(first - 1)),
                "{}'s warm-up second: {}",
                i["name"],
                s["phases"]
            );
        }
    }
}

/// `volley log phases --json` of the load's lines of the server's log `log` (volley's
/// readiness probe and path check come from 127.0.0.1 before the load, User-Agent
/// volley-probe, and are left out as `load_lines` does), checked to hold `requests`
/// requests and three staggered local agents' phases: 1, 2, 3, 2, 1 from their own
/// addresses.
fn server_log_phases(dir: &Path, log: &Path, requests: u64) -> Value {
    let load: String = std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter(|l| !l.contains("\"volley-probe\""))
        .map(|l| format!("{l}\n"))
        .collect();
    let load_log = dir.join("load.log");
    std::fs::write(&load_log, &load).unwrap();
    let (code, json, err) =
        common::volley(&["log", "phases", "--json", load_log.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let read: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(read["requests"].as_u64(), Some(requests), "{read}");
    let clients: Vec<Vec<&str>> = read["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let c = p["clients"].as_array().unwrap();
            c.iter().map(|c| c.as_str().unwrap()).collect()
        })
        .collect();
    let (a, b, c) = ("127.0.0.2", "127.0.0.3", "127.0.0.4");
    let want: Vec<Vec<&str>> = vec![vec![a], vec![a, b], vec![a, b, c], vec![b, c], vec![c]];
    assert_eq!(clients, want, "{read}");
    read
}

/// Seed 003's check from the server's side: three local injectors staggered by three
/// seconds (so that every phase keeps a whole second on either clock once its edges
/// are left out), each connecting from its own loopback address (127.0.0.2, .3, .4), so that
/// `volley log phases` on the built-in server's own access log finds the phases 1, 2,
/// 3, 2, 1 the study found, each phase's requests within 10% of the study's merged
/// req/s over its seconds, plus the requests lateness can carry across its edges (the
/// log stamps a request when the server saw it, volley by its intended second).
#[test]
fn staggered_injectors_are_told_apart_in_the_servers_log_and_its_phases_match() {
    let (dir, log, db) = staggered_study("logphases", "3s", "9s", "0s");
    let steps = step_summaries(&db);
    let s = &steps[0];
    let study_rps: Vec<f64> = s["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["rps"].as_f64().unwrap())
        .collect();
    assert_eq!(study_rps.len(), 5, "{}", s["phases"]);
    let read = server_log_phases(dir.path(), &log, completed(s));
    // A request the log stamps in another second than its intended one moved across
    // an edge by its lateness: at most (run's rate x the step's longest response
    // time) of them cross each of a phase's two edges. Beyond that, 10%.
    let late_s = s["latency"]["response_time"]["max_ms"].as_f64().unwrap() / 1e3;
    for (i, (p, want)) in read["phases"]
        .as_array()
        .unwrap()
        .iter()
        .zip(&study_rps)
        .enumerate()
    {
        let seconds = p["seconds"].as_u64().unwrap() as f64;
        assert!(seconds >= 1.0, "phase {}: {p}", i + 1);
        let got = p["requests"].as_u64().unwrap() as f64;
        let crossed = 2.0 * (120.0 * late_s + 1.0);
        assert!(
            (got - want * seconds).abs() <= 0.1 * want * seconds + crossed,
            "phase {}: the server's log has {got} requests in {seconds} s, the study {want} \
             req/s (up to {crossed:.0} crossed an edge, the longest response took {late_s} s): {read}",
            i + 1
        );
    }
}

#[test]
fn a_bus_in_the_clear_is_asked_for_and_the_plan_and_the_step_say_so() {
    let (dir, mut server, file) = served_study_in(
        "clear",
        "clear",
        r#"
[load]
model = "open"
rate = 20
concurrency = 2
[injectors]
count = 2
bus_security = "off"
[steps]
duration = "3s"
warmup = "0s"
cooldown = "0s"
"#,
    );
    let db = dir.path().join("v.db");
    let out = run_study(&file, &db);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.stop();
    // The printed plan says so before anything runs, the stored step after.
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(
        plan.contains("(in the clear: bus_security = \"off\")"),
        "{plan}"
    );
    let steps = step_summaries(&db);
    let notes = steps[0]["notes"].to_string();
    assert!(notes.contains("the bus ran in the clear"), "{notes}");
    // `volley report` prints the stored note beside the step, in every format.
    let md = dir.path().join("r.md");
    let md = crate::common::markdown_report(&[], &db, &md);
    let section = md.split("## Notes on the steps").nth(1).unwrap_or_default();
    assert!(section.contains("the bus ran in the clear"), "{md}");
}

#[test]
fn bad_injector_tables_are_usage_errors_naming_the_key() {
    let dir = temp_dir("bad");
    let cases = [
        ("count = 0", "injectors.count"),
        ("count = 2\nplacement = \"ssh\"", "injectors.hosts"),
        (
            "count = 2\nplacement = \"ssh\"\nhosts = [\"local\", \"a\", \"b\"]",
            "injectors.hosts",
        ),
        (
            "count = 2\nplacement = \"ssh\"\nhosts = [\"-oProxyCommand=x\"]",
            "injectors.hosts",
        ),
        (
            "count = 2\nplacement = \"ssh\"\nhosts = [\"local\", \"root@10.9.0.2\"]",
            "injectors.bus_url",
        ),
        (
            "count = 2\nplacement = \"ssh\"\nhosts = [\"local\", \"root@10.9.0.2\"]\nbus_url = \"nats://127.0.0.1\"",
            "injectors.bus_url",
        ),
        (
            "count = 2\nplacement = \"ssh\"\nhosts = [\"local\", \"root@10.9.0.2\"]\nbus_url = \"nats://10.9.0.1\"",
            "injectors.placement",
        ),
        (
            "count = 2\nplacement = \"ssh\"\nhosts = [\"local\"]\nssh_options = [\"Port\"]",
            "injectors.ssh_options",
        ),
        ("count = 2\nhosts = [\"local\"]", "injectors.hosts"),
        ("count = 2\nbus_url = \"http://x:1\"", "injectors.bus_url"),
        ("count = 2\nbus = \"mine\"", "injectors.bus"),
        ("count = 2\nready_timeout = \"soon\"", "injectors.ready_timeout"),
        ("count = 2\nplacement = \"kubernetes\"", "injectors.bus_url"),
        (
            "count = 2\nplacement = \"kubernetes\"\nbus_url = \"nats://127.0.0.1:4222\"\nbus_security = \"off\"",
            "injectors.placement",
        ),
        ("count = 2\nbus_security = \"maybe\"", "injectors.bus_security"),
        (
            "count = 2\nplacement = \"kubernetes\"\nbus_url = \"nats://127.0.0.1:4222\"",
            "injectors.bus_credentials",
        ),
        (
            "count = 2\nbus = \"existing\"\nbus_url = \"nats://127.0.0.1:4222\"\nbus_credentials = \"/nonexistent/c.json\"",
            "/nonexistent/c.json",
        ),
        (
            "count = 2\nagent_credentials = \"{name}.json\"",
            "injectors.agent_credentials",
        ),
        (
            "count = 2\nlinks = [{ injectors = 1, rate = \"10mbit\" }]",
            "injectors.links",
        ),
        (
            "count = 2\nplacement = \"netns\"\nlinks = [{ injectors = 1, rate = \"fast\" }]",
            "injectors.links.rate",
        ),
        (
            "count = 2\nplacement = \"netns\"\nlinks = [{ injectors = 1, delay = \"soon\" }]",
            "injectors.links.delay",
        ),
        (
            "count = 2\nplacement = \"netns\"\nlinks = [{ injectors = 3 }]",
            "injectors.links",
        ),
        ("count = 2\nplacement = \"moon\"", "injectors.placement"),
        ("count = 2\nstagger = \"1.5s\"", "injectors.stagger"),
        ("count = 2\nshare = \"half\"", "injectors.share"),
        ("count = 2\nmin_agents = 3", "injectors.min_agents"),
        ("count = 2\ncolour = \"red\"", "colour"),
    ];
    for (table, key) in cases {
        let file = study(
            dir.path(),
            &format!(
                "name = \"bad\"\n[[target]]\nname = \"b\"\nkind = \"builtin\"\n[[workload]]\nname = \"w\"\npaths = [\"/\"]\n[steps]\nduration = \"3s\"\n[injectors]\n{table}\n"
            ),
        );
        let out = run_study(&file, &dir.path().join("v.db"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{table}: {err}");
        assert!(err.contains(key), "{table}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{table}: one line: {err}");
    }
    // --ssh-option is for ssh hosts only, and must be an OpenSSH option.
    let file = study(
        dir.path(),
        "name = \"bad\"\n[[target]]\nname = \"b\"\nkind = \"builtin\"\n[[workload]]\nname = \"w\"\npaths = [\"/\"]\n[steps]\nduration = \"3s\"\n[injectors]\ncount = 2\nplacement = \"ssh\"\nhosts = [\"local\"]\n",
    );
    for (flag, opts) in [("--ssh-option", "Port"), ("--ssh-option", "")] {
        let out = study_command(&file, &dir.path().join("v.db"))
            .args(["--dry-run", flag, opts])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{opts:?}: {err}");
        assert!(err.contains("--ssh-option"), "{err}");
    }
    let out = study_command(&file, &dir.path().join("v.db"))
        .args(["--dry-run", "--ssh-option", "Port=2222"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let local = study(
        dir.path(),
        "name = \"bad\"\n[[target]]\nname = \"b\"\nkind = \"builtin\"\n[[workload]]\nname = \"w\"\npaths = [\"/\"]\n[steps]\nduration = \"3s\"\n[injectors]\ncount = 2\n",
    );
    let out = study_command(&local, &dir.path().join("v.db"))
        .args(["--dry-run", "--ssh-option", "Port=2222"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--ssh-option needs"), "{err}");
}

/// Injectors send plain HTTP/1.1: a swept h2 or h3 (or TLS, HTTP/2, compression) is
/// refused with the plan, in one line, before anything runs, not measured as HTTP/1.1.
#[test]
fn a_protocol_injectors_cannot_speak_is_refused_with_the_plan() {
    let dir = temp_dir("proto");
    let base = "name = \"p\"\n[[target]]\nname = \"b\"\nkind = \"builtin\"\n[[workload]]\nname = \"w\"\npaths = [\"/\"]\n[steps]\nduration = \"3s\"\n[injectors]\ncount = 2\n";
    let cases = [
        (
            "[sweep]\nprotocol = [\"h1\", \"h2\"]\n",
            "sweep.protocol \"h2\"",
        ),
        (
            "[load]\ntls = true\n[sweep]\nprotocol = [\"h3\"]\n",
            "sweep.protocol \"h3\"",
        ),
        ("[load]\ntls = true\n", "load.tls"),
        ("[load]\nhttp2 = true\n", "load.http2"),
        ("[load]\ncompressed = \"gzip\"\n", "load.compressed"),
    ];
    let db = dir.path().join("v.db");
    for (extra, key) in cases {
        let file = study(dir.path(), &format!("{base}{extra}"));
        for dry in [true, false] {
            let mut cmd = study_command(&file, &db);
            if dry {
                cmd.arg("--dry-run");
            }
            let out = cmd.output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{extra}: {err}");
            assert!(
                err.contains(key) && err.contains("cannot run with [injectors]"),
                "{extra}: {err}"
            );
            assert_eq!(err.trim().lines().count(), 1, "{extra}: one line: {err}");
        }
    }
    assert!(!db.exists(), "nothing ran, nothing stored");
    // HTTP/1.1 named on the axis is what they speak.
    let file = study(dir.path(), &format!("{base}[sweep]\nprotocol = [\"h1\"]\n"));
    let out = study_command(&file, &db).arg("--dry-run").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub(crate) use crate::common::children_with;

/// True while `pid` exists and is not a zombie.
pub(crate) fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().next())
                .is_some_and(|state| state != "Z")
        })
        .unwrap_or(false)
}
