//! A measured run as the results store keeps it: per-second and whole-run histograms of
//! every latency kind (HdrHistogram V2 bytes), and the per-second series of the load and
//! of the monitor. One shape for a study step and a saved `volley bench` run, so the
//! reports read both alike (docs/store-conventions.md).

use hdrhistogram::serialization::V2DeflateSerializer;
use volley_metrics::{hist, ClosedSecond, Metric, MetricsError, Recorder, Summary};
use volley_monitor::MonitorReport;
use volley_store::{HistogramBlob, HistogramKind, LiveSecond, SeriesPoint, SeriesSource};

/// Each recorder metric and the store's name for its histograms.
const KINDS: [(Metric, HistogramKind); 7] = [
    (Metric::Response, HistogramKind::Response),
    (Metric::Service, HistogramKind::Service),
    (Metric::Ttfb, HistogramKind::Ttfb),
    (Metric::Connect, HistogramKind::Connect),
    (Metric::SendLag, HistogramKind::SendLag),
    (Metric::SchedLag, HistogramKind::SchedLag),
    (Metric::ConnWait, HistogramKind::ConnWait),
];

/// Whole-run and per-second histograms of every kind, V2-serialised. Call on a merged,
/// finished recorder, before it is closed into its summary. A recorder that kept no
/// second ([`Recorder::stream_only`]: its seconds went to the store as they closed,
/// [`second`]) gives its whole-run histograms only.
pub fn histograms(r: &Recorder) -> Result<Vec<HistogramBlob>, MetricsError> {
    let mut ser = V2DeflateSerializer::new();
    let mut out = Vec::new();
    for (metric, kind) in KINDS {
        let mut whole = hist::new_hist();
        for s in r.closed_seconds() {
            let h = s.hist(metric)?;
            hist::add(&mut whole, &h)?;
            // A closed loop's service-time second shares the response-time bytes
            // (intended = sent); the store keeps every kind readable on its own.
            let shared = metric == Metric::Service && s.service_is_response;
            let stored = if shared { Metric::Response } else { metric };
            out.push(HistogramBlob {
                second: Some(s.second as u32),
                kind,
                bytes: s.hists[stored as usize].clone(),
            });
        }
        let whole = if r.closed_seconds().is_empty() {
            r.whole_run(metric)
        } else {
            &whole
        };
        out.push(HistogramBlob {
            second: None,
            kind,
            bytes: hist::encode(&mut ser, whole)?,
        });
    }
    Ok(out)
}

/// One closed (joined) second as the store keeps it while its step runs: its counters
/// and its histograms of every kind ([`volley_store::Store::record_live_second`]).
pub fn second(step_index: u32, c: &ClosedSecond) -> LiveSecond {
    let histograms = KINDS
        .iter()
        .map(|&(metric, kind)| {
            // As in `histograms`: a shared service-time second reads the response bytes.
            let stored = if metric == Metric::Service && c.service_is_response {
                Metric::Response
            } else {
                metric
            };
            HistogramBlob {
                second: Some(c.second as u32),
                kind,
                bytes: c.hists[stored as usize].clone(),
            }
        })
        .collect();
    LiveSecond {
        step_index,
        second: c.second as u32,
        values: serde_json::json!({
            "counts": c.counts,
            "resources": c.resources,
        }),
        histograms,
    }
}

/// The load's seconds (`SecondSummary` rows) and the monitor's samples, when it ran.
pub fn series(summary: &Summary, monitor: Option<&MonitorReport>) -> Vec<SeriesPoint> {
    let mut series: Vec<SeriesPoint> = summary
        .seconds
        .iter()
        .map(|s| SeriesPoint {
            second: s.second as u32,
            source: SeriesSource::Load,
            values: serde_json::to_value(s).unwrap_or(serde_json::Value::Null),
        })
        .collect();
    if let Some(r) = monitor {
        series.extend(r.samples.iter().enumerate().map(|(i, s)| SeriesPoint {
            second: i as u32,
            source: SeriesSource::Monitor,
            values: serde_json::to_value(s).unwrap_or(serde_json::Value::Null),
        }));
    }
    series
}
