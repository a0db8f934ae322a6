//! Throw-away certificates (rcgen) for the targets volley manages.
//!
//! A lab run over TLS needs a server certificate the client can verify without
//! `--insecure` (verification is part of the cost being measured). [`write_local_set`]
//! makes a fresh CA and a server certificate for `localhost`, `127.0.0.1` and `::1`,
//! and writes `ca.pem`, `server.pem`, `server.key` for nginx, Apache, lighttpd, Caddy or
//! the built-in server; the client trusts `ca.pem`. The broken variants (expired, wrong
//! host, self-signed) feed the tests and volley's bad-input checks.
//!
//! Keys are ECDSA P-256: every server above accepts them and they are cheap to make.

use std::io::Write;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use time::{Duration, OffsetDateTime};

use crate::TlsConfigError;

/// The names a local target answers to.
pub const LOCAL_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The only name in a wrong-host certificate. `.invalid` is reserved (RFC 2606), so it
/// can never be a real host a run targets.
pub const WRONG_HOST: &str = "wrong-host.invalid";

/// File names [`write_local_set`] uses inside its directory.
pub const CA_FILE: &str = "ca.pem";
/// See [`CA_FILE`].
pub const SERVER_CERT_FILE: &str = "server.pem";
/// See [`CA_FILE`].
pub const SERVER_KEY_FILE: &str = "server.key";

/// A certificate with its private key, as DER and PEM.
#[derive(Clone)]
pub struct Issued {
    cert_der: Vec<u8>,
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its private key, PKCS#8 PEM.
    pub key_pem: String,
}

impl std::fmt::Debug for Issued {
    /// The certificate only: keys stay out of logs and test output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

impl Issued {
    fn new(cert: &rcgen::Certificate, key: &KeyPair) -> Issued {
        Issued {
            cert_der: cert.der().to_vec(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    /// The certificate's DER bytes.
    pub fn cert_der(&self) -> &[u8] {
        &self.cert_der
    }

    /// Writes `<stem>.pem` (certificate) and `<stem>.key` (key, mode 0600) into `dir`
    /// and returns their paths.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<(PathBuf, PathBuf), TlsConfigError> {
        let cert = dir.join(format!("{stem}.pem"));
        let key = dir.join(format!("{stem}.key"));
        write_file(&cert, self.cert_pem.as_bytes(), false)?;
        write_file(&key, self.key_pem.as_bytes(), true)?;
        Ok((cert, key))
    }
}

/// A throw-away certificate authority that issues the other certificates.
pub struct Authority {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl std::fmt::Debug for Authority {
    /// The certificate only: the key stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority")
            .field("pem", &self.cert.pem())
            .finish_non_exhaustive()
    }
}

/// What a certificate is for, which sets its extended key usage.
#[derive(Clone, Copy)]
enum Purpose {
    Server,
    Client,
}

impl Authority {
    /// A new CA valid from yesterday for ten years (yesterday absorbs clock skew
    /// between the machine that makes it and the one that checks it).
    pub fn new() -> Result<Authority, TlsConfigError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        // A name of its own per CA: verifiers find issuers by name, so two volley CAs
        // with one name would make a certificate from the other look forged
        // (BadSignature) instead of untrusted (UnknownIssuer).
        let id: String = key
            .public_key_raw()
            .iter()
            .skip(1) // the point-format byte, the same in every P-256 key
            .take(6)
            .map(|b| format!("{b:02x}"))
            .collect();
        params.distinguished_name = dn(&format!("volley throw-away CA {id}"));
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let now = OffsetDateTime::now_utc();
        params.not_before = now - Duration::days(1);
        params.not_after = now + Duration::days(3650);
        let cert = params.self_signed(&key)?;
        Ok(Authority { cert, key })
    }

    /// The CA certificate, PEM: what a client trusts (`ca.pem`).
    pub fn cert_pem(&self) -> String {
        self.cert.pem()
    }

    /// The CA certificate's DER bytes.
    pub fn cert_der(&self) -> &[u8] {
        self.cert.der()
    }

    /// A server certificate for `names` (DNS names or IP addresses), valid from
    /// yesterday for a year.
    pub fn server(&self, names: &[&str]) -> Result<Issued, TlsConfigError> {
        let now = OffsetDateTime::now_utc();
        self.issue(
            names,
            Purpose::Server,
            now - Duration::days(1),
            now + Duration::days(365),
        )
    }

    /// A server certificate for `names` whose validity ended yesterday.
    pub fn expired_server(&self, names: &[&str]) -> Result<Issued, TlsConfigError> {
        let now = OffsetDateTime::now_utc();
        self.issue(
            names,
            Purpose::Server,
            now - Duration::days(30),
            now - Duration::days(1),
        )
    }

    /// A valid server certificate that names only [`WRONG_HOST`].
    pub fn wrong_host_server(&self) -> Result<Issued, TlsConfigError> {
        self.server(&[WRONG_HOST])
    }

    /// A client certificate (clientAuth) for servers that require one.
    pub fn client(&self, name: &str) -> Result<Issued, TlsConfigError> {
        let now = OffsetDateTime::now_utc();
        self.issue(
            &[name],
            Purpose::Client,
            now - Duration::days(1),
            now + Duration::days(365),
        )
    }

    fn issue(
        &self,
        names: &[&str],
        purpose: Purpose,
        not_before: OffsetDateTime,
        not_after: OffsetDateTime,
    ) -> Result<Issued, TlsConfigError> {
        let key = KeyPair::generate()?;
        let mut params = leaf_params(names, purpose)?;
        params.not_before = not_before;
        params.not_after = not_after;
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &self.cert, &self.key)?;
        Ok(Issued::new(&cert, &key))
    }
}

fn dn(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn.push(DnType::OrganizationName, "volley");
    dn
}

fn leaf_params(names: &[&str], purpose: Purpose) -> Result<CertificateParams, TlsConfigError> {
    let owned: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut params = CertificateParams::new(owned)?;
    params.distinguished_name = dn(names.first().copied().unwrap_or("volley"));
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![match purpose {
        Purpose::Server => ExtendedKeyUsagePurpose::ServerAuth,
        Purpose::Client => ExtendedKeyUsagePurpose::ClientAuth,
    }];
    Ok(params)
}

/// A server certificate for `names` that signs itself (no CA): what a hand-made
/// `openssl req -x509` certificate looks like to a client.
pub fn self_signed_server(names: &[&str]) -> Result<Issued, TlsConfigError> {
    let key = KeyPair::generate()?;
    let mut params = leaf_params(names, Purpose::Server)?;
    let now = OffsetDateTime::now_utc();
    params.not_before = now - Duration::days(1);
    params.not_after = now + Duration::days(365);
    let cert = params.self_signed(&key)?;
    Ok(Issued::new(&cert, &key))
}

/// Paths of a written certificate set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertPaths {
    /// The CA certificate the client trusts.
    pub ca: PathBuf,
    /// The server certificate.
    pub cert: PathBuf,
    /// The server's private key.
    pub key: PathBuf,
}

/// Makes a fresh CA and a server certificate for [`LOCAL_NAMES`] and writes
/// `ca.pem`, `server.pem` and `server.key` into `dir` (created if missing).
pub fn write_local_set(dir: &Path) -> Result<CertPaths, TlsConfigError> {
    write_local_set_also(dir, None)
}

/// [`write_local_set`], the certificate also naming `also`: the address of a server in
/// a network namespace volley made, which a client there reaches it by (the loopback
/// names alone made every TLS check of a lab's target fail).
pub fn write_local_set_also(
    dir: &Path,
    also: Option<std::net::IpAddr>,
) -> Result<CertPaths, TlsConfigError> {
    std::fs::create_dir_all(dir).map_err(|source| TlsConfigError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let ca = Authority::new()?;
    let extra = also.map(|ip| ip.to_string());
    let mut names: Vec<&str> = LOCAL_NAMES.to_vec();
    names.extend(extra.as_deref());
    let server = ca.server(&names)?;
    let ca_path = dir.join(CA_FILE);
    write_file(&ca_path, ca.cert_pem().as_bytes(), false)?;
    let cert = dir.join(SERVER_CERT_FILE);
    let key = dir.join(SERVER_KEY_FILE);
    write_file(&cert, server.cert_pem.as_bytes(), false)?;
    write_file(&key, server.key_pem.as_bytes(), true)?;
    Ok(CertPaths {
        ca: ca_path,
        cert,
        key,
    })
}

/// Writes a file; private keys get mode 0600 from creation on (never world-readable,
/// not even for an instant). Servers read their keys as root before dropping privileges.
fn write_file(path: &Path, bytes: &[u8], private: bool) -> Result<(), TlsConfigError> {
    let io_err = |source| TlsConfigError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(if private { 0o600 } else { 0o644 });
    }
    #[cfg(not(unix))]
    let _ = private;
    let mut file = options.open(path).map_err(io_err)?;
    file.write_all(bytes).map_err(io_err)?;
    file.sync_all().map_err(io_err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pem;

    #[test]
    fn local_set_round_trips_through_pem_loading() {
        // A set directory not made yet, inside one removed when `tmp` drops (also when
        // an assertion fails).
        let tmp = tempfile::Builder::new()
            .prefix("volley-tls-certs-set-")
            .tempdir()
            .unwrap();
        let dir = tmp.path().join("set");
        let paths = write_local_set(&dir).unwrap();
        assert_eq!(paths.ca, dir.join("ca.pem"));
        assert_eq!(pem::load_certs(&paths.cert).unwrap().len(), 1);
        assert!(pem::load_key(&paths.key).is_ok());
        assert_eq!(pem::load_roots(&paths.ca).unwrap().len(), 1);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&paths.key).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn debug_output_leaves_the_key_out() {
        let issued = self_signed_server(&["localhost"]).unwrap();
        let shown = format!("{issued:?}");
        assert!(shown.contains("BEGIN CERTIFICATE"));
        assert!(!shown.contains("PRIVATE KEY"), "{shown}");
    }

    #[test]
    fn unwritable_dir_is_a_typed_error() {
        let err = write_local_set(Path::new("/proc/volley-no-such-dir")).unwrap_err();
        assert!(matches!(err, TlsConfigError::Io { .. }), "{err:?}");
    }

    #[test]
    fn bad_names_are_typed_errors() {
        let ca = Authority::new().unwrap();
        assert!(matches!(
            ca.server(&["caf\u{e9}.example"]),
            Err(TlsConfigError::Certgen(_))
        ));
    }
}
