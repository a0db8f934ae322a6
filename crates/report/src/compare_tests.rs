use super::*;
use serde_json::json;
use volley_analysis::knee;
use volley_store::{CapacityRow, SearchEnd};

/// A stored search: converged ones failed at `hi` (a bounded capacity), the others
/// found no failure above `rps`.
fn row(cell: Value, rps: f64, lo: f64, hi: Option<f64>, end: SearchEnd) -> CapacityRow {
    let detail = knee::Capacity {
        capacity_rps: Some(rps),
        last_sustainable_rps: Some(rps),
        first_unsustainable_rps: hi.filter(|_| end == SearchEnd::Converged),
        ci_lo_rps: lo,
        ci_hi_rps: hi,
        probes: Vec::new(),
        steps: 7,
        end: knee::SearchEnd::Converged,
        generator_bound_at_rps: None,
        unjudged_steps: 0,
    };
    CapacityRow {
        id: volley_store::CapacityId(1),
        run: RunId(1),
        record: volley_store::CapacityRecord {
            cell,
            capacity_rps: Some(rps),
            ci_lo_rps: Some(lo),
            ci_hi_rps: hi,
            confidence: 0.95,
            end,
            steps: 7,
            started_unix_ms: 0,
            finished_unix_ms: 1,
            detail: serde_json::to_value(detail).unwrap(),
        },
    }
}

#[test]
fn users_searches_pair_with_users_searches_only_and_say_users() {
    let users = |target: &str| json!({"workload": "office", "target": target, "concurrency": 10, "unit": "users"});
    let rate = json!({"workload": "office", "target": "radicale", "concurrency": 10});
    let a = [row(
        users("builtin"),
        140.0,
        130.0,
        Some(160.0),
        SearchEnd::Converged,
    )];
    let b = [row(
        users("radicale"),
        14.0,
        12.0,
        Some(16.0),
        SearchEnd::Converged,
    )];
    let pairs = capacity_pairs(&a, &b);
    assert_eq!(pairs.len(), 1);
    assert_eq!(pairs[0].cell, "workload office, users");
    assert_eq!(pairs[0].ratio, 10.0);
    assert_eq!(
        pairs[0].ratio_range,
        (Some(130.0 / 16.0), Some(160.0 / 12.0))
    );
    assert_eq!(pairs[0].a.text(), "140 users (95% CI 130 .. 160)");
    // A users search is never divided by a rate search, even one each.
    let r = [row(rate, 14.0, 12.0, Some(16.0), SearchEnd::Converged)];
    assert!(capacity_pairs(&a, &r).is_empty());
    // Its pace is said with its count, and users at another pace never pair.
    let paced = |target: &str, f: f64| {
        let mut c = users(target);
        c["compress"] = json!(f);
        c
    };
    let real = [row(
        paced("builtin", 1.0),
        140.0,
        130.0,
        Some(160.0),
        SearchEnd::Converged,
    )];
    let fast = [row(
        paced("radicale", 480.0),
        4.0,
        4.0,
        None,
        SearchEnd::ReachedMaxRate,
    )];
    let real_text = SearchedCapacity::of(&real[0]).unwrap().text();
    assert_eq!(real_text, "140 users, at real time (95% CI 130 .. 160)");
    let fast_text = SearchedCapacity::of(&fast[0]).unwrap().text();
    assert!(
        fast_text.contains("4 users") && fast_text.contains(", office time compressed 480x ("),
        "{fast_text}"
    );
    assert!(capacity_pairs(&real, &fast).is_empty());
    assert_eq!(
        capacity_pairs(&real, &a).len(),
        1,
        "real time is the old rows' pace"
    );
}

#[test]
fn capacities_pair_by_variant_and_protocol_too() {
    let v = |variant: &str, protocol: &str| json!({"workload": "w", "concurrency": 16, "variant": variant, "protocol": protocol});
    let s = |cell: Value, rps: f64| {
        row(
            cell,
            rps,
            rps - 50.0,
            Some(rps + 50.0),
            SearchEnd::Converged,
        )
    };
    let a = [s(v("default", "h1"), 1000.0), s(v("tuned", "h1"), 1500.0)];
    // B stored its searches in the other order, and one for h2.
    let b = [
        s(v("tuned", "h2"), 9000.0),
        s(v("tuned", "h1"), 1200.0),
        s(v("default", "h1"), 500.0),
    ];
    let pairs = capacity_pairs(&a, &b);
    let got: Vec<(&str, f64)> = pairs.iter().map(|p| (p.cell.as_str(), p.ratio)).collect();
    assert_eq!(
        got,
        [
            (
                "workload w, concurrency 16, variant default, protocol h1",
                2.0
            ),
            (
                "workload w, concurrency 16, variant tuned, protocol h1",
                1.25
            ),
        ]
    );
}

#[test]
fn capacities_pair_by_cell_with_the_range_their_intervals_allow() {
    let w = |name: &str, target: &str| json!({"workload": name, "target": target, "instance": target, "concurrency": 16});
    let a = [
        row(
            w("L1", "nginx"),
            3000.0,
            2800.0,
            Some(3200.0),
            SearchEnd::Converged,
        ),
        row(
            w("L2", "nginx"),
            900.0,
            850.0,
            None,
            SearchEnd::ReachedMaxRate,
        ),
        row(
            w("L3", "nginx"),
            500.0,
            400.0,
            Some(600.0),
            SearchEnd::Interrupted,
        ),
    ];
    let b = [
        row(
            w("L2", "caddy"),
            450.0,
            0.0,
            Some(500.0),
            SearchEnd::Converged,
        ),
        row(
            w("L1", "caddy"),
            1500.0,
            1400.0,
            Some(1600.0),
            SearchEnd::Converged,
        ),
        row(
            w("L3", "caddy"),
            500.0,
            400.0,
            Some(600.0),
            SearchEnd::Converged,
        ),
    ];
    let pairs = capacity_pairs(&a, &b);
    // L3 is interrupted in A: partial figures are not compared.
    assert_eq!(pairs.len(), 2);
    assert_eq!(pairs[0].cell, "workload L1, concurrency 16");
    assert_eq!(pairs[0].ratio, 2.0);
    assert_eq!(pairs[0].ratio_range, (Some(1.75), Some(3200.0 / 1400.0)));
    // Unbounded above in A, a zero lower end in B: both ends of the range open.
    assert_eq!(pairs[1].ratio, 2.0);
    assert_eq!(pairs[1].ratio_range, (Some(850.0 / 500.0), None));
    // One search each: paired even across cells.
    let one = capacity_pairs(&a[..1], &b[..1]);
    assert_eq!(one.len(), 1);
    assert_eq!(
        one[0].cell,
        "workload L1, concurrency 16 vs workload L2, concurrency 16"
    );
    assert!(capacity_pairs(&a[2..], &b[2..]).is_empty());
    assert_eq!(
        SearchedCapacity::of(&a[1]).unwrap().text(),
        "at least 900 req/s (the highest step tried) (95% CI 850 .. unbounded)"
    );
}

#[test]
fn the_comparison_prints_capacities_with_their_intervals() {
    let est = |m: f64| bootstrap::Estimate {
        median: m,
        lo: m - 1.0,
        hi: m + 1.0,
    };
    let side = |run: i64, target: &str| Side {
        run: RunId(run),
        target: target.into(),
        values: vec![10.0, 11.0],
        median: est(10.5),
        left_out: crate::answer::LeftOut::default(),
        unmatched: 0,
        repeated: true,
    };
    let cell = json!({"workload": "root", "concurrency": 16});
    let c = Comparison {
        metric: Metric::Rps,
        a: side(1, "nginx"),
        b: side(2, "caddy"),
        points: vec!["w".into()],
        ratio: Some(est(1.0)),
        single_ratio: Some(1.0),
        answer: "No difference beyond noise.".into(),
        capacities: capacity_pairs(
            &[row(
                cell.clone(),
                3000.0,
                2900.0,
                Some(3100.0),
                SearchEnd::Converged,
            )],
            &[row(cell, 1500.0, 1450.0, None, SearchEnd::ReachedMaxRate)],
        ),
    };
    let text = c.to_string();
    assert!(
        text.ends_with("\ncapacity by search (workload root, concurrency 16): A 3000 req/s (95% CI 2900 .. 3100), B at least 1500 req/s (the highest step tried) (95% CI 1450 .. unbounded); A/B 2.000 (the two intervals allow 0 .. 2.138; one search each: neither interval covers the spread from one search to the next)"),
        "{text}"
    );
}

#[test]
fn figures_pick_the_headline_latency() {
    let closed = json!({"model": {"kind": "closed"}, "throughput": {"requests_per_s": 10.0},
        "latency": {"service_time": {"p99_ms": 2.0}, "response_time": {"p99_ms": 9.0}}});
    let open = json!({"model": {"kind": "open", "rate_per_s": 5.0},
        "latency": {"service_time": {"p99_ms": 2.0}, "response_time": {"p99_ms": 9.0}}});
    assert_eq!(figure(&closed, Metric::Rps), Some(10.0));
    assert_eq!(figure(&closed, Metric::P99), Some(2.0));
    assert_eq!(figure(&open, Metric::P99), Some(9.0));
    assert_eq!(figure(&open, Metric::Rps), None);
    assert_eq!(Metric::parse("p99"), Some(Metric::P99));
    assert_eq!(Metric::parse("p50"), None);
}

/// A cell searched three times in each run (`[search] passes = 3`) is one pair, its
/// searches taken together on each side: the lower median search inside the envelope of
/// their intervals, never pass 1 of A against pass 1 of B.
#[test]
fn a_cells_passes_are_pooled_before_pairing() {
    let cell = |target: &str, pass: u32| json!({"workload": "root", "target": target, "concurrency": 16, "pass": pass, "passes": 3});
    let conv = SearchEnd::Converged;
    let a = [
        row(cell("apache", 0), 6200.0, 6000.0, Some(6400.0), conv),
        row(cell("apache", 1), 5400.0, 5300.0, Some(5600.0), conv),
        row(cell("apache", 2), 8400.0, 8200.0, None, conv),
    ];
    let b = [
        row(cell("nginx", 0), 3000.0, 2900.0, Some(3100.0), conv),
        row(cell("nginx", 1), 2800.0, 2600.0, Some(3000.0), conv),
        row(cell("nginx", 2), 3200.0, 3100.0, Some(3300.0), conv),
    ];
    let pairs = capacity_pairs(&a, &b);
    assert_eq!(pairs.len(), 1, "{pairs:?}");
    let p = &pairs[0];
    assert_eq!(p.cell, "workload root, concurrency 16");
    // Lower medians: 6200 of {5400, 6200, 8400}, 3000 of {2800, 3000, 3200}.
    assert_eq!((p.a.rps, p.b.rps), (6200.0, 3000.0));
    assert_eq!((p.a.searches, p.b.searches), (3, 3));
    // The envelopes: A [5300, open above], B [2600, 3300].
    assert_eq!((p.a.lo_rps, p.a.hi_rps), (5300.0, None));
    assert_eq!((p.b.lo_rps, p.b.hi_rps), (2600.0, Some(3300.0)));
    assert_eq!(p.ratio_range, (Some(5300.0 / 3300.0), None));
    assert!(
        p.a.text().contains("the lower median of 3 searches"),
        "{}",
        p.a.text()
    );
    assert_eq!(
        p.spread_text(),
        "each side the envelope of its searches' intervals"
    );
    // One side searched once: said.
    let single = capacity_pairs(&a[..1], &b);
    assert_eq!(single.len(), 1);
    assert!(single[0]
        .spread_text()
        .starts_with("one side is a single search"));
}
