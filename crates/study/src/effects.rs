//! Which knob mattered (issue 23): each variant of a target against its default at the
//! same point, as the ratio of their figures with a bootstrap 95% interval when both
//! sides have repeats, else one line saying one run each cannot separate them.
//!
//! With `sweep.variants = "each"` the variants are the default, each knob of the tuned
//! variant alone (`tuned:somaxconn`) and the tuned variant whole, so these lines answer
//! the question knob by knob. The figure is the one the point's own row shows: median
//! req/s of closed-loop repeats, the capacity of a rate sweep (per repeat), or a
//! search's capacity with its interval. Steps that could not be judged for the server
//! never count (docs/methodology.md, "Repeats and noise").

use volley_analysis::bootstrap::RESAMPLES;
use volley_analysis::knee::{self, Capacity, Claim, Evidence};
use volley_analysis::ratio;

use crate::outcome::{judged_for_server, StepOutcome};
use crate::plan::{Plan, Point, DEFAULT_VARIANT};

/// A point of one instance: its cells differ only by rate (a rate sweep has a cell
/// per rate).
fn point_of(plan: &Plan, ci: usize) -> Point {
    plan.cells[ci].point()
}

/// The instance of the default variant beside instance `i` (same target, cap and
/// cores); `None` when `i` is the default's own or has no variant.
fn default_twin(plan: &Plan, i: usize) -> Option<usize> {
    let inst = &plan.instances[i];
    let v = inst.variant?;
    if plan.variants[v].name == DEFAULT_VARIANT {
        return None;
    }
    plan.instances.iter().position(|o| {
        o.variant
            .is_some_and(|ov| plan.variants[ov].name == DEFAULT_VARIANT)
            && (o.target, o.cpu_quota, o.cores) == (inst.target, inst.cpu_quota, inst.cores)
    })
}

/// One figure per repeat of a cell: median req/s of a closed-loop run, or the claim of
/// that repeat's rate steps.
enum Figures {
    /// Closed loop: req/s of each judged run.
    Rps(Vec<f64>),
    /// Rate sweep: the claim of each repeat.
    Claims(Vec<Claim>),
}

fn figures(plan: &Plan, steps: &[StepOutcome], p: Point) -> Figures {
    let mine: Vec<&StepOutcome> = steps
        .iter()
        .filter(|s| point_of(plan, s.cell) == p)
        .collect();
    if !mine.iter().any(|s| s.rate.is_some()) {
        return Figures::Rps(
            mine.iter()
                .filter(|s| judged_for_server(s))
                .map(|s| s.rps)
                .collect(),
        );
    }
    let mut repeats: Vec<u32> = mine.iter().map(|s| s.repeat).collect();
    repeats.sort_unstable();
    repeats.dedup();
    Figures::Claims(
        repeats
            .into_iter()
            .map(|r| {
                let judged: Vec<(f64, Evidence)> = mine
                    .iter()
                    .filter(|s| s.repeat == r)
                    .filter_map(|s| Some((s.rate?, s.evidence()?)))
                    .collect();
                knee::sweep_evidence(&judged).claim()
            })
            .collect(),
    )
}

/// "1.39x [1.31, 1.46]", with "no difference beyond noise" when the interval holds 1.
fn ratio_text(a: &[f64], b: &[f64], unit: &str) -> String {
    match ratio::ratio_of_medians_ci(a, b, RESAMPLES, 1) {
        Ok(e) => format!(
            "{:.2}x [{:.2}, {:.2}] ({} vs {} runs, median {unit}){}",
            e.median,
            e.lo,
            e.hi,
            a.len(),
            b.len(),
            if e.lo <= 1.0 && 1.0 <= e.hi {
                ": no difference beyond noise"
            } else {
                ""
            }
        ),
        Err(e) => format!("no ratio ({e})"),
    }
}

/// Why no ratio when a side has fewer than two figures. The counts are the runs that
/// count, not the repeats planned: a run the machine spoiled or the generator bounded
/// is left out, so two planned repeats may leave one.
fn too_few(a: usize, b: usize) -> String {
    if a == 1 && b == 1 {
        return "one run each cannot separate them (add [steps] repeats)".to_string();
    }
    format!("{a} vs {b} runs judged for the server cannot separate them (add [steps] repeats)")
}

/// The comparison of two cells' figures (`a` the variant's, `b` the default's).
fn compare(a: Figures, b: Figures) -> String {
    match (a, b) {
        (Figures::Rps(a), Figures::Rps(b)) if a.is_empty() || b.is_empty() => {
            "no figure: a side has no step judged for the server".to_string()
        }
        (Figures::Rps(a), Figures::Rps(b)) if a.len() < 2 || b.len() < 2 => format!(
            "{:.0} vs {:.0} req/s: {}",
            volley_analysis::bootstrap::median(&a),
            volley_analysis::bootstrap::median(&b),
            too_few(a.len(), b.len())
        ),
        (Figures::Rps(a), Figures::Rps(b)) => ratio_text(&a, &b, "req/s"),
        (Figures::Claims(a), Figures::Claims(b)) => {
            let bounded = |c: &[Claim]| -> Option<Vec<f64>> {
                c.iter()
                    .map(|c| c.bounded().then(|| c.value()).flatten())
                    .collect()
            };
            match (bounded(&a), bounded(&b)) {
                (Some(x), Some(y)) if x.len() >= 2 && y.len() >= 2 => {
                    format!("capacity {}", ratio_text(&x, &y, "capacity"))
                }
                _ => {
                    let all = |c: &[Claim]| {
                        c.iter()
                            .map(|c| c.text("req/s"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    let why = if a.len() < 2 || b.len() < 2 {
                        too_few(a.len(), b.len())
                    } else {
                        "a ratio needs a capacity in every run (a server failure above it), not \"at least\"".to_string()
                    };
                    format!("capacity {} vs {}: {why}", all(&a), all(&b))
                }
            }
        }
        _ => "no figure: the two sides were measured differently".to_string(),
    }
}

/// A search's capacity with its interval.
fn searched(c: &Capacity) -> String {
    format!(
        "{} [{:.0}, {}]",
        c.claim().text("req/s"),
        c.ci_lo_rps,
        c.ci_hi_rps
            .map_or("unbounded".to_string(), |h| format!("{h:.0}"))
    )
}

/// Searches of one side together, as the report pools them (`knee::pool`: the lower
/// median search inside the envelope of their intervals, infinite above when one is
/// open), or `None` when any search ended without a capacity (a lower bound).
fn envelope(side: &[&Capacity]) -> Option<knee::Pooled> {
    let figures: Vec<(f64, f64, Option<f64>)> = side
        .iter()
        .map(|c| match c.claim() {
            Claim::Capacity { value, .. } => Some((value, c.ci_lo_rps, c.ci_hi_rps)),
            _ => None,
        })
        .collect::<Option<_>>()?;
    knee::pool(&figures)
}

/// A side's searches as the line shows them: one search with its interval, or the
/// median of several with the envelope of their intervals and each pass's figure.
fn searched_side(side: &[&Capacity]) -> String {
    match (side, envelope(side)) {
        ([one], _) => searched(one),
        (_, Some(p)) => format!(
            "{:.0} req/s (lower median of {} searches) [{:.0}, {}] ({})",
            p.value,
            side.len(),
            p.lo,
            if p.hi.is_finite() {
                format!("{:.0}", p.hi)
            } else {
                "unbounded".to_string()
            },
            side.iter()
                .map(|c| c
                    .capacity_rps
                    .map_or("-".to_string(), |v| format!("{v:.0}")))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (_, None) => side
            .iter()
            .map(|c| searched(c))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The comparison of a variant's searches (`a`) with the default's (`b`). One search's
/// interval covers only its own runs near the edge, not the spread from one search to
/// the next (docs/methodology.md, "Capacity search"), so one search each never orders
/// two capacities; with passes, the envelopes of their intervals must lie apart.
fn searched_pair(a: &[&Capacity], b: &[&Capacity]) -> String {
    let (sa, sb) = (searched_side(a), searched_side(b));
    let (Some(x), Some(y)) = (envelope(a), envelope(b)) else {
        return format!("capacity {sa} vs {sb}: a ratio needs a capacity on both sides");
    };
    if y.value <= 0.0 {
        return format!("capacity {sa} vs {sb}: a ratio needs a capacity on both sides");
    }
    let overlap = x.hi >= y.lo && y.hi >= x.lo;
    let tail = if a.len() < 2 || b.len() < 2 {
        ", from one search each: no interval over searches, so no difference can be claimed ([search] passes = 2 or more would tell)"
    } else if overlap {
        ", the searches' intervals overlap: no difference beyond their spread"
    } else {
        ""
    };
    format!("capacity {sa} vs {sb}: {:.2}x{tail}", x.value / y.value)
}

/// One line per non-default variant and point: "nginx 1.5KB c=16 ka=off:
/// tuned:somaxconn vs default: 1.02x [0.97, 1.08] (...)". `steps` are each planned
/// step's best attempt; `searches` the capacities searched per cell.
pub(crate) fn effect_lines(
    plan: &Plan,
    steps: &[StepOutcome],
    searches: &[(usize, Capacity)],
) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen: Vec<Point> = Vec::new();
    for ci in 0..plan.cells.len() {
        let p = point_of(plan, ci);
        if seen.contains(&p) {
            continue;
        }
        seen.push(p);
        let Point {
            instance: inst,
            workload: wl,
            concurrency: conc,
            keepalive: ka,
            ..
        } = p;
        let Some(twin_inst) = default_twin(plan, inst) else {
            continue;
        };
        if plan.workloads[wl].office.is_some() {
            continue;
        }
        let twin = Point {
            instance: twin_inst,
            ..p
        };
        let variant = &plan.variants[plan.instances[inst].variant.unwrap_or_default()].name;
        let label = plan.instance_label(twin_inst);
        let label = label
            .strip_suffix(&format!(" variant={DEFAULT_VARIANT}"))
            .unwrap_or(&label);
        // Every pass of each side's search (`[search] passes`).
        let found = |q: Point| -> Vec<&Capacity> {
            searches
                .iter()
                .filter(|(s, _)| point_of(plan, *s) == q)
                .map(|(_, c)| c)
                .collect()
        };
        let (a, b) = (found(p), found(twin));
        let answer = match (a.is_empty(), b.is_empty()) {
            (false, false) => searched_pair(&a, &b),
            (true, true) if steps.iter().any(|s| point_of(plan, s.cell) == p) => {
                compare(figures(plan, steps, p), figures(plan, steps, twin))
            }
            _ => continue,
        };
        out.push(format!(
            "{label} {} c={conc} ka={}: {variant} vs {DEFAULT_VARIANT}: {answer}",
            plan.workloads[wl].name,
            if ka { "on" } else { "off" },
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(extra: &str) -> Plan {
        let text = format!(
            r#"
name = "e"
[[target]]
name = "web"
kind = "nginx"
[[workload]]
name = "w"
paths = ["/"]
[sweep]
variants = "each"
[[variant]]
name = "tuned"
server = {{ defer_accept = true, backlog = 1024 }}
{extra}"#
        );
        crate::resolve(&crate::parse(&text).unwrap(), &text, 1.0).unwrap()
    }

    fn step(
        plan: &Plan,
        ci: usize,
        repeat: u32,
        rps: f64,
        sustainable: Option<bool>,
    ) -> StepOutcome {
        StepOutcome {
            order: ci,
            cell: ci,
            repeat,
            rate: plan.cells[ci].rate,
            rps,
            ok_rps: rps,
            p99_ms: 1.0,
            sustainable,
            label: "server-bound",
            ..StepOutcome::blank_for_tests()
        }
    }

    fn variant_of(plan: &Plan, ci: usize) -> &str {
        let v = plan.instances[plan.cells[ci].instance].variant.unwrap();
        &plan.variants[v].name
    }

    #[test]
    fn each_knob_gets_a_ratio_with_its_interval_when_repeats_allow() {
        let p = plan("[load]\nmodel = \"closed\"\n[steps]\nduration = \"3s\"\nrepeats = 4\n");
        // defer_accept carries 1.4x, backlog nothing, both together 1.4x.
        let base = |ci: usize| match variant_of(&p, ci) {
            "tuned:defer_accept" | "tuned" => 1400.0,
            _ => 1000.0,
        };
        let steps: Vec<StepOutcome> = p
            .steps
            .iter()
            .map(|s| {
                let wobble = [0.0, 10.0, -10.0, 5.0][s.repeat as usize];
                step(&p, s.cell, s.repeat, base(s.cell) + wobble, None)
            })
            .collect();
        let lines = effect_lines(&p, &steps, &[]);
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert!(
            lines[0].starts_with("web w c=1 ka=on: tuned:backlog vs default: 1.00x ["),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].ends_with("(4 vs 4 runs, median req/s): no difference beyond noise"),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].starts_with("web w c=1 ka=on: tuned:defer_accept vs default: 1.40x ["),
            "{}",
            lines[1]
        );
        assert!(!lines[1].contains("noise"), "{}", lines[1]);
        assert!(
            lines[2].contains(": tuned vs default: 1.40x"),
            "{}",
            lines[2]
        );
        // The end table carries them below the rows.
        let t = crate::outcome::table(&p, &steps, &[]);
        assert!(t.usl.iter().any(|l| l == &lines[1]), "{t}");
    }

    #[test]
    fn one_run_each_says_it_cannot_separate_them() {
        let p = plan("[load]\nmodel = \"closed\"\n[steps]\nduration = \"3s\"\n");
        let steps: Vec<StepOutcome> = p
            .steps
            .iter()
            .map(|s| step(&p, s.cell, 0, 1000.0, None))
            .collect();
        let lines = effect_lines(&p, &steps, &[]);
        assert_eq!(
            lines[0],
            "web w c=1 ka=on: tuned:backlog vs default: 1000 vs 1000 req/s: one run each cannot separate them (add [steps] repeats)"
        );
        // A rate sweep run once: the claims side by side, no ratio.
        let p =
            plan("[sweep.rate]\nfrom = 100\nto = 300\nstep = 100\n[steps]\nduration = \"3s\"\n");
        let steps: Vec<StepOutcome> = p
            .steps
            .iter()
            .map(|s| {
                let r = p.cells[s.cell].rate.unwrap();
                let tuned = variant_of(&p, s.cell) != "default";
                step(&p, s.cell, 0, r, Some(tuned || r < 250.0))
            })
            .collect();
        let lines = effect_lines(&p, &steps, &[]);
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert_eq!(
            lines[2],
            "web w c=1 ka=on: tuned vs default: capacity at least 300 req/s (the highest step tried) vs 200 req/s: one run each cannot separate them (add [steps] repeats)"
        );
    }
    #[test]
    fn a_repeat_left_out_is_counted_in_the_line_not_called_one_run_each() {
        let p = plan("[load]\nmodel = \"closed\"\n[steps]\nduration = \"3s\"\nrepeats = 2\n");
        let steps: Vec<StepOutcome> = p
            .steps
            .iter()
            .map(|s| {
                let mut o = step(&p, s.cell, s.repeat, 1000.0, None);
                // The machine spoiled the default's second repeat.
                if variant_of(&p, s.cell) == "default" && s.repeat == 1 {
                    o.label = "machine-stalled";
                }
                o
            })
            .collect();
        let lines = effect_lines(&p, &steps, &[]);
        assert_eq!(
            lines[0],
            "web w c=1 ka=on: tuned:backlog vs default: 1000 vs 1000 req/s: 2 vs 1 runs judged for the server cannot separate them (add [steps] repeats)"
        );
    }

    /// A finished search's answer: capacity `c` (a failure seen at `c * 1.1`), its
    /// interval [`lo`, `hi`].
    fn cap(c: f64, lo: f64, hi: f64) -> Capacity {
        Capacity {
            capacity_rps: Some(c),
            last_sustainable_rps: Some(c),
            first_unsustainable_rps: Some(c * 1.1),
            ci_lo_rps: lo,
            ci_hi_rps: Some(hi),
            probes: Vec::new(),
            steps: 10,
            end: knee::SearchEnd::Converged,
            generator_bound_at_rps: None,
            unjudged_steps: 0,
        }
    }

    #[test]
    fn one_search_each_claims_no_difference_and_passes_need_their_envelopes_apart() {
        // Seed 001's Apache search on this machine: defer_accept 7,000 [7,000, 7,200]
        // against the default's 8,400 [8,000, 8,800], intervals apart, in one search
        // each; an earlier search read that default at 6,200.
        let (knob, default) = (cap(7000.0, 7000.0, 7200.0), cap(8400.0, 8000.0, 8800.0));
        let line = searched_pair(&[&knob], &[&default]);
        assert!(line.contains("0.83x"), "{line}");
        assert!(line.contains("from one search each"), "{line}");
        assert!(line.contains("no difference can be claimed"), "{line}");
        // Two passes each, envelopes apart: the ratio of the medians, unqualified.
        let (k2, d2) = (cap(6800.0, 6600.0, 7200.0), cap(8200.0, 7900.0, 8600.0));
        let line = searched_pair(&[&knob, &k2], &[&default, &d2]);
        let want = "6800 req/s (lower median of 2 searches) [6600, 7200] (7000, 6800)";
        assert!(line.contains(want), "{line}");
        assert!(
            line.contains("8200 req/s (lower median of 2 searches) [7900, 8800]"),
            "{line}"
        );
        assert!(line.ends_with(": 0.83x"), "{line}");
        // Two passes whose envelopes overlap (the default read 6,200 once): no claim.
        let low = cap(6200.0, 6200.0, 6400.0);
        let line = searched_pair(&[&knob, &k2], &[&default, &low]);
        assert!(line.contains("the searches' intervals overlap"), "{line}");
        // A search that never saw a failure gives no ratio.
        let mut open = cap(9000.0, 9000.0, 9000.0);
        open.first_unsustainable_rps = None;
        let line = searched_pair(&[&open, &k2], &[&default, &d2]);
        assert!(
            line.contains("a ratio needs a capacity on both sides"),
            "{line}"
        );
    }
}
