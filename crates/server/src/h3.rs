//! HTTP/3 server side (RFC 9114): QUIC through quinn-proto, driven by the worker's
//! own mio loop over one UDP socket.
//!
//! Place in the flow: beside [`crate::h2`], an alternative framing of the same answers.
//! Each event-loop thread owns one UDP socket bound to the server's port number
//! (SO_REUSEPORT: the kernel hashes a client's address and port to one socket, so
//! every datagram of a connection reaches the thread that holds it) and one
//! quinn-proto `Endpoint`. Datagrams in go to the endpoint, which hands them to
//! their connection or offers a new one; after every input the touched connections
//! are *driven*: their events handled, their endpoint events exchanged, their
//! datagrams sent, their next timer noted ([`QuicSide::next_timer`] bounds the
//! worker's poll). Datagrams go through quinn-udp: GSO sends a burst of a connection's
//! datagrams in one `sendmsg` and GRO reads several in one `recvmsg` where the kernel
//! has them (one datagram per call where it has not). A datagram the socket refuses (a
//! full send buffer) is dropped: QUIC's loss recovery sends it again.
//!
//! Requests: a request stream's HEADERS (QPACK, static table only: we advertise no
//! dynamic table) are answered through [`crate::respond::answer_stream`], the same
//! decision as HTTP/1.1 and HTTP/2; GET and HEAD at once, methods that take a body
//! (DAV) at the stream's FIN, with the body bounded by `max_body_bytes` (413 past it).
//! A stream error resets that stream with its code; a connection error closes the
//! connection with its code. Requests in 0-RTT data may only be safe methods; the
//! others get 425 Too Early (RFC 8470). Junk datagrams are dropped by quinn; a client
//! that never finishes its handshake is dropped at the idle timeout.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use mio::net::UdpSocket;
use quinn_proto::{
    ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig, Event, StreamEvent, StreamId,
    VarInt,
};
use volley_h3::server::{RequestEvent, RequestReader};
use volley_h3::stream::{write_control_preface, LocalSettings, PeerStreams, Role};
use volley_h3::{qpack, ErrorCode, H3Error};

use crate::answer::{h2_text, Block, Body, Codec};
use crate::h2::Request;
use crate::respond::{answer_stream, log_stream, Ctx};

/// Largest UDP datagram read or sent.
const MAX_DATAGRAM_BYTES: usize = 65_535;
/// Receive buffer: room for a GRO batch (the kernel coalesces at most 64 segments).
const RX_BYTES: usize = 64 * 1500;
/// Response bytes framed per step (one DATA frame) before quinn takes them.
const CHUNK_BYTES: usize = 16 << 10;
/// Request streams a client may have open at once (as HTTP/2's cap).
pub(crate) const MAX_CONCURRENT_STREAMS: u32 = 128;
/// Datagrams read per readiness event before other work gets a turn; the socket stays
/// readable and the loop comes back (mio's events are edge-triggered, so the rest is
/// read on the next turn of [`QuicSide::on_readable`], called again at once).
const READ_BATCH: usize = 256;

/// The QUIC configuration every thread's endpoint shares.
#[derive(Clone)]
pub(crate) struct QuicConfig {
    pub server: Arc<quinn_proto::ServerConfig>,
    pub endpoint: Arc<EndpointConfig>,
}

impl std::fmt::Debug for QuicConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicConfig").finish_non_exhaustive()
    }
}

/// One request stream: its head and body as they arrive, then its response.
struct Req {
    reader: RequestReader,
    head: Option<Vec<(Vec<u8>, Vec<u8>)>>,
    body: Vec<u8>,
    too_large: bool,
    /// The response is under way (the request is no longer read).
    answered: bool,
    /// Framed response bytes quinn has not taken yet.
    out: Vec<u8>,
    out_pos: usize,
    /// Body bytes still to frame.
    rest: Body,
}

impl Req {
    fn new(max_section: usize) -> Req {
        Req {
            reader: RequestReader::new(max_section),
            head: None,
            body: Vec::new(),
            too_large: false,
            answered: false,
            out: Vec::new(),
            out_pos: 0,
            rest: Body::None,
        }
    }
}

/// One QUIC connection and its HTTP/3 state.
struct H3Conn {
    quic: quinn_proto::Connection,
    peer: SocketAddr,
    client: PeerStreams,
    qpack: qpack::Decoder,
    requests: HashMap<StreamId, Req>,
    control: bool,
    timer: Option<Instant>,
}

/// A thread's HTTP/3 side: its UDP socket, endpoint and connections.
pub(crate) struct QuicSide {
    pub(crate) sock: UdpSocket,
    /// quinn-udp's view of the socket (its GSO and GRO support).
    udp: quinn_udp::UdpSocketState,
    endpoint: Endpoint,
    conns: HashMap<ConnectionHandle, H3Conn>,
    rx: Vec<u8>,
    tx: Vec<u8>,
    max_body: usize,
    max_connections: usize,
    local: LocalSettings,
    touched: Vec<ConnectionHandle>,
    /// Requests answered since the worker last asked.
    answered: u64,
    /// The socket may still hold datagrams (a batch stopped before WouldBlock).
    pub(crate) more: bool,
}

impl QuicSide {
    /// The side over `sock` (bound, non-blocking).
    pub(crate) fn new(
        sock: std::net::UdpSocket,
        config: &QuicConfig,
        max_body: usize,
        max_connections: usize,
    ) -> io::Result<QuicSide> {
        let udp = quinn_udp::UdpSocketState::new((&sock).into())?;
        Ok(QuicSide {
            sock: UdpSocket::from_std(sock),
            // Path MTU discovery only where quinn-udp could forbid fragmentation
            // (a probe that the kernel fragments proves nothing).
            endpoint: Endpoint::new(
                config.endpoint.clone(),
                Some(config.server.clone()),
                !udp.may_fragment(),
                None,
            ),
            udp,
            conns: HashMap::new(),
            rx: vec![0; RX_BYTES],
            tx: Vec::with_capacity(MAX_DATAGRAM_BYTES),
            max_body,
            max_connections,
            local: LocalSettings::default(),
            touched: Vec::new(),
            answered: 0,
            more: false,
        })
    }

    /// Requests answered since the last call.
    pub(crate) fn take_answered(&mut self) -> u64 {
        std::mem::take(&mut self.answered)
    }

    /// The earliest timer of any connection.
    pub(crate) fn next_timer(&self) -> Option<Instant> {
        self.conns.values().filter_map(|c| c.timer).min()
    }

    /// Reads a batch of datagrams and answers what they complete.
    pub(crate) fn on_readable(&mut self, ctx: &mut Ctx) {
        let now = Instant::now();
        self.more = false;
        for _ in 0..READ_BATCH {
            let mut meta = [quinn_udp::RecvMeta::default()];
            let got = {
                let mut bufs = [io::IoSliceMut::new(&mut self.rx)];
                self.udp.recv((&self.sock).into(), &mut bufs, &mut meta)
            };
            match got {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // WouldBlock, or an ICMP error queued by an earlier send: nothing more.
                Err(_) => {
                    self.drive_touched(ctx, now);
                    return;
                }
            }
            let m = meta[0];
            let ecn = m
                .ecn
                .and_then(|e| quinn_proto::EcnCodepoint::from_bits(e as u8));
            let stride = m.stride.max(1);
            let mut at = 0;
            while at < m.len {
                let end = (at + stride).min(m.len);
                let data = BytesMut::from(&self.rx[at..end]);
                at = end;
                self.datagram(ctx, now, m.addr, m.dst_ip, ecn, data);
            }
        }
        self.more = true;
        self.drive_touched(ctx, now);
    }

    /// Hands one datagram to the endpoint.
    fn datagram(
        &mut self,
        ctx: &mut Ctx,
        now: Instant,
        from: SocketAddr,
        local_ip: Option<std::net::IpAddr>,
        ecn: Option<quinn_proto::EcnCodepoint>,
        data: BytesMut,
    ) {
        self.tx.clear();
        match self
            .endpoint
            .handle(now, from, local_ip, ecn, data, &mut self.tx)
        {
            Some(DatagramEvent::ConnectionEvent(h, ev)) => {
                if let Some(c) = self.conns.get_mut(&h) {
                    c.quic.handle_event(ev);
                    self.touch(h);
                }
            }
            Some(DatagramEvent::Response(t)) => self.send(&t),
            Some(DatagramEvent::NewConnection(incoming)) => self.accept(ctx, incoming, now),
            None => {}
        }
    }

    /// Sends the datagrams of `t` (in `self.tx`); a full buffer or an error drops them,
    /// as a lossy path would.
    fn send(&self, t: &quinn_proto::Transmit) {
        let _ = self.udp.send(
            (&self.sock).into(),
            &quinn_udp::Transmit {
                destination: t.destination,
                ecn: t
                    .ecn
                    .and_then(|e| quinn_udp::EcnCodepoint::from_bits(e as u8)),
                contents: &self.tx[..t.size],
                segment_size: t.segment_size,
                src_ip: t.src_ip,
            },
        );
    }

    fn touch(&mut self, h: ConnectionHandle) {
        if !self.touched.contains(&h) {
            self.touched.push(h);
        }
    }

    fn accept(&mut self, ctx: &mut Ctx, incoming: quinn_proto::Incoming, now: Instant) {
        let active = ctx.shared.active.fetch_add(1, Ordering::AcqRel);
        self.tx.clear();
        if active >= self.max_connections {
            ctx.shared.active.fetch_sub(1, Ordering::AcqRel);
            let t = self.endpoint.refuse(incoming, &mut self.tx);
            self.send(&t);
            return;
        }
        let peer = incoming.remote_address();
        match self.endpoint.accept(incoming, now, &mut self.tx, None) {
            Ok((h, quic)) => {
                self.conns.insert(
                    h,
                    H3Conn {
                        quic,
                        peer,
                        client: PeerStreams::new(Role::Client),
                        qpack: self.local.qpack_decoder(),
                        requests: HashMap::new(),
                        control: false,
                        timer: None,
                    },
                );
                self.touch(h);
            }
            Err(e) => {
                ctx.shared.active.fetch_sub(1, Ordering::AcqRel);
                if let Some(t) = e.response {
                    self.send(&t);
                }
            }
        }
    }

    /// Fires every timer due by `now` and drives those connections.
    pub(crate) fn fire_timers(&mut self, ctx: &mut Ctx, now: Instant) {
        let due: Vec<ConnectionHandle> = self
            .conns
            .iter()
            .filter(|(_, c)| c.timer.is_some_and(|t| t <= now))
            .map(|(&h, _)| h)
            .collect();
        for h in due {
            if let Some(c) = self.conns.get_mut(&h) {
                c.quic.handle_timeout(now);
                self.touch(h);
            }
        }
        self.drive_touched(ctx, now);
    }

    /// Closes every connection (server shutdown): CONNECTION_CLOSE sent best effort.
    pub(crate) fn close_all(&mut self, ctx: &mut Ctx) {
        let now = Instant::now();
        for c in self.conns.values_mut() {
            c.quic
                .close(now, VarInt::from_u32(0x100), bytes::Bytes::new());
        }
        let all: Vec<ConnectionHandle> = self.conns.keys().copied().collect();
        for h in all {
            self.transmit(h, now);
        }
        ctx.shared
            .active
            .fetch_sub(self.conns.len(), Ordering::AcqRel);
        self.conns.clear();
    }

    fn drive_touched(&mut self, ctx: &mut Ctx, now: Instant) {
        while let Some(h) = self.touched.pop() {
            self.drive(ctx, h, now);
        }
    }

    /// Handles what quinn has for `h` until it has nothing more.
    fn drive(&mut self, ctx: &mut Ctx, h: ConnectionHandle, now: Instant) {
        for _ in 0..64 {
            let Some(c) = self.conns.get_mut(&h) else {
                return;
            };
            let mut events = Vec::new();
            while let Some(ev) = c.quic.poll() {
                events.push(ev);
            }
            let mut drained = false;
            while let Some(ev) = c.quic.poll_endpoint_events() {
                drained |= ev.is_drained();
                if let Some(back) = self.endpoint.handle_event(h, ev) {
                    c.quic.handle_event(back);
                }
            }
            if drained {
                self.conns.remove(&h);
                ctx.shared.active.fetch_sub(1, Ordering::AcqRel);
                return;
            }
            let idle = events.is_empty();
            for ev in events {
                self.on_event(ctx, h, ev, now);
            }
            self.transmit(h, now);
            if idle {
                break;
            }
        }
        if let Some(c) = self.conns.get_mut(&h) {
            c.timer = c.quic.poll_timeout();
        }
    }

    /// Sends every datagram quinn has ready for `h`.
    fn transmit(&mut self, h: ConnectionHandle, now: Instant) {
        // At most 10 datagrams per GSO send, as quinn's own endpoint does: a burst
        // stays well under the 64 KB a single send may carry.
        let segments = self.udp.max_gso_segments().clamp(1, 10);
        loop {
            let Some(c) = self.conns.get_mut(&h) else {
                return;
            };
            self.tx.clear();
            let Some(t) = c.quic.poll_transmit(now, segments, &mut self.tx) else {
                break;
            };
            self.send(&t);
        }
    }

    fn on_event(&mut self, ctx: &mut Ctx, h: ConnectionHandle, ev: Event, now: Instant) {
        let Some(c) = self.conns.get_mut(&h) else {
            return;
        };
        match ev {
            Event::Connected => open_control(c, &self.local),
            Event::Stream(StreamEvent::Opened { dir }) => {
                let mut opened = Vec::new();
                while let Some(id) = c.quic.streams().accept(dir) {
                    if dir == Dir::Bi {
                        let max = self.local.max_field_section_size + 64;
                        c.requests.insert(id, Req::new(max));
                    }
                    opened.push(id);
                }
                for id in opened {
                    self.read(ctx, h, id, now);
                }
            }
            Event::Stream(StreamEvent::Readable { id }) => self.read(ctx, h, id, now),
            Event::Stream(StreamEvent::Writable { id }) => pump(c, id),
            Event::Stream(StreamEvent::Stopped { id, .. }) => {
                // The client wants no more of this response (§4.1.1).
                if c.requests.remove(&id).is_some() {
                    let _ = c
                        .quic
                        .send_stream(id)
                        .reset(code(ErrorCode::RequestCancelled));
                }
            }
            Event::HandshakeDataReady
            | Event::ConnectionLost { .. }
            | Event::Stream(_)
            | Event::DatagramReceived
            | Event::DatagramsUnblocked => {}
        }
    }

    /// Reads what stream `id` holds and acts on it.
    fn read(&mut self, ctx: &mut Ctx, h: ConnectionHandle, id: StreamId, now: Instant) {
        let Some(c) = self.conns.get_mut(&h) else {
            return;
        };
        if id.dir() == Dir::Uni {
            return read_uni(c, id, now);
        }
        let Some(req) = c.requests.get_mut(&id) else {
            // Answered and forgotten, or reset: its late bytes are dropped.
            let _ = c.quic.recv_stream(id).stop(code(ErrorCode::NoError));
            return;
        };
        let mut recv = c.quic.recv_stream(id);
        if req.answered {
            // Answered at its head (GET, HEAD): the rest of the stream, up to its FIN,
            // is read and dropped, so quinn can retire the stream and give the client
            // its credit back.
            if let Ok(mut chunks) = recv.read(true) {
                while let Ok(Some(_)) = chunks.next(usize::MAX) {}
                let _ = chunks.finalize();
            }
            return;
        }
        let Ok(mut chunks) = recv.read(true) else {
            return;
        };
        let max_body = self.max_body;
        let mut result: Result<(), H3Error> = Ok(());
        let mut fin = false;
        let mut reset = false;
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => {
                    let Req {
                        reader,
                        head,
                        body,
                        too_large,
                        ..
                    } = &mut *req;
                    result =
                        reader.feed(&mut c.qpack, u64::from(id), &chunk.bytes, |ev| match ev {
                            RequestEvent::Head(fields) => *head = Some(fields),
                            RequestEvent::Data(piece) => {
                                if body.len() + piece.len() > max_body {
                                    *too_large = true;
                                } else if !*too_large {
                                    body.extend_from_slice(piece);
                                }
                            }
                        });
                    if result.is_err() {
                        break;
                    }
                }
                Ok(None) => {
                    fin = true;
                    result = req.reader.finish();
                    break;
                }
                Err(quinn_proto::ReadError::Blocked) => break,
                Err(quinn_proto::ReadError::Reset(_)) => {
                    reset = true;
                    break;
                }
            }
        }
        let _ = chunks.finalize();
        if reset {
            c.requests.remove(&id);
            return;
        }
        if let Err(e) = result {
            if e.is_stream_error() {
                c.requests.remove(&id);
                let _ = c.quic.send_stream(id).reset(code(e.code()));
                let _ = c.quic.recv_stream(id).stop(code(e.code()));
            } else {
                c.quic.close(now, code(e.code()), bytes::Bytes::new());
            }
            return;
        }
        let Some(fields) = req.head.as_ref() else {
            return;
        };
        let method = fields
            .iter()
            .find(|(n, _)| n == b":method")
            .map(|(_, v)| v.as_slice());
        let wants_body = method.is_some_and(|m| !matches!(m, b"GET" | b"HEAD"));
        if wants_body && !fin && !req.too_large {
            return;
        }
        let early = c.quic.is_handshaking();
        self.answer(ctx, h, id, early);
    }

    /// Answers the request of stream `id`, whose head (and body, if it takes one) is in.
    fn answer(&mut self, ctx: &mut Ctx, h: ConnectionHandle, id: StreamId, early: bool) {
        let alt = None;
        let Some(c) = self.conns.get_mut(&h) else {
            return;
        };
        let Some(req) = c.requests.get_mut(&id) else {
            return;
        };
        req.answered = true;
        let fields = req.head.take().unwrap_or_default();
        // The fields flattened into one buffer, as the HTTP/2 side keeps them.
        let mut buf = Vec::new();
        let mut spans: Vec<(Range<usize>, Range<usize>)> = Vec::with_capacity(fields.len());
        let (mut method, mut path) = (None, None);
        for (n, v) in &fields {
            let a = buf.len();
            buf.extend_from_slice(n);
            let b = buf.len();
            buf.extend_from_slice(v);
            let span = (a..b, b..buf.len());
            match n.as_slice() {
                b":method" => method = Some(span.1.clone()),
                b":path" => path = Some(span.1.clone()),
                _ => {}
            }
            spans.push(span);
        }
        let mut section = Vec::with_capacity(128);
        let mut block = Block {
            codec: Codec::Qpack,
            out: &mut section,
            alt_svc: alt,
        };
        let body = match (method, path) {
            (Some(m), Some(p)) if !buf[p.clone()].is_empty() => {
                let safe = matches!(
                    &buf[m.clone()],
                    b"GET" | b"HEAD" | b"OPTIONS" | b"PROPFIND" | b"REPORT"
                );
                let r = Request {
                    method: &buf[m],
                    path: &buf[p],
                    body: &req.body,
                    buf: &buf,
                    fields: &spans,
                };
                let refusal = if req.too_large {
                    Some(413)
                } else if early && !safe {
                    Some(425)
                } else {
                    None
                };
                match refusal {
                    Some(status) => {
                        let (body, n) = h2_text(status, &ctx.date, None, None, false, &mut block);
                        log_stream(ctx, c.peer, &r, "HTTP/3.0", status, n);
                        body
                    }
                    None => answer_stream(ctx, c.peer, &r, &mut block, "HTTP/3.0"),
                }
            }
            // A request without :method or :path is malformed (§4.3.1).
            _ => {
                c.requests.remove(&id);
                let e = code(ErrorCode::MessageError);
                let _ = c.quic.send_stream(id).reset(e);
                let _ = c.quic.recv_stream(id).stop(e);
                return;
            }
        };
        req.body = Vec::new();
        volley_h3::server::write_response_head(&mut req.out, &section);
        req.rest = body;
        self.answered += 1;
        pump(c, id);
    }
}

/// Opens our control stream and sends SETTINGS (§6.2.1): no dynamic table, our field
/// section limit.
fn open_control(c: &mut H3Conn, local: &LocalSettings) {
    if c.control {
        return;
    }
    c.control = true;
    let Some(id) = c.quic.streams().open(Dir::Uni) else {
        return;
    };
    let mut wire = Vec::new();
    write_control_preface(&mut wire, local);
    let _ = c.quic.send_stream(id).write(&wire);
}

/// Reads one of the client's unidirectional streams.
fn read_uni(c: &mut H3Conn, id: StreamId, now: Instant) {
    let mut recv = c.quic.recv_stream(id);
    let Ok(mut chunks) = recv.read(true) else {
        return;
    };
    let mut result = Ok(());
    // What the client's control stream says (SETTINGS, GOAWAY) changes nothing here:
    // the server answers every request it reads until the client closes.
    let mut said = Vec::new();
    loop {
        match chunks.next(usize::MAX) {
            Ok(Some(chunk)) => {
                result = c
                    .client
                    .feed(id.index(), &chunk.bytes, false, &mut c.qpack, &mut said);
            }
            Ok(None) => {
                result = c
                    .client
                    .feed(id.index(), &[], true, &mut c.qpack, &mut said);
                break;
            }
            Err(quinn_proto::ReadError::Blocked) => break,
            Err(quinn_proto::ReadError::Reset(_)) => {
                result = c
                    .client
                    .feed(id.index(), &[], true, &mut c.qpack, &mut said);
                break;
            }
        }
        if result.is_err() {
            break;
        }
    }
    let _ = chunks.finalize();
    if let Err(e) = result {
        c.quic.close(now, code(e.code()), bytes::Bytes::new());
    }
}

/// Hands quinn as much of stream `id`'s response as it takes, framing the body one
/// DATA frame at a time, and finishes the stream at its end.
fn pump(c: &mut H3Conn, id: StreamId) {
    let Some(req) = c.requests.get_mut(&id) else {
        return;
    };
    if !req.answered {
        return;
    }
    loop {
        if req.out_pos < req.out.len() {
            match c.quic.send_stream(id).write(&req.out[req.out_pos..]) {
                Ok(n) => req.out_pos += n,
                Err(quinn_proto::WriteError::Blocked) => return,
                Err(_) => {
                    c.requests.remove(&id);
                    return;
                }
            }
            if req.out_pos < req.out.len() {
                return;
            }
        }
        req.out.clear();
        req.out_pos = 0;
        if !frame_chunk(&mut req.rest, &mut req.out) {
            // The file shrank or failed: the promised length cannot be met.
            c.requests.remove(&id);
            let _ = c.quic.send_stream(id).reset(code(ErrorCode::InternalError));
            return;
        }
        if req.out.is_empty() {
            let _ = c.quic.send_stream(id).finish();
            c.requests.remove(&id);
            return;
        }
    }
}

/// Appends the next DATA frame of `rest` to `out` (nothing at its end). False when a
/// file could not be read.
fn frame_chunk(rest: &mut Body, out: &mut Vec<u8>) -> bool {
    match rest {
        Body::None => true,
        Body::Mem(data, pos, end) => {
            let n = end.saturating_sub(*pos).min(CHUNK_BYTES);
            let Some(chunk) = data.get(*pos..*pos + n) else {
                return false;
            };
            volley_h3::frame::write_data(out, chunk);
            *pos += n;
            if *pos >= *end {
                *rest = Body::None;
            }
            true
        }
        Body::File(file, pos, end) => {
            let n = (end.saturating_sub(*pos) as usize).min(CHUNK_BYTES);
            volley_h3::frame::write_header(out, volley_h3::frame::kind::DATA, n);
            let at = out.len();
            out.resize(at + n, 0);
            let mut got = 0;
            while got < n {
                match file.read_at(&mut out[at + got..], *pos + got as u64) {
                    Ok(0) => return false,
                    Ok(k) => got += k,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return false,
                }
            }
            *pos += n as u64;
            if *pos >= *end {
                *rest = Body::None;
            }
            true
        }
    }
}

fn code(c: ErrorCode) -> VarInt {
    VarInt::from_u64(c.to_u64()).unwrap_or(VarInt::from_u32(0x102))
}

/// The QUIC server configuration over the server's TLS options: TLS 1.3 only, ALPN
/// `h3`, 0-RTT accepted (unsafe methods in it get 425), the idle timeout the TCP side
/// uses, at most [`MAX_CONCURRENT_STREAMS`] request streams per connection.
pub(crate) fn quic_config(
    tls: &volley_tls::ServerTls,
    idle: std::time::Duration,
) -> Result<QuicConfig, crate::ServerError> {
    let mut options = tls.clone();
    options.alpn = vec!["h3".to_string()];
    options.versions = volley_tls::VersionPolicy::Tls13;
    let rustls = options.server_config()?;
    let mut rustls = (*rustls).clone();
    // QUIC allows 0 or u32::MAX here (RFC 9001 §4.6.1).
    rustls.max_early_data_size = u32::MAX;
    let crypto = quinn_proto::crypto::rustls::QuicServerConfig::try_from(Arc::new(rustls))
        .map_err(|_| crate::ServerError::Config("no TLS 1.3 cipher suite QUIC can use"))?;
    let mut server = quinn_proto::ServerConfig::with_crypto(Arc::new(crypto));
    let mut transport = quinn_proto::TransportConfig::default();
    transport
        .max_concurrent_bidi_streams(VarInt::from_u32(MAX_CONCURRENT_STREAMS))
        .max_concurrent_uni_streams(VarInt::from_u32(
            volley_h3::stream::MAX_PEER_UNI_STREAMS as u32,
        ))
        .max_idle_timeout(quinn_proto::IdleTimeout::try_from(idle).ok());
    server.transport_config(Arc::new(transport));
    Ok(QuicConfig {
        server: Arc::new(server),
        endpoint: Arc::new(EndpointConfig::default()),
    })
}
