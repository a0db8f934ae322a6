//! A server's access log read back into phases: intervals with the same set of active
//! client addresses, each with its requests, req/s and (when the log has request
//! times) mean and p99 time. The cut is `volley_analysis::phase`, the one the
//! injectors' merged runs use, so the two tables can be set side by side.
//!
//! Two passes in bounded memory: the first finds each client's first and last second,
//! the second adds each request to its phase. Seconds count from the log's first one.

use crate::error::LogError;
use crate::record::Record;
use hdrhistogram::Histogram;
use std::collections::HashMap;
use volley_analysis::phase::{cut, Figures};

const US_PER_S: i64 = 1_000_000;
/// Request times kept from 1 us to an hour at 3 significant digits, as volley's own
/// histograms (`volley_metrics::hist`); a longer time is clamped, not lost.
const HIGH_US: u64 = 3_600_000_000;

fn new_hist() -> Histogram<u32> {
    Histogram::new_with_bounds(1, HIGH_US, 3).expect("constant bounds")
}

/// One phase of a log (serialised as `volley log phases --json` prints it).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LogPhase {
    /// The active client addresses, in the order they first appear.
    pub clients: Vec<String>,
    /// Its seconds since the log's first, and the figures of the covered ones (mean and
    /// p99 are `None` when the log has no request times).
    #[serde(flatten)]
    pub figures: Figures,
}

/// Each client's active span, from the first pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spans {
    /// The log's first second, seconds since the epoch.
    pub first_s: i64,
    /// Client and its (first, last) second since `first_s`, in order of appearance.
    pub clients: Vec<(String, (u64, u64))>,
    /// Requests read.
    pub requests: u64,
}

/// First pass: each client's span. Records come in start order, so the first one
/// fixes the log's first second.
pub fn spans(
    records: impl IntoIterator<Item = Result<Record, LogError>>,
) -> Result<Spans, LogError> {
    let mut out = Spans::default();
    let mut index: HashMap<String, usize> = HashMap::new();
    for r in records {
        let r = r?;
        let sec = r.at_us.div_euclid(US_PER_S);
        if out.requests == 0 {
            out.first_s = sec;
        }
        out.requests += 1;
        let s = (sec - out.first_s).max(0) as u64;
        match index.get(&r.client) {
            Some(&i) => out.clients[i].1 .1 = out.clients[i].1 .1.max(s),
            None => {
                index.insert(r.client.clone(), out.clients.len());
                out.clients.push((r.client, (s, s)));
            }
        }
    }
    Ok(out)
}

/// Second pass: the phases of the spans, with the figures of the records (the same
/// log read again).
pub fn phases(
    spans: &Spans,
    records: impl IntoIterator<Item = Result<Record, LogError>>,
) -> Result<Vec<LogPhase>, LogError> {
    let sp: Vec<(u64, u64)> = spans.clients.iter().map(|(_, s)| *s).collect();
    let cuts = cut(&sp);
    let mut figures: Vec<(u64, Histogram<u32>)> = cuts.iter().map(|_| (0, new_hist())).collect();
    for r in records {
        let r = r?;
        let s = (r.at_us.div_euclid(US_PER_S) - spans.first_s).max(0) as u64;
        let i = cuts.partition_point(|c| c.end_s < s);
        let Some(c) = cuts.get(i).filter(|c| c.start_s <= s) else {
            continue;
        };
        if c.left_out_s.contains(&s) {
            continue;
        }
        figures[i].0 += 1;
        if let Some(t) = r.request_time_us {
            let _ = figures[i].1.record(t.clamp(1, HIGH_US));
        }
    }
    Ok(cuts
        .into_iter()
        .zip(figures)
        .map(|(c, (requests, h))| {
            let seconds = (c.end_s - c.start_s + 1) - c.left_out_s.len() as u64;
            let ms = |us: f64| (!h.is_empty()).then_some(us / 1_000.0);
            let (mean_ms, p99_ms) = (ms(h.mean()), ms(h.value_at_quantile(0.99) as f64));
            LogPhase {
                clients: c
                    .members
                    .iter()
                    .map(|&i| spans.clients[i].0.clone())
                    .collect(),
                figures: Figures::new(c, seconds, requests, mean_ms, p99_ms),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::{LogReader, ReaderOptions};

    /// Three clients, ten requests a second each, staggered by two seconds and active
    /// for six, with request times of 1 ms (b: 3 ms).
    fn log() -> String {
        let mut lines = Vec::new();
        for (client, from, ms) in [("a", 0, 1), ("b", 2, 3), ("c", 4, 1)] {
            for i in 0..60u32 {
                let t = from * 1_000_000 + i * 100_000 + 50_000;
                lines.push((
                    t,
                    format!(
                        "{client} [{}.{:06}] \"GET / HTTP/1.1\" 200 0.00{ms}\n",
                        1_700_000_000 + t / 1_000_000,
                        t % 1_000_000
                    ),
                ));
            }
        }
        lines.sort();
        lines.into_iter().map(|(_, l)| l).collect()
    }

    fn reader() -> LogReader {
        let f = crate::LogFormat::parse("$remote_addr [$msec] \"$request\" $status $request_time");
        let opts = ReaderOptions {
            format: Some(f.unwrap()),
            ..ReaderOptions::default()
        };
        LogReader::from_read("t", std::io::Cursor::new(log()), opts).unwrap()
    }

    #[test]
    fn three_staggered_clients_give_1_2_3_2_1() {
        let sp = spans(reader()).unwrap();
        assert_eq!(sp.requests, 180);
        assert_eq!(sp.clients[1], ("b".to_string(), (2, 7)));
        let ps = phases(&sp, reader()).unwrap();
        let shape: Vec<(usize, u64, u64)> = ps
            .iter()
            .map(|p| (p.clients.len(), p.figures.start_s, p.figures.end_s))
            .collect();
        assert_eq!(
            shape,
            [(1, 0, 1), (2, 2, 3), (3, 4, 5), (2, 6, 7), (1, 8, 9)]
        );
        // Each phase leaves out the second where a client started or stopped.
        let p = &ps[2].figures;
        assert_eq!(
            (p.left_out_s.clone(), p.seconds, p.requests),
            (vec![4, 5], 0, 0)
        );
        let p = &ps[1].figures;
        assert_eq!(
            (p.left_out_s.clone(), p.seconds, p.requests),
            (vec![2], 1, 20)
        );
        assert_eq!(p.rps, Some(20.0));
        assert!((p.mean_ms.unwrap() - 2.0).abs() < 0.01, "{:?}", p.mean_ms);
        assert!((p.p99_ms.unwrap() - 3.0).abs() < 0.01, "{:?}", p.p99_ms);
        assert_eq!(ps[4].clients, ["c"]);
    }
}
