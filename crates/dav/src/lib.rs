//! volley-dav: the WebDAV/CalDAV subset the built-in server speaks, as a pure
//! request -> response handler over a directory of plain files.
//!
//! Place in the flow: a target. `volley-server` owns sockets and HTTP framing and hands
//! every DAV method (and nothing else) to [`Dav::handle`]; this crate owns the meaning of
//! OPTIONS, PROPFIND, PROPPATCH, REPORT, PUT, DELETE, MKCOL, MKCALENDAR, COPY and MOVE,
//! over the safe mapping of URL paths to files that the static server uses too
//! (`volley_docroot::path::resolve`).
//!
//! What is supported (RFC 4918 class 1 and 3, RFC 4791 calendar-access, RFC 6578):
//! - PROPFIND Depth 0/1 (infinity is refused with `DAV:propfind-finite-depth`), allprop,
//!   propname, prop; dead properties via PROPPATCH, kept in sidecar files ([`store`]).
//! - REPORT calendar-multiget, calendar-query (comp-filter, prop-filter, param-filter,
//!   time-range, text-match; see [`ical`] for the simplifications), sync-collection.
//! - PUT with If-Match / If-None-Match, atomic writes; DELETE; MKCOL; MKCALENDAR;
//!   COPY and MOVE (litmus' `props` group moves a resource and checks its properties).
//!
//! What is not: LOCK and UNLOCK answer 501 (no DAV class 2; OPTIONS does not claim it);
//! ACLs, scheduling and free-busy reports are absent.
//!
//! Principals: a per-path scheme with no accounts. The principal of a resource is the
//! deepest collection at or above it that is not a calendar; that collection is also the
//! principal's calendar home. So a client pointed at `http://host/cal/` discovers the
//! principal `/cal/`, lists the calendars inside it and creates new ones there.
//!
//! Concurrency: one handler may be shared by many server threads. Mutating methods take
//! one process-wide lock, so a conditional PUT's check and its write are atomic with
//! respect to other requests and journal sequence numbers never collide; reads take no
//! lock (they see a file either before or after an atomic rename).
#![deny(missing_docs)]

pub mod auth;
mod caldav;
pub mod error;
#[cfg(test)]
mod fuzz;
pub mod ical;
mod methods;
mod principal;
mod props;
mod report;
pub mod store;
mod sync;
pub mod xml;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use volley_docroot::path;

pub use error::DavError;

/// The `Allow` header value for DAV resources.
pub const ALLOW: &str = "OPTIONS, GET, HEAD, PUT, DELETE, PROPFIND, PROPPATCH, REPORT, \
                         MKCOL, MKCALENDAR, COPY, MOVE";

/// The `Allow` header value of a read-only handler ([`Dav::read_only`]): what it still
/// answers; every method that would change the tree gets 405 with this.
pub const ALLOW_READ_ONLY: &str = "OPTIONS, GET, HEAD, PROPFIND, REPORT";

/// The `DAV` header value: class 1 and 3 (no 2: no locks), CalDAV, sync-collection.
pub const DAV_CLASSES: &str = "1, 3, calendar-access, sync-collection";

/// A request as the server parsed it. `target` is the raw request target (path and
/// optional query, still percent-encoded); headers keep their received order.
#[derive(Debug, Clone, Copy)]
pub struct DavRequest<'a> {
    /// Method, as sent (case-sensitive per RFC 9110).
    pub method: &'a str,
    /// Raw request target.
    pub target: &'a str,
    /// Header fields (name, value).
    pub headers: &'a [(&'a str, &'a str)],
    /// The full request body.
    pub body: &'a [u8],
}

impl DavRequest<'_> {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }
}

/// A complete response for the server to frame (it adds Date, Content-Length and
/// Connection itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DavResponse {
    /// Status code.
    pub status: u16,
    /// Header fields to send (not Content-Length).
    pub headers: Vec<(String, String)>,
    /// Body bytes.
    pub body: Vec<u8>,
}

impl DavResponse {
    /// A response with no body.
    pub(crate) fn empty(status: u16) -> Self {
        DavResponse {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// A 207 Multi-Status with an XML body.
    pub(crate) fn multistatus(body: String) -> Self {
        DavResponse {
            status: 207,
            headers: vec![(
                "Content-Type".into(),
                "application/xml; charset=utf-8".into(),
            )],
            body: body.into_bytes(),
        }
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The handler for one root directory.
#[derive(Debug, Clone)]
pub struct Dav {
    root: PathBuf,
    /// Serialises mutating requests (see the crate docs); guards the UID index, which
    /// only writes use.
    write_lock: Arc<Mutex<caldav::validate::UidIndex>>,
    /// ETags and time spans of stored items (`caldav::index`), shared by every clone.
    items: Arc<Mutex<caldav::index::ItemIndex>>,
    /// The authenticated account in multi-user mode ([`Dav::for_user`]): it reaches
    /// only `/` and its own home `/<user>/`, which is also its principal.
    user: Option<Arc<str>>,
    /// Refuse every method that changes the tree ([`Dav::read_only`]).
    read_only: bool,
}

/// The name of the calendar [`provision`] creates in every home.
pub const DEFAULT_CALENDAR: &str = "calendar";

/// Creates the home collection `/<user>/` of an account and, if the home is new, its
/// default calendar `/<user>/calendar/`. An existing home is left as it is (its owner
/// may have deleted or renamed the default calendar on purpose).
pub fn provision(root: &Path, user: &str) -> io::Result<()> {
    let home = root.join(user);
    if home.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(&home)?;
    // The home is the account's principal: its display name is the account's name.
    let meta = store::CollectionMeta {
        displayname: Some(user.to_owned()),
        ..Default::default()
    };
    store::write_meta(&home, &meta)?;
    make_calendar(&home.join(DEFAULT_CALENDAR), "Calendar")?;
    store::fsync_dir(root)
}

/// A request target resolved under the root: the file path and its decoded, normalised
/// segments (from which hrefs and principals are derived).
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub path: PathBuf,
    pub segs: Vec<Vec<u8>>,
}

impl Target {
    /// The percent-encoded href, with a trailing slash for collections.
    pub fn href(&self, is_dir: bool) -> String {
        href_of(&self.segs, is_dir)
    }

    /// The last segment (None for the root).
    pub fn name(&self) -> Option<&[u8]> {
        self.segs.last().map(Vec::as_slice)
    }

    /// The target of member `name` of this collection.
    pub fn child(&self, name: &[u8]) -> Target {
        let mut segs = self.segs.clone();
        segs.push(name.to_vec());
        Target {
            path: self.path.join(os(name)),
            segs,
        }
    }
}

/// Bytes -> OsStr without going through UTF-8 (file names are bytes on Unix).
pub(crate) fn os(b: &[u8]) -> &std::ffi::OsStr {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::OsStr::from_bytes(b)
}

pub(crate) fn href_of(segs: &[Vec<u8>], is_dir: bool) -> String {
    let mut s = String::from("/");
    for (i, seg) in segs.iter().enumerate() {
        if i > 0 {
            s.push('/');
        }
        s.push_str(&store::pct_encode(seg));
    }
    if is_dir && !segs.is_empty() {
        s.push('/');
    }
    s
}

impl Dav {
    /// A handler serving `root` (which must exist).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Dav {
            root: root.into(),
            write_lock: Arc::new(Mutex::new(Default::default())),
            items: Arc::new(Mutex::new(Default::default())),
            user: None,
            read_only: false,
        }
    }

    /// This handler refusing every method that would change the tree (PUT, DELETE,
    /// MKCOL, MKCALENDAR, COPY, MOVE, PROPPATCH, LOCK, UNLOCK) with 405 and
    /// `Allow: `[`ALLOW_READ_ONLY`]; OPTIONS advertises only those. An anonymous server
    /// on a shared directory is a file server, not a drop box: nothing it answers writes
    /// into the root (not even the `.volley-sync` journal, which only writes append to).
    ///
    /// 405 rather than 403: the refusal does not depend on who asks (no credentials
    /// would change it), which is what 405 with `Allow` says (RFC 9110 15.5.6), and a
    /// client can read the allowed methods from the answer.
    pub fn read_only(self) -> Dav {
        Dav {
            read_only: true,
            ..self
        }
    }

    /// Whether this handler refuses writes ([`Dav::read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// This handler acting for authenticated account `user`: targets outside `/` and
    /// `/<user>/` answer 403 `DAV:need-privileges`, and `/` lists only that home.
    pub fn for_user(&self, user: Arc<str>) -> Dav {
        Dav {
            user: Some(user),
            ..self.clone()
        }
    }

    /// The item index (never held across file reads).
    pub(crate) fn items(&self) -> MutexGuard<'_, caldav::index::ItemIndex> {
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The account this handler acts for, if any.
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// Whether member `name` of the root is visible (in multi-user mode only the
    /// account's own home is).
    pub(crate) fn root_member_visible(&self, name: &[u8]) -> bool {
        self.user.as_deref().is_none_or(|u| u.as_bytes() == name)
    }

    /// The root directory.
    pub fn root(&self) -> &std::path::Path {
        &self.root
    }

    /// Whether `method` is one this crate handles (the server sends GET and HEAD to its
    /// static path instead).
    pub fn handles(method: &str) -> bool {
        matches!(
            method,
            "OPTIONS"
                | "PROPFIND"
                | "PROPPATCH"
                | "REPORT"
                | "PUT"
                | "DELETE"
                | "MKCOL"
                | "MKCALENDAR"
                | "COPY"
                | "MOVE"
                | "LOCK"
                | "UNLOCK"
        )
    }

    /// Answers one request. Never panics on any input: every failure is a [`DavError`]
    /// mapped to a status with a one-line reason (or a `DAV:error` body).
    pub fn handle(&self, req: &DavRequest<'_>) -> DavResponse {
        if self.read_only && !matches!(req.method, "OPTIONS" | "PROPFIND" | "REPORT") {
            return read_only_refusal(req.method);
        }
        let result = match req.method {
            "OPTIONS" => Ok(options(self.read_only)),
            "PROPFIND" => props::propfind(self, req),
            "REPORT" => report::report(self, req),
            "PROPPATCH" => self.locked(|_| props::proppatch(self, req)),
            "PUT" => self.locked(|uids| methods::put(self, req, uids)),
            "DELETE" => self.locked(|uids| methods::delete(self, req, uids)),
            "MKCOL" => self.locked(|_| methods::mkcol(self, req)),
            "MKCALENDAR" => self.locked(|_| methods::mkcalendar(self, req)),
            "COPY" => self.locked(|uids| {
                uids.clear();
                methods::copy_move(self, req, false)
            }),
            "MOVE" => self.locked(|uids| {
                uids.clear();
                methods::copy_move(self, req, true)
            }),
            "LOCK" | "UNLOCK" => Err(DavError::NotImplemented(
                "locking (WebDAV class 2) is not supported",
            )),
            _ => Err(DavError::MethodNotAllowed("not a method this server knows")),
        };
        result.unwrap_or_else(|e| e.response())
    }

    fn locked(
        &self,
        f: impl FnOnce(&mut caldav::validate::UidIndex) -> Result<DavResponse, DavError>,
    ) -> Result<DavResponse, DavError> {
        // A panic cannot happen while the lock is held (no panicking code), but if it
        // ever did, the state that matters is on disk; the index is rebuilt from it.
        let mut guard: MutexGuard<'_, caldav::validate::UidIndex> =
            self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut guard)
    }

    /// Resolves a request target through the path gate.
    pub(crate) fn locate(&self, target: &str) -> Result<Target, DavError> {
        let path = path::resolve(&self.root, target)?;
        let decoded = path::decode(target)?;
        let segs: Vec<Vec<u8>> = decoded
            .split(|b| *b == b'/')
            .filter(|s| !s.is_empty() && *s != b".")
            .map(<[u8]>::to_vec)
            .collect();
        if let (Some(user), Some(first)) = (&self.user, segs.first()) {
            if first.as_slice() != user.as_bytes() {
                return Err(DavError::Condition {
                    status: 403,
                    cond: "D:need-privileges",
                    reason: "an account reaches only its own home collection",
                });
            }
        }
        Ok(Target { path, segs })
    }

    /// Resolves an href from a body or a Destination header: an absolute URL (its
    /// authority is ignored: one server, one root) or an absolute path.
    pub(crate) fn locate_href(&self, href: &str) -> Result<Target, DavError> {
        let href = href.trim();
        let path = match href.find("://") {
            Some(i) => {
                let rest = &href[i + 3..];
                match rest.find('/') {
                    Some(j) => &rest[j..],
                    None => "/",
                }
            }
            None => href,
        };
        self.locate(path)
    }

    /// The href of the principal (and calendar home) of `t`: the account's home in
    /// multi-user mode, else the deepest collection at or above it that is not a
    /// calendar collection.
    pub(crate) fn principal_href(&self, t: &Target, is_dir: bool) -> String {
        if let Some(user) = &self.user {
            return href_of(&[user.as_bytes().to_vec()], true);
        }
        let mut n = if is_dir {
            t.segs.len()
        } else {
            t.segs.len().saturating_sub(1)
        };
        loop {
            let mut dir = self.root.clone();
            for s in &t.segs[..n] {
                dir.push(os(s));
            }
            if n == 0 || (dir.is_dir() && !is_calendar_collection(&dir)) {
                return href_of(&t.segs[..n], true);
            }
            n -= 1;
        }
    }
}

/// The answer of a read-only handler to a method that would write.
fn read_only_refusal(method: &str) -> DavResponse {
    DavResponse {
        status: 405,
        headers: vec![
            ("Allow".into(), ALLOW_READ_ONLY.into()),
            ("Content-Type".into(), "text/plain; charset=utf-8".into()),
        ],
        body: format!(
            "{method} refused: this server is read-only (started without accounts and without --writable)\n"
        )
        .into_bytes(),
    }
}

fn options(read_only: bool) -> DavResponse {
    DavResponse {
        status: 200,
        headers: vec![
            ("DAV".into(), DAV_CLASSES.into()),
            (
                "Allow".into(),
                if read_only { ALLOW_READ_ONLY } else { ALLOW }.into(),
            ),
            ("MS-Author-Via".into(), "DAV".into()),
        ],
        body: Vec::new(),
    }
}

/// Whether `dir` is a CalDAV calendar collection (has a `.volley-collection` marker of
/// type calendar).
pub fn is_calendar_collection(dir: &Path) -> bool {
    dir.is_dir() && store::read_meta(dir).calendar
}

/// Makes `dir` (created if missing, with its parents) a calendar collection named
/// `displayname`. For fixture generators; clients use MKCALENDAR.
pub fn make_calendar(dir: &Path, displayname: &str) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let meta = store::CollectionMeta {
        calendar: true,
        displayname: Some(displayname.to_owned()),
        components: None,
    };
    store::write_meta(dir, &meta)
}

/// Strong entity tag of a file's content, quoted, as both GET and PROPFIND report it.
/// A content hash (not mtime/size, as nginx uses) so that two writes within the same
/// second with the same length still get different tags, and tags survive a restart.
pub fn strong_etag(content: &[u8]) -> String {
    etag_of(fnv1a(content), content.len() as u64)
}

/// FNV-1a 64 over the bytes; stable across runs and platforms.
pub(crate) fn fnv1a(content: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in content {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// The ETag text of a content hash and length.
pub(crate) fn etag_of(fnv: u64, len: u64) -> String {
    format!("\"{fnv:016x}-{len:x}\"")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A temporary directory removed on drop (no dev-dependency needed).
    pub struct TempDir(PathBuf);

    impl TempDir {
        pub fn new(tag: &str) -> Self {
            static N: AtomicU64 = AtomicU64::new(0);
            let p = std::env::temp_dir().join(format!(
                "volley-dav-{tag}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Sends one request.
    pub fn call(
        dav: &Dav,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> DavResponse {
        dav.handle(&DavRequest {
            method,
            target,
            headers,
            body,
        })
    }

    pub fn body(r: &DavResponse) -> String {
        String::from_utf8_lossy(&r.body).into_owned()
    }

    #[test]
    fn options_advertises_classes_without_locking() {
        let d = TempDir::new("opt");
        let dav = Dav::new(d.path());
        let r = call(&dav, "OPTIONS", "/", &[], b"");
        assert_eq!(r.status, 200);
        assert_eq!(r.header("DAV"), Some(DAV_CLASSES));
        assert!(!r.header("DAV").unwrap().contains('2'));
        assert!(r.header("Allow").unwrap().contains("PROPFIND"));
    }

    #[test]
    fn a_read_only_handler_changes_nothing_and_says_what_it_allows() {
        let d = TempDir::new("ro");
        make_calendar(&d.path().join("cal"), "c").unwrap();
        std::fs::write(d.path().join("cal/a.ics"), b"x").unwrap();
        let before = tree(d.path());
        let dav = Dav::new(d.path()).read_only();
        let dest = [("Destination", "/cal/b.ics")];
        for (method, target, headers) in [
            ("PUT", "/cal/n.ics", &[][..]),
            ("DELETE", "/cal/a.ics", &[][..]),
            ("MKCOL", "/new/", &[][..]),
            ("MKCALENDAR", "/new2/", &[][..]),
            ("COPY", "/cal/a.ics", &dest[..]),
            ("MOVE", "/cal/a.ics", &dest[..]),
            ("PROPPATCH", "/cal/a.ics", &[][..]),
            ("LOCK", "/cal/a.ics", &[][..]),
        ] {
            let r = call(&dav, method, target, headers, b"x");
            assert_eq!(r.status, 405, "{method}");
            assert_eq!(r.header("Allow"), Some(ALLOW_READ_ONLY), "{method}");
        }
        assert_eq!(tree(d.path()), before, "a refused write changed the tree");
        assert!(!d.path().join("cal").join(store::SYNC_FILE).exists());
        let r = call(&dav, "OPTIONS", "/", &[], b"");
        assert_eq!(r.header("Allow"), Some(ALLOW_READ_ONLY));
        assert_eq!(
            call(&dav, "PROPFIND", "/cal/", &[("Depth", "1")], b"").status,
            207
        );
        // The same handler made writable (the default) takes the write.
        let rw = Dav::new(d.path());
        assert_eq!(call(&rw, "DELETE", "/cal/a.ics", &[], b"").status, 204);
    }

    /// Every path under `dir` with its length, sorted.
    fn tree(dir: &Path) -> Vec<(PathBuf, u64)> {
        let mut out = Vec::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let e = e.unwrap();
                let m = e.metadata().unwrap();
                if m.is_dir() {
                    todo.push(e.path());
                }
                out.push((e.path(), m.len()));
            }
        }
        out.sort();
        out
    }

    #[test]
    fn unsupported_methods_are_typed_errors() {
        let d = TempDir::new("lock");
        let dav = Dav::new(d.path());
        assert_eq!(call(&dav, "LOCK", "/x", &[], b"").status, 501);
        assert_eq!(call(&dav, "UNLOCK", "/x", &[], b"").status, 501);
        let r = call(&dav, "BREW", "/x", &[], b"");
        assert_eq!(r.status, 405);
        assert!(r.header("Allow").is_some());
        assert_eq!(call(&dav, "PUT", "relative", &[], b"").status, 400);
        assert_eq!(call(&dav, "PUT", "/../x", &[], b"").status, 403);
    }

    #[test]
    fn make_calendar_marks_a_directory() {
        let d = TempDir::new("mk");
        let cal = d.path().join("a/b");
        assert!(!is_calendar_collection(&cal));
        make_calendar(&cal, "B").unwrap();
        assert!(is_calendar_collection(&cal));
        assert!(!is_calendar_collection(d.path()));
        let dav = Dav::new(d.path());
        let t = dav.locate("/a/b/x.ics").unwrap();
        assert_eq!(dav.principal_href(&t, false), "/a/");
        let t = dav.locate("/a/b/").unwrap();
        assert_eq!(dav.principal_href(&t, true), "/a/");
        let t = dav.locate("/").unwrap();
        assert_eq!(dav.principal_href(&t, true), "/");
    }

    #[test]
    fn etag_is_stable_and_content_derived() {
        assert_eq!(strong_etag(b""), "\"cbf29ce484222325-0\"");
        assert_ne!(strong_etag(b"ab"), strong_etag(b"ba"));
    }
}
