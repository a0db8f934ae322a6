//! The integration tests of `volley-server`, one binary (Cargo.toml `autotests = false`):
//! each module is one file of `tests/`, the helpers they share are declared here once.

mod bodies;
mod fuzz_short;
mod threads;
mod tls;
