//! Client options -> `Arc<rustls::ClientConfig>`.
//!
//! One config per engine worker: the session cache lives in the config, so every
//! connection a worker opens from it can resume a session an earlier one left (what a
//! browser or a keep-alive pool does), and workers do not contend on one cache lock.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{Resumption, WebPkiServerVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, SignatureScheme};

use crate::error::SelfSignedCert;
use crate::{der, pem, TlsConfigError};

/// ALPN identifier of HTTP/2.
pub const ALPN_H2: &str = "h2";
/// ALPN identifier of HTTP/1.1.
pub const ALPN_HTTP11: &str = "http/1.1";

/// Sessions a worker's cache keeps; rustls evicts the oldest beyond this. One server
/// per run needs one entry per protocol version; the headroom covers `--host` lists.
const SESSION_CACHE_ENTRIES: usize = 256;

/// Which TLS versions to offer (client) or accept (server): `--tls-version 1.2|1.3|any`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VersionPolicy {
    /// TLS 1.2 only.
    Tls12,
    /// TLS 1.3 only.
    Tls13,
    /// Both; the peers pick the highest common one (1.3 when both have it).
    #[default]
    Any,
}

impl VersionPolicy {
    /// The rustls protocol versions this policy allows.
    pub fn versions(self) -> &'static [&'static rustls::SupportedProtocolVersion] {
        static TLS12: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS12];
        static TLS13: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS13];
        match self {
            VersionPolicy::Tls12 => &TLS12,
            VersionPolicy::Tls13 => &TLS13,
            VersionPolicy::Any => rustls::ALL_VERSIONS,
        }
    }
}

impl FromStr for VersionPolicy {
    type Err = TlsConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "1.2" | "tls1.2" | "tlsv1.2" => Ok(VersionPolicy::Tls12),
            "1.3" | "tls1.3" | "tlsv1.3" => Ok(VersionPolicy::Tls13),
            "any" => Ok(VersionPolicy::Any),
            _ => Err(TlsConfigError::Version(s.to_string())),
        }
    }
}

impl fmt::Display for VersionPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            VersionPolicy::Tls12 => "1.2",
            VersionPolicy::Tls13 => "1.3",
            VersionPolicy::Any => "any",
        })
    }
}

/// The ring provider, the one crypto backend this crate builds (aws-lc-rs would need
/// cmake and nasm on every machine that builds volley).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Resolved client TLS options (the CLI's raw flags map onto these one to one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientTls {
    /// Versions to offer.
    pub versions: VersionPolicy,
    /// Accept any server certificate (`--insecure`): for self-signed lab targets. The
    /// handshake signatures are still checked, so the keys are still the server's.
    pub insecure: bool,
    /// PEM file of trust anchors that replaces the system store (curl's `--cacert`);
    /// `None` reads the system bundle.
    pub ca_file: Option<PathBuf>,
    /// Client certificate chain and its key (PEM), for servers that ask for one.
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// Keep a session cache so later connections resume (abbreviated handshakes);
    /// `false` makes every connection pay a full handshake.
    pub resumption: bool,
    /// ALPN protocols in preference order, e.g. `["h2", "http/1.1"]`; empty sends no
    /// ALPN extension.
    pub alpn: Vec<String>,
    /// Offer TLS 1.3 early data (0-RTT) when a resumed session allows it. Only QUIC
    /// sends any (its requests ride the first flight); over TCP nothing writes early
    /// data, so the offer changes nothing there.
    pub early_data: bool,
}

impl Default for ClientTls {
    fn default() -> Self {
        ClientTls {
            versions: VersionPolicy::Any,
            insecure: false,
            ca_file: None,
            client_cert: None,
            resumption: true,
            alpn: vec![ALPN_HTTP11.to_string()],
            early_data: false,
        }
    }
}

impl ClientTls {
    /// Builds the rustls config. Call once per worker and share it across that worker's
    /// connections (see the module docs for why).
    pub fn client_config(&self) -> Result<Arc<ClientConfig>, TlsConfigError> {
        let provider = provider();
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(self.versions.versions())?;
        let webpki = if self.insecure {
            None
        } else {
            let roots = match &self.ca_file {
                Some(path) => pem::load_roots(path)?,
                None => pem::system_roots()?,
            };
            let verifier =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone());
            Some(verifier.build()?)
        };
        let builder = builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Verifier {
                webpki,
                algorithms: provider.signature_verification_algorithms,
            }));
        let mut config = match &self.client_cert {
            Some((cert, key)) => {
                builder.with_client_auth_cert(pem::load_certs(cert)?, pem::load_key(key)?)?
            }
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = self.alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
        config.resumption = if self.resumption {
            Resumption::in_memory_sessions(SESSION_CACHE_ENTRIES)
        } else {
            Resumption::disabled()
        };
        // SNI is sent for DNS names only; rustls leaves it out for IP addresses, as
        // RFC 6066 requires.
        config.enable_sni = true;
        config.enable_early_data = self.early_data;
        Ok(Arc::new(config))
    }
}

/// Parses the host part of a URL into a TLS server name: a DNS name (sent as SNI and
/// checked against the certificate) or an IP address (checked against IP SANs, no SNI).
/// Brackets around IPv6 literals, as URLs write them, are accepted.
pub fn server_name(host: &str) -> Result<ServerName<'static>, TlsConfigError> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    ServerName::try_from(bare.to_string()).map_err(|_| TlsConfigError::ServerName(host.into()))
}

thread_local! {
    /// Server certificates this thread's verifiers were asked to check.
    static VERIFIED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many server certificates were checked on this thread so far. A resumed TLS 1.3
/// handshake checks none (the server sends no certificate), a full one checks one, so
/// a caller that drives one handshake at a time on a thread (the HTTP/3 worker, whose
/// QUIC library keeps the rustls session out of reach) tells the two apart by this
/// count before and after feeding it. A thread-local count needs no plumbing through
/// rustls and no lock.
pub fn certificates_checked_on_this_thread() -> u64 {
    VERIFIED.with(std::cell::Cell::get)
}

/// The one server-certificate verifier. With webpki, an untrusted self-signed leaf is
/// reported as such rather than as the `UnknownIssuer` webpki gives for both cases:
/// "self-signed" tells the user the fix (`--cacert` that very file, or `--insecure`).
/// Without (`--insecure`) any certificate is trusted for any name, like `curl -k`.
/// Either way handshake signatures are verified with the certificate's key (the same
/// provider algorithms webpki uses), so a benchmark pays the same public-key cost.
#[derive(Debug)]
struct Verifier {
    /// `None`: `--insecure`, named at the call site so no one mistakes it for checking.
    webpki: Option<Arc<WebPkiServerVerifier>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        VERIFIED.with(|n| n.set(n.get() + 1));
        let Some(webpki) = &self.webpki else {
            return Ok(ServerCertVerified::assertion());
        };
        let result =
            webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now);
        match result {
            Err(rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer))
                if intermediates.is_empty() && der::is_self_issued(end_entity) =>
            {
                Err(rustls::Error::InvalidCertificate(CertificateError::Other(
                    rustls::OtherError(Arc::new(SelfSignedCert)),
                )))
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_policy_parses_cli_values() {
        assert_eq!(
            "1.2".parse::<VersionPolicy>().unwrap(),
            VersionPolicy::Tls12
        );
        assert_eq!(
            "1.3".parse::<VersionPolicy>().unwrap(),
            VersionPolicy::Tls13
        );
        assert_eq!("ANY".parse::<VersionPolicy>().unwrap(), VersionPolicy::Any);
        assert!(matches!(
            "1.1".parse::<VersionPolicy>(),
            Err(TlsConfigError::Version(_))
        ));
        for p in [
            VersionPolicy::Tls12,
            VersionPolicy::Tls13,
            VersionPolicy::Any,
        ] {
            assert_eq!(p.to_string().parse::<VersionPolicy>().unwrap(), p);
        }
        assert_eq!(VersionPolicy::Any.versions().len(), 2);
    }

    #[test]
    fn server_names_from_url_hosts() {
        assert!(matches!(
            server_name("localhost").unwrap(),
            ServerName::DnsName(_)
        ));
        assert!(matches!(
            server_name("127.0.0.1").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("[::1]").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("bad host!"),
            Err(TlsConfigError::ServerName(_))
        ));
    }

    #[test]
    fn config_carries_alpn_and_resumption_choice() {
        let opts = ClientTls {
            insecure: true,
            resumption: false,
            alpn: vec![ALPN_H2.into(), ALPN_HTTP11.into()],
            ..ClientTls::default()
        };
        let config = opts.client_config().unwrap();
        assert_eq!(
            config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        assert!(config.enable_sni);
    }

    #[test]
    fn missing_ca_file_is_a_typed_error() {
        let opts = ClientTls {
            ca_file: Some("/nonexistent/volley-ca.pem".into()),
            ..ClientTls::default()
        };
        assert!(matches!(
            opts.client_config(),
            Err(TlsConfigError::Io { .. })
        ));
    }
}
