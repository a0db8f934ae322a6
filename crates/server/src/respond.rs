//! What a complete request gets: the static-file and DAV answers written as HTTP/1.1
//! heads into the connection's output, or as HPACK fields for [`crate::h2`]
//! ([`H2Respond`]), each logged once. The event loop ([`crate::worker`]) calls in here
//! after parsing; [`crate::answer::decide`] has already settled status and range, so the
//! two protocols differ only in framing.

use crate::answer::{
    decide, h2_text, open_body, path_of, reason, render, status_fields, text_body, Answer, Block,
    Body, Codec,
};
use crate::conn::Conn;
use crate::files::Cache;
use crate::gate::{gate, Gate};
use crate::h2::{Request, Responder};
use crate::log::{AccessLog, Entry};
use crate::parse::{name_is, Head, HeaderSpan};
use crate::worker::{Limits, Shared};
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use volley_dav::{Dav, DavRequest};

/// The Allow field of a 405: the static methods plus every method the DAV handler claims.
pub(crate) const ALLOW: &[u8] =
    b"Allow: GET, HEAD, OPTIONS, PROPFIND, PROPPATCH, REPORT, PUT, DELETE, MKCOL, MKCALENDAR, COPY, MOVE, LOCK, UNLOCK\r\n";

/// The Allow field of a 405 from a read-only server (no accounts, not writable).
pub(crate) const ALLOW_READ_ONLY: &[u8] = b"Allow: GET, HEAD, OPTIONS, PROPFIND, REPORT\r\n";

/// Everything a response needs besides the connection.
pub(crate) struct Ctx {
    pub(crate) cache: Cache,
    pub(crate) dav: Dav,
    /// Multi-user mode: the accounts and their verifier.
    pub(crate) auth: Option<Arc<volley_dav::auth::Auth>>,
    /// Wakes this worker's loop when a parked request's credentials are decided.
    pub(crate) wake: Option<volley_dav::auth::Waker>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) log: Option<AccessLog>,
    pub(crate) limits: Limits,
    pub(crate) date: [u8; 29],
    pub(crate) date_secs: u64,
    pub(crate) now: Instant,
    pub(crate) micros: u32,
    /// `h3=":PORT"; ma=...` when this server speaks HTTP/3: carried by every HTTP/1.1
    /// and HTTP/2 answer so that clients learn of it (RFC 7838).
    pub(crate) alt_svc: Option<Box<[u8]>>,
}

pub(crate) fn header<'a>(buf: &'a [u8], hdrs: &[HeaderSpan], name: &str) -> Option<&'a [u8]> {
    hdrs.iter()
        .find(|h| name_is(buf, h, name))
        .map(|h| h.value.get(buf))
}

impl Ctx {
    /// The Allow field of this server's 405 answers.
    pub(crate) fn allow(&self) -> &'static [u8] {
        if self.dav.is_read_only() {
            ALLOW_READ_ONLY
        } else {
            ALLOW
        }
    }

    /// Whether a request with `method` may be answered here (static or DAV); a read-only
    /// server refuses the writing methods before their body is read.
    pub(crate) fn answers(&self, method: &[u8]) -> bool {
        match method {
            b"GET" | b"HEAD" => true,
            m => std::str::from_utf8(m).is_ok_and(|m| {
                Dav::handles(m)
                    && (!self.dav.is_read_only() || matches!(m, "OPTIONS" | "PROPFIND" | "REPORT"))
            }),
        }
    }

    pub(crate) fn tick(&mut self) {
        self.now = Instant::now();
        let (secs, micros) = crate::date::now_unix();
        self.micros = micros;
        if secs != self.date_secs {
            self.date_secs = secs;
            self.date = crate::date::http_date(secs);
            if let Some(log) = self.log.as_mut() {
                log.flush();
            }
        }
    }

    /// Answers one complete request into `c`'s output. Returns (status, body bytes), or
    /// None when the request is parked until its credentials are verified (nothing
    /// written; the caller keeps it buffered and asks again when woken).
    pub(crate) fn respond(
        &mut self,
        c: &mut Conn,
        head: &Head,
        hdrs: &[HeaderSpan],
        body: &[u8],
        keep_alive: bool,
    ) -> Option<(u16, u64)> {
        let buf = &c.rbuf[c.rlo..c.rhi];
        let method = head.method.get(buf);
        let target = head.target.get(buf);
        let out = &mut c.out;
        let user = match gate(
            self.auth.as_deref(),
            self.wake.as_ref(),
            method,
            target,
            header(buf, hdrs, "authorization"),
        ) {
            Gate::Park => return None,
            Gate::Pass(user) => user,
            Gate::Reply { status, fields } => {
                let mut extra = Vec::new();
                for (n, v) in fields {
                    extra.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
                }
                let head_only = method == b"HEAD";
                let n = simple(
                    &self.date, out, status, &extra, head.minor, keep_alive, head_only,
                );
                return Some(also_log((status, n), self, c.peer, buf, head, hdrs, target));
            }
        };
        let result = match method {
            b"GET" | b"HEAD" => self.static_file(out, &mut c.body, buf, head, hdrs, keep_alive),
            m => match std::str::from_utf8(m) {
                Ok(m) if Dav::handles(m) => {
                    self.dav_request(out, m, user, buf, head, hdrs, body, keep_alive)
                }
                _ => (
                    405,
                    simple(
                        &self.date,
                        out,
                        405,
                        self.allow(),
                        head.minor,
                        keep_alive,
                        false,
                    ),
                ),
            },
        };
        Some(also_log(result, self, c.peer, buf, head, hdrs, target))
    }

    /// Runs the DAV handler (either protocol) and drops every worker's file cache
    /// generation when the method may have changed the tree.
    fn dav_handle(
        &mut self,
        method: &str,
        user: Option<Arc<str>>,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> volley_dav::DavResponse {
        let req = DavRequest {
            method,
            target,
            headers,
            body,
        };
        let resp = match user {
            Some(u) => self.dav.for_user(u).handle(&req),
            None => self.dav.handle(&req),
        };
        if !matches!(method, "OPTIONS" | "PROPFIND" | "REPORT") {
            self.shared.generation.fetch_add(1, Ordering::Relaxed);
        }
        resp
    }

    #[allow(clippy::too_many_arguments)]
    fn dav_request(
        &mut self,
        out: &mut Vec<u8>,
        method: &str,
        user: Option<Arc<str>>,
        buf: &[u8],
        head: &Head,
        hdrs: &[HeaderSpan],
        body: &[u8],
        keep_alive: bool,
    ) -> (u16, u64) {
        let target = std::str::from_utf8(head.target.get(buf)).unwrap_or("/");
        let mut fields = Vec::with_capacity(hdrs.len());
        for h in hdrs {
            if let (Ok(n), Ok(v)) = (
                std::str::from_utf8(h.name.get(buf)),
                std::str::from_utf8(h.value.get(buf)),
            ) {
                fields.push((n, v));
            }
        }
        let resp = self.dav_handle(method, user, target, &fields, body);
        let _ = write!(
            out,
            "HTTP/1.1 {} {}\r\nServer: volley\r\nContent-Length: {}\r\n",
            resp.status,
            reason(resp.status),
            resp.body.len()
        );
        for (n, v) in &resp.headers {
            // The handler's fields are trusted code, but a CR/LF must never split a head.
            if !n.bytes().chain(v.bytes()).any(|b| b == b'\r' || b == b'\n') {
                let _ = write!(out, "{n}: {v}\r\n");
            }
        }
        alt_line(self.alt_svc.as_deref(), out);
        finish_head(&self.date, out, head.minor, keep_alive);
        out.extend_from_slice(&resp.body);
        (resp.status, resp.body.len() as u64)
    }

    fn static_file(
        &mut self,
        out: &mut Vec<u8>,
        body_out: &mut Body,
        buf: &[u8],
        head: &Head,
        hdrs: &[HeaderSpan],
        keep_alive: bool,
    ) -> (u16, u64) {
        let head_only = head.method.get(buf) == b"HEAD";
        let minor = head.minor;
        let answer = decide(
            &mut self.cache,
            self.shared.generation.load(Ordering::Relaxed),
            self.now,
            path_of(head.target.get(buf)),
            head_only,
            |name| header(buf, hdrs, name),
        );
        let date = &self.date;
        let (status, v, start, end) = match answer {
            Answer::Text { status, location } => {
                let mut extra = Vec::new();
                if let Some(loc) = location {
                    extra.extend_from_slice(b"Location: ");
                    extra.extend_from_slice(loc);
                    extra.extend_from_slice(b"\r\n");
                }
                return (
                    status,
                    simple(date, out, status, &extra, minor, keep_alive, head_only),
                );
            }
            Answer::NotModified(v) => {
                out.extend_from_slice(b"HTTP/1.1 304 Not Modified\r\nServer: volley\r\n");
                out.extend_from_slice(&v.meta);
                alt_line(self.alt_svc.as_deref(), out);
                finish_head(date, out, minor, keep_alive);
                return (304, 0);
            }
            Answer::Unsatisfiable(v) => {
                let _ = write!(
                    out,
                    "HTTP/1.1 416 Range Not Satisfiable\r\nServer: volley\r\nContent-Length: 0\r\nContent-Range: bytes */{}\r\n",
                    v.len
                );
                alt_line(self.alt_svc.as_deref(), out);
                finish_head(date, out, minor, keep_alive);
                return (416, 0);
            }
            Answer::Full(v) => {
                out.extend_from_slice(&v.head200);
                (200, v, 0, v.len)
            }
            Answer::Part(v, a, b) => {
                let _ = write!(
                    out,
                    "HTTP/1.1 206 Partial Content\r\nServer: volley\r\nContent-Length: {}\r\nContent-Range: bytes {}-{}/{}\r\n",
                    b - a,
                    a,
                    b - 1,
                    v.len
                );
                out.extend_from_slice(&v.meta);
                (206, v, a, b)
            }
        };
        alt_line(self.alt_svc.as_deref(), out);
        finish_head(date, out, minor, keep_alive);
        if head_only {
            return (status, 0);
        }
        match open_body(v, start, end) {
            Some(b) => *body_out = b,
            None => {
                // The head already promised a body; the only honest move is to close.
                *body_out = Body::None;
                out.clear();
                return (500, simple(date, out, 500, b"", minor, false, head_only));
            }
        }
        (status, end - start)
    }
}

/// A short text response (errors, redirects). Returns the body length.
pub(crate) fn simple(
    date: &[u8; 29],
    out: &mut Vec<u8>,
    status: u16,
    extra: &[u8],
    minor: u8,
    keep_alive: bool,
    head_only: bool,
) -> u64 {
    // The same text as the HTTP/2 answers (`answer::text_body`).
    let text = text_body(status);
    let _ = write!(
        out,
        "HTTP/1.1 {status} {}\r\nServer: volley\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n",
        reason(status),
        text.len()
    );
    out.extend_from_slice(extra);
    finish_head(date, out, minor, keep_alive);
    if !text.is_empty() && !head_only {
        out.extend_from_slice(text.as_bytes());
        text.len() as u64
    } else {
        0
    }
}

/// The Alt-Svc line of an HTTP/1.1 answer when HTTP/3 is offered (static files and
/// DAV answers carry it; short error answers do not need to).
fn alt_line(alt: Option<&[u8]>, out: &mut Vec<u8>) {
    if let Some(alt) = alt {
        out.extend_from_slice(b"Alt-Svc: ");
        out.extend_from_slice(alt);
        out.extend_from_slice(b"\r\n");
    }
}

fn finish_head(date: &[u8; 29], out: &mut Vec<u8>, minor: u8, keep_alive: bool) {
    out.extend_from_slice(b"Date: ");
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\n");
    if !keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if minor == 0 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// The static-file and DAV answers behind an HTTP/2 connection: the same [`decide`] as
/// HTTP/1.1, rendered as HPACK fields.
pub(crate) struct H2Respond<'a> {
    pub(crate) ctx: &'a mut Ctx,
    pub(crate) peer: SocketAddr,
}

impl Responder for H2Respond<'_> {
    fn respond(&mut self, req: &Request<'_>, block: &mut Vec<u8>) -> Body {
        let alt_svc = self.ctx.alt_svc.clone();
        let mut block = Block {
            codec: Codec::Hpack,
            out: block,
            alt_svc: alt_svc.as_deref(),
        };
        answer_stream(self.ctx, self.peer, req, &mut block, "HTTP/2.0")
    }

    fn refuse(&mut self, status: u16, block: &mut Vec<u8>) -> Body {
        let mut block = Block {
            codec: Codec::Hpack,
            out: block,
            alt_svc: None,
        };
        h2_text(status, &self.ctx.date, None, None, false, &mut block).0
    }

    fn wants_body(&self, method: &[u8]) -> bool {
        std::str::from_utf8(method).is_ok_and(Dav::handles)
    }
}

/// Answers one request of a multiplexed protocol (HTTP/2 or HTTP/3, `protocol` as the
/// access log names it): fields into `block`, the body returned; logged once.
pub(crate) fn answer_stream(
    ctx: &mut Ctx,
    peer: SocketAddr,
    req: &Request<'_>,
    block: &mut Block<'_>,
    protocol: &'static str,
) -> Body {
    // No parking on HTTP/2 or HTTP/3 (a stream must be answered now): uncached
    // credentials are verified on this thread, bounded by the verifier's per-account
    // lockout.
    let user = match gate(
        ctx.auth.as_deref(),
        None,
        req.method,
        req.path,
        req.field("authorization"),
    ) {
        Gate::Pass(user) => user,
        Gate::Park => None,
        Gate::Reply { status, fields } => {
            let head_only = req.method == b"HEAD";
            let loc = fields
                .iter()
                .find(|(n, _)| *n == "Location")
                .map(|(_, v)| v.clone());
            let (body, n) = h2_text(
                status,
                &ctx.date,
                loc.as_deref().map(str::as_bytes),
                None,
                head_only,
                block,
            );
            for (name, v) in &fields {
                if *name != "Location" {
                    block.field(name.to_ascii_lowercase().as_bytes(), v.as_bytes());
                }
            }
            log_stream(ctx, peer, req, protocol, status, n);
            return body;
        }
    };
    let (status, body, bytes) = match req.method {
        b"GET" | b"HEAD" => {
            let head_only = req.method == b"HEAD";
            let answer = decide(
                &mut ctx.cache,
                ctx.shared.generation.load(Ordering::Relaxed),
                ctx.now,
                path_of(req.path),
                head_only,
                |name| req.field(name),
            );
            render(answer, &ctx.date, head_only, block)
        }
        m => match std::str::from_utf8(m) {
            Ok(m) if Dav::handles(m) => dav_stream(ctx, m, user, req, block),
            _ => {
                let allow = if ctx.dav.is_read_only() {
                    ALLOW_H2_READ_ONLY
                } else {
                    ALLOW_H2
                };
                let (body, n) = h2_text(405, &ctx.date, None, Some(allow), false, block);
                (405, body, n)
            }
        },
    };
    log_stream(ctx, peer, req, protocol, status, bytes);
    body
}

/// Logs one answer of a multiplexed protocol.
pub(crate) fn log_stream(
    ctx: &mut Ctx,
    peer: SocketAddr,
    req: &Request<'_>,
    protocol: &'static str,
    status: u16,
    bytes: u64,
) {
    if let Some(log) = ctx.log.as_mut() {
        log.record(&Entry {
            peer,
            secs: ctx.date_secs,
            micros: ctx.micros,
            method: req.method,
            target: req.path,
            protocol,
            status,
            bytes,
            referer: req.field("referer"),
            user_agent: req.field("user-agent"),
        });
    }
}

/// The Allow value of an HTTP/2 or HTTP/3 405 (the HTTP/1.1 `ALLOW` line without name
/// and CRLF).
const ALLOW_H2_READ_ONLY: &[u8] = b"GET, HEAD, OPTIONS, PROPFIND, REPORT";
const ALLOW_H2: &[u8] = b"GET, HEAD, OPTIONS, PROPFIND, PROPPATCH, REPORT, PUT, DELETE, MKCOL, MKCALENDAR, COPY, MOVE, LOCK, UNLOCK";

/// A DAV request over HTTP/2 or HTTP/3: the same handler as HTTP/1.1 (`:authority`
/// passed as Host), its fields lower-cased. Returns (status, body, body bytes).
fn dav_stream(
    ctx: &mut Ctx,
    method: &str,
    user: Option<Arc<str>>,
    req: &Request<'_>,
    block: &mut Block<'_>,
) -> (u16, Body, u64) {
    let mut fields = Vec::new();
    for (n, v) in req.fields() {
        let (Ok(n), Ok(v)) = (std::str::from_utf8(n), std::str::from_utf8(v)) else {
            continue;
        };
        match n {
            ":authority" => fields.push(("host", v)),
            _ if n.starts_with(':') => {}
            _ => fields.push((n, v)),
        }
    }
    let target = std::str::from_utf8(req.path).unwrap_or("/");
    let resp = ctx.dav_handle(method, user, target, &fields, req.body);
    status_fields(resp.status, &ctx.date, block);
    block.field(b"content-length", resp.body.len().to_string().as_bytes());
    for (n, v) in &resp.headers {
        let name = n.to_ascii_lowercase();
        // Connection-specific fields are not allowed in HTTP/2 or HTTP/3 (RFC 9113
        // §8.2.2, RFC 9114 §4.2).
        if matches!(
            name.as_str(),
            "connection" | "keep-alive" | "transfer-encoding" | "upgrade" | "content-length"
        ) || v.bytes().any(|b| b == b'\r' || b == b'\n')
        {
            continue;
        }
        block.field(name.as_bytes(), v.as_bytes());
    }
    let len = resp.body.len();
    let body = if len == 0 || method == "HEAD" {
        Body::None
    } else {
        Body::Mem(Arc::from(resp.body), 0, len)
    };
    (resp.status, body, len as u64)
}

/// Logging as a tail step of `respond`, so every path through it is logged once.
fn also_log(
    result: (u16, u64),
    ctx: &mut Ctx,
    peer: SocketAddr,
    buf: &[u8],
    head: &Head,
    hdrs: &[HeaderSpan],
    target: &[u8],
) -> (u16, u64) {
    if let Some(log) = ctx.log.as_mut() {
        log.record(&Entry {
            peer,
            secs: ctx.date_secs,
            micros: ctx.micros,
            method: head.method.get(buf),
            target,
            protocol: if head.minor == 0 {
                "HTTP/1.0"
            } else {
                "HTTP/1.1"
            },
            status: result.0,
            bytes: result.1,
            referer: header(buf, hdrs, "referer"),
            user_agent: header(buf, hdrs, "user-agent"),
        });
    }
    result
}
