//! Issue 27's "percentile axis labels overlap", checked in headless Chromium: every text
//! drawn on a chart's canvas (a recorder installed first in the page) and every SVG tick
//! label, at several page widths, apart from the others and inside its chart. The
//! Chromium runs and pages are `report_html`'s.

use std::process::Stdio;

use volley_report::{html::Html, load, ReportFormat, Selector};
use volley_store::Store;

use crate::common;
use crate::report_html::{chromium_with, scratch, uplot_script};

/// Installed first in a page under test: every text drawn on a canvas is kept with its
/// ink box in canvas pixels (`measureText`'s actual bounding box, which follows the
/// context's alignment and baseline, mapped through its transform, so a label turned
/// 20 degrees is a turned box); a canvas cleared whole forgets its texts (uPlot clears
/// before each redraw, so only what is on screen is kept).
const TEXT_RECORDER: &str = r#"<script>(function(){
var P=CanvasRenderingContext2D.prototype,fill=P.fillText,clear=P.clearRect,kept=new Map();window.volleyTexts=kept;
P.clearRect=function(x,y,w,h){if(x<=0&&y<=0&&w>=this.canvas.width&&h>=this.canvas.height)kept.delete(this.canvas);return clear.apply(this,arguments);};
P.fillText=function(t,x,y){var s=String(t);if(s.trim()){var m=this.measureText(s),T=this.getTransform(),l=x-m.actualBoundingBoxLeft,r=x+m.actualBoundingBoxRight,a=y-m.actualBoundingBoxAscent,b=y+m.actualBoundingBoxDescent;
var q=[[l,a],[r,a],[r,b],[l,b]].map(function(p){return [T.a*p[0]+T.c*p[1]+T.e,T.b*p[0]+T.d*p[1]+T.f];});
if(!kept.has(this.canvas))kept.set(this.canvas,[]);kept.get(this.canvas).push({text:s,quad:q});}
return fill.apply(this,arguments);};})();</script>"#;

/// Run a second (of the page's virtual time) after the charts' script: every pair of texts on one chart canvas (tick
/// labels of every axis and the axis titles) must be apart (separating-axis test of
/// the two boxes, 0.5 px of slack for anti-aliasing) and inside the canvas; every tick
/// label of a static SVG chart (class `tick`, shown for the check as in print) must be
/// apart from every other text of its chart and inside it. Writes the counts and the
/// faults as JSON into `<pre id="volley-overlaps">`.
const OVERLAP_CHECK: &str = r#"<script>setTimeout(function(){
function apart(a,b,m){var qs=[a,b];for(var k=0;k<2;k++){var P=qs[k];for(var i=0;i<P.length;i++){var p=P[i],r=P[(i+1)%P.length],nx=r[1]-p[1],ny=p[0]-r[0],len=Math.hypot(nx,ny);if(!len)continue;
var pa=a.map(function(v){return (v[0]*nx+v[1]*ny)/len;}),pb=b.map(function(v){return (v[0]*nx+v[1]*ny)/len;});
if(Math.min.apply(null,pa)>Math.max.apply(null,pb)-m||Math.min.apply(null,pb)>Math.max.apply(null,pa)-m)return true;}}return false;}
var out={width:document.body.clientWidth,canvases:0,canvas_texts:0,svg_ticks:0,faults:[]};
window.volleyTexts.forEach(function(ts,cv){out.canvases++;out.canvas_texts+=ts.length;var u=cv.closest('.uplot'),t=u&&u.querySelector('.u-title'),name=t?t.textContent:'a canvas';
for(var i=0;i<ts.length;i++){var q=ts[i].quad;
if(q.some(function(p){return p[0]<-1||p[1]<-1||p[0]>cv.width+1||p[1]>cv.height+1;}))out.faults.push(name+': "'+ts[i].text+'" is cut by the chart\'s edge');
for(var j=i+1;j<ts.length;j++)if(!apart(q,ts[j].quad,0.5))out.faults.push(name+': "'+ts[i].text+'" overlaps "'+ts[j].text+'"');}});
document.querySelectorAll('svg.chart').forEach(function(svg){var name=svg.getAttribute('aria-label'),box=svg.getBoundingClientRect(),texts=[].slice.call(svg.querySelectorAll('text'));
texts.forEach(function(t,i){if(!t.classList.contains('tick'))return;out.svg_ticks++;var a=t.getBoundingClientRect();
if(a.left<box.left-1||a.right>box.right+1)out.faults.push(name+' (SVG): "'+t.textContent+'" is cut by the chart\'s edge');
texts.forEach(function(o,j){if(o===t||(j<i&&o.classList.contains('tick')))return;var b=o.getBoundingClientRect();
if(a.left<b.right-0.5&&b.left<a.right-0.5&&a.top<b.bottom-0.5&&b.top<a.bottom-0.5)out.faults.push(name+' (SVG): "'+t.textContent+'" overlaps "'+o.textContent+'"');});});});
var pre=document.createElement('pre');pre.id='volley-overlaps';pre.textContent=JSON.stringify(out);document.body.appendChild(pre);
},1000);</script>"#;

/// What [`OVERLAP_CHECK`] found.
#[derive(serde::Deserialize, Debug)]
struct Overlaps {
    width: u32,
    canvases: usize,
    canvas_texts: usize,
    svg_ticks: usize,
    faults: Vec<String>,
}

/// Renders `html` with its body `width` pixels wide (the charts take their width from
/// it; headless Chromium keeps its window wider than ~450 px), the text recorder
/// installed and the print-only SVG charts shown, and returns what the overlap check
/// found.
fn overlaps(html: &str, name: &str, width: u32) -> Overlaps {
    let head = html.find("<head>").expect("a head") + "<head>".len();
    let end = html.rfind("</body>").unwrap_or(html.len());
    let page_html = format!(
        "{}{TEXT_RECORDER}<style>.print-only{{display:block!important}}body{{max-width:{width}px!important}}</style>{}{OVERLAP_CHECK}{}",
        &html[..head],
        &html[head..end],
        &html[end..]
    );
    // In the test's own scratch folder, removed when it ends.
    let page = scratch(&format!("{name}-{width}.html"));
    std::fs::write(&page, page_html).unwrap();
    let (dom, log) = chromium_with(
        &page,
        &[
            "--dump-dom".to_string(),
            "--virtual-time-budget=5000".into(),
        ],
        Stdio::piped(),
    );
    const PRE: &str = "<pre id=\"volley-overlaps\">";
    let start = dom
        .find(PRE)
        .unwrap_or_else(|| panic!("{name}: the check did not run; log:\n{log}"))
        + PRE.len();
    let json = &dom[start..start + dom[start..].find("</pre>").unwrap()];
    let json = json
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{name}: {e}: {json}"))
}

/// A rate sweep with large figures (40k..160k req/s, p99 up to 1.5 s): long tick
/// labels on every axis ("160,000"), the percentile curves out to 100%.
fn large_figures(store: &mut Store) -> volley_store::StudyId {
    use common::rate_step;
    let study = store
        .begin_study(&volley_store::NewStudy {
            name: "large-figures".into(),
            file_text: "# synthetic".into(),
        })
        .unwrap();
    for (target, scale) in [("builtin", 1.0), ("nginx", 1.1)] {
        let steps: Vec<common::Step> = [40_000.0, 80_000.0, 120_000.0, 160_000.0]
            .iter()
            .map(|&rate| {
                let ok = rate < 150_000.0;
                let reply = if ok { rate } else { 0.9 * rate };
                let p99 = if ok { 0.4 * scale } else { 1500.0 * scale };
                rate_step(rate, reply, p99, "server-bound", ok)
            })
            .collect();
        common::record_run(store, Some(study), target, &steps);
    }
    store
        .finish_study(study, volley_store::Status::Complete)
        .unwrap();
    study
}

/// Issue 27's "percentile axis labels overlap": no two labels of one chart overlap or
/// leave it, on the interactive charts (read from what was drawn on their canvases) and
/// on the static SVG charts, on a wide screen and at the narrowest chart (320 px),
/// for the percentile curves (log axis, up to 7 nines), the per-second charts, the
/// per-point comparisons (turned labels) and large figures.
#[test]
fn no_two_axis_labels_overlap_on_any_chart() {
    let mut store = Store::open_in_memory().unwrap();
    let rates = common::rate_sweep(&mut store);
    let rate_html = Html
        .render(&load(&store, Selector::Study(rates)).unwrap())
        .unwrap();

    // The control: the percentile axis as it was drawn before (a tick and a label at
    // every nine, 0% .. 99.99999%) on the narrowest chart, beside two SVG tick labels
    // 10 px apart. The check must see both.
    let crowded = format!(
        r#"<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><div id="c"></div>{}<script>
function pct(k){{return (100-100*Math.pow(10,-k)).toFixed(Math.max(0,k-2))+'%';}}
new uPlot({{width:320,height:200,scales:{{x:{{time:false}}}},series:[{{}},{{stroke:'red'}}],
axes:[{{splits:function(u,ai,min,max){{var o=[];for(var k=Math.ceil(min);k<=Math.floor(max);k++)o.push(k);return o;}},values:function(u,vs){{return vs.map(pct);}}}},{{}}]}},
[[0,7],[1,2]],document.getElementById('c'));</script>
<svg class="chart" aria-label="crowded" width="300" height="100"><text class="tick" x="100" y="50" text-anchor="middle">99.9999%</text><text class="tick" x="110" y="50" text-anchor="middle">99.99999%</text></svg></body></html>"#,
        &rate_html[uplot_script(&rate_html)]
    );
    let control = overlaps(&crowded, "crowded", 1200);
    assert!(
        control
            .faults
            .iter()
            .any(|f| !f.contains("(SVG)") && f.contains("99.9999%\" overlaps")),
        "the canvas check must see the crowded percentile axis: {control:?}"
    );
    assert!(
        control
            .faults
            .iter()
            .any(|f| f.starts_with("crowded (SVG)") && f.contains("overlaps")),
        "the SVG check must see two labels 10 px apart: {control:?}"
    );

    let grid = common::concurrency_grid(&mut store);
    let variants = common::interleaved_variants(&mut store);
    let large = large_figures(&mut store);
    for (name, study) in [
        ("rate-sweep", rates),
        ("concurrency-grid", grid),
        ("interleaved-variants", variants),
        ("large-figures", large),
    ] {
        let html = Html
            .render(&load(&store, Selector::Study(study)).unwrap())
            .unwrap();
        let charts = html.matches("<div class=\"chart\"").count();
        // The widest chart (1100 px) and the narrowest (320 px, a body of 340).
        for width in [1200, 340] {
            let found = overlaps(&html, name, width);
            eprintln!(
                "{name} at {width} px: {} canvases, {} canvas texts, {} SVG tick labels",
                found.canvases, found.canvas_texts, found.svg_ticks
            );
            assert!(
                found.width <= width,
                "{name}: the body is {} px wide, not {width}",
                found.width
            );
            assert_eq!(found.canvases, charts, "{name} at {width} px: {found:?}");
            // Each chart's axes carry labels: at least two per axis, three axes.
            assert!(
                found.canvas_texts >= 6 * charts && found.svg_ticks >= 20,
                "{name} at {width} px: too few labels seen: {found:?}"
            );
            assert!(
                found.faults.is_empty(),
                "{name} at {width} px: {:#?}",
                found.faults
            );
        }
    }
}
