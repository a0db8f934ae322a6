//! `--target`'s flags resolved into a [`Setup`] before anything starts: the kinds, caps
//! and pinning, docroot and path, compression and tuning, and the load, once. A mistake
//! here is a usage error (exit 2) and nothing has been created. Moved out of
//! `target.rs` (the run order and messages stay there).

use super::*;

/// Everything `--target` asks for, resolved: no flag strings left.
#[derive(Clone)]
pub(super) struct Setup<'r> {
    pub(super) kinds: Vec<TargetKind>,
    pub(super) limits: ResourceLimits,
    pub(super) workers: u32,
    pub(super) docroot: DocrootSource,
    /// Path and query loaded; the probe validates its file before the load.
    pub(super) path: String,
    pub(super) monitor_interval: Duration,
    /// Cores volley is pinned to (the complement of `--target-cpus`), if any remain.
    pub(super) volley_cpus: Option<Vec<usize>>,
    pub(super) show_config: bool,
    /// The load, resolved once; aimed at each target as it starts. Its `repeat` is the
    /// number of rounds: each round runs every target once, in the order given
    /// (A B A B ...), so slow drifts of the machine fall on all targets alike; its
    /// `cooldown` the pause before every run but the first.
    pub(super) load: Load,
    /// Serve HTTPS (throw-away CA) and load over https://.
    pub(super) tls: bool,
    /// Offer HTTP/2 by ALPN (bench's `--h2`).
    pub(super) http2: bool,
    /// Offer HTTP/3 (`--h3`; Caddy only).
    pub(super) http3: bool,
    /// Compress responses (bench's `--compressed br|gzip`).
    pub(super) compression: Option<Compression>,
    /// Server knobs and raw text (`--set`), checked against every kind.
    pub(super) tuning: Tuning,
    /// Sysctls for the target's namespace (`--sysctl`).
    pub(super) sysctls: Vec<Sysctl>,
    /// Route switches in the target's namespace (`--route`).
    pub(super) route: RouteSettings,
    /// `--replay`: the load aimed at each target is this log's replay.
    pub(super) replay: Option<&'r Replay>,
}

impl Setup<'_> {
    /// True when the target runs in a namespace volley makes (`--sysctl`, `--route`).
    pub(super) fn in_namespace(&self) -> bool {
        !self.sysctls.is_empty() || self.route.quickack.is_some()
    }
}

/// Resolves the `--target` flags and the load's, once, before anything starts.
pub(super) fn resolve<'r>(
    load: &LoadArgs,
    t: &TargetArgs,
    replay: Option<&'r Replay>,
) -> anyhow::Result<Setup<'r>> {
    let kinds = kinds(load, t)?;
    if load.urls.is_some() {
        usage!("--urls cannot be combined with --target yet: load one path (--path) per run");
    }
    let (limits, volley_cpus) = limits(t);
    let (docroot, path) = docroot_and_path(load, t)?;
    let tls = t.tls || load.url().is_some_and(HttpUrl::tls);
    if load.wire.h2 && !tls {
        usage!("--h2 with --target needs --tls: managed servers offer HTTP/2 by ALPN over TLS");
    }
    if load.wire.h3 && !tls {
        usage!("--h3 with --target needs --tls: QUIC always runs TLS 1.3");
    }
    if load.wire.h3 {
        if let Some(k) = kinds.iter().find(|k| !k.supports_http3()) {
            usage!("{k} cannot offer HTTP/3 (supported: caddy, builtin)");
        }
    }
    if load.wire.h2 {
        if let Some(k) = kinds.iter().find(|k| !k.supports_http2()) {
            usage!("{k} cannot offer HTTP/2 (supported: builtin, nginx, apache-event, lighttpd, caddy)");
        }
    }
    let compression = compression(load, &kinds)?;
    let tuning = tuning(t, &kinds)?;
    Ok(Setup {
        kinds,
        limits,
        workers: t.workers,
        docroot,
        path,
        monitor_interval: t.monitor_interval,
        volley_cpus,
        show_config: t.show_config,
        load: Load::resolve(load)?,
        tls,
        http2: load.wire.h2,
        http3: load.wire.h3,
        compression,
        tuning,
        sysctls: t.sysctl.clone(),
        route: t
            .route
            .iter()
            .fold(RouteSettings::default(), |acc, r| RouteSettings {
                quickack: r.quickack.or(acc.quickack),
            }),
        replay,
    })
}

/// The `--set` assignments as one tuning, refused (exit 2) when a target cannot express
/// a knob, when raw text names a kind not run, or when `--workers` says otherwise.
fn tuning(t: &TargetArgs, kinds: &[TargetKind]) -> anyhow::Result<Tuning> {
    let mut tuning = Tuning::default();
    for a in &t.set {
        tuning.assign(a);
    }
    if let Some(k) = tuning.knobs.workers {
        // --workers defaults to 1: only a different value given beside the knob disagrees.
        if t.workers != 1 && t.workers != k {
            usage!(
                "--workers {} and --set workers={k} disagree: give one",
                t.workers
            );
        }
    }
    for (kind, _) in &tuning.raw {
        if !kinds.contains(kind) {
            usage!("--set raw.{kind}: {kind} is not among the --target kinds");
        }
    }
    for kind in kinds {
        if let Err(e) = tuning.check(*kind) {
            usage!("{e}");
        }
    }
    Ok(tuning)
}

/// The `--target` kinds, in the order given. A CalDAV server (Radicale, Xandikos)
/// answers 401 on every path without its accounts' credentials, so a GET load needs a
/// path and credentials named by the user; `--caldav` is what most mean.
fn kinds(load: &LoadArgs, t: &TargetArgs) -> anyhow::Result<Vec<TargetKind>> {
    if t.targets.contains(&TargetKind::External) {
        usage!("--target external: give the URL instead (volley bench http://host:port/path); --target starts servers");
    }
    let path_given = t.path.is_some() || load.url.is_some();
    if let Some(k) = t.targets.iter().find(|k| k.is_caldav_server()) {
        if !path_given {
            usage!("{k} is a CalDAV server that serves its users' calendars only: run an office day with --caldav USERS --target {k}, or load one path with --path /user1/calendar/ -H 'Authorization: Basic ...'");
        }
    }
    Ok(t.targets.clone())
}

/// The targets' limits (cores, CPU quota, memory) and the cores left for volley.
fn limits(t: &TargetArgs) -> (ResourceLimits, Option<Vec<usize>>) {
    let allowed = allowed_cpus();
    let cpus = t.target_cpus.as_ref().map(|c| c.0.clone());
    let volley_cpus = cpus.as_ref().and_then(|c| {
        let rest: Vec<usize> = allowed.iter().copied().filter(|i| !c.contains(i)).collect();
        (!rest.is_empty()).then_some(rest)
    });
    let limits = ResourceLimits {
        cpus,
        cpu_quota: t.cpu_quota.map(CpuQuota::of_one_cpu),
        memory_max_bytes: t.memory_max,
    };
    (limits, volley_cpus)
}

/// Where the docroot comes from, and the path loaded (`--path`, the URL's path, or the
/// docroot's default file).
fn docroot_and_path(load: &LoadArgs, t: &TargetArgs) -> anyhow::Result<(DocrootSource, String)> {
    let fixture = |kind| DocrootSource::Fixture { kind, seed: 0 };
    let (docroot, default_path) = match (&t.docroot, t.fixture) {
        (Some(dir), _) => {
            if !dir.is_dir() {
                usage!("--docroot {} is not a directory", dir.display());
            }
            let abs = match dir.canonicalize() {
                Ok(p) => p,
                Err(e) => usage!("--docroot {}: {e}", dir.display()),
            };
            (DocrootSource::Dir(abs), "/index.html")
        }
        (None, None | Some(FixtureArg::Sizes)) => {
            (fixture(volley_fixtures::Fixture::Sizes), "/700b.html")
        }
        (None, Some(FixtureArg::Uniserve)) => {
            (fixture(volley_fixtures::Fixture::Uniserve), "/index1.html")
        }
    };
    let path = match (&t.path, &load.url) {
        (Some(p), _) if !p.starts_with('/') => usage!("--path must start with '/', got '{p}'"),
        (Some(p), _) => p.clone(),
        (None, Some(w)) => match w.path() {
            p if p != "/" => p,
            _ => default_path.to_string(),
        },
        (None, None) => default_path.to_string(),
    };
    if path.contains(|c: char| c.is_whitespace() || c.is_control()) {
        usage!("invalid path '{path}': whitespace in path");
    }
    Ok((docroot, path))
}

/// What the targets compress with: bench's `--compressed br|gzip`.
fn compression(load: &LoadArgs, kinds: &[TargetKind]) -> anyhow::Result<Option<Compression>> {
    Ok(match load.wire.compressed {
        None => None,
        Some(Coding::Gzip) => Some(Compression::gzip_only(6)),
        Some(Coding::Br) => {
            if let Some(k) = kinds.iter().find(|k| !k.supports_brotli()) {
                usage!("{k} cannot answer Content-Encoding: br here; use --compressed gzip");
            }
            Some(Compression {
                gzip: false,
                ..Compression::gzip_and_brotli()
            })
        }
        Some(c) => {
            usage!(
                "--compressed {} with --target: managed servers compress with br or gzip only",
                c.token()
            )
        }
    })
}
