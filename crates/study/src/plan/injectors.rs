//! `[injectors]` resolved: the injector counts (a sweep axis the cells expand), how they
//! start (together or a whole-second stagger), how the step's load is shared, and for
//! `placement = "netns"` the link of every injector (bandwidth, delay); the keys of
//! agents on other machines are in `placement`. Every error names its key.

use std::time::Duration;

use super::resolve::invalid;
use super::InjectorsPlan;
use crate::spec::{self, InjectorsDef, Mode, StudyFile};
use crate::StudyError;

/// `[injectors]`, checked; every key error names the key. `steps`: the study's steps.
pub(super) fn resolve_injectors(
    file: &StudyFile,
    steps: usize,
) -> Result<Option<InjectorsPlan>, StudyError> {
    let Some(d) = &file.injectors else {
        return Ok(None);
    };
    let counts = d.count.values();
    if counts.is_empty() || counts.contains(&0) {
        return Err(invalid("injectors.count values must be at least 1"));
    }
    if file.mode == Mode::Search {
        return Err(invalid(
            "injectors: a capacity search runs one injector; use mode = \"sweep\"",
        ));
    }
    let placement = d.placement.as_deref().unwrap_or("local");
    let netns = match placement {
        "local" | "ssh" | "kubernetes" => false,
        "netns" => true,
        other => {
            return Err(invalid(format!(
                "injectors.placement must be \"local\", \"netns\", \"ssh\" or \"kubernetes\", got \"{other}\""
            )))
        }
    };
    let remote = super::placement::resolve_remote(d, file, placement, &counts, steps)?;
    let netns_links = if netns {
        Some(resolve_links(
            d,
            counts.iter().copied().max().unwrap_or(1),
            file,
        )?)
    } else if d.links.is_some() {
        return Err(invalid(
            "injectors.links needs placement = \"netns\" (local injectors share loopback)",
        ));
    } else {
        None
    };
    let stagger = match (d.start.as_deref(), d.stagger.as_deref()) {
        (Some("together") | None, None) => Duration::ZERO,
        (Some("together"), Some(_)) => {
            return Err(invalid(
                "injectors: start = \"together\" and a stagger contradict each other",
            ))
        }
        (Some("stagger") | None, Some(t)) => {
            let d =
                spec::parse_duration(t).map_err(|e| invalid(format!("injectors.stagger: {e}")))?;
            if d.subsec_nanos() != 0 || d.is_zero() {
                return Err(invalid(format!(
                    "injectors.stagger must be a whole number of seconds (1s, 2s, ...), got \"{t}\""
                )));
            }
            d
        }
        (Some("stagger"), None) => {
            return Err(invalid(
                "injectors: start = \"stagger\" needs stagger = \"1s\" (or more)",
            ))
        }
        (Some(other), _) => {
            return Err(invalid(format!(
                "injectors.start must be \"together\" or \"stagger\", got \"{other}\""
            )))
        }
    };
    let each = match d.share.as_deref().unwrap_or("split") {
        "split" => false,
        "each" => true,
        other => {
            return Err(invalid(format!(
                "injectors.share must be \"split\" or \"each\", got \"{other}\""
            )))
        }
    };
    if let Some(m) = d.min_agents {
        if m == 0 || counts.iter().any(|&c| m > c) {
            return Err(invalid(
                "injectors.min_agents must be at least 1 and at most every count",
            ));
        }
    }
    Ok(Some(InjectorsPlan {
        stagger,
        each,
        min_agents: d.min_agents,
        netns_links,
        ..remote
    }))
}

/// `"10mbit"` -> 10,000,000 bits per second (`kbit`, `mbit`, `gbit`; decimal units, as
/// `tc` reads them).
fn parse_rate_bit(s: &str) -> Option<u64> {
    let s = s.trim().to_ascii_lowercase();
    let (num, mult) = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)]
        .iter()
        .find_map(|(u, m)| s.strip_suffix(u).map(|n| (n.trim().to_string(), *m)))?;
    let v: f64 = num.parse().ok()?;
    (v.is_finite() && v > 0.0 && v * mult >= 8_000.0).then_some((v * mult) as u64)
}

/// The link of every injector up to `most`, from `links` groups in order.
fn resolve_links(
    d: &InjectorsDef,
    most: u32,
    file: &StudyFile,
) -> Result<Vec<volley_netlab::lab::LinkSpec>, StudyError> {
    if file
        .targets
        .iter()
        .any(|t| t.kind.get_ref().as_str() == "external")
    {
        return Err(invalid(
            "injectors.placement = \"netns\" starts the targets inside the lab; an external target cannot be moved there",
        ));
    }
    let mut out = Vec::new();
    for l in d.links.as_deref().unwrap_or_default() {
        if l.injectors == 0 {
            return Err(invalid("injectors.links: each group needs injectors >= 1"));
        }
        // No netem here: a delay goes through Toxiproxy (volley_netlab::proxy).
        let delay_ms = match &l.delay {
            Some(d) => {
                let v = spec::parse_duration(d)
                    .ok()
                    .filter(|v| !v.is_zero())
                    .ok_or_else(|| {
                        invalid(format!(
                            "injectors.links.delay must be a duration such as \"68ms\", got \"{d}\""
                        ))
                    })?;
                Some(v.as_millis().max(1) as u64)
            }
            None => None,
        };
        let rate_bit = match &l.rate {
            Some(r) => Some(parse_rate_bit(r).ok_or_else(|| {
                invalid(format!(
                    "injectors.links.rate must be like \"10mbit\" (kbit, mbit, gbit; at least 8kbit), got \"{r}\""
                ))
            })?),
            None => None,
        };
        for _ in 0..l.injectors {
            out.push(volley_netlab::lab::LinkSpec {
                rate_bit,
                rtt_ms: delay_ms.unwrap_or(1),
                delay_ms,
            });
        }
    }
    if out.len() > most as usize {
        return Err(invalid(format!(
            "injectors.links name {} injectors, more than the largest count ({most})",
            out.len()
        )));
    }
    out.resize(most as usize, volley_netlab::lab::LinkSpec::default());
    Ok(out)
}
