//! The HTML report opened in headless Chromium: no console messages (the page has no
//! script, so any console line is a fault: a JS error, a blocked or missing resource),
//! and the screenshot is not blank. A control page with an injected JS error proves the
//! console check can fail.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use volley_report::{html::Html, load, ReportFormat, Selector};
use volley_store::Store;

const CHROMIUM: &str = "/usr/bin/chromium";
/// Each Chromium run is killed after this; a page without scripts renders in ~2 s.
const CHROMIUM_LIMIT: Duration = Duration::from_secs(25);

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("volley-report-html-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Runs headless Chromium on `page`, writing a 1200x3000 screenshot to `png`; returns its
/// stderr (the log).
fn chromium(page: &Path, png: &Path) -> String {
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1200,3000",
        ])
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium must be installed at /usr/bin/chromium");
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > CHROMIUM_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {CHROMIUM_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap()
}

/// Console lines in a Chromium log ("INFO:CONSOLE:1] "Uncaught ..."", "ERROR:CONSOLE").
fn console_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .collect()
}

/// Distinct colours and the share of non-white pixels of a PNG.
fn pixel_variety(png_path: &Path) -> (usize, usize, f64) {
    let decoder = png::Decoder::new(std::fs::File::open(png_path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let bytes = &buf[..info.buffer_size()];
    let mut colours = std::collections::HashSet::new();
    let mut non_white = 0usize;
    let pixels = bytes.len() / channels;
    for px in bytes.chunks(channels) {
        let rgb = (
            px[0],
            px[1],
            *px.get(1).unwrap_or(&0),
            *px.get(2).unwrap_or(&0),
        );
        colours.insert(rgb);
        if px[..channels.min(3)].iter().any(|&c| c < 240) {
            non_white += 1;
        }
    }
    (
        info.width as usize,
        colours.len(),
        non_white as f64 / pixels as f64,
    )
}

fn check_page(html: &str, name: &str, min_charts: usize) {
    // Self-contained: no scripts, no external resources.
    assert!(!html.contains("<script"), "{name}: no script");
    assert!(!html.contains("<link"), "{name}: no linked resources");
    assert!(!html.contains("src="), "{name}: no external sources");
    let without_xmlns = html.replace("http://www.w3.org/2000/svg", "");
    assert!(
        !without_xmlns.contains("http://") && !without_xmlns.contains("https://"),
        "{name}: no network address"
    );
    let charts = html.matches("<svg").count();
    assert!(
        charts >= min_charts,
        "{name}: {charts} charts < {min_charts}"
    );

    let page = scratch(&format!("{name}.html"));
    let png = scratch(&format!("{name}.png"));
    std::fs::write(&page, html).unwrap();
    let log = chromium(&page, &png);
    let console = console_lines(&log);
    assert!(console.is_empty(), "{name}: console output: {console:#?}");
    let (width, colours, inked) = pixel_variety(&png);
    assert_eq!(width, 1200);
    assert!(colours > 50, "{name}: only {colours} colours: blank page?");
    assert!(
        inked > 0.02,
        "{name}: only {:.3}% of pixels drawn",
        inked * 100.0
    );
}

#[test]
fn html_reports_render_in_chromium_without_console_errors() {
    // The control first: a page with a JS error must be caught by the same check.
    let bad = scratch("control.html");
    std::fs::write(
        &bad,
        "<!DOCTYPE html><html><body><p>x</p><script>noSuchFunction();</script></body></html>",
    )
    .unwrap();
    let log = chromium(&bad, &scratch("control.png"));
    assert!(
        console_lines(&log)
            .iter()
            .any(|l| l.contains("noSuchFunction")),
        "the console check must see an injected error; log was:\n{log}"
    );

    let mut store = Store::open_in_memory().unwrap();
    let rates = common::rate_sweep(&mut store);
    let grid = common::concurrency_grid(&mut store);
    let rate_html = Html
        .render(&load(&store, Selector::Study(rates)).unwrap())
        .unwrap();
    // replies, open connections, percentiles, 2 x latency over time, CPU, memory, network.
    check_page(&rate_html, "rate-sweep", 8);
    assert!(rate_html.contains("ideal (replies = requests)"));
    assert!(
        rate_html.contains("class=\"generator-bound\""),
        "gen-bound marked"
    );
    assert!(rate_html.contains("coordinated-omission corrected"));
    let grid_html = Html
        .render(&load(&store, Selector::Study(grid)).unwrap())
        .unwrap();
    // percentiles, throughput, p99, CPU share, USL, latency over time, CPU, memory, network.
    check_page(&grid_html, "concurrency-grid", 9);
    assert!(grid_html.contains("Universal Scalability Law fit"));
    assert!(grid_html.contains("closed-loop service time"));
    let search = common::search_study(&mut store);
    let search_html = Html
        .render(&load(&store, Selector::Study(search)).unwrap())
        .unwrap();
    check_page(&search_html, "search", 3);
    assert!(search_html.contains("capacity by search: 300 req/s, 95% CI [250, 350], 4 steps, 70 s"));
    assert!(search_html.contains("id=\"searches\""));
    assert!(search_html.contains("killed mid-search, no result stored"));
    if std::env::var_os("VOLLEY_KEEP_REPORT").is_none() {
        let _ = std::fs::remove_dir_all(scratch("x").parent().unwrap());
    }
}
