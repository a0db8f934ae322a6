//! Nothing orphaned: `kill -9` of `volley bench --target KIND` or of `volley study run`
//! mid-run leaves no server process for long (the parent-death signal), and the next
//! volley start removes what is left (directory, cgroup, any survivor) and says so.
//!
//! Each kind gets its own state directory (`VOLLEY_STATE_DIR`), so this test's sweeps
//! never touch ledgers of other volleys running on the machine. Waits are bounded; the
//! only processes signalled are the volleys this test spawned (the sweep itself signals
//! the recorded server processes, which is what is under test).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn installed(program: &str) -> bool {
    ["/usr/sbin", "/usr/bin", "/sbin", "/usr/local/sbin"]
        .iter()
        .any(|d| Path::new(d).join(program).exists())
}

/// `/proc/PID/stat` field 22: with the pid, names one process even after reuse.
fn start_ticks(pid: u64) -> Option<u64> {
    let t = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    t[t.rfind(')')? + 1..]
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// A process is left when it still exists with the same start time and is not a
/// zombie (a zombie has released everything; init reaps it).
fn left(pid: u64, ticks: u64) -> bool {
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| {
            Some(
                t[t.rfind(')')? + 1..]
                    .split_whitespace()
                    .next()?
                    .to_string(),
            )
        });
    start_ticks(pid) == Some(ticks) && state.as_deref() != Some("Z")
}

fn volley(state: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_volley"));
    c.env("VOLLEY_STATE_DIR", state);
    c
}

/// Every process of the target: the recorded pids and the members of its cgroups.
fn target_processes(ledger: &Value) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for t in ledger["targets"].as_array().unwrap() {
        for p in t["pids"].as_array().unwrap() {
            out.push((
                p["pid"].as_u64().unwrap(),
                p["start_ticks"].as_u64().unwrap(),
            ));
        }
        for cg in t["cgroups"].as_array().unwrap() {
            let procs = Path::new(cg.as_str().unwrap()).join("cgroup.procs");
            for pid in std::fs::read_to_string(procs).unwrap_or_default().lines() {
                let pid: u64 = pid.trim().parse().unwrap();
                if let Some(t) = start_ticks(pid) {
                    out.push((pid, t));
                }
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

fn paths(ledger: &Value, key: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for t in ledger["targets"].as_array().unwrap() {
        match &t[key] {
            Value::String(s) => out.push(PathBuf::from(s)),
            Value::Array(a) => out.extend(a.iter().map(|v| PathBuf::from(v.as_str().unwrap()))),
            _ => {}
        }
    }
    out
}

fn kill_volley_mid_run(kind: &str) {
    kill_mid_run(
        kind,
        &["bench", "--target", kind, "-c", "1", "-d", "30s", "-k"],
        &["bench", "--target", kind, "--show-config"],
        true,
    );
}

/// Runs `volley ARGS` until its target answers, SIGKILLs it, and checks what is left
/// within 2 s and after the next start (`volley NEXT`, which starts nothing). With
/// `docroot`, the run generates its fixture tree, which must be swept too.
fn kill_mid_run(kind: &str, args: &[&str], next: &[&str], docroot: bool) {
    // The test's own state directory, removed when it ends (also on a failed assertion);
    // what the killed volley left is for the next volley's sweep, checked below.
    let state = crate::common::fresh_dir(&format!("volley-orphans-{kind}"));
    let mut child = volley(&state)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn volley");
    let vpid = child.id();
    // The "started" line comes once the target answered its validation probe.
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        let mut r = BufReader::new(stderr);
        let mut line = String::new();
        let mut seen = String::new();
        while r.read_line(&mut line).unwrap_or(0) > 0 {
            seen.push_str(&line);
            // bench says "started"; a study's first step line starts with "[".
            if line.contains("volley: started") || line.starts_with('[') {
                let _ = tx.send(seen.clone());
            }
            line.clear();
        }
        let _ = tx.send(seen);
    });
    let seen = match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(s) => s,
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{kind}: volley did not start the target within 30 s");
        }
    };
    assert!(
        seen.contains("volley: started") || seen.lines().any(|l| l.starts_with('[')),
        "{kind}: {seen}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let ledger_file = state.join(format!("{vpid}.json"));
    let ledger: Value = serde_json::from_slice(&std::fs::read(&ledger_file).unwrap()).unwrap();
    let procs = target_processes(&ledger);
    let dirs = paths(&ledger, "dir");
    let cgroups = paths(&ledger, "cgroups");
    assert!(!procs.is_empty(), "{kind}: no process recorded: {ledger}");
    // The target's private directory, and the generated docroot where there is one.
    let docroots = ledger["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"] == "docroot")
        .count();
    assert_eq!(docroots, usize::from(docroot), "{kind}: {ledger}");
    assert_eq!(dirs.len(), 1 + docroots, "{kind}: {ledger}");

    child.kill().unwrap(); // SIGKILL, to the volley this test spawned

    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    while procs.iter().any(|&(p, t)| left(p, t)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survivors: Vec<u64> = procs
        .iter()
        .filter(|&&(p, t)| left(p, t))
        .map(|&(p, _)| p)
        .collect();

    // The next volley start sweeps (and starts nothing: --show-config).
    let out = volley(&state)
        .args(next)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run volley");
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("{kind}: survivors after 2 s: {survivors:?}\n{said}");
    for p in &survivors {
        assert!(
            said.contains(&format!("process {p} left by volley {vpid}")),
            "{kind}: survivor {p} not reported: {said}"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while procs.iter().any(|&(p, t)| left(p, t)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &(p, t) in &procs {
        assert!(!left(p, t), "{kind}: process {p} still running");
    }
    for d in dirs.iter().chain(&cgroups) {
        assert!(!d.exists(), "{kind}: {} left", d.display());
        assert!(
            said.contains(&d.display().to_string()),
            "{kind}: removal of {} not reported: {said}",
            d.display()
        );
    }
    assert!(!ledger_file.exists(), "{kind}: ledger kept");
}

#[test]
fn killed_volley_leaves_no_target_behind() {
    for (kind, program) in [
        ("builtin", None),
        ("nginx", Some("nginx")),
        ("apache-event", Some("apache2")),
        ("lighttpd", Some("lighttpd")),
        ("caddy", Some("caddy")),
    ] {
        if program.is_some_and(|p| !installed(p)) {
            eprintln!("skipping {kind}: {} is not installed", program.unwrap());
            continue;
        }
        kill_volley_mid_run(kind);
    }
}

/// The study runner starts targets the same way: killed mid-step, it leaves nothing
/// either. The study's steps are long enough that the kill lands inside the second one.
#[test]
fn killed_study_leaves_no_target_behind() {
    let dir = crate::common::fresh_dir("volley-orphans-study");
    let file = dir.join("s.toml");
    let kinds: Vec<&str> = [("builtin", None), ("nginx", Some("nginx"))]
        .into_iter()
        .filter(|(_, p)| p.is_none_or(installed))
        .map(|(k, _)| k)
        .collect();
    for kind in kinds {
        std::fs::write(
            &file,
            format!(
                "name = \"orphans\"\n[[target]]\nname = \"t\"\nkind = \"{kind}\"\n\
                 [fixture]\nkind = \"uniserve\"\n[[workload]]\nname = \"w\"\n\
                 paths = [\"/index1.html\"]\n[load]\nmodel = \"closed\"\nconcurrency = 1\n\
                 [sweep]\nkeepalive = [true, false]\n[steps]\nduration = \"1s\"\n\
                 warmup = \"0s\"\ncooldown = \"0s\"\nrepeats = 20\n"
            ),
        )
        .unwrap();
        let db = dir.join(format!("{kind}.db"));
        let f = file.to_str().unwrap();
        let d = db.to_str().unwrap();
        kill_mid_run(
            &format!("study-{kind}"),
            &["study", "run", f, "--db", d],
            &["study", "run", f, "--dry-run", "--db", d],
            true,
        );
    }
}

/// `bench --caldav` without a URL serves its office from the built-in server in a
/// private directory (the accounts' password hashes in it); killed mid-day, it leaves
/// that directory to the next volley's sweep, noted in its ledger before it was made.
#[test]
fn killed_caldav_bench_leaves_its_office_directory_to_the_sweep() {
    let state = crate::common::fresh_dir("volley-orphans-caldav");
    let mut child = volley(&state)
        .args(["bench", "--caldav", "2", "-d", "60s", "-q"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn volley");
    let vpid = child.id();
    let ledger_file = state.join(format!("{vpid}.json"));
    let office_dir = |l: &Value| -> Option<PathBuf> {
        l["targets"]
            .as_array()?
            .iter()
            .find(|t| t["kind"] == "office server")
            .and_then(|t| t["dir"].as_str().map(PathBuf::from))
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let dir = loop {
        let found = std::fs::read(&ledger_file)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|l| office_dir(&l))
            .filter(|d| d.join("root").exists());
        if let Some(d) = found {
            break d;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no office server directory noted and made within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    child.kill().unwrap(); // SIGKILL, to the volley this test spawned
    child.wait().unwrap();
    assert!(
        dir.exists(),
        "a SIGKILLed volley cannot remove {}",
        dir.display()
    );
    let out = volley(&state)
        .args(["bench", "--target", "builtin", "--show-config"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run volley");
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!dir.exists(), "{} left: {said}", dir.display());
    assert!(
        said.contains(&format!(
            "removed office server directory {} of volley {vpid}",
            dir.display()
        )),
        "{said}"
    );
    assert!(!ledger_file.exists(), "ledger kept");
}
