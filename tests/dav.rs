//! Integration tests: WebDAV and CalDAV: the built-in server's DAV, real CalDAV clients
//! against it, DAV on managed targets, calendar features, multi-user authentication and
//! crash safety.
//!
//! One binary for the area (Cargo.toml `autotests = false`); each module is one file of
//! `tests/`, and the helpers they share are declared here once.

mod common;
mod groupware;

mod caldav_features;
mod dav_builtin;
mod dav_clients;
mod dav_targets;
mod groupware_auth;
mod groupware_crash;
