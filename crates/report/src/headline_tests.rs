use super::*;

fn target(steps: Vec<StepReport>) -> TargetReport {
    named("nginx", steps)
}

fn named(name: &str, steps: Vec<StepReport>) -> TargetReport {
    TargetReport::blank(name, steps)
}

fn step(variant: &str, repeat: u32, rps: f64) -> StepReport {
    let mut s = StepReport::blank();
    s.variant = Some(variant.into());
    s.repeat = repeat;
    s.concurrency = Some(8);
    s.completed = 1000;
    s.ok = 1000;
    s.requests_per_s = rps;
    s.label = Some("server-bound".into());
    s
}

#[test]
fn the_office_answer_says_at_least_when_no_larger_day_failed() {
    let office = |carried: u32, bounded: bool| crate::model::OfficeAnswer {
        workload: "office".into(),
        users_carried: Some(carried),
        first_not_carried: bounded.then_some(carried * 2),
        bounded,
        unjudged_above: 0,
        non_monotone: false,
        compress: 1.0,
        decisions_per_day: 250,
        slo_ms: 1000.0,
        search: None,
    };
    let with = |name: &str, a| {
        let mut t = named(name, Vec::new());
        t.office = vec![a];
        t
    };
    let report = |a, b| Report {
        schema_version: crate::model::SCHEMA_VERSION,
        title: "office".into(),
        study: None,
        targets: vec![with("builtin", a), with("radicale", b)],
    };
    // Neither bounded: both are lower bounds and say so.
    assert_eq!(
        answer(&report(office(2000, false), office(250, false))),
        "builtin carries the most users: at least 2,000 users at their real pace \
         (radicale carries at least 250 users at their real pace)."
    );
    // A larger day failed because of the server: the figure is the server's limit.
    assert_eq!(
        answer(&report(office(2000, false), office(250, true))),
        "builtin carries the most users: at least 2,000 users at their real pace \
         (radicale carries 250 users at their real pace)."
    );
}

#[test]
fn each_knob_is_answered_against_the_default_one_line_each() {
    let mut steps = Vec::new();
    for r in 0..3u32 {
        let wobble = f64::from(r) * 5.0;
        steps.push(step("default", r, 1000.0 + wobble));
        steps.push(step("tuned:somaxconn", r, 1002.0 - wobble));
        steps.push(step("tuned:sendfile", r, 1400.0 + wobble));
        steps.push(step("tuned", r, 1410.0 + wobble));
    }
    // One knob ran once only: no interval, and how many repeats would give one.
    steps.push(step("tuned:backlog", 0, 1100.0));
    let t = target(steps);
    // The headline: every knob together against the default.
    let v = variants_answer(&t).unwrap();
    assert!(
        v.starts_with("tuned carries: 1,415 req/s vs default 1,005: 1.41x ["),
        "{v}"
    );
    let knobs = knob_lines(&t);
    assert_eq!(knobs.len(), 3, "{knobs:?}");
    assert!(
        knobs[0].starts_with("tuned:somaxconn: no difference beyond noise: 0.99x the default [")
            && knobs[0].ends_with("], 997 vs 1,005 req/s"),
        "{knobs:?}"
    );
    assert!(
        knobs[1].starts_with("tuned:sendfile: 1.40x the default [")
            && knobs[1].ends_with("] (95% interval), 1,405 vs 1,005 req/s"),
        "{knobs:?}"
    );
    assert!(
        knobs[2]
            .starts_with("tuned:backlog: 1.09x the default from one run each: cannot separate (")
            && knobs[2].contains(" repeats of each would)"),
        "{knobs:?}"
    );
    // A knob the default beats reads below 1 (knob / default, one scale).
    let slower: Vec<StepReport> = (0..3u32)
        .flat_map(|r| {
            let w = f64::from(r);
            [
                step("default", r, 1000.0 + w),
                step("tuned:a", r, 500.0 + w),
                step("tuned:b", r, 1000.0 - w),
            ]
        })
        .collect();
    let knobs = knob_lines(&target(slower));
    assert!(
        knobs[0].starts_with("tuned:a: 0.50x the default ["),
        "{knobs:?}"
    );
    // Two variants: the one answer between them, no knob lines.
    let two: Vec<StepReport> = (0..3u32)
        .flat_map(|r| {
            [
                step("default", r, 1000.0),
                step("tuned", r, 1400.0 + f64::from(r)),
            ]
        })
        .collect();
    let v = variants_answer(&target(two.clone())).unwrap();
    assert!(v.starts_with("tuned carries: "), "{v}");
    assert!(knob_lines(&target(two.clone())).is_empty());
    // Its own figure says what it pools.
    let line = lines(&report(vec![target(two)])).remove(0);
    assert!(
        line.contains("median of 6 steps over variants default, tuned)"),
        "{line}"
    );
}

fn spoke(protocol: &str, repeat: u32, rps: f64) -> StepReport {
    let mut s = step("default", repeat, rps);
    s.variant = None;
    s.protocol = Some(protocol.into());
    s
}

fn report(targets: Vec<TargetReport>) -> Report {
    Report {
        schema_version: crate::SCHEMA_VERSION,
        title: "t".into(),
        study: None,
        targets,
    }
}

/// Three repeats at each protocol (or variant) of `figures`, with a little wobble.
fn runs(figures: &[(&str, f64)], make: fn(&str, u32, f64) -> StepReport) -> Vec<StepReport> {
    (0..3u32)
        .flat_map(|r| {
            figures
                .iter()
                .map(move |(k, v)| make(k, r, v + 3.0 * f64::from(r)))
        })
        .collect()
}

#[test]
fn the_answer_gives_each_protocol_and_variant_its_own_answer() {
    // (case, targets, words the answer must hold, words it must not)
    type Row = (
        &'static str,
        Vec<TargetReport>,
        Vec<&'static str>,
        Vec<&'static str>,
    );
    let table: Vec<Row> = vec![
        (
            "one target, three protocols: its protocols side by side, never one median",
            vec![named(
                "builtin",
                runs(&[("h1", 1000.0), ("h2", 1300.0), ("h3", 700.0)], spoke),
            )],
            vec!["builtin's protocols: h2 carries: 1,303 req/s vs h1 1,003: 1.30x ["],
            vec!["median of", "builtin: "],
        ),
        (
            "two targets, each faster in one protocol: one answer per protocol",
            vec![
                named("nginx", runs(&[("h1", 2000.0), ("h2", 1000.0)], spoke)),
                named("caddy", runs(&[("h1", 1000.0), ("h2", 2000.0)], spoke)),
            ],
            vec![
                "h1: nginx served the most requests per second: 2,003 req/s vs caddy 1,003: 2.00x [",
                "h2: caddy served the most requests per second: 2,003 req/s vs nginx 1,003: 2.00x [",
            ],
            vec!["No difference"],
        ),
        (
            "two targets tuned: they meet in their default; each tuning is its own",
            vec![
                named("nginx", runs(&[("default", 1000.0), ("tuned", 3000.0)], step)),
                named("apache", runs(&[("default", 2000.0), ("tuned", 2100.0)], step)),
            ],
            vec!["variant default: apache served the most requests per second: 2,003 req/s vs nginx 1,003: 2.00x ["],
            vec!["3,003", "variant tuned"],
        ),
        (
            "nothing swept: the targets' answer as ever",
            vec![
                named("nginx", runs(&[("default", 2000.0)], step)),
                named("apache", runs(&[("default", 1000.0)], step)),
            ],
            vec!["nginx served the most requests per second: 2,003 req/s vs apache 1,003: 2.00x ["],
            vec!["variant", "'s "],
        ),
    ];
    for (case, targets, want, unwanted) in table {
        let r = report(targets);
        let a = answer(&r);
        for w in want {
            assert!(a.contains(w), "{case}: {a}\nwants: {w}");
        }
        for u in unwanted {
            assert!(!a.contains(u), "{case}: {a}\nholds: {u}");
        }
    }
    // The targets' own series, as the report's lines give them.
    let r = report(vec![
        named(
            "nginx",
            runs(&[("default", 1000.0), ("tuned", 3000.0)], step),
        ),
        named(
            "apache",
            runs(&[("default", 2000.0), ("tuned", 2100.0)], step),
        ),
    ]);
    let series = series_answers(&r);
    assert_eq!(series.len(), 2, "{series:?}");
    assert!(
        series[0]
            .starts_with("nginx's variants: tuned carries: 3,003 req/s vs default 1,003: 2.99x ["),
        "{series:?}"
    );
    assert!(
        series[1].starts_with("apache's variants: tuned carries: "),
        "{series:?}"
    );
    let line = lines(&r).remove(0);
    assert!(
        line.contains(&series[0]["nginx's variants: ".len()..]),
        "{line}"
    );
}

#[test]
fn a_re_measured_step_is_one_step_of_the_figure_and_few_errors_are_not_zero() {
    let mut again = step("default", 0, 1100.0);
    again.attempt = 1;
    let mut t = target(vec![step("default", 0, 1000.0), again]);
    t.steps[0].failed = 1;
    t.steps[0].completed = 100_000;
    let line = lines(&report(vec![t])).remove(0);
    assert!(
        line.contains("1,000 req/s") && line.contains("median of 1 step)"),
        "{line}"
    );
    assert!(line.contains("1 error (under 0.1% of requests)"), "{line}");
}

#[test]
fn knobs_with_nothing_to_compare_are_named_once_together() {
    let mut steps = Vec::new();
    for v in ["default", "tuned:somaxconn", "tuned:backlog", "tuned"] {
        let mut s = step(v, 0, 1000.0);
        s.label = Some("generator-bound".into());
        steps.push(s);
    }
    let t = target(steps);
    assert_eq!(
        knob_lines(&t),
        ["tuned:somaxconn, tuned:backlog: no figure (every step measured the generator, not a server (generator-bound or machine-stalled))"],
    );
    assert_eq!(
        variants_answer(&t).unwrap(),
        "No answer: every step measured the generator, not a server (generator-bound or machine-stalled).",
    );
}

/// Each target's own line says why it has no figure in its own terms (its steps, the
/// link's figure), not the study-wide sentence about "every target".
#[test]
fn a_target_with_no_figure_says_why_in_its_own_terms() {
    let linked = |n: usize| {
        (0..n)
            .map(|i| {
                let mut s = step("default", i as u32, 14.3);
                s.variant = None;
                s.label = Some("link-bound".into());
                s
            })
            .collect::<Vec<_>>()
    };
    let r = report(vec![named("builtin", linked(3)), named("nginx", linked(1))]);
    let l = lines(&r);
    assert!(
        l[0].starts_with("builtin: no figure for the server: all 3 of its steps were link-bound: the shaped link's figure, not the server's"),
        "{}",
        l[0]
    );
    assert!(l[1].contains("its one step was link-bound"), "{}", l[1]);
    assert!(!l[0].contains("every target"), "{}", l[0]);
    assert!(
        answer(&r).contains("every step was link-bound"),
        "{}",
        answer(&r)
    );
}

/// A machine-stalled count in a target's line carries the figure it rests on: the
/// longest stall the probe beside the load measured in those steps.
#[test]
fn machine_stalled_steps_name_the_probes_longest_stall() {
    let labelled = |label: &str, stall: Option<f64>| {
        let mut s = step("default", 0, 100.0);
        s.label = Some(label.into());
        s.probe_max_stall_ms = stall;
        s
    };
    let t = target(vec![
        labelled("inconclusive", Some(0.4)),
        labelled("machine-stalled", Some(3.39)),
        labelled("machine-stalled", Some(13.47)),
    ]);
    assert_eq!(
        bound(&t),
        "inconclusive in 1 of 3 steps, machine-stalled (the stall probe beside the load \
         overslept up to 13.5 ms) in 2 of 3 steps"
    );
    // Stores from before the probe: the count alone.
    let old = target(vec![labelled("machine-stalled", None)]);
    assert_eq!(bound(&old), "machine-stalled");
}
