//! The seeded short run of the access-log fuzz target (`fuzz/fuzz_targets/access_log.rs`):
//! the harness libFuzzer drives (`volley_replay::fuzzing::access_log`), fed the committed
//! corpus (`fuzz/corpus/access_log/`: Combined, Common, JSON lines, nginx `$msec` and
//! Apache `%{usec}t` logs, out-of-order and whole-second lines), every regression input
//! and 20,000 seeded mutations. A panic (a crash, or one of the harness's assertions)
//! fails the test; long runs are `cargo +nightly fuzz run access_log` (fuzz/README.md).

#[path = "../../../fuzz/short_run.rs"]
mod short_run;

#[test]
fn access_log_short_run() {
    short_run::short_run("access_log", 25, volley_replay::fuzzing::access_log);
}
