//! Scripted client byte streams into [`H2Server`], frames out, checked one by one.

use super::*;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use volley_h2::hpack::encode_field;

/// Answers `/hello` with `body`, `/big-head` with a field longer than one frame,
/// anything else 404; HEAD gets no body.
struct Fake {
    body: Arc<[u8]>,
}

impl Responder for Fake {
    fn respond(&mut self, req: &Request<'_>, block: &mut Vec<u8>) -> Body {
        let head_only = req.method == b"HEAD";
        match req.path {
            b"/hello" => {
                encode_field(b":status", b"200", block);
                encode_field(
                    b"content-length",
                    self.body.len().to_string().as_bytes(),
                    block,
                );
                if head_only {
                    Body::None
                } else {
                    Body::Mem(self.body.clone(), 0, self.body.len())
                }
            }
            b"/echo" => {
                encode_field(b":status", b"200", block);
                encode_field(b"x-body", req.body, block);
                Body::None
            }
            b"/big-head" => {
                encode_field(b":status", b"200", block);
                encode_field(b"x-big", &vec![b'a'; 40_000], block);
                Body::None
            }
            _ => self.refuse(404, block),
        }
    }

    fn refuse(&mut self, status: u16, block: &mut Vec<u8>) -> Body {
        encode_field(b":status", status.to_string().as_bytes(), block);
        Body::None
    }

    fn wants_body(&self, method: &[u8]) -> bool {
        method == b"PUT"
    }
}

fn fake(len: usize) -> Fake {
    Fake {
        body: (0..len)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<u8>>()
            .into(),
    }
}

fn frame_bytes(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    frame::write_header(&mut v, payload.len(), kind, flags, stream);
    v.extend_from_slice(payload);
    v
}

fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
    let mut v = Vec::new();
    frame::write_settings(&mut v, pairs);
    v
}

fn preface(pairs: &[(u16, u32)]) -> Vec<u8> {
    let mut v = PREFACE.to_vec();
    v.extend(settings(pairs));
    v
}

fn get_block(path: &str) -> Vec<u8> {
    let mut b = Vec::new();
    for (n, v) in [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "localhost"),
        (":path", path),
    ] {
        encode_field(n.as_bytes(), v.as_bytes(), &mut b);
    }
    b
}

fn get(stream: u32, path: &str) -> Vec<u8> {
    frame_bytes(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        stream,
        &get_block(path),
    )
}

fn window_update(stream: u32, inc: u32) -> Vec<u8> {
    let mut v = Vec::new();
    frame::write_window_update(&mut v, stream, inc);
    v
}

#[derive(Debug)]
struct Frame {
    h: FrameHeader,
    payload: Vec<u8>,
}

fn frames(mut b: &[u8]) -> Vec<Frame> {
    let mut v = Vec::new();
    while let Some(h) = FrameHeader::parse(b) {
        let end = HEADER_LEN + h.len as usize;
        assert!(b.len() >= end, "truncated frame in output");
        v.push(Frame {
            h,
            payload: b[HEADER_LEN..end].to_vec(),
        });
        b = &b[end..];
    }
    assert!(b.is_empty(), "stray bytes after the last frame");
    v
}

/// Feeds everything (as one chunk) and fills once; returns the frames written.
fn run(s: &mut H2Server, r: &mut Fake, input: &[u8]) -> Vec<Frame> {
    let mut out = Vec::new();
    let used = s.feed(input, &mut out, r);
    assert_eq!(used, input.len(), "whole frames must be consumed");
    s.fill(&mut out);
    frames(&out)
}

fn open(pairs: &[(u16, u32)]) -> (H2Server, Vec<Frame>) {
    let mut out = Vec::new();
    let mut s = H2Server::new(&mut out, 1000);
    let mut r = fake(0);
    let used = s.feed(&preface(pairs), &mut out, &mut r);
    assert_eq!(used, 24 + 9 + pairs.len() * 6);
    (s, frames(&out))
}

fn goaway_code(f: &[Frame]) -> Option<u32> {
    f.iter()
        .find(|f| f.h.kind == kind::GOAWAY)
        .map(|f| u32::from_be_bytes(f.payload[4..8].try_into().unwrap()))
}

fn rst_code(f: &[Frame], stream: u32) -> Option<u32> {
    f.iter()
        .find(|f| f.h.kind == kind::RST_STREAM && f.h.stream == stream)
        .map(|f| u32::from_be_bytes(f.payload[..4].try_into().unwrap()))
}

fn decode_head(payload: &[u8]) -> Vec<(String, String)> {
    let mut d = Decoder::new(4096, 1 << 20);
    let mut v = Vec::new();
    d.decode(payload, FieldMode::All, |n, val| {
        v.push((
            String::from_utf8_lossy(n).into_owned(),
            String::from_utf8_lossy(val).into_owned(),
        ))
    })
    .unwrap();
    v
}

fn data_of(f: &[Frame], stream: u32) -> Vec<u8> {
    f.iter()
        .filter(|f| f.h.kind == kind::DATA && f.h.stream == stream)
        .flat_map(|f| f.payload.clone())
        .collect()
}

#[test]
fn settings_exchange_and_ack() {
    let (_, f) = open(&[(setting::INITIAL_WINDOW_SIZE, 1000)]);
    assert_eq!(f.len(), 2);
    // Our SETTINGS first, advertising the stream cap, then the ACK of theirs.
    assert_eq!(f[0].h.kind, kind::SETTINGS);
    assert!(!f[0].h.has(flag::ACK));
    assert!(f[0]
        .payload
        .chunks(6)
        .any(|p| p == [0, 3, 0, 0, 0, MAX_CONCURRENT_STREAMS as u8]));
    assert_eq!(f[1].h.kind, kind::SETTINGS);
    assert!(f[1].h.has(flag::ACK));
    assert_eq!(f[1].h.len, 0);
}

#[test]
fn ping_is_acked_with_its_payload() {
    let (mut s, _) = open(&[]);
    let mut r = fake(0);
    let mut ping = Vec::new();
    frame::write_ping(&mut ping, false, *b"12345678");
    let f = run(&mut s, &mut r, &ping);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].h.kind, kind::PING);
    assert!(f[0].h.has(flag::ACK));
    assert_eq!(f[0].payload, b"12345678");
    // An ACK is not answered.
    ping.clear();
    frame::write_ping(&mut ping, true, *b"12345678");
    assert!(run(&mut s, &mut r, &ping).is_empty());
}

#[test]
fn get_answers_headers_then_data_with_end_stream() {
    let (mut s, _) = open(&[]);
    let mut r = fake(1000);
    let f = run(&mut s, &mut r, &get(1, "/hello"));
    assert_eq!(f[0].h.kind, kind::HEADERS);
    assert!(f[0].h.has(flag::END_HEADERS) && !f[0].h.has(flag::END_STREAM));
    let head = decode_head(&f[0].payload);
    assert_eq!(head[0], (":status".into(), "200".into()));
    assert!(head.contains(&("content-length".into(), "1000".into())));
    assert_eq!(data_of(&f, 1), &r.body[..]);
    assert!(f.last().unwrap().h.has(flag::END_STREAM));
    assert_eq!(s.take_answered(), 1);
    assert!(!s.is_closing());
}

#[test]
fn head_and_404_end_the_stream_in_headers() {
    let (mut s, _) = open(&[]);
    let mut r = fake(1000);
    let mut b = Vec::new();
    for (n, v) in [
        (":method", "HEAD"),
        (":scheme", "http"),
        (":path", "/hello"),
    ] {
        encode_field(n.as_bytes(), v.as_bytes(), &mut b);
    }
    let mut input = frame_bytes(kind::HEADERS, flag::END_HEADERS | flag::END_STREAM, 1, &b);
    input.extend(get(3, "/missing"));
    let f = run(&mut s, &mut r, &input);
    assert_eq!(f.len(), 2);
    assert!(f
        .iter()
        .all(|f| f.h.kind == kind::HEADERS && f.h.has(flag::END_STREAM)));
    assert_eq!(decode_head(&f[1].payload)[0].1, "404");
}

#[test]
fn data_honours_stream_window_and_max_frame_size() {
    let (mut s, _) = open(&[
        (setting::INITIAL_WINDOW_SIZE, 10),
        (setting::MAX_FRAME_SIZE, 16_384),
    ]);
    let mut r = fake(100);
    let f = run(&mut s, &mut r, &get(1, "/hello"));
    assert_eq!(data_of(&f, 1).len(), 10);
    // Nothing more until the window opens.
    assert!(run(&mut s, &mut r, &[]).is_empty());
    let f = run(&mut s, &mut r, &window_update(1, 90));
    assert_eq!(data_of(&f, 1), &r.body[10..]);
    assert!(f.last().unwrap().h.has(flag::END_STREAM));
}

#[test]
fn data_honours_connection_window_and_frame_size() {
    let (mut s, _) = open(&[(setting::INITIAL_WINDOW_SIZE, 1 << 20)]);
    let mut r = fake(100_000);
    let mut got = Vec::new();
    let f = run(&mut s, &mut r, &get(1, "/hello"));
    assert!(f.iter().all(|f| f.h.len <= 16_384));
    got.extend(data_of(&f, 1));
    // The connection window (65,535 by default) caps what goes out.
    assert_eq!(got.len(), 65_535);
    let f = run(&mut s, &mut r, &window_update(0, 1 << 20));
    got.extend(data_of(&f, 1));
    assert_eq!(got, &r.body[..]);
}

#[test]
fn a_larger_peer_frame_size_is_used() {
    let (mut s, _) = open(&[
        (setting::INITIAL_WINDOW_SIZE, 1 << 20),
        (setting::MAX_FRAME_SIZE, 40_000),
    ]);
    let mut r = fake(60_000);
    let f = run(&mut s, &mut r, &get(1, "/hello"));
    let sizes: Vec<u32> = f
        .iter()
        .filter(|f| f.h.kind == kind::DATA)
        .map(|f| f.h.len)
        .collect();
    assert_eq!(sizes, [40_000, 20_000]);
}

#[test]
fn initial_window_change_moves_open_streams() {
    let (mut s, _) = open(&[(setting::INITIAL_WINDOW_SIZE, 0)]);
    let mut r = fake(50);
    assert!(data_of(&run(&mut s, &mut r, &get(1, "/hello")), 1).is_empty());
    let f = run(
        &mut s,
        &mut r,
        &settings(&[(setting::INITIAL_WINDOW_SIZE, 20)]),
    );
    assert_eq!(data_of(&f, 1).len(), 20);
}

#[test]
fn rst_stream_from_the_client_stops_its_data() {
    let (mut s, _) = open(&[(setting::INITIAL_WINDOW_SIZE, 0)]);
    let mut r = fake(50);
    run(&mut s, &mut r, &get(1, "/hello"));
    let mut input = Vec::new();
    frame::write_rst_stream(&mut input, 1, ErrorCode::Cancel.to_u32());
    input.extend(window_update(1, 100));
    let f = run(&mut s, &mut r, &input);
    assert!(f.is_empty(), "{f:?}");
}

#[test]
fn streams_beyond_the_cap_are_refused() {
    let (mut s, _) = open(&[(setting::INITIAL_WINDOW_SIZE, 0)]);
    let mut r = fake(10);
    let mut input = Vec::new();
    let n = MAX_CONCURRENT_STREAMS + 1;
    for k in 0..n {
        input.extend(get(2 * k + 1, "/hello"));
    }
    let f = run(&mut s, &mut r, &input);
    let last = 2 * (n - 1) + 1;
    assert_eq!(rst_code(&f, last), Some(ErrorCode::RefusedStream.to_u32()));
    assert_eq!(rst_code(&f, last - 2), None);
    assert_eq!(goaway_code(&f), None);
}

#[test]
fn header_block_split_over_continuation() {
    let (mut s, _) = open(&[]);
    let mut r = fake(5);
    let block = get_block("/hello");
    let (a, b) = block.split_at(3);
    let mut input = frame_bytes(kind::HEADERS, flag::END_STREAM, 1, a);
    input.extend(frame_bytes(kind::CONTINUATION, flag::END_HEADERS, 1, b));
    let f = run(&mut s, &mut r, &input);
    assert_eq!(decode_head(&f[0].payload)[0].1, "200");
    assert_eq!(data_of(&f, 1), &r.body[..]);
}

#[test]
fn long_response_head_goes_out_in_continuation_frames() {
    let (mut s, _) = open(&[]);
    let mut r = fake(0);
    let f = run(&mut s, &mut r, &get(1, "/big-head"));
    assert_eq!(f[0].h.kind, kind::HEADERS);
    assert!(!f[0].h.has(flag::END_HEADERS) && f[0].h.has(flag::END_STREAM));
    assert!(f[1..].iter().all(|f| f.h.kind == kind::CONTINUATION));
    assert!(f.last().unwrap().h.has(flag::END_HEADERS));
    assert!(f.iter().all(|f| f.h.len <= 16_384));
    let block: Vec<u8> = f.iter().flat_map(|f| f.payload.clone()).collect();
    assert_eq!(decode_head(&block)[1].1.len(), 40_000);
}

#[test]
fn padded_and_prioritised_headers_are_understood() {
    let (mut s, _) = open(&[]);
    let mut r = fake(3);
    let mut p = vec![4u8]; // pad length
    p.extend([0, 0, 0, 0, 16]); // priority fields
    p.extend(get_block("/hello"));
    p.extend([0; 4]);
    let input = frame_bytes(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM | flag::PADDED | flag::PRIORITY,
        1,
        &p,
    );
    let f = run(&mut s, &mut r, &input);
    assert_eq!(data_of(&f, 1), &r.body[..]);
}

#[test]
fn byte_at_a_time_input_gives_the_same_frames() {
    let mut whole = preface(&[]);
    whole.extend(get(1, "/hello"));
    whole.extend(get(3, "/nope"));
    let mut r = fake(300);
    let mut out_a = Vec::new();
    let mut a = H2Server::new(&mut out_a, 1000);
    assert_eq!(a.feed(&whole, &mut out_a, &mut r), whole.len());
    a.fill(&mut out_a);
    let mut out_b = Vec::new();
    let mut b = H2Server::new(&mut out_b, 1000);
    let mut pending = Vec::new();
    for &byte in &whole {
        pending.push(byte);
        let used = b.feed(&pending, &mut out_b, &mut r);
        pending.drain(..used);
    }
    assert!(pending.is_empty());
    b.fill(&mut out_b);
    assert_eq!(out_a, out_b);
}

#[test]
fn malformed_requests_are_stream_errors() {
    let (mut s, _) = open(&[]);
    let mut r = fake(3);
    let cases: [&[(&str, &str)]; 5] = [
        &[(":method", "GET"), (":scheme", "http")], // no :path
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            ("Upper", "x"),
        ],
        &[
            (":method", "GET"),
            ("a", "b"),
            (":scheme", "http"),
            (":path", "/"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            ("connection", "close"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":status", "200"),
        ],
    ];
    for (k, fields) in cases.iter().enumerate() {
        let stream = 2 * k as u32 + 1;
        let mut b = Vec::new();
        for (n, v) in fields.iter() {
            // encode_field expects lower case, but a literal name goes through as is.
            encode_field(n.as_bytes(), v.as_bytes(), &mut b);
        }
        let f = run(
            &mut s,
            &mut r,
            &frame_bytes(
                kind::HEADERS,
                flag::END_HEADERS | flag::END_STREAM,
                stream,
                &b,
            ),
        );
        assert_eq!(
            rst_code(&f, stream),
            Some(ErrorCode::ProtocolError.to_u32()),
            "case {k}: {f:?}"
        );
        assert!(!s.is_closing());
    }
}

/// Each input after a good preface, and the GOAWAY code it must earn.
#[test]
fn connection_errors_send_goaway_with_the_right_code() {
    let mut oversized = Vec::new();
    frame::write_header(&mut oversized, 16_385, kind::DATA, 0, 1);
    let bad_hpack = frame_bytes(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        1,
        &[0x80], // indexed field 0
    );
    let out_of_range = frame_bytes(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        1,
        &[0xff, 0x7f], // index 190
    );
    let mut interleaved = frame_bytes(kind::HEADERS, 0, 1, &get_block("/")[..2]);
    interleaved.extend(frame_bytes(kind::PING, 0, 0, &[0; 8]));
    let mut wu_overflow = window_update(0, 0x7fff_ffff);
    wu_overflow.extend(window_update(0, 0x7fff_ffff));
    let mut stale = get(3, "/hello");
    stale.extend(get(1, "/hello"));
    let cases: Vec<(&str, Vec<u8>, ErrorCode)> = vec![
        ("oversized frame", oversized, ErrorCode::FrameSizeError),
        ("HPACK index 0", bad_hpack, ErrorCode::CompressionError),
        (
            "HPACK index out of range",
            out_of_range,
            ErrorCode::CompressionError,
        ),
        (
            "frame inside a header block",
            interleaved,
            ErrorCode::ProtocolError,
        ),
        ("even stream id", get(2, "/hello"), ErrorCode::ProtocolError),
        ("stream id going backwards", stale, ErrorCode::StreamClosed),
        (
            "DATA on stream 0",
            frame_bytes(kind::DATA, 0, 0, b"x"),
            ErrorCode::ProtocolError,
        ),
        (
            "DATA on an idle stream",
            frame_bytes(kind::DATA, 0, 5, b"x"),
            ErrorCode::ProtocolError,
        ),
        (
            "PING of 7 bytes",
            frame_bytes(kind::PING, 0, 0, &[0; 7]),
            ErrorCode::FrameSizeError,
        ),
        (
            "SETTINGS of 5 bytes",
            frame_bytes(kind::SETTINGS, 0, 0, &[0; 5]),
            ErrorCode::FrameSizeError,
        ),
        (
            "SETTINGS on a stream",
            frame_bytes(kind::SETTINGS, 0, 1, &[]),
            ErrorCode::ProtocolError,
        ),
        (
            "bad MAX_FRAME_SIZE",
            settings(&[(setting::MAX_FRAME_SIZE, 100)]),
            ErrorCode::ProtocolError,
        ),
        (
            "window above 2^31-1",
            settings(&[(setting::INITIAL_WINDOW_SIZE, 1 << 31)]),
            ErrorCode::FlowControlError,
        ),
        (
            "connection window overflow",
            wu_overflow,
            ErrorCode::FlowControlError,
        ),
        (
            "zero connection window update",
            window_update(0, 0),
            ErrorCode::ProtocolError,
        ),
        (
            "PUSH_PROMISE from a client",
            frame_bytes(kind::PUSH_PROMISE, flag::END_HEADERS, 1, &[0, 0, 0, 2]),
            ErrorCode::ProtocolError,
        ),
        (
            "CONTINUATION out of the blue",
            frame_bytes(kind::CONTINUATION, flag::END_HEADERS, 1, &[0x82]),
            ErrorCode::ProtocolError,
        ),
        (
            "RST_STREAM on an idle stream",
            frame_bytes(kind::RST_STREAM, 0, 9, &[0; 4]),
            ErrorCode::ProtocolError,
        ),
        (
            "padding longer than the payload",
            frame_bytes(
                kind::HEADERS,
                flag::PADDED | flag::END_HEADERS,
                1,
                &[9, 0x82],
            ),
            ErrorCode::ProtocolError,
        ),
    ];
    for (name, input, code) in cases {
        let (mut s, _) = open(&[]);
        let mut r = fake(3);
        let mut out = Vec::new();
        let used = s.feed(&input, &mut out, &mut r);
        assert_eq!(used, input.len(), "{name}: input after GOAWAY is discarded");
        let f = frames(&out);
        assert_eq!(goaway_code(&f), Some(code.to_u32()), "{name}: {f:?}");
        assert!(s.is_closing(), "{name}");
        // Nothing follows a GOAWAY, whatever comes next.
        let mut more = Vec::new();
        assert_eq!(
            s.feed(&get(101, "/hello"), &mut more, &mut r),
            9 + get_block("/hello").len()
        );
        s.fill(&mut more);
        assert!(more.is_empty(), "{name}");
    }
}

#[test]
fn bad_preface_and_missing_settings_are_protocol_errors() {
    for input in [
        b"GET / HTTP/1.1\r\n\r\n".to_vec(),
        {
            let mut v = PREFACE.to_vec();
            v.extend(frame_bytes(kind::PING, 0, 0, &[0; 8]));
            v
        },
        {
            let mut v = PREFACE.to_vec();
            v.extend(frame_bytes(kind::SETTINGS, flag::ACK, 0, &[]));
            v
        },
    ] {
        let mut out = Vec::new();
        let mut s = H2Server::new(&mut out, 1000);
        out.clear();
        s.feed(&input, &mut out, &mut fake(0));
        assert_eq!(
            goaway_code(&frames(&out)),
            Some(ErrorCode::ProtocolError.to_u32())
        );
        assert!(s.is_closing());
    }
}

#[test]
fn client_data_is_refunded_and_answer_resets_its_body() {
    let (mut s, _) = open(&[]);
    let mut r = fake(4);
    // A GET that announces a body (no END_STREAM): answered at once, and the stream
    // stays half-closed (local) until the client ends it, so a WINDOW_UPDATE overflow
    // on it is still a FLOW_CONTROL_ERROR (h2spec 6.9.1/3), not lost after a reset.
    let input = frame_bytes(kind::HEADERS, flag::END_HEADERS, 1, &get_block("/hello"));
    let f = run(&mut s, &mut r, &input);
    assert_eq!(data_of(&f, 1), &r.body[..]);
    assert_eq!(rst_code(&f, 1), None);
    // The body's DATA is taken in and dropped, and the connection window refunded past
    // half.
    let mut refunds = 0;
    for _ in 0..3 {
        let f = run(&mut s, &mut r, &frame_bytes(kind::DATA, 0, 1, &[0; 16_384]));
        refunds += f
            .iter()
            .filter(|f| f.h.kind == kind::WINDOW_UPDATE && f.h.stream == 0)
            .count();
    }
    assert_eq!(refunds, 1);
    assert!(!s.is_closing());
}

#[test]
fn oversized_header_list_gets_431() {
    let (mut s, _) = open(&[]);
    let mut r = fake(0);
    let mut b = get_block("/hello");
    encode_field(b"x-long", &vec![b'x'; 20_000], &mut b);
    let (a, rest) = b.split_at(10_000);
    let mut input = frame_bytes(kind::HEADERS, flag::END_STREAM, 1, a);
    input.extend(frame_bytes(kind::CONTINUATION, flag::END_HEADERS, 1, rest));
    let f = run(&mut s, &mut r, &input);
    assert_eq!(decode_head(&f[0].payload)[0].1, "431");
    assert!(!s.is_closing());
}

/// Seeded random frames after a valid preface: the connection always returns,
/// consumes whole frames, and writes only well-formed frames (checked by `frames`).
#[test]
fn random_frames_never_panic() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x4832);
    for _ in 0..2000 {
        let (mut s, _) = open(&[]);
        let mut r = fake(rng.random_range(0..70_000));
        let mut input = Vec::new();
        for _ in 0..rng.random_range(1..6) {
            let kind = rng.random_range(0..11u8);
            let flags: u8 = rng.random();
            let stream = rng.random_range(0..6u32);
            let len = rng.random_range(0..40usize);
            let mut p: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            if kind == kind::HEADERS && rng.random_bool(0.5) {
                p = get_block("/hello");
            }
            input.extend(frame_bytes(kind, flags, stream, &p));
        }
        let mut out = Vec::new();
        let used = s.feed(&input, &mut out, &mut r);
        assert!(used <= input.len());
        s.fill(&mut out);
        frames(&out);
    }
}

#[test]
fn a_body_is_collected_until_end_stream_then_answered() {
    let (mut s, _) = open(&[]);
    let mut r = fake(3);
    let mut b = Vec::new();
    for (n, v) in [(":method", "PUT"), (":scheme", "http"), (":path", "/echo")] {
        encode_field(n.as_bytes(), v.as_bytes(), &mut b);
    }
    let f = run(
        &mut s,
        &mut r,
        &frame_bytes(kind::HEADERS, flag::END_HEADERS, 1, &b),
    );
    assert!(f.is_empty(), "no answer before the body: {f:?}");
    let f = run(&mut s, &mut r, &frame_bytes(kind::DATA, 0, 1, b"hello "));
    // Only the stream window refund.
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].h.kind, f[0].h.stream), (kind::WINDOW_UPDATE, 1));
    let f = run(
        &mut s,
        &mut r,
        &frame_bytes(kind::DATA, flag::END_STREAM, 1, b"world"),
    );
    let head = decode_head(&f[0].payload);
    assert_eq!(head[0].1, "200");
    assert!(
        head.contains(&("x-body".into(), "hello world".into())),
        "{head:?}"
    );
    assert_eq!(s.take_answered(), 1);

    // A body past the limit (1000 bytes here) gets 413 at once.
    let f = run(
        &mut s,
        &mut r,
        &frame_bytes(kind::HEADERS, flag::END_HEADERS, 3, &b),
    );
    assert!(f.is_empty());
    let f = run(&mut s, &mut r, &frame_bytes(kind::DATA, 0, 3, &[0; 1001]));
    assert_eq!(decode_head(&f[0].payload)[0].1, "413");
    assert_eq!(rst_code(&f, 3), Some(ErrorCode::NoError.to_u32()));
    assert!(!s.is_closing());
}

#[test]
fn data_on_closed_or_half_closed_streams_is_stream_closed() {
    let (mut s, _) = open(&[]);
    let mut r = fake(4);
    // Half-closed (remote): the GET ended its side and its answer is still queued.
    let mut input = get(1, "/hello");
    input.extend(frame_bytes(kind::DATA, flag::END_STREAM, 1, b"x"));
    let f = run(&mut s, &mut r, &input);
    assert_eq!(rst_code(&f, 1), Some(ErrorCode::StreamClosed.to_u32()));
    assert!(!s.is_closing());
    // Closed by the client's RST_STREAM: a connection error.
    let (mut s, _) = open(&[]);
    let mut input = frame_bytes(kind::HEADERS, flag::END_HEADERS, 1, &get_block("/hello"));
    input.extend(frame_bytes(kind::RST_STREAM, 0, 1, &8u32.to_be_bytes()));
    input.extend(frame_bytes(kind::DATA, flag::END_STREAM, 1, b"x"));
    let f = run(&mut s, &mut r, &input);
    assert_eq!(goaway_code(&f), Some(ErrorCode::StreamClosed.to_u32()));
    // Closed after a complete exchange: a connection error too.
    let (mut s, _) = open(&[]);
    let f = run(&mut s, &mut r, &get(1, "/nothing"));
    assert!(goaway_code(&f).is_none());
    let f = run(&mut s, &mut r, &frame_bytes(kind::DATA, 0, 1, b"x"));
    assert_eq!(goaway_code(&f), Some(ErrorCode::StreamClosed.to_u32()));
}

#[test]
fn a_stream_depending_on_itself_is_a_protocol_error() {
    let (mut s, _) = open(&[]);
    let mut r = fake(4);
    let mut prio = 3u32.to_be_bytes().to_vec();
    prio.push(16);
    let f = run(&mut s, &mut r, &frame_bytes(kind::PRIORITY, 0, 3, &prio));
    assert_eq!(rst_code(&f, 3), Some(ErrorCode::ProtocolError.to_u32()));
    assert!(!s.is_closing());
    let mut p = 5u32.to_be_bytes().to_vec();
    p.push(16);
    p.extend(get_block("/hello"));
    let flags = flag::END_HEADERS | flag::END_STREAM | flag::PRIORITY;
    let f = run(&mut s, &mut r, &frame_bytes(kind::HEADERS, flags, 5, &p));
    assert_eq!(goaway_code(&f), Some(ErrorCode::ProtocolError.to_u32()));
}

#[test]
fn a_body_unlike_its_content_length_is_a_protocol_error() {
    let mut r = fake(4);
    // PUT /echo collects its body; POST /hello is answered at once, with a body that
    // keeps the stream open while the request body arrives.
    let block = |method: &str| {
        let path = if method == "PUT" { "/echo" } else { "/hello" };
        let mut b = Vec::new();
        for (n, v) in [
            (":method", method),
            (":scheme", "http"),
            (":path", path),
            ("content-length", "3"),
        ] {
            encode_field(n.as_bytes(), v.as_bytes(), &mut b);
        }
        b
    };
    // Collected bodies (PUT) and bodies of requests answered at once (POST), too long
    // in one DATA frame or too short at END_STREAM.
    for method in ["PUT", "POST"] {
        for frames_in in [vec![&b"four"[..]], vec![&b"ab"[..]]] {
            let (mut s, _) = open(&[]);
            let mut input = frame_bytes(kind::HEADERS, flag::END_HEADERS, 1, &block(method));
            for d in frames_in {
                input.extend(frame_bytes(kind::DATA, flag::END_STREAM, 1, d));
            }
            let f = run(&mut s, &mut r, &input);
            assert_eq!(
                rst_code(&f, 1),
                Some(ErrorCode::ProtocolError.to_u32()),
                "{method}: {f:?}"
            );
        }
        // The declared length is fine.
        let (mut s, _) = open(&[]);
        let mut input = frame_bytes(kind::HEADERS, flag::END_HEADERS, 1, &block(method));
        input.extend(frame_bytes(kind::DATA, flag::END_STREAM, 1, b"abc"));
        let f = run(&mut s, &mut r, &input);
        assert_ne!(
            rst_code(&f, 1),
            Some(ErrorCode::ProtocolError.to_u32()),
            "{method}"
        );
    }
}

#[test]
fn window_overflow_on_an_answered_open_stream_is_a_flow_control_error() {
    // h2spec 6.9.1/3, whichever read the WINDOW_UPDATEs arrive in: HEADERS without
    // END_STREAM is answered at once; the stream is half-closed (local), so a window
    // pushed past 2^31-1 afterwards is still answered with FLOW_CONTROL_ERROR.
    let (mut s, _) = open(&[]);
    let mut r = fake(4);
    let input = frame_bytes(kind::HEADERS, flag::END_HEADERS, 1, &get_block("/hello"));
    let f = run(&mut s, &mut r, &input);
    assert_eq!(data_of(&f, 1), &r.body[..]);
    let inc = 0x7fff_ffffu32.to_be_bytes();
    let mut updates = frame_bytes(kind::WINDOW_UPDATE, 0, 1, &inc);
    updates.extend(frame_bytes(kind::WINDOW_UPDATE, 0, 1, &inc));
    let f = run(&mut s, &mut r, &updates);
    assert_eq!(rst_code(&f, 1), Some(ErrorCode::FlowControlError.to_u32()));
    assert!(!s.is_closing());
}

#[test]
fn a_peer_goaway_leaves_the_close_to_the_peer_and_pings_are_still_answered() {
    // h2spec 6.8/1 sends GOAWAY with an unknown code, then a PING: closing on the
    // GOAWAY would race the PING into a TCP reset.
    let (mut s, _) = open(&[]);
    let mut input = frame_bytes(kind::GOAWAY, 0, 0, &[0, 0, 0, 0, 0, 0, 0, 0xff]);
    input.extend(frame_bytes(kind::PING, 0, 0, &[7; 8]));
    let mut out = Vec::new();
    assert_eq!(s.feed(&input, &mut out, &mut fake(0)), input.len());
    let f = frames(&out);
    assert!(
        f.iter()
            .any(|f| f.h.kind == kind::PING && f.h.flags & flag::ACK != 0),
        "{f:?}"
    );
    assert!(!s.is_closing());
    // No new stream after the peer's GOAWAY.
    let mut more = Vec::new();
    s.feed(&get(1, "/hello"), &mut more, &mut fake(3));
    assert_eq!(
        goaway_code(&frames(&more)),
        Some(ErrorCode::ProtocolError.to_u32())
    );
}
