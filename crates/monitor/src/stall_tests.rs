//! Tests of the stall probe: its pure parts on fixed numbers, and short real runs.

use super::*;

#[test]
fn a_closed_loop_gets_the_coarse_period_an_open_loop_the_fine_one() {
    assert_eq!(interval_for(true), Duration::from_micros(500));
    assert_eq!(interval_for(false), Duration::from_millis(10));
}

#[test]
fn steal_is_the_eighth_column() {
    let stat = "cpu  10 0 20 300 4 0 1 77 0 0\ncpu0 5 0 10 150 2 0 1 40 0 0\n";
    assert_eq!(parse_steal_ticks(stat), Some(77));
    assert_eq!(parse_steal_ticks("cpu  1 2 3\n"), None);
    assert_eq!(parse_steal_ticks("intr 5\n"), None);
}

#[test]
fn cpu_cgroup_and_mount_are_found() {
    let own = "9:name=systemd:/\n2:cpuacct:/\n1:cpu:/volley-7/gen\n0::/\n";
    assert_eq!(v1_cpu_path(own), Some("/volley-7/gen"));
    assert_eq!(v1_cpu_path("4:cpu,cpuacct:/\n"), Some("/"));
    assert_eq!(v1_cpu_path("0::/user.slice\n"), None, "v2 only");
    let mounts = "cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0\n\
                  cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n";
    assert_eq!(v1_cpu_mount(mounts).as_deref(), Some("/sys/fs/cgroup/cpu"));
    assert_eq!(
        v1_cpu_mount("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n"),
        None
    );
}

#[test]
fn a_second_closes_into_max_p99_and_count_over_1ms() {
    let mut acc = SecondAcc::default();
    for _ in 0..98 {
        acc.add(50, 50);
    }
    acc.add(1_500, 1_950);
    acc.add(20_000, 20_480);
    let s = acc.close(3, Some(120));
    assert_eq!(
        s,
        StallSecond {
            second: 3,
            wakeups: 100,
            max_us: 20_000,
            bound_us: 20_480,
            p99_us: 1_500,
            over_1ms: 2,
            steal_us: Some(120),
            ..Default::default()
        }
    );
    let empty = acc.close(4, None);
    assert_eq!(
        (empty.wakeups, empty.max_us, empty.bound_us, empty.p99_us),
        (0, 0, 0, 0)
    );
}

#[test]
fn the_longest_stall_of_a_second_is_its_own() {
    let sec = |second, max_us| StallSecond {
        second,
        wakeups: 10,
        max_us,
        ..Default::default()
    };
    let r = StallReport {
        seconds: vec![sec(0, 100), sec(1, 20_000), sec(2, 80)],
        ..Default::default()
    };
    assert_eq!(r.longest_near(0), Some(100));
    assert_eq!(r.longest_near(1), Some(20_000));
    assert_eq!(r.longest_near(2), Some(80));
    assert_eq!(r.longest_near(3), None);
    // A 30 ms stall from second 1 into second 2 is second 1's longest too.
    let mut closed = Closed::default();
    closed.push(sec(0, 100), None);
    closed.push(sec(1, 200), None);
    closed.mark(Stall {
        first: 1,
        late_us: 30_000,
        bound_us: 30_400,
    });
    let closed = closed.finish();
    assert_eq!((closed[0].max_us, closed[1].max_us), (100, 30_000));
    assert_eq!((closed[0].bound_us, closed[1].bound_us), (0, 30_400));
    // The bound is what may excuse lateness; a stored report without it gives
    // the lower bound.
    let r = StallReport {
        seconds: closed,
        ..Default::default()
    };
    assert_eq!(r.bound_near(1), Some(30_400));
    assert_eq!(r.bound_near(0), Some(100));
    assert_eq!(r.bound_near(5), None);
    let mut gap = Vec::new();
    push_second(&mut gap, sec(2, 5));
    assert_eq!(gap.iter().map(|s| s.second).collect::<Vec<_>>(), [0, 1, 2]);
}

/// A long load's closed seconds: all come back in order, equal, though only the
/// latest [`KEPT_SECONDS`] stayed in memory; a stall marks those it reaches, and the
/// seconds a long stall skipped are marked before they can leave memory.
#[test]
fn closed_seconds_wait_on_disk_and_come_back_whole() {
    let sec = |second: u64| StallSecond {
        second,
        wakeups: 2_000,
        max_us: second % 7,
        p99_us: 3,
        steal_us: (second % 2 == 0).then_some(second),
        others_us: if second % 3 == 0 {
            vec![]
        } else {
            vec![second, 5]
        },
        ours_us: vec![1, 2],
        own_throttled_us: (second % 5 == 0).then_some(9),
        ..Default::default()
    };
    let n = KEPT_SECONDS as u64 * 3;
    let mut closed = Closed::default();
    for k in 0..n {
        closed.push(sec(k), None);
        if k + 1 == KEPT_SECONDS as u64 {
            assert!(
                closed.old.is_none(),
                "no file while every second fits in memory"
            );
        }
    }
    assert_eq!(closed.recent.len(), KEPT_SECONDS, "the rest waits on disk");
    // A 2 s stall that began two seconds before the last closed one.
    closed.mark(Stall {
        first: n - 2,
        late_us: 2_000_000,
        bound_us: 2_000_100,
    });
    // The load stopped for longer than the kept window: the skipped seconds are
    // made when it ends, each marked.
    let long = Stall {
        first: n,
        late_us: 400_000_000,
        bound_us: 400_000_500,
    };
    let after = n + 2 * KEPT_SECONDS as u64;
    closed.push(sec(after), Some(long));
    let got = closed.finish();
    assert_eq!(got.len() as u64, after + 1);
    for (k, g) in got.iter().enumerate() {
        let k = k as u64;
        assert_eq!(g.second, k);
        let want = if k < n {
            let mut w = sec(k);
            if k >= n - 2 {
                (w.max_us, w.bound_us) = (2_000_000, 2_000_100);
            }
            w
        } else {
            let mut w = if k == after {
                sec(k)
            } else {
                StallSecond {
                    second: k,
                    ..Default::default()
                }
            };
            (w.max_us, w.bound_us) = (400_000_000, 400_000_500);
            w
        };
        assert_eq!(g, &want, "second {k}");
    }
}

#[test]
fn a_hold_is_bounded_from_below_and_above() {
    const MS: u64 = 1_000_000;
    let us = |x: u64| x * 1_000;
    // (last woke, slept at, deadline, woke) -> (lower, upper), microseconds.
    let rows = [
        // On time: 30 us of wake-up latency, no stall.
        (Some(0), us(5), us(500), us(530), (30, 30)),
        // Held 3 ms while sleeping: at least the oversleep, at most since it slept.
        (Some(0), us(5), us(500), us(3_500), (3_000, 3_495)),
        // Held 2 ms while running: the deadline passed during it, the sleep
        // returned at once; the hold is exact, not 2 ms minus a period.
        (Some(0), 2 * MS, us(500), 2 * MS + us(3), (2_000, 2_000)),
        // Just under the threshold: an oversleep, not a stall; the upper bound
        // stays the oversleep.
        (Some(0), us(5), us(500), us(599), (99, 99)),
        // The first wake-up has no earlier one to measure a running hold from.
        (None, us(5), us(500), us(530), (30, 30)),
    ];
    for (last, slept, deadline, woke, want) in rows {
        assert_eq!(
            held(last, slept, deadline, woke),
            want,
            "{last:?} {slept} {deadline} {woke}"
        );
    }
}

#[test]
fn per_cpu_reports_merge_into_the_worst_cpu_per_second() {
    let sec = |second, wakeups, max_us, p99_us, over_1ms, steal_us| StallSecond {
        second,
        wakeups,
        max_us,
        bound_us: max_us + 500,
        p99_us,
        over_1ms,
        steal_us,
        ..Default::default()
    };
    // CPU 0 stalled 9 ms in second 1; CPU 1 stalled 4 ms in second 0 and ran a
    // second longer; only CPU 0's sleeper read the steal.
    let cpu0 = StallReport {
        interval_us: 500,
        cpus: 1,
        seconds: vec![
            sec(0, 2000, 80, 60, 0, Some(0)),
            sec(1, 1990, 9_000, 70, 1, Some(9_000)),
        ],
        ..Default::default()
    };
    let cpu1 = StallReport {
        interval_us: 500,
        cpus: 1,
        seconds: vec![
            sec(0, 1995, 4_000, 90, 1, None),
            sec(1, 2000, 50, 40, 0, None),
            sec(2, 100, 30, 30, 0, None),
        ],
        ..Default::default()
    };
    let m = merge(vec![cpu0, cpu1]);
    assert_eq!(m.cpus, 2);
    assert_eq!(
        m.seconds,
        vec![
            sec(0, 3995, 4_000, 90, 1, Some(0)),
            sec(1, 3990, 9_000, 70, 1, Some(9_000)),
            sec(2, 100, 30, 30, 0, None),
        ]
    );
    assert_eq!(merge(Vec::new()), StallReport::default());
}

#[test]
fn a_short_run_reports_every_second_from_zero() {
    // The shape of a real run's report, never its timing.
    let p = StallProbe::start(Instant::now(), DEFAULT_INTERVAL);
    std::thread::sleep(Duration::from_millis(30));
    let r = p.finish();
    assert_eq!(r.interval_us, 500);
    assert_eq!(
        r.cpus as usize,
        allowed_cpus().len().max(1),
        "one sleeper per CPU"
    );
    assert!(!r.seconds.is_empty());
    assert!(r.seconds[0].wakeups > 0);
    assert!(r
        .seconds
        .iter()
        .enumerate()
        .all(|(i, s)| s.second == i as u64));
}

#[test]
fn the_machines_figures_are_read_at_an_ordinary_priority_and_fifo_comes_back() {
    // The reading sleeper's once-a-second read must not hold a pacer on its CPU: it
    // runs SCHED_OTHER, then the sleeper is SCHED_FIFO again (where it may be).
    std::thread::spawn(|| {
        let priority = keep_clear();
        // SAFETY: reads this thread's policy.
        let policy = || unsafe { libc::sched_getscheduler(0) };
        let before = policy();
        let inside = as_ordinary(&priority, policy);
        assert_eq!(inside, libc::SCHED_OTHER);
        assert_eq!(policy(), before);
        if priority.fifo {
            assert_eq!(before, libc::SCHED_FIFO);
        } else {
            eprintln!("SCHED_FIFO refused: only the ordinary read is checked");
        }
    })
    .join()
    .unwrap();
}
