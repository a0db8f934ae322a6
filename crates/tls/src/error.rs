//! The two error types: one for building configurations and certificates (bad files,
//! bad options: the user fixes them before a run), one for a failed TLS session (data:
//! the engine counts every one as `ErrorKind::Tls`, the report keeps the cause).

use std::path::PathBuf;

use rustls::{AlertDescription, CertificateError, PeerMisbehaved};

/// Setting TLS up failed: a PEM file, an option, or certificate generation.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file in question.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A PEM file that should hold certificates holds none (or is not PEM at all).
    #[error("{}: no PEM certificate found", path.display())]
    NoCertificates {
        /// The file in question.
        path: PathBuf,
    },
    /// A PEM file that should hold a private key holds none.
    #[error("{}: no PEM private key found (PKCS#8, PKCS#1 or SEC1)", path.display())]
    NoPrivateKey {
        /// The file in question.
        path: PathBuf,
    },
    /// A PEM section is damaged (bad base64, missing END line).
    #[error("{}: bad PEM: {detail}", path.display())]
    Pem {
        /// The file in question.
        path: PathBuf,
        /// The parser's account.
        detail: String,
    },
    /// None of the usual system CA bundle paths exists.
    #[error("no system CA bundle found (tried {tried}); pass a CA file or use insecure mode")]
    NoSystemRoots {
        /// The paths that were tried, comma-separated.
        tried: String,
    },
    /// A host that is neither a DNS name nor an IP address.
    #[error("invalid TLS server name {0:?}")]
    ServerName(String),
    /// An unknown `--tls-version` value.
    #[error("unknown TLS version {0:?} (expected 1.2, 1.3 or any)")]
    Version(String),
    /// rustls refused the configuration (e.g. a key that does not match its certificate).
    #[error("TLS configuration rejected: {0}")]
    Rustls(#[from] rustls::Error),
    /// The CA store could not feed a verifier (e.g. it is empty).
    #[error("TLS verifier: {0}")]
    Verifier(#[from] rustls::client::VerifierBuilderError),
    /// rcgen could not make a certificate.
    #[error("certificate generation: {0}")]
    Certgen(#[from] rcgen::Error),
}

/// Why a TLS session failed, one class per cause a report wants to tell apart.
///
/// The engine counts all of them under one error kind; `name()` is the stable label for
/// per-cause counters and `Display` the one-line message for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsFailure {
    /// The server's certificate is past its notAfter date.
    #[error("server certificate expired{0}")]
    CertExpired(String),
    /// The chain does not lead to a trusted root (and the leaf is not self-signed).
    #[error("server certificate issuer is not trusted (pass its CA file, or use insecure mode)")]
    UnknownIssuer,
    /// The certificate is valid but not for the host that was asked for.
    #[error("server certificate is not valid for {0}")]
    WrongHost(String),
    /// The leaf signs itself and is not among the trusted roots.
    #[error("server certificate is self-signed and not trusted (pass it as CA file, or use insecure mode)")]
    SelfSigned,
    /// The server answered without TLS, e.g. plain HTTP on an https URL.
    #[error("server did not answer with TLS (first bytes {0:?}): plain HTTP on an https URL?")]
    NotTls(String),
    /// Client and server share no application protocol (ALPN).
    #[error("no common ALPN protocol: {0}")]
    AlpnMismatch(String),
    /// The peer sent a fatal alert.
    #[error("server sent TLS alert {0}")]
    Alert(String),
    /// Anything else: a protocol error, a closed connection mid-handshake, a bad record.
    #[error("TLS error: {0}")]
    Other(String),
}

impl TlsFailure {
    /// Stable lower-case label for per-cause counters, JSON and tables.
    pub fn name(&self) -> &'static str {
        match self {
            TlsFailure::CertExpired(_) => "cert_expired",
            TlsFailure::UnknownIssuer => "unknown_issuer",
            TlsFailure::WrongHost(_) => "wrong_host",
            TlsFailure::SelfSigned => "self_signed",
            TlsFailure::NotTls(_) => "not_tls",
            TlsFailure::AlpnMismatch(_) => "alpn_mismatch",
            TlsFailure::Alert(_) => "alert",
            TlsFailure::Other(_) => "other",
        }
    }

    /// The failure inside an `io::Error` from [`crate::TlsStream`] or the session's
    /// plaintext calls, so an event loop that sees only `io::Error` can still count it
    /// as TLS and keep its cause.
    pub fn in_io(err: &std::io::Error) -> Option<&TlsFailure> {
        err.get_ref()?.downcast_ref::<TlsFailure>()
    }

    /// Classifies an error from rustls's state machine.
    pub fn from_rustls(err: &rustls::Error) -> TlsFailure {
        use rustls::Error as E;
        match err {
            E::InvalidCertificate(cert) => from_certificate_error(cert),
            E::AlertReceived(AlertDescription::NoApplicationProtocol)
            | E::NoApplicationProtocol => {
                TlsFailure::AlpnMismatch("the server supports none of the offered protocols".into())
            }
            E::PeerMisbehaved(PeerMisbehaved::SelectedUnofferedApplicationProtocol) => {
                TlsFailure::AlpnMismatch(
                    "the server selected a protocol that was not offered".into(),
                )
            }
            E::AlertReceived(desc) => TlsFailure::Alert(alert_name(*desc)),
            other => TlsFailure::Other(other.to_string()),
        }
    }
}

fn from_certificate_error(err: &CertificateError) -> TlsFailure {
    use CertificateError as C;
    match err {
        C::Expired => TlsFailure::CertExpired(String::new()),
        C::ExpiredContext { time, not_after } => TlsFailure::CertExpired(format!(
            " ({} s ago)",
            time.as_secs().saturating_sub(not_after.as_secs())
        )),
        C::UnknownIssuer => TlsFailure::UnknownIssuer,
        C::NotValidForName => TlsFailure::WrongHost("the requested host".into()),
        C::NotValidForNameContext {
            expected,
            presented,
        } => TlsFailure::WrongHost(format!(
            "{} (it names {})",
            expected.to_str(),
            presented.join(", ")
        )),
        C::Other(other) if other.0.downcast_ref::<SelfSignedCert>().is_some() => {
            TlsFailure::SelfSigned
        }
        other => TlsFailure::Other(format!("bad server certificate: {other:?}")),
    }
}

/// rustls's Debug names (`HandshakeFailure`) in the RFC's snake case
/// (`handshake_failure`), so messages match what OpenSSL and the server logs print.
fn alert_name(desc: AlertDescription) -> String {
    let camel = format!("{desc:?}");
    let mut out = String::with_capacity(camel.len() + 4);
    for (i, ch) in camel.chars().enumerate() {
        if ch.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(ch.to_ascii_lowercase());
        } else {
            out.push(ch);
        }
    }
    out
}

/// Marker error a verifier hands rustls when an untrusted leaf signs itself, so that
/// [`TlsFailure::from_rustls`] can tell it from a leaf whose issuer is merely unknown
/// (webpki reports both as `UnknownIssuer`).
#[derive(Debug, thiserror::Error)]
#[error("self-signed certificate")]
pub(crate) struct SelfSignedCert;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn alert_names_are_snake_case() {
        assert_eq!(
            alert_name(AlertDescription::HandshakeFailure),
            "handshake_failure"
        );
        assert_eq!(
            alert_name(AlertDescription::BadCertificate),
            "bad_certificate"
        );
    }

    #[test]
    fn classifies_rustls_errors() {
        let cases = [
            (
                rustls::Error::InvalidCertificate(CertificateError::Expired),
                "cert_expired",
            ),
            (
                rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
                "unknown_issuer",
            ),
            (
                rustls::Error::InvalidCertificate(CertificateError::NotValidForName),
                "wrong_host",
            ),
            (
                rustls::Error::InvalidCertificate(CertificateError::Other(rustls::OtherError(
                    Arc::new(SelfSignedCert),
                ))),
                "self_signed",
            ),
            (
                rustls::Error::AlertReceived(AlertDescription::NoApplicationProtocol),
                "alpn_mismatch",
            ),
            (
                rustls::Error::AlertReceived(AlertDescription::ProtocolVersion),
                "alert",
            ),
            (rustls::Error::DecryptError, "other"),
        ];
        for (err, name) in cases {
            assert_eq!(TlsFailure::from_rustls(&err).name(), name, "{err:?}");
        }
    }

    #[test]
    fn messages_are_one_line() {
        let f = TlsFailure::from_rustls(&rustls::Error::AlertReceived(
            AlertDescription::ProtocolVersion,
        ));
        assert_eq!(f.to_string(), "server sent TLS alert protocol_version");
        assert!(!TlsFailure::SelfSigned.to_string().contains('\n'));
    }
}
