//! Text output of `volley bench --target`: the load's figures and the server's resources
//! side by side, second by second, and the comparison table across targets. Pure
//! formatting of a finished [`TargetRun`]; nothing here measures. Also `--show-config`:
//! the configuration each target would run with.

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use volley_analysis::bootstrap::{self, Estimate};
use volley_metrics::output::{Exporter, Text};
use volley_metrics::{repeat, Model};
use volley_monitor::MonitorReport;
use volley_targets::config::{self, Placement, ServerSettings, TlsFiles};
use volley_targets::{ResourceLimits, TargetKind};

use volley_harness::DocrootSource;

use super::{headline, list, Setup, TargetRun};
use crate::cmd::table;

/// `CPUs 0, quota 25% of one CPU, memory 256 MiB`, or `None` without limits.
pub(super) fn limits_line(l: &ResourceLimits) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(c) = &l.cpus {
        parts.push(format!("CPUs {}", list(c)));
    }
    if let Some(q) = &l.cpu_quota {
        parts.push(format!(
            "quota {:.0}% of one CPU per {} ms",
            q.share_of_one_cpu * 100.0,
            q.period.as_millis()
        ));
    }
    if let Some(m) = l.memory_max_bytes {
        parts.push(format!("memory {} MiB", m >> 20));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// Figures over the monitor's samples that its summary does not keep: peak processes and
/// threads, and time-weighted mean context switches per second.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct TreeStats {
    pub(super) max_processes: u32,
    pub(super) max_threads: u64,
    pub(super) ctx_voluntary_per_s: f64,
    pub(super) ctx_involuntary_per_s: f64,
}

pub(super) fn tree_stats(report: &MonitorReport) -> Option<TreeStats> {
    let mut st = TreeStats::default();
    let (mut weight_ms, mut vol, mut invol) = (0u64, 0.0, 0.0);
    for s in &report.samples {
        let Some(t) = &s.target else { continue };
        st.max_processes = st.max_processes.max(t.processes);
        st.max_threads = st.max_threads.max(t.threads);
        vol += t.ctx_voluntary_per_s * s.interval_ms as f64;
        invol += t.ctx_involuntary_per_s * s.interval_ms as f64;
        weight_ms += s.interval_ms;
    }
    if weight_ms == 0 {
        return None;
    }
    st.ctx_voluntary_per_s = vol / weight_ms as f64;
    st.ctx_involuntary_per_s = invol / weight_ms as f64;
    Some(st)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "-".to_string(), f)
}

/// Label/value rows of one column.
type Rows = Vec<(String, String)>;

/// The load's key figures (left) and the server's resources (right), as rows.
fn side_by_side(r: &TargetRun) -> (Rows, Rows) {
    (load_rows(r), server_rows(r))
}

/// The load's key figures: rate, counts, latency by the model's definition, generator.
fn load_rows(r: &TargetRun) -> Rows {
    let s = &r.summary;
    let h = headline(s);
    let flag = if r.throttled() { "  (throttled!)" } else { "" };
    let lat = |v: Option<f64>| opt(v, |x| format!("{x:.3} ms"));
    vec![
        (
            "requests/s".into(),
            format!("{:.1}", s.throughput.requests_per_s),
        ),
        ("completed".into(), s.requests.completed.to_string()),
        ("failed".into(), s.requests.failed.to_string()),
        (
            "transfer".into(),
            format!("{:.1} KiB/s", s.bytes.transfer_kib_per_s),
        ),
        (
            "latency".into(),
            match s.model {
                Model::Closed => "closed-loop service time".into(),
                Model::Open { .. } => "response time (from intended)".into(),
            },
        ),
        ("  p50".into(), lat(h.map(|l| l.p50_ms))),
        (
            "  p99".into(),
            format!("{}{flag}", lat(h.map(|l| l.p99_ms))),
        ),
        ("  p99.9".into(), lat(h.map(|l| l.p999_ms))),
        ("  max".into(), lat(h.map(|l| l.max_ms))),
        (
            "generator".into(),
            s.generator.verdict.label.label().to_string(),
        ),
    ]
}

/// The server's resources: CPU, memory, processes, context switches, packets, and the
/// cgroup's throttling.
fn server_rows(r: &TargetRun) -> Rows {
    let m = r.monitor.as_ref().map(|m| &m.summary);
    let ts = r.monitor.as_ref().and_then(tree_stats);
    let mut right: Rows = vec![
        (
            "CPU user/sys".into(),
            match m.and_then(|m| m.cpu_user_pct.zip(m.cpu_sys_pct)) {
                Some((u, y)) => format!("{u:.1}% / {y:.1}%"),
                None => "-".into(),
            },
        ),
        (
            "CPU-seconds".into(),
            opt(m.and_then(|m| m.server_cpu_seconds), |v| {
                format!("{v:.3} s")
            }),
        ),
        (
            "CPU-s/1000 req".into(),
            opt(r.cpu_s_per_1000(), |v| format!("{v:.4} s")),
        ),
        (
            "max RSS".into(),
            match m.and_then(|m| m.max_rss_bytes) {
                Some(b) => match m.and_then(|m| m.mem_pct) {
                    Some(p) => format!("{} ({p:.2}% mem)", mib(b)),
                    None => mib(b),
                },
                None => "-".into(),
            },
        ),
        (
            "procs/threads".into(),
            ts.map_or("-".into(), |t| {
                format!("{} / {}", t.max_processes, t.max_threads)
            }),
        ),
        (
            "ctx sw/s vol/inv".into(),
            ts.map_or("-".into(), |t| {
                format!(
                    "{:.0} / {:.0}",
                    t.ctx_voluntary_per_s, t.ctx_involuntary_per_s
                )
            }),
        ),
        (
            "tx packets/s".into(),
            opt(m.and_then(|m| m.tx_packets_per_s), |v| format!("{v:.0}")),
        ),
        (
            "tx bytes/s".into(),
            opt(m.and_then(|m| m.tx_bytes_per_s), |v| {
                format!("{}/s", mib(v as u64))
            }),
        ),
    ];
    match r.throttling {
        Some(t) => {
            right.push((
                "throttled".into(),
                format!("{} of {} periods", t.nr_throttled, t.nr_periods),
            ));
            right.push((
                "throttled time".into(),
                format!("{:.1} ms", t.throttled_us as f64 / 1e3),
            ));
        }
        None => right.push(("throttled".into(), "- (no CPU quota)".into())),
    }
    right
}

/// Two label/value columns next to each other, split by a bar.
fn two_columns(
    title_l: &str,
    left: &[(String, String)],
    title_r: &str,
    right: &[(String, String)],
) -> String {
    let mut t = table::new([title_l, "", "|", title_r, ""]);
    if let Some(bar) = t.column_mut(2) {
        bar.set_padding((0, 1));
    }
    let cell = |row: Option<&(String, String)>, i: usize| {
        row.map_or(String::new(), |r| {
            if i == 0 {
                r.0.clone()
            } else {
                r.1.clone()
            }
        })
    };
    for i in 0..left.len().max(right.len()) {
        let (l, r) = (left.get(i), right.get(i));
        t.add_row([cell(l, 0), cell(l, 1), "|".into(), cell(r, 0), cell(r, 1)]);
    }
    table::render(&t)
}

/// Load and server second by second, when the monitor sampled every second (its samples
/// are taken on the load's clock, so sample `i` covers the load's second `i`); a second
/// the run covered only in part is marked.
fn per_second(r: &TargetRun) -> Option<String> {
    let m = r.monitor.as_ref()?;
    let full = |ms: u64| (950..=1050).contains(&ms);
    if !m.samples.iter().rev().skip(1).all(|s| full(s.interval_ms)) {
        return None;
    }
    let mut out = String::from(
        "\nsecond      req/s     p99 ms | server CPU%   RSS MiB  ctx sw/s  tx packets/s\n",
    );
    let rows = r.summary.seconds.len().max(m.samples.len());
    for i in 0..rows {
        let load = r.summary.seconds.get(i).map_or_else(
            || format!("{:>10} {:>10}", "-", "-"),
            |s| format!("{:>10} {:>10.3}", s.completed, s.p99_ms),
        );
        let srv = m
            .samples
            .get(i)
            .and_then(|s| s.target.as_ref().map(|t| (s, t)))
            .map_or_else(
                || format!("{:>11} {:>9} {:>9} {:>13}", "-", "-", "-", "-"),
                |(s, t)| {
                    format!(
                        "{:>11.1} {:>9.1} {:>9.0} {:>13}",
                        t.cpu_user_pct + t.cpu_sys_pct,
                        t.rss_bytes as f64 / (1u64 << 20) as f64,
                        t.ctx_voluntary_per_s + t.ctx_involuntary_per_s,
                        s.net
                            .as_ref()
                            .map_or("-".into(), |n| format!("{:.0}", n.tx_packets_per_s))
                    )
                },
            );
        // Second i covers [i, i + 1) of the measured run: the last of a run that ended
        // mid-second holds a fraction of a second's requests, which is no rate.
        let covered = (r.summary.duration_s - i as f64).min(1.0);
        let partial = match covered < 1.0 - 1e-6 {
            true => format!(
                "  (partial: {:.2} s of the run; its count is no rate)",
                covered.max(0.0)
            ),
            false => String::new(),
        };
        let _ = writeln!(out, "{:>6} {load} | {srv}{partial}", i + 1);
    }
    Some(out)
}

/// The full text for one target: bench's report, then load and server side by side.
pub(super) fn print_run(out: &mut dyn Write, r: &TargetRun) -> anyhow::Result<()> {
    Text { spectrum: false }.export(std::slice::from_ref(&r.summary), None, out)?;
    writeln!(out)?;
    let (left, right) = side_by_side(r);
    let mut title_r = format!(
        "server: {} (pid {})",
        r.record.version.as_deref().unwrap_or(r.kind.name()),
        r.pid.map_or("-".into(), |p| p.to_string())
    );
    if let Some(l) = limits_line(&r.record.limits) {
        title_r.push_str(&format!(", {l}"));
    }
    write!(out, "{}", two_columns("load", &left, &title_r, &right))?;
    if let Some(t) = per_second(r) {
        write!(out, "{t}")?;
    }
    if r.throttled() {
        writeln!(
            out,
            "note: the target was throttled by its CPU quota in {} period(s); p99 includes those stalls",
            r.throttling.map_or(0, |t| t.nr_throttled)
        )?;
    }
    if let Some(o) = &r.replay {
        writeln!(out)?;
        write!(out, "{}", o.text())?;
    }
    if let Some(d) = &r.died {
        writeln!(
            out,
            "FAILED: {} (pid {}) died during the run: {}\nlast log lines:\n{}",
            d.kind, d.pid, d.exit_status, d.log_tail
        )?;
    }
    writeln!(out)?;
    Ok(())
}

/// The comparison across targets: one row per run, or with `--repeat` one row per target
/// with medians and bootstrap 95% intervals over its runs (each run one replicate).
pub(super) fn comparison_table(runs: &[TargetRun], kinds: &[TargetKind]) -> String {
    let repeated = runs.iter().any(|r| r.round > 1);
    if repeated {
        return repeat_table(runs, kinds);
    }
    let mut t = table::new([
        "target",
        "req/s",
        "p99 ms",
        "CPU-s/1000 req",
        "max RSS MiB",
        "throttled",
        "status",
    ]);
    table::align_right(&mut t, &[1, 2, 3, 4, 5]);
    table::keep_whole(&mut t, 0);
    for r in runs {
        t.add_row([
            r.kind.name().to_string(),
            format!("{:.1}", r.summary.throughput.requests_per_s),
            format!("{:.3}", r.p99_ms()),
            opt(r.cpu_s_per_1000(), |v| format!("{v:.4}")),
            opt(max_rss(r).map(|b| b as f64), |b| {
                format!("{:.1}", b / (1u64 << 20) as f64)
            }),
            r.throttling
                .map_or("-".into(), |t| t.nr_throttled.to_string()),
            r.status().to_string(),
        ]);
    }
    format!(
        "Comparison (same load against each target)\n{}",
        table::render(&t)
    )
}

fn max_rss(r: &TargetRun) -> Option<u64> {
    r.monitor.as_ref()?.summary.max_rss_bytes
}

/// Median and bootstrap 95% interval (metrics' repeat settings, so the figures match
/// `volley bench --repeat` without targets).
pub(super) fn median_ci(values: &[f64]) -> Option<Estimate> {
    (!values.is_empty()).then(|| bootstrap::median_ci(values, repeat::RESAMPLES, repeat::SEED))
}

fn repeat_table(runs: &[TargetRun], kinds: &[TargetKind]) -> String {
    let mut t = table::new([
        "target",
        "runs",
        "req/s median [95% CI]",
        "p99 ms median [95% CI]",
        "CPU-s/1000 req",
        "max RSS MiB",
        "failed",
    ]);
    table::align_right(&mut t, &[1, 2, 3, 4, 5, 6]);
    table::keep_whole(&mut t, 0);
    let mut seen = Vec::new();
    for &kind in kinds {
        if seen.contains(&kind) {
            continue;
        }
        seen.push(kind);
        let mine: Vec<&TargetRun> = runs.iter().filter(|r| r.kind == kind).collect();
        if mine.is_empty() {
            continue;
        }
        let col = |f: &dyn Fn(&TargetRun) -> Option<f64>| -> Vec<f64> {
            mine.iter().filter_map(|r| f(r)).collect()
        };
        let rps = median_ci(&col(&|r| Some(r.summary.throughput.requests_per_s)));
        let p99 = median_ci(&col(&|r| Some(r.p99_ms())));
        let cpu = median_ci(&col(&|r| r.cpu_s_per_1000()));
        let rss = mine.iter().filter_map(|r| max_rss(r)).max();
        let fmt = |e: Option<Estimate>, prec: usize| {
            e.map_or("-".into(), |e| {
                format!("{:.prec$} [{:.prec$}, {:.prec$}]", e.median, e.lo, e.hi)
            })
        };
        t.add_row([
            kind.name().to_string(),
            mine.len().to_string(),
            fmt(rps, 1),
            fmt(p99, 3),
            cpu.map_or("-".into(), |e| format!("{:.4}", e.median)),
            rss.map_or("-".into(), |b| {
                format!("{:.1}", b as f64 / (1u64 << 20) as f64)
            }),
            mine.iter().filter(|r| r.died.is_some()).count().to_string(),
        ]);
    }
    format!(
        "Comparison (medians over the rounds, bootstrap 95% intervals; rounds interleaved A B A B)\n{}",
        table::render(&t)
    )
}

/// `--show-config`: the configuration each target would be started with, then exit.
pub(super) fn show_config(setup: &Setup) -> anyhow::Result<ExitCode> {
    let docroot = match &setup.docroot {
        DocrootSource::Dir(p) => p.clone(),
        DocrootSource::Fixture { .. } | DocrootSource::Default => PathBuf::from("DIR/www"),
    };
    let dir = PathBuf::from("DIR");
    let placement = Placement {
        docroot,
        dir: dir.clone(),
        addr: ([127, 0, 0, 1], 0).into(),
        as_root: config::running_as_root(),
        tls: setup.tls.then(|| TlsFiles {
            cert: PathBuf::from("DIR/tls/server.pem"),
            key: PathBuf::from("DIR/tls/server.key"),
            ca: Some(PathBuf::from("DIR/tls/ca.pem")),
        }),
    };
    let settings = ServerSettings {
        workers: setup.workers,
        http2: setup.http2,
        compression: setup.compression,
        ..ServerSettings::default()
    };
    let mut out = std::io::stdout().lock();
    for kind in &setup.kinds {
        let mut settings = settings.clone();
        setup.tuning.apply(*kind, &mut settings);
        writeln!(
            out,
            "# {kind}: volley replaces DIR with a private temp directory and port 0 with a free loopback port; probe and load path {}",
            setup.path
        )?;
        if let Some(l) = limits_line(&setup.limits) {
            writeln!(out, "# limits: {l}")?;
        }
        match config::render(*kind, &settings, &placement) {
            Some(text) => {
                write!(out, "{text}")?;
                let conf = dir.join(config::config_file_name(*kind));
                let argv: Vec<String> = config::command_args(*kind, &dir, &conf)
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect();
                writeln!(
                    out,
                    "# command: {} {}",
                    kind.program().unwrap_or("?"),
                    argv.join(" ")
                )?;
            }
            None => writeln!(
                out,
                "# the built-in server takes no configuration file; volley runs:\nvolley serve --root {} --listen 127.0.0.1:0{}",
                placement.docroot.display(),
                builtin_flags(&settings)
            )?,
        }
        writeln!(out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The `volley serve` flags the settings add, as `launch_builtin` passes them.
pub(crate) fn builtin_flags(s: &config::ServerSettings) -> String {
    let mut f = String::new();
    if s.workers > 1 {
        f += &format!(" --threads {}", s.workers);
    }
    if s.access_log {
        f += " --access-log DIR/access.log";
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use volley_targets::CpuQuota;

    #[test]
    fn columns_line_up_and_keep_every_row() {
        let l = vec![
            ("a".to_string(), "1".to_string()),
            ("bb".into(), "22".into()),
        ];
        let r = vec![("x".to_string(), "9".to_string())];
        let t = two_columns("load", &l, "server", &r);
        let lines: Vec<&str> = t.lines().collect();
        // Header, its rule, and one line per row of the longer side.
        assert_eq!(lines.len(), 4, "{t}");
        let bar = |l: &str| l.find('|').unwrap();
        assert_eq!(bar(lines[0]), bar(lines[2]), "{t}");
        assert_eq!(bar(lines[2]), bar(lines[3]), "{t}");
        assert!(lines[2].contains("| x") && lines[2].ends_with(" 9"), "{t}");
        assert!(lines[3].trim_end().ends_with('|'), "{t}");
    }

    #[test]
    fn limits_are_described_only_when_set() {
        assert_eq!(limits_line(&ResourceLimits::default()), None);
        let l = ResourceLimits {
            cpus: Some(vec![0]),
            cpu_quota: Some(CpuQuota::of_one_cpu(0.25)),
            memory_max_bytes: Some(256 << 20),
        };
        assert_eq!(
            limits_line(&l).unwrap(),
            "CPUs 0, quota 25% of one CPU per 100 ms, memory 256 MiB"
        );
    }
}
