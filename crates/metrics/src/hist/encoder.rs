//! Compressed V2 bytes from one deflate state, reset rather than rebuilt.
//!
//! Why not hdrhistogram's `V2DeflateSerializer`: it builds a new zlib encoder for every
//! histogram, which allocates and zeroes a few hundred KB of deflate state (dictionary,
//! hash chains, code buffer) and a 32 KB output buffer each time. A recorder encodes up
//! to seven histograms each time a second closes; the office keeps a recorder per
//! operation type, and in its profile that fresh state (page faults and memset) was the
//! largest single cost of the generator (docs/methodology.md, "The office").
//!
//! [`Encoder`] writes the very same bytes (the compressed-V2 cookie, the length, then the
//! zlib stream of the plain V2 bytes, fed as `V2DeflateSerializer` feeds it: all input
//! with no flush, then a finish), so stored seconds, snapshots and merges do not change;
//! a test compares the two byte for byte. The deflate state is made on first use, so a
//! recorder that never closes a window never pays for it.
//!
//! One field differs on purpose: the header's highest trackable value is always the
//! hour ([`HIGH_US`](crate::hist::HIGH_US)), the range every volley histogram stands for,
//! not the range a growing histogram happens to cover (see `hist.rs`). So equal counts
//! give equal bytes whether a histogram was fresh or reused, and the bytes are those
//! `V2DeflateSerializer` writes for the same counts in a full-range histogram: what
//! volley stored before histograms grew.

use std::io::{self, Write};

use flate2::{Compress, Compression, FlushCompress, Status};
use hdrhistogram::serialization::{Serializer, V2Serializer};
use hdrhistogram::{Counter, Histogram};

use crate::hist::HIGH_US;

/// HdrHistogram's cookie of a compressed V2 histogram (`V2_COMPRESSED_COOKIE_BASE |
/// 0x10`; private in the crate, hence repeated here and checked by the byte-for-byte test).
pub(super) const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;

/// Where a plain V2 header holds the highest trackable value (big-endian `u64`).
const HIGHEST_TRACKABLE: std::ops::Range<usize> = 24..32;

/// Output room given to the compressor per call.
const GROW: usize = 4096;

/// A reusable compressed-V2 serializer (see the module doc).
#[derive(Default)]
pub struct Encoder {
    v2: V2Serializer,
    /// The plain V2 bytes of the histogram being encoded.
    plain: Vec<u8>,
    /// The zlib stream of `plain`.
    packed: Vec<u8>,
    deflate: Option<Compress>,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("deflate_ready", &self.deflate.is_some())
            .finish()
    }
}

impl Encoder {
    /// An encoder with no deflate state yet.
    pub fn new() -> Encoder {
        Encoder::default()
    }

    /// Deflates `self.plain` into `self.packed` with a fresh-equivalent state.
    fn deflate(&mut self) -> io::Result<()> {
        let z = self
            .deflate
            .get_or_insert_with(|| Compress::new(Compression::default(), true));
        // "Equivalent to dropping this object and then creating a new one" (flate2).
        z.reset();
        self.packed.clear();
        let (plain, packed) = (&self.plain, &mut self.packed);
        // Each pass either takes input or writes output into fresh room; the bound only
        // turns a compressor that stops progressing into an error. The room is an
        // initialised slice of `GROW` bytes, not a Vec's spare capacity, which flate2
        // would zero whole on every call.
        let bound = 64 + 2 * (plain.len() / GROW + 1);
        let mut finishing = false;
        for _ in 0..bound {
            let start = packed.len();
            packed.resize(start + GROW, 0);
            let (taken, out0) = (z.total_in() as usize, z.total_out());
            let status = if finishing {
                z.compress(&[], &mut packed[start..], FlushCompress::Finish)
            } else {
                z.compress(&plain[taken..], &mut packed[start..], FlushCompress::None)
            };
            packed.truncate(start + (z.total_out() - out0) as usize);
            let status = status.map_err(io::Error::other)?;
            if finishing && status == Status::StreamEnd {
                return Ok(());
            }
            finishing = z.total_in() as usize == plain.len();
        }
        Err(io::Error::other("deflate made no progress"))
    }
}

impl Serializer for Encoder {
    type SerializeError = io::Error;

    fn serialize<T: Counter, W: Write>(
        &mut self,
        h: &Histogram<T>,
        writer: &mut W,
    ) -> Result<usize, io::Error> {
        self.plain.clear();
        self.v2
            .serialize(h, &mut self.plain)
            .map_err(|e| io::Error::other(format!("{e:?}")))?;
        // The V2 header: cookie, payload length, normalizing offset, significant digits
        // (4 bytes each), lowest discernible value, then the highest trackable (8 each).
        if let Some(high) = self.plain.get_mut(HIGHEST_TRACKABLE) {
            high.copy_from_slice(&HIGH_US.to_be_bytes());
        }
        self.deflate()?;
        let len = u32::try_from(self.packed.len())
            .map_err(|_| io::Error::other("compressed histogram over 4 GB"))?;
        writer.write_all(&V2_COMPRESSED_COOKIE.to_be_bytes())?;
        writer.write_all(&len.to_be_bytes())?;
        writer.write_all(&self.packed)?;
        Ok(8 + self.packed.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::{self, new_hist, Hist};
    use hdrhistogram::serialization::V2DeflateSerializer;

    /// Histograms from empty-but-one to every bucket of the range, and wide ones whose
    /// plain V2 bytes pass the 32 KB buffer `V2DeflateSerializer` compresses through.
    fn shapes() -> Vec<Hist> {
        let mut out = Vec::new();
        let mut one = new_hist();
        one.record(1).unwrap();
        out.push(one);
        let mut x: u64 = 7;
        for (n, spread) in [
            (5, 10_000),
            (300, 13_000),
            (20_000, 13_000),
            (50_000, hist::HIGH_US),
        ] {
            let mut h = new_hist();
            for _ in 0..n {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                h.record(1 + (x >> 20) % spread).unwrap();
            }
            out.push(h);
        }
        let mut every = new_hist();
        let mut v = 1;
        while v < hist::HIGH_US {
            every.record_n(v, (v % 97) as u32 + 1).unwrap();
            v += 1 + v / 1500;
        }
        out.push(every);
        out
    }

    #[test]
    fn bytes_equal_hdrhistograms_deflate_serializer_at_the_full_range() {
        let (mut mine, mut theirs) = (Encoder::new(), V2DeflateSerializer::new());
        // Twice over, so the reused state is checked against a fresh one too.
        for h in shapes().iter().chain(shapes().iter().rev()) {
            let mut full = Hist::new_with_bounds(hist::LOW_US, HIGH_US, hist::SIGFIG).unwrap();
            full.add(h).unwrap();
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let n = mine.serialize(h, &mut a).unwrap();
            theirs.serialize(&full, &mut b).unwrap();
            assert_eq!(n, a.len());
            assert_eq!(a, b, "{} samples up to {}", h.len(), h.max());
            assert_eq!(hist::decode(&a).unwrap(), *h);
        }
    }

    #[test]
    fn deflate_state_is_made_on_first_use() {
        let mut e = Encoder::new();
        assert!(e.deflate.is_none());
        assert!(hist::encode(&mut e, &new_hist()).unwrap().is_empty());
        assert!(
            e.deflate.is_none(),
            "an empty histogram is no bytes, no deflate"
        );
        let mut h = new_hist();
        h.record(42).unwrap();
        assert!(!hist::encode(&mut e, &h).unwrap().is_empty());
        assert!(e.deflate.is_some());
    }
}
