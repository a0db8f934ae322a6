//! Checking one answer against the file on disk, pure and tested on captured bytes:
//! parsing an HTTP/1.x response, status, Content-Type, framing, encodings and the exact
//! body. The probe (`super`) fetches; this decides.

use super::{Expected, Response};
use std::io::Read;
use volley_engine::http1::{FrameError, ResponseReader};

/// Fields per head read by [`final_head_fields`]; the reader accepts as many.
const MAX_HEADERS: usize = 128;

/// Decoded bodies larger than this are refused (a probe file is small; a decompression
/// bomb must not eat the machine).
pub(super) const MAX_BODY_BYTES: u64 = 64 << 20;

/// What is wrong with one answer, checked against the file on disk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// The bytes are not a framed HTTP/1.x response (status line, header end, chunk
    /// framing, Content-Length), as the engine's reader judges it.
    #[error("{0}")]
    Framing(#[from] FrameError),
    /// A framed response the probe cannot judge (neither Content-Length nor chunked).
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
/// Framing and body go through the engine's fuzzed [`ResponseReader`] (the parser the
/// load itself uses, RFC 9112 section 6.3), so the probe and the load never disagree on
/// where an answer ends; the final head's fields are read with `httparse`, as the
/// reader reads them.
pub fn parse_response(raw: &[u8]) -> Result<Response, AnswerError> {
    let mut reader = ResponseReader::new();
    let mut body = Vec::new();
    let framed = match reader.push(raw, Some(&mut body))? {
        Some(r) => r,
        // Read until the server closed: a close-delimited body ends here.
        None => reader.eof()?,
    };
    Ok(Response {
        status: framed.status,
        headers: final_head_fields(raw)?,
        body,
    })
}

/// Whether `raw` holds a whole response by its own framing (Content-Length, the last
/// chunk, or a status without a body); a close-delimited body is never complete.
pub(super) fn is_complete(raw: &[u8]) -> bool {
    matches!(ResponseReader::new().push(raw, None), Ok(Some(_)))
}

/// The final head's fields, names lower-cased, values trimmed; interim 1xx heads are
/// skipped as [`ResponseReader`] skips them.
fn final_head_fields(raw: &[u8]) -> Result<Vec<(String, String)>, AnswerError> {
    let mut at = 0;
    loop {
        let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut head = httparse::Response::new(&mut fields);
        let len = match head.parse(&raw[at..]) {
            Ok(httparse::Status::Complete(len)) => len,
            _ => return Err(FrameError::BadHead.into()),
        };
        if head.code.is_some_and(|c| (100..200).contains(&c)) {
            at += len;
            continue;
        }
        return Ok(head
            .headers
            .iter()
            .map(|h| {
                let value = String::from_utf8_lossy(h.value).trim().to_string();
                (h.name.to_ascii_lowercase(), value)
            })
            .collect());
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
