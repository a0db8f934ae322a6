//! The schema and its forward migrations, versioned with `PRAGMA user_version`.
//!
//! `MIGRATIONS[i]` takes a file from version `i` to `i + 1`. Each runs in its own
//! transaction together with the `user_version` bump, so a crash mid-migration leaves
//! the file at the old version, never half-migrated. Migrations are append-only: never
//! edit a released one, add the next.

use rusqlite::{Connection, TransactionBehavior};

use crate::error::{Result, StoreError};

/// Forward migrations, oldest first.
const MIGRATIONS: &[&str] = &[
    // v1: studies, runs, steps, per-second series, histograms.
    "
    CREATE TABLE studies (
        id                INTEGER PRIMARY KEY,
        name              TEXT NOT NULL,
        file_text         TEXT NOT NULL,
        started_unix_ms   INTEGER NOT NULL,
        finished_unix_ms  INTEGER,
        status            TEXT NOT NULL CHECK (status IN ('running', 'complete', 'incomplete')),
        owner_pid         INTEGER,
        owner_start       TEXT
    );
    CREATE TABLE runs (
        id                INTEGER PRIMARY KEY,
        study_id          INTEGER REFERENCES studies(id),
        kind              TEXT NOT NULL CHECK (kind IN ('bench', 'study-step')),
        target            TEXT NOT NULL,
        parameters        TEXT NOT NULL,
        environment       TEXT NOT NULL,
        started_unix_ms   INTEGER NOT NULL,
        finished_unix_ms  INTEGER,
        status            TEXT NOT NULL CHECK (status IN ('running', 'complete', 'incomplete')),
        owner_pid         INTEGER,
        owner_start       TEXT
    );
    CREATE INDEX runs_by_study ON runs(study_id);
    CREATE TABLE steps (
        id                INTEGER PRIMARY KEY,
        run_id            INTEGER NOT NULL REFERENCES runs(id),
        step_index        INTEGER NOT NULL,
        parameters        TEXT NOT NULL,
        summary           TEXT NOT NULL,
        verdict           TEXT,
        label             TEXT,
        started_unix_ms   INTEGER NOT NULL,
        finished_unix_ms  INTEGER NOT NULL,
        UNIQUE (run_id, step_index)
    );
    CREATE TABLE series (
        step_id      INTEGER NOT NULL REFERENCES steps(id),
        source       TEXT NOT NULL CHECK (source IN ('load', 'monitor')),
        second       INTEGER NOT NULL,
        values_json  TEXT NOT NULL,
        PRIMARY KEY (step_id, source, second)
    ) WITHOUT ROWID;
    CREATE TABLE histograms (
        id       INTEGER PRIMARY KEY,
        step_id  INTEGER NOT NULL REFERENCES steps(id),
        kind     TEXT NOT NULL
                 CHECK (kind IN ('response', 'service', 'ttfb', 'connect', 'send_lag')),
        second   INTEGER,
        bytes    BLOB NOT NULL
    );
    CREATE UNIQUE INDEX histograms_one_per_slot ON histograms(step_id, kind, coalesce(second, -1));
    ",
    // v2: one row per finished (or interrupted) capacity search, written when it ends.
    "
    CREATE TABLE capacities (
        id                INTEGER PRIMARY KEY,
        run_id            INTEGER NOT NULL REFERENCES runs(id),
        cell              TEXT NOT NULL,
        capacity_rps      REAL,
        ci_lo_rps         REAL,
        ci_hi_rps         REAL,
        confidence        REAL NOT NULL,
        search_end        TEXT NOT NULL CHECK (search_end IN ('converged', 'reached_max_rate',
                              'below_min_rate', 'step_budget_exhausted', 'generator_bound',
                              'interrupted')),
        steps             INTEGER NOT NULL,
        started_unix_ms   INTEGER NOT NULL,
        finished_unix_ms  INTEGER NOT NULL,
        detail            TEXT NOT NULL
    );
    CREATE INDEX capacities_by_run ON capacities(run_id);
    ",
    // v3: two more histogram kinds, the parts of send lag: sched_lag (dispatched -
    // intended) and conn_wait (sent - dispatched). SQLite cannot alter a CHECK, so the
    // table is rebuilt and its rows copied (ids kept).
    "
    CREATE TABLE histograms_v2 (
        id       INTEGER PRIMARY KEY,
        step_id  INTEGER NOT NULL REFERENCES steps(id),
        kind     TEXT NOT NULL
                 CHECK (kind IN ('response', 'service', 'ttfb', 'connect', 'send_lag',
                                 'sched_lag', 'conn_wait')),
        second   INTEGER,
        bytes    BLOB NOT NULL
    );
    INSERT INTO histograms_v2 (id, step_id, kind, second, bytes)
        SELECT id, step_id, kind, second, bytes FROM histograms;
    DROP TABLE histograms;
    ALTER TABLE histograms_v2 RENAME TO histograms;
    CREATE UNIQUE INDEX histograms_one_per_slot ON histograms(step_id, kind, coalesce(second, -1));
    ",
    // Each injector's own seconds, written as they arrive during a step with several
    // injectors, before the step row exists: keyed by run and step index, not step id.
    "
    CREATE TABLE injector_seconds (
        run_id       INTEGER NOT NULL REFERENCES runs(id),
        step_index   INTEGER NOT NULL,
        injector     TEXT NOT NULL,
        second       INTEGER NOT NULL,
        arrived_ms   INTEGER NOT NULL,
        values_json  TEXT NOT NULL,
        response     BLOB NOT NULL,
        PRIMARY KEY (run_id, step_index, injector, second)
    ) WITHOUT ROWID;
    ",
    // A running step's seconds, written as each closes (`volley bench --save`), before
    // the step row exists: keyed by run and step index. The step's record moves their
    // histograms into `histograms` and drops them; a killed run keeps them.
    "
    CREATE TABLE live_seconds (
        run_id       INTEGER NOT NULL REFERENCES runs(id),
        step_index   INTEGER NOT NULL,
        second       INTEGER NOT NULL,
        values_json  TEXT NOT NULL,
        PRIMARY KEY (run_id, step_index, second)
    ) WITHOUT ROWID;
    CREATE TABLE live_histograms (
        run_id       INTEGER NOT NULL REFERENCES runs(id),
        step_index   INTEGER NOT NULL,
        second       INTEGER NOT NULL,
        kind         TEXT NOT NULL
                     CHECK (kind IN ('response', 'service', 'ttfb', 'connect', 'send_lag',
                                     'sched_lag', 'conn_wait')),
        bytes        BLOB NOT NULL,
        PRIMARY KEY (run_id, step_index, second, kind)
    ) WITHOUT ROWID;
    ",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the file up to [`SCHEMA_VERSION`]; refuses a file from a newer build.
pub(crate) fn migrate(conn: &mut Connection) -> Result<()> {
    // A current file needs no write transaction: readers and a second writer then
    // never queue behind another process's write lock just to learn that.
    let current: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if current == SCHEMA_VERSION {
        return Ok(());
    }
    loop {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        // Read inside the write transaction so two processes opening a fresh file at
        // once cannot both apply the same migration.
        let version: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        if version == SCHEMA_VERSION {
            return Ok(());
        }
        let Some(sql) = usize::try_from(version)
            .ok()
            .and_then(|v| MIGRATIONS.get(v))
        else {
            return Err(StoreError::Invalid("negative schema version in the file"));
        };
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", version + 1)?;
        tx.commit()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CapacityRecord, RunKind, SearchEnd, Status, Store};

    /// A file written by a v1 build (studies, runs, steps; no capacities table) opens,
    /// keeps its rows, and gains the capacities table.
    #[test]
    fn a_v1_file_opens_and_gains_the_capacities_table() {
        // Removed when `tmp` drops, also when an assertion fails.
        let tmp = tempfile::Builder::new()
            .prefix("volley-store-v1-")
            .tempdir()
            .unwrap();
        let dir = tmp.path();
        let db = dir.join("old.sqlite");
        {
            let conn = Connection::open(&db).unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
            conn.execute_batch(
                "INSERT INTO runs (id, kind, target, parameters, environment, started_unix_ms,
                                   finished_unix_ms, status)
                 VALUES (7, 'bench', 'old', '{}', '{}', 1, 2, 'complete');
                 INSERT INTO steps (run_id, step_index, parameters, summary, started_unix_ms,
                                    finished_unix_ms)
                 VALUES (7, 0, '{\"repeat\":0}', '{\"x\":1}', 1, 2);",
            )
            .unwrap();
        }
        // A reader migrates an old file too (the one case it writes), and never
        // creates a missing one.
        let missing = dir.join("none.sqlite");
        assert!(Store::open_read(&missing).is_err());
        assert!(!missing.exists());
        let store = Store::open_read(&db).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        drop(store);
        let store = Store::open(&db).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        let run = store.run(crate::RunId(7)).unwrap();
        assert_eq!((run.target.as_str(), run.status), ("old", Status::Complete));
        assert_eq!(store.steps(run.id).unwrap().len(), 1);
        assert!(store.capacities(run.id).unwrap().is_empty());
        // The new table takes rows in the migrated file.
        let live = store
            .begin_run(&crate::NewRun {
                study: None,
                kind: RunKind::Bench,
                target: "new".into(),
                parameters: serde_json::json!({}),
                environment: serde_json::json!({}),
            })
            .unwrap();
        let rec = CapacityRecord {
            cell: serde_json::json!({"workload": "w"}),
            capacity_rps: Some(100.0),
            ci_lo_rps: Some(90.0),
            ci_hi_rps: None,
            confidence: 0.95,
            end: SearchEnd::Converged,
            steps: 5,
            started_unix_ms: 10,
            finished_unix_ms: 20,
            detail: serde_json::json!({}),
        };
        store.record_capacity(live, &rec).unwrap();
        assert_eq!(store.capacities(live).unwrap()[0].record, rec);
    }

    #[test]
    fn v1_files_gain_the_send_lag_parts_and_keep_their_histograms() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        conn.execute_batch(
            "INSERT INTO studies (id, name, file_text, started_unix_ms, status)
                 VALUES (1, 's', '', 0, 'running');
             INSERT INTO runs (id, study_id, kind, target, parameters, environment,
                               started_unix_ms, status)
                 VALUES (1, 1, 'study-step', 't', '{}', '{}', 0, 'running');
             INSERT INTO steps (id, run_id, step_index, parameters, summary,
                                started_unix_ms, finished_unix_ms)
                 VALUES (1, 1, 0, '{}', '{}', 0, 0);",
        )
        .unwrap();
        conn.execute(
            "INSERT INTO histograms (step_id, kind, second, bytes) VALUES (1, 'send_lag', 0, x'01')",
            [],
        )
        .unwrap();
        // v1 refuses the new kinds.
        assert!(conn
            .execute(
                "INSERT INTO histograms (step_id, kind, second, bytes) VALUES (1, 'sched_lag', 0, x'02')",
                [],
            )
            .is_err());
        migrate(&mut conn).unwrap();
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        for kind in ["sched_lag", "conn_wait"] {
            conn.execute(
                "INSERT INTO histograms (step_id, kind, second, bytes) VALUES (1, ?1, 0, x'02')",
                [kind],
            )
            .unwrap();
        }
        let kinds: Vec<String> = conn
            .prepare("SELECT kind FROM histograms ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<std::result::Result<_, _>>()
            .unwrap();
        assert_eq!(kinds, ["send_lag", "sched_lag", "conn_wait"]);
        // Still one histogram per (step, kind, second).
        assert!(conn
            .execute(
                "INSERT INTO histograms (step_id, kind, second, bytes) VALUES (1, 'conn_wait', 0, x'03')",
                [],
            )
            .is_err());
        assert!(conn
            .execute(
                "INSERT INTO histograms (step_id, kind, second, bytes) VALUES (1, 'bogus', 1, x'03')",
                [],
            )
            .is_err());
    }
}
