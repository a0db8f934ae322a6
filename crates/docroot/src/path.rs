//! Safe mapping from a request target to a file under the root.
//!
//! The one gate both the static server and the DAV handler pass through, so that no
//! request reads or writes outside the root: `..` (also percent-encoded), NUL bytes,
//! backslash tricks and symlinks that leave the root are refused, and so is any segment
//! naming one of the DAV handler's internal files (`.volley-*`, see `volley_dav::store`), so that
//! neither GET nor any DAV method can read or overwrite them.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

/// Prefix of every file name volley's DAV store keeps for itself (collection markers,
/// dead properties, the change journal): never listed, fetched or written by clients.
pub const INTERNAL_PREFIX: &[u8] = b".volley-";

/// Whether a file name is one of ours (never listed, fetched or written by clients).
pub fn is_internal_name(name: &[u8]) -> bool {
    name.starts_with(INTERNAL_PREFIX)
}

/// Why a target was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathError {
    /// Not an origin-form target (`/...`), bad percent-encoding, or a NUL byte.
    BadTarget,
    /// A `..` segment or a symlink would leave the root, or a segment names an internal
    /// `.volley-*` file.
    Escapes,
}

/// Percent-decodes the path part of `target` (the query is dropped).
pub fn decode(target: &str) -> Result<Vec<u8>, PathError> {
    let path = target.split(['?', '#']).next().unwrap_or("");
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).ok_or(PathError::BadTarget)?;
                let s = std::str::from_utf8(hex).map_err(|_| PathError::BadTarget)?;
                let v = u8::from_str_radix(s, 16).map_err(|_| PathError::BadTarget)?;
                out.push(v);
                i += 3;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    if out.first() != Some(&b'/') || out.contains(&0) {
        return Err(PathError::BadTarget);
    }
    Ok(out)
}

/// The file `target` names under `root`. The file need not exist (PUT, MKCOL), but its
/// nearest existing ancestor, symlinks resolved, must lie inside the canonical root.
pub fn resolve(root: &Path, target: &str) -> Result<PathBuf, PathError> {
    let decoded = decode(target)?;
    let mut rel = PathBuf::new();
    for seg in decoded.split(|b| *b == b'/') {
        match seg {
            b"" | b"." => {}
            b".." => return Err(PathError::Escapes),
            s if is_internal_name(s) => return Err(PathError::Escapes),
            s => {
                let p = PathBuf::from(OsString::from_vec(s.to_vec()));
                // A segment must be one normal component (no embedded root or prefix).
                let mut comps = p.components();
                match (comps.next(), comps.next()) {
                    (Some(Component::Normal(_)), None) => rel.push(p),
                    _ => return Err(PathError::BadTarget),
                }
            }
        }
    }
    let full = root.join(&rel);
    let canon_root = root.canonicalize().map_err(|_| PathError::Escapes)?;
    let mut probe = full.as_path();
    loop {
        if let Ok(c) = probe.canonicalize() {
            if !c.starts_with(&canon_root) {
                return Err(PathError::Escapes);
            }
            break;
        }
        probe = match probe.parent() {
            Some(p) => p,
            None => return Err(PathError::Escapes),
        };
    }
    Ok(full)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traversal_corpus_is_refused() {
        // Both removed when their guards drop, also when an assertion fails.
        let root = tempfile::Builder::new()
            .prefix("volley-path-")
            .tempdir()
            .unwrap();
        let dir = root.path();
        std::fs::create_dir_all(dir.join("a")).unwrap();
        let outside = tempfile::Builder::new()
            .prefix("volley-out-")
            .tempdir()
            .unwrap();
        let outside = outside.path();
        let _ = std::os::unix::fs::symlink(outside, dir.join("leak"));
        for bad in [
            "/../etc/passwd",
            "/a/../../etc/passwd",
            "/%2e%2e/etc/passwd",
            "/%2E%2E%2Fetc",
            "/a/%2e%2e/%2e%2e/x",
            "/leak/x",
            "/leak",
            "/a%00b",
            "relative",
            "/%zz",
            "/%2",
            "/.volley-sync",
            "/a/.volley-props/x.xml",
            "/a/%2Evolley-collection",
        ] {
            assert!(resolve(dir, bad).is_err(), "{bad} was accepted");
        }
        assert_eq!(
            resolve(dir, "/a/new.ics?x=1").unwrap(),
            dir.join("a/new.ics")
        );
        assert_eq!(resolve(dir, "/").unwrap(), dir);
        assert_eq!(resolve(dir, "/a/./b%20c").unwrap(), dir.join("a/b c"));
    }
}
