//! The seeded short run of the `office_multistatus` fuzz target: the harness libFuzzer
//! drives (`volley_office::fuzzing::multistatus`) fed the committed corpus, every
//! regression input and 20,000 seeded mutations; `VOLLEY_FUZZ_RUNS=N` runs N more (see
//! fuzz/README.md for long runs).

#[path = "../../../fuzz/short_run.rs"]
mod short_run;

#[test]
fn office_multistatus_short_run() {
    short_run::short_run("office_multistatus", 4, volley_office::fuzzing::multistatus);
}

/// `VOLLEY_FUZZ_RUNS=N`: N more seeded mutations (a longer run without libFuzzer).
#[test]
fn office_multistatus_long_run_when_asked() {
    short_run::long_run(
        "office_multistatus",
        44,
        volley_office::fuzzing::multistatus,
    );
}
