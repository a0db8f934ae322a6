//! The cold request: exactly one request on one fresh connection, timed on its own
//! before any other load (seed 002's cold TTFB).
//!
//! Place in the flow: after a target is up and before the measured run. `volley bench`
//! reports it as the invocation's first request ([`ColdRequest::first_request`]); a
//! study's cold-start step reports it against the target's spawn
//! ([`ColdRequest::figures`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use volley_engine::{
    EngineError, ErrorKind, Live, LoadConfig, LoadModel, Sample, Sink, StopCondition, Wire,
};
use volley_metrics::FirstRequest;

/// The one request's sample and when its engine run began.
#[derive(Debug, Clone, Copy)]
pub struct ColdRequest {
    /// Its sample; `None` when the engine recorded none (stopped before it went out).
    pub sample: Option<Sample>,
    /// Just before the engine started (the origin of the sample's instants, to within
    /// the engine's start-up).
    pub began: Instant,
}

/// Keeps the first sample a worker records.
struct FirstSample(Arc<Mutex<Option<Sample>>>);

impl Sink for FirstSample {
    fn record(&mut self, sample: &Sample) {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(*sample);
        }
    }
}

/// Sends the first request `cfg`'s source gives, once, on one fresh connection (one
/// thread, closed loop, no keep-alive), bounded by `cfg`'s timeouts and its stop flag.
pub fn cold_request(cfg: &LoadConfig, wire: &Wire) -> Result<ColdRequest, EngineError> {
    let one = LoadConfig {
        threads: 1,
        connections: 1,
        max_connections: 1,
        keep_alive: false,
        model: LoadModel::Closed,
        stop: StopCondition {
            warmup: Duration::ZERO,
            requests: Some(1),
            duration: Some(cfg.timeout + cfg.connect_timeout),
        },
        ..cfg.clone()
    };
    let slot = Arc::new(Mutex::new(None));
    let began = Instant::now();
    volley_engine::run_with(&one, wire, |_| FirstSample(Arc::clone(&slot)), &Live::new())?;
    let sample = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
    Ok(ColdRequest { sample, began })
}

/// The cold request's figures against the target's spawn (a study's cold-start step).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ColdFigures {
    /// First byte minus sent, ms.
    pub ttfb_ms: f64,
    /// TCP connect alone (TLS handshake excluded), ms.
    pub connect_ms: f64,
    /// TLS handshake, ms (0 without TLS).
    pub tls_handshake_ms: f64,
    /// Done minus sent, ms.
    pub response_ms: f64,
    /// From just before the server process was spawned to the first byte, ms (the
    /// engine's own start-up, well under a millisecond, is inside it).
    pub since_spawn_ms: f64,
    /// Status (0 when none came).
    pub status: u16,
    /// The error kind, if it failed.
    pub error: Option<&'static str>,
}

impl ColdRequest {
    /// As `volley bench` reports it; a request that never went out is `in_flight`.
    pub fn first_request(&self) -> FirstRequest {
        match &self.sample {
            Some(s) => FirstRequest::from_instants(
                s.sent_ns,
                s.first_byte_ns,
                s.done_ns,
                s.connect_ns,
                s.tls_handshake_ns,
                s.status,
                s.error.map(ErrorKind::name),
            ),
            None => FirstRequest::from_instants(0, 0, 0, 0, 0, 0, Some(ErrorKind::InFlight.name())),
        }
    }

    /// Its figures against `spawned` (the target's `started_at`); `None` without a sample.
    pub fn figures(&self, spawned: Instant) -> Option<ColdFigures> {
        let s = self.sample.as_ref()?;
        Some(figures(s, self.began.saturating_duration_since(spawned)))
    }
}

/// The figures of sample `s`; `engine_start` is how long after the spawn the engine run
/// began (its clock's origin).
fn figures(s: &Sample, engine_start: Duration) -> ColdFigures {
    let ms = |ns: u64| ns as f64 / 1e6;
    ColdFigures {
        ttfb_ms: s.ttfb_ns().map_or(f64::NAN, ms),
        // The engine's connect time includes the handshake (time to a usable
        // connection, as ab counts it): the TCP connect alone is the difference.
        connect_ms: ms(s.connect_ns.saturating_sub(s.tls_handshake_ns)),
        tls_handshake_ms: ms(s.tls_handshake_ns),
        response_ms: ms(s.service_ns()),
        since_spawn_ms: engine_start.as_secs_f64() * 1e3 + ms(s.first_byte_ns),
        status: s.status,
        error: s.error.map(|e| e.name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Sample {
        Sample {
            intended_ns: 1_000_000,
            dispatched_ns: 1_000_000,
            sent_ns: 1_000_000,
            first_byte_ns: 4_000_000,
            done_ns: 5_000_000,
            connect_ns: 1_700_000,
            tls_handshake_ns: 1_500_000,
            status: 200,
            wire_bytes: 900,
            body_bytes: 700,
            wire_body_bytes: 700,
            error: None,
            request_index: 0,
        }
    }

    #[test]
    fn cold_figures_come_from_the_one_sample() {
        let c = figures(&sample(), Duration::from_millis(30));
        assert_eq!(c.ttfb_ms, 3.0);
        assert_eq!(c.response_ms, 4.0);
        assert_eq!(c.connect_ms, 0.2);
        assert_eq!(c.tls_handshake_ms, 1.5);
        assert_eq!(c.since_spawn_ms, 34.0);
        assert_eq!((c.status, c.error), (200, None));
    }

    #[test]
    fn bench_reads_the_same_sample_as_its_first_request() {
        let now = Instant::now();
        let c = ColdRequest {
            sample: Some(sample()),
            began: now,
        };
        let f = c.first_request();
        assert_eq!((f.ttfb_ms, f.total_ms, f.status), (Some(3.0), 5.7, 200));
        let none = ColdRequest {
            sample: None,
            began: now,
        };
        assert_eq!(none.first_request().error.as_deref(), Some("in_flight"));
        assert_eq!(none.figures(now), None);
    }
}
