//! Tests of the sampler: differences of fixed snapshots, the summary, the tree walk,
//! and short real runs (this process, and a target starved by a neighbour).

use super::*;

fn snap(at: Instant, user: u64, sys: u64, tx: u64, sys_total: u64) -> Snapshot {
    Snapshot {
        at,
        ticks_per_s: 100.0,
        tree: Some(TreeReading {
            cpu_ns: (user + sys) * 10_000_000,
            user_ticks: user,
            sys_ticks: sys,
            rss_bytes: 1 << 20,
            processes: 2,
            threads: 3,
            ctx_voluntary: 10,
            ctx_involuntary: 1,
            open_fds: 9,
            run_delay_ns: BTreeMap::from([(7, user * 2_000_000)]),
        }),
        sys: SysStat {
            user_ticks: sys_total / 2,
            idle_ticks: sys_total / 2,
            total_ticks: sys_total,
            ..SysStat::default()
        },
        net: Some(NetDev {
            tx_packets: tx,
            tx_bytes: tx * 100,
            ..NetDev::default()
        }),
        tcp: TcpStates::default(),
        own_cpu_ns: Some(user * 1_000_000),
        study_ns: Some(0),
        spread: Duration::ZERO,
    }
}

/// One second at 100 ticks/s: the machine busy 150 ticks (1.5 CPUs; 40 idle, 10
/// stolen, of two CPUs), the target 50 ticks (0.5 CPU), volley 0.25 s. Others used
/// 0.75 CPU, less what the study's other targets took.
fn busy_second(t0: Instant) -> (Snapshot, Snapshot) {
    let mut a = snap(t0, 0, 0, 0, 0);
    let mut b = snap(t0 + Duration::from_secs(1), 30, 20, 0, 200);
    a.sys = SysStat::default();
    b.sys = SysStat {
        user_ticks: 100,
        system_ticks: 50,
        idle_ticks: 40,
        steal_ticks: 10,
        total_ticks: 200,
        cpus: 2,
        ..SysStat::default()
    };
    (a.own_cpu_ns, b.own_cpu_ns) = (Some(0), Some(250_000_000));
    (a, b)
}

#[test]
fn others_are_the_machines_busy_time_minus_volley_and_its_target() {
    let t0 = Instant::now();
    let (a, mut b) = busy_second(t0);
    let s = diff(&a, &b, t0, "");
    assert!(
        (s.system.others_cpu_pct.unwrap() - 75.0).abs() < 1e-6,
        "{s:?}"
    );
    assert!((s.system.cpu_st_pct - 5.0).abs() < 1e-9);
    assert_eq!(s.system.cpus, 2);
    // A throttled target is not busy: it adds nothing, and never goes below zero.
    b.own_cpu_ns = Some(2_000_000_000);
    assert_eq!(diff(&a, &b, t0, "").system.others_cpu_pct, Some(0.0));
    b.own_cpu_ns = None;
    assert_eq!(diff(&a, &b, t0, "").system.others_cpu_pct, None);
}

#[test]
fn a_snapshot_whose_cpu_counters_were_read_far_apart_gives_no_others() {
    // The busy second, its first reading's counters spread over 0.6 s (the machine's
    // read first): the time between would be counted as others', so none is given.
    let t0 = Instant::now();
    let (mut a, mut b) = busy_second(t0);
    a.spread = Duration::from_millis(600);
    assert_eq!(diff(&a, &b, t0, "").system.others_cpu_pct, None);
    // Within 2% of the interval (20 ms of the second) the figure stands; past it, on
    // either side, it does not.
    a.spread = Duration::from_millis(20);
    assert!(diff(&a, &b, t0, "").system.others_cpu_pct.is_some());
    b.spread = Duration::from_millis(21);
    assert_eq!(diff(&a, &b, t0, "").system.others_cpu_pct, None);
}

#[test]
fn interrupt_work_is_not_counted_as_others() {
    // The busy second again, with 40 of its 50 system ticks in softirq (the load's own
    // packets): others are 0.75 CPU less those 0.4.
    let t0 = Instant::now();
    let (a, mut b) = busy_second(t0);
    b.sys.irq_ticks = 40;
    let s = diff(&a, &b, t0, "");
    assert!(
        (s.system.others_cpu_pct.unwrap() - 35.0).abs() < 1e-6,
        "{s:?}"
    );
}

#[test]
fn the_studys_other_targets_are_counted_apart_from_others() {
    let t0 = Instant::now();
    // In a busy second (the other targets' CPU in ms) -> (others, the other targets),
    // percent of one CPU.
    type Row = (Option<u64>, Option<f64>, Option<f64>);
    let rows: [Row; 4] = [
        (Some(0), Some(75.0), Some(0.0)),
        // Idle instances of a study that took 0.3 CPU: theirs, not someone else's.
        (Some(300), Some(45.0), Some(30.0)),
        // Not read (no cgroup hierarchy): others as before.
        (None, Some(75.0), None),
        // More than the rest left: others never below zero.
        (Some(900), Some(0.0), Some(90.0)),
    ];
    for (study_ms, others, study) in rows {
        let (mut a, mut b) = busy_second(t0);
        a.study_ns = study_ms.map(|_| 5_000_000_000);
        b.study_ns = study_ms.map(|ms| 5_000_000_000 + ms * 1_000_000);
        let sys = diff(&a, &b, t0, "").system;
        let near = |x: Option<f64>, y: Option<f64>| match (x, y) {
            (Some(x), Some(y)) => (x - y).abs() < 1e-6,
            (x, y) => x == y,
        };
        assert!(near(sys.others_cpu_pct, others), "{study_ms:?}: {sys:?}");
        assert!(
            near(sys.study_targets_cpu_pct, study),
            "{study_ms:?}: {sys:?}"
        );
    }
}

#[test]
fn diff_turns_ticks_into_percent_of_one_cpu() {
    let t0 = Instant::now();
    let a = snap(t0, 100, 50, 1000, 1000);
    let b = snap(t0 + Duration::from_secs(2), 150, 60, 3000, 1400);
    let s = diff(&a, &b, t0, "lo");
    let t = s.target.unwrap();
    // 50 ticks over 2 s at 100 Hz = 0.25 CPU.
    assert!((t.cpu_user_pct - 25.0).abs() < 1e-9);
    assert!((t.cpu_sys_pct - 5.0).abs() < 1e-9);
    // 50 ticks' worth more of run delay (2 ms each) over 2 s: 50 ms per second.
    assert!((t.run_wait_ms_per_s - 50.0).abs() < 1e-9);
    assert_eq!(s.t_ms, 2000);
    assert!((s.net.unwrap().tx_packets_per_s - 1000.0).abs() < 1e-9);
    assert!((s.system.cpu_us_pct - 50.0).abs() < 1e-9);
}

#[test]
fn counters_that_go_backwards_count_as_zero() {
    let t0 = Instant::now();
    let a = snap(t0, 100, 50, 1000, 1000);
    let b = snap(t0 + Duration::from_secs(1), 90, 40, 900, 900);
    let s = diff(&a, &b, t0, "lo");
    let t = s.target.unwrap();
    assert_eq!((t.cpu_user_pct, t.run_wait_ms_per_s), (0.0, 0.0));
    assert_eq!(s.system.cpu_us_pct, 0.0);
}

#[test]
fn a_thread_new_to_the_tree_brings_no_past_wait_into_the_interval() {
    // Thread 7 waited 10 ms more; thread 8 appeared with 5 s of start-up wait (a
    // prefork child forked in a storm); thread 9 exited. Only thread 7's growth counts.
    let t0 = Instant::now();
    let mut a = snap(t0, 0, 0, 0, 0);
    let mut b = snap(t0 + Duration::from_secs(1), 0, 0, 0, 0);
    a.tree.as_mut().unwrap().run_delay_ns = BTreeMap::from([(7, 40_000_000), (9, 1_000_000)]);
    b.tree.as_mut().unwrap().run_delay_ns = BTreeMap::from([(7, 50_000_000), (8, 5_000_000_000)]);
    let t = diff(&a, &b, t0, "lo").target.unwrap();
    assert!(
        (t.run_wait_ms_per_s - 10.0).abs() < 1e-9,
        "{}",
        t.run_wait_ms_per_s
    );
}

#[test]
fn summary_uses_first_and_last_reading() {
    let t0 = Instant::now();
    let a = snap(t0, 0, 0, 0, 0);
    let b = snap(t0 + Duration::from_secs(4), 200, 200, 400, 1000);
    let sum = summarize(&[], &a, &b, Some(4 << 20), true);
    assert_eq!(sum.server_cpu_seconds, Some(4.0));
    assert!((sum.cpu_user_pct.unwrap() - 50.0).abs() < 1e-9);
    assert_eq!(sum.max_rss_bytes, Some(1 << 20));
    assert!((sum.mem_pct.unwrap() - 25.0).abs() < 1e-9);
    assert!((sum.tx_packets_per_s.unwrap() - 100.0).abs() < 1e-9);
    assert_eq!(sum.target_run_wait_ms_per_s, Some(100.0));
    let none = summarize(&[], &a, &b, None, false);
    assert_eq!(none.server_cpu_seconds, None);
    assert_eq!(none.target_run_wait_ms_per_s, None);
    assert_eq!(none.max_rss_bytes, None);
}

#[test]
fn tree_walk_follows_children_and_ignores_cycles() {
    let map = HashMap::from([(1, vec![2, 3]), (3, vec![4]), (4, vec![1]), (9, vec![10])]);
    let mut t = tree_from(1, &map);
    t.sort();
    assert_eq!(t, vec![1, 2, 3, 4]);
    assert_eq!(tree_from(7, &map), vec![7]);
}

#[test]
fn rejects_too_short_interval() {
    let mut c = MonitorConfig::new(ProcessScope::None, Instant::now());
    c.interval = Duration::from_millis(50);
    assert!(matches!(
        Monitor::start(c),
        Err(MonitorError::IntervalTooShort(_))
    ));
}

#[test]
fn monitors_this_process_tree() {
    let origin = Instant::now();
    let mut c = MonitorConfig::new(
        ProcessScope::Tree {
            root_pid: std::process::id(),
        },
        origin,
    );
    c.interval = Duration::from_millis(100);
    let m = Monitor::start(c).unwrap();
    // Burn a bounded amount of CPU so the tree has ticks to show.
    let mut x = 0u64;
    let until = Instant::now() + Duration::from_millis(250);
    while Instant::now() < until {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
    }
    std::hint::black_box(x);
    let r = m.finish();
    assert!(!r.samples.is_empty());
    let t = r.samples[0].target.as_ref().unwrap();
    assert!(t.processes >= 1 && t.threads >= 1 && t.open_fds >= 1);
    assert!(r.summary.server_cpu_seconds.unwrap() > 0.0);
    assert!(r.summary.max_rss_bytes.unwrap() > 0);
}

/// A real target starved of its CPU by a neighbour: a spinning shell pinned to CPU
/// 0 beside a second spinner on the same CPU waits for it about half of every
/// second, while a sleeping target never does. Both are this test's own children,
/// killed by handle at the end.
#[test]
fn a_target_that_shares_its_cpu_with_a_neighbour_waits_for_it() {
    use std::process::{Child, Command, Stdio};
    struct Killed(Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let spawn = |script: &str| {
        Command::new("taskset")
            .args(["-c", "0", "sh", "-c", script])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()
            .map(Killed)
    };
    let (Some(target), Some(_neighbour), Some(sleeper)) = (
        spawn("while :; do :; done"),
        spawn("while :; do :; done"),
        spawn("sleep 5"),
    ) else {
        eprintln!("skipped: taskset could not start the processes");
        return;
    };
    let watch = |pid: u32| {
        let mut c = MonitorConfig::new(ProcessScope::Tree { root_pid: pid }, Instant::now());
        c.interval = Duration::from_millis(500);
        Monitor::start(c).unwrap()
    };
    let (starved, idle) = (watch(target.0.id()), watch(sleeper.0.id()));
    std::thread::sleep(Duration::from_millis(1500));
    let (starved, idle) = (starved.finish(), idle.finish());
    let waited = starved.summary.target_run_wait_ms_per_s.unwrap();
    // Two spinners on one CPU each run about half the time: ~500 ms/s of waiting.
    assert!(waited > 200.0, "the starved target waited {waited:.0} ms/s");
    // Every whole interval, not only the run: the wait is per second.
    for s in starved.samples.iter().filter(|s| s.interval_ms >= 400) {
        let w = s.target.as_ref().unwrap().run_wait_ms_per_s;
        assert!(w > 100.0, "{w:.0} ms/s at {} ms", s.t_ms);
    }
    let slept = idle.summary.target_run_wait_ms_per_s.unwrap();
    assert!(slept < 20.0, "the sleeping target waited {slept:.1} ms/s");
}
