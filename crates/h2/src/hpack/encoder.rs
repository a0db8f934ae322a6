//! Stateless HPACK encoding: indexed static entries and literals without indexing.
//!
//! Never touching a dynamic table means the peer's SETTINGS_HEADER_TABLE_SIZE can be
//! anything (even 0) without a size update, and encoding allocates nothing: bytes go
//! straight into the caller's buffer.

use super::huffman;
use super::table::{static_full_index, static_name_index};

/// Appends an HPACK integer (§5.1) whose first byte carries `flags` in the bits above
/// the `prefix_bits`-bit prefix.
pub fn encode_integer(value: usize, prefix_bits: u8, flags: u8, dst: &mut Vec<u8>) {
    let max_prefix = (1usize << prefix_bits) - 1;
    if value < max_prefix {
        dst.push(flags | value as u8);
        return;
    }
    dst.push(flags | max_prefix as u8);
    let mut rest = value - max_prefix;
    while rest >= 128 {
        dst.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    dst.push(rest as u8);
}

/// Appends a string literal (§5.2), Huffman-coded when that is shorter.
fn encode_string(s: &[u8], dst: &mut Vec<u8>) {
    let huff_len = huffman::encoded_len(s);
    if huff_len < s.len() {
        encode_integer(huff_len, 7, 0x80, dst);
        huffman::encode(s, dst);
    } else {
        encode_integer(s.len(), 7, 0, dst);
        dst.extend_from_slice(s);
    }
}

/// Appends one field: the static entry's index when name and value both match
/// (e.g. `:method: GET` is one byte), else a literal without indexing (§6.2.2) that
/// reuses a static name index when there is one. `name` must already be lower-case.
pub fn encode_field(name: &[u8], value: &[u8], dst: &mut Vec<u8>) {
    if let Some(i) = static_full_index(name, value) {
        encode_integer(i, 7, 0x80, dst);
        return;
    }
    match static_name_index(name) {
        Some(i) => encode_integer(i, 4, 0x00, dst),
        None => {
            dst.push(0x00);
            encode_string(name, dst);
        }
    }
    encode_string(value, dst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_rfc7541_c1() {
        let mut v = Vec::new();
        encode_integer(10, 5, 0, &mut v);
        assert_eq!(v, [0x0a]);
        v.clear();
        encode_integer(1337, 5, 0, &mut v);
        assert_eq!(v, [0x1f, 0x9a, 0x0a]);
        v.clear();
        encode_integer(42, 8, 0, &mut v);
        assert_eq!(v, [0x2a]);
    }

    #[test]
    fn fields() {
        let mut v = Vec::new();
        encode_field(b":method", b"GET", &mut v);
        assert_eq!(v, [0x82]);
        v.clear();
        // RFC 7541 C.2.2: literal without indexing, name index 4, raw value.
        encode_field(b":path", b"/sample/path", &mut v);
        assert_eq!(v[0], 0x04);
        assert_eq!(v.len(), 1 + 1 + huffman::encoded_len(b"/sample/path"));
        v.clear();
        encode_field(b"x", b"y", &mut v);
        assert_eq!(v, [0x00, 0x01, b'x', 0x01, b'y']);
    }
}
