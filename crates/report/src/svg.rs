//! A small inline-SVG line/point chart: linear axes with "nice" ticks, or the
//! wrk2/HdrHistogram percentile axis (x = log10(1 / (1 - p))), a legend, notes, the ideal
//! y = x line, and markers for generator-bound points. No scripts, no fonts, no network:
//! the HTML report embeds the output as is.

use crate::downsample::lttb;
use std::fmt::Write;

/// Colours for targets, in run order (Tableau 10, distinguishable and print-safe).
pub const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// The colour of the `i`-th target.
pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Lines longer than this are downsampled (LTTB) before drawing: more points than
/// horizontal pixels only make the file larger.
pub const MAX_LINE_POINTS: usize = 600;

/// How the x axis maps values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XScale {
    /// Linear.
    Linear,
    /// x values are percentiles 0..100, drawn at log10(1 / (1 - p)): 0%, 90%, 99%, 99.9%
    /// equally spaced, so the tail gets the room it deserves.
    Percentile,
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A polyline.
    Line,
    /// Dots only.
    Points,
    /// A polyline with dots.
    LinePoints,
}

/// One named series.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// CSS colour.
    pub color: String,
    /// (x, y) in data units; a non-finite point is not drawn and breaks the line there
    /// (between two steps, say).
    pub points: Vec<(f64, f64)>,
    /// Line, dots or both.
    pub style: Style,
    /// SVG dash pattern ("6 4"), for telling apart lines of one colour.
    pub dash: Option<&'static str>,
    /// Break the line where consecutive x differ by more than this (rests between steps).
    pub break_gap: Option<f64>,
}

impl Series {
    /// A series with the given style and no dash or breaks.
    pub fn new(
        name: impl Into<String>,
        color: &str,
        points: Vec<(f64, f64)>,
        style: Style,
    ) -> Self {
        Series {
            name: name.into(),
            color: color.to_string(),
            points,
            style,
            dash: None,
            break_gap: None,
        }
    }
}

/// A chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Heading inside the SVG.
    pub title: String,
    /// x-axis label with unit.
    pub x_label: String,
    /// y-axis label with unit.
    pub y_label: String,
    /// Linear or percentile x axis.
    pub x_scale: XScale,
    /// The series.
    pub series: Vec<Series>,
    /// Generator-bound points (x, y, colour): drawn as crosses, legend says why.
    pub flagged: Vec<(f64, f64, String)>,
    /// Draw the ideal y = x line (replies/s = requests/s).
    pub ideal_line: bool,
    /// Lines of explanation under the legend (latency definition, fit parameters).
    pub notes: Vec<String>,
}

const WIDTH: f64 = 900.0;
const PLOT_HEIGHT: f64 = 300.0;
const LEFT: f64 = 80.0;
/// Room right of the plot for half the last x label ("99.9999999%" is ~70 px).
const RIGHT: f64 = 44.0;
const TOP: f64 = 40.0;
const LEGEND_COLUMNS: usize = 2;

/// Escapes text for XML/HTML content and attributes (the same escaping the DAV layer
/// uses: `quick_xml`'s, which HTML5 reads as well).
pub fn escape(s: &str) -> String {
    quick_xml::escape::escape(s).into_owned()
}

/// A "nice" step (1, 2, 5 x 10^k) near `range / target_ticks`.
fn nice_step(range: f64, target_ticks: f64) -> f64 {
    let raw = range / target_ticks;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    // Round to the nearest of 1, 2, 5, 10 (geometric midpoints), so the count stays near
    // the target instead of always falling below it.
    let nice = if f < 1.5 {
        1.0
    } else if f < 3.0 {
        2.0
    } else if f < 7.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// Axis bounds widened to whole steps, and the ticks between them.
pub fn nice_ticks(min: f64, max: f64) -> (f64, f64, Vec<f64>) {
    let (min, max) = if max > min {
        (min, max)
    } else {
        (
            min - 0.5 * min.abs().max(1.0),
            max + 0.5 * max.abs().max(1.0),
        )
    };
    let step = nice_step(max - min, 6.0);
    let lo = (min / step).floor() * step;
    let hi = (max / step).ceil() * step;
    let count = ((hi - lo) / step).round() as usize;
    let ticks = (0..=count).map(|i| lo + i as f64 * step).collect();
    (lo, hi, ticks)
}

/// A tick label: k/M suffixes for large values, decimals only as the step needs.
pub fn tick_label(v: f64, step: f64) -> String {
    let a = v.abs();
    if a >= 1e6 && step >= 1e5 {
        format!("{}M", crate::model::trim_num(v / 1e6))
    } else if a >= 1e4 && step >= 1e3 {
        format!("{}k", crate::model::trim_num(v / 1e3))
    } else {
        let decimals = if step >= 1.0 {
            0
        } else {
            (-step.log10().floor()) as usize
        };
        format!("{v:.decimals$}")
    }
}

fn pct_x(p: f64) -> f64 {
    // p in percent; clamp so p = 100 does not go to infinity.
    let tail = (1.0 - p / 100.0).max(1e-9);
    (1.0 / tail).log10()
}

fn pct_label(k: i32) -> String {
    if k == 0 {
        "0%".to_string()
    } else {
        // 1 - 10^-k as a percentage with k - 2 decimals: 90%, 99%, 99.9%, ...
        let decimals = (k - 2).max(0) as usize;
        format!("{:.decimals$}%", 100.0 - 100.0 * 10f64.powi(-k))
    }
}

/// Widest a tick label may be, in pixels, at the 12 px font: ~7 px a character.
const LABEL_CHAR_PX: f64 = 7.0;

/// Ticks of a percentile axis 0..=`hi` nines, labelled so no two labels overlap: where
/// the nines crowd the axis (100% drawn at 99.9999999%), every other one is unlabelled.
fn pct_ticks(hi: i32) -> Vec<(f64, String)> {
    let spacing = (WIDTH - LEFT - RIGHT) / f64::from(hi.max(1));
    let widest = pct_label(hi).chars().count() as f64 * LABEL_CHAR_PX;
    let every = (widest / spacing).ceil().max(1.0) as i32;
    (0..=hi)
        .map(|k| {
            let label = if k % every == 0 {
                pct_label(k)
            } else {
                String::new()
            };
            (f64::from(k), label)
        })
        .collect()
}

impl Chart {
    /// A chart with no series yet.
    pub fn new(
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
    ) -> Self {
        Chart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_scale: XScale::Linear,
            series: Vec::new(),
            flagged: Vec::new(),
            ideal_line: false,
            notes: Vec::new(),
        }
    }

    /// True when there is nothing to draw.
    pub fn is_empty(&self) -> bool {
        self.series.iter().all(|s| s.points.is_empty()) && self.flagged.is_empty()
    }

    fn tx(&self, x: f64) -> f64 {
        match self.x_scale {
            XScale::Linear => x,
            XScale::Percentile => pct_x(x),
        }
    }

    /// The axes' ranges and ticks from every finite point (y from zero: rates and
    /// latencies are non-negative, so heights compare).
    fn axes(&self) -> Axes {
        let all: Vec<(f64, f64)> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().copied())
            .chain(self.flagged.iter().map(|f| (f.0, f.1)))
            .filter(finite)
            .map(|(x, y)| (self.tx(x), y))
            .collect();
        let x_min = all.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let x_max = all.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
        let y_max = all.iter().map(|p| p.1).fold(0.0, f64::max);
        let (x_min, x_max) = if all.is_empty() {
            (0.0, 1.0)
        } else {
            (x_min, x_max)
        };
        // Rates and latencies are non-negative: the y axis starts at zero so heights compare.
        let (y_lo, y_hi, y_ticks) = nice_ticks(0.0, if y_max > 0.0 { y_max } else { 1.0 });
        let (x_lo, x_hi, x_ticks): (f64, f64, Vec<(f64, String)>) = match self.x_scale {
            XScale::Linear => {
                let lo = if x_min >= 0.0 && x_min < 0.25 * x_max {
                    0.0
                } else {
                    x_min
                };
                let (lo, hi, t) = nice_ticks(lo, x_max);
                let step = t.get(1).map_or(1.0, |b| b - t[0]);
                (
                    lo,
                    hi,
                    t.into_iter().map(|v| (v, tick_label(v, step))).collect(),
                )
            }
            XScale::Percentile => {
                let hi = x_max.ceil().max(1.0);
                (0.0, hi, pct_ticks(hi as i32))
            }
        };
        Axes {
            x_lo,
            x_hi,
            x_ticks,
            y_lo,
            y_hi,
            y_ticks,
        }
    }

    /// The ideal line, every series (lines downsampled with LTTB, points) and the
    /// generator-bound markers, inside the plot's clip group.
    fn draw_data(&self, s: &mut String, ax: &Axes) {
        let (x_lo, x_hi, y_lo, y_hi) = (ax.x_lo, ax.x_hi, ax.y_lo, ax.y_hi);
        let px = |x: f64| ax.px(x);
        let py = |y: f64| ax.py(y);
        if self.ideal_line {
            let a = x_lo.max(y_lo);
            let b = x_hi.min(y_hi).max(a);
            let _ = write!(
                s,
                r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#888" stroke-dasharray="4 4"/>"##,
                px(a),
                py(a),
                px(b),
                py(b)
            );
        }
        for series in &self.series {
            let all: Vec<(f64, f64)> = series
                .points
                .iter()
                .map(|&(x, y)| (self.tx(x), y))
                .collect();
            let pts: Vec<(f64, f64)> = all.iter().copied().filter(finite).collect();
            let dash = series
                .dash
                .map(|d| format!(r#" stroke-dasharray="{d}""#))
                .unwrap_or_default();
            if matches!(series.style, Style::Line | Style::LinePoints) {
                let runs = all.split(|p| !finite(p)).filter(|r| !r.is_empty());
                for segment in runs.flat_map(|r| split(r, series.break_gap)) {
                    let segment = lttb(&segment, MAX_LINE_POINTS);
                    let coords: Vec<String> = segment
                        .iter()
                        .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                        .collect();
                    let _ = write!(
                        s,
                        r#"<polyline fill="none" stroke="{}" stroke-width="2"{dash} points="{}"/>"#,
                        escape(&series.color),
                        coords.join(" ")
                    );
                }
            }
            if matches!(series.style, Style::Points | Style::LinePoints) {
                for &(x, y) in &pts {
                    let _ = write!(
                        s,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{}"/>"#,
                        px(x),
                        py(y),
                        escape(&series.color)
                    );
                }
            }
        }
        for (x, y, c) in &self.flagged {
            if !(x.is_finite() && y.is_finite()) {
                continue;
            }
            let (cx, cy) = (px(self.tx(*x)), py(*y));
            let _ = write!(
                s,
                r#"<path d="M{:.1} {:.1}L{:.1} {:.1}M{:.1} {:.1}L{:.1} {:.1}" stroke="{}" stroke-width="2.5" class="generator-bound"/>"#,
                cx - 5.0,
                cy - 5.0,
                cx + 5.0,
                cy + 5.0,
                cx - 5.0,
                cy + 5.0,
                cx + 5.0,
                cy - 5.0,
                escape(c)
            );
        }
    }

    /// One legend entry per series, plus the ideal line and the generator-bound marker.
    fn legend_items(&self) -> Vec<String> {
        let mut items: Vec<String> = Vec::new();
        for series in &self.series {
            let dash = series
                .dash
                .map(|d| format!(r#" stroke-dasharray="{d}""#))
                .unwrap_or_default();
            let swatch = match series.style {
                Style::Points => format!(
                    r#"<circle cx="10" cy="-4" r="4" fill="{}"/>"#,
                    escape(&series.color)
                ),
                _ => format!(
                    r#"<line x1="0" y1="-4" x2="22" y2="-4" stroke="{}" stroke-width="2.5"{dash}/>"#,
                    escape(&series.color)
                ),
            };
            items.push(format!(
                "{swatch}<text x=\"28\" y=\"0\">{}</text>",
                escape(&series.name)
            ));
        }
        if self.ideal_line {
            items.push(r##"<line x1="0" y1="-4" x2="22" y2="-4" stroke="#888" stroke-dasharray="4 4"/><text x="28" y="0">ideal (replies = requests)</text>"##.to_string());
        }
        if !self.flagged.is_empty() {
            items.push(r##"<path d="M6 -9L16 1M6 1L16 -9" stroke="#333" stroke-width="2.5"/><text x="28" y="0">step not the server&apos;s figure (see its label)</text>"##.to_string());
        }
        items
    }

    /// The grid with its tick labels (class `tick`, which the rendered-page test reads to
    /// check that no two overlap), the plot's frame and the axis labels.
    fn draw_frame(&self, s: &mut String, ax: &Axes) {
        let (x_ticks, y_ticks) = (&ax.x_ticks, &ax.y_ticks);
        let y_step = y_ticks.get(1).map_or(1.0, |b| b - y_ticks[0]);
        let plot_w = WIDTH - LEFT - RIGHT;
        // Grid and ticks.
        for &v in y_ticks {
            let y = ax.py(v);
            let _ = write!(
                s,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e0e0e0"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT + plot_w,
                LEFT - 6.0,
                y + 4.0,
                tick_label(v, y_step)
            );
        }
        for (v, label) in x_ticks {
            let x = ax.px(*v);
            let _ = write!(
                s,
                r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#e0e0e0"/><text class="tick" x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                TOP + PLOT_HEIGHT,
                // Low enough that the first label clears the y axis's "0" at the corner.
                TOP + PLOT_HEIGHT + 20.0,
                escape(label)
            );
        }
        let _ = write!(
            s,
            r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{PLOT_HEIGHT}" fill="none" stroke="#555"/>"##
        );
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LEFT + plot_w / 2.0,
            TOP + PLOT_HEIGHT + 39.0,
            escape(&self.x_label)
        );
        let _ = write!(
            s,
            r#"<text transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            TOP + PLOT_HEIGHT / 2.0,
            escape(&self.y_label)
        );
    }

    /// The SVG document; `id` makes its clip path's id unique within an HTML page.
    pub fn render(&self, id: usize) -> String {
        let notes: Vec<String> = self
            .notes
            .iter()
            .flat_map(|n| wrap(n, NOTE_CHARS))
            .collect();
        let ax = self.axes();
        let plot_w = WIDTH - LEFT - RIGHT;
        let legend_items = self.series.len()
            + usize::from(!self.flagged.is_empty())
            + usize::from(self.ideal_line);
        let legend_rows = legend_items.div_ceil(LEGEND_COLUMNS);
        let legend_top = TOP + PLOT_HEIGHT + 52.0;
        let notes_top = legend_top + legend_rows as f64 * 18.0 + 8.0;
        let height = notes_top + notes.len() as f64 * 16.0 + 8.0;

        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{}" font-family="sans-serif" font-size="12">"#,
            escape(&self.title)
        );
        let _ = write!(
            s,
            r##"<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>"##
        );
        let _ = write!(
            s,
            r#"<text x="{}" y="22" font-size="15" font-weight="bold" text-anchor="middle">{}</text>"#,
            WIDTH / 2.0,
            escape(&self.title)
        );
        self.draw_frame(&mut s, &ax);
        // Clip data to the plot area (an ideal line or a fitted curve may leave it).
        let _ = write!(
            s,
            r#"<defs><clipPath id="clip{id}"><rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{PLOT_HEIGHT}"/></clipPath></defs><g clip-path="url(#clip{id})">"#
        );
        self.draw_data(&mut s, &ax);
        s.push_str("</g>");
        // Legend.
        let items = self.legend_items();
        let col_w = plot_w / LEGEND_COLUMNS as f64;
        for (i, item) in items.iter().enumerate() {
            let x = LEFT + (i % LEGEND_COLUMNS) as f64 * col_w;
            let y = legend_top + (i / LEGEND_COLUMNS) as f64 * 18.0;
            let _ = write!(s, r#"<g transform="translate({x:.1} {y:.1})">{item}</g>"#);
        }
        for (i, note) in notes.iter().enumerate() {
            let _ = write!(
                s,
                r##"<text x="{LEFT}" y="{:.1}" fill="#444" font-style="italic">{}</text>"##,
                notes_top + 12.0 + i as f64 * 16.0,
                escape(note)
            );
        }
        s.push_str("</svg>");
        s
    }
}

/// Both coordinates are finite (a NaN or infinity is never drawn).
fn finite(p: &(f64, f64)) -> bool {
    p.0.is_finite() && p.1.is_finite()
}

/// A chart's axes: data ranges, ticks, and the mapping into the plot's pixels.
struct Axes {
    x_lo: f64,
    x_hi: f64,
    x_ticks: Vec<(f64, String)>,
    y_lo: f64,
    y_hi: f64,
    y_ticks: Vec<f64>,
}

impl Axes {
    fn px(&self, x: f64) -> f64 {
        LEFT + (x - self.x_lo) / (self.x_hi - self.x_lo) * (WIDTH - LEFT - RIGHT)
    }

    fn py(&self, y: f64) -> f64 {
        TOP + PLOT_HEIGHT - (y - self.y_lo) / (self.y_hi - self.y_lo) * PLOT_HEIGHT
    }
}

/// Characters per note line: about the plot's width in 12 px italic sans-serif.
const NOTE_CHARS: usize = 120;

/// Breaks `text` at spaces into lines of at most `width` characters (longer words stay
/// whole).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// Splits a sorted line where x jumps by more than `gap`.
fn split(points: &[(f64, f64)], gap: Option<f64>) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
    for &p in points {
        match out.last_mut() {
            Some(seg) if gap.is_none_or(|g| p.0 - seg[seg.len() - 1].0 <= g) => seg.push(p),
            _ => out.push(vec![p]),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_ticks_cover_the_range_with_round_steps() {
        let (lo, hi, t) = nice_ticks(0.0, 1375.0);
        assert_eq!(lo, 0.0);
        assert!(hi >= 1375.0);
        assert_eq!(t[1] - t[0], 200.0);
        let (lo, hi, _) = nice_ticks(3.0, 3.0);
        assert!(lo < 3.0 && hi > 3.0, "a flat series still gets an axis");
    }

    #[test]
    fn percentile_axis_labels() {
        assert_eq!(pct_label(0), "0%");
        assert_eq!(pct_label(1), "90%");
        assert_eq!(pct_label(2), "99%");
        assert_eq!(pct_label(4), "99.99%");
        assert!((pct_x(99.0) - 2.0).abs() < 1e-9);
    }

    #[test]
    fn percentile_labels_never_overlap() {
        for hi in 1..=12 {
            let ticks = pct_ticks(hi);
            let spacing = (WIDTH - LEFT - RIGHT) / f64::from(hi);
            let labelled: Vec<&(f64, String)> = ticks.iter().filter(|t| !t.1.is_empty()).collect();
            assert!(labelled.len() >= 2, "{hi}: {ticks:?}");
            for pair in labelled.windows(2) {
                // Centred labels: half of each must fit in the gap between their ticks.
                let half_widths = (pair[0].1.chars().count() + pair[1].1.chars().count()) as f64
                    * LABEL_CHAR_PX
                    / 2.0;
                let gap = (pair[1].0 - pair[0].0) * spacing;
                assert!(half_widths < gap, "{hi}: {pair:?} overlap");
            }
        }
    }

    #[test]
    fn tick_labels_use_suffixes_and_needed_decimals() {
        assert_eq!(tick_label(20_000.0, 5_000.0), "20k");
        assert_eq!(tick_label(0.25, 0.05), "0.25");
        assert_eq!(tick_label(400.0, 100.0), "400");
    }

    #[test]
    fn long_lines_are_downsampled_when_drawn() {
        let pts: Vec<(f64, f64)> = (0..20_000).map(|i| (i as f64, (i % 17) as f64)).collect();
        let mut c = Chart::new("t", "x", "y");
        c.series.push(Series::new("s", color(0), pts, Style::Line));
        let svg = c.render(0);
        let start = svg.find("points=\"").unwrap() + 8;
        let coords = svg[start..].split('"').next().unwrap().split(' ').count();
        assert_eq!(coords, MAX_LINE_POINTS);
    }

    #[test]
    fn wrap_breaks_long_notes_at_spaces() {
        assert_eq!(wrap("aa bb cc", 5), ["aa bb", "cc"]);
        assert_eq!(wrap("short", 120), ["short"]);
        assert_eq!(wrap("toolongword x", 4), ["toolongword", "x"]);
    }

    #[test]
    fn a_non_finite_point_breaks_the_line() {
        let mut c = Chart::new("t", "x", "y");
        let pts = vec![
            (0.0, 1.0),
            (1.0, 2.0),
            (f64::NAN, f64::NAN),
            (5.0, 1.0),
            (6.0, 2.0),
        ];
        c.series.push(Series::new("s", color(0), pts, Style::Line));
        assert_eq!(c.render(0).matches("<polyline").count(), 2);
    }

    #[test]
    fn split_breaks_at_gaps_only() {
        let pts = [(0.0, 1.0), (1.0, 1.0), (10.0, 1.0), (11.0, 1.0)];
        assert_eq!(split(&pts, Some(2.0)).len(), 2);
        assert_eq!(split(&pts, None).len(), 1);
    }

    #[test]
    fn render_escapes_names_and_draws_every_part() {
        let mut c = Chart::new("t <1>", "x (s)", "y (ms)");
        c.series.push(Series::new(
            "a&b",
            color(0),
            vec![(0.0, 1.0), (1.0, 2.0)],
            Style::LinePoints,
        ));
        c.flagged.push((1.0, 1.5, color(0).into()));
        c.ideal_line = true;
        c.notes.push("note".into());
        let svg = c.render(0);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("t &lt;1&gt;") && svg.contains("a&amp;b"));
        assert!(svg.contains("<polyline") && svg.contains("<circle"));
        assert!(svg.contains("step not the server&apos;s figure"));
        assert!(svg.contains("ideal (replies = requests)"));
    }
}
