//! The integration tests of `volley-report`, one binary (Cargo.toml `autotests = false`):
//! each module is one file of `tests/`, the helpers they share are declared here once.

mod common;

mod report_html;
mod report_overlap;
mod report_real_summary;
mod report_snapshots;
mod report_tables;
