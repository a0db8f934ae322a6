//! Tuning as an axis (issue 23): `sweep.variants = "each"` run for real (each knob
//! alone and all together, each stored as a variant, each knob's effect in the end
//! table), and the shipped tuning study planned by `--dry-run`.

use std::path::{Path, PathBuf};
use std::process::Command;

use volley_store::Store;

fn volley() -> Command {
    Command::new(env!("CARGO_BIN_EXE_volley"))
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("volley-tuning-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn installed(program: &str) -> bool {
    ["/usr/sbin", "/usr/bin"]
        .iter()
        .any(|d| Path::new(d).join(program).exists())
}

#[test]
fn each_knob_runs_alone_and_together_and_the_end_table_gives_its_effect() {
    if !installed("nginx") {
        eprintln!("nginx not installed: run scripts/install-servers.sh");
        return;
    }
    let dir = temp_dir("each");
    let f = dir.join("each.toml");
    std::fs::write(
        &f,
        r#"
name = "each"
[[target]]
name = "web"
kind = "nginx"
[fixture]
kind = "sizes"
[[workload]]
name = "w"
paths = ["/700b.html"]
[load]
model = "closed"
concurrency = 2
[sweep]
variants = "each"
[[variant]]
name = "tuned"
server = { sendfile = false, backlog = 1024 }
[steps]
duration = "1s"
warmup = "0s"
cooldown = "0s"
retries = 0
repeats = 2
"#,
    )
    .unwrap();
    let db = dir.join("each.db");
    let dry = volley()
        .args(["study", "run"])
        .arg(&f)
        .arg("--dry-run")
        .output()
        .unwrap();
    let plan = String::from_utf8_lossy(&dry.stdout);
    assert!(dry.status.success(), "{plan}");
    for v in ["default", "tuned:backlog", "tuned:sendfile", "tuned"] {
        assert!(plan.contains(&format!("variant={v}")), "{v}: {plan}");
    }
    let out = volley()
        .args(["study", "run"])
        .arg(&f)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One line per derived and whole variant, each a ratio with its interval (two
    // repeats a side) or "no difference beyond noise".
    for v in ["tuned:backlog", "tuned:sendfile", "tuned"] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("web w c=2 ka=on: {v} vs default: ")))
            .unwrap_or_else(|| panic!("no line for {v}: {text}"));
        assert!(
            line.contains("x [") && line.contains("(2 vs 2 runs"),
            "{line}"
        );
    }
    let store = Store::open(&db).unwrap();
    let runs = store.list_runs().unwrap();
    let mut steps = store.steps(runs[0].id).unwrap();
    steps.sort_by_key(|s| s.parameters.extra["order"].as_u64().unwrap());
    let variants: Vec<&str> = steps
        .iter()
        .map(|s| s.parameters.extra["variant"].as_str().unwrap())
        .collect();
    let round = ["default", "tuned:backlog", "tuned:sendfile", "tuned"];
    assert_eq!(variants, [round, round].concat(), "interleaved rounds");
    // Each derived variant stored with its one knob, the whole one with both.
    let knobs = |i: usize| steps[i].parameters.extra["tuning"]["knobs"].clone();
    assert_eq!(knobs(1)["backlog"], 1024);
    assert!(knobs(1)["sendfile"].is_null());
    assert_eq!(knobs(2)["sendfile"], false);
    assert!(knobs(2)["backlog"].is_null());
    assert_eq!(
        (knobs(3)["backlog"].clone(), knobs(3)["sendfile"].clone()),
        (1024.into(), false.into())
    );
    let env = &store.run(runs[0].id).unwrap().environment;
    let configs: Vec<(&str, &str)> = env["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["variant"].as_str().unwrap(),
                i["config_text"].as_str().unwrap(),
            )
        })
        .collect();
    let cfg = |v: &str| configs.iter().find(|(n, _)| *n == v).unwrap().1;
    assert!(
        cfg("tuned:backlog").contains("backlog=1024")
            && cfg("tuned:backlog").contains("sendfile on;")
    );
    assert!(
        !cfg("tuned:sendfile").contains("backlog=")
            && cfg("tuned:sendfile").contains("sendfile off;")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `volley study run FILE --dry-run ARGS..` from the repository root: (code, stdout,
/// stderr).
fn dry_run(file: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = volley()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["study", "run"])
        .arg(file)
        .arg("--dry-run")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_shipped_study_plans_with_dry_run() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("studies");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    for f in &files {
        let (code, out, err) = dry_run(f, &[]);
        assert_eq!(code, Some(0), "{}: {err}", f.display());
        assert!(out.contains("estimated total"), "{}: {out}", f.display());
    }
}

#[test]
fn the_tuned_vs_default_study_plans_each_knob_per_server_by_sweep_and_search() {
    let f = Path::new("studies/001-tuned-vs-default.toml");
    let (code, out, err) = dry_run(f, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("567 steps"), "{out}");
    let targets = out.lines().find(|l| l.starts_with("targets: ")).unwrap();
    for t in ["apache", "nginx"] {
        for v in [
            "default",
            "tuned:somaxconn",
            "tuned:tcp_max_syn_backlog",
            "tuned:quickack",
            "tuned:backlog",
            "tuned:defer_accept",
            "tuned:sendfile",
            "tuned",
        ] {
            assert!(
                targets.contains(&format!("{t} variant={v},"))
                    || targets.ends_with(&format!("{t} variant={v}")),
                "{t} {v}: {targets}"
            );
        }
    }
    // The built-in server's own "tuned": the kernel settings, no server knob.
    assert!(
        targets.contains("builtin variant=tuned:quickack"),
        "{targets}"
    );
    assert!(
        !targets.contains("builtin variant=tuned:sendfile"),
        "{targets}"
    );
    let (code, out, err) = dry_run(f, &["--mode", "search"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("21 capacity search(es) from 100 req/s"),
        "{out}"
    );
    let (code, _, err) = dry_run(f, &["--mode", "bisect"]);
    assert_eq!(code, Some(2), "{err}");
    // The header's figures are the plan's.
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(f)).unwrap();
    assert!(text.contains("= 567 steps of ~61 s, about 9.6 hours"));
}
