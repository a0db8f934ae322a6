//! volley-targets: managed targets: real servers started with generated configs, capped
//! and stopped.
//!
//! Place in the data flow: beside the engine. A study or `volley bench --target KIND`
//! calls [`start`] with a [`TargetSpec`], gets a [`RunningTarget`] whose `url` the engine
//! loads, hands its pid / cgroup to volley-monitor, calls [`RunningTarget::check`] between
//! steps (a dead server is an error, not a slow result), records
//! [`RunningTarget::throttle_stats`], `version`, `config_text` and [`Environment`] with
//! the results, and finally [`RunningTarget::stop`]s it.
//!
//! ```no_run
//! use volley_targets::{start, CpuQuota, TargetKind, TargetSpec};
//! let mut spec = TargetSpec::new(TargetKind::Nginx);
//! spec.settings.workers = 2;
//! spec.limits.cpu_quota = Some(CpuQuota::of_one_cpu(0.25));
//! let target = start(&spec)?;
//! println!("load {}", target.url);
//! target.check()?;
//! target.stop();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! HTTPS, HTTP/2 and compression: set `spec.tls = Some(TlsSource::Generate)` for a
//! throw-away CA and certificate (the load trusts [`RunningTarget::ca_file`]),
//! `spec.settings.http2` to offer h2 by ALPN, `spec.settings.compression` for gzip /
//! Brotli. `start` refuses what a kind cannot do ([`TargetError::Unsupported`]) and its
//! probe checks each of them (ALPN chose h2, each `Content-Encoding` applied and
//! decoding to the file) before the target is declared ready. For a cold first request
//! (seed 002) name it in `spec.cold_path`: validation will not touch it, and
//! [`RunningTarget::started_at`] says when the process was spawned.
//!
//! WebDAV and CalDAV: `radicale` and `xandikos` always speak CalDAV; nginx, Apache and
//! lighttpd serve a plain WebDAV tree when `spec.settings.dav` is set. Either way the
//! target is started with `users` accounts whose calendars exist when `start` returns
//! ([`RunningTarget::dav`]). Only what a server reads is made here (its password file,
//! configuration, storage); every DAV request (the calendars' set-up, readiness, the
//! capability probe) is the DAV client's, `volley_office`.
//!
//! Cleanup is unconditional: `stop`, `Drop` (also while a panic unwinds) and [`stop_all`]
//! (for the CLI's Ctrl-C handler) all stop the process group, remove the private cgroups
//! and the private directory. Only processes volley spawned are ever signalled.
//!
//! And when volley itself is killed: the server gets a parent-death signal, every
//! managed target has its own cgroup, and what each target made is written in a ledger
//! keyed by volley's pid, which [`sweep_orphans`] reads on the next start to stop and
//! remove what a dead volley left.
#![deny(missing_docs)]

pub mod cgroup;
pub mod config;
pub mod dav;
mod env;
mod error;
pub mod kind;
mod orphans;
pub mod probe;
mod target;

pub use cgroup::{CgroupSettings, CpuQuota, ResourceLimits, ThrottleStats};
pub use config::{Compression, DavSettings, Placement, ServerSettings, TlsFiles};
pub use dav::{DavAccount, DavService};
pub use env::{cpu_model, Environment, HOST_SYSCTLS};
pub use error::{TargetDied, TargetError};
pub use kind::{discover, Installed, TargetKind, UnknownKind};
pub use orphans::{state_dir, sweep_orphans, LabSlot, Leftover, NotedDir, Removed};
pub use target::{
    parse_banner, pick_error_line, start, stop_all, ExternalTarget, NetnsPlace, RunningTarget,
    TargetRecord, TargetSpec, TlsRecord, TlsSource,
};
