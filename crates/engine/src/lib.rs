//! volley-engine: the load generator.
//!
//! Place in the flow: `plan/CLI -> **engine** -> samples -> recorder (volley-metrics)`.
//! The engine turns a [`LoadConfig`] into requests on the wire and hands one [`Sample`]
//! per request to a per-thread [`Sink`]. It knows nothing of histograms or reports; the
//! recorder that implements [`Sink`] lives downstream.
#![deny(missing_docs)]

mod busy_wait;
pub mod config;
pub mod conn;
pub mod decode;
mod error;
pub mod first;
pub mod http1;
pub mod http_url;
mod live;
pub mod pacer;
pub mod quic;
mod run;
pub mod sample;
mod slice;
pub mod source;
mod timer;
pub mod tls;
mod worker;

pub use busy_wait::busy_wait_ns;
pub use config::*;
pub use decode::{BodySpec, Coding};
pub use error::EngineError;
pub use first::{FirstAnswers, Refusal};
pub use http_url::{HttpUrl, ResolveError, UrlError};
pub use live::{Live, LiveSnapshot};
pub use run::{run, run_with, workers, RunOutcome, ALPN_H3};
pub use sample::*;
pub use source::{ListSourceFactory, Order, RequestTemplate, SourceError};
/// volley-tls, re-exported so callers build [`TlsTarget`]s with the same version's types.
pub use volley_tls;
pub use worker::{H2Stats, HandshakeTimes, REFUSE_IO_URING_ENV};
