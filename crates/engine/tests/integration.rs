//! The integration tests of `volley-engine`, one binary (Cargo.toml `autotests = false`):
//! each module is one file of `tests/`, the helpers they share are declared here once.

mod common;

mod conn_wait;
mod h2_compress;
mod h3_udp;
mod lanes;
mod load;
mod nginx_tls;
mod tls_h2;
