//! The integration tests of `volley-agents`, one binary (Cargo.toml `autotests = false`):
//! each module is one file of `tests/`, the helpers they share are declared here once.

mod common;

mod bus;
mod bus_away;
mod fuzz_short;
mod manifest;
mod ssh;
mod trust;
