//! The seeded short run of the `office_multistatus` fuzz target: the harness libFuzzer
//! drives (`volley_office::fuzzing::multistatus`) fed the committed corpus, every
//! regression input and 20,000 seeded mutations (see fuzz/README.md for long runs).

#[path = "../../../fuzz/short_run.rs"]
mod short_run;

#[test]
fn office_multistatus_short_run() {
    short_run::short_run("office_multistatus", 4, volley_office::fuzzing::multistatus);
}
