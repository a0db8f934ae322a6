//! The HTML report's interactive charts: uPlot (MIT, vendored in
//! `crates/report/assets/uplot`, see its README) inlined into the page with the report's
//! series as JSON, so hovering shows values, dragging zooms (double-click resets) and a
//! click on a legend entry hides a series, all offline.
//!
//! Reading order, comparisons first: one chart per question with every target and
//! variant side by side and its interval (capacity per group; req/s and p99 per workload
//! and point; seed 003's mean, min and max time per request per test), then the seeds'
//! figures (the static charts of `html::charts`, redrawn here: replies/s vs requests/s,
//! req/s vs CPU share, the percentile curves, ...), and only then each target's time
//! series (`crate::timeline`: short steps as one point, partial seconds marked, lines
//! broken between steps). Every line takes its colour from `crate::colors`. The static
//! SVG charts stay in the page for print (and when scripts are off).

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;
use volley_analysis::bootstrap;

use crate::colors::{self, Colors};
use crate::model::{
    best_attempts, group_of_any_series, Report, StepReport, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED,
};
use crate::svg::{escape, Chart, Style, XScale};
use crate::timeline::{self, PointKind};

const UPLOT_JS: &str = include_str!("../assets/uplot/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../assets/uplot/uPlot.min.css");

/// The page's CSS for the charts: uPlot's own, and which charts show where (the
/// interactive ones on screen, the SVG ones in print or without scripts).
pub fn css() -> String {
    format!(
        "{UPLOT_CSS}@media screen{{.print-only{{display:none}}}}@media print{{.interactive{{display:none}}}}.interactive .chart{{margin:16px 0}}"
    )
}

/// One line (or set of points) of a chart.
#[derive(Debug, Serialize)]
struct Line {
    /// Legend text; starts with the colour key (target or variant) it belongs to.
    label: String,
    color: String,
    /// "y" (left axis), or in time charts "rps" (left) and "ms" (right).
    scale: &'static str,
    /// "line", "points" or "both".
    style: &'static str,
    /// Dash pattern in pixels (empty: solid).
    dash: Vec<f64>,
    /// Hollow markers (partial seconds).
    hollow: bool,
    /// (x, y); a `null` y breaks the line there.
    points: Vec<(f64, Option<f64>)>,
    /// x values whose points are marked even on a line (whole steps, partial seconds).
    marked: Vec<f64>,
    /// Intervals drawn as whiskers: (x, lo, hi).
    whiskers: Vec<(f64, f64, f64)>,
}

impl Line {
    fn new(label: impl Into<String>, color: &str, style: &'static str) -> Line {
        Line {
            label: label.into(),
            color: color.to_string(),
            scale: "y",
            style,
            dash: Vec::new(),
            hollow: false,
            points: Vec::new(),
            marked: Vec::new(),
            whiskers: Vec::new(),
        }
    }
}

/// One chart.
#[derive(Debug, Serialize)]
struct ChartData {
    id: String,
    title: String,
    /// "xy", "time" (seconds since the run's start), "pct" (x = -log10(1 - p)) or
    /// "cat" (x = index into `categories`).
    kind: &'static str,
    x_label: String,
    y_label: String,
    /// Time charts: the right axis (latency).
    y2_label: Option<String>,
    categories: Vec<String>,
    lines: Vec<Line>,
    notes: Vec<String>,
}

impl ChartData {
    fn new(kind: &'static str, title: impl Into<String>, x: &str, y: &str) -> ChartData {
        ChartData {
            id: String::new(),
            title: title.into(),
            kind,
            x_label: x.into(),
            y_label: y.into(),
            y2_label: None,
            categories: Vec::new(),
            lines: Vec::new(),
            notes: Vec::new(),
        }
    }
}

/// x of a percentile on the curve's axis: 90% -> 1, 99% -> 2, 99.9% -> 3 (the
/// wrk2/HdrHistogram plot); capped so 100% stays drawable.
fn pct_x(p: f64) -> f64 {
    -(1.0 - p / 100.0).max(1e-7).log10()
}

/// Points with NaN separators (as the static charts break lines) as points with `null`
/// breaks, each break between its neighbours' x.
fn with_breaks(points: &[(f64, f64)], tx: impl Fn(f64) -> f64) -> Vec<(f64, Option<f64>)> {
    let mut out: Vec<(f64, Option<f64>)> = Vec::new();
    let mut pending_break = false;
    for &(x, y) in points {
        if !(x.is_finite() && y.is_finite()) {
            pending_break = !out.is_empty();
            continue;
        }
        let x = tx(x);
        if pending_break {
            if let Some(&(prev, _)) = out.last() {
                out.push(((prev + x) / 2.0, None));
            }
            pending_break = false;
        }
        out.push((x, Some(y)));
    }
    out
}

fn dash_of(d: Option<&str>) -> Vec<f64> {
    d.map(|d| {
        d.split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect()
    })
    .unwrap_or_default()
}

/// A static chart redrawn interactively: same series, colours, dashes and notes;
/// crosses (steps whose figure is not the server's) become a points series of their own.
fn from_static(c: &Chart) -> ChartData {
    let pct = c.x_scale == XScale::Percentile;
    let tx = |x: f64| if pct { pct_x(x) } else { x };
    let mut d = ChartData::new(
        if pct { "pct" } else { "xy" },
        c.title.clone(),
        &c.x_label,
        &c.y_label,
    );
    for s in &c.series {
        let mut l = Line::new(
            s.name.clone(),
            &s.color,
            match s.style {
                Style::Line => "line",
                Style::Points => "points",
                Style::LinePoints => "both",
            },
        );
        l.dash = dash_of(s.dash);
        l.points = with_breaks(&s.points, tx);
        d.lines.push(l);
    }
    let mut flagged: BTreeMap<String, Vec<(f64, Option<f64>)>> = BTreeMap::new();
    for (x, y, color) in &c.flagged {
        if x.is_finite() && y.is_finite() {
            flagged
                .entry(color.clone())
                .or_default()
                .push((tx(*x), Some(*y)));
        }
    }
    for (color, mut points) in flagged {
        let owner = c
            .series
            .iter()
            .find(|s| s.color == color)
            .map_or("", |s| s.name.as_str());
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut l = Line::new(
            format!(
                "{owner} not the server's figure (generator-bound, machine-stalled or link-bound)"
            ),
            &color,
            "points",
        );
        l.hollow = true;
        l.points = points;
        d.lines.push(l);
    }
    if c.ideal_line {
        let xs = d
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.0))
            .filter(|x| x.is_finite());
        let (lo, hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(x), b.max(x))
        });
        if lo.is_finite() {
            let mut l = Line::new("ideal (replies = requests)", "#888888", "line");
            l.dash = vec![4.0, 4.0];
            l.points = vec![(lo, Some(lo)), (hi, Some(hi))];
            d.lines.push(l);
        }
    }
    d.notes = c.notes.clone();
    d
}

/// A median and its interval over the runs of one point.
struct Figure {
    median: f64,
    interval: Option<(f64, f64)>,
}

fn figure(values: &[f64]) -> Option<Figure> {
    if values.is_empty() {
        return None;
    }
    let e = bootstrap::median_ci(values, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED);
    Some(Figure {
        median: e.median,
        interval: (values.len() >= 2).then_some((e.lo, e.hi)),
    })
}

/// x of key `k` of `n` beside category `cat`: side by side, never on top of each other.
fn side_by_side(cat: usize, k: usize, n: usize) -> f64 {
    let width = 0.7 / n.max(1) as f64;
    cat as f64 + (k as f64 - (n as f64 - 1.0) / 2.0) * width
}

/// One categorical chart: per point (category) and key, `value` over the key's steps
/// of that point that count for the server, each planned step once by its best attempt
/// (as the tables count them); where none counts, over the steps left out, as a hollow
/// point named by their label.
fn per_point_chart(
    report: &Report,
    colors: &Colors,
    title: &str,
    y_label: &str,
    steps: impl Fn(&StepReport) -> bool,
    value: impl Fn(&[&StepReport]) -> Option<Figure>,
) -> Option<ChartData> {
    let mut categories: Vec<String> = Vec::new();
    let mut by: BTreeMap<(String, String), Vec<&StepReport>> = BTreeMap::new();
    let mut keys: Vec<String> = Vec::new();
    for t in &report.targets {
        // An error is never throughput: a step whose requests mostly failed is no point.
        for s in t.steps.iter().filter(|s| steps(s) && !s.mostly_failed()) {
            // The key tells the series (target, variant, protocol) apart.
            let point = s.point_label_of_any_series();
            if !categories.contains(&point) {
                categories.push(point.clone());
            }
            let key = colors::key(t, s);
            if !keys.contains(&key) {
                keys.push(key.clone());
            }
            by.entry((key, point)).or_default().push(s);
        }
    }
    if categories.is_empty() {
        return None;
    }
    let mut d = ChartData::new("cat", title, "workload and point", y_label);
    let mut hollow_words: Vec<&str> = Vec::new();
    for (k, key) in keys.iter().enumerate() {
        let mut l = Line::new(key.clone(), colors.get(key), "points");
        // A point with no step for the server still shows, hollow, with the label that
        // says whose figure it is: a study whose every step was link-bound answers with
        // the link's figure beside each target, not with no chart at all.
        let mut other = Line::new(String::new(), colors.get(key), "points");
        other.hollow = true;
        let mut other_words: Vec<&str> = Vec::new();
        for (c, point) in categories.iter().enumerate() {
            let Some(attempts) = by.get(&(key.clone(), point.clone())) else {
                continue;
            };
            let (best, _) = best_attempts(attempts);
            let (counted, left): (Vec<&StepReport>, Vec<&StepReport>) =
                best.into_iter().partition(|s| !s.generator_bound());
            let (line, drawn) = if counted.is_empty() {
                for s in &left {
                    let word = s.label.as_deref().unwrap_or("unlabelled");
                    if !other_words.contains(&word) {
                        other_words.push(word);
                    }
                }
                (&mut other, left)
            } else {
                (&mut l, counted)
            };
            let Some(f) = value(&drawn) else { continue };
            let x = side_by_side(c, k, keys.len());
            line.points.push((x, Some(f.median)));
            if let Some((lo, hi)) = f.interval {
                line.whiskers.push((x, lo, hi));
            }
        }
        other.label = format!(
            "{key} {}: not the server's figure",
            other_words.join(" or ")
        );
        for w in other_words {
            if !hollow_words.contains(&w) {
                hollow_words.push(w);
            }
        }
        for line in [l, other] {
            if !line.points.is_empty() {
                d.lines.push(line);
            }
        }
    }
    if d.lines.is_empty() {
        return None;
    }
    if !hollow_words.is_empty() {
        d.notes.push(format!(
            "Hollow points: steps labelled {}, whose figure is not the server's (the link's, the generator's or the machine's); no answer ranks them.",
            hollow_words.join(" or ")
        ));
    }
    d.categories = categories;
    Some(d)
}

/// One series' capacity of one group.
struct CapacityPoint<'a> {
    /// The colour key (`crate::colors::key`): target, variant, protocol.
    key: String,
    /// The group without its variant and protocol: the chart's category.
    group: String,
    /// The group as stored, variant and protocol included.
    full_group: &'a str,
    rps: f64,
    /// The search's interval, when it has one.
    interval: Option<(f64, f64)>,
    /// A capacity, not "at least".
    bounded: bool,
}

impl<'a> CapacityPoint<'a> {
    /// The point of `target`'s group `full_group` (of `variant` and `protocol`).
    fn new(
        target: &str,
        full_group: &'a str,
        (variant, protocol): (&Option<String>, &Option<String>),
        rps: f64,
        interval: Option<(f64, f64)>,
        bounded: bool,
    ) -> CapacityPoint<'a> {
        CapacityPoint {
            key: colors::series_key(target, variant, protocol),
            group: group_of_any_series(full_group, variant.as_deref(), protocol.as_deref()),
            full_group,
            rps,
            interval,
            bounded,
        }
    }
}

/// Every capacity of the report: a searched group's search figure, else its sweep's.
fn capacity_points(report: &Report) -> Vec<CapacityPoint<'_>> {
    let mut rows: Vec<CapacityPoint> = Vec::new();
    for t in &report.targets {
        let first = rows.len();
        for s in t.searches.iter().filter(|s| s.finished) {
            if let Some(rps) = s.capacity_rps {
                let interval = s.ci_lo_rps.zip(s.ci_hi_rps);
                let series = (&s.variant, &s.protocol);
                let p = CapacityPoint::new(&t.target, &s.group, series, rps, interval, s.bounded);
                rows.push(p);
            }
        }
        // A group searched shows its search's figure; the sweep's is in the table.
        for cap in &t.capacity {
            let searched = rows[first..].iter().any(|r| r.full_group == cap.group);
            if let (Some(rps), false) = (cap.capacity_rps, searched) {
                let series = (&cap.variant, &cap.protocol);
                let p = CapacityPoint::new(&t.target, &cap.group, series, rps, None, cap.bounded);
                rows.push(p);
            }
        }
    }
    rows
}

/// Capacity per group, every target (variant, protocol) side by side, with the search's
/// interval.
fn capacity_chart(report: &Report, colors: &Colors) -> Option<ChartData> {
    let rows = capacity_points(report);
    if rows.is_empty() {
        return None;
    }
    let mut categories: Vec<String> = Vec::new();
    let mut keys: Vec<&str> = Vec::new();
    for r in &rows {
        if !categories.contains(&r.group) {
            categories.push(r.group.clone());
        }
        if !keys.contains(&r.key.as_str()) {
            keys.push(&r.key);
        }
    }
    let mut d = ChartData::new(
        "cat",
        "Capacity per group: every target side by side",
        "group of rate steps",
        "capacity (requests/s)",
    );
    let n = keys.len();
    for (k, key) in keys.iter().enumerate() {
        let mut bounded = Line::new(key.to_string(), colors.get(key), "points");
        let mut at_least = Line::new(
            format!("{key} at least (never seen to fail above)"),
            colors.get(key),
            "points",
        );
        at_least.hollow = true;
        for r in rows.iter().filter(|r| r.key == *key) {
            let c = categories.iter().position(|g| *g == r.group).unwrap_or(0);
            let x = side_by_side(c, k, n);
            let l = if r.bounded {
                &mut bounded
            } else {
                &mut at_least
            };
            l.points.push((x, Some(r.rps)));
            if let Some((lo, hi)) = r.interval {
                l.whiskers.push((x, lo, hi));
            }
        }
        for mut l in [bounded, at_least] {
            l.points.sort_by(|a, b| a.0.total_cmp(&b.0));
            if !l.points.is_empty() {
                d.lines.push(l);
            }
        }
    }
    d.categories = categories;
    d.notes.push(
        "Whiskers: the search's 95% interval. A ringed point is \"at least\": the server was never seen to fail above it.".into(),
    );
    Some(d)
}

/// The comparison charts, one per question.
fn comparisons(report: &Report, colors: &Colors) -> Vec<ChartData> {
    let mut out: Vec<ChartData> = Vec::new();
    out.extend(capacity_chart(report, colors));
    let interval_note = "Each point is the median over the point's runs; whiskers, its bootstrap 95% interval (none from a single run).";
    let closed = |s: &StepReport| s.closed_loop;
    let open = |s: &StepReport| !s.closed_loop;
    for (loop_name, which) in [
        ("closed loop", &closed as &dyn Fn(&StepReport) -> bool),
        ("open loop", &open),
    ] {
        let rps = per_point_chart(
            report,
            colors,
            &format!("Requests/s per workload and point ({loop_name})"),
            "requests/s",
            which,
            |steps| figure(&steps.iter().map(|s| s.requests_per_s).collect::<Vec<_>>()),
        );
        let p99 = per_point_chart(
            report,
            colors,
            &format!("p99 latency per workload and point ({loop_name})"),
            "p99 latency (ms)",
            which,
            |steps| figure(&steps.iter().map(|s| s.latency.p99_ms).collect::<Vec<_>>()),
        );
        for mut c in rps.into_iter().chain(p99) {
            c.notes.push(interval_note.into());
            out.push(c);
        }
    }
    // Seed 003: time per request, mean with its min..max, per test and server.
    if let Some(mut c) = per_point_chart(
        report,
        colors,
        "Time per request per test: mean, min and max",
        "time per request (ms)",
        |s| s.closed_loop,
        |steps| {
            let means: Vec<f64> = steps.iter().map(|s| s.latency.mean_ms).collect();
            let lo = steps
                .iter()
                .map(|s| s.latency.min_ms)
                .fold(f64::INFINITY, f64::min);
            let hi = steps.iter().map(|s| s.latency.max_ms).fold(0.0, f64::max);
            Some(Figure {
                median: crate::table::median(&means)?,
                interval: Some((lo, hi)),
            })
        },
    ) {
        c.notes.push(
            "Point: the median of the steps' mean closed-loop service time; whiskers: the fastest and slowest request of those steps."
                .into(),
        );
        out.push(c);
    }
    out
}

/// Each target's throughput and p99 over time, one colour per target and variant
/// (p99 dashed), lines broken between steps.
fn time_series(report: &Report, colors: &Colors) -> Vec<ChartData> {
    let mut out = Vec::new();
    for t in &report.targets {
        let mut d = ChartData::new(
            "time",
            format!("{}: throughput and p99 over time", t.target),
            "time since the run's first step started (s)",
            "req/s",
        );
        d.y2_label = Some("p99 ms".into());
        for key in colors.keys_of(t) {
            let segments = timeline::segments(t.steps.iter().filter(|s| colors::key(t, s) == key));
            let color = colors.get(key);
            let mut rps = Line::new(format!("{key} req/s"), color, "line");
            rps.scale = "rps";
            let mut p99 = Line::new(format!("{key} p99 ms"), color, "line");
            p99.scale = "ms";
            p99.dash = vec![6.0, 4.0];
            let mut partial = Line::new(
                format!("{key} partial second (scaled to its length)"),
                color,
                "points",
            );
            partial.scale = "rps";
            partial.hollow = true;
            for seg in &segments {
                if let (Some(prev), Some(first)) = (rps.points.last().map(|p| p.0), seg.first()) {
                    let mid = (prev + first.t_s) / 2.0;
                    rps.points.push((mid, None));
                    p99.points.push((mid, None));
                }
                for p in seg {
                    rps.points.push((p.t_s, Some(p.rps)));
                    p99.points.push((p.t_s, Some(p.p99_ms)));
                    match p.kind {
                        PointKind::Step => {
                            rps.marked.push(p.t_s);
                            p99.marked.push(p.t_s);
                        }
                        PointKind::Partial => partial.points.push((p.t_s, Some(p.rps))),
                        PointKind::Second => {}
                    }
                }
            }
            if rps.points.is_empty() {
                continue;
            }
            d.lines.push(rps);
            d.lines.push(p99);
            if !partial.points.is_empty() {
                d.lines.push(partial);
            }
        }
        if d.lines.is_empty() {
            continue;
        }
        d.notes.push(format!(
            "Lines break between steps. A step shorter than a second is one marked point (its table figures); a step's last partial second is scaled to the part it covers and ringed (under {} s: not drawn); a step whose requests mostly failed is not drawn (errors are not throughput).",
            timeline::MIN_PARTIAL_S
        ));
        out.push(d);
    }
    out
}

fn charts(report: &Report) -> Vec<ChartData> {
    let colors = Colors::of(report);
    let mut out = comparisons(report, &colors);
    // The seeds' figures: every static chart but those over time, which follow per
    // target (the latency over time is in each target's time series).
    let statics = crate::html::charts(report);
    for c in &statics {
        if !c.x_label.starts_with("time since") {
            out.push(from_static(c));
        }
    }
    out.extend(time_series(report, &colors));
    for c in &statics {
        if c.x_label.starts_with("time since") && c.title.starts_with("Server ") {
            let mut d = from_static(c);
            d.kind = "time";
            out.push(d);
        }
    }
    for (i, c) in out.iter_mut().enumerate() {
        c.id = format!("ichart-{i}");
    }
    out
}

/// Draws every chart into its div; runs once the page is parsed.
const DRAW: &str = r#"(function(){
var D=JSON.parse(document.getElementById('volley-charts').textContent);
// Tick labels never overlap: uPlot puts ticks at least an axis's `space` apart, so each
// axis's space is its widest label (measured in the axis's font: labels grow with the
// nines and the figures) plus a gap, and a y axis is as wide as its widest label.
var FONT='12px sans-serif',LINE=14,GAP=16,M=document.createElement('canvas').getContext('2d');M.font=FONT;
function textW(s){return M.measureText(String(s)).width;}
function ySize(u,vals,ai,cycle){var a=u.axes[ai];if(cycle>1)return a._size;var w=0;(vals||[]).forEach(function(v){if(v)w=Math.max(w,textW(v));});
return Math.max(50,Math.ceil(w+((a.ticks&&a.ticks.size)||10)+a.gap+4));}
function pct(x){var k=Math.round(x);if(Math.abs(x-k)<1e-9&&k>=0)return (100-100*Math.pow(10,-k)).toFixed(Math.max(0,k-2))+'%';
var p=100*(1-Math.pow(10,-x));return (p>=99?p.toPrecision(Math.max(2,Math.ceil(x)+1)):p.toFixed(0))+'%';}
function num(v){return v==null?'-':(Math.abs(v)>=100?v.toFixed(0):v.toPrecision(3));}
// One x array for all lines: where a line has no point it is undefined (uPlot spans
// it); an explicit null (a break) spreads to the undefined around it so the gap runs
// from one of the line's points to the next.
function join(c){var xs=[];c.lines.forEach(function(l){l.points.forEach(function(p){xs.push(p[0]);});});
xs.sort(function(a,b){return a-b;});xs=xs.filter(function(x,i){return i===0||x!==xs[i-1];});
var at=new Map();xs.forEach(function(x,i){at.set(x,i);});var data=[xs];
c.lines.forEach(function(l){var ys=new Array(xs.length);l.points.forEach(function(p){ys[at.get(p[0])]=p[1];});
for(var i=0;i<ys.length;i++){if(ys[i]!==null)continue;var j;for(j=i-1;j>=0&&ys[j]===undefined;j--)ys[j]=null;for(j=i+1;j<ys.length&&ys[j]===undefined;j++)ys[j]=null;i=j-1;}
data.push(ys);});
return data;}
D.forEach(function(c){
var el=document.getElementById(c.id);
var w=Math.max(320,Math.min(1100,document.body.clientWidth-20));
var data=join(c);var xs=data[0];
function xval(v){if(v==null)return '-';if(c.kind==='pct')return pct(v);if(c.kind==='cat'){var i=Math.round(v);return c.categories[i]||'';}return c.kind==='time'?v.toFixed(1)+' s':num(v);}
var series=[{label:c.x_label,value:function(u,v){return xval(v);}}];
c.lines.forEach(function(l,li){
var marked=new Set(l.marked);
var s={label:l.label,stroke:l.color,width:l.style==='points'?0:1.5,scale:l.scale,spanGaps:false,value:function(u,v){return num(v);}};
if(l.dash.length){s.dash=l.dash;}
if(l.style==='points'){s.paths=function(){return null;};}
s.points={size:l.style==='line'?8:7,width:2,stroke:l.color,fill:l.hollow?'#ffffff':l.color,space:0};
if(l.style==='line'){s.points.show=false;s.points.filter=function(u,si){var ys=u.data[si],o=[];for(var i=0;i<ys.length;i++){if(ys[i]!=null&&marked.has(xs[i]))o.push(i);}return o.length?o:null;};}
else{s.points.show=true;}
series.push(s);});
var axes=[{label:c.x_label,font:FONT,space:function(u,ai,min,max){return Math.max(50,Math.max(textW(uPlot.fmtNum(min)),textW(uPlot.fmtNum(max)))+GAP);}}];
if(c.kind==='pct'){axes[0].incrs=function(u,ai,min,max){return max-min>=2?[1,2,3,4,5,10,20]:[0.05,0.1,0.2,0.25,0.5,1,2];};
axes[0].space=function(u,ai,min,max){return Math.max(textW(pct(min)),textW(pct(max)))+GAP;};
axes[0].splits=function(u,ai,min,max,incr){var o=[];for(var v=Math.ceil(min/incr-1e-9)*incr;v<=max+1e-9;v+=incr)o.push(+v.toFixed(6));return o;};
axes[0].values=function(u,vs){return vs.map(pct);};}
else if(c.kind==='cat'){var n=c.categories.length;
axes[0].incrs=[1,2,3,4,5,10,20,50,100,1000];
// Labels turned 20 degrees are parallel strips a tick spacing x sin 20 apart: more than a
// line's height keeps them apart however long they are.
axes[0].space=Math.ceil((LINE+2)/Math.sin(Math.PI/9));
axes[0].splits=function(u,ai,min,max,incr){var o=[];for(var i=0;i<n;i+=incr)o.push(i);return o;};
// A turned label runs right and down from its tick: it is cut to the room left of
// the chart's right edge (at most 28 characters).
axes[0].values=function(u,vs){return vs.map(function(v){var t=c.categories[v]||'';if(t.length>28)t=t.slice(0,27)+'\u2026';
var room=(u.width-u.bbox.left/devicePixelRatio-u.valToPos(v,'x')-4)/Math.cos(Math.PI/9);
while(t.length>1&&textW(t)>room)t=t.slice(0,t.length-(t.slice(-1)==='\u2026'?2:1))+'\u2026';return t;});};
axes[0].rotate=-20;axes[0].size=90;}
var scales={x:{time:false}};
if(c.kind==='cat'){scales.x.range=function(){return [-0.5,c.categories.length-0.5];};
var top=0;c.lines.forEach(function(l){l.points.forEach(function(p){if(p[1]!=null)top=Math.max(top,p[1]);});l.whiskers.forEach(function(wk){top=Math.max(top,wk[2]);});});
scales.y={range:function(){return [0,top>0?top*1.08:1];}};}
if(c.kind==='time'&&c.y2_label){axes.push({scale:'rps',label:c.y_label,font:FONT,size:ySize});axes.push({scale:'ms',label:c.y2_label,side:1,grid:{show:false},font:FONT,size:ySize});}
else{axes.push({scale:'y',label:c.y_label,font:FONT,size:ySize});}
var hooks={draw:[function(u){var ctx=u.ctx;ctx.save();
c.lines.forEach(function(l,li){if(!l.whiskers.length||!u.series[li+1].show)return;
ctx.strokeStyle=l.color;ctx.lineWidth=2;ctx.beginPath();
l.whiskers.forEach(function(wk){var x=u.valToPos(wk[0],'x',true),y0=u.valToPos(wk[1],l.scale,true),y1=u.valToPos(wk[2],l.scale,true),d=5*devicePixelRatio;
ctx.moveTo(x,y0);ctx.lineTo(x,y1);ctx.moveTo(x-d,y0);ctx.lineTo(x+d,y0);ctx.moveTo(x-d,y1);ctx.lineTo(x+d,y1);});
ctx.stroke();});ctx.restore();}]};
var legend={markers:{dash:function(u,i){var d=u.series[i].dash;return d&&d.length?'dashed':'solid';}}};
new uPlot({title:c.title,width:w,height:320,scales:scales,series:series,axes:axes,hooks:hooks,legend:legend},data,el);
if(c.notes.length){var p=document.createElement('p');p.className='note';p.textContent=c.notes.join(' ');el.appendChild(p);}
});
})();"#;

/// The interactive section: a div per chart, the data, uPlot and the drawing code.
/// Empty when the report has no series to draw.
pub fn section(report: &Report) -> String {
    let charts = charts(report);
    if charts.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<section class=\"interactive\"><h2 id=\"interactive\">Comparisons</h2><p class=\"note\">Every target and variant keeps one colour in every chart. Hover for values, drag to zoom (double-click resets), click a legend entry to hide its line.</p>\n",
    );
    for c in &charts {
        let _ = writeln!(
            out,
            "<div class=\"chart\" id=\"{}\" aria-label=\"{}\"></div>",
            c.id,
            escape(&c.title)
        );
    }
    // `<`, `>` and `&` escaped so no name can close the script element; a NaN or
    // infinity (never drawn) is already `null` in serde_json's output.
    let json = crate::sanitise::json_in_script(
        &serde_json::to_string(&charts).unwrap_or_else(|_| "[]".to_string()),
    );
    let _ = write!(
        out,
        "<script type=\"application/json\" id=\"volley-charts\">{json}</script>\n<script>{UPLOT_JS}</script>\n<script>{DRAW}</script></section>\n"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_map_to_nines() {
        assert!((pct_x(90.0) - 1.0).abs() < 1e-9);
        assert!((pct_x(99.9) - 3.0).abs() < 1e-9);
        assert!(pct_x(100.0).is_finite());
    }

    #[test]
    fn breaks_become_nulls_between_their_neighbours() {
        let pts = [(0.0, 1.0), (1.0, 2.0), (f64::NAN, f64::NAN), (9.0, 3.0)];
        assert_eq!(
            with_breaks(&pts, |x| x),
            [
                (0.0, Some(1.0)),
                (1.0, Some(2.0)),
                (5.0, None),
                (9.0, Some(3.0))
            ]
        );
    }

    /// Seed 003 run 68 ms away: every step link-bound. The comparison charts still
    /// show each target's figure, hollow, named as the link's (they once vanished,
    /// leaving the report with time series only); a step that counts is a plain point.
    #[test]
    fn link_bound_points_show_hollow_and_named_not_dropped() {
        let step = |label: &str, rps: f64| {
            let mut s = StepReport::blank();
            s.workload = Some("L1".into());
            s.concurrency = Some(1);
            s.completed = 100;
            s.ok = 100;
            s.requests_per_s = rps;
            s.label = Some(label.into());
            s
        };
        let report = Report {
            schema_version: crate::SCHEMA_VERSION,
            title: "t".into(),
            study: None,
            targets: vec![
                crate::model::TargetReport::blank("builtin", vec![step("link-bound", 14.1)]),
                crate::model::TargetReport::blank("nginx", vec![step("link-bound", 14.3)]),
                crate::model::TargetReport::blank("lighttpd", vec![step("server-bound", 90.0)]),
            ],
        };
        let colors = Colors::of(&report);
        let c = comparisons(&report, &colors);
        let rps = c
            .iter()
            .find(|c| c.title.starts_with("Requests/s per workload"))
            .expect("a req/s comparison");
        let line = |label: &str| rps.lines.iter().find(|l| l.label == label);
        let b = line("builtin link-bound: not the server's figure").expect("builtin's");
        assert!(b.hollow && b.points[0].1 == Some(14.1), "{:?}", b.points);
        assert_eq!(b.color, colors.get("builtin"));
        assert!(line("nginx link-bound: not the server's figure").is_some_and(|l| l.hollow));
        let l = line("lighttpd").expect("the counted point");
        assert!(!l.hollow && l.points[0].1 == Some(90.0));
        assert!(rps
            .notes
            .iter()
            .any(|n| n.contains("Hollow points: steps labelled link-bound")));
    }

    #[test]
    fn keys_sit_side_by_side_around_their_category() {
        let xs: Vec<f64> = (0..3).map(|k| side_by_side(2, k, 3)).collect();
        assert!(xs[0] < 2.0 && (xs[1] - 2.0).abs() < 1e-9 && xs[2] > 2.0);
        assert!(xs[2] - xs[0] < 1.0, "within the category's width");
    }
}
