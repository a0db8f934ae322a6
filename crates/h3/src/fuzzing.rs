//! Fuzz harnesses: the bodies of the `qpack_h3_decoder` and `h3_client_streams`
//! targets in `fuzz/`, kept here so the seeded short run in `tests/fuzz_short.rs`
//! drives exactly the code libFuzzer drives. Not part of the API (hidden from the
//! docs).
//!
//! Place in the flow: none; this is the test side of the codec. Both take any byte
//! string, must never panic, and assert what the codec promises for untrusted
//! input: bounded buffers, typed errors, and nothing reported that was not sent.

use volley_h2::hpack::FieldMode;

use crate::frame::FrameDecoder;
use crate::qpack::{self, Decoder, FIELD_OVERHEAD};
use crate::stream::{
    ControlEvent, LocalSettings, PeerStreams, ResponseEvent, ResponseReader, Role,
};
use crate::QpackError;

/// Fields a decoder reported, owned.
type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// QPACK decoding of an arbitrary encoder stream and field sections. The first byte
/// picks the section limit and the table capacity we advertise; the rest is a
/// series of records, each a tag byte (low bit: 0 encoder-stream bytes, 1 a field
/// section; the other seven: its length) and its bytes. Two decoders get the same
/// records; a section is decoded by one in [`FieldMode::All`], by the other in
/// [`FieldMode::PseudoOnly`]: the encoder stream leaves both in the same state; the
/// pseudo-only run never fails where the full one succeeded and reports exactly the
/// pseudo-fields; what decodes in full re-encodes to the same fields; reported
/// fields stay within the limit; the table stays within its capacity; and the
/// decoder never acknowledges more inserts than arrived.
pub fn qpack_h3_decoder(data: &[u8]) {
    let Some((&ctl, mut rest)) = data.split_first() else {
        return;
    };
    let max = [64, 1024, 16 << 10, 64 << 10][usize::from(ctl & 3)];
    let capacity = [0, 220, 4096, 64 << 10][usize::from((ctl >> 2) & 3)];
    let mut all = Decoder::with_table(max, capacity);
    let mut pseudo = Decoder::with_table(max, capacity);
    let mut inserts = 0u64;
    let mut stream_id = 0u64;
    while let Some((&tag, tail)) = rest.split_first() {
        let (bytes, next) = tail.split_at(usize::from(tag >> 1).min(tail.len()));
        rest = next;
        if tag & 1 == 0 {
            let a = all.feed_encoder(bytes);
            let b = pseudo.feed_encoder(bytes);
            assert_eq!(a, b, "two decoders fed the same encoder stream disagree");
            assert!(all.table_size() <= capacity, "table past its capacity");
            inserts += all.take_counts().inserts;
            if a.is_err() {
                // QPACK_ENCODER_STREAM_ERROR: the connection is over.
                break;
            }
            continue;
        }
        stream_id += 4;
        let mut fields = Fields::new();
        let full = all.decode(stream_id, bytes, FieldMode::All, |n, v| {
            fields.push((n.to_vec(), v.to_vec()))
        });
        let reported: usize = fields
            .iter()
            .map(|(n, v)| n.len() + v.len() + FIELD_OVERHEAD)
            .sum();
        assert!(reported <= max, "fields reported past the limit");
        let mut pseudo_fields = Fields::new();
        let fast = pseudo.decode(stream_id, bytes, FieldMode::PseudoOnly, |n, v| {
            pseudo_fields.push((n.to_vec(), v.to_vec()))
        });
        if full.is_ok() {
            assert!(
                matches!(fast, Ok(()) | Err(QpackError::FieldSectionTooLarge(_))),
                "PseudoOnly failed a section All accepted: {fast:?}"
            );
        }
        if full.is_ok() && fast.is_ok() {
            let wanted: Fields = fields
                .iter()
                .filter(|(n, _)| n.first() == Some(&b':'))
                .cloned()
                .collect();
            assert_eq!(pseudo_fields, wanted, "PseudoOnly reported other fields");
            round_trip(&fields);
        }
    }
    assert!(
        acknowledged(all.instructions()) <= inserts,
        "Insert Count Increments past the inserts received"
    );
}

/// The inserts the Insert Count Increments in decoder-stream `bytes` acknowledge.
fn acknowledged(mut bytes: &[u8]) -> u64 {
    let mut total = 0;
    while let Some(&b) = bytes.first() {
        // Section Acknowledgment 1(7+), Stream Cancellation 01(6+), Increment 00(6+).
        let prefix = if b & 0x80 != 0 { 7 } else { 6 };
        let mut c = qpack::Cursor { buf: bytes, pos: 0 };
        let v = c.integer(prefix).expect("our own instruction parses");
        if b & 0xc0 == 0 {
            total += v;
        }
        bytes = &bytes[c.pos..];
    }
    total
}

/// Our encoding of `fields`, decoded again, gives them back.
fn round_trip(fields: &Fields) {
    let mut section = Vec::new();
    qpack::encode_prefix(&mut section);
    for (n, v) in fields {
        qpack::encode_field(n, v, &mut section);
    }
    let mut again = Fields::new();
    Decoder::new(usize::MAX)
        .decode(0, &section, FieldMode::All, |n, v| {
            again.push((n.to_vec(), v.to_vec()))
        })
        .expect("our own encoding decodes");
    assert_eq!(
        &again, fields,
        "encode/decode round trip changed the fields"
    );
}

/// The client's stream readers fed arbitrary server bytes. The first byte picks
/// the read size, content capture, and whether the bytes go to a response stream
/// or to the peer's unidirectional streams (spread over four stream ids by the
/// second byte's bits, the last read with FIN).
///
/// Checked: no panic; a response reports no more body bytes than were fed and no
/// event after an error; a frame decoder's buffer stays within its limit.
pub fn h3_client_streams(data: &[u8]) {
    let Some((&ctl, input)) = data.split_first() else {
        return;
    };
    let read = [1, 3, 64, 1 << 20][usize::from(ctl & 3)];
    let capture = ctl & 4 != 0;
    if ctl & 8 == 0 {
        let local = LocalSettings {
            max_field_section_size: 2048,
            qpack_max_table_capacity: 4096,
        };
        let mut q = local.qpack_decoder();
        let mut r = ResponseReader::new(&local, capture);
        let mut body = 0usize;
        let mut fed = 0usize;
        for chunk in input.chunks(read) {
            fed += chunk.len();
            let res = r.feed(&mut q, 0, chunk, |e| {
                if let ResponseEvent::Data(d) = e {
                    body += d.len();
                }
            });
            assert!(body <= fed, "more body than bytes fed");
            if res.is_err() {
                return;
            }
        }
        let _ = r.finish();
    } else {
        let Some((&ids, input)) = input.split_first() else {
            return;
        };
        let mut p = PeerStreams::new(Role::Server);
        let mut q = Decoder::with_table(2048, 4096);
        let mut events = Vec::new();
        let chunks: Vec<&[u8]> = input.chunks(read).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let id = 3 + 4 * u64::from((ids >> (2 * (i % 4))) & 3);
            let fin = i + 1 == chunks.len();
            if p.feed(id, chunk, fin, &mut q, &mut events).is_err() {
                return;
            }
        }
        // At most one SETTINGS, and GOAWAY ids never increase.
        let settings = events
            .iter()
            .filter(|e| matches!(e, ControlEvent::Settings(_)))
            .count();
        assert!(settings <= 1, "SETTINGS reported twice");
    }
    // The frame decoder's own bound: a frame over the limit is refused at its header.
    let mut d = FrameDecoder::new(16);
    let _ = d.feed(input, |_| Ok(()));
}
