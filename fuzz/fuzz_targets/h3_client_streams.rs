//! Fuzz target: any server bytes into the HTTP/3 client's response and unidirectional stream readers. The body
//! lives in the crate (`volley_h3::fuzzing::h3_client_streams`) so the seeded short run in the test suite drives the same code.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| volley_h3::fuzzing::h3_client_streams(data));
