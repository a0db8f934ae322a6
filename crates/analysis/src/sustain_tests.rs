use super::*;

#[test]
fn generator_bound_steps_never_count_for_the_server() {
    assert!(!counts_for_server(Some(Bound::GeneratorBound.label())));
    assert!(counts_for_server(Some(Bound::ServerBound.label())));
    assert!(counts_for_server(Some(Bound::Inconclusive.label())));
    assert!(counts_for_server(None));
    assert_eq!(Bound::GeneratorBound.label(), "generator-bound");
    assert!(!counts_for_server(Some(Bound::MachineStalled.label())));
    assert!(!counts_for_server(Some("machine-stalled")));
    assert_eq!(Bound::MachineStalled.label(), "machine-stalled");
    // A burst its CPU cap never held: not the server's, and measuring it again with
    // the same plan would be as short.
    assert!(!counts_for_server(Some(TOO_SHORT)));
    assert_eq!(not_the_servers(Some("too-short")), Some(TOO_SHORT));
    assert!(!spoiled_by_noise(Some(TOO_SHORT)));
    assert!(spoiled_by_noise(Some(Bound::GeneratorBound.label())));
}

#[test]
fn a_late_step_is_machine_stalled_only_when_its_seconds_say_so() {
    use Bound::*;
    let late = StepStats {
        sched_lag_p99: Some(ms(4)),
        ..healthy()
    };
    // (generator-bound seconds, machine-stalled seconds, sustainable, expected)
    let table = [
        (Some(0), Some(2), true, MachineStalled),
        (Some(0), Some(2), false, MachineStalled),
        (Some(1), Some(2), true, GeneratorBound), // one second was the generator's own
        (Some(0), Some(0), true, GeneratorBound), // lateness no second showed
        (None, None, true, GeneratorBound),       // a record made before the probe
        (None, Some(3), true, GeneratorBound),
    ];
    for (gen, stalled, sustainable, want) in table {
        let s = StepStats {
            generator_bound_seconds: gen,
            machine_stalled_seconds: stalled,
            ..late.clone()
        };
        assert_eq!(bound_label(&s, sustainable), want, "{gen:?} {stalled:?}");
    }
    // A step that kept its schedule stays the server's, stalled seconds or not.
    let kept = StepStats {
        generator_bound_seconds: Some(0),
        machine_stalled_seconds: Some(3),
        ..healthy()
    };
    assert_eq!(bound_label(&kept, true), ServerBound);
    // A dispatch shortfall the seconds put on the machine.
    let short = StepStats {
        dispatch_rate_rps: Some(950.0),
        generator_bound_seconds: Some(0),
        machine_stalled_seconds: Some(1),
        ..healthy()
    };
    assert_eq!(judge(&short, &rule()).bound, MachineStalled);
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// A healthy step at 1000 rps: everything on target, flat in-flight around 5.
fn healthy() -> StepStats {
    StepStats {
        offered_rate_rps: 1000.0,
        send_rate_rps: 999.8,
        reply_rate_rps: 999.5,
        error_share: 0.0,
        p99_per_window: vec![ms(3); 10],
        in_flight_per_window: vec![5.0, 6.0, 4.0, 5.0, 5.0, 6.0, 4.0, 5.0, 6.0, 5.0],
        window: Duration::from_secs(1),
        send_lag_p99: Some(Duration::from_micros(200)),
        sched_lag_p99: Some(Duration::from_micros(150)),
        conn_wait_p99: Some(Duration::from_micros(50)),
        dispatch_rate_rps: Some(999.9),
        cap_hits: 0,
        pool_saturated: false,
        generator_bound_seconds: None,
        machine_stalled_seconds: None,
        listen_overflows: None,
        ports_used_of_range: None,
        connections_opened: None,
        connects_without_port: None,
        time_wait: None,
    }
}

/// Connects that waited: an overflowing accept queue is the server's failure, a missing
/// port the generator's, and without the kernel's counters the rule stands as it was.
#[test]
fn connect_waits_are_labelled_by_the_kernels_counters() {
    use Bound::*;
    // 12,800 req/s offered, 4.7% dispatched: workers stuck in connect.
    let stuck = StepStats {
        offered_rate_rps: 12_800.0,
        dispatch_rate_rps: Some(600.0),
        sched_lag_p99: Some(ms(1_500)),
        ..healthy()
    };
    let free = Some((3_000, 28_232));
    let all_taken = Some((28_232, 28_232));
    // (listen overflows, ports used of range, stalled seconds, cause, label)
    let table = [
        (
            Some(9_000),
            free,
            None,
            Some(ConnectCause::AcceptQueueFull),
            ServerBound,
        ),
        (
            Some(9_000),
            free,
            Some(3),
            Some(ConnectCause::AcceptQueueFull),
            ServerBound,
        ),
        (
            Some(9_000),
            all_taken,
            None,
            Some(ConnectCause::NoFreePort),
            GeneratorBound,
        ),
        (
            Some(0),
            all_taken,
            None,
            Some(ConnectCause::NoFreePort),
            GeneratorBound,
        ),
        // Ports not counted: the overflow alone cannot clear the generator.
        (Some(9_000), None, None, None, GeneratorBound),
        (Some(0), free, None, None, GeneratorBound),
        (None, free, None, None, GeneratorBound),
        (None, None, None, None, GeneratorBound),
    ];
    for (overflows, no_port, stalled, cause, want) in table {
        let s = StepStats {
            listen_overflows: overflows,
            ports_used_of_range: no_port,
            generator_bound_seconds: stalled.map(|_| 0),
            machine_stalled_seconds: stalled,
            ..stuck.clone()
        };
        assert_eq!(connect_cause(&s), cause, "{overflows:?} {no_port:?}");
        assert_eq!(bound_label(&s, false), want, "{overflows:?} {no_port:?}");
        assert_eq!(connect_cause_note(&s).is_some(), cause.is_some());
    }
    let full = StepStats {
        listen_overflows: Some(9_000),
        ports_used_of_range: free,
        ..stuck.clone()
    };
    assert!(connect_cause_note(&full)
        .unwrap()
        .contains("9000 SYN(s) dropped"));
    // Under 1% of the step's connections refused: the generator's lateness stays its
    // own; at 1% the queue is the cause.
    let few = |overflows: u64| StepStats {
        listen_overflows: Some(overflows),
        ports_used_of_range: free,
        connections_opened: Some(20_000),
        ..stuck.clone()
    };
    assert_eq!(connect_cause(&few(199)), None);
    assert_eq!(bound_label(&few(199), false), GeneratorBound);
    assert_eq!(
        connect_cause(&few(200)),
        Some(ConnectCause::AcceptQueueFull)
    );
    assert_eq!(bound_label(&few(200), false), ServerBound);
    // A step that kept its schedule is untouched by the counters.
    let kept = StepStats {
        listen_overflows: Some(5),
        ports_used_of_range: free,
        ..healthy()
    };
    assert_eq!(bound_label(&kept, true), ServerBound);
    assert_eq!(
        connect_note(&kept, true),
        None,
        "a step that carried its rate"
    );
    // A punctual pacer whose step failed because the listener dropped SYNs: the label
    // is the server's anyway, and the note says why, without blaming a late generator.
    let dropped = StepStats {
        listen_overflows: Some(900),
        ports_used_of_range: free,
        connections_opened: Some(3_000),
        reply_rate_rps: 400.0,
        ..healthy()
    };
    let v = judge(&dropped, &rule());
    assert!(!v.sustainable);
    assert_eq!(v.bound, ServerBound);
    let note = connect_note(&dropped, false).expect("the queue's overflow is named");
    assert!(note.contains("900 SYN(s) dropped"), "{note}");
    assert!(!note.contains("lateness"), "{note}");
    // Failed with the lag in the grey zone (0.6 ms of a 1 ms limit): inconclusive by
    // the lag alone, the server's once the listener is seen dropping SYNs.
    let grey = StepStats {
        sched_lag_p99: Some(Duration::from_micros(600)),
        ..dropped.clone()
    };
    assert_eq!(bound_label(&grey, false), ServerBound);
    let unseen = StepStats {
        listen_overflows: Some(0),
        ..grey.clone()
    };
    assert_eq!(bound_label(&unseen, false), Inconclusive);
    // The late step's note keeps its clause.
    assert!(connect_note(&full, false)
        .unwrap()
        .contains("lateness was the server's doing"));
}

/// Connects that failed for want of a free local port (EADDRNOTAVAIL) are the
/// generator's machine's shortage: counted, named with the ports and TIME_WAIT, and
/// never the server's failure, whatever else the step shows.
#[test]
fn connects_without_a_free_port_are_the_generators_machines() {
    use Bound::*;
    // The schedule kept, but 2% of requests failed in connect: by errors alone, a
    // server failure.
    let failing = StepStats {
        error_share: 0.02,
        ..healthy()
    };
    // (connects without a port, ports used of range, TIME_WAIT) -> (cause, label,
    // words in the note)
    type Row<'a> = (
        Option<u64>,
        Option<(u64, u64)>,
        Option<u64>,
        Option<ConnectCause>,
        Bound,
        &'a [&'a str],
    );
    let rows: [Row; 5] = [
        (
            Some(412),
            Some((28_232, 28_232)),
            Some(27_990),
            Some(ConnectCause::NoFreePort),
            GeneratorBound,
            &[
                "412 connect(s) failed for want of a free local port",
                "28232 sockets",
                "27990 of them in TIME_WAIT",
                "ran out of ports, not the server",
            ],
        ),
        // Counted, the sockets not: still the generator's, and said so.
        (
            Some(3),
            None,
            None,
            Some(ConnectCause::NoFreePort),
            GeneratorBound,
            &["3 connect(s) failed", "not counted"],
        ),
        // None failed so: the server's failure, as before.
        (
            Some(0),
            Some((3_000, 28_232)),
            Some(2_900),
            None,
            ServerBound,
            &[],
        ),
        // Not counted (a record made before): as before.
        (None, None, None, None, ServerBound, &[]),
        // Every port held at the end but no connect failed: a step that kept its
        // schedule keeps its label.
        (
            Some(0),
            Some((28_232, 28_232)),
            Some(28_000),
            Some(ConnectCause::NoFreePort),
            ServerBound,
            &["28232 sockets", "28000 of them in TIME_WAIT"],
        ),
    ];
    for (n, ports, tw, cause, label, words) in rows {
        let s = StepStats {
            connects_without_port: n,
            ports_used_of_range: ports,
            time_wait: tw,
            ..failing.clone()
        };
        assert_eq!(connect_cause(&s), cause, "{n:?} {ports:?}");
        let v = judge(&s, &rule());
        assert!(!v.sustainable, "2% errors never pass");
        assert_eq!(v.bound, label, "{n:?} {ports:?}");
        let note = connect_cause_note(&s).unwrap_or_default();
        for w in words {
            assert!(note.contains(w), "{note}");
        }
    }
}

/// The same step as a record made before send lag was split.
fn legacy(s: StepStats) -> StepStats {
    StepStats {
        sched_lag_p99: None,
        conn_wait_p99: None,
        dispatch_rate_rps: None,
        ..s
    }
}

#[test]
fn a_stalling_server_that_holds_the_connections_is_not_a_slow_generator() {
    // A CPU-capped server stalls 90 ms in every 100: every connection is held,
    // arrivals queue, requests go out late and below the rate (send rate short,
    // send lag 90 ms), while the generator dispatched every arrival on time.
    let stalled = StepStats {
        send_rate_rps: 940.0,
        reply_rate_rps: 930.0,
        send_lag_p99: Some(ms(90)),
        sched_lag_p99: Some(Duration::from_micros(120)),
        conn_wait_p99: Some(ms(90)),
        dispatch_rate_rps: Some(999.9),
        cap_hits: 40,
        pool_saturated: true,
        p99_per_window: vec![ms(120); 10],
        ..healthy()
    };
    let v = judge(&stalled, &rule());
    assert!(!v.sustainable, "sent below 99% of L: not sustainable");
    assert!(v
        .reasons
        .iter()
        .any(|r| matches!(r, Reason::SendRateShort { .. })));
    assert_eq!(v.bound, Bound::ServerBound);
    // Even without a cap hit and with nothing else against the server.
    let quiet = StepStats {
        pool_saturated: false,
        cap_hits: 0,
        ..stalled.clone()
    };
    assert_eq!(bound_label(&quiet, true), Bound::ServerBound);
    let note = conn_wait_note(&stalled).unwrap();
    assert!(note.contains("connection wait p99 90.000 ms"), "{note}");
    assert!(note.contains("cap was hit 40 time(s)"), "{note}");
    assert_eq!(conn_wait_note(&healthy()), None);
    // Judged as before the split, the same step looked like a slow generator.
    assert_eq!(bound_label(&legacy(quiet), true), Bound::GeneratorBound);
}

#[test]
fn the_generators_own_lateness_or_shortfall_is_generator_bound() {
    // Large scheduler lag: the event loop woke late.
    let late = StepStats {
        sched_lag_p99: Some(ms(4)),
        send_lag_p99: Some(ms(4)),
        ..healthy()
    };
    assert_eq!(judge(&late, &rule()).bound, Bound::GeneratorBound);
    // Dispatched more than 1% short of the schedule.
    let short = StepStats {
        dispatch_rate_rps: Some(980.0),
        ..healthy()
    };
    assert_eq!(judge(&short, &rule()).bound, Bound::GeneratorBound);
    // Exactly 1% short is still on schedule.
    let edge = StepStats {
        dispatch_rate_rps: Some(990.0),
        ..healthy()
    };
    assert_eq!(judge(&edge, &rule()).bound, Bound::ServerBound);
}

#[test]
fn an_overload_that_saturates_the_pool_is_the_servers() {
    // 4000 offered to a 3000 req/s server: the pool fills, arrivals wait for a
    // connection, so the send rate falls short and the send lag soars.
    let over = StepStats {
        offered_rate_rps: 4000.0,
        send_rate_rps: 3100.0,
        reply_rate_rps: 3000.0,
        send_lag_p99: Some(ms(400)),
        p99_per_window: vec![ms(300); 10],
        in_flight_per_window: (0..10).map(|i| 50.0 * i as f64).collect(),
        pool_saturated: true,
        ..healthy()
    };
    let v = judge(&over, &rule());
    assert!(!v.sustainable);
    assert_eq!(v.bound, Bound::ServerBound);
    // The same lateness without a saturated pool is the generator's.
    let slow_generator = StepStats {
        pool_saturated: false,
        sched_lag_p99: Some(ms(400)),
        dispatch_rate_rps: Some(3100.0),
        ..over.clone()
    };
    assert_eq!(judge(&slow_generator, &rule()).bound, Bound::GeneratorBound);
    // A saturated pool with nothing against the server: the lag decides as before.
    let passed = StepStats {
        pool_saturated: true,
        send_lag_p99: Some(ms(5)),
        sched_lag_p99: Some(ms(5)),
        ..healthy()
    };
    let v = judge(&passed, &rule());
    assert!(v.sustainable);
    assert_eq!(v.bound, Bound::GeneratorBound);
}

fn rule() -> Rule {
    Rule::new(0.001, ms(50))
}

#[test]
fn healthy_step_is_sustainable_and_server_bound() {
    let v = judge(&healthy(), &rule());
    assert!(v.sustainable, "{v:?}");
    assert!(v.reasons.is_empty());
    assert_eq!(v.bound, Bound::ServerBound);
    assert!(!v.trend.unwrap().rising);
}

#[test]
fn each_criterion_fails_on_its_own() {
    let mut s = healthy();
    s.reply_rate_rps = 985.0;
    let v = judge(&s, &rule());
    assert!(!v.sustainable);
    assert!(
        matches!(v.reasons[..], [Reason::ReplyRateShort { .. }]),
        "{v:?}"
    );
    assert_eq!(v.bound, Bound::ServerBound);

    let mut s = healthy();
    s.error_share = 0.01;
    assert!(matches!(
        judge(&s, &rule()).reasons[..],
        [Reason::TooManyErrors { .. }]
    ));

    let mut s = healthy();
    s.p99_per_window[7] = ms(80);
    let v = judge(&s, &rule());
    match &v.reasons[..] {
        [Reason::P99OverSlo {
            worst_p99,
            window_index,
            ..
        }] => {
            assert_eq!((*worst_p99, *window_index), (ms(80), 7));
        }
        other => panic!("unexpected reasons {other:?}"),
    }

    let mut s = healthy();
    s.send_rate_rps = 980.0;
    let v = judge(&s, &rule());
    assert!(
        matches!(v.reasons[..], [Reason::SendRateShort { .. }]),
        "{v:?}"
    );
    // Dispatched on time: the sends were held back by busy connections.
    assert_eq!(v.bound, Bound::ServerBound);
    // Dispatched short as well: the generator fell behind.
    s.dispatch_rate_rps = Some(980.0);
    assert_eq!(judge(&s, &rule()).bound, Bound::GeneratorBound);
}

#[test]
fn exactly_99_percent_passes_and_just_below_fails() {
    let mut s = healthy();
    s.send_rate_rps = 990.0;
    s.reply_rate_rps = 990.0;
    assert!(judge(&s, &rule()).sustainable);
    s.reply_rate_rps = 989.9;
    assert!(!judge(&s, &rule()).sustainable);
}

#[test]
fn overload_queue_growth_is_a_rising_trend() {
    // Past capacity: 1000 offered, 950 served -> the queue grows ~50 per second.
    let mut s = healthy();
    s.in_flight_per_window = (0..10)
        .map(|i| 5.0 + 50.0 * i as f64 + (i % 3) as f64)
        .collect();
    let v = judge(&s, &rule());
    assert!(!v.sustainable);
    match &v.reasons[..] {
        [Reason::InFlightRising(t)] => {
            assert!((t.slope_per_s - 50.0).abs() < 1.0, "{t:?}");
            assert!(t.t_stat > t.t_critical);
        }
        other => panic!("unexpected reasons {other:?}"),
    }
}

#[test]
fn small_significant_drift_is_not_a_trend() {
    // A perfectly steady drift of 0.01 request/s over 10 s: significant, but 0.1 request.
    let series: Vec<f64> = (0..10).map(|i| 10.0 + 0.01 * i as f64).collect();
    let t = trend(&series, Duration::from_secs(1), &TrendRule::default()).unwrap();
    assert!(t.t_stat > t.t_critical);
    assert!(!t.rising);
}

#[test]
fn large_noisy_wobble_without_slope_is_not_a_trend() {
    let series = [0.0, 40.0, 2.0, 38.0, 1.0, 41.0, 0.0, 39.0, 3.0, 37.0];
    let t = trend(&series, Duration::from_secs(1), &TrendRule::default()).unwrap();
    assert!(!t.rising, "{t:?}");
}

#[test]
fn known_slope_and_t_statistic() {
    // y = 2 t exactly on t = 0, 1, 2, 3: slope 2, zero residual -> infinite t.
    let t = trend(
        &[0.0, 2.0, 4.0, 6.0],
        Duration::from_secs(1),
        &TrendRule::default(),
    )
    .unwrap();
    assert!((t.slope_per_s - 2.0).abs() < 1e-12);
    assert_eq!(t.t_stat, f64::INFINITY);
    assert!((t.rise_requests - 8.0).abs() < 1e-12);
    assert!(t.rising);
    // Half-second windows: the same series is a slope of 4 per second.
    let t = trend(&[0.0, 2.0, 4.0, 6.0], ms(500), &TrendRule::default()).unwrap();
    assert!((t.slope_per_s - 4.0).abs() < 1e-12);
    assert!(trend(&[1.0, 2.0], Duration::from_secs(1), &TrendRule::default()).is_none());
}

#[test]
fn t_quantiles_match_the_table_and_expansion() {
    assert_eq!(t_one_sided_95(1), 6.314);
    assert_eq!(t_one_sided_95(30), 1.697);
    // Published values: df 40 -> 1.684, df 120 -> 1.658.
    assert!((t_one_sided_95(40) - 1.684).abs() < 2e-3);
    assert!((t_one_sided_95(120) - 1.658).abs() < 2e-3);
    assert!(t_one_sided_95(0).is_infinite());
}

#[test]
fn short_or_invalid_steps_are_never_sustainable() {
    let mut s = healthy();
    s.p99_per_window.truncate(2);
    let v = judge(&s, &rule());
    assert!(
        matches!(
            v.reasons[..],
            [Reason::TooFewWindows {
                windows: 2,
                required: 5
            }]
        ),
        "{v:?}"
    );

    let mut s = healthy();
    s.reply_rate_rps = f64::NAN;
    let v = judge(&s, &rule());
    assert!(!v.sustainable);
    assert!(v.reasons.contains(&Reason::InvalidFigures));

    let mut s = healthy();
    s.offered_rate_rps = 0.0;
    assert!(!judge(&s, &rule()).sustainable);
    assert_eq!(judge(&s, &rule()).bound, Bound::Inconclusive);
}

#[test]
fn send_lag_limit_is_max_of_1ms_and_1pct_of_interval() {
    assert_eq!(send_lag_limit(1000.0), ms(1)); // 1% of 1 ms = 10 us < 1 ms
    assert_eq!(send_lag_limit(5.0), ms(2)); // 1% of 200 ms
    assert_eq!(send_lag_limit(0.0), ms(1));
}

#[test]
fn bound_labels() {
    let mut s = legacy(healthy());
    s.send_lag_p99 = Some(ms(3));
    assert_eq!(bound_label(&s, true), Bound::GeneratorBound);
    s.send_lag_p99 = Some(Duration::from_micros(700)); // grey zone: above half of 1 ms
    assert_eq!(bound_label(&s, true), Bound::ServerBound);
    assert_eq!(bound_label(&s, false), Bound::Inconclusive);
    s.send_lag_p99 = None;
    assert_eq!(bound_label(&s, true), Bound::Inconclusive);
    s.send_lag_p99 = Some(Duration::from_micros(100));
    assert_eq!(bound_label(&s, false), Bound::ServerBound);
}

#[test]
fn verdict_round_trips_through_json() {
    let mut s = healthy();
    s.error_share = 0.5;
    let v = judge(&s, &rule());
    let json = serde_json::to_string(&v).unwrap();
    assert!(json.contains("\"reason\":\"too_many_errors\""), "{json}");
    let back: Verdict = serde_json::from_str(&json).unwrap();
    // serde_json parses floats to within one ulp, so compare the exact parts exactly.
    assert_eq!(
        (back.sustainable, &back.reasons, back.bound),
        (v.sustainable, &v.reasons, v.bound)
    );
    let (tb, tv) = (back.trend.unwrap(), v.trend.unwrap());
    assert!((tb.rise_requests - tv.rise_requests).abs() < 1e-12);
}

#[test]
fn server_bound_needs_the_servers_evidence() {
    let side = |failed_on_server, cpu_pct, available_cores| ServerSide {
        failed_on_server,
        cpu_pct,
        available_cores,
    };
    // (what the server showed, server-bound)
    let table = [
        (side(true, Some(5.0), 2.0), true),     // its queue grew
        (side(false, Some(170.0), 2.0), true),  // 85% of two cores
        (side(false, Some(45.0), 0.5), true),   // at its 50% cap
        (side(false, Some(30.0), 2.0), false),  // idle behind a slow link
        (side(false, None, 2.0), false),        // not measured
        (side(false, Some(25.0), 0.25), true),  // at its 25% cap (seed 002)
        (side(false, Some(15.0), 0.25), false), // 60% of that cap
    ];
    for (i, (s, want)) in table.iter().enumerate() {
        let got = server_evidence(s);
        assert_eq!(
            matches!(got, ServerEvidence::Shown(_)),
            *want,
            "row {i}: {got:?}"
        );
    }
}

#[test]
fn a_bound_is_written_as_its_label_and_old_snake_case_stores_still_read() {
    use Bound::*;
    for b in [ServerBound, GeneratorBound, Inconclusive, MachineStalled] {
        let written = serde_json::to_value(b).unwrap();
        assert_eq!(written, serde_json::json!(b.label()));
        assert_eq!(serde_json::from_value::<Bound>(written).unwrap(), b);
    }
    // A step verdict as stores before the shared type held it.
    let old: Verdict = serde_json::from_value(serde_json::json!({
        "sustainable": false, "bound": "generator_bound", "trend": null, "reasons": []
    }))
    .unwrap();
    assert_eq!(old.bound, GeneratorBound);
    for (old, b) in [
        ("server_bound", ServerBound),
        ("machine_stalled", MachineStalled),
        ("inconclusive", Inconclusive),
    ] {
        assert_eq!(
            serde_json::from_value::<Bound>(serde_json::json!(old)).unwrap(),
            b
        );
    }
}
