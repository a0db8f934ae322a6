//! Integration tests: `volley serve` and `volley targets`: the built-in server over
//! HTTP/1.1, HTTP/2 and TLS (h2spec, request smuggling, the pocket server), managed
//! targets, their TLS, and the orphan sweep.
//!
//! One binary for the area (Cargo.toml `autotests = false`); each module is one file of
//! `tests/`, and the helpers they share are declared here once.

mod common;
mod groupware;

mod arenas;
mod h2spec;
mod orphans;
mod pocket;
mod serve_h2;
mod serve_h3;
mod serve_http;
mod serve_tls;
mod smuggling;
mod targets_cli;
mod targets_tls;
