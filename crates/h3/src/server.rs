//! The server's streams: a request stream read into its head and body
//! ([`RequestReader`]) and a response head written ([`write_response_head`]). The
//! client's unidirectional streams are read by the one dispatcher of both sides,
//! [`crate::stream::PeerStreams`] with [`crate::stream::Role::Client`].
//!
//! Place in the flow: `volley-server`'s QUIC loop feeds these readers the bytes
//! quinn-proto hands it, in stream order, and tells them when a stream ends; the
//! answer itself is the server's. A request stream carries HEADERS, DATA and trailers
//! rather than a response, hence a reader of its own.

use volley_h2::hpack::FieldMode;

use crate::error::H3Error;
use crate::frame::{self, Frame, FrameDecoder};
use crate::qpack;
use crate::stream::{PeerStreams, Role};

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

    /// Feeds the next bytes of request stream `stream_id` (the QUIC id), reporting
    /// the head and body pieces.
    pub fn feed<F>(
        &mut self,
        decoder: &mut qpack::Decoder,
        stream_id: u64,
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
                decoder.decode(stream_id, section, FieldMode::All, |n, v| {
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
        let r = reader.feed(&mut decoder, 0, chunk, |ev| match ev {
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
    let mut client = PeerStreams::new(Role::Client);
    let mut events = Vec::new();
    for (i, chunk) in rest.chunks(step).enumerate() {
        // Spread over a few stream ids, so unique-type and count checks are reached.
        let id = u64::from(chunk[0] % 5) * 4 + 2;
        if client
            .feed(id, chunk, i % 7 == 6, &mut decoder, &mut events)
            .is_err()
        {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::write_data;
    use crate::stream::{write_request, LocalSettings};

    fn read(bytes: &[u8], step: usize) -> Result<(Fields, Vec<u8>), H3Error> {
        let local = LocalSettings::default();
        let mut q = qpack::Decoder::new(local.max_field_section_size);
        let mut r = RequestReader::new(local.max_field_section_size + 64);
        let mut head = Vec::new();
        let mut body = Vec::new();
        for chunk in bytes.chunks(step) {
            r.feed(&mut q, 0, chunk, |ev| match ev {
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
}
