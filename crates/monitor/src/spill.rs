//! A run's per-second records kept on disk rather than in memory until the run ends.
//!
//! Why: the monitor takes one sample a second (~350 bytes with its interface's name),
//! a streamed run keeps one digest of each second for its summary (~120 bytes), and a
//! long step kept every one in memory until its end: a 60-minute office day grew by
//! about 1.6 MB for them (issue 26: a long run's memory stays flat). Each record is
//! appended to an unnamed temporary file as it is made (MessagePack with field names,
//! which carries every `f64` bit for bit) and read back once, when the run ends and its
//! caller stores or summarises them. Nothing is lost to the disk: when the file cannot be made
//! or a write fails, the records from then on stay in memory, and those written before
//! are still read back.

use std::fs::File;
use std::io::{BufReader, Seek, SeekFrom, Write};

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Where a run's records wait for [`Spill::finish`].
pub struct Spill<T> {
    /// The temporary file while it takes writes; `None` once it could not.
    file: Option<File>,
    /// Whole records in the file, in order, before every one in `kept`.
    spilled: usize,
    /// Records the file did not take.
    kept: Vec<T>,
    /// One sample's bytes, reused.
    buf: Vec<u8>,
    /// The file after a failed write, to read back the samples written before it.
    broken: Option<File>,
}

impl<T: Serialize + DeserializeOwned> Default for Spill<T> {
    fn default() -> Self {
        Spill::new()
    }
}

impl<T: Serialize + DeserializeOwned> Spill<T> {
    /// Records to a fresh unnamed file in the temporary directory (memory if none can
    /// be made).
    pub fn new() -> Spill<T> {
        Spill::to(tempfile::tempfile().ok())
    }

    /// Records to `file` (a fresh, empty one), or to memory with `None`.
    fn to(file: Option<File>) -> Spill<T> {
        Spill {
            file,
            spilled: 0,
            kept: Vec::new(),
            buf: Vec::new(),
            broken: None,
        }
    }

    /// Adds the next record.
    pub fn push(&mut self, s: T) {
        if let Some(f) = &mut self.file {
            self.buf.clear();
            // One write per record, so a failure leaves at most that one partly
            // written, after the `spilled` whole ones, which are read back.
            // With field names: a record that leaves out empty fields
            // (`skip_serializing_if`, as the stall probe's seconds do) would be read
            // back by position into the wrong fields, or not at all, without them.
            if rmp_serde::encode::write_named(&mut self.buf, &s).is_ok()
                && f.write_all(&self.buf).is_ok()
            {
                self.spilled += 1;
                return;
            }
            self.broken = self.file.take();
        }
        self.kept.push(s);
    }

    /// Records pushed so far, on disk and in memory.
    pub fn len(&self) -> usize {
        self.spilled + self.kept.len()
    }

    /// No record pushed yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every record pushed, in order.
    pub fn finish(mut self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.spilled + self.kept.len());
        if let Some(mut f) = self.file.take().or(self.broken.take()) {
            if f.seek(SeekFrom::Start(0)).is_ok() {
                let mut r = BufReader::new(f);
                for _ in 0..self.spilled {
                    match rmp_serde::decode::from_read::<_, T>(&mut r) {
                        Ok(s) => out.push(s),
                        // Only a failing disk gets here: what it still gave is kept.
                        Err(_) => break,
                    }
                }
            }
        }
        out.append(&mut self.kept);
        out
    }

    /// Records held in memory now (the file's are not).
    #[cfg(test)]
    fn in_memory(&self) -> usize {
        self.kept.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::TcpStates;
    use crate::{MonitorSample, NetSample, SystemSample, TargetSample};

    fn sample(k: u64) -> MonitorSample {
        MonitorSample {
            t_ms: k * 1000,
            interval_ms: 1000,
            target: (k % 2 == 0).then(|| TargetSample {
                cpu_user_pct: 12.5 + k as f64 / 3.0,
                cpu_sys_pct: 0.1 + 0.2,
                rss_bytes: 1 << 33,
                processes: 3,
                threads: 7,
                ctx_voluntary_per_s: f64::MIN_POSITIVE,
                ctx_involuntary_per_s: 1e300,
                open_fds: 12,
                run_wait_ms_per_s: 1.0 / 7.0,
            }),
            system: SystemSample {
                run_queue: 2,
                blocked: 0,
                interrupts_per_s: 1234.5678,
                context_switches_per_s: 9.87654321e5,
                cpu_us_pct: 33.333333333333336,
                cpu_sy_pct: 4.0,
                cpu_id_pct: 62.66666666666667,
                cpu_wa_pct: 0.0,
                cpu_st_pct: 0.1,
                cpus: 2,
                others_cpu_pct: (k % 3 == 0).then_some(-0.0),
                study_targets_cpu_pct: None,
            },
            net: (k % 2 == 1).then(|| NetSample {
                interface: format!("veth{k}"),
                rx_packets_per_s: 1.5,
                tx_packets_per_s: 2.5,
                rx_bytes_per_s: 1e9 / 3.0,
                tx_bytes_per_s: 0.3,
            }),
            tcp: TcpStates {
                per_state: k % 2 == 0,
                in_use: 5,
                established: 4,
                time_wait: k as u32,
                ..TcpStates::default()
            },
        }
    }

    /// Written out and read back bit for bit, in order, and not held in memory.
    #[test]
    fn samples_come_back_exactly_and_wait_on_disk() {
        let mut s = Spill::new();
        let want: Vec<MonitorSample> = (0..500).map(sample).collect();
        for x in &want {
            s.push(x.clone());
        }
        assert_eq!(s.in_memory(), 0, "the samples went to the file");
        assert_eq!(s.len(), 500);
        let got = s.finish();
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            // `PartialEq` on f64 would take -0.0 for 0.0: compare the bits too.
            assert_eq!(g, w);
            assert_eq!(
                g.system.others_cpu_pct.map(f64::to_bits),
                w.system.others_cpu_pct.map(f64::to_bits)
            );
        }
    }

    /// A file that refuses writes (read-only here, as a full disk refuses them) keeps
    /// the samples in memory; none is lost.
    #[test]
    fn a_file_that_refuses_writes_loses_nothing() {
        // Removed when `file` drops, also when an assertion fails.
        let file = tempfile::Builder::new()
            .prefix("volley-spill-")
            .tempfile()
            .unwrap();
        let read_only = File::open(file.path()).unwrap();
        let mut s = Spill::to(Some(read_only));
        for k in 0..10 {
            s.push(sample(k));
        }
        assert_eq!(s.in_memory(), 10);
        let got = s.finish();
        assert_eq!(got, (0..10).map(sample).collect::<Vec<_>>());
        // And with no file at all.
        let mut s = Spill::to(None);
        assert!(s.is_empty());
        s.push(sample(1));
        assert_eq!(s.finish(), vec![sample(1)]);
    }

    /// Samples written before a failure come back first, then the ones kept after it.
    #[test]
    fn a_write_failure_midway_keeps_order() {
        let mut s = Spill::new();
        for k in 0..5 {
            s.push(sample(k));
        }
        // The file stops taking writes: swap in a read-only handle to the same data.
        let f = s.file.take().unwrap();
        s.broken = Some(f);
        for k in 5..8 {
            s.push(sample(k));
        }
        assert_eq!(s.in_memory(), 3);
        assert_eq!(s.finish(), (0..8).map(sample).collect::<Vec<_>>());
    }
}
