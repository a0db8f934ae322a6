//! The readiness probe: one GET of a known file, validated as methodology.md asks
//! (status 200, Content-Type, Content-Length or chunked framing, exact body), before any
//! load is sent. A fast wrong answer is an error, not a result.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// What the probe expects back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// Request path, e.g. `/index.html`.
    pub path: String,
    /// Expected Content-Type (compared up to any `;` parameters).
    pub content_type: String,
    /// The file's exact bytes.
    pub body: Vec<u8>,
}

/// A parsed response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Body after de-chunking.
    pub body: Vec<u8>,
}

impl Response {
    /// First header called `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a probe did not pass: the port is not answering yet (retry) or the answer is wrong
/// (give up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeFailure {
    /// Connect refused, reset or timed out: the server may still be starting.
    NotReady(String),
    /// The server answered, incorrectly.
    Wrong(String),
}

/// Parses a complete `Connection: close` response (pure, tested on captured bytes).
pub fn parse_response(raw: &[u8]) -> Result<Response, String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of headers")?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "headers are not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(format!("bad status line {status_line:?}"));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
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
            .map_err(|_| format!("bad Content-Length {cl:?}"))?;
        if rest.len() < n {
            return Err(format!(
                "body cut short: {} of {n} bytes (Content-Length)",
                rest.len()
            ));
        }
        rest[..n].to_vec()
    } else {
        rest.to_vec()
    };
    Ok(resp)
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("chunk size line not terminated")?;
        let size_text = std::str::from_utf8(&data[..eol]).map_err(|_| "bad chunk size")?;
        let size_hex = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        data = &data[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size + 2 {
            return Err("chunk cut short".into());
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

/// Checks a response against what the file on disk says it must be.
pub fn validate(resp: &Response, want: &Expected) -> Result<(), String> {
    if resp.status != 200 {
        return Err(format!(
            "status {} for {}, expected 200",
            resp.status, want.path
        ));
    }
    let ct = resp.header("content-type").unwrap_or("");
    let ct_main = ct.split(';').next().unwrap_or("").trim();
    if !ct_main.eq_ignore_ascii_case(&want.content_type) {
        return Err(format!(
            "Content-Type {ct:?}, expected {:?}",
            want.content_type
        ));
    }
    if let Some(cl) = resp.header("content-length") {
        if cl.parse::<usize>().ok() != Some(want.body.len()) {
            return Err(format!("Content-Length {cl}, expected {}", want.body.len()));
        }
    } else if resp.header("transfer-encoding").is_none() {
        return Err("neither Content-Length nor chunked framing".into());
    }
    if resp.body != want.body {
        return Err(format!(
            "body differs from the file ({} bytes, fnv64 {:016x}; expected {} bytes, fnv64 {:016x})",
            resp.body.len(),
            fnv64(&resp.body),
            want.body.len(),
            fnv64(&want.body)
        ));
    }
    Ok(())
}

/// FNV-1a 64: a short fingerprint to tell two bodies apart in an error message.
pub fn fnv64(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// One GET with `Connection: close`, bounded by `timeout` overall.
pub fn probe(addr: SocketAddr, want: &Expected, timeout: Duration) -> Result<(), ProbeFailure> {
    let raw = fetch(addr, &want.path, timeout).map_err(ProbeFailure::NotReady)?;
    let resp = parse_response(&raw).map_err(ProbeFailure::Wrong)?;
    validate(&resp, want).map_err(ProbeFailure::Wrong)
}

fn fetch(addr: SocketAddr, path: &str, timeout: Duration) -> Result<Vec<u8>, String> {
    let deadline = Instant::now() + timeout;
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nUser-Agent: volley-probe\r\n\r\n");
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err("response not complete before the probe timeout".into());
        }
        s.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
        match s.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => return Err(e.to_string()),
        }
        if out.len() > 64 << 20 {
            return Err("response larger than 64 MiB".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want() -> Expected {
        Expected {
            path: "/index.html".into(),
            content_type: "text/html".into(),
            body: b"hello".to_vec(),
        }
    }

    #[test]
    fn accepts_the_right_answer() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: 5\r\n\r\nhello";
        let r = parse_response(raw).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(validate(&r, &want()), Ok(()));
    }

    #[test]
    fn accepts_chunked_framing() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2;x=y\r\nlo\r\n0\r\n\r\n";
        let r = parse_response(raw).unwrap();
        assert_eq!(r.body, b"hello");
        assert_eq!(validate(&r, &want()), Ok(()));
    }

    #[test]
    fn rejects_wrong_answers() {
        let cases: [&[u8]; 5] = [
            b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\nhellx",
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 4\r\n\r\nhell",
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\nhello",
        ];
        for raw in cases {
            let r = parse_response(raw).unwrap();
            assert!(
                validate(&r, &want()).is_err(),
                "{}",
                String::from_utf8_lossy(raw)
            );
        }
    }

    #[test]
    fn rejects_malformed_responses() {
        assert!(parse_response(b"").is_err());
        assert!(parse_response(b"SSH-2.0-x\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhi").is_err());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err()
        );
    }

    #[test]
    fn fnv_differs_for_different_bodies() {
        assert_ne!(fnv64(b"a"), fnv64(b"b"));
        assert_eq!(fnv64(b""), 0xcbf2_9ce4_8422_2325);
    }
}
