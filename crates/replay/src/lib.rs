//! volley-replay: server access logs read back as requests.
//!
//! Place in the flow: beside the plan. A log file goes in; out come [`Record`]s in
//! the order of their start instants, which `volley log phases` cuts into phases
//! ([`phases`]), [`schedule`] plans as a replay and [`source`] feeds to the engine
//! (`volley bench --replay`), with [`fidelity`] comparing the answers with the log.
//!
//! - [`format`]: the layouts a log can have (Common, Combined, an nginx `log_format`
//!   or Apache `LogFormat` string, JSON lines) compiled into one line parser;
//! - [`reader`]: the streaming reader (gzip read directly, out-of-order lines put back
//!   in order within a bounded window, whole-second timestamps spread evenly over
//!   their second, unparsable lines counted by cause);
//! - [`generate`]: an example log from a seeded model of a site;
//! - [`phases`]: intervals with the same set of active client addresses;
//! - [`schedule`]: which logged requests a replay sends, when, and on which client's
//!   connections (speed, longest gap, window, filters, clients folded);
//! - [`source`]: the engine's request source for a replay (a reader thread, one
//!   bounded queue per worker, each client's requests on its own lane);
//! - [`fidelity`]: send lag, status, size and latency compared with the log.
//!
//! Never prints; every failure is a typed [`LogError`].
#![deny(missing_docs)]

mod error;
pub mod fidelity;
pub mod format;
#[doc(hidden)]
pub mod fuzzing;
pub mod generate;
mod lines;
pub mod phases;
mod producer;
pub mod reader;
mod record;
pub mod schedule;
pub mod source;
mod time_parse;

pub use error::{LogError, SkipCause};
pub use format::LogFormat;
pub use reader::{LogReader, ReaderOptions, Skips};
pub use record::Record;
