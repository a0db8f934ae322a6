//! A running step's seconds, stored as each closes.
//!
//! Place in the flow: `volley bench --save` hands every second the recorder closes to
//! [`Store::record_live_second`] while the run goes, instead of keeping them all until
//! the step ends (issue 26: a long run's memory stays flat, and a run killed mid-step
//! keeps every second it had closed, in a run the next open marks incomplete). When the
//! step ends, [`Store::record_step`] moves these seconds' histograms into `histograms`
//! in the step's own transaction and drops the rows, so a finished step reads exactly
//! as one written at once. Rows are keyed by run and step index, since the step's row
//! does not exist yet.

use rusqlite::{params, Transaction};
use serde_json::Value;

use crate::error::Result;
use crate::store::{from_json, to_json, Store};
use crate::types::{HistogramBlob, HistogramKind, RunId};

/// One closed second of a running step.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveSecond {
    /// Position of the step in its run (the index its step row will have).
    pub step_index: u32,
    /// Second of the step's measured time.
    pub second: u32,
    /// Its counters, as named values.
    pub values: Value,
    /// Its histograms by kind (`second` is ignored: it is this second).
    pub histograms: Vec<HistogramBlob>,
}

impl Store {
    /// Caps this connection's page cache at `kib` KiB. For a connection that only
    /// appends seconds during a long run: SQLite's default cache (2 MB) fills with pages
    /// it never reads again and shows as the run's memory growing for its first half
    /// hour.
    pub fn cap_cache(&self, kib: u32) -> Result<()> {
        self.conn
            .pragma_update(None, "cache_size", -i64::from(kib.max(1)))?;
        Ok(())
    }

    /// Writes one closed second of a running run's step, durable on return, in one
    /// transaction. A second written twice keeps its last copy. Takes `&self`, as
    /// [`Store::record_injector_second`] does: a study writes its injectors' merged
    /// seconds from the coordinator's callback while it holds the store shared (the
    /// transaction is this call's alone: nothing else runs on the connection meanwhile).
    pub fn record_live_second(&self, run: RunId, s: &LiveSecond) -> Result<()> {
        self.require_running("runs", "run", run.0)?;
        let tx = self.conn.unchecked_transaction()?;
        tx.execute(
            "INSERT OR REPLACE INTO live_seconds (run_id, step_index, second, values_json)
             VALUES (?1, ?2, ?3, ?4)",
            params![
                run.0,
                s.step_index,
                s.second,
                to_json("live_seconds.values_json", &s.values)?
            ],
        )?;
        {
            let mut insert = tx.prepare(
                "INSERT OR REPLACE INTO live_histograms (run_id, step_index, second, kind, bytes)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            for h in &s.histograms {
                insert.execute(params![
                    run.0,
                    s.step_index,
                    s.second,
                    h.kind.as_str(),
                    h.bytes
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Drops the seconds stored for one step index that no step took (an attempt that
    /// failed before its step was recorded, the study going on): the next step of that
    /// index must not adopt them.
    pub fn forget_live_seconds(&self, run: RunId, step_index: u32) -> Result<()> {
        self.conn.execute(
            "DELETE FROM live_histograms WHERE run_id = ?1 AND step_index = ?2",
            params![run.0, step_index],
        )?;
        self.conn.execute(
            "DELETE FROM live_seconds WHERE run_id = ?1 AND step_index = ?2",
            params![run.0, step_index],
        )?;
        Ok(())
    }

    /// The seconds of one step of a run stored as they closed and not yet moved into
    /// the step (a run cut short keeps them), in order.
    pub fn live_seconds(&self, run: RunId, step_index: u32) -> Result<Vec<LiveSecond>> {
        let mut stmt = self.conn.prepare(
            "SELECT second, values_json FROM live_seconds
             WHERE run_id = ?1 AND step_index = ?2 ORDER BY second",
        )?;
        let mut rows = stmt.query(params![run.0, step_index])?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            out.push(LiveSecond {
                step_index,
                second: r.get(0)?,
                values: from_json("live_seconds.values_json", &r.get::<_, String>(1)?)?,
                histograms: Vec::new(),
            });
        }
        let mut stmt = self.conn.prepare(
            "SELECT second, kind, bytes FROM live_histograms
             WHERE run_id = ?1 AND step_index = ?2 ORDER BY second, kind",
        )?;
        let mut rows = stmt.query(params![run.0, step_index])?;
        while let Some(r) = rows.next()? {
            let second: u32 = r.get(0)?;
            let blob = HistogramBlob {
                second: Some(second),
                kind: HistogramKind::parse(&r.get::<_, String>(1)?)?,
                bytes: r.get(2)?,
            };
            if let Some(s) = out.iter_mut().find(|s| s.second == second) {
                s.histograms.push(blob);
            }
        }
        Ok(out)
    }
}

/// Inside a step's transaction: its stored seconds' histograms become the step's (a
/// blob the record itself carries for the same second and kind wins), and the live
/// rows go.
pub(crate) fn adopt(tx: &Transaction<'_>, run: RunId, step_index: u32, step_id: i64) -> Result<()> {
    tx.execute(
        "INSERT OR IGNORE INTO histograms (step_id, kind, second, bytes)
         SELECT ?1, kind, second, bytes FROM live_histograms
         WHERE run_id = ?2 AND step_index = ?3",
        params![step_id, run.0, step_index],
    )?;
    tx.execute(
        "DELETE FROM live_histograms WHERE run_id = ?1 AND step_index = ?2",
        params![run.0, step_index],
    )?;
    tx.execute(
        "DELETE FROM live_seconds WHERE run_id = ?1 AND step_index = ?2",
        params![run.0, step_index],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NewRun, RunKind, StepParameters, StepRecord};
    use serde_json::json;

    fn second(step_index: u32, second: u32) -> LiveSecond {
        LiveSecond {
            step_index,
            second,
            values: json!({ "completed": second * 10 }),
            histograms: vec![HistogramBlob {
                second: None,
                kind: HistogramKind::Response,
                bytes: vec![second as u8; 3],
            }],
        }
    }

    #[test]
    fn live_seconds_stay_until_their_step_is_recorded_then_become_its_histograms() {
        let mut store = Store::open_in_memory().unwrap();
        let run = store
            .begin_run(&NewRun {
                study: None,
                kind: RunKind::Bench,
                target: "x".into(),
                parameters: json!({}),
                environment: json!({}),
            })
            .unwrap();
        for s in 0..3 {
            store.record_live_second(run, &second(0, s)).unwrap();
        }
        store.record_live_second(run, &second(1, 0)).unwrap();
        let kept = store.live_seconds(run, 0).unwrap();
        assert_eq!(kept.len(), 3);
        assert_eq!(kept[2].values["completed"], 20);
        assert_eq!(kept[2].histograms[0].second, Some(2));

        let step = store
            .record_step(
                run,
                &StepRecord {
                    index: 0,
                    parameters: StepParameters::default(),
                    summary: json!({}),
                    verdict: None,
                    label: None,
                    started_unix_ms: 1,
                    finished_unix_ms: 2,
                    series: Vec::new(),
                    histograms: vec![HistogramBlob {
                        second: None,
                        kind: HistogramKind::Response,
                        bytes: vec![9],
                    }],
                },
            )
            .unwrap();
        let h = store.histograms(step).unwrap();
        let seconds: Vec<Option<u32>> = h.iter().map(|b| b.second).collect();
        assert_eq!(seconds, vec![None, Some(0), Some(1), Some(2)]);
        assert_eq!(h[3].bytes, vec![2, 2, 2]);
        assert!(store.live_seconds(run, 0).unwrap().is_empty());
        assert_eq!(
            store.live_seconds(run, 1).unwrap().len(),
            1,
            "other steps stay"
        );
    }
}
