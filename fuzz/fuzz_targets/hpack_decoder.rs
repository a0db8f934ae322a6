//! Fuzz target: HPACK header blocks (any bytes) into the decoder, full and pseudo-only. The body lives in the
//! crate (`volley_h2::fuzzing::hpack_decoder`) so the seeded short run in the test suite drives the same code.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| volley_h2::fuzzing::hpack_decoder(data));
