//! The entry point: validate a [`LoadConfig`], start the workers, collect their sinks.

use crate::{EngineError, Live, LoadConfig, Sink};

/// What a run hands back: each worker's sink (in worker order, for merging) and the
/// run-wide figures no single sink can know.
#[derive(Debug)]
pub struct RunOutcome<S> {
    /// One sink per worker thread, in worker order.
    pub sinks: Vec<S>,
    /// From the shared start instant to the moment the last worker finished.
    pub elapsed_ns: u64,
    /// Most connections open at once across all workers.
    pub max_open_connections: u32,
    /// Open-loop arrivals that found no free connection and were held by the cap.
    pub cap_hits: u64,
    /// True when `stop_flag` ended the run before its stop condition.
    pub stopped_early: bool,
    /// TCP connections opened (including failed attempts).
    pub connections_opened: u64,
    /// Requests re-sent once on a fresh connection because a kept-alive connection had
    /// been closed by the server while idle (EOF or reset before any response byte).
    pub idle_close_retries: u64,
}

/// Runs one load step to completion and returns every worker's sink.
pub fn run<S, F>(cfg: &LoadConfig, make_sink: F, live: &Live) -> Result<RunOutcome<S>, EngineError>
where
    S: Sink + 'static,
    F: Fn(usize) -> S,
{
    let _ = (cfg, make_sink, live);
    Err(EngineError::ZeroThreads)
}
