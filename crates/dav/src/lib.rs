//! volley-dav: the WebDAV/CalDAV subset the built-in server speaks, as a pure
//! request -> response handler over a directory of plain files.
//!
//! Place in the flow: a target. `volley-server` owns sockets and HTTP framing and hands
//! every DAV method (and nothing else) to [`Dav::handle`]; this crate owns the meaning of
//! OPTIONS, PROPFIND, REPORT, PUT, DELETE, MKCOL and MKCALENDAR, and the safe mapping of
//! URL paths to files ([`path::resolve`]), which the static server uses too.
#![deny(missing_docs)]

pub mod path;

use std::path::PathBuf;

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
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| *v)
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

/// The handler for one root directory.
#[derive(Debug, Clone)]
pub struct Dav {
    root: PathBuf,
}

impl Dav {
    /// A handler serving `root` (which must exist).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Dav { root: root.into() }
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
            "OPTIONS" | "PROPFIND" | "PROPPATCH" | "REPORT" | "PUT" | "DELETE" | "MKCOL" | "MKCALENDAR"
                | "COPY" | "MOVE" | "LOCK" | "UNLOCK"
        )
    }

    /// Answers one request. Never panics on any input.
    pub fn handle(&self, req: &DavRequest<'_>) -> DavResponse {
        let _ = req;
        DavResponse { status: 501, headers: Vec::new(), body: b"DAV not built yet\n".to_vec() }
    }
}

/// Strong entity tag of a file's content, quoted, as both GET and PROPFIND report it.
/// A content hash (not mtime/size, as nginx uses) so that two writes within the same
/// second with the same length still get different tags, and tags survive a restart.
pub fn strong_etag(content: &[u8]) -> String {
    // FNV-1a 64 over the bytes, plus the length; stable across runs and platforms.
    let mut h: u64 = 0xcbf29ce484222325;
    for b in content {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("\"{:016x}-{:x}\"", h, content.len())
}
