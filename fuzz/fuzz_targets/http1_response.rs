//! Feeds arbitrary bytes, in arbitrary splits, to the HTTP/1.1 response reader.
//! The first byte chooses HEAD or not and the split sizes come from the next bytes,
//! so the fuzzer explores both the content and the read boundaries.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volley_engine::http1::ResponseReader;

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let Some((splits, payload)) = rest.split_at_checked(4.min(rest.len())) else {
        return;
    };
    let mut reader = ResponseReader::new();
    reader.start(ctl & 1 == 1);
    let mut body = Vec::new();
    let mut pos = 0;
    let mut i = 0;
    while pos < payload.len() {
        let step = (splits.get(i % splits.len().max(1)).copied().unwrap_or(0) as usize % 64) + 1;
        i += 1;
        let end = (pos + step).min(payload.len());
        match reader.push(&payload[pos..end], Some(&mut body)) {
            Ok(Some(r)) => {
                assert!(r.wire_bytes <= payload.len() as u64);
                assert_eq!(r.body_bytes, body.len() as u64);
                return;
            }
            Ok(None) => {}
            Err(_) => return,
        }
        pos = end;
    }
    if let Ok(r) = reader.eof() {
        assert!(r.wire_bytes <= payload.len() as u64);
    }
});
