//! Access log in Apache's combined format with microsecond timestamps:
//!
//! `127.0.0.1 - - [10/Oct/2000:13:55:36.123456 +0000] "GET / HTTP/1.1" 200 2326 "-" "wrk"`
//!
//! Each worker appends to its own buffer (no lock per request) and hands it to the shared
//! file once a second, when it grows past 64 KiB, and at exit, so a benchmark run pays
//! a memcpy per request, not a syscall.

use std::fs::File;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// Buffered size at which a worker flushes without waiting for the next second.
const FLUSH_AT: usize = 64 * 1024;

/// One worker's log buffer over the shared file.
#[derive(Debug)]
pub struct AccessLog {
    file: Arc<Mutex<File>>,
    buf: Vec<u8>,
}

/// What one log line records.
pub struct Entry<'a> {
    /// Client address.
    pub peer: SocketAddr,
    /// Request time, seconds since the epoch.
    pub secs: u64,
    /// Microseconds within that second.
    pub micros: u32,
    /// Method of the request line.
    pub method: &'a [u8],
    /// Request target.
    pub target: &'a [u8],
    /// Protocol as the log shows it: `HTTP/1.0`, `HTTP/1.1` or `HTTP/2.0` (Apache's
    /// spelling for HTTP/2).
    pub protocol: &'static str,
    /// Status sent.
    pub status: u16,
    /// Body bytes sent.
    pub bytes: u64,
    /// Referer header, if any.
    pub referer: Option<&'a [u8]>,
    /// User-Agent header, if any.
    pub user_agent: Option<&'a [u8]>,
}

/// Writes `s`, escaping `"`, `\` and non-printable bytes as Apache does (`\xhh`), so a
/// hostile header cannot forge log lines.
fn push_escaped(out: &mut Vec<u8>, s: &[u8]) {
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x20..=0x7e => out.push(b),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[
                    b'\\',
                    b'x',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 15)],
                ]);
            }
        }
    }
}

impl AccessLog {
    /// A buffer writing to `file`.
    pub fn new(file: Arc<Mutex<File>>) -> AccessLog {
        AccessLog {
            file,
            buf: Vec::with_capacity(FLUSH_AT + 4096),
        }
    }

    /// Appends one line.
    pub fn record(&mut self, e: &Entry<'_>) {
        let b = &mut self.buf;
        let _ = write!(b, "{} - - [", e.peer.ip());
        b.extend_from_slice(&crate::date::clf_seconds(e.secs));
        let _ = write!(b, ".{:06} +0000] \"", e.micros);
        push_escaped(b, e.method);
        b.push(b' ');
        push_escaped(b, e.target);
        let _ = write!(b, " {}\" {} ", e.protocol, e.status);
        if e.bytes == 0 {
            b.push(b'-');
        } else {
            let _ = write!(b, "{}", e.bytes);
        }
        b.extend_from_slice(b" \"");
        push_escaped(b, e.referer.unwrap_or(b"-"));
        b.extend_from_slice(b"\" \"");
        push_escaped(b, e.user_agent.unwrap_or(b"-"));
        b.extend_from_slice(b"\"\n");
        if self.buf.len() >= FLUSH_AT {
            self.flush();
        }
    }

    /// Hands buffered lines to the file (whole lines, so workers never interleave).
    pub fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        if let Ok(mut f) = self.file.lock() {
            // A full disk must not stop the server; the lines are dropped.
            let _ = f.write_all(&self.buf);
        }
        self.buf.clear();
    }
}

impl Drop for AccessLog {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_format_line() {
        // Removed when `file` drops, also when an assertion fails.
        let file = tempfile::Builder::new()
            .prefix("volley-log-")
            .tempfile()
            .unwrap();
        let path = file.path();
        let f = Arc::new(Mutex::new(file.reopen().unwrap()));
        let mut log = AccessLog::new(f);
        log.record(&Entry {
            peer: "127.0.0.1:5000".parse().unwrap(),
            secs: 971_186_136,
            micros: 42,
            method: b"GET",
            target: b"/a\"b",
            protocol: "HTTP/1.1",
            status: 200,
            bytes: 2326,
            referer: None,
            user_agent: Some(b"wrk\x01"),
        });
        log.flush();
        let text = std::fs::read_to_string(path).unwrap();
        assert_eq!(
            text,
            "127.0.0.1 - - [10/Oct/2000:13:55:36.000042 +0000] \"GET /a\\\"b HTTP/1.1\" 200 2326 \"-\" \"wrk\\x01\"\n"
        );
    }
}
