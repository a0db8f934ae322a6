//! Each broken-server behaviour of the fault server's DAV mode is caught by the office
//! workload and counted under its kind, and fails the run (exit 1); the same server
//! without a fault passes.

use std::process::Command;

use volley_faultserver::{DavFault, DavServer};

/// An office day of `users` against a DAV-mode fault server; (exit code, JSON report).
fn day_against(fault: DavFault, users: &str, profile: &str) -> (i32, serde_json::Value) {
    let server = DavServer::start(fault, None).expect("start the DAV fault server");
    let out = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args([
            "bench",
            "--json",
            "-",
            "--caldav",
            users,
            "--profile",
            profile,
        ])
        .args([
            "--compress",
            "480",
            "--duration",
            "6s",
            "--seed",
            "2",
            &server.url(),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let j = serde_json::from_str(&stdout)
        .unwrap_or_else(|_| panic!("no JSON; stderr: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), j)
}

fn count(j: &serde_json::Value, kind: &str) -> u64 {
    j["violations"]
        .as_array()
        .and_then(|a| a.iter().find(|v| v["kind"] == kind))
        .and_then(|v| v["count"].as_u64())
        .unwrap_or_else(|| panic!("no kind {kind} in {j}"))
}

#[test]
fn a_correct_dav_fault_server_passes() {
    let (code, j) = day_against(DavFault::None, "4", "thunderbird,davx5,evolution,apple");
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["violations_total"], 0, "{j}");
}

#[test]
fn stale_etags_are_caught() {
    let (code, j) = day_against(DavFault::StaleEtag, "4", "thunderbird,davx5");
    assert_eq!(code, 1, "{j}");
    assert!(count(&j, "etag-unchanged") > 0, "{j}");
}

#[test]
fn lost_puts_are_caught() {
    let (code, j) = day_against(DavFault::LostPut { every: 4 }, "4", "evolution,apple");
    assert_eq!(code, 1, "{j}");
    assert!(count(&j, "lost") > 0, "{j}");
}

#[test]
fn wrong_sync_deltas_are_caught() {
    let (code, j) = day_against(DavFault::WrongSync { every: 3 }, "4", "davx5,apple");
    assert_eq!(code, 1, "{j}");
    assert!(
        count(&j, "missed-change") + count(&j, "deletion-not-seen") > 0,
        "{j}"
    );
    assert!(count(&j, "missed-change") > 0, "{j}");
}

#[test]
fn server_errors_are_caught() {
    let (code, j) = day_against(
        DavFault::Error5xx { every: 20 },
        "4",
        "thunderbird,evolution",
    );
    assert_eq!(code, 1, "{j}");
    assert!(count(&j, "server-error") > 0, "{j}");
    let errors: u64 = j["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["errors"].as_u64().unwrap())
        .sum();
    // Set-up and audit requests are not timed, so the timed errors are a share of them.
    assert!(errors > 0 && errors <= count(&j, "server-error"), "{j}");
}
