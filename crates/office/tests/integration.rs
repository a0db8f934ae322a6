//! The integration tests of `volley-office`, one binary: each module is one file of
//! `tests/`.

mod fuzz_short;
