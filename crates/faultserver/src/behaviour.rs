//! What the server does: the public [`Behaviour`] values and the bytes of each answer.
//!
//! A behaviour is either an *answer* (how one request is answered: `Ok`, `Chunked`,
//! `Malformed`, ...) or a *policy* (what happens around answers: `Slow`, `CloseAfter`,
//! `TokenBucket`, `Dies`, ...). [`Behaviour::All`] composes one answer with any policies,
//! so "a 2 KiB answer, slow, closing after 3 requests" is one value rather than one
//! variant per combination. A behaviour is resolved once, at start,
//! into a [`Script`] that the connection threads read.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::http::{body_bytes, reason};

/// Body length of the 200 answer used when a behaviour names only policies.
pub const DEFAULT_BODY_LEN: usize = 64;

/// How the server misbehaves. Every answer is HEAD-correct: a HEAD request gets the
/// headers the GET would get and no body, in every mode.
#[derive(Debug, Clone, PartialEq)]
pub enum Behaviour {
    /// 200 with `body_len` bytes of [`body_bytes`]; `keep_alive: false` answers
    /// `Connection: close` and closes after every response.
    Ok {
        /// Body length in bytes.
        body_len: usize,
        /// Keep the connection open between requests (if the client wants to).
        keep_alive: bool,
    },
    /// 200 with `Transfer-Encoding: chunked`, one chunk per entry of `chunk_lens` (zero
    /// entries are rejected at start, since a zero-size chunk ends the body). Sent to
    /// HTTP/1.0 clients too: this is a test server, and that is one more fault.
    Chunked {
        /// Size of each data chunk, in bytes; the body is `body_bytes(sum)`.
        chunk_lens: Vec<usize>,
        /// Add chunk extensions (`;name=value`) that a client must skip.
        extensions: bool,
        /// Send trailer fields after the last chunk.
        trailers: bool,
    },
    /// Interim (1xx) responses, in order, before a default 200. Clients must accept them
    /// even unasked (RFC 9110 section 15.2). 101 is rejected: it switches protocols.
    Interim(Vec<u16>),
    /// 204 with no body and no Content-Length.
    NoContent,
    /// 304 with no body but with the `Content-Length` the 200 would have had (allowed by
    /// RFC 9110 section 8.6): a client that reads that many bytes hangs, which is the test.
    NotModified,
    /// 200 with no Content-Length and no chunking: the body ends when the server closes.
    CloseDelimited {
        /// Body length in bytes.
        body_len: usize,
    },
    /// Read the request, then send only the first `after_bytes` bytes of the default 200
    /// (0: nothing) and go silent until the client closes or the server shuts down.
    Stall {
        /// Response bytes written before stalling.
        after_bytes: usize,
    },
    /// Abort connections with a TCP RST (SO_LINGER 0, then close) on the request after
    /// the first `after_requests` on that connection.
    Reset {
        /// Requests answered normally on each connection before the reset.
        after_requests: u64,
        /// Send the response head and half the body before the RST, instead of nothing.
        mid_response: bool,
    },
    /// Headers with `Content-Length: 1000`, then 10 body bytes, then close.
    CloseMidBody,
    /// A response that is not valid HTTP/1.1; the connection closes after it.
    Malformed(MalformedKind),
    /// Wait `delay` before answering each request.
    Slow {
        /// Wait before each answer.
        delay: Duration,
    },
    /// Answer with this status (200..=599) and a short text body (none for 204 and 304).
    Status(u16),
    /// Close each connection after `requests` requests, as servers' `keepalive_requests`
    /// limits do.
    CloseAfter {
        /// Requests per connection (at least 1).
        requests: u64,
        /// Say `Connection: close` on the last response (nginx does); `false` closes
        /// without warning, so a client's next request on it meets EOF.
        announce: bool,
    },
    /// Keep connections open even when the client sent `Connection: close` (and do not
    /// echo it): the client must close by itself.
    IgnoreConnectionClose,
    /// A server with a set capacity: requests beyond the bucket's tokens wait (queued, not
    /// refused) until a token is free, so throughput saturates at `rate_per_s`.
    TokenBucket {
        /// Sustained service rate, requests per second (> 0).
        rate_per_s: f64,
        /// Requests that may be served back to back after an idle period (>= 1).
        burst: u32,
    },
    /// After `after_requests` requests in total the server stops listening and drops
    /// every connection, like a crashed process. Later requests are never answered.
    Dies {
        /// Requests answered before dying.
        after_requests: u64,
    },
    /// A server trying to script whoever reads its answers: status 500 with a reason
    /// phrase holding `<script>`, `</style>`, a `javascript:` link and terminal escape
    /// sequences (CSI colour, an OSC 8 hyperlink, BEL), header values and a body of
    /// the same, and with `huge_reason` a reason phrase of 1 MB. Reports must show
    /// none of it as markup or escapes (docs/methodology.md, "Nothing silently
    /// dropped" on errors by kind).
    Hostile {
        /// Make the reason phrase 1 MB long.
        huge_reason: bool,
    },
    /// Several behaviours at once: at most one answer plus any policies.
    All(Vec<Behaviour>),
}

/// The payload of [`Behaviour::Hostile`]: markup that would run in an HTML page (it
/// sets `document.title` and asks for an image from a closed loopback port), a
/// `javascript:` link, a style break-out, and terminal escapes (colour, an OSC 8
/// hyperlink, BEL, clear screen).
pub const HOSTILE_PAYLOAD: &str = "</style></script><script>document.title='pwned';\
    new Image().src='http://127.0.0.1:9/leak'</script><img src=x onerror=\"document.title='pwned'\">\
    <a href=\"javascript:document.title='pwned'\">x</a> [x](javascript:alert(1)) \
    \x1b[31mred\x1b]8;;http://127.0.0.1:9/\x07link\x1b]8;;\x07\x07\x1b[2J";

/// The kinds of invalid response [`Behaviour::Malformed`] can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MalformedKind {
    /// A status line that is not `HTTP/1.x NNN reason`.
    GarbageStatusLine,
    /// A header line without a colon.
    BadHeader,
    /// `Content-Length: -5`.
    NegativeContentLength,
    /// A Content-Length that overflows 64 bits.
    HugeContentLength,
    /// Two Content-Length headers that disagree (RFC 9112 section 6.3: unrecoverable).
    ConflictingContentLength,
    /// Chunked encoding with a chunk size that is not hexadecimal.
    BadChunkSize,
    /// About 100 KiB of header fields before the body, beyond common client limits.
    OversizedHeaders,
}

impl MalformedKind {
    /// Every kind, for tests and the CLI help.
    pub const ALL: [MalformedKind; 7] = [
        MalformedKind::GarbageStatusLine,
        MalformedKind::BadHeader,
        MalformedKind::NegativeContentLength,
        MalformedKind::HugeContentLength,
        MalformedKind::ConflictingContentLength,
        MalformedKind::BadChunkSize,
        MalformedKind::OversizedHeaders,
    ];

    /// Stable kebab-case name, as parsed by `FromStr`.
    pub fn name(self) -> &'static str {
        match self {
            MalformedKind::GarbageStatusLine => "garbage-status-line",
            MalformedKind::BadHeader => "bad-header",
            MalformedKind::NegativeContentLength => "negative-content-length",
            MalformedKind::HugeContentLength => "huge-content-length",
            MalformedKind::ConflictingContentLength => "conflicting-content-length",
            MalformedKind::BadChunkSize => "bad-chunk-size",
            MalformedKind::OversizedHeaders => "oversized-headers",
        }
    }
}

/// Why a behaviour cannot be run or parsed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BehaviourError {
    /// `All` names two answers; the server would not know which to send.
    #[error("two answers in one behaviour ({0} and {1}); compose one answer with policies")]
    TwoAnswers(&'static str, &'static str),
    /// A numeric field is out of its range.
    #[error("{0}")]
    OutOfRange(&'static str),
    /// The text form did not parse.
    #[error("cannot parse behaviour `{0}` (try ok:N, chunked:N,N, interim:100,103, no-content, not-modified, close-delimited:N, stall:N, reset:N[:mid], close-mid-body, malformed:KIND, slow:MS, status:CODE, close-after:N[:silent], ignore-close, hostile[:huge], bucket:RATE:BURST, dies:N, joined by +)")]
    Parse(String),
}

/// How one request is answered (the answer half of a behaviour).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    Ok {
        body_len: usize,
    },
    Chunked {
        chunk_lens: Vec<usize>,
        extensions: bool,
        trailers: bool,
    },
    Interim(Vec<u16>),
    NoContent,
    NotModified,
    CloseDelimited {
        body_len: usize,
    },
    Stall {
        after_bytes: usize,
    },
    CloseMidBody,
    Malformed(MalformedKind),
    Status(u16),
    Hostile {
        huge_reason: bool,
    },
}

/// A behaviour resolved into one answer and the policies around it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Script {
    pub answer: Answer,
    /// `Ok { keep_alive: false }`: close after every response.
    pub always_close: bool,
    pub reset: Option<(u64, bool)>,
    pub delay: Option<Duration>,
    pub close_after: Option<(u64, bool)>,
    pub ignore_connection_close: bool,
    /// (rate per second, burst)
    pub bucket: Option<(f64, u32)>,
    pub dies_after: Option<u64>,
}

impl Script {
    /// Resolves and validates a behaviour.
    pub fn resolve(behaviour: &Behaviour) -> Result<Script, BehaviourError> {
        let mut script = Script {
            answer: Answer::Ok {
                body_len: DEFAULT_BODY_LEN,
            },
            always_close: false,
            reset: None,
            delay: None,
            close_after: None,
            ignore_connection_close: false,
            bucket: None,
            dies_after: None,
        };
        let mut answer_name: Option<&'static str> = None;
        script.apply(behaviour, &mut answer_name)?;
        Ok(script)
    }

    fn set_answer(
        &mut self,
        name: &'static str,
        answer: Answer,
        seen: &mut Option<&'static str>,
    ) -> Result<(), BehaviourError> {
        if let Some(previous) = *seen {
            return Err(BehaviourError::TwoAnswers(previous, name));
        }
        *seen = Some(name);
        self.answer = answer;
        Ok(())
    }

    fn apply(
        &mut self,
        b: &Behaviour,
        seen: &mut Option<&'static str>,
    ) -> Result<(), BehaviourError> {
        if let Some((name, answer)) = answer_of(b)? {
            if let Behaviour::Ok { keep_alive, .. } = b {
                self.always_close = !keep_alive;
            }
            return self.set_answer(name, answer, seen);
        }
        match b {
            Behaviour::Reset {
                after_requests,
                mid_response,
            } => self.reset = Some((*after_requests, *mid_response)),
            Behaviour::Slow { delay } => self.delay = Some(*delay),
            Behaviour::CloseAfter { requests, announce } => {
                if *requests == 0 {
                    return Err(BehaviourError::OutOfRange("close-after needs >= 1 request"));
                }
                self.close_after = Some((*requests, *announce));
            }
            Behaviour::IgnoreConnectionClose => self.ignore_connection_close = true,
            Behaviour::TokenBucket { rate_per_s, burst } => {
                if !(rate_per_s.is_finite() && *rate_per_s > 0.0) || *burst == 0 {
                    return Err(BehaviourError::OutOfRange(
                        "token bucket needs rate_per_s > 0 and burst >= 1",
                    ));
                }
                self.bucket = Some((*rate_per_s, *burst));
            }
            Behaviour::Dies { after_requests } => self.dies_after = Some(*after_requests),
            Behaviour::All(parts) => {
                for part in parts {
                    self.apply(part, seen)?;
                }
            }
            // Answers were taken by `answer_of` above.
            _ => {}
        }
        Ok(())
    }
}

/// The answer half of `b` with its name, checked; `None` when `b` is a policy (reset,
/// delay, close-after, ...) or a composition.
fn answer_of(b: &Behaviour) -> Result<Option<(&'static str, Answer)>, BehaviourError> {
    Ok(Some(match b {
        Behaviour::Ok { body_len, .. } => (
            "ok",
            Answer::Ok {
                body_len: *body_len,
            },
        ),
        Behaviour::Chunked {
            chunk_lens,
            extensions,
            trailers,
        } => {
            if chunk_lens.contains(&0) {
                return Err(BehaviourError::OutOfRange(
                    "chunk lengths must be > 0 (a zero chunk ends the body)",
                ));
            }
            (
                "chunked",
                Answer::Chunked {
                    chunk_lens: chunk_lens.clone(),
                    extensions: *extensions,
                    trailers: *trailers,
                },
            )
        }
        Behaviour::Interim(codes) => {
            if codes.iter().any(|&c| !(100..=199).contains(&c) || c == 101) {
                return Err(BehaviourError::OutOfRange(
                    "interim codes must be 1xx other than 101",
                ));
            }
            ("interim", Answer::Interim(codes.clone()))
        }
        Behaviour::NoContent => ("no-content", Answer::NoContent),
        Behaviour::NotModified => ("not-modified", Answer::NotModified),
        Behaviour::CloseDelimited { body_len } => (
            "close-delimited",
            Answer::CloseDelimited {
                body_len: *body_len,
            },
        ),
        Behaviour::Stall { after_bytes } => (
            "stall",
            Answer::Stall {
                after_bytes: *after_bytes,
            },
        ),
        Behaviour::CloseMidBody => ("close-mid-body", Answer::CloseMidBody),
        Behaviour::Malformed(kind) => ("malformed", Answer::Malformed(*kind)),
        Behaviour::Status(code) => {
            if !(200..=599).contains(code) {
                return Err(BehaviourError::OutOfRange("status must be in 200..=599"));
            }
            ("status", Answer::Status(*code))
        }
        Behaviour::Hostile { huge_reason } => (
            "hostile",
            Answer::Hostile {
                huge_reason: *huge_reason,
            },
        ),
        _ => return Ok(None),
    }))
}

impl Behaviour {
    /// Composes two behaviours (see [`Behaviour::All`]).
    pub fn and(self, other: Behaviour) -> Behaviour {
        match self {
            Behaviour::All(mut parts) => {
                parts.push(other);
                Behaviour::All(parts)
            }
            first => Behaviour::All(vec![first, other]),
        }
    }

    /// The default keep-alive 200 with a [`DEFAULT_BODY_LEN`] body.
    pub fn ok() -> Behaviour {
        Behaviour::Ok {
            body_len: DEFAULT_BODY_LEN,
            keep_alive: true,
        }
    }
}

/// What the `Connection` header of a response says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnHeader {
    None,
    Close,
    KeepAlive,
}

impl ConnHeader {
    fn line(self) -> &'static str {
        match self {
            ConnHeader::None => "",
            ConnHeader::Close => "Connection: close\r\n",
            ConnHeader::KeepAlive => "Connection: keep-alive\r\n",
        }
    }
}

/// What the connection does once the reply bytes are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum After {
    /// Follow the keep-alive decision the caller made.
    Persist,
    /// The answer's framing requires closing (close-delimited, broken responses).
    Close,
    /// Go silent until the client leaves or the server shuts down.
    Stall,
}

/// The bytes of one answer and what follows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    pub bytes: Vec<u8>,
    /// Offset where the body starts (= bytes.len() when there is none).
    pub body_start: usize,
    pub after: After,
}

fn head_bytes(code: u16, headers: &str, conn: ConnHeader) -> String {
    format!(
        "HTTP/1.1 {code} {}\r\nServer: volley-faultserver\r\n{headers}{}\r\n",
        reason(code),
        conn.line()
    )
}

fn framed(code: u16, body: &[u8], is_head: bool, conn: ConnHeader) -> Reply {
    let head = head_bytes(
        code,
        &format!(
            "Content-Type: text/plain\r\nContent-Length: {}\r\n",
            body.len()
        ),
        conn,
    );
    with_body(head, body, is_head, After::Persist)
}

/// [`Behaviour::Hostile`]'s reply. Control bytes other than CR/LF go on the wire as
/// they are: what a client does with them is what is tested.
fn hostile(huge_reason: bool, is_head: bool, conn: ConnHeader) -> Reply {
    let reason = if huge_reason {
        let mut r = String::from(HOSTILE_PAYLOAD);
        while r.len() < 1 << 20 {
            r.push_str("A<script>document.title='pwned'</script>");
        }
        r
    } else {
        HOSTILE_PAYLOAD.to_string()
    };
    let body = format!("<html><body>{HOSTILE_PAYLOAD}</body></html>");
    let head = format!(
        "HTTP/1.1 500 {reason}\r\nServer: {HOSTILE_PAYLOAD}\r\nX-Error: {HOSTILE_PAYLOAD}\r\n\
         Link: <javascript:document.title='pwned'>; rel=\"preload\"\r\n\
         Content-Type: text/html\r\nContent-Length: {}\r\n{}\r\n",
        body.len(),
        conn.line()
    );
    with_body(head, body.as_bytes(), is_head, After::Persist)
}

fn with_body(head: String, body: &[u8], is_head: bool, after: After) -> Reply {
    let mut bytes = head.into_bytes();
    let body_start = bytes.len();
    if !is_head {
        bytes.extend_from_slice(body);
    }
    Reply {
        bytes,
        body_start,
        after,
    }
}

/// Builds the reply for one request. `conn` is the keep-alive decision the connection
/// loop made; answers whose framing forces a close override it.
pub(crate) fn build_reply(answer: &Answer, is_head: bool, conn: ConnHeader) -> Reply {
    match answer {
        Answer::Ok { body_len } => framed(200, &body_bytes(*body_len), is_head, conn),
        Answer::Status(code @ (204 | 304)) => Reply {
            bytes: head_bytes(*code, "", conn).into_bytes(),
            body_start: usize::MAX,
            after: After::Persist,
        }
        .fixed_body_start(),
        Answer::Status(code) => {
            let body = format!("status {code}\n");
            framed(*code, body.as_bytes(), is_head, conn)
        }
        Answer::Hostile { huge_reason } => hostile(*huge_reason, is_head, conn),
        Answer::NoContent => Reply {
            bytes: head_bytes(204, "", conn).into_bytes(),
            body_start: usize::MAX,
            after: After::Persist,
        }
        .fixed_body_start(),
        Answer::NotModified => Reply {
            bytes: head_bytes(
                304,
                &format!("ETag: \"v1\"\r\nContent-Length: {DEFAULT_BODY_LEN}\r\n"),
                conn,
            )
            .into_bytes(),
            body_start: usize::MAX,
            after: After::Persist,
        }
        .fixed_body_start(),
        Answer::Interim(codes) => interim_then_ok(codes, is_head, conn),
        Answer::Chunked {
            chunk_lens,
            extensions,
            trailers,
        } => chunked(chunk_lens, *extensions, *trailers, is_head, conn),
        Answer::CloseDelimited { body_len } => {
            let head = head_bytes(200, "Content-Type: text/plain\r\n", ConnHeader::Close);
            with_body(head, &body_bytes(*body_len), is_head, After::Close)
        }
        Answer::Stall { .. } => {
            let mut reply = framed(200, &body_bytes(DEFAULT_BODY_LEN), is_head, conn);
            reply.after = After::Stall;
            reply
        }
        Answer::CloseMidBody => {
            // No Connection header: a crashing server does not announce its exit.
            let head = head_bytes(
                200,
                "Content-Type: text/plain\r\nContent-Length: 1000\r\n",
                ConnHeader::None,
            );
            with_body(head, &body_bytes(10), is_head, After::Close)
        }
        Answer::Malformed(kind) => malformed(*kind, is_head),
    }
}

/// The interim responses `codes` (a 103 with a Link field), then the default 200.
fn interim_then_ok(codes: &[u16], is_head: bool, conn: ConnHeader) -> Reply {
    let mut interim = String::new();
    for &code in codes {
        interim.push_str(&format!("HTTP/1.1 {code} {}\r\n", reason(code)));
        if code == 103 {
            interim.push_str("Link: </style.css>; rel=preload; as=style\r\n");
        }
        interim.push_str("\r\n");
    }
    let mut reply = framed(200, &body_bytes(DEFAULT_BODY_LEN), is_head, conn);
    let mut bytes = interim.into_bytes();
    reply.body_start += bytes.len();
    bytes.extend_from_slice(&reply.bytes);
    reply.bytes = bytes;
    reply
}

/// A chunked 200, one chunk per entry of `chunk_lens`, with extensions and trailers when
/// asked.
fn chunked(
    chunk_lens: &[usize],
    extensions: bool,
    trailers: bool,
    is_head: bool,
    conn: ConnHeader,
) -> Reply {
    let total: usize = chunk_lens.iter().sum();
    let trailer_decl = if trailers {
        "Trailer: X-Body-Len, X-Checksum\r\n"
    } else {
        ""
    };
    let head = head_bytes(
        200,
        &format!("Content-Type: text/plain\r\nTransfer-Encoding: chunked\r\n{trailer_decl}"),
        conn,
    );
    let data = body_bytes(total);
    let mut body = Vec::with_capacity(total + 32 * chunk_lens.len() + 64);
    let mut offset = 0;
    for (i, &len) in chunk_lens.iter().enumerate() {
        // Alternate hex case and add quoted and token extensions so a client's
        // size parser meets both.
        let size = if i % 2 == 0 {
            format!("{len:x}")
        } else {
            format!("{len:X}")
        };
        let ext = match (extensions, i % 2) {
            (false, _) => String::new(),
            (true, 0) => format!(";chunk={i}"),
            (true, _) => ";note=\"a;b\"".to_string(),
        };
        body.extend_from_slice(format!("{size}{ext}\r\n").as_bytes());
        body.extend_from_slice(&data[offset..offset + len]);
        body.extend_from_slice(b"\r\n");
        offset += len;
    }
    body.extend_from_slice(if extensions { b"0;last\r\n" } else { b"0\r\n" });
    if trailers {
        body.extend_from_slice(format!("X-Body-Len: {total}\r\nX-Checksum: fault\r\n").as_bytes());
    }
    body.extend_from_slice(b"\r\n");
    with_body(head, &body, is_head, After::Persist)
}

impl Reply {
    /// For bodiless statuses the body starts at the end.
    fn fixed_body_start(mut self) -> Reply {
        self.body_start = self.bytes.len();
        self
    }
}

fn malformed(kind: MalformedKind, is_head: bool) -> Reply {
    let close = ConnHeader::Close;
    let body = body_bytes(16);
    let (head, body): (String, Vec<u8>) = match kind {
        MalformedKind::GarbageStatusLine => (
            "HTTP/1.1 2x0 NOT A STATUS\r\nContent-Length: 16\r\n\r\n".to_string(),
            body,
        ),
        MalformedKind::BadHeader => (
            head_bytes(
                200,
                "This header has no colon\r\nContent-Length: 16\r\n",
                close,
            ),
            body,
        ),
        MalformedKind::NegativeContentLength => {
            (head_bytes(200, "Content-Length: -5\r\n", close), body)
        }
        MalformedKind::HugeContentLength => (
            head_bytes(200, "Content-Length: 99999999999999999999999\r\n", close),
            body,
        ),
        MalformedKind::ConflictingContentLength => (
            head_bytes(200, "Content-Length: 16\r\nContent-Length: 20\r\n", close),
            body,
        ),
        MalformedKind::BadChunkSize => (
            head_bytes(200, "Transfer-Encoding: chunked\r\n", close),
            b"zz\r\nabcdefgh\r\n0\r\n\r\n".to_vec(),
        ),
        MalformedKind::OversizedHeaders => {
            let mut filler = String::with_capacity(OVERSIZED_HEADER_BYTES + 128);
            let mut i = 0;
            while filler.len() < OVERSIZED_HEADER_BYTES {
                filler.push_str(&format!("X-Filler-{i}: {}\r\n", "f".repeat(100)));
                i += 1;
            }
            filler.push_str("Content-Length: 16\r\n");
            (head_bytes(200, &filler, close), body)
        }
    };
    with_body(head, &body, is_head, After::Close)
}

/// Header bytes sent by [`MalformedKind::OversizedHeaders`].
pub const OVERSIZED_HEADER_BYTES: usize = 100 * 1024;

impl fmt::Display for MalformedKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for MalformedKind {
    type Err = BehaviourError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MalformedKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| BehaviourError::Parse(s.to_string()))
    }
}

/// Parses the text form used by the `volley-faultserver` binary, e.g.
/// `ok:1024+slow:20+close-after:3`.
impl FromStr for Behaviour {
    type Err = BehaviourError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = s.split('+').collect();
        if parts.len() > 1 {
            let all = parts
                .into_iter()
                .map(str::parse)
                .collect::<Result<Vec<Behaviour>, _>>()?;
            let all = Behaviour::All(all);
            Script::resolve(&all)?;
            return Ok(all);
        }
        let err = || BehaviourError::Parse(s.to_string());
        let mut fields = s.split(':');
        let name = fields.next().unwrap_or_default();
        let args: Vec<&str> = fields.collect();
        let num = |i: usize, default: u64| -> Result<u64, BehaviourError> {
            match args.get(i) {
                None => Ok(default),
                Some(a) => a.parse().map_err(|_| err()),
            }
        };
        let b = match name {
            "ok" => Behaviour::Ok {
                body_len: num(0, DEFAULT_BODY_LEN as u64)? as usize,
                keep_alive: args.get(1) != Some(&"close"),
            },
            "chunked" => {
                let lens = match args.first() {
                    None => vec![16, 32, 16],
                    Some(list) => list
                        .split(',')
                        .map(|n| n.parse().map_err(|_| err()))
                        .collect::<Result<Vec<usize>, _>>()?,
                };
                Behaviour::Chunked {
                    chunk_lens: lens,
                    extensions: true,
                    trailers: true,
                }
            }
            "interim" => Behaviour::Interim(match args.first() {
                None => vec![100, 103],
                Some(list) => list
                    .split(',')
                    .map(|n| n.parse().map_err(|_| err()))
                    .collect::<Result<Vec<u16>, _>>()?,
            }),
            "no-content" => Behaviour::NoContent,
            "not-modified" => Behaviour::NotModified,
            "close-delimited" => Behaviour::CloseDelimited {
                body_len: num(0, DEFAULT_BODY_LEN as u64)? as usize,
            },
            "stall" => Behaviour::Stall {
                after_bytes: num(0, 0)? as usize,
            },
            "reset" => Behaviour::Reset {
                after_requests: num(0, 0)?,
                mid_response: args.get(1) == Some(&"mid"),
            },
            "close-mid-body" => Behaviour::CloseMidBody,
            "malformed" => Behaviour::Malformed(args.first().ok_or_else(err)?.parse()?),
            "slow" => Behaviour::Slow {
                delay: Duration::from_millis(num(0, 100)?),
            },
            "status" => Behaviour::Status(u16::try_from(num(0, 500)?).map_err(|_| err())?),
            "close-after" => Behaviour::CloseAfter {
                requests: num(0, 1)?,
                announce: args.get(1) != Some(&"silent"),
            },
            "ignore-close" => Behaviour::IgnoreConnectionClose,
            "hostile" => Behaviour::Hostile {
                huge_reason: args.first() == Some(&"huge"),
            },
            "bucket" => Behaviour::TokenBucket {
                rate_per_s: args.first().ok_or_else(err)?.parse().map_err(|_| err())?,
                burst: u32::try_from(num(1, 1)?).map_err(|_| err())?,
            },
            "dies" => Behaviour::Dies {
                after_requests: num(0, 1)?,
            },
            _ => return Err(err()),
        };
        Script::resolve(&b)?;
        Ok(b)
    }
}

#[cfg(test)]
#[path = "behaviour_tests.rs"]
mod tests;
