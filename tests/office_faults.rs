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

/// A bad morning: the first 12 requests of the warm day's lead-in are applied, then
/// answered 500 (writes the server kept while the clients heard a failure). They are
/// the lead-in's failures: counted apart by kind, the users they hit read back from the
/// server before the window, and the day, whose server answers everything, carries no
/// violation. Without the reading back the day's audit finds the kept writes it was
/// never told of.
#[test]
fn lead_in_failures_are_set_apart_and_do_not_fail_the_day() {
    let (code, j) = day_against(
        DavFault::BusyMorning { count: 12 },
        "4",
        "thunderbird,davx5,evolution,apple",
    );
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["violations_total"], 0, "{j}");
    let lead = &j["lead_in"];
    assert!(lead["failed_requests"].as_u64().unwrap() >= 12, "{lead}");
    assert!(lead["failures"]["total"].as_u64().unwrap() >= 12, "{lead}");
    let kinds = lead["failures"]["kinds"].as_array().unwrap();
    assert!(
        kinds
            .iter()
            .any(|k| k["kind"] == "server-error" && k["count"] == 12),
        "{lead}"
    );
    assert!(lead["reconciled_users"].as_u64().unwrap() >= 1, "{lead}");
    assert!(lead["in_flight"].as_u64().unwrap() <= 8, "{lead}");
    // Every device still made its first sync before the window.
    assert_eq!(lead["sessions"][0]["name"], "sync-initial", "{lead}");
}

/// A lead-in whose requests all fail cannot finish: the day was never set up, which
/// is said in one line (exit 1), not counted as the server's violations.
#[test]
fn a_lead_in_that_cannot_finish_says_the_day_could_not_be_set_up() {
    let server = DavServer::start(DavFault::BusyMorning { count: 1_000_000 }, None)
        .expect("start the DAV fault server");
    let out = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args([
            "bench",
            "--caldav",
            "2",
            "--compress",
            "480",
            "--duration",
            "4s",
        ])
        .arg(server.url())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the day could not be set up: the lead-in could not finish")
            && err.contains("4 of 4 devices never completed their first sync")
            && err.contains("server-error"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
