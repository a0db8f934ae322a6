//! The stall probe end to end: a load whose process is stopped mid-run finds those
//! seconds machine-stalled, and a generator under a tight CPU cap still reads
//! generator-bound (docs/methodology.md, "The generator checks itself").

use std::time::{Duration, Instant};

use crate::bench_cli::{json_of, Mode, TestServer};

/// Runs `volley bench` as a child (optionally through `sh -c` with `prefix`), returning
/// it running: the caller stops or waits for it.
fn spawn_bench(prefix: Option<&str>, args: &[&str]) -> std::process::Child {
    let bin = assert_cmd::cargo::cargo_bin("volley");
    let mut cmd = match prefix {
        None => std::process::Command::new(&bin),
        Some(p) => {
            let mut c = std::process::Command::new("sh");
            c.args(["-c", &format!("{p}; exec \"$0\" \"$@\"")])
                .arg(&bin);
            c
        }
    };
    cmd.arg("bench")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits at most `limit` for `child`, killing it (ours) past that, and returns its JSON.
fn json_within(mut child: std::process::Child, limit: Duration) -> serde_json::Value {
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("volley did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_of(&out.stdout)
}

#[test]
fn a_process_stopped_mid_load_finds_its_seconds_machine_stalled() {
    // SIGSTOP for 20 ms stops the pacer and the stall probe beside it alike: the late
    // second is the machine's, not the generator's (docs/methodology.md, "The generator
    // checks itself"). 200 req/s: four arrivals fall in the stop, so that second's
    // scheduler-lag p99 is well over 1 ms and no more than the stop itself.
    let srv = TestServer::start(Mode::Ok);
    let url = srv.url("/");
    let child = spawn_bench(None, &[&url, "--rate", "200", "-d", "5s", "-k", "--json"]);
    let pid = child.id() as libc::pid_t;
    std::thread::sleep(Duration::from_millis(2300));
    // SAFETY: signals to the child this test started, which has not been reaped.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(20));
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let j = json_within(child, Duration::from_secs(60));
    let run = &j["runs"][0];
    let seconds = run["seconds"].as_array().unwrap();
    let f = |s: &serde_json::Value, k: &str| s[k].as_f64().unwrap_or(0.0);
    // The seconds the stop touched: the probe was held at least 15 ms in them.
    let stopped: Vec<_> = seconds
        .iter()
        .filter(|s| f(s, "probe_max_stall_ms") >= 15.0)
        .collect();
    assert!(
        !stopped.is_empty(),
        "the probe did not see the stop: {seconds:?}"
    );
    let late: Vec<_> = stopped
        .iter()
        .filter(|s| f(s, "sched_lag_p99_ms") > 1.0)
        .collect();
    assert!(
        !late.is_empty(),
        "the stop made no second late: {stopped:?}"
    );
    for s in late {
        assert_eq!(s["label"], "machine-stalled", "{s}");
    }
    let g = &run["generator"];
    assert!(g["machine_stalled_seconds"].as_u64().unwrap() >= 1, "{g}");
    assert!(f(&g["probe"], "max_stall_ms") >= 15.0, "{g}");
}

#[test]
fn a_generator_under_a_tight_cpu_cap_still_reads_generator_bound() {
    // The generator short of CPU is its own limit: the probe leaves the cap (its
    // thread moves out of the cgroup, then SCHED_FIFO), so it does not share the
    // shortage and cannot excuse it.
    let Some(cg) = crate::common::CappedCgroup::make(2_000) else {
        eprintln!("skipped: no writable cgroup v1 cpu controller");
        return;
    };
    let srv = TestServer::start(Mode::Ok);
    let url = srv.url("/");
    let join = cg.join();
    let child = spawn_bench(
        Some(&join),
        &[&url, "--rate", "1000", "-d", "3s", "-k", "--json"],
    );
    let j = json_within(child, Duration::from_secs(90));
    let g = &j["runs"][0]["generator"];
    assert_eq!(g["verdict"]["label"], "generator-bound", "{g}");
    assert!(g["generator_bound_seconds"].as_u64().unwrap() >= 1, "{g}");
    let p = &g["probe"];
    assert_eq!(p["left_cgroup"], true, "{p}");
    drop(cg);
}

/// A busy loop on `cpu` at `SCHED_FIFO` priority 1 (above every ordinary task, below
/// the stall probe's sleepers at 50), `bursts` times for `busy`, `every` apart,
/// starting after `after`; `None` when real-time priority is refused.
fn fifo_hog(
    cpu: usize,
    after: Duration,
    busy: Duration,
    every: Duration,
    bursts: u32,
) -> Option<std::thread::JoinHandle<()>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        // SAFETY: affinity and policy of this thread only (tid 0), from values we own.
        let ok = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            let param = libc::sched_param { sched_priority: 1 };
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
                && libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0
        };
        let _ = tx.send(ok);
        if !ok {
            return;
        }
        std::thread::sleep(after);
        for _ in 0..bursts {
            let end = Instant::now() + busy;
            while Instant::now() < end {
                std::hint::spin_loop();
            }
            std::thread::sleep(every - busy);
        }
    });
    if rx.recv().unwrap_or(false) {
        Some(h)
    } else {
        let _ = h.join();
        None
    }
}

#[test]
fn a_neighbour_holding_the_pacers_cpu_makes_its_late_seconds_the_machines() {
    // volley pinned to one CPU, and a neighbour (a real-time busy loop of this test)
    // taking that CPU for 150 ms bursts: the pacer waits behind it, the probe's sleeper
    // (higher priority) does not, so the probe sees no stall. The late seconds are the
    // machine's all the same: the pacer's wait covers their lateness and others, not
    // volley, took its CPU (docs/methodology.md, "A neighbour on the pacer's CPU").
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpu = cpus - 1;
    if cpus < 2 {
        eprintln!("skipped: one CPU");
        return;
    }
    let srv = TestServer::start(Mode::Ok);
    let url = srv.url("/");
    let Some(hog) = fifo_hog(
        cpu,
        Duration::from_millis(1_800),
        Duration::from_millis(150),
        Duration::from_millis(1_000),
        3,
    ) else {
        eprintln!("skipped: SCHED_FIFO refused");
        return;
    };
    let pin = format!("taskset -pc {cpu} $$ >/dev/null");
    let child = spawn_bench(
        Some(&pin),
        &[&url, "--rate", "200", "-d", "6s", "-k", "--json"],
    );
    let j = json_within(child, Duration::from_secs(90));
    hog.join().unwrap();
    let seconds = j["runs"][0]["seconds"].as_array().unwrap().clone();
    let f = |s: &serde_json::Value, k: &str| s[k].as_f64().unwrap_or(0.0);
    // The bursts' seconds: late by more than the 1 ms limit, while others took at
    // least 100 ms of the pacer's CPU and the probe was held far less than the lag.
    let held: Vec<_> = seconds
        .iter()
        .filter(|s| {
            f(s, "sched_lag_p99_ms") > 1.0
                && f(s, "others_on_pacer_ms") >= 100.0
                && f(s, "probe_stall_bound_ms") + 0.1 < f(s, "sched_lag_p99_ms")
        })
        .collect();
    assert!(
        !held.is_empty(),
        "no second was held by the neighbour: {seconds:?}"
    );
    for s in held {
        assert_eq!(s["label"], "machine-stalled", "{s}");
        assert!(
            f(s, "pacer_wait_ms") + 0.1 >= f(s, "sched_lag_p99_ms"),
            "{s}"
        );
    }
}
