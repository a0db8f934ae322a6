//! Fuzz harness: the body of the `h2_server_frames` target in `fuzz/`, kept here so the
//! seeded short run in `tests/fuzz_short.rs` drives exactly the code libFuzzer drives.
//! Not part of the API (hidden from the docs).
//!
//! Place in the flow: none; this is the test side of the server's HTTP/2 connection
//! (`h2`), which reads bytes from strangers. Any byte string must leave it without a
//! panic, with only whole, well-formed frames written, with bounded output, and, for
//! bad input, with a GOAWAY (the connection is then closing and takes nothing more).

use std::sync::Arc;

use volley_h2::frame::{kind, FrameHeader, HEADER_LEN};
use volley_h2::hpack::encode_field;

use crate::answer::Body;
use crate::h2::{H2Server, Request, Responder};

/// Output one `feed` + `fill` round may write at most: the answers to every frame of
/// one input (a few per frame, each a header block of at most a few KiB) plus the fill
/// target. Far above what any input of the fuzzer's sizes should cause; a runaway loop
/// crosses it at once.
const OUTPUT_BOUND_PER_BYTE: usize = 64;
const OUTPUT_SLACK_BYTES: usize = 256 << 10;

/// A responder like the server's: a body for GET, the request body echoed for PUT
/// (collected to END_STREAM), refusals with a short body.
struct Echo {
    body: Arc<[u8]>,
}

impl Responder for Echo {
    fn respond(&mut self, req: &Request<'_>, block: &mut Vec<u8>) -> Body {
        encode_field(b":status", b"200", block);
        if req.method == b"HEAD" {
            return Body::None;
        }
        if !req.body.is_empty() {
            let echoed: Arc<[u8]> = req.body.into();
            let len = echoed.len();
            return Body::Mem(echoed, 0, len);
        }
        Body::Mem(self.body.clone(), 0, self.body.len())
    }

    fn refuse(&mut self, status: u16, block: &mut Vec<u8>) -> Body {
        encode_field(b":status", status.to_string().as_bytes(), block);
        Body::None
    }

    fn wants_body(&self, method: &[u8]) -> bool {
        method == b"PUT" || method == b"PROPFIND" || method == b"REPORT"
    }
}

/// The server's HTTP/2 connection fed arbitrary client bytes. The first byte picks
/// the read size and the response body length; the rest is fed as the client's
/// stream (a fuzzer finds the preface from the corpus), with `fill` after each read as
/// the worker does.
pub fn h2_server_frames(data: &[u8]) {
    let Some((&ctl, input)) = data.split_first() else {
        return;
    };
    let read_size = [1, 9, 100, 1 << 20][usize::from(ctl & 3)];
    let body_len = [0, 10, 20_000, 70_000][usize::from((ctl >> 2) & 3)];
    let mut r = Echo {
        body: (0..body_len)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<u8>>()
            .into(),
    };
    let mut out = Vec::new();
    let mut conn = H2Server::new(&mut out, 1 << 16);
    check_frames(&out);
    let mut pending: Vec<u8> = Vec::new();
    for chunk in input.chunks(read_size) {
        pending.extend_from_slice(chunk);
        out.clear();
        let used = conn.feed(&pending, &mut out, &mut r);
        assert!(used <= pending.len(), "consumed more than it was given");
        pending.drain(..used);
        conn.fill(&mut out);
        check_frames(&out);
        assert!(
            out.len()
                <= pending.len().max(chunk.len()) * OUTPUT_BOUND_PER_BYTE + OUTPUT_SLACK_BYTES,
            "{} bytes written for a read of {}",
            out.len(),
            chunk.len()
        );
        if conn.is_closing() {
            // Closing takes nothing more: input is ignored, no frame is answered.
            out.clear();
            let used = conn.feed(b"\0\0\0\x04\0\0\0\0\0", &mut out, &mut r);
            assert_eq!(used, 9, "a closing connection still consumes its input");
            assert!(!has_frame(&out, kind::HEADERS), "answered after GOAWAY");
            return;
        }
    }
}

/// Every byte written is part of a whole frame with a valid header; a GOAWAY, if
/// any, has the 8-byte payload at least.
fn check_frames(mut b: &[u8]) {
    while !b.is_empty() {
        let h = FrameHeader::parse(b).expect("a whole frame header in the output");
        let end = HEADER_LEN + h.len as usize;
        assert!(b.len() >= end, "truncated frame in the output");
        if h.kind == kind::GOAWAY {
            assert!(h.len >= 8 && h.stream == 0, "malformed GOAWAY");
        }
        b = &b[end..];
    }
}

fn has_frame(mut b: &[u8], k: u8) -> bool {
    while let Some(h) = FrameHeader::parse(b) {
        if h.kind == k {
            return true;
        }
        b = &b[(HEADER_LEN + h.len as usize).min(b.len())..];
    }
    false
}
