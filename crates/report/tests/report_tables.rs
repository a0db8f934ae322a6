//! The model and the Markdown tables for known synthetic stores: exact rows.

use crate::common;

use volley_report::{json::Json, load, markdown::Markdown, ReportError, ReportFormat, Selector};
use volley_store::{RunId, Store, StudyId};

fn markdown(store: &Store, selector: Selector) -> String {
    Markdown.render(&load(store, selector).unwrap()).unwrap()
}

/// The Markdown report of one run of `target` with `steps`, in a store of its own.
fn markdown_of_one_run(target: &str, steps: &[common::Step]) -> String {
    let mut store = Store::open_in_memory().unwrap();
    let run = common::record_run(&mut store, None, target, steps);
    markdown(&store, Selector::Run(run))
}

/// The rows of the Markdown table under `## {title}` (header and separator included).
fn table<'a>(md: &'a str, title: &str) -> Vec<&'a str> {
    let start = md
        .find(&format!("## {title}\n"))
        .unwrap_or_else(|| panic!("no table {title:?} in\n{md}"));
    md[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect()
}

#[test]
fn rate_sweep_replies_table_has_one_column_per_target() {
    let mut store = Store::open_in_memory().unwrap();
    let study = common::rate_sweep(&mut store);
    let md = markdown(&store, Selector::Study(study));
    assert_eq!(
        table(&md, "Replies per second by request rate"),
        [
            "| Rate (req/s) | builtin replies/s | nginx replies/s |",
            "|---|---|---|",
            "| 100 | 100.0 | 100.0 |",
            "| 200 | 200.0 | 199.5 |",
            "| 300 | 299.0 | 300.0 |",
            "| 400 | 350.0 | n/a (generator-bound) |",
        ]
    );
    assert_eq!(
        table(&md, "Max open connections by request rate"),
        [
            "| Rate (req/s) | builtin max open | nginx max open |",
            "|---|---|---|",
            "| 100 | 5 | 5 |",
            "| 200 | 10 | 10 |",
            "| 300 | 15 | 15 |",
            "| 400 | 20 | n/a (generator-bound) |",
        ]
    );
}

#[test]
fn capacity_excludes_generator_bound_steps() {
    let mut store = Store::open_in_memory().unwrap();
    let study = common::rate_sweep(&mut store);
    let md = markdown(&store, Selector::Study(study));
    assert_eq!(
        table(&md, "Capacity"),
        [
            "| Target | Group | Capacity (req/s) | First unsustainable above (req/s) | Steps judged | Unjudged, left out | Re-measured | Notes |",
            "|---|---|---|---|---|---|---|---|",
            "| builtin | keep-alive | 300.0 | 400.0 | 4 | 0 | 0 | - |",
            "| nginx | keep-alive | at least 300.0 | - | 3 | 1 | 0 | not bounded: 1 step above could not be judged |",
        ]
    );
    let evidence = table(&md, "Steps, verdicts and labels (the evidence)");
    assert_eq!(
        evidence[5],
        "| builtin | 3 | rate 400/s, ka, #1 | sweep | 400.0 | 350.0 | 250.000 | 0 | server-bound | not sustainable | replies came back at 350 req/s of the 400 offered (88%; 99% needed); p99 250 ms in second 4 exceeds the 100 ms SLO | - |"
    );
    assert!(
        evidence[9].starts_with("| nginx (generator-bound) | 3 |"),
        "{}",
        evidence[9]
    );
}

#[test]
fn runs_and_resources_tables_mirror_seed_003() {
    let mut store = Store::open_in_memory().unwrap();
    common::rate_sweep(&mut store);
    let md = markdown(&store, Selector::Run(RunId(1)));
    let runs = table(&md, "Runs: time per request and throughput");
    assert_eq!(
        runs[0],
        "| Target | Step | Parameters | Total (s) | Requests | Failed | Mean (ms) | Min (ms) | Max (ms) | Req/s | Label |"
    );
    // p99 2 ms: mean = p99 / 4, min = p99 / 10, max = 3 x p99 in the synthetic summary.
    assert_eq!(
        runs[2],
        "| builtin | 0 | rate 100/s, ka, #1 | 10.00 | 1000 | 0 | 0.500 | 0.200 | 6.000 | 100.0 | server-bound |"
    );
    assert_eq!(runs.len(), 6, "one run: four steps");
    let res = table(&md, "Server resources");
    // 0.6 CPU-s per second x 10 s over 2990 requests = 2.0067 CPU-ms per request.
    assert_eq!(
        res[4],
        "| builtin | 2 | rate 300/s, ka, #1 | 40.0 | 20.0 | 10.0 | 0.50 | 598 | 299000 | 2006.7 |"
    );
}

#[test]
fn concurrency_grid_gets_throughput_table_and_usl_fits() {
    let mut store = Store::open_in_memory().unwrap();
    common::rate_sweep(&mut store);
    let study = common::concurrency_grid(&mut store);
    let md = markdown(&store, Selector::Study(study));
    assert!(!md.contains("## Replies per second"), "no rate steps here");
    let conc = table(&md, "Throughput and p99 by concurrency, CPU cap and cores");
    assert_eq!(conc.len(), 2 + 32);
    assert_eq!(
        conc[2],
        "| lighttpd | - | on | 0.5 | 0 | 1 | 1 | 500.0 | 2.000 | server-bound |"
    );
    // n = 4, quota 1: 1000 x 4 / (1 + 0.15 + 0.24) = 2877.7
    assert_eq!(
        conc[2 + 8 + 3],
        "| lighttpd | - | on | 1 | 0 | 4 | 1 | 2877.7 | 4.000 | server-bound |"
    );
    let usl = table(&md, "Universal Scalability Law fit");
    assert_eq!(usl.len(), 2 + 4, "one fit per (cap, cores) group");
    // sigma 0.05, kappa 0.02 recovered; N* = sqrt(0.95 / 0.02) = 6.9.
    assert_eq!(
        usl[4],
        "| lighttpd | cap 1 cores, cpus 0, keep-alive | 8 | 1000.0 | 0.0500 | 0.020000 | 6.9 | 3271.4 | 1.000 |"
    );
    assert!(md.contains("closed-loop service time"));
    let report = load(&store, Selector::Study(study)).unwrap();
    let v: serde_json::Value = serde_json::from_str(&Json.render(&report).unwrap()).unwrap();
    let fit = &v["targets"][0]["usl"][0]["fit"];
    assert!(
        (fit["sigma"].as_f64().unwrap() - 0.05).abs() < 1e-3,
        "{fit}"
    );
    assert!(
        (fit["kappa"].as_f64().unwrap() - 0.02).abs() < 1e-4,
        "{fit}"
    );
}

#[test]
fn json_is_the_versioned_model_and_agrees_with_markdown() {
    let mut store = Store::open_in_memory().unwrap();
    let study = common::rate_sweep(&mut store);
    let report = load(&store, Selector::Study(study)).unwrap();
    let v: serde_json::Value = serde_json::from_str(&Json.render(&report).unwrap()).unwrap();
    assert_eq!(v["schema_version"], volley_report::SCHEMA_VERSION);
    assert_eq!(v["targets"][0]["target"], "builtin");
    assert_eq!(v["targets"][0]["capacity"][0]["capacity_rps"], 300.0);
    assert_eq!(
        v["targets"][1]["capacity"][0]["generator_bound_excluded"],
        1
    );
    // builtin failed at 400 above its 300: a capacity. nginx's 400 was generator-bound:
    // at least 300, not bounded.
    assert_eq!(v["targets"][0]["capacity"][0]["bounded"], true);
    assert_eq!(v["targets"][1]["capacity"][0]["bounded"], false);
    assert_eq!(
        v["targets"][1]["capacity"][0]["claim"],
        serde_json::json!({"claim": "at_least", "value": 300.0, "unjudged_above": 1})
    );
    assert_eq!(v["targets"][1]["steps"][3]["label"], "generator-bound");
    assert_eq!(
        v["targets"][0]["steps"][0]["seconds"]
            .as_array()
            .unwrap()
            .len(),
        10
    );
    assert_eq!(
        v["targets"][0]["steps"][0]["monitor"]
            .as_array()
            .unwrap()
            .len(),
        10
    );
    // Step 1 starts 20 s after step 0: the time axis keeps the rest between steps.
    assert_eq!(v["targets"][0]["steps"][1]["seconds"][0]["t_s"], 20.0);
    assert_eq!(
        v["targets"][0]["percentile_curves"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let curve = &v["targets"][0]["percentile_curves"][0];
    assert_eq!(curve["kind"], "response");
    assert_eq!(curve["steps_merged"], 4);
    assert_eq!(curve["count"], 8000);
}

#[test]
fn unknown_ids_and_empty_store_are_typed_usage_errors() {
    let mut store = Store::open_in_memory().unwrap();
    let e = load(&store, Selector::Run(RunId(1))).unwrap_err();
    assert!(matches!(e, ReportError::EmptyStore), "{e}");
    assert!(e.is_usage());
    common::rate_sweep(&mut store);
    let e = load(&store, Selector::Run(RunId(99))).unwrap_err();
    assert!(matches!(e, ReportError::UnknownRun(99)), "{e}");
    let e = load(&store, Selector::Study(StudyId(42))).unwrap_err();
    assert!(matches!(e, ReportError::UnknownStudy(42)), "{e}");
    assert_eq!(
        e.to_string(),
        "no study 42 in the results store (see `volley history`)"
    );
}

#[test]
fn a_run_mixing_closed_and_open_steps_keeps_the_definitions_apart() {
    let mut store = Store::open_in_memory().unwrap();
    let mut closed = common::rate_step(0.0, 900.0, 3.0, "server-bound", true);
    closed.rate_rps = None;
    closed.concurrency = Some(8);
    closed.sustainable = None;
    closed.closed = true;
    let open = common::rate_step(500.0, 500.0, 2.0, "server-bound", true);
    let run = common::record_run(&mut store, None, "builtin", &[closed, open]);
    let report = load(&store, Selector::Run(run)).unwrap();
    let t = &report.targets[0];
    assert!(t.has_open_loop() && t.has_closed_loop());
    assert_eq!(t.latency_definitions.len(), 2);
    let kinds: Vec<&str> = t
        .percentile_curves
        .iter()
        .map(|c| c.kind.as_str())
        .collect();
    assert_eq!(kinds, ["response", "service"]);
    assert!(t.percentile_curves.iter().all(|c| c.count == 2_000));
    let md = Markdown.render(&report).unwrap();
    assert!(md.contains("response time from the intended send time (coordinated-omission corrected) for open-loop runs; service time"));
}

#[test]
fn all_generator_bound_sweep_claims_no_capacity() {
    // Failures while volley was late are nobody's evidence.
    let md = markdown_of_one_run(
        "nginx",
        &[
            common::rate_step(100.0, 90.0, 1.0, "generator-bound", false),
            common::rate_step(200.0, 150.0, 1.0, "generator-bound", false),
        ],
    );
    assert_eq!(
        table(&md, "Capacity")[2],
        "| nginx | keep-alive | - | - | 0 | 2 | 0 | no rate step could be judged for the server: no capacity can be claimed |"
    );
}

#[test]
fn passes_while_the_generator_was_late_are_still_passes() {
    // Latency counts from the intended send time, so a late generator only made the
    // pass harder: the server carried the rate (docs/methodology.md, "Saturation").
    let md = markdown_of_one_run(
        "nginx",
        &[
            common::rate_step(100.0, 100.0, 1.0, "server-bound", true),
            common::rate_step(200.0, 200.0, 1.0, "generator-bound", true),
            common::rate_step(300.0, 250.0, 1.0, "generator-bound", false),
        ],
    );
    let row = &table(&md, "Capacity")[2];
    assert!(
        row.starts_with("| nginx | keep-alive | at least 200.0 | - |"),
        "{row}"
    );
    assert!(
        row.contains("not bounded: 1 step above could not be judged"),
        "{row}"
    );
}

#[test]
fn capacity_by_sweep_and_by_search_are_both_shown() {
    let mut store = Store::open_in_memory().unwrap();
    let search = common::search_step;
    let run = common::record_run(
        &mut store,
        None,
        "builtin",
        &[
            common::rate_step(100.0, 100.0, 1.0, "server-bound", true),
            common::rate_step(200.0, 160.0, 1.0, "server-bound", false),
            search(100.0, true),
            search(150.0, true),
            search(175.0, false),
        ],
    );
    let md = markdown(&store, Selector::Run(run));
    assert_eq!(
        table(&md, "Capacity")[2],
        "| builtin | keep-alive | 150.0 | 175.0 | 5 | 0 | 0 | search alone: 150.0 (3 steps, 50 s); sweep alone: 100.0 (2 steps, 30 s) |"
    );
}

/// Each planned repeat counts once, by its best attempt (the earliest of the best), as
/// the headline and the study's end table count it: seed 000 on a busy machine had 3
/// repeats a point, each re-measured, and this table said "9 runs" with another median
/// than the end table's "(3 runs)".
#[test]
fn repeated_points_get_medians_with_bootstrap_intervals() {
    let mut store = Store::open_in_memory().unwrap();
    let step =
        |reply: f64, label: &'static str, ok: bool| common::rate_step(100.0, reply, 1.0, label, ok);
    let run = common::record_run_tagged(
        &mut store,
        None,
        "builtin",
        &[
            step(98.0, "server-bound", true),
            // Repeat 1 measured again: its first attempt counts, not both.
            step(150.0, "server-bound", true),
            step(100.0, "server-bound", true),
            // Repeat 3: generator-bound, then re-measured: the re-measure counts.
            step(50.0, "generator-bound", false),
            step(102.0, "server-bound", true),
            // Repeat 4: generator-bound only, left out of the median.
            step(40.0, "generator-bound", false),
            // Run once: no interval to give.
            common::rate_step(200.0, 200.0, 1.0, "server-bound", true),
        ],
        &[0, 0, 1, 2, 2, 3, 0].map(|r| serde_json::json!({ "repeat": r })),
        &[],
        volley_store::Status::Complete,
    );
    let md = markdown(&store, Selector::Run(run));
    assert_eq!(
        table(&md, "Repeats: medians with bootstrap 95% intervals"),
        [
            "| Target | Point | Runs | Req/s median [95% CI] | p99 (ms) median [95% CI] |",
            "|---|---|---|---|---|",
            "| builtin | rate 100/s, ka | 3 | 100.0 [98.0, 102.0] | 1.000 [1.000, 1.000] |",
        ]
    );
}

/// A cell searched twice (`[search] passes = 2`) whose second search was killed: the
/// list names each search's pass, and the killed one is listed beside the first's
/// stored result, not hidden by it.
#[test]
fn each_pass_of_a_search_is_listed_and_a_killed_one_is_not_hidden() {
    let mut store = Store::open_in_memory().unwrap();
    let search = common::search_step;
    let pass = |p: u32| serde_json::json!({ "pass": p });
    let run = common::record_run_tagged(
        &mut store,
        None,
        "builtin",
        &[
            search(100.0, true),
            search(200.0, true),
            search(400.0, false),
            search(300.0, true),
            search(100.0, true),
            search(200.0, true),
        ],
        &[pass(0), pass(0), pass(0), pass(0), pass(1), pass(1)],
        &[common::converged_search(
            serde_json::json!({"target": "builtin", "instance": "builtin",
                "workload": null, "concurrency": 16, "keepalive": true,
                "cpu_quota_cores": null, "cores": null, "pass": 0, "passes": 2}),
            1_700_000_000_000,
        )],
        volley_store::Status::Incomplete,
    );
    let md = markdown(&store, Selector::Run(run));
    assert!(
        md.contains("  - keep-alive: search 1 of 2: capacity by search: 300 req/s, 95% CI [250, 350], 4 steps, 70 s\n"),
        "{md}"
    );
    assert!(
        md.contains("  - keep-alive: search 2 of 2: capacity search did not finish (killed mid-search, no result stored): 200 req/s sustainable so far, no interval, 2 steps, "),
        "{md}"
    );
}

#[test]
fn stored_search_results_are_shown_beside_the_sweep() {
    let mut store = Store::open_in_memory().unwrap();
    let study = common::search_study(&mut store);
    let md = markdown(&store, Selector::Study(study));
    assert_eq!(
        table(&md, "Capacity by search"),
        [
            "| Target | Group | Capacity by search (req/s) | CI (req/s) | Ended | Steps | Search time (s) | Capacity by sweep (req/s) | Sweep |",
            "|---|---|---|---|---|---|---|---|---|",
            "| builtin | keep-alive | 300.0 | 95% [250.0, 350.0] | converged | 4 | 70.0 | 300.0 | 4 steps, 70.0 s |",
            "| nginx | keep-alive | 200.0 | - | did not finish (killed mid-search, no result stored) | 3 | 50.0 | - | - |",
        ]
    );
    assert!(
        md.contains(
            "  - keep-alive: capacity by search: 300 req/s, 95% CI [250, 350], 4 steps, 70 s\n"
        ),
        "{md}"
    );
    assert!(
        md.contains("  - keep-alive: capacity search did not finish (killed mid-search, no result stored): 200 req/s sustainable so far, no interval, 3 steps, 50 s\n"),
        "{md}"
    );
    // The step-based capacity table keeps both phases, with the time each took.
    assert_eq!(
        table(&md, "Capacity")[2],
        "| builtin | keep-alive | 300.0 | 400.0 | 8 | 0 | 0 | search alone: 300.0 (4 steps, 70 s); sweep alone: 300.0 (4 steps, 70 s) |"
    );
    // The evidence table is still there, every step in it.
    assert_eq!(
        table(&md, "Steps, verdicts and labels (the evidence)").len(),
        2 + 11
    );
    let report = load(&store, Selector::Study(study)).unwrap();
    let v: serde_json::Value = serde_json::from_str(&Json.render(&report).unwrap()).unwrap();
    let s = &v["targets"][0]["searches"][0];
    assert_eq!(
        (
            &s["capacity_rps"],
            &s["ci_lo_rps"],
            &s["ci_hi_rps"],
            &s["confidence"]
        ),
        (&300.0.into(), &250.0.into(), &350.0.into(), &0.95.into())
    );
    assert_eq!(
        (&s["end"], &s["finished"]),
        (&"converged".into(), &true.into())
    );
    assert_eq!(v["targets"][1]["searches"][0]["end"], "not_finished");
    assert_eq!(
        v["targets"][1]["searches"][0]["ci_lo_rps"],
        serde_json::Value::Null
    );
}

#[test]
fn a_search_that_found_no_sustainable_rate_claims_no_interval() {
    let mut store = Store::open_in_memory().unwrap();
    let mut step = common::rate_step(100.0, 100.0, 1.0, "generator-bound", true);
    step.phase = "search";
    let run = common::record_run_with(
        &mut store,
        None,
        "bucket",
        &[step],
        &[volley_store::CapacityRecord {
            cell: serde_json::json!({"keepalive": true}),
            capacity_rps: None,
            ci_lo_rps: Some(0.0),
            ci_hi_rps: None,
            confidence: 0.95,
            end: volley_store::SearchEnd::GeneratorBound,
            steps: 1,
            started_unix_ms: 0,
            finished_unix_ms: 4_000,
            detail: serde_json::json!({}),
        }],
        volley_store::Status::Complete,
    );
    let md = markdown(&store, Selector::Run(run));
    assert_eq!(
        table(&md, "Capacity by search")[2],
        "| bucket | keep-alive | - | - | generator bound | 1 | 4.0 | - | - |"
    );
    assert!(
        md.contains(
            "capacity by search: no rate shown sustainable, 1 steps, 4 s (ended: generator bound)"
        ),
        "{md}"
    );
}

/// Issue 23's report side: variants and protocols are series of their own, in the
/// capacity groups, seed 001's and 002's tables and the answers.
#[test]
fn variants_and_protocols_get_their_own_groups_columns_and_answers() {
    let mut store = Store::open_in_memory().unwrap();
    let study = common::tuned_variants(&mut store);
    let report = load(&store, Selector::Study(study)).unwrap();
    let md = markdown(&store, Selector::Study(study));

    // Capacity per variant, never the two sweeps mixed: default fails at 300, tuned at
    // 400.
    let nginx = &report.targets[0];
    let caps: Vec<(Option<&str>, Option<f64>)> = nginx
        .capacity
        .iter()
        .map(|c| (c.variant.as_deref(), c.capacity_rps))
        .collect();
    assert_eq!(
        caps,
        [(Some("default"), Some(200.0)), (Some("tuned"), Some(300.0))],
        "{:?}",
        nginx.capacity
    );
    assert!(
        nginx.capacity[1].group.ends_with(", variant tuned"),
        "{}",
        nginx.capacity[1].group
    );

    // Seed 001's tables: one column per variant.
    let replies = table(&md, "Replies per second by request rate");
    assert!(
        replies[0].contains("nginx \u{b7} default replies/s")
            && replies[0].contains("nginx \u{b7} tuned replies/s"),
        "{replies:?}"
    );
    let at_300 = replies.iter().find(|l| l.starts_with("| 300 |")).unwrap();
    assert!(
        at_300.contains("| 240.0 |") && at_300.contains("| 300.0 |"),
        "{at_300}"
    );
    let open = table(&md, "Max open connections by request rate");
    assert!(open[0].contains("nginx \u{b7} tuned max open"), "{open:?}");

    // Seed 002's figure as a table: req/s per CPU share, one column per variant and
    // core set.
    let share = table(&md, "Requests per second by CPU share");
    assert!(
        share[0].contains("nginx \u{b7} default, cpus 0 req/s")
            && share[0].contains("nginx \u{b7} tuned, cpus 0 req/s"),
        "{share:?}"
    );
    let half = share.iter().find(|l| l.starts_with("| 0.5 |")).unwrap();
    let want = |rps: f64| format!("| {rps:.1} |");
    assert!(
        half.contains(&want(common::usl_rps(4.0, 0.5)))
            && half.contains(&want(common::usl_rps(4.0, 0.5) * 1.2)),
        "{half}"
    );

    // The answers: per variant and per protocol, each with its own rule.
    let lines = volley_report::headline::lines(&report);
    let nginx_line = lines.iter().find(|l| l.starts_with("nginx: ")).unwrap();
    assert!(nginx_line.contains("Variants: tuned "), "{nginx_line}");
    let builtin_line = lines.iter().find(|l| l.starts_with("builtin: ")).unwrap();
    assert!(
        builtin_line.contains("Protocols: h2 carries: 1,310 req/s vs h1 1,010: 1.30x ["),
        "{builtin_line}"
    );
    // Protocols are series: their own colour keys and labels.
    let builtin = &report.targets[1];
    assert!(builtin.steps.iter().all(|s| s.protocol.is_some()));
    assert!(
        builtin.steps[1].point_label().ends_with(", h2"),
        "{}",
        builtin.steps[1].point_label()
    );
    // One protocol in a run is no dimension: nginx's steps carry none.
    assert!(nginx.steps.iter().all(|s| s.protocol.is_none()));
}

#[test]
fn unlike_runs_are_said_unlike_before_whoever_bound_them() {
    // A closed loop and an open loop the generator bound: the first reason is that
    // they measured nothing alike (the open run's label changes nothing about that).
    let mut store = Store::open_in_memory().unwrap();
    let mut closed = common::rate_step(0.0, 900.0, 3.0, "server-bound", true);
    closed.rate_rps = None;
    closed.concurrency = Some(8);
    closed.sustainable = None;
    closed.closed = true;
    let a = common::record_run(&mut store, None, "before", &[closed]);
    let open = common::rate_step(200.0, 200.0, 1.0, "generator-bound", true);
    let b = common::record_run(&mut store, None, "rate", &[open]);
    let e = volley_report::compare::compare(
        &store,
        &a.0.to_string(),
        &b.0.to_string(),
        volley_report::compare::Metric::P99,
    )
    .unwrap_err();
    assert!(e.to_string().contains("share no measured point"), "{e}");
}

/// Two runs behind the same shaped link (seed 003 run 68 ms away): compare gives the
/// report's answer (the link's figures, no winner) for req/s and p99 alike, never a
/// usage error saying there is nothing to compare.
#[test]
fn compare_of_two_link_bound_runs_answers_as_the_report_does() {
    let mut store = Store::open_in_memory().unwrap();
    let closed = |rps: f64| {
        let mut s = common::rate_step(0.0, rps, 70.0, "link-bound", true);
        s.rate_rps = None;
        s.concurrency = Some(1);
        s.sustainable = None;
        s.closed = true;
        s
    };
    let a = common::record_run(&mut store, None, "builtin", &[closed(14.1)]);
    let b = common::record_run(&mut store, None, "nginx", &[closed(14.3)]);
    for m in [
        volley_report::compare::Metric::Rps,
        volley_report::compare::Metric::P99,
    ] {
        let c =
            volley_report::compare::compare(&store, &a.0.to_string(), &b.0.to_string(), m).unwrap();
        assert!(
            c.answer.starts_with("No answer: every step was link-bound"),
            "{}",
            c.answer
        );
        // One run of a point: no interval, on either side.
        assert!(!c.a.has_interval() && !c.b.has_interval(), "{c}");
    }
}

#[test]
fn compare_of_two_rate_sweeps_answers_as_the_report_does() {
    // Per-rate req/s of two sweeps are the offered rates, alike wherever both carried
    // them; the question is their capacities, and compare asks it as the report does.
    let mut store = Store::open_in_memory().unwrap();
    let study = common::rate_sweep(&mut store);
    let report = load(&store, Selector::Study(study)).unwrap();
    let said = volley_report::headline::answer(&report);
    assert!(said.starts_with("No order can be told: nginx"), "{said}");
    let c = volley_report::compare::compare(
        &store,
        "rate-sweep:builtin",
        "rate-sweep:nginx",
        volley_report::compare::Metric::Rps,
    )
    .unwrap();
    assert_eq!(c.answer, said, "{c}");
    // Two runs of one target are told apart by their run ids.
    let c = volley_report::compare::compare(
        &store,
        "rate-sweep:builtin",
        "rate-sweep:builtin",
        volley_report::compare::Metric::Rps,
    )
    .unwrap();
    assert!(c.answer.contains("builtin (run 1)"), "{}", c.answer);
}
