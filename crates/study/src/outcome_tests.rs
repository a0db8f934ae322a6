use super::*;

const RAMP: &str = r#"
name = "ramp"
[[target]]
name = "builtin"
kind = "builtin"
[[workload]]
name = "w"
paths = ["/"]
[sweep]
rate = [100, 200, 300, 400]
[steps]
duration = "3s"
"#;

const CONC: &str = r#"
name = "conc"
[[target]]
name = "builtin"
kind = "builtin"
[[workload]]
name = "w"
paths = ["/"]
[load]
model = "closed"
[sweep]
concurrency = [1, 2, 3, 4, 5, 6]
[steps]
duration = "3s"
"#;

fn plan(text: &str) -> Plan {
    crate::resolve(&crate::parse(text).unwrap(), text, 1.0).unwrap()
}

fn step(
    cell: usize,
    rate: Option<f64>,
    rps: f64,
    ok: Option<bool>,
    label: &'static str,
) -> StepOutcome {
    StepOutcome {
        order: cell,
        cell,
        rate,
        rps,
        ok_rps: rps,
        p99_ms: 1.0,
        sustainable: ok,
        label,
        ..StepOutcome::blank_for_tests()
    }
}

const OFFICE: &str = r#"
name = "office"
[[target]]
name = "builtin"
kind = "builtin"
dav = true
[[target]]
name = "radicale"
kind = "radicale"
[[workload]]
name = "day"
kind = "caldav"
users = [10, 25, 50, 100]
[steps]
duration = "3s"
"#;

#[test]
fn an_office_sweep_answers_the_most_users_carried_below_the_first_failure() {
    let p = plan(OFFICE);
    // Cells: users outer, target inner: builtin carries up to 50 (100 fails),
    // radicale carries 10 only, with a dip at 25 it never recovers from.
    let carried = |ci: usize| {
        let c = &p.cells[ci];
        let u = c.users.unwrap();
        if p.targets[p.instances[c.instance].target].name == "builtin" {
            u <= 50
        } else {
            u == 10
        }
    };
    let steps: Vec<StepOutcome> = (0..p.cells.len())
        .map(|ci| StepOutcome {
            users: p.cells[ci].users,
            ..step(ci, None, 10.0, Some(carried(ci)), "server-bound")
        })
        .collect();
    let lines = carried_lines(&p, &steps, &[]);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with("builtin carries 50 users at their real pace (day; 100 not carried)"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with("radicale carries 10 users at their real pace (day; 25 not carried)"),
        "{}",
        lines[1]
    );
    let t = table(&p, &steps, &[]);
    assert!(
        t.rows
            .iter()
            .any(|r| r[2] == "users=100" && r[3].starts_with("NOT carried")),
        "{t}"
    );
    // No USL fit over users: the office's load is its users' day, not connections.
    assert!(t.usl.iter().all(|l| !l.starts_with("USL")), "{t}");
}

#[test]
fn an_office_sweep_no_failure_bounded_says_at_least() {
    let p = plan(OFFICE);
    // builtin carries every count tried; radicale carries up to 50 and its day at
    // 100 was spoiled by the generator: neither answer is the server's limit.
    let steps: Vec<StepOutcome> = (0..p.cells.len())
        .map(|ci| {
            let c = &p.cells[ci];
            let radicale = p.targets[p.instances[c.instance].target].name == "radicale";
            let spoiled = radicale && c.users == Some(100);
            StepOutcome {
                users: c.users,
                ..step(
                    ci,
                    None,
                    10.0,
                    Some(!spoiled),
                    if spoiled {
                        "generator-bound"
                    } else {
                        "server-bound"
                    },
                )
            }
        })
        .collect();
    let lines = carried_lines(&p, &steps, &[]);
    assert!(
        lines[0].starts_with(
            "builtin carries at least 100 users at their real pace \
             (day; not bounded: 100 was the most tried)"
        ),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with(
            "radicale carries at least 50 users at their real pace \
             (day; not bounded: 1 day above could not be judged)"
        ),
        "{}",
        lines[1]
    );
}

#[test]
fn a_compressed_office_names_its_factor_in_every_line_and_row() {
    let p = plan(&OFFICE.replace(
        "users = [10, 25, 50, 100]",
        "users = [10, 25, 50, 100]\ncompress = 480",
    ));
    let steps: Vec<StepOutcome> = (0..p.cells.len())
        .map(|ci| StepOutcome {
            users: p.cells[ci].users,
            ..step(
                ci,
                None,
                10.0,
                Some(p.cells[ci].users.unwrap() <= 50),
                "server-bound",
            )
        })
        .collect();
    let lines = carried_lines(&p, &steps, &[]);
    assert!(
        lines[0].starts_with(
            "builtin carries the request rate of about 24,000 people, with the data of 50 \
             (office time compressed 480x) (day; 100 not carried)"
        ),
        "{}",
        lines[0]
    );
    let t = table(&p, &steps, &[]);
    let office_rows: Vec<&String> = t.rows.iter().map(|r| &r[2]).collect();
    assert!(
        office_rows.iter().all(|r| r.ends_with(" x480")),
        "{office_rows:?}"
    );
}

/// Rate steps at 100, 200, ... req/s, each sustained and replying at its rate.
fn ramp(n: usize, label: &'static str) -> Vec<StepOutcome> {
    (0..n)
        .map(|i| {
            let r = 100.0 * (i + 1) as f64;
            step(i, Some(r), r, Some(true), label)
        })
        .collect()
}

#[test]
fn generator_bound_rate_steps_never_bound_a_capacity() {
    let p = plan(RAMP);
    // The generator lagged at every rate and every step failed: the failures are
    // the generator's, so nothing is claimed.
    let all_gen: Vec<StepOutcome> = (0..4)
        .map(|i| {
            let r = 100.0 * (i + 1) as f64;
            step(i, Some(r), 0.8 * r, Some(false), "generator-bound")
        })
        .collect();
    let t = table(&p, &all_gen, &[]).to_string();
    assert!(!t.contains("capacity 400"), "{t}");
    assert!(
        t.contains(
            "no server figure: none of the 4 step(s) could be judged for the server: 4 generator-bound"
        ),
        "{t}"
    );
    // Mixed reasons are each counted, in the order first met.
    let mut mixed_why = all_gen.clone();
    mixed_why[1].label = "server-bound";
    mixed_why[1].machine_busy = true;
    mixed_why[2].label = "machine-stalled";
    let t = table(&p, &mixed_why, &[]).to_string();
    assert!(
        t.contains(
            "could be judged for the server: 2 generator-bound, 1 failed on a busy machine, 1 machine-stalled"
        ),
        "{t}"
    );
    // Passes while the generator lagged are still passes (latency counts from the
    // intended send time): at least the top, never a bounded capacity.
    let t = table(&p, &ramp(4, "generator-bound"), &[]).to_string();
    assert!(
        t.contains("capacity at least 400 req/s (the highest step tried)"),
        "{t}"
    );

    let mut mixed = ramp(3, "server-bound");
    mixed.push(step(3, Some(400.0), 320.0, Some(false), "generator-bound"));
    let t = table(&p, &mixed, &[]).to_string();
    assert!(
        t.contains("capacity at least 300 req/s (not bounded: 1 step above could not be judged)"),
        "{t}"
    );
    assert!(t.contains("peak replies 300/s"), "{t}");
    assert!(t.contains("1 unjudged step left out"), "{t}");
}

#[test]
fn a_capacity_is_claimed_only_below_a_failure_of_the_server() {
    let p = plan(RAMP);
    // Sustained everywhere: the top of the sweep, and no more.
    let t = table(&p, &ramp(4, "server-bound"), &[]).to_string();
    assert!(
        t.contains("capacity at least 400 req/s (the highest step tried)"),
        "{t}"
    );
    // A failure of the server above 300: a capacity.
    let mut failed = ramp(3, "server-bound");
    failed.push(step(3, Some(400.0), 350.0, Some(false), "server-bound"));
    let t = table(&p, &failed, &[]).to_string();
    assert!(
        t.contains("capacity 300 req/s, first unsustainable 400"),
        "{t}"
    );
    // The same failure while the machine was busy bounds nothing.
    let mut busy = failed.clone();
    busy[3].machine_busy = true;
    let t = table(&p, &busy, &[]).to_string();
    assert!(
        t.contains("capacity at least 300 req/s (not bounded: 1 step above could not be judged)"),
        "{t}"
    );
    // Machine-stalled steps do not count for the server either.
    let mut stalled = ramp(3, "server-bound");
    stalled.push(step(3, Some(400.0), 350.0, Some(false), "machine-stalled"));
    let t = table(&p, &stalled, &[]).to_string();
    assert!(
        t.contains("capacity at least 300 req/s (not bounded"),
        "{t}"
    );
}

#[test]
fn a_re_measured_step_counts_once_by_its_best_attempt() {
    let p = plan(RAMP);
    // 400 was generator-bound, then re-measured: a failure of the server.
    let mut steps = ramp(4, "server-bound");
    steps[3] = step(3, Some(400.0), 400.0, Some(true), "generator-bound");
    steps.push(StepOutcome {
        attempt: 1,
        ..step(3, Some(400.0), 330.0, Some(false), "server-bound")
    });
    // 200 failed while the machine was busy, then passed quietly.
    steps[1].machine_busy = true;
    steps[1].sustainable = Some(false);
    steps.push(StepOutcome {
        attempt: 1,
        ..step(1, Some(200.0), 200.0, Some(true), "server-bound")
    });
    let (best, remeasured) = best_attempts(&steps);
    assert_eq!((best.len(), remeasured), (4, 2));
    assert_eq!(best[3].label, "server-bound", "a server-bound attempt wins");
    assert!(!best[1].machine_busy, "a quiet attempt beats a busy one");
    let t = table(&p, &steps, &[]).to_string();
    assert!(
        t.contains("capacity 300 req/s, first unsustainable 400"),
        "{t}"
    );
    assert!(t.contains("2 steps re-measured"), "{t}");
    assert!(!t.contains("left out"), "{t}");
    // Spoiled in every attempt: left out, counted once.
    let mut spoiled = ramp(3, "server-bound");
    for attempt in 0..3 {
        spoiled.push(StepOutcome {
            attempt,
            ..step(3, Some(400.0), 320.0, Some(false), "machine-stalled")
        });
    }
    let t = table(&p, &spoiled, &[]).to_string();
    assert!(
        t.contains("1 unjudged step left out, 1 step re-measured"),
        "{t}"
    );
    assert!(
        t.contains("at least 300 req/s (not bounded: 1 step above"),
        "{t}"
    );
}

#[test]
fn link_bound_steps_show_the_links_figure_not_the_servers() {
    let p = plan(CONC);
    let steps: Vec<StepOutcome> = (0..6)
        .map(|i| step(i, None, 14.0, None, "link-bound"))
        .collect();
    let t = table(&p, &steps, &[]).to_string();
    assert!(
        t.contains("link-bound: 14.0 req/s")
            && t.contains("the shaped link's figure, not the server's"),
        "{t}"
    );
    assert!(
        !t.contains("USL builtin"),
        "no fit from the link's figures: {t}"
    );
}

/// Inconclusive closed-loop figures are kept in the medians and the line says so: all of
/// them (seed 000's bursts) or how many.
#[test]
fn inconclusive_closed_figures_are_kept_and_said_to_be() {
    let p = plan(CONC);
    let mut steps: Vec<StepOutcome> = (0..6)
        .map(|i| step(i, None, 1000.0, None, "inconclusive"))
        .collect();
    steps.push(StepOutcome {
        repeat: 1,
        ..step(0, None, 1200.0, None, "server-bound")
    });
    let t = table(&p, &steps, &[]).to_string();
    let line = |c: &str| t.lines().find(|l| l.contains(c)).unwrap().to_string();
    assert!(
        line("c=2 ").contains("(1 run, inconclusive: whose limit not known)"),
        "{t}"
    );
    assert!(line("c=1 ").contains("(2 runs, 1 inconclusive)"), "{t}");
}

/// A closed-loop point whose every step was generator-bound on a quiet machine met
/// volley's own limit, which another attempt meets again: its line says what would
/// pass it. Not when a step ran on a busy machine (noise may have made it), nor for
/// rate steps (a lagging pacer, said by the counts alone).
#[test]
fn a_point_volley_could_not_outpace_says_what_would() {
    let p = plan(CONC);
    let mut steps: Vec<StepOutcome> = (0..6)
        .map(|i| step(i, None, 50_000.0, None, "generator-bound"))
        .collect();
    steps.push(StepOutcome {
        repeat: 1,
        machine_busy: true,
        ..step(1, None, 40_000.0, None, "generator-bound")
    });
    let t = table(&p, &steps, &[]).to_string();
    let line = |c: &str| t.lines().find(|l| l.contains(c)).unwrap().to_string();
    let hint = " (volley's load could not outpace this server on the CPU it had: more [load] threads, on a machine with cores to spare, or injectors would)";
    let quiet = line("c=1 ");
    assert!(
        quiet.contains(&format!(
            "could be judged for the server: 1 generator-bound{hint}"
        )),
        "{t}"
    );
    assert!(
        !line("c=2 ").contains(hint),
        "one step on a busy machine: {t}"
    );
    let t = table(
        &p,
        &ramp(4, "generator-bound")
            .into_iter()
            .map(|s| StepOutcome {
                sustainable: Some(false),
                ..s
            })
            .collect::<Vec<_>>(),
        &[],
    )
    .to_string();
    assert!(!t.contains(hint), "{t}");
}

#[test]
fn generator_bound_closed_steps_stay_out_of_medians_and_usl() {
    let p = plan(CONC);
    // X(N) = 1000 N / (1 + 0.05 (N - 1)): a clean USL curve...
    let x = |n: f64| 1000.0 * n / (1.0 + 0.05 * (n - 1.0));
    let mut steps: Vec<StepOutcome> = (0..6)
        .map(|i| step(i, None, x((i + 1) as f64), None, "server-bound"))
        .collect();
    let clean = table(&p, &steps, &[]).to_string();
    assert!(clean.contains("USL builtin w ka=on"), "{clean}");
    // ...plus a generator-bound run at N = 6 with an absurd figure: it must change
    // neither the median of that point nor the fit.
    steps.push(StepOutcome {
        repeat: 1,
        ..step(5, None, 99_999.0, None, "generator-bound")
    });
    let t = table(&p, &steps, &[]).to_string();
    let usl_line = |s: &str| {
        s.lines()
            .find(|l| l.starts_with("USL"))
            .unwrap()
            .to_string()
    };
    assert_eq!(usl_line(&t), usl_line(&clean));
    let c6 = t.lines().find(|l| l.contains("c=6 ")).unwrap();
    assert!(!c6.contains("99999"), "{c6}");
    assert!(c6.contains("1 unjudged step left out"), "{c6}");
}

fn second(p99_ms: f64, pressure: Option<f64>) -> volley_metrics::summary::SecondSummary {
    volley_metrics::summary::SecondSummary {
        second: 0,
        scheduled: 500,
        dispatched: 500,
        sent: 500,
        completed: 500,
        ok: 500,
        errors: Default::default(),
        wire_bytes: 0,
        max_open: 1,
        cap_hits: 0,
        p50_ms: 0.1,
        p99_ms,
        max_ms: p99_ms,
        send_lag_p99_ms: 0.01,
        sched_lag_p99_ms: 0.01,
        sched_lag_max_ms: 0.01,
        conn_wait_p99_ms: 0.0,
        cpu_cores_used: None,
        cpu_pressure: None,
        probe_max_stall_ms: None,
        probe_stall_bound_ms: None,
        pacer_wait_ms: None,
        probe_p99_ms: None,
        probe_over_1ms: None,
        steal_ms: None,
        others_busy_share: pressure,
        target_wait_ms: None,
        others_on_pacer_ms: None,
        target_on_pacer_ms: None,
        label: volley_metrics::Bound::ServerBound,
    }
}

/// An empty two-second run on a 2-CPU machine where others took `others_cores` and
/// the study's other targets `study_cores`.
fn on_machine(others_cores: f64, study_cores: f64) -> volley_metrics::Summary {
    let mut s = volley_metrics::Recorder::new()
        .close(&crate::office_step::run_info(
            "http://127.0.0.1:1/",
            1,
            std::time::Duration::from_secs(2),
            false,
            0.1,
        ))
        .unwrap();
    s.machine = Some(volley_metrics::summary::MachineLoad {
        cpus: 2,
        others_cores,
        steal_cores: 0.0,
        study_cores,
    });
    s
}

/// [`on_machine`] with one second per `(others' share, wait ms)`, the wait set by `set`.
fn with_seconds(
    others_cores: f64,
    seconds: &[(Option<f64>, Option<f64>)],
    set: impl Fn(&mut volley_metrics::summary::SecondSummary, Option<f64>),
) -> volley_metrics::Summary {
    let mut s = on_machine(others_cores, 0.0);
    s.seconds = seconds
        .iter()
        .map(|&(share, wait)| {
            let mut x = second(0.2, share);
            set(&mut x, wait);
            x
        })
        .collect();
    s
}

#[test]
fn the_machine_is_busy_only_when_others_took_the_cpu_from_volley() {
    use crate::step::{machine_busy, volley_waited};
    // A second: (others' share of the machine, the pacer's wait ms).
    type Sec = (Option<f64>, Option<f64>);
    let with = |others_cores: f64, seconds: &[Sec]| {
        with_seconds(others_cores, seconds, |x, wait| x.pacer_wait_ms = wait)
    };
    // (others' cores over the step, per second (others' share, pacer's wait ms))
    // -> busy?
    let rows: [(f64, &[Sec], bool); 7] = [
        // A nice-19 build on the idle core: others took 45%, volley never waited.
        (
            0.9,
            &[(Some(0.45), Some(0.0)), (Some(0.45), Some(0.2))],
            false,
        ),
        // The same build took the pacer's CPU: it waited 4 ms in a busy second.
        (
            0.9,
            &[(Some(0.45), Some(0.0)), (Some(0.45), Some(4.0))],
            true,
        ),
        // volley waited, but only in a second when others were quiet.
        (
            0.9,
            &[(Some(0.02), Some(4.0)), (Some(0.8), Some(0.1))],
            false,
        ),
        // A second whose share is unknown counts as possibly busy.
        (0.9, &[(None, Some(2.0))], true),
        // Waits never measured (stored before, no schedstats): share alone.
        (0.9, &[(Some(0.45), None)], true),
        // Quiet: never busy, whatever volley waited for (its own threads).
        (0.1, &[(Some(0.05), Some(30.0))], false),
        (0.1, &[(Some(0.05), None)], false),
    ];
    for (cores, seconds, want) in rows {
        let s = with(cores, seconds);
        assert_eq!(machine_busy(&s), want, "{cores} {seconds:?}");
        if cores > 0.5 {
            assert_eq!(volley_waited(&s), want, "{seconds:?}");
        }
    }
}

#[test]
fn a_target_starved_by_the_machine_makes_it_busy_and_one_kept_busy_by_its_load_does_not() {
    use crate::step::{busy_mark, machine_busy, target_waited};
    // A second: (others' share of the machine, the target's wait ms); the pacer never
    // waited (0.2 ms), so only the target's wait can make the step busy.
    type Sec = (Option<f64>, Option<f64>);
    let with = |others_cores: f64, seconds: &[Sec]| {
        with_seconds(others_cores, seconds, |x, wait| {
            x.pacer_wait_ms = Some(0.2);
            x.target_wait_ms = wait;
        })
    };
    // (others' cores, seconds) -> (busy, words in the mark)
    let rows: [(f64, &[Sec], bool, &str); 6] = [
        // Others took 45% and the target waited 120 ms for a CPU in that second.
        (
            0.9,
            &[(Some(0.45), Some(3.0)), (Some(0.45), Some(120.0))],
            true,
            "machine busy: others took 45% of 2 CPU(s) (steal 0%); the target waited up to 120 ms in a second for a CPU",
        ),
        // Just at the floor: counts; just under: does not.
        (0.9, &[(Some(0.45), Some(10.0))], true, "waited up to 10 ms"),
        (0.9, &[(Some(0.45), Some(9.9))], false, "neither volley's pacer"),
        // The target waited, but when others were quiet: its load (volley, its own
        // threads) kept it waiting, not the machine.
        (
            0.9,
            &[(Some(0.02), Some(300.0)), (Some(0.45), Some(1.0))],
            false,
            "nor the target 10 ms",
        ),
        // A second whose share is unknown does not count for the target.
        (0.9, &[(None, Some(300.0))], false, ""),
        // Quiet over the step: never busy.
        (0.1, &[(Some(0.05), Some(300.0))], false, ""),
    ];
    for (cores, seconds, want, words) in rows {
        let s = with(cores, seconds);
        assert_eq!(machine_busy(&s), want, "{cores} {seconds:?}");
        if cores > 0.5 {
            assert_eq!(target_waited(&s), want, "{seconds:?}");
        }
        let mark = busy_mark(&s);
        assert!(mark.contains(words), "{seconds:?}: {mark}");
    }
}

#[test]
fn the_studys_idle_targets_are_shown_apart_and_never_make_the_machine_busy() {
    use crate::step::{busy_mark, machine_busy};
    let with = |others_cores: f64, study_cores: f64| {
        let mut s = on_machine(others_cores, study_cores);
        // The pacer waited in a second when others took 45%: busy if others were.
        s.seconds = vec![second(0.2, Some(others_cores / 2.0))];
        s.seconds[0].pacer_wait_ms = Some(4.0);
        s
    };
    // (others' cores, the study's other targets' cores) -> (busy, words in the mark).
    let rows: [(f64, f64, bool, &[&str]); 4] = [
        // Seed 001 whole: 21 instances, the others idle; what they took is theirs.
        (
            0.1,
            0.5,
            false,
            &["the study's idle targets took 25% of 2 CPU(s)"],
        ),
        // Someone else too: busy, and both said.
        (
            0.9,
            0.5,
            true,
            &["machine busy: others took 45%", "idle targets took 25%"],
        ),
        // Idle instances' housekeeping (under 1%): not shown.
        (0.1, 0.01, false, &[]),
        (0.9, 0.0, true, &["machine busy: others took 45%"]),
    ];
    for (others, study, busy, words) in rows {
        let s = with(others, study);
        assert_eq!(machine_busy(&s), busy, "{others} {study}");
        let mark = busy_mark(&s);
        for w in words {
            assert!(mark.contains(w), "{others} {study}: {mark}");
        }
        assert_eq!(mark.is_empty(), words.is_empty(), "{mark}");
    }
}

#[test]
fn a_slow_second_names_the_machine_when_it_was_busy() {
    let quiet = [second(0.2, Some(0.0)), second(0.3, Some(0.01))];
    assert_eq!(slow_second_note(&quiet, 50.0), None);
    let busy = [
        second(0.2, Some(0.0)),
        second(162.0, Some(0.45)),
        second(0.3, None),
    ];
    let n = slow_second_note(&busy, 50.0).unwrap();
    assert!(n.contains("second 2 of 3") && n.contains("162.0 ms"), "{n}");
    assert!(
        n.contains("others took 45%") && n.contains("the machine"),
        "{n}"
    );
    let server = [second(80.0, Some(0.02))];
    let n = slow_second_note(&server, 50.0).unwrap();
    assert!(n.contains("it was quiet"), "{n}");
    assert_eq!(slow_second_note(&[], 50.0), None);
}

#[test]
fn a_users_search_has_a_row_per_count_tried_and_answers_with_its_interval() {
    let text = OFFICE
        .replace("users = [10, 25, 50, 100]", "users = \"search\"")
        .replace("[steps]", "[search]\nmax_users = 100\nrepeats = 1\n[steps]");
    let p = plan(&text);
    assert_eq!(p.cells.len(), 2, "one searched cell per target");
    // Builtin carries 37 users: drive its search as the runner would (10, 20, 40
    // fails, then 30, 35, 37; [37, 40] is within the default 10% resolution).
    let sp = p.search_of(0).unwrap();
    let mut search = knee::Search::new(sp.start_rate, sp.opts.clone()).unwrap();
    let mut steps = Vec::new();
    while let Some(u) = search.next_rate() {
        let (cell, rate) = p.cell_at(0, Some(u));
        assert_eq!(rate, None, "a users step offers no rate");
        let ok = cell.users.unwrap() <= 37;
        steps.push(StepOutcome {
            users: cell.users,
            ..step(0, None, 10.0, Some(ok), "server-bound")
        });
        search.observe(u, ok).unwrap();
    }
    let cap = search.capacity().unwrap();
    let t = table(&p, &steps, &[(0, cap.clone())]);
    let users: Vec<&str> = t
        .rows
        .iter()
        .filter(|r| r[0] == "builtin")
        .map(|r| r[2].as_str())
        .collect();
    assert_eq!(
        users,
        ["users=10", "users=20", "users=30", "users=35", "users=37", "users=40"]
    );
    let line = t.usl.iter().find(|l| l.starts_with("builtin")).unwrap();
    assert!(
        line.starts_with(
            "builtin carries 37 users at their real pace (day; searched, 95% CI [37, 40] users, 6 days)"
        ),
        "{line}"
    );
    // The radicale search never ran: its row says so and no answer is claimed.
    assert!(t
        .rows
        .iter()
        .any(|r| r[0] == "radicale" && r[3] == "(not run)"));
    assert!(!t.usl.iter().any(|l| l.starts_with("radicale")));
}

/// A step too short for its CPU cap is never the server's figure and never measured
/// again, on a busy machine or not; a generator-bound one is, and a closed-loop figure
/// on a busy machine too.
#[test]
fn too_short_steps_are_left_out_and_not_measured_again() {
    let p = plan(CONC);
    for busy in [false, true] {
        let s = StepOutcome {
            machine_busy: busy,
            ..step(0, None, 20_000.0, None, volley_analysis::sustain::TOO_SHORT)
        };
        assert!(!s.needs_remeasure(), "busy {busy}");
        assert!(!s.counts_for_server());
        let g = StepOutcome {
            machine_busy: busy,
            ..step(0, None, 20_000.0, None, "generator-bound")
        };
        assert!(g.needs_remeasure(), "busy {busy}");
    }
    let busy_closed = StepOutcome {
        machine_busy: true,
        ..step(0, None, 100.0, None, "server-bound")
    };
    assert!(busy_closed.needs_remeasure());
    let steps: Vec<StepOutcome> = (0..6)
        .map(|i| step(i, None, 20_000.0, None, volley_analysis::sustain::TOO_SHORT))
        .collect();
    let t = table(&p, &steps, &[]).to_string();
    assert!(
        !t.contains("20000")
            && t.contains("no server figure: its one step was too short for its CPU cap to hold"),
        "{t}"
    );
}
