//! The server's streams: a request stream read into its head and body
//! ([`RequestReader`]), the client's unidirectional streams ([`ClientStreams`]) and a
//! response head written ([`write_response_head`]).
//!
//! Place in the flow: `volley-server`'s QUIC loop feeds these readers the bytes
//! quinn-proto hands it, in stream order, and tells them when a stream ends; the
//! answer itself is the server's. The client side's readers (`stream`) differ in what
//! a peer may send: a client may send MAX_PUSH_ID and may not open push streams, and
//! a request stream carries HEADERS, DATA and trailers rather than a response.

use volley_h2::hpack::FieldMode;

use crate::error::H3Error;
use crate::frame::{self, Frame, FrameDecoder};
use crate::qpack::{self, EncoderStreamReader};
use crate::stream::uni;
use crate::varint;

/// Appends a response's HEADERS frame: `section` is a QPACK field section without
/// its prefix (fields appended with [`qpack::encode_field`]), which this adds.
pub fn write_response_head(out: &mut Vec<u8>, section: &[u8]) {
    let mut whole = Vec::with_capacity(section.len() + 2);
    qpack::encode_prefix(&mut whole);
    whole.extend_from_slice(section);
    frame::write_headers(out, &whole);
}

/// A decoded field section: (name, value) pairs in order.
pub type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// What a request stream said, as it arrives.
#[derive(Debug, PartialEq, Eq)]
pub enum RequestEvent<'a> {
    /// The request head, decoded: (name, value) pairs in order, pseudo-fields first.
    Head(Fields),
    /// A piece of the request body.
    Data(&'a [u8]),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Head,
    Body,
    Trailers,
}

/// Reads one request stream: HEADERS, then DATA, then optional trailers (ignored);
/// anything else in the wrong place is H3_FRAME_UNEXPECTED (§4.1), a broken section
/// a QPACK error. Field names must be lower-case (§4.2); pseudo-fields are checked
/// by the caller, which knows which it needs.
#[derive(Debug, Clone)]
pub struct RequestReader {
    frames: FrameDecoder,
    phase: Phase,
}

impl RequestReader {
    /// A reader whose HEADERS may be up to `max_section_bytes` long (our advertised
    /// SETTINGS_MAX_FIELD_SECTION_SIZE plus QPACK's overhead is the natural choice).
    pub fn new(max_section_bytes: usize) -> RequestReader {
        RequestReader {
            frames: FrameDecoder::new(max_section_bytes),
            phase: Phase::Head,
        }
    }

    /// Whether the head has been read.
    pub fn has_head(&self) -> bool {
        self.phase != Phase::Head
    }

    /// Feeds the next bytes of the stream, reporting the head and body pieces.
    pub fn feed<F>(
        &mut self,
        decoder: &mut qpack::Decoder,
        input: &[u8],
        mut on_event: F,
    ) -> Result<(), H3Error>
    where
        F: FnMut(RequestEvent<'_>),
    {
        let phase = &mut self.phase;
        self.frames.feed(input, |f| match (f, *phase) {
            (Frame::Headers(section), Phase::Head) => {
                let mut fields = Vec::new();
                let mut upper = false;
                decoder.decode(section, FieldMode::All, |n, v| {
                    upper |= n.iter().any(u8::is_ascii_uppercase);
                    fields.push((n.to_vec(), v.to_vec()));
                })?;
                if upper {
                    return Err(H3Error::Message("upper-case field name"));
                }
                *phase = Phase::Body;
                on_event(RequestEvent::Head(fields));
                Ok(())
            }
            (Frame::Data(piece), Phase::Body) => {
                on_event(RequestEvent::Data(piece));
                Ok(())
            }
            (Frame::Headers(_), Phase::Body) => {
                *phase = Phase::Trailers;
                Ok(())
            }
            (Frame::Data(_), Phase::Head) => Err(H3Error::FrameUnexpected("DATA before HEADERS")),
            (Frame::Data(_) | Frame::Headers(_), Phase::Trailers) => {
                Err(H3Error::FrameUnexpected("frame after trailers"))
            }
            _ => Err(H3Error::FrameUnexpected(
                "frame not allowed on a request stream",
            )),
        })
    }

    /// The stream ended (FIN): an error when it ended before its head or inside a
    /// frame (H3_REQUEST_INCOMPLETE, §4.1.2).
    pub fn finish(&self) -> Result<(), H3Error> {
        if self.phase == Phase::Head || !self.frames.between_frames() {
            return Err(H3Error::Message("request stream ended early"));
        }
        Ok(())
    }
}

/// What one of the client's unidirectional streams turned out to be.
#[derive(Debug, Clone)]
enum UniState {
    /// Its type varint is still incomplete (these bytes so far).
    Type(Vec<u8>),
    Control {
        frames: FrameDecoder,
        settings: bool,
    },
    Encoder(EncoderStreamReader),
    /// The QPACK decoder stream: it acknowledges sections of ours, which use no
    /// dynamic table, so its bytes are dropped; its end is still an error.
    Decoder,
    /// An unknown type (§6.2: ignored).
    Discard,
}

/// The client's unidirectional streams of one connection, keyed by QUIC stream id.
#[derive(Debug, Clone, Default)]
pub struct ClientStreams {
    streams: Vec<(u64, UniState)>,
    control_seen: bool,
    encoder_seen: bool,
    decoder_seen: bool,
    /// The client's GOAWAY (a push id; we never push, so it only says "closing").
    goaway: bool,
}

/// Longest control frame buffered (SETTINGS, GOAWAY, MAX_PUSH_ID: a few bytes each).
const MAX_CONTROL_FRAME_BYTES: usize = 4096;
/// Unidirectional streams a client may have open at once (control, two QPACK, and
/// a few unknown or grease ones); quinn's stream limit is set to the same.
pub const MAX_CLIENT_UNI_STREAMS: usize = 16;

impl ClientStreams {
    /// Whether the client's control stream said GOAWAY.
    pub fn goaway(&self) -> bool {
        self.goaway
    }

    /// Feeds bytes of the client's unidirectional stream `id`; `fin` says the stream
    /// ended with them. A stream that ends is forgotten unless it was critical (the
    /// control or a QPACK stream), whose end is H3_CLOSED_CRITICAL_STREAM.
    pub fn feed(&mut self, id: u64, bytes: &[u8], fin: bool) -> Result<(), H3Error> {
        let at = match self.streams.iter().position(|(s, _)| *s == id) {
            Some(i) => i,
            None => {
                if self.streams.len() >= MAX_CLIENT_UNI_STREAMS {
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
        let goaway = &mut self.goaway;
        let critical = match &mut self.streams[at].1 {
            UniState::Control { frames, settings } => {
                frames.feed(input, |f| match (f, *settings) {
                    (Frame::Settings(_), false) => {
                        *settings = true;
                        Ok(())
                    }
                    (_, false) => Err(H3Error::MissingSettings),
                    (Frame::Settings(_), true) => Err(H3Error::FrameUnexpected("second SETTINGS")),
                    (Frame::GoAway(_), true) => {
                        *goaway = true;
                        Ok(())
                    }
                    (Frame::MaxPushId(_) | Frame::CancelPush(_), true) => Ok(()),
                    _ => Err(H3Error::FrameUnexpected(
                        "frame not allowed on the control stream",
                    )),
                })?;
                true
            }
            UniState::Encoder(r) => {
                r.feed(input).map_err(H3Error::EncoderStream)?;
                true
            }
            UniState::Decoder => true,
            UniState::Discard | UniState::Type(_) => false,
        };
        if fin {
            if critical {
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
        Ok(match t {
            uni::CONTROL => {
                once(&mut self.control_seen)?;
                UniState::Control {
                    frames: FrameDecoder::new(MAX_CONTROL_FRAME_BYTES),
                    settings: false,
                }
            }
            uni::QPACK_ENCODER => {
                once(&mut self.encoder_seen)?;
                UniState::Encoder(EncoderStreamReader::default())
            }
            uni::QPACK_DECODER => {
                once(&mut self.decoder_seen)?;
                UniState::Decoder
            }
            // Only servers push (§6.2.2).
            uni::PUSH => return Err(H3Error::StreamCreation("push stream from a client")),
            _ => UniState::Discard,
        })
    }
}

/// Fuzz harness (the `h3_server_streams` target in `fuzz/`, and its seeded short run in
/// `volley-server`'s tests): any client bytes into a request stream's reader and into
/// the client's unidirectional streams. The first byte picks the read size, the second
/// the field section limit; must never panic, and never report more body than was fed
/// or a head past the limit.
#[doc(hidden)]
pub fn fuzz_streams(data: &[u8]) {
    let [size, limit, rest @ ..] = data else {
        return;
    };
    let step = usize::from(size % 64) + 1;
    let max = [64, 1024, 16 << 10][usize::from(limit % 3)];
    let mut decoder = qpack::Decoder::new(max);
    let mut reader = RequestReader::new(max + 64);
    let mut body = 0usize;
    let mut ok = true;
    for chunk in rest.chunks(step) {
        let r = reader.feed(&mut decoder, chunk, |ev| match ev {
            RequestEvent::Head(fields) => {
                let n: usize = fields
                    .iter()
                    .map(|(n, v)| n.len() + v.len() + qpack::FIELD_OVERHEAD)
                    .sum();
                assert!(n <= max, "a head past the limit");
            }
            RequestEvent::Data(d) => body += d.len(),
        });
        if r.is_err() {
            ok = false;
            break;
        }
    }
    assert!(body <= rest.len(), "more body than was fed");
    if ok {
        let _ = reader.finish();
    }
    let mut client = ClientStreams::default();
    for (i, chunk) in rest.chunks(step).enumerate() {
        // Spread over a few stream ids, so unique-type and count checks are reached.
        let id = u64::from(chunk[0] % 5) * 4 + 2;
        if client.feed(id, chunk, i % 7 == 6).is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{write_data, write_settings};
    use crate::stream::{write_request, LocalSettings};

    fn read(bytes: &[u8], step: usize) -> Result<(Fields, Vec<u8>), H3Error> {
        let local = LocalSettings::default();
        let mut q = qpack::Decoder::new(local.max_field_section_size);
        let mut r = RequestReader::new(local.max_field_section_size + 64);
        let mut head = Vec::new();
        let mut body = Vec::new();
        for chunk in bytes.chunks(step) {
            r.feed(&mut q, chunk, |ev| match ev {
                RequestEvent::Head(f) => head = f,
                RequestEvent::Data(d) => body.extend_from_slice(d),
            })?;
        }
        r.finish()?;
        Ok((head, body))
    }

    #[test]
    fn a_request_reads_whatever_the_read_sizes() {
        let mut wire = Vec::new();
        write_request(
            &mut wire,
            &[(b":method", b"PUT"), (b":path", b"/a.txt"), (b"x-y", b"z")],
            b"hello",
        );
        for step in [1, 2, 7, wire.len()] {
            let (head, body) = read(&wire, step).unwrap();
            assert_eq!(head[0], (b":method".to_vec(), b"PUT".to_vec()));
            assert_eq!(head[2], (b"x-y".to_vec(), b"z".to_vec()));
            assert_eq!(body, b"hello");
        }
    }

    #[test]
    fn data_first_and_early_ends_are_refused() {
        let mut wire = Vec::new();
        write_data(&mut wire, b"x");
        assert!(matches!(read(&wire, 1), Err(H3Error::FrameUnexpected(_))));
        assert!(read(&[], 1).is_err(), "no head at FIN");
        let mut wire = Vec::new();
        write_request(&mut wire, &[(b":method", b"GET")], b"abc");
        assert!(read(&wire[..wire.len() - 1], 1).is_err(), "FIN inside DATA");
    }

    #[test]
    fn client_control_stream_may_send_max_push_id_but_not_push() {
        let mut s = ClientStreams::default();
        let mut wire = vec![uni::CONTROL as u8];
        write_settings(&mut wire, &[]);
        crate::frame::write_header(&mut wire, crate::frame::kind::MAX_PUSH_ID, 1);
        wire.push(8);
        s.feed(2, &wire, false).unwrap();
        assert!(matches!(
            s.feed(2, &[], true),
            Err(H3Error::ClosedCriticalStream)
        ));
        let mut s = ClientStreams::default();
        assert!(s.feed(6, &[uni::PUSH as u8], false).is_err());
        let mut s = ClientStreams::default();
        assert!(matches!(
            s.feed(2, &[uni::CONTROL as u8, 0x00, 0x00], false),
            Err(H3Error::MissingSettings)
        ));
        // Unknown types are read and dropped; their end is no error.
        s.feed(10, &[0x21, 1, 2, 3], true).unwrap();
    }
}
