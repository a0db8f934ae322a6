//! One colour per target and per variant of a target, through the whole report: every
//! chart (interactive or static) and the headline's swatches ask [`Colors`] by the same
//! key, so a colour means one thing wherever a reader meets it. Groups of one target's
//! steps (CPU caps, core sets, percentiles) are told apart by dash, never by colour.

use crate::model::{Report, StepReport, TargetReport};
use crate::svg::PALETTE;

/// Who a line or point belongs to: `target`, or `target · variant` for a step run with
/// a `[[variant]]` tuning.
pub fn key(t: &TargetReport, s: &StepReport) -> String {
    match &s.variant {
        Some(v) => variant_key(&t.target, v),
        None => t.target.clone(),
    }
}

fn variant_key(target: &str, variant: &str) -> String {
    format!("{target} \u{b7} {variant}")
}

/// The report's colour keys, in reading order: each target, then its variants as they
/// first ran.
#[derive(Debug, Clone, PartialEq)]
pub struct Colors {
    keys: Vec<String>,
}

impl Colors {
    /// Every key of `report`.
    pub fn of(report: &Report) -> Colors {
        let mut keys: Vec<String> = Vec::new();
        for t in &report.targets {
            keys.push(t.target.clone());
            for s in &t.steps {
                let k = key(t, s);
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
        }
        Colors { keys }
    }

    /// The colour of `key` (a key the report does not hold gets the palette's last).
    pub fn get(&self, key: &str) -> &'static str {
        let i = self
            .keys
            .iter()
            .position(|k| k == key)
            .unwrap_or(PALETTE.len() - 1);
        PALETTE[i % PALETTE.len()]
    }

    /// The colour of a target as a whole (its merged figures, its server's monitor).
    pub fn target(&self, t: &TargetReport) -> &'static str {
        self.get(&t.target)
    }

    /// Every key that some step of `t` ran as, in reading order.
    pub fn keys_of(&self, t: &TargetReport) -> Vec<&str> {
        self.keys
            .iter()
            .filter(|k| t.steps.iter().any(|s| key(t, s) == **k))
            .map(String::as_str)
            .collect()
    }
}
