//! One colour per target and per variant and protocol of a target, through the whole
//! report: every
//! chart (interactive or static) and the headline's swatches ask [`Colors`] by the same
//! key, so a colour means one thing wherever a reader meets it. Groups of one target's
//! steps (CPU caps, core sets, percentiles) are told apart by dash, never by colour.

use crate::model::{Report, StepReport, TargetReport};
use crate::svg::PALETTE;

/// Who a line or point belongs to: `target`, then `· variant` for a step run with a
/// `[[variant]]` tuning and `· protocol` where the run spoke more than one protocol
/// (`StepReport::protocol`).
pub fn key(t: &TargetReport, s: &StepReport) -> String {
    series_key(&t.target, &s.variant, &s.protocol)
}

/// [`key`] of a figure that is not a step (a capacity of one variant and protocol).
pub fn series_key(target: &str, variant: &Option<String>, protocol: &Option<String>) -> String {
    let mut k = target.to_string();
    for part in [variant, protocol].into_iter().flatten() {
        k.push_str(" \u{b7} ");
        k.push_str(part);
    }
    k
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
            // The bare target's key only when some step ran as it (or none ran at all):
            // a target whose steps all ran as variants or protocols spends no colour on
            // a series no chart draws.
            if t.steps.is_empty() || t.steps.iter().any(|s| key(t, s) == t.target) {
                keys.push(t.target.clone());
            }
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

    /// The colour of a target as a whole (its merged figures, its server's monitor):
    /// its bare key's, else its first series'.
    pub fn target(&self, t: &TargetReport) -> &'static str {
        match self.keys_of(t).first() {
            Some(first) if !self.keys.contains(&t.target) => self.get(first),
            _ => self.get(&t.target),
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TargetReport;

    fn target(name: &str, variants: &[Option<&str>]) -> TargetReport {
        let steps = variants
            .iter()
            .map(|v| {
                let mut s = StepReport::blank();
                s.variant = v.map(str::to_string);
                s
            })
            .collect();
        TargetReport::blank(name, steps)
    }

    #[test]
    fn protocols_are_keys_of_their_own_beside_variants() {
        let mut t = target("a", &[None, Some("tuned"), Some("tuned")]);
        t.steps[0].protocol = Some("h1".into());
        t.steps[1].protocol = Some("h1".into());
        t.steps[2].protocol = Some("h3".into());
        let report = Report {
            schema_version: 1,
            title: "t".into(),
            study: None,
            targets: vec![t],
        };
        let c = Colors::of(&report);
        assert_eq!(
            c.keys_of(&report.targets[0]),
            [
                "a \u{b7} h1",
                "a \u{b7} tuned \u{b7} h1",
                "a \u{b7} tuned \u{b7} h3"
            ]
        );
        let colours: Vec<&str> = c
            .keys_of(&report.targets[0])
            .iter()
            .map(|k| c.get(k))
            .collect();
        // No colour spent on the bare target no step ran as.
        assert_eq!(colours, [PALETTE[0], PALETTE[1], PALETTE[2]]);
        assert_eq!(c.target(&report.targets[0]), PALETTE[0]);
    }

    #[test]
    fn each_target_and_variant_has_its_own_colour_in_reading_order() {
        let report = Report {
            schema_version: 1,
            title: "t".into(),
            study: None,
            targets: vec![
                target("a", &[None, None]),
                target("b", &[Some("tuned"), None, Some("tuned")]),
            ],
        };
        let c = Colors::of(&report);
        assert_eq!(c.get("a"), PALETTE[0]);
        assert_eq!(c.get("b"), PALETTE[1]);
        assert_eq!(c.get("b \u{b7} tuned"), PALETTE[2]);
        assert_eq!(c.target(&report.targets[1]), PALETTE[1]);
        assert_eq!(c.keys_of(&report.targets[1]), ["b", "b \u{b7} tuned"]);
        assert_eq!(c.keys_of(&report.targets[0]), ["a"]);
    }
}
