//! The commands volley prints for the user to run next (`volley report ...`,
//! `volley history ...`), written so that they work exactly as printed: paths quoted
//! for a POSIX shell, `--db` given whenever the store is not the default `volley.db`.

use std::path::Path;

/// The store every command opens when `--db` is not given.
pub const DEFAULT_DB: &str = "volley.db";

/// `path` as one POSIX shell word (`volley_proc::shell_quote`, the quoting the remote
/// agents' scripts use too).
pub fn quote(path: &Path) -> String {
    volley_proc::shell_quote(&path.to_string_lossy())
}

/// ` --db PATH`, or nothing when `db` is the default store in the current directory.
pub fn db_flag(db: &Path) -> String {
    if db == Path::new(DEFAULT_DB) {
        String::new()
    } else {
        format!(" --db {}", quote(db))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_become_one_shell_word() {
        assert_eq!(
            quote(Path::new("/tmp/volley-demo-1/volley.db")),
            "/tmp/volley-demo-1/volley.db"
        );
        assert_eq!(quote(Path::new("/tmp/a b/v.db")), "'/tmp/a b/v.db'");
        assert_eq!(quote(Path::new("/tmp/it's")), "'/tmp/it'\\''s'");
        assert_eq!(quote(Path::new("")), "''");
        assert_eq!(db_flag(Path::new("volley.db")), "");
        assert_eq!(db_flag(Path::new("x/volley.db")), " --db x/volley.db");
    }
}
