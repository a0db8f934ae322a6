//! HTML: one self-contained file (inline CSS, SVG and scripts, no network) that opens
//! with the answer (`headline`), then interactive charts (`interactive`: uPlot, inlined;
//! comparisons first), the static SVG charts (shown in print; `interactive` redraws
//! them) and every table. Colours come from `colors`: one per target and variant. Each
//! static chart appears only when the data has its axis: a rate sweep draws replies/s vs
//! requests/s, a concurrency sweep draws throughput and p99 vs concurrency and the USL
//! fit, and so on.

use crate::colors::{self, Colors};
use crate::model::{group_name, group_of_any_series, Report, StepReport, TargetReport};
use crate::svg::{escape, Chart, Series, Style, XScale};
use crate::table::{self, median, RowMark, Table};
use crate::timeline::{self, TimePoint};
use crate::{headline, interactive, ReportError, ReportFormat};
use std::collections::BTreeMap;
use std::fmt::Write;

/// The HTML exporter.
#[derive(Debug, Default, Clone, Copy)]
pub struct Html;

/// Dash patterns telling apart lines of one target's colour (groups, percentiles):
/// colour always means the target (or variant), `crate::colors`.
const DASHES: [Option<&str>; 4] = [None, Some("8 4"), Some("2 3"), Some("10 3 2 3")];

const CSS: &str = "body{font-family:sans-serif;margin:24px;color:#222;max-width:1200px}\
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;font-size:13px;margin:8px 0}\
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}\
th{background:#f2f2f2}td:first-child,th:first-child{text-align:left}\
tr.not-server td{background:#fff1e6;color:#8a4b00}\
.note{color:#555;font-size:13px}.swatch{display:inline-block;width:12px;height:12px;margin-right:6px}\
figure{margin:16px 0}figcaption{font-size:13px;color:#555}pre{background:#f7f7f7;padding:8px;overflow:auto}";

const OPEN_DEF: &str = "response time from intended send (coordinated-omission corrected)";
const CLOSED_DEF: &str = "closed-loop service time (send to done)";

/// Which latency definitions a target's figures use, in words.
fn definition_text(t: &TargetReport) -> String {
    match (t.has_open_loop(), t.has_closed_loop()) {
        (true, true) => format!("open-loop steps: {OPEN_DEF}; closed-loop steps: {CLOSED_DEF}"),
        (false, true) => CLOSED_DEF.to_string(),
        _ => OPEN_DEF.to_string(),
    }
}

/// The latency definition of a target's headline figures, for chart notes.
fn definition(t: &TargetReport) -> String {
    format!("{}: {}", t.target, definition_text(t))
}

/// The definitions of every target; said once when they all agree.
fn definitions(report: &Report) -> Vec<String> {
    let mut texts: Vec<String> = report.targets.iter().map(definition_text).collect();
    texts.dedup();
    if texts.len() == 1 {
        return vec![format!("Latency: {}", texts[0])];
    }
    report.targets.iter().map(definition).collect()
}

/// (x, y) points of a chart.
type Points = Vec<(f64, f64)>;

/// Medians per x of `value` over non-generator-bound steps, and the generator-bound points.
fn by_x(
    steps: &[&StepReport],
    x: impl Fn(&StepReport) -> Option<f64>,
    y: impl Fn(&StepReport) -> Option<f64>,
) -> (Points, Points) {
    let mut groups: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    let mut flagged = Vec::new();
    for s in steps {
        let (Some(xv), Some(yv)) = (x(s), y(s)) else {
            continue;
        };
        if s.generator_bound() {
            flagged.push((xv, yv));
        } else {
            groups.entry(xv.to_bits()).or_default().push(yv);
        }
    }
    let mut line: Vec<(f64, f64)> = groups
        .into_iter()
        .filter_map(|(bits, v)| Some((f64::from_bits(bits), median(&v)?)))
        .collect();
    line.sort_by(|a, b| a.0.total_cmp(&b.0));
    (line, flagged)
}

/// One line per target over its rate steps.
fn rate_chart(
    report: &Report,
    title: &str,
    y_label: &str,
    y: impl Fn(&StepReport) -> Option<f64> + Copy,
) -> Option<Chart> {
    let mut c = Chart::new(title, "offered rate (requests/s)", y_label);
    let colors = Colors::of(report);
    for t in &report.targets {
        // One line per target and variant: a tuning is compared like a target.
        for key in colors.keys_of(t) {
            let steps: Vec<&StepReport> = t
                .steps
                .iter()
                .filter(|s| s.rate_rps.is_some() && colors::key(t, s) == key)
                .collect();
            let (line, flagged) = by_x(&steps, |s| s.rate_rps, y);
            let color = colors.get(key);
            if !line.is_empty() {
                c.series
                    .push(Series::new(key, color, line, Style::LinePoints));
            }
            c.flagged
                .extend(flagged.into_iter().map(|(x, y)| (x, y, color.to_string())));
        }
    }
    c.notes.push(
        "Median over repeats; crosses are steps whose figures are not the server's (generator-bound, machine-stalled or link-bound), excluded from the line.".into(),
    );
    (!c.is_empty()).then_some(c)
}

fn percentile_chart(report: &Report) -> Option<Chart> {
    let mut c = Chart::new(
        "Latency by percentile",
        "percentile (log scale of 1 / (1 - p))",
        "latency (ms)",
    );
    c.x_scale = XScale::Percentile;
    let colors = Colors::of(report);
    for t in &report.targets {
        for curve in &t.percentile_curves {
            let mut s = Series::new(
                format!(
                    "{} {} time ({} requests, {} steps)",
                    t.target, curve.kind, curve.count, curve.steps_merged
                ),
                colors.target(t),
                curve.points.clone(),
                Style::Line,
            );
            if curve.kind == "service" {
                s.dash = DASHES[1];
            }
            c.series.push(s);
        }
    }
    c.notes = definitions(report);
    c.notes.push(
        "Merged whole-step histograms of each target's steps judged for the server (generator-bound and machine-stalled ones left out).".into(),
    );
    (!c.is_empty()).then_some(c)
}

/// Concurrency steps of a target run as `key` (the target or one variant), grouped by
/// (cap, cores, keep-alive).
fn concurrency_groups<'a>(t: &'a TargetReport, key: &str) -> BTreeMap<String, Vec<&'a StepReport>> {
    let mut groups: BTreeMap<String, Vec<&StepReport>> = BTreeMap::new();
    for s in t
        .steps
        .iter()
        .filter(|s| s.rate_rps.is_none() && s.concurrency.is_some() && colors::key(t, s) == key)
        // An error is never throughput: a step whose requests mostly failed is no point.
        .filter(|s| !s.mostly_failed())
    {
        // The key already names the variant and protocol.
        let group =
            group_of_any_series(&group_name(s), s.variant.as_deref(), s.protocol.as_deref());
        groups.entry(group).or_default().push(s);
    }
    groups
}

fn concurrency_chart(
    report: &Report,
    title: &str,
    y_label: &str,
    y: impl Fn(&StepReport) -> Option<f64> + Copy,
) -> Option<Chart> {
    let mut c = Chart::new(title, "concurrency (connections)", y_label);
    let colors = Colors::of(report);
    for t in &report.targets {
        for key in colors.keys_of(t) {
            let color = colors.get(key);
            for (g, (name, steps)) in concurrency_groups(t, key).into_iter().enumerate() {
                let (line, flagged) = by_x(&steps, |s| s.concurrency.map(f64::from), y);
                let mut ns: Vec<Option<u32>> = steps.iter().map(|s| s.concurrency).collect();
                ns.sort_unstable();
                ns.dedup();
                if ns.len() < 2 {
                    // One concurrency value: no axis to draw (the table has the figures).
                    continue;
                }
                if !line.is_empty() {
                    let mut s =
                        Series::new(format!("{key}, {name}"), color, line, Style::LinePoints);
                    s.dash = DASHES[g % DASHES.len()];
                    c.series.push(s);
                }
                c.flagged
                    .extend(flagged.into_iter().map(|(x, y)| (x, y, color.to_string())));
            }
        }
    }
    (!c.is_empty()).then_some(c)
}

/// Seed 002: best throughput (over concurrency) against the CPU quota, one line per
/// series and core set (`table::cpu_share_lines`, which its table prints too).
fn cpu_share_chart(report: &Report) -> Option<Chart> {
    let mut c = Chart::new(
        "Throughput vs CPU share",
        "CPU quota (cores)",
        "requests/s (best over concurrency)",
    );
    let colors = Colors::of(report);
    let mut group = 0;
    let mut last_key = String::new();
    for l in crate::table::cpu_share_lines(report) {
        // Core sets of one series differ by dash, never by colour.
        if l.key != last_key {
            group = 0;
            last_key.clone_from(&l.key);
        }
        let mut s = Series::new(
            format!("{}, cpus {}", l.key, l.cores),
            colors.get(&l.key),
            l.points,
            Style::LinePoints,
        );
        s.dash = DASHES[group % DASHES.len()];
        group += 1;
        c.series.push(s);
    }
    (!c.is_empty()).then_some(c)
}

fn usl_chart(colors: &Colors, t: &TargetReport) -> Option<Chart> {
    let mut c = Chart::new(
        format!("{}: Universal Scalability Law fit", t.target),
        "concurrency N (connections)",
        "requests/s",
    );
    for (g, group) in t.usl.iter().enumerate() {
        let dash = DASHES[g % DASHES.len()];
        let mut pts = Series::new(
            format!("{} {} measured", t.target, group.group),
            colors.target(t),
            group.points.clone(),
            Style::Points,
        );
        pts.dash = dash;
        c.series.push(pts);
        match &group.fit {
            Ok(f) => {
                let n_max = group.points.iter().map(|p| p.0).fold(1.0, f64::max);
                let top = match f.n_star {
                    Some(n) if n.is_finite() => n_max.max(n * 1.2),
                    _ => n_max,
                }
                .min(n_max * 4.0);
                let curve: Vec<(f64, f64)> = (0..=100)
                    .map(|k| {
                        let n = 1.0 + (top - 1.0) * k as f64 / 100.0;
                        (n, f.predict(n))
                    })
                    .collect();
                let mut s = Series::new(
                    format!("{} {} fit", t.target, group.group),
                    colors.target(t),
                    curve,
                    Style::Line,
                );
                s.dash = DASHES[g % DASHES.len()];
                c.series.push(s);
                c.notes.push(format!(
                    "{}: sigma {:.4}, kappa {:.6}, N* {}, peak {} req/s, R² {:.3}",
                    group.group,
                    f.sigma,
                    f.kappa,
                    f.n_star
                        .map_or("unbounded (kappa = 0)".into(), |n| format!("{n:.1}")),
                    f.peak_rps.map_or("unbounded".into(), |p| format!("{p:.1}")),
                    f.r_squared
                ));
            }
            Err(e) => c.notes.push(format!("{}: no fit ({e})", group.group)),
        }
    }
    (!c.is_empty() && t.usl.iter().any(|g| g.fit.is_ok())).then_some(c)
}

/// Segments of points as one series: a non-finite point between two segments breaks
/// the drawn line there (`svg::Series::points`).
fn joined(segments: impl IntoIterator<Item = Vec<(f64, f64)>>) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for seg in segments {
        if !out.is_empty() {
            out.push((f64::NAN, f64::NAN));
        }
        out.extend(seg);
    }
    out
}

/// p50, p99 and max over time, per target and variant; a step shorter than a second is
/// one point (`crate::timeline`), and lines break between steps.
fn latency_over_time(colors: &Colors, t: &TargetReport) -> Option<Chart> {
    let mut c = Chart::new(
        format!("{}: per-second latency over time", t.target),
        "time since the first step started (s)",
        "latency (ms)",
    );
    for key in colors.keys_of(t) {
        let segments = timeline::segments(t.steps.iter().filter(|s| colors::key(t, s) == key));
        let pick = |f: fn(&TimePoint) -> f64| {
            joined(
                segments
                    .iter()
                    .map(|seg| seg.iter().map(|p| (p.t_s, f(p))).collect()),
            )
        };
        for (name, pts, dash) in [
            ("max", pick(|p| p.max_ms), None),
            ("p99", pick(|p| p.p99_ms), DASHES[1]),
            ("p50", pick(|p| p.p50_ms), DASHES[2]),
        ] {
            let mut s = Series::new(format!("{key} {name}"), colors.get(key), pts, Style::Line);
            s.dash = dash;
            c.series.push(s);
        }
    }
    if c.is_empty() {
        return None;
    }
    c.notes.push(definition(t));
    c.notes.push(
        "Lines break between steps; a step shorter than a second is one point, its own figures."
            .into(),
    );
    Some(c)
}

fn monitor_chart(
    report: &Report,
    title: &str,
    y_label: &str,
    y: impl Fn(&crate::model::MonitorPoint) -> Option<f64>,
) -> Option<Chart> {
    let mut c = Chart::new(title, "time since the first step started (s)", y_label);
    let colors = Colors::of(report);
    for t in &report.targets {
        let pts = joined(t.steps.iter().map(|s| {
            s.monitor
                .iter()
                .filter_map(|m| Some((m.t_s, y(m)?)))
                .collect()
        }));
        if pts.iter().any(|p| p.0.is_finite()) {
            c.series
                .push(Series::new(&t.target, colors.target(t), pts, Style::Line));
        }
    }
    (!c.is_empty()).then_some(c)
}

/// Every chart the data supports, in reading order.
pub fn charts(report: &Report) -> Vec<Chart> {
    let mut out = Vec::new();
    let mut replies = rate_chart(report, "Replies/s vs requests/s", "replies/s", |s| {
        Some(s.reply_rate_rps)
    });
    if let Some(c) = replies.as_mut() {
        c.ideal_line = true;
        for t in &report.targets {
            for cap in &t.capacity {
                if cap.capacity_rps.is_some() {
                    c.notes.push(format!(
                        "{} ({}): capacity {} (largest sustainable rate{})",
                        t.target,
                        cap.group,
                        cap.claim.text("req/s"),
                        if cap.bounded {
                            " below a failure of the server"
                        } else {
                            ""
                        }
                    ));
                }
            }
            for sc in &t.searches {
                c.notes.push(format!(
                    "{} ({}): {}",
                    t.target,
                    sc.group,
                    sc.summary_line()
                ));
            }
        }
    }
    out.extend(replies);
    out.extend(rate_chart(
        report,
        "Max open connections vs requests/s",
        "connections open at once",
        |s| s.max_open_connections.map(f64::from),
    ));
    out.extend(percentile_chart(report));
    out.extend(concurrency_chart(
        report,
        "Throughput vs concurrency",
        "requests/s",
        |s| Some(s.requests_per_s),
    ));
    if let Some(mut c) = concurrency_chart(
        report,
        "p99 latency vs concurrency",
        "p99 latency (ms)",
        |s| Some(s.latency.p99_ms),
    ) {
        c.notes = definitions(report);
        out.push(c);
    }
    out.extend(cpu_share_chart(report));
    let colors = Colors::of(report);
    for t in &report.targets {
        out.extend(usl_chart(&colors, t));
    }
    for t in &report.targets {
        out.extend(latency_over_time(&colors, t));
    }
    out.extend(monitor_chart(
        report,
        "Server CPU over time",
        "CPU (% of one CPU, user + sys)",
        |m| m.cpu_pct,
    ));
    out.extend(monitor_chart(
        report,
        "Server memory over time",
        "RSS (MiB)",
        |m| m.rss_bytes.map(|b| b as f64 / 1_048_576.0),
    ));
    out.extend(monitor_chart(
        report,
        "Server network over time",
        "transmitted (KiB/s)",
        |m| m.tx_bytes_per_s.map(|b| b / 1024.0),
    ));
    out
}

/// One table as HTML; a row whose figures are not the server's carries a class (styled
/// by CSS) and its first cell names whose they are.
pub fn render_table(t: &Table) -> String {
    let mut out = String::new();
    let _ = write!(out, "<h2 id=\"{}\">{}</h2>", t.id, escape(&t.title));
    if !t.note.is_empty() {
        let _ = write!(out, "<p class=\"note\">{}</p>", escape(&t.note));
    }
    out.push_str("<table><thead><tr>");
    for h in &t.headers {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>");
    for (mark, row) in &t.rows {
        match mark {
            RowMark::NotServer(why) => {
                let _ = write!(out, "<tr class=\"not-server {why}\">");
            }
            RowMark::Plain => out.push_str("<tr>"),
        }
        for (i, c) in row.iter().enumerate() {
            let why = match mark {
                RowMark::NotServer(why) if i == 0 => {
                    format!(" <span class=\"why\">\u{2715} {why}</span>")
                }
                _ => String::new(),
            };
            let _ = write!(out, "<td>{}{why}</td>", escape(c));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>\n");
    out
}

/// The answer first: one sentence, then a headline per target (with its knob lines).
fn headline_section(out: &mut String, report: &Report, colors: &Colors) {
    let _ = write!(
        out,
        "<section id=\"headline\"><p class=\"answer\"><b>{}</b></p><ul>",
        escape(&headline::answer(report))
    );
    for (i, line) in headline::lines(report).iter().enumerate() {
        let _ = write!(
            out,
            "<li><span class=\"swatch\" style=\"background:{}\"></span>{}",
            report.targets.get(i).map_or("#888", |t| colors.target(t)),
            escape(line)
        );
        let knobs = report.targets.get(i).map(headline::knob_lines);
        if let Some(knobs) = knobs.filter(|k| !k.is_empty()) {
            out.push_str("<ul class=\"knobs\">");
            for k in knobs {
                let _ = write!(out, "<li>{}</li>", escape(&k));
            }
            out.push_str("</ul>");
        }
        out.push_str("</li>");
    }
    out.push_str("</ul></section>\n");
}

/// One line per stored run (its target, status, steps and load), with its searches.
fn runs_list(out: &mut String, report: &Report, colors: &Colors) {
    out.push_str("<ul>");
    for t in &report.targets {
        let _ = write!(
            out,
            "<li><span class=\"swatch\" style=\"background:{}\"></span>run {} <b>{}</b> ({}, {} steps): {}",
            colors.target(t),
            t.run_id,
            escape(&t.target),
            escape(&t.status),
            t.steps.len(),
            escape(&definition(t))
        );
        if !t.searches.is_empty() {
            out.push_str("<ul>");
            for s in &t.searches {
                let _ = write!(
                    out,
                    "<li>{}: {}</li>",
                    escape(&s.group),
                    escape(&s.summary_line())
                );
            }
            out.push_str("</ul>");
        }
        out.push_str("</li>");
    }
    out.push_str("</ul>\n");
}

impl ReportFormat for Html {
    fn name(&self) -> &'static str {
        "html"
    }

    fn render(&self, report: &Report) -> Result<String, ReportError> {
        let mut out = String::new();
        let title = escape(&report.title);
        let _ = write!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>volley report: {title}</title><style>{CSS}{}</style><noscript><style>.print-only{{display:block}}</style></noscript></head><body>\n<h1>volley report: {title}</h1>\n",
            interactive::css()
        );
        let colors = Colors::of(report);
        headline_section(&mut out, report, &colors);
        if let Some(s) = &report.study {
            let _ = write!(
                out,
                "<p class=\"note\">study {} <b>{}</b>, {}</p>",
                s.id,
                escape(&s.name),
                escape(&s.status)
            );
        }
        runs_list(&mut out, report, &colors);
        for table in [table::capacity(report), table::searches(report)]
            .into_iter()
            .flatten()
        {
            out.push_str(&render_table(&table));
        }
        out.push_str(&interactive::section(report));
        let charts = charts(report);
        // The static charts: for print, and for a browser with scripts off.
        out.push_str("<div class=\"print-only\">");
        if !charts.is_empty() {
            out.push_str("<h2 id=\"charts\">Charts (static, for print)</h2>\n");
        }
        for (i, c) in charts.iter().enumerate() {
            let _ = writeln!(out, "<figure>{}</figure>", c.render(i));
        }
        out.push_str("</div>");
        for table in table::all(report)
            .iter()
            .filter(|t| t.id != "capacity" && t.id != "searches")
        {
            out.push_str(&render_table(table));
        }
        out.push_str("<h2 id=\"environment\">Environment</h2>");
        for t in &report.targets {
            let env = serde_json::to_string_pretty(&t.environment)?;
            let _ = write!(
                out,
                "<details><summary>{} (run {})</summary><pre>{}</pre></details>",
                escape(&t.target),
                t.run_id,
                escape(&env)
            );
        }
        out.push_str("\n</body></html>\n");
        Ok(out)
    }
}
