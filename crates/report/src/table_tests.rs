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
    assert_eq!(*mark, RowMark::NotTheServers("link-bound"));
    assert!(
        row.last()
            .unwrap()
            .contains("link-bound: it moved 9.83 Mbit/s"),
        "{row:?}"
    );
    let (mark, row) = &t.rows[1];
    assert_eq!((*mark, row.last().unwrap().as_str()), (RowMark::Plain, "-"));
}

/// A step's row names whose figure it is by its own label: a link-bound row once read
/// "builtin (generator-bound)" in Markdown and "x generator-bound" in HTML (seed 003
/// run 68 ms away, every row); a machine-stalled row says so too, a counted one nothing.
#[test]
fn a_row_not_the_servers_names_its_own_label() {
    let step = |label: &str| {
        let mut s = StepReport::blank();
        s.label = Some(label.into());
        s.completed = 10;
        s.ok = 10;
        s
    };
    let report = Report {
        schema_version: crate::SCHEMA_VERSION,
        title: "t".into(),
        study: None,
        targets: vec![TargetReport::blank(
            "builtin",
            vec![
                step("link-bound"),
                step("machine-stalled"),
                step("server-bound"),
            ],
        )],
    };
    let t = runs(&report).unwrap();
    let marks: Vec<RowMark> = t.rows.iter().map(|(m, _)| *m).collect();
    assert_eq!(
        marks,
        [
            RowMark::NotTheServers("link-bound"),
            RowMark::NotTheServers("machine-stalled"),
            RowMark::Plain
        ]
    );
    let md = crate::markdown::render_table(&t);
    assert!(md.contains("| builtin (link-bound) |"), "{md}");
    assert!(md.contains("| builtin (machine-stalled) |"), "{md}");
    assert!(!md.contains("generator-bound"), "{md}");
    let html = crate::html::render_table(&t);
    assert!(html.contains("<tr class=\"link-bound\">"), "{html}");
    assert!(html.contains("<tr class=\"machine-stalled\">"), "{html}");
    assert_eq!(
        RowMark::of_label(Some("generator-bound")),
        RowMark::NotTheServers("generator-bound")
    );
    assert_eq!(RowMark::of_label(Some("inconclusive")), RowMark::Plain);
    assert_eq!(RowMark::of_label(None), RowMark::Plain);
}
