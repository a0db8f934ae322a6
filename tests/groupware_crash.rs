//! kill -9 in the middle of a stream of calendar PUTs (multi-user mode): after a
//! restart every item is one whole version, old or new, the journal still syncs, and
//! the UID index, rebuilt from disk, still refuses a duplicate UID.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common;
use crate::groupware;
use common::Served;
use groupware::{send, temp_dir, try_send, users_file};

const ITEMS: u64 = 6;
const ALICE: Option<(&str, &str)> = Some(("alice", "pw"));

/// Version `v` of item `i`: valid iCalendar whose length depends on `v`, so a torn or
/// mixed file is detectable.
fn item(i: u64, v: u64) -> String {
    let pad = format!("v{v}.").repeat(50 + (v % 9) as usize * 120);
    format!("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:item-{i}\r\nDTSTAMP:20240101T000000Z\r\nDTSTART:20240110T100000Z\r\nSUMMARY:v{v}\r\nDESCRIPTION:{pad}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")
}

#[test]
fn kill_9_during_calendar_puts_leaves_every_item_old_or_new() {
    let tmp = temp_dir("crash");
    let root = tmp.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let users = users_file(&tmp, &[("alice", "pw")]);
    let args = ["--users", users.to_str().unwrap()];
    let mut server = Served::start(&root, &args);
    let addr = server.addr.clone();
    for i in 0..ITEMS {
        let r = send(
            &addr,
            ALICE,
            "PUT",
            &format!("/alice/calendar/{i}.ics"),
            &[],
            &item(i, 0),
        );
        assert_eq!(r.status, 201);
    }
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (done, stop, addr) = (done.clone(), stop.clone(), addr.clone());
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(20);
            for v in 1..5000u64 {
                if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
                    break;
                }
                let i = v % ITEMS;
                let path = format!("/alice/calendar/{i}.ics");
                match try_send(&addr, ALICE, "PUT", &path, &[], &item(i, v)) {
                    Ok(r) if r.status == 204 => {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => break,
                }
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while done.load(Ordering::Relaxed) < 30 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        done.load(Ordering::Relaxed) >= 30,
        "the PUT stream never got going"
    );
    server.kill();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();

    let server = Served::start(&root, &args);
    let a = &server.addr;
    for i in 0..ITEMS {
        let r = send(
            a,
            ALICE,
            "GET",
            &format!("/alice/calendar/{i}.ics"),
            &[],
            "",
        );
        assert_eq!(r.status, 200);
        let v: u64 = r
            .body
            .split("SUMMARY:v")
            .nth(1)
            .and_then(|s| s.split('\r').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("item {i} torn: {:?}", &r.body[..r.body.len().min(80)]));
        assert!(
            r.body == item(i, v),
            "item {i} is a torn mix around version {v}"
        );
    }
    let sync = r#"<D:sync-collection xmlns:D="DAV:"><D:sync-token>urn:volley:sync:0:0</D:sync-token><D:sync-level>1</D:sync-level><D:prop><D:getetag/></D:prop></D:sync-collection>"#;
    let r = send(a, ALICE, "REPORT", "/alice/calendar/", &[], sync);
    assert_eq!(r.status, 207, "{}", r.body);
    assert_eq!(
        r.body.matches("<D:getetag>").count(),
        ITEMS as usize,
        "{}",
        r.body
    );
    let r = send(a, ALICE, "PUT", "/alice/calendar/dup.ics", &[], &item(0, 1));
    assert_eq!(r.status, 403);
    assert!(r.body.contains("/alice/calendar/0.ics"), "{}", r.body);
    let names: Vec<String> = std::fs::read_dir(root.join("alice/calendar"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n == "dup.ics"), "{names:?}");
}
