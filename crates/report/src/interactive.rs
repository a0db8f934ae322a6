//! The HTML report's interactive charts: uPlot (MIT, vendored in
//! `crates/report/assets/uplot`, see its README) inlined into the page with the report's
//! series as JSON, so hovering shows values, dragging zooms (double-click resets) and a
//! click on a legend entry hides a series, all offline. Per target: throughput and p99
//! second by second over the run, and the latency percentile curves. The static SVG
//! charts stay in the page for print (and when scripts are off).

use std::fmt::Write;

use serde::Serialize;

use crate::model::Report;
use crate::svg::{color, escape};

const UPLOT_JS: &str = include_str!("../assets/uplot/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../assets/uplot/uPlot.min.css");

/// The page's CSS for the charts: uPlot's own, and which charts show where (the
/// interactive ones on screen, the SVG ones in print or without scripts).
pub fn css() -> String {
    format!(
        "{UPLOT_CSS}@media screen{{.print-only{{display:none}}}}@media print{{.interactive{{display:none}}}}.interactive .chart{{margin:16px 0}}"
    )
}

/// One line of a chart.
#[derive(Serialize)]
struct Line {
    label: String,
    color: &'static str,
    /// "rps" (left axis) or "ms" (right axis).
    scale: &'static str,
}

/// One chart: x values, then one y array per line (`null` where a line has no value).
#[derive(Serialize)]
struct ChartData {
    id: String,
    title: String,
    /// "time" (seconds since the run's start) or "pct" (x = -log10(1 - p)).
    kind: &'static str,
    lines: Vec<Line>,
    data: Vec<Vec<Option<f64>>>,
}

/// x of a percentile on the curve's axis: 90% -> 1, 99% -> 2, 99.9% -> 3 (the
/// wrk2/HdrHistogram plot); capped so 100% stays drawable.
fn pct_x(p: f64) -> f64 {
    -(1.0 - p / 100.0).max(1e-7).log10()
}

fn charts(report: &Report) -> Vec<ChartData> {
    let mut out = Vec::new();
    for (i, t) in report.targets.iter().enumerate() {
        let mut points: Vec<(f64, f64, f64)> = t
            .steps
            .iter()
            .flat_map(|s| s.seconds.iter())
            .map(|p| (p.t_s, p.completed as f64, p.p99_ms))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        if !points.is_empty() {
            out.push(ChartData {
                id: format!("ichart-{}-time", out.len()),
                title: format!("{}: throughput and p99 second by second", t.target),
                kind: "time",
                lines: vec![
                    Line {
                        label: "req/s".into(),
                        color: color(i),
                        scale: "rps",
                    },
                    Line {
                        label: "p99 ms".into(),
                        color: color(i + 1),
                        scale: "ms",
                    },
                ],
                data: vec![
                    points.iter().map(|p| Some(p.0)).collect(),
                    points.iter().map(|p| Some(p.1)).collect(),
                    points.iter().map(|p| Some(p.2)).collect(),
                ],
            });
        }
        for (k, c) in t.percentile_curves.iter().enumerate() {
            if c.points.is_empty() {
                continue;
            }
            out.push(ChartData {
                id: format!("ichart-{}-pct", out.len()),
                title: format!(
                    "{}: {} time by percentile ({} requests, {} steps)",
                    t.target, c.kind, c.count, c.steps_merged
                ),
                kind: "pct",
                lines: vec![Line {
                    label: format!("{} ms", c.kind),
                    color: color(i + k),
                    scale: "ms",
                }],
                data: vec![
                    c.points.iter().map(|p| Some(pct_x(p.0))).collect(),
                    c.points.iter().map(|p| Some(p.1)).collect(),
                ],
            });
        }
    }
    out
}

/// Draws every chart into its div; runs once the page is parsed.
const DRAW: &str = r#"(function(){
var D=JSON.parse(document.getElementById('volley-charts').textContent);
function pct(x){var p=100*(1-Math.pow(10,-x));return (p>=99?p.toPrecision(Math.max(2,Math.ceil(x)+1)):p.toFixed(0))+'%';}
D.forEach(function(c){
var w=Math.max(320,Math.min(1100,document.body.clientWidth-20));
var series=[{label:c.kind==='pct'?'percentile':'s',value:function(u,v){return v==null?'-':(c.kind==='pct'?pct(v):v.toFixed(0)+' s');}}];
c.lines.forEach(function(l){series.push({label:l.label,stroke:l.color,width:1.5,scale:l.scale,spanGaps:false});});
var hasRps=c.lines.some(function(l){return l.scale==='rps';});
var axes=[{values:function(u,vs){return vs.map(function(v){return c.kind==='pct'?pct(v):v+' s';});}}];
if(hasRps){axes.push({scale:'rps',label:'req/s'});}
axes.push({scale:'ms',label:'ms',side:hasRps?1:3,grid:{show:!hasRps}});
new uPlot({title:c.title,width:w,height:300,scales:{x:{time:false}},series:series,axes:axes},c.data,document.getElementById(c.id));
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
        "<section class=\"interactive\"><h2 id=\"interactive\">Charts</h2><p class=\"note\">Hover for values, drag to zoom (double-click resets), click a legend entry to hide its line.</p>\n",
    );
    for c in &charts {
        let _ = writeln!(
            out,
            "<div class=\"chart\" id=\"{}\" aria-label=\"{}\"></div>",
            c.id,
            escape(&c.title)
        );
    }
    // `<`, `>` and `&` escaped so no name can close the script element.
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
}
