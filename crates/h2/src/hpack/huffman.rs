//! The HPACK Huffman code (RFC 7541 Appendix B): encoder and a nibble-driven decoder.
//!
//! The RFC's code is canonical: codes are assigned in order of (length, symbol), so
//! the 257 code lengths below are the whole table and every code is derived from them
//! (the tests check derived codes against the RFC's hex column). Decoding walks a
//! finite-state machine four bits at a time (the approach nghttp2 uses): each state
//! is an internal node of the code tree, and a 16-entry row per state says where a
//! nibble leads and which symbol, if any, it completes. No code is shorter than five
//! bits, so one nibble completes at most one symbol.

use std::sync::OnceLock;

use super::HpackError;

/// Code length in bits of each symbol 0..=255 and EOS (256), from RFC 7541 Appendix B.
const CODE_LEN: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, // 0..15
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, // 16..31
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, // ' '..'/'
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, // '0'..'?'
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, // '@'..'O'
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, // 'P'..'_'
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, // '`'..'o'
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, // 'p'..127
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, // 128..143
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, // 144..159
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, // 160..175
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, // 176..191
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, // 192..207
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, // 208..223
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, // 224..239
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, // 240..255
    30, // EOS
];

/// The EOS pseudo-symbol: never valid inside a string (RFC 7541 §5.2).
const EOS: u16 = 256;

/// Canonical codes, right-aligned, derived from [`CODE_LEN`].
static CODES: OnceLock<[u32; 257]> = OnceLock::new();

fn codes() -> &'static [u32; 257] {
    CODES.get_or_init(|| {
        let mut order: Vec<u16> = (0..257u16).collect();
        order.sort_by_key(|&s| (CODE_LEN[s as usize], s));
        let mut out = [0u32; 257];
        let mut code: u32 = 0;
        let mut prev_len = CODE_LEN[order[0] as usize];
        for (i, &sym) in order.iter().enumerate() {
            let len = CODE_LEN[sym as usize];
            if i > 0 {
                code = (code + 1) << (len - prev_len);
            }
            out[sym as usize] = code;
            prev_len = len;
        }
        out
    })
}

/// Number of bytes `src` takes once Huffman-encoded (padding included).
pub fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src.iter().map(|&b| CODE_LEN[b as usize] as usize).sum();
    bits.div_ceil(8)
}

/// Appends the Huffman encoding of `src` to `dst`, padded with the EOS prefix (1 bits).
pub fn encode(src: &[u8], dst: &mut Vec<u8>) {
    let codes = codes();
    let mut acc: u64 = 0;
    let mut nbits: u32 = 0;
    for &b in src {
        let len = CODE_LEN[b as usize] as u32;
        acc = (acc << len) | codes[b as usize] as u64;
        nbits += len;
        while nbits >= 8 {
            nbits -= 8;
            dst.push((acc >> nbits) as u8);
        }
        acc &= (1u64 << nbits) - 1;
    }
    if nbits > 0 {
        let pad = 8 - nbits;
        dst.push(((acc << pad) | ((1u64 << pad) - 1)) as u8);
    }
}

/// One transition of the decoding machine.
#[derive(Clone, Copy, Default)]
struct Step {
    /// State (internal tree node) after the nibble.
    next: u16,
    /// Symbol completed by this nibble, if `EMIT` is set.
    sym: u8,
    /// `EMIT` and/or `FAIL` (the nibble walked into EOS).
    flags: u8,
}

const EMIT: u8 = 1;
const FAIL: u8 = 2;

/// The decoding machine: 16 steps per state, and whether a string may end in a state
/// (the bits since the last symbol are all 1s and fewer than 8: valid padding).
struct Machine {
    steps: Vec<[Step; 16]>,
    accepting: Vec<bool>,
}

static MACHINE: OnceLock<Machine> = OnceLock::new();

/// A node of the code tree during construction: children are node indices, or
/// `LEAF | symbol`.
const LEAF: u32 = 1 << 31;

fn machine() -> &'static Machine {
    MACHINE.get_or_init(|| {
        let codes = codes();
        // Build the tree of internal nodes; node 0 is the root.
        let mut tree: Vec<[u32; 2]> = vec![[0, 0]];
        for sym in 0..257usize {
            let len = CODE_LEN[sym] as u32;
            let code = codes[sym];
            let mut node = 0usize;
            for i in (0..len).rev() {
                let bit = ((code >> i) & 1) as usize;
                if i == 0 {
                    tree[node][bit] = LEAF | sym as u32;
                } else {
                    if tree[node][bit] == 0 {
                        tree.push([0, 0]);
                        tree[node][bit] = (tree.len() - 1) as u32;
                    }
                    node = tree[node][bit] as usize;
                }
            }
        }
        // Accepting states: reached from the root by 0..=7 one-bits.
        let mut accepting = vec![false; tree.len()];
        let mut node = 0usize;
        accepting[0] = true;
        for _ in 0..7 {
            let child = tree[node][1];
            if child & LEAF != 0 {
                break;
            }
            node = child as usize;
            accepting[node] = true;
        }
        let mut steps = vec![[Step::default(); 16]; tree.len()];
        for (state, row) in steps.iter_mut().enumerate() {
            for (nibble, step) in row.iter_mut().enumerate() {
                let mut node = state;
                for i in (0..4).rev() {
                    let child = tree[node][(nibble >> i) & 1];
                    if child & LEAF != 0 {
                        let sym = (child & !LEAF) as u16;
                        if sym == EOS {
                            step.flags |= FAIL;
                            break;
                        }
                        step.sym = sym as u8;
                        step.flags |= EMIT;
                        node = 0;
                    } else {
                        node = child as usize;
                    }
                }
                step.next = node as u16;
            }
        }
        Machine { steps, accepting }
    })
}

/// Decodes a Huffman-coded string into `dst` (appending).
///
/// Errors (all COMPRESSION_ERROR in RFC 7541 §5.2 terms): the EOS symbol inside the
/// string, padding longer than 7 bits, or padding that is not the EOS prefix.
pub fn decode(src: &[u8], dst: &mut Vec<u8>) -> Result<(), HpackError> {
    let m = machine();
    let mut state = 0usize;
    for &byte in src {
        for nibble in [byte >> 4, byte & 0x0f] {
            let step = m.steps[state][nibble as usize];
            if step.flags & FAIL != 0 {
                return Err(HpackError::HuffmanEos);
            }
            if step.flags & EMIT != 0 {
                dst.push(step.sym);
            }
            state = step.next as usize;
        }
    }
    if m.accepting[state] {
        Ok(())
    } else {
        Err(HpackError::HuffmanPadding)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hpack::hex;

    #[test]
    fn derived_codes_match_rfc_hex_column() {
        let c = codes();
        // (symbol, code as hex, length) rows copied from RFC 7541 Appendix B.
        let rows: [(usize, u32, u8); 14] = [
            (0, 0x1ff8, 13),
            (1, 0x7fffd8, 23),
            (10, 0x3ffffffc, 30),
            (32, 0x14, 6),
            (48, 0x0, 5),
            (58, 0x5c, 7),
            (92, 0x7fff0, 19),
            (127, 0xffffffc, 28),
            (153, 0x1fffdc, 21),
            (199, 0x1ffffec, 25),
            (220, 0xffffffd, 28),
            (249, 0xffffffe, 28),
            (255, 0x3ffffee, 26),
            (256, 0x3fffffff, 30),
        ];
        for (sym, code, len) in rows {
            assert_eq!((c[sym], CODE_LEN[sym]), (code, len), "symbol {sym}");
        }
    }

    #[test]
    fn code_is_complete_prefix_code() {
        // Kraft sum of a complete code is exactly 1 (here scaled by 2^30).
        let sum: u64 = CODE_LEN.iter().map(|&l| 1u64 << (30 - l)).sum();
        assert_eq!(sum, 1u64 << 30);
        assert_eq!(machine().steps.len(), 256);
    }

    #[test]
    fn rfc7541_appendix_c_strings() {
        let vectors = [
            ("f1e3 c2e5 f23a 6ba0 ab90 f4ff", "www.example.com"),
            ("a8eb 1064 9cbf", "no-cache"),
            ("25a8 49e9 5ba9 7d7f", "custom-key"),
            ("25a8 49e9 5bb8 e8b4 bf", "custom-value"),
            ("6402", "302"),
            ("aec3 771a 4b", "private"),
            (
                "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
                "Mon, 21 Oct 2013 20:13:21 GMT",
            ),
            (
                "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3",
                "https://www.example.com",
            ),
            ("9bd9 ab", "gzip"),
            (
                "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
                "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
            ),
        ];
        for (h, text) in vectors {
            let mut out = Vec::new();
            decode(&hex(h), &mut out).unwrap();
            assert_eq!(out, text.as_bytes());
            let mut enc = Vec::new();
            encode(text.as_bytes(), &mut enc);
            assert_eq!(enc, hex(h), "{text}");
            assert_eq!(encoded_len(text.as_bytes()), enc.len());
        }
    }

    #[test]
    fn every_byte_round_trips() {
        let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        let mut enc = Vec::new();
        encode(&all, &mut enc);
        let mut dec = Vec::new();
        decode(&enc, &mut dec).unwrap();
        assert_eq!(dec, all);
    }

    #[test]
    fn rejects_eos_and_bad_padding() {
        // 30 one-bits = EOS, padded: 0xff 0xff 0xff 0xff.
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xff], &mut Vec::new()),
            Err(HpackError::HuffmanEos)
        );
        // '0' is 00000; padding 000 is not the EOS prefix.
        assert_eq!(
            decode(&[0x00], &mut Vec::new()),
            Err(HpackError::HuffmanPadding)
        );
        // 'a' (00011) then 0xff: 3 + 8 = 11 padding bits, more than 7.
        assert_eq!(
            decode(&[0x1f, 0xff], &mut Vec::new()),
            Err(HpackError::HuffmanPadding)
        );
        // Empty string is valid.
        assert_eq!(decode(&[], &mut Vec::new()), Ok(()));
    }
}
