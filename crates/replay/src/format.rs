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
use crate::lines::{Line, Lines, Text};
use crate::record::Record;
use crate::time_parse::{self, DayCache, Stamp};
use std::borrow::Cow;

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
    #[cfg_attr(not(test), allow(dead_code))] // the reader reads it from its compact hold
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
        let mut one = Lines::default();
        self.parse_into(line, line_no, &mut one)?;
        Ok(Parsed {
            whole_second: one.lines[0].whole_second,
            rec: one.record(0),
        })
    }

    /// Parses one line (without its newline) onto the end of `out`, its texts in
    /// `out`'s one string (the reader's compact hold, [`crate::lines`]); `out` is
    /// left as it was when the line does not parse.
    pub fn parse_into(
        &mut self,
        line: &[u8],
        line_no: u64,
        out: &mut Lines,
    ) -> Result<(), SkipCause> {
        let line = trim_end(line);
        match &self.format.layout {
            Layout::Template(pieces) => {
                let mut raw = Raw::default();
                template(pieces, line, &mut raw, &mut self.days)?;
                build(raw, line_no, out)
            }
            Layout::Json => json(line, &mut self.days, line_no, out),
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
fn json(line: &[u8], days: &mut DayCache, line_no: u64, out: &mut Lines) -> Result<(), SkipCause> {
    let JsonLine(mut fields) = serde_json::from_slice(line).map_err(|_| SkipCause::Json)?;
    // In key order, as a map of the object would give them (a field named twice: the
    // last key in that order wins).
    fields.sort_by(|a, b| a.0.cmp(&b.0));
    let mut raw = Raw::default();
    for (_, f, v) in &fields {
        assign(*f, v, &mut raw, days).map_err(|_| SkipCause::Json)?;
    }
    build(raw, line_no, out).map_err(|_| SkipCause::Json)
}

/// The fields of a JSON line volley reads, each with its key and its text, borrowed
/// from the line where it has no escapes: parsed straight from the bytes, not through
/// a map of owned keys and values (which ran JSON lines at 0.54 M a second of CPU
/// against Combined's 1.28 M). Keys of no field are skipped unread.
struct JsonLine<'a>(Vec<(Cow<'a, str>, Field, Cow<'a, [u8]>)>);

impl<'de> serde::Deserialize<'de> for JsonLine<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = JsonLine<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut m: M,
            ) -> Result<Self::Value, M::Error> {
                let mut fields = Vec::new();
                while let Some(JsonKey(k)) = m.next_key()? {
                    let mut f = nginx_field(k.trim_start_matches('$'));
                    if f == Field::Skip {
                        m.next_value::<serde::de::IgnoredAny>()?;
                        continue;
                    }
                    let JsonText(text) = m.next_value()?;
                    // A JSON time may be ISO 8601 or a number of seconds.
                    if f == Field::TimeIso && !text.contains(&b'-') {
                        f = Field::EpochSeconds;
                    }
                    fields.push((k, f, text));
                }
                Ok(JsonLine(fields))
            }
        }
        d.deserialize_map(Fields)
    }
}

/// A key, borrowed when it has no escapes.
struct JsonKey<'a>(Cow<'a, str>);

impl<'de> serde::Deserialize<'de> for JsonKey<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(Texts).map(|t| match t {
            Cow::Borrowed(b) => JsonKey(String::from_utf8_lossy(b)),
            Cow::Owned(o) => JsonKey(Cow::Owned(text(o))),
        })
    }
}

/// A field's value as text: a string as it is (borrowed when it has no escapes), a
/// number as JSON writes it, null as `-`; an array or object is not a field's value.
struct JsonText<'a>(Cow<'a, [u8]>);

impl<'de> serde::Deserialize<'de> for JsonText<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Texts).map(JsonText)
    }
}

/// The visitor of [`JsonKey`] and [`JsonText`].
struct Texts;

impl<'de> serde::de::Visitor<'de> for Texts {
    type Value = Cow<'de, [u8]>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string, a number or null")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v.as_bytes()))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.as_bytes().to_vec()))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.into_bytes()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Cow::Owned(
            serde_json::Number::from(v).to_string().into_bytes(),
        ))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Cow::Owned(
            serde_json::Number::from(v).to_string().into_bytes(),
        ))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        serde_json::Number::from_f64(v)
            .map(|n| Cow::Owned(n.to_string().into_bytes()))
            .ok_or_else(|| E::custom("not a finite number"))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(b"-"))
    }
}

/// Bytes as text: valid UTF-8 as is, else lossily.
fn text(v: Vec<u8>) -> String {
    String::from_utf8(v).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// One line's fields into `out`: the line is added only when it is a request (a
/// token method, a target without spaces); else `out` keeps no text of it.
fn build(raw: Raw<'_>, line_no: u64, out: &mut Lines) -> Result<(), SkipCause> {
    let stamp = raw.time.ok_or(SkipCause::Time)?;
    let mark = out.mark();
    match fill(raw, Line::new(line_no, stamp.us, stamp.whole_second), out) {
        Ok(line) => {
            out.lines.push(line);
            Ok(())
        }
        Err(e) => {
            out.rollback(mark);
            Err(e)
        }
    }
}

fn fill(raw: Raw<'_>, mut l: Line, out: &mut Lines) -> Result<Line, SkipCause> {
    if let Some(r) = raw.request {
        // Split on the raw bytes, then unescape each part (an escaped space is `\x20`
        // in every server's log, so a raw space always separates).
        let mut parts = r.split(|&b| b == b' ');
        let (Some(m), Some(t)) = (parts.next(), parts.next()) else {
            return Err(SkipCause::Request);
        };
        let proto = parts.next();
        if parts.next().is_some() {
            return Err(SkipCause::Request);
        }
        out.set(&mut l, Text::Method, m)?;
        out.set(&mut l, Text::Target, t)?;
        if let Some(p) = proto {
            out.set(&mut l, Text::Protocol, p)?;
        }
    } else {
        out.set(&mut l, Text::Method, raw.method.unwrap_or(b"GET"))?;
        match (raw.uri, raw.path) {
            (Some(u), _) => out.set(&mut l, Text::Target, u)?,
            (None, Some(p)) => {
                out.set(&mut l, Text::Target, p)?;
                if let Some(q) = raw.query.filter(|q| *q != b"-" && !q.is_empty()) {
                    out.join_query(&mut l, q)?;
                }
            }
            (None, None) => return Err(SkipCause::Request),
        }
        out.set_optional(&mut l, Text::Protocol, raw.protocol)?;
    }
    let method = out.get(&l, Text::Method).unwrap_or_default();
    let target = out.get(&l, Text::Target).unwrap_or_default();
    if !valid_method(method) || target.is_empty() || target.contains(' ') {
        return Err(SkipCause::Request);
    }
    out.set_optional(&mut l, Text::Client, raw.client)?;
    out.set_optional(&mut l, Text::Host, raw.host)?;
    out.set_optional(&mut l, Text::Referer, raw.referer)?;
    out.set_optional(&mut l, Text::UserAgent, raw.user_agent)?;
    l.status = raw.status;
    l.bytes = raw.bytes;
    l.request_time_us = raw.rt_us;
    Ok(l)
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
