//! What quinn-proto reports for one connection, handled: the handshake's end, the
//! connection's loss (classified into error kinds), the response streams' bytes and
//! the peer's unidirectional streams, and each request's sample at its end.

use quinn_proto::{ConnectionError, Dir, Event, ReadError, StreamEvent, StreamId, VarInt};
use volley_h3::stream::{uni, write_control_preface, ControlEvent, ResponseEvent};
use volley_h3::{ErrorCode, H3Error};

use super::super::streams::{Multiplexed, Reply, State};
use super::{write_more, Flight, H3Worker, ReadEnd};
use crate::decode::{BodyDecoder, SeenCoding};
use crate::{ErrorKind, Sink};

impl<S: Sink> H3Worker<'_, S> {
    pub(super) fn on_quic_event(&mut self, slot: usize, ev: Event) {
        let now = self.core.now_ns();
        match ev {
            Event::Connected => self.connected(slot, now),
            Event::ConnectionLost { reason } => self.lost(slot, reason, now),
            Event::Stream(StreamEvent::Readable { id }) => {
                if id.dir() == Dir::Bi {
                    self.read_response(slot, id, now);
                } else {
                    self.read_uni(slot, id, now);
                }
            }
            Event::Stream(StreamEvent::Opened { dir: Dir::Uni }) => loop {
                let Some(q) = self.conns[slot].quic.as_mut() else {
                    return;
                };
                let Some(id) = q.conn.streams().accept(Dir::Uni) else {
                    break;
                };
                self.read_uni(slot, id, now);
            },
            Event::Stream(StreamEvent::Opened { dir: Dir::Bi }) => {
                // A server may not open request streams (§6.1).
                let e = H3Error::StreamCreation("server-initiated bidirectional stream");
                self.conn_error(slot, e, now);
            }
            Event::Stream(StreamEvent::Writable { id }) => {
                let c = &mut self.conns[slot];
                if let (Some(q), Some(f)) = (c.quic.as_mut(), c.lane.streams.get_mut(&id)) {
                    write_more(&mut q.conn, id, f);
                }
            }
            Event::Stream(StreamEvent::Available { dir: Dir::Bi }) => self.fill(slot, now),
            _ => {}
        }
    }

    /// The handshake completed: note its kind and time, send again what the server
    /// refused as early data, open our control stream and send what waited.
    fn connected(&mut self, slot: usize, now: u64) {
        let c = &mut self.conns[slot];
        let Some(q) = c.quic.as_mut() else { return };
        c.lane.connect_ns = now.saturating_sub(c.lane.connect_start_ns);
        c.lane.last_read_ns = now;
        c.lane.state = State::Ready;
        self.stats.quic_handshakes += 1;
        let accepted = c.early && q.conn.accepted_0rtt();
        if c.early && !accepted {
            // quinn dropped every stream opened in 0-RTT (ids start again at 0):
            // their requests go again, first, keeping their instants.
            self.stats.zero_rtt_rejected += 1;
            let mut again: Vec<Flight> = c.lane.streams.drain().map(|(_, f)| f).collect();
            again.sort_by_key(|f| f.at.sent_ns);
            again.append(&mut c.lane.pending);
            c.lane.pending = again;
        } else if accepted {
            self.stats.early_requests += c.lane.streams.len() as u64;
        }
        let kind = if accepted {
            &mut self.stats.handshake_0rtt
        } else if c.verified {
            &mut self.stats.handshake_full
        } else {
            &mut self.stats.handshake_resumed
        };
        kind.add_ns(c.lane.connect_ns);
        self.core.connector().tls.handshake_done(!c.verified);
        let local = self.core.connector().local;
        let c = &mut self.conns[slot];
        let Some(q) = c.quic.as_mut() else { return };
        if let Some(id) = q.conn.streams().open(Dir::Uni) {
            let mut preface = Vec::new();
            write_control_preface(&mut preface, &local);
            // A dozen bytes always fit the initial stream window.
            let _ = q.conn.send_stream(id).write(&preface);
        }
        if local.qpack_max_table_capacity > 0 {
            // Our decoder stream: the server's encoder learns from it which of its
            // inserts arrived, and may only use those (we allow no blocked streams).
            if let Some(id) = q.conn.streams().open(Dir::Uni) {
                let _ = q.conn.send_stream(id).write(&[uni::QPACK_DECODER as u8]);
                c.decoder_stream = Some(id);
            }
        }
        let pending = std::mem::take(&mut self.conns[slot].lane.pending);
        for f in pending {
            self.submit(slot, f, now);
        }
        self.fill(slot, now);
    }

    /// quinn gave up on the connection: classify why and fail its requests.
    fn lost(&mut self, slot: usize, reason: ConnectionError, now: u64) {
        let handshaking = self.conns[slot].lane.state == State::Connecting;
        let busy =
            !self.conns[slot].lane.streams.is_empty() || !self.conns[slot].lane.pending.is_empty();
        let kind = match &reason {
            ConnectionError::TimedOut => {
                self.stats.idle_timeouts += 1;
                if handshaking {
                    self.stats.handshake_failures += 1;
                    ErrorKind::Connect
                } else {
                    ErrorKind::Timeout
                }
            }
            ConnectionError::TransportError(t) => {
                let code = u64::from(t.code);
                if handshaking {
                    self.stats.handshake_failures += 1;
                }
                if (0x100..0x200).contains(&code) {
                    // A TLS alert (RFC 9001 §4.8): certificate, ALPN, version.
                    self.core.connector().tls.count_class(tls_class(code));
                    ErrorKind::Tls
                } else {
                    self.stats.connection_errors += 1;
                    ErrorKind::Malformed
                }
            }
            ConnectionError::ConnectionClosed(close) => {
                let code = u64::from(close.error_code);
                self.stats.last_close_code = Some(code);
                if handshaking {
                    self.stats.handshake_failures += 1;
                }
                if (0x100..0x200).contains(&code) {
                    self.core.connector().tls.count_class(tls_class(code));
                    ErrorKind::Tls
                } else {
                    if busy {
                        self.stats.peer_closes += 1;
                    }
                    ErrorKind::Closed
                }
            }
            ConnectionError::ApplicationClosed(close) => {
                let code = close.error_code.into_inner();
                self.stats.last_close_code = Some(code);
                if busy {
                    self.stats.peer_closes += 1;
                }
                if ErrorCode::from_u64(code) == ErrorCode::QpackDecompressionFailed {
                    self.stats.qpack_errors += 1;
                }
                ErrorKind::Closed
            }
            ConnectionError::VersionMismatch => {
                self.stats.handshake_failures += 1;
                ErrorKind::Connect
            }
            ConnectionError::Reset => ErrorKind::Reset,
            ConnectionError::LocallyClosed | ConnectionError::CidsExhausted => ErrorKind::Closed,
        };
        if !busy && !handshaking {
            // Idle connection closed (the server's idle timeout): no request lost.
            self.close_with(slot, now, ErrorCode::NoError);
            self.core.deferred.push(slot);
            return;
        }
        self.fail_conn(slot, kind, now);
    }

    /// Reads what arrived on request stream `id`.
    fn read_response(&mut self, slot: usize, id: StreamId, now: u64) {
        let c = &mut self.conns[slot];
        let Some(q) = c.quic.as_mut() else { return };
        let Some(f) = c.lane.streams.get_mut(&id) else {
            // A stream we gave up on (timed out): drop what comes.
            let _ = q.conn.recv_stream(id).stop(VarInt::from_u32(0x10c));
            return;
        };
        let mut recv = q.conn.recv_stream(id);
        let Ok(mut chunks) = recv.read(true) else {
            return;
        };
        let body = &self.body;
        let spares = &mut self.spare_decoders;
        let mut end = ReadEnd::Open;
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => {
                    f.reply.wire_bytes += chunk.bytes.len() as u64;
                    let Flight {
                        reader,
                        at,
                        reply:
                            Reply {
                                status,
                                body_bytes,
                                decode,
                                seen,
                                ..
                            },
                        ..
                    } = &mut *f;
                    let fed =
                        reader.feed(&mut c.qpack, u64::from(id), &chunk.bytes, |ev| match ev {
                            ResponseEvent::Head {
                                status: s,
                                content_encoding,
                            } => {
                                *status = s;
                                if at.first_byte_ns == 0 {
                                    at.first_byte_ns = now;
                                }
                                if body.is_active() {
                                    *seen = content_encoding
                                        .map_or(SeenCoding::Identity, SeenCoding::from_header);
                                    let mut d = spares
                                        .pop()
                                        .unwrap_or_else(|| Box::new(BodyDecoder::new(*body)));
                                    d.start();
                                    *decode = Some(d);
                                }
                            }
                            ResponseEvent::Interim { .. } => {
                                if at.first_byte_ns == 0 {
                                    at.first_byte_ns = now;
                                }
                            }
                            ResponseEvent::Data(piece) => {
                                *body_bytes += piece.len() as u64;
                                if let Some(d) = decode.as_deref_mut() {
                                    d.push(piece, *seen);
                                }
                            }
                            ResponseEvent::Trailers => {}
                        });
                    if let Err(e) = fed {
                        end = ReadEnd::Broken(e);
                        break;
                    }
                }
                Ok(None) => {
                    end = match f.reader.finish() {
                        Ok(()) => ReadEnd::Fin,
                        Err(e) => ReadEnd::Broken(e),
                    };
                    break;
                }
                Err(ReadError::Blocked) => break,
                Err(ReadError::Reset(_)) => {
                    end = ReadEnd::Reset;
                    break;
                }
            }
        }
        let _ = chunks.finalize();
        c.lane.last_read_ns = now;
        self.end_read(slot, id, end, now);
    }

    /// What a read of request stream `id` ended with: the response complete, the stream
    /// reset, or broken (a stream error fails the request, a connection error the
    /// connection); nothing while the stream stays open.
    fn end_read(&mut self, slot: usize, id: StreamId, end: ReadEnd, now: u64) {
        match end {
            ReadEnd::Open => {}
            ReadEnd::Fin => self.finish_stream(slot, id, now),
            ReadEnd::Reset => {
                let c = &mut self.conns[slot];
                if let Some(f) = c.lane.streams.remove(&id) {
                    c.qpack.cancel_stream(u64::from(id));
                    self.stats.stream_resets += 1;
                    self.record(f, Some(ErrorKind::Reset), now);
                }
                self.fill(slot, now);
            }
            ReadEnd::Broken(e) if e.is_stream_error() => {
                let c = &mut self.conns[slot];
                if let (Some(q), Some(f)) = (c.quic.as_mut(), c.lane.streams.remove(&id)) {
                    let code =
                        VarInt::from_u64(e.code().to_u64()).unwrap_or(VarInt::from_u32(0x10e));
                    let _ = q.conn.recv_stream(id).stop(code);
                    c.qpack.cancel_stream(u64::from(id));
                    if e.is_qpack() {
                        self.stats.qpack_errors += 1;
                    }
                    self.record(f, Some(ErrorKind::Malformed), now);
                }
                self.fill(slot, now);
            }
            ReadEnd::Broken(e) => self.conn_error(slot, e, now),
        }
    }

    /// Reads what arrived on the peer's unidirectional stream `id`.
    fn read_uni(&mut self, slot: usize, id: StreamId, now: u64) {
        let c = &mut self.conns[slot];
        let Some(q) = c.quic.as_mut() else { return };
        let mut recv = q.conn.recv_stream(id);
        let Ok(mut chunks) = recv.read(true) else {
            return;
        };
        self.control.clear();
        let mut result = Ok(());
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => {
                    result = c.peer.feed(
                        id.index(),
                        &chunk.bytes,
                        false,
                        &mut c.qpack,
                        &mut self.control,
                    );
                }
                Ok(None) => {
                    result = c
                        .peer
                        .feed(id.index(), &[], true, &mut c.qpack, &mut self.control);
                    break;
                }
                Err(ReadError::Blocked) => break,
                // A critical stream reset: the connection cannot go on (§6.2.1).
                Err(ReadError::Reset(_)) => {
                    result = c
                        .peer
                        .feed(id.index(), &[], true, &mut c.qpack, &mut self.control);
                    break;
                }
            }
            if result.is_err() {
                break;
            }
        }
        let _ = chunks.finalize();
        for ev in std::mem::take(&mut self.control) {
            if let ControlEvent::GoAway(_) = ev {
                self.stats.goaways += 1;
                self.conns[slot].going_away = true;
            }
        }
        if let Err(e) = result {
            self.conn_error(slot, e, now);
        }
    }

    /// Stream `id` ended: its sample, and its slot serves the next request.
    fn finish_stream(&mut self, slot: usize, id: StreamId, now: u64) {
        self.complete(slot, id, now);
        self.fill(slot, now);
    }
}

/// The failure class of a QUIC CRYPTO_ERROR (0x100 + TLS alert), in the names the
/// TLS transport uses where the alert says as much.
fn tls_class(code: u64) -> &'static str {
    match code - 0x100 {
        42 | 43 | 44 | 46 | 48 => "unknown_issuer",
        45 => "cert_expired",
        40 => "handshake_failure",
        70 => "protocol_version",
        120 => "alpn_mismatch",
        _ => "quic_crypto",
    }
}
