//! One line per request for `--record`: what a client sent, in the terms its profile
//! is described in (docs/methodology.md, "The office").

/// `METHOD PATH depth=D DETAIL COND`: DETAIL is a PROPFIND's property names in order,
/// or a REPORT's kind (with whether a sync token was given, or how many hrefs a
/// multiget names); COND names the conditional headers sent.
pub(crate) fn line(
    method: &str,
    target: &str,
    depth: Option<&str>,
    headers: &[(String, String)],
    body: &[u8],
) -> String {
    let mut out = format!("{method} {target} depth={}", depth.unwrap_or("-"));
    let text = std::str::from_utf8(body).unwrap_or("");
    if let Ok(doc) = roxmltree::Document::parse(text) {
        let root = doc.root_element();
        let kind = root.tag_name().name();
        match (method, kind) {
            ("PROPFIND", "propfind") => {
                let props: Vec<&str> = root
                    .children()
                    .find(|c| c.tag_name().name() == "prop")
                    .map(|p| {
                        p.children()
                            .filter(|c| c.is_element())
                            .map(|c| c.tag_name().name())
                            .collect()
                    })
                    .unwrap_or_default();
                out.push_str(&format!(" props={}", props.join(",")));
            }
            ("REPORT", "sync-collection") => {
                let token = root
                    .children()
                    .find(|c| c.tag_name().name() == "sync-token")
                    .and_then(|t| t.text())
                    .is_some_and(|t| !t.trim().is_empty());
                out.push_str(&format!(
                    " report=sync-collection token={}",
                    if token { "given" } else { "empty" }
                ));
            }
            ("REPORT", "calendar-multiget") => {
                let n = root
                    .children()
                    .filter(|c| c.tag_name().name() == "href")
                    .count();
                out.push_str(&format!(" report=calendar-multiget hrefs={n}"));
            }
            ("REPORT", k) => out.push_str(&format!(" report={k}")),
            (_, k) => out.push_str(&format!(" body={k}")),
        }
    }
    for name in ["If-Match", "If-None-Match"] {
        if let Some((_, v)) = headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
            let shown = if v == "*" { "*" } else { "etag" };
            out.push_str(&format!(" {}={shown}", name.to_ascii_lowercase()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn lines_name_props_reports_and_conditions() {
        let l = super::line(
            "PROPFIND",
            "/u/calendar/",
            Some("0"),
            &[],
            br#"<D:propfind xmlns:D="DAV:" xmlns:CS="http://calendarserver.org/ns/"><D:prop><CS:getctag/><D:sync-token/></D:prop></D:propfind>"#,
        );
        assert_eq!(l, "PROPFIND /u/calendar/ depth=0 props=getctag,sync-token");
        let l = super::line(
            "REPORT",
            "/u/calendar/",
            Some("1"),
            &[],
            br#"<D:sync-collection xmlns:D="DAV:"><D:sync-token>t1</D:sync-token></D:sync-collection>"#,
        );
        assert_eq!(
            l,
            "REPORT /u/calendar/ depth=1 report=sync-collection token=given"
        );
        let h = vec![("If-None-Match".to_owned(), "*".to_owned())];
        assert_eq!(
            super::line("PUT", "/u/calendar/a.ics", None, &h, b"BEGIN:VCALENDAR"),
            "PUT /u/calendar/a.ics depth=- if-none-match=*"
        );
    }
}
