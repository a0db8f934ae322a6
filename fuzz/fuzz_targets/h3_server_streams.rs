//! Fuzz target: any client bytes into the HTTP/3 server's request stream reader and
//! its reading of the client's unidirectional streams. The body lives in the crate
//! (`volley_h3::server::fuzz_streams`) so the seeded short run in the test suite drives
//! the same code.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| volley_h3::server::fuzz_streams(data));
