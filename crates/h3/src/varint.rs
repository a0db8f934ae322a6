//! QUIC variable-length integers (RFC 9000 §16): every HTTP/3 frame type, length,
//! setting and stream type is one. The two high bits of the first byte give the
//! length (1, 2, 4 or 8 bytes); the rest is the value, big-endian.

/// The largest value a varint can carry: 2^62 - 1.
pub const MAX: u64 = (1 << 62) - 1;

/// Decodes the varint at the start of `b`: its value and length, or `None` when `b`
/// ends inside it.
pub fn decode(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let len = 1usize << (first >> 6);
    let rest = b.get(1..len)?;
    let v = rest
        .iter()
        .fold(u64::from(first & 0x3f), |v, &x| (v << 8) | u64::from(x));
    Some((v, len))
}

/// Bytes the shortest encoding of `v` takes (values above [`MAX`] are clamped).
pub fn encoded_len(v: u64) -> usize {
    match v {
        0..=63 => 1,
        64..=16_383 => 2,
        16_384..=1_073_741_823 => 4,
        _ => 8,
    }
}

/// Appends the shortest encoding of `v`; values above [`MAX`] are written as [`MAX`]
/// (callers only write lengths and identifiers far below it).
pub fn encode(v: u64, out: &mut Vec<u8>) {
    let v = v.min(MAX);
    match encoded_len(v) {
        1 => out.push(v as u8),
        2 => out.extend_from_slice(&(v as u16 | 0x4000).to_be_bytes()),
        4 => out.extend_from_slice(&(v as u32 | 0x8000_0000).to_be_bytes()),
        _ => out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc9000_appendix_a1_examples() {
        let cases: [(&[u8], u64); 4] = [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
        ];
        for (bytes, value) in cases {
            assert_eq!(decode(bytes), Some((value, bytes.len())));
            let mut out = Vec::new();
            encode(value, &mut out);
            assert_eq!(out, bytes);
        }
        // A non-minimal encoding is still a valid varint (RFC 9000 §16).
        assert_eq!(decode(&[0x40, 0x25]), Some((37, 2)));
    }

    #[test]
    fn truncated_and_boundaries() {
        assert_eq!(decode(&[]), None);
        assert_eq!(decode(&[0x9d, 0x7f, 0x3e]), None);
        for v in [0, 63, 64, 16_383, 16_384, 1_073_741_823, 1_073_741_824, MAX] {
            let mut out = Vec::new();
            encode(v, &mut out);
            assert_eq!(out.len(), encoded_len(v));
            assert_eq!(decode(&out), Some((v, out.len())));
        }
    }
}
