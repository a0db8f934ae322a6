//! A prepared docroot: a fixture set generated into a private temporary directory that
//! is removed when the value is dropped (normal end, error, or Ctrl-C's return), so a
//! managed target never serves a stale or shared tree.
//!
//! Place in the flow: before a target starts; `volley bench --target` and a study make
//! one each and hand [`PreparedDocroot::path`] to the target spec.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use volley_fixtures::Fixture;

use crate::HarnessError;

/// Where the docroot a managed target serves comes from: the one meaning of "docroot
/// source" for `volley bench --target` and study files alike.
#[derive(Debug, Clone, PartialEq)]
pub enum DocrootSource {
    /// A fixture set volley generates (seeded) into a private temporary directory.
    Fixture {
        /// Which set.
        kind: Fixture,
        /// Its seed.
        seed: u64,
    },
    /// A directory the user names, served as it is and never modified.
    Dir(PathBuf),
    /// The target's own default (a private directory with an index.html).
    Default,
}

/// A docroot ready to serve: the user's directory, or a generated tree that lives as long
/// as this value.
#[derive(Debug)]
pub enum ServedDocroot {
    /// The user's directory.
    Dir(PathBuf),
    /// A generated fixture tree (removed on drop).
    Prepared(PreparedDocroot),
}

impl ServedDocroot {
    /// The directory to hand to the target spec.
    pub fn path(&self) -> &Path {
        match self {
            ServedDocroot::Dir(p) => p,
            ServedDocroot::Prepared(p) => p.path(),
        }
    }
}

impl DocrootSource {
    /// Makes the docroot ready: generates a fixture (its directory named after `who`),
    /// or passes the user's directory through. `None` for [`DocrootSource::Default`].
    pub fn prepare(&self, who: &str) -> Result<Option<ServedDocroot>, HarnessError> {
        Ok(match self {
            DocrootSource::Default => None,
            DocrootSource::Dir(p) => Some(ServedDocroot::Dir(p.clone())),
            DocrootSource::Fixture { kind, seed } => Some(ServedDocroot::Prepared(
                PreparedDocroot::generate(kind, *seed, who)?,
            )),
        })
    }
}

/// A generated fixture tree; the directory goes with the value.
#[derive(Debug)]
pub struct PreparedDocroot {
    /// The private directory (removed on drop).
    dir: PathBuf,
    /// The served tree inside it.
    www: PathBuf,
    /// The directory's line in this process's ledger, so a volley killed before the
    /// drop leaves it to the next one's orphan sweep (dropped after the removal).
    _noted: volley_targets::NotedDir,
}

impl PreparedDocroot {
    /// Generates `fixture` (seeded) into `<temp>/volley-<who>-<pid>-<n>/www`. The served
    /// tree is a subdirectory so nothing else in the private directory is ever served.
    pub fn generate(fixture: &Fixture, seed: u64, who: &str) -> Result<Self, HarnessError> {
        static N: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        for _ in 0..100 {
            let n = N.fetch_add(1, Ordering::Relaxed);
            let dir = base.join(format!("volley-{who}-{}-{n}", std::process::id()));
            let noted = volley_targets::NotedDir::note("docroot", &dir);
            match std::fs::create_dir(&dir) {
                Ok(()) => {
                    let prepared = PreparedDocroot {
                        www: dir.join("www"),
                        dir,
                        _noted: noted,
                    };
                    volley_fixtures::generate(fixture, &prepared.www, seed)?;
                    return Ok(prepared);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(source) => return Err(HarnessError::TempDir { path: dir, source }),
            }
        }
        Err(HarnessError::TempDir {
            path: base,
            source: std::io::ErrorKind::AlreadyExists.into(),
        })
    }

    /// The directory to serve.
    pub fn path(&self) -> &Path {
        &self.www
    }
}

impl Drop for PreparedDocroot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_is_generated_and_removed_on_drop() {
        let d = PreparedDocroot::generate(&Fixture::Sizes, 0, "harness-test").unwrap();
        let www = d.path().to_path_buf();
        assert!(www.join("700b.html").is_file());
        let dir = www.parent().unwrap().to_path_buf();
        drop(d);
        assert!(!dir.exists());
    }
}
