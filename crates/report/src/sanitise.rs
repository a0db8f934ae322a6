//! Strings from outside (a server's answers, a user's labels, target and path names)
//! made safe for where a report puts them. HTML escaping is [`crate::svg::escape`];
//! this module holds the other two: text for a terminal ([`terminal`]) and text for
//! Markdown ([`markdown`], [`code_span`]), which a terminal also shows as it is.
//!
//! Written here rather than taken from a crate: what counts as dangerous is specific
//! (escape sequences and bidi overrides for a terminal, raw HTML, autolinks and inline
//! links for a Markdown renderer), and the rules are a few lines each.

use std::borrow::Cow;

/// Longest text shown for one name or cell before it is cut ([`terminal`]).
pub const MAX_CHARS: usize = 512;

/// Whether `c` must never reach a terminal: C0 controls (ESC starts CSI and OSC
/// sequences such as OSC 8 hyperlinks; BEL rings), DEL, C1 controls (U+009B is a
/// one-byte CSI on some terminals) and the bidi overrides and isolates, which make
/// text read differently from what it is.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}')
}

/// `s` for a terminal: every unsafe character (controls, escape sequences' ESC, BEL,
/// bidi overrides; newlines and tabs too, as a name is one line) replaced with U+FFFD,
/// and text beyond `max_chars` cut with a marker saying how much was left out.
pub fn terminal(s: &str, max_chars: usize) -> Cow<'_, str> {
    let long = s.chars().nth(max_chars).is_some();
    if !long && !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out: String = s
        .chars()
        .take(max_chars)
        .map(|c| if unsafe_char(c) { '\u{FFFD}' } else { c })
        .collect();
    if long {
        let kept: usize = s.chars().take(max_chars).map(char::len_utf8).sum();
        out.push_str(&format!("... [cut: {} more bytes]", s.len() - kept));
    }
    Cow::Owned(out)
}

/// `s` as Markdown text that renders as exactly these characters: [`terminal`] first
/// (the Markdown is printed to terminals as it is), then a backslash before each
/// character that could start raw HTML (`<`), an entity (`&`), an autolink, a code
/// span, an inline link or image (a `]` before `(` or `:`), a table cell boundary
/// (`|`) or an escape. Emphasis characters, `>` and a lone `[` are left alone: they
/// cannot open HTML or a link (a link definition needs a line of its own, and newlines
/// are gone), and escaping them would clutter names and figures like `[250, 350]`.
pub fn markdown(s: &str, max_chars: usize) -> String {
    let clean = terminal(s, max_chars);
    let mut out = String::with_capacity(clean.len());
    let mut chars = clean.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' | '<' | '&' | '`' | '|' => {
                out.push('\\');
                out.push(c);
            }
            ']' if chars.peek().is_some_and(|n| *n == '(' || *n == ':') => {
                out.push_str("\\]");
            }
            _ => out.push(c),
        }
    }
    out
}

/// `s` as a Markdown code span: fenced with more backticks than any run inside it, so
/// no name can close the span early (CommonMark 6.1), after [`terminal`].
pub fn code_span(s: &str, max_chars: usize) -> String {
    let clean = terminal(s, max_chars);
    let mut longest = 0;
    let mut run = 0;
    for c in clean.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if clean.starts_with('`') || clean.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{clean}{pad}{fence}")
}

/// JSON text for inside a `<script>` element: `<`, `>` and `&` written as `\u003c`,
/// `\u003e` and `\u0026` (the same value to a JSON parser), so no string in it can
/// close the element or open a comment.
pub fn json_in_script(json: &str) -> String {
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_text_holds_no_control_character_and_long_text_is_cut() {
        assert!(matches!(terminal("plain name", 10), Cow::Borrowed(_)));
        let hostile = "a\x1b[31mred\x1b]8;;http://x/\x07link\x1b]8;;\x07\u{9b}2J\u{202e}b\r\n";
        let t = terminal(hostile, MAX_CHARS);
        assert!(!t.chars().any(unsafe_char), "{t:?}");
        assert!(t.starts_with("a\u{FFFD}[31mred"));
        let long = "x".repeat(1 << 20);
        let cut = terminal(&long, 100);
        assert!(cut.starts_with(&"x".repeat(100)));
        assert!(cut.ends_with(&format!("[cut: {} more bytes]", (1 << 20) - 100)));
        assert_eq!(terminal("ééé", 2), "éé... [cut: 2 more bytes]");
    }

    #[test]
    fn markdown_text_opens_no_html_link_or_span() {
        let m = markdown(
            "<script>x</script> [a](javascript:alert(1)) `c` a|b &amp; \\",
            100,
        );
        assert_eq!(
            m,
            "\\<script>x\\</script> [a\\](javascript:alert(1)) \\`c\\` a\\|b \\&amp; \\\\"
        );
        assert_eq!(markdown("95% [250, 350]", 100), "95% [250, 350]");
        assert_eq!(markdown("ok_name *x*", 100), "ok_name *x*");
        assert_eq!(code_span("a`b``c", 100), "```a`b``c```");
        assert_eq!(code_span("`x", 100), "`` `x ``");
        assert_eq!(code_span("builtin", 100), "`builtin`");
    }

    #[test]
    fn json_in_a_script_cannot_close_it() {
        let j = json_in_script(r#"{"n":"</script><!-- & >"}"#);
        assert!(
            !j.contains('<') && !j.contains('>') && !j.contains('&'),
            "{j}"
        );
        let back: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(back["n"], "</script><!-- & >");
    }
}
