//! The access-log fuzz harness (`fuzz/fuzz_targets/access_log.rs` under libFuzzer,
//! `tests/fuzz_short.rs` for the seeded short run): a log is bytes a stranger wrote.
//! Not part of the API.

use crate::format::{LineParser, LogFormat};
use crate::schedule::{Planner, ReplayOptions};
use crate::{LogReader, ReaderOptions};
use std::time::Duration;

/// Layouts every line goes through: the three named ones and two custom strings with
/// sub-second stamps and request times (nginx `$msec`, Apache `%{usec}t` and `%D`).
fn formats() -> Vec<LogFormat> {
    let mut v = vec![
        LogFormat::combined(),
        LogFormat::common(),
        LogFormat::json(),
    ];
    for custom in [
        r#"$remote_addr [$msec] "$request" $status $request_time"#,
        r#"%h %{usec}t "%r" %>s %D"#,
    ] {
        if let Ok(f) = LogFormat::parse(custom) {
            v.push(f);
        }
    }
    v
}

/// `data` as a log: each line through every layout's parser (a parsed line has a
/// token method and a target), then the whole of it through the reader (detection,
/// the reorder window, whole-second spreading: records come out in start order) and
/// the replay planner (instants never run backwards; a small client table, so
/// forgetting is exercised). Nothing may panic.
pub fn access_log(data: &[u8]) {
    let mut parsers: Vec<LineParser> = formats().into_iter().map(LineParser::new).collect();
    for (i, line) in data.split(|&b| b == b'\n').enumerate() {
        for p in &mut parsers {
            if let Ok(parsed) = p.parse(line, i as u64 + 1) {
                assert!(crate::format::valid_method(&parsed.rec.method), "{line:?}");
                assert!(!parsed.rec.target.is_empty(), "{line:?}");
            }
        }
    }
    let opts = ReaderOptions {
        format: None,
        window: Duration::from_secs(1),
    };
    let Ok(reader) = LogReader::from_read("fuzz", std::io::Cursor::new(data.to_vec()), opts) else {
        return;
    };
    let mut planner = Planner::new(ReplayOptions {
        speed: 3.0,
        max_gap: Some(Duration::from_millis(500)),
        max_clients: 4,
        ..ReplayOptions::default()
    });
    let (mut last_at, mut last_intended) = (i64::MIN, 0u64);
    for rec in reader {
        let Ok(rec) = rec else { return };
        assert!(rec.at_us >= last_at, "records out of start order");
        last_at = rec.at_us;
        if let Some(p) = planner.plan(rec) {
            assert!(p.intended_us >= last_intended, "the schedule ran backwards");
            last_intended = p.intended_us;
            assert!((p.client as u64) < planner.counts().clients);
        }
        assert!(planner.clients_remembered() <= 4);
    }
}
