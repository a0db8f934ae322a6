//! `volley compare A B`: medians of two runs' steps with bootstrap CIs, and the A/B ratio
//! with its CI, from the results store alone: like with like (the points both runs
//! measured), the steps the report leaves out left out, no interval from one run.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use volley_report::compare::{compare, Comparison, Metric};
use volley_store::Store;

use crate::exit::usage;

/// Flags of `volley compare`.
#[derive(clap::Args)]
pub struct Args {
    /// Run A: a run id, study:ID[:TARGET], study:NAME[:TARGET], NAME:TARGET or
    /// label:TEXT (the selectors of `volley report`).
    a: String,
    /// Run B, selected as A.
    b: String,
    /// Results store (SQLite).
    #[arg(long, default_value = "volley.db")]
    db: PathBuf,
    /// The figure compared: requests per second, or the p99 of the headline latency.
    #[arg(long, default_value = "rps", value_parser = metric())]
    metric: Metric,
}

/// `--metric`: the names [`Metric::parse`] takes, listed in `--help`, a bad one refused
/// by clap in one line.
fn metric() -> impl clap::builder::TypedValueParser<Value = Metric> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(["rps", "p99"])
        .map(|s| Metric::parse(&s).expect("a listed metric"))
}

/// Runs `volley compare`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let metric = args.metric;
    if !args.db.exists() {
        usage!(
            "no results store at {} (run a study or pass --db)",
            args.db.display()
        );
    }
    let store =
        Store::open_read(&args.db).with_context(|| format!("cannot open {}", args.db.display()))?;
    match compare(&store, &args.a, &args.b, metric) {
        Ok(c) => print!("{}", text(&c, super::table::width())),
        Err(volley_report::ReportError::Compare(m)) => usage!("{m}"),
        Err(e) if e.is_usage() => usage!("{e}"),
        Err(e) => return Err(e.into()),
    }
    Ok(ExitCode::SUCCESS)
}

/// The two runs as a table (one row each: steps, median and its interval), the ratio of
/// their medians, then the searched capacities of the cells both runs have.
fn text(c: &Comparison, width: Option<u16>) -> String {
    use super::table;
    let d = if c.metric == Metric::Rps { 0 } else { 3 };
    let label = c.metric.label();
    let mut t = table::new_at(
        [
            "".to_string(),
            "run".to_string(),
            "target".to_string(),
            "steps".to_string(),
            format!("median {label}"),
            "95% CI".to_string(),
        ],
        width,
    );
    table::align_right(&mut t, &[1, 3, 4]);
    table::keep_whole(&mut t, 2);
    for (name, s) in [("A", &c.a), ("B", &c.b)] {
        t.add_row([
            name.to_string(),
            s.run.to_string(),
            s.target.clone(),
            s.values.len().to_string(),
            format!("{:.d$}", s.median.median),
            if s.has_interval() {
                format!("{:.d$} .. {:.d$}", s.median.lo, s.median.hi)
            } else {
                "one run: none".to_string()
            },
        ]);
    }
    let mut out = table::render(&t);
    out.push_str(&format!("{}\n{}\n", c.ratio_line(), c.answer));
    if let Some(l) = c.left_out_line() {
        out.push_str(&l);
        out.push('\n');
    }
    if c.capacities.is_empty() {
        return out;
    }
    let mut t = table::new_at(
        [
            "capacity by search",
            "A",
            "B",
            "A/B",
            "A/B both intervals allow",
        ],
        width,
    );
    table::align_right(&mut t, &[3]);
    for p in &c.capacities {
        let (lo, hi) = p.ratio_range_text();
        t.add_row([
            if p.cell.is_empty() {
                "default".to_string()
            } else {
                p.cell.clone()
            },
            p.a.text(),
            p.b.text(),
            format!(
                "{:.3}{}",
                p.ratio,
                if p.a.claim.bounded() && p.b.claim.bounded() {
                    ""
                } else {
                    " (of an \"at least\")"
                }
            ),
            format!("{lo} .. {hi}"),
        ]);
    }
    out.push('\n');
    out.push_str(&table::render(&t));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use volley_analysis::bootstrap::Estimate;
    use volley_report::compare::{CapacityPair, SearchedCapacity, Side};
    use volley_store::RunId;

    #[test]
    fn the_comparison_reads_as_a_table() {
        let est = |m: f64| Estimate {
            median: m,
            lo: m * 0.95,
            hi: m * 1.05,
        };
        let side = |id, target: &str, m| Side {
            run: RunId(id),
            target: target.into(),
            values: vec![m; 3],
            median: est(m),
            left_out: volley_report::answer::LeftOut {
                generator: 14,
                ..Default::default()
            },
            unmatched: 0,
            repeated: true,
        };
        let cap = |rps, hi| SearchedCapacity {
            rps,
            lo_rps: rps * 0.95,
            hi_rps: hi,
            confidence: 0.95,
            unit: "req/s",
            claim: volley_analysis::knee::Claim::Capacity {
                value: rps,
                failed_at: rps * 1.05,
            },
            compress: None,
            searches: 1,
        };
        let c = Comparison {
            metric: Metric::Rps,
            a: side(1, "a-target-with-a-forty-character-name-xyz", 3000.0),
            b: side(2, "b", 1500.0),
            points: vec!["w, c=16".into()],
            ratio: Some(est(2.0)),
            single_ratio: Some(2.0),
            answer: "a-target served the most requests per second: 3,000 req/s vs b 1,500: 2.00x [1.90, 2.10] (95% interval).".into(),
            capacities: vec![CapacityPair {
                cell: "workload root, concurrency 16".into(),
                a: cap(3000.0, Some(3100.0)),
                b: cap(1500.0, None),
                ratio: 2.0,
                ratio_range: (None, Some(2.138)),
            }],
        };
        insta::assert_snapshot!(text(&c, None));
    }
}
