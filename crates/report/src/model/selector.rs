//! What a report reads: a run or a study, named by the one selector grammar of every
//! command that names stored runs (`42`, `study:7`, `study:NAME`, `study:NAME:TARGET`;
//! [`Selector::find`]), read against the store.

use volley_store::{RunId, Store, StudyId};

use crate::error::ReportError;

/// What to report on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selector {
    /// One run (one target).
    Run(RunId),
    /// Every run of a study, side by side.
    Study(StudyId),
}

impl Selector {
    /// Parses `42` (a run id) or `study:7`.
    pub fn parse(text: &str) -> Result<Selector, ReportError> {
        let bad = || ReportError::BadSelector(text.to_string());
        match text.strip_prefix("study:") {
            Some(id) => Ok(Selector::Study(StudyId(
                id.trim().parse().map_err(|_| bad())?,
            ))),
            None => Ok(Selector::Run(RunId(
                text.trim().parse().map_err(|_| bad())?,
            ))),
        }
    }

    /// The newest thing worth a report: the study or stand-alone run (a saved bench)
    /// started last, by the later of study and run starts; ties go to the higher id.
    pub fn latest(store: &Store) -> Result<Selector, ReportError> {
        let study = store
            .list_studies()?
            .into_iter()
            .max_by_key(|s| (s.started_unix_ms, s.id))
            .map(|s| (s.started_unix_ms, Selector::Study(s.id)));
        let run = store
            .list_runs()?
            .into_iter()
            .filter(|r| r.study.is_none())
            .max_by_key(|r| (r.started_unix_ms, r.id))
            .map(|r| (r.started_unix_ms, Selector::Run(r.id)));
        match (study, run) {
            (Some((ts, s)), Some((tr, r))) => Ok(if tr > ts { r } else { s }),
            (Some((_, s)), None) => Ok(s),
            (None, Some((_, r))) => Ok(r),
            (None, None) => Err(ReportError::EmptyStore),
        }
    }
}

impl Selector {
    /// The one selector grammar of every command that names stored runs (`report`,
    /// `compare`), read against the store:
    ///
    /// - `42`: run 42;
    /// - `study:7` or `study:NAME`: study 7, or the newest study named NAME;
    /// - `study:7:TARGET` or `study:NAME:TARGET`: that study's newest run of TARGET;
    /// - `NAME:TARGET`: the same, for a study NAME other than `study`;
    /// - `label:TEXT`: the newest run named TEXT (`volley bench --save --label TEXT`).
    ///
    /// Ids are checked to exist here, so every mistake is one usage error.
    pub fn find(store: &Store, text: &str) -> Result<Selector, ReportError> {
        let t = text.trim();
        if store.list_runs()?.is_empty() {
            return Err(ReportError::EmptyStore);
        }
        if let Ok(id) = t.parse::<i64>() {
            store
                .run(RunId(id))
                .map_err(|_| ReportError::UnknownRun(id))?;
            return Ok(Selector::Run(RunId(id)));
        }
        if let Some(label) = t.strip_prefix("label:") {
            let newest = store
                .list_runs()?
                .into_iter()
                .filter(|r| r.target == label)
                .max_by_key(|r| r.id);
            return match newest {
                Some(r) => Ok(Selector::Run(r.id)),
                None => Err(ReportError::NoMatch(format!("no run named '{label}'"))),
            };
        }
        let (study, target) = match t.strip_prefix("study:") {
            Some(rest) => match rest.split_once(':') {
                Some((s, target)) => (s, Some(target)),
                None => (rest, None),
            },
            None => match t.split_once(':') {
                Some((s, target)) => (s, Some(target)),
                None => return Err(ReportError::BadSelector(text.to_string())),
            },
        };
        let study = find_study(store, study)?;
        let Some(target) = target else {
            return Ok(Selector::Study(study));
        };
        let newest = store
            .runs_of_study(study)?
            .into_iter()
            .filter(|r| r.target == target)
            .max_by_key(|r| r.id);
        match newest {
            Some(r) => Ok(Selector::Run(r.id)),
            None => Err(ReportError::NoMatch(format!(
                "no run of target '{target}' in study {study}"
            ))),
        }
    }
}

/// A study by id, or the newest one with this name.
fn find_study(store: &Store, id_or_name: &str) -> Result<StudyId, ReportError> {
    if let Ok(id) = id_or_name.parse::<i64>() {
        store
            .study(StudyId(id))
            .map_err(|_| ReportError::UnknownStudy(id))?;
        return Ok(StudyId(id));
    }
    store
        .list_studies()?
        .into_iter()
        .filter(|s| s.name == id_or_name)
        .max_by_key(|s| s.id)
        .map(|s| s.id)
        .ok_or_else(|| ReportError::NoMatch(format!("no study named '{id_or_name}'")))
}

impl std::fmt::Display for Selector {
    /// As [`Selector::parse`] reads it back: `42` or `study:7`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Selector::Run(id) => write!(f, "{id}"),
            Selector::Study(id) => write!(f, "study:{id}"),
        }
    }
}
