//! HTTP/2 frame layout (RFC 9113 §4 and §6): the 9-byte header, type and flag
//! constants, and writers that append frames to the connection's output buffer.

/// Frame types (RFC 9113 §6).
pub mod kind {
    /// DATA.
    pub const DATA: u8 = 0x0;
    /// HEADERS.
    pub const HEADERS: u8 = 0x1;
    /// PRIORITY (deprecated; parsed and ignored).
    pub const PRIORITY: u8 = 0x2;
    /// RST_STREAM.
    pub const RST_STREAM: u8 = 0x3;
    /// SETTINGS.
    pub const SETTINGS: u8 = 0x4;
    /// PUSH_PROMISE (we disable push, so receiving one is an error).
    pub const PUSH_PROMISE: u8 = 0x5;
    /// PING.
    pub const PING: u8 = 0x6;
    /// GOAWAY.
    pub const GOAWAY: u8 = 0x7;
    /// WINDOW_UPDATE.
    pub const WINDOW_UPDATE: u8 = 0x8;
    /// CONTINUATION.
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags.
pub mod flag {
    /// DATA, HEADERS: last frame the sender will send on this stream.
    pub const END_STREAM: u8 = 0x1;
    /// SETTINGS, PING: acknowledgement.
    pub const ACK: u8 = 0x1;
    /// HEADERS, CONTINUATION: the header block ends in this frame.
    pub const END_HEADERS: u8 = 0x4;
    /// DATA, HEADERS: a pad length byte leads the payload.
    pub const PADDED: u8 = 0x8;
    /// HEADERS: 5 bytes of priority fields follow the pad length.
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS identifiers (RFC 9113 §6.5.2).
pub mod setting {
    /// SETTINGS_HEADER_TABLE_SIZE.
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    /// SETTINGS_ENABLE_PUSH.
    pub const ENABLE_PUSH: u16 = 0x2;
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    /// SETTINGS_INITIAL_WINDOW_SIZE.
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    /// SETTINGS_MAX_FRAME_SIZE.
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    /// SETTINGS_MAX_HEADER_LIST_SIZE.
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Length of a frame header.
pub const HEADER_LEN: usize = 9;

/// The smallest SETTINGS_MAX_FRAME_SIZE allowed, and the default (RFC 9113 §6.5.2).
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;

/// The largest SETTINGS_MAX_FRAME_SIZE allowed: 2^24 - 1.
pub const MAX_MAX_FRAME_SIZE: u32 = (1 << 24) - 1;

/// The largest flow-control window: 2^31 - 1 (RFC 9113 §6.9.1).
pub const MAX_WINDOW: i64 = (1 << 31) - 1;

/// Initial flow-control window before any SETTINGS (RFC 9113 §6.9.2).
pub const DEFAULT_WINDOW: u32 = 65_535;

/// A parsed frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload length (24 bits).
    pub len: u32,
    /// Frame type.
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// Stream identifier (reserved bit cleared).
    pub stream: u32,
}

impl FrameHeader {
    /// Parses the first 9 bytes of `b`; `None` when fewer are available.
    pub fn parse(b: &[u8]) -> Option<FrameHeader> {
        let h: &[u8; HEADER_LEN] = b.get(..HEADER_LEN)?.try_into().ok()?;
        Some(FrameHeader {
            len: u32::from_be_bytes([0, h[0], h[1], h[2]]),
            kind: h[3],
            flags: h[4],
            stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff,
        })
    }

    /// Whether `f` is set.
    pub fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
}

/// Appends a frame header.
pub fn write_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let l = (len as u32).to_be_bytes();
    out.extend_from_slice(&[l[1], l[2], l[3], kind, flags]);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
}

/// Appends a SETTINGS frame with the given (id, value) pairs.
pub fn write_settings(out: &mut Vec<u8>, pairs: &[(u16, u32)]) {
    write_header(out, pairs.len() * 6, kind::SETTINGS, 0, 0);
    for &(id, v) in pairs {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&v.to_be_bytes());
    }
}

/// Appends a WINDOW_UPDATE frame.
pub fn write_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    write_header(out, 4, kind::WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&(increment & 0x7fff_ffff).to_be_bytes());
}

/// Appends a RST_STREAM frame.
pub fn write_rst_stream(out: &mut Vec<u8>, stream: u32, code: u32) {
    write_header(out, 4, kind::RST_STREAM, 0, stream);
    out.extend_from_slice(&code.to_be_bytes());
}

/// Appends a GOAWAY frame without debug data.
pub fn write_goaway(out: &mut Vec<u8>, last_stream: u32, code: u32) {
    write_header(out, 8, kind::GOAWAY, 0, 0);
    out.extend_from_slice(&(last_stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
}

/// Appends a PING frame.
pub fn write_ping(out: &mut Vec<u8>, ack: bool, payload: [u8; 8]) {
    write_header(out, 8, kind::PING, if ack { flag::ACK } else { 0 }, 0);
    out.extend_from_slice(&payload);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_clears_reserved_bit() {
        let mut v = Vec::new();
        write_header(&mut v, 0x123456, kind::HEADERS, flag::END_HEADERS, 7);
        v[5] |= 0x80; // reserved bit set by a sloppy peer is ignored
        let h = FrameHeader::parse(&v).unwrap();
        assert_eq!(
            h,
            FrameHeader {
                len: 0x123456,
                kind: kind::HEADERS,
                flags: flag::END_HEADERS,
                stream: 7
            }
        );
        assert!(h.has(flag::END_HEADERS) && !h.has(flag::END_STREAM));
        assert_eq!(FrameHeader::parse(&v[..8]), None);
    }

    #[test]
    fn control_frame_layouts() {
        let mut v = Vec::new();
        write_window_update(&mut v, 3, 1000);
        assert_eq!(v, [0, 0, 4, 8, 0, 0, 0, 0, 3, 0, 0, 0x03, 0xe8]);
        v.clear();
        write_settings(&mut v, &[(setting::ENABLE_PUSH, 0)]);
        assert_eq!(v, [0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0]);
        v.clear();
        write_goaway(&mut v, 5, 1);
        assert_eq!(v, [0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 1]);
        v.clear();
        write_rst_stream(&mut v, 9, 8);
        assert_eq!(v, [0, 0, 4, 3, 0, 0, 0, 0, 9, 0, 0, 0, 8]);
        v.clear();
        write_ping(&mut v, true, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(v, [0, 0, 8, 6, 1, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
    }
}
