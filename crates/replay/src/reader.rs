//! The streaming reader: a log file in, [`Record`]s out in the order of their start
//! instants, in bounded memory.
//!
//! Lines are read one at a time (gzip decoded as it streams, recognised by its magic
//! bytes). Servers write a line when a request ends, several workers through buffers,
//! so lines come slightly out of order: each parsed line waits (held by second) until the
//! newest instant read is a whole *window* past its second, then its second is handed
//! on in order. A line older than what was already handed on is outside the window:
//! skipped and counted ([`SkipCause::Window`]). Memory is the window's worth of lines.
//!
//! A log with whole-second timestamps (Common, Combined) cannot say when in its second
//! a request came: the requests of one second are spread evenly over it (the reader
//! says so through [`LogReader::spread`]), in the order their logged request times
//! suggest (a line is written when its request ends, so a long request started
//! earlier than its line's place) and otherwise in line order.

use crate::error::{LogError, SkipCause};
use crate::format::{LineParser, LogFormat};
use crate::lines::{Line, Lines};
use crate::record::Record;
use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Line numbers kept per skip cause.
pub const FIRST_LINES: usize = 5;
/// Lines read before judging whether the log is in the expected format at all.
const JUDGE_AFTER: u64 = 1_000;
/// Lines read ahead to recognise a log whose format was not named.
const DETECT_LINES: usize = 20;
const US_PER_S: i64 = 1_000_000;

/// How to read a log.
#[derive(Debug, Clone)]
pub struct ReaderOptions {
    /// The layout; `None` recognises Combined, Common or JSON lines from the first lines.
    pub format: Option<LogFormat>,
    /// How far out of order lines may come (default 10 s).
    pub window: Duration,
}

impl Default for ReaderOptions {
    fn default() -> ReaderOptions {
        ReaderOptions {
            format: None,
            window: Duration::from_secs(10),
        }
    }
}

/// Lines skipped, by cause, with the first few line numbers of each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skips {
    by_cause: BTreeMap<SkipCause, (u64, Vec<u64>)>,
}

impl Skips {
    fn add(&mut self, cause: SkipCause, line: u64) {
        let (n, first) = self.by_cause.entry(cause).or_default();
        *n += 1;
        if first.len() < FIRST_LINES {
            first.push(line);
        }
    }

    /// Lines skipped in all.
    pub fn total(&self) -> u64 {
        self.by_cause.values().map(|(n, _)| n).sum()
    }

    /// Lines that did not parse (every cause but the window).
    fn unparsed(&self) -> u64 {
        self.by_cause
            .iter()
            .filter(|(c, _)| **c != SkipCause::Window)
            .map(|(_, (n, _))| n)
            .sum()
    }

    /// Each cause with its count and first line numbers.
    pub fn iter(&self) -> impl Iterator<Item = (SkipCause, u64, &[u64])> {
        self.by_cause
            .iter()
            .map(|(c, (n, lines))| (*c, *n, lines.as_slice()))
    }
}

/// Seconds' lines kept for reuse, beyond one per second of the reorder window. A
/// second handed on is kept rather than freed while fewer are spare: freeing one
/// (megabytes at 50k lines a second) took ~0.7 ms in one go, on a replaying worker's
/// time when it reads its own log. Kept, they hold no more than the window held at
/// its fullest: spares pile up only when seconds are handed on faster than new ones
/// start (a quiet stretch, the log's end), as the held ones go.
const SPARE_SECONDS: usize = 4;

/// Reads a log as an iterator of records in start order.
pub struct LogReader {
    input: Box<dyn BufRead + Send>,
    path: PathBuf,
    parser: LineParser,
    window_us: i64,
    ahead: VecDeque<Vec<u8>>,
    buf: Vec<u8>,
    line_no: u64,
    lines: u64,
    /// Held lines by start second, compactly ([`crate::lines`]): appended as read,
    /// sorted once when handed on (cheaper than a heap of records, which moves each
    /// one log2(window) times).
    held: BTreeMap<i64, Lines>,
    /// The line being parsed, before its second is known.
    parsing: Lines,
    /// The second being handed on, in start order, and how far.
    ready: Lines,
    ready_at: usize,
    /// Seconds handed on, kept for later ones: holding a line then allocates nothing.
    spare: Vec<Lines>,
    newest_us: i64,
    handed_upto_us: i64,
    eof: bool,
    judged: bool,
    failed: bool,
    spread: bool,
    skips: Skips,
}

impl LogReader {
    /// Opens a log file, gzip-compressed or not.
    pub fn open(path: &Path, opts: ReaderOptions) -> Result<LogReader, LogError> {
        let io = |source| LogError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let mut plain = BufReader::with_capacity(1 << 16, file);
        let gz = plain.fill_buf().map_err(io)?.starts_with(&[0x1f, 0x8b]);
        let input: Box<dyn BufRead + Send> = if gz {
            let dec = flate2::bufread::MultiGzDecoder::new(plain);
            Box::new(BufReader::with_capacity(1 << 16, dec))
        } else {
            Box::new(plain)
        };
        LogReader::new(path.to_path_buf(), input, opts)
    }

    /// Reads a log from any byte stream; `name` is how errors name it.
    pub fn from_read(
        name: &str,
        input: impl Read + Send + 'static,
        opts: ReaderOptions,
    ) -> Result<LogReader, LogError> {
        LogReader::new(name.into(), Box::new(BufReader::new(input)), opts)
    }

    fn new(
        path: PathBuf,
        input: Box<dyn BufRead + Send>,
        opts: ReaderOptions,
    ) -> Result<LogReader, LogError> {
        let mut r = LogReader {
            input,
            path,
            parser: LineParser::new(opts.format.clone().unwrap_or_else(LogFormat::combined)),
            window_us: i64::try_from(opts.window.as_micros()).unwrap_or(i64::MAX / 4),
            ahead: VecDeque::new(),
            buf: Vec::new(),
            line_no: 0,
            lines: 0,
            held: BTreeMap::new(),
            parsing: Lines::default(),
            ready: Lines::default(),
            ready_at: 0,
            spare: Vec::new(),
            newest_us: i64::MIN,
            handed_upto_us: i64::MIN,
            eof: false,
            judged: false,
            failed: false,
            spread: false,
            skips: Skips::default(),
        };
        if opts.format.is_none() {
            r.detect()?;
        }
        Ok(r)
    }

    /// Reads lines ahead until enough non-empty ones recognise the format.
    fn detect(&mut self) -> Result<(), LogError> {
        let mut sample = Vec::new();
        while sample.len() < DETECT_LINES {
            let mut line = Vec::new();
            let n = self
                .input
                .read_until(b'\n', &mut line)
                .map_err(|e| self.io(e))?;
            if n == 0 {
                break;
            }
            if !line.trim_ascii().is_empty() {
                sample.push(line.clone());
            }
            self.ahead.push_back(line);
        }
        if sample.is_empty() {
            return Ok(()); // An empty log: no records, said by the caller.
        }
        match LogFormat::detect(&sample) {
            Some(f) => {
                self.parser = LineParser::new(f);
                Ok(())
            }
            None => {
                let mut p = LineParser::new(LogFormat::combined());
                let cause = p.parse(&sample[0], 1).err().unwrap_or(SkipCause::Layout);
                Err(LogError::WrongFormat {
                    expected: "combined, common or JSON-lines".into(),
                    failed: sample.len() as u64,
                    seen: sample.len() as u64,
                    first_line: 1,
                    cause,
                })
            }
        }
    }

    fn io(&self, source: std::io::Error) -> LogError {
        LogError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// The format being read.
    pub fn format(&self) -> &LogFormat {
        &self.parser.format
    }

    /// Whether some requests had whole-second instants and were spread over their
    /// second.
    pub fn spread(&self) -> bool {
        self.spread
    }

    /// Lines skipped so far, by cause.
    pub fn skips(&self) -> &Skips {
        &self.skips
    }

    /// Non-empty lines read so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Reads the next line into `buf`; false at the end.
    fn read_line(&mut self) -> Result<bool, LogError> {
        self.buf.clear();
        if let Some(l) = self.ahead.pop_front() {
            self.buf = l;
            return Ok(true);
        }
        let n = self
            .input
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| self.io(e))?;
        Ok(n > 0)
    }

    fn take(&mut self) {
        self.line_no += 1;
        if self.buf.trim_ascii().is_empty() {
            return;
        }
        self.lines += 1;
        self.parsing.clear();
        match self
            .parser
            .parse_into(&self.buf, self.line_no, &mut self.parsing)
        {
            Err(cause) => self.skips.add(cause, self.line_no),
            Ok(()) => self.hold(),
        }
    }

    /// Holds the line just parsed under its start second.
    fn hold(&mut self) {
        let l = &mut self.parsing.lines[0];
        let key_us = if l.whole_second {
            l.at_us.div_euclid(US_PER_S) * US_PER_S
        } else if self.parser.format.stamp_is_end() {
            l.at_us - l.request_time_us.map_or(0, |t| t as i64)
        } else {
            l.at_us
        };
        if key_us < self.handed_upto_us {
            self.skips.add(SkipCause::Window, l.line);
            return;
        }
        l.at_us = key_us;
        self.newest_us = self.newest_us.max(key_us);
        let second = key_us.div_euclid(US_PER_S);
        let spare = &mut self.spare;
        let held = self
            .held
            .entry(second)
            .or_insert_with(|| spare.pop().unwrap_or_default());
        if held.push_in_order(&self.parsing, 0).is_err() {
            // Past 4 GiB of text in one second (no real log): not held.
            self.skips.add(SkipCause::Layout, self.line_no);
        }
    }

    /// Fails the read when most lines so far did not parse, or ran backwards past the
    /// window.
    fn judge(&mut self) -> Result<(), LogError> {
        self.judged = true;
        if let Some((n, first)) = self.skips.by_cause.get(&SkipCause::Window) {
            if n * 2 > self.lines {
                return Err(LogError::Backwards {
                    behind: *n,
                    seen: self.lines,
                    window_s: self.window_us as f64 / 1e6,
                    first_line: first[0],
                });
            }
        }
        let failed = self.skips.unparsed();
        if failed * 2 > self.lines {
            let (cause, _, first) = self
                .skips
                .iter()
                .filter(|(c, _, _)| *c != SkipCause::Window)
                .min_by_key(|(_, _, l)| l.first().copied())
                .expect("failed lines have causes");
            return Err(LogError::WrongFormat {
                expected: self.parser.format.name().to_string(),
                failed,
                seen: self.lines,
                first_line: first.first().copied().unwrap_or(0),
                cause,
            });
        }
        Ok(())
    }

    /// Hands on every held record of the second `s`, in start order (the previous
    /// second's, all handed on, is kept for reuse).
    fn release(&mut self, s: i64) {
        let mut held = self.held.remove(&s).unwrap_or_default();
        let (in_order, whole) = (held.in_order(), held.any_whole_second());
        let lines = &mut held.lines;
        if whole {
            self.spread = true;
            lines.sort_unstable_by_key(|l| (!l.whole_second, l.line));
            let whole = lines.iter().take_while(|l| l.whole_second).count();
            spread_over_second(&mut lines[..whole], s * US_PER_S);
            lines.sort_unstable_by_key(|l| (l.at_us, l.line));
        } else if !in_order {
            lines.sort_unstable_by_key(|l| (l.at_us, l.line));
        }
        let mut done = std::mem::replace(&mut self.ready, held);
        self.ready_at = 0;
        let window_s = usize::try_from(self.window_us / US_PER_S).unwrap_or(0);
        if self.spare.len() < SPARE_SECONDS + window_s {
            done.clear();
            self.spare.push(done);
        }
        self.handed_upto_us = (s + 1) * US_PER_S;
    }
}

/// Spreads the requests of one second (`start_us`) evenly over it: line order is the
/// order they ended in, so each one's estimated start is its place in that order less
/// its logged request time; they are sorted by that and given instants `i/n` of a
/// second apart.
fn spread_over_second(held: &mut [Line], start_us: i64) {
    held.sort_by_key(|l| l.line);
    let n = held.len() as i64;
    let mut order: Vec<(i64, u64, usize)> = held
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let ended = i as i64 * US_PER_S / n;
            let rt = l
                .request_time_us
                .map_or(0, |t| t.min(i64::MAX as u64 / 2) as i64);
            (ended - rt, l.line, i)
        })
        .collect();
    order.sort();
    for (j, &(_, _, i)) in order.iter().enumerate() {
        held[i].at_us = start_us + j as i64 * US_PER_S / n;
    }
}

impl Iterator for LogReader {
    type Item = Result<Record, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.ready_at < self.ready.lines.len() {
                self.ready_at += 1;
                return Some(Ok(self.ready.record(self.ready_at - 1)));
            }
            if self.failed {
                return None;
            }
            if let Some(&s) = self.held.keys().next() {
                let due = (s + 1) * US_PER_S + self.window_us;
                if self.eof || self.newest_us >= due {
                    self.release(s);
                    continue;
                }
            } else if self.eof {
                return None;
            }
            let step = match self.read_line() {
                Ok(true) => {
                    self.take();
                    if !self.judged && self.lines >= JUDGE_AFTER {
                        self.judge()
                    } else {
                        Ok(())
                    }
                }
                Ok(false) => {
                    self.eof = true;
                    if self.judged || self.lines == 0 {
                        Ok(())
                    } else {
                        self.judge()
                    }
                }
                Err(e) => Err(e),
            };
            if let Err(e) = step {
                self.failed = true;
                return Some(Err(e));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn read(text: String, opts: ReaderOptions) -> (Vec<Record>, LogReader) {
        let mut r = LogReader::from_read("test.log", std::io::Cursor::new(text), opts).unwrap();
        let recs = r.by_ref().collect::<Result<Vec<_>, _>>().unwrap();
        (recs, r)
    }

    /// A volley-style Combined line at `s` seconds and `us` microseconds past
    /// 2023-11-14T22:13:20Z.
    fn line(client: &str, s: u32, us: Option<u32>, path: &str) -> String {
        let frac = us.map(|u| format!(".{u:06}")).unwrap_or_default();
        format!(
            "{client} - - [14/Nov/2023:22:{:02}:{:02}{frac} +0000] \"GET {path} HTTP/1.1\" 200 5 \"-\" \"t\"\n",
            13 + (20 + s) / 60,
            (20 + s) % 60
        )
    }

    const T0: i64 = 1_700_000_000_000_000;

    #[test]
    fn out_of_order_lines_within_the_window_come_out_in_order() {
        let text = [
            line("a", 0, Some(500_000), "/2"),
            line("a", 0, Some(100_000), "/1"),
            line("b", 3, Some(0), "/4"),
            line("a", 2, Some(900_000), "/3"),
            line("a", 20, Some(0), "/5"),
            // Behind what was handed on once second 20 pushed the window past 3.
            line("b", 1, Some(0), "/late"),
        ]
        .concat();
        let (recs, r) = read(text, ReaderOptions::default());
        let paths: Vec<&str> = recs.iter().map(|r| r.target.as_str()).collect();
        assert_eq!(paths, ["/1", "/2", "/3", "/4", "/5"]);
        assert_eq!(recs[0].at_us, T0 + 100_000);
        assert!(!r.spread());
        let skips: Vec<_> = r
            .skips()
            .iter()
            .map(|(c, n, l)| (c, n, l.to_vec()))
            .collect();
        assert_eq!(skips, [(SkipCause::Window, 1, vec![6])]);
    }

    #[test]
    fn whole_seconds_are_spread_evenly_and_said() {
        let text = [0, 0, 0, 0, 1].map(|s| line("a", s, None, "/")).concat();
        let (recs, r) = read(text, ReaderOptions::default());
        let at: Vec<i64> = recs.iter().map(|r| r.at_us - T0).collect();
        assert_eq!(at, [0, 250_000, 500_000, 750_000, 1_000_000]);
        assert!(r.spread());
        assert_eq!(r.format().name(), "combined");
    }

    #[test]
    fn request_times_order_a_second_and_end_stamps_lose_them() {
        // nginx: the line is written at the end; the long request began first.
        let f = LogFormat::parse("$remote_addr [$time_local] \"$request\" $request_time").unwrap();
        let text = "a [14/Nov/2023:22:13:20 +0000] \"GET /short HTTP/1.1\" 0.001\n\
                    a [14/Nov/2023:22:13:20 +0000] \"GET /long HTTP/1.1\" 0.900\n\
                    a [14/Nov/2023:22:13:25 +0000] \"GET /x HTTP/1.1\" 0.100\n";
        let opts = ReaderOptions {
            format: Some(f),
            ..ReaderOptions::default()
        };
        let (recs, _) = read(text.into(), opts.clone());
        let got: Vec<(&str, i64)> = recs
            .iter()
            .map(|r| (r.target.as_str(), r.at_us - T0))
            .collect();
        assert_eq!(got, [("/long", 0), ("/short", 500_000), ("/x", 5_000_000)]);
        let f = LogFormat::parse("$remote_addr [$msec] \"$request\" $request_time").unwrap();
        let text = "a [1700000000.500] \"GET /a HTTP/1.1\" 0.250\n";
        let (recs, _) = read(
            text.into(),
            ReaderOptions {
                format: Some(f),
                ..opts
            },
        );
        assert_eq!(recs[0].at_us - T0, 250_000);
    }

    #[test]
    fn gzip_is_read_directly_and_formats_detected() {
        let dir = tempfile::Builder::new()
            .prefix("volley-replay-gz-")
            .tempdir()
            .unwrap();
        let path = dir.path().join("access.log.gz");
        let mut gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&path).unwrap(),
            flate2::Compression::fast(),
        );
        for s in 0..50 {
            gz.write_all(line("c", s, Some(1), "/gz").as_bytes())
                .unwrap();
        }
        gz.finish().unwrap();
        let recs: Vec<Record> = LogReader::open(&path, ReaderOptions::default())
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(recs.len(), 50);
        assert!(recs.windows(2).all(|w| w[0].at_us < w[1].at_us));
        let missing = LogReader::open(&dir.path().join("nope"), ReaderOptions::default());
        assert!(matches!(missing, Err(LogError::Io { .. })));
    }

    #[test]
    fn bad_lines_are_counted_by_cause_and_a_mostly_bad_log_stops() {
        let mut text = String::new();
        for s in 0..10 {
            text += &line("a", s, Some(0), "/");
        }
        text += "not a log line\n";
        text += &line("a", 11, Some(0), "/").replace("200", "2x0");
        let (recs, r) = read(text, ReaderOptions::default());
        assert_eq!((recs.len(), r.lines()), (10, 12));
        let skips: Vec<_> = r
            .skips()
            .iter()
            .map(|(c, n, l)| (c, n, l.to_vec()))
            .collect();
        assert_eq!(
            skips,
            [
                (SkipCause::Layout, 1, vec![11]),
                (SkipCause::Status, 1, vec![12])
            ]
        );

        // Named Combined, given mostly something else: one error naming the format.
        let text = format!("{}{}", line("a", 0, None, "/"), "x\n".repeat(3));
        let mut r = LogReader::from_read(
            "t",
            std::io::Cursor::new(text),
            ReaderOptions {
                format: Some(LogFormat::combined()),
                ..ReaderOptions::default()
            },
        )
        .unwrap();
        let err = r.find_map(Result::err).unwrap();
        assert!(
            matches!(
                err,
                LogError::WrongFormat {
                    failed: 3,
                    seen: 4,
                    first_line: 2,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("combined"), "{err}");
        // Not named and recognised as nothing: refused at once.
        let r = LogReader::from_read(
            "t",
            std::io::Cursor::new("x y z\n"),
            ReaderOptions::default(),
        );
        assert!(matches!(r, Err(LogError::WrongFormat { .. })));
        // A log in reverse order runs backwards past the window: refused.
        let text: String = (0..30)
            .rev()
            .map(|s| line("a", s * 20, Some(0), "/"))
            .collect();
        let mut r = LogReader::from_read("t", std::io::Cursor::new(text), ReaderOptions::default())
            .unwrap();
        let err = r.find_map(Result::err).unwrap();
        assert!(
            matches!(
                err,
                LogError::Backwards {
                    behind: 28,
                    seen: 30,
                    first_line: 3,
                    ..
                }
            ),
            "{err}"
        );
        // Empty: no records and no error.
        assert_eq!(read(String::new(), ReaderOptions::default()).0.len(), 0);
    }
}
