//! Connection tests: byte strings in, frames and events out, one rule per test.

use crate::frame::{self, flag, kind, setting, FrameHeader, PREFACE};
use crate::hpack::{encode_field, Decoder, FieldMode};
use crate::{ConnError, ErrorCode, Event, H2Conn, RequestHead, Settings, SubmitError};

pub(crate) const GET: RequestHead<'static> = RequestHead {
    method: "GET",
    scheme: "http",
    authority: "localhost:8080",
    path: "/index.html",
    headers: &[],
};

pub(crate) fn post() -> RequestHead<'static> {
    RequestHead {
        method: "POST",
        ..GET
    }
}

pub(crate) fn settings_frame(pairs: &[(u16, u32)]) -> Vec<u8> {
    let mut v = Vec::new();
    frame::write_settings(&mut v, pairs);
    v
}

pub(crate) fn raw_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    frame::write_header(&mut v, payload.len(), kind, flags, stream);
    v.extend_from_slice(payload);
    v
}

pub(crate) fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (n, v) in fields {
        encode_field(n.as_bytes(), v.as_bytes(), &mut b);
    }
    b
}

pub(crate) fn response(stream: u32, status: &str, end_stream: bool) -> Vec<u8> {
    let f = flag::END_HEADERS | if end_stream { flag::END_STREAM } else { 0 };
    raw_frame(
        kind::HEADERS,
        f,
        stream,
        &block(&[(":status", status), ("server", "test")]),
    )
}

pub(crate) fn data(stream: u32, len: usize, end_stream: bool) -> Vec<u8> {
    let f = if end_stream { flag::END_STREAM } else { 0 };
    raw_frame(kind::DATA, f, stream, &vec![b'x'; len])
}

/// Splits client output into frames (after the preface, if present).
pub(crate) fn frames(mut out: &[u8]) -> Vec<(FrameHeader, Vec<u8>)> {
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

pub(crate) fn drain(c: &mut H2Conn) -> Vec<(FrameHeader, Vec<u8>)> {
    let f = frames(c.pending_output());
    let n = c.pending_output().len();
    c.consume_output(n);
    f
}

pub(crate) fn events(c: &mut H2Conn) -> Vec<Event> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

/// A connection that has exchanged prefaces, with output and events drained.
pub(crate) fn ready_with(ours: Settings, peer: &[(u16, u32)]) -> H2Conn {
    let mut c = H2Conn::new(ours);
    c.feed(&settings_frame(peer)).unwrap();
    drain(&mut c);
    assert_eq!(events(&mut c), [Event::PeerSettings]);
    c
}

pub(crate) fn ready() -> H2Conn {
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
