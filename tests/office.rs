//! Integration tests: the groupware office (`volley bench --caldav`, caldav workloads in
//! studies): days against the built-in server, Radicale, Xandikos and plain WebDAV,
//! injected faults, each profile's request sequence, sync removals.
//!
//! One binary for the area (Cargo.toml `autotests = false`); each module is one file of
//! `tests/`, and the helpers they share are declared here once.

mod common;

mod office_builtin;
mod office_faults;
mod office_plain_dav;
mod office_sequences;
mod office_servers;
mod office_sync_removals;
mod office_xandikos;
mod study_office;
