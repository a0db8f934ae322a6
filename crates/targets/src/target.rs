//! Starting, checking and stopping one target.
//!
//! Ownership rule: volley only ever signals processes it spawned. Each managed server is
//! started as the leader of a new process group, and its main process is *not reaped*
//! until [`RunningTarget::stop`]: death is observed with `waitid(WNOWAIT)`, so the zombie
//! keeps the pid and the process-group id reserved and the group signal can never reach a
//! stranger that reused the number. Processes left in the target's private cgroup are
//! ours by construction (only our child joined it).

use crate::cgroup::{PrivateCgroups, ResourceLimits, ThrottleStats};
use crate::config::{self, Compression, Placement, ServerSettings, TlsFiles};
use crate::kind::{self, TargetKind};
use crate::probe::{self, Expected, ProbeFailure, ProbeOptions, Validated};
use crate::{TargetDied, TargetError};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// A server volley does not start: where it is and what to watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalTarget {
    /// Base URL, `http://HOST:PORT/...`.
    pub url: String,
    /// Main pid, to monitor and to detect death (never signalled).
    pub pid: Option<u32>,
    /// A cgroup's `cgroup.procs` to monitor instead of the pid's tree.
    pub cgroup_procs: Option<PathBuf>,
}

/// The description of a target stored with each run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TargetRecord {
    /// Which server.
    pub kind: TargetKind,
    /// Where it was loaded.
    pub url: String,
    /// Its version line.
    pub version: Option<String>,
    /// The configuration it ran with.
    pub config_text: String,
    /// The limits requested.
    pub limits: ResourceLimits,
    /// The cgroup files written.
    pub cgroup: crate::cgroup::CgroupSettings,
    /// Kernel, CPU model, cores, governor.
    pub environment: crate::Environment,
    /// HTTPS settings; `None` for plain HTTP.
    pub tls: Option<TlsRecord>,
    /// Whether HTTP/2 was offered (and checked by ALPN before the run).
    pub http2: bool,
    /// The compression asked (and checked by the probe before the run).
    pub compression: Option<Compression>,
    /// Bytes on the wire for the probe file per checked encoding, e.g. `("br", 412)`.
    pub encoded_probe_sizes: Vec<(String, usize)>,
}

/// The TLS part of a [`TargetRecord`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TlsRecord {
    /// True when volley made a throw-away CA and server certificate for this run.
    pub generated: bool,
    /// The certificate served.
    pub cert: PathBuf,
    /// Protocol versions offered.
    pub protocols: Vec<String>,
    /// ALPN protocols offered, preferred first.
    pub alpn: Vec<String>,
}

/// Where a TLS target's certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsSource {
    /// A fresh CA and a server certificate for localhost, 127.0.0.1 and ::1
    /// (`volley_tls::certs::write_local_set`) in the private directory: gone with the
    /// target. [`RunningTarget::ca_file`] names the CA the load must trust.
    Generate,
    /// Files the caller provides (left in place at stop).
    Files(TlsFiles),
}

/// Everything needed to start one target.
#[derive(Debug, Clone)]
pub struct TargetSpec {
    /// Which server.
    pub kind: TargetKind,
    /// Workers, keep-alive, access log.
    pub settings: ServerSettings,
    /// Directory to serve; `None` creates a small private one with `index.html`.
    pub docroot: Option<PathBuf>,
    /// A file under the docroot fetched and compared byte for byte before the target is
    /// declared ready.
    pub probe_path: String,
    /// CPU pinning, quota, memory limit.
    pub limits: ResourceLimits,
    /// How long to wait for a correct answer.
    pub start_timeout: Duration,
    /// Time between SIGTERM and SIGKILL when stopping.
    pub stop_grace: Duration,
    /// The server binary; `None` looks the kind's program up in `$PATH` and sbin.
    pub program: Option<PathBuf>,
    /// The `volley` binary for [`TargetKind::Builtin`]; `None` means the current
    /// executable (tests set it, since their current executable is the test harness).
    pub volley_exe: Option<PathBuf>,
    /// For [`TargetKind::External`].
    pub external: Option<ExternalTarget>,
    /// Serve HTTPS (HTTP/2 and compression are in `settings`); `None`: plain HTTP.
    pub tls: Option<TlsSource>,
    /// A path the caller will measure *cold*: the first request for it after start
    /// (seed 002's first-request TTFB). Validation never requests it, so it must differ
    /// from `probe_path` (`start` refuses the same path). The probe still warms the
    /// process, its TLS stack and the probe file: what stays cold is this file's path
    /// through the server (open, stat, first compression). Validate its answer after
    /// measuring with [`RunningTarget::validate_path`]; a wrong answer voids the figure.
    pub cold_path: Option<String>,
}

impl TargetSpec {
    /// Defaults: one worker, keep-alive on, no access log, no limits, 10 s to start,
    /// 3 s grace to stop, probe `/index.html`.
    pub fn new(kind: TargetKind) -> TargetSpec {
        TargetSpec {
            kind,
            settings: ServerSettings::default(),
            docroot: None,
            probe_path: "/index.html".to_string(),
            limits: ResourceLimits::default(),
            start_timeout: Duration::from_secs(10),
            stop_grace: Duration::from_secs(3),
            program: None,
            volley_exe: None,
            external: None,
            tls: None,
            cold_path: None,
        }
    }

    /// A URL volley does not start.
    pub fn external(target: ExternalTarget) -> TargetSpec {
        TargetSpec {
            external: Some(target),
            ..TargetSpec::new(TargetKind::External)
        }
    }
}

/// A started (or attached, for external) target. Stopped and cleaned up by
/// [`RunningTarget::stop`], by `Drop` (including during a panic's unwinding) and by
/// [`stop_all`] (the Ctrl-C path).
#[derive(Debug)]
pub struct RunningTarget {
    /// Base URL, `http://127.0.0.1:PORT/`.
    pub url: String,
    /// Address it listens on.
    pub addr: SocketAddr,
    /// Main process id (`None` for an external target without one).
    pub pid: Option<u32>,
    /// Which server.
    pub kind: TargetKind,
    /// Its version line, when it reports one.
    pub version: Option<String>,
    /// The configuration it runs with (the command line for builtin).
    pub config_text: String,
    /// The private directory (config, logs, pid file); removed on stop.
    pub dir: PathBuf,
    /// The certificate files served, when HTTPS.
    pub tls: Option<TlsFiles>,
    /// The CA certificate a client must trust to load this target (volley's
    /// throw-away CA, or the one given); `None` for plain HTTP or when none was given.
    pub ca_file: Option<PathBuf>,
    /// HTTP/2 is offered by ALPN (checked before `start` returned).
    pub http2: bool,
    /// Compression on (each encoding checked before `start` returned).
    pub compression: Option<Compression>,
    /// Just before the process that answered was spawned: a study measuring the first
    /// request after start (cold TTFB) reports against this instant.
    pub started_at: Instant,
    /// When the validation probe passed.
    pub ready_at: Instant,
    /// What validation saw (ALPN, encoded sizes).
    pub validated: Validated,
    tls_generated: bool,
    docroot: PathBuf,
    probe_opts: ProbeOptions,
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug)]
struct Inner {
    kind: TargetKind,
    child: Option<Child>,
    external_pid: Option<u32>,
    external_procs: Option<PathBuf>,
    cgroups: PrivateCgroups,
    dir: Option<PathBuf>,
    grace: Duration,
    stopped: bool,
    /// Precompressed siblings volley wrote into the docroot (builtin with
    /// compression), removed at stop.
    created_files: Vec<PathBuf>,
}

/// Live targets, for [`stop_all`]. Weak so the registry never keeps one alive.
static LIVE: Mutex<Vec<Weak<Mutex<Inner>>>> = Mutex::new(Vec::new());
static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock must not stop the cleanup that follows it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Stops every target still running in this process (SIGTERM, grace, SIGKILL) and
/// removes their directories and cgroups. For the CLI's Ctrl-C handler: call it from the
/// handler's thread (ctrlc / signal-hook run handlers on a normal thread), never from a
/// raw async signal handler, since it takes locks.
pub fn stop_all() {
    let live: Vec<Weak<Mutex<Inner>>> = std::mem::take(&mut *lock(&LIVE));
    for w in live {
        if let Some(inner) = w.upgrade() {
            lock(&inner).shutdown();
        }
    }
}

/// Starts a target as `spec` says, waits until it answers the probe file correctly and
/// returns it. On any error, everything created on the way is removed.
pub fn start(spec: &TargetSpec) -> Result<RunningTarget, TargetError> {
    match spec.kind {
        TargetKind::External => attach_external(spec),
        kind => start_managed(spec, kind),
    }
}

fn attach_external(spec: &TargetSpec) -> Result<RunningTarget, TargetError> {
    let ext = spec.external.as_ref().ok_or_else(|| {
        TargetError::InvalidSpec("an external target needs a URL (--target-url)".into())
    })?;
    let addr = addr_of_url(&ext.url)?;
    let inner = Inner {
        kind: TargetKind::External,
        child: None,
        external_pid: ext.pid,
        external_procs: ext.cgroup_procs.clone(),
        cgroups: PrivateCgroups::default(),
        dir: None,
        grace: spec.stop_grace,
        stopped: false,
        created_files: Vec::new(),
    };
    Ok(register(RunningTarget {
        url: ext.url.clone(),
        addr,
        pid: ext.pid,
        kind: TargetKind::External,
        version: None,
        config_text: String::new(),
        dir: PathBuf::new(),
        tls: None,
        ca_file: None,
        http2: false,
        compression: None,
        started_at: Instant::now(),
        ready_at: Instant::now(),
        validated: Validated::default(),
        tls_generated: false,
        docroot: PathBuf::new(),
        probe_opts: ProbeOptions::default(),
        inner: Arc::new(Mutex::new(inner)),
    }))
}

/// `http(s)://HOST:PORT/...` -> the socket address (IP literals and `localhost` only;
/// volley sends traffic to loopback).
fn addr_of_url(url: &str) -> Result<SocketAddr, TargetError> {
    let (rest, default_port) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
        (Some(r), _) => (r, 80),
        (_, Some(r)) => (r, 443),
        _ => {
            return Err(TargetError::InvalidSpec(format!(
                "{url:?} is not an http:// or https:// URL"
            )))
        }
    };
    let host_port = rest.split('/').next().unwrap_or("");
    let host_port = host_port.replace("localhost", "127.0.0.1");
    let with_port = if host_port.contains("]:") || host_port.matches(':').count() == 1 {
        host_port
    } else {
        format!("{host_port}:{default_port}")
    };
    with_port.parse().map_err(|_| {
        TargetError::InvalidSpec(format!("{url:?}: host must be an IP address or localhost"))
    })
}

fn register(t: RunningTarget) -> RunningTarget {
    let mut live = lock(&LIVE);
    live.retain(|w| w.strong_count() > 0);
    live.push(Arc::downgrade(&t.inner));
    drop(live);
    t
}

fn start_managed(spec: &TargetSpec, kind: TargetKind) -> Result<RunningTarget, TargetError> {
    check_features(spec, kind)?;
    let program = match (&spec.program, kind) {
        (Some(p), _) => p.clone(),
        (None, TargetKind::Builtin) => match &spec.volley_exe {
            Some(p) => p.clone(),
            None => std::env::current_exe().map_err(TargetError::io("finding volley's path"))?,
        },
        (None, k) => {
            let name = k.program().unwrap_or("?");
            kind::find_program(name).ok_or_else(|| TargetError::NotInstalled {
                kind: k,
                program: name.to_string(),
            })?
        }
    };
    if !program.exists() {
        return Err(TargetError::NotInstalled {
            kind,
            program: program.display().to_string(),
        });
    }
    let version = kind::version_of(kind, &program);
    let mut inner = Inner {
        kind,
        child: None,
        external_pid: None,
        external_procs: None,
        cgroups: PrivateCgroups::default(),
        dir: None,
        grace: spec.stop_grace,
        stopped: false,
        created_files: Vec::new(),
    };
    // From here on, dropping `inner` on an error path removes what was made.
    let dir = make_private_dir(kind)?;
    inner.dir = Some(dir.clone());
    let docroot = match &spec.docroot {
        Some(d) => d.clone(),
        None => {
            let www = dir.join("www");
            std::fs::create_dir(&www).map_err(TargetError::io("creating the docroot"))?;
            std::fs::write(www.join("index.html"), DEFAULT_INDEX)
                .map_err(TargetError::io("writing index.html"))?;
            www
        }
    };
    let expected = expected_for(&docroot, &spec.probe_path)?;
    let compression = spec.settings.compression;
    if compression.is_some() && !shows_compression(&expected) {
        return Err(TargetError::InvalidSpec(format!(
            "compression was asked but the probe file {} ({} bytes of {}) cannot show it: \
             probe a text file of at least {} bytes",
            spec.probe_path,
            expected.body.len(),
            expected.content_type,
            config::MIN_COMPRESS_BYTES
        )));
    }
    let (tls, tls_generated) = match &spec.tls {
        None => (None, false),
        Some(TlsSource::Generate) => {
            let paths = volley_tls::certs::write_local_set(&dir.join("tls"))?;
            let files = TlsFiles {
                cert: paths.cert,
                key: paths.key,
                ca: Some(paths.ca),
            };
            (Some(files), true)
        }
        Some(TlsSource::Files(f)) => {
            for p in [&f.cert, &f.key] {
                std::fs::metadata(p).map_err(TargetError::io(format!(
                    "reading the TLS file {}",
                    p.display()
                )))?;
            }
            (Some(f.clone()), false)
        }
    };
    let encodings = compression.map(|c| c.encodings()).unwrap_or_default();
    let probe_opts = match &tls {
        Some(t) => ProbeOptions::tls(t.ca.as_deref(), spec.settings.http2, encodings)?,
        None => ProbeOptions {
            encodings,
            ..ProbeOptions::default()
        },
    };
    if let (TargetKind::Builtin, Some(c)) = (kind, compression) {
        inner.created_files = precompress(&docroot, &c)?;
    }
    inner.cgroups = PrivateCgroups::create(&spec.limits)?;

    const ATTEMPTS: u32 = 5;
    for _ in 0..ATTEMPTS {
        let started_at = Instant::now();
        let launched = if kind == TargetKind::Builtin {
            launch_builtin(spec, &program, &dir, &docroot, tls.as_ref(), &mut inner)
        } else {
            launch_configured(
                spec,
                kind,
                &program,
                &dir,
                &docroot,
                tls.as_ref(),
                &mut inner,
            )
        };
        let (addr, config_text) = match launched {
            Ok(v) => v,
            Err(Launch::AddrInUse) => {
                inner.reap_for_retry();
                continue;
            }
            Err(Launch::Failed(e)) => return Err(e),
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        match wait_ready(
            &mut inner,
            &dir,
            addr,
            scheme,
            &expected,
            &probe_opts,
            spec.start_timeout,
        ) {
            Ok(validated) => {
                inner.cgroups.close_join_files();
                let pid = inner.child.as_ref().map(|c| c.id());
                return Ok(register(RunningTarget {
                    url: format!("{scheme}://{addr}/"),
                    addr,
                    pid,
                    kind,
                    version,
                    config_text,
                    dir,
                    ca_file: tls.as_ref().and_then(|t| t.ca.clone()),
                    tls,
                    http2: spec.settings.http2,
                    compression,
                    started_at,
                    ready_at: Instant::now(),
                    validated,
                    tls_generated,
                    docroot,
                    probe_opts,
                    inner: Arc::new(Mutex::new(inner)),
                }));
            }
            Err(Launch::AddrInUse) => inner.reap_for_retry(),
            Err(Launch::Failed(e)) => return Err(e),
        }
    }
    Err(TargetError::PortInUse {
        kind,
        attempts: ATTEMPTS,
    })
}

/// What the probe expects for `path` under `docroot`: the file's bytes and the
/// Content-Type every generated configuration maps its extension to.
fn expected_for(docroot: &Path, path: &str) -> Result<Expected, TargetError> {
    let file = docroot.join(path.trim_start_matches('/'));
    let body = std::fs::read(&file).map_err(TargetError::io(format!(
        "reading the probe file {}",
        file.display()
    )))?;
    Ok(Expected {
        path: path.to_string(),
        content_type: config::mime_for(path).to_string(),
        body,
    })
}

/// A file whose answer is compressed when compression is on: a text type, big enough.
fn shows_compression(e: &Expected) -> bool {
    config::is_compressible(&e.content_type) && e.body.len() as u64 >= config::MIN_COMPRESS_BYTES
}

/// Refuses, before anything is made, what `kind` cannot do here (with what to do about
/// it), so a run never measures a configuration other than the one asked for.
fn check_features(spec: &TargetSpec, kind: TargetKind) -> Result<(), TargetError> {
    let s = &spec.settings;
    let unsupported = |what: &str, fix: &str| TargetError::Unsupported {
        kind,
        what: what.to_string(),
        fix: fix.to_string(),
    };
    if s.http2 && spec.tls.is_none() {
        return Err(TargetError::InvalidSpec(
            "HTTP/2 needs TLS: volley offers h2 by ALPN only (turn TLS on)".into(),
        ));
    }
    if s.http2 && !kind.supports_http2() {
        let why = match kind {
            TargetKind::ApachePrefork => {
                "mod_http2 does not run under the prefork MPM; use apache-event"
            }
            _ => "volley does not configure HTTP/2 for it",
        };
        return Err(unsupported("offer HTTP/2", why));
    }
    if let Some(c) = &s.compression {
        if let Some(p) = c.problem() {
            return Err(TargetError::InvalidSpec(p));
        }
        if c.brotli && !kind.supports_brotli() {
            return Err(unsupported(
                "compress with Brotli",
                "Caddy 2.6 has gzip and zstd encoders only; ask gzip alone for Caddy",
            ));
        }
    }
    if spec
        .cold_path
        .as_deref()
        .is_some_and(|c| c.split('?').next() == Some(spec.probe_path.as_str()))
    {
        return Err(TargetError::InvalidSpec(format!(
            "the cold path {} is also the probe path: validation would warm it; \
             probe another file",
            spec.probe_path
        )));
    }
    // Modules packaged apart from the server.
    let tls = spec.tls.is_some();
    let brotli = s.compression.is_some_and(|c| c.brotli);
    let mut needed: Vec<(String, &str)> = Vec::new();
    match kind {
        TargetKind::Nginx if brotli => {
            for m in config::NGINX_BROTLI_MODULES {
                needed.push((
                    m.to_string(),
                    "install libnginx-mod-http-brotli-filter and -static (scripts/install-servers.sh)",
                ));
            }
        }
        TargetKind::Lighttpd if tls => needed.push((
            config::LIGHTTPD_OPENSSL_MODULE.to_string(),
            "install lighttpd-mod-openssl (scripts/install-servers.sh)",
        )),
        TargetKind::ApacheEvent | TargetKind::ApachePrefork => {
            let m = config::APACHE_MODULES_DIR;
            let fix = "Debian's apache2 package ships it; reinstall apache2";
            if tls {
                needed.push((format!("{m}/mod_ssl.so"), fix));
                needed.push((format!("{m}/mod_socache_shmcb.so"), fix));
            }
            if s.http2 {
                needed.push((format!("{m}/mod_http2.so"), fix));
            }
            if let Some(c) = &s.compression {
                needed.push((format!("{m}/mod_filter.so"), fix));
                if c.gzip {
                    needed.push((format!("{m}/mod_deflate.so"), fix));
                }
                if c.brotli {
                    needed.push((format!("{m}/mod_brotli.so"), fix));
                }
            }
        }
        _ => {}
    }
    for (path, fix) in needed {
        // A program given explicitly (tests, odd layouts) is trusted to bring its own.
        if spec.program.is_none() && !Path::new(&path).exists() {
            return Err(unsupported(&format!("load {path} (not found)"), fix));
        }
    }
    Ok(())
}

/// Writes `NAME.gz` / `NAME.br` beside each compressible file of the docroot that lacks
/// them (the built-in server serves precompressed siblings; it does not compress on the
/// fly), at the asked levels, and returns the files written so `stop` removes them.
/// Siblings already present are the caller's and are left alone. Bounded: at most
/// 10,000 files of at most 16 MiB each.
fn precompress(docroot: &Path, c: &Compression) -> Result<Vec<PathBuf>, TargetError> {
    const MAX_FILES: usize = 10_000;
    const MAX_FILE_BYTES: u64 = 16 << 20;
    let mut created = Vec::new();
    let mut stack = vec![docroot.to_path_buf()];
    let mut seen = 0;
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(TargetError::io(format!(
            "listing {} to precompress",
            dir.display()
        )))?;
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(path);
                continue;
            }
            let name = path.to_string_lossy();
            if !meta.is_file()
                || meta.len() < config::MIN_COMPRESS_BYTES
                || meta.len() > MAX_FILE_BYTES
                || !config::is_compressible(config::mime_for(&name))
            {
                continue;
            }
            seen += 1;
            if seen > MAX_FILES {
                return Ok(created);
            }
            let data = std::fs::read(&path).map_err(TargetError::io(format!(
                "reading {} to precompress",
                path.display()
            )))?;
            let mut write = |ext: &str, bytes: Vec<u8>| -> Result<(), TargetError> {
                let out = PathBuf::from(format!("{name}.{ext}"));
                if out.exists() {
                    return Ok(());
                }
                std::fs::write(&out, bytes)
                    .map_err(TargetError::io(format!("writing {}", out.display())))?;
                created.push(out);
                Ok(())
            };
            if c.gzip {
                write("gz", gzip(&data, c.gzip_level))?;
            }
            if c.brotli {
                write("br", brotli_compress(&data, c.brotli_level))?;
            }
        }
    }
    Ok(created)
}

fn gzip(data: &[u8], level: u32) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(data);
    enc.finish().unwrap_or_default()
}

fn brotli_compress(data: &[u8], quality: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let params = brotli::enc::BrotliEncoderParams {
        quality: quality as i32,
        ..Default::default()
    };
    let _ = brotli::BrotliCompress(&mut &data[..], &mut out, &params);
    out
}

/// The default probe page: more than `MIN_COMPRESS_BYTES` of text so that, with
/// compression on, the probe can see every server actually compress it.
const DEFAULT_INDEX: &str = "<!doctype html>\n<html><head><title>volley</title></head>\n\
<body>\n<h1>volley target probe page</h1>\n\
<p>volley fetches this page before any load is sent and compares it byte for byte, \
so that a fast wrong answer is never measured as a result.</p>\n\
<p>With compression on, the same page is asked for with Accept-Encoding br and gzip, \
and each answer must carry that Content-Encoding and decode to these bytes.</p>\n\
</body></html>\n";

enum Launch {
    AddrInUse,
    Failed(TargetError),
}

impl From<TargetError> for Launch {
    fn from(e: TargetError) -> Self {
        Launch::Failed(e)
    }
}

fn make_private_dir(kind: TargetKind) -> Result<PathBuf, TargetError> {
    use std::os::unix::fs::PermissionsExt;
    let base = std::env::temp_dir();
    for _ in 0..100 {
        let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("volley-{kind}-{}-{n}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => {
                // 0755: Apache's children run as www-data when volley is root and must
                // reach a docroot inside this directory.
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
                    .map_err(TargetError::io("setting the private dir's mode"))?;
                for sub in ["tmp", "data", "config"] {
                    std::fs::create_dir(dir.join(sub))
                        .map_err(TargetError::io("creating the private dir"))?;
                }
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(TargetError::Io {
                    what: format!("creating a private dir in {}", base.display()),
                    source: e,
                })
            }
        }
    }
    Err(TargetError::Io {
        what: "creating a private dir".into(),
        source: std::io::Error::other("too many name collisions"),
    })
}

/// A port that was free a moment ago. Someone may take it before the server binds it,
/// which is why the caller retries on "address in use".
fn free_port() -> Result<u16, TargetError> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(TargetError::io("finding a free port"))?;
    Ok(l.local_addr()
        .map_err(TargetError::io("finding a free port"))?
        .port())
}

/// Common process setup: own process group, output files, cgroups joined and CPUs pinned
/// before exec.
fn base_command(program: &Path, dir: &Path, inner: &Inner, limits: &ResourceLimits) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(dir).stdin(Stdio::null()).process_group(0);
    let join_fds = inner.cgroups.join_fds();
    let cpuset = limits.cpus.as_ref().map(|cpus| {
        // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET only write inside it.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in cpus {
            if c < libc::CPU_SETSIZE as usize {
                unsafe { libc::CPU_SET(c, &mut set) };
            }
        }
        set
    });
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
    // system calls (write, sched_setaffinity) on data prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            for &fd in &join_fds {
                // "0" = the writing process: join before exec so forks inherit the group.
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(set) = &cpuset {
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    cmd
}

fn spawn_err(kind: TargetKind, program: &Path, e: std::io::Error) -> TargetError {
    match e.kind() {
        std::io::ErrorKind::NotFound => TargetError::NotInstalled {
            kind,
            program: program.display().to_string(),
        },
        _ => TargetError::Io {
            what: format!(
                "starting {kind} ({}: exec, or joining its cgroup / pinning its CPUs before exec)",
                program.display()
            ),
            source: e,
        },
    }
}

fn log_file(dir: &Path, name: &str) -> Result<File, TargetError> {
    File::create(dir.join(name)).map_err(TargetError::io(format!("creating {name}")))
}

fn launch_configured(
    spec: &TargetSpec,
    kind: TargetKind,
    program: &Path,
    dir: &Path,
    docroot: &Path,
    tls: Option<&TlsFiles>,
    inner: &mut Inner,
) -> Result<(SocketAddr, String), Launch> {
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
    let placement = Placement {
        dir: dir.to_path_buf(),
        docroot: docroot.to_path_buf(),
        addr,
        as_root: config::running_as_root(),
        tls: tls.cloned(),
    };
    let text = config::render(kind, &spec.settings, &placement).unwrap_or_default();
    let conf = dir.join(config::config_file_name(kind));
    std::fs::write(&conf, &text).map_err(TargetError::io("writing the server config"))?;
    let mut cmd = base_command(program, dir, inner, &spec.limits);
    cmd.args(config::command_args(kind, dir, &conf))
        .stdout(log_file(dir, "stdout.log")?)
        .stderr(log_file(dir, "stderr.log")?);
    if kind == TargetKind::Caddy {
        // Caddy keeps state under $HOME / XDG dirs: keep it in the private dir.
        cmd.env("HOME", dir)
            .env("XDG_DATA_HOME", dir.join("data"))
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .env("GOMAXPROCS", spec.settings.workers.max(1).to_string());
    }
    let child = cmd.spawn().map_err(|e| spawn_err(kind, program, e))?;
    inner.child = Some(child);
    Ok((addr, text))
}

fn launch_builtin(
    spec: &TargetSpec,
    program: &Path,
    dir: &Path,
    docroot: &Path,
    tls: Option<&TlsFiles>,
    inner: &mut Inner,
) -> Result<(SocketAddr, String), Launch> {
    let mut cmd = base_command(program, dir, inner, &spec.limits);
    cmd.arg("serve")
        .arg("--root")
        .arg(docroot)
        .arg("--listen")
        .arg("127.0.0.1:0")
        .stdout(Stdio::piped())
        .stderr(log_file(dir, "stderr.log")?);
    let mut config_text = format!(
        "{} serve --root {} --listen 127.0.0.1:0",
        program.display(),
        docroot.display()
    );
    if !spec.settings.http2 {
        // Offer h2 only when asked, as the configured servers do: a run without
        // HTTP/2 must not have it negotiated by ALPN.
        cmd.arg("--http1-only");
        config_text += " --http1-only";
    }
    if let Some(t) = tls {
        cmd.arg("--tls-cert")
            .arg(&t.cert)
            .arg("--tls-key")
            .arg(&t.key);
        config_text += &format!(
            " --tls-cert {} --tls-key {}",
            t.cert.display(),
            t.key.display()
        );
    }
    if let Some(c) = spec.settings.compression {
        // The built-in server does not compress on the fly: it serves the `.gz` / `.br`
        // siblings `precompress` wrote before the start.
        config_text += &format!(
            "\n# compression: precompressed siblings written by volley ({})",
            c.encodings()
                .iter()
                .map(|e| match *e {
                    "br" => format!(".br at quality {}", c.brotli_level),
                    _ => format!(".gz at level {}", c.gzip_level),
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| spawn_err(TargetKind::Builtin, program, e))?;
    let stdout = child.stdout.take();
    inner.child = Some(child);
    let Some(stdout) = stdout else {
        return Err(Launch::Failed(TargetError::BadBanner {
            line: String::new(),
        }));
    };
    let mut rest = log_file(dir, "stdout.log")?;
    let (tx, rx) = std::sync::mpsc::channel();
    // Reads the banner, then keeps draining stdout into a file so the server never
    // blocks on a full pipe.
    std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut line = String::new();
        let _ = tx.send(r.read_line(&mut line).map(|_| line));
        let _ = std::io::copy(&mut r, &mut rest);
        let _ = rest.flush();
    });
    let line = match rx.recv_timeout(spec.start_timeout) {
        Ok(Ok(line)) => line,
        _ => {
            return Err(Launch::Failed(match inner.exit_status() {
                Some(status) => TargetError::Rejected {
                    kind: TargetKind::Builtin,
                    exit_status: status,
                    first_line: first_error_line(dir),
                },
                None => TargetError::StartTimeout {
                    kind: TargetKind::Builtin,
                    url: "(no banner yet)".into(),
                    timeout: spec.start_timeout,
                    last: "no 'listening on' line on stdout".into(),
                    dir: dir.to_path_buf(),
                },
            }))
        }
    };
    let addr = parse_banner(&line).ok_or_else(|| TargetError::BadBanner {
        line: line.trim_end().to_string(),
    })?;
    Ok((addr, config_text))
}

/// `listening on http://127.0.0.1:PORT/` (or `https://`) -> the address.
pub fn parse_banner(line: &str) -> Option<SocketAddr> {
    let line = line.trim();
    let rest = line
        .strip_prefix("listening on http://")
        .or_else(|| line.strip_prefix("listening on https://"))?;
    rest.trim_end_matches('/').parse().ok()
}

fn wait_ready(
    inner: &mut Inner,
    dir: &Path,
    addr: SocketAddr,
    scheme: &str,
    expected: &Expected,
    opts: &ProbeOptions,
    timeout: Duration,
) -> Result<Validated, Launch> {
    let deadline = Instant::now() + timeout;
    let mut last = String::from("not probed yet");
    let mut wrong = 0;
    loop {
        if let Some(status) = inner.exit_status() {
            let text = read_logs(dir).to_ascii_lowercase();
            if text.contains("address already in use") || text.contains("address in use") {
                return Err(Launch::AddrInUse);
            }
            return Err(Launch::Failed(TargetError::Rejected {
                kind: inner.kind,
                exit_status: status,
                first_line: first_error_line(dir),
            }));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Launch::Failed(TargetError::StartTimeout {
                kind: inner.kind,
                url: format!("{scheme}://{addr}{}", expected.path),
                timeout,
                last,
                dir: dir.to_path_buf(),
            }));
        }
        match probe::probe(addr, expected, opts, left.min(Duration::from_secs(2))) {
            Ok(v) => return Ok(v),
            Err(ProbeFailure::NotReady(e)) => {
                wrong = 0;
                last = e;
            }
            // A server may answer from a half-initialised state for a moment; three
            // wrong answers in a row are its real answer.
            Err(ProbeFailure::Wrong(e)) => {
                wrong += 1;
                if wrong >= 3 {
                    return Err(Launch::Failed(TargetError::WrongAnswer {
                        kind: inner.kind,
                        url: format!("{scheme}://{addr}{}", expected.path),
                        reason: e,
                    }));
                }
                last = e;
            }
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

fn read_logs(dir: &Path) -> String {
    ["stderr.log", "error.log", "stdout.log"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(dir.join(f)).ok())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first line of the server's output that looks like an error (servers print
/// notices first), else the first non-empty line.
fn first_error_line(dir: &Path) -> String {
    pick_error_line(&read_logs(dir))
}

/// Pure part of [`first_error_line`].
pub fn pick_error_line(text: &str) -> String {
    const MARKS: [&str; 9] = [
        "emerg", "error", "fail", "syntax", "invalid", "unknown", "cannot", "can't", "denied",
    ];
    let lines = || text.lines().map(str::trim).filter(|l| !l.is_empty());
    lines()
        .find(|l| {
            let low = l.to_ascii_lowercase();
            MARKS.iter().any(|m| low.contains(m))
        })
        .or_else(|| lines().next())
        .unwrap_or("(no output)")
        .chars()
        .take(400)
        .collect()
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// How a reaped-or-not process ended, from `waitid`'s siginfo.
fn describe_exit(code: i32, status: i32) -> String {
    match code {
        libc::CLD_EXITED => format!("exit status: {status}"),
        libc::CLD_KILLED | libc::CLD_DUMPED => {
            let name = match status {
                libc::SIGKILL => " (SIGKILL)",
                libc::SIGTERM => " (SIGTERM)",
                libc::SIGSEGV => " (SIGSEGV)",
                libc::SIGABRT => " (SIGABRT)",
                _ => "",
            };
            format!("killed by signal {status}{name}")
        }
        _ => format!("ended (code {code}, status {status})"),
    }
}

fn signal_group(pgid: u32, sig: i32) {
    if pgid > 1 {
        // SAFETY: kill has no memory effects; a negative pid addresses our child's group.
        unsafe { libc::kill(-(pgid as i32), sig) };
    }
}

impl Inner {
    /// Exit description if the main process has ended, without reaping it.
    fn exit_status(&self) -> Option<String> {
        let pid = self.child.as_ref()?.id();
        // SAFETY: siginfo_t is plain data filled in by the kernel.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        let rc = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) };
        if rc != 0 {
            return None;
        }
        // SAFETY: reading fields the kernel filled in for SIGCHLD-class siginfo.
        let (si_pid, si_status) = unsafe { (info.si_pid(), info.si_status()) };
        (si_pid != 0).then(|| describe_exit(info.si_code, si_status))
    }

    /// Kills and reaps a child whose port was taken, keeping dir and cgroups for the next
    /// attempt.
    fn reap_for_retry(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal_group(child.id(), libc::SIGKILL);
            let _ = child.wait();
        }
    }

    fn shutdown(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        if let Some(mut child) = self.child.take() {
            let pid = child.id();
            if self.exit_status().is_none() {
                signal_group(pid, libc::SIGTERM);
                let deadline = Instant::now() + self.grace;
                while Instant::now() < deadline && !exited_nowait(pid) {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            // The leader is at most a zombie here, so the group id is still ours: this
            // reaches workers that ignored SIGTERM and never anyone else.
            signal_group(pid, libc::SIGKILL);
            let _ = child.wait();
        }
        // Anything left in our private cgroups was forked by our child.
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let pids = self.cgroups.pids();
            if pids.is_empty() || Instant::now() >= deadline {
                break;
            }
            for p in pids {
                // SAFETY: see above; p is in a cgroup only our child could join.
                unsafe { libc::kill(p as i32, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.cgroups.remove();
        for f in self.created_files.drain(..) {
            let _ = std::fs::remove_file(f);
        }
        if let Some(dir) = self.dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn exited_nowait(pid: u32) -> bool {
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
    // SAFETY: as in Inner::exit_status.
    let rc = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) };
    rc == 0 && unsafe { info.si_pid() } != 0
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl RunningTarget {
    /// `Ok` while the target's main process is alive. A dead target is reported with how
    /// it ended and the end of its logs; the process stays unreaped until `stop`.
    pub fn check(&self) -> Result<(), TargetDied> {
        let inner = lock(&self.inner);
        let died = |exit_status: String, log_tail: String| TargetDied {
            kind: self.kind,
            pid: self.pid.unwrap_or(0),
            exit_status,
            log_tail,
        };
        if inner.stopped {
            return Err(died("stopped by volley".into(), String::new()));
        }
        if inner.child.is_some() {
            return match inner.exit_status() {
                None => Ok(()),
                Some(status) => Err(died(status, tail(&read_logs(&self.dir), 20))),
            };
        }
        if let Some(pid) = inner.external_pid {
            // SAFETY: signal 0 only checks existence; nothing is sent.
            let alive = unsafe { libc::kill(pid as i32, 0) } == 0
                || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
            if !alive {
                return Err(died(
                    "exited (not volley's child: status unknown)".into(),
                    String::new(),
                ));
            }
        }
        Ok(())
    }

    /// Stops the target (SIGTERM to its process group, SIGKILL after the grace period),
    /// reaps it, and removes its directory and cgroups. An external target is left
    /// running. Returns the cgroup directories that could not be removed (normally none).
    pub fn stop(self) -> Vec<PathBuf> {
        let mut inner = lock(&self.inner);
        let dirs = inner.cgroups.dirs();
        inner.shutdown();
        dirs.into_iter().filter(|d| d.exists()).collect()
    }

    /// Cumulative CFS throttling counters of the target's cpu cgroup (with a CPU quota).
    /// Take one before and one after a run and use [`ThrottleStats::since`].
    pub fn throttle_stats(&self) -> Option<ThrottleStats> {
        lock(&self.inner).cgroups.throttle_stats()
    }

    /// What to store with a run's results: the target, its configuration, the limits
    /// and cgroup settings applied, and the machine (methodology.md, "Record the
    /// environment with every run").
    pub fn record(&self, limits: &ResourceLimits) -> TargetRecord {
        TargetRecord {
            kind: self.kind,
            url: self.url.clone(),
            version: self.version.clone(),
            config_text: self.config_text.clone(),
            limits: limits.clone(),
            cgroup: self.cgroup_settings(),
            environment: crate::Environment::capture(),
            tls: self.tls.as_ref().map(|t| TlsRecord {
                generated: self.tls_generated,
                cert: t.cert.clone(),
                protocols: config::TLS_PROTOCOLS.map(String::from).to_vec(),
                alpn: if self.http2 {
                    vec!["h2".into(), "http/1.1".into()]
                } else {
                    vec!["http/1.1".into()]
                },
            }),
            http2: self.http2,
            compression: self.compression,
            encoded_probe_sizes: self.validated.encoded_sizes.clone(),
        }
    }

    /// Validates the answer for another file under the docroot with the same checks as
    /// at start (TLS, encodings, h2). For a cold measurement: request the cold path
    /// first, then call this, since validating before would have warmed it.
    pub fn validate_path(&self, path: &str) -> Result<Validated, TargetError> {
        let expected = expected_for(&self.docroot, path)?;
        let mut opts = self.probe_opts.clone();
        if !shows_compression(&expected) {
            // Small or binary files are sent identity by every server.
            opts.encodings.clear();
        }
        probe::probe(self.addr, &expected, &opts, Duration::from_secs(5)).map_err(|f| {
            let reason = match f {
                ProbeFailure::NotReady(e) | ProbeFailure::Wrong(e) => e,
            };
            TargetError::WrongAnswer {
                kind: self.kind,
                url: format!("{}{}", self.url, path.trim_start_matches('/')),
                reason,
            }
        })
    }

    /// The cgroup directories created for this target.
    pub fn cgroup_dirs(&self) -> Vec<PathBuf> {
        lock(&self.inner).cgroups.dirs()
    }

    /// The settings written into the target's cgroups, for the run's record.
    pub fn cgroup_settings(&self) -> crate::cgroup::CgroupSettings {
        lock(&self.inner).cgroups.settings.clone()
    }

    /// The `cgroup.procs` file to monitor: the private cgroup's, or the external one's.
    pub fn procs_file(&self) -> Option<PathBuf> {
        let inner = lock(&self.inner);
        inner
            .cgroups
            .procs_file()
            .or_else(|| inner.external_procs.clone())
    }
}

impl Drop for RunningTarget {
    fn drop(&mut self) {
        lock(&self.inner).shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banner_parsing() {
        assert_eq!(
            parse_banner("listening on http://127.0.0.1:40123/\n"),
            Some("127.0.0.1:40123".parse().unwrap())
        );
        assert_eq!(
            parse_banner("listening on http://[::1]:8080/"),
            Some("[::1]:8080".parse().unwrap())
        );
        assert_eq!(parse_banner("hello"), None);
        assert_eq!(parse_banner("listening on http://nowhere/"), None);
    }

    #[test]
    fn error_line_prefers_errors_over_notices() {
        let t = "\n[notice] starting\nnginx: [emerg] unknown directive \"bogus\" in /x:3\nmore\n";
        assert_eq!(
            pick_error_line(t),
            "nginx: [emerg] unknown directive \"bogus\" in /x:3"
        );
        assert_eq!(pick_error_line("just this\n"), "just this");
        assert_eq!(pick_error_line(""), "(no output)");
    }

    #[test]
    fn url_addresses() {
        assert_eq!(
            addr_of_url("http://127.0.0.1:8080/x").unwrap(),
            "127.0.0.1:8080".parse().unwrap()
        );
        assert_eq!(
            addr_of_url("http://localhost/").unwrap(),
            "127.0.0.1:80".parse().unwrap()
        );
        assert_eq!(
            addr_of_url("http://[::1]:9/").unwrap(),
            "[::1]:9".parse().unwrap()
        );
        assert!(addr_of_url("https://x/").is_err());
        assert!(addr_of_url("http://example.com/").is_err());
    }

    #[test]
    fn exit_descriptions() {
        assert_eq!(describe_exit(libc::CLD_EXITED, 1), "exit status: 1");
        assert_eq!(
            describe_exit(libc::CLD_KILLED, 9),
            "killed by signal 9 (SIGKILL)"
        );
    }

    #[test]
    fn missing_program_is_a_typed_error_and_leaves_nothing() {
        let mut spec = TargetSpec::new(TargetKind::Nginx);
        spec.program = Some(PathBuf::from("/nonexistent/nginx"));
        let e = start(&spec).unwrap_err();
        assert!(matches!(e, TargetError::NotInstalled { .. }), "{e}");
        assert!(e.to_string().contains("install-servers.sh"));
    }

    #[test]
    fn external_needs_a_url() {
        let spec = TargetSpec::new(TargetKind::External);
        assert!(matches!(start(&spec), Err(TargetError::InvalidSpec(_))));
    }

    fn refused(spec: &TargetSpec) -> TargetError {
        check_features(spec, spec.kind).unwrap_err()
    }

    #[test]
    fn features_a_kind_lacks_are_refused_with_the_reason() {
        let mut s = TargetSpec::new(TargetKind::ApachePrefork);
        s.tls = Some(TlsSource::Generate);
        s.settings.http2 = true;
        assert!(refused(&s).to_string().contains("prefork"));
        s.kind = TargetKind::ApacheEvent;
        s.program = Some(PathBuf::from("/usr/sbin/apache2"));
        assert!(check_features(&s, s.kind).is_ok());
        s.kind = TargetKind::Builtin;
        s.program = None;
        assert!(
            check_features(&s, s.kind).is_ok(),
            "the built-in server offers h2"
        );
        // h2 is negotiated by ALPN, so it needs TLS.
        s.kind = TargetKind::Nginx;
        s.tls = None;
        assert!(matches!(refused(&s), TargetError::InvalidSpec(_)));
        let mut s = TargetSpec::new(TargetKind::Caddy);
        s.settings.compression = Some(Compression::gzip_and_brotli());
        assert!(refused(&s).to_string().contains("zstd"));
        s.settings.compression = Some(Compression::gzip_only(6));
        assert!(check_features(&s, s.kind).is_ok());
        s.settings.compression = Some(Compression::gzip_only(11));
        assert!(matches!(refused(&s), TargetError::InvalidSpec(_)));
    }

    #[test]
    fn the_cold_path_must_not_be_the_probe_path() {
        let mut s = TargetSpec::new(TargetKind::Nginx);
        s.cold_path = Some("/index.html?x=1".into());
        assert!(refused(&s).to_string().contains("warm"));
        s.cold_path = Some("/cold.html".into());
        assert!(check_features(&s, s.kind).is_ok());
    }

    #[test]
    fn precompressed_siblings_round_trip_and_spare_existing_ones() {
        let dir = std::env::temp_dir().join(format!("volley-precompress-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let text = "volley precompress test line\n".repeat(20);
        std::fs::write(dir.join("a.html"), &text).unwrap();
        std::fs::write(dir.join("sub/b.css"), &text).unwrap();
        std::fs::write(dir.join("small.txt"), "tiny").unwrap();
        std::fs::write(dir.join("img.png"), &text).unwrap();
        std::fs::write(dir.join("sub/b.css.gz"), "caller's own").unwrap();
        let mut made = precompress(&dir, &Compression::gzip_and_brotli()).unwrap();
        made.sort();
        let want: Vec<PathBuf> = ["a.html.br", "a.html.gz", "sub/b.css.br"]
            .iter()
            .map(|f| dir.join(f))
            .collect();
        assert_eq!(made, want);
        let gz = std::fs::read(dir.join("a.html.gz")).unwrap();
        assert_eq!(probe::decode(&gz, "gzip").unwrap(), text.as_bytes());
        let br = std::fs::read(dir.join("sub/b.css.br")).unwrap();
        assert_eq!(probe::decode(&br, "br").unwrap(), text.as_bytes());
        assert_eq!(
            std::fs::read(dir.join("sub/b.css.gz")).unwrap(),
            b"caller's own"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn https_banner_and_urls() {
        assert_eq!(
            parse_banner("listening on https://127.0.0.1:4443/"),
            Some("127.0.0.1:4443".parse().unwrap())
        );
        assert_eq!(
            addr_of_url("https://127.0.0.1/").unwrap(),
            "127.0.0.1:443".parse().unwrap()
        );
    }
}
