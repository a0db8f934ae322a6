//! Content-Type by file extension, the table nginx's mime.types would give for the
//! types a benchmarking lab serves (plus `ics` for CalDAV fixtures).

/// The Content-Type for `path` (by its last extension, case-insensitive).
pub fn content_type(path: &[u8]) -> &'static str {
    let name = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    let ext = match name.iter().rposition(|&b| b == b'.') {
        Some(i) => &name[i + 1..],
        None => return "application/octet-stream",
    };
    let mut lower = [0u8; 8];
    if ext.len() > lower.len() {
        return "application/octet-stream";
    }
    for (d, s) in lower.iter_mut().zip(ext) {
        *d = s.to_ascii_lowercase();
    }
    match &lower[..ext.len()] {
        b"html" | b"htm" => "text/html; charset=utf-8",
        b"css" => "text/css; charset=utf-8",
        b"js" | b"mjs" => "text/javascript; charset=utf-8",
        b"json" => "application/json",
        b"txt" => "text/plain; charset=utf-8",
        b"csv" => "text/csv; charset=utf-8",
        b"xml" => "application/xml",
        b"ics" => "text/calendar; charset=utf-8",
        b"vcf" => "text/vcard; charset=utf-8",
        b"gif" => "image/gif",
        b"jpg" | b"jpeg" => "image/jpeg",
        b"png" => "image/png",
        b"svg" => "image/svg+xml",
        b"webp" => "image/webp",
        b"avif" => "image/avif",
        b"ico" => "image/x-icon",
        b"woff" => "font/woff",
        b"woff2" => "font/woff2",
        b"wasm" => "application/wasm",
        b"pdf" => "application/pdf",
        b"mp4" => "video/mp4",
        b"gz" => "application/gzip",
        b"zip" => "application/zip",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::content_type;

    #[test]
    fn known_and_unknown_extensions() {
        assert_eq!(content_type(b"/a/index.HTML"), "text/html; charset=utf-8");
        assert_eq!(content_type(b"/x/2.jpg"), "image/jpeg");
        assert_eq!(content_type(b"/cal/e.ics"), "text/calendar; charset=utf-8");
        assert_eq!(content_type(b"/x.d/noext"), "application/octet-stream");
        assert_eq!(content_type(b"/x.verylongext"), "application/octet-stream");
    }
}
