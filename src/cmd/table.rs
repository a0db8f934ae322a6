//! The text tables every command prints (`history`, `targets`, `compare`, the study's
//! end table, bench's side-by-side and comparison tables), made one way with
//! comfy-table: columns sized to their longest cell, so any name length keeps them
//! aligned, and, on a terminal, wrapped within its width (`COLUMNS` overrides the width;
//! piped output is never wrapped, so each row stays one line for grep and diff).

use comfy_table::{presets, CellAlignment, ColumnConstraint, ContentArrangement, Table};

/// A table with these column names: no borders, a dashed line under the header, two
/// spaces between columns.
pub fn new<S: Into<comfy_table::Cell>>(header: impl IntoIterator<Item = S>) -> Table {
    new_at(header, width())
}

/// [`new`] fitted to `width` (none: never wrapped), for output that must not depend on
/// the terminal (snapshot tests).
pub fn new_at<S: Into<comfy_table::Cell>>(
    header: impl IntoIterator<Item = S>,
    width: Option<u16>,
) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_style(comfy_table::TableComponent::HeaderLines, '-');
    t.set_header(header);
    for c in t.column_iter_mut() {
        c.set_padding((0, 2));
    }
    match width {
        Some(w) => {
            t.set_content_arrangement(ContentArrangement::Dynamic);
            t.set_width(w);
        }
        None => {
            t.set_content_arrangement(ContentArrangement::Disabled);
        }
    }
    t
}

/// Right-aligns the numeric columns `cols` (header included).
pub fn align_right(t: &mut Table, cols: &[usize]) {
    let header: Option<Vec<comfy_table::Cell>> = t.header().map(|h| {
        h.cell_iter()
            .enumerate()
            .map(|(i, c)| {
                let cell = comfy_table::Cell::new(c.content());
                match cols.contains(&i) {
                    true => cell.set_alignment(CellAlignment::Right),
                    false => cell,
                }
            })
            .collect()
    });
    if let Some(h) = header {
        t.set_header(h);
    }
    for &i in cols {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// Never wraps column `i` (a name, an id): the other columns give way first.
pub fn keep_whole(t: &mut Table, i: usize) {
    if let Some(c) = t.column_mut(i) {
        c.set_constraint(ColumnConstraint::ContentWidth);
    }
}

/// The table as text, one `\n` per line, trailing spaces removed. Each line goes
/// through `sanitise::terminal` (no length cut: callers cut their long cells), so a
/// cell holding a name from outside cannot put an escape sequence on the terminal.
pub fn render(t: &Table) -> String {
    let mut out = String::new();
    for line in t.lines() {
        out.push_str(&volley_report::sanitise::terminal(
            line.trim_end(),
            usize::MAX,
        ));
        out.push('\n');
    }
    out
}

/// The width to fit: `COLUMNS` when set, else the terminal's when stdout is one, else
/// none (no wrapping).
pub fn width() -> Option<u16> {
    if let Some(w) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<u16>().ok())
        .filter(|&w| w >= 20)
    {
        return Some(w);
    }
    terminal_width()
}

fn terminal_width() -> Option<u16> {
    // SAFETY: TIOCGWINSZ writes one winsize into the struct we own; a descriptor that is
    // not a terminal makes it fail, which we read as "no width".
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_col >= 20).then_some(ws.ws_col)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table_of(width: Option<u16>) -> String {
        let mut t = new(["run", "target", "result"]);
        if let Some(w) = width {
            t.set_content_arrangement(ContentArrangement::Dynamic);
            t.set_width(w);
        } else {
            t.set_content_arrangement(ContentArrangement::Disabled);
        }
        keep_whole(&mut t, 1);
        align_right(&mut t, &[0]);
        t.add_row([
            "1",
            "a-target-name-that-is-forty-chars-long-x",
            "capacity 3,000 req/s, 95% CI [2,900, 3,100] (7 steps, converged)",
        ]);
        t.add_row(["22", "b", "x"]);
        render(&t)
    }

    #[test]
    fn long_names_keep_columns_aligned() {
        let t = table_of(None);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        // The third column starts at the same place on every line.
        let at = |l: &str, word: &str| l.find(word).unwrap();
        let col = at(lines[0], "result");
        assert_eq!(at(lines[2], "capacity"), col, "{t}");
        assert_eq!(at(lines[3], "x"), col, "{t}");
        assert!(lines[1].starts_with("---"), "{t}");
        assert!(lines[3].starts_with(" 22"), "{t}");
        assert!(lines[0].starts_with("run"), "{t}");
        assert!(lines[2].starts_with("  1  a-target"), "right-aligned: {t}");
    }

    #[test]
    fn a_width_is_never_exceeded_and_names_stay_whole() {
        let t = table_of(Some(70));
        assert!(t.lines().all(|l| l.chars().count() <= 70), "{t}");
        assert!(
            t.contains("a-target-name-that-is-forty-chars-long-x"),
            "{t}"
        );
        assert!(t.lines().count() > 4, "the result column wraps: {t}");
    }
}
