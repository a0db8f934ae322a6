//! Fuzz harnesses: the bodies of the `hpack_decoder` and `h2_client_feed` targets in
//! `fuzz/`, kept here so the seeded short runs in `tests/fuzz_short.rs` drive exactly
//! the code libFuzzer drives. Not part of the API (hidden from the docs).
//!
//! Place in the flow: none; this is the test side of the codec. Both harnesses take
//! any byte string, must never panic, and assert the properties the codec promises
//! for untrusted input: bounded buffers, and a connection error (with a GOAWAY of the
//! matching code) rather than a wrong answer.

use crate::frame::{kind, FrameHeader, HEADER_LEN};
use crate::hpack::{encode_field, Decoder, FieldMode, HpackError};
use crate::{ConnError, Event, H2Conn, RequestHead, Settings};

/// Header lists the decoder yields, owned.
type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// HPACK decoding of arbitrary header blocks. The first byte picks the advertised
/// table and list sizes; the rest is a series of blocks, each prefixed by its length
/// (one byte), decoded in order so the dynamic table carries over as on a
/// connection. Each block is decoded twice, in [`FieldMode::All`] and in
/// [`FieldMode::PseudoOnly`] (the engine's hot path, which skips values), and the
/// two must agree; a block decoded in full must survive re-encoding unchanged.
pub fn hpack_decoder(data: &[u8]) {
    let Some((&ctl, mut rest)) = data.split_first() else {
        return;
    };
    let max_table = [0, 64, 256, 4096][usize::from(ctl & 3)];
    let max_list = [64, 1024, 16 << 10, 64 << 10][usize::from((ctl >> 2) & 3)];
    let mut all = Decoder::new(max_table, max_list);
    let mut pseudo = Decoder::new(max_table, max_list);
    while let Some((&len, tail)) = rest.split_first() {
        let (block, next) = tail.split_at(usize::from(len).min(tail.len()));
        rest = next;
        let mut fields = Fields::new();
        let full = all.decode(block, FieldMode::All, |n, v| {
            fields.push((n.to_vec(), v.to_vec()))
        });
        let mut pseudo_fields = Fields::new();
        let fast = pseudo.decode(block, FieldMode::PseudoOnly, |n, v| {
            pseudo_fields.push((n.to_vec(), v.to_vec()))
        });
        assert!(all.table().size() <= max_table, "table above its limit");
        let reported: usize = fields.iter().map(|(n, v)| n.len() + v.len() + 32).sum();
        assert!(reported <= max_list, "fields reported past the list limit");
        match full {
            Ok(()) | Err(HpackError::HeaderListTooLarge(_)) => {}
            // The table is in an unknown state: a connection error ends the decoder.
            Err(_) => return,
        }
        // PseudoOnly checks less (skipped Huffman values are not decoded), never more.
        assert!(
            matches!(fast, Ok(()) | Err(HpackError::HeaderListTooLarge(_))),
            "PseudoOnly failed a block All accepted: {fast:?}"
        );
        assert_eq!(all.table().size(), pseudo.table().size(), "tables diverged");
        assert_eq!(all.table().len(), pseudo.table().len(), "tables diverged");
        if full.is_ok() && fast.is_ok() {
            let wanted: Fields = fields
                .iter()
                .filter(|(n, _)| n.first() == Some(&b':'))
                .cloned()
                .collect();
            assert_eq!(pseudo_fields, wanted, "PseudoOnly reported other fields");
        }
        if full.is_ok() {
            round_trip(&fields);
        }
    }
}

/// Our encoder's block for `fields`, decoded by a fresh decoder, gives them back.
fn round_trip(fields: &Fields) {
    let mut block = Vec::new();
    for (n, v) in fields {
        encode_field(n, v, &mut block);
    }
    let mut again = Fields::new();
    Decoder::new(4096, usize::MAX)
        .decode(&block, FieldMode::All, |n, v| {
            again.push((n.to_vec(), v.to_vec()))
        })
        .expect("our own encoding decodes");
    assert_eq!(
        &again, fields,
        "encode/decode round trip changed the fields"
    );
}

/// Queued output allowed above `max_pending_output_bytes`: a GOAWAY or an
/// acknowledgement written as the limit is crossed.
const OUTPUT_SLACK_BYTES: usize = 1024;

/// The client codec fed arbitrary server bytes. The first byte picks the settings
/// (content or header capture, a small output bound), whether the driver writes its
/// output (a driver that never writes tests the output bound) and the read size; the
/// rest is fed in reads of that size after three requests were submitted. Events
/// are polled until none is left after every read, and a request is resubmitted
/// whenever a stream finishes.
///
/// Checked: no panic; queued output stays within the configured bound; a failed
/// `feed` leaves a GOAWAY with the error's code as the last frame queued (unless the
/// peer's own GOAWAY ended it), and every later `feed` fails the same way.
pub fn h2_client_feed(data: &[u8]) {
    let Some((&ctl, input)) = data.split_first() else {
        return;
    };
    let settings = Settings {
        capture_content: ctl & 1 != 0,
        capture_headers: ctl & 2 != 0,
        max_pending_output_bytes: if ctl & 4 != 0 { 4 << 10 } else { 64 << 10 },
        max_header_list_size: 16 << 10,
        ..Settings::default()
    };
    let bound = settings.max_pending_output_bytes + OUTPUT_SLACK_BYTES;
    let writes = ctl & 8 == 0;
    let read_size = [1, 7, 64, 1 << 20][usize::from((ctl >> 4) & 3)];
    let mut conn = H2Conn::new(settings);
    for body in [&b""[..], b"hello", &[b'x'; 70_000]] {
        submit(&mut conn, body);
    }
    if writes {
        conn.consume_output(usize::MAX);
    }
    for chunk in input.chunks(read_size) {
        let written_before = conn.pending_output().len();
        let fed = conn.feed(chunk);
        let mut finished = 0;
        while let Some(ev) = conn.poll_event() {
            let _ = (conn.polled_data().len(), conn.polled_head());
            finished += usize::from(stream_finished(&ev));
        }
        while conn.pop_captured_headers().is_some() {}
        if let Err(e) = fed {
            check_failed(&conn, &e, written_before);
            return;
        }
        for _ in 0..finished {
            submit(&mut conn, b"");
        }
        assert!(
            conn.pending_output().len() <= bound,
            "output {} above its bound {bound}",
            conn.pending_output().len()
        );
        if writes {
            conn.consume_output(usize::MAX);
        }
    }
}

/// Submits a GET (or a POST with `body`) if the connection takes one now.
fn submit(conn: &mut H2Conn, body: &[u8]) {
    if !conn.can_submit() {
        return;
    }
    let head = RequestHead {
        method: if body.is_empty() { "GET" } else { "POST" },
        scheme: "http",
        authority: "fuzz",
        path: "/",
        headers: &[("accept", "*/*")],
    };
    // Refusals (output full, too many streams) are the codec's answer, not a bug.
    let _ = conn.submit(&head, body);
}

fn stream_finished(ev: &Event) -> bool {
    match *ev {
        Event::Headers { end_stream, .. } | Event::Data { end_stream, .. } => end_stream,
        Event::Trailers { .. } | Event::StreamReset { .. } | Event::StreamError { .. } => true,
        Event::GoAway { .. } | Event::PeerSettings | Event::Ping => false,
    }
}

/// After `feed` failed with `e`: the connection is dead, says so again, and (for
/// our own errors) queued a GOAWAY with the code as its last frame.
fn check_failed(conn: &H2Conn, e: &ConnError, written_before: usize) {
    assert_eq!(conn.error(), Some(e));
    assert!(conn.is_going_away() && !conn.can_submit());
    if !matches!(e, ConnError::GoAway { .. }) {
        let out = conn.pending_output();
        let at = out
            .len()
            .checked_sub(HEADER_LEN + 8)
            .expect("a GOAWAY queued");
        assert!(at >= written_before, "no GOAWAY written for {e}");
        let h = FrameHeader::parse(&out[at..]).expect("frame header");
        assert_eq!((h.kind, h.len, h.stream), (kind::GOAWAY, 8, 0), "{e}");
        let code = u32::from_be_bytes(out[at + HEADER_LEN + 4..].try_into().unwrap());
        assert_eq!(code, e.code().to_u32(), "GOAWAY code for {e}");
    }
}
