//! Wire-level tests: a plain `TcpStream` client checks the exact bytes of each behaviour.

use super::*;
use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::sync::mpsc;

/// Generous bound for any single read: a test that hits it fails rather than hangs.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

fn start(b: Behaviour) -> FaultServer {
    FaultServer::start(b).expect("start fault server")
}

fn connect(server: &FaultServer) -> TcpStream {
    let s = TcpStream::connect(server.addr()).expect("connect");
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n")
}

/// Reads until EOF; returns the bytes and the error that ended the read, if any.
fn read_to_end(s: &mut TcpStream) -> (Vec<u8>, Option<ErrorKind>) {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (out, None),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => return (out, Some(e.kind())),
        }
    }
}

/// Reads one response framed by Content-Length (or none for 1xx/204/304/HEAD):
/// returns (head text, body).
fn read_response(s: &mut TcpStream, is_head: bool) -> (String, Vec<u8>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = s.read(&mut byte).expect("read head");
        assert_eq!(
            n,
            1,
            "EOF inside head: {:?}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let status: u16 = head[9..12].parse().unwrap();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .map_or(0, |v| v.parse::<usize>().unwrap());
    let mut body = vec![0u8; len];
    if !(is_head || (100..200).contains(&status) || status == 204 || status == 304) {
        s.read_exact(&mut body).expect("read body");
    } else {
        body.clear();
    }
    (head, body)
}

#[test]
fn ok_keeps_alive_and_sends_the_exact_body() {
    let server = start(Behaviour::Ok {
        body_len: 100,
        keep_alive: true,
    });
    let mut s = connect(&server);
    for _ in 0..3 {
        s.write_all(get("/").as_bytes()).unwrap();
        let (head, body) = read_response(&mut s, false);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(!head.contains("Connection:"), "{head}");
        assert_eq!(body, body_bytes(100));
    }
    assert_eq!(
        server.stats(),
        Stats {
            connections: 1,
            requests: 3
        }
    );
}

#[test]
fn ok_without_keep_alive_announces_and_closes() {
    let server = start(Behaviour::Ok {
        body_len: 5,
        keep_alive: false,
    });
    let mut s = connect(&server);
    s.write_all(get("/").as_bytes()).unwrap();
    let (bytes, err) = read_to_end(&mut s);
    assert_eq!(err, None);
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.contains("Connection: close\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\nabcde"), "{text}");
}

#[test]
fn client_close_and_http10_are_honoured() {
    let server = start(Behaviour::ok());
    let mut s = connect(&server);
    s.write_all(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let (bytes, _) = read_to_end(&mut s);
    assert!(String::from_utf8_lossy(&bytes).contains("Connection: close\r\n"));

    let mut s = connect(&server);
    s.write_all(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .unwrap();
    let (head, _) = read_response(&mut s, false);
    assert!(head.contains("Connection: keep-alive\r\n"), "{head}");
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let (bytes, err) = read_to_end(&mut s);
    assert_eq!(err, None);
    assert!(String::from_utf8_lossy(&bytes).contains("Connection: close\r\n"));
}

#[test]
fn head_gets_headers_only_in_every_mode() {
    let modes = [
        Behaviour::ok(),
        Behaviour::Status(404),
        Behaviour::Interim(vec![103]),
        Behaviour::Chunked {
            chunk_lens: vec![4, 4],
            extensions: true,
            trailers: true,
        },
        Behaviour::NotModified,
    ];
    for mode in modes {
        let server = start(mode.clone());
        let mut s = connect(&server);
        // HEAD then GET on one connection: if HEAD carried a body, the GET's response
        // would not start where the client expects it.
        s.write_all(b"HEAD / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap();
        let (bytes, _) = read_to_end(&mut s);
        let text = String::from_utf8(bytes).unwrap();
        let blocks: Vec<&str> = text.split("\r\n\r\n").collect();
        let first_final = blocks
            .iter()
            .position(|b| !b.starts_with("HTTP/1.1 1"))
            .unwrap();
        assert!(
            blocks[first_final].starts_with("HTTP/1.1 "),
            "{mode:?}: {text}"
        );
        assert!(
            !blocks[first_final].contains("Connection: close"),
            "{mode:?}"
        );
        assert!(
            blocks[first_final + 1].starts_with("HTTP/1.1 "),
            "{mode:?}: {text}"
        );
    }
}

#[test]
fn head_response_carries_the_get_content_length() {
    let server = start(Behaviour::Ok {
        body_len: 321,
        keep_alive: true,
    });
    let mut s = connect(&server);
    s.write_all(b"HEAD / HTTP/1.1\r\n\r\n").unwrap();
    let (head, body) = read_response(&mut s, true);
    assert!(head.contains("Content-Length: 321\r\n"), "{head}");
    assert!(body.is_empty());
    s.write_all(get("/").as_bytes()).unwrap();
    let (_, body) = read_response(&mut s, false);
    assert_eq!(body.len(), 321);
}

#[test]
fn chunked_sends_extensions_and_trailers() {
    let server = start(Behaviour::Chunked {
        chunk_lens: vec![26, 4],
        extensions: true,
        trailers: true,
    });
    let mut s = connect(&server);
    s.write_all(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let (bytes, _) = read_to_end(&mut s);
    let text = String::from_utf8(bytes).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.contains("Transfer-Encoding: chunked\r\n"), "{head}");
    assert!(!head.contains("Content-Length"), "{head}");
    assert_eq!(
        body,
        "1a;chunk=0\r\nabcdefghijklmnopqrstuvwxyz\r\n4;note=\"a;b\"\r\nabcd\r\n0;last\r\nX-Body-Len: 30\r\nX-Checksum: fault\r\n\r\n"
    );
}

#[test]
fn interim_responses_precede_the_final_one() {
    let server = start(Behaviour::Interim(vec![100, 103]));
    let mut s = connect(&server);
    s.write_all(get("/").as_bytes()).unwrap();
    let (h1, _) = read_response(&mut s, false);
    let (h2, _) = read_response(&mut s, false);
    let (h3, body) = read_response(&mut s, false);
    assert_eq!(h1, "HTTP/1.1 100 Continue\r\n\r\n");
    assert!(h2.starts_with("HTTP/1.1 103 Early Hints\r\nLink: "), "{h2}");
    assert!(h3.starts_with("HTTP/1.1 200 OK\r\n"), "{h3}");
    assert_eq!(body, body_bytes(DEFAULT_BODY_LEN));
}

#[test]
fn expect_continue_gets_100_before_the_body_is_sent() {
    let server = start(Behaviour::ok());
    let mut s = connect(&server);
    s.write_all(b"POST / HTTP/1.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        .unwrap();
    let (h1, _) = read_response(&mut s, false);
    assert_eq!(h1, "HTTP/1.1 100 Continue\r\n\r\n");
    s.write_all(b"hello").unwrap();
    let (h2, _) = read_response(&mut s, false);
    assert!(h2.starts_with("HTTP/1.1 200 OK"), "{h2}");
    assert_eq!(server.stats().requests, 1);
}

#[test]
fn request_bodies_chunked_or_sized_are_consumed() {
    let server = start(Behaviour::ok());
    let mut s = connect(&server);
    s.write_all(b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcPOST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\n\r\n")
        .unwrap();
    for _ in 0..2 {
        let (h, _) = read_response(&mut s, false);
        assert!(h.starts_with("HTTP/1.1 200 OK"), "{h}");
    }
    assert_eq!(server.stats().requests, 2);
}

#[test]
fn no_content_and_not_modified_have_no_body() {
    for (mode, status) in [
        (Behaviour::NoContent, "204 No Content"),
        (Behaviour::NotModified, "304 Not Modified"),
        (Behaviour::Status(204), "204 No Content"),
    ] {
        let server = start(mode);
        let mut s = connect(&server);
        s.write_all(
            format!(
                "{}{}",
                get("/"),
                "GET / HTTP/1.1\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
        )
        .unwrap();
        let (bytes, _) = read_to_end(&mut s);
        let text = String::from_utf8(bytes).unwrap();
        let parts: Vec<&str> = text.split("\r\n\r\n").collect();
        // Two heads back to back and nothing else.
        assert_eq!(parts.len(), 3, "{text}");
        assert!(
            parts[0].starts_with(&format!("HTTP/1.1 {status}")),
            "{text}"
        );
        assert!(
            parts[1].starts_with(&format!("HTTP/1.1 {status}")),
            "{text}"
        );
        assert_eq!(parts[2], "");
    }
}

#[test]
fn close_delimited_body_ends_at_close() {
    let server = start(Behaviour::CloseDelimited { body_len: 40 });
    let mut s = connect(&server);
    s.write_all(get("/").as_bytes()).unwrap();
    let (bytes, err) = read_to_end(&mut s);
    assert_eq!(err, None);
    let text = String::from_utf8(bytes).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(!head.contains("Content-Length") && !head.contains("Transfer-Encoding"));
    assert_eq!(body.as_bytes(), body_bytes(40).as_slice());
}

#[test]
fn close_mid_body_sends_ten_of_a_thousand_bytes() {
    let server = start(Behaviour::CloseMidBody);
    let mut s = connect(&server);
    s.write_all(get("/").as_bytes()).unwrap();
    let (bytes, err) = read_to_end(&mut s);
    assert_eq!(err, None);
    let text = String::from_utf8(bytes).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.contains("Content-Length: 1000"), "{head}");
    assert_eq!(body, "abcdefghij");
}

#[test]
fn malformed_kinds_send_their_fault() {
    let expect = [
        (MalformedKind::GarbageStatusLine, "HTTP/1.1 2x0 "),
        (MalformedKind::BadHeader, "\r\nThis header has no colon\r\n"),
        (
            MalformedKind::NegativeContentLength,
            "Content-Length: -5\r\n",
        ),
        (
            MalformedKind::HugeContentLength,
            "Content-Length: 99999999999999999999999\r\n",
        ),
        (
            MalformedKind::ConflictingContentLength,
            "Content-Length: 16\r\nContent-Length: 20\r\n",
        ),
        (MalformedKind::BadChunkSize, "\r\n\r\nzz\r\n"),
        (MalformedKind::OversizedHeaders, "X-Filler-0: "),
    ];
    for (kind, needle) in expect {
        let server = start(Behaviour::Malformed(kind));
        let mut s = connect(&server);
        s.write_all(get("/").as_bytes()).unwrap();
        let (bytes, err) = read_to_end(&mut s);
        assert_eq!(err, None, "{kind}");
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            text.contains(needle),
            "{kind}: {}",
            &text[..text.len().min(200)]
        );
        if kind == MalformedKind::OversizedHeaders {
            let head_len = text.find("\r\n\r\n").unwrap();
            assert!(head_len >= OVERSIZED_HEADER_BYTES, "{head_len}");
        }
    }
}

#[test]
fn status_sends_the_chosen_code() {
    let server = start(Behaviour::Status(503));
    let mut s = connect(&server);
    s.write_all(get("/").as_bytes()).unwrap();
    let (head, body) = read_response(&mut s, false);
    assert!(
        head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{head}"
    );
    assert_eq!(body, b"status 503\n");
}

#[test]
fn slow_waits_at_least_the_delay() {
    let delay = Duration::from_millis(60);
    let server = start(Behaviour::Slow { delay });
    let mut s = connect(&server);
    let begin = Instant::now();
    s.write_all(get("/").as_bytes()).unwrap();
    let (head, _) = read_response(&mut s, false);
    // A lower bound only: the server cannot answer before its own sleep ends.
    assert!(begin.elapsed() >= delay);
    assert!(head.starts_with("HTTP/1.1 200"));
}

#[test]
fn stall_sends_the_given_prefix_then_nothing_until_shutdown() {
    let server = start(Behaviour::Stall { after_bytes: 12 });
    let mut s = connect(&server);
    s.write_all(get("/").as_bytes()).unwrap();
    let mut prefix = [0u8; 12];
    s.read_exact(&mut prefix).unwrap();
    assert_eq!(&prefix, b"HTTP/1.1 200");
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut more = [0u8; 1];
    let err = s.read(&mut more).expect_err("stalled server sent more");
    assert!(matches!(
        err.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut
    ));
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    server.shutdown();
    let (rest, _) = read_to_end(&mut s);
    assert!(rest.is_empty());
}

#[test]
fn reset_after_requests_sends_rst() {
    let server = start(Behaviour::Reset {
        after_requests: 1,
        mid_response: false,
    });
    let mut s = connect(&server);
    s.write_all(get("/").as_bytes()).unwrap();
    let (head, _) = read_response(&mut s, false);
    assert!(head.starts_with("HTTP/1.1 200"));
    s.write_all(get("/").as_bytes()).unwrap();
    let (bytes, err) = read_to_end(&mut s);
    assert!(bytes.is_empty());
    assert_eq!(err, Some(ErrorKind::ConnectionReset));
}

#[test]
fn reset_mid_response_sends_part_then_rst() {
    let server = start(Behaviour::Reset {
        after_requests: 0,
        mid_response: true,
    });
    let mut s = connect(&server);
    s.write_all(get("/").as_bytes()).unwrap();
    let (bytes, err) = read_to_end(&mut s);
    assert_eq!(err, Some(ErrorKind::ConnectionReset));
    // Whatever arrived before the RST is a strict prefix of a full response.
    let full = behaviour::build_reply(
        &behaviour::Answer::Ok {
            body_len: DEFAULT_BODY_LEN,
        },
        false,
        behaviour::ConnHeader::None,
    );
    assert!(full.bytes.starts_with(&bytes) && bytes.len() < full.bytes.len());
}

#[test]
fn close_after_announced_and_silent() {
    for announce in [true, false] {
        let server = start(Behaviour::CloseAfter {
            requests: 2,
            announce,
        });
        let mut s = connect(&server);
        s.write_all(get("/").as_bytes()).unwrap();
        let (h1, _) = read_response(&mut s, false);
        assert!(!h1.contains("Connection: close"));
        s.write_all(get("/").as_bytes()).unwrap();
        let (h2, _) = read_response(&mut s, false);
        assert_eq!(h2.contains("Connection: close\r\n"), announce, "{h2}");
        let (rest, err) = read_to_end(&mut s);
        assert!(rest.is_empty() && err.is_none());
    }
}

#[test]
fn ignore_connection_close_keeps_the_connection() {
    let server = start(Behaviour::IgnoreConnectionClose);
    let mut s = connect(&server);
    for _ in 0..2 {
        s.write_all(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap();
        let (head, _) = read_response(&mut s, false);
        assert!(!head.contains("Connection"), "{head}");
    }
    assert_eq!(server.stats().connections, 1);
}

#[test]
fn token_bucket_serves_no_faster_than_its_rate() {
    // 30 requests at 300/s with burst 1 need at least 29 intervals (29 / 300 s).
    let rate_per_s = 300.0;
    let server = start(Behaviour::TokenBucket {
        rate_per_s,
        burst: 1,
    });
    let begin = Instant::now();
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let addr = server.addr();
            thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
                for _ in 0..10 {
                    s.write_all(get("/").as_bytes()).unwrap();
                    let (head, _) = read_response(&mut s, false);
                    assert!(head.starts_with("HTTP/1.1 200"));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(begin.elapsed() >= Duration::from_secs_f64(29.0 / rate_per_s));
    assert_eq!(server.stats().requests, 30);
}

#[test]
fn token_bucket_burst_is_served_at_once_by_the_admission_rule() {
    // With burst 5 at 1 request/s, five back-to-back admissions must not wait a full
    // interval each: the whole burst passes well inside one interval.
    let server = start(Behaviour::TokenBucket {
        rate_per_s: 1.0,
        burst: 5,
    });
    let mut s = connect(&server);
    s.write_all(get("/").repeat(5).as_bytes()).unwrap();
    for _ in 0..5 {
        let (head, _) = read_response(&mut s, false);
        assert!(head.starts_with("HTTP/1.1 200"));
    }
    // The 6th would wait ~1 s; shutdown must cut that wait short.
    s.write_all(get("/").as_bytes()).unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        server.shutdown();
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(5))
        .expect("shutdown hung on a token wait");
}

#[test]
fn dies_after_requests_stops_listening_and_drops_connections() {
    let server = start(Behaviour::Dies { after_requests: 2 });
    let mut idle = connect(&server);
    let mut s = connect(&server);
    for _ in 0..2 {
        s.write_all(get("/").as_bytes()).unwrap();
        let (head, _) = read_response(&mut s, false);
        assert!(head.starts_with("HTTP/1.1 200"));
    }
    // The dying closes every connection, including idle ones.
    let (rest, _) = read_to_end(&mut s);
    assert!(rest.is_empty());
    let (rest, _) = read_to_end(&mut idle);
    assert!(rest.is_empty());
    assert!(server.is_stopped());
    // The acceptor exits (closing the listener) promptly; bounded retry, no sleep-asserts.
    let mut refused = false;
    for _ in 0..100 {
        if TcpStream::connect(server.addr()).is_err() {
            refused = true;
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    assert!(refused, "listener still accepting after death");
}

#[test]
fn bad_requests_get_400_and_close() {
    let server = start(Behaviour::ok());
    let mut s = connect(&server);
    s.write_all(b"NOT HTTP AT ALL\r\n\r\n").unwrap();
    let (bytes, _) = read_to_end(&mut s);
    assert!(String::from_utf8_lossy(&bytes).starts_with("HTTP/1.1 400 Bad Request\r\n"));
    assert_eq!(server.stats().requests, 0);
}

#[test]
fn invalid_behaviour_is_invalid_input() {
    let err = FaultServer::start(Behaviour::Status(42))
        .err()
        .expect("rejected");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

#[test]
fn connections_beyond_the_limit_are_closed() {
    let server = FaultServer::start_with(
        Behaviour::ok(),
        Limits {
            max_connections: 1,
            ..Limits::default()
        },
    )
    .unwrap();
    let mut first = connect(&server);
    first.write_all(get("/").as_bytes()).unwrap();
    read_response(&mut first, false);
    let mut second = connect(&server);
    let _ = second.write_all(get("/").as_bytes());
    let (bytes, _) = read_to_end(&mut second);
    assert!(bytes.is_empty());
}

#[test]
fn shutdown_never_hangs_with_busy_connections() {
    for mode in [
        Behaviour::Stall { after_bytes: 0 },
        Behaviour::Slow {
            delay: Duration::from_secs(600),
        },
        Behaviour::ok(),
        Behaviour::IgnoreConnectionClose,
    ] {
        let server = start(mode.clone());
        let mut clients = Vec::new();
        for i in 0..4 {
            let mut s = connect(&server);
            if i % 2 == 0 {
                s.write_all(get("/").as_bytes()).unwrap();
            } else {
                // Half a request: the server is blocked mid-head.
                s.write_all(b"GET / HTTP/1.1\r\nHost").unwrap();
            }
            clients.push(s);
        }
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            drop(server);
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("shutdown hung for {mode:?}"));
        for mut c in clients {
            let _ = c.shutdown(Shutdown::Write);
            let (_, err) = read_to_end(&mut c);
            assert!(err != Some(ErrorKind::WouldBlock) && err != Some(ErrorKind::TimedOut));
        }
    }
}
