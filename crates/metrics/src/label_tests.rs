//! Tests of the labelling rule, on hand-made checks (no clock, no load).

use super::*;

fn open(rate: f64, scheduled: u64, dispatched: u64, lag_us: u64, slack: bool) -> Check {
    Check {
        offered_rate_per_s: Some(rate),
        scheduled: scheduled as f64,
        dispatched: dispatched as f64,
        sent: dispatched as f64,
        slack: if slack { 1.0 } else { 0.0 },
        sched_lag_p99_us: lag_us,
        conn_wait_p99_us: 0,
        cap_hits: 0,
        cpu_cores_used: None,
        cores: 2.0,
        cpu_pressure: None,
        cpu_wait_share: None,
        longest_stall_us: None,
        pacer_wait_us: None,
        others_on_pacer_us: None,
        ours_on_pacer_us: None,
        target_on_pacer_us: None,
    }
}

fn closed(used: Option<f64>, cores: f64, pressure: Option<f64>) -> Check {
    Check {
        offered_rate_per_s: None,
        scheduled: 0.0,
        dispatched: 100.0,
        sent: 100.0,
        slack: 0.0,
        sched_lag_p99_us: 0,
        conn_wait_p99_us: 0,
        cap_hits: 0,
        cpu_cores_used: used,
        cores,
        cpu_pressure: pressure,
        cpu_wait_share: None,
        longest_stall_us: None,
        pacer_wait_us: None,
        others_on_pacer_us: None,
        ours_on_pacer_us: None,
        target_on_pacer_us: None,
    }
}

#[test]
fn lag_threshold_is_max_of_1ms_and_1pct_interval() {
    // 1000/s: interval 1 ms, 1% = 10 us -> 1 ms floor.
    assert_eq!(lag_threshold_us(1000.0), 1000.0);
    // 1/s: interval 1 s, 1% = 10 ms.
    assert_eq!(lag_threshold_us(1.0), 10_000.0);
    // 5/s: interval 200 ms, 1% = 2 ms.
    assert_eq!(lag_threshold_us(5.0), 2_000.0);
}

#[test]
fn open_loop_table() {
    use Bound::*;
    let table = [
        // (rate, scheduled, dispatched, sched-lag p99 us, slack, expected)
        (1000.0, 1000, 1000, 200, false, ServerBound),
        (1000.0, 1000, 1000, 1000, false, ServerBound), // exactly at the limit
        (1000.0, 1000, 1000, 1001, false, GeneratorBound), // lag just over 1 ms
        (1.0, 10, 10, 9_000, false, ServerBound),       // 9 ms < 10 ms at 1/s
        (1.0, 10, 10, 11_000, false, GeneratorBound),   // 11 ms > 10 ms
        (1000.0, 1000, 990, 100, false, ServerBound),   // exactly 1% short
        (1000.0, 1000, 989, 100, false, GeneratorBound), // > 1% short
        (10.0, 10, 9, 100, true, ServerBound),          // one request of boundary slack
        (10.0, 10, 9, 100, false, GeneratorBound),
        (10.0, 10, 8, 100, true, GeneratorBound),
        (100.0, 0, 0, 0, true, Inconclusive),
    ];
    for (rate, scheduled, sent, lag, slack, want) in table {
        let got = classify(&open(rate, scheduled, sent, lag, slack));
        assert_eq!(
            got.label, want,
            "rate {rate} sched {scheduled} sent {sent} lag {lag}: {}",
            got.reason
        );
    }
}

#[test]
fn connection_wait_is_the_server_holding_connections_not_a_late_generator() {
    use Bound::*;
    // (sched lag us, conn wait us, dispatched, sent, cap hits, expected, reason has)
    let table = [
        // A stalling server: every connection held 90 ms, arrivals queue. The
        // generator handled each arrival on time and dispatched all of them.
        (
            50,
            90_000,
            1000,
            900,
            12,
            ServerBound,
            "connection wait p99 90.000 ms",
        ),
        // The same queueing and a late event loop: the loop is what counts.
        (
            5_000,
            90_000,
            1000,
            900,
            12,
            GeneratorBound,
            "scheduler-lag p99 5.000 ms",
        ),
        // The generator fell short of the schedule in what it dispatched.
        (
            50,
            90_000,
            950,
            900,
            0,
            GeneratorBound,
            "dispatched 950.0 vs 1000.0",
        ),
        // Small waits are not mentioned.
        (50, 300, 1000, 1000, 0, ServerBound, "kept the schedule"),
    ];
    for (sched, wait, dispatched, sent, caps, want, has) in table {
        let mut c = open(1000.0, 1000, dispatched, sched, false);
        c.conn_wait_p99_us = wait;
        c.sent = sent as f64;
        c.cap_hits = caps;
        let got = classify(&c);
        assert_eq!(got.label, want, "{sched} {wait}: {}", got.reason);
        assert!(got.reason.contains(has), "{}", got.reason);
        assert_eq!(
            got.reason.contains("connection wait"),
            wait > 1_000,
            "{}",
            got.reason
        );
    }
    let mut c = open(1000.0, 1000, 1000, 50, false);
    c.conn_wait_p99_us = 90_000;
    c.cap_hits = 12;
    assert!(classify(&c).reason.contains("cap was hit 12 time(s)"));
}

#[test]
fn closed_loop_table() {
    use Bound::*;
    let table = [
        (None, 2.0, None, Inconclusive),
        (Some(1.9), 2.0, None, GeneratorBound),
        (Some(0.95), 1.0, Some(0.0), GeneratorBound),
        (Some(0.5), 2.0, Some(0.1), ServerBound),
        (Some(1.4), 2.0, None, ServerBound), // 70% exactly
        (Some(1.6), 2.0, Some(0.0), Inconclusive),
        (Some(0.5), 2.0, Some(0.8), Inconclusive), // cores contended
    ];
    for (used, cores, pressure, want) in table {
        let got = classify(&closed(used, cores, pressure));
        assert_eq!(
            got.label, want,
            "{used:?} of {cores} at {pressure:?}: {}",
            got.reason
        );
    }
}

/// A closed loop measured under 100 ms is inconclusive whatever its CPU share said (seed
/// 000's 500-request bursts of 1-7 ms "used 1.3-3.5 cores" at start-up); from 100 ms
/// the share decides as before; an open loop is judged at any length.
#[test]
fn a_closed_loop_too_short_for_its_cpu_share_is_inconclusive() {
    use Bound::*;
    let burst = closed(Some(1.26), 1.0, None);
    let got = classify_run(&burst, 2_790_000);
    assert_eq!(got.label, Inconclusive, "{}", got.reason);
    assert!(
        got.reason.starts_with("closed loop measured 2.8 ms: too short to tell whose limit it was (the generator's 1.26 of 1 core(s) counts its start-up)"),
        "{}",
        got.reason
    );
    assert_eq!(classify_run(&burst, 99_999_999).label, Inconclusive);
    assert_eq!(
        classify_run(&burst, CLOSED_MIN_MEASURED_NS).label,
        GeneratorBound
    );
    let quiet = closed(Some(0.3), 1.0, Some(0.0));
    assert_eq!(classify_run(&quiet, 150_000_000).label, ServerBound);
    let mut open = closed(Some(0.3), 1.0, Some(0.0));
    open.offered_rate_per_s = Some(1000.0);
    open.scheduled = 1000.0;
    open.dispatched = 1000.0;
    open.sent = 1000.0;
    assert_eq!(classify_run(&open, 2_000_000).label, classify(&open).label);
}

/// The generator's own wait for a CPU decides a closed loop where it was measured;
/// machine-wide pressure, which counts a target throttled by the cap volley set, then
/// decides nothing (seed 002: 2% of a core used, worker 0 waiting 0.8% of the time,
/// pressure 67%: the server's figure, not an inconclusive one).
#[test]
fn closed_loop_reads_the_generators_own_wait_before_pressure() {
    use Bound::*;
    let table = [
        // (used, cores, pressure, worker 0's wait share, expected)
        (Some(0.02), 1.0, Some(0.67), Some(0.008), ServerBound), // seed 002, capped nginx
        (Some(0.02), 1.0, Some(0.67), None, Inconclusive),       // no schedstats: as before
        (Some(0.5), 2.0, Some(0.0), Some(0.099), ServerBound),
        (Some(0.5), 2.0, Some(0.0), Some(0.1), Inconclusive), // short of a CPU itself
        (Some(0.5), 2.0, None, Some(0.4), Inconclusive),
        (Some(1.6), 2.0, Some(0.0), Some(0.0), Inconclusive), // 80%: scheduling-limited
        (Some(1.9), 2.0, Some(0.9), Some(0.5), GeneratorBound), // its CPU decides first
        (None, 2.0, Some(0.0), Some(0.0), Inconclusive),      // CPU not measured
    ];
    for (used, cores, pressure, wait, want) in table {
        let mut c = closed(used, cores, pressure);
        c.cpu_wait_share = wait;
        let got = classify(&c);
        assert_eq!(
            got.label, want,
            "{used:?} of {cores}, pressure {pressure:?}, wait {wait:?}: {}",
            got.reason
        );
    }
    let mut c = closed(Some(0.5), 2.0, Some(0.9));
    c.cpu_wait_share = Some(0.25);
    let why = classify(&c).reason;
    assert!(
        why.contains("waited for a CPU 25.0% of the time") && !why.contains("pressure"),
        "{why}"
    );
}

#[test]
fn lateness_the_probe_saw_too_is_the_machines() {
    use Bound::*;
    let table = [
        // (rate, scheduled, dispatched, sched-lag p99 us, probe's longest stall us, expected)
        (200.0, 200, 200, 15_000, Some(20_000), MachineStalled), // a 20 ms stop
        (200.0, 200, 200, 15_000, Some(14_900), MachineStalled), // + 100 us slack
        (200.0, 200, 200, 15_000, Some(14_899), GeneratorBound), // 1 us beyond it
        (200.0, 200, 200, 15_000, Some(600), GeneratorBound),    // only the pacer late
        (200.0, 200, 200, 15_000, None, GeneratorBound),         // no probe ran
        (200.0, 200, 200, 400, Some(20_000), ServerBound),       // not late at all
        // 1000/s, 20 short of 1000 (more than 1% + 1): 20 ms of arrivals.
        (1000.0, 1000, 980, 300, Some(20_000), MachineStalled),
        (1000.0, 1000, 980, 300, Some(19_900), MachineStalled),
        (1000.0, 1000, 980, 300, Some(5_000), GeneratorBound),
        (100.0, 0, 0, 0, Some(50_000), Inconclusive),
    ];
    for (rate, scheduled, dispatched, lag, stall, want) in table {
        let mut c = open(rate, scheduled, dispatched, lag, true);
        c.longest_stall_us = stall;
        let got = classify(&c);
        assert_eq!(
            got.label, want,
            "{lag} us late, stall {stall:?}: {}",
            got.reason
        );
        if want == MachineStalled {
            assert!(got.reason.contains("stall probe"), "{}", got.reason);
        }
    }
    // The closed loop is judged by CPU, never by the probe.
    let mut c = closed(Some(1.9), 2.0, None);
    c.longest_stall_us = Some(50_000);
    assert_eq!(classify(&c).label, GeneratorBound);
}

#[test]
fn lateness_a_neighbour_on_the_pacers_cpu_explains_is_the_machines() {
    use Bound::*;
    // The probe saw nothing (600 us); who held the pacer's CPU decides.
    let table = [
        // (rate, scheduled, dispatched, sched-lag p99 us, pacer's wait us,
        //  others' sure share of its CPU us, ours at most us, expected)
        // A neighbour took 400 ms of the pacer's CPU; the pacer waited 6 ms.
        (
            1000.0,
            1000,
            1000,
            5_000,
            Some(6_000),
            Some(400_000),
            Some(50_000),
            MachineStalled,
        ),
        // The wait plus 100 us just covers the lateness; 1 us less does not.
        (
            1000.0,
            1000,
            1000,
            5_000,
            Some(4_900),
            Some(400_000),
            Some(50_000),
            MachineStalled,
        ),
        (
            1000.0,
            1000,
            1000,
            5_000,
            Some(4_899),
            Some(400_000),
            Some(50_000),
            GeneratorBound,
        ),
        // volley's own work filled the CPU (more than its core gives, or a target
        // it started there): others' sure share is 0, the wait is the generator's.
        (
            1000.0,
            1000,
            1000,
            5_000,
            Some(30_000),
            Some(0),
            Some(900_000),
            GeneratorBound,
        ),
        // Others took some, but less than volley's other threads and targets can
        // have: the wait may be volley's own.
        (
            1000.0,
            1000,
            1000,
            5_000,
            Some(30_000),
            Some(200_000),
            Some(700_000),
            GeneratorBound,
        ),
        // Others took less than the lateness: they cannot have made it.
        (
            1000.0,
            1000,
            1000,
            5_000,
            Some(30_000),
            Some(4_000),
            Some(1_000),
            GeneratorBound,
        ),
        // Unknown (a cgroup volley made gave no CPU figure, old stores): as before.
        (
            1000.0,
            1000,
            1000,
            5_000,
            Some(30_000),
            None,
            None,
            GeneratorBound,
        ),
        (
            1000.0,
            1000,
            1000,
            5_000,
            None,
            Some(400_000),
            Some(0),
            GeneratorBound,
        ),
        // A dispatch shortfall of 20 at 1000/s is 20 ms of arrivals.
        (
            1000.0,
            1000,
            980,
            300,
            Some(25_000),
            Some(500_000),
            Some(0),
            MachineStalled,
        ),
        (
            1000.0,
            1000,
            980,
            300,
            Some(10_000),
            Some(500_000),
            Some(0),
            GeneratorBound,
        ),
        // On time: no label to excuse.
        (
            1000.0,
            1000,
            1000,
            300,
            Some(25_000),
            Some(500_000),
            Some(0),
            ServerBound,
        ),
    ];
    for (rate, scheduled, dispatched, lag, wait, others, ours, want) in table {
        let mut c = open(rate, scheduled, dispatched, lag, true);
        c.longest_stall_us = Some(600);
        (c.pacer_wait_us, c.others_on_pacer_us, c.ours_on_pacer_us) = (wait, others, ours);
        let got = classify(&c);
        assert_eq!(
            got.label, want,
            "{lag} us late, waited {wait:?}, others {others:?}, ours {ours:?}: {}",
            got.reason
        );
        if want == MachineStalled {
            assert!(got.reason.contains("waited"), "{}", got.reason);
            assert!(got.reason.contains("did not start"), "{}", got.reason);
        }
    }
}

#[test]
fn a_target_beside_the_generator_on_its_core_is_named_in_the_reason() {
    // 1,000 req/s, 3 ms late: generator-bound by the rule. (pacer's wait us,
    // others' sure share us, ours at most us, the target's on the pacer's CPU us)
    // -> (label, words in the reason or none)
    type Row = (
        Option<u64>,
        Option<u64>,
        Option<u64>,
        Option<u64>,
        Bound,
        Option<&'static str>,
    );
    let table: [Row; 6] = [
        // The managed target filled 35% of the pacer's core while it waited: the
        // generator's (the study's own target), and said who took the core.
        (
            Some(3_000),
            Some(0),
            Some(400_000),
            Some(350_000),
            Bound::GeneratorBound,
            Some("the target ran beside the generator and took 35% of its core (the pacer waited 3.000 ms"),
        ),
        // The pacer never waited: its lateness was its own work, not the target's.
        (
            Some(0),
            Some(0),
            Some(400_000),
            Some(350_000),
            Bound::GeneratorBound,
            None,
        ),
        // The target barely ran there (2%): not named.
        (
            Some(3_000),
            Some(0),
            Some(30_000),
            Some(20_000),
            Bound::GeneratorBound,
            None,
        ),
        // Not known (a cgroup2 target gives no per-CPU figure): not named.
        (Some(3_000), Some(0), Some(400_000), None, Bound::GeneratorBound, None),
        // Others took more than volley and its targets could: the machine's.
        (
            Some(3_000),
            Some(500_000),
            Some(200_000),
            Some(150_000),
            Bound::MachineStalled,
            None,
        ),
        // More than the whole core over a window (rounding): at most 100%.
        (
            Some(3_000),
            Some(0),
            Some(1_200_000),
            Some(1_100_000),
            Bound::GeneratorBound,
            Some("took 100% of its core"),
        ),
    ];
    for (wait, others, ours, target, want, words) in table {
        let mut c = open(1_000.0, 1_000, 1_000, 3_000, true);
        (c.pacer_wait_us, c.others_on_pacer_us, c.ours_on_pacer_us) = (wait, others, ours);
        c.target_on_pacer_us = target;
        let got = classify(&c);
        assert_eq!(got.label, want, "{target:?}: {}", got.reason);
        match words {
            Some(w) => assert!(got.reason.contains(w), "{}", got.reason),
            None => assert!(!got.reason.contains("beside"), "{}", got.reason),
        }
    }
    // A shortfall is named the same way.
    let mut c = open(1_000.0, 1_000, 900, 100, true);
    (c.pacer_wait_us, c.target_on_pacer_us) = (Some(5_000), Some(600_000));
    let got = classify(&c);
    assert_eq!(got.label, Bound::GeneratorBound);
    assert!(
        got.reason.contains("took 60% of its core"),
        "{}",
        got.reason
    );
}

#[test]
fn a_run_is_machine_stalled_only_when_all_its_lateness_was_the_machines() {
    use Bound::*;
    let late = Verdict {
        label: GeneratorBound,
        reason: "scheduler-lag p99 3 ms".into(),
    };
    let table: [(&[Bound], Bound); 6] = [
        (&[ServerBound, MachineStalled, ServerBound], MachineStalled),
        (&[MachineStalled, MachineStalled], MachineStalled),
        (
            &[ServerBound, MachineStalled, GeneratorBound],
            GeneratorBound,
        ),
        (&[ServerBound, ServerBound], GeneratorBound), // lateness spread thin
        (&[], GeneratorBound),
        (&[Inconclusive, MachineStalled], MachineStalled),
    ];
    for (seconds, want) in table {
        let got = run_label(late.clone(), seconds);
        assert_eq!(got.label, want, "{seconds:?}: {}", got.reason);
    }
    let kept = Verdict {
        label: ServerBound,
        reason: "kept the schedule".into(),
    };
    assert_eq!(run_label(kept.clone(), &[MachineStalled]), kept);
}

#[test]
fn labels_print_as_documented() {
    assert_eq!(Bound::MachineStalled.label(), "machine-stalled");
    assert_eq!(
        serde_json::to_string(&Bound::MachineStalled).unwrap(),
        "\"machine-stalled\""
    );
    assert_eq!(Bound::ServerBound.label(), "server-bound");
    assert_eq!(Bound::GeneratorBound.label(), "generator-bound");
    assert_eq!(Bound::Inconclusive.label(), "inconclusive");
    assert_eq!(
        serde_json::to_string(&Bound::GeneratorBound).unwrap(),
        "\"generator-bound\""
    );
}
