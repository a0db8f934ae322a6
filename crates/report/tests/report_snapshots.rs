//! Snapshots (insta) of the text a person reads: the whole Markdown report of a rate
//! sweep, a concurrency grid and a capacity search, and the HTML report's headline and
//! one-sentence answer. The stores are built by `common` with fixed figures and times,
//! so any change in these outputs shows as a diff to review
//! (`INSTA_UPDATE=always cargo test -p volley-report --test report_snapshots` rewrites them).

use crate::common;

use volley_report::{headline, load, markdown::Markdown, ReportFormat, Selector};
use volley_store::Store;

#[test]
fn markdown_reports() {
    let mut store = Store::open_in_memory().unwrap();
    let rates = common::rate_sweep(&mut store);
    let grid = common::concurrency_grid(&mut store);
    let search = common::search_study(&mut store);
    for (name, id) in [
        ("rate_sweep", rates),
        ("concurrency_grid", grid),
        ("search", search),
    ] {
        let md = Markdown
            .render(&load(&store, Selector::Study(id)).unwrap())
            .unwrap();
        insta::assert_snapshot!(format!("markdown_{name}"), md);
    }
}

#[test]
fn headlines_and_answers() {
    let mut store = Store::open_in_memory().unwrap();
    let rates = common::rate_sweep(&mut store);
    let grid = common::concurrency_grid(&mut store);
    let search = common::search_study(&mut store);
    let mut text = String::new();
    for id in [rates, grid, search] {
        let r = load(&store, Selector::Study(id)).unwrap();
        text.push_str(&format!("{}\n  {}\n", r.title, headline::answer(&r)));
        for l in headline::lines(&r) {
            text.push_str(&format!("  - {l}\n"));
        }
    }
    insta::assert_snapshot!(text);
}
