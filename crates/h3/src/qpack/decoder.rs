//! The QPACK decoder of one connection (RFC 9204): the dynamic table the peer's
//! encoder fills through its encoder stream, field sections decoded against it, and
//! the instructions of our decoder stream that tell the encoder what we have.
//!
//! Blocked streams: we announce SETTINGS_QPACK_BLOCKED_STREAMS = 0, so the encoder
//! may refer only to entries we have acknowledged (§2.1.2): a section whose
//! Required Insert Count is above what has arrived is a connection error, never a
//! stream left waiting. That keeps the engine's per-stream reader free of a
//! held-back state, at a cost the encoder pays: an entry helps from the response
//! after our Insert Count Increment reached it, not from the first one. We send
//! that increment as soon as inserts arrive, so the encoder learns of them within a
//! round trip.
//!
//! Allocation: an insert allocates its entry (one box for name and value); decoding
//! a section borrows names and values from the table and allocates nothing once the
//! Huffman buffers have grown.

use std::collections::VecDeque;

use volley_h2::hpack::{encode_integer, FieldMode};

use super::{add_size, entry, materialise, wanted, Cursor, FIELD_OVERHEAD};
use crate::error::QpackError;

/// One dynamic table entry: name and value in one allocation.
#[derive(Debug, Clone)]
struct Entry {
    bytes: Box<[u8]>,
    name_len: usize,
}

impl Entry {
    fn name(&self) -> &[u8] {
        &self.bytes[..self.name_len]
    }

    fn value(&self) -> &[u8] {
        &self.bytes[self.name_len..]
    }

    /// Its size as the table counts it (§3.2.1).
    fn size(&self) -> usize {
        self.bytes.len() + FIELD_OVERHEAD
    }
}

/// The dynamic table (§3.2): entries oldest first, the newest at absolute index
/// `inserted - 1`.
#[derive(Debug, Clone, Default)]
struct Table {
    entries: VecDeque<Entry>,
    /// Sum of the entries' sizes.
    size: usize,
    /// The capacity the encoder set (at most what we announced).
    capacity: usize,
    /// Inserts ever made: the Insert Count (§2.1.4 calls it the total).
    inserted: u64,
}

impl Table {
    /// The entry at absolute index `abs`, if it is still in the table.
    fn get(&self, abs: u64) -> Option<&Entry> {
        let first = self.inserted - self.entries.len() as u64;
        let at = abs.checked_sub(first)?;
        self.entries.get(usize::try_from(at).ok()?)
    }

    /// The absolute index of an encoder-stream relative index (§3.2.5: 0 is the
    /// newest entry).
    fn relative(&self, rel: u64) -> Result<u64, QpackError> {
        self.inserted
            .checked_sub(rel + 1)
            .ok_or(QpackError::DynamicReference)
    }

    /// Drops the oldest entries until `room` more bytes fit.
    fn evict_for(&mut self, room: usize) {
        while self.size + room > self.capacity {
            match self.entries.pop_front() {
                Some(e) => self.size -= e.size(),
                None => break,
            }
        }
    }

    /// Adds an entry, evicting as needed; one larger than the capacity is an error
    /// (§3.2.2). The entry is built before anything is evicted, so a name taken from
    /// an entry this insert evicts is still whole (§4.3.2's caution).
    fn insert(&mut self, name: &[u8], value: &[u8]) -> Result<(), QpackError> {
        let size = name.len() + value.len() + FIELD_OVERHEAD;
        if size > self.capacity {
            return Err(QpackError::TableCapacity);
        }
        let mut bytes = Vec::with_capacity(name.len() + value.len());
        bytes.extend_from_slice(name);
        bytes.extend_from_slice(value);
        self.evict_for(size);
        self.entries.push_back(Entry {
            bytes: bytes.into_boxed_slice(),
            name_len: name.len(),
        });
        self.size += size;
        self.inserted += 1;
        Ok(())
    }
}

/// What a decoder counted since the caller last asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecoderCounts {
    /// Field lines resolved through the dynamic table (indexed, post-base, or a
    /// literal with a dynamic name).
    pub dynamic_refs: u64,
    /// Entries the encoder inserted (inserts and duplicates).
    pub inserts: u64,
}

/// The QPACK decoder of one connection: its dynamic table (capacity 0 unless made
/// with [`Decoder::with_table`]), the encoder stream's partial instruction, and the
/// decoder-stream instructions waiting to be sent.
#[derive(Debug, Clone, Default)]
pub struct Decoder {
    /// SETTINGS_MAX_FIELD_SECTION_SIZE we advertised.
    max_section_size: usize,
    /// SETTINGS_QPACK_MAX_TABLE_CAPACITY we advertised.
    max_capacity: usize,
    table: Table,
    /// Inserts the encoder knows we have (Section Acknowledgments and Insert Count
    /// Increments sent): the Known Received Count of §2.1.4, from our side.
    known_received: u64,
    /// Bytes of an encoder-stream instruction split across reads.
    partial: Vec<u8>,
    /// Decoder-stream instructions not yet handed to the stream.
    instructions: Vec<u8>,
    counts: DecoderCounts,
    name: Vec<u8>,
    value: Vec<u8>,
}

impl Decoder {
    /// A decoder enforcing the field section limit we advertise, with no dynamic
    /// table (we advertise a capacity of 0: any reference to one is an error).
    pub fn new(max_section_size: usize) -> Decoder {
        Decoder::with_table(max_section_size, 0)
    }

    /// A decoder whose dynamic table may grow to `max_capacity` bytes: what we
    /// advertise as SETTINGS_QPACK_MAX_TABLE_CAPACITY. The table starts at capacity 0
    /// until the encoder sets one (§3.2.3).
    pub fn with_table(max_section_size: usize, max_capacity: usize) -> Decoder {
        Decoder {
            max_section_size,
            max_capacity,
            ..Decoder::default()
        }
    }

    /// The capacity we advertise.
    pub fn max_table_capacity(&self) -> usize {
        self.max_capacity
    }

    /// The table's current size, in §3.2.1's bytes (never above its capacity).
    pub fn table_size(&self) -> usize {
        self.table.size
    }

    /// What was counted since the last call, reset.
    pub fn take_counts(&mut self) -> DecoderCounts {
        std::mem::take(&mut self.counts)
    }

    /// Decoder-stream instructions to send (Section Acknowledgment, Stream
    /// Cancellation, Insert Count Increment, §4.4); the caller writes what the stream
    /// takes and removes it with [`Decoder::sent`].
    pub fn instructions(&self) -> &[u8] {
        &self.instructions
    }

    /// The first `n` bytes of [`Decoder::instructions`] went out.
    pub fn sent(&mut self, n: usize) {
        self.instructions.drain(..n.min(self.instructions.len()));
    }

    /// We abandoned request stream `stream_id` (reset by the peer, cancelled, or
    /// failed) before all its sections were decoded: Stream Cancellation (§4.4.2), so
    /// the encoder stops keeping entries for it. Without a table nothing is said
    /// (§4.2 lets such a decoder skip its stream).
    pub fn cancel_stream(&mut self, stream_id: u64) {
        if self.max_capacity > 0 {
            // 01 Stream ID (6+)
            encode_integer(stream_id as usize, 6, 0x40, &mut self.instructions);
        }
    }

    /// Reads the next bytes of the peer's encoder stream (§4.3): capacity changes,
    /// inserts and duplicates, split across reads in any way. Inserts that arrived
    /// are acknowledged at once with an Insert Count Increment. Errors are
    /// QPACK_ENCODER_STREAM_ERROR.
    pub fn feed_encoder(&mut self, input: &[u8]) -> Result<(), QpackError> {
        // The longest instruction: a name and value that fit the table, Huffman
        // coded (at most 30 bits a byte, RFC 7541 Appendix B), and their lengths.
        let longest = self.max_capacity.saturating_mul(4).saturating_add(32);
        let mut input = input;
        while !input.is_empty() {
            let take = (longest.saturating_add(1) - self.partial.len()).min(input.len());
            self.partial.extend_from_slice(&input[..take]);
            input = &input[take..];
            let mut done = 0;
            loop {
                let mut c = Cursor {
                    buf: &self.partial,
                    pos: done,
                };
                if c.pos == c.buf.len() {
                    break;
                }
                let (table, max) = (&mut self.table, self.max_capacity);
                match encoder_instruction(&mut c, table, max, &mut self.name, &mut self.value) {
                    Ok(inserted) => {
                        self.counts.inserts += u64::from(inserted);
                        done = c.pos;
                    }
                    Err(QpackError::Truncated) if self.partial.len() - done <= longest => break,
                    Err(QpackError::Truncated) => return Err(QpackError::TableCapacity),
                    Err(e) => return Err(e),
                }
            }
            self.partial.drain(..done);
        }
        let new = self.table.inserted - self.known_received;
        if new > 0 {
            // 00 Increment (6+)
            encode_integer(new as usize, 6, 0x00, &mut self.instructions);
            self.known_received = self.table.inserted;
        }
        Ok(())
    }

    /// Decodes one field section of request stream `stream_id`, calling
    /// `on_field(name, value)` for each field `mode` asks for, in order. In
    /// [`FieldMode::PseudoOnly`], literal values of regular fields are skipped
    /// undecoded (they count at their encoded length). The size limit is checked as
    /// fields come, so an oversized section stops at the field that crosses it. A
    /// section that used the dynamic table is acknowledged (§4.4.1).
    pub fn decode<F: FnMut(&[u8], &[u8])>(
        &mut self,
        stream_id: u64,
        section: &[u8],
        mode: FieldMode,
        mut on_field: F,
    ) -> Result<(), QpackError> {
        let mut c = Cursor {
            buf: section,
            pos: 0,
        };
        let ric = self.required_insert_count(c.integer(8)?)?;
        let negative = c.byte()? & 0x80 != 0;
        let delta = c.integer(7)?;
        // §4.5.1.2: Base = RIC + Delta, or RIC - Delta - 1 with the sign bit.
        let base = if negative {
            ric.checked_sub(delta + 1)
        } else {
            ric.checked_add(delta)
        }
        .ok_or(QpackError::DynamicReference)?;
        if ric > self.table.inserted {
            // The encoder may not make us wait: we allow no blocked streams.
            return Err(QpackError::Blocked {
                required: ric,
                inserted: self.table.inserted,
            });
        }
        let Decoder {
            table,
            name: name_buf,
            value: value_buf,
            max_section_size,
            counts,
            ..
        } = self;
        // A dynamic entry a line may use: below the Required Insert Count, still in
        // the table (§2.2.3: anything else is QPACK_DECOMPRESSION_FAILED).
        let table: &Table = table;
        let dynamic = move |abs: Option<u64>| -> Result<&Entry, QpackError> {
            abs.filter(|&a| a < ric)
                .and_then(|a| table.get(a))
                .ok_or(QpackError::DynamicReference)
        };
        let mut size = 0usize;
        let mut refs = 0u64;
        while c.pos < section.len() {
            let b = c.byte()?;
            let (name, value): (&[u8], &[u8]) = if b & 0x80 != 0 {
                // Indexed field line: 1 T index(6+).
                let static_table = b & 0x40 != 0;
                let index = c.integer(6)?;
                if static_table {
                    entry(index)?
                } else {
                    refs += 1;
                    let e = dynamic(base.checked_sub(index + 1))?;
                    (e.name(), e.value())
                }
            } else if b & 0x40 != 0 || b & 0xf0 == 0 {
                // Literal with name reference: 0 1 N T index(4+), or with a post-base
                // name reference: 0 0 0 0 N index(3+); then the value (H, 7+).
                let name: &[u8] = if b & 0x40 == 0 {
                    refs += 1;
                    let index = c.integer(3)?;
                    dynamic(base.checked_add(index))?.name()
                } else if b & 0x10 != 0 {
                    entry(c.integer(4)?)?.0
                } else {
                    refs += 1;
                    let index = c.integer(4)?;
                    dynamic(base.checked_sub(index + 1))?.name()
                };
                let (h, raw) = c.string(7)?;
                if !wanted(mode, name) {
                    size = add_size(size, name.len() + raw.len(), *max_section_size)?;
                    continue;
                }
                (name, materialise(h, raw, value_buf)?)
            } else if b & 0x20 != 0 {
                // Literal with literal name: 0 0 1 N H length(3+), name, value (7+).
                let (hn, raw_name) = c.string(3)?;
                let name = materialise(hn, raw_name, name_buf)?;
                let (hv, raw) = c.string(7)?;
                if !wanted(mode, name) {
                    size = add_size(size, name.len() + raw.len(), *max_section_size)?;
                    continue;
                }
                (name, materialise(hv, raw, value_buf)?)
            } else {
                // Indexed field line with post-base index: 0 0 0 1 index(4+).
                refs += 1;
                let e = dynamic(base.checked_add(c.integer(4)?))?;
                (e.name(), e.value())
            };
            size = add_size(size, name.len() + value.len(), *max_section_size)?;
            if wanted(mode, name) {
                on_field(name, value);
            }
        }
        counts.dynamic_refs += refs;
        if ric > 0 {
            // 1 Stream ID (7+): the section is done with, and so are its entries.
            encode_integer(stream_id as usize, 7, 0x80, &mut self.instructions);
            self.known_received = self.known_received.max(ric);
        }
        Ok(())
    }

    /// The Required Insert Count from its encoded form (§4.5.1.1).
    fn required_insert_count(&self, encoded: u64) -> Result<u64, QpackError> {
        if encoded == 0 {
            return Ok(0);
        }
        let max_entries = (self.max_capacity / FIELD_OVERHEAD) as u64;
        let full_range = 2 * max_entries;
        if encoded > full_range {
            return Err(QpackError::RequiredInsertCount);
        }
        let max_value = self.table.inserted + max_entries;
        let max_wrapped = (max_value / full_range) * full_range;
        let mut ric = max_wrapped + encoded - 1;
        if ric > max_value {
            if ric <= full_range {
                return Err(QpackError::RequiredInsertCount);
            }
            ric -= full_range;
        }
        if ric == 0 {
            return Err(QpackError::RequiredInsertCount);
        }
        Ok(ric)
    }
}

/// Applies one encoder-stream instruction at the cursor (§4.3); returns how many
/// entries it inserted (0 or 1). [`QpackError::Truncated`] means the instruction is
/// not whole yet: nothing was applied. `name_buf` and `value_buf` hold Huffman-decoded
/// strings.
fn encoder_instruction(
    c: &mut Cursor<'_>,
    table: &mut Table,
    max_capacity: usize,
    name_buf: &mut Vec<u8>,
    value_buf: &mut Vec<u8>,
) -> Result<u8, QpackError> {
    let b = c.byte()?;
    if b & 0x80 != 0 {
        // Insert with name reference: 1 T index(6+), value (H, 7+).
        let static_table = b & 0x40 != 0;
        let index = c.integer(6)?;
        let (h, raw) = c.string(7)?;
        let value = materialise(h, raw, value_buf)?;
        name_buf.clear();
        if static_table {
            name_buf.extend_from_slice(entry(index)?.0);
        } else {
            // Copied out: the entry may be the one this insert evicts.
            let e = table.get(table.relative(index)?);
            name_buf.extend_from_slice(e.ok_or(QpackError::DynamicReference)?.name());
        }
        table.insert(name_buf, value)?;
        Ok(1)
    } else if b & 0x40 != 0 {
        // Insert with literal name: 0 1 H length(5+), name, value (H, 7+).
        let (hn, raw_name) = c.string(5)?;
        let (hv, raw_value) = c.string(7)?;
        let name = materialise(hn, raw_name, name_buf)?;
        let value = materialise(hv, raw_value, value_buf)?;
        table.insert(name, value)?;
        Ok(1)
    } else if b & 0x20 != 0 {
        // Set Dynamic Table Capacity: 0 0 1 capacity(5+).
        let capacity = usize::try_from(c.integer(5)?)
            .ok()
            .filter(|&cap| cap <= max_capacity)
            .ok_or(QpackError::TableCapacity)?;
        table.capacity = capacity;
        table.evict_for(0);
        Ok(0)
    } else {
        // Duplicate: 0 0 0 index(5+).
        let abs = table.relative(c.integer(5)?)?;
        let e = table.get(abs).ok_or(QpackError::DynamicReference)?;
        name_buf.clear();
        name_buf.extend_from_slice(e.name());
        value_buf.clear();
        value_buf.extend_from_slice(e.value());
        table.insert(name_buf, value_buf)?;
        Ok(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Owned = Vec<(String, String)>;

    fn decode_all(d: &mut Decoder, stream_id: u64, section: &[u8]) -> Result<Owned, QpackError> {
        let mut v = Vec::new();
        d.decode(stream_id, section, FieldMode::All, |n, val| {
            v.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(val).into_owned(),
            ))
        })?;
        Ok(v)
    }

    fn fields(pairs: &[(&str, &str)]) -> Owned {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    /// Takes the decoder-stream instructions waiting to go.
    fn said(d: &mut Decoder) -> Vec<u8> {
        let out = d.instructions().to_vec();
        d.sent(out.len());
        out
    }

    /// The inserts acknowledged by the Insert Count Increments waiting to go (one a
    /// read of the encoder stream, all one byte here).
    fn increments(d: &mut Decoder) -> u64 {
        let out = said(d);
        assert!(out.iter().all(|&b| b > 0 && b < 0x40), "{out:x?}");
        out.iter().map(|&b| u64::from(b)).sum()
    }

    #[test]
    fn rfc9204_appendix_b1_literal_with_name_reference() {
        // B.1: ":path: /index.html" as a literal with a static name reference.
        let section = [
            0x00, 0x00, 0x51, 0x0b, 0x2f, 0x69, 0x6e, 0x64, 0x65, 0x78, 0x2e, 0x68, 0x74, 0x6d,
            0x6c,
        ];
        let mut d = Decoder::with_table(4096, 4096);
        assert_eq!(
            decode_all(&mut d, 0, &section).unwrap(),
            fields(&[(":path", "/index.html")])
        );
        // No dynamic table used: nothing to acknowledge.
        assert!(d.instructions().is_empty());
    }

    // RFC 9204 Appendix B.2 to B.5, the encoder-stream bytes and field sections as
    // published (table capacity 220).
    const B2_ENCODER: [u8; 34] = [
        0x3f, 0xbd, 0x01, // Set Dynamic Table Capacity=220
        0xc0, 0x0f, 0x77, 0x77, 0x77, 0x2e, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x2e, 0x63,
        0x6f, 0x6d, // Insert With Name Reference, static 0 (:authority=www.example.com)
        0xc1, 0x0c, 0x2f, 0x73, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x2f, 0x70, 0x61, 0x74,
        0x68,
        // Insert With Name Reference, static 1 (:path=/sample/path)
    ];
    /// Stream 4: Required Insert Count 2, Base 0, two post-base indexed lines.
    const B2_STREAM_4: [u8; 4] = [0x03, 0x81, 0x10, 0x11];
    /// Insert With Literal Name (custom-key=custom-value).
    const B3_ENCODER: [u8; 24] = [
        0x4a, 0x63, 0x75, 0x73, 0x74, 0x6f, 0x6d, 0x2d, 0x6b, 0x65, 0x79, 0x0c, 0x63, 0x75, 0x73,
        0x74, 0x6f, 0x6d, 0x2d, 0x76, 0x61, 0x6c, 0x75, 0x65,
    ];
    /// Duplicate (relative index 2: :authority=www.example.com).
    const B4_ENCODER: [u8; 1] = [0x02];
    /// Stream 8: Required Insert Count 4, Base 4; dynamic 0, static 1, dynamic 1.
    const B4_STREAM_8: [u8; 5] = [0x05, 0x00, 0x80, 0xc1, 0x81];
    /// Insert With Name Reference, dynamic relative 1 (custom-key=custom-value2).
    const B5_ENCODER: [u8; 15] = [
        0x81, 0x0d, 0x63, 0x75, 0x73, 0x74, 0x6f, 0x6d, 0x2d, 0x76, 0x61, 0x6c, 0x75, 0x65, 0x32,
    ];

    #[test]
    fn rfc9204_appendix_b2_to_b5_dynamic_table() {
        // Fed whole, and a byte at a time: instructions split across reads.
        for step in [usize::MAX, 1] {
            let mut d = Decoder::with_table(4096, 220);
            let feed = |d: &mut Decoder, bytes: &[u8]| {
                for piece in bytes.chunks(step.min(bytes.len())) {
                    d.feed_encoder(piece).unwrap();
                }
            };
            // B.2: two inserts (106 bytes), acknowledged at once; the section on
            // stream 4 uses both as post-base entries and is acknowledged (0x84).
            feed(&mut d, &B2_ENCODER);
            assert_eq!(d.table_size(), 106);
            assert_eq!(increments(&mut d), 2, "Insert Count Increment (2)");
            assert_eq!(
                decode_all(&mut d, 4, &B2_STREAM_4).unwrap(),
                fields(&[(":authority", "www.example.com"), (":path", "/sample/path")])
            );
            assert_eq!(said(&mut d), [0x84], "Section Acknowledgment (stream 4)");
            // B.3: a literal-name insert, then Insert Count Increment (1) as in the RFC.
            feed(&mut d, &B3_ENCODER);
            assert_eq!(d.table_size(), 160);
            assert_eq!(increments(&mut d), 1);
            // B.4: Duplicate; stream 8 refers to relative dynamic entries below Base.
            feed(&mut d, &B4_ENCODER);
            assert_eq!(d.table_size(), 217);
            assert_eq!(increments(&mut d), 1);
            assert_eq!(
                decode_all(&mut d, 8, &B4_STREAM_8).unwrap(),
                fields(&[
                    (":authority", "www.example.com"),
                    (":path", "/"),
                    ("custom-key", "custom-value"),
                ])
            );
            assert_eq!(said(&mut d), [0x88]);
            // The RFC's Stream Cancellation for stream 8.
            d.cancel_stream(8);
            assert_eq!(said(&mut d), [0x48]);
            // B.5: an insert naming a dynamic entry evicts the oldest (:authority),
            // leaving 215 bytes; a reference to the evicted entry is refused.
            feed(&mut d, &B5_ENCODER);
            assert_eq!(d.table_size(), 215);
            assert_eq!(increments(&mut d), 1);
            // Required Insert Count 5 (encoded 6), Base 5: relative 0 is the new entry,
            // relative 4 the evicted absolute 0.
            assert_eq!(
                decode_all(&mut d, 12, &[0x06, 0x00, 0x80]).unwrap(),
                fields(&[("custom-key", "custom-value2")])
            );
            assert_eq!(
                decode_all(&mut d, 16, &[0x06, 0x00, 0x84]),
                Err(QpackError::DynamicReference)
            );
            let counts = d.take_counts();
            assert_eq!(counts.inserts, 5);
            assert_eq!(counts.dynamic_refs, 2 + 2 + 1);
            assert_eq!(d.take_counts(), DecoderCounts::default());
        }
    }

    #[test]
    fn sections_beyond_what_was_inserted_are_refused() {
        let mut d = Decoder::with_table(4096, 220);
        d.feed_encoder(&B2_ENCODER).unwrap();
        // Required Insert Count 3 with 2 inserts: it would block, and we allow none.
        assert_eq!(
            d.decode(4, &[0x04, 0x00, 0x80], FieldMode::All, |_, _| {}),
            Err(QpackError::Blocked {
                required: 3,
                inserted: 2
            })
        );
        // A post-base index at the Required Insert Count (absolute 2 of 2).
        assert_eq!(
            d.decode(4, &[0x03, 0x81, 0x12], FieldMode::All, |_, _| {}),
            Err(QpackError::DynamicReference)
        );
        // Required Insert Count 0 with a dynamic reference (what tests/h3_server.py's
        // `qpack` mode sends).
        assert_eq!(
            d.decode(4, &[0x00, 0x00, 0x80], FieldMode::All, |_, _| {}),
            Err(QpackError::DynamicReference)
        );
        // A negative Base below 0, and encodings past the full range (2 * 220/32).
        assert_eq!(
            d.decode(4, &[0x03, 0x85, 0x80], FieldMode::All, |_, _| {}),
            Err(QpackError::DynamicReference)
        );
        assert_eq!(
            d.decode(4, &[0x0d, 0x00], FieldMode::All, |_, _| {}),
            Err(QpackError::RequiredInsertCount)
        );
        // A literal with a dynamic name: relative 0 is :path, value "x".
        assert_eq!(
            decode_all(&mut d, 4, &[0x03, 0x00, 0x40, 0x01, b'x']).unwrap(),
            fields(&[(":path", "x")])
        );
        // A literal with a post-base name: absolute 0 + 1.
        assert_eq!(
            decode_all(&mut d, 4, &[0x03, 0x81, 0x01, 0x01, b'y']).unwrap(),
            fields(&[(":path", "y")])
        );
    }

    #[test]
    fn the_encoder_stream_is_checked() {
        // Without a table, only capacity 0 is allowed.
        let mut d = Decoder::new(4096);
        d.feed_encoder(&[0x20, 0x20]).unwrap();
        assert_eq!(d.feed_encoder(&[0x21]), Err(QpackError::TableCapacity));
        let mut d = Decoder::new(4096);
        assert_eq!(
            d.feed_encoder(&B2_ENCODER[3..]),
            Err(QpackError::TableCapacity)
        );
        assert_eq!(
            Decoder::new(4096).decode(0, &[0x02, 0x00], FieldMode::All, |_, _| {}),
            Err(QpackError::RequiredInsertCount)
        );
        // A capacity above what we advertised.
        let mut d = Decoder::with_table(4096, 100);
        assert_eq!(d.feed_encoder(&B2_ENCODER), Err(QpackError::TableCapacity));
        // An entry larger than the table.
        let mut d = Decoder::with_table(4096, 40);
        d.feed_encoder(&[0x3f, 0x09]).unwrap(); // capacity 40
        assert_eq!(
            d.feed_encoder(&B2_ENCODER[3..]),
            Err(QpackError::TableCapacity)
        );
        // A duplicate or dynamic name of an entry never inserted.
        let mut d = Decoder::with_table(4096, 220);
        d.feed_encoder(&B2_ENCODER[..3]).unwrap();
        assert_eq!(d.feed_encoder(&[0x00]), Err(QpackError::DynamicReference));
        assert_eq!(
            d.feed_encoder(&[0x80, 0x01, b'v']),
            Err(QpackError::DynamicReference)
        );
        // A string longer than any entry that could fit: refused before it is whole.
        let mut d = Decoder::with_table(4096, 64);
        d.feed_encoder(&[0x3f, 0x21]).unwrap();
        assert_eq!(
            d.feed_encoder(&[0x40 | 0x1f, 0xff, 0x7f]),
            Ok(()),
            "incomplete so far"
        );
        assert_eq!(d.feed_encoder(&[b'a'; 400]), Err(QpackError::TableCapacity));
        // Lowering the capacity evicts.
        let mut d = Decoder::with_table(4096, 220);
        d.feed_encoder(&B2_ENCODER).unwrap();
        d.feed_encoder(&[0x3f, 0x1b]).unwrap(); // capacity 58
        assert_eq!(d.table_size(), 49);
    }

    #[test]
    fn static_errors_and_limits() {
        let mut d = Decoder::new(40);
        assert_eq!(
            d.decode(0, &[], FieldMode::All, |_, _| {}),
            Err(QpackError::Truncated)
        );
        assert_eq!(
            d.decode(
                0,
                &[0x00, 0x00, 0x51, 0x05, b'a'],
                FieldMode::All,
                |_, _| {}
            ),
            Err(QpackError::Truncated)
        );
        let mut long = vec![0x00, 0x00, 0xff];
        long.extend_from_slice(&[0xff; 12]);
        assert_eq!(
            d.decode(0, &long, FieldMode::All, |_, _| {}),
            Err(QpackError::IntegerOverflow)
        );
        // Static index 99 is past the table.
        assert_eq!(
            d.decode(0, &[0x00, 0x00, 0xff, 0x24], FieldMode::All, |_, _| {}),
            Err(QpackError::StaticIndexOutOfRange(99))
        );
        // ":status: 200" costs 7 + 3 + 32 = 42 bytes, over a limit of 40.
        assert_eq!(
            d.decode(0, &[0x00, 0x00, 0xc0 | 25], FieldMode::All, |_, _| {}),
            Err(QpackError::FieldSectionTooLarge(40))
        );
        // Without a table, every dynamic form is refused.
        for line in [0x80, 0x40, 0x10, 0x00] {
            assert_eq!(
                d.decode(0, &[0x00, 0x00, line, 0x00], FieldMode::All, |_, _| {}),
                Err(QpackError::DynamicReference),
                "{line:#x}"
            );
        }
    }
}
