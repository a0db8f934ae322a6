//! The [`Store`]: open/migrate, write studies, runs and steps, read them back.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, OptionalExtension, Row, TransactionBehavior};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{Result, StoreError};
use crate::owner::Owner;
use crate::schema;
use crate::types::*;

/// How long a writer waits for another process's write transaction before failing.
/// Several writers share one file (two studies and a `bench --save` at once): each
/// holds the write lock only for one step's transaction (one fsync), but on a busy
/// machine fsyncs queue, and a step that took seconds to measure is worth a long wait
/// rather than a "database is locked" that loses it.
const BUSY_TIMEOUT_MS: u64 = 60_000;

/// What [`Store::mark_incomplete_on_open`] found abandoned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Abandoned {
    /// Studies marked incomplete.
    pub studies: Vec<StudyId>,
    /// Runs marked incomplete.
    pub runs: Vec<RunId>,
}

/// The results store: one SQLite file per lab.
///
/// Durability: WAL journal with `synchronous = FULL`. In WAL mode, NORMAL already
/// survives a killed process, but may lose the last commits on power loss or a kernel
/// crash; FULL fsyncs the WAL at every commit, so a step is on disk when
/// [`Store::record_step`] returns ("nothing a user recorded is ever lost"). The price is
/// one fsync per step, and steps last seconds. WAL also lets reports read while a study
/// writes.
#[derive(Debug)]
pub struct Store {
    pub(crate) conn: Connection,
    owner: Owner,
}

impl Store {
    /// Opens (creating if needed) the store at `path`, migrates it to the current schema,
    /// and marks runs and studies abandoned by dead writers incomplete.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        Store::setup(Connection::open(path)?)
    }

    /// Opens an existing store for the read commands (`history`, `report`, `compare`)
    /// without needing free space: a full disk must not hide what is stored.
    ///
    /// [`Store::open`] writes on every open (a write transaction for the migration
    /// check, the sweep of abandoned runs), and SQLite itself must create the 32 KB
    /// `-shm` wal-index when the last writer closed cleanly. Here: no migration unless
    /// the file is older than this build (then this is [`Store::open`]), the sweep is
    /// best effort (kept, so a killed writer's runs read as incomplete when there is
    /// room), and when the `-shm` file cannot be made, the file is opened again in
    /// exclusive locking mode, where SQLite keeps the wal-index in the heap
    /// (<https://sqlite.org/wal.html>, "Use of WAL Without Shared-Memory"); a full
    /// disk has no writer to share the file with. A missing file is an error, never
    /// created.
    pub fn open_read(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref();
        let version = match Store::read_connection(path, false) {
            Ok((conn, version)) => Some((conn, version)),
            Err(e) if Store::no_room_for_shm(&e) => None,
            Err(e) => return Err(e.into()),
        };
        let (conn, version) = match version {
            Some(v) => v,
            None => Store::read_connection(path, true)?,
        };
        if version < schema::SCHEMA_VERSION {
            drop(conn);
            return Store::open(path);
        }
        if version > schema::SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                found: version,
                supported: schema::SCHEMA_VERSION,
            });
        }
        let store = Store {
            conn,
            owner: Owner::current(),
        };
        match store.mark_incomplete_on_open() {
            Err(e) if e.is_full() => {}
            Err(StoreError::Sqlite(e)) if Store::no_room_for_shm(&e) => {}
            r => {
                r?;
            }
        }
        Ok(store)
    }

    /// A connection to an existing file and its schema version (the first read, which
    /// is where SQLite opens the WAL and maps the `-shm` file).
    fn read_connection(
        path: &Path,
        exclusive: bool,
    ) -> std::result::Result<(Connection, i64), rusqlite::Error> {
        use rusqlite::OpenFlags;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS))?;
        if exclusive {
            // Must come before the first access to take effect for the wal-index.
            let _mode: String =
                conn.query_row("PRAGMA locking_mode = EXCLUSIVE", [], |r| r.get(0))?;
        }
        conn.pragma_update(None, "foreign_keys", true)?;
        let version = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        Ok((conn, version))
    }

    /// Whether `e` is SQLite failing for want of space for the `-shm` file (a full
    /// disk, or the I/O error SQLite reports when growing the file fails).
    fn no_room_for_shm(e: &rusqlite::Error) -> bool {
        match e {
            rusqlite::Error::SqliteFailure(f, _) => {
                f.code == rusqlite::ErrorCode::DiskFull
                    || f.extended_code == rusqlite::ffi::SQLITE_IOERR_SHMSIZE
                    || f.extended_code == rusqlite::ffi::SQLITE_IOERR_SHMMAP
                    || f.extended_code == rusqlite::ffi::SQLITE_IOERR_SHMOPEN
            }
            _ => false,
        }
    }

    /// A private in-memory store (for tests of the stages that write to it).
    pub fn open_in_memory() -> Result<Store> {
        Store::setup(Connection::open_in_memory()?)
    }

    fn setup(mut conn: Connection) -> Result<Store> {
        conn.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS))?;
        // journal_mode answers with the mode set ("memory" for in-memory databases).
        let _mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", true)?;
        schema::migrate(&mut conn)?;
        let store = Store {
            conn,
            owner: Owner::current(),
        };
        match store.mark_incomplete_on_open() {
            // On a full disk the sweep cannot write, but what is stored must stay
            // readable (`history`, `report`): open anyway; the next open with space
            // marks the abandoned runs.
            Err(e) if e.is_full() => {}
            r => {
                r?;
            }
        }
        Ok(store)
    }

    /// The schema version of the open file.
    pub fn schema_version(&self) -> Result<i64> {
        Ok(self
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))?)
    }

    /// Marks every study and run still 'running' whose writer process is gone as
    /// incomplete (with the current time as its end). Called by [`Store::open`]; public
    /// so a long-lived reader can sweep again.
    pub fn mark_incomplete_on_open(&self) -> Result<Abandoned> {
        let now = now_unix_ms();
        // Runs first, then studies: a study is abandoned exactly when its writer is dead.
        Ok(Abandoned {
            runs: self.sweep("runs", now)?.into_iter().map(RunId).collect(),
            studies: self
                .sweep("studies", now)?
                .into_iter()
                .map(StudyId)
                .collect(),
        })
    }

    fn sweep(&self, table: &'static str, now: i64) -> Result<Vec<i64>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT id, owner_pid, owner_start FROM {table} WHERE status = 'running'"
        ))?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, Option<i64>>(1)?,
                r.get::<_, Option<String>>(2)?,
            ))
        })?;
        let mut dead = Vec::new();
        for row in rows {
            let (id, pid, start) = row?;
            let alive = pid
                .and_then(|p| u32::try_from(p).ok())
                .is_some_and(|p| Owner::is_alive(p, start.as_deref()));
            if !alive {
                dead.push(id);
            }
        }
        for id in &dead {
            self.conn.execute(
                &format!(
                    "UPDATE {table} SET status = 'incomplete', finished_unix_ms = ?1
                     WHERE id = ?2 AND status = 'running'"
                ),
                params![now, id],
            )?;
        }
        Ok(dead)
    }

    /// Starts a study (status 'running', owned by this process).
    pub fn begin_study(&self, study: &NewStudy) -> Result<StudyId> {
        self.conn.execute(
            "INSERT INTO studies (name, file_text, started_unix_ms, status, owner_pid, owner_start)
             VALUES (?1, ?2, ?3, 'running', ?4, ?5)",
            params![
                study.name,
                study.file_text,
                now_unix_ms(),
                self.owner.pid,
                self.owner.start
            ],
        )?;
        Ok(StudyId(self.conn.last_insert_rowid()))
    }

    /// Ends a study as complete or incomplete.
    pub fn finish_study(&self, id: StudyId, status: Status) -> Result<()> {
        self.finish("studies", "study", id.0, status)
    }

    /// Starts a run (status 'running', owned by this process). A run in a study needs
    /// the study to be running.
    pub fn begin_run(&self, run: &NewRun) -> Result<RunId> {
        if let Some(study) = run.study {
            self.require_running("studies", "study", study.0)?;
        }
        self.conn.execute(
            "INSERT INTO runs (study_id, kind, target, parameters, environment,
                               started_unix_ms, status, owner_pid, owner_start)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'running', ?7, ?8)",
            params![
                run.study.map(|s| s.0),
                run.kind.as_str(),
                run.target,
                to_json("runs.parameters", &run.parameters)?,
                to_json("runs.environment", &run.environment)?,
                now_unix_ms(),
                self.owner.pid,
                self.owner.start,
            ],
        )?;
        Ok(RunId(self.conn.last_insert_rowid()))
    }

    /// Ends a run as complete or incomplete.
    pub fn finish_run(&self, id: RunId, status: Status) -> Result<()> {
        self.finish("runs", "run", id.0, status)
    }

    fn finish(
        &self,
        table: &'static str,
        what: &'static str,
        id: i64,
        status: Status,
    ) -> Result<()> {
        if status == Status::Running {
            return Err(StoreError::Invalid(
                "a study or run can only finish as complete or incomplete",
            ));
        }
        self.require_running(table, what, id)?;
        self.conn.execute(
            &format!(
                "UPDATE {table} SET status = ?1, finished_unix_ms = ?2 WHERE id = ?3 AND status = 'running'"
            ),
            params![status.as_str(), now_unix_ms(), id],
        )?;
        Ok(())
    }

    pub(crate) fn require_running(
        &self,
        table: &'static str,
        what: &'static str,
        id: i64,
    ) -> Result<()> {
        require_running(&self.conn, table, what, id)
    }

    /// Removes a running run that recorded no step and no capacity, with the seconds
    /// it stored as they closed, in one transaction: a run stopped before it measured
    /// anything (`bench --save` whose first answers refused the path) is no result, and
    /// `volley history` must not list it as an empty incomplete run. A run with a step
    /// or a capacity is a result and is refused ([`StoreError::Invalid`]).
    pub fn discard_run(&mut self, id: RunId) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        require_running(&tx, "runs", "run", id.0)?;
        let kept: i64 = tx.query_row(
            "SELECT (SELECT COUNT(*) FROM steps WHERE run_id = ?1)
                  + (SELECT COUNT(*) FROM capacities WHERE run_id = ?1)",
            [id.0],
            |r| r.get(0),
        )?;
        if kept > 0 {
            return Err(StoreError::Invalid(
                "a run that recorded a step or a capacity is kept, not discarded",
            ));
        }
        for table in ["live_histograms", "live_seconds", "injector_seconds"] {
            tx.execute(&format!("DELETE FROM {table} WHERE run_id = ?1"), [id.0])?;
        }
        tx.execute("DELETE FROM runs WHERE id = ?1", [id.0])?;
        tx.commit()?;
        Ok(())
    }

    /// Writes a finished step with its series and histograms in ONE transaction, and
    /// returns once it is durable (see [`Store`] on `synchronous = FULL`). Either all of
    /// it is stored or none; the run must still be running. The step's seconds stored
    /// as they closed ([`Store::record_live_second`]) become its histograms in the same
    /// transaction.
    pub fn record_step(&mut self, run: RunId, step: &StepRecord) -> Result<StepId> {
        let parameters = to_json("steps.parameters", &step.parameters)?;
        let summary = to_json("steps.summary", &step.summary)?;
        let verdict = step
            .verdict
            .as_ref()
            .map(|v| to_json("steps.verdict", v))
            .transpose()?;
        // IMMEDIATE takes the write lock up front, so the status check and the inserts
        // see the same state even with another process writing.
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        require_running(&tx, "runs", "run", run.0)?;
        tx.execute(
            "INSERT INTO steps (run_id, step_index, parameters, summary, verdict, label,
                                started_unix_ms, finished_unix_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                run.0,
                step.index,
                parameters,
                summary,
                verdict,
                step.label,
                step.started_unix_ms,
                step.finished_unix_ms
            ],
        )?;
        let step_id = tx.last_insert_rowid();
        {
            let mut insert = tx.prepare(
                "INSERT INTO series (step_id, source, second, values_json) VALUES (?1, ?2, ?3, ?4)",
            )?;
            for point in &step.series {
                insert.execute(params![
                    step_id,
                    point.source.as_str(),
                    point.second,
                    to_json("series.values_json", &point.values)?
                ])?;
            }
            let mut insert = tx.prepare(
                "INSERT INTO histograms (step_id, kind, second, bytes) VALUES (?1, ?2, ?3, ?4)",
            )?;
            for h in &step.histograms {
                insert.execute(params![step_id, h.kind.as_str(), h.second, h.bytes])?;
            }
        }
        crate::live::adopt(&tx, run, step.index, step_id)?;
        tx.commit()?;
        Ok(StepId(step_id))
    }

    /// Writes the result of one capacity search of a running run, durable on return. A
    /// search's steps are recorded one by one as they end; this row is its answer, written
    /// the moment the search ends, so a study killed later keeps it.
    pub fn record_capacity(&self, run: RunId, c: &CapacityRecord) -> Result<CapacityId> {
        let finite = |v: Option<f64>| v.is_none_or(f64::is_finite);
        let rates_ok = finite(c.capacity_rps) && finite(c.ci_lo_rps) && finite(c.ci_hi_rps);
        if !(rates_ok && c.confidence > 0.0 && c.confidence < 1.0) {
            return Err(StoreError::Invalid(
                "a capacity needs finite rates and a confidence level between 0 and 1",
            ));
        }
        self.require_running("runs", "run", run.0)?;
        self.conn.execute(
            "INSERT INTO capacities (run_id, cell, capacity_rps, ci_lo_rps, ci_hi_rps,
                                     confidence, search_end, steps, started_unix_ms,
                                     finished_unix_ms, detail)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                run.0,
                to_json("capacities.cell", &c.cell)?,
                c.capacity_rps,
                c.ci_lo_rps,
                c.ci_hi_rps,
                c.confidence,
                c.end.as_str(),
                c.steps,
                c.started_unix_ms,
                c.finished_unix_ms,
                to_json("capacities.detail", &c.detail)?,
            ],
        )?;
        Ok(CapacityId(self.conn.last_insert_rowid()))
    }

    /// The capacity search results of a run, in the order they were written.
    pub fn capacities(&self, run: RunId) -> Result<Vec<CapacityRow>> {
        self.query(
            "SELECT id, run_id, cell, capacity_rps, ci_lo_rps, ci_hi_rps, confidence,
                    search_end, steps, started_unix_ms, finished_unix_ms, detail
             FROM capacities WHERE run_id = ?1 ORDER BY id",
            [run.0],
            |r| {
                Ok(CapacityRow {
                    id: CapacityId(r.get(0)?),
                    run: RunId(r.get(1)?),
                    record: CapacityRecord {
                        cell: from_json("capacities.cell", &r.get::<_, String>(2)?)?,
                        capacity_rps: r.get(3)?,
                        ci_lo_rps: r.get(4)?,
                        ci_hi_rps: r.get(5)?,
                        confidence: r.get(6)?,
                        end: SearchEnd::parse(&r.get::<_, String>(7)?)?,
                        steps: r.get(8)?,
                        started_unix_ms: r.get(9)?,
                        finished_unix_ms: r.get(10)?,
                        detail: from_json("capacities.detail", &r.get::<_, String>(11)?)?,
                    },
                })
            },
        )
    }

    /// Every study, oldest first.
    pub fn list_studies(&self) -> Result<Vec<StudyRow>> {
        self.query(&format!("{STUDY_COLUMNS} ORDER BY id"), [], study_row)
    }

    /// One study.
    pub fn study(&self, id: StudyId) -> Result<StudyRow> {
        self.query(&format!("{STUDY_COLUMNS} WHERE id = ?1"), [id.0], study_row)?
            .pop()
            .ok_or(StoreError::NotFound {
                what: "study",
                id: id.0,
            })
    }

    /// Every run, oldest first.
    pub fn list_runs(&self) -> Result<Vec<RunRow>> {
        self.query(&format!("{RUN_COLUMNS} ORDER BY id"), [], run_row)
    }

    /// The runs of one study, oldest first.
    pub fn runs_of_study(&self, study: StudyId) -> Result<Vec<RunRow>> {
        self.query(
            &format!("{RUN_COLUMNS} WHERE study_id = ?1 ORDER BY id"),
            [study.0],
            run_row,
        )
    }

    /// One run.
    pub fn run(&self, id: RunId) -> Result<RunRow> {
        self.query(&format!("{RUN_COLUMNS} WHERE id = ?1"), [id.0], run_row)?
            .pop()
            .ok_or(StoreError::NotFound {
                what: "run",
                id: id.0,
            })
    }

    /// The steps of a run, by index.
    pub fn steps(&self, run: RunId) -> Result<Vec<StepRow>> {
        self.query(
            "SELECT id, run_id, step_index, parameters, summary, verdict, label,
                    started_unix_ms, finished_unix_ms
             FROM steps WHERE run_id = ?1 ORDER BY step_index",
            [run.0],
            |r| {
                Ok(StepRow {
                    id: StepId(r.get(0)?),
                    run: RunId(r.get(1)?),
                    index: r.get(2)?,
                    parameters: from_json("steps.parameters", &r.get::<_, String>(3)?)?,
                    summary: from_json("steps.summary", &r.get::<_, String>(4)?)?,
                    verdict: r
                        .get::<_, Option<String>>(5)?
                        .map(|v| from_json("steps.verdict", &v))
                        .transpose()?,
                    label: r.get(6)?,
                    started_unix_ms: r.get(7)?,
                    finished_unix_ms: r.get(8)?,
                })
            },
        )
    }

    /// The per-second series of a step, load rows then monitor rows, by second.
    pub fn series(&self, step: StepId) -> Result<Vec<SeriesPoint>> {
        self.query(
            "SELECT source, second, values_json FROM series WHERE step_id = ?1
             ORDER BY source, second",
            [step.0],
            |r| {
                Ok(SeriesPoint {
                    source: SeriesSource::parse(&r.get::<_, String>(0)?)?,
                    second: r.get(1)?,
                    values: from_json("series.values_json", &r.get::<_, String>(2)?)?,
                })
            },
        )
    }

    /// The histograms of a step: whole-step ones first, then by second, by kind.
    pub fn histograms(&self, step: StepId) -> Result<Vec<HistogramBlob>> {
        self.query(
            "SELECT kind, second, bytes FROM histograms WHERE step_id = ?1
             ORDER BY second IS NOT NULL, second, kind",
            [step.0],
            |r| {
                Ok(HistogramBlob {
                    kind: HistogramKind::parse(&r.get::<_, String>(0)?)?,
                    second: r.get(1)?,
                    bytes: r.get(2)?,
                })
            },
        )
    }

    /// Runs `sql` and maps every row; the mapper returns store errors so JSON and enum
    /// parsing failures are reported as such, not as SQLite errors.
    fn query<T, P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
        map: impl Fn(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut stmt = self.conn.prepare(sql)?;
        let mut rows = stmt.query(params)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            out.push(map(row)?);
        }
        Ok(out)
    }
}

const STUDY_COLUMNS: &str =
    "SELECT id, name, file_text, started_unix_ms, finished_unix_ms, status FROM studies";

fn study_row(r: &Row<'_>) -> Result<StudyRow> {
    Ok(StudyRow {
        id: StudyId(r.get(0)?),
        name: r.get(1)?,
        file_text: r.get(2)?,
        started_unix_ms: r.get(3)?,
        finished_unix_ms: r.get(4)?,
        status: Status::parse(&r.get::<_, String>(5)?)?,
    })
}

const RUN_COLUMNS: &str = "SELECT id, study_id, kind, target, parameters, environment,
        started_unix_ms, finished_unix_ms, status FROM runs";

fn run_row(r: &Row<'_>) -> Result<RunRow> {
    Ok(RunRow {
        id: RunId(r.get(0)?),
        study: r.get::<_, Option<i64>>(1)?.map(StudyId),
        kind: RunKind::parse(&r.get::<_, String>(2)?)?,
        target: r.get(3)?,
        parameters: from_json("runs.parameters", &r.get::<_, String>(4)?)?,
        environment: from_json("runs.environment", &r.get::<_, String>(5)?)?,
        started_unix_ms: r.get(6)?,
        finished_unix_ms: r.get(7)?,
        status: Status::parse(&r.get::<_, String>(8)?)?,
    })
}

pub(crate) fn to_json(column: &'static str, value: &impl Serialize) -> Result<String> {
    serde_json::to_string(value).map_err(|source| StoreError::Json { column, source })
}

pub(crate) fn from_json<T: DeserializeOwned>(column: &'static str, text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|source| StoreError::Json { column, source })
}

/// Wall-clock now in milliseconds since the Unix epoch (0 if the clock is before 1970).
/// `Ok` when row `id` of `table` (studies or runs) is running; else which it is not.
/// Takes a connection so a transaction (which derefs to one) checks inside itself.
fn require_running(
    conn: &Connection,
    table: &'static str,
    what: &'static str,
    id: i64,
) -> Result<()> {
    let status: Option<String> = conn
        .query_row(
            &format!("SELECT status FROM {table} WHERE id = ?1"),
            [id],
            |r| r.get(0),
        )
        .optional()?;
    match status.as_deref() {
        None => Err(StoreError::NotFound { what, id }),
        Some("running") => Ok(()),
        Some(other) => Err(StoreError::NotRunning {
            what,
            id,
            status: other.to_owned(),
        }),
    }
}

fn now_unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step whose histogram takes `bytes` bytes.
    fn step(index: u32, bytes: usize) -> StepRecord {
        StepRecord {
            index,
            parameters: StepParameters::default(),
            summary: serde_json::json!({"requests": {"ok": 1}}),
            verdict: None,
            label: None,
            started_unix_ms: 0,
            finished_unix_ms: 1,
            series: Vec::new(),
            histograms: vec![HistogramBlob {
                second: None,
                kind: HistogramKind::Response,
                bytes: (0..bytes).map(|k| (k % 251) as u8).collect(),
            }],
        }
    }

    /// A full database (SQLite's page limit stands in for a full disk: the same
    /// SQLITE_FULL) refuses the step that does not fit with [`StoreError::Full`], rolls
    /// it back whole, and keeps every earlier step readable in a sound file.
    #[test]
    fn a_full_disk_is_a_typed_error_and_keeps_what_was_stored() {
        let mut store = Store::open_in_memory().unwrap();
        let run = store
            .begin_run(&NewRun {
                study: None,
                kind: RunKind::Bench,
                target: "t".into(),
                parameters: serde_json::json!({}),
                environment: serde_json::json!({}),
            })
            .unwrap();
        let pages: i64 = store
            .conn
            .pragma_query_value(None, "page_count", |r| r.get(0))
            .unwrap();
        store
            .conn
            .pragma_update(None, "max_page_count", pages + 40)
            .unwrap();
        let mut stored = 0;
        let err = loop {
            match store.record_step(run, &step(stored, 20_000)) {
                Ok(_) => stored += 1,
                Err(e) => break e,
            }
            assert!(stored < 100, "the page limit never bit");
        };
        assert!(err.is_full(), "{err:?}");
        assert!(err.to_string().contains("disk is full"), "{err}");
        assert!(stored >= 1, "the limit left room for at least one step");
        let steps = store.steps(run).unwrap();
        assert_eq!(
            steps.len(),
            stored as usize,
            "the refused step left nothing"
        );
        for s in &steps {
            assert_eq!(store.histograms(s.id).unwrap()[0].bytes.len(), 20_000);
        }
        let check: String = store
            .conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
    }
}
