//! The store's typed errors.

use thiserror::Error;

/// Everything that can go wrong reading or writing the results store.
#[derive(Debug, Error)]
pub enum StoreError {
    /// SQLite refused an operation (I/O error, corrupt file, locked past the timeout).
    #[error("results store: {0}")]
    Sqlite(rusqlite::Error),
    /// The disk (or the database's size limit) is full. The transaction that hit it was
    /// rolled back whole, so every step stored before stays readable and the file is
    /// not corrupt; nothing more can be recorded until space is freed.
    #[error("results store: the disk is full; the steps stored before this one are kept (free space to record more)")]
    Full(rusqlite::Error),
    /// A JSON column could not be written or read back.
    #[error("results store: bad JSON in {column}: {source}")]
    Json {
        /// The column concerned.
        column: &'static str,
        /// The underlying error.
        source: serde_json::Error,
    },
    /// The file was written by a newer volley whose schema this one does not know.
    #[error("results store schema version {found} is newer than this volley supports ({supported}); upgrade volley")]
    NewerSchema {
        /// The file's `user_version`.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// No row with this id.
    #[error("results store: no {what} with id {id}")]
    NotFound {
        /// "study", "run" or "step".
        what: &'static str,
        /// The id looked up.
        id: i64,
    },
    /// The study or run is already finished, so nothing more may be recorded into it.
    #[error("results store: {what} {id} is already {status}, cannot record into it")]
    NotRunning {
        /// "study" or "run".
        what: &'static str,
        /// Its id.
        id: i64,
        /// Its status.
        status: String,
    },
    /// A value read back is not one this build knows (e.g. an unknown status string).
    #[error("results store: unknown {what} {value:?} in the file")]
    UnknownValue {
        /// What kind of value.
        what: &'static str,
        /// The value found.
        value: String,
    },
    /// A caller asked for something the store cannot represent.
    #[error("results store: {0}")]
    Invalid(&'static str),
}

impl From<rusqlite::Error> for StoreError {
    /// A full disk gets its own variant, so callers can stop with one clear line
    /// instead of SQLite's wording.
    fn from(e: rusqlite::Error) -> Self {
        if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull) {
            StoreError::Full(e)
        } else {
            StoreError::Sqlite(e)
        }
    }
}

impl StoreError {
    /// Whether this is a full disk ([`StoreError::Full`]).
    pub fn is_full(&self) -> bool {
        matches!(self, StoreError::Full(_))
    }
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, StoreError>;
