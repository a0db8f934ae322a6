//! What to answer a static GET/HEAD, decided once for both protocols.
//!
//! Place in the flow: between the request (parsed HTTP/1.1 head or decoded HTTP/2
//! header block) and the framing. [`decide`] picks the status, the representation
//! (identity or a precompressed sibling) and the byte range; the HTTP/1.1 writer in
//! `respond` and [`render`] (HTTP/2 and HTTP/3, through a [`Block`]) only differ in
//! how they put that decision on the wire, so every protocol answers with the same
//! statuses, types, validators and lengths.

use crate::files::{accepts_encoding, none_match, parse_range, Cache, Kind, RangeReq, Variant};
use std::fs::File;
use std::sync::Arc;
use std::time::Instant;

/// How a response head's fields are encoded: HTTP/2's HPACK or HTTP/3's QPACK. Both
/// encoders here are stateless (no dynamic table), so a head is only bytes appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Codec {
    /// HTTP/2 (RFC 7541).
    Hpack,
    /// HTTP/3 (RFC 9204), field lines only: the section prefix is the framing's.
    Qpack,
}

/// A response head being encoded for HTTP/2 or HTTP/3.
pub(crate) struct Block<'a> {
    /// The encoding.
    pub codec: Codec,
    /// Where the encoded fields go.
    pub out: &'a mut Vec<u8>,
    /// The Alt-Svc value every answer carries (HTTP/3 offered beside HTTP/2), if any.
    pub alt_svc: Option<&'a [u8]>,
}

impl Block<'_> {
    /// Appends one field (`name` lower-case).
    pub fn field(&mut self, name: &[u8], value: &[u8]) {
        match self.codec {
            Codec::Hpack => volley_h2::hpack::encode_field(name, value, self.out),
            Codec::Qpack => volley_h3::qpack::encode_field(name, value, self.out),
        }
    }

    /// Appends a variant's representation fields, encoded once by the cache.
    fn meta(&mut self, v: &Variant) {
        self.out.extend_from_slice(match self.codec {
            Codec::Hpack => &v.h2_meta,
            Codec::Qpack => &v.h3_meta,
        });
    }
}

/// A response body still to send.
pub(crate) enum Body {
    /// Nothing (or all of it sent).
    None,
    /// Bytes `[pos, end)` of an in-memory body.
    Mem(Arc<[u8]>, usize, usize),
    /// Bytes `[pos, end)` of an open file.
    File(File, u64, u64),
}

/// The reason phrase of a status (HTTP/1.1 status lines and the text bodies): the
/// `http` crate's table of registered names, one table for both built-in servers;
/// clients must not depend on it (RFC 9112 section 4), so a code it lacks gets a neutral
/// word.
pub(crate) fn reason(status: u16) -> &'static str {
    http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Unknown")
}

/// The body of a short text answer: `404 Not Found\n` (none for 304).
pub(crate) fn text_body(status: u16) -> String {
    if status == 304 {
        String::new()
    } else {
        format!("{status} {}\n", reason(status))
    }
}

/// The path part of a target: absolute-form (`http://host/p`) reduced to `/p`, query and
/// fragment dropped.
pub(crate) fn path_of(target: &[u8]) -> &[u8] {
    let mut t = target;
    for scheme in [&b"http://"[..], b"https://"] {
        if t.len() > scheme.len() && t[..scheme.len()].eq_ignore_ascii_case(scheme) {
            let rest = &t[scheme.len()..];
            t = match rest.iter().position(|&b| b == b'/') {
                Some(i) => &rest[i..],
                None => b"/",
            };
            break;
        }
    }
    let end = t
        .iter()
        .position(|&b| b == b'?' || b == b'#')
        .unwrap_or(t.len());
    &t[..end]
}

/// The decision for one static request, borrowing the cached representation.
pub(crate) enum Answer<'c> {
    /// A short text answer (errors; a redirect when `location` is set).
    Text {
        /// Status code.
        status: u16,
        /// Location of a 301.
        location: Option<&'c [u8]>,
    },
    /// 304: the client's copy is current.
    NotModified(&'c Variant),
    /// 200 with the whole representation.
    Full(&'c Variant),
    /// 206 with bytes `[start, end)`.
    Part(&'c Variant, u64, u64),
    /// 416: the range lies outside the representation.
    Unsatisfiable(&'c Variant),
}

/// Decides the answer to a GET (or HEAD when `head_only`) of `path` (no query), reading
/// request fields through `field` (lower-case names). The cache is revalidated against
/// `generation` (bumped by DAV writes) first.
pub(crate) fn decide<'c, 'r>(
    cache: &'c mut Cache,
    generation: u64,
    now: Instant,
    path: &[u8],
    head_only: bool,
    field: impl Fn(&str) -> Option<&'r [u8]>,
) -> Answer<'c> {
    cache.sync_generation(generation);
    let f = match cache.lookup(path, now) {
        None => {
            return Answer::Text {
                status: 500,
                location: None,
            }
        }
        Some(Kind::Status(s)) => {
            return Answer::Text {
                status: *s,
                location: None,
            }
        }
        Some(Kind::Redirect(loc)) => {
            return Answer::Text {
                status: 301,
                location: Some(loc),
            }
        }
        Some(Kind::File(f)) => f,
    };
    let v: &Variant = match field("accept-encoding") {
        Some(ae) if f.br.is_some() && accepts_encoding(ae, "br") => {
            f.br.as_ref().unwrap_or(&f.identity)
        }
        Some(ae) if f.gzip.is_some() && accepts_encoding(ae, "gzip") => {
            f.gzip.as_ref().unwrap_or(&f.identity)
        }
        _ => &f.identity,
    };
    // RFC 9110 13.2.2: If-Unmodified-Since first (it is for If-Match, which static
    // files do not evaluate, to override); a representation changed since is 412.
    if field("if-match").is_none()
        && field("if-unmodified-since")
            .and_then(crate::date::parse_http_date)
            .is_some_and(|ius| v.mtime_secs > ius)
    {
        return Answer::Text {
            status: 412,
            location: None,
        };
    }
    // RFC 9110 13.2.2: If-None-Match wins over If-Modified-Since.
    let not_modified = match field("if-none-match") {
        Some(inm) => none_match(inm, &v.etag),
        None => field("if-modified-since")
            .and_then(crate::date::parse_http_date)
            .is_some_and(|ims| v.mtime_secs <= ims),
    };
    if not_modified {
        return Answer::NotModified(v);
    }
    let mut range = match field("range") {
        Some(r) if !head_only => parse_range(r, v.len),
        _ => RangeReq::Full,
    };
    if let Some(ir) = field("if-range") {
        let matches = if ir.starts_with(b"\"") {
            ir == &v.etag[..]
        } else {
            crate::date::parse_http_date(ir) == Some(v.mtime_secs)
        };
        if !matches {
            range = RangeReq::Full;
        }
    }
    match range {
        RangeReq::Full => Answer::Full(v),
        RangeReq::Part(a, b) => Answer::Part(v, a, b),
        RangeReq::Unsatisfiable => Answer::Unsatisfiable(v),
    }
}

/// The body of bytes `[start, end)` of `v`: from memory when cached, else the file
/// opened now. `None` when the file cannot be opened (it vanished since the lookup).
pub(crate) fn open_body(v: &Variant, start: u64, end: u64) -> Option<Body> {
    match &v.body {
        Some(data) => Some(Body::Mem(data.clone(), start as usize, end as usize)),
        None => File::open(&v.path)
            .ok()
            .map(|file| Body::File(file, start, end)),
    }
}

/// Appends the fields of an HTTP/2 or HTTP/3 response head for `answer` to `block` and
/// returns (status, body, body bytes). The fields are those of the HTTP/1.1 answer
/// minus the connection-specific ones (RFC 9113 §8.2.2, RFC 9114 §4.2), with the same
/// Content-Length.
pub(crate) fn render(
    answer: Answer<'_>,
    date: &[u8],
    head_only: bool,
    block: &mut Block<'_>,
) -> (u16, Body, u64) {
    let (status, v, start, end) = match answer {
        Answer::Text { status, location } => {
            let (body, len) = h2_text(status, date, location, None, head_only, block);
            return (status, body, len);
        }
        Answer::NotModified(v) => {
            status_fields(304, date, block);
            block.meta(v);
            return (304, Body::None, 0);
        }
        Answer::Unsatisfiable(v) => {
            status_fields(416, date, block);
            block.field(b"content-length", b"0");
            block.field(b"content-range", format!("bytes */{}", v.len).as_bytes());
            return (416, Body::None, 0);
        }
        Answer::Full(v) => (200, v, 0, v.len),
        Answer::Part(v, a, b) => (206, v, a, b),
    };
    let body = if head_only {
        Some(Body::None)
    } else {
        open_body(v, start, end)
    };
    let Some(body) = body else {
        let (body, len) = h2_text(500, date, None, None, head_only, block);
        return (500, body, len);
    };
    status_fields(status, date, block);
    block.field(b"content-length", (end - start).to_string().as_bytes());
    if status == 206 {
        let range = format!("bytes {}-{}/{}", start, end.saturating_sub(1), v.len);
        block.field(b"content-range", range.as_bytes());
    }
    block.meta(v);
    let sent = if head_only { 0 } else { end - start };
    (status, body, sent)
}

/// A short text answer over HTTP/2 or HTTP/3 (errors, redirects, 405 with `allow`). Returns the
/// body and its length (0 for HEAD, which still gets the Content-Length).
pub(crate) fn h2_text(
    status: u16,
    date: &[u8],
    location: Option<&[u8]>,
    allow: Option<&[u8]>,
    head_only: bool,
    block: &mut Block<'_>,
) -> (Body, u64) {
    let text = text_body(status);
    status_fields(status, date, block);
    block.field(b"content-type", b"text/plain; charset=utf-8");
    block.field(b"content-length", text.len().to_string().as_bytes());
    if let Some(loc) = location {
        block.field(b"location", loc);
    }
    if let Some(allow) = allow {
        block.field(b"allow", allow);
    }
    if head_only || text.is_empty() {
        return (Body::None, 0);
    }
    let len = text.len();
    (Body::Mem(Arc::from(text.into_bytes()), 0, len), len as u64)
}

/// `:status`, `server`, `date` (and `alt-svc` when HTTP/3 is offered), the fields every
/// HTTP/2 and HTTP/3 answer starts with.
pub(crate) fn status_fields(status: u16, date: &[u8], block: &mut Block<'_>) {
    let mut digits = [0u8; 3];
    let s = status.min(999);
    digits[0] = b'0' + (s / 100) as u8;
    digits[1] = b'0' + (s / 10 % 10) as u8;
    digits[2] = b'0' + (s % 10) as u8;
    block.field(b":status", &digits);
    block.field(b"server", b"volley");
    block.field(b"date", date);
    if let Some(alt) = block.alt_svc {
        block.field(b"alt-svc", alt);
    }
}

/// Encodes the representation fields of a variant (type, validators, encoding, Vary,
/// Accept-Ranges) once, when the cache builds it: no Content-Length, which depends on
/// the range.
pub(crate) fn meta_block(
    codec: Codec,
    ctype: &str,
    last_modified: &[u8],
    etag: &str,
    encoding: Option<&str>,
    vary: bool,
) -> Box<[u8]> {
    let mut out = Vec::with_capacity(128);
    let mut b = Block {
        codec,
        out: &mut out,
        alt_svc: None,
    };
    b.field(b"content-type", ctype.as_bytes());
    b.field(b"last-modified", last_modified);
    if !etag.is_empty() {
        b.field(b"etag", etag.as_bytes());
    }
    if let Some(enc) = encoding {
        b.field(b"content-encoding", enc.as_bytes());
    }
    if vary {
        b.field(b"vary", b"accept-encoding");
    }
    b.field(b"accept-ranges", b"bytes");
    out.into_boxed_slice()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_of_strips_scheme_query_and_fragment() {
        assert_eq!(path_of(b"/a/b?x=1"), b"/a/b");
        assert_eq!(path_of(b"http://host/p#f"), b"/p");
        assert_eq!(path_of(b"HTTPS://host"), b"/");
    }

    #[test]
    fn text_bodies_name_the_status() {
        assert_eq!(text_body(404), "404 Not Found\n");
        assert_eq!(text_body(304), "");
    }
}
