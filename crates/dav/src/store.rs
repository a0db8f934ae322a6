//! What the handler keeps on disk beside the user's files, and how it writes safely.
//!
//! Layout inside any collection directory (all names start with `.volley-`, which
//! [`volley_docroot::path::resolve`] refuses and listings skip, so clients never see them):
//! - `.volley-collection`: `key=value` lines (`type=calendar`, `displayname=...`) that
//!   make a directory a calendar collection.
//! - `.volley-props/<name>.xml`: dead properties of member `<name>`; the collection's own
//!   dead properties are in `.volley-props/.xml` (no member has an empty name).
//! - `.volley-sync`: the RFC 6578 change journal, one header line
//!   `volley-sync 1 <epoch>` then append-only lines `<n> <+|-> <percent-encoded name> .`
//!   (the final ` .` marks a complete entry, so a torn append is recognised).
//!   The current sync token is `urn:volley:sync:<epoch>:<last n>`.
//!
//! Every whole-file write goes through [`atomic_write`] (temp file, fsync, rename, fsync
//! of the directory), so a crash leaves either the old or the new file, never a torn one.
//! Journal appends are fsynced; a torn last line (crash mid-append) is ignored on read.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::xml::{self, Name};

pub use volley_docroot::path::{is_internal_name, INTERNAL_PREFIX};
/// The collection marker file.
pub const COLLECTION_FILE: &str = ".volley-collection";
/// The dead property directory.
pub const PROPS_DIR: &str = ".volley-props";
/// The change journal.
pub const SYNC_FILE: &str = ".volley-sync";
/// Epoch of the token a collection reports before its journal exists.
const NO_JOURNAL_EPOCH: &str = "0";

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` atomically: a temp file in the same directory, fsync, rename
/// over the target, fsync of the directory (so the rename itself is durable).
pub fn atomic_write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::other("no parent directory"))?;
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".volley-tmp-{}-{n}", std::process::id()));
    let result = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        fsync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Makes directory entry changes (create, rename, unlink) in `dir` durable.
pub fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

// ---------------------------------------------------------------- collection metadata

/// What `.volley-collection` says about a directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CollectionMeta {
    /// A CalDAV calendar collection.
    pub calendar: bool,
    /// Display name given at creation.
    pub displayname: Option<String>,
    /// The component types a calendar accepts (`supported-calendar-component-set` of
    /// MKCALENDAR); None: VEVENT, VTODO and VJOURNAL.
    pub components: Option<Vec<String>>,
}

impl CollectionMeta {
    /// The component types this calendar accepts.
    pub fn accepted_components(&self) -> Vec<String> {
        self.components.clone().unwrap_or_else(|| {
            ["VEVENT", "VTODO", "VJOURNAL"]
                .iter()
                .map(|s| (*s).to_owned())
                .collect()
        })
    }
}

/// Reads the marker of `dir` (default when absent or unreadable).
pub fn read_meta(dir: &Path) -> CollectionMeta {
    let Ok(text) = fs::read_to_string(dir.join(COLLECTION_FILE)) else {
        return CollectionMeta::default();
    };
    let mut meta = CollectionMeta::default();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once('=') {
            match k {
                "type" => meta.calendar = v == "calendar",
                "displayname" => meta.displayname = Some(unescape_line(v)),
                "components" => {
                    meta.components = Some(
                        v.split(',')
                            .filter(|c| !c.is_empty())
                            .map(str::to_owned)
                            .collect(),
                    )
                }
                _ => {}
            }
        }
    }
    meta
}

/// Writes the marker of `dir` atomically.
pub fn write_meta(dir: &Path, meta: &CollectionMeta) -> io::Result<()> {
    let mut s = String::new();
    if meta.calendar {
        s.push_str("type=calendar\n");
    }
    if let Some(d) = &meta.displayname {
        s.push_str(&format!("displayname={}\n", escape_line(d)));
    }
    if let Some(c) = &meta.components {
        s.push_str(&format!("components={}\n", escape_line(&c.join(","))));
    }
    atomic_write(&dir.join(COLLECTION_FILE), s.as_bytes())
}

fn escape_line(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
}

fn unescape_line(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('r') => out.push('\r'),
                Some(o) => out.push(o),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

// ---------------------------------------------------------------- dead properties

/// Dead properties of one resource: name -> the property element serialized as a
/// self-contained XML fragment ([`xml::serialize`]).
pub type DeadProps = BTreeMap<Name, String>;

/// The sidecar file holding the dead properties of `resource`.
pub fn props_file(resource: &Path, is_dir: bool) -> Option<PathBuf> {
    if is_dir {
        Some(resource.join(PROPS_DIR).join(".xml"))
    } else {
        let name = resource.file_name()?;
        let mut file = name.to_owned();
        file.push(".xml");
        Some(resource.parent()?.join(PROPS_DIR).join(file))
    }
}

/// Loads the dead properties of `resource` (empty when none or unreadable).
pub fn read_props(resource: &Path, is_dir: bool) -> DeadProps {
    let mut out = DeadProps::new();
    let Some(file) = props_file(resource, is_dir) else {
        return out;
    };
    let Ok(bytes) = fs::read(file) else {
        return out;
    };
    let Ok(doc) = xml::parse(&bytes) else {
        return out;
    };
    for p in xml::elements(doc.root_element()) {
        if let (Some(ns), Some(local)) = (p.attribute("ns"), p.attribute("name")) {
            out.insert(Name::new(ns, local), xml::text(p));
        }
    }
    out
}

/// Stores the dead properties of `resource` atomically (removes the sidecar when empty).
pub fn write_props(resource: &Path, is_dir: bool, props: &DeadProps) -> io::Result<()> {
    let file = props_file(resource, is_dir).ok_or_else(|| io::Error::other("no file name"))?;
    if props.is_empty() {
        return match fs::remove_file(&file) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    if let Some(dir) = file.parent() {
        fs::create_dir_all(dir)?;
    }
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<props>\n");
    for (name, value) in props {
        s.push_str(&format!(
            "<p ns=\"{}\" name=\"{}\">{}</p>\n",
            xml::escape(&name.ns),
            xml::escape(&name.local),
            xml::escape(value)
        ));
    }
    s.push_str("</props>\n");
    atomic_write(&file, s.as_bytes())
}

/// Removes the dead properties of member file `resource` (after a DELETE or MOVE).
pub fn remove_props(resource: &Path) {
    if let Some(file) = props_file(resource, false) {
        let _ = fs::remove_file(file);
    }
}

// ---------------------------------------------------------------- change journal

/// One journalled change of a collection member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Created or replaced.
    Put,
    /// Deleted.
    Delete,
}

/// The parsed journal of one collection.
#[derive(Debug, Clone, Default)]
pub struct Journal {
    /// Random-ish id of this journal, so tokens of a deleted-and-recreated collection
    /// are not mistaken for current ones.
    pub epoch: String,
    /// (sequence number, change, member name) in order.
    pub entries: Vec<(u64, Change, Vec<u8>)>,
    /// The sequence number just before the first of `entries` (0 for a whole journal;
    /// a tail read by [`journal_since`] holds only what follows it).
    pub base: u64,
}

impl Journal {
    /// The last sequence number (`base` when there are no entries).
    pub fn current(&self) -> u64 {
        self.entries.last().map_or(self.base, |e| e.0)
    }

    /// The sync token naming the current state.
    pub fn token(&self) -> String {
        format!("urn:volley:sync:{}:{}", self.epoch, self.current())
    }

    /// The sequence number a client token stands for, if it is one of ours and not from
    /// the future. The no-journal token (epoch 0, n 0) means "before the first change".
    pub fn parse_token(&self, token: &str) -> Option<u64> {
        let t = Token::parse(token)?;
        self.accepts(&t).then_some(t.seq)
    }

    /// Whether token `t` names a state of this journal (see [`Journal::parse_token`]).
    pub fn accepts(&self, t: &Token) -> bool {
        (t.epoch == self.epoch && t.seq <= self.current())
            || (t.epoch == NO_JOURNAL_EPOCH && t.seq == 0)
    }
}

/// A sync token taken apart: `urn:volley:sync:<epoch>:<seq>[:<cursor>]`. A cursor marks
/// a truncated initial listing (RFC 6578 `DAV:limit`): members up to and including that
/// name were sent in the state `seq`; the rest are still to be listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The journal's epoch.
    pub epoch: String,
    /// The sequence number the client has seen.
    pub seq: u64,
    /// The last member name of a truncated initial listing.
    pub cursor: Option<Vec<u8>>,
}

impl Token {
    /// Parses a client's token (None: not one of ours).
    pub fn parse(token: &str) -> Option<Token> {
        let rest = token.trim().strip_prefix("urn:volley:sync:")?;
        let mut parts = rest.splitn(3, ':');
        let epoch = parts.next()?.to_owned();
        let seq = parts.next()?.parse().ok()?;
        let cursor = match parts.next() {
            Some(c) => Some(volley_docroot::path::decode(&format!("/{c}")).ok()?[1..].to_vec()),
            None => None,
        };
        Some(Token { epoch, seq, cursor })
    }

    /// The token text.
    pub fn text(&self) -> String {
        match &self.cursor {
            Some(c) => format!(
                "urn:volley:sync:{}:{}:{}",
                self.epoch,
                self.seq,
                pct_encode(c)
            ),
            None => format!("urn:volley:sync:{}:{}", self.epoch, self.seq),
        }
    }
}

/// Reads the journal of `dir` (an empty one with epoch 0 when absent).
pub fn read_journal(dir: &Path) -> Journal {
    let Ok(text) = fs::read(dir.join(SYNC_FILE)) else {
        return Journal {
            epoch: NO_JOURNAL_EPOCH.into(),
            entries: Vec::new(),
            base: 0,
        };
    };
    let mut j = Journal {
        epoch: NO_JOURNAL_EPOCH.into(),
        entries: Vec::new(),
        base: 0,
    };
    for (i, line) in text.split(|b| *b == b'\n').enumerate() {
        let line = String::from_utf8_lossy(line);
        if i == 0 {
            let mut f = line.split(' ');
            if let (Some("volley-sync"), Some("1"), Some(e)) = (f.next(), f.next(), f.next()) {
                j.epoch = e.to_owned();
            }
            continue;
        }
        let Some((n, change, name)) = parse_entry(&line) else {
            continue;
        };
        if n > j.current() {
            j.entries.push((n, change, name));
        }
    }
    j
}

/// One journal line, if complete: an entry is complete only with its terminator, so a
/// torn append is ignored.
fn parse_entry(line: &str) -> Option<(u64, Change, Vec<u8>)> {
    let entry = line.strip_suffix(" .")?;
    let mut f = entry.split(' ');
    let (Some(n), Some(c), Some(name), None) = (f.next(), f.next(), f.next(), f.next()) else {
        return None;
    };
    let n = n.parse::<u64>().ok()?;
    let change = match c {
        "+" => Change::Put,
        "-" => Change::Delete,
        _ => return None,
    };
    let name = volley_docroot::path::decode(&format!("/{name}")).ok()?;
    Some((n, change, name[1..].to_vec()))
}

/// Bytes read per step when a journal is read from its end.
const TAIL_CHUNK: u64 = 8192;

/// The epoch on the header line of an open journal.
fn journal_epoch(f: &mut File) -> io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut head = [0u8; 128];
    f.seek(SeekFrom::Start(0))?;
    let n = f.read(&mut head)?;
    let line = String::from_utf8_lossy(&head[..n]);
    let first = line.split('\n').next().unwrap_or("");
    let mut p = first.split(' ');
    Ok(match (p.next(), p.next(), p.next()) {
        (Some("volley-sync"), Some("1"), Some(e)) => e.to_owned(),
        _ => NO_JOURNAL_EPOCH.into(),
    })
}

/// Visits the complete entries of `dir`'s journal from the last backwards until
/// `visit` says stop; returns the epoch. Reads only the tail it needs, so a caller that
/// stops after k entries costs O(k), however long the history.
fn scan_back(
    dir: &Path,
    mut visit: impl FnMut(u64, Change, Vec<u8>) -> bool,
) -> io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = match File::open(dir.join(SYNC_FILE)) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(NO_JOURNAL_EPOCH.into()),
        Err(e) => return Err(e),
    };
    let epoch = journal_epoch(&mut f)?;
    let mut pos = f.metadata()?.len();
    let mut carry: Vec<u8> = Vec::new();
    let mut last_seen = u64::MAX;
    while pos > 0 {
        let start = pos.saturating_sub(TAIL_CHUNK);
        let mut buf = vec![0u8; (pos - start) as usize];
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut buf)?;
        buf.extend_from_slice(&carry);
        pos = start;
        let mut lines: Vec<&[u8]> = buf.split(|b| *b == b'\n').collect();
        // The first piece may be the end of a line that starts in an earlier chunk.
        let first = if pos > 0 {
            lines.remove(0).to_vec()
        } else {
            Vec::new()
        };
        for line in lines.iter().rev() {
            let Some((n, c, name)) = parse_entry(&String::from_utf8_lossy(line)) else {
                continue;
            };
            // Sequence numbers only grow; anything else is debris of a torn write.
            if n >= last_seen {
                continue;
            }
            last_seen = n;
            if !visit(n, c, name) {
                return Ok(epoch);
            }
        }
        carry = first;
    }
    Ok(epoch)
}

/// The entries of `dir`'s journal after sequence number `since`, with its epoch and
/// `base` = `since`, read from the end of the file: O(changes since `since`).
pub fn journal_since(dir: &Path, since: u64) -> io::Result<Journal> {
    let mut entries = Vec::new();
    let mut last = None;
    let epoch = scan_back(dir, |n, c, name| {
        last.get_or_insert(n);
        if n <= since {
            return false;
        }
        entries.push((n, c, name));
        true
    })?;
    entries.reverse();
    Ok(Journal {
        epoch,
        entries,
        // A `since` past the end (a token from the future) keeps the true last number.
        base: since.min(last.unwrap_or(0)),
    })
}

/// The epoch and the last sequence number of `dir`'s journal, in O(1).
pub fn journal_state(dir: &Path) -> io::Result<Journal> {
    let mut last = 0;
    let epoch = scan_back(dir, |n, _, _| {
        last = n;
        false
    })?;
    Ok(Journal {
        epoch,
        entries: Vec::new(),
        base: last,
    })
}

/// Appends a change of member `name` to the journal of `dir`, creating it if needed;
/// fsynced before returning. Callers hold the handler's write lock, so sequence numbers
/// are assigned without races.
pub fn journal_append(dir: &Path, name: &[u8], change: Change) -> io::Result<u64> {
    let path = dir.join(SYNC_FILE);
    let j = journal_state(dir)?;
    let mut f = OpenOptions::new().append(true).create(true).open(&path)?;
    let len = f.metadata()?.len();
    let mut line = String::new();
    if len == 0 {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        line.push_str(&format!(
            "volley-sync 1 {:x}{:x}\n",
            nanos,
            std::process::id()
        ));
    } else if !ends_with_newline(&path)? {
        line.push('\n');
    }
    let n = j.current() + 1;
    let sign = match change {
        Change::Put => '+',
        Change::Delete => '-',
    };
    line.push_str(&format!("{n} {sign} {} .\n", pct_encode(name)));
    f.write_all(line.as_bytes())?;
    f.sync_data()?;
    if len == 0 {
        fsync_dir(dir)?;
    }
    Ok(n)
}

fn ends_with_newline(path: &Path) -> io::Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = File::open(path)?;
    f.seek(SeekFrom::End(-1))?;
    let mut b = [0u8; 1];
    f.read_exact(&mut b)?;
    Ok(b[0] == b'\n')
}

// ---------------------------------------------------------------- encoding and dates

/// Percent-encodes one path segment for an href (RFC 3986 pchar, minus `&`).
pub fn pct_encode(seg: &[u8]) -> String {
    let mut out = String::with_capacity(seg.len());
    for &b in seg {
        if b.is_ascii_alphanumeric() || b"-._~!$'()*+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// RFC 9110 IMF-fixdate (`getlastmodified`).
pub fn http_date(t: SystemTime) -> String {
    httpdate::fmt_http_date(clamp(t))
}

/// `t` within 1970..=9999, the years an HTTP-date (and `httpdate`, which panics
/// outside them) can hold.
fn clamp(t: SystemTime) -> SystemTime {
    let last = UNIX_EPOCH + std::time::Duration::from_secs(253_402_300_799);
    t.clamp(UNIX_EPOCH, last)
}

/// RFC 3339 UTC timestamp (`creationdate`), whole seconds.
pub fn rfc3339(t: SystemTime) -> String {
    let t = time::OffsetDateTime::from(clamp(t));
    // Clamped to years 1970..=9999 and whole seconds, where formatting cannot fail.
    t.replace_nanosecond(0)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates_format_known_instants() {
        let t = UNIX_EPOCH + Duration::from_secs(784_111_777);
        assert_eq!(http_date(t), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(rfc3339(t), "1994-11-06T08:49:37Z");
    }

    #[test]
    fn meta_and_journal_round_trip_and_ignore_torn_lines() {
        let dir = crate::tests::TempDir::new("store");
        let meta = CollectionMeta {
            calendar: true,
            displayname: Some("Work\\\nx".into()),
            components: Some(vec!["VTODO".into()]),
        };
        write_meta(dir.path(), &meta).unwrap();
        assert_eq!(read_meta(dir.path()), meta);
        assert_eq!(read_journal(dir.path()).token(), "urn:volley:sync:0:0");
        assert_eq!(
            journal_append(dir.path(), b"a b.ics", Change::Put).unwrap(),
            1
        );
        // A crash in the middle of an append leaves a torn line: ignored, then healed.
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.path().join(SYNC_FILE))
            .unwrap();
        f.write_all(b"2 - tor").unwrap();
        drop(f);
        assert_eq!(read_journal(dir.path()).current(), 1);
        assert_eq!(journal_append(dir.path(), b"c", Change::Delete).unwrap(), 2);
        let j = read_journal(dir.path());
        assert_eq!(j.entries.len(), 2);
        assert_eq!(j.entries[0], (1, Change::Put, b"a b.ics".to_vec()));
        assert_eq!(j.entries[1], (2, Change::Delete, b"c".to_vec()));
        assert_eq!(j.parse_token(&j.token()), Some(2));
        assert_eq!(j.parse_token("urn:volley:sync:0:0"), Some(0));
        assert_eq!(
            j.parse_token(&format!("urn:volley:sync:{}:9", j.epoch)),
            None
        );
        assert_eq!(j.parse_token("http://example.com/x"), None);
    }

    #[test]
    fn dead_props_round_trip() {
        let dir = crate::tests::TempDir::new("props");
        let file = dir.path().join("r.txt");
        fs::write(&file, b"x").unwrap();
        let mut p = DeadProps::new();
        p.insert(
            Name::new("urn:x", "a"),
            "<e:a xmlns:e=\"urn:x\">\u{10348} &amp;</e:a>".into(),
        );
        write_props(&file, false, &p).unwrap();
        assert_eq!(read_props(&file, false), p);
        write_props(dir.path(), true, &p).unwrap();
        assert_eq!(read_props(dir.path(), true), p);
        write_props(&file, false, &DeadProps::new()).unwrap();
        assert!(read_props(&file, false).is_empty());
    }
}
