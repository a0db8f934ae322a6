//! Who is faster, by how much, and whether that is beyond noise: the one rule behind
//! every answer volley gives (the report's headline in HTML and Markdown, the study's
//! end table, `volley compare`). Pure: contenders in, a [`Verdict`] out, no clock.
//!
//! A contender is a target, a variant of one (tuning) or a protocol: whatever the
//! question sets side by side. Its evidence is, per point (workload, load point,
//! variant), the figure of each run that counts for the server: steps that measured the
//! generator, the machine's stalls or a shaped link, and steps whose requests mostly
//! failed, are left out (and counted, so the answer can say why nothing is left). The
//! rule (docs/methodology.md, "The answer"):
//! - a winner only when the 95% interval of the ratio excludes 1: the pooled ratio of
//!   medians over the points both measured, bootstrapped over their repeats
//!   (`volley_analysis::ratio::pooled_ratio_ci`); for capacities, the range the two
//!   intervals allow;
//! - with one run per point, no interval exists: "a single run cannot separate figures
//!   this close", with the repeats that would (`ratio::repeats_needed` at the assumed
//!   run-to-run spread);
//! - otherwise "no difference beyond noise", with the reason when volley knows it;
//! - "No answer" when no contender has a figure that stands for it: nothing was
//!   compared, so nothing was shown equal.

use volley_analysis::bootstrap::{self, Estimate, RESAMPLES};
use volley_analysis::ratio;
use volley_analysis::words::number;

/// Seed of the answer's bootstrap: a rebuilt report shows the same interval, and
/// `volley compare`'s ratio line the answer's interval.
pub(crate) const SEED: u64 = 0x616e_7377_6572;

/// Steps a contender had that cannot stand for it, by why.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeftOut {
    /// Generator-bound or machine-stalled: the generator's or the machine's figure.
    pub generator: usize,
    /// Link-bound: the figure of the link volley shaped.
    pub link: usize,
    /// Most of their requests failed: an error is never throughput.
    pub failed: usize,
    /// Too short for the CPU cap volley set to hold: a burst, not the capped server's
    /// figure.
    pub short: usize,
}

impl LeftOut {
    fn total(&self) -> usize {
        self.generator + self.link + self.failed + self.short
    }

    /// The counts by kind, as the end of a sentence: "2 link-bound, 1 generator-bound
    /// or machine-stalled, 0 mostly failed" (and the too-short ones when there are any).
    fn kinds(&self) -> String {
        let short = if self.short > 0 {
            format!(", {} too short for their CPU cap", self.short)
        } else {
            String::new()
        };
        format!(
            "{} link-bound, {} generator-bound or machine-stalled, {} mostly failed{short}",
            self.link, self.generator, self.failed
        )
    }
}

/// The runs of one contender at one point.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// What identifies the point across contenders (workload, load, variant).
    pub key: String,
    /// One figure per run (repeat), each > 0.
    pub runs: Vec<f64>,
}

/// A capacity with its interval: a search's, or a sweep's last sustained and first
/// failed rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapacityFigure {
    /// The capacity (or "at least" figure), req/s.
    pub value: f64,
    /// Lower end of its interval.
    pub lo: f64,
    /// Upper end (`None`: unbounded, the server was not seen to fail above it).
    pub hi: Option<f64>,
    /// Runs behind each judged rate: 1 for a sweep without repeats (one run decided it);
    /// for searches, how many whole searches.
    pub runs: usize,
    /// Whole capacity searches behind the figure (0: a sweep's).
    pub searches: usize,
}

/// One side of the question.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Contender {
    /// Its name: a target, "nginx variant=tuned", "h2".
    pub name: String,
    /// Its runs per point (closed-loop figures: req/s).
    pub points: Vec<Point>,
    /// Its capacity, when the question is a rate sweep or search.
    pub capacity: Option<CapacityFigure>,
    /// Steps left out, by why.
    pub left_out: LeftOut,
    /// Every step that counts ran throttled at a CPU cap volley set.
    pub capped: bool,
    /// Every closed-loop figure it has is inconclusive (kept, but whose limit it shows
    /// is not known: a burst too short to judge, a generator between 70% and 90%).
    pub unsure: bool,
}

/// The answer between the best contender and the next.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The interval of best / next excludes 1.
    Winner {
        /// Index of the best contender.
        best: usize,
        /// Index of the next.
        next: usize,
        /// Their figures (req/s), as compared.
        values: (f64, f64),
        /// best / next with its 95% interval.
        ratio: Estimate,
    },
    /// One run per point: no interval.
    SingleRun {
        /// Index of the contender with the higher figure.
        best: usize,
        /// Index of the other.
        next: usize,
        /// Their figures.
        values: (f64, f64),
        /// best / next.
        ratio: f64,
        /// Runs per side that would separate a true ratio this large at the assumed
        /// spread (`None`: equal figures, no number would).
        repeats: Option<usize>,
        /// How many of the two figures are capacity searches (0, 1 or 2): a search's
        /// own interval is not an interval over searches, and more passes, not
        /// repeats, would give one.
        searched: u8,
    },
    /// The interval holds 1.
    NoDifference {
        /// Index of the contender with the higher figure.
        best: usize,
        /// Index of the other.
        next: usize,
        /// Their figures.
        values: (f64, f64),
        /// best / next with its 95% interval (`None` for capacities without one).
        ratio: Option<Estimate>,
        /// Why, when volley knows (the same CPU cap).
        reason: Option<String>,
    },
    /// Capacities that cannot be ordered: the lower one is only a lower bound (its
    /// server was not seen to fail), so its capacity may lie above the higher figure.
    Unbounded {
        /// Index of the contender with the higher figure.
        best: usize,
        /// Index of the unbounded lower one.
        next: usize,
        /// Their figures (req/s).
        values: (f64, f64),
        /// Whether the higher figure is a lower bound too.
        best_unbounded: bool,
    },
    /// Only one contender has a figure: nothing to rank it against.
    Alone {
        /// Its index.
        only: usize,
        /// Why the others have none, when some were left out.
        others: Option<String>,
    },
    /// No contender has a figure that stands for it.
    NoFigure {
        /// Why, in words.
        reason: String,
    },
}

/// Geometric mean of the medians of `points` (its figure for ranking).
fn level(points: &[&Point]) -> Option<f64> {
    let logs: Vec<f64> = points
        .iter()
        .map(|p| bootstrap::median(&p.runs))
        .filter(|m| m.is_finite() && *m > 0.0)
        .map(f64::ln)
        .collect();
    (!logs.is_empty()).then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp())
}

/// The points `a` and `b` both measured, as (a's runs, b's runs).
fn shared(a: &Contender, b: &Contender) -> Vec<(Vec<f64>, Vec<f64>)> {
    a.points
        .iter()
        .filter_map(|p| {
            let q = b.points.iter().find(|q| q.key == p.key)?;
            (!p.runs.is_empty() && !q.runs.is_empty()).then(|| (p.runs.clone(), q.runs.clone()))
        })
        .collect()
}

/// Why nothing is left to rank, from what every contender had left out.
pub fn nothing_left(all: &[Contender]) -> String {
    let sum = all.iter().fold(LeftOut::default(), |mut s, c| {
        s.generator += c.left_out.generator;
        s.link += c.left_out.link;
        s.failed += c.left_out.failed;
        s.short += c.left_out.short;
        s
    });
    let total = sum.total();
    if total == 0 {
        "no step has a figure to compare".to_string()
    } else if sum.link == total {
        "every step was link-bound: the same shaped link bounds every target, so the figures are the link's, not the servers'".to_string()
    } else if sum.generator == total {
        "every step measured the generator, not a server (generator-bound or machine-stalled)"
            .to_string()
    } else if sum.failed == total {
        "most requests of every step failed: errors are not throughput".to_string()
    } else if sum.short == total {
        "every step was too short for its CPU cap to hold: the figures are bursts, not the capped servers'".to_string()
    } else {
        format!("no step stands for a server ({})", sum.kinds())
    }
}

/// Why one contender has no figure of its own, in its own terms (its line under the
/// answer): "all 3 of its steps were link-bound: the shaped link's figure, not the
/// server's". [`nothing_left`] speaks of every contender at once ("bounds every
/// target"), which read oddly on each target's line.
pub fn nothing_left_of(c: &Contender) -> String {
    let l = &c.left_out;
    let n = l.total();
    let (steps, were) = match n {
        1 => ("its one step".to_string(), "was"),
        2 => ("both of its steps".to_string(), "were"),
        n => (format!("all {n} of its steps"), "were"),
    };
    if n == 0 {
        "no step has a figure to compare".to_string()
    } else if l.link == n {
        format!("{steps} {were} link-bound: the shaped link's figure, not the server's")
    } else if l.generator == n {
        format!("{steps} measured the generator or a stalled machine, not the server")
    } else if l.failed == n {
        format!("most requests of {steps} failed: errors are not throughput")
    } else if l.short == n {
        format!("{steps} {were} too short for the CPU cap to hold: bursts, not the capped server's figure")
    } else {
        format!("no step stands for the server ({})", l.kinds())
    }
}

/// Decides between the contenders (see the module docs): capacities when every
/// contender with a figure has one, else the closed-loop figures per point.
pub fn decide(all: &[Contender]) -> Verdict {
    let with_capacity: Vec<usize> = (0..all.len())
        .filter(|&i| all[i].capacity.is_some())
        .collect();
    if !with_capacity.is_empty() {
        return decide_capacity(all, &with_capacity);
    }
    let with_points: Vec<usize> = (0..all.len())
        .filter(|&i| !all[i].points.is_empty())
        .collect();
    match with_points.as_slice() {
        [] => {
            return Verdict::NoFigure {
                reason: nothing_left(all),
            }
        }
        [only] => return alone(all, *only),
        _ => {}
    }
    let ranked = rank(all, &with_points);
    let [(best, best_level), (next, next_level), ..] = ranked[..] else {
        // A contender whose every figure is unusable has no level: nothing to rank.
        return match ranked.first() {
            Some(&(only, _)) => alone(all, only),
            None => Verdict::NoFigure {
                reason: nothing_left(all),
            },
        };
    };
    let pairs = shared(&all[best], &all[next]);
    if pairs.is_empty() {
        return Verdict::NoDifference {
            best,
            next,
            values: (best_level, next_level),
            ratio: None,
            reason: Some(
                "they share no measured point: nothing like was measured with like".into(),
            ),
        };
    }
    between(all, best, next, &pairs)
}

/// `only` has a figure; the others (when any) say why they have none.
fn alone(all: &[Contender], only: usize) -> Verdict {
    let others: Vec<Contender> = (0..all.len())
        .filter(|&i| i != only)
        .map(|i| all[i].clone())
        .collect();
    Verdict::Alone {
        only,
        others: (!others.is_empty()).then(|| nothing_left(&others)),
    }
}

/// The contenders with points, best first, by their level on the points every one of
/// them measured (like with like), else on each one's own points.
fn rank(all: &[Contender], with_points: &[usize]) -> Vec<(usize, f64)> {
    fn common<'a>(c: &'a Contender, all: &[Contender], with_points: &[usize]) -> Vec<&'a Point> {
        let every: Vec<&Point> = c
            .points
            .iter()
            .filter(|p| {
                with_points
                    .iter()
                    .all(|&j| all[j].points.iter().any(|q| q.key == p.key))
            })
            .collect();
        if every.is_empty() {
            c.points.iter().collect()
        } else {
            every
        }
    }
    let mut ranked: Vec<(usize, f64)> = with_points
        .iter()
        .filter_map(|&i| Some((i, level(&common(&all[i], all, with_points))?)))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    ranked
}

/// One point both sides measured: (the first's runs, the second's).
type Pair = (Vec<f64>, Vec<f64>);

/// The two sides' levels over `pairs` (as compared).
fn levels(pairs: &[Pair]) -> (f64, f64) {
    let side = |pick: fn(&Pair) -> &Vec<f64>| {
        let points: Vec<Point> = pairs
            .iter()
            .map(|p| Point {
                key: String::new(),
                runs: pick(p).clone(),
            })
            .collect();
        level(&points.iter().collect::<Vec<_>>()).unwrap_or(f64::NAN)
    };
    (side(|p| &p.0), side(|p| &p.1))
}

/// The verdict between `best` and `next` on the points both measured (`pairs`): no
/// interval from one run per point; else the interval of the pooled ratio over the
/// points with at least two runs a side decides.
fn between(all: &[Contender], best: usize, next: usize, pairs: &[(Vec<f64>, Vec<f64>)]) -> Verdict {
    let repeated: Vec<(Vec<f64>, Vec<f64>)> = pairs
        .iter()
        .filter(|(a, b)| a.len() >= 2 && b.len() >= 2)
        .cloned()
        .collect();
    if repeated.is_empty() {
        let v = levels(pairs);
        let r = v.0 / v.1;
        return Verdict::SingleRun {
            best,
            next,
            values: v,
            ratio: r,
            repeats: ratio::repeats_needed(r, ratio::ASSUMED_RUN_CV),
            searched: 0,
        };
    }
    let v = levels(&repeated);
    let Ok(est) = ratio::pooled_ratio_ci(&repeated, RESAMPLES, SEED) else {
        return Verdict::NoFigure {
            reason: "the figures cannot be divided (a zero or invalid run)".into(),
        };
    };
    if est.lo > 1.0 {
        Verdict::Winner {
            best,
            next,
            values: v,
            ratio: est,
        }
    } else if est.hi < 1.0 {
        // Ranked on all common points, the repeated ones say the other way round.
        Verdict::Winner {
            best: next,
            next: best,
            values: (v.1, v.0),
            ratio: Estimate {
                median: 1.0 / est.median,
                lo: 1.0 / est.hi,
                hi: 1.0 / est.lo,
            },
        }
    } else {
        Verdict::NoDifference {
            best,
            next,
            values: v,
            ratio: Some(est),
            reason: both_capped(all, best, next),
        }
    }
}

/// The reason two figures within noise may be alike: both ran at volley's CPU cap.
fn both_capped(all: &[Contender], best: usize, next: usize) -> Option<String> {
    (all[best].capped && all[next].capped)
        .then(|| "both ran throttled at the CPU cap volley set".to_string())
}

/// Capacities: a winner only when the best one's interval lies above the next one's
/// (lo_best / hi_next > 1), and never from one run per rate.
fn decide_capacity(all: &[Contender], with: &[usize]) -> Verdict {
    if let [only] = with {
        return alone(all, *only);
    }
    let mut ranked: Vec<(usize, CapacityFigure)> = with
        .iter()
        .filter_map(|&i| Some((i, all[i].capacity?)))
        .collect();
    ranked.sort_by(|a, b| b.1.value.total_cmp(&a.1.value));
    let ((best, b), (next, n)) = (ranked[0], ranked[1]);
    let values = (b.value, n.value);
    // "At least X" below "Y" orders nothing: the lower server was not seen to fail, so
    // its capacity may lie anywhere above X (a busy run of seed 001 otherwise answered
    // "apache 1,350 vs nginx 1,000 (1.35x)" from two lower bounds).
    if n.hi.is_none() {
        return Verdict::Unbounded {
            best,
            next,
            values,
            best_unbounded: b.hi.is_none(),
        };
    }
    let r = if n.value > 0.0 {
        b.value / n.value
    } else {
        f64::INFINITY
    };
    if b.runs < 2 || n.runs < 2 {
        return Verdict::SingleRun {
            best,
            next,
            values,
            ratio: r,
            repeats: ratio::repeats_needed(r, ratio::ASSUMED_RUN_CV),
            searched: u8::from(b.searches > 0) + u8::from(n.searches > 0),
        };
    }
    let range = Estimate {
        median: r,
        lo: n.hi.filter(|h| *h > 0.0).map_or(0.0, |h| b.lo / h),
        hi: if n.lo > 0.0 {
            b.hi.map_or(f64::INFINITY, |h| h / n.lo)
        } else {
            f64::INFINITY
        },
    };
    if range.lo > 1.0 {
        Verdict::Winner {
            best,
            next,
            values,
            ratio: range,
        }
    } else {
        Verdict::NoDifference {
            best,
            next,
            values,
            ratio: Some(range),
            reason: both_capped(all, best, next),
        }
    }
}

/// "1.39x [1.31, 1.46]"; an unbounded end reads "unbounded".
pub fn ratio_text(e: &Estimate) -> String {
    let end = |v: f64| {
        if v.is_finite() {
            format!("{v:.2}")
        } else {
            "unbounded".to_string()
        }
    };
    format!("{:.2}x [{}, {}]", e.median, end(e.lo), end(e.hi))
}

/// The verdict in one sentence. `verb` says what the best did ("served the most
/// requests per second", "sustained the highest rate", "carries"); figures are req/s.
pub fn sentence(v: &Verdict, all: &[Contender], verb: &str) -> String {
    let text = verdict_sentence(v, all, verb);
    let compared = match v {
        Verdict::Winner { best, next, .. }
        | Verdict::NoDifference { best, next, .. }
        | Verdict::SingleRun { best, next, .. }
        | Verdict::Unbounded { best, next, .. } => vec![*best, *next],
        Verdict::Alone { only, .. } => vec![*only],
        Verdict::NoFigure { .. } => Vec::new(),
    };
    let unsure: Vec<&str> = compared
        .iter()
        .filter(|&&i| all[i].unsure)
        .map(|&i| all[i].name.as_str())
        .collect();
    match unsure.as_slice() {
        [] => text,
        [one] if compared.len() > 1 => {
            format!("{text} {one}'s figures are inconclusive: {UNSURE}.")
        }
        _ => format!("{text} The figures are inconclusive: {UNSURE}."),
    }
}

/// What an inconclusive figure does not say.
const UNSURE: &str = "whose limit they show, the server's or volley's, is not known";

/// [`sentence`] without the word on inconclusive figures.
fn verdict_sentence(v: &Verdict, all: &[Contender], verb: &str) -> String {
    let name = |i: usize| all[i].name.as_str();
    let rps = |x: f64| format!("{} req/s", number(x));
    match v {
        Verdict::Winner {
            best,
            next,
            values,
            ratio,
        } => format!(
            "{} {verb}: {} vs {} {}: {} (95% interval).",
            name(*best),
            rps(values.0),
            name(*next),
            number(values.1),
            ratio_text(ratio)
        ),
        Verdict::SingleRun {
            best,
            next,
            values,
            ratio,
            repeats,
            searched,
        } => {
            let figures = format!(
                "{} {} vs {} {} ({ratio:.2}x) from {}",
                name(*best),
                rps(values.0),
                name(*next),
                number(values.1),
                one_each(*searched)
            );
            match searched {
                0 => single_run(&figures, *repeats),
                _ => format!("{figures}: {ONE_SEARCH}."),
            }
        }
        Verdict::NoDifference {
            best,
            next,
            values,
            ratio,
            reason,
        } => format!(
            "No difference beyond noise: {} {} vs {} {}{}{}.",
            name(*best),
            rps(values.0),
            name(*next),
            number(values.1),
            ratio
                .as_ref()
                .map(|r| format!(": {}, the interval holds 1", ratio_text(r)))
                .unwrap_or_default(),
            reason
                .as_ref()
                .map(|r| format!("; {r}"))
                .unwrap_or_default()
        ),
        Verdict::Unbounded {
            best,
            next,
            values,
            best_unbounded: true,
        } => format!(
            "No order can be told: no server was seen to fail ({} at least {}, {} at least {}), so each capacity is only a lower bound.",
            name(*best),
            rps(values.0),
            name(*next),
            rps(values.1)
        ),
        Verdict::Unbounded {
            best,
            next,
            values,
            best_unbounded: false,
        } => format!(
            "No order can be told: {} was not seen to fail (at least {}), so it may carry more than {}'s {}.",
            name(*next),
            rps(values.1),
            name(*best),
            rps(values.0)
        ),
        Verdict::Alone { only, others } => format!(
            "Only {} has a figure of its own{}.",
            name(*only),
            others
                .as_ref()
                .map(|o| format!(" (the others: {o})"))
                .unwrap_or_default()
        ),
        // No figure at all (failures, the generator's or the link's figures, bursts
        // under a cap) is no answer, never "no difference": nothing was compared.
        Verdict::NoFigure { reason } => format!("No answer: {reason}."),
    }
}

/// Why one capacity search orders nothing, and what would.
const ONE_SEARCH: &str = "a search's interval holds only its own runs near its edge, not the spread from one search to the next, so one search cannot separate them; [search] passes = 2 or more (and [steps] repeats for a sweep) would";

/// "one run each", "one search each", or "one search and one run" for `searched` of
/// the two figures being capacity searches.
fn one_each(searched: u8) -> &'static str {
    match searched {
        0 => "one run each",
        1 => "one search and one run",
        _ => "one search each",
    }
}

/// Repeats a side beyond which "N repeats of each would" is no plan a study runs: two
/// single runs 0.3% apart at the assumed 5% spread need about 3,300 of each (seed
/// 002's HTTP/3 study printed "about 4960 repeats of each would" for Caddy's h2 and h3). Past it the answer says the
/// figures are closer than runs vary, with the number for the curious.
const PRACTICAL_REPEATS: usize = 100;

/// A comparison of one run each, its `figures` given: no difference (equal figures), or
/// how many `repeats` of each would tell it from noise at the assumed run-to-run spread.
fn single_run(figures: &str, repeats: Option<usize>) -> String {
    let spread = format!(
        "at the {:.0}% run-to-run spread assumed without repeats",
        ratio::ASSUMED_RUN_CV * 100.0
    );
    match repeats {
        None => format!("No difference beyond noise: {figures}."),
        Some(n) if n > PRACTICAL_REPEATS => format!(
            "{figures}: closer than single runs vary, so no practical number of repeats would separate them (about {n} of each, {spread})."
        ),
        Some(n) if n > ratio::MIN_REPEATS => format!(
            "{figures}: a single run cannot separate figures this close; about {n} repeats of each would ({spread})."
        ),
        Some(n) => format!(
            "{figures}: one run has no interval to tell a difference from noise; {n} repeats of each would ({spread})."
        ),
    }
}

/// The verdict between one knob alone (`pair[0]`) and the default (`pair[1]`), as the
/// rest of one short line after the knob's name: its ratio to the default with the
/// interval, or why there is none ("cannot separate (12 repeats of each would)").
/// The ratio is always knob / default, whichever is higher, so a column of knob lines
/// reads as one scale.
pub fn knob_words(v: &Verdict, pair: &[Contender; 2]) -> String {
    // (knob, default) from (best, next) figures; a ratio turned to knob / default.
    let oriented = |best: usize, values: (f64, f64)| match best {
        0 => values,
        _ => (values.1, values.0),
    };
    let turn = |best: usize, e: &Estimate| match best {
        0 => *e,
        _ => Estimate {
            median: 1.0 / e.median,
            lo: 1.0 / e.hi,
            hi: 1.0 / e.lo,
        },
    };
    let figures = |(k, d): (f64, f64)| format!("{} vs {} req/s", number(k), number(d));
    // "1.40x the default [1.31, 1.46]"
    let times = |e: Estimate| ratio_text(&e).replacen("x [", "x the default [", 1);
    match v {
        Verdict::Winner {
            best,
            values,
            ratio,
            ..
        } => format!(
            "{} (95% interval), {}",
            times(turn(*best, ratio)),
            figures(oriented(*best, *values))
        ),
        Verdict::SingleRun {
            best,
            values,
            repeats,
            searched,
            ..
        } => {
            let (k, d) = oriented(*best, *values);
            let r = if d > 0.0 { k / d } else { f64::INFINITY };
            let why = match (searched, repeats) {
                (1.., _) => "cannot separate ([search] passes = 2 or more would)".to_string(),
                (0, None) => "the same figure".to_string(),
                (0, Some(n)) if *n > PRACTICAL_REPEATS => format!(
                    "cannot separate (closer than runs vary: about {n} repeats of each would)"
                ),
                (0, Some(n)) => format!("cannot separate ({n} repeats of each would)"),
            };
            format!(
                "{r:.2}x the default from {}: {why}, {}",
                one_each(*searched),
                figures((k, d))
            )
        }
        Verdict::NoDifference {
            best,
            values,
            ratio,
            reason,
            ..
        } => format!(
            "no difference beyond noise{}, {}{}",
            ratio
                .as_ref()
                .map(|r| format!(": {}", times(turn(*best, r))))
                .unwrap_or_default(),
            figures(oriented(*best, *values)),
            reason
                .as_ref()
                .map(|r| format!("; {r}"))
                .unwrap_or_default()
        ),
        Verdict::Unbounded { best, values, .. } => {
            let (k, d) = oriented(*best, *values);
            format!(
                "no order can be told: at least {} vs the default's {} req/s (a capacity not seen to fail is a lower bound)",
                number(k),
                number(d)
            )
        }
        Verdict::Alone { only: 0, .. } => format!(
            "nothing to compare: the default has no figure ({})",
            nothing_left(std::slice::from_ref(&pair[1]))
        ),
        Verdict::Alone { .. } => format!(
            "no figure ({})",
            nothing_left(std::slice::from_ref(&pair[0]))
        ),
        Verdict::NoFigure { reason, .. } => format!("no figure ({reason})"),
    }
}

#[cfg(test)]
#[path = "answer_tests.rs"]
mod tests;
