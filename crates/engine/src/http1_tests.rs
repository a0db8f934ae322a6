use super::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Result of framing a whole byte string: the response (or error) and the body.
type Framed = (Result<Response, FrameError>, Vec<u8>);

/// Pushes `pieces` in order, then signals EOF if the response is not yet complete.
fn frame_pieces(pieces: &[&[u8]], head: bool) -> Framed {
    let mut r = ResponseReader::new();
    r.start(head);
    let mut body = Vec::new();
    for p in pieces {
        match r.push(p, Some(&mut body)) {
            Ok(Some(resp)) => return (Ok(resp), body),
            Ok(None) => {}
            Err(e) => return (Err(e), body),
        }
    }
    (r.eof(), body)
}

/// Frames `bytes` whole, at every single split point, and one byte at a time, and
/// checks all give the same answer, which is returned.
fn frame(bytes: &[u8], head: bool) -> Framed {
    let whole = frame_pieces(&[bytes], head);
    for i in 0..=bytes.len() {
        let split = frame_pieces(&[&bytes[..i], &bytes[i..]], head);
        assert_eq!(
            split,
            whole,
            "split at {i} of {:?}",
            String::from_utf8_lossy(bytes)
        );
    }
    let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(frame_pieces(&bytewise, head), whole, "byte at a time");
    whole
}

fn ok(bytes: &[u8], head: bool) -> (Response, Vec<u8>) {
    let (r, body) = frame(bytes, head);
    (r.expect("a complete response"), body)
}

#[test]
fn content_length() {
    let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    let (r, body) = ok(raw, false);
    assert_eq!(
        r,
        Response {
            status: 200,
            keep_alive: true,
            wire_bytes: raw.len() as u64,
            body_bytes: 5
        }
    );
    assert_eq!(body, b"hello");
}

#[test]
fn zero_content_length() {
    let raw = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
    let (r, body) = ok(raw, false);
    assert_eq!((r.status, r.body_bytes, r.keep_alive), (404, 0, true));
    assert!(body.is_empty());
}

#[test]
fn chunked_with_extensions_and_trailers() {
    let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
        5;ext=1\r\nhello\r\n6 ; name=\"q v\"\r\n world\r\nA\r\n0123456789\r\n\
        0\r\nX-Checksum: abc\r\nX-Other: d\r\n\r\n";
    let (r, body) = ok(raw, false);
    assert_eq!(body, b"hello world0123456789");
    assert_eq!(r.body_bytes, 21);
    assert_eq!(r.wire_bytes, raw.len() as u64);
    assert!(r.keep_alive);
}

#[test]
fn chunked_without_trailers_and_uppercase_hex() {
    let raw = b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n1F\r\n0123456789012345678901234567890\r\n0\r\n\r\n";
    let (r, body) = ok(raw, false);
    assert_eq!((r.body_bytes, body.len()), (31, 31));
}

#[test]
fn chunked_wins_over_content_length() {
    let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n";
    assert_eq!(ok(raw, false).1, b"hi");
}

#[test]
fn head_has_no_body_whatever_content_length_says() {
    let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
    let (r, _) = ok(raw, true);
    assert_eq!((r.status, r.body_bytes, r.keep_alive), (200, 0, true));
    // HEAD of a chunked resource: no body either.
    let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(ok(raw, true).0.body_bytes, 0);
}

#[test]
fn interim_responses_are_skipped() {
    let raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";
    let (r, body) = ok(raw, false);
    assert_eq!((r.status, body.as_slice()), (201, &b"ok"[..]));
    assert_eq!(r.wire_bytes, raw.len() as u64);
}

#[test]
fn no_body_statuses() {
    for status in ["204 No Content", "304 Not Modified"] {
        let raw = format!("HTTP/1.1 {status}\r\nContent-Length: 42\r\n\r\n");
        let (r, _) = ok(raw.as_bytes(), false);
        assert_eq!(r.body_bytes, 0);
        assert!(r.keep_alive);
    }
}

#[test]
fn body_until_close() {
    let raw = b"HTTP/1.1 200 OK\r\nServer: x\r\n\r\nsome body";
    let (r, body) = ok(raw, false);
    assert_eq!((r.status, r.keep_alive, r.body_bytes), (200, false, 9));
    assert_eq!(body, b"some body");
    // Transfer-Encoding whose last coding is not chunked also ends at close.
    let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzzz";
    assert_eq!(ok(raw, false).0.body_bytes, 3);
}

#[test]
fn connection_close_and_http10() {
    let raw = b"HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 1\r\n\r\nx";
    assert!(!ok(raw, false).0.keep_alive);
    let raw = b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx";
    assert!(!ok(raw, false).0.keep_alive);
    let raw = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx";
    assert!(ok(raw, false).0.keep_alive);
    let raw = b"HTTP/1.1 200 OK\r\nConnection: upgrade, close\r\nContent-Length: 1\r\n\r\nx";
    assert!(!ok(raw, false).0.keep_alive);
}

#[test]
fn eof_before_complete_is_closed() {
    let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf";
    assert_eq!(
        frame(raw, false).0,
        Err(FrameError::Closed { any_bytes: true })
    );
    let raw = b"HTTP/1.1 200 OK\r\nContent-Le";
    assert_eq!(
        frame(raw, false).0,
        Err(FrameError::Closed { any_bytes: true })
    );
    let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel";
    assert_eq!(
        frame(raw, false).0,
        Err(FrameError::Closed { any_bytes: true })
    );
    assert_eq!(
        frame(b"", false).0,
        Err(FrameError::Closed { any_bytes: false })
    );
}

#[test]
fn garbage_is_malformed() {
    for raw in [
        &b"SSH-2.0-OpenSSH_9.6\r\n\r\n"[..],
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n",
        b"\x00\x01\x02\x03 binary",
    ] {
        let (r, _) = frame(raw, false);
        assert_eq!(
            r.map_err(FrameError::kind),
            Err(ErrorKind::Malformed),
            "{raw:?}"
        );
    }
}

#[test]
fn bad_content_length() {
    for raw in [
        &b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
    ] {
        assert_eq!(
            frame(raw, false).0,
            Err(FrameError::BadContentLength),
            "{raw:?}"
        );
    }
    // Repeated identical values are allowed (RFC 9110 8.6).
    let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nab";
    assert_eq!(ok(raw, false).1, b"ab");
}

#[test]
fn bad_chunks() {
    for raw in [
        &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"[..],
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhiXX0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1234567890123456\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nhi\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\rX",
    ] {
        assert_eq!(frame(raw, false).0, Err(FrameError::BadChunk), "{raw:?}");
    }
}

#[test]
fn unexpected_upgrade() {
    let raw = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n";
    assert_eq!(frame(raw, false).0, Err(FrameError::UnexpectedUpgrade));
}

#[test]
fn header_block_limit() {
    let mut raw = b"HTTP/1.1 200 OK\r\n".to_vec();
    while raw.len() <= MAX_HEADER_BYTES {
        raw.extend_from_slice(
            b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
        );
    }
    // Whole, and in 1000-byte pieces (every split point of 64 KiB is too slow).
    assert_eq!(
        frame_pieces(&[&raw], false).0,
        Err(FrameError::HeadersTooLarge)
    );
    let pieces: Vec<&[u8]> = raw.chunks(1000).collect();
    assert_eq!(
        frame_pieces(&pieces, false).0,
        Err(FrameError::HeadersTooLarge)
    );
    // Too many headers is the same failure.
    let mut raw = b"HTTP/1.1 200 OK\r\n".to_vec();
    for _ in 0..=MAX_HEADERS {
        raw.extend_from_slice(b"A: b\r\n");
    }
    raw.extend_from_slice(b"\r\n");
    assert_eq!(
        frame_pieces(&[&raw], false).0,
        Err(FrameError::HeadersTooLarge)
    );
}

#[test]
fn bytes_after_the_response_forbid_reuse() {
    let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxJUNK";
    let (r, body) = frame_pieces(&[raw], false);
    assert_eq!(body, b"x");
    assert!(!r.expect("complete").keep_alive);
}

#[test]
fn reader_is_reusable_after_start() {
    let mut r = ResponseReader::new();
    r.start(false);
    assert!(r
        .push(b"HTTP/1.1 200 OK\r\nContent-Le", None)
        .unwrap()
        .is_none());
    assert!(r.any_bytes());
    let first = r.push(b"ngth: 1\r\n\r\nx", None).unwrap().unwrap();
    assert_eq!(first.status, 200);
    r.start(false);
    assert!(!r.any_bytes());
    let second = r
        .push(b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n", None)
        .unwrap();
    assert_eq!(second.map(|x| x.status), Some(500));
}

/// Seeded mutation fuzzing that runs in CI: a few thousand corrupted, truncated and
/// spliced responses, fed in random pieces. The parser must not panic, must finish
/// (every push consumes or buffers input, so the loop is bounded by the input) and
/// must never report more bytes than it was given.
#[test]
fn mutated_responses_never_panic() {
    let seeds: [&[u8]; 6] = [
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n0\r\nT: 1\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.0 200 OK\r\n\r\nuntil close",
        b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 9\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0, 0\r\n\r\n",
    ];
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed);
    for _ in 0..5000 {
        let mut bytes = seeds[rng.random_range(0..seeds.len())].to_vec();
        for _ in 0..rng.random_range(0..6) {
            let at = rng.random_range(0..=bytes.len());
            match rng.random_range(0..5) {
                0 if at < bytes.len() => bytes[at] = rng.random(),
                1 => bytes.insert(at, rng.random()),
                2 if at < bytes.len() => {
                    bytes.remove(at);
                }
                3 => bytes.truncate(at),
                _ => {
                    let other = seeds[rng.random_range(0..seeds.len())];
                    bytes.splice(at..at, other.iter().copied());
                }
            }
        }
        let mut pieces = Vec::new();
        let mut rest = bytes.as_slice();
        while !rest.is_empty() {
            let n = rng.random_range(1..=rest.len());
            pieces.push(&rest[..n]);
            rest = &rest[n..];
        }
        let head = rng.random_range(0..8) == 0;
        let (result, body) = frame_pieces(&pieces, head);
        let total = bytes.len() as u64;
        if let Ok(r) = result {
            assert!(
                r.wire_bytes <= total && r.body_bytes <= r.wire_bytes,
                "{bytes:?}"
            );
            assert_eq!(body.len() as u64, r.body_bytes);
        }
    }
}
