//! Whether a step behind links volley shaped measured the link rather than the server
//! (`volley_analysis::link`, docs/methodology.md "Which side bound a step"), as a whole
//! and phase by phase: injectors that join one by one fill a shaped link in some phases
//! and not in others, so each phase is judged against the links of the injectors active
//! in it.

use volley_analysis::link::{self, Observed, Shape};
use volley_metrics::Summary;

use super::extra::{Extra, LinkRecord};
use super::{judged_windows, little_w_ms};

/// What `links` allow together: the sum of their throughputs for response bytes (each
/// its tbf rate less the frames' headers, `link::PAYLOAD_SHARE`, or less when measured
/// so: the measurement's first second rides tbf's burst and may read above the rate),
/// and the smallest delay added on any.
fn shape(links: &[&LinkRecord]) -> Shape {
    let throughput = |l: &&LinkRecord| {
        let set = l.rate_bit? as f64 * link::PAYLOAD_SHARE;
        Some(l.measured.throughput_bit.min(set))
    };
    Shape {
        throughput_bit: links.iter().map(throughput).sum(),
        delay_ms: links
            .iter()
            .map(|l| l.delay_ms.map(|d| d as f64))
            .collect::<Option<Vec<f64>>>()
            .and_then(|d| d.into_iter().min_by(f64::total_cmp)),
    }
}

/// The server's own time per request, measured outside the links before the step
/// (`unshaped::measure`).
fn unshaped_ms(extra: &Extra) -> Option<f64> {
    extra.unshaped.as_ref().map(|u| u.per_request_ms)
}

/// Why the step is link-bound, when its injectors ran behind links volley shaped and
/// the figure sits at what they allow; `None` otherwise.
pub(super) fn step_reason(extra: &Extra, s: &Summary) -> Option<String> {
    if extra.links.is_empty() {
        return None;
    }
    let links: Vec<&LinkRecord> = extra.links.iter().collect();
    let service = s.latency.get("service_time")?;
    let connect_total_ms = s
        .latency
        .get("connect_time")
        .map_or(0.0, |c| c.mean_ms * c.count as f64);
    // The larger of the step's mean and its median whole second: neither overcounts
    // what the link carried, and each undercounts a full link in its own way (the mean
    // by the responses in flight at the end, a closed loop always has `c` of them; the
    // seconds, when injectors key them by send time, by late completions).
    let seconds: Vec<f64> = s
        .seconds
        .iter()
        .take(judged_windows(s))
        .map(|x| x.wire_bytes as f64 * 8.0)
        .collect();
    let mean = if s.duration_s > 0.0 {
        s.bytes.wire_total as f64 * 8.0 / s.duration_s
    } else {
        0.0
    };
    let seen = Observed {
        wire_bit_per_s: if seconds.is_empty() {
            mean
        } else {
            mean.max(volley_analysis::bootstrap::median(&seconds))
        },
        per_request_ms: little_w_ms(service.mean_ms, connect_total_ms, s.requests.completed),
        unshaped_ms: unshaped_ms(extra),
    };
    link::judge(&shape(&links), &seen)
}

/// Marks each stored phase (`phases[]`) whose figure sits at what the links of its
/// active injectors allow: `link_bound = true` and `link_reason`. A phase's bytes per
/// second are its requests per second times the step's wire bytes per response; its
/// time per request is its mean response time (from the intended send, so a queue
/// before the link counts against the link only when the link explains it).
pub(super) fn judge_phases(extra: &mut Extra, s: &Summary) {
    if extra.links.is_empty() {
        return;
    }
    let unshaped_ms = unshaped_ms(extra);
    let bytes_per_response = s.bytes.wire_total as f64 / s.requests.completed.max(1) as f64;
    let Some(injected) = extra.injected.as_mut() else {
        return;
    };
    for p in &mut injected.phases {
        if let Some(why) = phase_reason(&p.phase, &extra.links, bytes_per_response, unshaped_ms) {
            p.link_bound = true;
            p.link_reason = Some(why);
        }
    }
}

/// Why one phase is link-bound (see [`judge_phases`]).
fn phase_reason(
    phase: &volley_agents::phase::Phase,
    links: &[LinkRecord],
    bytes_per_response: f64,
    unshaped_ms: Option<f64>,
) -> Option<String> {
    let own: Vec<&LinkRecord> = links
        .iter()
        .filter(|l| phase.injectors.contains(&l.injector))
        .collect();
    if own.is_empty() {
        return None;
    }
    let seen = Observed {
        wire_bit_per_s: phase.figures.rps? * bytes_per_response * 8.0,
        per_request_ms: phase.figures.mean_ms?,
        unshaped_ms,
    };
    link::judge(&shape(&own), &seen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use volley_agents::phase::Phase;
    use volley_analysis::phase::Figures;
    use volley_netlab::measure::LinkMeasure;

    fn link(name: &str, rate_bit: Option<u64>, delay_ms: Option<u64>, measured: f64) -> LinkRecord {
        LinkRecord {
            injector: name.to_string(),
            namespace: String::new(),
            rate_bit,
            delay_ms,
            measured: LinkMeasure {
                rtt_ms: 0.1,
                throughput_bit: measured,
            },
        }
    }

    fn phase(injectors: &[&str], rps: f64, mean_ms: f64) -> Phase {
        Phase {
            injectors: injectors.iter().map(|s| s.to_string()).collect(),
            figures: Figures {
                start_s: 0,
                end_s: 9,
                left_out_s: Vec::new(),
                seconds: 10,
                requests: (rps * 10.0) as u64,
                rps: Some(rps),
                mean_ms: Some(mean_ms),
                p99_ms: None,
            },
            p50_ms: None,
            errors: 0,
            generator_bound: false,
            bound_injectors: Vec::new(),
            missing: 0,
            degraded: false,
        }
    }

    /// tbf counts whole frames, a step its response bytes: a full 2 Mbit/s link carries
    /// about 1.91 Mbit/s of them, so 18 responses of 12,234 bytes a second (1.76 Mbit/s,
    /// 88% of the rate, 92% of what it carries of them) fill it; 1.5 Mbit/s does not.
    #[test]
    fn a_full_link_is_judged_by_what_it_carries_of_the_responses() {
        let l = link("inj1", Some(2_000_000), None, 2.25e6);
        let s = shape(&[&l]);
        let cap = s.throughput_bit.unwrap();
        assert!((cap - 2e6 * 1448.0 / 1514.0).abs() < 1.0, "{cap}");
        let seen = |bit: f64| Observed {
            wire_bit_per_s: bit,
            per_request_ms: 40.0,
            unshaped_ms: None,
        };
        assert!(link::judge(&s, &seen(18.0 * 12_234.0 * 8.0)).is_some());
        assert!(link::judge(&s, &seen(1.5e6)).is_none());
    }

    /// Two injectors behind 10 Mbit/s links each: in the phase where only inj1 runs, its
    /// link is full; with both, the 20 Mbit/s they carry together has room.
    #[test]
    fn each_phase_is_judged_against_the_links_of_its_active_injectors() {
        let links = vec![
            link("inj1", Some(10_000_000), None, 9.8e6),
            link("inj2", Some(10_000_000), None, 9.8e6),
        ];
        // 10 KB responses: 120 of them a second are 9.8 Mbit/s.
        let bytes = 10_240.0;
        let why = phase_reason(&phase(&["inj1"], 120.0, 2.0), &links, bytes, None).unwrap();
        assert!(why.starts_with("link-bound: it moved 9.83 Mbit/s"), "{why}");
        // Both links carry 19.6 Mbit/s: 130 responses a second leave room.
        assert_eq!(
            phase_reason(&phase(&["inj1", "inj2"], 130.0, 2.0), &links, bytes, None),
            None
        );
        // A phase of an injector without a shaped link is nobody's link's.
        assert_eq!(
            phase_reason(&phase(&["inj3"], 120.0, 2.0), &links, bytes, None),
            None
        );
        // A delayed link: 68 ms added of a 70 ms request.
        let slow = vec![link("inj1", None, Some(68), 900e6)];
        let why = phase_reason(&phase(&["inj1"], 14.0, 70.0), &slow, bytes, None).unwrap();
        assert!(why.contains("added 68.0 ms"), "{why}");
    }

    /// The stored phases keep the agents' keys where they were, and a link-bound one
    /// gains `link_bound` and `link_reason`; the extra keys sit at the summary's top.
    #[test]
    fn the_extra_keys_serialise_where_the_store_kept_them() {
        let mut stored: super::super::extra::StoredPhase = phase(&["inj1"], 120.0, 2.0).into();
        let plain = serde_json::to_value(&stored).unwrap();
        assert_eq!(plain["rps"], 120.0);
        assert_eq!(plain["injectors"][0], "inj1");
        assert!(plain.get("link_bound").is_none(), "{plain}");
        stored.link_bound = true;
        stored.link_reason = Some("why".into());
        let marked = serde_json::to_value(&stored).unwrap();
        assert_eq!(
            (marked["link_bound"].clone(), marked["link_reason"].clone()),
            (true.into(), "why".into())
        );
        let extra = Extra {
            links: vec![link("inj1", Some(1_000_000), None, 1e6)],
            ..Extra::default()
        };
        let v = serde_json::to_value(&extra).unwrap();
        assert_eq!(v["links"][0]["rate_bit"], 1_000_000);
        assert!(
            v.get("office").is_none() && v.get("injectors").is_none(),
            "{v}"
        );
    }
}
