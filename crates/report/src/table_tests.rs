use super::*;

#[test]
fn median_of_odd_even_and_empty() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
    assert_eq!(median(&[]), None);
}

#[test]
fn num_shows_missing_and_non_finite_as_dash() {
    assert_eq!(num(None, 1), "-");
    assert_eq!(num(Some(f64::NAN), 1), "-");
    assert_eq!(num(Some(1.26), 1), "1.3");
}

/// A phase the links bound reads so, greyed as a generator-bound one is: its figure
/// is not the server's. The phase comes as the study stores it (`phases[]`).
#[test]
fn a_link_bound_phase_says_so_and_is_not_the_servers() {
    let stored = |link: bool| {
        let mut p = serde_json::json!({"injectors": ["inj1"], "start_s": 0, "end_s": 4,
            "requests": 500, "rps": 120.0, "mean_ms": 2.0, "errors": 0});
        if link {
            p["link_bound"] = true.into();
            p["link_reason"] = "link-bound: it moved 9.83 Mbit/s".into();
        }
        serde_json::from_value::<crate::model::PhaseRow>(p).unwrap()
    };
    let mut step = StepReport::blank();
    step.phases = vec![stored(true), stored(false)];
    let report = Report {
        schema_version: crate::SCHEMA_VERSION,
        title: "t".into(),
        study: None,
        targets: vec![TargetReport::blank("builtin", vec![step])],
    };
    let t = phases(&report).unwrap();
    let (mark, row) = &t.rows[0];
    assert_eq!(*mark, RowMark::NotServer("link-bound"));
    assert!(
        row.last()
            .unwrap()
            .contains("link-bound: it moved 9.83 Mbit/s"),
        "{row:?}"
    );
    let (mark, row) = &t.rows[1];
    assert_eq!((*mark, row.last().unwrap().as_str()), (RowMark::Plain, "-"));
}

/// A row whose figures are not the server's names whose they are: a machine-stalled or
/// link-bound step is never marked generator-bound.
#[test]
fn rows_are_marked_by_their_own_label() {
    for (label, want) in [
        (None, RowMark::Plain),
        (Some("server-bound"), RowMark::Plain),
        (Some("inconclusive"), RowMark::Plain),
        (
            Some("generator-bound"),
            RowMark::NotServer("generator-bound"),
        ),
        (
            Some("machine-stalled"),
            RowMark::NotServer("machine-stalled"),
        ),
        (Some("link-bound"), RowMark::NotServer("link-bound")),
        (Some("incomplete"), RowMark::NotServer("incomplete")),
    ] {
        assert_eq!(RowMark::of_label(label), want, "{label:?}");
    }
    let t = Table {
        id: "t",
        title: "t".into(),
        note: String::new(),
        headers: vec!["Target".into(), "Label".into()],
        rows: vec![(
            RowMark::NotServer("machine-stalled"),
            vec!["builtin".into(), "machine-stalled".into()],
        )],
    };
    let md = crate::markdown::render_table(&t);
    assert!(
        md.contains("| builtin (machine-stalled) | machine-stalled |"),
        "{md}"
    );
    assert!(!md.contains("generator-bound"), "{md}");
}
