//! The integration tests of `volley-tls`, one binary (Cargo.toml `autotests = false`):
//! each module is one file of `tests/`, the helpers they share are declared here once.

mod common;

mod handshake;
mod nginx;
mod sans_io;
mod stream;
