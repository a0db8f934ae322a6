//! `volley history`: the studies and runs kept in the results store.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use volley_report::compare::SearchedCapacity;
use volley_store::{RunRow, SearchEnd, Store, StudyRow};

/// Flags of `volley history`.
#[derive(clap::Args)]
pub struct Args {
    /// Results store (SQLite).
    #[arg(long, default_value = "volley.db")]
    db: PathBuf,
}

/// A stored millisecond timestamp as a UTC date and time, `YYYY-MM-DD HH:MM:SS`.
fn when(ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// Runs `volley history`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !args.db.exists() {
        crate::exit::usage!(
            "no results store at {} (run a study or pass --db)",
            args.db.display()
        );
    }
    let store =
        Store::open_read(&args.db).with_context(|| format!("cannot open {}", args.db.display()))?;
    let studies = store.list_studies()?;
    let runs = store.list_runs()?;
    let mut t = super::table::new([
        "run",
        "started (UTC)",
        "study/target",
        "steps",
        "status",
        "capacity by search",
    ]);
    super::table::align_right(&mut t, &[0, 3]);
    super::table::keep_whole(&mut t, 2);
    for r in &runs {
        let study = r
            .study
            .and_then(|id| studies.iter().find(|s| s.id == id))
            .map_or_else(
                || r.kind.as_str().to_string(),
                |s| format!("{} (#{})", s.name, s.id),
            );
        let steps = store.steps(r.id)?.len();
        let rows = store.capacities(r.id)?;
        let capacities: Vec<String> = rows
            .iter()
            .map(|c| match SearchedCapacity::of(c) {
                Some(s) => s.text(),
                None => match (c.record.end, c.record.capacity_rps) {
                    (SearchEnd::Interrupted, Some(r)) => format!(
                        "{r:.0} {}{} so far (interrupted, no interval)",
                        volley_report::compare::unit_of(c),
                        volley_report::compare::compress_of(c).map_or(String::new(), |f| {
                            format!(", {}", volley_analysis::words::pace(f))
                        })
                    ),
                    (SearchEnd::Interrupted, None) => "interrupted".to_string(),
                    (end, _) => format!(
                        "none shown sustainable ({})",
                        end.as_str().replace('_', " ")
                    ),
                },
            })
            // Several searches in one run (workloads, variants, protocols): each says
            // what it searched, as `volley compare` meets them.
            .zip(&rows)
            .map(|(text, c)| match rows.len() {
                1 => text,
                _ => format!("{}: {text}", volley_report::compare::cell_key(c)),
            })
            .collect();
        t.add_row([
            r.id.to_string(),
            when(r.started_unix_ms),
            // Names come from users and URLs: no escape sequence reaches the terminal,
            // and a megabyte label does not make a megabyte row.
            volley_report::sanitise::terminal(&format!("{study}/{}", r.target), 120).into_owned(),
            steps.to_string(),
            r.status.as_str().to_string(),
            if capacities.is_empty() {
                "-".to_string()
            } else {
                capacities.join("; ")
            },
        ]);
    }
    print!("{}", super::table::render(&t));
    if runs.is_empty() {
        println!("(no runs yet)");
    }
    print_answers(&store, &studies, &runs);
    Ok(ExitCode::SUCCESS)
}

/// Each study's answer, the sentence its end table, its report and `volley compare`
/// give, read back from the store as `volley report` reads it; then each saved bench
/// run's (no study), as `volley report ID` gives it.
fn print_answers(store: &Store, studies: &[StudyRow], runs: &[RunRow]) {
    use volley_report::Selector;
    let of_studies = studies.iter().map(|s| {
        (
            format!("study {} (#{})", s.name, s.id),
            Selector::Study(s.id),
        )
    });
    let of_runs = runs
        .iter()
        .filter(|r| r.study.is_none())
        .map(|r| (format!("run {} ({})", r.id, r.target), Selector::Run(r.id)));
    for (name, selector) in of_studies.chain(of_runs) {
        let Ok(r) = volley_report::load(store, selector) else {
            continue;
        };
        if r.targets.iter().all(|t| t.steps.is_empty()) {
            continue;
        }
        println!(
            "{}: {}",
            volley_report::sanitise::terminal(&name, 120),
            volley_report::sanitise::terminal(&volley_report::headline::answer(&r), 2000)
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn civil_dates() {
        assert_eq!(super::when(0), "1970-01-01 00:00:00");
        assert_eq!(
            super::when(951_782_400_000 + 3_661_000),
            "2000-02-29 01:01:01"
        );
    }
}
