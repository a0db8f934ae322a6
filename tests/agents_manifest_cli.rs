//! `volley agents manifest`: writes the file and exits 0; bad input is one line and exit 2.

use std::process::Command;

fn volley() -> Command {
    Command::new(env!("CARGO_BIN_EXE_volley"))
}

#[test]
fn writes_the_manifests_and_exits_0() {
    let dir = crate::common::fresh_dir("volley-agents-cli");
    let file = dir.join("agents.yaml");
    let status = volley()
        .args(["agents", "manifest"])
        .arg(&file)
        .args(["--injectors", "3", "--namespace", "load"])
        .status()
        .unwrap();
    assert!(status.success());
    let yaml = std::fs::read_to_string(&file).unwrap();
    // The coordinator's credentials beside it, for its owner only.
    let coord = dir.join("agents.coordinator.json");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&coord).unwrap().permissions());
    let creds = volley_agents::auth::BusCredentials::load(&coord).unwrap();
    assert_eq!(mode & 0o777, 0o600);
    assert!(
        yaml.contains(&creds.assign_key),
        "the agents' Secret has the study's key"
    );
    for want in [
        "kind: Namespace",
        "kind: Deployment",
        "kind: Service",
        "kind: Job",
        "completionMode: Indexed",
        "completions: 3",
        "parallelism: 3",
        "agent-$(JOB_COMPLETION_INDEX)",
        "kind: Secret",
        "--credentials",
    ] {
        assert!(yaml.contains(want), "{want} missing:\n{yaml}");
    }
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for (flag, value) in [
        ("--injectors", "0"),
        ("--namespace", "Not_A_Label"),
        ("--image", "UPPER/case"),
        ("--bus", "http://x"),
        // An existing bus with neither the agents' credentials nor --insecure-bus.
        ("--bus", "nats://nats.infra:4222"),
        ("--agent-credentials", "/nonexistent/agent.json"),
        ("--allow-target", "10.0.0.0/99"),
    ] {
        let mut args = vec!["agents", "manifest", "-", "--injectors", "2"];
        if flag == "--injectors" {
            args[4] = value;
        } else {
            args.extend([flag, value]);
        }
        let out = volley().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {err}");
        assert_eq!(err.lines().count(), 1, "{flag} {value}: {err}");
        assert!(err.starts_with("volley: "), "{err}");
        assert!(out.stdout.is_empty());
    }
}
