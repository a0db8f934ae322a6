//! Whether a step measured the link volley shaped rather than the server: the
//! *link-bound* label (docs/methodology.md, "Which side bound a step").
//!
//! Place in the flow: a study step whose injectors ran behind links volley shaped (netns
//! placement: a tbf rate, an added delay) is judged here after the usual label; the label
//! is stored with the step and read by every answer (the reports, `volley compare`, the
//! study's end table), which never rank link-bound figures: two servers behind the same
//! link get the link's figure, whatever their own speed.
//!
//! A step is link-bound when either holds:
//! - *rate*: the bytes it moved per second (the larger of its mean and its median whole
//!   second) reached [`RATE_SHARE`] of what the link carries (its tbf rate, or its
//!   measured throughput when lower): the link was full;
//! - *delay*: the link's added delay is at least [`DELAY_SHARE`] of the mean time per
//!   request (service time plus its share of connecting), so the server's part is at
//!   most the rest. When the same target's unshaped time per request is known (the
//!   study measures it from its host, outside the links, before each shaped step), the step
//!   is link-bound on delay also when its time per request is within [`DELAY_SLACK`] of
//!   delay + unshaped time and the delay is at least half of it (the server did what it
//!   does unshaped; the link added the rest and dominated).

/// The label stored with a link-bound step.
pub const LABEL: &str = "link-bound";

/// Share of the link's throughput above which the link was full.
pub const RATE_SHARE: f64 = 0.9;

/// Share of a shaped link's rate that TCP payload can fill: tbf counts every byte of each
/// Ethernet frame, and a full 1500-byte frame carries 1448 bytes of payload (MSS with
/// TCP timestamps) under 66 of headers (Ethernet 14, IP 20, TCP 20 + 12 of options).
/// The step's bytes are response bytes, so the rate they can reach is the tbf rate x
/// 1448 / 1514 (95.6%).
pub const PAYLOAD_SHARE: f64 = 1448.0 / 1514.0;

/// Share of the time per request the added delay must reach on its own.
pub const DELAY_SHARE: f64 = 0.8;

/// Tolerance on delay + unshaped time (10%) when the unshaped time is known.
pub const DELAY_SLACK: f64 = 0.1;

/// What volley set on the step's links and measured of them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Shape {
    /// Sum of the links' throughput for response bytes, bits/s: the tbf rate x
    /// [`PAYLOAD_SHARE`], or the throughput measured before the run (payload too) when
    /// lower; `None` when some link had no rate set.
    pub throughput_bit: Option<f64>,
    /// The smallest delay added on any of the step's links, ms; `None` without one.
    pub delay_ms: Option<f64>,
}

/// What the step measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Observed {
    /// Response bytes read per second, times 8: the larger of the step's mean and its
    /// median whole second (each undercounts a full link in its own way: the mean by
    /// the responses in flight at the end).
    pub wire_bit_per_s: f64,
    /// Mean time a request held its connection: service time plus connect time per
    /// request, ms.
    pub per_request_ms: f64,
    /// The same target's time per request without the link, ms, when known.
    pub unshaped_ms: Option<f64>,
}

/// The reason, in words, when the step is link-bound; `None` when the link does not
/// explain the figure (or nothing was shaped).
pub fn judge(shape: &Shape, seen: &Observed) -> Option<String> {
    if let Some(cap) = shape.throughput_bit.filter(|c| *c > 0.0) {
        if seen.wire_bit_per_s >= RATE_SHARE * cap {
            return Some(format!(
                "link-bound: it moved {:.2} Mbit/s, {:.0}% of the {:.2} Mbit/s the shaped link carries",
                seen.wire_bit_per_s / 1e6,
                100.0 * seen.wire_bit_per_s / cap,
                cap / 1e6
            ));
        }
    }
    let delay = shape.delay_ms.filter(|d| *d > 0.0)?;
    let per = seen.per_request_ms;
    if !(per.is_finite() && per > 0.0) {
        return None;
    }
    if delay >= DELAY_SHARE * per {
        return Some(format!(
            "link-bound: the link's added {delay:.1} ms is {:.0}% of the {per:.1} ms each request took",
            100.0 * delay / per
        ));
    }
    let unshaped = seen.unshaped_ms.filter(|u| u.is_finite() && *u >= 0.0)?;
    let expected = delay + unshaped;
    (per <= expected * (1.0 + DELAY_SLACK) && delay * 2.0 >= per).then(|| {
        format!(
            "link-bound: {per:.1} ms per request is the link's added {delay:.1} ms plus the {unshaped:.1} ms this target takes unshaped"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_bounds_a_step_at_its_rate_or_its_delay() {
        let shape = |rate_mbit: Option<f64>, delay_ms: Option<f64>| Shape {
            throughput_bit: rate_mbit.map(|r| r * 1e6),
            delay_ms,
        };
        let seen = |mbit: f64, per_ms: f64, unshaped_ms: Option<f64>| Observed {
            wire_bit_per_s: mbit * 1e6,
            per_request_ms: per_ms,
            unshaped_ms,
        };
        // (what was shaped, what was seen, link-bound)
        let table = [
            // 003 outside: 10 Mbit, 68 ms; ~70 ms per request, 1 Mbit/s moved.
            (shape(Some(10.0), Some(68.0)), seen(1.0, 70.0, None), true),
            // A full 10 Mbit link, no delay.
            (shape(Some(10.0), None), seen(9.5, 3.0, None), true),
            // The link had room and the server took most of the time.
            (shape(Some(10.0), Some(5.0)), seen(2.0, 40.0, None), false),
            // Known unshaped time: 20 ms delay + 15 ms server = 35 ms seen.
            (shape(None, Some(20.0)), seen(1.0, 36.0, Some(15.0)), true),
            // ... but 50 ms seen is more than the link and the server explain.
            (shape(None, Some(20.0)), seen(1.0, 50.0, Some(15.0)), false),
            // A slow server behind a small delay is the server's figure.
            (
                shape(None, Some(10.0)),
                seen(1.0, 110.0, Some(100.0)),
                false,
            ),
            // Nothing shaped: never link-bound.
            (shape(None, None), seen(100.0, 0.1, Some(0.1)), false),
            // No time per request measured: the delay cannot be judged.
            (shape(None, Some(68.0)), seen(1.0, 0.0, None), false),
        ];
        for (i, (sh, ob, want)) in table.iter().enumerate() {
            let got = judge(sh, ob);
            assert_eq!(got.is_some(), *want, "row {i}: {got:?}");
            if let Some(r) = got {
                assert!(r.starts_with("link-bound: "), "{r}");
            }
        }
    }
}
