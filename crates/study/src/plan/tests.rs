use std::time::Duration;
use volley_engine::Order;
use volley_targets::TargetKind;

use super::*;
use crate::spec::{self, RepeatOrder};
use crate::StudyError;

/// The plan of study text `text` at scale 1 (shared with `office_tests`).
pub(super) fn plan(text: &str) -> Result<Plan, StudyError> {
    let f = spec::parse(text)?;
    resolve(&f, text, 1.0)
}

const AB: &str = r#"
name = "ab"
[[target]]
name = "a"
kind = "builtin"
[[target]]
name = "b"
kind = "nginx"
[[workload]]
name = "w"
paths = ["/x"]
[sweep]
rate = { from = 100, to = 300, step = 100 }
[steps]
duration = "5s"
warmup = "1s"
cooldown = "2s"
repeats = 2
"#;

#[test]
fn sweep_expands_and_interleaves_targets_innermost() {
    let p = plan(AB).unwrap();
    assert_eq!(p.cells.len(), 6);
    assert_eq!(p.steps.len(), 12);
    assert_eq!(p.axis, "rate");
    let seq: Vec<(String, f64, u32)> = p
        .steps
        .iter()
        .map(|s| {
            let c = &p.cells[s.cell];
            (p.instance_label(c.instance), c.rate.unwrap(), s.repeat)
        })
        .collect();
    assert_eq!(seq[0], ("a".into(), 100.0, 0));
    assert_eq!(seq[1], ("b".into(), 100.0, 0));
    assert_eq!(seq[2], ("a".into(), 200.0, 0));
    assert_eq!(seq[6], ("a".into(), 100.0, 1));
    assert!(p.workloads[0].load.open);
    // 12 steps x (1 + 5 + 2) s.
    assert_eq!(p.estimate(), Duration::from_secs(96));
}

#[test]
fn sequential_and_random_orders() {
    let s = schedule(3, 2, RepeatOrder::Sequential, 0);
    let cells: Vec<usize> = s.iter().map(|s| s.cell).collect();
    assert_eq!(cells, vec![0, 0, 1, 1, 2, 2]);
    let r1 = schedule(5, 3, RepeatOrder::Random, 7);
    let r2 = schedule(5, 3, RepeatOrder::Random, 7);
    assert_eq!(r1, r2, "seeded order repeats");
    for round in 0..3u32 {
        let mut c: Vec<usize> = r1
            .iter()
            .filter(|s| s.repeat == round)
            .map(|s| s.cell)
            .collect();
        c.sort();
        assert_eq!(c, vec![0, 1, 2, 3, 4], "each round holds every cell once");
    }
    assert_ne!(
        r1.iter().map(|s| s.cell).collect::<Vec<_>>(),
        schedule(5, 3, RepeatOrder::Interleaved, 7)
            .iter()
            .map(|s| s.cell)
            .collect::<Vec<_>>()
    );
    assert!(r1.iter().enumerate().all(|(i, s)| s.order == i));
}

/// The shipped seed-003 studies fetch only the HTML, as the seed did: L1 1000 of
/// index1, L2 1000 of each index in turn, L3 1000 at random; 003 is one sequential
/// client without keep-alive.
#[test]
fn shipped_studies_match_seed_003() {
    let pages: Vec<String> = (1..=5).map(|n| format!("/index{n}.html")).collect();
    for (file, text) in [
        ("quick", include_str!("../../../../studies/quick.toml")),
        ("003", include_str!("../../../../studies/003-uniserve.toml")),
    ] {
        let f = spec::parse(text).unwrap();
        let p = resolve(&f, text, 1.0).unwrap();
        let w = |name: &str| p.workloads.iter().find(|w| w.name == name).unwrap();
        let (l1, l2, l3) = (w("L1"), w("L2"), w("L3"));
        assert_eq!(l1.paths, vec!["/index1.html".to_string()], "{file}");
        assert_eq!((l1.order.clone(), l1.requests), (Order::Same, Some(1000)));
        assert_eq!(l2.paths, pages, "{file}");
        assert_eq!(l2.order, Order::Sequential { block: 1000 }, "{file}");
        assert_eq!(l2.requests, Some(5000), "{file}");
        assert_eq!(l3.paths, pages, "{file}");
        assert!(matches!(l3.order, Order::Random { .. }), "{file}");
        assert_eq!(l3.requests, Some(1000), "{file}");
        for c in p
            .cells
            .iter()
            .filter(|c| p.workloads[c.workload].name.starts_with('L'))
        {
            assert_eq!(c.concurrency, 1, "{file}: one sequential client");
            assert!(!p.workloads[c.workload].load.open, "{file}");
        }
        let kas: Vec<bool> = p.cells.iter().map(|c| c.keepalive).collect();
        assert!(kas.contains(&false), "{file}: the seed's open, read, close");
        if file == "003" {
            assert!(kas.iter().all(|k| !k), "003 never keeps connections alive");
            assert_eq!(p.repeats, 5);
        }
    }
    // Scaled, L2 is still five blocks of one page each.
    let text = include_str!("../../../../studies/003-uniserve.toml");
    let p = resolve(&spec::parse(text).unwrap(), text, 0.1).unwrap();
    let l2 = p.workloads.iter().find(|w| w.name == "L2").unwrap();
    assert_eq!(
        (l2.order.clone(), l2.requests),
        (Order::Sequential { block: 100 }, Some(500))
    );
}

#[test]
fn caps_multiply_instances_and_scale_shrinks_time() {
    let text = r#"
name = "caps"
[[target]]
name = "n"
kind = "nginx"
[[workload]]
name = "w"
paths = ["/x"]
[sweep]
concurrency = [1, 3]
cpu_quota = [0.25, 0.65]
cores = [1, 2]
keepalive = [true, false]
[steps]
requests = 1000
"#;
    let f = spec::parse(text).unwrap();
    let p = resolve(&f, text, 0.1).unwrap();
    assert_eq!(p.instances.len(), 4);
    assert_eq!(p.cells.len(), 16);
    assert_eq!(p.axis, "concurrency");
    assert_eq!(p.timing.requests, Some(100));
    assert_eq!(p.timing.warmup, Duration::from_millis(100));
    assert!(!p.workloads[0].load.open);
    assert_eq!(p.instance_label(1), "n cpu=65% cores=1");
}

#[test]
fn semantic_errors_are_one_line() {
    let e = plan(&AB.replace("kind = \"nginx\"", "kind = \"iis\""))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 8") && e.contains("target.kind") && e.contains("iis"),
        "{e}"
    );
    let e = plan(&AB.replace("duration = \"5s\"", "duration = \"5 fortnights\""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 15") && e.contains("steps.duration"), "{e}");
    let e = plan(&AB.replace("step = 100", "step = 0"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("step > 0"), "{e}");
}

#[test]
fn restart_is_off_by_default_and_only_for_managed_targets() {
    let p = plan(AB).unwrap();
    assert!(p.targets.iter().all(|t| t.restart == spec::Restart::Never));
    let on = AB.replace(
        "kind = \"nginx\"",
        "kind = \"nginx\"\nrestart = \"next-step\"",
    );
    let p = plan(&on).unwrap();
    assert_eq!(p.targets[1].restart, spec::Restart::NextStep);
    let ext = AB.replace(
        "kind = \"nginx\"",
        "kind = \"external\"\nurl = \"http://127.0.0.1:9\"\nrestart = \"next-step\"",
    );
    let e = plan(&ext).unwrap_err().to_string();
    assert!(e.contains("restart needs a managed target"), "{e}");
    assert!(
        plan(&AB.replace("kind = \"nginx\"", "kind = \"nginx\"\nrestart = \"always\"")).is_err()
    );
}

#[test]
fn scale_keeps_rate_steps_judgeable() {
    assert_eq!(
        rate_step_length(Duration::from_millis(1200), Duration::from_secs(12)),
        MIN_RATE_STEP
    );
    assert_eq!(
        rate_step_length(Duration::from_secs(6), Duration::from_secs(60)),
        Duration::from_secs(6)
    );
    // A file asking for 2 s steps gets 2 s: the floor never lengthens the file.
    assert_eq!(
        rate_step_length(Duration::from_millis(200), Duration::from_secs(2)),
        Duration::from_secs(2)
    );
    let f = spec::parse(AB).unwrap();
    let p = resolve(&f, AB, 0.1).unwrap();
    assert_eq!(p.timing.duration, Some(Duration::from_millis(500)));
    assert_eq!(p.timing.rate_duration, Some(Duration::from_secs(3)));
    assert_eq!(p.rule.min_windows, 3);
    assert!(
        p.describe().contains("rate steps: 3s measured"),
        "{}",
        p.describe()
    );
    // Every step of AB is a rate step: 12 x (0.1 + 3 + 0.2) s.
    assert_eq!(p.estimate(), Duration::from_millis(39_600));
}

#[test]
fn wire_keys_resolve_and_disagreeing_tls_is_refused() {
    let text = AB.replace(
            "[[workload]]\nname = \"w\"\npaths = [\"/x\"]",
            "[[workload]]\nname = \"w\"\npaths = [\"/x\"]\ncold_start = true\nload = { tls = true, http2 = true, streams = 4, compressed = \"br\" }",
        );
    let p = plan(&text).unwrap();
    let w = &p.workloads[0];
    assert_eq!(
        w.load.wire,
        WireDef {
            tls: true,
            h2_streams: Some(4),
            streams: 4,
            compressed: Some(Encoding::Br),
            insecure: false
        }
    );
    assert!(w.cold_start);
    assert!(w.headers.contains(&("Accept-Encoding".into(), "br".into())));
    assert_eq!(
        p.serve,
        Serve {
            tls: true,
            http2: true,
            http3: false,
            brotli: true,
            gzip: false
        }
    );
    assert!(
        p.describe().contains("HTTPS HTTP/2 x4 streams"),
        "{}",
        p.describe()
    );
    let two = format!("{text}\n[[workload]]\nname = \"plain\"\npaths = [\"/y\"]\n");
    let e = plan(&two).unwrap_err().to_string();
    assert!(e.contains("'plain'") && e.contains("agree on tls"), "{e}");
    let e = plan(&text.replace("\"br\"", "\"lz4\""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("lz4"), "{e}");
    let e = plan(&text.replace("http2 = true, ", ""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("streams needs http2"), "{e}");
    let ext = text.replace(
        "kind = \"nginx\"",
        "kind = \"external\"\nurl = \"http://127.0.0.1:1/\"",
    );
    let e = plan(&ext).unwrap_err().to_string();
    assert!(e.contains("cold_start needs managed targets"), "{e}");
}

#[test]
fn search_mode_has_no_fixed_steps() {
    let text = AB.replace("name = \"ab\"", "name = \"s\"\nmode = \"search\"");
    let p = plan(&text).unwrap();
    assert!(p.steps.is_empty());
    assert_eq!(p.cells.len(), 2, "one search per target");
    assert!(p.cells.iter().all(|c| c.rate.is_none()));
    assert!(p.search.is_some());
}

const CLOSED: &str = r#"
name = "slow"
[[target]]
name = "n"
kind = "nginx"
[[workload]]
name = "w"
paths = ["/x"]
[[workload]]
name = "v"
paths = ["/y"]
[sweep]
concurrency = [1, 3]
cpu_quota = [0.25, 0.65]
[steps]
requests = 1000
warmup = "1s"
cooldown = "1s"
"#;

#[test]
fn request_count_steps_use_the_stated_rate_then_the_guess() {
    let p = plan(CLOSED).unwrap();
    let book = RateBook::default();
    // No expected_rate: 2000 req/s per connection.
    let c3 = p.cells.iter().find(|c| c.concurrency == 3).unwrap();
    assert_eq!(p.request_rate(c3, &book), (6000.0, RateSource::Guess));
    let with = CLOSED.replace("requests = 1000", "requests = 1000\nexpected_rate = 40");
    let p = plan(&with).unwrap();
    for c in &p.cells {
        assert_eq!(p.request_rate(c, &book), (40.0, RateSource::Stated));
        // 1 s warm-up + 1000 / 40 s + 1 s cool-down.
        assert_eq!(p.step_estimate(c), Duration::from_secs(27));
    }
    assert_eq!(p.estimate(), Duration::from_secs(27 * 8));
    // A workload's own rate replaces the study's.
    let own = with.replace("name = \"v\"", "name = \"v\"\nexpected_rate = 10");
    let p = plan(&own).unwrap();
    let v = p.cells.iter().find(|c| c.workload == 1).unwrap();
    assert_eq!(p.step_estimate(v), Duration::from_secs(102));
    // A duration and a count: the first limit reached ends the step.
    let both = with.replace("requests = 1000", "requests = 1000\nduration = \"10s\"");
    let p = plan(&both).unwrap();
    assert_eq!(p.step_estimate(&p.cells[0]), Duration::from_secs(12));
}

#[test]
fn the_eta_learns_the_median_rate_of_each_family() {
    let with = CLOSED.replace("requests = 1000", "requests = 1000\nexpected_rate = 40");
    let p = plan(&with).unwrap();
    let family = |inst: usize, wl: usize| {
        p.cells
            .iter()
            .filter(move |c| c.instance == inst && c.workload == wl)
    };
    let w0: Vec<&Cell> = family(0, 0).collect();
    let other = family(1, 0).next().unwrap();
    let mut book = RateBook::default();
    // (measured req/s recorded, expected rate of the family, source)
    let table: &[(&[f64], f64, RateSource)] = &[
        (&[], 40.0, RateSource::Stated),
        (&[20.0], 20.0, RateSource::Measured),
        (&[30.0], 25.0, RateSource::Measured),
        (&[100.0], 30.0, RateSource::Measured),
        // Failed steps (nothing completed) teach nothing.
        (&[0.0, f64::NAN, -5.0], 30.0, RateSource::Measured),
    ];
    for (measured, want, source) in table {
        for &rps in *measured {
            book.record(w0[0], rps);
        }
        // Every cell of the family (any concurrency) learns; other families do not.
        for c in &w0 {
            assert_eq!(p.request_rate(c, &book), (*want, *source));
        }
        assert_eq!(p.request_rate(other, &book), (40.0, RateSource::Stated));
    }
    // 1 s + 1000 / 30 s + 1 s for the learned family, 27 s for the others.
    let rest: Vec<PlannedStep> = p.steps.clone();
    let learned = Duration::from_secs(2) + Duration::from_secs_f64(1000.0 / 30.0);
    let want: Duration = p
        .steps
        .iter()
        .map(|s| {
            let c = &p.cells[s.cell];
            if (c.instance, c.workload) == (0, 0) {
                learned
            } else {
                Duration::from_secs(27)
            }
        })
        .sum();
    assert_eq!(p.remaining_estimate(&rest, &book), want);
    assert_eq!(
        p.remaining_estimate(&rest[rest.len()..], &book),
        Duration::ZERO
    );
    // Open-loop steps keep their offered rate whatever was measured.
    let ab = plan(AB).unwrap();
    let mut book = RateBook::default();
    book.record(&ab.cells[0], 5.0);
    assert_eq!(
        ab.request_rate(&ab.cells[0], &book),
        (100.0, RateSource::Offered)
    );
}

#[test]
fn the_caps_study_estimate_matches_its_header() {
    let text = include_str!("../../../../studies/002-caps.toml");
    let f = spec::parse(text).unwrap();
    let plan = resolve(&f, text, 1.0).unwrap();
    // Seed 002's three servers, each compressing on the fly, and the built-in server.
    let kinds: Vec<TargetKind> = plan.targets.iter().map(|t| t.kind).collect();
    assert_eq!(
        kinds,
        [
            TargetKind::Nginx,
            TargetKind::ApacheEvent,
            TargetKind::Lighttpd,
            TargetKind::Builtin
        ]
    );
    assert!(plan.serve.brotli && plan.serve.tls);
    let full = plan.estimate();
    assert!(
        full >= Duration::from_secs(6 * 3600) && full <= Duration::from_secs(7 * 3600),
        "{full:?}"
    );
    let quick = resolve(&f, text, 0.2).unwrap().estimate();
    assert!(
        quick >= Duration::from_secs(75 * 60) && quick <= Duration::from_secs(85 * 60),
        "{quick:?}"
    );
}

#[test]
fn search_steps_come_from_the_search_settings() {
    let base = AB.replace("name = \"ab\"", "name = \"s\"\nmode = \"search\"");
    // (search section, fewest, most, assumed)
    let table = [
        // Defaults: start 100, 2%, 3 repeats, max 100000, 40 steps:
        // b = ceil(log2 50) = 6; fewest 1 + 2 * 7 = 15; most 10 + 1 + 3 * 7 = 32.
        ("", 15, 32, 24),
        // The integration test's search: b = ceil(log2 20) = 5, repeats 1,
        // ceil(log2(100000 / 1000)) = 7 doublings: 1 + 6 = 7 and 8 + 6 = 14, capped at 10.
        (
            "[search]\nstart_rate = 1000\nresolution = 0.05\nrepeats = 1\nmax_steps = 10\n",
            7,
            10,
            9,
        ),
        // A step budget below the fewest caps both.
        ("[search]\nmax_steps = 5\n", 5, 5, 5),
    ];
    for (section, lo, hi, mid) in table {
        let p = plan(&format!("{base}{section}")).unwrap();
        assert_eq!(p.search_steps_range(), Some((lo, hi)), "{section}");
        assert_eq!(p.search_steps_estimate(), mid, "{section}");
        assert_eq!(
            p.estimate(),
            p.cells
                .iter()
                .map(|c| p.step_estimate(c) * mid)
                .sum::<Duration>()
        );
        assert!(p.describe().contains(&format!("{lo}-{hi} by its settings")));
    }
    assert_eq!(plan(AB).unwrap().search_steps_range(), None);
}

#[test]
fn passes_multiply_the_searches_and_must_be_a_count_a_study_can_run() {
    let base = AB.replace("name = \"ab\"", "name = \"s\"\nmode = \"search\"");
    let one = plan(&format!("{base}[search]\nmax_steps = 5\n")).unwrap();
    let three = plan(&format!("{base}[search]\nmax_steps = 5\npasses = 3\n")).unwrap();
    assert_eq!(one.search.as_ref().unwrap().passes, 1);
    assert_eq!(three.search.as_ref().unwrap().passes, 3);
    assert_eq!(three.cell_passes(0), 3);
    assert_eq!(three.estimate(), one.estimate() * 3);
    assert!(three
        .describe()
        .contains("3 whole searches of each, interleaved"));
    assert!(!one.describe().contains("whole searches"));
    for bad in ["0", "21"] {
        let e = plan(&format!("{base}[search]\npasses = {bad}\n")).unwrap_err();
        assert!(
            e.to_string().contains("search.passes must be 1 to 20"),
            "{e}"
        );
    }
}

#[test]
fn bad_expected_rates_name_line_and_key() {
    let cases = [
        (
            "requests = 1000\nexpected_rate = \"fast\"",
            "line 17",
            "steps.expected_rate",
        ),
        (
            "requests = 1000\nexpected_rate = 0",
            "line 17",
            "steps.expected_rate",
        ),
        (
            "requests = 1000\nexpected_rate = -3.5",
            "line 17",
            "steps.expected_rate",
        ),
    ];
    for (replacement, line, key) in cases {
        let text = CLOSED.replace("requests = 1000", replacement);
        let e = plan(&text).unwrap_err().to_string();
        assert!(e.contains(line) && e.contains(key), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    let text = CLOSED.replace("paths = [\"/y\"]", "paths = [\"/y\"]\nexpected_rate = -1");
    let e = plan(&text).unwrap_err().to_string();
    assert!(
        e.contains("line 12") && e.contains("workload.expected_rate") && e.contains("positive"),
        "{e}"
    );
}

/// Seed 000 whole: the ab points on builtin and nginx only, warm office days of 100
/// people on the three DAV servers not searched, the pocket box capped, the search on
/// the built-in server and Radicale, and an estimate that matches the file's header
/// (a full run in under two hours, `--scale 0.25` under half an hour).
#[test]
fn the_groupware_office_study_runs_the_seeds_points_on_the_right_servers() {
    let text = include_str!("../../../../studies/000-groupware-office.toml");
    let f = spec::parse(text).unwrap();
    let p = resolve(&f, text, 1.0).unwrap();
    let target_of = |c: &Cell| p.targets[p.instances[c.instance].target].name.as_str();
    let ab: Vec<(&str, u32, bool)> = p
        .cells
        .iter()
        .filter(|c| c.users.is_none())
        .map(|c| (target_of(c), c.concurrency, c.keepalive))
        .collect();
    for t in ["builtin", "nginx"] {
        for point in [(100, false), (1, true), (10, true)] {
            assert!(ab.contains(&(t, point.0, point.1)), "{t} {point:?}: {ab:?}");
        }
    }
    assert_eq!(ab.len(), 6, "{ab:?}");
    let office: Vec<(&str, u32)> = p
        .cells
        .iter()
        .enumerate()
        .filter(|(ci, _)| !p.searches_users(*ci))
        .filter_map(|(_, c)| Some((target_of(c), c.users?)))
        .collect();
    assert_eq!(office.len(), 3, "{office:?}");
    for t in ["builtin-pocket", "xandikos", "nginx-dav"] {
        let users: Vec<u32> = office.iter().filter(|o| o.0 == t).map(|o| o.1).collect();
        assert_eq!(users, [100], "{t}");
    }
    for (t, accounts) in [
        ("builtin-office", 4000),
        // Radicale is searched from 125 to at most 500 (its set-up speed: 2000 people
        // would take 44 minutes before their window; the study file says why).
        ("radicale", 500),
        ("builtin-pocket", 100),
        ("xandikos", 100),
        ("nginx-dav", 100),
    ] {
        // The searched servers get accounts for the search's most users.
        let ti = p.targets.iter().position(|x| x.name == t).unwrap();
        assert_eq!(p.dav_users(ti), Some(accounts), "{t}");
    }
    // The users search on the built-in server and Radicale, after the sweep.
    let searched: Vec<&str> = p
        .searched_cells()
        .into_iter()
        .map(|ci| target_of(&p.cells[ci]))
        .collect();
    assert_eq!(searched, ["builtin-office", "radicale"]);
    assert_eq!(p.steps.len(), 9, "the sweep's steps");
    // At real time: a user is a person.
    assert!(p
        .workloads
        .iter()
        .filter_map(|w| w.office.as_ref())
        .all(|o| o.compress == 1.0 && !o.cold_start));
    let pocket = p
        .targets
        .iter()
        .find(|t| t.name == "builtin-pocket")
        .unwrap();
    assert_eq!(pocket.memory_max, Some(8 << 20));
    // The header's figures: about 1 h 45 min of days, and under half an hour of days
    // at a quarter; the days' set-up and lead-in come on top, the same at every scale
    // (about 12 min at the guessed server rates: each searched calendar is set up
    // once, and Radicale is searched in the hundreds).
    let untimed = p.office_untimed_total();
    // Starting the targets (4000 built-in accounts, 500 Radicale calendars) took
    // 4.6 min here: the estimate counts it, at its stated per-account guess.
    let start = p.target_start_total();
    assert!(
        start >= Duration::from_secs(4 * 60) && start <= Duration::from_secs(6 * 60),
        "{start:?}"
    );
    let days = p.estimate() - untimed - start;
    assert!(
        days >= Duration::from_secs(100 * 60) && days <= Duration::from_secs(110 * 60),
        "{days:?}"
    );
    let q = resolve(&f, text, 0.25).unwrap();
    assert!(
        q.estimate() - q.office_untimed_total() - q.target_start_total()
            <= Duration::from_secs(28 * 60),
        "{:?}",
        q.estimate()
    );
    assert_eq!(q.office_untimed_total(), untimed);
    assert!(
        untimed >= Duration::from_secs(10 * 60) && untimed <= Duration::from_secs(14 * 60),
        "{untimed:?}"
    );
}

#[test]
fn protocol_axis_makes_one_series_per_http_version() {
    let text = r#"
name = "h123"
[[target]]
name = "c"
kind = "caddy"
[[workload]]
name = "w"
paths = ["/x"]
[load]
tls = true
streams = 8
concurrency = 2
[sweep]
protocol = ["h1", "h2", "h3"]
[steps]
duration = "5s"
repeats = 2
"#;
    let p = plan(text).unwrap();
    let protocols: Vec<_> = p.cells.iter().map(|c| c.protocol).collect();
    assert_eq!(
        protocols,
        [Some(Protocol::H1), Some(Protocol::H2), Some(Protocol::H3)]
    );
    assert_eq!(p.axis, "protocol");
    // Repeats interleave the protocols (A B C A B C), as any axis.
    assert_eq!(p.steps.len(), 6);
    // The managed target offers all three; streams apply to h2 and h3.
    assert!(p.serve.http2 && p.serve.http3, "{:?}", p.serve);
    assert_eq!(p.workloads[0].load.wire.streams, 8);
    assert!(p.describe().contains("w h3 c=2"), "{}", p.describe());
    // The workload's line names the swept versions, not its own HTTP/1.1.
    let line = p
        .describe()
        .lines()
        .find(|l| l.starts_with("workload w:"))
        .unwrap()
        .to_string();
    assert!(
        line.contains("HTTPS (HTTP version swept: h1, h2, h3)"),
        "{line}"
    );
    assert!(!line.contains("HTTP/1.1"), "{line}");
    // h3 needs TLS; names are checked.
    let e = plan(&text.replace("tls = true\n", ""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"h3\" needs load.tls = true"), "{e}");
    let e = plan(&text.replace("\"h3\"]", "\"quic\"]"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"quic\" is not one of"), "{e}");
    // Only a kind with HTTP/3 can run h3 steps.
    let e = plan(&text.replace("kind = \"caddy\"", "kind = \"nginx\""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs a kind that offers HTTP/3"), "{e}");
    // Without the axis, streams still need http2.
    let e = plan(&text.replace("protocol = [\"h1\", \"h2\", \"h3\"]", ""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("streams needs http2"), "{e}");
}

/// A capped step must measure ten of its quota's periods (1 s) for the cap to hold: a
/// timed plan shorter than that is refused, with the length it has and needs; a
/// request-count plan expected to be that short is printed with a warning (its rate is
/// only an estimate); uncapped steps and rate steps (3 s floor) are left alone.
#[test]
fn capped_steps_too_short_for_the_cap_to_hold_are_refused_or_warned() {
    let capped = |steps: &str| {
        format!(
            "name = \"c\"\n[[target]]\nname = \"n\"\nkind = \"nginx\"\n[[workload]]\nname = \"w\"\npaths = [\"/x\"]\n[sweep]\nconcurrency = [1, 3]\ncpu_quota = [0.25]\n[steps]\n{steps}\n"
        )
    };
    let timed = capped("duration = \"3s\"");
    let f = spec::parse(&timed).unwrap();
    assert!(resolve(&f, &timed, 1.0).is_ok());
    assert!(
        resolve(&f, &timed, 1.0 / 3.0 + 1e-9).is_ok(),
        "1 s holds the cap"
    );
    let e = resolve(&f, &timed, 0.1).unwrap_err().to_string();
    assert!(
        e.contains(
            "steps.duration: too short for a CPU cap to hold: 300 ms measured, 1.0 s needed"
        ),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
    // Without a cap, or as rate steps (raised to 3 s), the same scale is fine.
    let uncapped = timed.replace("cpu_quota = [0.25]\n", "");
    let f = spec::parse(&uncapped).unwrap();
    assert!(resolve(&f, &uncapped, 0.1).is_ok());
    let rated = timed.replace("concurrency = [1, 3]", "rate = [100]");
    let f = spec::parse(&rated).unwrap();
    assert!(resolve(&f, &rated, 0.1).is_ok());

    // 1000 requests at the guessed 2000 req/s per connection: 500 ms at c=1, 167 at c=3.
    let counted = plan(&capped("requests = 1000")).unwrap();
    let d = counted.describe();
    assert!(
        d.contains("warning: 2 of 2 capped cells are expected to measure under the 1.0 s a CPU cap needs to hold (e.g. n cpu=25% w c=1 ka=on: 500 ms at the guessed 2000 req/s per connection)"),
        "{d}"
    );
    // Stated slower, or long enough at the guess: no warning.
    for steps in ["requests = 1000\nexpected_rate = 40", "requests = 6000"] {
        let d = plan(&capped(steps)).unwrap().describe();
        assert!(!d.contains("warning"), "{steps}: {d}");
    }
    let half = plan(&capped("requests = 2500")).unwrap().describe();
    assert!(half.contains("warning: 1 of 2 capped cells"), "{half}");
    let d = plan(&capped("requests = 1000").replace("cpu_quota = [0.25]\n", ""))
        .unwrap()
        .describe();
    assert!(!d.contains("warning"), "{d}");
}
