//! Request smuggling corpus against the real `volley serve`: each ambiguous framing is
//! sent on a kept-alive connection with a second, innocent-looking request behind it.
//! The server must answer the first exactly once (400, or as RFC 9112 §6.3 says) and
//! close, so the bytes behind it are never read as a request of their own.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common;
use common::Served;

/// The request a front end might not have seen: it fetches a file whose body marks it.
const SMUGGLED: &str = "GET /smuggled.txt HTTP/1.1\r\nHost: t\r\n\r\n";
const MARK: &str = "smuggled-body";

/// (what, request head and body, expected status of the one answer).
const CORPUS: &[(&str, &str, u16)] = &[
    (
        "Content-Length with Transfer-Encoding",
        "POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        400,
    ),
    (
        "two different Content-Lengths",
        "POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nContent-Length: 40\r\n\r\n",
        400,
    ),
    (
        "Transfer-Encoding: chunked, identity",
        "POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
        400,
    ),
    (
        "obs-fold",
        "GET /index.txt HTTP/1.1\r\nHost: t\r\nX-A: 1\r\n Content-Length: 40\r\n\r\n",
        400,
    ),
    (
        "chunk-size overflow",
        "POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000005\r\nhello\r\n0\r\n\r\n",
        400,
    ),
    (
        "space before the colon",
        "GET /index.txt HTTP/1.1\r\nHost: t\r\nContent-Length : 40\r\n\r\n",
        400,
    ),
    // RFC 9112 §2.2 lets a recipient take a bare LF as a line end; volley does, so the
    // head is read exactly as a CRLF one: `Connection: close` is seen and honoured, and
    // nothing after the answered request is read.
    (
        "bare LF line endings",
        "GET /index.txt HTTP/1.1\nHost: t\nConnection: close\n\n",
        200,
    ),
];

/// The docroot, removed when the test ends.
fn root() -> crate::common::TestDir {
    let root = crate::common::fresh_dir("volley-smuggling");
    std::fs::write(root.join("index.txt"), "index\n").unwrap();
    std::fs::write(root.join("smuggled.txt"), MARK).unwrap();
    root
}

#[test]
fn ambiguous_framing_is_answered_once_and_closed() {
    let root = root();
    let served = Served::start(&root, &[]);
    for (what, attack, status) in CORPUS {
        let mut c = TcpStream::connect(&served.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(format!("{attack}{SMUGGLED}").as_bytes())
            .unwrap();
        let mut all = Vec::new();
        // The server closes after its one answer: read_to_end returns; a timeout here
        // means the connection was kept open, which fails the test too.
        c.read_to_end(&mut all)
            .unwrap_or_else(|e| panic!("{what}: connection not closed ({e})"));
        let text = String::from_utf8_lossy(&all);
        assert!(
            text.starts_with(&format!("HTTP/1.1 {status} ")),
            "{what}: {text}"
        );
        assert_eq!(text.matches("HTTP/1.1 ").count(), 1, "{what}: {text}");
        assert!(
            !text.contains(MARK),
            "{what}: smuggled request answered: {text}"
        );
    }
    // The same connection pattern without an attack does answer both: the check above
    // would notice a second request.
    let mut c = TcpStream::connect(&served.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let plain = "GET /index.txt HTTP/1.1\r\nHost: t\r\n\r\n";
    let last = "GET /smuggled.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    c.write_all(format!("{plain}{last}").as_bytes()).unwrap();
    let mut all = Vec::new();
    c.read_to_end(&mut all).unwrap();
    let text = String::from_utf8_lossy(&all);
    assert_eq!(text.matches("HTTP/1.1 200 ").count(), 2, "{text}");
    assert!(text.contains(MARK), "{text}");
}
