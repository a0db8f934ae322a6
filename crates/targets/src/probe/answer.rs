//! Checking one answer against the file on disk, pure and tested on captured bytes:
//! parsing an HTTP/1.x response, status, Content-Type, framing, encodings and the exact
//! body. The probe (`super`) fetches; this decides.

use super::{Expected, Response};
use std::io::Read;

/// Decoded bodies larger than this are refused (a probe file is small; a decompression
/// bomb must not eat the machine).
pub(super) const MAX_BODY_BYTES: u64 = 64 << 20;

/// What is wrong with one answer, checked against the file on disk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// The bytes are not an HTTP/1.x response (status line, header end, chunk framing).
    #[error("{0}")]
    Malformed(String),
    /// Not 200.
    #[error("status {status} for {path}, expected 200")]
    Status {
        /// Status received.
        status: u16,
        /// Path asked.
        path: String,
    },
    /// The Content-Type the configs map the extension to was not sent.
    #[error("Content-Type {got:?}, expected {want:?}")]
    ContentType {
        /// Header received (whole).
        got: String,
        /// Type expected.
        want: String,
    },
    /// An encoding was applied to a request that accepted none.
    #[error("Content-Encoding {encoding} sent to a request that accepted no encoding{over}")]
    UnaskedEncoding {
        /// The Content-Encoding received.
        encoding: String,
        /// `" (HTTP/2)"` or empty.
        over: &'static str,
    },
    /// The asked encoding was not applied.
    #[error(
        "asked Accept-Encoding: {asked} for {path}, got Content-Encoding: {got} \
         (compression was asked but is not applied)"
    )]
    NotEncoded {
        /// Encoding asked.
        asked: String,
        /// Content-Encoding received (`identity` when none).
        got: String,
        /// Path asked.
        path: String,
    },
    /// Content-Length disagrees with the file or with the bytes framed.
    #[error("{0}")]
    Length(String),
    /// The body could not be decoded.
    #[error("{0}")]
    Decode(String),
    /// The (decoded) body is not the file.
    #[error(
        "body differs from the file ({got_len} bytes, fnv64 {got_fnv:016x}; \
         expected {want_len} bytes, fnv64 {want_fnv:016x})"
    )]
    Body {
        /// Bytes received.
        got_len: usize,
        /// Their fingerprint.
        got_fnv: u64,
        /// Bytes of the file.
        want_len: usize,
        /// Its fingerprint.
        want_fnv: u64,
    },
}

fn malformed(m: impl Into<String>) -> AnswerError {
    AnswerError::Malformed(m.into())
}

/// Parses a complete `Connection: close` response (pure, tested on captured bytes).
pub fn parse_response(raw: &[u8]) -> Result<Response, AnswerError> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| malformed("no end of headers"))?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| malformed("headers are not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(malformed(format!("bad status line {status_line:?}")));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| malformed(format!("bad status line {status_line:?}")))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let rest = &raw[end + 4..];
    let mut resp = Response {
        status,
        headers,
        body: Vec::new(),
    };
    let chunked = resp
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    resp.body = if chunked {
        dechunk(rest)?
    } else if let Some(cl) = resp.header("content-length") {
        let n: usize = cl
            .parse()
            .map_err(|_| malformed(format!("bad Content-Length {cl:?}")))?;
        if rest.len() < n {
            return Err(malformed(format!(
                "body cut short: {} of {n} bytes (Content-Length)",
                rest.len()
            )));
        }
        rest[..n].to_vec()
    } else {
        rest.to_vec()
    };
    Ok(resp)
}

pub(super) fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, AnswerError> {
    let mut out = Vec::new();
    loop {
        let eol = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| malformed("chunk size line not terminated"))?;
        let size_text =
            std::str::from_utf8(&data[..eol]).map_err(|_| malformed("bad chunk size"))?;
        let size_hex = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| malformed(format!("bad chunk size {size_text:?}")))?;
        data = &data[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size + 2 {
            return Err(malformed("chunk cut short"));
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

/// Checks a response to a request without `Accept-Encoding` against what the file on
/// disk says it must be.
pub fn validate(resp: &Response, want: &Expected) -> Result<(), AnswerError> {
    check_status_and_type(resp, want)?;
    if let Some(ce) = resp.header("content-encoding") {
        if !ce.eq_ignore_ascii_case("identity") {
            return Err(AnswerError::UnaskedEncoding {
                encoding: ce.to_string(),
                over: "",
            });
        }
    }
    if let Some(cl) = resp.header("content-length") {
        if cl.parse::<usize>().ok() != Some(want.body.len()) {
            return Err(AnswerError::Length(format!(
                "Content-Length {cl}, expected {}",
                want.body.len()
            )));
        }
    }
    check_framing(resp)?;
    check_body(&resp.body, want)
}

/// [`validate`] for an HTTP/2 answer: the body is framed by END_STREAM, so only a
/// `content-length` that was sent must match it.
pub fn validate_h2(resp: &Response, want: &Expected) -> Result<(), AnswerError> {
    check_status_and_type(resp, want)?;
    if let Some(ce) = resp.header("content-encoding") {
        if !ce.eq_ignore_ascii_case("identity") {
            return Err(AnswerError::UnaskedEncoding {
                encoding: ce.to_string(),
                over: " (HTTP/2)",
            });
        }
    }
    check_h2_length(resp)?;
    check_body(&resp.body, want)
}

/// [`validate_encoded`] for an HTTP/2 answer.
pub fn validate_encoded_h2(
    resp: &Response,
    want: &Expected,
    encoding: &str,
) -> Result<(), AnswerError> {
    validate_encoded_framed(resp, want, encoding, check_h2_length)
}

fn check_h2_length(resp: &Response) -> Result<(), AnswerError> {
    match resp.header("content-length") {
        Some(cl) if cl.parse::<usize>().ok() != Some(resp.body.len()) => {
            Err(AnswerError::Length(format!(
                "content-length {cl} but {} body bytes in DATA frames",
                resp.body.len()
            )))
        }
        _ => Ok(()),
    }
}

fn check_status_and_type(resp: &Response, want: &Expected) -> Result<(), AnswerError> {
    if resp.status != 200 {
        return Err(AnswerError::Status {
            status: resp.status,
            path: want.path.clone(),
        });
    }
    let ct = resp.header("content-type").unwrap_or("");
    let ct_main = ct.split(';').next().unwrap_or("").trim();
    if !ct_main.eq_ignore_ascii_case(&want.content_type) {
        return Err(AnswerError::ContentType {
            got: ct.to_string(),
            want: want.content_type.clone(),
        });
    }
    Ok(())
}

/// Content-Length matching the bytes received, or chunked framing.
fn check_framing(resp: &Response) -> Result<(), AnswerError> {
    match resp.header("content-length") {
        Some(cl) if cl.parse::<usize>().ok() == Some(resp.body.len()) => Ok(()),
        Some(cl) => Err(AnswerError::Length(format!(
            "Content-Length {cl} but {} body bytes",
            resp.body.len()
        ))),
        None if resp.header("transfer-encoding").is_some() => Ok(()),
        None => Err(malformed("neither Content-Length nor chunked framing")),
    }
}

fn check_body(body: &[u8], want: &Expected) -> Result<(), AnswerError> {
    if body != want.body {
        return Err(AnswerError::Body {
            got_len: body.len(),
            got_fnv: fnv64(body),
            want_len: want.body.len(),
            want_fnv: fnv64(&want.body),
        });
    }
    Ok(())
}

/// FNV-1a 64: a short fingerprint to tell two bodies apart in an error message.
pub fn fnv64(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Decodes a body sent with `Content-Encoding: encoding` (`gzip`, `br`, `identity`).
pub fn decode(body: &[u8], encoding: &str) -> Result<Vec<u8>, AnswerError> {
    let mut out = Vec::new();
    let res = match encoding {
        "identity" | "" => return Ok(body.to_vec()),
        "gzip" | "x-gzip" => flate2::read::GzDecoder::new(body)
            .take(MAX_BODY_BYTES + 1)
            .read_to_end(&mut out),
        "br" => brotli::Decompressor::new(body, 4096)
            .take(MAX_BODY_BYTES + 1)
            .read_to_end(&mut out),
        other => {
            return Err(AnswerError::Decode(format!(
                "cannot decode Content-Encoding {other:?}"
            )))
        }
    };
    res.map_err(|e| AnswerError::Decode(format!("{encoding} body does not decode: {e}")))?;
    if out.len() as u64 > MAX_BODY_BYTES {
        return Err(AnswerError::Decode(format!(
            "{encoding} body decodes to more than 64 MiB"
        )));
    }
    Ok(out)
}

/// Checks an answer to `Accept-Encoding: encoding`: that encoding applied, framing
/// consistent with the bytes on the wire, and the decoded body equal to the file.
pub fn validate_encoded(
    resp: &Response,
    want: &Expected,
    encoding: &str,
) -> Result<(), AnswerError> {
    validate_encoded_framed(resp, want, encoding, check_framing)
}

/// The encoded-answer checks, with the protocol's framing check.
fn validate_encoded_framed(
    resp: &Response,
    want: &Expected,
    encoding: &str,
    framing: fn(&Response) -> Result<(), AnswerError>,
) -> Result<(), AnswerError> {
    check_status_and_type(resp, want)?;
    check_coding(resp, want, encoding)?;
    framing(resp)?;
    check_body(&decode(&resp.body, encoding)?, want)
}

fn check_coding(resp: &Response, want: &Expected, encoding: &str) -> Result<(), AnswerError> {
    let got = resp.header("content-encoding").unwrap_or("identity");
    if !got.eq_ignore_ascii_case(encoding) {
        return Err(AnswerError::NotEncoded {
            asked: encoding.to_string(),
            got: got.to_string(),
            path: want.path.clone(),
        });
    }
    Ok(())
}
