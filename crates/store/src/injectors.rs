//! Each injector's own seconds, stored as they arrive.
//!
//! Place in the flow: while a step with several injectors runs, the coordinator hands
//! every per-second record an agent streams to the study runner, which writes it here
//! at once, before the step itself (merged, judged) is recorded at its end. So a study
//! killed mid-step still holds every second each injector had sent, and each injector's
//! series can be read back on its own beside the merged step (docs/methodology.md,
//! "Several injectors"). Rows are keyed by run and step index, since the step's row
//! does not exist yet when its first seconds arrive.

use rusqlite::params;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Result;
use crate::store::{from_json, to_json, Store};
use crate::types::RunId;

/// One second of one injector, as it arrived.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InjectorSecond {
    /// Position of the step in its run (the index its step row will have).
    pub step_index: u32,
    /// The injector's name.
    pub injector: String,
    /// Whole seconds since the run's common start instant (T0).
    pub second: u64,
    /// When the coordinator received it, milliseconds after T0 on its clock: how late a
    /// second arrived is read from here.
    pub arrived_ms: i64,
    /// The second's counters and self-check, as named values.
    pub values: Value,
    /// Its response-time histogram (HdrHistogram V2 bytes, stored opaquely; empty when
    /// the second had no response).
    pub response: Vec<u8>,
}

impl Store {
    /// Writes one injector second of a running run, durable on return. A second sent
    /// twice (an agent resending what the bus did not take) keeps its first copy.
    pub fn record_injector_second(&self, run: RunId, s: &InjectorSecond) -> Result<()> {
        self.require_running("runs", "run", run.0)?;
        let second = i64::try_from(s.second)
            .map_err(|_| crate::StoreError::Invalid("an injector second past i64"))?;
        self.conn.execute(
            "INSERT OR IGNORE INTO injector_seconds
                 (run_id, step_index, injector, second, arrived_ms, values_json, response)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                run.0,
                s.step_index,
                s.injector,
                second,
                s.arrived_ms,
                to_json("injector_seconds.values_json", &s.values)?,
                s.response
            ],
        )?;
        Ok(())
    }

    /// The injector seconds of one step of a run, by injector then second.
    pub fn injector_seconds(&self, run: RunId, step_index: u32) -> Result<Vec<InjectorSecond>> {
        let mut stmt = self.conn.prepare(
            "SELECT injector, second, arrived_ms, values_json, response FROM injector_seconds
             WHERE run_id = ?1 AND step_index = ?2 ORDER BY injector, second",
        )?;
        let mut rows = stmt.query(params![run.0, step_index])?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            out.push(InjectorSecond {
                step_index,
                injector: r.get(0)?,
                second: r.get::<_, i64>(1)?.max(0) as u64,
                arrived_ms: r.get(2)?,
                values: from_json("injector_seconds.values_json", &r.get::<_, String>(3)?)?,
                response: r.get(4)?,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NewRun, RunKind, Status};
    use serde_json::json;

    fn second(injector: &str, second: u64, requests: u64) -> InjectorSecond {
        InjectorSecond {
            step_index: 2,
            injector: injector.into(),
            second,
            arrived_ms: 1_000 * second as i64 + 40,
            values: json!({ "requests": requests }),
            response: vec![1, 2, 3],
        }
    }

    fn run(store: &Store) -> RunId {
        store
            .begin_run(&NewRun {
                study: None,
                kind: RunKind::StudyStep,
                target: "builtin".into(),
                parameters: json!({}),
                environment: json!({}),
            })
            .unwrap()
    }

    #[test]
    fn seconds_come_back_per_injector_in_order_and_a_resent_second_keeps_its_first_copy() {
        let store = Store::open_in_memory().unwrap();
        let r = run(&store);
        for s in [
            second("inj2", 1, 5),
            second("inj1", 2, 7),
            second("inj1", 1, 6),
        ] {
            store.record_injector_second(r, &s).unwrap();
        }
        store
            .record_injector_second(r, &second("inj1", 1, 999))
            .unwrap();
        let got = store.injector_seconds(r, 2).unwrap();
        let keys: Vec<(&str, u64, &Value)> = got
            .iter()
            .map(|s| (s.injector.as_str(), s.second, &s.values["requests"]))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("inj1", 1, &json!(6)),
                ("inj1", 2, &json!(7)),
                ("inj2", 1, &json!(5))
            ]
        );
        assert!(store.injector_seconds(r, 3).unwrap().is_empty());
    }

    #[test]
    fn a_finished_run_takes_no_more_seconds() {
        let store = Store::open_in_memory().unwrap();
        let r = run(&store);
        store.finish_run(r, Status::Complete).unwrap();
        assert!(store
            .record_injector_second(r, &second("inj1", 0, 1))
            .is_err());
    }
}
