//! Fuzz target: arbitrary bytes as an access log, through every layout's line parser,
//! the streaming reader and the replay planner (`volley_replay::fuzzing::access_log`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| volley_replay::fuzzing::access_log(data));
