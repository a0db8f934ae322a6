//! Integration tests: `volley bench` and the commands that read or print its results: the
//! load flags, compression, HTTP/2, HTTP/3, TLS, headroom, `--save`, `--target`, client profiles,
//! progress, tables, `demo`, `fixtures`, `report`.
//!
//! One binary for the area (Cargo.toml `autotests = false`); each module is one file of
//! `tests/`, and the helpers they share are declared here once.

mod common;
mod groupware;

mod bench_ab_words;
mod bench_cli;
mod bench_compress;
mod bench_h2_compress;
mod bench_h3;
mod bench_headroom;
mod bench_io;
mod bench_newcomer;
mod bench_probe;
mod bench_save_cli;
mod bench_target;
mod bench_target_knobs;
mod bench_tls;
mod client_profiles;
mod demo_cli;
mod fixtures_sets;
mod log_phases;
mod progress_cli;
mod replay;
mod report_cli;
mod report_hostile;
mod tables_cli;
