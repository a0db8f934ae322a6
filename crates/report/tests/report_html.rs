//! The HTML report opened in headless Chromium: no console messages (any console line
//! is a fault: a JS error, a blocked or missing resource), no network request (Chromium's
//! own network log), every interactive chart drawn by uPlot (the rendered DOM) on a
//! canvas that is not blank (the first series' colour in the screenshot, where the
//! static SVG charts are print-only), and the screenshot not blank. Control pages with
//! an injected JS error and without the chart library prove the checks can fail.

use crate::common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use volley_report::{html::Html, load, ReportFormat, Selector};
use volley_store::Store;

const CHROMIUM: &str = "/usr/bin/chromium";
/// Each Chromium run is killed after this: a hang guard, not a speed test. A page
/// renders in ~2 s on a quiet machine, but over 25 s at the lowest CPU share on a
/// busy one (seen in a suite run beside seven builds).
const CHROMIUM_LIMIT: Duration = Duration::from_secs(90);

thread_local! {
    /// The calling test's scratch folder, made at its first file. The test harness runs
    /// each test on a thread of its own, named after it, so tests running at once never
    /// share (or remove) each other's files, and the folder goes when the thread ends:
    /// when the test ends, and also when it panics. `VOLLEY_KEEP_REPORT` keeps it (and
    /// its pages and screenshots) for a look.
    static SCRATCH: std::cell::RefCell<Option<tempfile::TempDir>> =
        const { std::cell::RefCell::new(None) };
}

/// A file in the calling test's own scratch folder ([`SCRATCH`]).
pub(crate) fn scratch(name: &str) -> PathBuf {
    SCRATCH.with(|dir| {
        let mut dir = dir.borrow_mut();
        let dir = dir.get_or_insert_with(|| {
            let test = std::thread::current()
                .name()
                .unwrap_or("main")
                .replace("::", "-");
            tempfile::Builder::new()
                .prefix(&format!("volley-report-html-{test}-"))
                .disable_cleanup(std::env::var_os("VOLLEY_KEEP_REPORT").is_some())
                .tempdir()
                .unwrap()
        });
        dir.path().join(name)
    })
}

/// Runs headless Chromium on `page`, writing a 1200x3000 screenshot to `png`; returns its
/// stderr (the log).
fn chromium(page: &Path, png: &Path) -> String {
    chromium_with(
        page,
        &[format!("--screenshot={}", png.display())],
        Stdio::null(),
    )
    .1
}

/// Runs headless Chromium on `page` with `extra` flags; returns its stdout (when
/// `stdout` is piped) and its stderr (the log).
pub(crate) fn chromium_with(page: &Path, extra: &[String], stdout: Stdio) -> (String, String) {
    // Chromium's own scratch (a profile per run) in a directory of the run's, removed
    // when it drops, also when the run is killed. Not the test's folder: the profile's
    // socket path must stay under the 108 bytes a Unix socket's name may have.
    let own_tmp = tempfile::Builder::new()
        .prefix("volley-chromium-")
        .tempdir()
        .unwrap();
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1200,3000",
            // Chromium's own traffic (clock, dictionaries, updates) is not the page's.
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-features=SpellCheck,OptimizationHints,Translate",
            "--no-first-run",
        ])
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .env("TMPDIR", own_tmp.path())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium must be installed at /usr/bin/chromium");
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let out = child.stdout.take().map(|mut o| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = o.read_to_string(&mut s);
            s
        })
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
    let out = out.map(|h| h.join().unwrap()).unwrap_or_default();
    (out, reader.join().unwrap())
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

/// Pixels of exactly `rgb` in a PNG.
fn pixels_of(png_path: &Path, rgb: [u8; 3]) -> usize {
    let decoder = png::Decoder::new(std::fs::File::open(png_path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    buf[..info.buffer_size()]
        .chunks(channels)
        .filter(|px| px.len() >= 3 && px[..3] == rgb)
        .count()
}

/// The first series colour (`svg::PALETTE[0]`, #1f77b4), which the interactive charts
/// draw their first line in.
const FIRST_SERIES: [u8; 3] = [0x1f, 0x77, 0xb4];

/// Line pixels the screenshot must hold when the canvases are drawn. The static SVG
/// charts are print-only, so on screen only uPlot's canvases (and the headline's 12x12
/// swatch, 144 pixels) can put this colour on the page.
const MIN_CANVAS_PIXELS: usize = 600;

/// Every URL the page asked for, from Chromium's network log: request starts that carry
/// a priority other than IDLE (the browser's own background traffic, its clock, updates
/// and accounts, is IDLE; a page's resources are LOW or higher), other than the page
/// itself and `data:` URLs.
fn requests(netlog: &Path, page: &Path) -> Vec<String> {
    let log = std::fs::read_to_string(netlog).unwrap_or_default();
    let own = format!("file://{}", page.display());
    let mut out = Vec::new();
    for (at, _) in log.match_indices("\"url\":\"") {
        let object_start = log[..at].rfind('{').unwrap_or(0);
        let object = &log[object_start..at];
        let Some(p) = object.find("\"priority\":\"") else {
            continue;
        };
        if object[p..].starts_with("\"priority\":\"IDLE\"") {
            continue;
        }
        let url = log[at + 7..].split('"').next().unwrap_or("");
        if !url.starts_with(&own) && !url.starts_with("data:") {
            out.push(url.to_string());
        }
    }
    out
}

/// Opens `html` in Chromium: no console line, no request, charts drawn. Returns the
/// number of uPlot charts in the rendered DOM and the first-series pixels.
fn render(html: &str, name: &str) -> (usize, usize, String) {
    let page = scratch(&format!("{name}.html"));
    let png = scratch(&format!("{name}.png"));
    let netlog = scratch(&format!("{name}.netlog.json"));
    std::fs::write(&page, html).unwrap();
    let (_, log) = chromium_with(
        &page,
        &[
            format!("--screenshot={}", png.display()),
            format!("--log-net-log={}", netlog.display()),
        ],
        Stdio::null(),
    );
    let console = console_lines(&log);
    assert!(console.is_empty(), "{name}: console output: {console:#?}");
    let seen = requests(&netlog, &page);
    assert!(seen.is_empty(), "{name}: network requests: {seen:#?}");
    let (dom, _) = chromium_with(
        &page,
        &[
            "--dump-dom".to_string(),
            "--virtual-time-budget=5000".into(),
        ],
        Stdio::piped(),
    );
    let drawn = dom.matches("class=\"uplot").count();
    (
        drawn,
        pixels_of(&png, FIRST_SERIES),
        png.display().to_string(),
    )
}

fn check_page(html: &str, name: &str, min_charts: usize) {
    // Self-contained: scripts inline, no linked or external resources.
    assert!(!html.contains("<script src"), "{name}: no external script");
    assert!(!html.contains("<link"), "{name}: no linked resources");
    assert!(!html.contains(" src="), "{name}: no external sources");
    let without_known = html
        .replace("http://www.w3.org/", "")
        .replace("https://github.com/leeoniya/uPlot", "");
    assert!(
        !without_known.contains("http://") && !without_known.contains("https://"),
        "{name}: no network address"
    );
    let charts = html.matches("<svg").count();
    assert!(
        charts >= min_charts,
        "{name}: {charts} charts < {min_charts}"
    );
    let divs = html.matches("<div class=\"chart\"").count();
    assert!(divs >= 2, "{name}: {divs} interactive charts");

    let (drawn, pixels, png) = render(html, name);
    assert_eq!(drawn, divs, "{name}: uPlot drew {drawn} of {divs} charts");
    assert!(
        pixels >= MIN_CANVAS_PIXELS,
        "{name}: {pixels} pixels of the first series in {png}: blank canvases?"
    );
    let (width, colours, inked) = pixel_variety(Path::new(&png));
    assert_eq!(width, 1200);
    assert!(colours > 50, "{name}: only {colours} colours: blank page?");
    assert!(
        inked > 0.02,
        "{name}: only {:.3}% of pixels drawn",
        inked * 100.0
    );
}

/// Where a report page inlines uPlot: its whole `<script>` element.
pub(crate) fn uplot_script(page: &str) -> std::ops::Range<usize> {
    let start = page
        .find("<script>/*! https://github.com/leeoniya/uPlot")
        .expect("the inlined uPlot script");
    start..start + page[start..].find("</script>").unwrap() + "</script>".len()
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
    // ...and a page fetching an image (a closed loopback port) must show in the
    // network check.
    let fetching = scratch("fetching.html");
    std::fs::write(
        &fetching,
        "<!DOCTYPE html><html><body><img src=\"http://127.0.0.1:9/x.png\"></body></html>",
    )
    .unwrap();
    let netlog = scratch("fetching.netlog.json");
    chromium_with(
        &fetching,
        &[
            format!("--log-net-log={}", netlog.display()),
            "--dump-dom".into(),
        ],
        Stdio::null(),
    );
    assert_eq!(requests(&netlog, &fetching), ["http://127.0.0.1:9/x.png"]);

    let mut store = Store::open_in_memory().unwrap();
    let rates = common::rate_sweep(&mut store);

    // The canvas check's control: the same page without its chart library draws no
    // chart and no series pixels (and logs the missing `uPlot`).
    let page = Html
        .render(&load(&store, Selector::Study(rates)).unwrap())
        .unwrap();
    let lib = uplot_script(&page);
    let crippled = format!("{}{}", &page[..lib.start], &page[lib.end..]);
    let control = scratch("no-uplot.html");
    std::fs::write(&control, &crippled).unwrap();
    let (dom, log) = chromium_with(
        &control,
        &[
            "--dump-dom".to_string(),
            "--virtual-time-budget=5000".into(),
        ],
        Stdio::piped(),
    );
    assert_eq!(dom.matches("class=\"uplot").count(), 0);
    assert!(
        console_lines(&log).iter().any(|l| l.contains("uPlot")),
        "the missing library must show in the console: {log}"
    );

    let grid = common::concurrency_grid(&mut store);
    let rate_html = Html
        .render(&load(&store, Selector::Study(rates)).unwrap())
        .unwrap();
    // replies, open connections, percentiles, 2 x latency over time, CPU, memory, network.
    check_page(&rate_html, "rate-sweep", 8);
    assert!(rate_html.contains("ideal (replies = requests)"));
    assert!(
        rate_html.contains("class=\"not-server generator-bound\"")
            && rate_html.contains("\u{2715} generator-bound</span>"),
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
}

/// `#1f77b4` as the rendered page writes colours, `rgb(31, 119, 180)`.
fn rgb(hex: &str) -> String {
    let h = hex.trim_start_matches('#');
    // #888 is #888888.
    let h: String = if h.len() == 3 {
        h.chars().flat_map(|c| [c, c]).collect()
    } else {
        h.to_string()
    };
    let c = |i: usize| u8::from_str_radix(&h[i..i + 2], 16).unwrap();
    format!("rgb({}, {}, {})", c(0), c(2), c(4))
}

/// Every legend entry of the rendered page, uPlot's (its marker's border colour) and the
/// static SVG charts' (the swatch's stroke or fill): (label, `rgb(...)`).
fn legend_colours(dom: &str) -> Vec<(String, String)> {
    let between = |s: &str, a: &str, b: &str| -> Option<String> {
        let i = s.find(a)? + a.len();
        Some(s[i..i + s[i..].find(b)?].to_string())
    };
    let mut out = Vec::new();
    for row in dom.split("<tr class=\"u-series").skip(1) {
        let row = &row[..row.find("</tr>").unwrap_or(row.len())];
        let (Some(border), Some(label)) = (
            between(row, "border: ", ";"),
            between(row, "class=\"u-label\">", "</div>"),
        ) else {
            continue;
        };
        if let Some(at) = border.find("rgb(") {
            out.push((label, border[at..].to_string()));
        }
    }
    for entry in dom.split("<g transform=\"translate(").skip(1) {
        let entry = &entry[..entry.find("</g>").unwrap_or(entry.len())];
        let Some(label) = between(entry, "<text x=\"28\" y=\"0\">", "</text>") else {
            continue;
        };
        let colour =
            between(entry, "stroke=\"#", "\"").or_else(|| between(entry, "fill=\"#", "\""));
        if let Some(c) = colour {
            out.push((label.replace("&amp;", "&"), rgb(&c)));
        }
    }
    out
}

/// The rendered page's legends hold one colour per key (target, or target and variant)
/// in every chart, and different keys have different colours.
fn one_colour_per_key(dom: &str, keys: &[&str], name: &str) {
    let mut seen: std::collections::BTreeMap<&str, Vec<(String, String)>> = Default::default();
    for (label, colour) in legend_colours(dom) {
        let key = keys
            .iter()
            .filter(|k| {
                label
                    .strip_prefix(**k)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', ',']))
            })
            .max_by_key(|k| k.len());
        if let Some(k) = key {
            seen.entry(k).or_default().push((label, colour));
        }
    }
    let mut colours = Vec::new();
    for k in keys {
        let entries = seen
            .get(k)
            .unwrap_or_else(|| panic!("{name}: no legend of {k}"));
        assert!(entries.len() >= 3, "{name}: {k} in only {entries:?}");
        let first = &entries[0].1;
        for (label, c) in entries {
            assert_eq!(
                c, first,
                "{name}: {label:?} is {c}, other lines of {k} are {first}"
            );
        }
        assert!(
            !colours.contains(first),
            "{name}: {k} shares {first} with another key"
        );
        colours.push(first.clone());
    }
}

fn dom(html: &str, name: &str) -> String {
    let page = scratch(&format!("{name}.dom.html"));
    std::fs::write(&page, html).unwrap();
    chromium_with(
        &page,
        &[
            "--dump-dom".to_string(),
            "--virtual-time-budget=5000".into(),
        ],
        Stdio::piped(),
    )
    .0
}

/// The charts' data as the page carries it.
fn chart_data(html: &str) -> serde_json::Value {
    let start = html
        .find("id=\"volley-charts\">")
        .expect("the charts' data")
        + "id=\"volley-charts\">".len();
    let end = start + html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..end]).unwrap()
}

/// The (x, y) points of the line `label` of the chart titled `title`.
fn line_points(data: &serde_json::Value, title: &str, label: &str) -> Vec<(f64, Option<f64>)> {
    let chart = data
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["title"] == title)
        .unwrap_or_else(|| panic!("no chart {title:?}"));
    let line = chart["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["label"] == label)
        .unwrap_or_else(|| panic!("no line {label:?} in {title:?}"));
    line["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_f64().unwrap(), p[1].as_f64()))
        .collect()
}

#[test]
fn every_target_and_variant_keeps_its_colour_and_short_steps_keep_their_figures() {
    let mut store = Store::open_in_memory().unwrap();
    let study = common::interleaved_variants(&mut store);
    let report = load(&store, Selector::Study(study)).unwrap();
    let html = Html.render(&report).unwrap();
    // replies-less closed loop: percentiles, 2 x latency over time, at least.
    check_page(&html, "interleaved-variants", 3);
    let keys = ["builtin", "nginx", "nginx \u{b7} tuned"];
    one_colour_per_key(&dom(&html, "interleaved-variants"), &keys, "interleaved");

    // Variants on a rate sweep and CPU caps, protocols side by side: each its own key
    // through the capacity, replies, CPU-share and per-point charts.
    let tuned = common::tuned_variants(&mut store);
    let tuned_html = Html
        .render(&load(&store, Selector::Study(tuned)).unwrap())
        .unwrap();
    check_page(&tuned_html, "tuned-variants", 3);
    one_colour_per_key(
        &dom(&tuned_html, "tuned-variants"),
        &[
            "nginx \u{b7} default",
            "nginx \u{b7} tuned",
            "builtin \u{b7} h1",
            "builtin \u{b7} h2",
        ],
        "tuned-variants",
    );

    let rates = common::rate_sweep(&mut store);
    let rate_html = Html
        .render(&load(&store, Selector::Study(rates)).unwrap())
        .unwrap();
    one_colour_per_key(
        &dom(&rate_html, "rate-sweep"),
        &["builtin", "nginx"],
        "rate-sweep",
    );

    // Comparisons first: the first interactive chart compares, the time series come last.
    let data = chart_data(&html);
    let titles: Vec<&str> = data
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["title"].as_str().unwrap())
        .collect();
    assert!(
        titles[0].starts_with("Requests/s per workload and point"),
        "{titles:?}"
    );
    let first_time = titles.iter().position(|t| t.contains("over time")).unwrap();
    assert!(
        titles[..first_time]
            .iter()
            .any(|t| t.starts_with("Time per request per test")),
        "{titles:?}"
    );
    // Each 0.2 s step is one point with its table figure, never its stored second's
    // count (a fifth of it); the builtin's steps are 9000, 9150 and 9300 req/s.
    let rps = line_points(
        &data,
        "builtin: throughput and p99 over time",
        "builtin req/s",
    );
    let tiny: Vec<f64> = report.targets[0]
        .steps
        .iter()
        .filter(|s| s.workload.as_deref() == Some("tiny"))
        .map(|s| s.requests_per_s)
        .collect();
    assert_eq!(tiny.len(), 3);
    for figure in &tiny {
        assert!(
            rps.iter().any(|p| p.1 == Some(*figure)),
            "{figure} not in {rps:?}"
        );
        assert!(!rps.iter().any(|p| p.1 == Some(figure / 5.0)), "{rps:?}");
    }
    // Lines break between steps (6 steps: 5 breaks), never drop to 0 between them.
    assert_eq!(rps.iter().filter(|p| p.1.is_none()).count(), 5, "{rps:?}");
    assert!(rps.iter().all(|p| p.1 != Some(0.0)), "{rps:?}");
    // The 3.5 s steps' half last second is scaled to its half and marked.
    let partial = line_points(
        &data,
        "builtin: throughput and p99 over time",
        "builtin partial second (scaled to its length)",
    );
    assert_eq!(partial.len(), 3, "{partial:?}");
    let large: Vec<f64> = report.targets[0]
        .steps
        .iter()
        .filter(|s| s.workload.as_deref() == Some("large"))
        .map(|s| s.requests_per_s)
        .collect();
    for (p, figure) in partial.iter().zip(&large) {
        // The stored half second holds round(figure / 2) requests.
        let y = p.1.unwrap();
        assert!(
            (y - figure).abs() <= 1.0,
            "partial {y} vs the step's {figure}"
        );
    }
    // Variants are compared like targets: their own points, side by side.
    let cmp = line_points(
        &data,
        "Requests/s per workload and point (closed loop)",
        "nginx \u{b7} tuned",
    );
    assert_eq!(cmp.len(), 2, "two workloads: {cmp:?}");
}
