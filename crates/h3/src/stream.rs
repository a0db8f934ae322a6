//! The client's streams: the request stream's response ([`ResponseReader`]), our own
//! control stream's opening bytes ([`write_control_preface`]), and the peer's
//! unidirectional streams ([`PeerStreams`]: control, QPACK, push, unknown), read the
//! same way on both sides: the server reads a client's with [`Role::Client`].
//!
//! QUIC itself (stream ids, FIN, resets) stays with the caller: these readers are fed
//! a stream's bytes in order and told when it ends.

use volley_h2::hpack::FieldMode;

use crate::error::H3Error;
use crate::frame::{self, Frame, FrameDecoder, PeerSettings};
use crate::qpack;
use crate::varint;

/// Unidirectional stream types (RFC 9114 §6.2, RFC 9204 §4.2).
pub mod uni {
    /// The control stream.
    pub const CONTROL: u64 = 0x00;
    /// A push stream.
    pub const PUSH: u64 = 0x01;
    /// The QPACK encoder stream.
    pub const QPACK_ENCODER: u64 = 0x02;
    /// The QPACK decoder stream.
    pub const QPACK_DECODER: u64 = 0x03;
}

/// What we tell the peer: our field section limit and our QPACK decoder's table
/// capacity; never any blocked streams (see [`qpack::Decoder`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalSettings {
    /// SETTINGS_MAX_FIELD_SECTION_SIZE: the largest response head we decode.
    pub max_field_section_size: usize,
    /// SETTINGS_QPACK_MAX_TABLE_CAPACITY: 0 (the default, no dynamic table) unless
    /// the side runs a decoder stream, as the engine does.
    pub qpack_max_table_capacity: usize,
}

impl Default for LocalSettings {
    fn default() -> Self {
        LocalSettings {
            max_field_section_size: 64 << 10,
            qpack_max_table_capacity: 0,
        }
    }
}

impl LocalSettings {
    /// The QPACK decoder these settings promise.
    pub fn qpack_decoder(&self) -> qpack::Decoder {
        qpack::Decoder::with_table(self.max_field_section_size, self.qpack_max_table_capacity)
    }
}

/// Appends the opening of our control stream: its type, then SETTINGS (§6.2.1). The
/// QPACK settings are sent even at their default of 0, so that a reader of a packet
/// capture sees them.
pub fn write_control_preface(out: &mut Vec<u8>, local: &LocalSettings) {
    varint::encode(uni::CONTROL, out);
    frame::write_settings(
        out,
        &[
            (
                frame::setting::QPACK_MAX_TABLE_CAPACITY,
                local.qpack_max_table_capacity as u64,
            ),
            (frame::setting::QPACK_BLOCKED_STREAMS, 0),
            (
                frame::setting::MAX_FIELD_SECTION_SIZE,
                local.max_field_section_size as u64,
            ),
        ],
    );
}

/// Appends a request: HEADERS with `fields` (lower-case names, pseudo-fields first),
/// then one DATA frame with `body` if it is not empty. The caller finishes the
/// stream after writing it.
pub fn write_request(out: &mut Vec<u8>, fields: &[(&[u8], &[u8])], body: &[u8]) {
    let mut section = Vec::with_capacity(64);
    qpack::encode_prefix(&mut section);
    for (n, v) in fields {
        qpack::encode_field(n, v, &mut section);
    }
    frame::write_headers(out, &section);
    if !body.is_empty() {
        frame::write_data(out, body);
    }
}

/// What a response stream said, as it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseEvent<'a> {
    /// An informational (1xx) head; the final head is still to come.
    Interim {
        /// Its status.
        status: u16,
    },
    /// The final head.
    Head {
        /// Its status.
        status: u16,
        /// Its `content-encoding`, when content capture is on.
        content_encoding: Option<&'a [u8]>,
    },
    /// A piece of the body, in order.
    Data(&'a [u8]),
    /// A trailer section (its fields are not reported).
    Trailers,
}

/// Where in the response a stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Head,
    Body,
    Done,
}

/// Reads one request stream's response (§4.1): HEADERS (after any 1xx heads), DATA,
/// optional trailers; anything else there is an error.
#[derive(Debug, Clone)]
pub struct ResponseReader {
    frames: FrameDecoder,
    phase: Phase,
    /// Decode `content-encoding` as well as `:status`.
    capture_content: bool,
    encoding: Vec<u8>,
}

impl ResponseReader {
    /// A reader for one response; `capture_content` also reports the head's
    /// `content-encoding` (for body decoding).
    pub fn new(local: &LocalSettings, capture_content: bool) -> ResponseReader {
        ResponseReader {
            // A HEADERS payload may carry up to the section limit's worth of fields.
            frames: FrameDecoder::new(local.max_field_section_size),
            phase: Phase::Head,
            capture_content,
            encoding: Vec::new(),
        }
    }

    /// Whether the final head has been seen.
    pub fn has_head(&self) -> bool {
        self.phase != Phase::Head
    }

    /// Feeds the next bytes of request stream `stream_id` (the QUIC id, which QPACK's
    /// acknowledgments name); `on_event` sees what they complete.
    pub fn feed<F>(
        &mut self,
        qpack: &mut qpack::Decoder,
        stream_id: u64,
        bytes: &[u8],
        mut on_event: F,
    ) -> Result<(), H3Error>
    where
        F: FnMut(ResponseEvent<'_>),
    {
        let phase = &mut self.phase;
        let capture = self.capture_content;
        let encoding = &mut self.encoding;
        self.frames.feed(bytes, |f| match f {
            Frame::Headers(section) => match *phase {
                Phase::Head => {
                    let (status, has_encoding) =
                        decode_head(qpack, stream_id, section, capture, encoding)?;
                    if (100..200).contains(&status) {
                        if status == 101 {
                            return Err(H3Error::Message("101 is not allowed in HTTP/3"));
                        }
                        on_event(ResponseEvent::Interim { status });
                    } else {
                        *phase = Phase::Body;
                        on_event(ResponseEvent::Head {
                            status,
                            content_encoding: has_encoding.then_some(&encoding[..]),
                        });
                    }
                    Ok(())
                }
                Phase::Body => {
                    // Trailers: decoded for validity, not reported.
                    qpack.decode(stream_id, section, FieldMode::PseudoOnly, |_, _| {})?;
                    *phase = Phase::Done;
                    on_event(ResponseEvent::Trailers);
                    Ok(())
                }
                Phase::Done => Err(H3Error::FrameUnexpected("HEADERS after trailers")),
            },
            Frame::Data(piece) => match *phase {
                Phase::Body => {
                    on_event(ResponseEvent::Data(piece));
                    Ok(())
                }
                Phase::Head => Err(H3Error::FrameUnexpected("DATA before HEADERS")),
                Phase::Done => Err(H3Error::FrameUnexpected("DATA after trailers")),
            },
            Frame::PushPromise => Err(H3Error::Id("PUSH_PROMISE without MAX_PUSH_ID")),
            _ => Err(H3Error::FrameUnexpected(
                "control frame on a request stream",
            )),
        })
    }

    /// The stream ended (FIN): an error unless it ended after a final head and
    /// between frames.
    pub fn finish(&self) -> Result<(), H3Error> {
        if !self.frames.between_frames() {
            return Err(H3Error::Frame("stream ended inside a frame"));
        }
        if self.phase == Phase::Head {
            return Err(H3Error::Message("stream ended before the response head"));
        }
        Ok(())
    }
}

/// Decodes a head: its status (exactly one valid `:status`), and with `capture` its
/// `content-encoding` into `encoding` (whether there was one).
fn decode_head(
    qpack: &mut qpack::Decoder,
    stream_id: u64,
    section: &[u8],
    capture: bool,
    encoding: &mut Vec<u8>,
) -> Result<(u16, bool), H3Error> {
    let mut status: Option<Option<u16>> = None;
    let mut repeated = false;
    let mut has_encoding = false;
    encoding.clear();
    let mode = if capture {
        FieldMode::All
    } else {
        FieldMode::PseudoOnly
    };
    qpack.decode(stream_id, section, mode, |name, value| {
        if name == b":status" {
            repeated |= status.is_some();
            status = Some(parse_status(value));
        } else if name == b"content-encoding" {
            if has_encoding {
                encoding.extend_from_slice(b", ");
            }
            has_encoding = true;
            encoding.extend_from_slice(value);
        }
    })?;
    match status {
        _ if repeated => Err(H3Error::Message(":status repeated")),
        Some(Some(s)) => Ok((s, has_encoding)),
        Some(None) => Err(H3Error::Message(":status is not three digits")),
        None => Err(H3Error::Message("response head without :status")),
    }
}

fn parse_status(v: &[u8]) -> Option<u16> {
    match v {
        [a @ b'1'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
            Some(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => None,
    }
}

/// What one of the peer's unidirectional streams turned out to be.
#[derive(Debug, Clone)]
enum UniState {
    /// Its type varint is still incomplete (these bytes so far).
    Type(Vec<u8>),
    Control {
        frames: FrameDecoder,
    },
    /// The QPACK encoder stream: its bytes go to our [`qpack::Decoder`].
    Encoder,
    /// The QPACK decoder stream: it acknowledges sections of ours, which use no
    /// dynamic table, so its bytes are dropped; its end is still an error.
    Decoder,
    /// An unknown type (§6.2: ignored).
    Discard,
}

impl UniState {
    /// Its end is H3_CLOSED_CRITICAL_STREAM (RFC 9114 §6.2.1, RFC 9204 §4.2).
    fn critical(&self) -> bool {
        matches!(
            self,
            UniState::Control { .. } | UniState::Encoder | UniState::Decoder
        )
    }
}

/// Something the peer's control stream said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlEvent {
    /// Its SETTINGS arrived.
    Settings(PeerSettings),
    /// GOAWAY: requests on stream ids at or above this one will not be processed (a
    /// server's); pushes at or above this id are not wanted (a client's).
    GoAway(u64),
}

/// Which side of the connection the peer is: the few rules of its unidirectional
/// streams that differ by side (§6.2.2, §7.2.7) follow from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The peer is a client (we serve): it may send MAX_PUSH_ID, never a push stream.
    Client,
    /// The peer is a server (we are the client): it may push only after a MAX_PUSH_ID,
    /// which we never send, and may not send MAX_PUSH_ID itself.
    Server,
}

/// Unidirectional streams a peer may have open at once (control, two QPACK, and a
/// few unknown or grease ones); the server sets quinn's stream limit to the same.
pub const MAX_PEER_UNI_STREAMS: usize = 16;

/// The peer's unidirectional streams of one connection, keyed by QUIC stream id: the
/// one dispatcher of both sides (the engine reads a server's, `volley-server` a
/// client's), the peer's [`Role`] deciding what differs.
#[derive(Debug, Clone)]
pub struct PeerStreams {
    role: Role,
    streams: Vec<(u64, UniState)>,
    control_seen: bool,
    encoder_seen: bool,
    decoder_seen: bool,
    settings: Option<PeerSettings>,
    goaway: Option<u64>,
}

/// Longest control frame we buffer (SETTINGS, GOAWAY, MAX_PUSH_ID: a few bytes each).
const MAX_CONTROL_FRAME_BYTES: usize = 4096;

impl PeerStreams {
    /// The streams of a peer in `role`, none seen yet.
    pub fn new(role: Role) -> PeerStreams {
        PeerStreams {
            role,
            streams: Vec::new(),
            control_seen: false,
            encoder_seen: false,
            decoder_seen: false,
            settings: None,
            goaway: None,
        }
    }

    /// The peer's settings, once its control stream delivered them.
    pub fn settings(&self) -> Option<PeerSettings> {
        self.settings
    }

    /// The lowest GOAWAY identifier received so far.
    pub fn goaway(&self) -> Option<u64> {
        self.goaway
    }

    /// Feeds bytes of the peer's unidirectional stream `id`; `fin` says the stream
    /// ended with them. Returns what its control stream said in these bytes; its
    /// encoder stream's go to `qpack`. A stream that ends is forgotten unless it was
    /// critical (the control or a QPACK stream), whose end is
    /// H3_CLOSED_CRITICAL_STREAM.
    pub fn feed(
        &mut self,
        id: u64,
        bytes: &[u8],
        fin: bool,
        qpack: &mut qpack::Decoder,
        events: &mut Vec<ControlEvent>,
    ) -> Result<(), H3Error> {
        let at = match self.streams.iter().position(|(s, _)| *s == id) {
            Some(i) => i,
            None => {
                if self.streams.len() >= MAX_PEER_UNI_STREAMS {
                    return Err(H3Error::ExcessiveLoad("too many unidirectional streams"));
                }
                self.streams.push((id, UniState::Type(Vec::new())));
                self.streams.len() - 1
            }
        };
        let mut input = bytes;
        if let UniState::Type(partial) = &mut self.streams[at].1 {
            let take = (8 - partial.len()).min(input.len());
            partial.extend_from_slice(&input[..take]);
            match varint::decode(partial) {
                Some((t, n)) => {
                    input = &input[take - (partial.len() - n)..];
                    let state = self.open(t)?;
                    self.streams[at].1 = state;
                }
                None if fin => {
                    self.streams.remove(at);
                    return Ok(());
                }
                None => return Ok(()),
            }
        }
        let (role, settings, goaway) = (self.role, &mut self.settings, &mut self.goaway);
        match &mut self.streams[at].1 {
            UniState::Control { frames } => {
                frames.feed(input, |f| control_frame(role, f, settings, goaway, events))?
            }
            UniState::Encoder => qpack.feed_encoder(input).map_err(H3Error::EncoderStream)?,
            UniState::Decoder | UniState::Discard | UniState::Type(_) => {}
        }
        if fin {
            if self.streams[at].1.critical() {
                return Err(H3Error::ClosedCriticalStream);
            }
            self.streams.remove(at);
        }
        Ok(())
    }

    /// The state of a new stream of type `t`.
    fn open(&mut self, t: u64) -> Result<UniState, H3Error> {
        let once = |seen: &mut bool| {
            if std::mem::replace(seen, true) {
                Err(H3Error::StreamCreation("a second stream of a unique type"))
            } else {
                Ok(())
            }
        };
        Ok(match (t, self.role) {
            (uni::CONTROL, _) => {
                once(&mut self.control_seen)?;
                UniState::Control {
                    frames: FrameDecoder::new(MAX_CONTROL_FRAME_BYTES),
                }
            }
            (uni::QPACK_ENCODER, _) => {
                once(&mut self.encoder_seen)?;
                UniState::Encoder
            }
            (uni::QPACK_DECODER, _) => {
                once(&mut self.decoder_seen)?;
                UniState::Decoder
            }
            // Only servers push (§6.2.2), and only up to a MAX_PUSH_ID (never sent).
            (uni::PUSH, Role::Client) => {
                return Err(H3Error::StreamCreation("push stream from a client"))
            }
            (uni::PUSH, Role::Server) => {
                return Err(H3Error::Id("push stream without MAX_PUSH_ID"))
            }
            _ => UniState::Discard,
        })
    }
}

/// One frame of the control stream: SETTINGS first and once, GOAWAY identifiers never
/// increasing (§5.2), MAX_PUSH_ID from a client only (§7.2.7).
fn control_frame(
    role: Role,
    f: Frame<'_>,
    settings: &mut Option<PeerSettings>,
    goaway: &mut Option<u64>,
    events: &mut Vec<ControlEvent>,
) -> Result<(), H3Error> {
    match (f, settings.is_some()) {
        (Frame::Settings(s), false) => {
            *settings = Some(s);
            events.push(ControlEvent::Settings(s));
            Ok(())
        }
        (_, false) => Err(H3Error::MissingSettings),
        (Frame::Settings(_), true) => Err(H3Error::FrameUnexpected("second SETTINGS")),
        (Frame::GoAway(g), true) => {
            if goaway.is_some_and(|old| g > old) {
                return Err(H3Error::Id("GOAWAY identifier increased"));
            }
            *goaway = Some(g);
            events.push(ControlEvent::GoAway(g));
            Ok(())
        }
        (Frame::CancelPush(_), true) => Ok(()),
        (Frame::MaxPushId(_), true) if role == Role::Client => Ok(()),
        (Frame::MaxPushId(_), true) => Err(H3Error::FrameUnexpected("MAX_PUSH_ID from a server")),
        _ => Err(H3Error::FrameUnexpected(
            "frame not allowed on the control stream",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{setting, write_data, write_goaway, write_headers, write_settings};

    /// A decoder without a table, for streams whose encoder stream says nothing.
    fn nq() -> qpack::Decoder {
        qpack::Decoder::new(1 << 10)
    }

    fn head(fields: &[(&str, &str)]) -> Vec<u8> {
        let mut s = Vec::new();
        qpack::encode_prefix(&mut s);
        for (n, v) in fields {
            qpack::encode_field(n.as_bytes(), v.as_bytes(), &mut s);
        }
        let mut out = Vec::new();
        write_headers(&mut out, &s);
        out
    }

    fn read(bytes: &[u8], read: usize, capture: bool) -> Result<Vec<String>, H3Error> {
        let local = LocalSettings::default();
        let mut q = qpack::Decoder::new(local.max_field_section_size);
        let mut r = ResponseReader::new(&local, capture);
        let mut seen = Vec::new();
        for chunk in bytes.chunks(read) {
            r.feed(&mut q, 0, chunk, |e| {
                seen.push(match e {
                    ResponseEvent::Interim { status } => format!("interim {status}"),
                    ResponseEvent::Head {
                        status,
                        content_encoding,
                    } => format!(
                        "head {status} {}",
                        String::from_utf8_lossy(content_encoding.unwrap_or(b"-"))
                    ),
                    ResponseEvent::Data(d) => format!("data {}", d.len()),
                    ResponseEvent::Trailers => "trailers".into(),
                })
            })?;
        }
        r.finish()?;
        Ok(seen)
    }

    #[test]
    fn a_response_with_interim_head_body_and_trailers() {
        let mut v = head(&[(":status", "103")]);
        v.extend(head(&[(":status", "200"), ("content-encoding", "gzip")]));
        write_data(&mut v, &[1; 10]);
        v.extend(head(&[("x-checksum", "1")]));
        let got = read(&v, 4096, true).unwrap();
        assert_eq!(got, ["interim 103", "head 200 gzip", "data 10", "trailers"]);
        let got = read(&v, 4096, false).unwrap();
        assert_eq!(got[1], "head 200 -");
    }

    #[test]
    fn broken_responses_are_typed() {
        let mut data_first = Vec::new();
        write_data(&mut data_first, b"x");
        assert!(matches!(
            read(&data_first, 64, false),
            Err(H3Error::FrameUnexpected(_))
        ));
        let mut settings = head(&[(":status", "200")]);
        write_settings(&mut settings, &[]);
        assert!(matches!(
            read(&settings, 64, false),
            Err(H3Error::FrameUnexpected(_))
        ));
        assert!(matches!(
            read(&head(&[("server", "x")]), 64, false),
            Err(H3Error::Message(_))
        ));
        assert!(matches!(
            read(&head(&[(":status", "2000")]), 64, false),
            Err(H3Error::Message(_))
        ));
        // Ends before any head, and inside a frame.
        assert!(matches!(read(&[], 64, false), Err(H3Error::Message(_))));
        let mut cut = head(&[(":status", "200")]);
        write_data(&mut cut, &[0; 10]);
        cut.truncate(cut.len() - 1);
        assert!(matches!(read(&cut, 64, false), Err(H3Error::Frame(_))));
    }

    #[test]
    fn peer_streams() {
        let mut p = PeerStreams::new(Role::Server);
        let mut ev = Vec::new();
        let mut control = vec![uni::CONTROL as u8];
        write_settings(&mut control, &[(setting::MAX_FIELD_SECTION_SIZE, 100)]);
        write_goaway(&mut control, 8);
        for b in &control {
            p.feed(3, std::slice::from_ref(b), false, &mut nq(), &mut ev)
                .unwrap();
        }
        assert_eq!(ev.len(), 2);
        assert_eq!(p.goaway(), Some(8));
        assert_eq!(p.settings().unwrap().max_field_section_size, Some(100));
        // Encoder stream with capacity 0, a decoder stream, an unknown stream.
        p.feed(7, &[0x02, 0x20], false, &mut nq(), &mut ev).unwrap();
        p.feed(11, &[0x03, 0x80, 0x01], false, &mut nq(), &mut ev)
            .unwrap();
        p.feed(15, &[0x21, 9, 9, 9], true, &mut nq(), &mut ev)
            .unwrap();
        // A second control stream; the control stream closing; a push stream.
        assert!(matches!(
            p.feed(19, &[0x00], false, &mut nq(), &mut ev),
            Err(H3Error::StreamCreation(_))
        ));
        assert_eq!(
            p.feed(3, &[], true, &mut nq(), &mut ev),
            Err(H3Error::ClosedCriticalStream)
        );
        let mut q = PeerStreams::new(Role::Server);
        assert!(matches!(
            q.feed(3, &[0x01], false, &mut nq(), &mut ev),
            Err(H3Error::Id(_))
        ));
        // A control stream that does not start with SETTINGS.
        let mut q = PeerStreams::new(Role::Server);
        let mut bad = vec![0x00];
        write_goaway(&mut bad, 0);
        assert_eq!(
            q.feed(3, &bad, false, &mut nq(), &mut ev),
            Err(H3Error::MissingSettings)
        );
    }
    #[test]
    fn a_client_may_send_max_push_id_but_not_push() {
        let mut ev = Vec::new();
        let mut s = PeerStreams::new(Role::Client);
        let mut wire = vec![uni::CONTROL as u8];
        write_settings(&mut wire, &[]);
        crate::frame::write_header(&mut wire, crate::frame::kind::MAX_PUSH_ID, 1);
        wire.push(8);
        s.feed(2, &wire, false, &mut nq(), &mut ev).unwrap();
        assert!(matches!(
            s.feed(2, &[], true, &mut nq(), &mut ev),
            Err(H3Error::ClosedCriticalStream)
        ));
        let mut s = PeerStreams::new(Role::Client);
        assert!(matches!(
            s.feed(6, &[uni::PUSH as u8], false, &mut nq(), &mut ev),
            Err(H3Error::StreamCreation(_))
        ));
        let mut s = PeerStreams::new(Role::Client);
        assert!(matches!(
            s.feed(
                2,
                &[uni::CONTROL as u8, 0x00, 0x00],
                false,
                &mut nq(),
                &mut ev
            ),
            Err(H3Error::MissingSettings)
        ));
        // Unknown types are read and dropped; their end is no error, and frees a slot.
        s.feed(10, &[0x21, 1, 2, 3], true, &mut nq(), &mut ev)
            .unwrap();
        // A server may not send MAX_PUSH_ID; either side's decoder stream is critical.
        let mut s = PeerStreams::new(Role::Server);
        assert!(matches!(
            s.feed(3, &wire, false, &mut nq(), &mut ev),
            Err(H3Error::FrameUnexpected(_))
        ));
        for role in [Role::Client, Role::Server] {
            let mut s = PeerStreams::new(role);
            s.feed(7, &[uni::QPACK_DECODER as u8], false, &mut nq(), &mut ev)
                .unwrap();
            assert_eq!(
                s.feed(7, &[], true, &mut nq(), &mut ev),
                Err(H3Error::ClosedCriticalStream),
                "{role:?}"
            );
        }
    }
}
