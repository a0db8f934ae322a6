//! Fuzz target: arbitrary bytes as the 207 multistatus body a CalDAV server answers the
//! office's PROPFIND and REPORT with (`volley_office::xml::parse_multistatus`). Never a
//! panic; the same bytes give the same answer (`volley_office::fuzzing::multistatus`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| volley_office::fuzzing::multistatus(data));
