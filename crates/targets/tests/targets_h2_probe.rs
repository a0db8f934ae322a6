//! The readiness probe's HTTP/2 half against a managed nginx over TLS + h2: real
//! HTTP/2 GETs (no Accept-Encoding, then gzip and br) pass and are recorded; the same
//! probe finds a wrong body, and a compression that is not on, over HTTP/2 alone.
//! Skipped when nginx is absent.

use std::path::{Path, PathBuf};
use std::time::Duration;
use volley_targets::config::{Compression, NGINX_BROTLI_MODULES};
use volley_targets::probe::{self, Expected, ProbeFailure, ProbeOptions};
use volley_targets::{start, TargetKind, TargetSpec, TlsSource};

/// A compressible page well above every server's compression threshold.
fn page() -> Vec<u8> {
    let mut p = b"<!doctype html><title>h2 probe</title>\n".to_vec();
    for i in 0..60 {
        p.extend_from_slice(format!("<p>line {i}: validated over HTTP/2</p>\n").as_bytes());
    }
    p
}

/// A docroot in its own temp dir, removed on drop.
struct Docroot {
    path: PathBuf,
    /// Removes `path` when the docroot drops.
    _guard: tempfile::TempDir,
}

impl Docroot {
    /// A fresh, empty docroot `PREFIX-XXXXXX` in the temporary directory, removed when
    /// the value drops (also when the test panics). Mode 0755 like a directory made with
    /// `create_dir`: nginx's workers may run as another user and must read it.
    fn new(prefix: &str) -> Docroot {
        use std::os::unix::fs::PermissionsExt;
        let guard = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
        std::fs::set_permissions(guard.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Docroot {
            path: guard.path().to_path_buf(),
            _guard: guard,
        }
    }
}

fn spec(www: &Path, compression: Option<Compression>) -> TargetSpec {
    let mut spec = TargetSpec::new(TargetKind::Nginx);
    spec.docroot = Some(www.to_path_buf());
    spec.tls = Some(TlsSource::Generate);
    spec.settings.http2 = true;
    spec.settings.compression = compression;
    spec
}

#[test]
fn nginx_h2_answers_are_checked_with_real_requests() {
    if volley_targets::kind::find_program("nginx").is_none() {
        eprintln!("skipping: nginx is not installed (scripts/install-servers.sh)");
        return;
    }
    let www = Docroot::new("volley-h2-probe-");
    std::fs::write(www.path.join("index.html"), page()).unwrap();
    let brotli = NGINX_BROTLI_MODULES.iter().all(|m| Path::new(m).exists());
    let compression = if brotli {
        Compression::gzip_and_brotli()
    } else {
        eprintln!("brotli part skipped: nginx's brotli module is not installed");
        Compression::gzip_only(6)
    };
    let t = start(&spec(&www.path, Some(compression))).unwrap();
    // Start validated over h2 with each encoding; the record says so.
    assert_eq!(t.validated.h2_alpn.as_deref(), Some("h2"));
    let tokens: Vec<&str> = t
        .validated
        .h2_encoded_sizes
        .iter()
        .map(|(e, _)| e.as_str())
        .collect();
    assert_eq!(tokens, compression.encodings(), "{:?}", t.validated);
    assert!(t.validated.h2_encoded_sizes.iter().all(|(_, n)| *n > 0));

    let ca = t.ca_file.clone().unwrap();
    let opts = ProbeOptions::tls(Some(&ca), true, compression.encodings()).unwrap();
    let h2 = opts.h2_check.clone().unwrap();
    let validated = t.validate_path("/index.html").unwrap();
    assert_eq!(validated.h2_alpn.as_deref(), Some("h2"));
    assert_eq!(
        validated.h2_encoded_sizes.len(),
        compression.encodings().len()
    );
    let want = Expected {
        path: "/index.html".into(),
        content_type: "text/html".into(),
        body: page(),
    };
    let ok = probe::probe_h2(t.addr, &h2, &want, &[], Duration::from_secs(5)).unwrap();
    assert_eq!(ok.h2_alpn.as_deref(), Some("h2"));
    let mut wrong_body = want.clone();
    wrong_body.body.push(b'!');
    match probe::probe_h2(t.addr, &h2, &wrong_body, &[], Duration::from_secs(5)) {
        Err(ProbeFailure::Wrong(e)) => {
            assert!(
                e.contains("over HTTP/2") && e.contains("body differs"),
                "{e}"
            )
        }
        other => panic!("expected a wrong answer, got {other:?}"),
    }
    t.stop();

    // Without compression on, asking for gzip over h2 is a wrong answer.
    let t = start(&spec(&www.path, None)).unwrap();
    let ca = t.ca_file.clone().unwrap();
    let opts = ProbeOptions::tls(Some(&ca), true, vec![]).unwrap();
    let h2 = opts.h2_check.clone().unwrap();
    match probe::probe_h2(t.addr, &h2, &want, &["gzip"], Duration::from_secs(5)) {
        Err(ProbeFailure::Wrong(e)) => assert!(e.contains("not applied"), "{e}"),
        other => panic!("expected a wrong answer, got {other:?}"),
    }
    t.stop();
}
