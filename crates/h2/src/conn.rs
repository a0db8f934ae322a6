//! The client connection state machine: bytes in (`feed`), events out (`poll_event`),
//! requests in (`submit`), bytes out (`pending_output` / `consume_output`).
//!
//! Nothing here touches a socket or a clock, so the engine's event loop decides when
//! to read and write, and every path is testable with byte strings.

use std::collections::VecDeque;

use crate::error::{ConnError, ErrorCode, SubmitError};
use crate::frame::{
    self, flag, kind, setting, FrameHeader, DEFAULT_MAX_FRAME_SIZE, DEFAULT_WINDOW, HEADER_LEN,
    MAX_MAX_FRAME_SIZE, MAX_WINDOW,
};
use crate::hpack::{encode_field, Decoder, FieldMode, HpackError};

#[path = "conn_recv.rs"]
mod recv;

/// A stream identifier (odd: client-initiated).
pub type StreamId = u32;

/// Highest stream identifier (2^31 - 1).
const MAX_STREAM_ID: u32 = (1 << 31) - 1;

/// Our side of the connection's settings, sent in the first SETTINGS frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// SETTINGS_HEADER_TABLE_SIZE: the HPACK dynamic table the server may use when
    /// encoding responses (bytes). Keep it at 4096 or above: a peer may use the
    /// default 4096 until it has seen our SETTINGS, and the decoder enforces this
    /// value from the first byte.
    pub header_table_size: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: each stream's receive window (bytes). Large by
    /// default (2^30 - 1, as h2load) so flow control never throttles a benchmark.
    pub initial_window_size: u32,
    /// The connection's receive window (bytes), raised from 65,535 by a
    /// WINDOW_UPDATE right after the preface.
    pub connection_window_size: u32,
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame payload we accept (bytes).
    pub max_frame_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: the largest decoded header list we accept
    /// (bytes, RFC 7541 §4.1 sizes).
    pub max_header_list_size: u32,
    /// Decode and keep every response field (see [`H2Conn::pop_captured_headers`]).
    /// Off by default: the hot path decodes `:status` only.
    pub capture_headers: bool,
    /// Keep what a body check needs: each final response head's `content-encoding`,
    /// `content-length` and `content-type` ([`H2Conn::polled_head`]) and each DATA
    /// payload ([`H2Conn::polled_data`]). Off by default, so a plain benchmark pays
    /// neither the full HPACK decode nor the copy. No allocation per frame: both go
    /// into one buffer reused from one `feed` to the next.
    pub capture_content: bool,
    /// Bound on queued output (bytes). Request bodies wait in their stream beyond
    /// half of it; control frames the peer provokes past it fail the connection.
    pub max_pending_output_bytes: usize,
    /// Concurrent streams assumed before the server's SETTINGS arrives (RFC 9113
    /// §6.5.2 recommends servers allow at least 100).
    pub assumed_max_concurrent_streams: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            header_table_size: 4096,
            initial_window_size: (1 << 30) - 1,
            connection_window_size: (1 << 30) - 1,
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_header_list_size: 64 * 1024,
            capture_headers: false,
            capture_content: false,
            max_pending_output_bytes: 4 << 20,
            assumed_max_concurrent_streams: 100,
        }
    }
}

/// A request's head. `S` lets the caller pass `&str` or `String` header pairs
/// without building a temporary list per request (with `headers: &[]` Rust cannot
/// infer `S`: write `let head: RequestHead = ...`).
#[derive(Debug, Clone, Copy)]
pub struct RequestHead<'a, S: AsRef<str> = &'a str> {
    /// `:method`, e.g. `GET`.
    pub method: &'a str,
    /// `:scheme`, `http` or `https`.
    pub scheme: &'a str,
    /// `:authority` (host[:port]); when empty, a `host` header's value is used.
    pub authority: &'a str,
    /// `:path`, including the query.
    pub path: &'a str,
    /// Other fields. Names are lower-cased; connection-specific fields
    /// (`connection`, `keep-alive`, `proxy-connection`, `transfer-encoding`,
    /// `upgrade`, `host`, and `te` other than `trailers`) are dropped because HTTP/2
    /// forbids them (RFC 9113 §8.2.2) and templates shared with HTTP/1.1 carry them.
    pub headers: &'a [(S, S)],
}

/// What the connection has to tell its driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The final (non-1xx) response head of `stream`; informational heads are
    /// consumed silently. `end_stream`: the response has no body.
    Headers {
        /// Stream.
        stream: StreamId,
        /// HTTP status.
        status: u16,
        /// The stream is complete.
        end_stream: bool,
    },
    /// `len` body bytes of `stream` arrived (padding excluded).
    Data {
        /// Stream.
        stream: StreamId,
        /// Body bytes in this frame.
        len: usize,
        /// The stream is complete.
        end_stream: bool,
    },
    /// A trailer block ended `stream`.
    Trailers {
        /// Stream.
        stream: StreamId,
    },
    /// The peer reset `stream` (RST_STREAM), or refused it implicitly by a GOAWAY
    /// whose last stream is lower (code REFUSED_STREAM: safe to retry elsewhere).
    StreamReset {
        /// Stream.
        stream: StreamId,
        /// The peer's reason.
        code: ErrorCode,
    },
    /// The peer broke a rule on `stream` only (RFC 9113 §5.4.2: a stream error);
    /// we sent RST_STREAM with `code` and the stream is gone.
    StreamError {
        /// Stream.
        stream: StreamId,
        /// Our reason.
        code: ErrorCode,
    },
    /// The peer will process no stream above `last_stream`; submit nothing more.
    GoAway {
        /// Highest stream the peer may have processed.
        last_stream: StreamId,
        /// The peer's reason.
        code: ErrorCode,
    },
    /// The peer's SETTINGS arrived and were applied (and acknowledged).
    PeerSettings,
    /// The peer sent a PING (already answered).
    Ping,
}

/// One decoded response field, owned (only built when `capture_headers` is on).
pub type HeaderField = (Vec<u8>, Vec<u8>);

/// The fields of a final response head that decide how its body is checked (kept
/// with [`Settings::capture_content`]). Values are as sent; a field sent twice is
/// joined with `, ` as RFC 9110 §5.3 allows for list fields, so stacked codings stay
/// visible.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContentHead<'a> {
    /// `content-encoding`.
    pub content_encoding: Option<&'a [u8]>,
    /// `content-length`.
    pub content_length: Option<&'a [u8]>,
    /// `content-type`.
    pub content_type: Option<&'a [u8]>,
}

/// The captured fields, in the order [`ContentHead`] lists them.
const CONTENT_FIELDS: [&[u8]; 3] = [b"content-encoding", b"content-length", b"content-type"];

/// Arena marker for a field that was absent (a present value's length is below it).
const ABSENT: u32 = u32::MAX;

/// What the last polled event left readable in the capture arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Polled {
    Nothing,
    Head { start: usize, end: usize },
    Data { start: usize, end: usize },
}

/// Per-stream state, alive from `submit` until both sides have ended it.
#[derive(Debug)]
struct Stream {
    id: StreamId,
    /// What we may still send (peer's window). i64: SETTINGS changes can make it
    /// negative (RFC 9113 §6.9.2).
    send_window: i64,
    /// What the peer may still send us.
    recv_window: i64,
    /// Bytes received since our last WINDOW_UPDATE for this stream.
    recv_unacked: u32,
    /// We sent END_STREAM.
    local_closed: bool,
    /// A final response head arrived.
    got_final: bool,
    /// Request body not yet sent (flow control or output back-pressure).
    body: Vec<u8>,
    body_pos: usize,
}

/// What decoding one header block found.
struct Decoded {
    /// The `:status` pseudo-field, when there was exactly one valid one.
    status: Option<u16>,
    /// A repeated, invalid or unknown pseudo-field.
    bad_pseudo: bool,
    /// Every field, when the settings capture them.
    fields: Vec<HeaderField>,
}

/// A header block spread over HEADERS + CONTINUATION frames.
#[derive(Debug, Clone, Copy)]
struct PendingBlock {
    stream: StreamId,
    end_stream: bool,
}

/// The sans-IO HTTP/2 client connection. See the crate docs for the driving loop.
#[derive(Debug)]
pub struct H2Conn {
    settings: Settings,
    out: Vec<u8>,
    out_start: usize,
    /// A partial frame carried over between `feed` calls (at most one frame).
    inbuf: Vec<u8>,
    events: VecDeque<Event>,
    captured: VecDeque<(StreamId, Vec<HeaderField>)>,
    /// With `capture_content`: heads and DATA payloads of queued events, in event
    /// order; emptied by `feed` once every event was polled.
    arena: Vec<u8>,
    /// Where the next queued Headers/Data event's bytes start in `arena`.
    arena_read: usize,
    polled: Polled,
    /// Scratch for the three content fields while a head is decoded.
    field_bufs: [Vec<u8>; 3],
    field_seen: [bool; 3],
    streams: Vec<Stream>,
    next_stream_id: u32,
    decoder: Decoder,
    /// Header block being assembled from CONTINUATION frames.
    block: Vec<u8>,
    pending_block: Option<PendingBlock>,
    /// Scratch for encoding a request's header block and lower-casing names.
    encode_buf: Vec<u8>,
    name_buf: Vec<u8>,
    peer_preface_seen: bool,
    peer_max_concurrent: u32,
    peer_initial_window: u32,
    peer_max_frame: u32,
    peer_max_header_list: Option<u32>,
    conn_send_window: i64,
    conn_recv_window: i64,
    conn_recv_unacked: u32,
    going_away: bool,
    failed: Option<ConnError>,
}

impl H2Conn {
    /// A new connection whose output already holds the client preface, our SETTINGS
    /// and the connection WINDOW_UPDATE: write them as soon as the socket connects.
    pub fn new(mut settings: Settings) -> H2Conn {
        settings.max_frame_size = settings
            .max_frame_size
            .clamp(DEFAULT_MAX_FRAME_SIZE, MAX_MAX_FRAME_SIZE);
        settings.initial_window_size = settings.initial_window_size.min(MAX_WINDOW as u32);
        settings.connection_window_size = settings
            .connection_window_size
            .clamp(DEFAULT_WINDOW, MAX_WINDOW as u32);
        let mut out = Vec::with_capacity(4096);
        out.extend_from_slice(frame::PREFACE);
        frame::write_settings(
            &mut out,
            &[
                (setting::HEADER_TABLE_SIZE, settings.header_table_size),
                (setting::ENABLE_PUSH, 0),
                (setting::INITIAL_WINDOW_SIZE, settings.initial_window_size),
                (setting::MAX_FRAME_SIZE, settings.max_frame_size),
                (setting::MAX_HEADER_LIST_SIZE, settings.max_header_list_size),
            ],
        );
        let raise = settings.connection_window_size - DEFAULT_WINDOW;
        if raise > 0 {
            frame::write_window_update(&mut out, 0, raise);
        }
        H2Conn {
            decoder: Decoder::new(
                settings.header_table_size as usize,
                settings.max_header_list_size as usize,
            ),
            conn_recv_window: settings.connection_window_size as i64,
            peer_max_concurrent: settings.assumed_max_concurrent_streams,
            settings,
            out,
            out_start: 0,
            inbuf: Vec::new(),
            events: VecDeque::new(),
            captured: VecDeque::new(),
            arena: Vec::new(),
            arena_read: 0,
            polled: Polled::Nothing,
            field_bufs: Default::default(),
            field_seen: [false; 3],
            streams: Vec::new(),
            next_stream_id: 1,
            block: Vec::new(),
            pending_block: None,
            encode_buf: Vec::new(),
            name_buf: Vec::new(),
            peer_preface_seen: false,
            peer_initial_window: DEFAULT_WINDOW,
            peer_max_frame: DEFAULT_MAX_FRAME_SIZE,
            peer_max_header_list: None,
            conn_send_window: DEFAULT_WINDOW as i64,
            conn_recv_unacked: 0,
            going_away: false,
            failed: None,
        }
    }

    // ----- output -----

    /// Bytes waiting to be written, oldest first.
    pub fn pending_output(&self) -> &[u8] {
        &self.out[self.out_start..]
    }

    /// Marks the first `n` bytes of [`pending_output`](Self::pending_output) as
    /// written (clamped to what is pending), then lets waiting request bodies move
    /// into the freed space.
    pub fn consume_output(&mut self, n: usize) {
        self.out_start = (self.out_start + n).min(self.out.len());
        if self.out_start == self.out.len() {
            self.out.clear();
            self.out_start = 0;
        } else if self.out_start >= 64 * 1024 && self.out_start * 2 >= self.out.len() {
            // Compact once the written prefix dominates, so the buffer stays bounded
            // without moving bytes on every partial write.
            self.out.drain(..self.out_start);
            self.out_start = 0;
        }
        self.flush_bodies();
    }

    // ----- state -----

    /// Streams submitted and not yet finished (they count against the peer's
    /// SETTINGS_MAX_CONCURRENT_STREAMS).
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Whether [`submit`](Self::submit) would accept a request now.
    pub fn can_submit(&self) -> bool {
        self.failed.is_none()
            && !self.going_away
            && self.streams.len() < self.peer_max_concurrent as usize
            && self.next_stream_id <= MAX_STREAM_ID
    }

    /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS (or the assumed value before its
    /// SETTINGS arrived).
    pub fn peer_max_concurrent_streams(&self) -> u32 {
        self.peer_max_concurrent
    }

    /// The peer's SETTINGS_MAX_HEADER_LIST_SIZE, if it sent one.
    pub fn peer_max_header_list_size(&self) -> Option<u32> {
        self.peer_max_header_list
    }

    /// The error that ended the connection, if one did.
    pub fn error(&self) -> Option<&ConnError> {
        self.failed.as_ref()
    }

    /// Gives up on an active stream (the driver's timeout): queues RST_STREAM(CANCEL)
    /// and frees its slot at once, so the connection keeps serving its other
    /// streams. Frames the server sent before it saw the reset may still arrive
    /// (RFC 9113 §5.1): they are counted against the connection window (and
    /// replenished) and their headers keep HPACK in step, but they raise no event and
    /// no error. Events already queued for the stream stay queued: the driver, which
    /// forgot the stream, ignores them. Returns false for a stream that is not
    /// active (finished, reset, or never submitted).
    pub fn cancel(&mut self, stream: StreamId) -> bool {
        let Some(idx) = self.streams.iter().position(|s| s.id == stream) else {
            return false;
        };
        self.streams.swap_remove(idx);
        if self.failed.is_none() {
            frame::write_rst_stream(&mut self.out, stream, ErrorCode::Cancel.to_u32());
        }
        true
    }

    /// Whether a GOAWAY was received (or the connection failed): no new streams.
    pub fn is_going_away(&self) -> bool {
        self.going_away
    }

    /// Connection-level send window (bytes we may still send in DATA).
    pub fn send_window(&self) -> i64 {
        self.conn_send_window
    }

    /// Connection-level receive window (bytes the peer may still send).
    pub fn recv_window(&self) -> i64 {
        self.conn_recv_window
    }

    /// The next event, oldest first.
    pub fn poll_event(&mut self) -> Option<Event> {
        let ev = self.events.pop_front()?;
        if self.settings.capture_content {
            self.polled = match ev {
                Event::Headers { .. } => {
                    let start = self.arena_read;
                    let mut at = start;
                    for _ in CONTENT_FIELDS {
                        let len = read_u32(&self.arena[at..]);
                        at += 4 + if len == ABSENT { 0 } else { len as usize };
                    }
                    self.arena_read = at;
                    Polled::Head { start, end: at }
                }
                Event::Data { len, .. } => {
                    let start = self.arena_read;
                    self.arena_read += len;
                    Polled::Data {
                        start,
                        end: self.arena_read,
                    }
                }
                _ => Polled::Nothing,
            };
        }
        Some(ev)
    }

    /// With `capture_content` on: the payload (padding removed) of the `Data` event
    /// [`poll_event`](Self::poll_event) returned last; empty after any other event.
    /// Valid until the next `poll_event` or `feed`.
    pub fn polled_data(&self) -> &[u8] {
        match self.polled {
            Polled::Data { start, end } => &self.arena[start..end],
            _ => &[],
        }
    }

    /// With `capture_content` on: the content fields of the `Headers` event
    /// [`poll_event`](Self::poll_event) returned last; all `None` after any other
    /// event.
    pub fn polled_head(&self) -> ContentHead<'_> {
        let Polled::Head { start, end } = self.polled else {
            return ContentHead::default();
        };
        let mut region = &self.arena[start..end];
        let mut values: [Option<&[u8]>; 3] = [None; 3];
        for v in &mut values {
            let len = read_u32(region);
            region = &region[4..];
            if len != ABSENT {
                let (value, rest) = region.split_at(len as usize);
                *v = Some(value);
                region = rest;
            }
        }
        ContentHead {
            content_encoding: values[0],
            content_length: values[1],
            content_type: values[2],
        }
    }

    /// With `capture_headers` on: the fields of the next response or trailer block,
    /// in the order the matching `Headers`/`Trailers` events were queued.
    pub fn pop_captured_headers(&mut self) -> Option<(StreamId, Vec<HeaderField>)> {
        self.captured.pop_front()
    }

    // ----- requests -----

    /// Queues a request: HEADERS (+ CONTINUATION when the block exceeds the peer's
    /// frame size), then DATA frames for `body` as far as flow control allows; the
    /// rest is copied into the stream and sent as windows open.
    pub fn submit<S: AsRef<str>>(
        &mut self,
        req: &RequestHead<'_, S>,
        body: &[u8],
    ) -> Result<StreamId, SubmitError> {
        self.check_submit()?;
        let mut block = std::mem::take(&mut self.encode_buf);
        let r = encode_request_block(req, &mut block, &mut self.name_buf)
            .and_then(|()| self.submit_block(&block, body));
        self.encode_buf = block;
        r
    }

    /// [`submit`](Self::submit) with a head encoded once by [`EncodedHead::new`]:
    /// the hot path for a benchmark repeating one request, since the encoder is
    /// stateless and the block never changes.
    pub fn submit_encoded(
        &mut self,
        head: &EncodedHead,
        body: &[u8],
    ) -> Result<StreamId, SubmitError> {
        self.check_submit()?;
        self.submit_block(&head.block, body)
    }

    fn check_submit(&self) -> Result<(), SubmitError> {
        if self.failed.is_some() || self.going_away {
            return Err(SubmitError::Closing);
        }
        if self.next_stream_id > MAX_STREAM_ID {
            return Err(SubmitError::StreamIdsExhausted);
        }
        if self.streams.len() >= self.peer_max_concurrent as usize {
            return Err(SubmitError::TooManyStreams);
        }
        Ok(())
    }

    fn submit_block(&mut self, block: &[u8], body: &[u8]) -> Result<StreamId, SubmitError> {
        let id = self.next_stream_id;
        self.next_stream_id += 2;

        // HEADERS, split into CONTINUATION frames at the peer's max frame size.
        let max = self.peer_max_frame as usize;
        let mut chunks = block.chunks(max);
        let first = chunks.next().unwrap_or(&[]);
        let mut flags = if body.is_empty() { flag::END_STREAM } else { 0 };
        if block.len() <= max {
            flags |= flag::END_HEADERS;
        }
        frame::write_header(&mut self.out, first.len(), kind::HEADERS, flags, id);
        self.out.extend_from_slice(first);
        let mut written = first.len();
        for chunk in chunks {
            written += chunk.len();
            let f = if written == block.len() {
                flag::END_HEADERS
            } else {
                0
            };
            frame::write_header(&mut self.out, chunk.len(), kind::CONTINUATION, f, id);
            self.out.extend_from_slice(chunk);
        }

        let mut stream = Stream {
            id,
            send_window: self.peer_initial_window as i64,
            recv_window: self.settings.initial_window_size as i64,
            recv_unacked: 0,
            local_closed: body.is_empty(),
            got_final: false,
            body: Vec::new(),
            body_pos: 0,
        };
        if !body.is_empty() {
            let sent = self.send_data(&mut stream, body);
            if sent < body.len() {
                stream.body.extend_from_slice(&body[sent..]);
            }
        }
        self.streams.push(stream);
        Ok(id)
    }

    /// Writes DATA frames for `data` on `stream` within the windows, the peer's frame
    /// size and half the output bound; END_STREAM goes on the frame that finishes
    /// the body. Returns the bytes sent.
    fn send_data(&mut self, stream: &mut Stream, data: &[u8]) -> usize {
        let mut sent = 0;
        let soft_limit = self.settings.max_pending_output_bytes / 2;
        while sent < data.len() {
            let queued = self.out.len() - self.out_start;
            // A frame never takes the queue past the soft limit: one frame of the
            // peer's maximum size would overshoot a small bound by up to 16 KiB.
            let room = stream
                .send_window
                .min(self.conn_send_window)
                .min(self.peer_max_frame as i64)
                .min(soft_limit.saturating_sub(queued) as i64);
            if room <= 0 {
                break;
            }
            let n = (data.len() - sent).min(room as usize);
            let last = sent + n == data.len();
            let f = if last { flag::END_STREAM } else { 0 };
            frame::write_header(&mut self.out, n, kind::DATA, f, stream.id);
            self.out.extend_from_slice(&data[sent..sent + n]);
            stream.send_window -= n as i64;
            self.conn_send_window -= n as i64;
            sent += n;
            if last {
                stream.local_closed = true;
            }
        }
        sent
    }

    /// Sends what waiting request bodies the windows now allow.
    fn flush_bodies(&mut self) {
        if self.failed.is_some() {
            return;
        }
        for i in 0..self.streams.len() {
            if self.streams[i].local_closed || self.conn_send_window <= 0 {
                continue;
            }
            let mut stream = std::mem::replace(&mut self.streams[i], placeholder());
            let body = std::mem::take(&mut stream.body);
            let pos = stream.body_pos;
            let sent = self.send_data(&mut stream, &body[pos..]);
            stream.body_pos += sent;
            stream.body = body;
            if stream.local_closed {
                stream.body = Vec::new();
                stream.body_pos = 0;
            }
            self.streams[i] = stream;
        }
    }
}

/// Encodes a request's header block into `buf` (cleared first); `name_buf` is
/// scratch for lower-casing names.
fn encode_request_block<S: AsRef<str>>(
    req: &RequestHead<'_, S>,
    buf: &mut Vec<u8>,
    name_buf: &mut Vec<u8>,
) -> Result<(), SubmitError> {
    buf.clear();
    let mut authority = req.authority;
    if authority.is_empty() {
        if let Some((_, v)) = req
            .headers
            .iter()
            .find(|(n, _)| n.as_ref().eq_ignore_ascii_case("host"))
        {
            authority = v.as_ref();
        }
    }
    // CR, LF and NUL would let a value smuggle fields past an HTTP/1.1 hop
    // (RFC 9113 §8.2.1); an empty method or path is no request at all.
    let bad_value = |v: &[u8]| v.iter().any(|&b| matches!(b, b'\0' | b'\r' | b'\n'));
    if req.method.is_empty()
        || req.path.is_empty()
        || [req.method, req.scheme, authority, req.path]
            .iter()
            .any(|v| bad_value(v.as_bytes()))
        || req
            .headers
            .iter()
            .any(|(_, v)| bad_value(v.as_ref().as_bytes()))
    {
        return Err(SubmitError::InvalidHeaderValue);
    }
    encode_field(b":method", req.method.as_bytes(), buf);
    encode_field(b":scheme", req.scheme.as_bytes(), buf);
    encode_field(b":authority", authority.as_bytes(), buf);
    encode_field(b":path", req.path.as_bytes(), buf);
    for (name, value) in req.headers {
        let (name, value) = (name.as_ref().as_bytes(), value.as_ref().as_bytes());
        name_buf.clear();
        for &b in name {
            // RFC 9113 §8.2.1 / RFC 9110 token characters, lower-cased.
            let ok = b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
            if !ok {
                return Err(SubmitError::InvalidHeaderName);
            }
            name_buf.push(b.to_ascii_lowercase());
        }
        let n = name_buf.as_slice();
        if n.is_empty() {
            return Err(SubmitError::InvalidHeaderName);
        }
        let connection_specific = matches!(
            n,
            b"connection"
                | b"keep-alive"
                | b"proxy-connection"
                | b"transfer-encoding"
                | b"upgrade"
                | b"host"
        ) || (n == b"te" && !value.eq_ignore_ascii_case(b"trailers"));
        if !connection_specific {
            encode_field(n, value, buf);
        }
    }
    Ok(())
}

/// A request head HPACK-encoded once, for [`H2Conn::submit_encoded`]. Valid on any
/// connection: the encoding uses no dynamic table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedHead {
    block: Vec<u8>,
}

impl EncodedHead {
    /// Encodes `req` (same rules as [`H2Conn::submit`]).
    pub fn new<S: AsRef<str>>(req: &RequestHead<'_, S>) -> Result<EncodedHead, SubmitError> {
        let mut block = Vec::new();
        encode_request_block(req, &mut block, &mut Vec::new())?;
        Ok(EncodedHead { block })
    }

    /// The header block's size in bytes.
    pub fn block_len(&self) -> usize {
        self.block.len()
    }
}

/// A stream value to stand in while one is temporarily moved out of the vector.
fn placeholder() -> Stream {
    Stream {
        id: 0,
        send_window: 0,
        recv_window: 0,
        recv_unacked: 0,
        local_closed: true,
        got_final: false,
        body: Vec::new(),
        body_pos: 0,
    }
}

/// The payload of a DATA or HEADERS frame without its pad length byte and padding.
fn strip_padding<'a>(h: &FrameHeader, payload: &'a [u8]) -> Result<&'a [u8], ConnError> {
    if !h.has(flag::PADDED) {
        return Ok(payload);
    }
    let (&pad, rest) = payload
        .split_first()
        .ok_or(ConnError::FrameSize("padded frame without a pad length"))?;
    // Padding as long as the rest is a protocol error (§6.1, §6.2).
    rest.len()
        .checked_sub(pad as usize)
        .map(|n| &rest[..n])
        .ok_or(ConnError::Protocol("padding longer than the frame payload"))
}

/// A big-endian u32 from the first four bytes of `b` (the arena always holds them).
fn read_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Three ASCII digits, 100..=999.
fn parse_status(v: &[u8]) -> Option<u16> {
    match v {
        [a @ b'1'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
            Some((a - b'0') as u16 * 100 + (b - b'0') as u16 * 10 + (c - b'0') as u16)
        }
        _ => None,
    }
}
