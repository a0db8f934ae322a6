//! Starting, checking and stopping one target: [`start`] resolves the program, makes the
//! private directory, docroot, certificates and cgroups, launches (`launch`), waits for
//! a validated answer and hands back a [`RunningTarget`]; `process` owns its lifetime.
//!
//! Seams: `spec` (what is asked, checked before anything is made), `precompress` (the
//! built-in server's `.gz`/`.br` siblings), `launch` (one process and its readiness),
//! `process` (death, shutdown and cleanup, the registry behind [`stop_all`]).

mod launch;
mod precompress;
mod process;
mod spec;

pub use launch::{parse_banner, pick_error_line};
pub use process::stop_all;
pub use spec::{ExternalTarget, NetnsPlace, TargetRecord, TargetSpec, TlsRecord, TlsSource};

use crate::cgroup::{PrivateCgroups, ResourceLimits, ThrottleStats};
use crate::config::{self, Compression, TlsFiles};
use crate::kind::{self, TargetKind};
use crate::orphans::Entry;
use crate::probe::{self, ProbeFailure, ProbeOptions, Validated};
use crate::{TargetDied, TargetError};
use launch::{read_logs, tail, LaunchCtx};
use precompress::precompress;
use process::{lock, register, Inner};
use spec::DEFAULT_INDEX;
use spec::{check_features, check_probe_shows_compression, expected_for, shows_compression};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    /// The DAV accounts, their calendars made and checked (`None`: no DAV asked).
    pub dav: Option<crate::dav::DavService>,
    tls_generated: bool,
    docroot: PathBuf,
    probe_opts: ProbeOptions,
    inner: Arc<Mutex<Inner>>,
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
    let mut inner = Inner::new(TargetKind::External, spec.stop_grace);
    inner.external_pid = ext.pid;
    inner.external_procs = ext.cgroup_procs.clone();
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
        dav: None,
        tls_generated: false,
        docroot: PathBuf::new(),
        probe_opts: ProbeOptions::default(),
        inner: Arc::new(Mutex::new(inner)),
    }))
}

/// `http(s)://HOST:PORT/...` -> the socket address (IP literals and `localhost` only;
/// volley sends traffic to loopback), read through the one URL type, `HttpUrl`.
fn addr_of_url(url: &str) -> Result<SocketAddr, TargetError> {
    let parsed = volley_engine::HttpUrl::parse(url)
        .map_err(|e| TargetError::InvalidSpec(format!("{url:?}: {}", e.why)))?;
    match (parsed.ip(), parsed.host().as_str()) {
        (Some(ip), _) => Ok(SocketAddr::new(ip, parsed.port())),
        (None, "localhost") => Ok(SocketAddr::from(([127, 0, 0, 1], parsed.port()))),
        (None, _) => Err(TargetError::InvalidSpec(format!(
            "{url:?}: host must be an IP address or localhost"
        ))),
    }
}

fn start_managed(spec: &TargetSpec, kind: TargetKind) -> Result<RunningTarget, TargetError> {
    check_features(spec, kind)?;
    let dav_settings = crate::dav::settings_for(kind, spec.settings.dav)?;
    let program = resolve_program(spec, kind)?;
    let version = kind::version_of(kind, &program);
    let mut inner = Inner::new(kind, spec.stop_grace);
    // From here on, dropping `inner` on an error path removes what was made. Each
    // thing is written in the ledger before it is made or used, for the sweep after a
    // crash (`orphans`).
    inner.ledger = Some(Entry::open(kind.name()));
    let dir = launch::make_private_dir(kind)?;
    inner.dir = Some(dir.clone());
    inner.note(|e| e.dir(&dir));
    let docroot = docroot_in(spec, &dir)?;
    // The CalDAV servers serve no docroot: they are ready when they answer OPTIONS,
    // and the DAV set-up below checks every calendar.
    let expected = if crate::dav::accounts_only(kind, dav_settings) {
        crate::probe::Expected {
            path: "/".into(),
            content_type: String::new(),
            body: Vec::new(),
        }
    } else {
        expected_for(&docroot, &spec.probe_path)?
    };
    let accounts = dav_settings
        .map(|d| crate::dav::accounts(kind, &d))
        .unwrap_or_default();
    let seed_items = dav_settings.map_or(0, |d| d.seed_items);
    if dav_settings.is_some() {
        crate::dav::prepare(kind, &dir, &accounts, seed_items)?;
    }
    check_probe_shows_compression(spec, &expected)?;
    let (tls, tls_generated) = tls_files(spec, &dir)?;
    let compression = spec.settings.compression;
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
        inner.note(|e| e.files(&inner.created_files));
    }
    inner.cgroups = PrivateCgroups::create(&spec.limits)?;
    inner.note(|e| e.cgroups(inner.cgroups.dirs()));
    let ctx = LaunchCtx {
        spec,
        kind,
        program: &program,
        dir: &dir,
        docroot: &docroot,
        tls: tls.as_ref(),
    };
    let ready = launch::until_ready(&ctx, &mut inner, &expected, &probe_opts)?;
    let dav = match dav_settings {
        Some(_) => {
            crate::dav::set_up(
                kind,
                ready.addr,
                &accounts,
                seed_items > 0,
                spec.start_timeout,
            )?;
            Some(crate::dav::DavService {
                // Xandikos over plain HTTP trusts X-Remote-User; every other DAV
                // target checks Basic credentials.
                checks_passwords: kind != TargetKind::Xandikos,
                calendars: match kind {
                    TargetKind::Builtin => crate::dav::CalendarSetup::UsersFile,
                    TargetKind::Radicale if seed_items > 0 => {
                        crate::dav::CalendarSetup::Seeded { items: seed_items }
                    }
                    TargetKind::Radicale => crate::dav::CalendarSetup::Mkcalendar,
                    TargetKind::Xandikos => crate::dav::CalendarSetup::FirstRequest,
                    _ => crate::dav::CalendarSetup::Directories,
                },
                accounts,
            })
        }
        None => None,
    };
    inner.cgroups.close_join_files();
    let pid = inner.child.as_ref().map(|c| c.id());
    Ok(register(RunningTarget {
        url: ready.url,
        addr: ready.addr,
        pid,
        kind,
        version,
        config_text: ready.config_text,
        dir,
        ca_file: tls.as_ref().and_then(|t| t.ca.clone()),
        tls,
        http2: spec.settings.http2,
        compression,
        started_at: ready.started_at,
        ready_at: Instant::now(),
        validated: ready.validated,
        dav,
        tls_generated,
        docroot,
        probe_opts,
        inner: Arc::new(Mutex::new(inner)),
    }))
}

/// The server binary: the one given, volley itself for builtin, else the kind's program
/// from `$PATH` and sbin.
fn resolve_program(spec: &TargetSpec, kind: TargetKind) -> Result<PathBuf, TargetError> {
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
    Ok(program)
}

/// The docroot asked, or a small private one with the default probe page.
fn docroot_in(spec: &TargetSpec, dir: &Path) -> Result<PathBuf, TargetError> {
    if let Some(d) = &spec.docroot {
        return Ok(d.clone());
    }
    let www = dir.join("www");
    std::fs::create_dir(&www).map_err(TargetError::io("creating the docroot"))?;
    std::fs::write(www.join("index.html"), DEFAULT_INDEX)
        .map_err(TargetError::io("writing index.html"))?;
    Ok(www)
}

/// The certificate files to serve, and whether volley generated them (into `dir/tls`).
fn tls_files(spec: &TargetSpec, dir: &Path) -> Result<(Option<TlsFiles>, bool), TargetError> {
    match &spec.tls {
        None => Ok((None, false)),
        Some(TlsSource::Generate) => {
            let lab_ip = spec.netns.as_ref().map(|n| n.ip);
            let paths = volley_tls::certs::write_local_set_also(&dir.join("tls"), lab_ip)?;
            let files = TlsFiles {
                cert: paths.cert,
                key: paths.key,
                ca: Some(paths.ca),
            };
            Ok((Some(files), true))
        }
        Some(TlsSource::Files(f)) => {
            for p in [&f.cert, &f.key] {
                std::fs::metadata(p).map_err(TargetError::io(format!(
                    "reading the TLS file {}",
                    p.display()
                )))?;
            }
            Ok((Some(f.clone()), false))
        }
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
    /// and cgroup settings applied, and the machine (docs/methodology.md,
    /// "Limits and the environment").
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
            dav_users: self.dav.as_ref().map(|d| d.accounts.len() as u32),
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

    /// Checks that the target answers `path` at all (2xx or 3xx to one GET), for paths
    /// no fixture file stands behind: a study or bench that loads a path the target
    /// does not have measures errors, not a server, so it is refused before the run.
    pub fn answers_path(&self, path: &str) -> Result<u16, TargetError> {
        let url = format!("{}{}", self.url, path.trim_start_matches('/'));
        let wrong = |reason: String| TargetError::WrongAnswer {
            kind: self.kind,
            url: url.clone(),
            reason,
        };
        let fetched = probe::fetch(
            self.addr,
            self.probe_opts.tls.as_ref(),
            path,
            None,
            Duration::from_secs(5),
        )
        .map_err(|f| match f {
            ProbeFailure::NotReady(e) | ProbeFailure::Wrong(e) => wrong(e),
        })?;
        let status = probe::parse_response(&fetched.raw)
            .map_err(|e| wrong(e.to_string()))?
            .status;
        if (200..400).contains(&status) {
            Ok(status)
        } else {
            Err(wrong(format!("status {status} to GET {path}")))
        }
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
    use super::process::describe_exit;
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
        // The one URL type's reading: IPv6 without a port, case, and what it refuses.
        assert_eq!(
            addr_of_url("http://[::1]/").unwrap(),
            "[::1]:80".parse().unwrap()
        );
        assert_eq!(
            addr_of_url("HTTP://LOCALHOST:81/").unwrap(),
            "127.0.0.1:81".parse().unwrap()
        );
        assert!(addr_of_url("ftp://127.0.0.1/").is_err());
        assert!(addr_of_url("http://u:p@127.0.0.1/").is_err());
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
    fn caldav_servers_refuse_settings_volley_cannot_pass_on() {
        let mut s = TargetSpec::new(TargetKind::Radicale);
        assert!(check_features(&s, s.kind).is_ok());
        s.settings.workers = 4;
        assert!(refused(&s).to_string().contains("one process"));
        s.settings.workers = 1;
        s.settings.keep_alive = false;
        assert!(refused(&s).to_string().contains("keep-alive"));
        let mut s = TargetSpec::new(TargetKind::Xandikos);
        s.settings.access_log = true;
        assert!(refused(&s).to_string().contains("access log"));
        s.settings.access_log = false;
        s.settings.compression = Some(Compression::gzip_only(6));
        assert!(refused(&s).to_string().contains("plain HTTP"));
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
        // Removed when `tmp` drops, also when an assertion fails.
        let tmp = tempfile::Builder::new()
            .prefix("volley-precompress-")
            .tempdir()
            .unwrap();
        let dir = tmp.path();
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let text = "volley precompress test line\n".repeat(20);
        std::fs::write(dir.join("a.html"), &text).unwrap();
        std::fs::write(dir.join("sub/b.css"), &text).unwrap();
        std::fs::write(dir.join("small.txt"), "tiny").unwrap();
        std::fs::write(dir.join("img.png"), &text).unwrap();
        std::fs::write(dir.join("sub/b.css.gz"), "caller's own").unwrap();
        let mut made = precompress(dir, &Compression::gzip_and_brotli()).unwrap();
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
