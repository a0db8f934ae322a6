//! An opt-in trace of every exchange the office makes: one line per request, naming
//! the account and the device (its User-Agent), the request line, the headers a
//! client's correctness depends on (Depth, If-Match, If-None-Match, the sync-token a
//! sync-collection starts from), the status, the ETag answered, and for a multistatus
//! the sync-token and every href with its status and ETag (docs/methodology.md, "The
//! office": tracing a day).
//!
//! Why in the office and not in a proxy: the trace is for telling a server's fault
//! from the checker's, so it must show exactly what each device sent and was told, in
//! the order the device saw it; a device serves one request at a time, so its lines
//! are in its own order. Off (the default), a connection holds `None` and pays one
//! branch per request.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use volley_engine::ErrorKind;

use crate::http::{Reply, Request};
use crate::xml;

/// A shared trace file; cloned into every connection.
#[derive(Clone)]
pub struct Trace(Arc<Mutex<BufWriter<File>>>);

impl std::fmt::Debug for Trace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Trace")
    }
}

impl Trace {
    /// Creates (truncates) the trace file at `path`.
    pub fn create(path: &Path) -> std::io::Result<Trace> {
        Ok(Trace(Arc::new(Mutex::new(BufWriter::new(File::create(
            path,
        )?)))))
    }

    /// Writes one exchange: `at_ns` (when it was sent, since the day's origin), who
    /// sent it, the request and its outcome (`Err`: the transport failure, written by its name).
    pub fn record(&self, at_ns: u64, who: &str, req: &Request, outcome: Result<&Reply, ErrorKind>) {
        let line = line(at_ns, who, req, outcome);
        let mut w = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // A trace that cannot be written must not change the day; it is a debugging
        // aid, so a full disk loses lines rather than failing requests.
        let _ = w.write_all(line.as_bytes());
    }

    /// Writes out what is buffered.
    pub fn flush(&self) {
        let _ = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .flush();
    }
}

/// One trace line (ending in a newline).
pub fn line(at_ns: u64, who: &str, req: &Request, outcome: Result<&Reply, ErrorKind>) -> String {
    let mut s = format!(
        "{:.6} {who} {} {}",
        at_ns as f64 / 1e9,
        req.method,
        req.path
    );
    if let Some(d) = req.depth {
        s.push_str(&format!(" depth={d}"));
    }
    for (n, v) in &req.headers {
        if n.eq_ignore_ascii_case("If-Match") || n.eq_ignore_ascii_case("If-None-Match") {
            s.push_str(&format!(" {}={v}", n.to_ascii_lowercase()));
        }
    }
    if let Some(t) = request_sync_token(&req.body) {
        s.push_str(&format!(" from-token={}", or_dash(&t)));
    }
    match outcome {
        Err(kind) => s.push_str(&format!(" -> {kind:?}")),
        Ok(r) => {
            s.push_str(&format!(" -> {}", r.status));
            if let Some(e) = r.header("ETag") {
                s.push_str(&format!(" etag={e}"));
            }
            if r.status == 207 {
                match xml::parse_multistatus(&r.body) {
                    Ok(ms) => {
                        if let Some(t) = &ms.sync_token {
                            s.push_str(&format!(" token={}", or_dash(t)));
                        }
                        s.push_str(&format!(" [{}]", ms.entries.len()));
                        for e in &ms.entries {
                            s.push_str(&format!(" {}:{}", e.href, e.status));
                            if let Some(t) = &e.etag {
                                s.push_str(&format!(":{t}"));
                            }
                            if let Some(t) = &e.sync_token {
                                s.push_str(&format!(":sync-token={t}"));
                            }
                        }
                    }
                    Err(e) => s.push_str(&format!(" unparsed({e})")),
                }
            }
        }
    }
    s.push('\n');
    s
}

fn or_dash(t: &str) -> &str {
    if t.is_empty() {
        "-"
    } else {
        t
    }
}

/// The `DAV:sync-token` a sync-collection REPORT body starts from (empty: an initial
/// sync), or `None` for any other body.
fn request_sync_token(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    if !text.contains("sync-collection") {
        return None;
    }
    let doc = roxmltree::Document::parse(text).ok()?;
    doc.descendants()
        .find(|n| {
            n.is_element()
                && n.tag_name().name() == "sync-token"
                && n.tag_name().namespace() == Some("DAV:")
        })
        .map(|n| n.text().unwrap_or("").trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;

    #[test]
    fn a_sync_exchange_shows_both_tokens_and_every_href() {
        let req = Request::new(Op::ReportSync, "REPORT", "/u/cal/")
            .depth("1")
            .xml(xml::sync_collection("t1", "<D:getetag/>"));
        let reply = Reply {
            status: 207,
            headers: vec![],
            body: br#"<d:multistatus xmlns:d="DAV:"><d:response><d:href>/u/cal/a.ics</d:href><d:propstat><d:prop><d:getetag>"e"</d:getetag></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response><d:response><d:href>/u/cal/b.ics</d:href><d:status>HTTP/1.1 404 Not Found</d:status></d:response><d:sync-token>t2</d:sync-token></d:multistatus>"#.to_vec(),
        };
        let l = line(1_500_000_000, "u tb#0", &req, Ok(&reply));
        assert_eq!(
            l,
            "1.500000 u tb#0 REPORT /u/cal/ depth=1 from-token=t1 -> 207 token=t2 [2] /u/cal/a.ics:200:\"e\" /u/cal/b.ics:404\n"
        );
    }

    #[test]
    fn a_write_shows_its_precondition_and_etag() {
        let req = Request::new(Op::PutUpdate, "PUT", "/u/cal/a.ics")
            .header("Content-Type", "text/calendar")
            .header("If-Match", "\"e\"");
        let reply = Reply {
            status: 204,
            headers: vec![("etag".into(), "\"f\"".into())],
            body: vec![],
        };
        let l = line(0, "u", &req, Ok(&reply));
        assert_eq!(
            l,
            "0.000000 u PUT /u/cal/a.ics if-match=\"e\" -> 204 etag=\"f\"\n"
        );
        let l = line(0, "u", &req, Err(ErrorKind::Reset));
        assert!(l.ends_with("-> Reset\n"), "{l}");
    }
}
