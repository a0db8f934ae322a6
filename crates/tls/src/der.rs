//! A certificate's issuer and subject names, so a failed verification can say
//! "self-signed" (issuer == subject) instead of "unknown issuer". Read with
//! rustls-webpki (already rustls's verifier), whose `Cert` exposes both names as DER.

use rustls_pki_types::CertificateDer;

/// The DER encodings of (issuer, subject), without their outer SEQUENCE header, or
/// `None` if `cert` is not a certificate webpki can parse.
pub(crate) fn issuer_and_subject(cert: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let der = CertificateDer::from(cert);
    let parsed = webpki::EndEntityCert::try_from(&der).ok()?;
    Some((parsed.issuer().to_vec(), parsed.subject().to_vec()))
}

/// Whether the certificate names itself as its issuer. Unparseable input is "no":
/// the caller then keeps webpki's own verdict.
pub(crate) fn is_self_issued(cert: &[u8]) -> bool {
    matches!(issuer_and_subject(cert), Some((issuer, subject)) if issuer == subject)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs;

    #[test]
    fn self_signed_and_ca_signed_are_told_apart() {
        let own = certs::self_signed_server(&["localhost"]).unwrap();
        assert!(is_self_issued(own.cert_der()));

        let ca = certs::Authority::new().unwrap();
        assert!(is_self_issued(ca.cert_der()), "a root CA is self-issued");
        let leaf = ca.server(&["localhost"]).unwrap();
        assert!(!is_self_issued(leaf.cert_der()));
        let (issuer, _) = issuer_and_subject(leaf.cert_der()).unwrap();
        let (_, ca_subject) = issuer_and_subject(ca.cert_der()).unwrap();
        assert_eq!(issuer, ca_subject);
    }

    #[test]
    fn garbage_and_truncation_are_not_certificates() {
        assert_eq!(issuer_and_subject(b""), None);
        assert_eq!(
            issuer_and_subject(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]),
            None
        );
        assert_eq!(issuer_and_subject(&[0x30, 0x80]), None);
        let own = certs::self_signed_server(&["localhost"]).unwrap();
        let der = own.cert_der();
        for cut in [1, 10, der.len() / 2, der.len() - 1] {
            // A cut certificate may still parse its early fields but never panics.
            let _ = issuer_and_subject(&der[..cut]);
        }
        assert!(!is_self_issued(&der[..der.len() / 4]));
    }
}
