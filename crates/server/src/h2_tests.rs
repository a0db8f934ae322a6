//! Scripted client byte streams into [`H2Server`], frames out, checked one by one.

use super::*;
use std::sync::Arc;
use volley_h2::hpack::encode_field;

/// Answers `/hello` with `body`, `/big-head` with a field longer than one frame,
/// anything else 404; HEAD gets no body.
pub(super) struct Fake {
    pub(super) body: Arc<[u8]>,
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

pub(super) fn fake(len: usize) -> Fake {
    Fake {
        body: (0..len)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<u8>>()
            .into(),
    }
}

pub(super) fn frame_bytes(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    frame::write_header(&mut v, payload.len(), kind, flags, stream);
    v.extend_from_slice(payload);
    v
}

pub(super) fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
    let mut v = Vec::new();
    frame::write_settings(&mut v, pairs);
    v
}

pub(super) fn preface(pairs: &[(u16, u32)]) -> Vec<u8> {
    let mut v = PREFACE.to_vec();
    v.extend(settings(pairs));
    v
}

pub(super) fn get_block(path: &str) -> Vec<u8> {
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

pub(super) fn get(stream: u32, path: &str) -> Vec<u8> {
    frame_bytes(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        stream,
        &get_block(path),
    )
}

pub(super) fn window_update(stream: u32, inc: u32) -> Vec<u8> {
    let mut v = Vec::new();
    frame::write_window_update(&mut v, stream, inc);
    v
}

#[derive(Debug)]
pub(super) struct Frame {
    pub(super) h: FrameHeader,
    pub(super) payload: Vec<u8>,
}

pub(super) fn frames(mut b: &[u8]) -> Vec<Frame> {
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
pub(super) fn run(s: &mut H2Server, r: &mut Fake, input: &[u8]) -> Vec<Frame> {
    let mut out = Vec::new();
    let used = s.feed(input, &mut out, r);
    assert_eq!(used, input.len(), "whole frames must be consumed");
    s.fill(&mut out);
    frames(&out)
}

pub(super) fn open(pairs: &[(u16, u32)]) -> (H2Server, Vec<Frame>) {
    let mut out = Vec::new();
    let mut s = H2Server::new(&mut out, 1000);
    let mut r = fake(0);
    let used = s.feed(&preface(pairs), &mut out, &mut r);
    assert_eq!(used, 24 + 9 + pairs.len() * 6);
    (s, frames(&out))
}

pub(super) fn goaway_code(f: &[Frame]) -> Option<u32> {
    f.iter()
        .find(|f| f.h.kind == kind::GOAWAY)
        .map(|f| u32::from_be_bytes(f.payload[4..8].try_into().unwrap()))
}

pub(super) fn rst_code(f: &[Frame], stream: u32) -> Option<u32> {
    f.iter()
        .find(|f| f.h.kind == kind::RST_STREAM && f.h.stream == stream)
        .map(|f| u32::from_be_bytes(f.payload[..4].try_into().unwrap()))
}

pub(super) fn decode_head(payload: &[u8]) -> Vec<(String, String)> {
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

pub(super) fn data_of(f: &[Frame], stream: u32) -> Vec<u8> {
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
