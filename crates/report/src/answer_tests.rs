use super::*;

fn c(name: &str, points: &[(&str, &[f64])]) -> Contender {
    Contender {
        name: name.into(),
        points: points
            .iter()
            .map(|(k, r)| Point {
                key: k.to_string(),
                runs: r.to_vec(),
            })
            .collect(),
        ..Contender::default()
    }
}

fn left(name: &str, left_out: LeftOut) -> Contender {
    Contender {
        name: name.into(),
        left_out,
        ..Contender::default()
    }
}

/// What kind of verdict, and who leads.
fn kind(v: &Verdict) -> (&'static str, Option<usize>) {
    match v {
        Verdict::Winner { best, .. } => ("winner", Some(*best)),
        Verdict::SingleRun { best, .. } => ("single run", Some(*best)),
        Verdict::NoDifference { best, .. } => ("no difference", Some(*best)),
        Verdict::Unbounded { best, .. } => ("unbounded", Some(*best)),
        Verdict::Alone { only, .. } => ("alone", Some(*only)),
        Verdict::NoFigure { .. } => ("no figure", None),
    }
}

#[test]
fn the_answer_names_a_winner_only_beyond_noise() {
    let noisy_a: &[f64] = &[100.0, 104.0, 97.0, 101.0, 99.0];
    let noisy_b: &[f64] = &[102.0, 98.0, 100.0, 96.0, 103.0];
    let faster: &[f64] = &[139.0, 141.0, 137.0, 140.0, 138.0];
    let link = LeftOut {
        link: 3,
        ..LeftOut::default()
    };
    let generator = LeftOut {
        generator: 2,
        ..LeftOut::default()
    };
    let failed = LeftOut {
        failed: 2,
        ..LeftOut::default()
    };
    let short = LeftOut {
        short: 2,
        ..LeftOut::default()
    };
    let mixed = LeftOut {
        short: 1,
        generator: 1,
        ..LeftOut::default()
    };
    // (case, contenders, verdict kind, leader, words the sentence must hold)
    type Row = (
        &'static str,
        Vec<Contender>,
        &'static str,
        Option<usize>,
        &'static str,
    );
    let table: Vec<Row> = vec![
        (
            "tie within noise",
            vec![c("a", &[("L1", noisy_a)]), c("b", &[("L1", noisy_b)])],
            "no difference",
            Some(0),
            "No difference beyond noise: a 100 req/s vs b 100: 1.00x [",
        ),
        (
            "clear winner",
            vec![
                c("default", &[("L1", noisy_a)]),
                c("tuned", &[("L1", faster)]),
            ],
            "winner",
            Some(1),
            "tuned carries: 139 req/s vs default 100: 1.39x [",
        ),
        (
            "one run per target",
            vec![c("a", &[("L1", &[14.3])]), c("b", &[("L1", &[14.0])])],
            "single run",
            Some(0),
            "a single run cannot separate figures this close; about 68 repeats of each would",
        ),
        (
            "one run per target, 0.3% apart",
            vec![c("a", &[("L1", &[995.0])]), c("b", &[("L1", &[992.0])])],
            "single run",
            Some(0),
            "a 995 req/s vs b 992 (1.00x) from one run each: closer than single runs vary, so no practical number of repeats would separate them (about 3309 of each",
        ),
        (
            "generator-bound steps are left out",
            vec![c("a", &[("L1", noisy_a)]), left("b", generator)],
            "alone",
            Some(0),
            "Only a has a figure of its own (the others: every step measured the generator",
        ),
        (
            "link-bound steps: no winner",
            vec![left("builtin", link), left("nginx", link)],
            "no figure",
            None,
            "No answer: every step was link-bound: the same shaped link",
        ),
        (
            "failures are never ranked",
            vec![left("builtin", failed), left("nginx", failed)],
            "no figure",
            None,
            "No answer: most requests of every step failed",
        ),
        (
            "steps too short for their CPU cap are left out",
            vec![c("a", &[("L1", noisy_a)]), left("builtin", short)],
            "alone",
            Some(0),
            "(the others: every step was too short for its CPU cap to hold: the figures are bursts",
        ),
        (
            "too short and generator-bound: both counted",
            vec![left("builtin", mixed), left("nginx", failed)],
            "no figure",
            None,
            "no step stands for a server (0 link-bound, 1 generator-bound or machine-stalled, 2 mostly failed, 1 too short for their CPU cap)",
        ),
        (
            "inconclusive figures on both sides: compared, and said to be",
            vec![
                Contender {
                    unsure: true,
                    ..c("a", &[("L1", noisy_a)])
                },
                Contender {
                    unsure: true,
                    ..c("b", &[("L1", noisy_b)])
                },
            ],
            "no difference",
            Some(0),
            "the interval holds 1. The figures are inconclusive: whose limit they show, the server's or volley's, is not known.",
        ),
        (
            "inconclusive figures on one side: named",
            vec![
                c("default", &[("L1", noisy_a)]),
                Contender {
                    unsure: true,
                    ..c("tuned", &[("L1", faster)])
                },
            ],
            "winner",
            Some(1),
            "(95% interval). tuned's figures are inconclusive: whose limit",
        ),
        (
            "unlike points are not compared",
            vec![c("a", &[("L1", noisy_a)]), c("b", &[("L2", faster)])],
            "no difference",
            Some(1),
            "nothing like was measured with like",
        ),
    ];
    for (case, all, want, leader, words) in table {
        let v = decide(&all);
        assert_eq!(kind(&v), (want, leader), "{case}: {v:?}");
        let s = sentence(&v, &all, "carries");
        assert!(s.contains(words), "{case}: {s}");
    }
}

#[test]
fn capacities_separate_only_when_their_intervals_do() {
    let cap = |value: f64, lo: f64, hi: Option<f64>, runs: usize| Contender {
        name: format!("c{value}"),
        capacity: Some(CapacityFigure {
            value,
            lo,
            hi,
            runs,
            searches: 0,
        }),
        ..Contender::default()
    };
    let table = [
        // Intervals apart: a winner, its ratio the range both allow.
        (
            vec![
                cap(1000.0, 950.0, Some(1050.0), 3),
                cap(2000.0, 1900.0, Some(2100.0), 3),
            ],
            "winner",
            Some(1),
        ),
        // Overlapping: no difference.
        (
            vec![
                cap(1000.0, 950.0, Some(1200.0), 3),
                cap(1100.0, 1000.0, Some(1300.0), 3),
            ],
            "no difference",
            Some(1),
        ),
        // Neither seen to fail: two lower bounds order nothing.
        (
            vec![cap(1400.0, 1400.0, None, 3), cap(1300.0, 1300.0, None, 3)],
            "unbounded",
            Some(0),
        ),
        // The lower one not seen to fail, from one run each: still no order (the
        // busy seed 001 run: "at least 1000" against "at least 1350").
        (
            vec![cap(1000.0, 1000.0, None, 1), cap(1350.0, 1350.0, None, 1)],
            "unbounded",
            Some(1),
        ),
        // The higher one bounded, the lower not: the lower may carry more.
        (
            vec![
                cap(1000.0, 1000.0, None, 3),
                cap(1300.0, 1250.0, Some(1350.0), 3),
            ],
            "unbounded",
            Some(1),
        ),
        // The lower one failed below what the higher one carried: ordered.
        (
            vec![
                cap(1000.0, 950.0, Some(1050.0), 3),
                cap(1400.0, 1400.0, None, 3),
            ],
            "winner",
            Some(1),
        ),
        // One run per rate: no interval.
        (
            vec![
                cap(1000.0, 1000.0, Some(1100.0), 1),
                cap(2000.0, 2000.0, Some(2100.0), 1),
            ],
            "single run",
            Some(1),
        ),
    ];
    for (i, (all, want, leader)) in table.iter().enumerate() {
        let v = decide(all);
        assert_eq!(kind(&v), (*want, *leader), "row {i}: {v:?}");
    }
    let two_floors = [cap(1000.0, 1000.0, None, 1), cap(1350.0, 1350.0, None, 1)];
    let words = sentence(
        &decide(&two_floors),
        &two_floors,
        "sustained the highest rate",
    );
    assert_eq!(
        words,
        "No order can be told: no server was seen to fail (c1350 at least 1,350 req/s, c1000 at least 1,000 req/s), so each capacity is only a lower bound."
    );
}

#[test]
fn one_search_each_orders_nothing_whatever_its_interval_and_passes_do() {
    // Seed 001's Apache knob search on this machine, one search each: the default 8,400
    // [8,000, 8,800] and defer_accept 7,000 [7,000, 7,200] req/s, intervals apart; an
    // earlier search had read the same default at 6,200 [6,200, 6,400].
    let searched = |name: &str, value: f64, lo: f64, hi: f64, n: usize| Contender {
        name: name.to_string(),
        capacity: Some(CapacityFigure {
            value,
            lo,
            hi: Some(hi),
            runs: n,
            searches: n,
        }),
        ..Contender::default()
    };
    let one = [
        searched("default", 8400.0, 8000.0, 8800.0, 1),
        searched("defer_accept", 7000.0, 7000.0, 7200.0, 1),
    ];
    let v = decide(&one);
    assert_eq!(kind(&v), ("single run", Some(0)), "{v:?}");
    let s = sentence(&v, &one, "carries");
    assert!(s.contains("from one search each"), "{s}");
    assert!(s.contains("[search] passes = 2 or more"), "{s}");
    assert!(!s.contains("95% interval"), "{s}");
    let k = knob_words(&v, &[one[1].clone(), one[0].clone()]);
    assert!(k.contains("from one search each: cannot separate"), "{k}");
    // Two passes each whose envelopes are apart: an order, with its interval.
    let two = [
        searched("default", 8200.0, 8000.0, 8800.0, 2),
        searched("defer_accept", 6000.0, 5800.0, 6400.0, 2),
    ];
    assert_eq!(kind(&decide(&two)), ("winner", Some(0)));
    // Two passes each whose envelopes overlap: no difference beyond noise.
    let overlap = [
        searched("default", 7300.0, 6200.0, 8800.0, 2),
        searched("sendfile", 7400.0, 7200.0, 8000.0, 2),
    ];
    assert_eq!(kind(&decide(&overlap)).0, "no difference");
    // A default whose searches each failed above their figure, one of them with an
    // interval open above (the second pass of this session's Apache search: 6,200
    // [6,200, unbounded]): its claim is bounded, so the verdict is "no difference",
    // never "no server was seen to fail".
    let open_above = [
        searched("tcp_max_syn_backlog", 7600.0, 7600.0, 9600.0, 2),
        searched("default", 5400.0, 5400.0, f64::INFINITY, 2),
    ];
    let v = decide(&open_above);
    assert_eq!(kind(&v).0, "no difference", "{v:?}");
    let s = sentence(&v, &open_above, "carries");
    assert!(!s.contains("seen to fail"), "{s}");
}
