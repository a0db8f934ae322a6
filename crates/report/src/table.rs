//! The report's tables, built once from the model and printed by every format (Markdown
//! as pipe tables, HTML as `<table>`), so the numbers cannot differ between formats.
//!
//! Each builder returns `None` when the data has nothing for that table (a rate sweep has
//! no concurrency table). Generator-bound steps keep their row in the evidence tables,
//! marked, but their figures never stand in for the server's in the summary tables.

use crate::model::{trim_num, Report, StepReport, TargetReport};
use std::collections::BTreeMap;

mod capacity;
mod injected;
pub use capacity::{capacity, evidence, searches};
pub use injected::{injectors, office, phases};

/// How a row should stand out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowMark {
    /// Nothing special.
    Plain,
    /// A step or phase whose figures are not the server's, with the label that says
    /// whose they are (`generator-bound`, `machine-stalled`, `link-bound`,
    /// `incomplete`): the row names it, never a blanket "generator-bound".
    NotServer(&'static str),
}

impl RowMark {
    /// The mark of a step labelled `label`.
    pub fn of_label(label: Option<&str>) -> RowMark {
        volley_analysis::sustain::not_the_servers(label).map_or(RowMark::Plain, RowMark::NotServer)
    }
}

/// One table.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Anchor-friendly id (`runs`, `replies`, ...).
    pub id: &'static str,
    /// Heading.
    pub title: String,
    /// What the figures are (units, latency definition); printed under the heading.
    pub note: String,
    /// Column names with units.
    pub headers: Vec<String>,
    /// Rows of cells, already formatted.
    pub rows: Vec<(RowMark, Vec<String>)>,
}

/// A figure with `decimals` places, or "-" when missing or not finite.
pub fn num(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.decimals$}"),
        _ => "-".to_string(),
    }
}

/// Median of a slice, `None` when it is empty (the one median is
/// `volley_analysis::bootstrap::median`; this only says "no value" instead of NaN).
pub fn median(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| volley_analysis::bootstrap::median(values))
}

/// What distinguishes a step, in a few words: "rate 100/s, ka, #1", "c=4, cap 0.5, #2".
pub fn step_label(s: &StepReport) -> String {
    format!("{}, #{}", s.point_label(), s.repeat + 1)
}

fn mark(s: &StepReport) -> RowMark {
    RowMark::of_label(s.label.as_deref())
}

/// A step's figure, or none when most of its requests failed: an error is never
/// throughput, and the latency of refusals is not the server's service.
fn counted(s: &StepReport, v: f64) -> Option<f64> {
    (!s.mostly_failed()).then_some(v)
}

/// The step's label, saying why a mostly failed step shows no figure.
fn label_of(s: &StepReport) -> String {
    let label = s.label.clone().unwrap_or_else(|| "-".into());
    match s.mostly_failed() {
        true => format!("{label}; mostly failed: no figure"),
        false => label,
    }
}

fn definition_note(report: &Report) -> String {
    let open = report.targets.iter().any(|t| t.has_open_loop());
    let closed = report.targets.iter().any(|t| t.has_closed_loop());
    match (open, closed) {
        (true, true) => "Latency: response time from the intended send time (coordinated-omission corrected) for open-loop runs; service time (send to done) for closed-loop runs.".to_string(),
        (false, true) => "Latency: closed-loop service time (send to done); a closed loop has no schedule to correct against.".to_string(),
        _ => "Latency: response time from the intended send time (coordinated-omission corrected).".to_string(),
    }
}

/// Every table the report has data for, in reading order.
pub fn all(report: &Report) -> Vec<Table> {
    [
        office(report),
        capacity(report),
        searches(report),
        runs(report),
        phases(report),
        injectors(report),
        replies(report),
        open_connections(report),
        cpu_share(report),
        concurrency(report),
        usl(report),
        resources(report),
        repeats(report),
        evidence(report),
        wire(report),
        notes(report),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn steps(report: &Report) -> impl Iterator<Item = (&TargetReport, &StepReport)> {
    report
        .targets
        .iter()
        .flat_map(|t| t.steps.iter().map(move |s| (t, s)))
}

/// What each step's bytes travelled over, where there is something to say (TLS, h2,
/// h3): the handshakes by kind (full, resumed, 0-RTT over h3, each with its mean time)
/// and the protocol's events by kind, as `volley bench` prints them for one run.
pub fn wire(report: &Report) -> Option<Table> {
    let mut rows = Vec::new();
    for (t, s) in steps(report) {
        let Some(w) = &s.wire else { continue };
        let handshakes = w.handshakes();
        if handshakes.is_none() && w.events.is_empty() && w.protocol == "http/1.1" {
            continue;
        }
        rows.push((
            mark(s),
            vec![
                t.target.clone(),
                s.index.to_string(),
                step_label(s),
                w.protocol.clone(),
                handshakes.unwrap_or_else(|| "-".into()),
                w.events_text(),
            ],
        ));
    }
    (!rows.is_empty()).then(|| Table {
        id: "wire",
        title: "Wire: handshakes and protocol events".into(),
        note: "HTTP/3 handshakes by kind with their mean time (full: the certificate checked; resumed: on a session ticket; 0-RTT: resumed with requests in the first flight, which the server accepted); over TCP, the full TLS handshakes (the rest resumed). Events are the protocol's own (GOAWAY, stream resets, connection errors, idle timeouts, QPACK errors), each failed request also counted by its error kind.".into(),
        headers: ["Target", "Step", "Parameters", "Protocol", "Handshakes", "Events"]
            .map(String::from)
            .to_vec(),
        rows,
    })
}

/// What the run noted about its steps (a bus in the clear, connections the bus refused,
/// a target that died, an interrupted step...): stored with the step, so a report
/// rebuilt later says what the terminal said at the time. One row per note.
pub fn notes(report: &Report) -> Option<Table> {
    let mut rows = Vec::new();
    for (t, s) in steps(report) {
        let died = s
            .target_died
            .as_ref()
            .map(|d| format!("the target died: {d}"));
        for note in s.notes.iter().cloned().chain(died) {
            rows.push((
                mark(s),
                vec![t.target.clone(), s.index.to_string(), step_label(s), note],
            ));
        }
    }
    (!rows.is_empty()).then(|| Table {
        id: "notes",
        title: "Notes on the steps".into(),
        note: "What the run recorded about each step, beside its figures.".into(),
        headers: ["Target", "Step", "Parameters", "Note"]
            .map(String::from)
            .to_vec(),
        rows,
    })
}

/// Seed 003: per step, total time, time per request and requests/s.
pub fn runs(report: &Report) -> Option<Table> {
    let rows: Vec<_> = steps(report)
        .map(|(t, s)| {
            (
                mark(s),
                vec![
                    t.target.clone(),
                    s.index.to_string(),
                    step_label(s),
                    num(Some(s.duration_s), 2),
                    s.completed.to_string(),
                    s.failed.to_string(),
                    num(counted(s, s.latency.mean_ms), 3),
                    num(counted(s, s.latency.min_ms), 3),
                    num(counted(s, s.latency.max_ms), 3),
                    num(counted(s, s.requests_per_s), 1),
                    label_of(s),
                ],
            )
        })
        .collect();
    (!rows.is_empty()).then(|| Table {
        id: "runs",
        title: "Runs: time per request and throughput".into(),
        note: definition_note(report),
        headers: [
            "Target",
            "Step",
            "Parameters",
            "Total (s)",
            "Requests",
            "Failed",
            "Mean (ms)",
            "Min (ms)",
            "Max (ms)",
            "Req/s",
            "Label",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    })
}

/// The series (`crate::colors::key`: target, variant, protocol) of the report's rate
/// steps, in reading order: the columns of seed 001's tables.
fn rate_series(report: &Report) -> Vec<String> {
    let colors = crate::colors::Colors::of(report);
    report
        .targets
        .iter()
        .flat_map(|t| colors.keys_of(t))
        .filter(|k| {
            steps(report).any(|(t, s)| s.rate_rps.is_some() && crate::colors::key(t, s) == *k)
        })
        .map(str::to_string)
        .collect()
}

/// One cell of [`per_rate`]: the values of the steps that count for the server, and
/// the label of a step left out (not the server's figure), for "n/a (link-bound)".
type RateCell = (Vec<f64>, Option<&'static str>);

/// A rates x series table of the median of `value` over non-generator-bound repeats,
/// one column per [`rate_series`] key.
fn per_rate(
    report: &Report,
    decimals: usize,
    value: impl Fn(&StepReport) -> Option<f64>,
) -> Vec<Vec<String>> {
    let series = rate_series(report);
    // rate (as bits, so it sorts and keys exactly) -> series index -> its cell
    let mut cells: BTreeMap<u64, BTreeMap<usize, RateCell>> = BTreeMap::new();
    for (t, s) in steps(report) {
        let Some(rate) = s.rate_rps else { continue };
        let key = crate::colors::key(t, s);
        let Some(i) = series.iter().position(|k| *k == key) else {
            continue;
        };
        let cell = cells
            .entry(rate.to_bits())
            .or_default()
            .entry(i)
            .or_default();
        if let RowMark::NotServer(word) = RowMark::of_label(s.label.as_deref()) {
            cell.1 = match cell.1 {
                Some(w) if w != word => Some("not the server's"),
                _ => Some(word),
            };
        } else if let Some(v) = value(s) {
            cell.0.push(v);
        }
    }
    let mut rows: Vec<(f64, Vec<String>)> = cells
        .into_iter()
        .map(|(bits, by_series)| {
            let rate = f64::from_bits(bits);
            let mut row = vec![trim_num(rate)];
            for i in 0..series.len() {
                row.push(match by_series.get(&i) {
                    None => "-".into(),
                    Some((v, Some(word))) if v.is_empty() => format!("n/a ({word})"),
                    Some((v, _)) => num(median(v), decimals),
                });
            }
            (rate, row)
        })
        .collect();
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    rows.into_iter().map(|(_, r)| r).collect()
}

/// The first header, then one per rate series: "nginx · tuned replies/s".
fn series_headers(report: &Report, first: &str, unit: &str) -> Vec<String> {
    std::iter::once(first.to_string())
        .chain(rate_series(report).iter().map(|k| format!("{k} {unit}")))
        .collect()
}

/// Seed 001's table "547": replies/s per offered rate, one column per target (and per
/// variant and protocol: "default vs tuned" is seed 001's question).
pub fn replies(report: &Report) -> Option<Table> {
    let rows = per_rate(report, 1, |s| Some(s.reply_rate_rps));
    (!rows.is_empty()).then(|| Table {
        id: "replies",
        title: "Replies per second by request rate".into(),
        note: "Median over repeats of server-bound or inconclusive steps; generator-bound steps are left out (they measure the generator).".into(),
        headers: series_headers(report, "Rate (req/s)", "replies/s"),
        rows: rows.into_iter().map(|r| (RowMark::Plain, r)).collect(),
    })
}

/// Seed 001's "548": most connections open at once per offered rate, one column per
/// target, variant and protocol.
pub fn open_connections(report: &Report) -> Option<Table> {
    let rows = per_rate(report, 0, |s| s.max_open_connections.map(f64::from));
    (!rows.is_empty()).then(|| Table {
        id: "connections",
        title: "Max open connections by request rate".into(),
        note: "Median over repeats; generator-bound steps left out.".into(),
        headers: series_headers(report, "Rate (req/s)", "max open"),
        rows: rows.into_iter().map(|r| (RowMark::Plain, r)).collect(),
    })
}

/// One line of seed 002's figure: a series (target, variant, protocol) on one core
/// set, its best throughput over concurrency per CPU quota.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuShareLine {
    /// The series' colour key (`crate::colors::key`).
    pub key: String,
    /// The cpuset ("0", "0-1", or "any" unpinned).
    pub cores: String,
    /// (CPU quota in cores, req/s): the median over repeats per (quota, concurrency),
    /// then the best concurrency; generator-bound steps left out. Sorted by quota.
    pub points: Vec<(f64, f64)>,
}

/// Seed 002's figure as data, shared by its chart and its table: one line per series
/// and core set over the steps run at a CPU quota; empty unless two quotas or more.
pub fn cpu_share_lines(report: &Report) -> Vec<CpuShareLine> {
    let colors = crate::colors::Colors::of(report);
    let mut out = Vec::new();
    let mut caps = Vec::new();
    for t in &report.targets {
        for key in colors.keys_of(t) {
            let mut by_cores: BTreeMap<String, Vec<&StepReport>> = BTreeMap::new();
            for s in t
                .steps
                .iter()
                .filter(|s| s.cpu_quota_cores.is_some() && crate::colors::key(t, s) == key)
            {
                caps.push(s.cpu_quota_cores.unwrap_or(0.0).to_bits());
                by_cores
                    .entry(s.cores.clone().unwrap_or_else(|| "any".into()))
                    .or_default()
                    .push(s);
            }
            for (cores, steps) in by_cores {
                let mut best: BTreeMap<u64, f64> = BTreeMap::new();
                let mut per: BTreeMap<(u64, Option<u32>), Vec<f64>> = BTreeMap::new();
                for s in steps
                    .iter()
                    .filter(|s| !s.generator_bound() && !s.mostly_failed())
                {
                    per.entry((s.cpu_quota_cores.unwrap_or(0.0).to_bits(), s.concurrency))
                        .or_default()
                        .push(s.requests_per_s);
                }
                for ((q, _), v) in per {
                    let m = median(&v).unwrap_or(0.0);
                    let e = best.entry(q).or_insert(m);
                    *e = e.max(m);
                }
                let mut points: Vec<(f64, f64)> = best
                    .into_iter()
                    .map(|(q, v)| (f64::from_bits(q), v))
                    .collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                out.push(CpuShareLine {
                    key: key.to_string(),
                    cores,
                    points,
                });
            }
        }
    }
    caps.sort_unstable();
    caps.dedup();
    if caps.len() < 2 {
        out.clear();
    }
    out
}

/// Seed 002's figure as a table: req/s (best over concurrency) per CPU quota, one
/// column per series and core count.
pub fn cpu_share(report: &Report) -> Option<Table> {
    let lines = cpu_share_lines(report);
    let mut quotas: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .collect();
    quotas.sort_by(f64::total_cmp);
    quotas.dedup();
    let rows: Vec<(RowMark, Vec<String>)> = quotas
        .iter()
        .map(|q| {
            let mut row = vec![trim_num(*q)];
            for l in &lines {
                let v = l.points.iter().find(|p| p.0 == *q).map(|p| p.1);
                row.push(v.map_or_else(|| "-".to_string(), |v| num(Some(v), 1)));
            }
            (RowMark::Plain, row)
        })
        .collect();
    (!rows.is_empty()).then(|| Table {
        id: "cpu-share",
        title: "Requests per second by CPU share".into(),
        note: "Seed 002's figure: per CPU quota, the median over repeats at each concurrency, then the best concurrency; generator-bound steps left out. One column per target (variant, protocol) and core set.".into(),
        headers: std::iter::once("CPU quota (cores)".to_string())
            .chain(lines.iter().map(|l| format!("{}, cpus {} req/s", l.key, l.cores)))
            .collect(),
        rows,
    })
}

/// Seed 002: throughput and p99 per concurrency x CPU cap x cores.
pub fn concurrency(report: &Report) -> Option<Table> {
    let rows: Vec<_> = steps(report)
        .filter(|(_, s)| s.rate_rps.is_none() && s.concurrency.is_some())
        .map(|(t, s)| {
            (
                mark(s),
                vec![
                    t.target.clone(),
                    s.workload.clone().unwrap_or_else(|| "-".into()),
                    match s.keepalive {
                        Some(true) => "on".into(),
                        Some(false) => "off".into(),
                        None => "-".into(),
                    },
                    s.cpu_quota_cores
                        .map(trim_num)
                        .unwrap_or_else(|| "-".into()),
                    s.cores.clone().unwrap_or_else(|| "-".into()),
                    s.concurrency.map(|c| c.to_string()).unwrap_or_default(),
                    (s.repeat + 1).to_string(),
                    num(counted(s, s.requests_per_s), 1),
                    // A CPU quota can stall a whole period: p99 under throttling is the
                    // cap's artefact as much as the server's (docs/methodology.md).
                    if s.throttled {
                        format!("{} (throttled)", num(counted(s, s.latency.p99_ms), 3))
                    } else {
                        num(counted(s, s.latency.p99_ms), 3)
                    },
                    label_of(s),
                ],
            )
        })
        .collect();
    (!rows.is_empty()).then(|| Table {
        id: "concurrency",
        title: "Throughput and p99 by concurrency, CPU cap and cores".into(),
        note: definition_note(report),
        headers: [
            "Target",
            "Workload",
            "Keep-alive",
            "CPU cap (cores)",
            "CPUs",
            "Concurrency",
            "Repeat",
            "Req/s",
            "p99 (ms)",
            "Label",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    })
}

/// USL fits per target and group.
pub fn usl(report: &Report) -> Option<Table> {
    let rows: Vec<_> = report
        .targets
        .iter()
        .flat_map(|t| {
            t.usl.iter().map(move |g| {
                let mut row = vec![
                    t.target.clone(),
                    g.group.clone(),
                    g.points.len().to_string(),
                ];
                match &g.fit {
                    Ok(f) => row.extend([
                        num(Some(f.lambda), 1),
                        format!("{:.4}", f.sigma),
                        format!("{:.6}", f.kappa),
                        f.n_star.map_or("unbounded".into(), |n| format!("{n:.1}")),
                        f.peak_rps.map_or("unbounded".into(), |p| format!("{p:.1}")),
                        format!("{:.3}", f.r_squared),
                    ]),
                    Err(e) => {
                        row.push(format!("no fit: {e}"));
                        row.extend(std::iter::repeat_n("-".to_string(), 5));
                    }
                }
                (RowMark::Plain, row)
            })
        })
        .collect();
    (!rows.is_empty()).then(|| Table {
        id: "usl",
        title: "Universal Scalability Law fit".into(),
        note: "X(N) = lambda N / (1 + sigma (N-1) + kappa N (N-1)), least squares on req/s of non-generator-bound steps; N* = sqrt((1 - sigma) / kappa).".into(),
        headers: ["Target", "Group", "Points", "lambda (req/s)", "sigma", "kappa", "N*", "Peak (req/s)", "R²"]
            .map(String::from)
            .to_vec(),
        rows,
    })
}

/// Seed 003's resource table.
pub fn resources(report: &Report) -> Option<Table> {
    let rows: Vec<_> = steps(report)
        .filter_map(|(t, s)| {
            let r = s.resources?;
            Some((
                mark(s),
                vec![
                    t.target.clone(),
                    s.index.to_string(),
                    step_label(s),
                    num(r.cpu_user_pct, 1),
                    num(r.cpu_sys_pct, 1),
                    num(r.max_rss_bytes.map(|b| b as f64 / 1_048_576.0), 1),
                    num(r.mem_pct, 2),
                    num(r.tx_packets_per_s, 0),
                    num(r.tx_bytes_per_s, 0),
                    num(r.cpu_ms_per_1000_requests, 1),
                ],
            ))
        })
        .collect();
    (!rows.is_empty()).then(|| Table {
        id: "resources",
        title: "Server resources".into(),
        note: "CPU in percent of one CPU over the step; memory is the largest summed RSS; network on the monitored interface; CPU-ms per 1000 requests = server CPU-seconds / requests x 10^6.".into(),
        headers: [
            "Target",
            "Step",
            "Parameters",
            "CPU user (%)",
            "CPU sys (%)",
            "Mem (MiB)",
            "Mem (%)",
            "TX packets/s",
            "TX bytes/s",
            "CPU-ms / 1000 req",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    })
}

/// Repeated points: median and bootstrap 95% interval over the repeats (each run is one
/// unit of replication).
pub fn repeats(report: &Report) -> Option<Table> {
    let ci = |e: &crate::model::MedianCi, decimals: usize| {
        format!(
            "{} [{}, {}]",
            num(Some(e.median), decimals),
            num(Some(e.lo), decimals),
            num(Some(e.hi), decimals)
        )
    };
    let rows: Vec<_> = report
        .targets
        .iter()
        .flat_map(|t| t.repeats.iter().map(move |r| (t, r)))
        .map(|(t, r)| {
            (
                RowMark::Plain,
                vec![
                    t.target.clone(),
                    r.point.clone(),
                    r.runs.to_string(),
                    ci(&r.requests_per_s, 1),
                    ci(&r.p99_ms, 3),
                ],
            )
        })
        .collect();
    (!rows.is_empty()).then(|| Table {
        id: "repeats",
        title: "Repeats: medians with bootstrap 95% intervals".into(),
        note: format!("Over the non-generator-bound repeats of each point (percentile bootstrap of the median, {} resamples, fixed seed so a rebuilt report shows the same interval).", volley_analysis::words::number(volley_analysis::bootstrap::RESAMPLES as f64)),
        headers: ["Target", "Point", "Runs", "Req/s median [95% CI]", "p99 (ms) median [95% CI]"]
            .map(String::from)
            .to_vec(),
        rows,
    })
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
