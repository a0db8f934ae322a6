//! The one histogram shape used everywhere, and its compact byte form.
//!
//! Every latency is recorded in microseconds from 1 us to one hour with 3 significant
//! figures (0.1% relative error), in `u32` counts: a fixed range means recording never
//! resizes (no allocation on the hot path), and one shape for every worker and every
//! second means any two histograms can be added. Values above the range are clamped to
//! the top (a request longer than an hour is reported as "one hour"), never dropped.

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
/// Highest trackable value, microseconds (one hour).
pub const HIGH_US: u64 = 3_600_000_000;
/// Significant figures kept.
pub const SIGFIG: u8 = 3;

/// A fresh, empty histogram of the standard shape.
pub fn new_hist() -> Hist {
    // The bounds are constants that hdrhistogram accepts (low >= 1, high >= 2*low,
    // sigfig <= 5); creation can only fail on invalid bounds.
    Histogram::new_with_bounds(LOW_US, HIGH_US, SIGFIG)
        .expect("constant histogram bounds are valid")
}

/// Nanoseconds to the microseconds histograms hold, rounded to nearest.
pub fn ns_to_us(ns: u64) -> u64 {
    ns.saturating_add(500) / 1_000
}

/// Records one value given in nanoseconds, clamping to the histogram's range.
#[inline]
pub fn record_ns(h: &mut Hist, ns: u64) {
    h.saturating_record(ns_to_us(ns));
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

/// Decodes what [`encode`] wrote (no bytes means an empty histogram).
pub fn decode(bytes: &[u8]) -> Result<Hist, MetricsError> {
    if bytes.is_empty() {
        return Ok(new_hist());
    }
    let h: Hist = Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| MetricsError::Codec {
            action: "decode",
            detail: format!("{e:?}"),
        })?;
    // Re-home into the standard shape so later additions never resize.
    let mut out = new_hist();
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
    fn ns_rounds_to_nearest_us() {
        assert_eq!(ns_to_us(1_499), 1);
        assert_eq!(ns_to_us(1_500), 2);
        assert_eq!(ns_to_us(0), 0);
    }
}
