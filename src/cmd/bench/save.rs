//! `volley bench --save [--db FILE] [--label TEXT]`: keeps a bench run in the results
//! store as a run of kind `bench` (no study), one step per measured run (`--repeat`
//! rounds), each written the moment it ends: its summary, per-second series and
//! histograms (`volley_harness::stored`, the shape study steps have), the load's
//! settings, and with `--target` the server's resources, record and throttling. So
//! `volley history`, `volley compare A B` and `volley report ID` read it as they read a
//! study's runs. Each second is stored the moment it closes ([`write_live`]): a long
//! run holds none of them (its memory stays flat), and a run killed mid-step keeps
//! every second it had closed, in a run marked incomplete on the store's next open.

use std::path::PathBuf;

use anyhow::Context;
use serde_json::{json, Value};
use volley_engine::LoadModel;
use volley_metrics::Summary;
use volley_monitor::MonitorReport;
use volley_store::{
    HistogramBlob, NewRun, RunId, RunKind, Status, StepParameters, StepRecord, Store,
};

use super::load::LoadSpec;
use crate::cmd::hint::{db_flag, quote, DEFAULT_DB};

/// The flags, flattened into `volley bench`'s.
#[derive(clap::Args, Debug, Clone)]
pub struct SaveArgs {
    /// Keep the run in the results store (see `volley history`, `compare`, `report`).
    #[arg(long)]
    pub save: bool,
    /// The results store for --save.
    #[arg(long, default_value = DEFAULT_DB, requires = "save")]
    pub db: PathBuf,
    /// A name for the saved run, shown by `volley history` (default: the URL, or the
    /// target's kind).
    #[arg(long, value_name = "TEXT", requires = "save")]
    pub label: Option<String>,
}

impl Default for SaveArgs {
    fn default() -> Self {
        SaveArgs {
            save: false,
            db: PathBuf::from(DEFAULT_DB),
            label: None,
        }
    }
}

/// One measured run's parts beyond its summary, as `--target` has them.
#[derive(Default)]
pub struct Extras<'a> {
    /// The monitor's report on the target.
    pub monitor: Option<&'a MonitorReport>,
    /// The cgroup's throttling counters over the run (`nr_periods`, ...), as JSON.
    pub throttling: Option<Value>,
    /// A replay's log, plan and fidelity (`bench --replay`).
    pub replay: Option<Value>,
}

/// A bench run being saved.
pub struct Saver {
    store: Store,
    db: PathBuf,
    run: RunId,
    next: u32,
}

impl Saver {
    /// Opens the store and begins the run, named `label` (or `default_name`), when
    /// `--save` was given; `None` otherwise. `environment` is the machine (and the
    /// target's record with `--target`).
    pub fn begin(
        args: &SaveArgs,
        default_name: &str,
        spec: &LoadSpec,
        environment: Value,
    ) -> anyhow::Result<Option<Saver>> {
        Saver::begin_with(args, default_name, parameters(spec), environment)
    }

    /// [`Saver::begin`] for a load that is not a [`LoadSpec`] (an office day): its
    /// settings as the run stores them.
    pub fn begin_with(
        args: &SaveArgs,
        default_name: &str,
        parameters: Value,
        environment: Value,
    ) -> anyhow::Result<Option<Saver>> {
        if !args.save {
            return Ok(None);
        }
        let store = Store::open(&args.db)
            .with_context(|| format!("cannot open results store {}", args.db.display()))?;
        store.mark_incomplete_on_open()?;
        let run = store.begin_run(&NewRun {
            study: None,
            kind: RunKind::Bench,
            target: args
                .label
                .clone()
                .unwrap_or_else(|| default_name.to_string()),
            parameters,
            environment,
        })?;
        Ok(Some(Saver {
            store,
            db: args.db.clone(),
            run,
            next: 0,
        }))
    }

    /// Writes one measured run as the next step (in one transaction).
    pub fn step(
        &mut self,
        spec: &LoadSpec,
        summary: &Summary,
        histograms: Vec<HistogramBlob>,
        extras: Extras<'_>,
    ) -> anyhow::Result<()> {
        let mut summary_json = serde_json::to_value(summary)?;
        if let Some(m) = extras.monitor {
            summary_json["monitor"] = serde_json::to_value(&m.summary)?;
        }
        if let Some(t) = extras.throttling {
            summary_json["throttling"] = t;
        }
        if let Some(r) = extras.replay {
            summary_json["replay"] = r;
        }
        let parameters = StepParameters {
            rate_rps: rate(spec),
            concurrency: Some(spec.cfg.connections as u32),
            keepalive: Some(spec.cfg.keep_alive),
            repeat: self.next,
            ..StepParameters::default()
        };
        let series = volley_harness::stored::series(summary, extras.monitor);
        self.step_with(parameters, summary, summary_json, series, histograms)
    }

    /// Writes one measured run as the next step: its parameters, its summary as
    /// stored (`summary_json`: the summary with any keys of its own, e.g. an office
    /// day's report) and series.
    pub fn step_with(
        &mut self,
        parameters: StepParameters,
        summary: &Summary,
        summary_json: Value,
        series: Vec<volley_store::SeriesPoint>,
        histograms: Vec<HistogramBlob>,
    ) -> anyhow::Result<()> {
        let now = now_ms();
        let record = StepRecord {
            index: self.next,
            parameters,
            summary: summary_json,
            verdict: None,
            label: Some(summary.generator.verdict.label.label().to_string()),
            started_unix_ms: now - (summary.duration_s * 1e3) as i64,
            finished_unix_ms: now,
            series,
            histograms,
        };
        self.store
            .record_step(self.run, &record)
            .context("cannot save the run")?;
        self.next += 1;
        Ok(())
    }

    /// Where the next step's seconds go as they close (see [`write_live`]).
    pub fn live(&self) -> LiveTarget {
        LiveTarget {
            db: self.db.clone(),
            run: self.run,
            step_index: self.next,
        }
    }

    /// Removes the run, which measured nothing (its first answers refused the path):
    /// no step, no seconds, nothing for `volley history` to list.
    pub fn discard(mut self) -> anyhow::Result<()> {
        self.store
            .discard_run(self.run)
            .context("cannot remove the run that measured nothing")
    }

    /// Marks the run complete (or incomplete when interrupted or failed) and returns
    /// the line that says where it is.
    pub fn finish(self, complete: bool) -> anyhow::Result<String> {
        let status = if complete {
            Status::Complete
        } else {
            Status::Incomplete
        };
        self.store.finish_run(self.run, status)?;
        Ok(format!(
            "saved as run {} in {} (volley report {}{} --html report.html)",
            self.run,
            quote(&self.db),
            self.run,
            db_flag(&self.db)
        ))
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn rate(spec: &LoadSpec) -> Option<f64> {
    match spec.cfg.model {
        LoadModel::Open { rate, .. } | LoadModel::Scheduled { rate } => Some(rate),
        LoadModel::Closed => None,
    }
}

/// The load's settings as the run stores them.
fn parameters(spec: &LoadSpec) -> Value {
    let c = &spec.cfg;
    json!({
        "url": spec.url,
        "method": spec.method,
        "model": if rate(spec).is_some() { "open" } else { "closed" },
        "rate": rate(spec),
        "connections": c.connections,
        "max_connections": c.max_connections,
        "threads": c.threads,
        "keepalive": c.keep_alive,
        "requests": c.stop.requests,
        "duration_s": c.stop.duration.map(|d| d.as_secs_f64()),
        "warmup_s": spec.cfg.stop.warmup.as_secs_f64(),
        "timeout_s": c.timeout.as_secs_f64(),
    })
}

/// `--save` with `--target`: one saved run per target kind, begun at its first round.
pub struct Savers {
    args: SaveArgs,
    /// Several kinds: each run's name gets its kind after the label.
    several: bool,
    runs: Vec<(volley_targets::TargetKind, Saver)>,
}

impl Savers {
    /// Nothing is opened until the first round ends.
    pub fn new(args: SaveArgs, several: bool) -> Savers {
        Savers {
            args,
            several,
            runs: Vec::new(),
        }
    }

    /// True when runs are to be saved (so their histograms are worth serialising).
    pub fn wanted(&self) -> bool {
        self.args.save
    }

    /// Saves one round of `kind`: its run is begun on the first (environment: the
    /// target's record).
    pub fn step(
        &mut self,
        kind: volley_targets::TargetKind,
        spec: &LoadSpec,
        record: &volley_targets::TargetRecord,
        summary: &Summary,
        histograms: Vec<HistogramBlob>,
        extras: Extras<'_>,
    ) -> anyhow::Result<()> {
        if !self.args.save {
            return Ok(());
        }
        if !self.runs.iter().any(|(k, _)| *k == kind) {
            let mut args = self.args.clone();
            args.label = match (&self.args.label, self.several) {
                (Some(l), true) => Some(format!("{l}/{kind}")),
                (l, _) => l.clone(),
            };
            let env = serde_json::to_value(record)?;
            if let Some(s) = Saver::begin(&args, kind.name(), spec, env)? {
                self.runs.push((kind, s));
            }
        }
        match self.runs.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, s)) => s.step(spec, summary, histograms, extras),
            None => Ok(()),
        }
    }

    /// Finishes every saved run; one line each.
    pub fn finish(self, complete: bool) -> anyhow::Result<Vec<String>> {
        self.runs
            .into_iter()
            .map(|(kind, s)| Ok(format!("{kind}: {}", s.finish(complete)?)))
            .collect()
    }
}

/// The live writer's page cache: it appends a second's rows at a time and reads none
/// back, so a few pages suffice (see `Store::cap_cache`).
const LIVE_CACHE_KIB: u32 = 256;

/// Where a saved run's seconds go as they close: the store, the run, the step's index.
#[derive(Debug, Clone)]
pub struct LiveTarget {
    db: PathBuf,
    run: RunId,
    step_index: u32,
}

/// Joins the workers' streamed seconds and stores each whole second at once, on a
/// connection of its own (the store takes several writers); returns every second's
/// digest for the summary, and the first store error, if any (the seconds after it are
/// still digested, so the run is summarised whatever happened to the file).
pub fn write_live(
    rx: std::sync::mpsc::Receiver<volley_metrics::StreamedSecond>,
    workers: usize,
    to: &LiveTarget,
) -> (Vec<volley_metrics::SecondDigest>, Option<anyhow::Error>) {
    let mut joiner = volley_metrics::SecondJoiner::new(workers).keeping_digests();
    let mut store = Store::open(&to.db)
        .and_then(|s| s.cap_cache(LIVE_CACHE_KIB).map(|()| s))
        .with_context(|| format!("cannot open results store {}", to.db.display()));
    let mut failed: Option<anyhow::Error> = None;
    let mut keep = |closed: Vec<volley_metrics::ClosedSecond>,
                    failed: &mut Option<anyhow::Error>| {
        let Ok(store) = store.as_mut() else {
            return;
        };
        if failed.is_some() {
            return;
        }
        for c in &closed {
            let second = volley_harness::stored::second(to.step_index, c);
            if let Err(e) = store.record_live_second(to.run, &second) {
                *failed = Some(anyhow::Error::new(e).context("cannot save the run's seconds"));
                return;
            }
        }
    };
    for s in rx {
        match joiner.push(s) {
            Ok(done) => keep(done, &mut failed),
            Err(e) => {
                failed.get_or_insert(anyhow::Error::new(e).context("cannot join the seconds"));
            }
        }
    }
    match joiner.finish() {
        Ok(done) => keep(done, &mut failed),
        Err(e) => {
            failed.get_or_insert(anyhow::Error::new(e).context("cannot join the seconds"));
        }
    }
    if let Err(e) = store {
        failed.get_or_insert(e);
    }
    (joiner.take_digests(), failed)
}
