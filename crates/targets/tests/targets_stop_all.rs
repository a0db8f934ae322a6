//! `stop_all` (the Ctrl-C path) in its own test binary: it stops every target of the
//! process, so it must not share a process with other tests' targets.

use std::path::Path;
use volley_targets::{start, stop_all, TargetKind, TargetSpec};

#[test]
fn stop_all_stops_live_targets_for_ctrl_c() {
    if volley_targets::kind::find_program("nginx").is_none() {
        eprintln!("skipping: nginx is not installed (scripts/install-servers.sh)");
        return;
    }
    let t = start(&TargetSpec::new(TargetKind::Nginx)).unwrap();
    let pid = t.pid.unwrap();
    stop_all();
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
    assert!(!t.dir.exists());
    assert!(t.check().is_err(), "a stopped target must not pass check()");
    drop(t); // must not signal anything again
}
