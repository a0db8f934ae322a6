//! What a target is asked to be ([`TargetSpec`]), what is stored about it
//! ([`TargetRecord`]), and the checks made on a spec before anything is created: the
//! features a kind cannot offer, and what the probe will expect.

use crate::cgroup::ResourceLimits;
use crate::config::{self, Compression, ServerSettings, TlsFiles};
use crate::kind::TargetKind;
use crate::probe::Expected;
use crate::TargetError;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    /// DAV accounts created at start (`None`: no DAV).
    pub dav_users: Option<u32>,
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
    /// Start the server inside this network namespace, listening on `ip` there (a lab of
    /// `volley_netlab`); `None`: on this namespace's loopback.
    pub netns: Option<NetnsPlace>,
}

/// Where a target runs when it runs in a network namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetnsPlace {
    /// The namespace's name (`ip netns` list).
    pub ns: String,
    /// The address the server listens on inside it, reachable from volley's namespace.
    pub ip: std::net::IpAddr,
}

/// Start time allowed per DAV account beyond [`TargetSpec::start_timeout`]: about 4
/// fsyncs of ~4 ms each (the built-in server's provisioning of a home and calendar on
/// this machine's disk), doubled for a busy machine.
pub const START_PER_DAV_ACCOUNT: Duration = Duration::from_millis(40);

impl TargetSpec {
    /// How long the start may take: [`TargetSpec::start_timeout`], plus
    /// [`START_PER_DAV_ACCOUNT`] for each DAV account the server makes before it answers
    /// (the built-in server provisions every home and calendar, with their fsyncs,
    /// before its banner; 4000 accounts took longer than the 10 s default here).
    pub fn start_wait(&self) -> Duration {
        let accounts = self.settings.dav.map_or(0, |d| d.users);
        self.start_timeout + START_PER_DAV_ACCOUNT * accounts
    }

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
            netns: None,
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

/// What the probe expects for `path` under `docroot`: the file's bytes and the
/// Content-Type every generated configuration maps its extension to.
pub(super) fn expected_for(docroot: &Path, path: &str) -> Result<Expected, TargetError> {
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
pub(super) fn shows_compression(e: &Expected) -> bool {
    config::is_compressible(&e.content_type) && e.body.len() as u64 >= config::MIN_COMPRESS_BYTES
}

/// Refuses compression with a probe file that cannot show it (binary or too small):
/// the probe would pass without ever seeing an encoded answer.
pub(super) fn check_probe_shows_compression(
    spec: &TargetSpec,
    expected: &Expected,
) -> Result<(), TargetError> {
    if spec.settings.compression.is_none() || shows_compression(expected) {
        return Ok(());
    }
    Err(TargetError::InvalidSpec(format!(
        "compression was asked but the probe file {} ({} bytes of {}) cannot show it: \
         probe a text file of at least {} bytes",
        spec.probe_path,
        expected.body.len(),
        expected.content_type,
        config::MIN_COMPRESS_BYTES
    )))
}

/// Refuses, before anything is made, what `kind` cannot do here (with what to do about
/// it), so a run never measures a configuration other than the one asked for.
pub(super) fn check_features(spec: &TargetSpec, kind: TargetKind) -> Result<(), TargetError> {
    let s = &spec.settings;
    let unsupported = |what: &str, fix: &str| TargetError::Unsupported {
        kind,
        what: what.to_string(),
        fix: fix.to_string(),
    };
    crate::config::knobs::check(kind, &s.knobs, s.raw.as_deref())?;
    if !s.keep_alive && s.knobs.keepalive_requests.is_some() {
        return Err(TargetError::InvalidSpec(
            "server knob keepalive_requests needs keep-alive on".into(),
        ));
    }
    if s.http2 && spec.tls.is_none() {
        return Err(TargetError::InvalidSpec(
            "HTTP/2 needs TLS: volley offers h2 by ALPN only (turn TLS on)".into(),
        ));
    }
    if s.http3 && spec.tls.is_none() {
        return Err(TargetError::InvalidSpec(
            "HTTP/3 needs TLS: QUIC always runs TLS 1.3 (turn TLS on)".into(),
        ));
    }
    if s.http3 && !kind.supports_http3() {
        return Err(unsupported(
            "offer HTTP/3",
            "volley configures HTTP/3 for caddy and builtin only",
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
    if kind.is_caldav_server() {
        check_caldav_server(spec, kind)?;
    }
    for (path, fix) in needed_modules(spec, kind) {
        // A program given explicitly (tests, odd layouts) is trusted to bring its own.
        if spec.program.is_none() && !Path::new(&path).exists() {
            return Err(unsupported(&format!("load {path} (not found)"), fix));
        }
    }
    Ok(())
}

/// What the CalDAV servers (Radicale, Xandikos) cannot be asked: volley starts them as
/// they ship, over plain HTTP on loopback.
fn check_caldav_server(spec: &TargetSpec, kind: TargetKind) -> Result<(), TargetError> {
    let s = &spec.settings;
    let unsupported = |what: &str, fix: &str| TargetError::Unsupported {
        kind,
        what: what.to_string(),
        fix: fix.to_string(),
    };
    if spec.tls.is_some() || s.compression.is_some() {
        return Err(unsupported(
            "serve HTTPS or compress",
            "volley runs the CalDAV servers over plain HTTP without compression; drop tls and compression for it",
        ));
    }
    if spec.netns.is_some() {
        return Err(unsupported(
            "run in a lab namespace",
            "its accounts are trusted from the loopback address only; run it on loopback",
        ));
    }
    // Settings volley cannot pass on are refused, never silently dropped: a run
    // must measure the configuration it names.
    if s.workers > 1 {
        return Err(unsupported(
            "run more than one worker",
            "volley starts it as one process (Radicale: a thread per connection; Xandikos: one asyncio loop); set workers = 1",
        ));
    }
    if !s.keep_alive || s.access_log {
        return Err(unsupported(
            "switch keep-alive off or write an access log",
            "volley leaves both as the server ships them (Radicale answers HTTP/1.0 and closes; Xandikos keeps connections); drop those settings for it",
        ));
    }
    Ok(())
}

/// The module files `kind` needs for these settings that are packaged apart from the
/// server, each with how to install it.
fn needed_modules(spec: &TargetSpec, kind: TargetKind) -> Vec<(String, &'static str)> {
    let s = &spec.settings;
    let tls = spec.tls.is_some();
    let dav = s.dav.is_some();
    let brotli = s.compression.is_some_and(|c| c.brotli);
    let mut needed: Vec<(String, &'static str)> = Vec::new();
    match kind {
        TargetKind::Nginx if brotli || dav => {
            if brotli {
                for m in config::NGINX_BROTLI_MODULES {
                    needed.push((
                        m.to_string(),
                        "install libnginx-mod-http-brotli-filter and -static (scripts/install-servers.sh)",
                    ));
                }
            }
            if dav {
                needed.push((
                    config::NGINX_DAV_EXT_MODULE.to_string(),
                    "install libnginx-mod-http-dav-ext (scripts/install-servers.sh)",
                ));
            }
        }
        TargetKind::Lighttpd if tls || dav || s.compression.is_some() => {
            if s.compression.is_some() {
                needed.push((
                    config::LIGHTTPD_DEFLATE_MODULE.to_string(),
                    "install lighttpd-mod-deflate (scripts/install-servers.sh)",
                ));
            }
            if tls {
                needed.push((
                    config::LIGHTTPD_OPENSSL_MODULE.to_string(),
                    "install lighttpd-mod-openssl (scripts/install-servers.sh)",
                ));
            }
            if dav {
                needed.push((
                    config::LIGHTTPD_WEBDAV_MODULE.to_string(),
                    "install lighttpd-mod-webdav (scripts/install-servers.sh)",
                ));
            }
        }
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
            if dav {
                for module in [
                    "mod_alias.so",
                    "mod_dav.so",
                    "mod_dav_fs.so",
                    "mod_auth_basic.so",
                    "mod_authn_core.so",
                    "mod_authn_file.so",
                    "mod_authz_user.so",
                    "mod_authn_socache.so",
                    "mod_socache_shmcb.so",
                ] {
                    needed.push((format!("{m}/{module}"), fix));
                }
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
    needed
}

/// The default probe page: more than `MIN_COMPRESS_BYTES` of text so that, with
/// compression on, the probe can see every server actually compress it.
pub(super) const DEFAULT_INDEX: &str =
    "<!doctype html>\n<html><head><title>volley</title></head>\n\
<body>\n<h1>volley target probe page</h1>\n\
<p>volley fetches this page before any load is sent and compares it byte for byte, \
so that a fast wrong answer is never measured as a result.</p>\n\
<p>With compression on, the same page is asked for with Accept-Encoding br and gzip, \
and each answer must carry that Content-Encoding and decode to these bytes.</p>\n\
</body></html>\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_waits_longer_for_each_dav_account_it_makes() {
        let mut spec = TargetSpec::new(TargetKind::Builtin);
        assert_eq!(spec.start_wait(), spec.start_timeout);
        spec.settings.dav = Some(crate::DavSettings {
            users: 4000,
            seed_items: 0,
        });
        assert_eq!(
            spec.start_wait(),
            spec.start_timeout + START_PER_DAV_ACCOUNT * 4000
        );
    }
}
