//! The one histogram shape used everywhere, and its compact byte form.
//!
//! Every latency is recorded in microseconds from 1 us to one hour with 3 significant
//! figures (0.1% relative error), in `u32` counts. Values above the hour are clamped to
//! it (a request longer than an hour is reported as "one hour"), never dropped.
//!
//! Why the counts start small and grow: the full hour's range is ~23,500 counts (94 KB),
//! and hdrhistogram writes every one of them when it creates or resets a histogram, so
//! each live histogram was 94 KB resident however few buckets its latencies touched. A
//! run holds a few dozen (whole-run sets, the open second's set, the sets in the
//! encoder's hands), which made most of a 64-connection load's heap. A histogram now
//! starts covering 0..2047 us (2,048 counts, 8 KB: a loopback or LAN latency) and grows
//! by whole buckets (doubling the range) the first time a value lands above it, up to
//! the hour. Growing allocates, so the hot path can allocate, but only the first time a
//! histogram sees a longer latency: at most 21 times in its life, and sets are reused,
//! so a steady run stops growing within its first seconds. Every histogram has the same
//! lowest value and precision, so any two can still be added (the sum grows to the
//! larger range) and encoded bytes decode into the same shape.
use crate::MetricsError;
use hdrhistogram::serialization::{Deserializer, Serializer};
#[cfg(test)]
use hdrhistogram::serialization::{V2DeflateSerializer, V2Serializer};
use hdrhistogram::Histogram;

mod encoder;
pub use encoder::Encoder;

/// Counts per bucket. `u32` halves memory against `u64`; 4 billion per bucket per
/// window is far beyond what one generator can send.
pub type Hist = Histogram<u32>;

/// Lowest discernible value, microseconds.
pub const LOW_US: u64 = 1;
/// Highest trackable value, microseconds (one hour): larger values are clamped to it.
pub const HIGH_US: u64 = 3_600_000_000;
/// The range a new histogram covers before it first grows, microseconds: the least
/// hdrhistogram allows at 3 significant figures (one bucket of 2,048 counts, 0..2047).
const START_HIGH_US: u64 = 2;
/// Significant figures kept.
pub const SIGFIG: u8 = 3;

/// A fresh, empty histogram of the standard shape, covering 0..2047 us until a larger
/// value makes it grow (see the module doc).
pub fn new_hist() -> Hist {
    // The bounds are constants that hdrhistogram accepts (low >= 1, high >= 2*low,
    // sigfig <= 5); creation can only fail on invalid bounds.
    let mut h = Histogram::new_with_bounds(LOW_US, START_HIGH_US, SIGFIG)
        .expect("constant histogram bounds are valid");
    h.auto(true);
    h
}

/// Nanoseconds to the microseconds histograms hold, rounded to nearest.
pub fn ns_to_us(ns: u64) -> u64 {
    ns.saturating_add(500) / 1_000
}

/// Records one value given in nanoseconds, clamped to one hour; the histogram grows
/// to hold it if it is the longest yet.
#[inline]
pub fn record_ns(h: &mut Hist, ns: u64) {
    let us = ns_to_us(ns).min(HIGH_US);
    // `record` can fail only if growing to the hour overflowed `usize` (never on a
    // 64-bit target); then clamp to what the histogram covers rather than drop it.
    // (`saturating_record` itself clamps to the current range instead of growing.)
    if h.record(us).is_err() {
        h.saturating_record(us);
    }
}

/// `into += from`, as a typed error.
pub fn add(into: &mut Hist, from: &Hist) -> Result<(), MetricsError> {
    into.add(from)
        .map_err(|e| MetricsError::Merge(format!("{e:?}")))
}

/// Encodes a histogram with the HdrHistogram V2 format (zig-zag LEB128 counts with runs
/// of zeros collapsed) inside DEFLATE: the "compressed V2" form other HdrHistogram
/// implementations read (`decodeFromCompressedByteBuffer`). Deflate roughly thirds the
/// size of a busy second whose latencies spread over thousands of buckets. The recorder
/// passes an [`Encoder`] (the same bytes as hdrhistogram's `V2DeflateSerializer`, with
/// one reused deflate state). Any serializer works (plain `V2Serializer` too); [`decode`]
/// reads both forms. An empty histogram is stored as no bytes at all.
pub fn encode<S: Serializer>(ser: &mut S, h: &Hist) -> Result<Vec<u8>, MetricsError> {
    let mut out = Vec::new();
    if h.is_empty() {
        return Ok(out);
    }
    ser.serialize(h, &mut out)
        .map_err(|e| MetricsError::Codec {
            action: "encode",
            detail: format!("{e:?}"),
        })?;
    Ok(out)
}

/// HdrHistogram's cookie of a plain V2 histogram (its serialization format: the word
/// size, 8, in bits 4-7 of the base cookie); the compressed one is the encoder's.
const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
use encoder::V2_COMPRESSED_COOKIE;
/// The highest `highest trackable value` a histogram volley wrote can declare: it grows
/// by doubling from 2,047 us until it holds the hour (2^32 us), so twice that is
/// generous.
const MAX_DECLARED_HIGH_US: u64 = 1 << 33;
/// The longest counts payload such a histogram can have: ~25,000 counts of at most 9
/// bytes each, about 225 KB; 1 MiB leaves room and refuses absurd lengths.
const MAX_PAYLOAD_BYTES: u32 = 1 << 20;

/// Refuses a histogram header volley never writes before anything is decoded. Why:
/// hdrhistogram's deserializer allocates the counts for the declared range and a
/// buffer for the declared payload length before it reads a count, so eight bytes from
/// any peer on the bus (`highest` near 2^63) made it allocate gigabytes. Reads the
/// plain V2 header, or the first 40 bytes of the compressed form's inner V2 stream.
fn check_header(bytes: &[u8]) -> Result<(), MetricsError> {
    use std::io::Read;
    let refuse = |detail: String| MetricsError::Codec {
        action: "decode",
        detail,
    };
    let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let be64 = |b: &[u8]| u64::from_be_bytes(b[..8].try_into().unwrap_or([0; 8]));
    if bytes.len() < 8 {
        return Err(refuse(format!("{} bytes are no histogram", bytes.len())));
    }
    let header: Vec<u8> = match be32(bytes) {
        V2_COOKIE => bytes[..bytes.len().min(40)].to_vec(),
        V2_COMPRESSED_COOKIE => {
            let mut inner = Vec::with_capacity(40);
            flate2::read::ZlibDecoder::new(&bytes[8..])
                .take(40)
                .read_to_end(&mut inner)
                .map_err(|e| refuse(format!("inflating its header: {e}")))?;
            if inner.len() >= 4 && be32(&inner) != V2_COOKIE {
                return Err(refuse("the compressed histogram holds no V2 header".into()));
            }
            inner
        }
        c => return Err(refuse(format!("cookie {c:#x} is not a V2 histogram's"))),
    };
    if header.len() < 40 {
        return Err(refuse(format!(
            "a header of {} of its 40 bytes",
            header.len()
        )));
    }
    let (payload, digits) = (be32(&header[4..]), be32(&header[12..]));
    let (low, high) = (be64(&header[16..]), be64(&header[24..]));
    if payload > MAX_PAYLOAD_BYTES {
        return Err(refuse(format!("a counts payload of {payload} bytes")));
    }
    if low != LOW_US || digits != u32::from(SIGFIG) || high > MAX_DECLARED_HIGH_US {
        return Err(refuse(format!(
            "a histogram of {low}..{high} us at {digits} significant figures, not one volley writes"
        )));
    }
    Ok(())
}

/// Decodes what [`encode`] wrote (no bytes means an empty histogram). Bytes that come
/// from elsewhere (an agent over the bus) are checked first: see [`check_header`].
pub fn decode(bytes: &[u8]) -> Result<Hist, MetricsError> {
    if bytes.is_empty() {
        return Ok(new_hist());
    }
    check_header(bytes)?;
    let h: Hist = Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| MetricsError::Codec {
            action: "decode",
            detail: format!("{e:?}"),
        })?;
    // Re-home into the standard shape (a decoded histogram does not grow by itself).
    // Bytes from elsewhere (an agent, another implementation) may hold what volley
    // never records: past the hour, refused as a fixed-range histogram refused it.
    let mut out = new_hist();
    if h.max() > out.highest_equivalent(HIGH_US) {
        return Err(MetricsError::Merge(format!(
            "a value of {} us is beyond the one-hour range",
            h.max()
        )));
    }
    add(&mut out, &h)?;
    Ok(out)
}

/// Microseconds as milliseconds, for tables.
pub fn us_to_ms(us: f64) -> f64 {
    us / 1_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip_keeps_every_count() {
        let mut h = new_hist();
        for v in [1, 2, 3, 1000, 1500, 250_000, 30_000_000] {
            h.record(v).unwrap();
        }
        let mut ser = V2DeflateSerializer::new();
        let bytes = encode(&mut ser, &h).unwrap();
        let back = decode(&bytes).unwrap();
        assert_eq!(back.len(), 7);
        assert_eq!(back.max(), h.max());
        assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
        assert!(
            bytes.len() < 200,
            "V2 bytes should be compact, got {}",
            bytes.len()
        );
    }

    #[test]
    fn plain_v2_bytes_decode_too() {
        let mut h = new_hist();
        h.record(42).unwrap();
        let bytes = encode(&mut V2Serializer::new(), &h).unwrap();
        assert_eq!(decode(&bytes).unwrap().len(), 1);
    }

    #[test]
    fn empty_histogram_is_no_bytes() {
        let mut ser = V2DeflateSerializer::new();
        assert!(encode(&mut ser, &new_hist()).unwrap().is_empty());
        assert!(decode(&[]).unwrap().is_empty());
    }

    #[test]
    fn garbage_bytes_are_a_typed_error() {
        assert!(matches!(
            decode(&[1, 2, 3]),
            Err(MetricsError::Codec { .. })
        ));
    }

    #[test]
    fn values_beyond_range_are_clamped_not_dropped() {
        let mut h = new_hist();
        record_ns(&mut h, u64::MAX);
        assert_eq!(h.len(), 1);
        assert!(h.max() >= HIGH_US - HIGH_US / 1000);
    }

    #[test]
    fn starts_small_and_grows_to_hold_what_it_records() {
        let mut h = new_hist();
        let small = h.distinct_values();
        assert!(small <= 2_048, "a new histogram holds {small} counts");
        record_ns(&mut h, 900_000); // 900 us: fits
        assert_eq!(h.distinct_values(), small);
        record_ns(&mut h, 75_000_000_000); // 75 s: grows
        assert!(h.distinct_values() > small);
        assert_eq!(h.len(), 2);
        assert!(h.equivalent(h.max(), 75_000_000));
        assert!(h.equivalent(h.value_at_quantile(0.5), 900));
    }

    #[test]
    fn histograms_of_different_ranges_add_and_round_trip() {
        let (mut short, mut long) = (new_hist(), new_hist());
        record_ns(&mut short, 300_000);
        record_ns(&mut long, 3_000_000_000);
        add(&mut short, &long).unwrap();
        assert_eq!(short.len(), 2);
        assert!(short.equivalent(short.max(), 3_000_000));
        let back = decode(&encode(&mut V2DeflateSerializer::new(), &short).unwrap()).unwrap();
        assert_eq!(back, short);
        // A grown histogram reset for reuse keeps its range and counts nothing.
        let grown = short.distinct_values();
        short.reset();
        assert!(short.is_empty());
        assert_eq!(short.distinct_values(), grown);
    }

    #[test]
    fn decoded_values_past_the_hour_are_refused() {
        // A range volley could declare, holding a value past the hour: refused by value.
        let mut far = Histogram::<u32>::new_with_bounds(1, MAX_DECLARED_HIGH_US, SIGFIG).unwrap();
        far.record(2 * HIGH_US).unwrap();
        let bytes = encode(&mut V2Serializer::new(), &far).unwrap();
        assert!(matches!(decode(&bytes), Err(MetricsError::Merge(_))));
        // A range volley never declares: refused by its header, before decoding.
        let mut farther = Histogram::<u32>::new_with_bounds(1, 100 * HIGH_US, SIGFIG).unwrap();
        farther.record(10 * HIGH_US).unwrap();
        let bytes = encode(&mut V2Serializer::new(), &farther).unwrap();
        assert!(matches!(decode(&bytes), Err(MetricsError::Codec { .. })));
    }

    #[test]
    fn ns_rounds_to_nearest_us() {
        assert_eq!(ns_to_us(1_499), 1);
        assert_eq!(ns_to_us(1_500), 2);
        assert_eq!(ns_to_us(0), 0);
    }
    /// A plain V2 header declaring `low..high` at `digits` with a `payload` length.
    fn v2_header(payload: u32, digits: u32, low: u64, high: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(V2_COOKIE.to_be_bytes());
        b.extend(payload.to_be_bytes());
        b.extend(0u32.to_be_bytes());
        b.extend(digits.to_be_bytes());
        b.extend(low.to_be_bytes());
        b.extend(high.to_be_bytes());
        b.extend(1.0f64.to_be_bytes());
        b
    }

    /// What a fuzzed bus record held: a range near 2^63 (the deserializer would
    /// allocate its counts, gigabytes), or a payload length of 4 GB, plain or inside
    /// DEFLATE, is refused from the header; what volley writes still decodes.
    #[test]
    fn headers_volley_never_writes_are_refused_before_decoding() {
        use std::io::Write;
        let deflated = |plain: &[u8]| {
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            z.write_all(plain).unwrap();
            let z = z.finish().unwrap();
            let mut b = V2_COMPRESSED_COOKIE.to_be_bytes().to_vec();
            b.extend((z.len() as u32).to_be_bytes());
            b.extend(z);
            b
        };
        for (plain, says) in [
            (
                v2_header(10, 3, 1, 8_000_000_000_000_000_000),
                "not one volley writes",
            ),
            (v2_header(u32::MAX, 3, 1, 4096), "a counts payload of"),
            (v2_header(10, 5, 1, 4096), "not one volley writes"),
        ] {
            for bytes in [plain.clone(), deflated(&plain)] {
                let e = decode(&bytes).unwrap_err().to_string();
                assert!(e.contains(says), "{e}");
            }
        }
        assert!(decode(&[0x1c, 0x84, 0x93, 0x13]).is_err());
        assert!(decode(&[0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0]).is_err());
        // Both forms volley writes, at the hour's full range, still decode.
        let mut h = new_hist();
        h.record(HIGH_US).unwrap();
        h.record(7).unwrap();
        for bytes in [
            encode(&mut V2Serializer::new(), &h).unwrap(),
            encode(&mut V2DeflateSerializer::new(), &h).unwrap(),
        ] {
            assert_eq!(decode(&bytes).unwrap().len(), 2);
        }
    }
}
