//! Static files: request path -> [`Resource`], cached per worker thread.
//!
//! Every file lookup goes through `volley_docroot::path::resolve` (the one traversal gate).
//! Small files are held in memory with their response header block preformatted, so a
//! cache hit costs one hash lookup and a memcpy of the header; each entry is re-validated
//! at most once per second by (mtime, size, inode) of the file and its `.gz`/`.br`
//! siblings, and the whole cache is dropped when a DAV request changed the tree.

use std::collections::HashMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};
use volley_docroot::mime::content_type;
use volley_docroot::path::{resolve, PathError};

/// How long a validated entry is trusted before it is stat'ed again.
const REVALIDATE_AFTER: Duration = Duration::from_secs(1);
/// Files above this size are never hashed for an ETag (they would be read whole).
const MAX_HASHED: u64 = 64 << 20;

/// Identity of a file version: a change in any field means "reload".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    mtime_ns: i128,
    size: u64,
    ino: u64,
    dev: u64,
}

impl Stamp {
    fn of(m: &Metadata) -> Stamp {
        Stamp {
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            size: m.len(),
            ino: m.ino(),
            dev: m.dev(),
        }
    }
}

/// One representation of a file (identity, gzip or brotli).
#[derive(Debug)]
pub struct Variant {
    /// Path on disk (resolved under the root).
    pub path: PathBuf,
    /// Length in bytes.
    pub len: u64,
    /// Content, when small enough to cache.
    pub body: Option<Arc<[u8]>>,
    /// `HTTP/1.1 200 OK` line plus every header except Date/Connection, CRLF-terminated.
    pub head200: Box<[u8]>,
    /// Headers shared by 200/206/304 (type, validators, encoding, Vary), no status line
    /// and no Content-Length.
    pub meta: Box<[u8]>,
    /// The same fields as `meta`, HPACK-encoded for HTTP/2 answers (built once here so
    /// an HTTP/2 hit encodes only status, date and length).
    pub h2_meta: Box<[u8]>,
    /// The same, QPACK-encoded for HTTP/3 answers.
    pub h3_meta: Box<[u8]>,
    /// Quoted strong ETag (empty if the file was too large to hash).
    pub etag: Box<[u8]>,
    /// Last-Modified, seconds since the epoch.
    pub mtime_secs: u64,
}

/// A servable file and its precompressed siblings.
#[derive(Debug)]
pub struct FileRes {
    /// The file itself.
    pub identity: Variant,
    /// `NAME.gz`, if present.
    pub gzip: Option<Variant>,
    /// `NAME.br`, if present.
    pub br: Option<Variant>,
}

/// What a path maps to.
#[derive(Debug)]
pub enum Kind {
    /// A file.
    File(Box<FileRes>),
    /// A directory named without its trailing slash: 301 to this location.
    Redirect(Box<[u8]>),
    /// An error status (400, 403, 404).
    Status(u16),
}

/// A cached lookup result.
#[derive(Debug)]
pub struct Resource {
    checked: Instant,
    sig: [Option<Stamp>; 3],
    /// What to answer.
    pub kind: Kind,
}

enum Located {
    File(String, PathBuf, Box<Metadata>),
    Redirect(Box<[u8]>),
    Status(u16),
}

fn path_status(e: PathError) -> u16 {
    match e {
        PathError::BadTarget => 400,
        PathError::Escapes => 403,
    }
}

fn io_status(e: &std::io::Error) -> u16 {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => 403,
        _ => 404,
    }
}

/// Maps a request path (percent-encoded, no query) to a file, a redirect or a status.
fn locate(root: &Path, key: &str) -> Located {
    let decoded = match volley_docroot::path::decode(key) {
        Ok(d) => d,
        Err(e) => return Located::Status(path_status(e)),
    };
    // Internal state files (`.volley-*`) are never served, whatever the tree holds.
    if decoded
        .split(|&b| b == b'/')
        .any(|seg| seg.starts_with(b".volley"))
    {
        return Located::Status(404);
    }
    let path = match resolve(root, key) {
        Ok(p) => p,
        Err(e) => return Located::Status(path_status(e)),
    };
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) => return Located::Status(io_status(&e)),
    };
    if meta.is_dir() {
        if !key.ends_with('/') {
            let mut loc = key.as_bytes().to_vec();
            loc.push(b'/');
            return Located::Redirect(loc.into_boxed_slice());
        }
        let index_key = format!("{key}index.html");
        let index = match resolve(root, &index_key) {
            Ok(p) => p,
            Err(e) => return Located::Status(path_status(e)),
        };
        return match std::fs::metadata(&index) {
            Ok(m) if m.is_file() => Located::File(index_key, index, Box::new(m)),
            Ok(_) => Located::Status(403),
            Err(e) => Located::Status(if e.kind() == std::io::ErrorKind::NotFound {
                403
            } else {
                io_status(&e)
            }),
        };
    }
    if !meta.is_file() {
        return Located::Status(403);
    }
    Located::File(key.to_string(), path, Box::new(meta))
}

/// A sibling `key.ext` through the same gate; `None` unless it is a regular file.
fn sibling(root: &Path, key: &str, ext: &str) -> Option<(PathBuf, Metadata)> {
    let p = resolve(root, &format!("{key}{ext}")).ok()?;
    let m = std::fs::metadata(&p).ok()?;
    m.is_file().then_some((p, m))
}

fn signature(root: &Path, key: &str) -> ([Option<Stamp>; 3], Located) {
    let loc = locate(root, key);
    let sig = match &loc {
        Located::File(k, _, m) => [
            Some(Stamp::of(m)),
            sibling(root, k, ".gz").map(|(_, m)| Stamp::of(&m)),
            sibling(root, k, ".br").map(|(_, m)| Stamp::of(&m)),
        ],
        _ => [None; 3],
    };
    (sig, loc)
}

fn build_variant(
    path: PathBuf,
    meta: &Metadata,
    ctype: &str,
    encoding: Option<&str>,
    vary: bool,
    max_cached: u64,
) -> Option<Variant> {
    let len = meta.len();
    let body: Option<Arc<[u8]>> = if len <= max_cached {
        Some(std::fs::read(&path).ok()?.into())
    } else {
        None
    };
    // The file may have changed between stat and read: trust what was read.
    let len = body.as_ref().map_or(len, |b| b.len() as u64);
    let etag = match &body {
        Some(b) => volley_dav::strong_etag(b),
        None if len <= MAX_HASHED => volley_dav::strong_etag(&std::fs::read(&path).ok()?),
        None => String::new(),
    };
    let mtime_secs = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let last_modified = crate::date::http_date(mtime_secs);
    let meta =
        |codec| crate::answer::meta_block(codec, ctype, &last_modified, &etag, encoding, vary);
    let (h2_meta, h3_meta) = (
        meta(crate::answer::Codec::Hpack),
        meta(crate::answer::Codec::Qpack),
    );
    let mut m = Vec::with_capacity(256);
    m.extend_from_slice(b"Content-Type: ");
    m.extend_from_slice(ctype.as_bytes());
    m.extend_from_slice(b"\r\nLast-Modified: ");
    m.extend_from_slice(&last_modified);
    m.extend_from_slice(b"\r\n");
    if !etag.is_empty() {
        m.extend_from_slice(b"ETag: ");
        m.extend_from_slice(etag.as_bytes());
        m.extend_from_slice(b"\r\n");
    }
    if let Some(enc) = encoding {
        m.extend_from_slice(b"Content-Encoding: ");
        m.extend_from_slice(enc.as_bytes());
        m.extend_from_slice(b"\r\n");
    }
    if vary {
        m.extend_from_slice(b"Vary: Accept-Encoding\r\n");
    }
    m.extend_from_slice(b"Accept-Ranges: bytes\r\n");
    let mut h = Vec::with_capacity(m.len() + 64);
    h.extend_from_slice(b"HTTP/1.1 200 OK\r\nServer: volley\r\nContent-Length: ");
    h.extend_from_slice(len.to_string().as_bytes());
    h.extend_from_slice(b"\r\n");
    h.extend_from_slice(&m);
    Some(Variant {
        path,
        len,
        body,
        head200: h.into_boxed_slice(),
        meta: m.into_boxed_slice(),
        h2_meta,
        h3_meta,
        etag: etag.into_bytes().into_boxed_slice(),
        mtime_secs,
    })
}

fn build(root: &Path, loc: Located, max_cached: u64) -> Kind {
    match loc {
        Located::Redirect(l) => Kind::Redirect(l),
        Located::Status(s) => Kind::Status(s),
        Located::File(key, path, meta) => {
            let ctype = content_type(&key);
            let ctype = &*ctype;
            let gz = sibling(root, &key, ".gz");
            let br = sibling(root, &key, ".br");
            let vary = gz.is_some() || br.is_some();
            let Some(identity) = build_variant(path, &meta, ctype, None, vary, max_cached) else {
                return Kind::Status(404);
            };
            let gzip =
                gz.and_then(|(p, m)| build_variant(p, &m, ctype, Some("gzip"), true, max_cached));
            let br =
                br.and_then(|(p, m)| build_variant(p, &m, ctype, Some("br"), true, max_cached));
            Kind::File(Box::new(FileRes { identity, gzip, br }))
        }
    }
}

/// Per-worker cache of resources by request path.
#[derive(Debug)]
pub struct Cache {
    root: PathBuf,
    max_cached: u64,
    map: HashMap<Box<[u8]>, Resource>,
    generation: u64,
}

/// Entries kept before the cache is cleared wholesale (bounds memory under a scan of
/// many distinct paths; a benchmark hits a handful).
const MAX_ENTRIES: usize = 4096;

impl Cache {
    /// A cache for `root` holding bodies of files up to `max_cached` bytes.
    pub fn new(root: PathBuf, max_cached: u64) -> Cache {
        Cache {
            root,
            max_cached,
            map: HashMap::new(),
            generation: 0,
        }
    }

    /// Drops everything if the tree's generation (bumped by DAV writes) moved.
    pub fn sync_generation(&mut self, generation: u64) {
        if generation != self.generation {
            self.map.clear();
            self.generation = generation;
        }
    }

    /// What `key` (request path without query) maps to, validated within the last
    /// second. `None` only if the entry vanished, which `refresh` rules out.
    pub fn lookup(&mut self, key: &[u8], now: Instant) -> Option<&Kind> {
        let fresh = self
            .map
            .get(key)
            .is_some_and(|r| now.duration_since(r.checked) < REVALIDATE_AFTER);
        if !fresh {
            self.refresh(key, now);
        }
        self.map.get(key).map(|r| &r.kind)
    }

    fn refresh(&mut self, key: &[u8], now: Instant) {
        let Ok(key_str) = std::str::from_utf8(key) else {
            self.insert(
                key,
                Resource {
                    checked: now,
                    sig: [None; 3],
                    kind: Kind::Status(400),
                },
            );
            return;
        };
        let (sig, loc) = signature(&self.root, key_str);
        if let Some(r) = self.map.get_mut(key) {
            if r.sig == sig && sig[0].is_some() {
                r.checked = now;
                return;
            }
        }
        let kind = build(&self.root, loc, self.max_cached);
        self.insert(
            key,
            Resource {
                checked: now,
                sig,
                kind,
            },
        );
    }

    fn insert(&mut self, key: &[u8], r: Resource) {
        if self.map.len() >= MAX_ENTRIES && !self.map.contains_key(key) {
            self.map.clear();
        }
        self.map.insert(key.into(), r);
    }
}

/// A satisfiable single byte range `[start, end)`, or why not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeReq {
    /// No usable Range header: send the whole representation.
    Full,
    /// Send these bytes with 206.
    Part(u64, u64),
    /// 416.
    Unsatisfiable,
}

/// Interprets a `Range` header against a representation of `len` bytes. Multiple ranges
/// and unknown units are ignored (a full 200 is always a valid answer, RFC 9110 14.2).
pub fn parse_range(value: &[u8], len: u64) -> RangeReq {
    let Some(spec) = value.strip_prefix(b"bytes=") else {
        return RangeReq::Full;
    };
    if spec.contains(&b',') {
        return RangeReq::Full;
    }
    let Some(dash) = spec.iter().position(|&b| b == b'-') else {
        return RangeReq::Full;
    };
    let num = |s: &[u8]| -> Option<u64> {
        if s.is_empty() || s.len() > 19 || !s.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(s.iter().fold(0u64, |a, &d| a * 10 + u64::from(d - b'0')))
    };
    let (a, b) = (&spec[..dash], &spec[dash + 1..]);
    if a.is_empty() {
        let Some(n) = num(b) else {
            return RangeReq::Full;
        };
        if n == 0 || len == 0 {
            return RangeReq::Unsatisfiable;
        }
        return RangeReq::Part(len.saturating_sub(n), len);
    }
    let Some(start) = num(a) else {
        return RangeReq::Full;
    };
    let end = if b.is_empty() {
        len
    } else {
        match num(b) {
            Some(e) if e >= start => e.saturating_add(1).min(len),
            _ => return RangeReq::Full,
        }
    };
    if start >= len {
        return RangeReq::Unsatisfiable;
    }
    RangeReq::Part(start, end)
}

/// Whether `Accept-Encoding` allows `coding` (present with a non-zero q value).
pub fn accepts_encoding(value: &[u8], coding: &str) -> bool {
    value.split(|&b| b == b',').any(|item| {
        let mut parts = item.split(|&b| b == b';');
        let name = parts.next().unwrap_or(&[]).trim_ascii();
        if !name.eq_ignore_ascii_case(coding.as_bytes()) {
            return false;
        }
        parts.all(|p| {
            let p = p.trim_ascii();
            match p.strip_prefix(b"q=") {
                Some(q) => !q.iter().all(|&c| c == b'0' || c == b'.'),
                None => true,
            }
        })
    })
}

/// Whether `If-None-Match` matches `etag` (weak comparison, as RFC 9110 13.1.2 asks).
pub fn none_match(value: &[u8], etag: &[u8]) -> bool {
    if value.trim_ascii() == b"*" {
        return !etag.is_empty();
    }
    if etag.is_empty() {
        return false;
    }
    value.split(|&b| b == b',').any(|t| {
        let t = t.trim_ascii();
        let t = t.strip_prefix(b"W/").unwrap_or(t);
        t == etag
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(parse_range(b"bytes=0-9", 100), RangeReq::Part(0, 10));
        assert_eq!(parse_range(b"bytes=90-", 100), RangeReq::Part(90, 100));
        assert_eq!(parse_range(b"bytes=-10", 100), RangeReq::Part(90, 100));
        assert_eq!(parse_range(b"bytes=-1000", 100), RangeReq::Part(0, 100));
        assert_eq!(parse_range(b"bytes=50-1000", 100), RangeReq::Part(50, 100));
        assert_eq!(parse_range(b"bytes=100-", 100), RangeReq::Unsatisfiable);
        assert_eq!(parse_range(b"bytes=-0", 100), RangeReq::Unsatisfiable);
        assert_eq!(parse_range(b"bytes=5-1", 100), RangeReq::Full);
        assert_eq!(parse_range(b"bytes=0-1,5-6", 100), RangeReq::Full);
        assert_eq!(parse_range(b"items=0-1", 100), RangeReq::Full);
        assert_eq!(parse_range(b"bytes=x-1", 100), RangeReq::Full);
    }

    #[test]
    fn encodings_and_etags() {
        assert!(accepts_encoding(b"gzip, deflate, br", "br"));
        assert!(accepts_encoding(b"GZIP;q=0.5", "gzip"));
        assert!(!accepts_encoding(b"gzip;q=0, br", "gzip"));
        assert!(!accepts_encoding(b"identity", "gzip"));
        assert!(none_match(b"\"a\", W/\"b\"", b"\"b\""));
        assert!(none_match(b"*", b"\"b\""));
        assert!(!none_match(b"\"a\"", b"\"b\""));
    }
}
