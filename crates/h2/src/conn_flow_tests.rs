//! Connection tests of flow control and request bodies: send and receive windows,
//! frame sizes, header blocks split into CONTINUATION, and a response that cancels the
//! rest of a body. The helpers are `conn_tests`'s.

use crate::conn_tests::*;
use crate::frame::{self, flag, kind, setting};
use crate::{ConnError, ErrorCode, Event, H2Conn, RequestHead, Settings, SubmitError};

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
