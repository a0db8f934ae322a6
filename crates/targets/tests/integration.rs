//! The integration tests of `volley-targets`, one binary (Cargo.toml `autotests = false`):
//! each module is one file of `tests/`, the helpers they share are declared here once.

mod targets_h2_probe;
mod targets_limits;
mod targets_servers;
mod targets_stop_all;
mod targets_tls_errors;
