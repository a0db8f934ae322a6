//! Parsed lines held compactly: the fixed fields of each line in one array, the texts
//! of all of them (client, method, target, ...) in one string.
//!
//! Place in the flow: `log -> format (parses into) **lines** -> reader -> Record`. The
//! reader holds a whole reorder window of lines (10 s by default: 200,000 lines at 20k
//! lines/s). Held as [`Record`]s, each line was seven heap strings beside its fields,
//! ~520 bytes a Combined line (~100 MB for that window), and their churn through the
//! allocator made the process grow with the log's length (peak RSS 112 MB at 1 M
//! lines, 131 MB at 10 M). Here a line is its fixed fields and seven spans (~112
//! bytes) plus its text, one string holds the texts of a whole second of the log, and
//! the reader reuses a released second's arrays for a later one, so in steady state
//! holding a line allocates nothing and memory follows the window, not the log.

use crate::error::SkipCause;
use crate::record::Record;

/// Where one text lies in [`Lines::text`]; [`Span::NONE`]: not logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: u32,
    end: u32,
}

impl Span {
    const NONE: Span = Span {
        start: u32::MAX,
        end: u32::MAX,
    };
}

/// The texts of a line, in the order of [`Line`]'s spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Text {
    Client,
    Method,
    Target,
    Protocol,
    Host,
    Referer,
    UserAgent,
}

const TEXTS: usize = 7;

/// One parsed line's fixed fields (what [`Record`] holds, its texts as spans).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Line {
    /// Line number in the file.
    pub line: u64,
    /// The logged instant (the reader makes it the start instant).
    pub at_us: i64,
    /// The log gave a whole second only.
    pub whole_second: bool,
    pub status: Option<u16>,
    pub bytes: Option<u64>,
    pub request_time_us: Option<u64>,
    texts: [Span; TEXTS],
}

impl Line {
    /// A line with these fields and no texts yet.
    pub fn new(line: u64, at_us: i64, whole_second: bool) -> Line {
        Line {
            line,
            at_us,
            whole_second,
            status: None,
            bytes: None,
            request_time_us: None,
            texts: [Span::NONE; TEXTS],
        }
    }
}

/// Lines [`Lines::push_in_order`] moves back at most to keep its lines in start
/// order; a line further out of order leaves them to be sorted.
const MAX_SHIFT: usize = 4_096;

/// Parsed lines and their texts.
#[derive(Debug, Default)]
pub(crate) struct Lines {
    pub lines: Vec<Line>,
    text: String,
    /// An escaped text being unescaped (reused).
    scratch: Vec<u8>,
    /// A line came too far out of order for [`Lines::push_in_order`]: not in order.
    unsorted: bool,
    /// A line pushed by [`Lines::push_from`] gave a whole second only.
    whole: bool,
}

impl Lines {
    /// Forgets every line, keeping the memory for the next ones.
    pub fn clear(&mut self) {
        self.lines.clear();
        self.text.clear();
        self.unsorted = false;
        self.whole = false;
    }

    /// A line [`Lines::push_from`] pushed gave a whole second only: known without a
    /// look at every line (a second's lines at 50k a second are megabytes).
    pub fn any_whole_second(&self) -> bool {
        self.whole
    }

    /// [`Lines::push_from`], keeping these lines in start order (instant, then line
    /// number) as they come: a line a little out of order moves back to its place.
    ///
    /// Why: a second's lines sorted at once when it is handed on cost one step of
    /// ~1.7 ms at 50k lines a second, and a replay whose worker reads its own log
    /// between arrivals (no CPU for a reader thread) sent every arrival due in that
    /// step late; the few lines a log has out of order (a request's start logged after
    /// a later one's) each cost a short move instead.
    pub fn push_in_order(&mut self, from: &Lines, i: usize) -> Result<(), SkipCause> {
        self.push_from(from, i)?;
        let n = self.lines.len();
        let key = |l: &Line| (l.at_us, l.line);
        if self.unsorted || n < 2 || key(&self.lines[n - 2]) <= key(&self.lines[n - 1]) {
            return Ok(());
        }
        let k = key(&self.lines[n - 1]);
        let from = n.saturating_sub(1 + MAX_SHIFT);
        let at = from + self.lines[from..n - 1].partition_point(|l| key(l) <= k);
        if at == from && from > 0 {
            self.unsorted = true;
        } else {
            self.lines[at..].rotate_right(1);
        }
        Ok(())
    }

    /// The lines are in start order (see [`Lines::push_in_order`]).
    pub fn in_order(&self) -> bool {
        !self.unsorted
    }

    /// Where the texts end now: a failed parse goes back to it ([`Lines::rollback`]).
    pub fn mark(&self) -> usize {
        self.text.len()
    }

    /// Drops the texts written since `mark` (by a line that then failed to parse).
    pub fn rollback(&mut self, mark: usize) {
        self.text.truncate(mark);
    }

    /// Writes `v` as a text of `line` (`\"`, `\\` and `\xhh` unescaped as Apache,
    /// nginx and volley's server escape them; invalid UTF-8 replaced): the span it
    /// took. Fails (a layout mismatch) only for texts past 4 GiB in one batch, which a
    /// second of any real log never holds.
    pub fn set(&mut self, line: &mut Line, which: Text, v: &[u8]) -> Result<(), SkipCause> {
        let start = self.text.len();
        if memchr::memchr(b'\\', v).is_none() {
            push_utf8(&mut self.text, v);
        } else {
            unescape(v, &mut self.scratch);
            push_utf8(&mut self.text, &self.scratch);
        }
        let end = self.text.len();
        match (u32::try_from(start), u32::try_from(end)) {
            (Ok(start), Ok(end)) if end < u32::MAX => {
                line.texts[which as usize] = Span { start, end };
                Ok(())
            }
            _ => {
                self.text.truncate(start);
                Err(SkipCause::Layout)
            }
        }
    }

    /// Writes `v` as a text of `line` unless it is empty or `-` (not logged).
    pub fn set_optional(
        &mut self,
        line: &mut Line,
        which: Text,
        v: Option<&[u8]>,
    ) -> Result<(), SkipCause> {
        match v.filter(|v| *v != b"-" && !v.is_empty()) {
            Some(v) => self.set(line, which, v),
            None => Ok(()),
        }
    }

    /// Appends a query to `line`'s target, which must be the last text written: `?`
    /// and `q` unescaped, or `q` alone when it begins with its `?` (`%q` does).
    pub fn join_query(&mut self, line: &mut Line, q: &[u8]) -> Result<(), SkipCause> {
        let span = line.texts[Text::Target as usize];
        if span == Span::NONE || span.end as usize != self.text.len() {
            return Err(SkipCause::Layout);
        }
        let mut query = Line::new(0, 0, false);
        self.set(&mut query, Text::Target, q)?;
        if !self.text[span.end as usize..].starts_with('?') {
            self.text.insert(span.end as usize, '?');
        }
        let end = u32::try_from(self.text.len())
            .ok()
            .filter(|e| *e < u32::MAX)
            .ok_or(SkipCause::Layout)?;
        line.texts[Text::Target as usize].end = end;
        Ok(())
    }

    /// `line`'s text `which`, when logged.
    pub fn get(&self, line: &Line, which: Text) -> Option<&str> {
        let s = line.texts[which as usize];
        (s != Span::NONE).then(|| &self.text[s.start as usize..s.end as usize])
    }

    /// Copies line `i` of `from` (its texts too) to the end of these lines.
    pub fn push_from(&mut self, from: &Lines, i: usize) -> Result<(), SkipCause> {
        let mut line = from.lines[i];
        for span in line.texts.iter_mut() {
            if *span == Span::NONE {
                continue;
            }
            let text = &from.text[span.start as usize..span.end as usize];
            let start = u32::try_from(self.text.len()).map_err(|_| SkipCause::Layout)?;
            let end = u32::try_from(self.text.len() + text.len())
                .ok()
                .filter(|e| *e < u32::MAX)
                .ok_or(SkipCause::Layout)?;
            self.text.push_str(text);
            *span = Span { start, end };
        }
        self.whole |= line.whole_second;
        self.lines.push(line);
        Ok(())
    }

    /// Line `i` as a [`Record`] (a client not logged is `-`).
    pub fn record(&self, i: usize) -> Record {
        let l = &self.lines[i];
        let owned = |which| self.get(l, which).map(str::to_string);
        Record {
            line: l.line,
            client: owned(Text::Client).unwrap_or_else(|| "-".into()),
            at_us: l.at_us,
            method: owned(Text::Method).unwrap_or_default(),
            target: owned(Text::Target).unwrap_or_default(),
            protocol: owned(Text::Protocol),
            status: l.status,
            bytes: l.bytes,
            request_time_us: l.request_time_us,
            host: owned(Text::Host),
            referer: owned(Text::Referer),
            user_agent: owned(Text::UserAgent),
        }
    }
}

/// Bytes as text: valid UTF-8 as is (the common case, checked fast), else lossily.
fn push_utf8(text: &mut String, v: &[u8]) {
    match std::str::from_utf8(v) {
        Ok(s) => text.push_str(s),
        Err(_) => text.push_str(&String::from_utf8_lossy(v)),
    }
}

/// `\"`, `\\` and `\xhh` as Apache, nginx and volley's server escape them, into `out`.
fn unescape(v: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut i = 0;
    let hex = |c: Option<&u8>| c.and_then(|&c| (c as char).to_digit(16)).map(|d| d as u8);
    while i < v.len() {
        match (v[i], v.get(i + 1)) {
            (b'\\', Some(b'x')) => match (hex(v.get(i + 2)), hex(v.get(i + 3))) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 4;
                }
                _ => {
                    out.push(b'\\');
                    i += 1;
                }
            },
            (b'\\', Some(&c)) => {
                out.push(c);
                i += 2;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_round_trip_through_one_string_and_copy_between_batches() {
        let mut a = Lines::default();
        let mut l = Line::new(3, 42, true);
        a.set(&mut l, Text::Client, b"1.2.3.4").unwrap();
        a.set(&mut l, Text::Method, b"GET").unwrap();
        a.set(&mut l, Text::Target, br#"/a\"b\x41"#).unwrap();
        a.set_optional(&mut l, Text::Referer, Some(b"-")).unwrap();
        a.set(&mut l, Text::UserAgent, b"ua \xff").unwrap();
        a.lines.push(l);
        let mut b = Lines::default();
        let mut other = Line::new(1, 1, false);
        b.set(&mut other, Text::Method, b"POST").unwrap();
        b.lines.push(other);
        b.push_from(&a, 0).unwrap();
        for r in [a.record(0), b.record(1)] {
            assert_eq!((r.line, r.at_us), (3, 42));
            assert_eq!(r.client, "1.2.3.4");
            assert_eq!((r.method.as_str(), r.target.as_str()), ("GET", "/a\"bA"));
            assert_eq!((r.referer, r.protocol), (None, None));
            assert_eq!(r.user_agent.as_deref(), Some("ua \u{fffd}"));
        }
        assert_eq!(b.record(0).client, "-");
        let mark = b.mark();
        let mut l = Line::new(9, 9, false);
        b.set(&mut l, Text::Target, b"/x").unwrap();
        b.join_query(&mut l, b"q=\\x41").unwrap();
        assert_eq!(b.get(&l, Text::Target), Some("/x?q=A"));
        let mut l = Line::new(9, 9, false);
        b.set(&mut l, Text::Target, b"/y").unwrap();
        b.join_query(&mut l, b"?r").unwrap();
        assert_eq!(b.get(&l, Text::Target), Some("/y?r"));
        b.rollback(mark);
        assert_eq!(b.mark(), mark);
        b.clear();
        assert!(b.lines.is_empty() && b.mark() == 0);
    }

    /// Lines pushed in order of these instants, each with its target named after it.
    fn pushed(instants: &[i64]) -> Lines {
        let mut out = Lines::default();
        for (n, &at) in instants.iter().enumerate() {
            let mut one = Lines::default();
            let mut l = Line::new(n as u64, at, false);
            one.set(&mut l, Text::Target, format!("/{at}").as_bytes())
                .unwrap();
            one.lines.push(l);
            out.push_in_order(&one, 0).unwrap();
        }
        out
    }

    #[test]
    fn lines_a_little_out_of_order_move_back_to_their_place_with_their_texts() {
        let got = pushed(&[10, 30, 20, 40, 5, 40, 35]);
        assert!(got.in_order());
        let order: Vec<(i64, u64, String)> = (0..got.lines.len())
            .map(|i| {
                let r = got.record(i);
                (r.at_us, r.line, r.target)
            })
            .collect();
        let want = [(5, 4), (10, 0), (20, 2), (30, 1), (35, 6), (40, 3), (40, 5)];
        let want: Vec<(i64, u64, String)> = want
            .iter()
            .map(|&(at, n)| (at, n, format!("/{at}")))
            .collect();
        assert_eq!(order, want);
    }

    #[test]
    fn a_line_further_back_than_the_shift_bound_leaves_the_lines_to_be_sorted() {
        let mut instants: Vec<i64> = (1..=MAX_SHIFT as i64 + 1).collect();
        instants.push(0);
        let mut got = pushed(&instants);
        assert!(!got.in_order());
        assert_eq!(got.lines.last().map(|l| l.at_us), Some(0));
        got.clear();
        assert!(got.in_order(), "a cleared batch starts in order");
        // Exactly at the bound it still moves back.
        let mut instants: Vec<i64> = (1..=MAX_SHIFT as i64).collect();
        instants.push(0);
        let got = pushed(&instants);
        assert!(got.in_order());
        assert_eq!(got.lines[0].at_us, 0);
    }
}
