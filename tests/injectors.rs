//! Several injectors through the real binary: `volley study run` with an `[injectors]`
//! table starts a private nats-server (installed by scripts/install-deps.sh) and `volley
//! agent` processes on this host, against a `volley serve` the test starts with its
//! access log on. Traffic stays on loopback; every run is bounded by its study file.

mod common;

use std::path::Path;
use std::process::Command;

use common::Served;
use serde_json::Value;
use volley_store::Store;

/// A private directory for one test, removed on drop.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("volley-inj-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A docroot with one small page.
fn docroot(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("www");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.html"), "<p>volley</p>\n".repeat(20)).unwrap();
    root
}

fn study(dir: &Path, body: &str) -> std::path::PathBuf {
    let f = dir.join("s.toml");
    std::fs::write(&f, body).unwrap();
    f
}

fn run_study(file: &Path, db: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["study", "run"])
        .arg(file)
        .arg("--db")
        .arg(db)
        .output()
        .expect("run volley study")
}

/// The summaries of every step of the study's only run.
fn step_summaries(db: &Path) -> Vec<Value> {
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

fn completed(summary: &Value) -> u64 {
    summary["requests"]["completed"].as_u64().unwrap()
}

#[test]
fn staggered_injectors_merge_exactly_and_phase_one_two_three_two_one() {
    let dir = TempDir::new("phases");
    let log = dir.path().join("access.log");
    let root = docroot(dir.path());
    let mut server = Served::start(&root, &["--access-log", log.to_str().unwrap()]);
    let file = study(
        dir.path(),
        &format!(
            r#"
name = "inj"
[[target]]
name = "served"
kind = "external"
url = "{}/a.html"
[[workload]]
name = "w"
paths = ["/a.html"]
[load]
model = "open"
rate = 40
concurrency = 2
[injectors]
count = 3
stagger = "1s"
share = "each"
[steps]
duration = "4s"
warmup = "0s"
cooldown = "0s"
"#,
            server.base
        ),
    );
    let db = dir.path().join("v.db");
    let out = run_study(&file, &db);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.stop();
    let steps = step_summaries(&db);
    assert_eq!(steps.len(), 1);
    let s = &steps[0];
    let merged = completed(s);
    let injectors = s["injectors"].as_array().unwrap();
    assert_eq!(injectors.len(), 3);
    let sum: u64 = injectors.iter().map(|i| completed(&i["summary"])).sum();
    let lines = std::fs::read_to_string(&log).unwrap().lines().count() as u64;
    assert!(merged > 0);
    assert_eq!(merged, sum, "merged == sum of the injectors'");
    assert_eq!(merged, s["streamed_requests"].as_u64().unwrap());
    assert_eq!(merged, lines, "merged == the server's access log lines");
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
}

#[test]
fn bad_injector_tables_are_usage_errors_naming_the_key() {
    let dir = TempDir::new("bad");
    let cases = [
        ("count = 0", "injectors.count"),
        ("count = 2\nplacement = \"netns\"", "injectors.placement"),
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
}
