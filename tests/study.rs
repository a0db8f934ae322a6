//! Integration tests: `volley study run`: sweeps, searches, the store and reports of a
//! study, and studies cut short.
//!
//! One binary for the area (Cargo.toml `autotests = false`); each module is one file of
//! `tests/`, and the helpers they share are declared here once.

mod common;

mod study_cli;
mod study_interrupt;
mod study_search;
mod study_starved;
mod study_store;
mod study_tuning;
