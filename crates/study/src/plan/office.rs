//! `kind = "caldav"` workloads resolved: the office's users axis, its profile mix, day
//! and compression, which targets may serve it, and how many DAV accounts each target
//! needs. Every error names its key.

use volley_targets::TargetKind;

use super::resolve::{http_request_key, invalid, refuse};
use super::{OfficeLoad, SearchPlan, Target, Workload};
use crate::spec::{Mode, StudyFile, UsersAxis, WorkloadDef};
use crate::StudyError;

/// Decisions per person per working day when the file gives none: seed 000's 200-300
/// conscious decisions, in the middle.
pub const DEFAULT_DECISIONS: u32 = 250;

/// Real time: the users a day carries are people at their pace. A larger factor is a
/// stress test (docs/methodology.md, "The office").
pub const DEFAULT_COMPRESS: f64 = 1.0;

/// The office's first items volley writes into a target's storage before starting it,
/// per calendar: Radicale's (`volley_targets::dav::seed_radicale`; its PUTs each take
/// its storage lock and 9 fsyncs), none elsewhere (set-up PUTs them). The one rule the
/// target's spec and the plan's set-up estimate share (docs/methodology.md, "Radicale's
/// storage seeded").
pub fn seeded_items(kind: TargetKind) -> u64 {
    if kind == TargetKind::Radicale {
        volley_office::INITIAL_ITEMS
    } else {
        0
    }
}

/// The office of workload `w`, or `None` for an http workload.
pub(super) fn resolve_office(
    w: &WorkloadDef,
    file: &StudyFile,
) -> Result<Option<OfficeLoad>, StudyError> {
    match w.kind.as_deref().unwrap_or("http") {
        "http" => {
            let office_key = [
                ("users", w.users.is_some()),
                ("profiles", w.profiles.is_some()),
                ("decisions", w.decisions.is_some()),
                ("compress", w.compress.is_some()),
                ("day_start", w.day_start.is_some()),
                ("start_users", w.start_users.is_some()),
                ("max_users", w.max_users.is_some()),
            ]
            .into_iter()
            .find(|(_, set)| *set);
            if let Some((key, _)) = office_key {
                return Err(refuse(
                    &w.name,
                    format!("{key} is a caldav key; set kind = \"caldav\""),
                ));
            }
            Ok(None)
        }
        "caldav" => caldav(w, file).map(Some),
        // Resolved by `super::replay` (its keys are checked there).
        "replay" => Ok(None),
        other => Err(refuse(
            &w.name,
            format!("kind must be \"http\", \"caldav\" or \"replay\", got \"{other}\""),
        )),
    }
}

fn caldav(w: &WorkloadDef, file: &StudyFile) -> Result<OfficeLoad, StudyError> {
    // The clients choose their requests.
    if let Some(key) = http_request_key(w) {
        return Err(refuse(
            &w.name,
            format!(
                "{key} has no meaning for kind = \"caldav\" (the clients choose their requests)"
            ),
        ));
    }
    if w.sweep.is_some() || w.load.is_some() {
        return Err(refuse(
            &w.name,
            "a caldav workload sweeps users, not [workload.sweep] or [workload.load]",
        ));
    }
    if file.injectors.is_some() {
        return Err(refuse(
            &w.name,
            "a caldav office runs in volley's process; [injectors] is for http workloads",
        ));
    }
    if file.steps.duration.is_none() {
        return Err(refuse(
            &w.name,
            "a caldav office day needs steps.duration (how long the day runs)",
        ));
    }
    let (users, search) = users_of(w, file)?;
    let decisions = w.decisions.unwrap_or(DEFAULT_DECISIONS);
    if decisions == 0 {
        return Err(refuse(&w.name, "decisions must be at least 1"));
    }
    let compress = w.compress.unwrap_or(DEFAULT_COMPRESS);
    if !(compress.is_finite() && compress > 0.0) {
        return Err(refuse(
            &w.name,
            format!("compress must be a positive number, got {compress}"),
        ));
    }
    let cold_start = match w.day_start.as_deref() {
        None | Some("warm") => false,
        Some("cold") => true,
        Some(other) => {
            return Err(refuse(
                &w.name,
                format!("day_start must be \"warm\" or \"cold\", got \"{other}\""),
            ))
        }
    };
    let mix = match &w.profiles {
        None => volley_office::Mix::default(),
        Some(p) => volley_office::Mix::parse(&p.join(","))
            .map_err(|e| refuse(&w.name, format!("profiles: {e}")))?,
    };
    let own_search = match (w.start_users.is_some() || w.max_users.is_some(), search) {
        (false, _) => None,
        (true, false) => {
            return Err(refuse(
                &w.name,
                "start_users/max_users are for users = \"search\"",
            ))
        }
        (true, true) => Some(
            users_search_plan(
                file,
                w.start_users.unwrap_or(start_users(file)),
                w.max_users.or(file.search.max_users),
            )
            .map_err(|e| refuse(&w.name, e))?,
        ),
    };
    Ok(OfficeLoad {
        users,
        search,
        mix,
        decisions,
        compress,
        cold_start,
        own_search,
    })
}

/// The users of caldav workload `w`: counts to sweep, or searched (`users = "search"`,
/// or no users at all in search mode).
fn users_of(w: &WorkloadDef, file: &StudyFile) -> Result<(Vec<u32>, bool), StudyError> {
    let users = match (&w.users, file.mode) {
        (Some(UsersAxis::Word(word)), _) if word == "search" => return Ok((Vec::new(), true)),
        (None, Mode::Search) => return Ok((Vec::new(), true)),
        (Some(UsersAxis::Word(word)), _) => {
            return Err(refuse(&w.name, format!("users must be a count, a list of counts or \"search\", got \"{word}\"")))
        }
        (Some(UsersAxis::Counts(_)), Mode::Search) => {
            return Err(refuse(&w.name, "in search mode a caldav workload searches its users; drop users or set users = \"search\""))
        }
        (None, Mode::Sweep) => {
            return Err(refuse(&w.name, "kind = \"caldav\" needs users (a count, a list, or \"search\")"))
        }
        (Some(UsersAxis::Counts(c)), Mode::Sweep) => c.values(),
    };
    if users.is_empty() || users.contains(&0) {
        return Err(refuse(&w.name, "users values must be at least 1"));
    }
    Ok((users, false))
}

/// Users-search settings from `[search]` when some caldav workload searches its users:
/// whole numbers from `start_users` (default 10) up to `max_users` (default 200),
/// bisected to `resolution` (default 0.1 here: a day per probe makes a users search
/// far costlier than a rate's). `start_users`/`max_users` with no users search are an
/// error, as every key without meaning is.
pub(super) fn resolve_users_search(
    file: &StudyFile,
    workloads: &[Workload],
) -> Result<Option<SearchPlan>, StudyError> {
    let s = &file.search;
    let searched = workloads.iter().any(Workload::searches_users);
    if !searched {
        if s.start_users.is_some() || s.max_users.is_some() {
            return Err(invalid(
                "[search] start_users/max_users need a caldav workload with users = \"search\"",
            ));
        }
        return Ok(None);
    }
    users_search_plan(file, start_users(file), s.max_users)
        .map(Some)
        .map_err(|e| invalid(format!("[search] {e}")))
}

/// Why a users search's settings cannot make a search; the caller says where
/// (`[search]` or the workload).
#[derive(Debug, thiserror::Error)]
enum UsersSearchError {
    #[error("needs 1 <= start_users <= max_users, got {start} and {max}")]
    Range { start: u32, max: u32 },
    #[error("settings: {0}")]
    Settings(#[from] volley_analysis::knee::SearchError),
}

/// A users search from `start` to `max` (default [`DEFAULT_MAX_USERS`], at least
/// `start`) with `[search]`'s other settings, or why not.
fn users_search_plan(
    file: &StudyFile,
    start: u32,
    max: Option<u32>,
) -> Result<SearchPlan, UsersSearchError> {
    let s = &file.search;
    let max = max.unwrap_or(DEFAULT_MAX_USERS.max(start));
    if start == 0 || max < start {
        return Err(UsersSearchError::Range { start, max });
    }
    let opts = volley_analysis::knee::SearchOpts {
        resolution_share: s.resolution.unwrap_or(0.1),
        resolution_rps: 1.0,
        repeats: s.repeats.unwrap_or(3),
        max_rate_rps: f64::from(max),
        min_rate_rps: 1.0,
        max_steps: s.max_steps.unwrap_or(40),
        whole: true,
        ..Default::default()
    };
    volley_analysis::knee::Search::new(f64::from(start), opts.clone())?;
    Ok(SearchPlan {
        start_rate: f64::from(start),
        opts,
        passes: s.passes.unwrap_or(1),
    })
}

/// The first users count of a users search: `[search] start_users`, else
/// [`DEFAULT_START_USERS`].
pub(super) fn start_users(file: &StudyFile) -> u32 {
    file.search.start_users.unwrap_or(DEFAULT_START_USERS)
}

/// First users count of a users search when `[search]` gives none.
pub const DEFAULT_START_USERS: u32 = 10;

/// Most users a users search tries when `[search]` gives no `max_users`.
pub const DEFAULT_MAX_USERS: u32 = 200;

/// The targets workload `w` runs on (indices into `targets`, the targets the `target`
/// axis kept), checked: every name must be a `[[target]]` of the file, and a caldav
/// workload needs targets that serve DAV accounts.
pub(super) fn workload_targets(
    w: &WorkloadDef,
    office: Option<&OfficeLoad>,
    file: &StudyFile,
    targets: &[Target],
) -> Result<Option<Vec<usize>>, StudyError> {
    let chosen: Option<Vec<usize>> = match &w.targets {
        None => None,
        Some(names) => {
            if let Some(n) = names
                .iter()
                .find(|n| !file.targets.iter().any(|t| &t.name == *n))
            {
                return Err(refuse(
                    &w.name,
                    format!("targets names '{n}', which is no [[target]]"),
                ));
            }
            // A name the `target` axis filtered out is simply not run.
            Some(
                (0..targets.len())
                    .filter(|&i| names.contains(&targets[i].name))
                    .collect(),
            )
        }
    };
    if office.is_some() {
        let runs_on: Vec<usize> = chosen
            .clone()
            .unwrap_or_else(|| (0..targets.len()).collect());
        if let Some(t) = runs_on.iter().map(|&i| &targets[i]).find(|t| !t.dav) {
            return Err(invalid(format!(
                "workload '{}' is caldav but target '{}' serves no DAV accounts: set dav = true on it (builtin, nginx, apache-event, apache-prefork, lighttpd), use radicale or xandikos, or list the workload's targets",
                w.name, t.name
            )));
        }
    }
    Ok(chosen)
}

/// Whether a target of `kind` with `dav` set serves DAV accounts; an error names the
/// target when `dav = true` is set on a kind that cannot.
pub(super) fn target_dav(
    name: &str,
    kind: TargetKind,
    dav: Option<bool>,
) -> Result<bool, StudyError> {
    let caldav_server = kind.is_caldav_server();
    match dav {
        None => Ok(caldav_server),
        Some(false) if caldav_server => Err(invalid(format!(
            "target '{name}': {} always serves DAV; dav = false has no meaning",
            kind.name()
        ))),
        Some(false) => Ok(false),
        Some(true) => {
            // The kinds volley-targets gives DAV accounts (its `settings_for`).
            let can = caldav_server || kind.supports_plain_dav() || kind == TargetKind::Builtin;
            if can {
                Ok(true)
            } else {
                Err(invalid(format!(
                    "target '{name}': dav = true needs builtin, nginx, apache-event, apache-prefork, lighttpd, radicale or xandikos, not {}",
                    kind.name()
                )))
            }
        }
    }
}
