//! HTTP/2 server side (RFC 9113), sans-IO: request bytes in, frames out.
//!
//! Place in the flow: an alternative framing inside [`crate::worker`]'s connections,
//! chosen when TLS ALPN selects `h2` or when a plain connection opens with the client
//! preface (h2c with prior knowledge). The worker owns the socket and buffers; this
//! module owns the protocol state and asks a [`Responder`] what to answer, so HTTP/1.1
//! and HTTP/2 share every decision about the file and differ only here, in framing.
//!
//! Scope: GET/HEAD of static files answered as soon as the head is in; methods the
//! responder wants a body for (WebDAV) wait for the client's END_STREAM, collecting DATA
//! up to the body limit (413 past it). Other DATA (a GET with a body, a stream already
//! answered) is only flow-controlled (its window refunded) and dropped. Responses are
//! HEADERS (+CONTINUATION when longer than the peer's frame size) then DATA, sent as the
//! connection and stream windows allow, round-robin over streams one frame at a time.
//! Our HPACK encoder never inserts into the dynamic table, so the peer's
//! SETTINGS_HEADER_TABLE_SIZE needs no handling. Any connection error writes GOAWAY with
//! its code and turns the connection into [`H2Server::is_closing`]; nothing in the input
//! can panic this code or make it buffer without bound.

use crate::answer::Body;
use std::collections::VecDeque;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use volley_h2::frame::{
    self, flag, kind, setting, FrameHeader, DEFAULT_MAX_FRAME_SIZE, DEFAULT_WINDOW, HEADER_LEN,
    MAX_MAX_FRAME_SIZE, MAX_WINDOW, PREFACE,
};
use volley_h2::hpack::{Decoder, FieldMode, HpackError};
use volley_h2::ErrorCode;

#[path = "h2_frames.rs"]
mod frames;

/// Streams a client may have open at once (advertised in our SETTINGS; one more is
/// refused with RST_STREAM(REFUSED_STREAM), which clients retry).
pub(crate) const MAX_CONCURRENT_STREAMS: u32 = 128;
/// Streams remembered as reset by us (§5.1 late frames): one full set of concurrent
/// streams, so a burst of resets does not turn their late DATA into errors.
const RESET_MEMORY: usize = MAX_CONCURRENT_STREAMS as usize;
/// SETTINGS_MAX_HEADER_LIST_SIZE we advertise; a larger list is answered 431.
const MAX_HEADER_LIST_BYTES: u32 = 16 << 10;
/// Largest encoded header block (HEADERS + CONTINUATION) we collect before giving up
/// on the connection: CONTINUATION floods are otherwise unbounded.
const MAX_HEADER_BLOCK_BYTES: usize = 64 << 10;
/// Refund the connection receive window once this much of it is used.
const REFUND_AT: i64 = DEFAULT_WINDOW as i64 / 2;
/// `fill` stops adding DATA once the output holds this much: the socket drains it
/// before more file bytes are read.
const FILL_TARGET_BYTES: usize = 64 << 10;
/// Output a client may leave unread (control answers to its PINGs and SETTINGS,
/// response heads) before it is told ENHANCE_YOUR_CALM and dropped.
const MAX_BACKLOG_BYTES: usize = 4 << 20;
/// Room the worker's read buffer needs: one whole frame of our maximum size.
pub(crate) const READ_BUF_BYTES: usize = HEADER_LEN + DEFAULT_MAX_FRAME_SIZE as usize + 1024;

/// A decoded request head, as the responder sees it.
pub(crate) struct Request<'a> {
    /// `:method`.
    pub method: &'a [u8],
    /// `:path` (with query).
    pub path: &'a [u8],
    /// The request body (empty unless the responder asked for it with `wants_body`).
    pub body: &'a [u8],
    /// The decoded field bytes the spans point into.
    pub buf: &'a [u8],
    /// (name, value) spans into `buf`, in order.
    pub fields: &'a [(Range<usize>, Range<usize>)],
}

impl<'a> Request<'a> {
    /// The first regular field named `name` (lower-case, as HTTP/2 requires).
    pub fn field(&self, name: &str) -> Option<&'a [u8]> {
        self.fields
            .iter()
            .find(|(n, _)| &self.buf[n.clone()] == name.as_bytes())
            .map(|(_, v)| &self.buf[v.clone()])
    }

    /// Every field, pseudo-fields included, in order.
    pub fn fields(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + '_ {
        self.fields
            .iter()
            .map(|(n, v)| (&self.buf[n.clone()], &self.buf[v.clone()]))
    }
}

/// What the connection asks of the server: the answer to one request.
pub(crate) trait Responder {
    /// Appends the HPACK-encoded response fields (`:status` first) to `block` and
    /// returns the body to send (`Body::None` for HEAD and empty answers).
    fn respond(&mut self, req: &Request<'_>, block: &mut Vec<u8>) -> Body;
    /// The same for a request refused before it was understood (431).
    fn refuse(&mut self, status: u16, block: &mut Vec<u8>) -> Body;
    /// The method needs the request body (WebDAV): its answer waits for END_STREAM.
    fn wants_body(&self, method: &[u8]) -> bool;
}

/// A request whose body is still arriving: its decoded head kept until END_STREAM.
struct Pending {
    id: u32,
    buf: Vec<u8>,
    fields: Vec<(Range<usize>, Range<usize>)>,
    method: Range<usize>,
    path: Range<usize>,
    body: Vec<u8>,
    /// The request's content-length, which the DATA received must match (§8.1.1).
    declared: Option<u64>,
}

/// A stream with a response body still to send.
struct Stream {
    id: u32,
    /// The peer's stream window for our DATA.
    window: i64,
    body: Body,
    /// The client ended its side (END_STREAM seen).
    remote_closed: bool,
    /// Request body bytes still allowed by its content-length, while the client's side
    /// is open (a request answered before its body arrived); `None`: not declared.
    body_left: Option<u64>,
    /// A refusal (413, 431): once answered, RST_STREAM(NO_ERROR) tells the client to
    /// stop sending the body we will not take (§8.1), instead of waiting half-closed.
    stop_body: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the 24-byte client preface.
    Preface,
    /// The first frame must be the client's SETTINGS.
    FirstSettings,
    Open,
    /// GOAWAY sent; input is ignored, output drains, then the worker closes.
    Closing,
}

/// A header block being collected across CONTINUATION frames.
struct Continuation {
    stream: u32,
    end_stream: bool,
    /// Trailers of an open stream rather than a new request.
    trailers: bool,
}

/// One HTTP/2 connection's server-side state.
pub(crate) struct H2Server {
    phase: Phase,
    decoder: Decoder,
    /// The peer's SETTINGS_INITIAL_WINDOW_SIZE: new streams' send windows.
    peer_initial_window: i64,
    /// The peer's SETTINGS_MAX_FRAME_SIZE: the largest frame we send.
    peer_max_frame: usize,
    /// Connection send window.
    conn_window: i64,
    /// Connection receive window left before the next refund.
    recv_window: i64,
    /// Highest client stream id seen (every lower odd id is closed or open).
    last_stream: u32,
    streams: Vec<Stream>,
    /// Requests still receiving their body (they count towards the stream cap).
    pending: Vec<Pending>,
    /// Answered streams whose client side is still open (half-closed local, §5.1): their
    /// WINDOW_UPDATEs and DATA are still judged (flow control, content-length) until the
    /// client's END_STREAM or RST_STREAM. They count towards the stream cap, as §5.1.2
    /// says half-closed streams do, which also bounds this list.
    half_closed: Vec<Stream>,
    /// Largest request body collected, over all pending requests of the connection.
    max_body_bytes: usize,
    /// Round-robin cursor into `streams`.
    next: usize,
    cont: Option<Continuation>,
    block: Vec<u8>,
    /// Decoded field bytes, and (name, value) spans into them.
    field_buf: Vec<u8>,
    fields: Vec<(Range<usize>, Range<usize>)>,
    head: Vec<u8>,
    peer_goaway: bool,
    /// Requests answered (responses started) on this connection.
    answered: u64,
    /// Streams this side reset most recently: frames the peer sent before it saw the
    /// RST_STREAM are ignored on them (§5.1), not treated as errors.
    reset_by_us: VecDeque<u32>,
}

impl H2Server {
    /// A connection whose server preface (our SETTINGS) is appended to `out` now: it
    /// may precede the client's preface (RFC 9113 §3.4).
    /// Request bodies beyond `max_body_bytes` (all pending requests together) get 413.
    pub(crate) fn new(out: &mut Vec<u8>, max_body_bytes: usize) -> H2Server {
        frame::write_settings(
            out,
            &[
                (setting::MAX_CONCURRENT_STREAMS, MAX_CONCURRENT_STREAMS),
                (setting::MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST_BYTES),
            ],
        );
        H2Server {
            phase: Phase::Preface,
            decoder: Decoder::new(4096, MAX_HEADER_LIST_BYTES as usize),
            peer_initial_window: DEFAULT_WINDOW as i64,
            peer_max_frame: DEFAULT_MAX_FRAME_SIZE as usize,
            conn_window: DEFAULT_WINDOW as i64,
            recv_window: DEFAULT_WINDOW as i64,
            last_stream: 0,
            streams: Vec::new(),
            pending: Vec::new(),
            half_closed: Vec::new(),
            max_body_bytes,
            next: 0,
            cont: None,
            block: Vec::new(),
            field_buf: Vec::new(),
            fields: Vec::new(),
            head: Vec::new(),
            peer_goaway: false,
            answered: 0,
            reset_by_us: VecDeque::new(),
        }
    }

    /// GOAWAY was sent: once the output is written the connection should close.
    ///
    /// A peer's GOAWAY does not close the connection from this side: the peer closes it
    /// (or the idle timeout does). Closing first would race the peer's next frames (h2spec
    /// sends a PING right after its GOAWAY): a close with unread bytes in the socket is a
    /// TCP reset, which the peer reads as an error, not as a close. Until then PINGs are
    /// answered and no new stream is accepted.
    pub(crate) fn is_closing(&self) -> bool {
        self.phase == Phase::Closing
    }

    /// Responses started so far; the worker counts them as answered requests.
    pub(crate) fn take_answered(&mut self) -> u64 {
        std::mem::take(&mut self.answered)
    }

    /// Processes every complete frame in `input`, appending answers to `out`.
    /// Returns how many bytes were consumed; the rest (a partial frame) must be
    /// offered again with more bytes behind it.
    pub(crate) fn feed(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        r: &mut impl Responder,
    ) -> usize {
        let mut pos = 0;
        loop {
            match self.phase {
                Phase::Closing => return input.len(),
                Phase::Preface => {
                    let have = &input[pos..];
                    let n = have.len().min(PREFACE.len());
                    if have[..n] != PREFACE[..n] {
                        self.goaway(out, ErrorCode::ProtocolError);
                        continue;
                    }
                    if n < PREFACE.len() {
                        return pos;
                    }
                    pos += n;
                    self.phase = Phase::FirstSettings;
                    continue;
                }
                Phase::FirstSettings | Phase::Open => {}
            }
            let Some(h) = FrameHeader::parse(&input[pos..]) else {
                return pos;
            };
            if h.len > DEFAULT_MAX_FRAME_SIZE {
                // Judged on the header alone, so an oversized frame is never buffered.
                self.goaway(out, ErrorCode::FrameSizeError);
                continue;
            }
            let total = HEADER_LEN + h.len as usize;
            if input.len() - pos < total {
                return pos;
            }
            let payload = &input[pos + HEADER_LEN..pos + total];
            pos += total;
            if let Err(code) = self.on_frame(Got(h, payload), out, r) {
                self.goaway(out, code);
            } else if out.len() > MAX_BACKLOG_BYTES {
                self.goaway(out, ErrorCode::EnhanceYourCalm);
            }
        }
    }

    /// Adds DATA frames to `out` while windows allow, until it holds about
    /// `FILL_TARGET_BYTES`; round-robin over streams, one frame per turn.
    pub(crate) fn fill(&mut self, out: &mut Vec<u8>) {
        if self.phase == Phase::Closing {
            return;
        }
        let mut idle_turns = 0;
        while out.len() < FILL_TARGET_BYTES
            && self.conn_window > 0
            && !self.streams.is_empty()
            && idle_turns < self.streams.len()
        {
            if self.next >= self.streams.len() {
                self.next = 0;
            }
            let i = self.next;
            if self.streams[i].window <= 0 {
                idle_turns += 1;
                self.next += 1;
                continue;
            }
            idle_turns = 0;
            let limit = (self.peer_max_frame as i64)
                .min(self.conn_window)
                .min(self.streams[i].window) as usize;
            match self.send_data(i, limit, out) {
                Some(n) => {
                    self.conn_window -= n as i64;
                    self.streams[i].window -= n as i64;
                    if matches!(self.streams[i].body, Body::None) {
                        let s = self.streams.remove(i);
                        if !s.remote_closed && s.stop_body {
                            self.rst(out, s.id, ErrorCode::NoError);
                        } else if !s.remote_closed {
                            // The answer is complete but the client's side is open:
                            // the stream stays half-closed (local) until it ends, so
                            // its flow control and content-length are still judged.
                            // (RST_STREAM(NO_ERROR) here, as §8.1 allows, would make
                            // a WINDOW_UPDATE overflow that arrives a moment later
                            // go unanswered, depending on read timing.)
                            self.half_closed.push(s);
                        }
                    } else {
                        self.next += 1;
                    }
                }
                None => {
                    let s = self.streams.remove(i);
                    self.rst(out, s.id, ErrorCode::InternalError);
                }
            }
        }
    }

    /// Writes one DATA frame of at most `limit` bytes from stream `i`'s body; returns
    /// its length, or `None` if the file could not be read (the stream is then reset).
    fn send_data(&mut self, i: usize, limit: usize, out: &mut Vec<u8>) -> Option<usize> {
        let s = &mut self.streams[i];
        let at = out.len();
        let (n, done) = match &mut s.body {
            Body::None => return Some(0),
            Body::Mem(data, pos, end) => {
                let n = end.saturating_sub(*pos).min(limit);
                let done = *pos + n >= *end;
                let chunk = data.get(*pos..*pos + n)?;
                frame::write_header(
                    out,
                    n,
                    kind::DATA,
                    if done { flag::END_STREAM } else { 0 },
                    s.id,
                );
                out.extend_from_slice(chunk);
                *pos += n;
                (n, done)
            }
            Body::File(file, pos, end) => {
                let n = (end.saturating_sub(*pos) as usize).min(limit);
                let done = *pos + n as u64 >= *end;
                frame::write_header(
                    out,
                    n,
                    kind::DATA,
                    if done { flag::END_STREAM } else { 0 },
                    s.id,
                );
                let data_at = out.len();
                out.resize(data_at + n, 0);
                let mut got = 0;
                while got < n {
                    match file.read_at(&mut out[data_at + got..], *pos + got as u64) {
                        Ok(0) => break,
                        Ok(k) => got += k,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
                if got < n {
                    // The file shrank or failed: the promised length cannot be met.
                    out.truncate(at);
                    return None;
                }
                *pos += n as u64;
                (n, done)
            }
        };
        if done {
            s.body = Body::None;
        }
        Some(n)
    }

    fn goaway(&mut self, out: &mut Vec<u8>, code: ErrorCode) {
        frame::write_goaway(out, self.last_stream, code.to_u32());
        self.phase = Phase::Closing;
        self.streams.clear();
        self.pending.clear();
        self.cont = None;
    }
}

/// The payload without its padding (§6.1): a pad length that eats the payload is a
/// PROTOCOL_ERROR.
fn unpad(h: FrameHeader, p: &[u8]) -> Result<&[u8], ErrorCode> {
    if !h.has(flag::PADDED) {
        return Ok(p);
    }
    let (&pad, rest) = p.split_first().ok_or(ErrorCode::FrameSizeError)?;
    let keep = rest
        .len()
        .checked_sub(pad as usize)
        .ok_or(ErrorCode::ProtocolError)?;
    Ok(&rest[..keep])
}

fn body_is_empty(b: &Body) -> bool {
    match b {
        Body::None => true,
        Body::Mem(_, pos, end) => pos >= end,
        Body::File(_, pos, end) => pos >= end,
    }
}

/// Checks a request's fields (RFC 9113 §8.3.1, §8.2): pseudo-fields first, each once,
/// only request ones; lower-case names; no connection-specific fields; `:method`,
/// `:scheme` and `:path` present (CONNECT aside). Returns the method and path spans.
fn validate(
    buf: &[u8],
    fields: &[(Range<usize>, Range<usize>)],
) -> Option<(Range<usize>, Range<usize>)> {
    let (mut method, mut path, mut scheme, mut authority) = (None, None, false, false);
    let mut regular_seen = false;
    for (n, v) in fields {
        let name = &buf[n.clone()];
        if name.iter().any(u8::is_ascii_uppercase) || name.is_empty() {
            return None;
        }
        if name[0] == b':' {
            if regular_seen {
                return None;
            }
            let slot = match name {
                b":method" => method.replace(v.clone()).is_some(),
                b":path" => path.replace(v.clone()).is_some(),
                b":scheme" => std::mem::replace(&mut scheme, true),
                b":authority" => std::mem::replace(&mut authority, true),
                _ => return None,
            };
            if slot {
                return None; // duplicated pseudo-field
            }
            continue;
        }
        regular_seen = true;
        match name {
            b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding"
            | b"upgrade" => return None,
            b"te" if &buf[v.clone()] != b"trailers" => return None,
            _ => {}
        }
    }
    let method = method?;
    if &buf[method.clone()] == b"CONNECT" {
        // No :scheme/:path in a CONNECT; it gets 405 like any other method.
        return Some((method, 0..0));
    }
    let path = path?;
    if !scheme || path.is_empty() {
        return None;
    }
    Some((method, path))
}

/// One received frame: its header and payload.
#[derive(Clone, Copy)]
struct Got<'a>(FrameHeader, &'a [u8]);

/// What handling a frame gives: `Err` is a connection error (GOAWAY with the code).
type Handled = Result<(), ErrorCode>;

/// The stream a PRIORITY payload (or a HEADERS priority block) depends on.
fn depends_on(p: &[u8]) -> u32 {
    u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & 0x7fff_ffff
}

/// A request's content-length field, if present and a number.
fn content_length(buf: &[u8], fields: &[(Range<usize>, Range<usize>)]) -> Option<u64> {
    let (_, v) = fields
        .iter()
        .find(|(n, _)| &buf[n.clone()] == b"content-length")?;
    std::str::from_utf8(&buf[v.clone()]).ok()?.parse().ok()
}

#[cfg(test)]
#[path = "h2_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "h2_errors_tests.rs"]
mod errors_tests;
