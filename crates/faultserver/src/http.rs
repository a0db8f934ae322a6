//! The small, strict HTTP/1.1 request reader and the response byte helpers.
//!
//! The fault server must be *correct* everywhere it is not deliberately wrong, so a client
//! that fails against it fails because of the injected fault. The reader therefore follows
//! RFC 9112 framing (Content-Length or chunked request bodies, conflicting lengths are an
//! error) and is bounded: a request head larger than [`MAX_HEAD_BYTES`] is answered 431,
//! never buffered without limit.

use std::io::{self, BufRead, Read};

/// Largest request head (request line + headers) accepted, in bytes.
pub(crate) const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Largest chunk-size or trailer line in a chunked request body, in bytes.
const MAX_CHUNK_LINE_BYTES: usize = 4 * 1024;

/// How the request body is framed (RFC 9112 section 6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyFraming {
    /// No body.
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// The parts of a request head the server acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestHead {
    /// HEAD requests get headers only, in every mode.
    pub is_head: bool,
    /// `true` for HTTP/1.1, `false` for HTTP/1.0 (the default persistence differs).
    pub http11: bool,
    /// The client sent `Connection: close`.
    pub wants_close: bool,
    /// An HTTP/1.0 client sent `Connection: keep-alive`.
    pub wants_keep_alive: bool,
    /// `Expect: 100-continue` was sent: the client may wait for 100 before the body.
    pub expect_continue: bool,
    /// Body framing.
    pub body: BodyFraming,
}

impl RequestHead {
    /// Whether the client expects the connection to stay open after the response.
    pub fn client_keeps_alive(&self) -> bool {
        if self.http11 {
            !self.wants_close
        } else {
            self.wants_keep_alive && !self.wants_close
        }
    }
}

/// Why a request could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The socket failed, timed out or closed mid-request: nothing to answer.
    Io,
    /// The request is invalid: answer with this status and close.
    Bad(u16),
}

impl From<io::Error> for ReadError {
    fn from(_: io::Error) -> Self {
        ReadError::Io
    }
}

/// Reads one line (through `\n`) into `line`, reading at most `limit` bytes.
/// Returns `Bad(status)` when the line is longer than the limit.
fn read_line<R: BufRead>(
    r: &mut R,
    line: &mut Vec<u8>,
    limit: usize,
    status: u16,
) -> Result<usize, ReadError> {
    line.clear();
    let n = r.by_ref().take(limit as u64).read_until(b'\n', line)?;
    if n > 0 && line.last() != Some(&b'\n') {
        if n >= limit {
            return Err(ReadError::Bad(status));
        }
        return Err(ReadError::Io);
    }
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    Ok(n)
}

/// RFC 9110 `tchar`: the characters allowed in methods and header names.
fn is_token(s: &[u8]) -> bool {
    !s.is_empty()
        && s.iter()
            .all(|&c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c))
}

/// The request line `METHOD TARGET VERSION`: whether it is a HEAD, and whether
/// HTTP/1.1 (1.0 otherwise; any other version is 505).
fn request_line(line: &[u8]) -> Result<(bool, bool), ReadError> {
    let mut parts = line.split(|&c| c == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ReadError::Bad(400));
    };
    if !is_token(method) || target.is_empty() {
        return Err(ReadError::Bad(400));
    }
    let http11 = match version {
        b"HTTP/1.1" => true,
        b"HTTP/1.0" => false,
        v if v.starts_with(b"HTTP/") => return Err(ReadError::Bad(505)),
        _ => return Err(ReadError::Bad(400)),
    };
    Ok((method == b"HEAD", http11))
}

/// One Content-Length field (a list of equal decimals is allowed, RFC 9110 section
/// 8.6), which must agree with any earlier one.
fn add_content_length(value: &str, content_length: &mut Option<u64>) -> Result<(), ReadError> {
    for part in value.split(',') {
        let part = part.trim();
        if part.is_empty() || !part.bytes().all(|c| c.is_ascii_digit()) {
            return Err(ReadError::Bad(400));
        }
        let len: u64 = part.parse().map_err(|_| ReadError::Bad(400))?;
        if content_length.is_some_and(|prev| prev != len) {
            return Err(ReadError::Bad(400));
        }
        *content_length = Some(len);
    }
    Ok(())
}

/// Reads a request head. `Ok(None)` means the client closed cleanly between requests.
pub(crate) fn read_head<R: BufRead>(r: &mut R) -> Result<Option<RequestHead>, ReadError> {
    let mut budget = MAX_HEAD_BYTES;
    let mut line = Vec::with_capacity(256);
    // RFC 9112 section 2.2: a server SHOULD ignore at least one empty line before the
    // request line; the byte budget bounds how many.
    loop {
        let n = read_line(r, &mut line, budget, 431)?;
        if n == 0 {
            if budget == MAX_HEAD_BYTES {
                return Ok(None);
            }
            return Err(ReadError::Io);
        }
        budget -= n;
        if !line.is_empty() {
            break;
        }
        if budget == 0 {
            return Err(ReadError::Bad(431));
        }
    }
    let (is_head, http11) = request_line(&line)?;
    let mut head = RequestHead {
        is_head,
        http11,
        wants_close: false,
        wants_keep_alive: false,
        expect_continue: false,
        body: BodyFraming::None,
    };
    let mut content_length: Option<u64> = None;
    let mut chunked = false;
    let mut transfer_encoding = false;
    loop {
        let n = read_line(r, &mut line, budget, 431)?;
        if n == 0 {
            return Err(ReadError::Io);
        }
        budget -= n;
        if line.is_empty() {
            break;
        }
        if budget == 0 {
            return Err(ReadError::Bad(431));
        }
        // Obsolete line folding is rejected (RFC 9112 section 5.2 allows 400).
        if matches!(line.first(), Some(b' ' | b'\t')) {
            return Err(ReadError::Bad(400));
        }
        let Some(colon) = line.iter().position(|&c| c == b':') else {
            return Err(ReadError::Bad(400));
        };
        let name = &line[..colon];
        if !is_token(name) {
            return Err(ReadError::Bad(400));
        }
        let value = String::from_utf8_lossy(&line[colon + 1..]);
        let value = value.trim();
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        match name.as_str() {
            "content-length" => add_content_length(value, &mut content_length)?,
            "transfer-encoding" => {
                transfer_encoding = true;
                chunked = value
                    .rsplit(',')
                    .next()
                    .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
            }
            "connection" => {
                for token in value.split(',') {
                    let token = token.trim();
                    if token.eq_ignore_ascii_case("close") {
                        head.wants_close = true;
                    } else if token.eq_ignore_ascii_case("keep-alive") {
                        head.wants_keep_alive = true;
                    }
                }
            }
            "expect" => head.expect_continue = value.eq_ignore_ascii_case("100-continue"),
            _ => {}
        }
    }
    head.body = match (transfer_encoding, content_length) {
        // Both framings at once is a smuggling vector: reject (RFC 9112 section 6.1).
        (true, Some(_)) => return Err(ReadError::Bad(400)),
        (true, None) if chunked => BodyFraming::Chunked,
        (true, None) => return Err(ReadError::Bad(501)),
        (false, Some(0)) | (false, None) => BodyFraming::None,
        (false, Some(n)) => BodyFraming::Length(n),
    };
    Ok(Some(head))
}

/// Reads and discards exactly `n` bytes.
fn skip<R: BufRead>(r: &mut R, n: u64) -> Result<(), ReadError> {
    let copied = io::copy(&mut r.by_ref().take(n), &mut io::sink())?;
    if copied < n {
        return Err(ReadError::Io);
    }
    Ok(())
}

/// Reads and discards the request body framed as `framing`.
pub(crate) fn read_body<R: BufRead>(r: &mut R, framing: BodyFraming) -> Result<(), ReadError> {
    match framing {
        BodyFraming::None => Ok(()),
        BodyFraming::Length(n) => skip(r, n),
        BodyFraming::Chunked => {
            let mut line = Vec::with_capacity(64);
            loop {
                if read_line(r, &mut line, MAX_CHUNK_LINE_BYTES, 400)? == 0 {
                    return Err(ReadError::Io);
                }
                let size_field = line.split(|&c| c == b';').next().unwrap_or(&[]);
                let size_text = String::from_utf8_lossy(size_field);
                let size_text = size_text.trim();
                if size_text.is_empty() || size_text.len() > 15 {
                    return Err(ReadError::Bad(400));
                }
                let size = u64::from_str_radix(size_text, 16).map_err(|_| ReadError::Bad(400))?;
                if size == 0 {
                    // Trailer section, ended by an empty line.
                    loop {
                        if read_line(r, &mut line, MAX_CHUNK_LINE_BYTES, 400)? == 0 {
                            return Err(ReadError::Io);
                        }
                        if line.is_empty() {
                            return Ok(());
                        }
                    }
                }
                skip(r, size)?;
                if read_line(r, &mut line, 2, 400)? == 0 || !line.is_empty() {
                    return Err(ReadError::Bad(400));
                }
            }
        }
    }
}

/// The reason phrase for a code: the `http` crate's table of registered names (the same
/// as the built-in server's); clients must not depend on it (RFC 9112 section 4), so
/// unknown codes get a neutral word.
pub(crate) fn reason(code: u16) -> &'static str {
    http::StatusCode::from_u16(code)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Status")
}

/// The body every 200 carries: `len` bytes cycling through `a..z`, so a client test can
/// check it received exactly the right bytes (not merely the right count).
pub fn body_bytes(len: usize) -> Vec<u8> {
    (0..len).map(|i| b'a' + (i % 26) as u8).collect()
}

/// A complete error response for a bad request; the connection closes after it.
pub(crate) fn error_response(code: u16) -> Vec<u8> {
    let body = format!("{code} {}\n", reason(code));
    format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        reason(code),
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn head(raw: &str) -> Result<Option<RequestHead>, ReadError> {
        read_head(&mut Cursor::new(raw.as_bytes().to_vec()))
    }

    fn bad(raw: &str) -> Option<u16> {
        match head(raw) {
            Err(ReadError::Bad(code)) => Some(code),
            _ => None,
        }
    }

    #[test]
    fn parses_a_simple_get() {
        let h = head("GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap().unwrap();
        assert!(h.http11 && !h.is_head && h.client_keeps_alive());
        assert_eq!(h.body, BodyFraming::None);
    }

    #[test]
    fn persistence_defaults_follow_the_version() {
        let h = head("GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!h.client_keeps_alive());
        let h = head("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.client_keeps_alive());
        let h = head("HEAD / HTTP/1.1\r\nConnection: foo, close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.is_head && !h.client_keeps_alive());
    }

    #[test]
    fn clean_eof_between_requests_is_none() {
        assert!(matches!(head(""), Ok(None)));
        assert!(matches!(head("GET / HTTP/1.1\r\n"), Err(ReadError::Io)));
    }

    #[test]
    fn rejects_bad_requests_with_the_right_status() {
        assert_eq!(bad("GARBAGE\r\n\r\n"), Some(400));
        assert_eq!(bad("GET / HTTP/2.0\r\n\r\n"), Some(505));
        assert_eq!(bad("GET / HTTP/1.1\r\nNoColon\r\n\r\n"), Some(400));
        assert_eq!(bad("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n"), Some(400));
        assert_eq!(bad("GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n"), Some(400));
        assert_eq!(
            bad("GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            Some(400)
        );
        assert_eq!(
            bad("GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"),
            Some(400)
        );
        assert_eq!(
            bad("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"),
            Some(400)
        );
        assert_eq!(
            bad("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"),
            Some(501)
        );
        let huge = format!(
            "GET / HTTP/1.1\r\nX: {}\r\n\r\n",
            "a".repeat(MAX_HEAD_BYTES)
        );
        assert_eq!(bad(&huge), Some(431));
    }

    #[test]
    fn identical_duplicate_content_lengths_are_accepted() {
        let h = head("POST / HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.body, BodyFraming::Length(3));
    }

    #[test]
    fn chunked_body_is_consumed_exactly() {
        let raw = b"4;ext=1\r\nabcd\r\n2\r\nef\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        let mut r = Cursor::new(raw.to_vec());
        read_body(&mut r, BodyFraming::Chunked).unwrap();
        let mut rest = String::new();
        r.read_to_string(&mut rest).unwrap();
        assert_eq!(rest, "NEXT");
        let mut r = Cursor::new(b"zz\r\n".to_vec());
        assert!(matches!(
            read_body(&mut r, BodyFraming::Chunked),
            Err(ReadError::Bad(400))
        ));
    }

    #[test]
    fn length_body_short_is_an_io_error() {
        let mut r = Cursor::new(b"ab".to_vec());
        assert!(matches!(
            read_body(&mut r, BodyFraming::Length(3)),
            Err(ReadError::Io)
        ));
    }

    #[test]
    fn body_pattern_is_deterministic() {
        assert_eq!(body_bytes(28), b"abcdefghijklmnopqrstuvwxyzab".to_vec());
    }
}
