//! Server side: `Arc<rustls::ServerConfig>` from PEM files, for the built-in server
//! and the in-process test servers.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;

use crate::client::{provider, ALPN_H2, ALPN_HTTP11};
use crate::{pem, TlsConfigError, VersionPolicy};

/// Resolved server TLS options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTls {
    /// Certificate chain, PEM, leaf first.
    pub cert_file: PathBuf,
    /// The leaf's private key, PEM.
    pub key_file: PathBuf,
    /// Versions accepted.
    pub versions: VersionPolicy,
    /// ALPN protocols in the server's preference order. A client that offers ALPN but
    /// none of these is refused with `no_application_protocol` (RFC 7301).
    pub alpn: Vec<String>,
    /// When set, clients must present a certificate issued by one of these roots.
    pub client_ca_file: Option<PathBuf>,
}

impl ServerTls {
    /// Options for a certificate and key, both versions, ALPN `h2` then `http/1.1`.
    pub fn new(cert_file: &Path, key_file: &Path) -> ServerTls {
        ServerTls {
            cert_file: cert_file.to_path_buf(),
            key_file: key_file.to_path_buf(),
            versions: VersionPolicy::Any,
            alpn: vec![ALPN_H2.to_string(), ALPN_HTTP11.to_string()],
            client_ca_file: None,
        }
    }

    /// Builds the rustls config. The default in-memory session store (stateful
    /// resumption for TLS 1.2 session IDs and TLS 1.3 tickets) stays on, as in
    /// nginx's and Apache's defaults, so resumption can be measured against it.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, TlsConfigError> {
        let certs = pem::load_certs(&self.cert_file)?;
        let key = pem::load_key(&self.key_file)?;
        let provider = provider();
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(self.versions.versions())?;
        let builder = match &self.client_ca_file {
            Some(ca) => {
                let roots = Arc::new(pem::load_roots(ca)?);
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(roots, provider).build()?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_single_cert(certs, key)?;
        config.alpn_protocols = self.alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
        Ok(Arc::new(config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs;

    #[test]
    fn builds_from_a_written_set_and_rejects_a_mismatched_key() {
        // A set directory not made yet, inside one removed when `tmp` drops (also when
        // an assertion fails).
        let tmp = tempfile::Builder::new()
            .prefix("volley-tls-server-")
            .tempdir()
            .unwrap();
        let paths = certs::write_local_set(&tmp.path().join("set")).unwrap();
        let config = ServerTls::new(&paths.cert, &paths.key)
            .server_config()
            .unwrap();
        assert_eq!(
            config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );

        // The CA certificate with the server's key: rustls notices they do not match.
        let err = ServerTls::new(&paths.ca, &paths.key)
            .server_config()
            .unwrap_err();
        assert!(matches!(err, TlsConfigError::Rustls(_)), "{err:?}");

        // A certificate file given as the key.
        let err = ServerTls::new(&paths.cert, &paths.cert)
            .server_config()
            .unwrap_err();
        assert!(
            matches!(err, TlsConfigError::NoPrivateKey { .. }),
            "{err:?}"
        );
    }
}
