//! `volley compare A B`: medians of two runs' steps with bootstrap CIs, and the A/B ratio
//! with its CI, from the results store alone.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use volley_report::compare::{compare, Comparison, Metric};
use volley_store::Store;

use crate::exit::usage;

/// Flags of `volley compare`.
#[derive(clap::Args)]
pub struct Args {
    /// Run A: a run id or study:target.
    a: String,
    /// Run B: a run id or study:target.
    b: String,
    /// Results store (SQLite).
    #[arg(long, default_value = "volley.db")]
    db: PathBuf,
    /// rps or p99.
    #[arg(long, default_value = "rps")]
    metric: String,
}

/// Runs `volley compare`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Some(metric) = Metric::parse(&args.metric) else {
        usage!("--metric must be rps or p99, got '{}'", args.metric);
    };
    if !args.db.exists() {
        usage!(
            "no results store at {} (run a study or pass --db)",
            args.db.display()
        );
    }
    let store =
        Store::open(&args.db).with_context(|| format!("cannot open {}", args.db.display()))?;
    // Runs whose writer was killed (kill -9, power loss) are still 'running': mark them.
    store.mark_incomplete_on_open()?;
    match compare(&store, &args.a, &args.b, metric) {
        Ok(c) => print!("{}", text(&c)),
        Err(volley_report::ReportError::Compare(m)) => usage!("{m}"),
        Err(e) => return Err(e.into()),
    }
    Ok(ExitCode::SUCCESS)
}

/// The two runs as a table (one row each: steps, median and its interval), the ratio of
/// their medians, then the searched capacities of the cells both runs have.
fn text(c: &Comparison) -> String {
    use super::table;
    let d = if c.metric == Metric::Rps { 0 } else { 3 };
    let label = c.metric.label();
    let mut t = table::new([
        "".to_string(),
        "run".to_string(),
        "target".to_string(),
        "steps".to_string(),
        format!("median {label}"),
        "95% CI".to_string(),
    ]);
    table::align_right(&mut t, &[1, 3, 4]);
    table::keep_whole(&mut t, 2);
    for (name, s) in [("A", &c.a), ("B", &c.b)] {
        t.add_row([
            name.to_string(),
            s.run.to_string(),
            s.target.clone(),
            s.values.len().to_string(),
            format!("{:.d$}", s.median.median),
            format!("{:.d$} .. {:.d$}", s.median.lo, s.median.hi),
        ]);
    }
    let mut out = table::render(&t);
    out.push_str(&format!(
        "A/B ratio of medians: {:.3} (95% CI {:.3} .. {:.3})\n",
        c.ratio.median, c.ratio.lo, c.ratio.hi
    ));
    if c.capacities.is_empty() {
        return out;
    }
    let mut t = table::new([
        "capacity by search",
        "A",
        "B",
        "A/B",
        "A/B both intervals allow",
    ]);
    table::align_right(&mut t, &[3]);
    for p in &c.capacities {
        // No upper end of B's interval: A/B may be as small as 0; a zero lower end of
        // B's: A/B may be as large as any number.
        let lo = p
            .ratio_range
            .0
            .map_or("0".to_string(), |r| format!("{r:.3}"));
        let hi = p
            .ratio_range
            .1
            .map_or("unbounded".to_string(), |r| format!("{r:.3}"));
        t.add_row([
            if p.cell.is_empty() {
                "default".to_string()
            } else {
                p.cell.clone()
            },
            p.a.text(),
            p.b.text(),
            format!("{:.3}", p.ratio),
            format!("{lo} .. {hi}"),
        ]);
    }
    out.push('\n');
    out.push_str(&table::render(&t));
    out
}
