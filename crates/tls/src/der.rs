//! Just enough DER to read an X.509 certificate's issuer and subject names, so a
//! failed verification can say "self-signed" (issuer == subject) instead of "unknown
//! issuer". A full X.509 parser would be a heavy dependency for one comparison.
//!
//! RFC 5280: Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version OPTIONAL,
//! serialNumber INTEGER, signature AlgorithmIdentifier, issuer Name, validity Validity,
//! subject Name, ... }, ... }

const SEQUENCE: u8 = 0x30;
const VERSION_TAG: u8 = 0xa0;

/// One tag-length-value element and what follows it.
struct Tlv<'a> {
    tag: u8,
    /// The whole encoding, header included (what two names are compared on).
    whole: &'a [u8],
    content: &'a [u8],
    rest: &'a [u8],
}

/// Splits off one element; `None` on any malformed or truncated length.
fn tlv(input: &[u8]) -> Option<Tlv<'_>> {
    let (&tag, after_tag) = input.split_first()?;
    let (&first, mut after_len) = after_tag.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        // Long form: the low bits count the length bytes; four cover any certificate.
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || after_len.len() < count {
            return None;
        }
        let (len_bytes, rest) = after_len.split_at(count);
        after_len = rest;
        len_bytes
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b))
    };
    if after_len.len() < len {
        return None;
    }
    let header = input.len() - after_len.len();
    let (content, rest) = after_len.split_at(len);
    Some(Tlv {
        tag,
        whole: &input[..header + len],
        content,
        rest,
    })
}

/// The DER encodings of (issuer, subject), or `None` if `cert` is not a certificate.
pub(crate) fn issuer_and_subject(cert: &[u8]) -> Option<(&[u8], &[u8])> {
    let cert = tlv(cert).filter(|t| t.tag == SEQUENCE)?;
    let tbs = tlv(cert.content).filter(|t| t.tag == SEQUENCE)?;
    let mut fields = tbs.content;
    if fields.first() == Some(&VERSION_TAG) {
        fields = tlv(fields)?.rest;
    }
    let serial = tlv(fields)?;
    let signature_algorithm = tlv(serial.rest)?;
    let issuer = tlv(signature_algorithm.rest).filter(|t| t.tag == SEQUENCE)?;
    let validity = tlv(issuer.rest)?;
    let subject = tlv(validity.rest).filter(|t| t.tag == SEQUENCE)?;
    Some((issuer.whole, subject.whole))
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
