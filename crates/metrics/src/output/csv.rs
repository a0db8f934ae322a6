//! CSV: `Csv` writes one row per run (a header, then run 1..K); `CsvSeconds` writes one
//! row per second of every run, for plotting time series. Both are plain RFC 4180: fields
//! with commas or quotes are quoted. Latencies are milliseconds of the headline
//! definition named in the `latency` column ("response" = CO-corrected response time,
//! "service" = service time, "closed-service" = closed-loop service time).

use super::Exporter;
use crate::repeat::RepeatSummary;
use crate::{MetricsError, Model, Summary};
use std::io::Write;
use volley_engine::ErrorKind;

/// One row per run.
#[derive(Debug, Default, Clone, Copy)]
pub struct Csv;

/// One row per second per run.
#[derive(Debug, Default, Clone, Copy)]
pub struct CsvSeconds;

/// One field as RFC 4180 section 2 writes it: quoted when it holds a comma, a quote or
/// a line break (CR or LF), a quote inside doubled. That is the whole rule, so it is
/// written here rather than pulled in with the `csv` crate.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.6}")).unwrap_or_default()
}

fn short_definition(s: &Summary) -> &'static str {
    match s.model {
        Model::Open { .. } => "response",
        Model::Closed => "closed-service",
    }
}

fn headline(s: &Summary) -> &crate::summary::LatencyStats {
    match s.model {
        Model::Open { .. } => &s.latency["response_time"],
        Model::Closed => &s.latency["service_time"],
    }
}

/// Column names of [`Csv`], in order.
pub fn run_header() -> String {
    let mut cols: Vec<String> = [
        "run",
        "url",
        "method",
        "model",
        "arrival",
        "offered_per_s",
        "connections",
        "threads",
        "keep_alive",
        "duration_s",
        "sent",
        "completed",
        "ok",
        "failed",
        "in_flight",
        "censored",
        "non_2xx",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    cols.extend(
        ErrorKind::ALL
            .iter()
            .map(|k| format!("errors_{}", k.name())),
    );
    cols.extend(
        [
            "requests_per_s",
            "time_per_request_ms",
            "time_per_request_all_ms",
            "wire_bytes",
            "body_bytes",
            "transfer_kib_per_s",
            "latency",
            "min_ms",
            "mean_ms",
            "p50_ms",
            "p90_ms",
            "p99_ms",
            "p999_ms",
            "max_ms",
            "service_p50_ms",
            "service_p99_ms",
            "send_lag_p99_ms",
            "sched_lag_p99_ms",
            "conn_wait_p99_ms",
            "scheduled_per_s",
            "achieved_send_per_s",
            "dispatched_per_s",
            "max_open",
            "connections_opened",
            "cap_hits",
            "cpu_cores_used",
            "cpu_pressure",
            "label",
            "stopped_early",
            // Appended (never inserted) so readers by position keep working.
            "warmup_s",
            "warmup_requests",
            "protocol",
            "compression",
            "tls_full_handshakes",
            "connect_p50_ms",
            "connect_p99_ms",
            "tls_handshake_p50_ms",
            "tls_handshake_p99_ms",
            "ttfb_p50_ms",
            "ttfb_p99_ms",
            "wire_body_bytes",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    cols.join(",")
}

fn run_row(i: usize, s: &Summary) -> String {
    let (model, arrival, offered) = match &s.model {
        Model::Closed => ("closed", String::new(), None),
        Model::Open {
            rate_per_s,
            arrival,
        } => ("open", arrival.clone(), Some(*rate_per_s)),
    };
    let h = headline(s);
    let sv = &s.latency["service_time"];
    let mut f: Vec<String> = vec![
        (i + 1).to_string(),
        field(&s.url),
        field(&s.method),
        model.into(),
        arrival,
        opt(offered),
        s.connections.to_string(),
        s.threads.to_string(),
        s.keep_alive.to_string(),
        format!("{:.6}", s.duration_s),
        s.requests.sent.to_string(),
        s.requests.completed.to_string(),
        s.requests.ok.to_string(),
        s.requests.failed.to_string(),
        s.requests.in_flight.to_string(),
        s.requests.censored.to_string(),
        s.requests.non_2xx.to_string(),
    ];
    f.extend(
        ErrorKind::ALL
            .iter()
            .map(|k| s.errors[k.name()].to_string()),
    );
    f.extend([
        format!("{:.3}", s.throughput.requests_per_s),
        format!("{:.3}", s.throughput.time_per_request_ms),
        format!("{:.3}", s.throughput.time_per_request_all_ms),
        s.bytes.wire_total.to_string(),
        s.bytes.body_total.to_string(),
        format!("{:.3}", s.bytes.transfer_kib_per_s),
        short_definition(s).into(),
        format!("{:.3}", h.min_ms),
        format!("{:.3}", h.mean_ms),
        format!("{:.3}", h.p50_ms),
        format!("{:.3}", h.p90_ms),
        format!("{:.3}", h.p99_ms),
        format!("{:.3}", h.p999_ms),
        format!("{:.3}", h.max_ms),
        format!("{:.3}", sv.p50_ms),
        format!("{:.3}", sv.p99_ms),
        format!("{:.3}", s.generator.send_lag_p99_ms),
        format!("{:.3}", s.generator.sched_lag_p99_ms),
        format!("{:.3}", s.generator.conn_wait_p99_ms),
        opt(s.rates.scheduled_per_s),
        format!("{:.3}", s.rates.achieved_send_per_s),
        format!("{:.3}", s.rates.dispatched_per_s),
        s.connections_stats.max_open.to_string(),
        s.connections_stats.opened.to_string(),
        s.connections_stats.cap_hits.to_string(),
        opt(s.generator.cpu_cores_used),
        opt(s.generator.cpu_pressure),
        s.generator.verdict.label.label().into(),
        s.stopped_early.to_string(),
    ]);
    // Warm-up and wire columns: empty when there was no warm-up, no TLS, or no sample
    // of that kind (a blank is "not applicable", never a zero that could be averaged).
    let lat = |name: &str, p99: bool| {
        opt(s
            .latency
            .get(name)
            .filter(|l| l.count > 0)
            .map(|l| if p99 { l.p99_ms } else { l.p50_ms }))
    };
    let w = s.wire.as_ref();
    f.extend([
        opt(s.warmup.as_ref().map(|w| w.duration_s)),
        s.warmup
            .as_ref()
            .map(|w| w.requests.to_string())
            .unwrap_or_default(),
        field(w.map_or("", |w| w.protocol.as_str())),
        field(w.and_then(|w| w.compression.as_deref()).unwrap_or("")),
        w.and_then(|w| w.tls.as_ref())
            .map(|t| t.full_handshakes.to_string())
            .unwrap_or_default(),
        lat("connect_time", false),
        lat("connect_time", true),
        lat("tls_handshake", false),
        lat("tls_handshake", true),
        lat("ttfb", false),
        lat("ttfb", true),
        s.bytes.wire_body_total.to_string(),
    ]);
    f.join(",")
}

/// Column names of [`CsvSeconds`], in order.
pub const SECONDS_HEADER: &str = "run,second,latency,scheduled,dispatched,sent,completed,ok,failed,wire_bytes,max_open,cap_hits,p50_ms,p99_ms,max_ms,send_lag_p99_ms,sched_lag_p99_ms,conn_wait_p99_ms,cpu_cores_used,cpu_pressure,label";

impl Exporter for Csv {
    fn export(
        &self,
        runs: &[Summary],
        _repeat: Option<&RepeatSummary>,
        out: &mut dyn Write,
    ) -> Result<(), MetricsError> {
        let rows = runs.iter().enumerate().map(|(i, s)| run_row(i, s));
        write_table(out, &run_header(), rows)
    }
}

/// A header line, then one line per row.
fn write_table(
    out: &mut dyn Write,
    header: &str,
    rows: impl Iterator<Item = String>,
) -> Result<(), MetricsError> {
    let w = |source| MetricsError::Write {
        format: "csv",
        source,
    };
    writeln!(out, "{header}").map_err(w)?;
    for row in rows {
        writeln!(out, "{row}").map_err(w)?;
    }
    Ok(())
}

impl Exporter for CsvSeconds {
    fn export(
        &self,
        runs: &[Summary],
        _repeat: Option<&RepeatSummary>,
        out: &mut dyn Write,
    ) -> Result<(), MetricsError> {
        let rows = runs.iter().enumerate().flat_map(|(i, s)| {
            s.seconds.iter().map(move |x| {
                let failed: u64 = x.errors.values().sum();
                format!(
                    "{},{},{},{},{},{},{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{},{},{}",
                    i + 1,
                    x.second,
                    short_definition(s),
                    x.scheduled,
                    x.dispatched,
                    x.sent,
                    x.completed,
                    x.ok,
                    failed,
                    x.wire_bytes,
                    x.max_open,
                    x.cap_hits,
                    x.p50_ms,
                    x.p99_ms,
                    x.max_ms,
                    x.send_lag_p99_ms,
                    x.sched_lag_p99_ms,
                    x.conn_wait_p99_ms,
                    opt(x.cpu_cores_used),
                    opt(x.cpu_pressure),
                    x.label.label()
                )
            })
        });
        write_table(out, SECONDS_HEADER, rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::tests::ok;
    use crate::summary::tests::info;
    use crate::Recorder;
    use volley_engine::Sink;

    #[test]
    fn fields_quote_as_rfc_4180_says() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
        assert_eq!(field("cr\rhere"), "\"cr\rhere\"");
    }

    #[test]
    fn rows_match_header_width_and_quote_commas() {
        let mut r = Recorder::new();
        for i in 0..50 {
            r.record(&ok(10 + i * 30, 3));
        }
        let mut run = info(Model::Closed, 1_500);
        run.url = "http://127.0.0.1:1/a,b".into();
        let s = r.close(&run).unwrap();
        let mut buf = Vec::new();
        Csv.export(std::slice::from_ref(&s), None, &mut buf)
            .unwrap();
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[1].contains("\"http://127.0.0.1:1/a,b\""));
        let width = lines[0].split(',').count();
        // The quoted URL holds one comma.
        assert_eq!(lines[1].split(',').count(), width + 1);
        // No warm-up, no TLS, no wire report: those columns are blank, not zero.
        let header: Vec<&str> = lines[0].split(',').collect();
        // Fields after the quoted URL sit one further right: skip one to realign.
        let row: Vec<&str> = lines[1].split(',').skip(1).collect();
        for col in [
            "warmup_s",
            "protocol",
            "tls_handshake_p99_ms",
            "tls_full_handshakes",
        ] {
            let i = header.iter().position(|h| *h == col).expect(col);
            assert_eq!(row[i], "", "{col}");
        }
        let ttfb = header.iter().position(|h| *h == "ttfb_p99_ms").unwrap();
        assert!(row[ttfb].parse::<f64>().is_ok(), "{}", row[ttfb]);

        let mut buf = Vec::new();
        CsvSeconds.export(&[s], None, &mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + 2);
        let w = SECONDS_HEADER.split(',').count();
        assert!(lines[1..].iter().all(|l| l.split(',').count() == w));
    }
}
