//! A server's access log read back into phases: intervals with the same set of active
//! client addresses, each with its requests, req/s and (when the log has request
//! times) mean and p99 time. The cut is `volley_analysis::phase`, the one the
//! injectors' merged runs use, so the two tables can be set side by side.
//!
//! Two passes in bounded memory: the first finds each client's first and last second,
//! the second adds each request to its phase. Seconds count from the log's first one.
//! The client table is bounded ([`MAX_CLIENTS`] by default): addresses first seen once
//! it is full are folded into one client, [`OTHERS`], whose span is theirs together;
//! their requests still count in the phases they fall in, and [`Spans::folded_requests`]
//! says how many they were. (A phase lists its clients, and the cut costs phases x
//! clients, so a log of a million addresses would give neither a readable table nor an
//! answer in time; the injectors and heavy clients this table is for come first or
//! come often, and a bound keeps the rest in one line.)

use crate::error::LogError;
use crate::record::Record;
use hdrhistogram::Histogram;
use std::collections::HashMap;
use volley_analysis::phase::{cut, Figures};

const US_PER_S: i64 = 1_000_000;

/// Default bound of the client table of [`spans`].
pub const MAX_CLIENTS: usize = 1_024;

/// The name of the one client that addresses past the table's bound are folded into.
pub const OTHERS: &str = "others";
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
    /// The client table's bound: addresses kept apart.
    pub max_clients: usize,
    /// Requests of addresses first seen once the table was full, folded into the
    /// client [`OTHERS`] (0: every address kept apart).
    pub folded_requests: u64,
}

/// First pass: each client's span, at most `max_clients` addresses kept apart (see the
/// module doc). Records come in start order, so the first one fixes the log's first
/// second.
pub fn spans(
    records: impl IntoIterator<Item = Result<Record, LogError>>,
    max_clients: usize,
) -> Result<Spans, LogError> {
    let mut out = Spans {
        max_clients,
        ..Spans::default()
    };
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut others: Option<usize> = None;
    for r in records {
        let r = r?;
        let sec = r.at_us.div_euclid(US_PER_S);
        if out.requests == 0 {
            out.first_s = sec;
        }
        out.requests += 1;
        let s = (sec - out.first_s).max(0) as u64;
        let i = match index.get(&r.client) {
            Some(&i) => i,
            None if index.len() < max_clients => {
                index.insert(r.client.clone(), out.clients.len());
                out.clients.push((r.client, (s, s)));
                continue;
            }
            None => {
                out.folded_requests += 1;
                *others.get_or_insert_with(|| {
                    out.clients.push((OTHERS.to_string(), (s, s)));
                    out.clients.len() - 1
                })
            }
        };
        let span = &mut out.clients[i].1;
        span.1 = span.1.max(s);
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
        let sp = spans(reader(), MAX_CLIENTS).unwrap();
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

    /// Ten addresses, one request a second each from second i to i + 5 (the first
    /// three also at second 20): a table of three keeps those apart and folds the
    /// seven others into one client whose span is theirs together.
    #[test]
    fn addresses_past_the_bound_are_folded_into_one_client_and_still_counted() {
        let mut lines = Vec::new();
        for a in 0..10u32 {
            let mut secs: Vec<u32> = (a..a + 6).collect();
            if a < 3 {
                secs.push(20);
            }
            for s in secs {
                lines.push((
                    s,
                    a,
                    format!(
                        "10.0.0.{a} [{}.5] \"GET / HTTP/1.1\" 200 0.001\n",
                        1_700_000_000 + s
                    ),
                ));
            }
        }
        lines.sort();
        let text: String = lines.into_iter().map(|(_, _, l)| l).collect();
        let read = || {
            let f =
                crate::LogFormat::parse("$remote_addr [$msec] \"$request\" $status $request_time");
            let opts = ReaderOptions {
                format: Some(f.unwrap()),
                ..ReaderOptions::default()
            };
            LogReader::from_read("t", std::io::Cursor::new(text.clone()), opts).unwrap()
        };
        let sp = spans(read(), 3).unwrap();
        let names: Vec<&str> = sp.clients.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(names, ["10.0.0.0", "10.0.0.1", "10.0.0.2", OTHERS]);
        assert_eq!(
            sp.clients[3].1,
            (3, 14),
            "10.0.0.3 from 3 to 10.0.0.9 at 14"
        );
        assert_eq!((sp.requests, sp.folded_requests), (63, 42));
        // Every request of a covered second is in its phase, folded or not, bounded
        // or not.
        let mut per_second = [0u64; 21];
        for a in 0..10 {
            (a..a + 6).for_each(|s| per_second[s] += 1);
        }
        per_second[20] = 3;
        let unbounded = spans(read(), MAX_CLIENTS).unwrap();
        assert_eq!(
            (unbounded.clients.len(), unbounded.folded_requests),
            (10, 0)
        );
        for sp in [sp, unbounded] {
            let ps = phases(&sp, read()).unwrap();
            for p in &ps {
                let f = &p.figures;
                let want: u64 = (f.start_s..=f.end_s)
                    .filter(|s| !f.left_out_s.contains(s))
                    .map(|s| per_second[s as usize])
                    .sum();
                assert_eq!(f.requests, want, "{p:?}");
            }
        }
    }
}
