//! `volley bench` reports the generator's fd and ephemeral-port headroom: the real binary
//! against the built-in server, JSON and text.

use std::process::Command;

use crate::common;
use common::Served;

#[test]
fn json_and_text_carry_the_headroom_object() {
    let root = crate::common::fresh_dir("volley-headroom");
    std::fs::write(root.join("a.html"), "x".repeat(700)).unwrap();
    let s = Served::start(&root, &[]);
    let url = format!("{}/a.html", s.base);
    // A light open loop (200 req/s) for 3 s: the once-a-second sampler sees the kept-alive
    // connections open towards the server.
    let out = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["bench", &url, "-k", "-c", "4", "--rate", "200", "-d", "3s"])
        .args(["--timeout", "5s", "-q", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let h = &doc["runs"][0]["headroom"];
    let get = |k: &str| {
        h[k].as_u64()
            .unwrap_or_else(|| panic!("headroom.{k} missing: {h}"))
    };
    assert!(get("fd_limit") > 0, "{h}");
    // stdin/out/err plus at least one connection.
    assert!(get("fd_used_max") >= 4, "{h}");
    assert!(get("fd_used_max") <= get("fd_limit"), "{h}");
    assert!(get("port_range") > 0 && get("port_range") <= 65536, "{h}");
    assert!(get("ports_in_use_max") >= 1, "{h}");
    assert!(get("ports_in_use_max") <= get("port_range"), "{h}");
    assert!(get("time_wait_max") <= get("ports_in_use_max"), "{h}");
    // Full samples before the run and at the end (mid-run only fds are counted).
    assert_eq!(get("samples"), 2, "{h}");
    // Far from any limit: no warning note.
    let notes = doc["runs"][0]["notes"].to_string();
    assert!(!notes.contains("GENERATOR HEADROOM LOW"), "{notes}");

    let text = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args([
            "bench",
            &url,
            "-k",
            "-c",
            "2",
            "-n",
            "50",
            "--timeout",
            "5s",
        ])
        .output()
        .unwrap();
    assert!(text.status.success());
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("Generator headroom:"), "{text}");
    drop(s);
}
