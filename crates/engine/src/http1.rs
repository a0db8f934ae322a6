//! HTTP/1.1 response framing, incremental and allocation-free in steady state.
//!
//! The worker reads whatever the socket has into a shared scratch buffer and pushes it
//! here; [`ResponseReader`] keeps only the bytes of a header block split across reads
//! (its `carry`, reused across responses). Bodies are counted, and copied only when the
//! request source asked to see them. Framing follows RFC 9112 section 6.3: HEAD, 1xx,
//! 204 and 304 have no body; chunked wins over Content-Length; otherwise Content-Length;
//! otherwise the body runs to the end of the connection. No pipelining: a response that
//! is followed by more bytes makes the connection unusable.

use std::mem::MaybeUninit;

use thiserror::Error;

use crate::decode::SeenCoding;
use crate::ErrorKind;

/// Largest header block (status line, headers, final blank line) accepted; bigger is
/// [`FrameError::HeadersTooLarge`], so a hostile server cannot make the client buffer
/// without bound. Also bounds the trailer section of a chunked body.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// Headers per response accepted by the parser.
const MAX_HEADERS: usize = 128;

/// Longest chunk-size line (size, extensions) accepted.
const MAX_CHUNK_LINE_BYTES: usize = 4096;

/// Hex digits of a chunk size: 15 keeps the value below 2^60, so no overflow.
const MAX_CHUNK_DIGITS: u8 = 15;

/// Why a response could not be framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum FrameError {
    /// The header block (or the trailers) exceeded [`MAX_HEADER_BYTES`].
    #[error("response header block larger than {MAX_HEADER_BYTES} bytes")]
    HeadersTooLarge,
    /// The status line or a header is not valid HTTP/1.x.
    #[error("invalid status line or header")]
    BadHead,
    /// Content-Length is not a number, or several disagree.
    #[error("invalid Content-Length")]
    BadContentLength,
    /// Chunked framing broken (bad size, missing CRLF, oversized line).
    #[error("invalid chunked framing")]
    BadChunk,
    /// `101 Switching Protocols`: this client never asks to upgrade.
    #[error("unexpected 101 Switching Protocols")]
    UnexpectedUpgrade,
    /// The connection ended before the response was complete; `any_bytes` says whether
    /// any byte of it had arrived (a kept-alive connection closed while idle has none).
    #[error("connection closed before the response was complete")]
    Closed {
        /// Whether any byte of the response had been received.
        any_bytes: bool,
    },
}

impl FrameError {
    /// The sample error this becomes.
    pub fn kind(self) -> ErrorKind {
        match self {
            FrameError::Closed { .. } => ErrorKind::Closed,
            _ => ErrorKind::Malformed,
        }
    }
}

/// A complete response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    /// Final status (interim 1xx responses are skipped).
    pub status: u16,
    /// Whether the connection may carry another request: HTTP/1.1 without
    /// `Connection: close`, or HTTP/1.0 with `Connection: keep-alive`, and a body not
    /// delimited by the close.
    pub keep_alive: bool,
    /// Bytes read for this response, interim responses and framing included.
    pub wire_bytes: u64,
    /// Decoded body bytes.
    pub body_bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Reading hex digits of a chunk size.
    Size { value: u64, digits: u8 },
    /// After the digits: whitespace or `;extension` up to CR.
    Ext { value: u64 },
    /// Expecting LF after the size line's CR.
    SizeLf { value: u64 },
    /// Expecting CR after chunk data.
    DataCr,
    /// Expecting LF after chunk data.
    DataLf,
    /// At the start of a trailer line (or the final empty line).
    TrailerStart,
    /// Inside a trailer field line.
    TrailerLine,
    /// Expecting LF after a trailer line's CR.
    TrailerLineLf,
    /// Expecting the final LF.
    EndLf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Length {
        remaining: u64,
    },
    /// Chunk framing, read byte by byte.
    Chunked(Chunk),
    /// Inside chunk data, consumed in bulk.
    ChunkData {
        remaining: u64,
    },
    UntilClose,
    Done,
}

/// Frames one response at a time from bytes pushed in arbitrary pieces.
#[derive(Debug)]
pub struct ResponseReader {
    state: State,
    head_request: bool,
    status: u16,
    keep_alive: bool,
    wire_bytes: u64,
    body_bytes: u64,
    /// Bytes of the current chunk-size line or trailer section, against their limits.
    line_bytes: usize,
    /// Unparsed bytes of a header block split across reads.
    carry: Vec<u8>,
    /// Bytes that arrived after the response was complete (pipelining is not used, so
    /// these are the server's error; the connection is then not reused).
    trailing_garbage: bool,
    /// The final response's `Content-Encoding`, for `decode` to check.
    content_encoding: SeenCoding,
}

impl Default for ResponseReader {
    fn default() -> Self {
        Self::new()
    }
}

impl ResponseReader {
    /// A reader waiting for the response to a GET-like request.
    pub fn new() -> Self {
        ResponseReader {
            state: State::Head,
            head_request: false,
            status: 0,
            keep_alive: true,
            wire_bytes: 0,
            body_bytes: 0,
            line_bytes: 0,
            carry: Vec::new(),
            trailing_garbage: false,
            content_encoding: SeenCoding::Identity,
        }
    }

    /// Prepares for the response to a new request; `head_request` when it was a HEAD
    /// (whose response has no body whatever its headers say). Keeps the carry buffer's
    /// capacity.
    pub fn start(&mut self, head_request: bool) {
        self.state = State::Head;
        self.head_request = head_request;
        self.status = 0;
        self.keep_alive = true;
        self.wire_bytes = 0;
        self.body_bytes = 0;
        self.line_bytes = 0;
        self.carry.clear();
        self.trailing_garbage = false;
        self.content_encoding = SeenCoding::Identity;
    }

    /// Whether any byte of the current response has arrived.
    pub fn any_bytes(&self) -> bool {
        self.wire_bytes != 0 || !self.carry.is_empty()
    }

    /// Status of the current response once its head was parsed, else 0.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Bytes received so far for the current response.
    pub fn wire_bytes(&self) -> u64 {
        self.wire_bytes + self.carry.len() as u64
    }

    /// Decoded body bytes so far.
    pub fn body_bytes(&self) -> u64 {
        self.body_bytes
    }

    /// The final response's `Content-Encoding` (identity until its head is parsed).
    pub fn content_encoding(&self) -> SeenCoding {
        self.content_encoding
    }

    /// Feeds the next bytes from the wire. `Ok(Some(..))` once the response is complete;
    /// `body`, when given, receives the decoded body.
    pub fn push(
        &mut self,
        data: &[u8],
        body: Option<&mut Vec<u8>>,
    ) -> Result<Option<Response>, FrameError> {
        if self.state == State::Done {
            if !data.is_empty() {
                self.trailing_garbage = true;
            }
            return Ok(None);
        }
        if self.carry.is_empty() {
            let (used, done) = self.feed(data, body)?;
            if done.is_none() && used < data.len() {
                self.carry.extend_from_slice(&data[used..]);
            } else if done.is_some() && used < data.len() {
                self.trailing_garbage = true;
            }
            Ok(done.map(|r| self.finish(r)))
        } else {
            let mut carry = std::mem::take(&mut self.carry);
            carry.extend_from_slice(data);
            let result = self.feed(&carry, body);
            let outcome = match result {
                Ok((used, done)) => {
                    if done.is_some() && used < carry.len() {
                        self.trailing_garbage = true;
                        carry.clear();
                    } else {
                        carry.drain(..used);
                    }
                    Ok(done)
                }
                Err(e) => {
                    carry.clear();
                    Err(e)
                }
            };
            self.carry = carry;
            outcome.map(|d| d.map(|r| self.finish(r)))
        }
    }

    fn finish(&self, mut r: Response) -> Response {
        if self.trailing_garbage {
            r.keep_alive = false;
        }
        r
    }

    /// The peer closed the connection (read returned 0). Completes a close-delimited
    /// body; anything else is [`FrameError::Closed`].
    pub fn eof(&mut self) -> Result<Response, FrameError> {
        match self.state {
            State::UntilClose => {
                self.state = State::Done;
                Ok(Response {
                    status: self.status,
                    keep_alive: false,
                    wire_bytes: self.wire_bytes,
                    body_bytes: self.body_bytes,
                })
            }
            _ => Err(FrameError::Closed {
                any_bytes: self.any_bytes(),
            }),
        }
    }

    fn response(&mut self) -> Response {
        self.state = State::Done;
        Response {
            status: self.status,
            keep_alive: self.keep_alive,
            wire_bytes: self.wire_bytes,
            body_bytes: self.body_bytes,
        }
    }

    /// Consumes from `input`; returns how many bytes were used and the response if it
    /// completed. Only an incomplete header block leaves bytes unused.
    fn feed(
        &mut self,
        input: &[u8],
        mut body: Option<&mut Vec<u8>>,
    ) -> Result<(usize, Option<Response>), FrameError> {
        let mut pos = 0usize;
        loop {
            match self.state {
                State::Done => return Ok((pos, None)),
                State::Head => {
                    let rest = &input[pos..];
                    if rest.is_empty() {
                        return Ok((pos, None));
                    }
                    match self.parse_head(rest)? {
                        None => {
                            if rest.len() >= MAX_HEADER_BYTES {
                                return Err(FrameError::HeadersTooLarge);
                            }
                            return Ok((pos, None));
                        }
                        Some(n) => {
                            pos += n;
                            self.wire_bytes += n as u64;
                            if self.state == State::Done {
                                return Ok((pos, Some(self.response())));
                            }
                        }
                    }
                }
                State::Length { remaining } => {
                    let take = self.take_body(&input[pos..], remaining, body.as_deref_mut());
                    pos += take as usize;
                    let remaining = remaining - take;
                    if remaining == 0 {
                        return Ok((pos, Some(self.response())));
                    }
                    self.state = State::Length { remaining };
                    return Ok((pos, None));
                }
                State::UntilClose => {
                    self.take_body(&input[pos..], u64::MAX, body.as_deref_mut());
                    return Ok((input.len(), None));
                }
                State::ChunkData { remaining } => {
                    let take = self.take_body(&input[pos..], remaining, body.as_deref_mut());
                    pos += take as usize;
                    let remaining = remaining - take;
                    if remaining != 0 {
                        self.state = State::ChunkData { remaining };
                        return Ok((pos, None));
                    }
                    self.state = State::Chunked(Chunk::DataCr);
                }
                State::Chunked(chunk) => {
                    if pos == input.len() {
                        return Ok((pos, None));
                    }
                    let byte = input[pos];
                    pos += 1;
                    self.wire_bytes += 1;
                    match self.chunk_byte(chunk, byte)? {
                        Step::Framing(c) => self.state = State::Chunked(c),
                        Step::Data(remaining) => self.state = State::ChunkData { remaining },
                        Step::End => return Ok((pos, Some(self.response()))),
                    }
                }
            }
        }
    }

    /// Takes up to `remaining` body bytes from the front of `input` (copied into
    /// `body` when the caller keeps it) and returns how many it took.
    #[inline]
    fn take_body(&mut self, input: &[u8], remaining: u64, body: Option<&mut Vec<u8>>) -> u64 {
        let take = remaining.min(input.len() as u64);
        if let Some(b) = body {
            b.extend_from_slice(&input[..take as usize]);
        }
        self.wire_bytes += take;
        self.body_bytes += take;
        take
    }

    /// One byte of chunk framing.
    fn chunk_byte(&mut self, chunk: Chunk, byte: u8) -> Result<Step, FrameError> {
        let next = match chunk {
            Chunk::Size { value, digits } => match (hex(byte), byte) {
                (Some(d), _) if digits < MAX_CHUNK_DIGITS => Chunk::Size {
                    value: value << 4 | d,
                    digits: digits + 1,
                },
                (Some(_), _) => return Err(FrameError::BadChunk),
                (None, _) if digits == 0 => return Err(FrameError::BadChunk),
                (None, b'\r') => Chunk::SizeLf { value },
                // Optional whitespace, then `;name=value` extensions (ignored).
                (None, b';' | b' ' | b'\t') => {
                    self.line_bytes = digits as usize + 1;
                    Chunk::Ext { value }
                }
                (None, _) => return Err(FrameError::BadChunk),
            },
            Chunk::Ext { value } => {
                self.line_bytes += 1;
                if self.line_bytes > MAX_CHUNK_LINE_BYTES {
                    return Err(FrameError::BadChunk);
                }
                match byte {
                    b'\r' => Chunk::SizeLf { value },
                    b'\t' | 0x20..=0x7e | 0x80..=0xff => Chunk::Ext { value },
                    _ => return Err(FrameError::BadChunk),
                }
            }
            Chunk::SizeLf { value } => {
                if byte != b'\n' {
                    return Err(FrameError::BadChunk);
                }
                if value != 0 {
                    return Ok(Step::Data(value));
                }
                self.line_bytes = 0;
                Chunk::TrailerStart
            }
            Chunk::DataCr => expect(byte, b'\r', Chunk::DataLf)?,
            Chunk::DataLf => expect(
                byte,
                b'\n',
                Chunk::Size {
                    value: 0,
                    digits: 0,
                },
            )?,
            Chunk::TrailerStart | Chunk::TrailerLine => {
                self.count_trailer()?;
                // A CR at the start of a trailer line ends the trailers; elsewhere it
                // ends the line.
                match (byte, chunk) {
                    (b'\r', Chunk::TrailerStart) => Chunk::EndLf,
                    (b'\r', _) => Chunk::TrailerLineLf,
                    _ => Chunk::TrailerLine,
                }
            }
            Chunk::TrailerLineLf => {
                self.count_trailer()?;
                expect(byte, b'\n', Chunk::TrailerStart)?
            }
            Chunk::EndLf => {
                expect(byte, b'\n', Chunk::EndLf)?;
                return Ok(Step::End);
            }
        };
        Ok(Step::Framing(next))
    }

    fn count_trailer(&mut self) -> Result<(), FrameError> {
        self.line_bytes += 1;
        if self.line_bytes > MAX_HEADER_BYTES {
            return Err(FrameError::HeadersTooLarge);
        }
        Ok(())
    }

    /// Parses a complete header block at the start of `rest`, sets the framing state, and
    /// returns its length; `None` when the block is still incomplete.
    fn parse_head(&mut self, rest: &[u8]) -> Result<Option<usize>, FrameError> {
        // Uninitialised header slots: zeroing 128 of them (4 KiB) per response cost more
        // instructions than parsing a typical head (measured with callgrind).
        let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut []);
        let n = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut resp,
            rest,
            &mut headers,
        ) {
            Ok(httparse::Status::Partial) => return Ok(None),
            Ok(httparse::Status::Complete(n)) => n,
            Err(httparse::Error::TooManyHeaders) => return Err(FrameError::HeadersTooLarge),
            Err(_) => return Err(FrameError::BadHead),
        };
        if n > MAX_HEADER_BYTES {
            return Err(FrameError::HeadersTooLarge);
        }
        let status = resp.code.ok_or(FrameError::BadHead)?;
        if status == 101 {
            return Err(FrameError::UnexpectedUpgrade);
        }
        if (100..200).contains(&status) {
            // Interim response (100 Continue, 103 Early Hints): skip, keep reading.
            return Ok(Some(n));
        }
        self.status = status;
        let http11 = resp.version == Some(1);
        let mut close = false;
        let mut keep_alive_token = false;
        let mut chunked = false;
        let mut transfer_encoding = false;
        let mut content_length: Option<u64> = None;
        for h in resp.headers.iter() {
            if h.name.eq_ignore_ascii_case("connection") {
                for token in h.value.split(|&b| b == b',') {
                    let token = trim(token);
                    close |= token.eq_ignore_ascii_case(b"close");
                    keep_alive_token |= token.eq_ignore_ascii_case(b"keep-alive");
                }
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                transfer_encoding = true;
                // Chunked must be the final coding for the body to be self-delimited.
                let last = h.value.split(|&b| b == b',').next_back().map(trim);
                chunked = last.is_some_and(|t| t.eq_ignore_ascii_case(b"chunked"));
            } else if h.name.eq_ignore_ascii_case("content-encoding") {
                self.content_encoding = SeenCoding::from_header(h.value);
            } else if h.name.eq_ignore_ascii_case("content-length") {
                for part in h.value.split(|&b| b == b',') {
                    let v = parse_decimal(trim(part)).ok_or(FrameError::BadContentLength)?;
                    if content_length.is_some_and(|c| c != v) {
                        return Err(FrameError::BadContentLength);
                    }
                    content_length = Some(v);
                }
            }
        }
        self.keep_alive = if http11 {
            !close
        } else {
            keep_alive_token && !close
        };
        let no_body = self.head_request || status == 204 || status == 304;
        self.state = if no_body {
            State::Done
        } else if transfer_encoding {
            if chunked {
                State::Chunked(Chunk::Size {
                    value: 0,
                    digits: 0,
                })
            } else {
                self.keep_alive = false;
                State::UntilClose
            }
        } else if let Some(len) = content_length {
            if len == 0 {
                State::Done
            } else {
                State::Length { remaining: len }
            }
        } else {
            self.keep_alive = false;
            State::UntilClose
        };
        Ok(Some(n))
    }
}

/// What one byte of chunk framing leads to.
enum Step {
    /// More framing.
    Framing(Chunk),
    /// A chunk of this many data bytes starts.
    Data(u64),
    /// The last chunk and the trailers are complete.
    End,
}

/// The framing byte `want` moves the chunk state to `next`; any other is malformed.
fn expect(byte: u8, want: u8, next: Chunk) -> Result<Chunk, FrameError> {
    if byte == want {
        Ok(next)
    } else {
        Err(FrameError::BadChunk)
    }
}

fn hex(b: u8) -> Option<u64> {
    match b {
        b'0'..=b'9' => Some((b - b'0') as u64),
        b'a'..=b'f' => Some((b - b'a' + 10) as u64),
        b'A'..=b'F' => Some((b - b'A' + 10) as u64),
        _ => None,
    }
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

fn parse_decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (b - b'0') as u64;
    }
    Some(v)
}

#[cfg(test)]
#[path = "http1_tests.rs"]
mod tests;
