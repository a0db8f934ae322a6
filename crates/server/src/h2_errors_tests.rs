//! Scripted client byte streams that break the protocol: malformed requests, the
//! connection errors and their GOAWAY codes, a bad preface, oversized header lists and
//! the rest, each checked frame by frame. The helpers are `h2_tests.rs`'s.

use super::tests::*;
use super::*;
use rand::{Rng, SeedableRng};
use volley_h2::hpack::encode_field;

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
