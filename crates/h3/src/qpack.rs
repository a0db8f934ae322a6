//! QPACK (RFC 9204): the static table, our encoder, and the decoder with its
//! dynamic table ([`Decoder`], in `decoder.rs`).
//!
//! Our encoder never uses the peer's dynamic table, so it keeps no state, needs no
//! encoder stream (§4.2 lets it be left out), and a request's field section depends
//! only on the request; the built-in server's encoder is the same static-only one.
//! The decoder takes a dynamic table as large as we advertise (the engine: 4096
//! bytes; the built-in server: 0, refusing any reference to one as
//! [`QpackError::DynamicReference`]). The Huffman code and the prefixed integers
//! are HPACK's (RFC 9204 §4.1), taken from `volley-h2`.
//!
//! Why written here: the sans-IO QPACK crates (read 2026-11) either wrap the C
//! ls-qpack (`ls-qpack`: an FFI build, and each decoded header an owned allocation),
//! are bound to an async runtime (`quiver-qpack`: tokio), or are weeks-old single
//! releases (`simoom-qpack` 0.1.0) carrying a second copy of the Huffman code; the
//! engine's hot path wants borrowed names and values and `volley-h2`'s Huffman.

mod decoder;

pub use decoder::{Decoder, DecoderCounts};

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

/// A cursor over a field section or QPACK stream instructions.
pub(crate) struct Cursor<'a> {
    /// The bytes.
    pub(crate) buf: &'a [u8],
    /// Where the next read starts.
    pub(crate) pos: usize,
}

impl<'a> Cursor<'a> {
    fn byte(&self) -> Result<u8, QpackError> {
        self.buf.get(self.pos).copied().ok_or(QpackError::Truncated)
    }

    /// A prefixed integer (RFC 7541 §5.1) whose prefix is the low `n` bits of the
    /// current byte; values past 2^62 are refused.
    pub(crate) fn integer(&mut self, n: u8) -> Result<u64, QpackError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_table_shape() {
        assert_eq!(STATIC.len(), 99);
        assert_eq!(STATIC[17], (":method", "GET"));
        assert_eq!(STATIC[25], (":status", "200"));
        assert_eq!(STATIC[98], ("x-frame-options", "sameorigin"));
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
        let mut got = Vec::new();
        d.decode(0, &out, FieldMode::All, |n, v| {
            got.push((n.to_vec(), v.to_vec()))
        })
        .unwrap();
        let want: Vec<(Vec<u8>, Vec<u8>)> = fields
            .iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
        assert_eq!(got, want);
        // Pseudo-only sees the pseudo-fields alone.
        let mut names = Vec::new();
        d.decode(0, &out, FieldMode::PseudoOnly, |n, _| {
            names.push(n.to_vec())
        })
        .unwrap();
        assert_eq!(names.len(), 4);
    }
}
