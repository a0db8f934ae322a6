//! A TLS target whose certificate the client must not trust is a wrong answer found at
//! start (named as a TLS failure), not a timeout and never a result; nothing is left
//! behind. Skipped when nginx is absent.

use volley_targets::{start, TargetError, TargetKind, TargetSpec, TlsFiles, TlsSource};

#[test]
fn certificate_from_another_ca_fails_validation_with_a_tls_reason() {
    if volley_targets::kind::find_program("nginx").is_none() {
        eprintln!("skipping: nginx is not installed (scripts/install-servers.sh)");
        return;
    }
    // The caller's certificates, removed when `tmp` drops (also when the test panics).
    let tmp = tempfile::Builder::new()
        .prefix("volley-tls-errors-")
        .tempdir()
        .unwrap();
    let base = tmp.path();
    let served = volley_tls::certs::write_local_set(&base.join("a")).unwrap();
    let other = volley_tls::certs::write_local_set(&base.join("b")).unwrap();
    let mut spec = TargetSpec::new(TargetKind::Nginx);
    spec.tls = Some(TlsSource::Files(TlsFiles {
        cert: served.cert.clone(),
        key: served.key.clone(),
        ca: Some(other.ca.clone()),
    }));
    let err = start(&spec).unwrap_err();
    match &err {
        TargetError::WrongAnswer { reason, url, .. } => {
            assert!(reason.starts_with("TLS:"), "{reason}");
            assert!(url.starts_with("https://127.0.0.1:"), "{url}");
        }
        e => panic!("expected a wrong answer, got {e}"),
    }
    // The caller's files stay; volley's private directory does not.
    assert!(served.cert.exists() && served.key.exists());
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("volley-nginx-{}-", std::process::id()))
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // The same files with the right CA pass.
    spec.tls = Some(TlsSource::Files(TlsFiles {
        cert: served.cert.clone(),
        key: served.key.clone(),
        ca: Some(served.ca.clone()),
    }));
    let t = start(&spec).unwrap();
    assert_eq!(t.ca_file.as_deref(), Some(served.ca.as_path()));
    let rec = t.record(&spec.limits);
    assert!(!rec.tls.unwrap().generated);
    t.stop();
    assert!(served.cert.exists(), "given files are the caller's");
}
