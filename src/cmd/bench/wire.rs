//! `volley bench`'s protocol flags: TLS (`https://` URLs), HTTP/2, compression, body
//! checks and the cold first request.
//!
//! Pipeline: raw flags ([`WireArgs`], flattened into `load::LoadArgs`) -> [`resolve`]
//! (files checked, a TLS client config built once so a bad CA or key is a usage
//! error, exit 2) -> [`ResolvedWire`] holding the engine's `Wire` -> after the run,
//! `volley_harness::wire::report` turns the engine's TLS/HTTP/2/HTTP/3 counters and
//! the [`pre_flight`] handshake into the summary's `WireReport` (as a study step does),
//! and [`describe_tls_failures`] names the causes in the one-line error when nothing
//! succeeded.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use volley_engine::volley_tls::{self, ClientTls, TlsSession, TlsStream, VersionPolicy};
use volley_engine::{BodySpec, Coding, ErrorKind, HttpVersion, IoPath, TlsTarget, Wire};
use volley_metrics::Summary;

use super::load::values;

/// Protocol flags of `volley bench`, as typed.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct WireArgs {
    /// https:// only: do not check the server certificate (self-signed lab targets).
    #[arg(long)]
    pub insecure: bool,
    /// https:// only: trust the CA certificates in this PEM file instead of the system store.
    #[arg(long, value_name = "PEM")]
    pub cacert: Option<PathBuf>,
    /// https:// only: client certificate chain (PEM), for servers that ask for one.
    #[arg(long, value_name = "PEM", requires = "key")]
    pub cert: Option<PathBuf>,
    /// The PEM private key of --cert.
    #[arg(long, value_name = "PEM", requires = "cert")]
    pub key: Option<PathBuf>,
    /// TLS versions to offer: 1.2, 1.3 or any [default: any].
    #[arg(long = "tls-version", value_name = "VERSION")]
    pub tls_version: Option<VersionPolicy>,
    /// TLS session resumption: on (as browsers do: later connections of a worker
    /// resume the first one's session) or off (every connection pays a full handshake)
    /// [default: on].
    #[arg(long = "tls-resume", value_enum)]
    pub tls_resume: Option<OnOff>,
    /// HTTP/3 only: 0-RTT. With on, a connection that resumes a session whose ticket
    /// allows early data sends its safe requests (GET, HEAD, OPTIONS) in the first
    /// flight, before the handshake completes; the server may refuse them (they are
    /// then sent again, counted). Needs --tls-resume on [default: off].
    #[arg(long = "early-data", value_enum)]
    pub early_data: Option<OnOff>,
    /// HTTP/2: over https:// the server must agree to h2 by ALPN; over http:// it is
    /// prior-knowledge h2c.
    #[arg(long)]
    pub h2: bool,
    /// HTTP/3 over QUIC (UDP, the URL's port): https:// only; TLS 1.3 with ALPN h3.
    #[arg(long, conflicts_with = "h2")]
    pub h3: bool,
    /// HTTP/2 or HTTP/3 streams per connection (needs --h2 or --h3) [default: 1]. A
    /// closed loop keeps connections x streams requests outstanding.
    #[arg(long, value_name = "N", value_parser = count_u32, allow_hyphen_values = true)]
    pub streams: Option<u32>,
    /// Ask for a content coding (br, gzip or zstd), check every response carries it
    /// and decode it (HTTP/1.1 and HTTP/2). A response not encoded so is an encoding
    /// error.
    #[arg(long, value_name = "CODING", value_parser = values::coding)]
    pub compressed: Option<Coding>,
    /// Every decoded body must have this SHA-256 (64 hex digits); else a validation error.
    #[arg(long = "expect-sha256", value_name = "HEX", value_parser = values::sha256)]
    pub expect_sha256: Option<[u8; 32]>,
    /// Every decoded body must be this many bytes; else a validation error.
    #[arg(long = "expect-size", value_name = "BYTES", value_parser = values::whole, allow_hyphen_values = true)]
    pub expect_size: Option<u64>,
    /// Before the run, send one request on a fresh connection and report it alone
    /// (connect, TLS, TTFB, total): the cold first request of this invocation.
    #[arg(long = "first-request")]
    pub first_request: bool,
    /// How the workers wait and move bytes: epoll; uring (io_uring: one system call
    /// per loop turn for all sends and receives); poll (ppoll over the connections at
    /// each look, none left registered: on loopback the server then runs no readiness
    /// callback of volley's per reply; for tens of connections); or auto, poll for
    /// plain http:// HTTP/1.1 up to 64 connections a thread (an open loop's
    /// --max-connections counted) and epoll otherwise. uring and poll drive plain
    /// http:// HTTP/1.1 only. Where the kernel refuses io_uring the run says so once
    /// and uses epoll [default: auto].
    #[arg(long, value_enum, value_name = "PATH")]
    pub io: Option<Io>,
}

/// `--io`: the engine's I/O path.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Io {
    /// poll for plain http:// HTTP/1.1 with up to 64 connections a thread, else epoll.
    Auto,
    /// epoll and a read and a write per request.
    Epoll,
    /// io_uring, batched submission and multishot receive.
    Uring,
    /// ppoll over the connections, none kept in epoll.
    Poll,
}

/// `on` or `off`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnOff {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

/// `--streams`: a whole number of at least 1 that fits the engine's `u32`.
fn count_u32(s: &str) -> Result<u32, String> {
    let n = values::count(s)?;
    u32::try_from(n).map_err(|_| format!("must be at most {}, got {s}", u32::MAX))
}

/// The protocol part of a plan, resolved.
#[derive(Debug, Clone)]
pub struct ResolvedWire {
    /// What the engine runs over.
    pub wire: Wire,
    /// Measure one cold request before the run.
    pub first_request: bool,
}

impl ResolvedWire {
    /// The `Accept-Encoding` header the requests must carry, if any.
    pub fn accept_encoding(&self) -> Option<&'static str> {
        self.wire.body.coding.map(Coding::token)
    }
}

/// Checks the flags against the URL's scheme and builds the engine's [`Wire`].
/// `tls` is whether the URL is https://, `host` its host (the TLS server name).
/// Errors are one-line usage messages.
pub fn resolve(a: &WireArgs, tls: bool, host: &str) -> Result<ResolvedWire, String> {
    if !tls {
        let tls_only = [
            ("--insecure", a.insecure),
            ("--cacert", a.cacert.is_some()),
            ("--cert", a.cert.is_some()),
            ("--tls-version", a.tls_version.is_some()),
            ("--tls-resume", a.tls_resume.is_some()),
        ];
        if let Some((flag, _)) = tls_only.iter().find(|(_, given)| *given) {
            return Err(format!("{flag} needs an https:// URL"));
        }
    }
    let streams = match a.streams {
        None => 1,
        Some(_) if !a.h2 && !a.h3 => return Err("--streams needs --h2 or --h3".into()),
        Some(n) => n,
    };
    if a.h3 && !tls {
        return Err("--h3 needs an https:// URL (QUIC always runs TLS 1.3)".into());
    }
    let early_data = a.early_data == Some(OnOff::On);
    if a.early_data.is_some() && !a.h3 {
        return Err("--early-data needs --h3 (over TCP volley sends no early data)".into());
    }
    if early_data && a.tls_resume == Some(OnOff::Off) {
        return Err("--early-data on needs --tls-resume on (0-RTT rides a resumed session)".into());
    }
    let io = match a.io {
        Some(Io::Uring) => IoPath::Uring,
        Some(Io::Poll) => IoPath::Poll,
        Some(Io::Epoll) => IoPath::Epoll,
        Some(Io::Auto) | None => IoPath::Auto,
    };
    if io.plain_http1_only() && (tls || a.h2 || a.h3) {
        // Refused rather than run on epoll: the result would name a path that did not
        // run, and TLS/h2/h3 through the ring or ppoll is not built.
        return Err(format!(
            "--io {} drives plain http:// HTTP/1.1 only (TLS, --h2 and --h3 use epoll)",
            io.name()
        ));
    }
    if a.h3 && a.tls_version == Some(VersionPolicy::Tls12) {
        return Err("--h3 runs TLS 1.3 only: --tls-version 1.2 cannot apply".into());
    }
    let http = if a.h2 {
        HttpVersion::H2 { streams }
    } else if a.h3 {
        HttpVersion::H3 { streams }
    } else {
        HttpVersion::Http1
    };
    let tls = if tls {
        let versions = if a.h3 {
            VersionPolicy::Tls13
        } else {
            a.tls_version.unwrap_or_default()
        };
        let resumption = a.tls_resume != Some(OnOff::Off);
        let client = ClientTls {
            versions,
            insecure: a.insecure,
            ca_file: a.cacert.clone(),
            client_cert: a.cert.clone().zip(a.key.clone()),
            resumption,
            early_data,
            ..ClientTls::default()
        };
        // Built once here so an unreadable CA, a bad key or a bad host name is the
        // user's to fix before anything runs; the engine builds its own per worker.
        client.client_config().map_err(|e| e.to_string())?;
        volley_tls::server_name(host).map_err(|e| e.to_string())?;
        Some(TlsTarget {
            client,
            server_name: host.to_string(),
        })
    } else {
        None
    };
    Ok(ResolvedWire {
        wire: Wire {
            tls,
            http,
            body: BodySpec {
                coding: a.compressed,
                expect_size: a.expect_size,
                expect_sha256: a.expect_sha256,
            },
            io,
        },
        first_request: a.first_request,
    })
}

/// What one pre-flight handshake negotiated: (version, ALPN, cipher suite).
pub use volley_harness::wire::Negotiated;

/// One blocking TLS handshake on its own connection, for the run info: the engine
/// counts failures but does not report what a successful session agreed to. Its own
/// client config, so it leaves nothing in the workers' session caches. `None` when it
/// fails (the run itself counts and names the failures).
fn negotiate(addr: SocketAddr, wire: &ResolvedWire) -> Option<Negotiated> {
    let t = wire.wire.tls.as_ref()?;
    let mut client = t.client.clone();
    client.alpn = match wire.wire.http {
        HttpVersion::H2 { .. } => vec![volley_tls::ALPN_H2.into()],
        HttpVersion::Http1 => vec![volley_tls::ALPN_HTTP11.into()],
        // The pre-flight is a TCP handshake; QUIC's is the run's own.
        HttpVersion::H3 { .. } => return None,
    };
    let config = client.client_config().ok()?;
    let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    tcp.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    tcp.set_write_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut stream = TlsStream::new(TlsSession::new(config, &t.server_name).ok()?, tcp);
    if !stream.handshake().ok()? {
        return None;
    }
    let s = stream.session();
    let out = (
        s.protocol_version().map(|v| v.name().to_string()),
        s.negotiated_alpn()
            .map(|p| String::from_utf8_lossy(p).into_owned()),
        s.cipher_suite().map(str::to_string),
    );
    let _ = stream.flush();
    Some(out)
}

/// The handshake the run info reports, done before the run (after the cold first
/// request, so that one stays the first this invocation sends).
pub fn pre_flight(addr: SocketAddr, wire: &ResolvedWire) -> Option<Negotiated> {
    negotiate(addr, wire)
}

/// What each TLS failure class means, in the words of the one-line error.
fn cause(class: &str, host: &str) -> String {
    match class {
        "cert_expired" => "certificate expired".into(),
        "unknown_issuer" => "certificate issuer not trusted: pass its CA with --cacert".into(),
        "wrong_host" => format!("certificate not valid for {host}"),
        "self_signed" => {
            "self-signed certificate not trusted: --cacert it or use --insecure".into()
        }
        "not_tls" => "the server did not answer with TLS: plain HTTP on an https:// URL?".into(),
        "alpn_mismatch" => {
            "the server did not agree to the protocol by ALPN (h2 not offered?)".into()
        }
        "alert" => "the server sent a fatal TLS alert".into(),
        other => format!("TLS error ({other})"),
    }
}

/// "100 TLS failures (certificate expired)" from the causes counted, or `None`.
pub fn describe_tls_failures(failures: &BTreeMap<String, u64>, host: &str) -> Option<String> {
    let total: u64 = failures.values().sum();
    if total == 0 {
        return None;
    }
    let causes: Vec<String> = failures
        .iter()
        .filter(|(_, &n)| n > 0)
        .map(|(k, n)| {
            if failures.len() == 1 {
                cause(k, host)
            } else {
                format!("{n}: {}", cause(k, host))
            }
        })
        .collect();
    Some(format!(
        "{total} TLS failure{} ({})",
        if total == 1 { "" } else { "s" },
        causes.join("; ")
    ))
}

/// The one-line account of a run where nothing succeeded: `errors` (from the error
/// counts) with the TLS causes named, or what an encoding or validation error means.
pub fn explain_failures(s: &Summary, errors: String, host: &str) -> String {
    let count = |k: ErrorKind| s.errors.get(k.name()).copied().unwrap_or(0);
    let tls = s
        .wire
        .as_ref()
        .and_then(|w| w.tls.as_ref())
        .and_then(|t| describe_tls_failures(&t.failures, host));
    let mut line = match tls {
        // Only TLS failures: name them instead of "100 tls errors".
        Some(t) if count(ErrorKind::Tls) == s.requests.failed => t,
        Some(t) => format!("{errors}; {t}"),
        None => errors,
    };
    if count(ErrorKind::Encoding) > 0 {
        let coding = s
            .wire
            .as_ref()
            .and_then(|w| w.compression.as_deref())
            .unwrap_or("the asked");
        line.push_str(&format!(
            " (encoding: the response was not {coding}-encoded as asked, or did not decode)"
        ));
    }
    if count(ErrorKind::Validation) > 0 {
        line.push_str(
            " (validation: the decoded body did not match --expect-size/--expect-sha256)",
        );
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> WireArgs {
        WireArgs::default()
    }

    #[test]
    fn tls_flags_need_https_and_h2_options_need_h2() {
        let a = WireArgs {
            insecure: true,
            ..args()
        };
        assert!(resolve(&a, false, "h")
            .unwrap_err()
            .contains("--insecure needs an https://"));
        let a = WireArgs {
            streams: Some(4),
            ..args()
        };
        assert!(resolve(&a, false, "h")
            .unwrap_err()
            .contains("--streams needs --h2"));
        for bad in ["0", "-1", "x", "4294967296"] {
            assert!(count_u32(bad).is_err(), "{bad}");
        }
        // Body checks work over HTTP/2 as over HTTP/1.1.
        let a = WireArgs {
            h2: true,
            compressed: Some(Coding::Gzip),
            expect_size: Some(700),
            ..args()
        };
        let w = resolve(&a, false, "h").unwrap();
        assert_eq!(w.accept_encoding(), Some("gzip"));
        assert_eq!(w.wire.body.expect_size, Some(700));
    }

    #[test]
    fn h2_without_tls_is_h2c() {
        let a = WireArgs {
            h2: true,
            streams: Some(8),
            ..args()
        };
        let w = resolve(&a, false, "127.0.0.1").unwrap();
        assert_eq!(w.wire.http, HttpVersion::H2 { streams: 8 });
        assert_eq!(volley_harness::wire::protocol(&w.wire), "h2c");
    }

    #[test]
    fn early_data_is_for_h3_with_resumption() {
        let h3 = |early: Option<OnOff>, resume: Option<OnOff>| WireArgs {
            h3: true,
            early_data: early,
            tls_resume: resume,
            ..args()
        };
        let w = resolve(&h3(Some(OnOff::On), None), true, "localhost").unwrap();
        assert!(w.wire.tls.as_ref().unwrap().client.early_data);
        let w = resolve(&h3(None, None), true, "localhost").unwrap();
        assert!(
            !w.wire.tls.as_ref().unwrap().client.early_data,
            "off unless asked"
        );
        let e = resolve(&h3(Some(OnOff::On), Some(OnOff::Off)), true, "h").unwrap_err();
        assert!(e.contains("--tls-resume on"), "{e}");
        let h1 = WireArgs {
            early_data: Some(OnOff::On),
            ..args()
        };
        let e = resolve(&h1, true, "h").unwrap_err();
        assert!(e.contains("needs --h3"), "{e}");
    }

    #[test]
    fn tls_options_resolve_and_bad_files_are_usage_errors() {
        let a = WireArgs {
            insecure: true,
            tls_version: Some(VersionPolicy::Tls13),
            tls_resume: Some(OnOff::Off),
            ..args()
        };
        let w = resolve(&a, true, "localhost").unwrap();
        let t = w.wire.tls.as_ref().unwrap();
        assert_eq!(t.client.versions, VersionPolicy::Tls13);
        assert!(!t.client.resumption && t.client.insecure);
        assert_eq!(volley_harness::wire::protocol(&w.wire), "http/1.1");
        let a = WireArgs {
            cacert: Some("/nonexistent/ca.pem".into()),
            ..args()
        };
        assert!(resolve(&a, true, "h")
            .unwrap_err()
            .contains("/nonexistent/ca.pem"));
    }

    #[test]
    fn tls_failures_are_named() {
        let mut f = BTreeMap::new();
        assert_eq!(describe_tls_failures(&f, "h"), None);
        f.insert("cert_expired".to_string(), 100);
        assert_eq!(
            describe_tls_failures(&f, "h").unwrap(),
            "100 TLS failures (certificate expired)"
        );
        f.insert("wrong_host".to_string(), 1);
        let line = describe_tls_failures(&f, "example.test").unwrap();
        assert!(line.starts_with("101 TLS failures"), "{line}");
        assert!(
            line.contains("1: certificate not valid for example.test"),
            "{line}"
        );
    }
}
