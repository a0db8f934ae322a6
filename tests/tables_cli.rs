//! What a person reads after a study: verdict reasons in sentences (no `field=value`
//! pairs) and tables that stay aligned with a 40-character target name, and fit the
//! width when one is given (`COLUMNS`). A small open-loop study against two slow
//! in-process test servers on loopback, whose 1 ms SLO no step can meet.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use volley_faultserver::{Behaviour, FaultServer};

/// Exactly 40 characters.
const LONG: &str = "a-target-with-a-forty-character-name-xyz";

fn volley(args: &[&str], db: &Path, columns: Option<&str>) -> (String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_volley"));
    c.args(args).arg("--db").arg(db);
    match columns {
        Some(w) => c.env("COLUMNS", w),
        None => c.env_remove("COLUMNS"),
    };
    let o: Output = c.output().unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert!(o.status.success(), "{args:?}: {out}\n{err}");
    (out, err)
}

/// The header, its rule and `rows` rows of the table whose header line starts with
/// `header`.
fn table<'a>(text: &'a str, header: &str, rows: usize) -> Vec<&'a str> {
    let t: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with(header))
        .take(rows + 2)
        .collect();
    assert_eq!(
        t.len(),
        rows + 2,
        "no table '{header}' of {rows} rows in:\n{text}"
    );
    assert!(t[1].starts_with("---"), "{text}");
    t
}

/// Where the column titled `title` starts on the header line equals where `cell`
/// starts, after `row_key`, on the line holding `row_key`.
fn aligned(lines: &[&str], title: &str, row_key: &str, cell: &str) {
    let col = lines[0].find(title).unwrap();
    let row = lines
        .iter()
        .find(|l| l.contains(row_key))
        .unwrap_or_else(|| panic!("no row {row_key}: {lines:#?}"));
    // Looked for after the key, so a row id cannot match first.
    let after = row.find(row_key).unwrap() + row_key.len();
    let at = row[after..].find(cell).map(|i| i + after);
    assert_eq!(at, Some(col), "{title}: {lines:#?}");
}

fn snake_case_pairs(text: &str) -> Vec<String> {
    text.match_indices('=')
        .filter_map(|(i, _)| {
            let w: String = text[..i]
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            w.contains('_').then(|| w.chars().rev().collect())
        })
        .collect()
}

#[test]
fn reasons_are_sentences_and_tables_align_with_a_long_name() {
    assert_eq!(LONG.len(), 40);
    let slow = || {
        FaultServer::start(Behaviour::Slow {
            delay: Duration::from_millis(5),
        })
        .unwrap()
    };
    let (a, b) = (slow(), slow());
    let dir = crate::common::fresh_dir("volley-tables-test");
    let study = format!(
        r#"name = "tables"
[[target]]
name = "{LONG}"
kind = "external"
url = "{}"
[[target]]
name = "b"
kind = "external"
url = "{}"
[[workload]]
name = "w"
paths = ["/"]
[load]
model = "open"
concurrency = 4
[sweep]
rate = [50, 100]
[steps]
# 3 s: the shortest step the sustainability rule can judge (three whole seconds).
duration = "3s"
retries = 0
warmup = "100ms"
cooldown = "100ms"
[slo]
p99 = "1ms"
"#,
        a.url("/"),
        b.url("/")
    );
    let file = dir.join("tables.toml");
    std::fs::write(&file, study).unwrap();
    let db = dir.join("v.db");
    let (out, err) = volley(&["study", "run", file.to_str().unwrap()], &db, None);

    // Every failing step says why in words, with units.
    assert!(err.contains("NOT sustainable ("), "{err}");
    assert!(err.contains("exceeds the 1 ms SLO"), "{err}");
    let pairs: Vec<String> = snake_case_pairs(&out)
        .into_iter()
        .chain(snake_case_pairs(&err))
        .collect();
    assert!(
        pairs.is_empty(),
        "field=value pairs printed: {pairs:?}\n{err}"
    );

    // The study's end table: columns start where their titles do, long name or not.
    let end = table(&out, "target  ", 2);
    aligned(&end, "workload", LONG, "w ");
    // The result's words depend on the machine (a busy one makes steps
    // generator-bound): only where they start is checked.
    let result = end[0].find("result").unwrap();
    for row in &end[2..] {
        assert!(
            row[..result].ends_with("  ") && !row[result..].starts_with(' '),
            "{end:#?}"
        );
    }

    let (h, _) = volley(&["history"], &db, None);
    let hist = table(&h, "run", 2);
    aligned(&hist, "steps", LONG, "    2");
    aligned(&hist, "status", &format!("tables (#1)/{LONG}"), "complete");
    aligned(&hist, "status", "tables (#1)/b ", "complete");

    let (c, _) = volley(&["compare", "1", "2", "--metric", "p99"], &db, None);
    let cmp = table(&c, "   ", 2);
    assert!(cmp[0].contains("median p99 ms"), "{c}");
    // How many steps stand for the server depends on the machine (a busy one makes
    // some generator-bound, and compare leaves those out): the count's right edge is
    // under its title's, whatever the count.
    let steps_end = cmp[0].find("steps").unwrap() + "steps".len();
    for row in &cmp[2..] {
        let digits_end = row[..steps_end].trim_end().len();
        assert_eq!(digits_end, steps_end, "steps column: {c}");
        assert!(
            row[..steps_end]
                .trim_end()
                .ends_with(|ch: char| ch.is_ascii_digit()),
            "{c}"
        );
    }
    // An interval only from two or more runs; one run says it has none.
    let ci_col = cmp[0].find("95% CI").unwrap();
    assert!(
        cmp[2..]
            .iter()
            .all(|l| l[ci_col..].contains(" .. ") || l[ci_col..].contains("one run: none")),
        "{c}"
    );

    // With a width, no line of any table is longer; the long name stays whole. The
    // sentences after a table (compare's answer, what was left out) are prose, not
    // table lines: a table row starts with a space, a digit or "A "/"B ".
    let prose = |l: &str| {
        let b = l.as_bytes();
        b.len() > 1 && b[0].is_ascii_alphabetic() && b[1] != b' '
    };
    for args in [&["history"][..], &["compare", "1", "2"][..]] {
        let (t, _) = volley(args, &db, Some("80"));
        // The header (down to its rule), then the rows until the first sentence.
        let lines: Vec<&str> = t.lines().collect();
        let rule = lines.iter().position(|l| l.starts_with("---")).unwrap();
        let rows = lines[rule + 1..].iter().take_while(|l| !prose(l)).count();
        let table = &lines[..=rule + rows];
        assert!(table.len() >= 4, "{args:?}:\n{t}");
        assert!(
            table.iter().all(|l| l.chars().count() <= 80),
            "{args:?}:\n{t}"
        );
        assert!(t.contains(LONG), "{t}");
    }
}

/// Runs volley with a stdout whose reader is already gone (what `| head -1` leaves
/// once head has its line), so the first write meets a broken pipe.
fn with_closed_stdout(args: &[&str]) -> Output {
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills the two descriptors; each is owned by exactly one File.
    let (reader, writer) = unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        use std::os::fd::FromRawFd;
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    };
    drop(reader);
    let mut child = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(args)
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "{args:?} hung");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_closed_stdout_ends_printing_quietly() {
    for args in [
        &["targets", "--show-config", "nginx"][..],
        &["targets"][..],
        &["bench", "--help"][..],
        &["bench", "--target", "nginx", "--show-config"][..],
    ] {
        let o = with_closed_stdout(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
    }
}
