//! Searched capacities of two runs side by side: each stored search's figure and claim,
//! a cell's several searches (`[search] passes`) taken together, and the pairs of
//! like cells that `volley compare` prints under its answer.

use serde_json::Value;
use volley_analysis::knee::{self, Claim};
use volley_store::{CapacityRow, SearchEnd};

/// One searched capacity: estimate and interval, in requests per second or, for a
/// caldav workload's users search, in users.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchedCapacity {
    /// Point estimate.
    pub rps: f64,
    /// Lower end of the interval.
    pub lo_rps: f64,
    /// Upper end (`None`: unbounded above).
    pub hi_rps: Option<f64>,
    /// Confidence level, e.g. 0.95.
    pub confidence: f64,
    /// `"req/s"`, or `"users"` for a users search (its stored cell's `unit`).
    pub unit: &'static str,
    /// What may be claimed ([`stored_claim`]): a capacity only when the server was seen
    /// to fail above it, else "at least".
    pub claim: Claim,
    /// A users search's office time over wall time ([`compress_of`]), said beside its
    /// count; `None` for rates (and users searches stored before it was kept).
    pub compress: Option<f64>,
    /// Whole searches behind the figure: 1, or a cell's passes taken together
    /// (`knee::pool`: the lower median search inside the envelope of their intervals).
    pub searches: usize,
}

/// What a stored search result may claim (docs/methodology.md, "Saturation"): from its
/// `detail` (`knee::Capacity`) when it ended, else from the decisions it had made
/// (`detail.history`). A record whose detail cannot be read is bounded only when it
/// converged (a converged search has a failing rate above its answer), else "at least".
pub fn stored_claim(r: &volley_store::CapacityRecord) -> Claim {
    if let Ok(c) = serde_json::from_value::<knee::Capacity>(r.detail.clone()) {
        return c.claim();
    }
    let history: Option<Vec<(f64, bool)>> = r
        .detail
        .get("history")
        .and_then(|h| serde_json::from_value(h.clone()).ok());
    match (history, r.capacity_rps) {
        (Some(h), _) => knee::sweep_capacity(&h).claim(),
        (None, None) => Claim::None,
        (None, Some(value)) if r.end == SearchEnd::Converged => Claim::Capacity {
            value,
            failed_at: r.ci_hi_rps.unwrap_or(value),
        },
        (None, Some(value)) => Claim::AtLeast {
            value,
            unjudged_above: 0,
        },
    }
}

impl SearchedCapacity {
    /// The capacity of a stored search that reached its own end with an estimate and an
    /// interval; `None` for interrupted ones (their figures are partial).
    pub fn of(row: &CapacityRow) -> Option<SearchedCapacity> {
        let r = &row.record;
        if r.end == SearchEnd::Interrupted {
            return None;
        }
        Some(SearchedCapacity {
            rps: r.capacity_rps?,
            lo_rps: r.ci_lo_rps?,
            hi_rps: r.ci_hi_rps,
            confidence: r.confidence,
            unit: unit_of(row),
            claim: stored_claim(r),
            compress: compress_of(row),
            searches: 1,
        })
    }

    /// One cell's searches taken together, as the report takes them (`knee::pool`):
    /// the lower median search's figure and claim, the envelope of their intervals.
    /// `None` for none.
    pub fn pooled(all: &[SearchedCapacity]) -> Option<SearchedCapacity> {
        let spans: Vec<(f64, f64, Option<f64>)> =
            all.iter().map(|c| (c.rps, c.lo_rps, c.hi_rps)).collect();
        let p = knee::pool(&spans)?;
        Some(SearchedCapacity {
            rps: p.value,
            lo_rps: p.lo,
            hi_rps: p.hi.is_finite().then_some(p.hi),
            searches: all.len(),
            ..all[p.rep]
        })
    }

    /// "2990 req/s (95% CI 2850 .. 3100)", "140 users (95% CI 130 .. 150)", "at least
    /// 1400 req/s (the highest step tried) (95% CI 1400 .. unbounded)".
    pub fn text(&self) -> String {
        let head = match self.claim {
            Claim::AtLeast { unjudged_above, .. } => Claim::AtLeast {
                value: self.rps,
                unjudged_above,
            }
            .text(self.unit),
            _ => format!("{:.0} {}", self.rps, self.unit),
        };
        let head = if self.searches > 1 {
            format!("{head}, the lower median of {} searches", self.searches)
        } else {
            head
        };
        let head = match self.compress {
            Some(f) => format!("{head}, {}", volley_analysis::words::pace(f)),
            None => head,
        };
        format!(
            "{head} ({:.0}% CI {:.0} .. {})",
            self.confidence * 100.0,
            self.lo_rps,
            self.hi_rps
                .map_or("unbounded".to_string(), |h| format!("{h:.0}"))
        )
    }
}

/// The capacities of the same cell in two runs.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityPair {
    /// The cell, in words (workload, concurrency, cap, cores, keep-alive).
    pub cell: String,
    /// Run A's.
    pub a: SearchedCapacity,
    /// Run B's.
    pub b: SearchedCapacity,
    /// A / B of the point estimates.
    pub ratio: f64,
    /// The smallest and largest A / B the two intervals allow (lo_A / hi_B,
    /// hi_A / lo_B); `None` where an interval end is unbounded or zero (printed as 0
    /// below, unbounded above). This is the
    /// range both intervals admit, wider than an interval of the ratio itself would be;
    /// it is what the stored figures support without the repeats' raw outcomes.
    pub ratio_range: (Option<f64>, Option<f64>),
}

impl CapacityPair {
    /// What the two intervals do and do not cover. One search's interval is its own
    /// (its runs near its edge), not one over searches (docs/methodology.md,
    /// "Capacity"): said, so the range is not read as the answer's.
    pub fn spread_text(&self) -> &'static str {
        match (self.a.searches, self.b.searches) {
            (1, 1) => "one search each: neither interval covers the spread from one search to the next",
            (1, _) | (_, 1) => "one side is a single search, whose interval does not cover the spread from one search to the next",
            _ => "each side the envelope of its searches' intervals",
        }
    }

    /// `ratio_range` as printed: no upper end of B's interval means A/B may be as small
    /// as 0; a zero lower end of B's, that A/B may be as large as any number.
    pub fn ratio_range_text(&self) -> (String, String) {
        (
            self.ratio_range
                .0
                .map_or("0".to_string(), |r| format!("{r:.3}")),
            self.ratio_range
                .1
                .map_or("unbounded".to_string(), |r| format!("{r:.3}")),
        )
    }
}

/// The unit of a stored search: `"users"` for a users search, else `"req/s"` (rows
/// written before the cell had a `unit` are rate searches).
pub fn unit_of(row: &CapacityRow) -> &'static str {
    match row.record.cell.get("unit").and_then(Value::as_str) {
        Some("users") => "users",
        _ => "req/s",
    }
}

/// A users search's compression factor as stored with its cell (`compress`): 1 is
/// people at their real pace; `None` for rate searches and rows stored before it was.
pub fn compress_of(row: &CapacityRow) -> Option<f64> {
    (unit_of(row) == "users")
        .then(|| row.record.cell.get("compress").and_then(Value::as_f64))
        .flatten()
}

/// What identifies a searched cell across runs: its stored identity without the target
/// and instance names (which differ between the two runs being compared). What a
/// search searched, as two runs' searches are met by: like with like, the same
/// workload, load point, variant and protocol (a run's tuned search never meets the
/// other's default one); users at another pace are another unit, never met.
pub fn cell_key(row: &CapacityRow) -> String {
    let c = &row.record.cell;
    let f = |k: &str| match c.get(k) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(format!("{k} {s}")),
        Some(v) => Some(format!("{k} {v}")),
    };
    let series = ["variant", "protocol"].iter().filter_map(|k| f(k));
    if unit_of(row) == "users" {
        // A users search's connections are its clients': its workload names it.
        let workload = c.get("workload").and_then(Value::as_str).unwrap_or("-");
        let pace = match compress_of(row) {
            Some(f) if f != 1.0 => format!(", {}", volley_analysis::words::pace(f)),
            _ => String::new(),
        };
        return std::iter::once(format!("workload {workload}, users{pace}"))
            .chain(series)
            .collect::<Vec<_>>()
            .join(", ");
    }
    [
        "workload",
        "concurrency",
        "cpu_quota_cores",
        "cores",
        "keepalive",
    ]
    .iter()
    .filter_map(|k| f(k))
    .chain(series)
    .collect::<Vec<_>>()
    .join(", ")
}

/// Pairs the finished searches of two runs by cell, each cell's several searches
/// (`[search] passes`) taken together first ([`SearchedCapacity::pooled`]), never one
/// pass against another; when each run has exactly one searched cell, they are paired
/// whatever their cells (comparing two targets' searches is the common case).
pub fn capacity_pairs(a: &[CapacityRow], b: &[CapacityRow]) -> Vec<CapacityPair> {
    let usable = |rows: &[CapacityRow]| -> Vec<(String, SearchedCapacity)> {
        let mut cells: Vec<(String, Vec<SearchedCapacity>)> = Vec::new();
        for r in rows {
            let Some(c) = SearchedCapacity::of(r) else {
                continue;
            };
            let key = cell_key(r);
            match cells.iter_mut().find(|(k, _)| *k == key) {
                Some((_, all)) => all.push(c),
                None => cells.push((key, vec![c])),
            }
        }
        cells
            .into_iter()
            .filter_map(|(k, all)| Some((k, SearchedCapacity::pooled(&all)?)))
            .collect()
    };
    let (a, b) = (usable(a), usable(b));
    let pair = |cell: String, x: SearchedCapacity, y: SearchedCapacity| {
        let div = |n: f64, d: Option<f64>| d.filter(|d| *d > 0.0).map(|d| n / d);
        CapacityPair {
            cell,
            ratio: if y.rps > 0.0 { x.rps / y.rps } else { f64::NAN },
            ratio_range: (
                div(x.lo_rps, y.hi_rps),
                x.hi_rps.and_then(|h| div(h, Some(y.lo_rps))),
            ),
            a: x,
            b: y,
        }
    };
    // One each of the same unit pair whatever their cells (users at one pace only:
    // a compressed day's users are not people).
    let pace = |c: &SearchedCapacity| c.compress.unwrap_or(1.0);
    if a.len() == 1 && b.len() == 1 && a[0].1.unit == b[0].1.unit && pace(&a[0].1) == pace(&b[0].1)
    {
        let ((ka, x), (kb, y)) = (a[0].clone(), b[0].clone());
        let cell = if ka == kb {
            ka
        } else {
            format!("{ka} vs {kb}")
        };
        return vec![pair(cell, x, y)];
    }
    a.into_iter()
        .filter_map(|(k, x)| {
            let (_, y) = b.iter().find(|(kb, _)| *kb == k)?;
            Some(pair(k, x, *y))
        })
        .collect()
}
