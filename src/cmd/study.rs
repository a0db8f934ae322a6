//! `volley study run FILE`: prints the plan, runs every step against the study's
//! targets, writes each step to the results store as it ends, and prints the capacity /
//! summary table. The work is in `volley-study`; this file is flags and exit codes.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use volley_store::Store;
use volley_study::{outcome, runner::RunOptions, StudyError};

use super::progress::StudyBars;
use crate::exit::{exit_interrupted, usage, Interrupted};
use volley_study::StepTick;

/// The subcommands of `volley study`.
#[derive(clap::Subcommand)]
pub enum Args {
    /// Run a study file: plan first, then every step, each kept in the store.
    Run(RunArgs),
}

/// Flags of `volley study run`.
#[derive(clap::Args)]
pub struct RunArgs {
    /// The study file (TOML; see studies/*.toml).
    file: PathBuf,
    /// Results store (SQLite).
    #[arg(long, default_value = "volley.db")]
    db: PathBuf,
    /// Print the plan and stop.
    #[arg(long)]
    dry_run: bool,
    /// Multiply durations and request counts (0.1 for a quick look).
    #[arg(long, default_value = "1", allow_hyphen_values = true, value_parser = scale)]
    scale: f64,
    /// Sweep every point or search for each capacity, whatever the file's `mode`
    /// says (one study file answers both: e.g. a rate sweep, then its capacities).
    #[arg(long, value_enum, value_name = "MODE")]
    mode: Option<ModeArg>,
    /// Re-measures of a step noise spoiled (generator-bound, machine-stalled, or run
    /// while the machine was busy), run later in the study; overrides `[steps] retries`.
    #[arg(long, value_name = "N")]
    retries: Option<u32>,
    /// No progress bars (they are drawn only on a terminal anyway).
    #[arg(short = 'q', long)]
    quiet: bool,
    /// An OpenSSH option (`-o`) for the hosts of `placement = "ssh"`, after the file's
    /// `ssh_options`; repeatable, e.g. `--ssh-option IdentityFile=~/.ssh/lab`.
    #[arg(long = "ssh-option", value_name = "OPT")]
    ssh_option: Vec<String>,
}

/// `--mode`: the study file's `mode`, chosen on the command line.
#[derive(Clone, Copy, clap::ValueEnum)]
enum ModeArg {
    /// Run every point of the sweep axes.
    Sweep,
    /// Double the rate until a step fails, then bisect.
    Search,
}

/// Runs `volley study`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args {
        Args::Run(a) => run_study(a),
    }
}

/// Parses and resolves a study file; every problem is a usage error naming the file.
pub(crate) fn load(text: &str, name: &str, scale: f64) -> anyhow::Result<volley_study::Plan> {
    load_as(text, name, scale, None)
}

/// [`load`] with the file's `mode` replaced by `mode` when given.
fn load_as(
    text: &str,
    name: &str,
    scale: f64,
    mode: Option<volley_study::spec::Mode>,
) -> anyhow::Result<volley_study::Plan> {
    let parsed = volley_study::parse(text).map(|mut f| {
        if let Some(m) = mode {
            f.mode = m;
        }
        f
    });
    let plan = parsed.and_then(|f| volley_study::resolve(&f, text, scale));
    match plan {
        Ok(p) => Ok(p),
        Err(e) => usage!("{name}: {e}"),
    }
}

/// Runs a resolved plan with Ctrl-C handling and progress bars (not when `quiet`), and
/// prints the summary table. Shared with `volley demo`.
pub(crate) fn execute(
    plan: &volley_study::Plan,
    text: &str,
    db: PathBuf,
    quiet: bool,
) -> anyhow::Result<volley_study::StudyReport> {
    let stop = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicBool::new(false));
    {
        let (stop, finished) = (Arc::clone(&stop), Arc::clone(&finished));
        // ctrlc runs this on its own thread, where taking locks and sleeping is fine.
        let _ = ctrlc::set_handler(move || on_interrupt(&stop, &finished));
    }
    // Finished steps' lines and notes print above the bars.
    let bars = Arc::new(StudyBars::new(super::progress::wanted(quiet)));
    let (b1, b2, b3) = (Arc::clone(&bars), Arc::clone(&bars), Arc::clone(&bars));
    let opts = RunOptions {
        db,
        file_text: text.to_string(),
        volley_exe: None,
        stop_flag: Arc::clone(&stop),
        progress: super::progress::wanted(quiet).then(|| {
            Box::new(move |t: Option<StepTick<'_>>| b1.tick(t)) as volley_study::runner::ProgressFn
        }),
        note: Box::new(move |line| b2.println(&format!("volley: {}", printable(line)))),
        step_line: Box::new(move |line| b3.println(&printable(line))),
    };
    let db_hint = super::hint::db_flag(&opts.db);
    let opts_db = opts.db.clone();
    let report = volley_study::run(plan, opts);
    bars.finish();
    finished.store(true, Ordering::Relaxed);
    let report = report.map_err(|e| match e {
        StudyError::Invalid(m) => anyhow::anyhow!(m),
        StudyError::Refused(m) => anyhow::Error::new(crate::exit::UsageError(m)),
        e => anyhow::Error::new(e),
    })?;
    println!();
    let end = outcome::table(plan, &report.steps, &report.searches);
    let mut t = super::table::new(end.header);
    super::table::keep_whole(&mut t, 0);
    for row in end.rows {
        t.add_row(row);
    }
    print!("{}", super::table::render(&t));
    for line in &end.usl {
        println!("{line}");
    }
    // The answer, in the report's own words: read back from the store as `volley
    // report` reads it, so the terminal and the HTML say the same sentence.
    let stored = Store::open(&opts_db)
        .ok()
        .and_then(|s| volley_report::load(&s, volley_report::Selector::Study(report.study)).ok());
    if let Some(r) = &stored {
        println!("answer: {}", volley_report::headline::answer(r));
        // Each target's variants and protocols side by side, as the report's lines give
        // them (a single target's answer is already these).
        if r.targets.len() > 1 {
            for line in volley_report::headline::series_answers(r) {
                println!("answer, {line}");
            }
        }
        // Which knob mattered: one line per knob, as the report nests them.
        for line in volley_report::headline::knob_answers(r) {
            println!("knob, {line}");
        }
    }
    let runs: Vec<String> = report
        .runs
        .iter()
        .map(|(t, id)| format!("{t}=#{id}"))
        .collect();
    println!(
        "study #{} ({}): {} steps in {:.0} s; stored as run ids {} (one run per target); report: volley report study:{}{db_hint}",
        report.study,
        if report.complete {
            "complete"
        } else {
            "INCOMPLETE"
        },
        report.steps.len(),
        report.elapsed.as_secs_f64(),
        runs.join(" "),
        report.study,
    );
    // A study none of whose steps has a figure (most requests of each failed: a path
    // the targets do not have, a target that refused every request) answered nothing.
    let failed = stored.as_ref().is_some_and(|r| {
        let steps: Vec<_> = r.targets.iter().flat_map(|t| &t.steps).collect();
        !steps.is_empty() && steps.iter().all(|s| s.mostly_failed())
    });
    if failed && report.complete {
        anyhow::bail!(
            "most requests of every step failed: the study measured errors, not a server (see each step's errors above)"
        );
    }
    Ok(report)
}

/// How long the first Ctrl-C lets the runner end its step, record it and stop the
/// targets itself before the handler stops them (a target must never outlive an
/// interrupted study, even one stuck starting a server or in a long warm-up).
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Ctrl-C: the first press asks the runner to stop (the current step is recorded as
/// interrupted and the runs are marked incomplete), then stops every target with
/// `volley_targets::stop_all` if the runner has not finished within [`STOP_GRACE`]. A
/// second press stops the targets at once and exits (130). A study cut short by a dead
/// target exits 1.
fn on_interrupt(stop: &AtomicBool, finished: &AtomicBool) {
    if stop.swap(true, Ordering::Relaxed) {
        volley_targets::stop_all();
        eprintln!("\nvolley: interrupted twice: targets stopped; the store marks the run incomplete on its next open");
        exit_interrupted();
    }
    eprintln!("\nvolley: interrupted: finishing the current step, then stopping the targets (Ctrl-C again to stop now)");
    let until = Instant::now() + STOP_GRACE;
    while Instant::now() < until && !finished.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
    }
    volley_targets::stop_all();
}

/// `--scale` of `study run` and `demo`: a positive, finite factor.
pub(crate) fn scale(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("must be a positive number, got '{s}'")),
    }
}

fn run_study(a: RunArgs) -> anyhow::Result<ExitCode> {
    super::sweep_leftovers();
    let text = match std::fs::read_to_string(&a.file) {
        Ok(t) => t,
        Err(e) => usage!("cannot read study file {}: {e}", a.file.display()),
    };
    let mode = a.mode.map(|m| match m {
        ModeArg::Sweep => volley_study::spec::Mode::Sweep,
        ModeArg::Search => volley_study::spec::Mode::Search,
    });
    let mut plan = load_as(&text, &a.file.display().to_string(), a.scale, mode)?;
    if let Some(n) = a.retries {
        plan.retries = n;
    }
    if !a.ssh_option.is_empty() {
        let Some(ssh) = plan.injectors.as_mut().and_then(|i| i.ssh.as_mut()) else {
            usage!("--ssh-option needs a study with [injectors] placement = \"ssh\"");
        };
        for o in &a.ssh_option {
            if let Err(e) = volley_study::plan::check_ssh_option(o) {
                usage!("--ssh-option: {e}");
            }
        }
        ssh.options.extend(a.ssh_option.iter().cloned());
    }
    print!("{}", plan.describe());
    if a.dry_run {
        return Ok(ExitCode::SUCCESS);
    }
    println!();
    let report = execute(&plan, &text, a.db.clone(), a.quiet)
        .with_context(|| format!("study {}", a.file.display()))?;
    if !report.complete && report.interrupted {
        return Err(Interrupted(format!(
            "the study did not finish; finished steps are in {}",
            a.db.display()
        ))
        .into());
    }
    if !report.complete {
        // Not Ctrl-C's 130: a target died (the kernel's OOM killer under memory_max, a
        // crash) or could not run its steps; the notes above say which.
        anyhow::bail!(
            "the study did not finish: a target died or could not run its steps (see the notes above); finished steps are in {}",
            a.db.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A note or step line for the terminal, line by line: names come from the study file
/// and a dead target's last log lines from the server, so no control character
/// (escape sequences, BEL) passes and no line runs past 2,048 characters.
fn printable(text: &str) -> String {
    text.split('\n')
        .map(|l| volley_report::sanitise::terminal(l, 2048))
        .collect::<Vec<_>>()
        .join("\n")
}
