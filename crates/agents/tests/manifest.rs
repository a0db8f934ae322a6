//! `volley agents manifest`'s output: valid against a Kubernetes release's schema (PyPI's
//! `kubernetes-validate`, in the venv `scripts/install-k8s-validate.sh` makes), secured
//! or not, equal to the golden file (the secured shape, its keys masked: they are fresh
//! each time), and agents named the way the Job names them join a real bus.
//!
//! Regenerate the golden file with `VOLLEY_BLESS=1 cargo test -p volley-agents --test
//! manifest`.

use crate::common;

use common::{join_within, second_record};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use volley_agents::agent::{self, AgentConfig, LoadCtx, LoadError};
use volley_agents::auth::StudyKeys;
use volley_agents::coordinator::{self, CoordinatorConfig};
use volley_agents::manifest::{self, Request, Security};
use volley_agents::msg::Ending;
use volley_agents::share::Whole;

fn golden_request() -> Request {
    let mut r = Request::new(3);
    r.namespace = "volley".into();
    r.image = "ghcr.io/example/volley:0.1.0".into();
    r
}

fn golden_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/manifest-3.yaml")
}

/// The YAML with every Secret's values (fresh keys each time) masked: a `stringData`
/// entry's scalar or block lines become `<secret>`.
fn masked(yaml: &str) -> String {
    let mut out = Vec::new();
    let mut in_data = false;
    for line in yaml.lines() {
        if in_data && line.starts_with("    ") {
            continue;
        }
        if in_data && line.starts_with("  ") {
            let key = line.split(':').next().unwrap_or(line);
            out.push(format!("{key}: <secret>"));
            continue;
        }
        in_data = line == "stringData:";
        out.push(line.to_string());
    }
    out.join("\n") + "\n"
}

#[test]
fn manifests_match_the_golden_file() {
    let got = masked(&manifest::render(&golden_request()).expect("render").yaml);
    let path = golden_path();
    if std::env::var_os("VOLLEY_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).expect("golden file (VOLLEY_BLESS=1 writes it)");
    assert_eq!(got, want, "output differs from {}", path.display());
}

/// The `kubernetes-validate` of the test venv.
fn validator() -> PathBuf {
    let venv = std::env::var("VOLLEY_K8S_VENV").unwrap_or_else(|_| "/opt/volley-venv-k8s".into());
    let bin = Path::new(&venv).join("bin/kubernetes-validate");
    assert!(
        bin.exists(),
        "{} missing: run scripts/install-k8s-validate.sh (install-deps.sh runs it)",
        bin.display()
    );
    bin
}

fn validate(yaml: &str, name: &str, version: &str) {
    // Removed with the file when `dir` drops (also when the validator cannot be run).
    let dir = tempfile::Builder::new()
        .prefix("volley-k8s-")
        .tempdir()
        .unwrap();
    let file = dir.path().join(name);
    std::fs::write(&file, yaml).unwrap();
    let out = Command::new(validator())
        .args(["--kubernetes-version", version, "--strict"])
        .arg(&file)
        .output()
        .expect("run kubernetes-validate");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{name} against {version}:\n{text}");
    assert!(!text.contains("ERROR") && !text.contains("WARN"), "{text}");
}

#[test]
fn manifests_validate_against_kubernetes_schemas() {
    let mut existing_bus = Request::new(1);
    existing_bus.bus = "nats://nats.infra.svc:4222".into();
    let keys = StudyKeys::generate(&["nats.infra.svc"], &["agent".into()]).unwrap();
    existing_bus.security = Security::Given(keys.agent("agent").unwrap().clone());
    let mut off = Request::new(2);
    off.security = Security::Off;
    off.allow_targets = vec!["10.0.0.0/24".into()];
    for (name, req) in [
        ("golden.yaml", golden_request()),
        ("default-ns.yaml", Request::new(12)),
        ("existing-bus.yaml", existing_bus),
        ("off.yaml", off),
    ] {
        let yaml = manifest::render(&req).unwrap().yaml;
        for version in ["1.30.0", "1.33.0"] {
            validate(&yaml, name, version);
        }
    }
}

#[test]
fn the_schema_check_catches_a_broken_manifest() {
    // The check is not vacuous: an unknown field fails under --strict.
    let yaml = manifest::render(&Request::new(1)).unwrap().yaml.replace(
        "completionMode: Indexed",
        "completionMode: Indexed\n  completionz: 1",
    );
    let dir = tempfile::Builder::new()
        .prefix("volley-k8s-bad-")
        .tempdir()
        .unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = Command::new(validator())
        .args(["--kubernetes-version", "1.30.0", "--strict"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
}

/// A synthetic load: one second of its share's requests at 1 ms.
fn one_second(ctx: LoadCtx) -> Result<(), LoadError> {
    let n = ctx
        .assignment
        .share
        .requests
        .ok_or("needs a request count")?;
    let end = ctx.started + Duration::from_secs(1);
    while Instant::now() < end && !ctx.should_stop() {
        std::thread::sleep(Duration::from_millis(20));
    }
    ctx.emit(second_record(&ctx, 0, n, 1_000)?);
    Ok(())
}

#[test]
fn agents_named_as_the_job_names_them_run_a_share_each() {
    let nats = common::secured_bus();
    // What each pod's JOB_COMPLETION_INDEX turns into.
    let names: Vec<String> = ["0", "1"]
        .iter()
        .map(|i| manifest::agent_name(i).unwrap())
        .collect();
    assert_eq!(names, ["agent-0", "agent-1"]);
    let agents: Vec<_> = names
        .iter()
        .map(|name| {
            let mut cfg = AgentConfig::new(&nats.url(), name);
            cfg.auth = nats.keys().and_then(|k| k.agent(name)).cloned();
            cfg.assign_bound = Duration::from_secs(30);
            cfg.run_bound = Duration::from_secs(30);
            std::thread::spawn(move || agent::run(&cfg, one_second, &mut |_| {}))
        })
        .collect();
    let whole = Whole {
        requests: Some(1_001),
        rate_rps: None,
        connections: 2,
        duration_ms: Some(1_000),
    };
    let mut cfg = CoordinatorConfig::new(&nats.url(), "k8s", whole, 2);
    cfg.auth = nats.keys().map(|k| k.coordinator.clone());
    cfg.ready_bound = Duration::from_secs(20);
    cfg.max_offset = Duration::from_secs(1);
    cfg.start_lead = Duration::from_millis(1_000);
    cfg.run_bound = Duration::from_secs(30);
    let coord = std::thread::spawn(move || coordinator::coordinate(&cfg, &mut |_| {}));
    let r = join_within(coord, Duration::from_secs(40)).expect("run");
    for h in agents {
        assert_eq!(
            join_within(h, Duration::from_secs(10))
                .expect("agent")
                .ending,
            Ending::Done
        );
    }
    let mut seen: Vec<&str> = r.agents.iter().map(|a| a.name.as_str()).collect();
    seen.sort();
    assert_eq!(seen, ["agent-0", "agent-1"]);
    let merged: u64 = r.merged.seconds.iter().map(|s| s.counters.requests).sum();
    assert_eq!(merged, 1_001);
}
