//! Connection tests: byte strings in, frames and events out, one rule per test.

use crate::frame::{self, flag, kind, setting, FrameHeader, PREFACE};
use crate::hpack::{encode_field, Decoder, FieldMode};
use crate::{ConnError, ErrorCode, Event, H2Conn, RequestHead, Settings, SubmitError};

const GET: RequestHead<'static> = RequestHead {
    method: "GET",
    scheme: "http",
    authority: "localhost:8080",
    path: "/index.html",
    headers: &[],
};

fn post() -> RequestHead<'static> {
    RequestHead {
        method: "POST",
        ..GET
    }
}

fn settings_frame(pairs: &[(u16, u32)]) -> Vec<u8> {
    let mut v = Vec::new();
    frame::write_settings(&mut v, pairs);
    v
}

fn raw_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    frame::write_header(&mut v, payload.len(), kind, flags, stream);
    v.extend_from_slice(payload);
    v
}

fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (n, v) in fields {
        encode_field(n.as_bytes(), v.as_bytes(), &mut b);
    }
    b
}

fn response(stream: u32, status: &str, end_stream: bool) -> Vec<u8> {
    let f = flag::END_HEADERS | if end_stream { flag::END_STREAM } else { 0 };
    raw_frame(
        kind::HEADERS,
        f,
        stream,
        &block(&[(":status", status), ("server", "test")]),
    )
}

fn data(stream: u32, len: usize, end_stream: bool) -> Vec<u8> {
    let f = if end_stream { flag::END_STREAM } else { 0 };
    raw_frame(kind::DATA, f, stream, &vec![b'x'; len])
}

/// Splits client output into frames (after the preface, if present).
fn frames(mut out: &[u8]) -> Vec<(FrameHeader, Vec<u8>)> {
    if out.starts_with(PREFACE) {
        out = &out[PREFACE.len()..];
    }
    let mut v = Vec::new();
    while let Some(h) = FrameHeader::parse(out) {
        let end = 9 + h.len as usize;
        v.push((h, out[9..end].to_vec()));
        out = &out[end..];
    }
    assert!(out.is_empty(), "trailing partial frame");
    v
}

fn drain(c: &mut H2Conn) -> Vec<(FrameHeader, Vec<u8>)> {
    let f = frames(c.pending_output());
    let n = c.pending_output().len();
    c.consume_output(n);
    f
}

fn events(c: &mut H2Conn) -> Vec<Event> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

/// A connection that has exchanged prefaces, with output and events drained.
fn ready_with(ours: Settings, peer: &[(u16, u32)]) -> H2Conn {
    let mut c = H2Conn::new(ours);
    c.feed(&settings_frame(peer)).unwrap();
    drain(&mut c);
    assert_eq!(events(&mut c), [Event::PeerSettings]);
    c
}

fn ready() -> H2Conn {
    ready_with(Settings::default(), &[])
}

#[test]
fn preface_settings_and_connection_window() {
    let mut c = H2Conn::new(Settings::default());
    assert!(c.pending_output().starts_with(PREFACE));
    let f = drain(&mut c);
    assert_eq!(f.len(), 2);
    assert_eq!(
        (f[0].0.kind, f[0].0.flags, f[0].0.stream),
        (kind::SETTINGS, 0, 0)
    );
    let pairs: Vec<(u16, u32)> = f[0]
        .1
        .chunks(6)
        .map(|p| {
            (
                u16::from_be_bytes([p[0], p[1]]),
                u32::from_be_bytes([p[2], p[3], p[4], p[5]]),
            )
        })
        .collect();
    assert!(pairs.contains(&(setting::ENABLE_PUSH, 0)));
    assert!(pairs.contains(&(setting::INITIAL_WINDOW_SIZE, (1 << 30) - 1)));
    assert_eq!(f[1].0.kind, kind::WINDOW_UPDATE);
    assert_eq!(f[1].1, ((1u32 << 30) - 1 - 65_535).to_be_bytes());
    assert_eq!(c.recv_window(), (1 << 30) - 1);
    assert!(c.pending_output().is_empty());
}

#[test]
fn settings_are_acknowledged_and_applied() {
    let mut c = H2Conn::new(Settings::default());
    drain(&mut c);
    c.feed(&settings_frame(&[
        (setting::MAX_CONCURRENT_STREAMS, 2),
        (setting::MAX_HEADER_LIST_SIZE, 8000),
        (0x99, 7), // unknown: ignored
    ]))
    .unwrap();
    let f = drain(&mut c);
    assert_eq!(f.len(), 1);
    assert_eq!(
        (f[0].0.kind, f[0].0.flags, f[0].0.len),
        (kind::SETTINGS, flag::ACK, 0)
    );
    assert_eq!(events(&mut c), [Event::PeerSettings]);
    assert_eq!(c.peer_max_concurrent_streams(), 2);
    assert_eq!(c.peer_max_header_list_size(), Some(8000));
    // An ACK of our SETTINGS produces nothing.
    c.feed(&raw_frame(kind::SETTINGS, flag::ACK, 0, &[]))
        .unwrap();
    assert!(c.pending_output().is_empty() && events(&mut c).is_empty());
}

#[test]
fn bad_settings_are_connection_errors() {
    let cases: [(Vec<u8>, ConnError); 5] = [
        (
            raw_frame(kind::SETTINGS, 0, 0, &[0, 1, 0]),
            ConnError::FrameSize("SETTINGS payload not a multiple of 6"),
        ),
        (
            settings_frame(&[(setting::MAX_FRAME_SIZE, 100)]),
            ConnError::Protocol("SETTINGS_MAX_FRAME_SIZE out of range"),
        ),
        (
            settings_frame(&[(setting::INITIAL_WINDOW_SIZE, 1 << 31)]),
            ConnError::FlowControl("SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1"),
        ),
        (
            settings_frame(&[(setting::ENABLE_PUSH, 2)]),
            ConnError::Protocol("SETTINGS_ENABLE_PUSH not 0 or 1"),
        ),
        (
            raw_frame(kind::SETTINGS, flag::ACK, 0, &[0; 6]),
            ConnError::FrameSize("SETTINGS ACK with a payload"),
        ),
    ];
    for (bytes, err) in cases {
        let mut c = ready();
        assert_eq!(c.feed(&bytes), Err(err.clone()));
        // A GOAWAY with the matching code is queued, and the error sticks.
        let f = drain(&mut c);
        let last = f.last().unwrap();
        assert_eq!(last.0.kind, kind::GOAWAY);
        assert_eq!(last.1[4..8], err.code().to_u32().to_be_bytes());
        assert_eq!(c.feed(&[]), Err(err));
        assert_eq!(c.submit(&GET, b""), Err(SubmitError::Closing));
    }
}

#[test]
fn server_preface_must_be_settings() {
    let mut c = H2Conn::new(Settings::default());
    let mut ping = Vec::new();
    frame::write_ping(&mut ping, false, [0; 8]);
    assert_eq!(
        c.feed(&ping),
        Err(ConnError::Protocol(
            "server preface must start with SETTINGS"
        ))
    );
}

#[test]
fn get_request_headers_frame_decodes_to_the_request() {
    let mut c = ready();
    let head = RequestHead {
        headers: &[
            ("Accept", "*/*"),
            ("Connection", "keep-alive"),
            ("Host", "ignored"),
            ("TE", "gzip"),
        ],
        ..GET
    };
    assert_eq!(c.submit(&head, b""), Ok(1));
    assert_eq!(c.submit(&head, b""), Ok(3));
    let f = drain(&mut c);
    assert_eq!(f.len(), 2);
    let (h, payload) = &f[0];
    assert_eq!((h.kind, h.stream), (kind::HEADERS, 1));
    assert_eq!(h.flags, flag::END_HEADERS | flag::END_STREAM);
    let mut d = Decoder::new(4096, 65536);
    let mut fields = Vec::new();
    d.decode(payload, FieldMode::All, |n, v| {
        fields.push((
            String::from_utf8(n.to_vec()).unwrap(),
            String::from_utf8(v.to_vec()).unwrap(),
        ))
    })
    .unwrap();
    let expect: Vec<(String, String)> = [
        (":method", "GET"),
        (":scheme", "http"),
        (":authority", "localhost:8080"),
        (":path", "/index.html"),
        ("accept", "*/*"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(fields, expect);
    assert_eq!(c.open_streams(), 2);
}

#[test]
fn invalid_header_name_is_rejected_without_using_a_stream() {
    let mut c = ready();
    let head = RequestHead {
        headers: &[("bad name", "x")],
        ..GET
    };
    assert_eq!(c.submit(&head, b""), Err(SubmitError::InvalidHeaderName));
    assert_eq!(c.submit(&GET, b""), Ok(1));
}

#[test]
fn response_headers_and_data_complete_the_stream() {
    let mut c = ready();
    let id = c.submit(&GET, b"").unwrap();
    drain(&mut c);
    let mut bytes = response(id, "200", false);
    bytes.extend(data(id, 1000, false));
    bytes.extend(data(id, 24, true));
    c.feed(&bytes).unwrap();
    assert_eq!(
        events(&mut c),
        [
            Event::Headers {
                stream: id,
                status: 200,
                end_stream: false
            },
            Event::Data {
                stream: id,
                len: 1000,
                end_stream: false
            },
            Event::Data {
                stream: id,
                len: 24,
                end_stream: true
            },
        ]
    );
    assert_eq!(c.open_streams(), 0);
    // Small data does not provoke WINDOW_UPDATEs (they are batched).
    assert!(c.pending_output().is_empty());
    assert_eq!(c.recv_window(), (1 << 30) - 1 - 1024);
}

#[test]
fn byte_by_byte_feeding_gives_the_same_events() {
    let mut bytes = settings_frame(&[]);
    bytes.extend(response(1, "404", false));
    bytes.extend(data(1, 300, true));
    let mut whole = H2Conn::new(Settings::default());
    whole.submit(&GET, b"").unwrap();
    whole.feed(&bytes).unwrap();
    let mut split = H2Conn::new(Settings::default());
    split.submit(&GET, b"").unwrap();
    for b in &bytes {
        split.feed(std::slice::from_ref(b)).unwrap();
    }
    let e = events(&mut whole);
    assert_eq!(e.len(), 3);
    assert_eq!(e, events(&mut split));
}

#[test]
fn informational_then_final_then_trailers() {
    let mut c = ready();
    let id = c.submit(&GET, b"").unwrap();
    let mut bytes = response(id, "100", false);
    bytes.extend(response(id, "200", false));
    bytes.extend(data(id, 5, false));
    bytes.extend(raw_frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        id,
        &block(&[("grpc-status", "0")]),
    ));
    c.feed(&bytes).unwrap();
    assert_eq!(
        events(&mut c),
        [
            Event::Headers {
                stream: id,
                status: 200,
                end_stream: false
            },
            Event::Data {
                stream: id,
                len: 5,
                end_stream: false
            },
            Event::Trailers { stream: id },
        ]
    );
    assert_eq!(c.open_streams(), 0);
}

#[test]
fn missing_status_is_a_stream_error() {
    let mut c = ready();
    let id = c.submit(&GET, b"").unwrap();
    drain(&mut c);
    let bytes = raw_frame(
        kind::HEADERS,
        flag::END_HEADERS,
        id,
        &block(&[("server", "x")]),
    );
    c.feed(&bytes).unwrap();
    assert_eq!(
        events(&mut c),
        [Event::StreamError {
            stream: id,
            code: ErrorCode::ProtocolError
        }]
    );
    let f = drain(&mut c);
    assert_eq!((f[0].0.kind, f[0].0.stream), (kind::RST_STREAM, id));
    assert_eq!(f[0].1, 1u32.to_be_bytes());
    // Late DATA for the reset stream is ignored (but flow-accounted).
    c.feed(&data(id, 10, true)).unwrap();
    assert!(events(&mut c).is_empty());
}

#[test]
fn padding_and_priority_flags_are_parsed() {
    let mut c = ready();
    let id = c.submit(&GET, b"").unwrap();
    let b = block(&[(":status", "200")]);
    // HEADERS: pad length 3, priority (5 bytes), block, 3 padding bytes.
    let mut p = vec![3];
    p.extend([0, 0, 0, 0, 16]);
    p.extend(&b);
    p.extend([0, 0, 0]);
    let mut bytes = raw_frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::PADDED | flag::PRIORITY,
        id,
        &p,
    );
    // DATA: pad length 10, 7 body bytes, 10 padding bytes = 18 flow-controlled.
    let mut d = vec![10];
    d.extend([b'y'; 7]);
    d.extend([0; 10]);
    bytes.extend(raw_frame(
        kind::DATA,
        flag::PADDED | flag::END_STREAM,
        id,
        &d,
    ));
    // PRIORITY frames are ignored.
    bytes.extend(raw_frame(kind::PRIORITY, 0, id, &[0, 0, 0, 0, 1]));
    c.feed(&bytes).unwrap();
    assert_eq!(
        events(&mut c),
        [
            Event::Headers {
                stream: id,
                status: 200,
                end_stream: false
            },
            Event::Data {
                stream: id,
                len: 7,
                end_stream: true
            },
        ]
    );
    assert_eq!(c.recv_window(), (1 << 30) - 1 - 18);
}

#[test]
fn padding_longer_than_payload_is_a_protocol_error() {
    let mut c = ready();
    let id = c.submit(&GET, b"").unwrap();
    c.feed(&response(id, "200", false)).unwrap();
    let bytes = raw_frame(kind::DATA, flag::PADDED, id, &[5, 1, 2]);
    assert_eq!(
        c.feed(&bytes),
        Err(ConnError::Protocol("padding longer than the frame payload"))
    );
}

#[test]
fn continuation_frames_and_interruption() {
    let mut c = ready();
    let id = c.submit(&GET, b"").unwrap();
    let b = block(&[(":status", "204"), ("server", "split-across-frames")]);
    let (a, rest) = b.split_at(3);
    let (m, z) = rest.split_at(4);
    let mut bytes = raw_frame(kind::HEADERS, flag::END_STREAM, id, a);
    bytes.extend(raw_frame(kind::CONTINUATION, 0, id, m));
    bytes.extend(raw_frame(kind::CONTINUATION, flag::END_HEADERS, id, z));
    c.feed(&bytes).unwrap();
    assert_eq!(
        events(&mut c),
        [Event::Headers {
            stream: id,
            status: 204,
            end_stream: true
        }]
    );

    let id = c.submit(&GET, b"").unwrap();
    let mut bytes = raw_frame(kind::HEADERS, 0, id, a);
    let mut ping = Vec::new();
    frame::write_ping(&mut ping, false, [0; 8]);
    bytes.extend(ping);
    assert_eq!(
        c.feed(&bytes),
        Err(ConnError::Protocol(
            "header block interrupted before END_HEADERS"
        ))
    );
    let mut c = ready();
    assert_eq!(
        c.feed(&raw_frame(
            kind::CONTINUATION,
            flag::END_HEADERS,
            1,
            &[0x88]
        )),
        Err(ConnError::Protocol("CONTINUATION without a header block"))
    );
}

#[test]
fn headers_on_finished_stream_still_update_hpack_table() {
    let mut c = ready();
    let a = c.submit(&GET, b"").unwrap();
    let b = c.submit(&GET, b"").unwrap();
    c.feed(&raw_frame(kind::RST_STREAM, 0, a, &8u32.to_be_bytes()))
        .unwrap();
    assert_eq!(
        events(&mut c),
        [Event::StreamReset {
            stream: a,
            code: ErrorCode::Cancel
        }]
    );
    // Stream a (finished) gets ":status: 201" with incremental indexing (0x48 =
    // literal, indexed name 8, raw value "201"); stream b then refers to dynamic
    // entry 62.
    c.feed(&raw_frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        a,
        &[0x48, 0x03, b'2', b'0', b'1'],
    ))
    .unwrap();
    c.feed(&raw_frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        b,
        &[0xbe],
    ))
    .unwrap();
    assert_eq!(
        events(&mut c),
        [Event::Headers {
            stream: b,
            status: 201,
            end_stream: true
        }]
    );
}

#[test]
fn hpack_failure_is_a_compression_error() {
    let mut c = ready();
    let id = c.submit(&GET, b"").unwrap();
    let e = c.feed(&raw_frame(
        kind::HEADERS,
        flag::END_HEADERS,
        id,
        &[0xff, 0xff],
    ));
    assert!(matches!(e, Err(ConnError::Compression(_))), "{e:?}");
    assert_eq!(e.unwrap_err().code(), ErrorCode::CompressionError);
}

#[test]
fn ping_is_acknowledged_with_its_payload() {
    let mut c = ready();
    let mut p = Vec::new();
    frame::write_ping(&mut p, false, *b"12345678");
    frame::write_ping(&mut p, true, *b"ignored!");
    c.feed(&p).unwrap();
    assert_eq!(events(&mut c), [Event::Ping]);
    let f = drain(&mut c);
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].0.kind, f[0].0.flags), (kind::PING, flag::ACK));
    assert_eq!(f[0].1, b"12345678");
    assert_eq!(
        c.feed(&raw_frame(kind::PING, 0, 0, &[0; 7])),
        Err(ConnError::FrameSize("PING payload is not 8 bytes"))
    );
}

#[test]
fn ping_flood_without_writes_is_bounded() {
    let mut c = ready_with(
        Settings {
            max_pending_output_bytes: 1000,
            ..Settings::default()
        },
        &[],
    );
    let mut p = Vec::new();
    for _ in 0..100 {
        frame::write_ping(&mut p, false, [0; 8]);
    }
    assert_eq!(c.feed(&p), Err(ConnError::OutputOverflow(1000)));
    assert!(c.pending_output().len() < 1100);
}

#[test]
fn goaway_refuses_higher_streams_and_blocks_submits() {
    let mut c = ready();
    let ids: Vec<u32> = (0..3).map(|_| c.submit(&GET, b"").unwrap()).collect();
    assert_eq!(ids, [1, 3, 5]);
    let mut g = Vec::new();
    frame::write_goaway(&mut g, 1, 0);
    c.feed(&g).unwrap();
    let mut e = events(&mut c);
    e.sort_by_key(|ev| format!("{ev:?}"));
    assert_eq!(
        e,
        [
            Event::GoAway {
                last_stream: 1,
                code: ErrorCode::NoError
            },
            Event::StreamReset {
                stream: 3,
                code: ErrorCode::RefusedStream
            },
            Event::StreamReset {
                stream: 5,
                code: ErrorCode::RefusedStream
            },
        ]
    );
    assert_eq!(c.open_streams(), 1);
    assert!(!c.can_submit());
    assert_eq!(c.submit(&GET, b""), Err(SubmitError::Closing));
    // Stream 1 still completes.
    c.feed(&response(1, "200", true)).unwrap();
    assert_eq!(events(&mut c).len(), 1);

    let mut c = ready();
    let mut g = Vec::new();
    frame::write_goaway(&mut g, 0, 0xb);
    assert_eq!(
        c.feed(&g),
        Err(ConnError::GoAway {
            code: ErrorCode::EnhanceYourCalm,
            last_stream: 0
        })
    );
    // We do not answer a peer's GOAWAY with our own.
    assert!(c.pending_output().is_empty());
}

#[test]
fn max_concurrent_streams_is_respected() {
    let mut c = ready_with(Settings::default(), &[(setting::MAX_CONCURRENT_STREAMS, 2)]);
    let a = c.submit(&GET, b"").unwrap();
    c.submit(&GET, b"").unwrap();
    assert!(!c.can_submit());
    assert_eq!(c.submit(&GET, b""), Err(SubmitError::TooManyStreams));
    c.feed(&response(a, "200", true)).unwrap();
    assert!(c.can_submit());
    assert_eq!(c.submit(&GET, b""), Ok(5));
}

#[test]
fn rst_stream_and_window_update_rules() {
    let mut c = ready();
    let id = c.submit(&GET, b"").unwrap();
    assert_eq!(
        c.feed(&raw_frame(kind::RST_STREAM, 0, id, &[0, 0, 8])),
        Err(ConnError::FrameSize("RST_STREAM payload is not 4 bytes"))
    );
    let mut c = ready();
    assert_eq!(
        c.feed(&raw_frame(kind::RST_STREAM, 0, 7, &[0, 0, 0, 8])),
        Err(ConnError::Protocol("frame on an idle stream"))
    );
    let mut c = ready();
    assert_eq!(
        c.feed(&response(2, "200", true)),
        Err(ConnError::Protocol("frame on a server-initiated stream"))
    );
    let mut c = ready();
    let mut w = Vec::new();
    frame::write_window_update(&mut w, 0, 0);
    assert_eq!(
        c.feed(&w),
        Err(ConnError::Protocol("connection WINDOW_UPDATE of 0"))
    );
    let mut c = ready();
    let mut w = Vec::new();
    frame::write_window_update(&mut w, 0, (1 << 31) - 1);
    assert_eq!(
        c.feed(&w),
        Err(ConnError::FlowControl("connection window above 2^31-1"))
    );
    let mut c = ready();
    let id = c.submit(&GET, b"").unwrap();
    drain(&mut c);
    let mut w = Vec::new();
    frame::write_window_update(&mut w, id, 0);
    c.feed(&w).unwrap();
    assert_eq!(
        events(&mut c),
        [Event::StreamError {
            stream: id,
            code: ErrorCode::ProtocolError
        }]
    );
    let mut c = ready();
    assert_eq!(
        c.feed(&raw_frame(
            kind::PUSH_PROMISE,
            flag::END_HEADERS,
            1,
            &[0; 4]
        )),
        Err(ConnError::Protocol(
            "PUSH_PROMISE although we disabled push"
        ))
    );
    // Unknown frame types are ignored.
    let mut c = ready();
    c.feed(&raw_frame(0xfa, 0, 0, b"whatever")).unwrap();
    assert!(events(&mut c).is_empty());
}

#[test]
fn oversized_frame_is_a_frame_size_error() {
    let mut c = ready();
    let id = c.submit(&GET, b"").unwrap();
    c.feed(&response(id, "200", false)).unwrap();
    // Only the header is needed to reject it: no 16 KiB+ buffering.
    let mut h = Vec::new();
    frame::write_header(&mut h, 16_385, kind::DATA, 0, id);
    assert_eq!(
        c.feed(&h),
        Err(ConnError::FrameSize(
            "frame larger than our SETTINGS_MAX_FRAME_SIZE"
        ))
    );
}

/// Request bodies: windows, peer frame size, END_STREAM on the last frame, and
/// resumption on WINDOW_UPDATE.
#[test]
fn request_body_respects_send_windows_and_frame_size() {
    let mut c = ready_with(Settings::default(), &[(setting::MAX_FRAME_SIZE, 20_000)]);
    let body = vec![7u8; 100_000];
    let id = c.submit(&post(), &body).unwrap();
    let f = drain(&mut c);
    assert_eq!(
        (f[0].0.kind, f[0].0.flags),
        (kind::HEADERS, flag::END_HEADERS)
    );
    let data: Vec<_> = f[1..].iter().map(|(h, _)| h).collect();
    assert!(data.iter().all(|h| h.kind == kind::DATA && h.len <= 20_000));
    let sent: u32 = data.iter().map(|h| h.len).sum();
    assert_eq!(sent, 65_535, "default windows allow 65,535 bytes");
    assert!(data.iter().all(|h| !h.has(flag::END_STREAM)));
    assert_eq!(c.send_window(), 0);

    // Connection window opens, stream window still closed: nothing moves.
    let mut w = Vec::new();
    frame::write_window_update(&mut w, 0, 1_000_000);
    c.feed(&w).unwrap();
    assert!(c.pending_output().is_empty());
    // Stream window opens: the rest goes, END_STREAM on the last frame.
    let mut w = Vec::new();
    frame::write_window_update(&mut w, id, 1_000_000);
    c.feed(&w).unwrap();
    let f = drain(&mut c);
    let rest: u32 = f.iter().map(|(h, _)| h.len).sum();
    assert_eq!(rest, 100_000 - 65_535);
    assert!(f.last().unwrap().0.has(flag::END_STREAM));
    assert!(f
        .iter()
        .all(|(h, p)| h.len <= 20_000 && p.iter().all(|&b| b == 7)));
    assert_eq!(c.send_window(), 65_535 + 1_000_000 - 100_000);
}

#[test]
fn initial_window_change_applies_to_open_streams() {
    let mut c = ready();
    let id = c.submit(&post(), &[1u8; 70_000]).unwrap();
    drain(&mut c);
    // Shrinking the initial window makes the stream window negative (65,535 sent,
    // window now 1,000 - 65,535); growing the connection window alone sends nothing.
    c.feed(&settings_frame(&[(setting::INITIAL_WINDOW_SIZE, 1_000)]))
        .unwrap();
    let mut w = Vec::new();
    frame::write_window_update(&mut w, 0, 100_000);
    c.feed(&w).unwrap();
    let f = drain(&mut c);
    assert!(f.iter().all(|(h, _)| h.kind != kind::DATA));
    // Raising it again by 70,000 leaves 5,465 of room: exactly the rest.
    c.feed(&settings_frame(&[(setting::INITIAL_WINDOW_SIZE, 71_000)]))
        .unwrap();
    let f = drain(&mut c);
    let data: Vec<_> = f.iter().filter(|(h, _)| h.kind == kind::DATA).collect();
    let n: u32 = data.iter().map(|(h, _)| h.len).sum();
    assert_eq!(n, 70_000 - 65_535);
    assert!(data.last().unwrap().0.has(flag::END_STREAM));
    assert_eq!(data[0].0.stream, id);
}

#[test]
fn receive_windows_are_enforced_and_replenished_in_batches() {
    let ours = Settings {
        initial_window_size: 1_000,
        connection_window_size: 65_535,
        ..Settings::default()
    };
    let mut c = ready_with(ours.clone(), &[]);
    let id = c.submit(&GET, b"").unwrap();
    drain(&mut c);
    c.feed(&response(id, "200", false)).unwrap();
    c.feed(&data(id, 400, false)).unwrap();
    assert!(c.pending_output().is_empty(), "below half the window");
    c.feed(&data(id, 200, false)).unwrap();
    let f = drain(&mut c);
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].0.kind, f[0].0.stream), (kind::WINDOW_UPDATE, id));
    assert_eq!(f[0].1, 600u32.to_be_bytes());
    // Stream window is back to 1,000: 1,001 bytes overflow it.
    c.feed(&data(id, 1_001, false)).unwrap();
    assert_eq!(
        events(&mut c).last(),
        Some(&Event::StreamError {
            stream: id,
            code: ErrorCode::FlowControlError
        })
    );

    // The connection window is replenished once half of it is used.
    let mut c = ready_with(
        Settings {
            initial_window_size: 1 << 20,
            connection_window_size: 65_535,
            ..Settings::default()
        },
        &[],
    );
    let id = c.submit(&GET, b"").unwrap();
    c.feed(&response(id, "200", false)).unwrap();
    drain(&mut c);
    c.feed(&data(id, 16_000, false)).unwrap();
    c.feed(&data(id, 16_000, false)).unwrap();
    assert!(c.pending_output().is_empty(), "32,000 < 65,535 / 2");
    assert_eq!(c.recv_window(), 65_535 - 32_000);
    c.feed(&data(id, 16_000, false)).unwrap();
    let f = drain(&mut c);
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].0.kind, f[0].0.stream), (kind::WINDOW_UPDATE, 0));
    assert_eq!(f[0].1, 48_000u32.to_be_bytes());
    assert_eq!(c.recv_window(), 65_535);
}

#[test]
fn connection_window_overflow_is_a_flow_control_error() {
    let ours = Settings {
        connection_window_size: 65_535,
        initial_window_size: 1 << 20,
        max_frame_size: 100_000,
        ..Settings::default()
    };
    let mut c = ready_with(ours, &[]);
    let id = c.submit(&GET, b"").unwrap();
    c.feed(&response(id, "200", false)).unwrap();
    // DATA on a finished stream still counts against the connection window.
    c.feed(&raw_frame(kind::RST_STREAM, 0, id, &[0, 0, 0, 8]))
        .unwrap();
    c.feed(&data(id, 1_000, false)).unwrap();
    assert_eq!(c.recv_window(), 64_535);
    assert_eq!(
        c.feed(&data(id, 64_536, false)),
        Err(ConnError::FlowControl("DATA beyond the connection window"))
    );
    assert_eq!(
        c.error().map(ConnError::code),
        Some(ErrorCode::FlowControlError)
    );
}

#[test]
fn large_request_header_block_uses_continuation() {
    let mut c = ready();
    let big = "v".repeat(40_000);
    let head = RequestHead {
        headers: &[("x-big", big.as_str())],
        ..GET
    };
    let id = c.submit(&head, b"").unwrap();
    let f = drain(&mut c);
    assert_eq!(f.len(), 3);
    assert_eq!(
        (f[0].0.kind, f[0].0.flags),
        (kind::HEADERS, flag::END_STREAM)
    );
    assert_eq!((f[1].0.kind, f[1].0.flags), (kind::CONTINUATION, 0));
    assert_eq!(
        (f[2].0.kind, f[2].0.flags, f[2].0.stream),
        (kind::CONTINUATION, flag::END_HEADERS, id)
    );
    assert!(f.iter().all(|(h, _)| h.len <= 16_384));
}

#[test]
fn captured_headers_follow_their_events() {
    let mut c = ready_with(
        Settings {
            capture_headers: true,
            ..Settings::default()
        },
        &[],
    );
    let id = c.submit(&GET, b"").unwrap();
    c.feed(&raw_frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        id,
        &block(&[(":status", "200"), ("content-length", "0")]),
    ))
    .unwrap();
    assert_eq!(events(&mut c).len(), 1);
    let (s, fields) = c.pop_captured_headers().unwrap();
    assert_eq!(s, id);
    assert_eq!(
        fields,
        vec![
            (b":status".to_vec(), b"200".to_vec()),
            (b"content-length".to_vec(), b"0".to_vec())
        ]
    );
    assert!(c.pop_captured_headers().is_none());
}

#[test]
fn early_response_cancels_unsent_body() {
    let mut c = ready();
    let id = c.submit(&post(), &vec![0u8; 200_000]).unwrap();
    drain(&mut c);
    c.feed(&response(id, "413", true)).unwrap();
    assert_eq!(c.open_streams(), 0);
    let f = drain(&mut c);
    assert_eq!((f[0].0.kind, f[0].0.stream), (kind::RST_STREAM, id));
    assert_eq!(f[0].1, ErrorCode::Cancel.to_u32().to_be_bytes());
    // A later WINDOW_UPDATE for it sends nothing.
    let mut w = Vec::new();
    frame::write_window_update(&mut w, 0, 100_000);
    c.feed(&w).unwrap();
    assert!(c.pending_output().is_empty());
}

/// SplitMix64: a tiny seeded generator so the fuzz test is reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A plausible server byte stream to mutate.
fn corpus() -> Vec<u8> {
    let mut v = settings_frame(&[(setting::MAX_CONCURRENT_STREAMS, 100)]);
    let mut p = Vec::new();
    frame::write_ping(&mut p, false, [1; 8]);
    v.extend(p);
    for id in [1u32, 3, 5] {
        v.extend(response(id, "200", false));
        v.extend(data(id, 50, false));
        v.extend(raw_frame(
            kind::HEADERS,
            flag::END_HEADERS | flag::END_STREAM,
            id,
            &[0x40, 0x01, b'a', 0x81, 0x1f, 0xbe],
        ));
    }
    let mut w = Vec::new();
    frame::write_window_update(&mut w, 1, 100);
    v.extend(w);
    v
}

/// Random and mutated input never panics, the output stays bounded, and once an
/// error is returned it sticks.
#[test]
fn fuzz_feed_never_panics_and_stays_bounded() {
    let base = corpus();
    let mut rng = Rng(0x5eed_1234);
    let mut errors = 0;
    for round in 0..3000 {
        let mut input = if round % 4 == 0 {
            (0..rng.below(400)).map(|_| rng.next() as u8).collect()
        } else {
            base.clone()
        };
        for _ in 0..1 + rng.below(8) {
            if input.is_empty() {
                break;
            }
            let i = rng.below(input.len());
            match rng.below(4) {
                0 => input[i] = rng.next() as u8,
                1 => input[i] ^= 1 << rng.below(8),
                2 => {
                    input.remove(i);
                }
                _ => input.insert(i, rng.next() as u8),
            }
        }
        // Keep the preface valid on most rounds so deeper states are reached.
        if round % 4 != 0 && rng.below(2) == 0 {
            input.splice(0..9.min(input.len()), base[..9].iter().copied());
        }
        let mut c = H2Conn::new(Settings {
            max_pending_output_bytes: 64 * 1024,
            // Odd rounds also exercise the capture arena.
            capture_content: round % 2 == 1,
            ..Settings::default()
        });
        let drain_events = |c: &mut H2Conn| {
            while let Some(ev) = c.poll_event() {
                let (head, data) = (c.polled_head(), c.polled_data());
                if let Event::Data { len, .. } = ev {
                    assert!(data.len() == len || round % 2 == 0);
                }
                let _ = head;
            }
        };
        for _ in 0..3 {
            let _ = c.submit(&post(), b"hello");
        }
        let mut pos = 0;
        let mut result = Ok(());
        while pos < input.len() {
            let n = 1 + rng.below(64);
            let end = (pos + n).min(input.len());
            result = c.feed(&input[pos..end]);
            pos = end;
            if result.is_err() {
                break;
            }
            let _ = c.submit(&GET, b"");
            if rng.below(2) == 0 {
                drain_events(&mut c);
            }
        }
        drain_events(&mut c);
        assert!(c.pending_output().len() <= 64 * 1024 + 1024);
        if let Err(e) = result {
            errors += 1;
            assert_eq!(c.feed(b"more"), Err(e));
        }
    }
    assert!(errors > 100, "mutations should often be caught: {errors}");
}

#[test]
fn empty_data_frames_never_provoke_zero_window_updates() {
    let mut c = ready_with(
        Settings {
            initial_window_size: 1,
            ..Settings::default()
        },
        &[],
    );
    let id = c.submit(&GET, b"").unwrap();
    c.feed(&response(id, "200", false)).unwrap();
    drain(&mut c);
    c.feed(&data(id, 0, false)).unwrap();
    assert!(c.pending_output().is_empty());
    c.feed(&data(id, 1, false)).unwrap();
    let f = drain(&mut c);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].1, 1u32.to_be_bytes());
}

#[test]
fn requests_queued_without_writing_do_not_count_as_peer_abuse() {
    let mut c = ready_with(
        Settings {
            max_pending_output_bytes: 1000,
            ..Settings::default()
        },
        &[],
    );
    let long = "p".repeat(100);
    let head = RequestHead { path: &long, ..GET };
    for _ in 0..20 {
        c.submit(&head, b"").unwrap();
    }
    assert!(c.pending_output().len() > 1000);
    // A frame that adds no output is fine; one that adds output past the bound is not.
    c.feed(&response(1, "200", true)).unwrap();
    let mut p = Vec::new();
    frame::write_ping(&mut p, false, [0; 8]);
    assert_eq!(c.feed(&p), Err(ConnError::OutputOverflow(1000)));
}

#[test]
fn encoded_head_gives_the_same_frames_as_submit() {
    let head = RequestHead {
        headers: &[("accept", "*/*"), ("user-agent", "volley")],
        ..GET
    };
    let mut a = ready();
    a.submit(&head, b"body").unwrap();
    let mut b = ready();
    let enc = crate::EncodedHead::new(&head).unwrap();
    assert!(enc.block_len() > 0);
    assert_eq!(b.submit_encoded(&enc, b"body"), Ok(1));
    assert_eq!(a.pending_output(), b.pending_output());
    assert_eq!(b.open_streams(), 1);
}

#[test]
fn values_with_line_breaks_are_rejected() {
    let mut c = ready();
    for head in [
        RequestHead {
            headers: &[("x-a", "1\r\nx-b: 2")],
            ..GET
        },
        RequestHead { path: "", ..GET },
        RequestHead {
            authority: "a\0b",
            ..GET
        },
    ] {
        assert_eq!(c.submit(&head, b""), Err(SubmitError::InvalidHeaderValue));
    }
    assert_eq!(c.submit(&GET, b""), Ok(1), "no stream id was used up");
}

fn content_conn() -> H2Conn {
    ready_with(
        Settings {
            capture_content: true,
            ..Settings::default()
        },
        &[],
    )
}

#[test]
fn captured_content_follows_each_polled_event() {
    let mut c = content_conn();
    let a = c.submit(&GET, b"").unwrap();
    let b = c.submit(&GET, b"").unwrap();
    let mut input = raw_frame(
        kind::HEADERS,
        flag::END_HEADERS,
        a,
        &block(&[
            (":status", "200"),
            ("content-type", "text/html"),
            ("content-encoding", "gzip"),
            ("server", "test"),
            ("content-encoding", "br"),
        ]),
    );
    input.extend(raw_frame(
        kind::HEADERS,
        flag::END_HEADERS,
        b,
        &block(&[(":status", "200"), ("content-length", "3")]),
    ));
    input.extend(raw_frame(kind::DATA, 0, a, b"hello "));
    // Padded: pad length 2, then "abc", then two bytes of padding.
    input.extend(raw_frame(
        kind::DATA,
        flag::END_STREAM | flag::PADDED,
        b,
        b"\x02abc\0\0",
    ));
    input.extend(raw_frame(kind::DATA, flag::END_STREAM, a, b"world"));
    // Split mid-frame: the carried-over partial frame must capture the same bytes.
    let (first, second) = input.split_at(input.len() - 7);
    c.feed(first).unwrap();
    let mut seen = Vec::new();
    let poll = |c: &mut H2Conn, seen: &mut Vec<String>| {
        while let Some(ev) = c.poll_event() {
            let head = c.polled_head();
            let text = |v: Option<&[u8]>| v.map(|v| String::from_utf8_lossy(v).into_owned());
            match ev {
                Event::Headers { stream, .. } => seen.push(format!(
                    "{stream} head {:?} {:?} {:?}",
                    text(head.content_encoding),
                    text(head.content_length),
                    text(head.content_type)
                )),
                Event::Data { stream, len, .. } => {
                    assert_eq!(c.polled_data().len(), len);
                    assert_eq!(head, Default::default());
                    seen.push(format!(
                        "{stream} data {}",
                        String::from_utf8_lossy(c.polled_data())
                    ))
                }
                other => panic!("{other:?}"),
            }
        }
    };
    poll(&mut c, &mut seen);
    c.feed(second).unwrap();
    poll(&mut c, &mut seen);
    assert_eq!(
        seen,
        [
            format!("{a} head Some(\"gzip, br\") None Some(\"text/html\")"),
            format!("{b} head None Some(\"3\") None"),
            format!("{a} data hello "),
            format!("{b} data abc"),
            format!("{a} data world"),
        ]
    );
}

#[test]
fn without_capture_nothing_is_kept() {
    let mut c = ready();
    let id = c.submit(&GET, b"").unwrap();
    c.feed(&response(id, "200", false)).unwrap();
    c.feed(&data(id, 10, true)).unwrap();
    assert!(matches!(c.poll_event(), Some(Event::Headers { .. })));
    assert_eq!(c.polled_head(), Default::default());
    assert!(matches!(c.poll_event(), Some(Event::Data { len: 10, .. })));
    assert!(c.polled_data().is_empty());
}

#[test]
fn cancel_resets_the_stream_frees_its_slot_and_ignores_late_frames() {
    let mut c = ready_with(
        Settings {
            capture_content: true,
            connection_window_size: 65_535,
            ..Settings::default()
        },
        &[(setting::MAX_CONCURRENT_STREAMS, 2)],
    );
    let late = c.submit(&GET, b"").unwrap();
    let other = c.submit(&GET, b"").unwrap();
    drain(&mut c);
    assert!(!c.can_submit());
    assert!(c.cancel(late));
    assert!(!c.cancel(late), "already gone");
    assert!(!c.cancel(99), "never submitted");
    let f = drain(&mut c);
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].0.kind, f[0].0.stream), (kind::RST_STREAM, late));
    assert_eq!(f[0].1, ErrorCode::Cancel.to_u32().to_be_bytes());
    assert_eq!(c.open_streams(), 1);
    assert!(c.can_submit(), "the slot is free again");

    // The server answered before it saw the reset: head, body, then its own reset.
    // A dynamic-table insertion in the late head must still reach the decoder.
    let mut late_head = vec![0x88, 0x40, 0x01, b'x', 0x01, b'y'];
    late_head.extend(block(&[("content-encoding", "gzip")]));
    c.feed(&raw_frame(
        kind::HEADERS,
        flag::END_HEADERS,
        late,
        &late_head,
    ))
    .unwrap();
    for _ in 0..3 {
        c.feed(&data(late, 12_000, false)).unwrap();
    }
    let mut rst = Vec::new();
    frame::write_rst_stream(&mut rst, late, ErrorCode::Cancel.to_u32());
    c.feed(&rst).unwrap();
    assert_eq!(events(&mut c), []);
    assert!(c.error().is_none());
    // Its DATA counted against the connection window, which is replenished.
    let f = drain(&mut c);
    assert!(
        f.iter()
            .any(|(h, _)| h.kind == kind::WINDOW_UPDATE && h.stream == 0),
        "{f:?}"
    );

    // The other stream still completes, and sees the table entry the late head added
    // (indexed name 62 = "x").
    c.feed(&raw_frame(
        kind::HEADERS,
        flag::END_HEADERS,
        other,
        &[0x88, 0xbe],
    ))
    .unwrap();
    c.feed(&raw_frame(kind::DATA, flag::END_STREAM, other, b"ok"))
        .unwrap();
    let evs = events(&mut c);
    assert_eq!(evs.len(), 2, "{evs:?}");
    assert!(c.error().is_none());
    assert_eq!(c.open_streams(), 0);
}
