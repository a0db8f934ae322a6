//! One device's HTTP/1.1 connection: blocking, kept alive, Basic credentials, and one
//! [`Sample`] per exchange for the recorder.
//!
//! Why blocking and not the engine's event loop: every CalDAV request depends on the
//! answer to the one before (a listing decides the multiget), so a device is a
//! sequence, and a thread serves many devices one action at a time. Response framing is
//! the engine's fuzzed [`ResponseReader`]; the head's fields are read with `httparse`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use base64::Engine as _;
use volley_engine::http1::ResponseReader;
use volley_engine::{ErrorKind, Sample};

use crate::ops::Op;
use crate::trace::Trace;
use crate::Account;

/// A request as a client sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// What it is timed as.
    pub op: Op,
    /// HTTP method.
    pub method: &'static str,
    /// Path (percent-encoded as the server gave it).
    pub path: String,
    /// `Depth` header.
    pub depth: Option<&'static str>,
    /// Other headers (If-Match, If-None-Match, Content-Type).
    pub headers: Vec<(&'static str, String)>,
    /// Body.
    pub body: Vec<u8>,
}

impl Request {
    /// A request without body or headers.
    pub fn new(op: Op, method: &'static str, path: impl Into<String>) -> Request {
        Request {
            op,
            method,
            path: path.into(),
            depth: None,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// With a Depth header.
    pub fn depth(mut self, d: &'static str) -> Request {
        self.depth = Some(d);
        self
    }

    /// With an XML body.
    pub fn xml(mut self, body: String) -> Request {
        self.headers
            .push(("Content-Type", "application/xml; charset=utf-8".into()));
        self.body = body.into_bytes();
        self
    }

    /// With a header.
    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Request {
        self.headers.push((name, value.into()));
        self
    }
}

/// A response.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// Header fields as received.
    pub headers: Vec<(String, String)>,
    /// Decoded body.
    pub body: Vec<u8>,
}

impl Reply {
    /// The first value of `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A kept-alive connection of one device.
pub struct Conn {
    addr: SocketAddr,
    host: String,
    auth: String,
    agent: String,
    /// Extra header lines sent with every request (`Name: value\r\n`).
    extra: String,
    timeout: Duration,
    stream: Option<TcpStream>,
    reader: ResponseReader,
    buf: Vec<u8>,
    /// The account, for the trace.
    user: String,
    /// Where every exchange is logged, when a trace was asked for.
    trace: Option<Trace>,
}

impl Conn {
    /// A connection (opened on first use) to `addr`, as `user`.
    pub fn new(
        addr: SocketAddr,
        host: &str,
        user: &str,
        password: &str,
        timeout: Duration,
    ) -> Conn {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        Conn {
            addr,
            host: host.to_owned(),
            auth: format!("Basic {token}"),
            agent: "volley-office".into(),
            extra: String::new(),
            timeout,
            stream: None,
            reader: ResponseReader::new(),
            buf: vec![0; 16 * 1024],
            user: user.to_owned(),
            trace: None,
        }
    }

    /// Closes the connection (the next exchange opens a new one), as a client closes
    /// one it will not use for a while.
    pub fn close(&mut self) {
        self.stream = None;
    }

    /// Logs every exchange of this connection to `trace` ([`crate::trace`]).
    pub fn set_trace(&mut self, trace: Option<Trace>) {
        self.trace = trace;
    }

    /// Sets the User-Agent: `volley-office/<profile>#<device>` during the day,
    /// `volley-office/setup` and `volley-office/audit` around it, so a recording
    /// server can tell a profile's requests from the harness's.
    pub fn set_agent(&mut self, agent: String) {
        self.agent = agent;
    }

    /// Sends no credentials (to ask whether the server checks them at all).
    pub fn without_credentials(mut self) -> Conn {
        self.auth.clear();
        self
    }

    /// Sends each of `headers` with every request (an account's own, [`crate::Account`]).
    pub fn with_headers(mut self, headers: &[(String, String)]) -> Conn {
        for (n, v) in headers {
            self.add_header(n, v);
        }
        self
    }

    /// Sends `name: value` with every request (e.g. `X-Remote-User` for a server run
    /// behind a trusted authenticating proxy, as volley runs Xandikos).
    pub fn add_header(&mut self, name: &str, value: &str) {
        self.extra.push_str(&format!("{name}: {value}\r\n"));
    }

    /// Sends `req` and reads the answer. The sample's instants are nanoseconds since
    /// `origin`; its `error` is set for transport failures only (the caller judges the
    /// status). A kept-alive connection the server closed meanwhile is reopened once,
    /// as every client does, without counting an error.
    pub fn exchange(
        &mut self,
        req: &Request,
        origin: Instant,
    ) -> (Result<Reply, ErrorKind>, Sample) {
        let start = ns_since(origin);
        let reused = self.stream.is_some();
        let (mut result, mut sample) = self.once(req, origin, start);
        if reused
            && matches!(result, Err(ErrorKind::Closed | ErrorKind::Reset))
            && sample.first_byte_ns == 0
        {
            // On a new connection: the old one is gone (an idle timeout, at real time
            // between two polls a quarter of an hour apart).
            self.stream = None;
            (result, sample) = self.once(req, origin, start);
        }
        if result.is_err() {
            self.stream = None;
        }
        if let Some(t) = &self.trace {
            let who = format!("{} {}", self.user, self.agent);
            t.record(sample.sent_ns, &who, req, result.as_ref().map_err(|k| *k));
        }
        (result, sample)
    }

    fn head(&self, req: &Request) -> Vec<u8> {
        let mut h = format!(
            "{} {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: {}\r\nContent-Length: {}\r\n",
            req.method,
            req.path,
            self.host,
            self.agent,
            req.body.len()
        );
        if !self.auth.is_empty() {
            h.push_str(&format!("Authorization: {}\r\n", self.auth));
        }
        if let Some(d) = req.depth {
            h.push_str(&format!("Depth: {d}\r\n"));
        }
        for (n, v) in &req.headers {
            h.push_str(&format!("{n}: {v}\r\n"));
        }
        h.push_str(&self.extra);
        h.push_str("\r\n");
        let mut bytes = h.into_bytes();
        bytes.extend_from_slice(&req.body);
        bytes
    }

    fn once(
        &mut self,
        req: &Request,
        origin: Instant,
        intended: u64,
    ) -> (Result<Reply, ErrorKind>, Sample) {
        let mut s = Sample {
            intended_ns: intended,
            dispatched_ns: intended,
            sent_ns: intended,
            first_byte_ns: 0,
            done_ns: 0,
            connect_ns: 0,
            tls_handshake_ns: 0,
            status: 0,
            wire_bytes: 0,
            body_bytes: 0,
            wire_body_bytes: 0,
            error: None,
            request_index: req.op.index() as u32,
        };
        let result = self.run(req, origin, &mut s);
        s.done_ns = ns_since(origin).max(s.sent_ns);
        match &result {
            Ok(r) => {
                s.status = r.status;
                s.body_bytes = r.body.len() as u64;
            }
            Err(k) => s.error = Some(*k),
        }
        (result, s)
    }

    fn run(&mut self, req: &Request, origin: Instant, s: &mut Sample) -> Result<Reply, ErrorKind> {
        if self.stream.is_none() {
            let t = ns_since(origin);
            let stream = TcpStream::connect_timeout(&self.addr, self.timeout)
                .map_err(|_| ErrorKind::Connect)?;
            let _ = stream.set_nodelay(true);
            let _ = stream.set_read_timeout(Some(self.timeout));
            let _ = stream.set_write_timeout(Some(self.timeout));
            s.connect_ns = ns_since(origin).saturating_sub(t).max(1);
            self.stream = Some(stream);
        }
        let bytes = self.head(req);
        let Some(stream) = self.stream.as_mut() else {
            return Err(ErrorKind::Connect);
        };
        s.sent_ns = ns_since(origin);
        stream.write_all(&bytes).map_err(io_kind)?;
        self.reader.start(req.method == "HEAD");
        let mut head_raw: Vec<u8> = Vec::new();
        let mut body = Vec::new();
        let response = loop {
            let n = match stream.read(&mut self.buf) {
                Ok(0) => break self.reader.eof().map_err(|e| e.kind())?,
                Ok(n) => n,
                Err(e) => return Err(io_kind(e)),
            };
            if s.first_byte_ns == 0 {
                s.first_byte_ns = ns_since(origin);
            }
            s.wire_bytes += n as u64;
            if !head_raw.windows(4).any(|w| w == b"\r\n\r\n") {
                head_raw.extend_from_slice(&self.buf[..n]);
            }
            if let Some(r) = self
                .reader
                .push(&self.buf[..n], Some(&mut body))
                .map_err(|e| e.kind())?
            {
                break r;
            }
        };
        if !response.keep_alive {
            self.stream = None;
        }
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut parsed = httparse::Response::new(&mut headers);
        parsed.parse(&head_raw).map_err(|_| ErrorKind::Malformed)?;
        let headers = parsed
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_owned(),
                    String::from_utf8_lossy(h.value).trim().to_owned(),
                )
            })
            .collect();
        Ok(Reply {
            status: response.status,
            headers,
            body,
        })
    }
}

/// A one-off request that got no answer: what was sent, and the transport failure's
/// kind ([`ErrorKind::Malformed`]: an answer that is not HTTP/1.1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{method} {path}: {}", kind.name())]
pub struct RequestError {
    /// The method sent.
    pub method: &'static str,
    /// The path asked.
    pub path: String,
    /// Why no answer came.
    pub kind: ErrorKind,
}

/// One request outside an office day, on its own connection (`Connection: close`), as
/// `account` when given (Basic credentials and its headers), each connect, write and
/// read bounded by `timeout`. A body is sent as XML unless `extra` sets a
/// `Content-Type`. For what is asked once and untimed: a target's readiness and its
/// calendars' set-up, the capability probe ([`crate::capabilities`]), tests.
pub fn request(
    addr: SocketAddr,
    account: Option<&Account>,
    method: &'static str,
    path: &str,
    extra: &[(&'static str, &str)],
    body: &[u8],
    timeout: Duration,
) -> Result<Reply, RequestError> {
    let host = addr.to_string();
    let mut conn = match account {
        Some(a) => Conn::new(addr, &host, &a.name, &a.password, timeout).with_headers(&a.headers),
        None => Conn::new(addr, &host, "", "", timeout).without_credentials(),
    };
    conn.set_agent("volley-probe".into());
    conn.add_header("Connection", "close");
    // The op only names the sample, which nobody records here.
    let mut req = Request::new(Op::Options, method, path);
    for (n, v) in extra {
        req = req.header(n, *v);
    }
    if !body.is_empty()
        && !extra
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
    {
        req = req.header("Content-Type", "application/xml; charset=utf-8");
    }
    req.body = body.to_vec();
    let (result, _) = conn.exchange(&req, Instant::now());
    result.map_err(|kind| RequestError {
        method,
        path: path.to_owned(),
        kind,
    })
}

fn io_kind(e: std::io::Error) -> ErrorKind {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => ErrorKind::Timeout,
        std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe => ErrorKind::Reset,
        _ => ErrorKind::Closed,
    }
}

/// Nanoseconds from `origin` to now.
pub fn ns_since(origin: Instant) -> u64 {
    u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
}
