//! Reading certificates, keys and CA bundles from PEM files, with the file named in
//! every error (rustls-pki-types does the parsing; no rustls-pemfile needed).

use std::path::{Path, PathBuf};

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::RootCertStore;

use crate::TlsConfigError;

/// Where Debian/Ubuntu, Fedora/RHEL and Alpine/Arch keep the system CA bundle, in the
/// order tried. `SSL_CERT_FILE` (OpenSSL's variable) overrides them all.
pub const SYSTEM_BUNDLES: [&str; 3] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

fn read(path: &Path) -> Result<Vec<u8>, TlsConfigError> {
    std::fs::read(path).map_err(|source| TlsConfigError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn pem_error(path: &Path, err: pem::Error) -> TlsConfigError {
    TlsConfigError::Pem {
        path: path.to_path_buf(),
        detail: err.to_string(),
    }
}

/// Every certificate in a PEM file (leaf first, as servers and clients send them).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    certs_from_pem(&read(path)?, path)
}

/// Every certificate in PEM text; `origin` names it in errors.
pub fn certs_from_pem(
    pem_bytes: &[u8],
    origin: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    let certs = CertificateDer::pem_slice_iter(pem_bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(origin, e))?;
    if certs.is_empty() {
        return Err(TlsConfigError::NoCertificates {
            path: origin.to_path_buf(),
        });
    }
    Ok(certs)
}

/// The first private key in a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsConfigError> {
    key_from_pem(&read(path)?, path)
}

/// The first private key in PEM text; `origin` names it in errors.
pub fn key_from_pem(
    pem_bytes: &[u8],
    origin: &Path,
) -> Result<PrivateKeyDer<'static>, TlsConfigError> {
    match PrivateKeyDer::from_pem_slice(pem_bytes) {
        Ok(key) => Ok(key),
        Err(pem::Error::NoItemsFound) => Err(TlsConfigError::NoPrivateKey {
            path: origin.to_path_buf(),
        }),
        Err(e) => Err(pem_error(origin, e)),
    }
}

/// Trust anchors from a PEM file. Certificates webpki cannot use as anchors are
/// skipped (system bundles carry a few odd ones), but a file with none usable is an
/// error: a run against an empty store would fail every handshake.
pub fn load_roots(path: &Path) -> Result<RootCertStore, TlsConfigError> {
    let certs = load_certs(path)?;
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(TlsConfigError::NoCertificates {
            path: path.to_path_buf(),
        });
    }
    Ok(roots)
}

/// The system CA bundle: `SSL_CERT_FILE` if set, else the first of [`SYSTEM_BUNDLES`]
/// that exists.
pub fn system_roots() -> Result<RootCertStore, TlsConfigError> {
    if let Some(path) = std::env::var_os("SSL_CERT_FILE") {
        return load_roots(&PathBuf::from(path));
    }
    for candidate in SYSTEM_BUNDLES {
        let path = Path::new(candidate);
        if path.is_file() {
            return load_roots(path);
        }
    }
    Err(TlsConfigError::NoSystemRoots {
        tried: SYSTEM_BUNDLES.join(", "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_garbage_pem_are_typed_errors() {
        let origin = Path::new("x.pem");
        assert!(matches!(
            certs_from_pem(b"not pem at all", origin),
            Err(TlsConfigError::NoCertificates { .. })
        ));
        assert!(matches!(
            key_from_pem(b"", origin),
            Err(TlsConfigError::NoPrivateKey { .. })
        ));
        let broken = b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
        let err = certs_from_pem(broken, origin).unwrap_err();
        assert!(matches!(err, TlsConfigError::Pem { .. }), "{err:?}");
        assert!(err.to_string().starts_with("x.pem: "));
    }

    #[test]
    fn missing_file_names_the_path() {
        let err = load_certs(Path::new("/nonexistent/volley/ca.pem")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/volley/ca.pem"));
    }

    #[test]
    fn system_bundle_loads_when_present() {
        // Debian's ca-certificates package; absent on minimal images, where the
        // typed error is the expected answer.
        match system_roots() {
            Ok(roots) => assert!(!roots.is_empty()),
            Err(e) => assert!(matches!(e, TlsConfigError::NoSystemRoots { .. }), "{e}"),
        }
    }
}
