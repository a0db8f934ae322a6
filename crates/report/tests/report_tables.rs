//! The Markdown tables and the model for known synthetic stores: exact rows.

mod common;

use volley_report::{json::Json, load, markdown::Markdown, Exporter, Selector};
use volley_store::Store;

fn md(selector: Selector, store: &Store) -> String {
    Markdown.render(&load(store, selector).unwrap()).unwrap()
}

#[test]
fn print_rate_sweep() {
    let mut store = Store::open_in_memory().unwrap();
    let a = common::rate_sweep(&mut store);
    let b = common::concurrency_grid(&mut store);
    std::fs::write("/tmp/rep/a.md", md(Selector::Study(a), &store)).unwrap();
    std::fs::write("/tmp/rep/b.md", md(Selector::Study(b), &store)).unwrap();
    let r = load(&store, Selector::Study(a)).unwrap();
    std::fs::write("/tmp/rep/a.json", Json.render(&r).unwrap()).unwrap();
    std::fs::write(
        "/tmp/rep/a.html",
        volley_report::html::Html.render(&r).unwrap(),
    )
    .unwrap();
    let r = load(&store, Selector::Study(b)).unwrap();
    std::fs::write(
        "/tmp/rep/b.html",
        volley_report::html::Html.render(&r).unwrap(),
    )
    .unwrap();
}
