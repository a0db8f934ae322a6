//! The frames a client sends, each applied to the server's connection state (RFC 9113
//! §6), and the responses the complete requests start. Split from `h2.rs`, which keeps
//! the connection's types, its byte loop and what it sends.

use super::*;

impl H2Server {
    pub(super) fn on_frame(
        &mut self,
        f: Got<'_>,
        out: &mut Vec<u8>,
        r: &mut impl Responder,
    ) -> Handled {
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

    pub(super) fn on_data(
        &mut self,
        f: Got<'_>,
        out: &mut Vec<u8>,
        r: &mut impl Responder,
    ) -> Handled {
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
    pub(super) fn on_late_data(
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

    pub(super) fn on_headers(
        &mut self,
        f: Got<'_>,
        out: &mut Vec<u8>,
        r: &mut impl Responder,
    ) -> Handled {
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
    pub(super) fn on_block(
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
    pub(super) fn answer_pending(&mut self, q: Pending, out: &mut Vec<u8>, r: &mut impl Responder) {
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
    pub(super) fn answer_refused(
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
    pub(super) fn start_response(
        &mut self,
        stream: u32,
        end_stream: bool,
        body: Body,
        out: &mut Vec<u8>,
    ) {
        self.start(stream, end_stream, false, body, out);
    }

    /// [`Self::start_response`]; `stop_body`: a refusal, whose body the client should
    /// stop sending once it is answered.
    pub(super) fn start(
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
    pub(super) fn write_head(&self, out: &mut Vec<u8>, stream: u32, end_stream: bool) {
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

    pub(super) fn reset(&mut self, out: &mut Vec<u8>, stream: u32, code: ErrorCode) {
        self.streams.retain(|s| s.id != stream);
        self.pending.retain(|s| s.id != stream);
        self.half_closed.retain(|s| s.id != stream);
        self.rst(out, stream, code);
    }

    /// Writes RST_STREAM and remembers the stream as reset by us.
    pub(super) fn rst(&mut self, out: &mut Vec<u8>, stream: u32, code: ErrorCode) {
        frame::write_rst_stream(out, stream, code.to_u32());
        if self.reset_by_us.len() >= RESET_MEMORY {
            self.reset_by_us.pop_front();
        }
        self.reset_by_us.push_back(stream);
    }

    pub(super) fn on_settings(&mut self, f: Got<'_>, out: &mut Vec<u8>) -> Handled {
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

    pub(super) fn on_window_update(&mut self, f: Got<'_>, out: &mut Vec<u8>) -> Handled {
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
