//! The HPACK decoder (RFC 7541 §6): one per connection, fed whole header blocks.

use super::huffman;
use super::table::{lookup, DynamicTable, ENTRY_OVERHEAD};
use super::HpackError;

/// Which decoded fields the caller wants to see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldMode {
    /// Every field is decoded and reported.
    All,
    /// Only pseudo-header fields (`:status`) are reported. Literal values that are
    /// neither reported nor added to the dynamic table are skipped without decoding,
    /// which is the engine's hot path: it needs the status and nothing else. A skipped
    /// Huffman value is not checked for valid padding, and counts towards the header
    /// list limit at its encoded length.
    PseudoOnly,
}

/// Decoder state: the dynamic table plus reusable scratch buffers, so decoding a
/// block allocates only when the dynamic table gains an entry.
#[derive(Debug, Clone)]
pub struct Decoder {
    table: DynamicTable,
    /// SETTINGS_HEADER_TABLE_SIZE we advertised: the ceiling for size updates.
    max_table_size: usize,
    /// SETTINGS_MAX_HEADER_LIST_SIZE we advertised.
    max_list_size: usize,
    name: Vec<u8>,
    value: Vec<u8>,
}

/// A cursor over the block being decoded.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn byte(&self) -> Result<u8, HpackError> {
        self.buf.get(self.pos).copied().ok_or(HpackError::Truncated)
    }

    /// Reads an integer with an `n`-bit prefix (§5.1); at most 32 bits of value.
    fn integer(&mut self, n: u8) -> Result<u32, HpackError> {
        let mask = ((1u16 << n) - 1) as u8;
        let first = self.byte()? & mask;
        self.pos += 1;
        if first < mask {
            return Ok(first as u32);
        }
        let mut value = mask as u64;
        let mut shift = 0u32;
        loop {
            let b = self.byte()?;
            self.pos += 1;
            value += ((b & 0x7f) as u64) << shift;
            if value > u32::MAX as u64 {
                return Err(HpackError::IntegerOverflow);
            }
            if b & 0x80 == 0 {
                return Ok(value as u32);
            }
            shift += 7;
            if shift > 28 {
                return Err(HpackError::IntegerOverflow);
            }
        }
    }

    /// Reads a string literal's header and returns (huffman, raw bytes).
    fn string(&mut self) -> Result<(bool, &'a [u8]), HpackError> {
        let huffman = self.byte()? & 0x80 != 0;
        let len = self.integer(7)? as usize;
        let end = self.pos.checked_add(len).ok_or(HpackError::Truncated)?;
        let raw = self.buf.get(self.pos..end).ok_or(HpackError::Truncated)?;
        self.pos = end;
        Ok((huffman, raw))
    }
}

/// Writes a string literal into `dst` (cleared first).
fn materialise(huffman: bool, raw: &[u8], dst: &mut Vec<u8>) -> Result<(), HpackError> {
    dst.clear();
    if huffman {
        huffman::decode(raw, dst)
    } else {
        dst.extend_from_slice(raw);
        Ok(())
    }
}

impl Decoder {
    /// A decoder for a connection where we advertised `max_table_size`
    /// (SETTINGS_HEADER_TABLE_SIZE, 4096 by default) and `max_list_size`
    /// (SETTINGS_MAX_HEADER_LIST_SIZE).
    pub fn new(max_table_size: usize, max_list_size: usize) -> Self {
        Decoder {
            table: DynamicTable::new(max_table_size),
            max_table_size,
            max_list_size,
            name: Vec::new(),
            value: Vec::new(),
        }
    }

    /// The dynamic table, for inspection (tests, diagnostics).
    pub fn table(&self) -> &DynamicTable {
        &self.table
    }

    /// Decodes one complete header block, calling `on_field(name, value)` for each
    /// field `mode` selects, in order.
    ///
    /// The block is always decoded to its end when the encoding is valid, even when
    /// the list exceeds the size limit, so the dynamic table stays in step with the
    /// peer's encoder; the limit is then reported as
    /// [`HpackError::HeaderListTooLarge`] after the last field.
    pub fn decode<F: FnMut(&[u8], &[u8])>(
        &mut self,
        block: &[u8],
        mode: FieldMode,
        mut on_field: F,
    ) -> Result<(), HpackError> {
        let mut cur = Cursor { buf: block, pos: 0 };
        let mut list_size = 0usize;
        let mut seen_field = false;
        while cur.pos < block.len() {
            let b = cur.byte()?;
            if b & 0x80 != 0 {
                // Indexed field (§6.1).
                let index = cur.integer(7)?;
                if index == 0 {
                    return Err(HpackError::IndexZero);
                }
                let (name, value) = lookup(&self.table, index as usize)
                    .ok_or(HpackError::IndexOutOfRange(index))?;
                list_size += name.len() + value.len() + ENTRY_OVERHEAD;
                if wanted(mode, name) && list_size <= self.max_list_size {
                    on_field(name, value);
                }
                seen_field = true;
                continue;
            }
            if b & 0xe0 == 0x20 {
                // Dynamic table size update (§6.3).
                if seen_field {
                    return Err(HpackError::SizeUpdateNotAtStart);
                }
                let size = cur.integer(5)?;
                if size as usize > self.max_table_size {
                    return Err(HpackError::SizeUpdateTooLarge(size));
                }
                self.table.set_max_size(size as usize);
                continue;
            }
            // Literals: with incremental indexing (01, 6-bit prefix), without
            // indexing (0000) or never indexed (0001), both with a 4-bit prefix.
            let indexing = b & 0xc0 == 0x40;
            let index = cur.integer(if indexing { 6 } else { 4 })?;
            if index == 0 {
                let (h, raw) = cur.string()?;
                materialise(h, raw, &mut self.name)?;
            } else {
                let (name, _) = lookup(&self.table, index as usize)
                    .ok_or(HpackError::IndexOutOfRange(index))?;
                self.name.clear();
                self.name.extend_from_slice(name);
            }
            let (h, raw) = cur.string()?;
            seen_field = true;
            let report = wanted(mode, &self.name);
            if !indexing && !report {
                list_size += self.name.len() + raw.len() + ENTRY_OVERHEAD;
                continue;
            }
            materialise(h, raw, &mut self.value)?;
            list_size += self.name.len() + self.value.len() + ENTRY_OVERHEAD;
            if report && list_size <= self.max_list_size {
                on_field(&self.name, &self.value);
            }
            if indexing {
                self.table.insert(&self.name, &self.value);
            }
        }
        if list_size > self.max_list_size {
            return Err(HpackError::HeaderListTooLarge(self.max_list_size));
        }
        Ok(())
    }
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
    use crate::hpack::hex;

    fn run(d: &mut Decoder, block: &str, mode: FieldMode) -> Vec<(String, String)> {
        let mut out = Vec::new();
        d.decode(&hex(block), mode, |n, v| {
            out.push((
                String::from_utf8(n.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            ))
        })
        .unwrap();
        out
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn integers_rfc7541_c1() {
        let mut c = Cursor {
            buf: &[0x1f, 0x9a, 0x0a],
            pos: 0,
        };
        assert_eq!(c.integer(5), Ok(1337));
        let mut c = Cursor {
            buf: &[0x2a],
            pos: 0,
        };
        assert_eq!(c.integer(8), Ok(42));
        let mut c = Cursor {
            buf: &[0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            pos: 0,
        };
        assert_eq!(c.integer(5), Err(HpackError::IntegerOverflow));
        let mut c = Cursor {
            buf: &[0x1f, 0x9a],
            pos: 0,
        };
        assert_eq!(c.integer(5), Err(HpackError::Truncated));
    }

    #[test]
    fn rfc7541_c2_single_fields() {
        // C.2.1 literal with indexing.
        let mut d = Decoder::new(4096, 65536);
        let f = run(
            &mut d,
            "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
            FieldMode::All,
        );
        assert_eq!(f, pairs(&[("custom-key", "custom-header")]));
        assert_eq!(d.table().size(), 55);
        // C.2.2 literal without indexing.
        let mut d = Decoder::new(4096, 65536);
        let f = run(&mut d, "040c 2f73 616d 706c 652f 7061 7468", FieldMode::All);
        assert_eq!(f, pairs(&[(":path", "/sample/path")]));
        assert_eq!(d.table().len(), 0);
        // C.2.3 never indexed.
        let f = run(
            &mut d,
            "1008 7061 7373 776f 7264 0673 6563 7265 74",
            FieldMode::All,
        );
        assert_eq!(f, pairs(&[("password", "secret")]));
        assert_eq!(d.table().len(), 0);
        // C.2.4 indexed.
        assert_eq!(
            run(&mut d, "82", FieldMode::All),
            pairs(&[(":method", "GET")])
        );
    }

    /// C.3 (raw strings) and C.4 (Huffman): three requests on one connection.
    #[test]
    fn rfc7541_c3_c4_requests() {
        let blocks = [
            [
                "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                "8286 84be 5808 6e6f 2d63 6163 6865",
                "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
            ],
            [
                "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
                "8286 84be 5886 a8eb 1064 9cbf",
                "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
            ],
        ];
        let expected = [
            pairs(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com"),
            ]),
            pairs(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com"),
                ("cache-control", "no-cache"),
            ]),
            pairs(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/index.html"),
                (":authority", "www.example.com"),
                ("custom-key", "custom-value"),
            ]),
        ];
        let sizes = [57, 110, 164];
        for set in blocks {
            let mut d = Decoder::new(4096, 65536);
            for i in 0..3 {
                assert_eq!(run(&mut d, set[i], FieldMode::All), expected[i]);
                assert_eq!(d.table().size(), sizes[i]);
            }
        }
    }

    /// C.5 (raw) and C.6 (Huffman): responses with a 256-byte table and evictions.
    #[test]
    fn rfc7541_c5_c6_responses_with_eviction() {
        let blocks = [
            [
                "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                "4803 3330 37c1 c0bf",
                "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
            ],
            [
                "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
                "4883 640e ffc1 c0bf",
                "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
            ],
        ];
        let date1 = "Mon, 21 Oct 2013 20:13:21 GMT";
        let loc = "https://www.example.com";
        let expected = [
            pairs(&[
                (":status", "302"),
                ("cache-control", "private"),
                ("date", date1),
                ("location", loc),
            ]),
            pairs(&[
                (":status", "307"),
                ("cache-control", "private"),
                ("date", date1),
                ("location", loc),
            ]),
            pairs(&[
                (":status", "200"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
                ("location", loc),
                ("content-encoding", "gzip"),
                (
                    "set-cookie",
                    "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
                ),
            ]),
        ];
        let sizes = [222, 222, 215];
        let lens = [4, 4, 3];
        for set in blocks {
            let mut d = Decoder::new(256, 65536);
            for i in 0..3 {
                assert_eq!(run(&mut d, set[i], FieldMode::All), expected[i]);
                assert_eq!((d.table().size(), d.table().len()), (sizes[i], lens[i]));
            }
            // Pseudo-only mode reports just :status and keeps the table in step.
            let mut d2 = Decoder::new(256, 65536);
            for (i, block) in set.iter().enumerate() {
                let f = run(&mut d2, block, FieldMode::PseudoOnly);
                assert_eq!(f, expected[i][..1].to_vec());
            }
            assert_eq!(d2.table().size(), 215);
        }
    }

    #[test]
    fn size_updates() {
        let mut d = Decoder::new(4096, 65536);
        run(&mut d, "4003 6162 6303 6465 66", FieldMode::All); // abc: def indexed
        assert_eq!(d.table().len(), 1);
        // Update to 0 then 4096 at block start: evicts everything, then an indexed field.
        assert_eq!(
            run(&mut d, "20 3fe1 1f 82", FieldMode::All),
            pairs(&[(":method", "GET")])
        );
        assert_eq!(d.table().len(), 0);
        // Above our advertised size.
        assert_eq!(
            d.decode(&hex("3fe2 1f"), FieldMode::All, |_, _| {}),
            Err(HpackError::SizeUpdateTooLarge(4097))
        );
        // After a field.
        assert_eq!(
            d.decode(&hex("82 20"), FieldMode::All, |_, _| {}),
            Err(HpackError::SizeUpdateNotAtStart)
        );
    }

    #[test]
    fn malformed_blocks_are_errors() {
        let mut d = Decoder::new(4096, 65536);
        let cases: [(&str, HpackError); 5] = [
            ("80", HpackError::IndexZero),
            ("be", HpackError::IndexOutOfRange(62)),
            ("4005 6162", HpackError::Truncated),
            ("00 84 ffff ffff 00", HpackError::HuffmanEos),
            ("7f", HpackError::Truncated),
        ];
        for (block, err) in cases {
            assert_eq!(
                d.decode(&hex(block), FieldMode::All, |_, _| {}),
                Err(err),
                "{block}"
            );
        }
    }

    #[test]
    fn header_list_limit_reports_after_decoding_whole_block() {
        let mut d = Decoder::new(4096, 40);
        let mut seen = 0;
        // Two indexed-with-incremental-indexing fields of 32 + 6 bytes each.
        let r = d.decode(
            &hex("4003 6162 6303 6465 66 4003 6768 6903 6a6b 6c"),
            FieldMode::All,
            |_, _| seen += 1,
        );
        assert_eq!(r, Err(HpackError::HeaderListTooLarge(40)));
        assert_eq!(seen, 1);
        assert_eq!(d.table().len(), 2, "table still in step");
    }

    /// Random and mutated blocks: never a panic, the table never exceeds its
    /// maximum, and reported fields never exceed the list limit.
    #[test]
    fn fuzz_blocks_never_panic_and_stay_bounded() {
        let seeds = [
            hex("4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3"),
            hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"),
            hex("3fe1 1f 4003 6162 6303 6465 66 be"),
        ];
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut ok = 0;
        for round in 0..20_000 {
            let mut block = if round % 5 == 0 {
                (0..next() % 64).map(|_| next() as u8).collect()
            } else {
                seeds[(next() % 3) as usize].clone()
            };
            for _ in 0..1 + next() % 4 {
                if block.is_empty() {
                    break;
                }
                let i = (next() % block.len() as u64) as usize;
                block[i] ^= 1 << (next() % 8);
            }
            let mode = if round % 2 == 0 {
                FieldMode::All
            } else {
                FieldMode::PseudoOnly
            };
            let mut d = Decoder::new(256, 200);
            let mut reported = 0;
            if d.decode(&block, mode, |n, v| reported += n.len() + v.len() + 32)
                .is_ok()
            {
                ok += 1;
            }
            assert!(reported <= 200);
            assert!(d.table().size() <= 256);
        }
        assert!(ok > 100 && ok < 20_000, "{ok}");
    }
}
