//! Content-Type by file extension: the one table both servers use (`volley-server`'s
//! cached file heads and this crate's `getcontenttype`), so a file has the same type
//! over GET and PROPFIND.
//!
//! `mime_guess` holds the table; [`NEWER`] overrides the few entries where it predates
//! the current registrations. Text types get `; charset=utf-8` (fixtures are UTF-8, and
//! a browser guessing otherwise would show them wrongly).

use std::borrow::Cow;

/// Extensions whose registration is newer than `mime_guess`'s table.
const NEWER: &[(&str, &str)] = &[
    // RFC 9239: JavaScript is text/javascript, modules included.
    ("mjs", "text/javascript"),
    // RFC 6350 registered text/vcard (mime_guess has the older text/x-vcard).
    ("vcf", "text/vcard"),
    // RFC 7303 prefers application/xml to text/xml.
    ("xml", "application/xml"),
    // RFC 8081: font/woff.
    ("woff", "font/woff"),
];

/// The media type (without parameters) for a file name's last extension,
/// case-insensitive; `application/octet-stream` when unknown.
pub fn essence(name: &str) -> &'static str {
    let Some((_, ext)) = name.rsplit_once('.') else {
        return "application/octet-stream";
    };
    if ext.contains('/') {
        return "application/octet-stream";
    }
    let ext = ext.to_ascii_lowercase();
    NEWER
        .iter()
        .find(|(e, _)| *e == ext)
        .map(|(_, t)| *t)
        .or_else(|| mime_guess::from_ext(&ext).first_raw())
        .unwrap_or("application/octet-stream")
}

/// The Content-Type field value for `name`: [`essence`] plus `; charset=utf-8` on text.
pub fn content_type(name: &str) -> Cow<'static, str> {
    let t = essence(name);
    if t.starts_with("text/") {
        Cow::Owned(format!("{t}; charset=utf-8"))
    } else {
        Cow::Borrowed(t)
    }
}

#[cfg(test)]
mod tests {
    use super::content_type;

    #[test]
    fn known_and_unknown_extensions() {
        assert_eq!(content_type("/a/index.HTML"), "text/html; charset=utf-8");
        assert_eq!(content_type("/x/2.jpg"), "image/jpeg");
        assert_eq!(content_type("/cal/e.ics"), "text/calendar; charset=utf-8");
        assert_eq!(content_type("/s/app.js"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("/s/app.mjs"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("/s/site.css"), "text/css; charset=utf-8");
        assert_eq!(content_type("/c/a.vcf"), "text/vcard; charset=utf-8");
        assert_eq!(content_type("/d.xml"), "application/xml");
        assert_eq!(content_type("/x.d/noext"), "application/octet-stream");
        assert_eq!(content_type("/x.verylongext"), "application/octet-stream");
    }
}
