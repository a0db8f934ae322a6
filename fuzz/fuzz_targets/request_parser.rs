//! Fuzz target: arbitrary bytes into the built-in server's request-head parser and
//! chunked-body decoder. Neither may panic, and an accepted head must lie inside the
//! input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volley_server::parse::{decode_chunked, parse_head};

fuzz_target!(|data: &[u8]| {
    let mut headers = Vec::new();
    if let Ok(Some(head)) = parse_head(data, &mut headers) {
        assert!(head.len <= data.len());
        for h in &headers {
            assert!(h.name.end as usize <= head.len && h.value.end as usize <= head.len);
        }
        let _ = decode_chunked(&data[head.len..], 1 << 20);
    }
    let _ = decode_chunked(data, 1 << 20);
});
