//! Fuzz target: the peer's QPACK encoder stream and field sections (any bytes) into the HTTP/3 decoder, full and pseudo-only. The body lives
//! in the crate (`volley_h3::fuzzing::qpack_h3_decoder`) so the seeded short run in the test suite drives the same code.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| volley_h3::fuzzing::qpack_h3_decoder(data));
