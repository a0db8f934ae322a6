//! Fuzz target: arbitrary bytes as the XML body of PROPFIND, PROPPATCH and REPORT
//! against a small calendar tree. The DAV handler must never panic and must answer a
//! status it documents (a 5xx would mean an unhandled internal error).
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use volley_dav::{Dav, DavRequest};

/// One tree per fuzzing process: a calendar collection with one item.
fn root() -> &'static PathBuf {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("volley-fuzz-dav-{}", std::process::id()));
        let cal = dir.join("cal");
        volley_dav::make_calendar(&cal, "fuzz").expect("calendar");
        std::fs::write(
            cal.join("a.ics"),
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//fuzz//EN\r\nBEGIN:VEVENT\r\nUID:a\r\n\
             DTSTAMP:20260101T000000Z\r\nDTSTART:20260102T100000Z\r\nSUMMARY:x\r\nEND:VEVENT\r\n\
             END:VCALENDAR\r\n",
        )
        .expect("item");
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let dav = Dav::new(root().clone());
    for (method, depth) in [("PROPFIND", "1"), ("REPORT", "1"), ("PROPPATCH", "0")] {
        let headers = [("Depth", depth), ("Content-Type", "application/xml")];
        let req = DavRequest { method, target: "/cal/", headers: &headers, body: data };
        let resp = dav.handle(&req);
        assert!(resp.status < 500 || resp.status == 501, "{method}: {}", resp.status);
    }
});
