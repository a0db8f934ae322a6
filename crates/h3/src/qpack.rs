//! QPACK (RFC 9204) with the static table only.
//!
//! We advertise SETTINGS_QPACK_MAX_TABLE_CAPACITY = 0, so a peer may not insert into
//! our decoder's dynamic table and every field section it sends must have a Required
//! Insert Count of 0 and no dynamic or post-base reference; anything else is refused
//! as [`QpackError::DynamicReference`]. Our encoder never uses the peer's table, so it
//! keeps no state, needs no encoder or decoder stream (§4.2 lets both be left out),
//! and a request's field section depends only on the request. The Huffman code and
//! the prefixed integers are HPACK's (RFC 9204 §4.1), taken from `volley-h2`.

use volley_h2::hpack::{encode_integer, huffman, FieldMode};

use crate::error::QpackError;

/// Per-field overhead counted towards the field section size (RFC 9114 §4.2.2).
pub const FIELD_OVERHEAD: usize = 32;

/// The static table (RFC 9204 Appendix A).
pub const STATIC: [(&str, &str); 99] = [
    (":authority", ""),
    (":path", "/"),
    ("age", "0"),
    ("content-disposition", ""),
    ("content-length", "0"),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("referer", ""),
    ("set-cookie", ""),
    (":method", "CONNECT"),
    (":method", "DELETE"),
    (":method", "GET"),
    (":method", "HEAD"),
    (":method", "OPTIONS"),
    (":method", "POST"),
    (":method", "PUT"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "103"),
    (":status", "200"),
    (":status", "304"),
    (":status", "404"),
    (":status", "503"),
    ("accept", "*/*"),
    ("accept", "application/dns-message"),
    ("accept-encoding", "gzip, deflate, br"),
    ("accept-ranges", "bytes"),
    ("access-control-allow-headers", "cache-control"),
    ("access-control-allow-headers", "content-type"),
    ("access-control-allow-origin", "*"),
    ("cache-control", "max-age=0"),
    ("cache-control", "max-age=2592000"),
    ("cache-control", "max-age=604800"),
    ("cache-control", "no-cache"),
    ("cache-control", "no-store"),
    ("cache-control", "public, max-age=31536000"),
    ("content-encoding", "br"),
    ("content-encoding", "gzip"),
    ("content-type", "application/dns-message"),
    ("content-type", "application/javascript"),
    ("content-type", "application/json"),
    ("content-type", "application/x-www-form-urlencoded"),
    ("content-type", "image/gif"),
    ("content-type", "image/jpeg"),
    ("content-type", "image/png"),
    ("content-type", "text/css"),
    ("content-type", "text/html; charset=utf-8"),
    ("content-type", "text/plain"),
    ("content-type", "text/plain;charset=utf-8"),
    ("range", "bytes=0-"),
    ("strict-transport-security", "max-age=31536000"),
    (
        "strict-transport-security",
        "max-age=31536000; includesubdomains",
    ),
    (
        "strict-transport-security",
        "max-age=31536000; includesubdomains; preload",
    ),
    ("vary", "accept-encoding"),
    ("vary", "origin"),
    ("x-content-type-options", "nosniff"),
    ("x-xss-protection", "1; mode=block"),
    (":status", "100"),
    (":status", "204"),
    (":status", "206"),
    (":status", "302"),
    (":status", "400"),
    (":status", "403"),
    (":status", "421"),
    (":status", "425"),
    (":status", "500"),
    ("accept-language", ""),
    ("access-control-allow-credentials", "FALSE"),
    ("access-control-allow-credentials", "TRUE"),
    ("access-control-allow-headers", "*"),
    ("access-control-allow-methods", "get"),
    ("access-control-allow-methods", "get, post, options"),
    ("access-control-allow-methods", "options"),
    ("access-control-expose-headers", "content-length"),
    ("access-control-request-headers", "content-type"),
    ("access-control-request-method", "get"),
    ("access-control-request-method", "post"),
    ("alt-svc", "clear"),
    ("authorization", ""),
    (
        "content-security-policy",
        "script-src 'none'; object-src 'none'; base-uri 'none'",
    ),
    ("early-data", "1"),
    ("expect-ct", ""),
    ("forwarded", ""),
    ("if-range", ""),
    ("origin", ""),
    ("purpose", "prefetch"),
    ("server", ""),
    ("timing-allow-origin", "*"),
    ("upgrade-insecure-requests", "1"),
    ("user-agent", ""),
    ("x-forwarded-for", ""),
    ("x-frame-options", "deny"),
    ("x-frame-options", "sameorigin"),
];

/// Appends the field section prefix of a section that uses no dynamic table:
/// Required Insert Count 0 and Delta Base 0 (§4.5.1).
pub fn encode_prefix(out: &mut Vec<u8>) {
    out.extend_from_slice(&[0, 0]);
}

/// Appends one field line: an indexed static line when name and value match an
/// entry (`:method: GET` is one byte), else a literal with a static name reference,
/// else a literal with a literal name (§4.5.2, §4.5.4, §4.5.6), never indexed
/// dynamically. `name` must already be lower-case.
pub fn encode_field(name: &[u8], value: &[u8], out: &mut Vec<u8>) {
    let mut name_match = None;
    for (i, &(n, v)) in STATIC.iter().enumerate() {
        if n.as_bytes() == name {
            if v.as_bytes() == value {
                // 1 T=1 index(6+)
                encode_integer(i, 6, 0xc0, out);
                return;
            }
            name_match.get_or_insert(i);
        }
    }
    match name_match {
        Some(i) => {
            // 0 1 N=0 T=1 index(4+), then the value (H, 7+).
            encode_integer(i, 4, 0x50, out);
        }
        None => {
            // 0 0 1 N=0 H name-length(3+), name, then the value.
            encode_string(name, 3, 0x20, out);
        }
    }
    encode_string(value, 7, 0, out);
}

/// Appends a string literal whose length has a `prefix_bits`-bit prefix, its H bit
/// just above the prefix and `flags` above that; Huffman-coded when shorter.
fn encode_string(s: &[u8], prefix_bits: u8, flags: u8, out: &mut Vec<u8>) {
    let h = 1u8 << prefix_bits;
    let huff_len = huffman::encoded_len(s);
    if huff_len < s.len() {
        encode_integer(huff_len, prefix_bits, flags | h, out);
        huffman::encode(s, out);
    } else {
        encode_integer(s.len(), prefix_bits, flags, out);
        out.extend_from_slice(s);
    }
}

/// A cursor over a field section.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn byte(&self) -> Result<u8, QpackError> {
        self.buf.get(self.pos).copied().ok_or(QpackError::Truncated)
    }

    /// A prefixed integer (RFC 7541 §5.1) whose prefix is the low `n` bits of the
    /// current byte; values past 2^62 are refused.
    fn integer(&mut self, n: u8) -> Result<u64, QpackError> {
        let mask = ((1u16 << n) - 1) as u8;
        let mut v = u64::from(self.byte()? & mask);
        self.pos += 1;
        if v < u64::from(mask) {
            return Ok(v);
        }
        let mut shift = 0u32;
        loop {
            let b = self.byte()?;
            self.pos += 1;
            let add = u64::from(b & 0x7f)
                .checked_shl(shift)
                .filter(|a| a >> shift == u64::from(b & 0x7f))
                .ok_or(QpackError::IntegerOverflow)?;
            v = v
                .checked_add(add)
                .filter(|&v| v <= crate::varint::MAX)
                .ok_or(QpackError::IntegerOverflow)?;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
            if shift > 62 {
                return Err(QpackError::IntegerOverflow);
            }
        }
    }

    /// A string literal with an `n`-bit length prefix and its H bit just above:
    /// (Huffman-coded, raw bytes).
    fn string(&mut self, n: u8) -> Result<(bool, &'a [u8]), QpackError> {
        let huffman = self.byte()? & (1 << n) != 0;
        let len = usize::try_from(self.integer(n)?).map_err(|_| QpackError::Truncated)?;
        let end = self
            .pos
            .checked_add(len)
            .filter(|&e| e <= self.buf.len())
            .ok_or(QpackError::Truncated)?;
        let raw = &self.buf[self.pos..end];
        self.pos = end;
        Ok((huffman, raw))
    }
}

/// The static entry at `index`.
fn entry(index: u64) -> Result<(&'static [u8], &'static [u8]), QpackError> {
    usize::try_from(index)
        .ok()
        .and_then(|i| STATIC.get(i))
        .map(|&(n, v)| (n.as_bytes(), v.as_bytes()))
        .ok_or(QpackError::StaticIndexOutOfRange(index))
}

/// A string as the caller sees it: Huffman decoded into `dst` when needed.
fn materialise<'s>(
    huffman_coded: bool,
    raw: &'s [u8],
    dst: &'s mut Vec<u8>,
) -> Result<&'s [u8], QpackError> {
    if !huffman_coded {
        return Ok(raw);
    }
    dst.clear();
    huffman::decode(raw, dst).map_err(|_| QpackError::Huffman)?;
    Ok(dst)
}

/// The QPACK decoder of one connection: no table, only reusable buffers, so decoding
/// allocates nothing once the buffers have grown.
#[derive(Debug, Clone, Default)]
pub struct Decoder {
    /// SETTINGS_MAX_FIELD_SECTION_SIZE we advertised.
    max_section_size: usize,
    name: Vec<u8>,
    value: Vec<u8>,
}

impl Decoder {
    /// A decoder enforcing the field section limit we advertise.
    pub fn new(max_section_size: usize) -> Decoder {
        Decoder {
            max_section_size,
            name: Vec::new(),
            value: Vec::new(),
        }
    }

    /// Decodes one field section, calling `on_field(name, value)` for each field
    /// `mode` asks for, in order. In [`FieldMode::PseudoOnly`], literal values of
    /// regular fields are skipped undecoded (they count at their encoded length).
    /// The size limit is checked as fields come, so an oversized section stops at
    /// the field that crosses it.
    pub fn decode<F: FnMut(&[u8], &[u8])>(
        &mut self,
        section: &[u8],
        mode: FieldMode,
        mut on_field: F,
    ) -> Result<(), QpackError> {
        let mut c = Cursor {
            buf: section,
            pos: 0,
        };
        // Required Insert Count (8+): anything but 0 needs a dynamic table.
        if c.integer(8)? != 0 {
            return Err(QpackError::DynamicReference);
        }
        // Sign and Delta Base (7+): meaningless without a dynamic table.
        c.integer(7)?;
        let mut size = 0usize;
        while c.pos < section.len() {
            let b = c.byte()?;
            let (name, value): (&[u8], &[u8]) = if b & 0x80 != 0 {
                // Indexed field line: 1 T index(6+).
                if b & 0x40 == 0 {
                    return Err(QpackError::DynamicReference);
                }
                entry(c.integer(6)?)?
            } else if b & 0x40 != 0 {
                // Literal with name reference: 0 1 N T index(4+), value (7+).
                if b & 0x10 == 0 {
                    return Err(QpackError::DynamicReference);
                }
                let (name, _) = entry(c.integer(4)?)?;
                let (h, raw) = c.string(7)?;
                if !wanted(mode, name) {
                    size = add_size(size, name.len() + raw.len(), self.max_section_size)?;
                    continue;
                }
                (name, materialise(h, raw, &mut self.value)?)
            } else if b & 0x20 != 0 {
                // Literal with literal name: 0 0 1 N H length(3+), name, value (7+).
                let (hn, raw_name) = c.string(3)?;
                let name = materialise(hn, raw_name, &mut self.name)?;
                let (hv, raw) = c.string(7)?;
                if !wanted(mode, name) {
                    size = add_size(size, name.len() + raw.len(), self.max_section_size)?;
                    continue;
                }
                (name, materialise(hv, raw, &mut self.value)?)
            } else {
                // Indexed post-base (0001) or literal with post-base name (0000):
                // both refer to the dynamic table.
                return Err(QpackError::DynamicReference);
            };
            size = add_size(size, name.len() + value.len(), self.max_section_size)?;
            if wanted(mode, name) {
                on_field(name, value);
            }
        }
        Ok(())
    }
}

/// The section size with one more field of `bytes` (name and value), or the limit
/// error.
fn add_size(size: usize, bytes: usize, max: usize) -> Result<usize, QpackError> {
    let size = size.saturating_add(bytes + FIELD_OVERHEAD);
    if size > max {
        return Err(QpackError::FieldSectionTooLarge(max));
    }
    Ok(size)
}

fn wanted(mode: FieldMode, name: &[u8]) -> bool {
    match mode {
        FieldMode::All => true,
        FieldMode::PseudoOnly => name.first() == Some(&b':'),
    }
}

/// Reads the peer's QPACK encoder stream. With our capacity at 0 the only legal
/// instruction is Set Dynamic Table Capacity to 0 (§4.3.1); an insert or duplicate is
/// [`QpackError::DynamicReference`]. Instructions may be split across reads.
#[derive(Debug, Clone, Default)]
pub struct EncoderStreamReader {
    /// Bytes of an instruction split across reads (a capacity integer: at most 10).
    partial: Vec<u8>,
}

impl EncoderStreamReader {
    /// Feeds the next bytes of the peer's encoder stream.
    pub fn feed(&mut self, mut input: &[u8]) -> Result<(), QpackError> {
        while !input.is_empty() {
            let take = (16 - self.partial.len()).min(input.len());
            self.partial.extend_from_slice(&input[..take]);
            input = &input[take..];
            while let Some(&b) = self.partial.first() {
                if b & 0xe0 != 0x20 {
                    // 1xxxxxxx, 01xxxxxx: inserts; 000xxxxx: duplicate.
                    return Err(QpackError::DynamicReference);
                }
                let mut c = Cursor {
                    buf: &self.partial,
                    pos: 0,
                };
                match c.integer(5) {
                    Ok(0) => {
                        let used = c.pos;
                        self.partial.drain(..used);
                    }
                    Ok(_) => return Err(QpackError::DynamicReference),
                    Err(QpackError::Truncated) if self.partial.len() < 16 => break,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(d: &mut Decoder, section: &[u8]) -> Result<Vec<(String, String)>, QpackError> {
        let mut v = Vec::new();
        d.decode(section, FieldMode::All, |n, val| {
            v.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(val).into_owned(),
            ))
        })?;
        Ok(v)
    }

    #[test]
    fn static_table_shape() {
        assert_eq!(STATIC.len(), 99);
        assert_eq!(STATIC[17], (":method", "GET"));
        assert_eq!(STATIC[25], (":status", "200"));
        assert_eq!(STATIC[98], ("x-frame-options", "sameorigin"));
    }

    #[test]
    fn rfc9204_appendix_b1_literal_with_name_reference() {
        // B.1: ":path: /index.html" as a literal with a static name reference.
        let section = [
            0x00, 0x00, 0x51, 0x0b, 0x2f, 0x69, 0x6e, 0x64, 0x65, 0x78, 0x2e, 0x68, 0x74, 0x6d,
            0x6c,
        ];
        let mut d = Decoder::new(4096);
        assert_eq!(
            decode_all(&mut d, &section).unwrap(),
            [(":path".to_string(), "/index.html".to_string())]
        );
    }

    #[test]
    fn request_round_trips_in_few_bytes() {
        let fields: [(&str, &str); 6] = [
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "localhost:8443"),
            (":path", "/a/long/path?q=1"),
            ("user-agent", "volley"),
            ("x-custom-header", "Some Value"),
        ];
        let mut out = Vec::new();
        encode_prefix(&mut out);
        for (n, v) in fields {
            encode_field(n.as_bytes(), v.as_bytes(), &mut out);
        }
        // :method GET and :scheme https are one byte each.
        assert_eq!(&out[..4], [0, 0, 0xc0 | 17, 0xc0 | 23]);
        let mut d = Decoder::new(4096);
        let got = decode_all(&mut d, &out).unwrap();
        let want: Vec<(String, String)> = fields
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        assert_eq!(got, want);
        // Pseudo-only sees the pseudo-fields alone.
        let mut names = Vec::new();
        d.decode(&out, FieldMode::PseudoOnly, |n, _| names.push(n.to_vec()))
            .unwrap();
        assert_eq!(names.len(), 4);
    }

    #[test]
    fn dynamic_references_are_refused() {
        let mut d = Decoder::new(4096);
        // Required Insert Count 1.
        assert_eq!(
            d.decode(&[0x02, 0x00], FieldMode::All, |_, _| {}),
            Err(QpackError::DynamicReference)
        );
        // Indexed dynamic (T=0), literal with dynamic name (T=0), post-base forms.
        for line in [0x80, 0x40, 0x10, 0x00] {
            assert_eq!(
                d.decode(&[0x00, 0x00, line, 0x00], FieldMode::All, |_, _| {}),
                Err(QpackError::DynamicReference),
                "{line:#x}"
            );
        }
        // Static index 99 is past the table.
        assert_eq!(
            d.decode(&[0x00, 0x00, 0xff, 0x24], FieldMode::All, |_, _| {}),
            Err(QpackError::StaticIndexOutOfRange(99))
        );
    }

    #[test]
    fn truncated_overflowing_and_oversized() {
        let mut d = Decoder::new(40);
        assert_eq!(
            d.decode(&[], FieldMode::All, |_, _| {}),
            Err(QpackError::Truncated)
        );
        assert_eq!(
            d.decode(&[0x00, 0x00, 0x51, 0x05, b'a'], FieldMode::All, |_, _| {}),
            Err(QpackError::Truncated)
        );
        let mut long = vec![0x00, 0x00, 0xff];
        long.extend_from_slice(&[0xff; 12]);
        assert_eq!(
            d.decode(&long, FieldMode::All, |_, _| {}),
            Err(QpackError::IntegerOverflow)
        );
        // ":status: 200" costs 7 + 3 + 32 = 42 bytes, over a limit of 40.
        assert_eq!(
            d.decode(&[0x00, 0x00, 0xc0 | 25], FieldMode::All, |_, _| {}),
            Err(QpackError::FieldSectionTooLarge(40))
        );
    }

    #[test]
    fn encoder_stream_allows_only_capacity_zero() {
        let mut r = EncoderStreamReader::default();
        r.feed(&[0x20, 0x20]).unwrap();
        assert_eq!(r.feed(&[0x21]), Err(QpackError::DynamicReference));
        let mut r = EncoderStreamReader::default();
        // Capacity 0 written long-form (0x3f then 0x00 would be 31): split reads.
        r.feed(&[0x20]).unwrap();
        assert_eq!(r.feed(&[0xc0]), Err(QpackError::DynamicReference));
        let mut r = EncoderStreamReader::default();
        r.feed(&[0x3f]).unwrap();
        assert_eq!(r.feed(&[0x00]), Err(QpackError::DynamicReference));
    }
}
