//! A study whose managed target is starved by the machine: the built-in server, pinned
//! by the study to CPU 0, shares that CPU with a busy neighbour this test starts once
//! the target is up. The step is the machine's, not the server's failure: stored
//! machine busy, its line names the target's wait, and the study measures it again
//! (docs/methodology.md, "The target's wait for a CPU" and "Re-measuring what noise
//! spoiled"). The SLO (50 us, which no loopback reply of a debug build meets) makes
//! every step fail, so what is asserted is whose failure it is, never a figure.
//! Beside it, the generator starved by a CPU quota on its own cgroup: its own limit,
//! seen twice, not measured a third time.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use volley_store::Store;

use crate::common::{
    children_with, free_port, fresh_dir, output_of, spawn_listening, CappedCgroup, BUILTIN_SIZES,
};
use crate::study_cli::{temp_dir, volley, write};

/// One rate step at 200 req/s on the built-in server pinned to one core (CPU 0), with
/// one re-measure allowed; warm-up long enough for the neighbour to start before the
/// measured part.
fn study() -> String {
    format!(
        r#"name = "starved"
{BUILTIN_SIZES}
[[workload]]
name = "page"
paths = ["/1500b.html"]
[load]
model = "open"
concurrency = 4
timeout = "5s"
keepalive = true
[sweep]
rate = [200]
cores = [1]
[steps]
duration = "4s"
warmup = "2s"
cooldown = "1s"
retries = 1
[slo]
p99 = "50us"
error_share = 0.01
"#
    )
}

/// A busy loop pinned to `cpu`, bounded to 120 s by itself (bash's `SECONDS`, no
/// process started per turn) and killed by the test when dropped.
struct Spinner(Child);

impl Spinner {
    fn on(cpu: usize) -> Spinner {
        let child = Command::new("taskset")
            .args(["-c", &cpu.to_string(), "bash", "-c"])
            .arg("while [ $SECONDS -lt 120 ]; do :; done")
            .stdin(Stdio::null())
            .spawn()
            .expect("start the spinner (taskset, bash)");
        Spinner(child)
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        // Ours: started by this test, reaped here.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether process `pid` may run on CPU `cpu` only (its `Cpus_allowed_list`).
fn pinned_to(pid: u32, cpu: usize) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .is_some_and(|v| v.trim() == cpu.to_string())
    })
}

/// Waits (at most 60 s) until `study` has started its target pinned to `cpu`.
fn target_up(study: &mut Child, cpu: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !children_with(study.id(), "serve")
        .into_iter()
        .any(|p| pinned_to(p, cpu))
    {
        assert!(
            study.try_wait().unwrap().is_none(),
            "the study ended before its target was seen"
        );
        assert!(Instant::now() < deadline, "no pinned target within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Why the kernel cannot show a target's wait for a CPU here, if it cannot: run delays
/// need schedstats (`/proc/PID/schedstat`), and a neighbour on the target's CPU needs a
/// second CPU for volley.
fn cannot_show_the_wait() -> Option<&'static str> {
    if !Path::new("/proc/self/schedstat").exists() {
        return Some("no /proc/PID/schedstat (kernel without schedstats)");
    }
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return Some("one CPU: no core left for volley beside the starved target");
    }
    None
}

#[test]
fn a_target_starved_by_a_neighbour_on_its_cpu_is_the_machines_and_measured_again() {
    if let Some(why) = cannot_show_the_wait() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = temp_dir("starved");
    let f = write(&dir, "study.toml", &study());
    let db = dir.join("v.db");
    let mut study = volley()
        .args(["study", "run"])
        .arg(&f)
        .arg("--db")
        .arg(&db)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    target_up(&mut study, 0);
    let spinner = Spinner::on(0);
    let out = study.wait_with_output().unwrap();
    drop(spinner);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");

    let store = Store::open(&db).unwrap();
    let run = store.list_runs().unwrap()[0].id;
    let steps = store.steps(run).unwrap();
    let first = steps
        .iter()
        .find(|s| s.parameters.extra["attempt"] == 0)
        .unwrap_or_else(|| panic!("no first attempt: {steps:?}"));
    let seconds = first.summary["seconds"].as_array().unwrap();
    if seconds.iter().all(|x| x["target_wait_ms"].is_null()) {
        eprintln!("skipped: the kernel gave no run delay of the target's threads");
        return;
    }
    if seconds.iter().all(|x| x["others_busy_share"].is_null()) {
        eprintln!("skipped: the machine's per-CPU busy time was not read (no cgroup figures)");
        return;
    }
    let verdict = first.verdict.as_ref().unwrap();
    // The machine's: failed while the machine was busy, so not the server's failure.
    assert_eq!(verdict["machine_busy"], true, "{verdict}\n{stderr}");
    assert_eq!(verdict["sustain"]["sustainable"], false, "{verdict}");
    assert_ne!(first.label.as_deref(), Some("generator-bound"), "{stderr}");
    // Its line names the target's wait.
    let line = stderr
        .lines()
        .find(|l| l.contains("rate=200") && !l.contains("re-measure"))
        .unwrap_or_else(|| panic!("no step line: {stderr}"));
    assert!(line.contains("machine busy"), "{line}");
    assert!(
        line.contains("the target waited up to") && line.contains("for a CPU"),
        "{line}"
    );
    // Measured again, and stored with its number.
    assert!(
        steps.iter().any(|s| s.parameters.extra["attempt"] == 1),
        "not re-measured: {stderr}"
    );
    let row = stdout
        .lines()
        .find(|l| l.starts_with("builtin"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(row.contains("1 step re-measured"), "{row}");
    // Never read as the server's failure.
    assert!(!row.contains("first unsustainable"), "{row}\n{stderr}");
}

/// A closed loop held by a CPU quota on volley's own cgroup (20% of a CPU) against a
/// server outside it: each attempt is generator-bound (the quota is the most it could
/// use: "used 0.20 of 0.20 core(s)"), and once two attempts on a quiet machine showed
/// it, the third that `retries = 2` allows is not run (docs/methodology.md,
/// "Re-measuring what noise spoiled"). A try where another process made the machine
/// busy or stalled it is run again (three tries at most): noise is re-measured.
#[test]
fn a_closed_loop_held_by_volleys_own_quota_is_generator_bound_and_not_measured_a_third_time() {
    let Some(cg) = CappedCgroup::make(20_000) else {
        eprintln!("skipped: no writable cgroup v1 cpu controller");
        return;
    };
    let root = fresh_dir("volley-own-quota-root");
    std::fs::write(root.join("index.html"), "x".repeat(1500)).unwrap();
    let port = free_port();
    let mut serve = volley();
    serve
        .args(["serve", "--root"])
        .arg(root.path())
        .args(["--listen", &format!("127.0.0.1:{port}")]);
    let _server = spawn_listening(serve, root, port);
    let dir = temp_dir("own-quota");
    let f = write(
        &dir,
        "q.toml",
        &format!(
            r#"name = "own-quota"
[[target]]
name = "ext"
kind = "external"
url = "http://127.0.0.1:{port}"
[[workload]]
name = "page"
paths = ["/index.html"]
[load]
model = "closed"
keepalive = true
[sweep]
concurrency = [4]
[steps]
duration = "1s"
warmup = "0s"
cooldown = "0s"
retries = 2
"#
        ),
    );
    let bin = assert_cmd::cargo::cargo_bin("volley");
    for attempt in 1..=3 {
        let db = dir.join(format!("q{attempt}.db"));
        let (code, out, err) = output_of(
            Command::new("sh")
                .arg("-c")
                .arg(format!("{}; exec \"$0\" \"$@\"", cg.join()))
                .arg(&bin)
                .args(["study", "run"])
                .arg(&f)
                .arg("--db")
                .arg(&db),
        );
        assert_eq!(code, Some(0), "{out}\n{err}");
        let store = Store::open(&db).unwrap();
        let run = store.list_runs().unwrap()[0].id;
        let steps = store.steps(run).unwrap();
        let noisy = steps.iter().any(|s| {
            s.label.as_deref() == Some("machine-stalled")
                || s.verdict
                    .as_ref()
                    .is_some_and(|v| v["machine_busy"] == true)
        });
        if noisy && attempt < 3 {
            continue;
        }
        assert!(!noisy, "three tries on a noisy machine: {err}");
        for s in &steps {
            assert_eq!(s.label.as_deref(), Some("generator-bound"), "{err}");
            let cores = &s.summary["generator"]["cores"];
            assert_eq!(cores.as_f64(), Some(0.2), "the quota's cores: {cores}");
        }
        assert_eq!(steps.len(), 2, "two attempts, not three: {err}");
        let row = out
            .lines()
            .find(|l| l.starts_with("ext"))
            .unwrap_or_else(|| panic!("{out}"));
        assert!(
            row.contains("volley's load could not outpace this server"),
            "{row}"
        );
        assert!(row.contains("1 step re-measured"), "{row}");
        return;
    }
}
