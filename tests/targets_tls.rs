//! Managed targets over HTTPS: nginx, Apache (event; prefork without h2), lighttpd, Caddy and the built-in
//! server, each started by volley with a throw-away CA on a free loopback port,
//! validated by the start probe (TLS with the CA, each asked Content-Encoding decoded,
//! h2 by ALPN), then checked again from outside with curl (an independent TLS client
//! that trusts only the CA): HTTP/1.1 body, h2 where the server supports it, gzip
//! applied, br applied where configured. Everything is stopped and removed afterwards.
//! A server whose binary is absent is skipped with a message.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use volley_targets::probe::{self, ProbeOptions};
use volley_targets::{start, Compression, TargetError, TargetKind, TargetSpec, TlsSource};

/// A compressible page well above every server's compression threshold.
fn page() -> Vec<u8> {
    let mut p = b"<!doctype html><title>tls</title>\n".to_vec();
    for i in 0..40 {
        p.extend_from_slice(format!("<p>line {i}: volley over TLS, compressed</p>\n").as_bytes());
    }
    p
}

/// A small docroot in its own temp dir (removed on drop).
struct Docroot(crate::common::TestDir);

impl Docroot {
    fn new(tag: &str) -> Docroot {
        let d = crate::common::fresh_dir(&format!("volley-tls-www-{tag}"));
        std::fs::write(d.join("index.html"), page()).unwrap();
        std::fs::write(d.join("cold.html"), page()).unwrap();
        Docroot(d)
    }
}

fn installed(kind: TargetKind) -> bool {
    match kind.program() {
        Some(p) if volley_targets::kind::find_program(p).is_none() => {
            eprintln!("skipping {kind}: {p} is not installed (scripts/install-servers.sh)");
            false
        }
        _ => true,
    }
}

fn curl_present() -> bool {
    if Path::new("/usr/bin/curl").exists() {
        return true;
    }
    eprintln!("curl absent: only volley's own TLS probe checks the answers");
    false
}

/// `curl` trusting only `ca`: returns (headers, body, http_version).
fn curl(ca: &Path, url: &str, extra: &[&str]) -> (String, Vec<u8>, String) {
    let dir = crate::common::fresh_dir("volley-tls-curl");
    let head = dir.join("head");
    let body = dir.join("body");
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "5", "--cacert"])
        .arg(ca)
        .arg("-D")
        .arg(&head)
        .arg("-o")
        .arg(&body)
        .args(["-w", "%{http_version}"])
        .args(extra)
        .arg(url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "curl {url} {extra:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let h = std::fs::read_to_string(&head).unwrap().to_ascii_lowercase();
    let b = std::fs::read(&body).unwrap();
    (h, b, String::from_utf8_lossy(&out.stdout).into_owned())
}

fn gone(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

fn brotli_for(kind: TargetKind) -> bool {
    match kind {
        TargetKind::Nginx => volley_targets::config::NGINX_BROTLI_MODULES
            .iter()
            .all(|m| Path::new(m).exists()),
        k => k.supports_brotli(),
    }
}

fn run_tls(kind: TargetKind) {
    if !installed(kind) {
        return;
    }
    let www = Docroot::new(kind.name());
    let mut spec = TargetSpec::new(kind);
    spec.docroot = Some(www.0.to_path_buf());
    spec.tls = Some(TlsSource::Generate);
    spec.cold_path = Some("/cold.html".into());
    spec.settings.http2 = kind.supports_http2();
    let brotli = brotli_for(kind);
    spec.settings.compression = Some(Compression {
        brotli,
        ..Compression::gzip_and_brotli()
    });
    spec.volley_exe = Some(PathBuf::from(env!("CARGO_BIN_EXE_volley")));
    let t = match start(&spec) {
        Ok(t) => t,
        Err(e) => panic!("{kind}: {e}"),
    };
    let pid = t.pid.unwrap();
    let dir = t.dir.clone();
    assert!(t.url.starts_with("https://127.0.0.1:"), "{}", t.url);
    assert!(t.started_at <= t.ready_at);
    let ca = t.ca_file.clone().expect("a generated CA");
    assert!(ca.starts_with(&dir), "the CA lives in the private dir");

    // What the start probe saw, kept for the run's record.
    let encodings: Vec<&str> = t
        .validated
        .encoded_sizes
        .iter()
        .map(|(e, _)| e.as_str())
        .collect();
    let want_enc: Vec<&str> = if brotli {
        vec!["br", "gzip"]
    } else {
        vec!["gzip"]
    };
    assert_eq!(encodings, want_enc, "{kind}");
    eprintln!(
        "{kind}: {} B page; on the wire {:?}; spawn to validated {:?}",
        page().len(),
        t.validated.encoded_sizes,
        t.ready_at - t.started_at
    );
    for (e, wire) in &t.validated.encoded_sizes {
        assert!(*wire < page().len(), "{kind}: {e} body not smaller");
    }
    let rec = t.record(&spec.limits);
    assert!(rec.tls.as_ref().is_some_and(|r| r.generated));
    assert_eq!(rec.http2, kind.supports_http2());
    assert_eq!(rec.compression, spec.settings.compression);
    if kind.supports_http2() {
        assert_eq!(t.validated.h2_alpn.as_deref(), Some("h2"), "{kind}");
        assert_eq!(rec.tls.as_ref().unwrap().alpn[0], "h2");
    }

    // volley's own client, trusting the CA: HTTP/1.1 identity body.
    let opts = ProbeOptions::tls(Some(&ca), false, Vec::new()).unwrap();
    let f = probe::fetch(
        t.addr,
        opts.tls.as_ref(),
        "/index.html",
        None,
        Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(f.alpn.as_deref().unwrap_or("http/1.1"), "http/1.1");
    let r = probe::parse_response(&f.raw).unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, page().as_slice()));

    // The cold file was never requested by validation; check its answer afterwards.
    t.validate_path("/cold.html").unwrap();

    if curl_present() {
        let url = format!("{}index.html", t.url);
        let (h, body, v) = curl(&ca, &url, &["--http1.1"]);
        assert_eq!((v.as_str(), body.as_slice()), ("1.1", page().as_slice()));
        assert!(!h.contains("content-encoding"), "{kind}: {h}");
        let (h, body, _) = curl(&ca, &url, &["--http1.1", "-H", "Accept-Encoding: gzip"]);
        assert!(h.contains("content-encoding: gzip"), "{kind}: {h}");
        assert_ne!(body, page());
        assert_eq!(probe::decode(&body, "gzip").unwrap(), page());
        if brotli {
            let (h, body, _) = curl(&ca, &url, &["--http1.1", "-H", "Accept-Encoding: br"]);
            assert!(h.contains("content-encoding: br"), "{kind}: {h}");
            assert_eq!(probe::decode(&body, "br").unwrap(), page());
        }
        let (_, body, v) = curl(&ca, &url, &["--http2"]);
        let want_v = if kind.supports_http2() { "2" } else { "1.1" };
        assert_eq!(v, want_v, "{kind}: HTTP version over ALPN");
        assert_eq!(body, page());
    }

    t.check().unwrap();
    assert!(t.stop().is_empty());
    assert!(gone(pid), "{kind}: pid {pid} still there");
    assert!(!dir.exists(), "{kind}: {} left behind", dir.display());
    // The built-in server's precompressed siblings are volley's and are removed too.
    assert!(!www.0.join("index.html.gz").exists());
    assert!(!www.0.join("index.html.br").exists());
    assert!(www.0.join("index.html").exists());
}

#[test]
fn nginx_over_tls_h2_gzip_brotli() {
    run_tls(TargetKind::Nginx);
}

#[test]
fn apache_event_over_tls_h2_gzip_brotli() {
    run_tls(TargetKind::ApacheEvent);
}

#[test]
fn apache_prefork_over_tls_gzip_brotli_without_h2() {
    run_tls(TargetKind::ApachePrefork);
}

#[test]
fn lighttpd_over_tls_h2_gzip_brotli() {
    run_tls(TargetKind::Lighttpd);
}

#[test]
fn caddy_over_tls_h2_gzip() {
    run_tls(TargetKind::Caddy);
}

#[test]
fn builtin_over_tls_with_precompressed_siblings() {
    run_tls(TargetKind::Builtin);
}

#[test]
fn unsupported_combinations_are_refused_before_anything_starts() {
    let mut spec = TargetSpec::new(TargetKind::ApachePrefork);
    spec.tls = Some(TlsSource::Generate);
    spec.settings.http2 = true;
    let e = start(&spec).unwrap_err();
    assert!(matches!(e, TargetError::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("prefork"), "{e}");

    let mut spec = TargetSpec::new(TargetKind::Caddy);
    spec.settings.compression = Some(Compression::gzip_and_brotli());
    let e = start(&spec).unwrap_err();
    assert!(e.to_string().contains("gzip and zstd"), "{e}");

    let mut spec = TargetSpec::new(TargetKind::Nginx);
    spec.settings.http2 = true;
    assert!(matches!(start(&spec), Err(TargetError::InvalidSpec(_))));
}
