//! What the peer sends: bytes in (`feed`), cut into frames, each frame (DATA, HEADERS
//! and CONTINUATION, PRIORITY, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE)
//! applied to the connection's state (RFC 9113 §6). Split from `conn.rs` so each file
//! holds one side of the state machine: what is sent and polled there, what is
//! received here.

use super::*;

impl H2Conn {
    /// Consumes received bytes (any split), queueing events and any replies
    /// (SETTINGS ACK, PING ACK, WINDOW_UPDATE). After an error the connection is
    /// dead and every later call returns the same error.
    pub fn feed(&mut self, data: &[u8]) -> Result<(), ConnError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.settings.capture_content && self.events.is_empty() {
            // Every captured byte belongs to an event already polled.
            self.arena.clear();
            self.arena_read = 0;
            self.polled = Polled::Nothing;
        }
        let r = self.feed_inner(data);
        if let Err(e) = &r {
            self.fail(e.clone());
        }
        r
    }

    pub(super) fn fail(&mut self, e: ConnError) {
        if !matches!(e, ConnError::GoAway { .. }) {
            // We accept no server-initiated streams, so the last peer stream is 0.
            frame::write_goaway(&mut self.out, 0, e.code().to_u32());
        }
        self.going_away = true;
        self.failed = Some(e);
    }

    pub(super) fn check_frame_len(&self, h: &FrameHeader) -> Result<(), ConnError> {
        if h.len > self.settings.max_frame_size {
            return Err(ConnError::FrameSize(
                "frame larger than our SETTINGS_MAX_FRAME_SIZE",
            ));
        }
        Ok(())
    }

    pub(super) fn feed_inner(&mut self, mut data: &[u8]) -> Result<(), ConnError> {
        // Complete a frame carried over from the previous call first.
        if !self.inbuf.is_empty() {
            if self.inbuf.len() < HEADER_LEN {
                let take = (HEADER_LEN - self.inbuf.len()).min(data.len());
                self.inbuf.extend_from_slice(&data[..take]);
                data = &data[take..];
            }
            let Some(h) = FrameHeader::parse(&self.inbuf) else {
                return Ok(());
            };
            self.check_frame_len(&h)?;
            let total = HEADER_LEN + h.len as usize;
            let take = (total - self.inbuf.len()).min(data.len());
            self.inbuf.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.inbuf.len() < total {
                return Ok(());
            }
            let frame = std::mem::take(&mut self.inbuf);
            let r = self.process(h, &frame[HEADER_LEN..]);
            self.inbuf = frame;
            self.inbuf.clear();
            r?;
        }
        // Then whole frames straight from the caller's buffer, without copying.
        while let Some(h) = FrameHeader::parse(data) {
            self.check_frame_len(&h)?;
            let total = HEADER_LEN + h.len as usize;
            if data.len() < total {
                break;
            }
            self.process(h, &data[HEADER_LEN..total])?;
            data = &data[total..];
        }
        self.inbuf.extend_from_slice(data);
        Ok(())
    }

    pub(super) fn process(&mut self, h: FrameHeader, payload: &[u8]) -> Result<(), ConnError> {
        let before = self.out.len() - self.out_start;
        self.process_frame(h, payload)?;
        // Only output this frame provoked counts: requests the driver queued
        // without writing are its own business, replies a peer extracts are not.
        let now = self.out.len() - self.out_start;
        if now > before && now > self.settings.max_pending_output_bytes {
            return Err(ConnError::OutputOverflow(
                self.settings.max_pending_output_bytes,
            ));
        }
        Ok(())
    }

    pub(super) fn process_frame(
        &mut self,
        h: FrameHeader,
        payload: &[u8],
    ) -> Result<(), ConnError> {
        if let Some(p) = self.pending_block {
            if h.kind != kind::CONTINUATION || h.stream != p.stream {
                return Err(ConnError::Protocol(
                    "header block interrupted before END_HEADERS",
                ));
            }
        }
        if !self.peer_preface_seen && (h.kind != kind::SETTINGS || h.has(flag::ACK)) {
            return Err(ConnError::Protocol(
                "server preface must start with SETTINGS",
            ));
        }
        match h.kind {
            kind::DATA => self.on_data(h, payload)?,
            kind::HEADERS => self.on_headers(h, payload)?,
            kind::CONTINUATION => self.on_continuation(h, payload)?,
            kind::PRIORITY => self.on_priority(h, payload)?,
            kind::RST_STREAM => self.on_rst_stream(h, payload)?,
            kind::SETTINGS => self.on_settings(h, payload)?,
            kind::PING => self.on_ping(h, payload)?,
            kind::GOAWAY => self.on_goaway(h, payload)?,
            kind::WINDOW_UPDATE => self.on_window_update(h, payload)?,
            kind::PUSH_PROMISE => {
                return Err(ConnError::Protocol(
                    "PUSH_PROMISE although we disabled push",
                ))
            }
            // Unknown frame types are ignored (RFC 9113 §4.1).
            _ => {}
        }
        Ok(())
    }

    /// Where a stream frame belongs: an active stream's index, a stream that is
    /// finished (frames may still be in flight), or an error for a stream that
    /// cannot exist (idle, or server-initiated).
    pub(super) fn locate(&self, id: StreamId) -> Result<Option<usize>, ConnError> {
        if id == 0 {
            return Err(ConnError::Protocol("stream frame on stream 0"));
        }
        if id % 2 == 0 {
            return Err(ConnError::Protocol("frame on a server-initiated stream"));
        }
        if id >= self.next_stream_id {
            return Err(ConnError::Protocol("frame on an idle stream"));
        }
        Ok(self.streams.iter().position(|s| s.id == id))
    }

    /// Resets one stream for a peer error confined to it.
    pub(super) fn stream_error(&mut self, idx: usize, code: ErrorCode) {
        let s = self.streams.swap_remove(idx);
        frame::write_rst_stream(&mut self.out, s.id, code.to_u32());
        self.events
            .push_back(Event::StreamError { stream: s.id, code });
    }

    /// The peer ended its side of the stream.
    pub(super) fn close_remote(&mut self, idx: usize) {
        let s = self.streams.swap_remove(idx);
        if !s.local_closed {
            // The response is complete while our body is still going out: stop
            // sending and tell the server not to wait for the rest.
            frame::write_rst_stream(&mut self.out, s.id, ErrorCode::Cancel.to_u32());
        }
    }

    pub(super) fn on_data(&mut self, h: FrameHeader, payload: &[u8]) -> Result<(), ConnError> {
        let body = strip_padding(&h, payload)?;
        // Every DATA frame counts against the connection window, whatever the
        // stream's state, or the two sides' accounting would drift (§6.9).
        let flow_len = payload.len() as i64;
        self.conn_recv_window -= flow_len;
        if self.conn_recv_window < 0 {
            return Err(ConnError::FlowControl("DATA beyond the connection window"));
        }
        self.conn_recv_unacked += payload.len() as u32;
        if self.conn_recv_unacked > 0
            && self.conn_recv_unacked as i64 >= self.settings.connection_window_size as i64 / 2
        {
            frame::write_window_update(&mut self.out, 0, self.conn_recv_unacked);
            self.conn_recv_window += self.conn_recv_unacked as i64;
            self.conn_recv_unacked = 0;
        }
        let Some(idx) = self.locate(h.stream)? else {
            return Ok(());
        };
        let end_stream = h.has(flag::END_STREAM);
        let s = &mut self.streams[idx];
        if !s.got_final {
            self.stream_error(idx, ErrorCode::ProtocolError);
            return Ok(());
        }
        s.recv_window -= flow_len;
        if s.recv_window < 0 {
            self.stream_error(idx, ErrorCode::FlowControlError);
            return Ok(());
        }
        if !end_stream {
            s.recv_unacked += payload.len() as u32;
            if s.recv_unacked > 0
                && s.recv_unacked as i64 >= self.settings.initial_window_size as i64 / 2
            {
                frame::write_window_update(&mut self.out, s.id, s.recv_unacked);
                s.recv_window += s.recv_unacked as i64;
                s.recv_unacked = 0;
            }
        }
        if self.settings.capture_content {
            self.arena.extend_from_slice(body);
        }
        self.events.push_back(Event::Data {
            stream: h.stream,
            len: body.len(),
            end_stream,
        });
        if end_stream {
            self.close_remote(idx);
        }
        Ok(())
    }

    pub(super) fn on_headers(&mut self, h: FrameHeader, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream == 0 {
            return Err(ConnError::Protocol("HEADERS on stream 0"));
        }
        let mut frag = strip_padding(&h, payload)?;
        if h.has(flag::PRIORITY) {
            // Stream dependency (4) + weight (1): parsed past, priorities ignored.
            frag = frag.get(5..).ok_or(ConnError::FrameSize(
                "HEADERS too short for its priority fields",
            ))?;
        }
        let end_stream = h.has(flag::END_STREAM);
        if h.has(flag::END_HEADERS) {
            return self.on_header_block(h.stream, end_stream, frag);
        }
        self.block.clear();
        self.push_block_fragment(frag)?;
        self.pending_block = Some(PendingBlock {
            stream: h.stream,
            end_stream,
        });
        Ok(())
    }

    /// The encoded block may not grow past twice the decoded-list limit plus one
    /// frame: encoded fields are never much longer than their decoded size, so this
    /// only stops a CONTINUATION flood.
    pub(super) fn push_block_fragment(&mut self, frag: &[u8]) -> Result<(), ConnError> {
        let limit =
            2 * self.settings.max_header_list_size as usize + self.settings.max_frame_size as usize;
        if self.block.len() + frag.len() > limit {
            return Err(ConnError::Protocol("header block larger than our limits"));
        }
        self.block.extend_from_slice(frag);
        Ok(())
    }

    pub(super) fn on_continuation(
        &mut self,
        h: FrameHeader,
        payload: &[u8],
    ) -> Result<(), ConnError> {
        let Some(p) = self.pending_block else {
            return Err(ConnError::Protocol("CONTINUATION without a header block"));
        };
        self.push_block_fragment(payload)?;
        if h.has(flag::END_HEADERS) {
            self.pending_block = None;
            let block = std::mem::take(&mut self.block);
            let r = self.on_header_block(p.stream, p.end_stream, &block);
            self.block = block;
            self.block.clear();
            return r;
        }
        Ok(())
    }

    /// A complete header block: decode it (always, to keep HPACK in step), then
    /// apply it to the stream if that stream is still active.
    pub(super) fn on_header_block(
        &mut self,
        id: StreamId,
        end_stream: bool,
        block: &[u8],
    ) -> Result<(), ConnError> {
        let slot = self.locate(id)?;
        let capture = self.settings.capture_headers;
        let content = self.settings.capture_content;
        let mode = if capture || content {
            FieldMode::All
        } else {
            FieldMode::PseudoOnly
        };
        let mut status: Option<u16> = None;
        let mut bad_pseudo = false;
        let mut fields: Vec<HeaderField> = Vec::new();
        let (field_bufs, field_seen) = (&mut self.field_bufs, &mut self.field_seen);
        if content {
            field_bufs.iter_mut().for_each(Vec::clear);
            *field_seen = [false; 3];
        }
        let decoded = self.decoder.decode(block, mode, |name, value| {
            if content {
                if let Some(i) = CONTENT_FIELDS.iter().position(|f| *f == name) {
                    if field_seen[i] {
                        field_bufs[i].extend_from_slice(b", ");
                    }
                    field_seen[i] = true;
                    field_bufs[i].extend_from_slice(value);
                }
            }
            if name == b":status" {
                if status.is_some() {
                    bad_pseudo = true;
                }
                status = parse_status(value);
                bad_pseudo |= status.is_none();
            } else if name.first() == Some(&b':') {
                bad_pseudo = true;
            }
            if capture {
                fields.push((name.to_vec(), value.to_vec()));
            }
        });
        let Some(idx) = slot else {
            // Finished stream: decoding kept the table in step; nothing else to do.
            return match decoded {
                Err(HpackError::HeaderListTooLarge(_)) | Ok(()) => Ok(()),
                Err(e) => Err(ConnError::Compression(e)),
            };
        };
        match decoded {
            Ok(()) => {}
            Err(HpackError::HeaderListTooLarge(_)) => {
                self.stream_error(idx, ErrorCode::ProtocolError);
                return Ok(());
            }
            Err(e) => return Err(ConnError::Compression(e)),
        }
        let head = Decoded {
            status,
            bad_pseudo,
            fields,
        };
        self.apply_head(idx, id, end_stream, head, capture, content);
        Ok(())
    }

    /// Applies a decoded head to active stream `idx`: a final head or trailers become
    /// events (with the captured content fields and fields), a malformed one a stream
    /// error; an informational head waits for the next.
    pub(super) fn apply_head(
        &mut self,
        idx: usize,
        id: StreamId,
        end_stream: bool,
        head: Decoded,
        capture: bool,
        content: bool,
    ) {
        let Decoded {
            status,
            bad_pseudo,
            fields,
        } = head;
        let s = &mut self.streams[idx];
        if s.got_final {
            // Trailers: must end the stream and carry no pseudo-fields (§8.1).
            if !end_stream || status.is_some() || bad_pseudo {
                self.stream_error(idx, ErrorCode::ProtocolError);
                return;
            }
            self.events.push_back(Event::Trailers { stream: id });
        } else {
            let status = match status {
                Some(st) if !bad_pseudo => st,
                _ => {
                    self.stream_error(idx, ErrorCode::ProtocolError);
                    return;
                }
            };
            if (100..200).contains(&status) {
                // Informational: another head follows; it cannot end the stream.
                if end_stream {
                    self.stream_error(idx, ErrorCode::ProtocolError);
                }
                return;
            }
            s.got_final = true;
            if content {
                for i in 0..CONTENT_FIELDS.len() {
                    let len = if self.field_seen[i] {
                        // Below ABSENT: the header list limit bounds every value.
                        self.field_bufs[i].len() as u32
                    } else {
                        ABSENT
                    };
                    self.arena.extend_from_slice(&len.to_be_bytes());
                    self.arena.extend_from_slice(&self.field_bufs[i]);
                }
            }
            self.events.push_back(Event::Headers {
                stream: id,
                status,
                end_stream,
            });
        }
        if capture {
            self.captured.push_back((id, fields));
        }
        if end_stream {
            self.close_remote(idx);
        }
    }

    pub(super) fn on_priority(&mut self, h: FrameHeader, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream == 0 {
            return Err(ConnError::Protocol("PRIORITY on stream 0"));
        }
        if payload.len() != 5 {
            // A stream error (§6.3); only an active stream has anything to reset.
            if let Some(idx) = self.streams.iter().position(|s| s.id == h.stream) {
                self.stream_error(idx, ErrorCode::FrameSizeError);
            }
        }
        Ok(())
    }

    pub(super) fn on_rst_stream(
        &mut self,
        h: FrameHeader,
        payload: &[u8],
    ) -> Result<(), ConnError> {
        let code: [u8; 4] = payload
            .try_into()
            .map_err(|_| ConnError::FrameSize("RST_STREAM payload is not 4 bytes"))?;
        if let Some(idx) = self.locate(h.stream)? {
            let s = self.streams.swap_remove(idx);
            self.events.push_back(Event::StreamReset {
                stream: s.id,
                code: ErrorCode::from_u32(u32::from_be_bytes(code)),
            });
        }
        Ok(())
    }

    pub(super) fn on_settings(&mut self, h: FrameHeader, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream != 0 {
            return Err(ConnError::Protocol("SETTINGS on a stream"));
        }
        if h.has(flag::ACK) {
            if !payload.is_empty() {
                return Err(ConnError::FrameSize("SETTINGS ACK with a payload"));
            }
            return Ok(());
        }
        if payload.len() % 6 != 0 {
            return Err(ConnError::FrameSize("SETTINGS payload not a multiple of 6"));
        }
        for pair in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([pair[0], pair[1]]);
            let value = u32::from_be_bytes([pair[2], pair[3], pair[4], pair[5]]);
            match id {
                setting::ENABLE_PUSH if value > 1 => {
                    return Err(ConnError::Protocol("SETTINGS_ENABLE_PUSH not 0 or 1"))
                }
                setting::MAX_CONCURRENT_STREAMS => self.peer_max_concurrent = value,
                setting::INITIAL_WINDOW_SIZE => {
                    if value as i64 > MAX_WINDOW {
                        return Err(ConnError::FlowControl(
                            "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
                        ));
                    }
                    // The change applies to every open stream's window (§6.9.2).
                    let delta = value as i64 - self.peer_initial_window as i64;
                    for s in &mut self.streams {
                        s.send_window += delta;
                        if s.send_window > MAX_WINDOW {
                            return Err(ConnError::FlowControl(
                                "SETTINGS_INITIAL_WINDOW_SIZE overflows a stream window",
                            ));
                        }
                    }
                    self.peer_initial_window = value;
                }
                setting::MAX_FRAME_SIZE => {
                    if !(DEFAULT_MAX_FRAME_SIZE..=MAX_MAX_FRAME_SIZE).contains(&value) {
                        return Err(ConnError::Protocol("SETTINGS_MAX_FRAME_SIZE out of range"));
                    }
                    self.peer_max_frame = value;
                }
                setting::MAX_HEADER_LIST_SIZE => self.peer_max_header_list = Some(value),
                // HEADER_TABLE_SIZE: our encoder never uses a dynamic table, so any
                // size (even 0) needs nothing from us. Unknown ids are ignored.
                _ => {}
            }
        }
        self.peer_preface_seen = true;
        frame::write_header(&mut self.out, 0, kind::SETTINGS, flag::ACK, 0);
        self.events.push_back(Event::PeerSettings);
        self.flush_bodies();
        Ok(())
    }

    pub(super) fn on_ping(&mut self, h: FrameHeader, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream != 0 {
            return Err(ConnError::Protocol("PING on a stream"));
        }
        let data: [u8; 8] = payload
            .try_into()
            .map_err(|_| ConnError::FrameSize("PING payload is not 8 bytes"))?;
        if !h.has(flag::ACK) {
            frame::write_ping(&mut self.out, true, data);
            self.events.push_back(Event::Ping);
        }
        Ok(())
    }

    pub(super) fn on_goaway(&mut self, h: FrameHeader, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream != 0 {
            return Err(ConnError::Protocol("GOAWAY on a stream"));
        }
        if payload.len() < 8 {
            return Err(ConnError::FrameSize("GOAWAY shorter than 8 bytes"));
        }
        let last_stream =
            u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & 0x7fff_ffff;
        let code = ErrorCode::from_u32(u32::from_be_bytes([
            payload[4], payload[5], payload[6], payload[7],
        ]));
        self.going_away = true;
        // Streams above last_stream were never processed: report them refused so the
        // driver can retry them on a new connection.
        let mut i = 0;
        while i < self.streams.len() {
            if self.streams[i].id > last_stream {
                let s = self.streams.swap_remove(i);
                self.events.push_back(Event::StreamReset {
                    stream: s.id,
                    code: ErrorCode::RefusedStream,
                });
            } else {
                i += 1;
            }
        }
        self.events.push_back(Event::GoAway { last_stream, code });
        if code != ErrorCode::NoError {
            return Err(ConnError::GoAway { code, last_stream });
        }
        Ok(())
    }

    pub(super) fn on_window_update(
        &mut self,
        h: FrameHeader,
        payload: &[u8],
    ) -> Result<(), ConnError> {
        let raw: [u8; 4] = payload
            .try_into()
            .map_err(|_| ConnError::FrameSize("WINDOW_UPDATE payload is not 4 bytes"))?;
        let inc = (u32::from_be_bytes(raw) & 0x7fff_ffff) as i64;
        if h.stream == 0 {
            if inc == 0 {
                return Err(ConnError::Protocol("connection WINDOW_UPDATE of 0"));
            }
            self.conn_send_window += inc;
            if self.conn_send_window > MAX_WINDOW {
                return Err(ConnError::FlowControl("connection window above 2^31-1"));
            }
        } else if let Some(idx) = self.locate(h.stream)? {
            if inc == 0 {
                self.stream_error(idx, ErrorCode::ProtocolError);
                return Ok(());
            }
            let s = &mut self.streams[idx];
            s.send_window += inc;
            if s.send_window > MAX_WINDOW {
                self.stream_error(idx, ErrorCode::FlowControlError);
                return Ok(());
            }
        }
        self.flush_bodies();
        Ok(())
    }
}
