//! Helpers shared by the store's integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::json;
use volley_store::{
    HistogramBlob, HistogramKind, SeriesPoint, SeriesSource, StepParameters, StepRecord,
};

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "volley-store-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    pub fn db(&self) -> PathBuf {
        self.0.join("results.sqlite")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A step with recognisable contents derived from `index`: 3 seconds of load and monitor
/// series, a whole-step and per-second response histograms, a send-lag histogram.
pub fn step(index: u32) -> StepRecord {
    let i = u64::from(index);
    let blob = |seed: u64, len: usize| -> Vec<u8> {
        (0..len)
            .map(|k| (seed.wrapping_mul(31).wrapping_add(k as u64 * 7) % 251) as u8)
            .collect()
    };
    let mut histograms = vec![
        HistogramBlob {
            second: None,
            kind: HistogramKind::Response,
            bytes: blob(i, 300),
        },
        HistogramBlob {
            second: None,
            kind: HistogramKind::SendLag,
            bytes: blob(i + 1, 40),
        },
    ];
    let mut series = Vec::new();
    for s in 0..3u32 {
        series.push(SeriesPoint {
            second: s,
            source: SeriesSource::Load,
            values: json!({"sent": 100 * i + u64::from(s), "p99_us": 1500.5}),
        });
        series.push(SeriesPoint {
            second: s,
            source: SeriesSource::Monitor,
            values: json!({"cpu_share": 0.25, "rss_bytes": 1_000_000 + i}),
        });
        histograms.push(HistogramBlob {
            second: Some(s),
            kind: HistogramKind::Response,
            bytes: blob(i * 10 + u64::from(s), 120),
        });
    }
    StepRecord {
        index,
        parameters: StepParameters {
            rate_rps: Some(1000.0 * f64::from(index + 1)),
            concurrency: Some(64),
            keepalive: Some(true),
            repeat: index % 3,
            ..StepParameters::default()
        },
        summary: json!({"requests": 3000 * i, "errors": {"timeout": i}, "p99_us": 2200}),
        verdict: Some(json!({"sustainable": index % 2 == 0, "reasons": []})),
        label: Some("server_bound".to_owned()),
        started_unix_ms: 1_700_000_000_000 + 40_000 * i64::from(index),
        finished_unix_ms: 1_700_000_030_000 + 40_000 * i64::from(index),
        series,
        histograms,
    }
}
