//! HPACK header compression (RFC 7541), written for this crate rather than taken
//! from a crate: the engine needs a decoder that can skip materialising fields it does
//! not read (everything but `:status` on the hot path) while still keeping the dynamic
//! table in step, and an encoder that writes straight into the connection's output
//! buffer; the HPACK crates on crates.io either allocate per field or are tied to a
//! runtime-bound HTTP/2 stack.
//!
//! - [`Decoder`]: complete: static and dynamic tables, size updates, Huffman, every
//!   representation.
//! - [`encode_field`]: literal without indexing with static-table name indexes (or a
//!   fully indexed static entry), so the encoder keeps no state and a request's header
//!   block depends only on the request.

mod decoder;
mod encoder;
pub mod huffman;
mod table;

pub use decoder::{Decoder, FieldMode};
pub use encoder::{encode_field, encode_integer};
pub use table::{DynamicTable, ENTRY_OVERHEAD, STATIC};

/// Bytes from hex digits with any whitespace between them (the RFC's examples), for
/// the decoder's and Huffman's tests.
#[cfg(test)]
fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Why a header block could not be decoded. All but [`HpackError::HeaderListTooLarge`]
/// leave the decoder's dynamic table in an unknown state, so they are connection
/// errors of type COMPRESSION_ERROR (RFC 9113 §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HpackError {
    /// An integer representation longer than 32 bits.
    #[error("HPACK integer overflows 32 bits")]
    IntegerOverflow,
    /// The block ends in the middle of a representation.
    #[error("HPACK block truncated")]
    Truncated,
    /// Index 0 is never valid (§6.1).
    #[error("HPACK index 0")]
    IndexZero,
    /// An index past the end of the static and dynamic tables.
    #[error("HPACK index {0} out of range")]
    IndexOutOfRange(u32),
    /// The Huffman EOS symbol appeared inside a string (§5.2).
    #[error("HPACK Huffman string contains EOS")]
    HuffmanEos,
    /// Huffman padding longer than 7 bits or not made of 1 bits (§5.2).
    #[error("HPACK Huffman padding invalid")]
    HuffmanPadding,
    /// A dynamic table size update above the size we advertised (§6.3).
    #[error("HPACK table size update {0} above our limit")]
    SizeUpdateTooLarge(u32),
    /// A dynamic table size update after the first field of a block (§4.2).
    #[error("HPACK table size update after a header field")]
    SizeUpdateNotAtStart,
    /// The decoded list exceeds our SETTINGS_MAX_HEADER_LIST_SIZE. The block was
    /// still decoded to its end, so the table is consistent and only the stream fails.
    #[error("header list larger than {0} bytes")]
    HeaderListTooLarge(usize),
}
