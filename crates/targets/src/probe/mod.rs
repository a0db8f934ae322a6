//! The readiness probe: GETs of a known file, validated as docs/methodology.md asks (status
//! 200, Content-Type, Content-Length or chunked framing, exact body), before any load is
//! sent. A fast wrong answer is an error, not a result.
//!
//! Over TLS the probe trusts the target's CA (volley's throw-away one, or the one given)
//! and offers `http/1.1` by ALPN. When compression was asked, each encoding is asked for
//! in turn (`Accept-Encoding: br`, then `gzip`) and the answer must carry that
//! `Content-Encoding` and decode to the file's bytes: a server that ignores the header
//! would otherwise be measured sending identity bodies. When HTTP/2 was asked, one more
//! handshake offers `h2, http/1.1`, `h2` must be chosen, and the same checks are made
//! again over that connection with real HTTP/2 GETs (volley's own `volley-h2` codec,
//! one stream per check): a server can agree to h2 by ALPN and still answer it wrong
//! (another docroot, no compression on its h2 path), and the load would not see it.
//! Over HTTP/2 a body is framed by END_STREAM, so `content-length` is checked only
//! when sent.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};
use volley_h2::{Event, H2Conn, RequestHead, Settings as H2Settings};
use volley_tls::rustls::ClientConfig;
use volley_tls::{TlsFailure, TlsSession, TlsStream};

mod answer;

use answer::{is_complete, MAX_BODY_BYTES};

pub use answer::{
    decode, fnv64, parse_response, validate, validate_encoded, validate_encoded_h2, validate_h2,
    AnswerError,
};

/// What the probe expects back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// Request path, e.g. `/index.html`.
    pub path: String,
    /// Expected Content-Type (compared up to any `;` parameters).
    pub content_type: String,
    /// The file's exact bytes.
    pub body: Vec<u8>,
}

/// How to reach the target and which checks go beyond the identity answer.
#[derive(Debug, Clone, Default)]
pub struct ProbeOptions {
    /// TLS client config offering `http/1.1` by ALPN; `None` speaks plain HTTP.
    pub tls: Option<Arc<ClientConfig>>,
    /// A config offering `h2, http/1.1`: when set, ALPN must choose `h2`.
    pub h2_check: Option<Arc<ClientConfig>>,
    /// `Content-Encoding` tokens (`br`, `gzip`) that must be applied when accepted.
    pub encodings: Vec<&'static str>,
}

impl ProbeOptions {
    /// Options for a TLS target whose certificate `ca` issued (`None`: certificate not
    /// verified, content still checked).
    pub fn tls(
        ca: Option<&std::path::Path>,
        expect_h2: bool,
        encodings: Vec<&'static str>,
    ) -> Result<ProbeOptions, volley_tls::TlsConfigError> {
        let config = |alpn: &[&str]| {
            volley_tls::ClientTls {
                insecure: ca.is_none(),
                ca_file: ca.map(|p| p.to_path_buf()),
                // Each probe must pay a full handshake, like a first visitor would.
                resumption: false,
                alpn: alpn.iter().map(|a| a.to_string()).collect(),
                ..volley_tls::ClientTls::default()
            }
            .client_config()
        };
        Ok(ProbeOptions {
            tls: Some(config(&[volley_tls::ALPN_HTTP11])?),
            h2_check: if expect_h2 {
                Some(config(&[volley_tls::ALPN_H2, volley_tls::ALPN_HTTP11])?)
            } else {
                None
            },
            encodings,
        })
    }
}

/// What a passed probe saw, for the run's record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validated {
    /// The ALPN protocol chosen when h2 was offered (`None` when not checked).
    pub h2_alpn: Option<String>,
    /// Over HTTP/2, each encoding checked: (token, body bytes on the wire).
    pub h2_encoded_sizes: Vec<(String, usize)>,
    /// Each encoding checked: (token, bytes on the wire for the probe file).
    pub encoded_sizes: Vec<(String, usize)>,
}

/// A parsed response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Body after de-chunking.
    pub body: Vec<u8>,
}

impl Response {
    /// First header called `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a probe did not pass: the port is not answering yet (retry) or the answer is wrong
/// (give up). The text says what was seen, for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeFailure {
    /// Connect refused, reset or timed out: the server may still be starting.
    #[error("not answering yet: {0}")]
    NotReady(String),
    /// The server answered, incorrectly.
    #[error("wrong answer: {0}")]
    Wrong(String),
}

/// Every check the options ask for, each over a fresh connection with
/// `Connection: close`, each bounded by `timeout`.
pub fn probe(
    addr: SocketAddr,
    want: &Expected,
    opts: &ProbeOptions,
    timeout: Duration,
) -> Result<Validated, ProbeFailure> {
    let tls = opts.tls.as_ref();
    let raw = fetch(addr, tls, &want.path, None, timeout)?.raw;
    let resp = parse_response(&raw).map_err(|e| ProbeFailure::Wrong(e.to_string()))?;
    validate(&resp, want).map_err(|e| ProbeFailure::Wrong(e.to_string()))?;
    let mut seen = Validated::default();
    for enc in &opts.encodings {
        let raw = fetch(addr, tls, &want.path, Some(enc), timeout)?.raw;
        let resp = parse_response(&raw).map_err(|e| ProbeFailure::Wrong(e.to_string()))?;
        validate_encoded(&resp, want, enc).map_err(|e| ProbeFailure::Wrong(e.to_string()))?;
        seen.encoded_sizes.push((enc.to_string(), resp.body.len()));
    }
    if let Some(h2) = &opts.h2_check {
        let checked = probe_h2(addr, h2, want, &opts.encodings, timeout)?;
        seen.h2_alpn = checked.h2_alpn;
        seen.h2_encoded_sizes = checked.h2_encoded_sizes;
    }
    Ok(seen)
}

/// The HTTP/2 half of the probe: one handshake offering `h2, http/1.1` (`config`'s
/// ALPN list) that must choose `h2`, then over that one connection a GET of
/// `want.path` without `Accept-Encoding` and one per encoding, each checked as over
/// HTTP/1.1. All bounded by `timeout`.
pub fn probe_h2(
    addr: SocketAddr,
    config: &Arc<ClientConfig>,
    want: &Expected,
    encodings: &[&str],
    timeout: Duration,
) -> Result<Validated, ProbeFailure> {
    let deadline = Instant::now() + timeout;
    let (conn, alpn) = connect(addr, Some(config), deadline)?;
    if alpn.as_deref() != Some(volley_tls::ALPN_H2) {
        return Err(ProbeFailure::Wrong(format!(
            "offered h2 and http/1.1 by ALPN, the server chose {}: HTTP/2 is not on",
            alpn.as_deref().unwrap_or("nothing")
        )));
    }
    let mut h2 = H2Client::new(conn, addr);
    let mut seen = Validated {
        h2_alpn: alpn,
        ..Validated::default()
    };
    let resp = h2.get(&want.path, None, deadline)?;
    validate_h2(&resp, want).map_err(|e| ProbeFailure::Wrong(format!("over HTTP/2: {e}")))?;
    for enc in encodings {
        let resp = h2.get(&want.path, Some(enc), deadline)?;
        validate_encoded_h2(&resp, want, enc)
            .map_err(|e| ProbeFailure::Wrong(format!("over HTTP/2: {e}")))?;
        seen.h2_encoded_sizes
            .push((enc.to_string(), resp.body.len()));
    }
    Ok(seen)
}

/// A blocking HTTP/2 client over one probe connection: the sans-IO codec driven by
/// plain reads and writes, one request at a time.
struct H2Client {
    conn: Conn,
    h2: H2Conn,
    authority: String,
}

impl H2Client {
    fn new(conn: Conn, addr: SocketAddr) -> H2Client {
        H2Client {
            conn,
            h2: H2Conn::new(H2Settings {
                // Every field (status, type, length, coding) and the body bytes.
                capture_headers: true,
                capture_content: true,
                ..H2Settings::default()
            }),
            authority: addr.to_string(),
        }
    }

    fn write_pending(&mut self) -> Result<(), ProbeFailure> {
        let out = self.h2.pending_output();
        if !out.is_empty() {
            let n = out.len();
            self.conn
                .write_all(out)
                .and_then(|_| self.conn.flush())
                .map_err(classify)?;
            self.h2.consume_output(n);
        }
        Ok(())
    }

    /// The fields of the head just received (pseudo-fields left out), if captured.
    fn head_fields(&mut self) -> Option<Vec<(String, String)>> {
        let (_, fields) = self.h2.pop_captured_headers()?;
        Some(
            fields
                .into_iter()
                .filter(|(n, _)| n.first() != Some(&b':'))
                .map(|(n, v)| {
                    (
                        String::from_utf8_lossy(&n).into_owned(),
                        String::from_utf8_lossy(&v).trim().to_string(),
                    )
                })
                .collect(),
        )
    }

    /// One GET, complete by END_STREAM, before `deadline`.
    fn get(
        &mut self,
        path: &str,
        accept_encoding: Option<&str>,
        deadline: Instant,
    ) -> Result<Response, ProbeFailure> {
        let wrong = |e: String| ProbeFailure::Wrong(format!("over HTTP/2: {e}"));
        let mut fields = vec![("user-agent", "volley-probe")];
        if let Some(e) = accept_encoding {
            fields.push(("accept-encoding", e));
        }
        let head = RequestHead {
            method: "GET",
            scheme: "https",
            authority: &self.authority,
            path,
            headers: &fields,
        };
        let id = self
            .h2
            .submit(&head, b"")
            .map_err(|e| wrong(format!("cannot send the request: {e}")))?;
        let mut resp = Response {
            status: 0,
            headers: Vec::new(),
            body: Vec::new(),
        };
        let mut buf = [0u8; 16 * 1024];
        loop {
            self.write_pending()?;
            while let Some(ev) = self.h2.poll_event() {
                match ev {
                    Event::Headers {
                        stream,
                        status,
                        end_stream,
                    } if stream == id => {
                        resp.status = status;
                        if let Some(fields) = self.head_fields() {
                            resp.headers = fields;
                        }
                        if end_stream {
                            return Ok(resp);
                        }
                    }
                    Event::Data {
                        stream, end_stream, ..
                    } if stream == id => {
                        resp.body.extend_from_slice(self.h2.polled_data());
                        if resp.body.len() as u64 > MAX_BODY_BYTES {
                            return Err(wrong("response larger than 64 MiB".into()));
                        }
                        if end_stream {
                            return Ok(resp);
                        }
                    }
                    Event::Trailers { stream } if stream == id => {
                        // Trailers' captured fields are not the head's.
                        let _ = self.h2.pop_captured_headers();
                        return Ok(resp);
                    }
                    Event::StreamReset { stream, code } | Event::StreamError { stream, code }
                        if stream == id =>
                    {
                        return Err(wrong(format!("stream reset ({code:?})")));
                    }
                    Event::GoAway { last_stream, code } if last_stream < id => {
                        return Err(wrong(format!("GOAWAY ({code:?}) before the answer")));
                    }
                    _ => {}
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ProbeFailure::NotReady(
                    "HTTP/2 response not complete before the probe timeout".into(),
                ));
            }
            self.conn
                .tcp()
                .set_read_timeout(Some(left))
                .map_err(|e| ProbeFailure::NotReady(e.to_string()))?;
            match self.conn.read(&mut buf) {
                Ok(0) => return Err(wrong("connection closed before the answer".into())),
                Ok(n) => self
                    .h2
                    .feed(&buf[..n])
                    .map_err(|e| wrong(format!("protocol error: {e}")))?,
                Err(e) if is_timeout(&e) => {}
                Err(e) => return Err(classify(e)),
            }
        }
    }
}

/// A raw response and the ALPN protocol of its connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The response bytes as received (head and body, still framed and encoded).
    pub raw: Vec<u8>,
    /// The ALPN protocol agreed (TLS only).
    pub alpn: Option<String>,
}

enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Conn {
    fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(t) => t.get_ref(),
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(t) => t.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(t) => t.flush(),
        }
    }
}

/// A TLS failure is the server's (wrong) answer; anything else on the socket may be a
/// server still starting.
fn classify(e: std::io::Error) -> ProbeFailure {
    match TlsFailure::in_io(&e) {
        Some(f) => ProbeFailure::Wrong(format!("TLS: {f}")),
        None => ProbeFailure::NotReady(e.to_string()),
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// Connects (and completes the TLS handshake when `tls` is set) before `deadline`.
fn connect(
    addr: SocketAddr,
    tls: Option<&Arc<ClientConfig>>,
    deadline: Instant,
) -> Result<(Conn, Option<String>), ProbeFailure> {
    let left = || deadline.saturating_duration_since(Instant::now());
    let s = TcpStream::connect_timeout(&addr, left().max(Duration::from_millis(1)))
        .map_err(|e| ProbeFailure::NotReady(e.to_string()))?;
    let _ = s.set_nodelay(true);
    let set = |s: &TcpStream| -> Result<(), ProbeFailure> {
        let t = left().max(Duration::from_millis(1));
        s.set_read_timeout(Some(t))
            .and_then(|_| s.set_write_timeout(Some(t)))
            .map_err(|e| ProbeFailure::NotReady(e.to_string()))
    };
    set(&s)?;
    let Some(config) = tls else {
        return Ok((Conn::Plain(s), None));
    };
    let session = TlsSession::new(config.clone(), &addr.ip().to_string())
        .map_err(|e| ProbeFailure::Wrong(format!("TLS setup: {e}")))?;
    let mut t = TlsStream::new(session, s);
    loop {
        match t.handshake() {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) if is_timeout(&e) => {}
            Err(e) => return Err(classify(e)),
        }
        if left().is_zero() {
            return Err(ProbeFailure::NotReady(
                "TLS handshake not complete before the probe timeout".into(),
            ));
        }
        set(t.get_ref())?;
    }
    let alpn = t
        .session()
        .negotiated_alpn()
        .map(|a| String::from_utf8_lossy(a).into_owned());
    Ok((Conn::Tls(Box::new(t)), alpn))
}

/// The ALPN protocol a fresh handshake agrees on (no request is sent).
pub fn handshake_alpn(
    addr: SocketAddr,
    config: &Arc<ClientConfig>,
    timeout: Duration,
) -> Result<Option<String>, ProbeFailure> {
    connect(addr, Some(config), Instant::now() + timeout).map(|(_, alpn)| alpn)
}

/// One GET with `Connection: close` (and `Accept-Encoding` when given), over TLS when
/// `tls` is set, bounded by `timeout` overall. Reads until the response is complete by
/// its framing or the server closes.
pub fn fetch(
    addr: SocketAddr,
    tls: Option<&Arc<ClientConfig>>,
    path: &str,
    accept_encoding: Option<&str>,
    timeout: Duration,
) -> Result<Fetched, ProbeFailure> {
    let ae = accept_encoding
        .map(|e| format!("Accept-Encoding: {e}\r\n"))
        .unwrap_or_default();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{ae}User-Agent: volley-probe\r\n\r\n"
    );
    exchange(addr, tls, req.as_bytes(), timeout)
}

/// Sends one complete request (which must ask `Connection: close`) and reads the
/// response until it is complete by its framing or the server closes, bounded by
/// `timeout` overall.
pub(crate) fn exchange(
    addr: SocketAddr,
    tls: Option<&Arc<ClientConfig>>,
    request: &[u8],
    timeout: Duration,
) -> Result<Fetched, ProbeFailure> {
    let deadline = Instant::now() + timeout;
    let (mut s, alpn) = connect(addr, tls, deadline)?;
    s.write_all(request)
        .and_then(|_| s.flush())
        .map_err(classify)?;
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ProbeFailure::NotReady(
                "response not complete before the probe timeout".into(),
            ));
        }
        s.tcp()
            .set_read_timeout(Some(left))
            .map_err(|e| ProbeFailure::NotReady(e.to_string()))?;
        match s.read(&mut buf) {
            Ok(0) => return Ok(Fetched { raw: out, alpn }),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if is_timeout(&e) => continue,
            // A server that closes without close_notify after a complete answer has
            // still answered.
            Err(_) if is_complete(&out) => return Ok(Fetched { raw: out, alpn }),
            Err(e) => return Err(classify(e)),
        }
        if is_complete(&out) {
            return Ok(Fetched { raw: out, alpn });
        }
        if out.len() as u64 > MAX_BODY_BYTES {
            return Err(ProbeFailure::Wrong("response larger than 64 MiB".into()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want() -> Expected {
        Expected {
            path: "/index.html".into(),
            content_type: "text/html".into(),
            body: b"hello".to_vec(),
        }
    }

    #[test]
    fn accepts_the_right_answer() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: 5\r\n\r\nhello";
        let r = parse_response(raw).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(validate(&r, &want()), Ok(()));
    }

    #[test]
    fn accepts_chunked_framing() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2;x=y\r\nlo\r\n0\r\n\r\n";
        let r = parse_response(raw).unwrap();
        assert_eq!(r.body, b"hello");
        assert_eq!(validate(&r, &want()), Ok(()));
    }

    #[test]
    fn rejects_wrong_answers() {
        let cases: [&[u8]; 5] = [
            b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\nhellx",
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 4\r\n\r\nhell",
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\nhello",
        ];
        for raw in cases {
            let r = parse_response(raw).unwrap();
            assert!(
                validate(&r, &want()).is_err(),
                "{}",
                String::from_utf8_lossy(raw)
            );
        }
    }

    #[test]
    fn rejects_malformed_responses() {
        assert!(parse_response(b"").is_err());
        assert!(parse_response(b"SSH-2.0-x\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhi").is_err());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err()
        );
    }

    #[test]
    fn fnv_differs_for_different_bodies() {
        assert_ne!(fnv64(b"a"), fnv64(b"b"));
        assert_eq!(fnv64(b""), 0xcbf2_9ce4_8422_2325);
    }

    fn gz(data: &[u8]) -> Vec<u8> {
        use std::io::Write as _;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn br(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        brotli::BrotliCompress(&mut &data[..], &mut out, &Default::default()).unwrap();
        out
    }

    fn encoded(ce: &str, body: &[u8]) -> Response {
        let mut raw = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: {ce}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        raw.extend_from_slice(body);
        parse_response(&raw).unwrap()
    }

    #[test]
    fn encoded_answers_decode_to_the_file() {
        assert_eq!(
            validate_encoded(&encoded("gzip", &gz(b"hello")), &want(), "gzip"),
            Ok(())
        );
        assert_eq!(
            validate_encoded(&encoded("br", &br(b"hello")), &want(), "br"),
            Ok(())
        );
        assert_eq!(decode(&gz(b"abc"), "gzip").unwrap(), b"abc");
        assert_eq!(decode(b"abc", "identity").unwrap(), b"abc");
        assert!(decode(b"abc", "zstd").is_err());
    }

    #[test]
    fn compression_not_applied_or_wrong_is_refused() {
        // A server that ignores Accept-Encoding answers identity.
        let plain = parse_response(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\nhello",
        )
        .unwrap();
        let e = validate_encoded(&plain, &want(), "gzip")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not applied"), "{e}");
        // br sent when gzip was asked.
        assert!(validate_encoded(&encoded("br", &br(b"hello")), &want(), "gzip").is_err());
        // Encoded, but not the file.
        assert!(validate_encoded(&encoded("gzip", &gz(b"hellx")), &want(), "gzip").is_err());
        // Not gzip at all.
        let e = validate_encoded(&encoded("gzip", b"hello"), &want(), "gzip")
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not decode"), "{e}");
        // An encoding nobody asked for.
        let e = validate(&encoded("gzip", &gz(b"hello")), &want())
            .unwrap_err()
            .to_string();
        assert!(e.contains("accepted no encoding"), "{e}");
    }

    fn h2_response(headers: &[(&str, &str)], body: &[u8]) -> Response {
        Response {
            status: 200,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            body: body.to_vec(),
        }
    }

    #[test]
    fn h2_answers_are_framed_by_stream_end() {
        // No content-length and no chunked framing: fine over HTTP/2, not over 1.1.
        let r = h2_response(&[("content-type", "text/html")], b"hello");
        assert_eq!(validate_h2(&r, &want()), Ok(()));
        assert!(validate(&r, &want()).is_err());
        let r = h2_response(
            &[("content-type", "text/html"), ("content-length", "5")],
            b"hello",
        );
        assert_eq!(validate_h2(&r, &want()), Ok(()));
        let r = h2_response(
            &[("content-type", "text/html"), ("content-length", "9")],
            b"hello",
        );
        assert!(validate_h2(&r, &want())
            .unwrap_err()
            .to_string()
            .contains("content-length 9"));
        let gz_body = gz(b"hello");
        let r = h2_response(
            &[("content-type", "text/html"), ("content-encoding", "gzip")],
            &gz_body,
        );
        assert_eq!(validate_encoded_h2(&r, &want(), "gzip"), Ok(()));
        assert!(validate_h2(&r, &want())
            .unwrap_err()
            .to_string()
            .contains("accepted no encoding"));
        let plain = h2_response(&[("content-type", "text/html")], b"hello");
        let e = validate_encoded_h2(&plain, &want(), "br")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not applied"), "{e}");
    }

    #[test]
    fn completeness_by_framing() {
        assert!(!is_complete(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel"
        ));
        assert!(is_complete(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
        ));
        assert!(!is_complete(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
        ));
        assert!(is_complete(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
        ));
        assert!(!is_complete(b"HTTP/1.1 200 OK\r\n\r\nuntil close"));
        assert!(!is_complete(b"HTTP/1.1 200"));
    }
}
