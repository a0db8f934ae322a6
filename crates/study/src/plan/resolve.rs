//! A parsed study file resolved into a [`Plan`]: every value checked (errors name the
//! line where the file has one), defaults filled in, `--scale` applied, cells expanded
//! from the sweep axes and the steps put in order.

use std::str::FromStr;
use std::time::Duration;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use volley_engine::{Arrival, Order};
use volley_harness::DocrootSource;
use volley_targets::TargetKind;

use super::timing::{check_capped, check_judgeable, resolve_rule, resolve_search, resolve_timing};
use super::*;
use crate::spec::{
    self, ArrivalKind, FixtureKind, LoadDef, Mode, ModelKind, OrderKind, RateAxis, RepeatOrder,
    StudyFile, SweepDef, WorkloadDef,
};
use crate::StudyError;

mod cells;
use cells::{check_cold_start, check_h3_targets, resolve_cells};

/// A stated `expected_rate`: a positive, finite number of requests per second.
fn expected_rate_of(text: &str, v: &Option<toml::Spanned<f64>>) -> Result<Option<f64>, StudyError> {
    match v {
        None => Ok(None),
        Some(r) if r.get_ref().is_finite() && *r.get_ref() > 0.0 => Ok(Some(*r.get_ref())),
        Some(r) => Err(spec::at(
            text,
            r,
            format!(
                "expected_rate must be a positive number of requests per second (one step, all connections), got {}",
                r.get_ref()
            ),
        )),
    }
}

pub(super) fn invalid(msg: impl Into<String>) -> StudyError {
    StudyError::Invalid(msg.into())
}

/// Workload `name` refused, `why` in words: "workload 'NAME': WHY".
pub(super) fn refuse(name: &str, why: impl std::fmt::Display) -> StudyError {
    invalid(format!("workload '{name}': {why}"))
}

/// The first request key of an http workload (`paths`, `order`, `weights`, `block`,
/// `method`, `body`, `requests`, `cold_start`) that `w` sets: the one resolver of the keys
/// that mean nothing to a workload whose requests come from elsewhere (a caldav office's
/// clients, a replayed log).
pub(super) fn http_request_key(w: &WorkloadDef) -> Option<&'static str> {
    [
        ("paths", !w.paths.is_empty()),
        ("order", w.order.is_some()),
        ("weights", w.weights.is_some()),
        ("block", w.block.is_some()),
        ("method", w.method.is_some()),
        ("body", w.body.is_some()),
        ("requests", w.requests.is_some()),
        ("cold_start", w.cold_start.is_some()),
    ]
    .into_iter()
    .find_map(|(key, set)| set.then_some(key))
}

pub(super) fn duration_of(
    text: &str,
    v: &Option<toml::Spanned<String>>,
    default: Duration,
) -> Result<Duration, StudyError> {
    match v {
        None => Ok(default),
        Some(s) => spec::parse_duration(s.get_ref()).map_err(|m| spec::at(text, s, m.to_string())),
    }
}

fn expand_rates(axis: &RateAxis) -> Result<Vec<f64>, StudyError> {
    let rates = match axis {
        RateAxis::List(v) => v.clone(),
        RateAxis::Range { from, to, step } => {
            if !(step.is_finite() && *step > 0.0 && from <= to) {
                return Err(invalid(format!(
                    "sweep.rate range needs from <= to and step > 0 (got from {from}, to {to}, step {step})"
                )));
            }
            let n = ((to - from) / step + 1e-9).floor() as usize;
            if n > 10_000 {
                return Err(invalid("sweep.rate range has more than 10000 points"));
            }
            (0..=n).map(|i| from + step * i as f64).collect()
        }
    };
    if rates.is_empty() {
        return Err(invalid("sweep.rate is empty"));
    }
    if let Some(r) = rates.iter().find(|r| !(r.is_finite() && **r > 0.0)) {
        return Err(invalid(format!("sweep.rate values must be > 0, got {r}")));
    }
    Ok(rates)
}

fn resolve_load(text: &str, d: &LoadDef) -> Result<Load, StudyError> {
    let open = match d.model {
        Some(ModelKind::Open) => true,
        Some(ModelKind::Closed) => false,
        None => d.rate.is_some(),
    };
    let timeout = duration_of(text, &d.timeout, Duration::from_secs(10))?;
    if timeout.is_zero() {
        return Err(invalid("load.timeout must be longer than zero"));
    }
    if let Some(r) = d.rate {
        if !(r.is_finite() && r > 0.0) {
            return Err(invalid(format!("load.rate must be > 0, got {r}")));
        }
    }
    let concurrency = d.concurrency.unwrap_or(if open { 16 } else { 1 });
    let threads = d.threads.unwrap_or(1);
    if concurrency == 0 || threads == 0 {
        return Err(invalid(
            "load.concurrency and load.threads must be at least 1",
        ));
    }
    let compressed = match d.compressed.as_deref() {
        None => None,
        Some("br") => Some(Encoding::Br),
        Some("gzip") => Some(Encoding::Gzip),
        Some(other) => {
            return Err(invalid(format!(
                "load.compressed must be \"br\" or \"gzip\", got \"{other}\""
            )))
        }
    };
    let streams = d.streams.unwrap_or(1);
    if streams == 0 {
        return Err(invalid("load.streams must be at least 1"));
    }
    let wire = WireDef {
        tls: d.tls.unwrap_or(false),
        h2_streams: (d.http2 == Some(true)).then_some(streams),
        streams,
        compressed,
        insecure: d.insecure.unwrap_or(false),
    };
    Ok(Load {
        wire,
        open,
        concurrency,
        rate: d.rate,
        arrival: match d.arrival {
            Some(ArrivalKind::Poisson) => Arrival::Poisson,
            _ => Arrival::Constant,
        },
        threads,
        max_connections: d.max_connections.unwrap_or(256).max(concurrency),
        timeout,
        keepalive: d.keepalive.unwrap_or(true),
        seed: d.seed.unwrap_or(1),
    })
}

fn parse_header(h: &str) -> Result<(String, String), StudyError> {
    match h.split_once(':') {
        Some((n, v)) if !n.trim().is_empty() => Ok((n.trim().to_string(), v.trim().to_string())),
        _ => Err(invalid(format!(
            "workload header '{h}' must be 'Name: value'"
        ))),
    }
}

/// Resolves a parsed study. `text` is the file (for error lines); `scale` multiplies
/// durations and request counts (`--scale 0.1` for a quick look). Each part is checked in
/// the file's order, so the first mistake is the one reported.
pub fn resolve(file: &StudyFile, text: &str, scale: f64) -> Result<Plan, StudyError> {
    if !(scale.is_finite() && scale > 0.0) {
        return Err(invalid(format!("--scale must be > 0, got {scale}")));
    }
    if file.targets.is_empty() {
        return Err(invalid("the study names no [[target]]"));
    }
    if file.workloads.is_empty() {
        return Err(invalid("the study names no [[workload]]"));
    }
    let targets = resolve_targets(file, text)?;
    let variants = super::variants::resolve_variants(file, &targets)?;
    let instances = resolve_instances(file, &targets, &variants)?;
    let mut workloads = resolve_workloads(file, text, scale, &targets)?;
    super::replay::check_client_addresses(file, &workloads, &targets, &variants)?;
    check_cold_start(file, &workloads, &targets)?;
    let cells = resolve_cells(file, &mut workloads, &instances)?;
    check_h3_targets(&cells, &instances, &targets)?;
    let serve = serve_of(&workloads, &cells)?;
    let timing = resolve_timing(file, text, scale, &workloads)?;
    let st = &file.steps;
    let repeats = st.repeats.unwrap_or(1);
    if repeats == 0 {
        return Err(invalid("steps.repeats must be at least 1"));
    }
    let swept = cells
        .iter()
        .filter(|c| !workloads[c.workload].searches_users())
        .count();
    let steps = if file.mode == Mode::Sweep {
        schedule(
            swept,
            repeats,
            st.order.unwrap_or_default(),
            st.seed.unwrap_or(1),
        )
    } else {
        Vec::new()
    };
    let rule = resolve_rule(file, text, &timing)?;
    let rated = file.mode == Mode::Search || cells.iter().any(|c| c.rate.is_some());
    check_judgeable(&rule, &timing, rated)?;
    check_capped(&cells, &instances, &workloads, &timing, file.mode)?;
    let search = resolve_search(file, &timing)?;
    let users_search = super::office::resolve_users_search(file, &workloads)?;
    let docroot = resolve_docroot(file)?;
    let injectors = super::injectors::resolve_injectors(file, steps.len())?;
    let axis = primary_axis(&cells, &instances, &targets);
    Ok(Plan {
        name: file.name.clone(),
        mode: file.mode,
        targets,
        instances,
        workloads,
        cells,
        steps,
        repeats,
        retries: st.retries.unwrap_or(super::DEFAULT_RETRIES),
        timing,
        rule,
        docroot,
        injectors,
        search,
        users_search,
        serve,
        axis,
        variants,
    })
}

/// The `[[target]]`s, checked, filtered by the `target` sweep axis.
fn resolve_targets(file: &StudyFile, text: &str) -> Result<Vec<Target>, StudyError> {
    let mut targets = Vec::new();
    for t in &file.targets {
        let kind = TargetKind::from_str(t.kind.get_ref()).map_err(|_| {
            spec::at(
                text,
                &t.kind,
                format!(
                    "unknown target kind '{}' (builtin, nginx, apache-event, apache-prefork, lighttpd, caddy, radicale, xandikos, external)",
                    t.kind.get_ref()
                ),
            )
        })?;
        if kind == TargetKind::External && t.url.is_none() {
            return Err(spec::at(
                text,
                &t.kind,
                format!(
                    "target '{}' is external and needs url = \"http://...\"",
                    t.name
                ),
            ));
        }
        if targets.iter().any(|x: &Target| x.name == t.name) {
            return Err(invalid(format!("two targets are named '{}'", t.name)));
        }
        if let Some(q) = t.cpu_quota {
            check_quota(q)?;
        }
        targets.push(Target {
            name: t.name.clone(),
            kind,
            workers: t.workers.unwrap_or(1).max(1),
            keepalive: t.keepalive.unwrap_or(true),
            url: t.url.clone(),
            pid: t.pid,
            dav: super::office::target_dav(&t.name, kind, t.dav)?,
            memory_max: match &t.memory_max {
                None => None,
                Some(_) if kind == TargetKind::External => {
                    return Err(invalid(format!(
                        "target '{}': memory_max needs a managed target (volley does not cap what it did not start)",
                        t.name
                    )))
                }
                Some(m) => Some(volley_units::parse_size(m).map_err(|e| {
                    invalid(format!("target '{}': memory_max {e}", t.name))
                })?),
            },
            restart: match t.restart {
                crate::spec::Restart::NextStep if kind == TargetKind::External => {
                    return Err(invalid(format!(
                        "target '{}': restart needs a managed target (volley does not start what it did not start)",
                        t.name
                    )))
                }
                r => r,
            },
        });
    }
    if let Some(names) = &file.sweep.target {
        for n in names {
            if !targets.iter().any(|t| &t.name == n) {
                return Err(invalid(format!(
                    "sweep.target names '{n}', which is no [[target]]"
                )));
            }
        }
        targets.retain(|t| names.contains(&t.name));
    }
    Ok(targets)
}

/// Instances: target x cpu quota x cores (an external target keeps its own, unswept).
fn resolve_instances(
    file: &StudyFile,
    targets: &[Target],
    variants: &[Variant],
) -> Result<Vec<Instance>, StudyError> {
    let sweep = &file.sweep;
    if let Some(qs) = &sweep.cpu_quota {
        for q in qs {
            check_quota(*q)?;
        }
    }
    if sweep.cores.as_ref().is_some_and(|c| c.contains(&0)) {
        return Err(invalid("sweep.cores values must be at least 1"));
    }
    let mut instances = Vec::new();
    for (ti, t) in targets.iter().enumerate() {
        let def = file.targets.iter().find(|d| d.name == t.name);
        let external = t.kind == TargetKind::External;
        let quotas: Vec<Option<f64>> = match (&sweep.cpu_quota, external) {
            (Some(v), false) => v.iter().copied().map(Some).collect(),
            _ => vec![def.and_then(|d| d.cpu_quota)],
        };
        let cores: Vec<Option<u32>> = match (&sweep.cores, external) {
            (Some(v), false) => v.iter().copied().map(Some).collect(),
            _ => vec![def.and_then(|d| d.cores)],
        };
        // Variants innermost: the cells loop over instances at every point, so the
        // variants of one target run next to each other (A B A B).
        let vs: Vec<Option<usize>> = match (variants.is_empty(), external) {
            (false, false) => (0..variants.len())
                .filter(|&v| variants[v].targets.as_ref().is_none_or(|s| s.contains(&ti)))
                .map(Some)
                .collect(),
            _ => vec![None],
        };
        for &c in &cores {
            for &q in &quotas {
                for &v in &vs {
                    instances.push(Instance {
                        target: ti,
                        cpu_quota: q,
                        cores: c,
                        variant: v,
                    });
                }
            }
        }
    }
    Ok(instances)
}

/// The `[[workload]]`s, each over the study's `[load]` unless it has its own.
fn resolve_workloads(
    file: &StudyFile,
    text: &str,
    scale: f64,
    targets: &[Target],
) -> Result<Vec<Workload>, StudyError> {
    let base_load = resolve_load(text, &file.load)?;
    let study_rate = expected_rate_of(text, &file.steps.expected_rate)?;
    file.workloads
        .iter()
        .map(|w| {
            let office = super::office::resolve_office(w, file)?;
            let runs_on = super::office::workload_targets(w, office.as_ref(), file, targets)?;
            let mut r = match office {
                Some(o) => office_workload(w, o, &base_load),
                None if w.kind.as_deref() == Some("replay") => {
                    let load = match &w.load {
                        Some(l) => resolve_load(text, l)?,
                        None => base_load.clone(),
                    };
                    super::replay::replay_workload(w, load, file.injectors.is_some())?
                }
                None => resolve_workload(w, text, scale, &base_load, study_rate)?,
            };
            r.targets = runs_on;
            Ok(r)
        })
        .collect()
}

/// A caldav workload: its office, the study's load settings (timeout, TLS), no paths.
fn office_workload(w: &WorkloadDef, office: OfficeLoad, base_load: &Load) -> Workload {
    Workload {
        name: w.name.clone(),
        method: "GET".into(),
        paths: Vec::new(),
        order: Order::Same,
        headers: Vec::new(),
        body: None,
        load: base_load.clone(),
        cold_start: false,
        requests: None,
        expected_rate: None,
        office: Some(office),
        replay: None,
        targets: None,
    }
}

/// One workload: paths, order, headers (plus `Accept-Encoding` when compressed), body,
/// load, and its request count scaled.
fn resolve_workload(
    w: &WorkloadDef,
    text: &str,
    scale: f64,
    base_load: &Load,
    study_rate: Option<f64>,
) -> Result<Workload, StudyError> {
    if w.paths.is_empty() {
        return Err(invalid(format!("workload '{}' has no paths", w.name)));
    }
    if let Some(p) = w.paths.iter().find(|p| !p.starts_with('/')) {
        return Err(refuse(&w.name, format!("path '{p}' must start with '/'")));
    }
    let seed = w.seed.unwrap_or(1);
    let order = match w.order.unwrap_or(if w.paths.len() > 1 {
        OrderKind::Sequential
    } else {
        OrderKind::Same
    }) {
        OrderKind::Same => Order::Same,
        // A block is a request count: scaled with the step's requests, so that
        // seed 003's L2 (5 x 1000) at `--scale 0.1` is still 5 x 100.
        OrderKind::Sequential => Order::Sequential {
            block: ((w.block.unwrap_or(1).max(1) as f64 * scale).ceil() as u64).max(1),
        },
        OrderKind::Random => Order::Random { seed },
        OrderKind::Weighted => {
            let weights = w.weights.clone().unwrap_or_default();
            if weights.len() != w.paths.len() {
                return Err(refuse(&w.name, "weighted order needs one weight per path"));
            }
            Order::Weighted { weights, seed }
        }
    };
    let load = match &w.load {
        Some(l) => resolve_load(text, l)?,
        None => base_load.clone(),
    };
    let headers = w
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<Vec<_>, _>>()?;
    let body = w.body.clone().map(String::into_bytes);
    let method = w
        .method
        .clone()
        .unwrap_or_else(|| if body.is_some() { "POST" } else { "GET" }.into());
    let mut headers = headers;
    if let Some(e) = load.wire.compressed {
        if !headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("accept-encoding"))
        {
            headers.push(("Accept-Encoding".into(), e.token().into()));
        }
    }
    Ok(Workload {
        name: w.name.clone(),
        method,
        paths: w.paths.clone(),
        order,
        headers,
        body,
        load,
        cold_start: w.cold_start.unwrap_or(false),
        expected_rate: expected_rate_of(text, &w.expected_rate)?.or(study_rate),
        requests: match w.requests {
            Some(0) => return Err(refuse(&w.name, "requests must be > 0")),
            n => n.map(|n| ((n as f64 * scale).ceil() as u64).max(1)),
        },
        office: None,
        replay: None,
        targets: None,
    })
}

/// What the managed targets serve: `[fixture]`'s kind or directory, else their default.
fn resolve_docroot(file: &StudyFile) -> Result<DocrootSource, StudyError> {
    let docroot = match &file.fixture {
        None => DocrootSource::Default,
        Some(f) => match (&f.docroot, f.kind) {
            (Some(d), _) => DocrootSource::Dir(d.clone()),
            (None, Some(k)) => DocrootSource::Fixture {
                kind: match k {
                    FixtureKind::Uniserve => volley_fixtures::Fixture::Uniserve,
                    FixtureKind::Sizes => volley_fixtures::Fixture::Sizes,
                    FixtureKind::Site => volley_fixtures::Fixture::Site,
                    FixtureKind::Groupware => volley_fixtures::Fixture::Groupware {
                        users: f.users.unwrap_or(2),
                        items: f.items.unwrap_or(20),
                    },
                },
                seed: f.seed.unwrap_or(1),
            },
            (None, None) => return Err(invalid("[fixture] needs kind or docroot")),
        },
    };
    Ok(docroot)
}

/// What the managed targets must serve for these workloads: one scheme for all (a
/// target listens either HTTPS or plain), HTTP/2 and compression when any workload asks.
fn serve_of(workloads: &[Workload], cells: &[Cell]) -> Result<Serve, StudyError> {
    let tls = workloads.first().is_some_and(|w| w.load.wire.tls);
    if let Some(w) = workloads.iter().find(|w| w.load.wire.tls != tls) {
        return Err(refuse(&w.name, "every workload of a study must agree on tls (a managed target serves HTTPS or plain HTTP, not both)"));
    }
    let h2 = workloads.iter().any(|w| w.load.wire.h2_streams.is_some())
        || cells.iter().any(|c| c.protocol == Some(Protocol::H2));
    let h3 = cells.iter().any(|c| c.protocol == Some(Protocol::H3));
    let asked: Vec<Encoding> = workloads
        .iter()
        .filter_map(|w| w.load.wire.compressed)
        .collect();
    Ok(Serve {
        tls,
        http2: h2 && tls,
        http3: h3 && tls,
        brotli: asked.contains(&Encoding::Br),
        gzip: asked.contains(&Encoding::Gzip),
    })
}

fn check_quota(q: f64) -> Result<(), StudyError> {
    if q.is_finite() && q > 0.0 && q <= 64.0 {
        Ok(())
    } else {
        Err(invalid(format!(
            "cpu_quota is a share of one CPU (0.25 = 25%), got {q}"
        )))
    }
}

fn primary_axis(cells: &[Cell], instances: &[Instance], targets: &[Target]) -> &'static str {
    fn varies<T: PartialEq>(v: impl Iterator<Item = T>) -> bool {
        let v: Vec<T> = v.collect();
        v.windows(2).any(|w| w[0] != w[1])
    }
    if varies(cells.iter().map(|c| c.rate.map(f64::to_bits))) {
        "rate"
    } else if varies(cells.iter().map(|c| c.users)) {
        "users"
    } else if varies(cells.iter().map(|c| c.concurrency)) {
        "concurrency"
    } else if varies(cells.iter().map(|c| c.injectors)) {
        "injectors"
    } else if varies(instances.iter().map(|i| i.cpu_quota.map(f64::to_bits))) {
        "cpu_quota"
    } else if varies(instances.iter().map(|i| i.cores)) {
        "cores"
    } else if varies(instances.iter().map(|i| i.variant)) {
        "variant"
    } else if varies(cells.iter().map(|c| c.protocol)) {
        "protocol"
    } else if varies(cells.iter().map(|c| c.keepalive)) {
        "keepalive"
    } else if varies(cells.iter().map(|c| c.workload)) {
        "workload"
    } else if targets.len() > 1 {
        "target"
    } else {
        "none"
    }
}

/// The order of steps: `cells` points x `repeats`, interleaved (round by round), randomised
/// within each round (seeded), or sequential (all repeats of a point back to back).
pub fn schedule(cells: usize, repeats: u32, order: RepeatOrder, seed: u64) -> Vec<PlannedStep> {
    let mut out = Vec::with_capacity(cells * repeats as usize);
    match order {
        RepeatOrder::Sequential => {
            for cell in 0..cells {
                for repeat in 0..repeats {
                    out.push((cell, repeat));
                }
            }
        }
        RepeatOrder::Interleaved | RepeatOrder::Random => {
            for repeat in 0..repeats {
                let mut round: Vec<usize> = (0..cells).collect();
                if order == RepeatOrder::Random {
                    let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_add(u64::from(repeat)));
                    round.shuffle(&mut rng);
                }
                out.extend(round.into_iter().map(|c| (c, repeat)));
            }
        }
    }
    out.into_iter()
        .enumerate()
        .map(|(order, (cell, repeat))| PlannedStep {
            order,
            cell,
            repeat,
        })
        .collect()
}
