//! A serialised HTTP/1.1 request taken apart for the multiplexed protocols: the
//! HTTP/2 and HTTP/3 workers each parse a request's bytes once (per request index)
//! into method, path, authority and fields, then encode them their own way (HPACK,
//! QPACK). Request sources build HTTP/1.1 bytes because the HTTP/1.1 worker sends them
//! as they are.

/// A request's parts: `Host` becomes the authority; the other fields keep their
/// order with lower-cased names.
pub(crate) struct SplitRequest {
    pub method: String,
    pub path: String,
    pub authority: String,
    pub fields: Vec<(String, String)>,
    /// Where the body starts in the serialised request.
    pub body_start: usize,
}

/// Splits `bytes`; `None` when they are no complete HTTP/1.1 request head or a field
/// value is not UTF-8 (neither can be sent over HTTP/2 or HTTP/3).
pub(crate) fn split_request(bytes: &[u8]) -> Option<SplitRequest> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Request::new(&mut headers);
    let body_start = match parsed.parse(bytes) {
        Ok(httparse::Status::Complete(n)) => n,
        _ => return None,
    };
    let mut fields = Vec::new();
    let mut authority = String::new();
    for h in parsed.headers.iter() {
        let value = std::str::from_utf8(h.value).ok()?.to_string();
        if h.name.eq_ignore_ascii_case("host") {
            authority = value;
        } else {
            fields.push((h.name.to_ascii_lowercase(), value));
        }
    }
    Some(SplitRequest {
        method: parsed.method?.to_string(),
        path: parsed.path?.to_string(),
        authority,
        fields,
        body_start,
    })
}

/// Whether HTTP/2 and HTTP/3 forbid field `name` (lower case) with `value`
/// (RFC 9113 §8.2.2, RFC 9114 §4.2): connection-specific fields, and `te` other
/// than `trailers`.
pub(crate) fn connection_specific(name: &str, value: &str) -> bool {
    match name {
        "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade" => true,
        "te" => !value.eq_ignore_ascii_case("trailers"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_a_request_once() {
        let r = split_request(
            b"POST /a?b HTTP/1.1\r\nHost: h:1\r\nX-Y: z\r\nConnection: close\r\n\r\nbody",
        )
        .unwrap();
        assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/a?b"));
        assert_eq!(r.authority, "h:1");
        assert_eq!(r.fields[0], ("x-y".to_string(), "z".to_string()));
        assert!(connection_specific(&r.fields[1].0, &r.fields[1].1));
        assert!(!connection_specific("te", "trailers"));
        assert_eq!(r.body_start, 60);
        assert!(split_request(b"GET / HTTP/1.1\r\n").is_none());
    }
}
