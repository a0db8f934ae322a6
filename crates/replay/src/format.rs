//! Log layouts, compiled into one line parser.
//!
//! Every text layout (Common, Combined, an nginx `log_format`, an Apache `LogFormat`)
//! compiles to the same list of literal bytes and fields; a line is read by matching
//! the literals and taking each field up to the next literal's first byte, or, for a
//! field between double quotes, up to the next unescaped quote. JSON lines use the
//! nginx variable names as keys. The parser is hand-written because it is the hot
//! path: the bar is a million Combined lines per second on one core, which a regex per
//! line does not reach.

use crate::error::{LogError, SkipCause};
use crate::record::Record;
use crate::time_parse::{self, DayCache, Stamp};

/// What a field of a layout holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Client,
    TimeClf,
    TimeIso,
    EpochSeconds,
    EpochMillis,
    EpochMicros,
    Request,
    Method,
    /// Path and query (`$request_uri`).
    Uri,
    /// Path alone (`$uri`, `%U`).
    Path,
    /// Query, with or without its `?` (`$args`, `%q`).
    Query,
    Protocol,
    Status,
    Bytes,
    RtSeconds,
    RtMillis,
    RtMicros,
    Host,
    Referer,
    UserAgent,
    /// Read past, not kept.
    Skip,
}

impl Field {
    fn is_time(self) -> bool {
        matches!(
            self,
            Field::TimeClf
                | Field::TimeIso
                | Field::EpochSeconds
                | Field::EpochMillis
                | Field::EpochMicros
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Lit(Vec<u8>),
    Field(Field),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Layout {
    Template(Vec<Piece>),
    Json,
}

/// A log's layout, and whether its timestamps mark a request's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFormat {
    name: String,
    layout: Layout,
    stamp_is_end: bool,
}

/// Apache's `common` LogFormat.
const COMMON: &str = r#"%h %l %u %t "%r" %>s %b"#;
/// Apache's `combined` LogFormat; nginx's default `combined` writes the same lines.
const COMBINED: &str = r#"%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-Agent}i""#;

impl LogFormat {
    /// Common Log Format (Apache `common`). Its time is when the request arrived.
    pub fn common() -> LogFormat {
        LogFormat::apache_named("common", COMMON).expect("built-in format")
    }

    /// Combined Log Format (Apache and nginx `combined`). Read with Apache's meaning of
    /// the time (the request's arrival); volley's own server writes this layout with
    /// microseconds.
    pub fn combined() -> LogFormat {
        LogFormat::apache_named("combined", COMBINED).expect("built-in format")
    }

    /// JSON lines keyed by nginx variable names (`remote_addr`, `time_iso8601` or
    /// `msec`, `request` or `request_method` and `request_uri`, `status`,
    /// `request_time`...). Times are nginx's: the end of the request.
    pub fn json() -> LogFormat {
        LogFormat {
            name: "json".into(),
            layout: Layout::Json,
            stamp_is_end: true,
        }
    }

    /// The value of `--log-format`: `common`, `combined`, `json`, an nginx
    /// `log_format` string (with `$variables`) or an Apache `LogFormat` string (with
    /// `%` directives).
    pub fn parse(s: &str) -> Result<LogFormat, LogError> {
        match s.trim() {
            "common" => Ok(LogFormat::common()),
            "combined" => Ok(LogFormat::combined()),
            "json" => Ok(LogFormat::json()),
            t if t.contains('$') => LogFormat::nginx(t),
            t if t.contains('%') => LogFormat::apache(t),
            _ => Err(LogError::Format(format!(
                "{s:?} is neither common, combined, json, an nginx log_format ($variables) \
                 nor an Apache LogFormat (% directives)"
            ))),
        }
    }

    /// An nginx `log_format` string. nginx logs when a request ends, so its times are
    /// end instants: the start is the time less `$request_time`.
    pub fn nginx(s: &str) -> Result<LogFormat, LogError> {
        let mut pieces = Vec::new();
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] != b'$' {
                push_lit(&mut pieces, &b[i..=i]);
                i += 1;
                continue;
            }
            let (name, next) = if b.get(i + 1) == Some(&b'{') {
                let end = b[i..].iter().position(|&c| c == b'}').map(|p| i + p);
                let end = end.ok_or_else(|| LogError::Format(format!("unclosed ${{ in {s:?}")))?;
                (&s[i + 2..end], end + 1)
            } else {
                let n = b[i + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                    .count();
                (&s[i + 1..i + 1 + n], i + 1 + n)
            };
            if name.is_empty() {
                return Err(LogError::Format(format!("a lone $ in {s:?}")));
            }
            pieces.push(Piece::Field(nginx_field(name)));
            i = next;
        }
        LogFormat::checked(format!("nginx {s:?}"), pieces, true)
    }

    /// An Apache `LogFormat` string (`\"` as in the configuration file, or plain `"`).
    pub fn apache(s: &str) -> Result<LogFormat, LogError> {
        LogFormat::apache_named(&format!("Apache {s:?}"), s)
    }

    fn apache_named(name: &str, s: &str) -> Result<LogFormat, LogError> {
        let mut pieces = Vec::new();
        let b = s.as_bytes();
        let mut i = 0;
        let mut stamp_is_end = false;
        while i < b.len() {
            match b[i] {
                b'\\' if i + 1 < b.len() => {
                    let c = match b[i + 1] {
                        b'n' => b'\n',
                        b't' => b'\t',
                        c => c,
                    };
                    push_lit(&mut pieces, &[c]);
                    i += 2;
                }
                b'%' => {
                    let (piece, end, next) = apache_directive(s, i)?;
                    stamp_is_end |= end;
                    pieces.extend(piece);
                    i = next;
                }
                c => {
                    push_lit(&mut pieces, &[c]);
                    i += 1;
                }
            }
        }
        LogFormat::checked(name.to_string(), pieces, stamp_is_end)
    }

    fn checked(
        name: String,
        mut pieces: Vec<Piece>,
        stamp_is_end: bool,
    ) -> Result<LogFormat, LogError> {
        // Apache's `%U%q` is a path and its `?query` (or nothing): one field.
        while let Some(i) = pieces
            .windows(2)
            .position(|w| w == [Piece::Field(Field::Path), Piece::Field(Field::Query)])
        {
            pieces.splice(i..i + 2, [Piece::Field(Field::Uri)]);
        }
        let fields = || {
            pieces.iter().filter_map(|p| match p {
                Piece::Field(f) => Some(*f),
                Piece::Lit(_) => None,
            })
        };
        if !fields().any(Field::is_time) {
            return Err(LogError::Format(format!(
                "{name} has no time ($time_local, $time_iso8601, $msec, %t, %{{msec}}t)"
            )));
        }
        if !fields().any(|f| matches!(f, Field::Request | Field::Uri | Field::Path)) {
            return Err(LogError::Format(format!(
                "{name} has no request ($request, $request_uri, %r, %U)"
            )));
        }
        for w in pieces.windows(2) {
            if let [Piece::Field(_), Piece::Field(_)] = w {
                return Err(LogError::Format(format!(
                    "{name} has two fields with nothing between them"
                )));
            }
        }
        Ok(LogFormat {
            name,
            layout: Layout::Template(pieces),
            stamp_is_end,
        })
    }

    /// How the format is named in messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the logged time is the request's end (nginx) rather than its arrival.
    pub fn stamp_is_end(&self) -> bool {
        self.stamp_is_end
    }

    /// Picks the built-in format (Combined, Common, JSON) most of `sample` parses
    /// with, if any does.
    pub fn detect(sample: &[Vec<u8>]) -> Option<LogFormat> {
        let lines: Vec<&[u8]> = sample
            .iter()
            .map(|l| trim_end(l))
            .filter(|l| !l.is_empty())
            .collect();
        if lines.is_empty() {
            return None;
        }
        [
            LogFormat::combined(),
            LogFormat::common(),
            LogFormat::json(),
        ]
        .into_iter()
        .find(|f| {
            let mut p = LineParser::new(f.clone());
            let ok = lines.iter().filter(|l| p.parse(l, 0).is_ok()).count();
            ok * 2 > lines.len()
        })
    }
}

fn push_lit(pieces: &mut Vec<Piece>, b: &[u8]) {
    if let Some(Piece::Lit(l)) = pieces.last_mut() {
        l.extend_from_slice(b);
    } else {
        pieces.push(Piece::Lit(b.to_vec()));
    }
}

fn nginx_field(name: &str) -> Field {
    match name {
        "remote_addr" | "realip_remote_addr" | "remote_ip" | "client" | "ip" => Field::Client,
        "time_local" => Field::TimeClf,
        "time_iso8601" | "time" | "timestamp" => Field::TimeIso,
        "msec" => Field::EpochSeconds,
        "request" => Field::Request,
        "request_method" | "method" => Field::Method,
        "request_uri" | "url" => Field::Uri,
        "uri" | "document_uri" | "path" => Field::Path,
        "args" | "query_string" | "query" => Field::Query,
        "server_protocol" | "protocol" => Field::Protocol,
        "status" => Field::Status,
        "body_bytes_sent" | "bytes" => Field::Bytes,
        "request_time" => Field::RtSeconds,
        "host" | "http_host" | "server_name" => Field::Host,
        "http_referer" | "referer" => Field::Referer,
        "http_user_agent" | "user_agent" => Field::UserAgent,
        _ => Field::Skip,
    }
}

/// One `%...X` directive at `s[i]`: its pieces, whether it makes the time an end
/// instant, and the index after it.
fn apache_directive(s: &str, i: usize) -> Result<(Vec<Piece>, bool, usize), LogError> {
    let b = s.as_bytes();
    let mut j = i + 1;
    // Modifiers: `<`/`>` (original or final request), status conditions (`!200,304`).
    while j < b.len() && matches!(b[j], b'<' | b'>' | b'!' | b',' | b'0'..=b'9') {
        j += 1;
    }
    let mut arg = None;
    if b.get(j) == Some(&b'{') {
        let end = b[j..]
            .iter()
            .position(|&c| c == b'}')
            .ok_or_else(|| LogError::Format(format!("unclosed %{{ in {s:?}")))?;
        arg = Some(&s[j + 1..j + end]);
        j += end + 1;
    }
    let Some(&letter) = b.get(j) else {
        return Err(LogError::Format(format!("a lone % at the end of {s:?}")));
    };
    let one = |f| Ok((vec![Piece::Field(f)], false, j + 1));
    match (letter, arg) {
        (b'%', _) => Ok((vec![Piece::Lit(b"%".to_vec())], false, j + 1)),
        (b'h' | b'a', _) => one(Field::Client),
        (b't', None) => Ok((
            vec![
                Piece::Lit(b"[".to_vec()),
                Piece::Field(Field::TimeClf),
                Piece::Lit(b"]".to_vec()),
            ],
            false,
            j + 1,
        )),
        (b't', Some(a)) => {
            let (end, unit) = match a.split_once(':') {
                Some(("end", u)) => (true, u),
                Some(("begin", u)) => (false, u),
                _ => (false, a),
            };
            let f = match unit {
                "sec" => Field::EpochSeconds,
                "msec" => Field::EpochMillis,
                "usec" => Field::EpochMicros,
                _ => {
                    return Err(LogError::Format(format!(
                        "%{{{a}}}t: only %t, %{{sec}}t, %{{msec}}t and %{{usec}}t are read"
                    )))
                }
            };
            Ok((vec![Piece::Field(f)], end, j + 1))
        }
        (b'r', _) => one(Field::Request),
        (b'm', _) => one(Field::Method),
        (b'U', _) => one(Field::Path),
        (b'q', _) => one(Field::Query),
        (b'H', _) => one(Field::Protocol),
        (b's', _) => one(Field::Status),
        (b'b' | b'B', _) => one(Field::Bytes),
        (b'D', _) => one(Field::RtMicros),
        (b'T', Some("ms")) => one(Field::RtMillis),
        (b'T', Some("us")) => one(Field::RtMicros),
        (b'T', _) => one(Field::RtSeconds),
        (b'v' | b'V', _) => one(Field::Host),
        (b'i', Some(h)) if h.eq_ignore_ascii_case("host") => one(Field::Host),
        (b'i', Some(h)) if h.eq_ignore_ascii_case("referer") => one(Field::Referer),
        (b'i', Some(h)) if h.eq_ignore_ascii_case("user-agent") => one(Field::UserAgent),
        (c, _) if c.is_ascii_alphabetic() => one(Field::Skip),
        _ => Err(LogError::Format(format!(
            "unknown directive %{} in {s:?}",
            letter as char
        ))),
    }
}

fn trim_end(l: &[u8]) -> &[u8] {
    let n = l
        .iter()
        .rev()
        .take_while(|b| matches!(b, b'\n' | b'\r'))
        .count();
    &l[..l.len() - n]
}

/// A parsed line before the reader resolves its start instant.
#[derive(Debug)]
pub(crate) struct Parsed {
    /// The record; `at_us` is the logged instant (not yet less the request time).
    pub rec: Record,
    /// The log gave a whole second only.
    pub whole_second: bool,
}

/// The fields of one line as slices of it.
#[derive(Default)]
struct Raw<'a> {
    client: Option<&'a [u8]>,
    time: Option<Stamp>,
    request: Option<&'a [u8]>,
    method: Option<&'a [u8]>,
    uri: Option<&'a [u8]>,
    path: Option<&'a [u8]>,
    query: Option<&'a [u8]>,
    protocol: Option<&'a [u8]>,
    status: Option<u16>,
    bytes: Option<u64>,
    rt_us: Option<u64>,
    host: Option<&'a [u8]>,
    referer: Option<&'a [u8]>,
    user_agent: Option<&'a [u8]>,
}

/// A format with the state its parsing keeps (the last calendar day read).
#[derive(Debug, Clone)]
pub(crate) struct LineParser {
    pub format: LogFormat,
    days: DayCache,
}

impl LineParser {
    pub fn new(format: LogFormat) -> LineParser {
        LineParser {
            format,
            days: DayCache::default(),
        }
    }

    /// Parses one line (without its newline).
    pub fn parse(&mut self, line: &[u8], line_no: u64) -> Result<Parsed, SkipCause> {
        let line = trim_end(line);
        match &self.format.layout {
            Layout::Template(pieces) => {
                let mut raw = Raw::default();
                template(pieces, line, &mut raw, &mut self.days)?;
                build(raw, line_no)
            }
            Layout::Json => json(line, &mut self.days, line_no),
        }
    }
}

fn template<'a>(
    pieces: &[Piece],
    line: &'a [u8],
    raw: &mut Raw<'a>,
    days: &mut DayCache,
) -> Result<(), SkipCause> {
    let mut pos = 0;
    for (k, piece) in pieces.iter().enumerate() {
        match piece {
            Piece::Lit(l) => {
                if !line[pos..].starts_with(l) {
                    return Err(SkipCause::Layout);
                }
                pos += l.len();
            }
            Piece::Field(f) => {
                // Between quotes a field may hold spaces and escaped quotes; elsewhere
                // it ends at the next literal's first byte, or, last, at a space.
                let quoted = k > 0
                    && matches!(&pieces[k - 1], Piece::Lit(l) if l.last() == Some(&b'"'))
                    && matches!(pieces.get(k + 1), Some(Piece::Lit(l)) if l[0] == b'"');
                let rest = &line[pos..];
                let len = if quoted {
                    quoted_len(rest).ok_or(SkipCause::Layout)?
                } else {
                    match pieces.get(k + 1) {
                        Some(Piece::Lit(l)) => {
                            memchr::memchr(l[0], rest).ok_or(SkipCause::Layout)?
                        }
                        _ => memchr::memchr(b' ', rest).unwrap_or(rest.len()),
                    }
                };
                assign(*f, &rest[..len], raw, days)?;
                pos += len;
            }
        }
    }
    if pos == line.len() {
        Ok(())
    } else {
        Err(SkipCause::Layout)
    }
}

/// Length of a quoted field's text: up to the first `"` not escaped by `\`.
fn quoted_len(s: &[u8]) -> Option<usize> {
    let mut i = 0;
    while let Some(p) = memchr::memchr2(b'"', b'\\', &s[i..]) {
        if s[i + p] == b'"' {
            return Some(i + p);
        }
        i += p + 2;
        if i > s.len() {
            return None;
        }
    }
    None
}

fn number(v: &[u8]) -> Result<Option<u64>, SkipCause> {
    if v == b"-" {
        return Ok(None);
    }
    std::str::from_utf8(v)
        .ok()
        .and_then(|s| s.parse().ok())
        .map(Some)
        .ok_or(SkipCause::Number)
}

fn assign<'a>(
    f: Field,
    v: &'a [u8],
    raw: &mut Raw<'a>,
    days: &mut DayCache,
) -> Result<(), SkipCause> {
    let time = |t: Option<Stamp>| t.ok_or(SkipCause::Time).map(Some);
    match f {
        Field::Client => raw.client = Some(v),
        Field::TimeClf => raw.time = time(time_parse::clf(v, days))?,
        Field::TimeIso => raw.time = time(time_parse::iso8601(v, days))?,
        Field::EpochSeconds => raw.time = time(time_parse::epoch_seconds(v))?,
        Field::EpochMillis => raw.time = time(time_parse::epoch_units(v, 1_000))?,
        Field::EpochMicros => raw.time = time(time_parse::epoch_units(v, 1))?,
        Field::Request => raw.request = Some(v),
        Field::Method => raw.method = Some(v),
        Field::Uri => raw.uri = Some(v),
        Field::Path => raw.path = Some(v),
        Field::Query => raw.query = Some(v),
        Field::Protocol => raw.protocol = Some(v),
        Field::Status => {
            let s = number(v).map_err(|_| SkipCause::Status)?;
            raw.status = match s {
                Some(s @ 100..=999) => Some(s as u16),
                _ => return Err(SkipCause::Status),
            };
        }
        Field::Bytes => raw.bytes = Some(number(v)?.unwrap_or(0)),
        Field::RtSeconds if v != b"-" => {
            raw.rt_us = Some(time_parse::seconds_us(v).ok_or(SkipCause::Number)?)
        }
        Field::RtMillis => raw.rt_us = number(v)?.map(|ms| ms * 1_000),
        Field::RtMicros => raw.rt_us = number(v)?,
        Field::Host => raw.host = Some(v),
        Field::Referer => raw.referer = Some(v),
        Field::UserAgent => raw.user_agent = Some(v),
        Field::RtSeconds | Field::Skip => {}
    }
    Ok(())
}

/// A JSON line: the object's values (strings or numbers) under nginx variable names.
fn json(line: &[u8], days: &mut DayCache, line_no: u64) -> Result<Parsed, SkipCause> {
    let obj: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(line).map_err(|_| SkipCause::Json)?;
    let mut owned: Vec<(Field, Vec<u8>)> = Vec::with_capacity(obj.len());
    for (k, v) in &obj {
        let mut f = nginx_field(k.trim_start_matches('$'));
        let text = match v {
            _ if f == Field::Skip => continue,
            serde_json::Value::String(s) => s.as_bytes().to_vec(),
            serde_json::Value::Number(n) => n.to_string().into_bytes(),
            serde_json::Value::Null => b"-".to_vec(),
            _ => return Err(SkipCause::Json),
        };
        // A JSON time may be ISO 8601 or a number of seconds.
        if f == Field::TimeIso && !text.contains(&b'-') {
            f = Field::EpochSeconds;
        }
        owned.push((f, text));
    }
    let mut raw = Raw::default();
    for (f, v) in &owned {
        assign(*f, v, &mut raw, days).map_err(|_| SkipCause::Json)?;
    }
    build(raw, line_no).map_err(|_| SkipCause::Json)
}

/// `\"`, `\\` and `\xhh` as Apache, nginx and volley's server escape them.
fn unescape(v: &[u8]) -> String {
    if memchr::memchr(b'\\', v).is_none() {
        return text(v.to_vec());
    }
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    let hex = |c: Option<&u8>| c.and_then(|&c| (c as char).to_digit(16)).map(|d| d as u8);
    while i < v.len() {
        match (v[i], v.get(i + 1)) {
            (b'\\', Some(b'x')) => match (hex(v.get(i + 2)), hex(v.get(i + 3))) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 4;
                }
                _ => {
                    out.push(b'\\');
                    i += 1;
                }
            },
            (b'\\', Some(&c)) => {
                out.push(c);
                i += 2;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    text(out)
}

/// Bytes as text: valid UTF-8 as is (the common case, checked fast), else lossily.
fn text(v: Vec<u8>) -> String {
    String::from_utf8(v).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn optional(v: Option<&[u8]>) -> Option<String> {
    v.filter(|v| *v != b"-" && !v.is_empty()).map(unescape)
}

fn build(raw: Raw<'_>, line: u64) -> Result<Parsed, SkipCause> {
    let stamp = raw.time.ok_or(SkipCause::Time)?;
    let (method, target, protocol) = if let Some(r) = raw.request {
        // Split on the raw bytes, then unescape each part (an escaped space is `\x20`
        // in every server's log, so a raw space always separates).
        let mut parts = r.split(|&b| b == b' ');
        let (Some(m), Some(t)) = (parts.next(), parts.next()) else {
            return Err(SkipCause::Request);
        };
        let proto = parts.next().map(unescape);
        let (m, t) = (unescape(m), unescape(t));
        if parts.next().is_some() || !valid_method(&m) || t.is_empty() || t.contains(' ') {
            return Err(SkipCause::Request);
        }
        (m, t, proto)
    } else {
        let m = raw.method.map(unescape).unwrap_or_else(|| "GET".into());
        let target = match (raw.uri, raw.path) {
            (Some(u), _) => unescape(u),
            (None, Some(p)) => {
                let mut t = unescape(p);
                match optional(raw.query) {
                    Some(q) if q.starts_with('?') => t.push_str(&q),
                    Some(q) => {
                        t.push('?');
                        t.push_str(&q);
                    }
                    None => {}
                }
                t
            }
            (None, None) => return Err(SkipCause::Request),
        };
        if !valid_method(&m) || target.is_empty() || target.contains(' ') {
            return Err(SkipCause::Request);
        }
        (m, target, optional(raw.protocol))
    };
    Ok(Parsed {
        whole_second: stamp.whole_second,
        rec: Record {
            line,
            client: optional(raw.client).unwrap_or_else(|| "-".into()),
            at_us: stamp.us,
            method,
            target,
            protocol,
            status: raw.status,
            bytes: raw.bytes,
            request_time_us: raw.rt_us,
            host: optional(raw.host),
            referer: optional(raw.referer),
            user_agent: optional(raw.user_agent),
        },
    })
}

/// An RFC 9110 token of at most 32 bytes (a TLS handshake sent to a plain port logs
/// as binary garbage, which is not a request).
pub(crate) fn valid_method(m: &str) -> bool {
    !m.is_empty()
        && m.len() <= 32
        && m.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
#[path = "format_tests.rs"]
mod tests;
