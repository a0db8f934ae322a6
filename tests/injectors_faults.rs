//! Several injectors when things go wrong: an injector killed mid-step, every injector
//! lost, the study itself killed. Real `volley agent` processes and a private
//! nats-server, started by `volley study run` on this host, against a `volley serve`
//! the test starts; the helpers are those of `injectors`.

use crate::injectors::*;

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use volley_store::Store;

/// `volley study run` of `file` started (stderr piped), and the `n` agents among its
/// children whose command line holds `needle` (bounded: they appear within 20 s or
/// the test fails).
fn study_with_agents(
    file: &Path,
    db: &Path,
    needle: &str,
    n: usize,
) -> (std::process::Child, Vec<u32>) {
    let study = study_command(file, db)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut agents = Vec::new();
    wait_until(200, || {
        agents = children_with(study.id(), needle);
        agents.len() == n
    });
    assert_eq!(agents.len(), n, "{n} agent(s) {needle:?}: {agents:?}");
    (study, agents)
}

#[test]
fn a_killed_injector_degrades_the_run_and_leaves_the_others_intact() {
    let (dir, mut server, file) = served_study_in(
        "kill",
        "inj-kill",
        r#"
[load]
model = "open"
rate = 50
concurrency = 2
[injectors]
count = 3
share = "each"
[steps]
duration = "8s"
warmup = "0s"
cooldown = "0s"
"#,
    );
    let db = dir.path().join("v.db");
    let (study, victim) = study_with_agents(&file, &db, "--name inj2", 1);
    // Mid-run: the agents start about 2 s after they join (the start lead), and run 8 s.
    std::thread::sleep(std::time::Duration::from_secs(6));
    Command::new("kill")
        .args(["-KILL", &victim[0].to_string()])
        .status()
        .unwrap();
    let out = study.wait_with_output().unwrap();
    server.stop();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let steps = step_summaries(&db);
    let s = &steps[0];
    let inj = s["injectors"].as_array().unwrap();
    let lost: Vec<&str> = inj
        .iter()
        .filter(|i| !i["lost_from_s"].is_null())
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(lost, vec!["inj2"], "{inj:?}");
    assert!(s["degraded_from_s"].as_u64().is_some());
    // The others are intact: each sent its whole 8 s at 50 req/s (one request of slack
    // for the boundary of its schedule), and the merged run is exactly theirs.
    let mut sum = 0;
    for i in inj.iter().filter(|i| i["name"] != "inj2") {
        let n = completed(&i["summary"]);
        assert!((399..=401).contains(&n), "{}: {n}", i["name"]);
        sum += n;
    }
    assert_eq!(completed(s), sum);
    let notes = s["notes"].to_string();
    assert!(notes.contains("inj2 was lost"), "{notes}");
    // volley started it and saw its process exit: lost for that, not after the
    // silence bound (10 s here, longer than the 4 s of the step left).
    assert!(
        notes.contains("(its process exited)") && inj.iter().any(|i| i["process_exited"] == true),
        "{notes}"
    );
    let phases = s["phases"].as_array().unwrap();
    assert!(phases.iter().any(|p| p["degraded"] == true), "{phases:?}");
}

#[test]
fn every_injector_lost_keeps_the_step_as_incomplete_with_the_seconds_that_came() {
    let (dir, mut server, file) = served_study_in(
        "all-lost",
        "inj-all-lost",
        r#"
[load]
model = "open"
rate = 40
concurrency = 2
timeout = "1s"
[injectors]
count = 2
share = "each"
[steps]
duration = "20s"
warmup = "0s"
cooldown = "0s"
retries = 0
"#,
    );
    let db = dir.path().join("v.db");
    let (study, agents) = study_with_agents(&file, &db, " agent ", 2);
    // Mid-run: the agents start about 2 s after they join, send each second once its
    // 1 s timeout has passed, and would run 20 s.
    std::thread::sleep(std::time::Duration::from_secs(8));
    for pid in &agents {
        Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
    }
    // Both silent past the step's grace (10 s): both lost, the step kept all the same.
    let out = study.wait_with_output().unwrap();
    server.stop();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("incomplete"), "the step's line says so: {err}");
    let store = Store::open(&db).unwrap();
    let run = store.list_runs().unwrap()[0].id;
    let steps = store.steps(run).unwrap();
    assert_eq!(steps.len(), 1, "one step, not measured again: {err}");
    assert_eq!(steps[0].label.as_deref(), Some("incomplete"));
    let s = &steps[0].summary;
    assert_eq!(s["incomplete"], true, "{s}");
    let inj = s["injectors"].as_array().unwrap();
    assert!(inj.iter().all(|i| i["lost_from_s"].is_u64()), "{inj:?}");
    assert!(s["notes"].to_string().contains("every injector"), "{s}");
    // What streamed before the kill is the step: the merged seconds' sum, equal to the
    // injectors' stored seconds, never zero and never a pass.
    let streamed: u64 = store
        .injector_seconds(run, 0)
        .unwrap()
        .iter()
        .map(|x| x.values["requests"].as_u64().unwrap())
        .sum();
    assert!(streamed > 0, "seconds streamed before the kill");
    assert_eq!(completed(s), streamed, "{s}");
    assert_ne!(
        steps[0]
            .verdict
            .as_ref()
            .map(|v| v["sustain"]["sustainable"].clone()),
        Some(Value::Bool(true)),
        "never judged a pass"
    );
}

#[test]
fn a_sigkilled_study_leaves_no_agent_and_no_bus_behind() {
    let (dir, mut server, file) = served_study_in(
        "sigkill",
        "inj-sigkill",
        r#"
[load]
model = "open"
rate = 20
concurrency = 2
[injectors]
count = 2
[steps]
duration = "30s"
warmup = "0s"
"#,
    );
    // A state directory of its own, so the sweep below reads this study's ledger only.
    let state = dir.path().join("state");
    let mut study = study_command(&file, &dir.path().join("v.db"))
        .env("VOLLEY_STATE_DIR", &state)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut made = Vec::new();
    wait_until(200, || {
        made = children_with(study.id(), "agent --bus");
        made.extend(children_with(study.id(), "nats-server"));
        made.len() == 3
    });
    assert_eq!(made.len(), 3, "two agents and one nats-server");
    std::thread::sleep(std::time::Duration::from_secs(3));
    study.kill().unwrap();
    study.wait().unwrap();
    // PR_SET_PDEATHSIG: each gets SIGTERM as its parent dies; allow them 3 s to go.
    let mut left = made.clone();
    wait_until(30, || {
        left.retain(|&p| alive(p));
        left.is_empty()
    });
    server.stop();
    assert!(left.is_empty(), "still running: {left:?}");
    // The private bus's directory (its key among its files) outlives a SIGKILL; the
    // next volley's sweep removes it and says so.
    let ledger = std::fs::read_to_string(state.join(format!("{}.json", study.id()))).unwrap();
    let ledger: serde_json::Value = serde_json::from_str(&ledger).unwrap();
    let bus: Vec<std::path::PathBuf> = ledger["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"] == "bus")
        .map(|t| t["dir"].as_str().unwrap().into())
        .collect();
    assert_eq!(bus.len(), 1, "{ledger}");
    assert!(bus[0].join("server.key").exists(), "{}", bus[0].display());
    let swept = study_command(&file, &dir.path().join("v.db"))
        .arg("--dry-run")
        .env("VOLLEY_STATE_DIR", &state)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&swept.stderr);
    assert!(!bus[0].exists(), "{} left: {said}", bus[0].display());
    assert!(said.contains(&bus[0].display().to_string()), "{said}");
}
