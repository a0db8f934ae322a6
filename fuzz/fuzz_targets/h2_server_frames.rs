//! Fuzz target: any client bytes into the built-in server's HTTP/2 connection. The body lives in the
//! crate (`volley_server::fuzzing::h2_server_frames`) so the seeded short run in the test suite drives the same code.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| volley_server::fuzzing::h2_server_frames(data));
