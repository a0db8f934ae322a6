//! volley-office: the groupware office, a CalDAV client workload.
//!
//! Place in the flow: beside the engine, as a workload with its own clients. Virtual
//! users ([`state`]), each with a profile ([`profile`]: Thunderbird, DAVx5, Evolution,
//! Apple Calendar) and two devices, live a seeded, compressed office day ([`day`]):
//! decisions become writes ([`writes`]), polls become sync sessions ([`session`],
//! [`listing`]). Every request is timed into the day's recorder
//! (`volley_metrics::Recorder`, the same lossless per-second histograms `volley bench`
//! keeps) and the [`Tally`] of its operation type, every session into the tally of its
//! kind, and checked: what is read back must be
//! what was written, ETags must change exactly when content does, stale writes must get
//! 412, a deletion must reach the other device's next sync, and at the end an audit
//! ([`audit`]) finds every acknowledged item once. Violations are counted by kind
//! ([`check`]) and fail the run (docs/methodology.md, "The office").
//!
//! Each user's [`Account`] may give its own paths and headers (Xandikos's layout and
//! `X-Remote-User`, a plain WebDAV tree). A server without `calendar-access` is plain
//! WebDAV: the clients sync by PROPFIND and GET (`plain`), use preconditions only
//! where the server honours them, and the report lists what the server lacks.
//!
//! The crate is volley's one DAV client: besides the day, a target's calendars are
//! made and checked at start by [`provision`], its readiness asked through
//! [`capabilities::responds`], and
//! [`capabilities::capabilities`] asks what a server offers (`volley targets
//! --dav-probe`); answers are read by [`xml::parse_multistatus`].
//!
//! I/O: each device holds one blocking kept-alive HTTP/1.1 connection ([`http`]); a
//! worker thread serves a few users one action at a time. The schedule ([`day`]), the
//! XML ([`xml`]), item comparison ([`item`]) and violation counting are pure.
#![deny(missing_docs)]

mod account;
mod audit;
pub mod capabilities;
pub mod check;
pub mod day;
mod driver;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod http;
pub mod item;
mod listing;
pub mod ops;
mod plain;
pub mod profile;
pub mod progress;
pub mod provision;
pub mod report;
mod run;
mod session;
mod setup;
pub mod state;
pub mod trace;
mod writes;
pub mod xml;

pub use account::Account;
pub use capabilities::{DavCapabilities, DavProbeError};
pub use check::{Violation, Violations};
pub use driver::{Failure, Tally};
pub use error::OfficeError;
pub use ops::{Op, SessionKind};
pub use profile::{Mix, Profile};
pub use progress::{Phase, Progress, ProgressSnapshot};
pub use report::{LatencyRow, LeadIn, OfficeReport, SetApart};
pub use run::{run, run_streaming, OfficeConfig, OfficeRun, INITIAL_ITEMS, THREAD_SPAN};
pub use state::Server;
