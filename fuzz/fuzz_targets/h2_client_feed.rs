//! Fuzz target: any server bytes into the engine's HTTP/2 client codec. The body lives in the
//! crate (`volley_h2::fuzzing::h2_client_feed`) so the seeded short run in the test suite drives the same code.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| volley_h2::fuzzing::h2_client_feed(data));
