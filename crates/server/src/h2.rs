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

    fn on_frame(&mut self, f: Got<'_>, out: &mut Vec<u8>, r: &mut impl Responder) -> Handled {
        let Got(h, p) = f;
        // §6.10: nothing may come between a header block's frames.
        if let Some(c) = &self.cont {
            if h.kind != kind::CONTINUATION || h.stream != c.stream {
                return Err(ErrorCode::ProtocolError);
            }
        }
        if self.phase == Phase::FirstSettings {
            if h.kind != kind::SETTINGS || h.has(flag::ACK) {
                return Err(ErrorCode::ProtocolError);
            }
            self.phase = Phase::Open;
        }
        match h.kind {
            kind::DATA => self.on_data(f, out, r),
            kind::HEADERS => self.on_headers(f, out, r),
            kind::PRIORITY => {
                if h.stream == 0 {
                    return Err(ErrorCode::ProtocolError);
                }
                if p.len() != 5 {
                    self.reset(out, h.stream, ErrorCode::FrameSizeError);
                } else if depends_on(p) == h.stream {
                    // §5.3.1 (RFC 7540): a stream cannot depend on itself.
                    self.reset(out, h.stream, ErrorCode::ProtocolError);
                }
                Ok(())
            }
            kind::RST_STREAM => {
                if h.stream == 0 {
                    return Err(ErrorCode::ProtocolError);
                }
                if p.len() != 4 {
                    return Err(ErrorCode::FrameSizeError);
                }
                if h.stream > self.last_stream {
                    return Err(ErrorCode::ProtocolError); // idle stream (§6.4)
                }
                self.streams.retain(|s| s.id != h.stream);
                self.pending.retain(|s| s.id != h.stream);
                self.half_closed.retain(|s| s.id != h.stream);
                Ok(())
            }
            kind::SETTINGS => self.on_settings(f, out),
            kind::PUSH_PROMISE => Err(ErrorCode::ProtocolError),
            kind::PING => {
                if h.stream != 0 {
                    return Err(ErrorCode::ProtocolError);
                }
                let payload: [u8; 8] = p.try_into().map_err(|_| ErrorCode::FrameSizeError)?;
                if !h.has(flag::ACK) {
                    frame::write_ping(out, true, payload);
                }
                Ok(())
            }
            kind::GOAWAY => {
                if h.stream != 0 {
                    return Err(ErrorCode::ProtocolError);
                }
                if p.len() < 8 {
                    return Err(ErrorCode::FrameSizeError);
                }
                self.peer_goaway = true;
                Ok(())
            }
            kind::WINDOW_UPDATE => self.on_window_update(f, out),
            kind::CONTINUATION => {
                let Some(c) = self.cont.as_ref() else {
                    return Err(ErrorCode::ProtocolError);
                };
                if self.block.len() + p.len() > MAX_HEADER_BLOCK_BYTES {
                    return Err(ErrorCode::EnhanceYourCalm);
                }
                self.block.extend_from_slice(p);
                if h.has(flag::END_HEADERS) {
                    let (stream, end_stream, trailers) = (c.stream, c.end_stream, c.trailers);
                    self.cont = None;
                    let block = std::mem::take(&mut self.block);
                    let res = self.on_block(stream, end_stream, trailers, &block, out, r);
                    self.block = block;
                    self.block.clear();
                    res?;
                }
                Ok(())
            }
            // §5.5: unknown frame types are ignored.
            _ => Ok(()),
        }
    }

    fn on_data(&mut self, f: Got<'_>, out: &mut Vec<u8>, r: &mut impl Responder) -> Handled {
        let Got(h, p) = f;
        if h.stream == 0 || h.stream % 2 == 0 || h.stream > self.last_stream {
            return Err(ErrorCode::ProtocolError);
        }
        let data = unpad(h, p)?;
        // The whole payload, padding included, counts against flow control (§6.9.1).
        self.recv_window -= p.len() as i64;
        if self.recv_window < 0 {
            return Err(ErrorCode::FlowControlError);
        }
        if self.recv_window <= REFUND_AT {
            frame::write_window_update(out, 0, (DEFAULT_WINDOW as i64 - self.recv_window) as u32);
            self.recv_window = DEFAULT_WINDOW as i64;
        }
        if let Some(k) = self.pending.iter().position(|q| q.id == h.stream) {
            let held: usize = self.pending.iter().map(|q| q.body.len()).sum();
            if held + data.len() > self.max_body_bytes {
                let q = self.pending.swap_remove(k);
                self.answer_refused(q.id, 413, false, out, r);
                return Ok(());
            }
            self.pending[k].body.extend_from_slice(data);
            let q = &self.pending[k];
            let got = q.body.len() as u64;
            let end = h.has(flag::END_STREAM);
            if q.declared.is_some_and(|n| got > n || (end && got != n)) {
                // §8.1.1: a body that disagrees with content-length is malformed.
                self.reset(out, h.stream, ErrorCode::ProtocolError);
                return Ok(());
            }
            if end {
                let q = self.pending.swap_remove(k);
                self.answer_pending(q, out, r);
            } else if !p.is_empty() {
                // The stream window refunded as the body is taken in; the limit above
                // is what bounds it.
                frame::write_window_update(out, h.stream, p.len() as u32);
            }
            return Ok(());
        }
        self.on_late_data(h, data.len() as u64, out)
    }

    /// DATA on a stream that is not collecting a body (§5.1): fine while the client's
    /// side of an answered stream is open; on a stream the client closed, STREAM_CLOSED;
    /// on one we reset, late and ignored.
    fn on_late_data(
        &mut self,
        h: FrameHeader,
        len: u64,
        out: &mut Vec<u8>,
    ) -> Result<(), ErrorCode> {
        let Some(s) = self
            .streams
            .iter_mut()
            .chain(self.half_closed.iter_mut())
            .find(|s| s.id == h.stream)
        else {
            if self.reset_by_us.contains(&h.stream) {
                return Ok(());
            }
            return Err(ErrorCode::StreamClosed);
        };
        if s.remote_closed {
            self.reset(out, h.stream, ErrorCode::StreamClosed);
            return Ok(());
        }
        let end = h.has(flag::END_STREAM);
        if let Some(left) = s.body_left.as_mut() {
            if len > *left || (end && len != *left) {
                self.reset(out, h.stream, ErrorCode::ProtocolError);
                return Ok(());
            }
            *left -= len;
        }
        s.remote_closed = end;
        if end {
            self.half_closed.retain(|s| s.id != h.stream);
        }
        Ok(())
    }

    fn on_headers(&mut self, f: Got<'_>, out: &mut Vec<u8>, r: &mut impl Responder) -> Handled {
        let Got(h, p) = f;
        if h.stream == 0 || h.stream % 2 == 0 {
            return Err(ErrorCode::ProtocolError);
        }
        let mut frag = unpad(h, p)?;
        if h.has(flag::PRIORITY) {
            if frag.len() >= 5 && depends_on(frag) == h.stream {
                // A stream cannot depend on itself. Its header block is not decoded, so
                // HPACK state is lost: a connection error, not a stream error.
                return Err(ErrorCode::ProtocolError);
            }
            frag = frag.get(5..).ok_or(ErrorCode::FrameSizeError)?;
        }
        let end_stream = h.has(flag::END_STREAM);
        let trailers = if h.stream <= self.last_stream {
            // Trailers of a request still sending its body; any other HEADERS on an
            // old stream is on a closed one (§5.1).
            let open = self.pending.iter().any(|q| q.id == h.stream)
                || self
                    .streams
                    .iter()
                    .any(|s| s.id == h.stream && !s.remote_closed);
            if !(open && end_stream) {
                return Err(ErrorCode::StreamClosed);
            }
            true
        } else {
            if self.peer_goaway {
                return Err(ErrorCode::ProtocolError);
            }
            self.last_stream = h.stream;
            false
        };
        if h.has(flag::END_HEADERS) {
            return self.on_block(h.stream, end_stream, trailers, frag, out, r);
        }
        if frag.len() > MAX_HEADER_BLOCK_BYTES {
            return Err(ErrorCode::EnhanceYourCalm);
        }
        self.block.clear();
        self.block.extend_from_slice(frag);
        self.cont = Some(Continuation {
            stream: h.stream,
            end_stream,
            trailers,
        });
        Ok(())
    }

    /// A complete header block: decoded (always, to keep HPACK in step), then a
    /// request is validated and answered.
    fn on_block(
        &mut self,
        stream: u32,
        end_stream: bool,
        trailers: bool,
        block: &[u8],
        out: &mut Vec<u8>,
        r: &mut impl Responder,
    ) -> Result<(), ErrorCode> {
        self.field_buf.clear();
        self.fields.clear();
        let (field_buf, fields) = (&mut self.field_buf, &mut self.fields);
        let decoded = self.decoder.decode(block, FieldMode::All, |n, v| {
            let a = field_buf.len();
            field_buf.extend_from_slice(n);
            let b = field_buf.len();
            field_buf.extend_from_slice(v);
            fields.push((a..b, b..field_buf.len()));
        });
        let too_large = match decoded {
            Ok(()) => false,
            Err(HpackError::HeaderListTooLarge(_)) => true,
            Err(_) => return Err(ErrorCode::CompressionError),
        };
        if trailers {
            if let Some(k) = self.pending.iter().position(|q| q.id == stream) {
                let q = self.pending.swap_remove(k);
                self.answer_pending(q, out, r);
            } else if let Some(s) = self.streams.iter_mut().find(|s| s.id == stream) {
                s.remote_closed = true;
            }
            self.half_closed.retain(|s| s.id != stream);
            return Ok(());
        }
        if self.streams.len() + self.pending.len() + self.half_closed.len()
            >= MAX_CONCURRENT_STREAMS as usize
        {
            self.rst(out, stream, ErrorCode::RefusedStream);
            return Ok(());
        }
        if too_large {
            self.answer_refused(stream, 431, end_stream, out, r);
            return Ok(());
        }
        let Some((method, path)) = validate(&self.field_buf, &self.fields) else {
            // §8.1.1: a malformed request is a stream error.
            self.reset(out, stream, ErrorCode::ProtocolError);
            return Ok(());
        };
        if !end_stream && r.wants_body(&self.field_buf[method.clone()]) {
            self.pending.push(Pending {
                id: stream,
                buf: self.field_buf.clone(),
                fields: self.fields.clone(),
                method,
                path,
                body: Vec::new(),
                declared: content_length(&self.field_buf, &self.fields),
            });
            return Ok(());
        }
        self.head.clear();
        let req = Request {
            method: &self.field_buf[method],
            path: &self.field_buf[path],
            body: &[],
            buf: &self.field_buf,
            fields: &self.fields,
        };
        let body = r.respond(&req, &mut self.head);
        self.start_response(stream, end_stream, body, out);
        if !end_stream {
            let declared = content_length(&self.field_buf, &self.fields);
            if let Some(s) = self
                .streams
                .iter_mut()
                .chain(self.half_closed.iter_mut())
                .find(|s| s.id == stream)
            {
                s.body_left = declared;
            }
        }
        Ok(())
    }

    /// Answers a request whose body is complete.
    fn answer_pending(&mut self, q: Pending, out: &mut Vec<u8>, r: &mut impl Responder) {
        self.head.clear();
        let req = Request {
            method: &q.buf[q.method.clone()],
            path: &q.buf[q.path.clone()],
            body: &q.body,
            buf: &q.buf,
            fields: &q.fields,
        };
        let body = r.respond(&req, &mut self.head);
        self.start_response(q.id, true, body, out);
    }

    /// Answers `status` without looking at the request (431, 413).
    fn answer_refused(
        &mut self,
        stream: u32,
        status: u16,
        end_stream: bool,
        out: &mut Vec<u8>,
        r: &mut impl Responder,
    ) {
        self.head.clear();
        let body = r.refuse(status, &mut self.head);
        self.start(stream, end_stream, true, body, out);
    }

    /// Writes the head in `self.head` and queues the body; `end_stream`: the client's
    /// side is already closed.
    fn start_response(&mut self, stream: u32, end_stream: bool, body: Body, out: &mut Vec<u8>) {
        self.start(stream, end_stream, false, body, out);
    }

    /// [`Self::start_response`]; `stop_body`: a refusal, whose body the client should
    /// stop sending once it is answered.
    fn start(
        &mut self,
        stream: u32,
        end_stream: bool,
        stop_body: bool,
        body: Body,
        out: &mut Vec<u8>,
    ) {
        self.answered += 1;
        let empty = body_is_empty(&body);
        self.write_head(out, stream, empty);
        if !empty {
            self.streams.push(Stream {
                id: stream,
                window: self.peer_initial_window,
                body,
                remote_closed: end_stream,
                body_left: None,
                stop_body,
            });
        } else if !end_stream && stop_body {
            self.rst(out, stream, ErrorCode::NoError);
        } else if !end_stream {
            // Answered at once, the client's side still open: half-closed (local).
            self.half_closed.push(Stream {
                id: stream,
                window: self.peer_initial_window,
                body: Body::None,
                remote_closed: false,
                body_left: None,
                stop_body: false,
            });
        }
    }

    /// HEADERS then CONTINUATION frames carrying `self.head`, each at most the peer's
    /// frame size.
    fn write_head(&self, out: &mut Vec<u8>, stream: u32, end_stream: bool) {
        let mut chunks = self.head.chunks(self.peer_max_frame.max(1)).peekable();
        let mut first = true;
        let es = if end_stream { flag::END_STREAM } else { 0 };
        if self.head.is_empty() {
            frame::write_header(out, 0, kind::HEADERS, flag::END_HEADERS | es, stream);
            return;
        }
        while let Some(c) = chunks.next() {
            let eh = if chunks.peek().is_none() {
                flag::END_HEADERS
            } else {
                0
            };
            let (k, f) = if first {
                (kind::HEADERS, eh | es)
            } else {
                (kind::CONTINUATION, eh)
            };
            first = false;
            frame::write_header(out, c.len(), k, f, stream);
            out.extend_from_slice(c);
        }
    }

    fn reset(&mut self, out: &mut Vec<u8>, stream: u32, code: ErrorCode) {
        self.streams.retain(|s| s.id != stream);
        self.pending.retain(|s| s.id != stream);
        self.half_closed.retain(|s| s.id != stream);
        self.rst(out, stream, code);
    }

    /// Writes RST_STREAM and remembers the stream as reset by us.
    fn rst(&mut self, out: &mut Vec<u8>, stream: u32, code: ErrorCode) {
        frame::write_rst_stream(out, stream, code.to_u32());
        if self.reset_by_us.len() >= RESET_MEMORY {
            self.reset_by_us.pop_front();
        }
        self.reset_by_us.push_back(stream);
    }

    fn on_settings(&mut self, f: Got<'_>, out: &mut Vec<u8>) -> Handled {
        let Got(h, p) = f;
        if h.stream != 0 {
            return Err(ErrorCode::ProtocolError);
        }
        if h.has(flag::ACK) {
            return if p.is_empty() {
                Ok(())
            } else {
                Err(ErrorCode::FrameSizeError)
            };
        }
        if p.len() % 6 != 0 {
            return Err(ErrorCode::FrameSizeError);
        }
        for pair in p.chunks_exact(6) {
            let id = u16::from_be_bytes([pair[0], pair[1]]);
            let v = u32::from_be_bytes([pair[2], pair[3], pair[4], pair[5]]);
            match id {
                setting::ENABLE_PUSH if v > 1 => return Err(ErrorCode::ProtocolError),
                setting::INITIAL_WINDOW_SIZE => {
                    if i64::from(v) > MAX_WINDOW {
                        return Err(ErrorCode::FlowControlError);
                    }
                    // §6.9.2: open streams' windows move by the difference.
                    let delta = i64::from(v) - self.peer_initial_window;
                    for s in &mut self.streams {
                        s.window += delta;
                        if s.window > MAX_WINDOW {
                            return Err(ErrorCode::FlowControlError);
                        }
                    }
                    self.peer_initial_window = i64::from(v);
                }
                setting::MAX_FRAME_SIZE => {
                    if !(DEFAULT_MAX_FRAME_SIZE..=MAX_MAX_FRAME_SIZE).contains(&v) {
                        return Err(ErrorCode::ProtocolError);
                    }
                    self.peer_max_frame = v as usize;
                }
                _ => {}
            }
        }
        frame::write_header(out, 0, kind::SETTINGS, flag::ACK, 0);
        Ok(())
    }

    fn on_window_update(&mut self, f: Got<'_>, out: &mut Vec<u8>) -> Handled {
        let Got(h, p) = f;
        let b: [u8; 4] = p.try_into().map_err(|_| ErrorCode::FrameSizeError)?;
        let inc = i64::from(u32::from_be_bytes(b) & 0x7fff_ffff);
        if h.stream == 0 {
            if inc == 0 {
                return Err(ErrorCode::ProtocolError);
            }
            self.conn_window += inc;
            if self.conn_window > MAX_WINDOW {
                return Err(ErrorCode::FlowControlError);
            }
            return Ok(());
        }
        if h.stream > self.last_stream {
            return Err(ErrorCode::ProtocolError);
        }
        if inc == 0 {
            self.reset(out, h.stream, ErrorCode::ProtocolError);
            return Ok(());
        }
        let mut overflow = false;
        if let Some(s) = self
            .streams
            .iter_mut()
            .chain(self.half_closed.iter_mut())
            .find(|s| s.id == h.stream)
        {
            s.window += inc;
            overflow = s.window > MAX_WINDOW;
        }
        if overflow {
            self.reset(out, h.stream, ErrorCode::FlowControlError);
        }
        Ok(())
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
