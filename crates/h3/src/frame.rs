//! HTTP/3 frames (RFC 9114 §7): type and setting constants, writers that append
//! frames to a stream's output, and [`FrameDecoder`], which cuts one stream's bytes
//! into frames as they arrive.
//!
//! Every frame is `type (varint) | length (varint) | payload`. DATA payloads are
//! handed on in the pieces they arrive in, never buffered (a response body can be
//! large and the engine only counts it); other frames are small and are passed whole,
//! straight from the caller's buffer when a read holds all of one, else from one
//! reused buffer bounded by [`FrameDecoder::new`]'s limit. Unknown and reserved
//! (grease, 0x1f * N + 0x21) frame types are skipped, as §9 requires.

use crate::error::H3Error;
use crate::varint;

/// Frame types (RFC 9114 §7.2).
pub mod kind {
    /// DATA.
    pub const DATA: u64 = 0x0;
    /// HEADERS.
    pub const HEADERS: u64 = 0x1;
    /// CANCEL_PUSH.
    pub const CANCEL_PUSH: u64 = 0x3;
    /// SETTINGS.
    pub const SETTINGS: u64 = 0x4;
    /// PUSH_PROMISE.
    pub const PUSH_PROMISE: u64 = 0x5;
    /// GOAWAY.
    pub const GOAWAY: u64 = 0x7;
    /// MAX_PUSH_ID.
    pub const MAX_PUSH_ID: u64 = 0xd;

    /// HTTP/2 frame types with no HTTP/3 meaning (PRIORITY, PING, WINDOW_UPDATE,
    /// CONTINUATION): receiving one is H3_FRAME_UNEXPECTED (§7.2.8).
    pub fn is_reserved_h2(t: u64) -> bool {
        matches!(t, 0x2 | 0x6 | 0x8 | 0x9)
    }
}

/// SETTINGS identifiers (RFC 9114 §7.2.4.1, RFC 9204 §5).
pub mod setting {
    /// SETTINGS_QPACK_MAX_TABLE_CAPACITY.
    pub const QPACK_MAX_TABLE_CAPACITY: u64 = 0x1;
    /// SETTINGS_MAX_FIELD_SECTION_SIZE.
    pub const MAX_FIELD_SECTION_SIZE: u64 = 0x6;
    /// SETTINGS_QPACK_BLOCKED_STREAMS.
    pub const QPACK_BLOCKED_STREAMS: u64 = 0x7;

    /// HTTP/2 settings with no HTTP/3 meaning: receiving one is H3_SETTINGS_ERROR.
    pub fn is_reserved_h2(id: u64) -> bool {
        matches!(id, 0x2..=0x5)
    }
}

/// What a peer's SETTINGS frame said (absent settings keep their defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeerSettings {
    /// SETTINGS_QPACK_MAX_TABLE_CAPACITY (default 0).
    pub qpack_max_table_capacity: u64,
    /// SETTINGS_QPACK_BLOCKED_STREAMS (default 0).
    pub qpack_blocked_streams: u64,
    /// SETTINGS_MAX_FIELD_SECTION_SIZE (default unlimited).
    pub max_field_section_size: Option<u64>,
}

impl PeerSettings {
    /// Parses a SETTINGS payload: reserved HTTP/2 identifiers and repeated
    /// identifiers are H3_SETTINGS_ERROR; unknown identifiers are ignored (§7.2.4).
    pub fn parse(mut payload: &[u8]) -> Result<PeerSettings, H3Error> {
        let mut s = PeerSettings::default();
        // Identifiers seen, for the repeat check; a peer sends a handful.
        let mut seen: Vec<u64> = Vec::new();
        while !payload.is_empty() {
            let (id, a) = varint::decode(payload).ok_or(H3Error::Frame("SETTINGS truncated"))?;
            let (value, b) =
                varint::decode(&payload[a..]).ok_or(H3Error::Frame("SETTINGS truncated"))?;
            payload = &payload[a + b..];
            if setting::is_reserved_h2(id) {
                return Err(H3Error::Settings("reserved HTTP/2 setting"));
            }
            if seen.contains(&id) {
                return Err(H3Error::Settings("setting repeated"));
            }
            if seen.len() >= 64 {
                return Err(H3Error::ExcessiveLoad("more than 64 settings"));
            }
            seen.push(id);
            match id {
                setting::QPACK_MAX_TABLE_CAPACITY => s.qpack_max_table_capacity = value,
                setting::QPACK_BLOCKED_STREAMS => s.qpack_blocked_streams = value,
                setting::MAX_FIELD_SECTION_SIZE => s.max_field_section_size = Some(value),
                _ => {}
            }
        }
        Ok(s)
    }
}

/// Appends a frame header (type and payload length).
pub fn write_header(out: &mut Vec<u8>, kind: u64, len: usize) {
    varint::encode(kind, out);
    varint::encode(len as u64, out);
}

/// Appends a HEADERS frame carrying `field_section` (already QPACK-encoded).
pub fn write_headers(out: &mut Vec<u8>, field_section: &[u8]) {
    write_header(out, kind::HEADERS, field_section.len());
    out.extend_from_slice(field_section);
}

/// Appends a DATA frame carrying `payload`.
pub fn write_data(out: &mut Vec<u8>, payload: &[u8]) {
    write_header(out, kind::DATA, payload.len());
    out.extend_from_slice(payload);
}

/// Appends a SETTINGS frame with the given (identifier, value) pairs.
pub fn write_settings(out: &mut Vec<u8>, pairs: &[(u64, u64)]) {
    let len: usize = pairs
        .iter()
        .map(|&(id, v)| varint::encoded_len(id) + varint::encoded_len(v))
        .sum();
    write_header(out, kind::SETTINGS, len);
    for &(id, v) in pairs {
        varint::encode(id, out);
        varint::encode(v, out);
    }
}

/// Appends a GOAWAY frame (`id`: the first request stream the sender will not
/// process, or for a client the first push id).
pub fn write_goaway(out: &mut Vec<u8>, id: u64) {
    write_header(out, kind::GOAWAY, varint::encoded_len(id));
    varint::encode(id, out);
}

/// One frame (or, for DATA, one piece of a frame's payload) as the decoder hands it
/// on. Payloads borrow the fed bytes or the decoder's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A piece of a DATA payload, in order; a zero-length DATA frame gives one empty
    /// piece (so an out-of-place DATA frame is still seen).
    Data(&'a [u8]),
    /// A HEADERS frame: its QPACK-encoded field section.
    Headers(&'a [u8]),
    /// A SETTINGS frame, parsed and checked.
    Settings(PeerSettings),
    /// A GOAWAY frame's identifier.
    GoAway(u64),
    /// CANCEL_PUSH, with its push id.
    CancelPush(u64),
    /// MAX_PUSH_ID, with its push id.
    MaxPushId(u64),
    /// PUSH_PROMISE (we never allow pushes, so its payload is not parsed).
    PushPromise,
}

/// Longest frame header: two 8-byte varints.
const MAX_HEADER_BYTES: usize = 16;

/// The frame being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Current {
    /// Between frames.
    None,
    /// Inside a DATA payload with this many bytes to come.
    Data(u64),
    /// Inside an unknown frame's payload, skipped.
    Skip(u64),
    /// Inside a frame handed on whole: its type and full payload length.
    Whole(u64, usize),
}

/// Cuts one stream's bytes into frames, whatever the read sizes.
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    /// Bytes of a frame header split across reads.
    head: [u8; MAX_HEADER_BYTES],
    head_len: usize,
    current: Current,
    /// Payload of a whole frame split across reads.
    buf: Vec<u8>,
    /// Longest payload of a frame handed on whole (HEADERS, SETTINGS...).
    max_whole: usize,
}

impl FrameDecoder {
    /// A decoder that hands on non-DATA frames of up to `max_whole_bytes` of payload
    /// (longer ones are H3_EXCESSIVE_LOAD: the field-section limit we advertise
    /// plus QPACK's overhead is a natural choice).
    pub fn new(max_whole_bytes: usize) -> FrameDecoder {
        FrameDecoder {
            head: [0; MAX_HEADER_BYTES],
            head_len: 0,
            current: Current::None,
            buf: Vec::new(),
            max_whole: max_whole_bytes,
        }
    }

    /// Whether the bytes so far end exactly between frames: a stream whose FIN comes
    /// anywhere else ended inside a frame (H3_FRAME_ERROR, §7.1).
    pub fn between_frames(&self) -> bool {
        self.head_len == 0 && self.current == Current::None
    }

    /// Feeds the next bytes of the stream, handing each frame (or DATA piece) to
    /// `on_frame` in order. The first error, the decoder's or `on_frame`'s, stops
    /// decoding and is returned; the stream is then unusable.
    pub fn feed<F>(&mut self, mut input: &[u8], mut on_frame: F) -> Result<(), H3Error>
    where
        F: FnMut(Frame<'_>) -> Result<(), H3Error>,
    {
        while !input.is_empty() {
            match self.current {
                Current::None => {
                    let Some(used) = self.read_header(input)? else {
                        return Ok(());
                    };
                    input = &input[used..];
                    // Zero-length frames are complete with their header.
                    match self.current {
                        Current::Data(0) => {
                            self.current = Current::None;
                            on_frame(Frame::Data(&[]))?;
                        }
                        Current::Skip(0) => self.current = Current::None,
                        Current::Whole(kind, 0) => {
                            self.current = Current::None;
                            on_frame(parse_whole(kind, &[])?)?;
                        }
                        _ => {}
                    }
                }
                Current::Data(left) => {
                    let n = usize::try_from(left).unwrap_or(usize::MAX).min(input.len());
                    let (piece, rest) = input.split_at(n);
                    input = rest;
                    self.current = match left - n as u64 {
                        0 => Current::None,
                        more => Current::Data(more),
                    };
                    on_frame(Frame::Data(piece))?;
                }
                Current::Skip(left) => {
                    let n = usize::try_from(left).unwrap_or(usize::MAX).min(input.len());
                    input = &input[n..];
                    self.current = match left - n as u64 {
                        0 => Current::None,
                        more => Current::Skip(more),
                    };
                }
                Current::Whole(kind, len) => {
                    if self.buf.is_empty() && input.len() >= len {
                        // The whole payload is in this read: no copy.
                        let (payload, rest) = input.split_at(len);
                        input = rest;
                        self.current = Current::None;
                        on_frame(parse_whole(kind, payload)?)?;
                        continue;
                    }
                    let n = (len - self.buf.len()).min(input.len());
                    self.buf.extend_from_slice(&input[..n]);
                    input = &input[n..];
                    if self.buf.len() == len {
                        self.current = Current::None;
                        let frame = parse_whole(kind, &self.buf);
                        let r = frame.and_then(&mut on_frame);
                        self.buf.clear();
                        r?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Reads a frame header from the stashed bytes and `input`; returns how many
    /// bytes of `input` it took, or `None` (all of `input` stashed) when it is still
    /// incomplete.
    fn read_header(&mut self, input: &[u8]) -> Result<Option<usize>, H3Error> {
        let had = self.head_len;
        let take = (MAX_HEADER_BYTES - had).min(input.len());
        let parsed = if had == 0 {
            parse_header(input)
        } else {
            self.head[had..had + take].copy_from_slice(&input[..take]);
            parse_header(&self.head[..had + take])
        };
        let Some((kind, len, header_len)) = parsed else {
            // Incomplete: at most 15 bytes, since 16 always hold a header.
            self.head[had..had + take].copy_from_slice(&input[..take]);
            self.head_len += take;
            return Ok(None);
        };
        self.head_len = 0;
        self.current = self.start(kind, len)?;
        Ok(Some(header_len - had))
    }

    /// What to do with a frame of type `kind` and payload length `len`.
    fn start(&self, kind: u64, len: u64) -> Result<Current, H3Error> {
        Ok(match kind {
            kind::DATA => Current::Data(len),
            kind::HEADERS
            | kind::SETTINGS
            | kind::GOAWAY
            | kind::CANCEL_PUSH
            | kind::MAX_PUSH_ID
            | kind::PUSH_PROMISE => {
                let len = usize::try_from(len)
                    .ok()
                    .filter(|&l| l <= self.max_whole)
                    .ok_or(H3Error::ExcessiveLoad("frame longer than we buffer"))?;
                Current::Whole(kind, len)
            }
            t if kind::is_reserved_h2(t) => {
                return Err(H3Error::FrameUnexpected("reserved HTTP/2 frame type"))
            }
            _ => Current::Skip(len),
        })
    }
}

/// A frame header at the start of `b`: type, payload length and header length.
fn parse_header(b: &[u8]) -> Option<(u64, u64, usize)> {
    let (kind, a) = varint::decode(b)?;
    let (len, c) = varint::decode(&b[a..])?;
    Some((kind, len, a + c))
}

/// A whole non-DATA frame from its payload.
fn parse_whole(kind: u64, payload: &[u8]) -> Result<Frame<'_>, H3Error> {
    let single = |what: &'static str| match varint::decode(payload) {
        Some((v, n)) if n == payload.len() => Ok(v),
        _ => Err(H3Error::Frame(what)),
    };
    Ok(match kind {
        kind::HEADERS => Frame::Headers(payload),
        kind::SETTINGS => Frame::Settings(PeerSettings::parse(payload)?),
        kind::GOAWAY => Frame::GoAway(single("GOAWAY payload is not one varint")?),
        kind::CANCEL_PUSH => Frame::CancelPush(single("CANCEL_PUSH payload is not one varint")?),
        kind::MAX_PUSH_ID => Frame::MaxPushId(single("MAX_PUSH_ID payload is not one varint")?),
        _ => Frame::PushPromise,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Owned frames, for comparing.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Owned {
        Data(Vec<u8>),
        Headers(Vec<u8>),
        Settings(PeerSettings),
        GoAway(u64),
        Other,
    }

    fn decode_in(bytes: &[u8], read: usize) -> Result<Vec<Owned>, H3Error> {
        let mut d = FrameDecoder::new(1024);
        let mut got = Vec::new();
        for chunk in bytes.chunks(read.max(1)) {
            d.feed(chunk, |f| {
                got.push(match f {
                    Frame::Data(p) => Owned::Data(p.to_vec()),
                    Frame::Headers(p) => Owned::Headers(p.to_vec()),
                    Frame::Settings(s) => Owned::Settings(s),
                    Frame::GoAway(id) => Owned::GoAway(id),
                    _ => Owned::Other,
                });
                Ok(())
            })?;
        }
        assert!(d.between_frames());
        // DATA pieces joined, so any read size compares equal.
        let mut joined: Vec<Owned> = Vec::new();
        for f in got {
            match (joined.last_mut(), f) {
                (Some(Owned::Data(a)), Owned::Data(b)) => a.extend_from_slice(&b),
                (_, f) => joined.push(f),
            }
        }
        Ok(joined)
    }

    #[test]
    fn frames_in_any_read_size() {
        let mut v = Vec::new();
        write_settings(
            &mut v,
            &[(setting::MAX_FIELD_SECTION_SIZE, 16_384), (0x21, 7)],
        );
        write_headers(&mut v, b"\0\0\xd9");
        // An unknown (grease) frame between them is skipped.
        write_header(&mut v, 0x1f * 3 + 0x21, 5);
        v.extend_from_slice(b"junk!");
        write_data(&mut v, &[7u8; 300]);
        write_goaway(&mut v, 4);
        let want = vec![
            Owned::Settings(PeerSettings {
                max_field_section_size: Some(16_384),
                ..PeerSettings::default()
            }),
            Owned::Headers(b"\0\0\xd9".to_vec()),
            Owned::Data(vec![7u8; 300]),
            Owned::GoAway(4),
        ];
        for read in [1, 2, 3, 7, 64, 4096] {
            assert_eq!(decode_in(&v, read).unwrap(), want, "read size {read}");
        }
    }

    #[test]
    fn layouts() {
        let mut v = Vec::new();
        write_headers(&mut v, b"ab");
        assert_eq!(v, [0x01, 0x02, b'a', b'b']);
        v.clear();
        write_settings(&mut v, &[(setting::QPACK_MAX_TABLE_CAPACITY, 0)]);
        assert_eq!(v, [0x04, 0x02, 0x01, 0x00]);
        v.clear();
        write_goaway(&mut v, 100);
        assert_eq!(v, [0x07, 0x02, 0x40, 100]);
    }

    #[test]
    fn bad_frames_are_typed_errors() {
        // PING (an HTTP/2 type) is unexpected.
        assert_eq!(
            decode_in(&[0x06, 0x00], 1),
            Err(H3Error::FrameUnexpected("reserved HTTP/2 frame type"))
        );
        // A HEADERS frame longer than the limit, refused at its header.
        let mut v = Vec::new();
        write_header(&mut v, kind::HEADERS, 5000);
        assert!(matches!(decode_in(&v, 64), Err(H3Error::ExcessiveLoad(_))));
        // GOAWAY with trailing bytes.
        assert!(matches!(
            decode_in(&[0x07, 0x02, 0x01, 0x01], 4),
            Err(H3Error::Frame(_))
        ));
        // Reserved and repeated settings.
        let mut v = Vec::new();
        write_settings(&mut v, &[(0x2, 1)]);
        assert!(matches!(decode_in(&v, 64), Err(H3Error::Settings(_))));
        let mut v = Vec::new();
        write_settings(&mut v, &[(0x6, 1), (0x6, 2)]);
        assert!(matches!(decode_in(&v, 64), Err(H3Error::Settings(_))));
    }

    #[test]
    fn a_stream_ending_inside_a_frame_is_seen() {
        let mut d = FrameDecoder::new(64);
        d.feed(&[0x01, 0x05, b'a'], |_| Ok(())).unwrap();
        assert!(!d.between_frames());
        let mut d = FrameDecoder::new(64);
        d.feed(&[0x40], |_| Ok(())).unwrap();
        assert!(!d.between_frames());
    }
}
