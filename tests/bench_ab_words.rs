//! ab's words mean what ab means in `volley bench`'s text: "Concurrency Level" is the
//! requests at a time (connections x HTTP/2 streams), the served-within table is ab's
//! Total (connect included) under ab's heading, an open loop's table has a heading of its
//! own, and a `-d` run's requests still in flight are never called failed beside
//! "Failed requests: 0". Real servers on loopback, a few hundred requests each.

use crate::bench_cli::{volley, Mode, TestServer};
use crate::common::Served;

/// The text of a successful `volley bench ARGS`.
fn text(args: &[&str]) -> String {
    let out = volley().arg("bench").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The number after `label` on its line ("Time taken for tests:   0.151 seconds" -> 0.151).
fn figure(text: &str, label: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no line {label:?} in\n{text}"));
    line.trim_start()[label.len()..]
        .split_whitespace()
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no figure on {line:?}"))
}

/// A served directory with one small page, removed on drop (each test its own, though
/// they run at once).
struct Site(crate::common::TestDir);

fn site() -> Site {
    let dir = crate::common::fresh_dir("volley-ab-words");
    std::fs::write(dir.join("index.html"), "<p>hello</p>\n").unwrap();
    Site(dir)
}

#[test]
fn concurrency_level_counts_every_http2_stream() {
    let dir = site();
    let served = Served::start(&dir.0, &[]);
    let url = format!("{}/index.html", served.base);
    let t = text(&[&url, "--h2", "-c", "2", "--streams", "8", "-n", "400"]);
    assert!(
        t.contains("Concurrency Level:      16 (2 connection(s) x 8 HTTP/2 streams)"),
        "{t}"
    );
    // ab's "Time per request (mean)" is concurrency x time / n, with ab's concurrency.
    let (secs, n) = (
        figure(&t, "Time taken for tests:"),
        figure(&t, "Complete requests:"),
    );
    assert_eq!(n, 400.0);
    let mean = figure(&t, "Time per request:");
    let want = 16.0 * secs * 1e3 / n;
    // "Time taken" is printed to the millisecond: its rounding (0.5 ms) carries into
    // the formula; a concurrency of 2 instead of 16 would still be far outside.
    let rounding = 16.0 * 0.5 / n;
    assert!(
        (mean - want).abs() <= rounding + 0.002 + want * 0.01,
        "Time per request {mean} ms, ab's formula gives {want} ms\n{t}"
    );
    // One stream per connection: the connections are the concurrency, as in ab.
    let t = text(&[&url, "--h2", "-c", "2", "-n", "40"]);
    assert!(t.contains("Concurrency Level:      2\n"), "{t}");
}

#[test]
fn served_within_is_abs_total_and_an_open_loop_says_what_it_shows() {
    let srv = TestServer::start(Mode::Ok);
    // Without -k every request connects: ab's Total (connect + processing) differs from
    // the service time, and the table's 100% is the Total row's max.
    let t = text(&[&srv.url("/"), "-n", "200", "-c", "2"]);
    let heading = "Percentage of the requests served within a certain time (ms)";
    let at = t.find(heading).unwrap_or_else(|| panic!("{t}"));
    assert!(
        t[at + heading.len()..]
            .trim_start()
            .starts_with("[Total = Connect + Processing"),
        "{t}"
    );
    let longest = figure(&t, "100%");
    let total_max = t
        .lines()
        .find(|l| l.starts_with("Total:"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|w| w.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no Total row in\n{t}"));
    // Both from the same histogram; HdrHistogram keeps 3 significant digits.
    assert!(
        (longest - total_max).abs() <= 0.01 + total_max * 0.002,
        "100% {longest} ms vs Total max {total_max} ms\n{t}"
    );
    // An open loop has no ab table: its response times get a heading of their own.
    let t = text(&[&srv.url("/"), "--rate", "50", "-d", "1s"]);
    assert!(!t.contains(heading), "{t}");
    assert!(
        t.contains("Percentage of the requests answered within a certain time of their intended send (ms)\n  [response time"),
        "{t}"
    );
    assert!(t.contains("Initial connections:"), "{t}");
    assert!(!t.contains("Concurrency Level"), "{t}");
}

#[test]
fn requests_in_flight_at_the_end_are_not_called_failed() {
    let srv = TestServer::start(Mode::Ok);
    // A closed loop of 8 connections stopped by -d ends with requests in flight.
    let t = text(&[&srv.url("/"), "-d", "1s", "-c", "8", "-k"]);
    let failed = figure(&t, "Failed requests:");
    let in_flight = figure(&t, "Still in flight:");
    assert!(in_flight > 0.0, "{t}");
    assert!(!t.contains("counted as failed"), "{t}");
    assert!(
        t.contains(&format!(
            "Note: {in_flight} request(s) were still in flight when the run ended (neither complete nor failed)"
        )),
        "{t}"
    );
    // Whatever the note calls failed is inside the Failed requests figure.
    if let Some(at) = t.find(" request(s) timed out (counted in Failed requests)") {
        let timeouts: f64 = t[..at]
            .rsplit(' ')
            .next()
            .and_then(|w| w.parse().ok())
            .unwrap();
        assert!(timeouts <= failed, "{t}");
    }
}
