//! `volley fixtures` and `volley_fixtures::generate`: determinism, sizes, valid iCalendar
//! items (image decoding is checked in `crates/fixtures/tests/images.rs`, beside the
//! decoder dev-dependencies).

use std::path::Path;
use std::process::Command;
use volley_fixtures::{generate, Fixture};

/// An empty directory for a generated set, removed when the test ends.
fn tmp(tag: &str) -> crate::common::TestDir {
    crate::common::fresh_dir(&format!("volley-fixtures-{tag}"))
}

fn read(dir: &Path, rel: &str) -> Vec<u8> {
    std::fs::read(dir.join(rel)).unwrap()
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let (a, b, c) = (tmp("det-a"), tmp("det-b"), tmp("det-c"));
    let ma = generate(&Fixture::Uniserve, &a, 7).unwrap();
    let mb = generate(&Fixture::Uniserve, &b, 7).unwrap();
    let mc = generate(&Fixture::Uniserve, &c, 8).unwrap();
    assert_eq!(ma, mb);
    assert_ne!(ma.files[0].sha256, mc.files[0].sha256);
    for f in &ma.files {
        assert_eq!(read(&a, &f.path), read(&b, &f.path), "{}", f.path);
        assert_eq!(read(&a, &f.path).len() as u64, f.size);
        assert_eq!(volley_fixtures::sha256_hex(&read(&a, &f.path)), f.sha256);
    }
}

#[test]
fn uniserve_sizes_and_links() {
    let d = tmp("uni");
    let m = generate(&Fixture::Uniserve, &d, 0).unwrap();
    for (name, size) in volley_fixtures::UNISERVE_IMAGES {
        let f = m.files.iter().find(|f| f.path == name).unwrap();
        assert_eq!(f.size as usize, size, "{name}");
    }
    for n in 1..=5 {
        let page = String::from_utf8(read(&d, &format!("index{n}.html"))).unwrap();
        let size = page.len() as f64;
        assert!(
            (size - 8600.0).abs() <= 86.0,
            "index{n}.html is {size} bytes"
        );
        let imgs = page.matches("<img ").count();
        assert_eq!(imgs, n, "index{n}.html links {imgs} images");
    }
}

#[test]
fn sizes_set_is_exact() {
    let d = tmp("sizes");
    let m = generate(&Fixture::Sizes, &d, 0).unwrap();
    for size in volley_fixtures::SIZES {
        let f = m
            .files
            .iter()
            .find(|f| f.path == format!("{size}b.html"))
            .unwrap();
        assert_eq!(f.size as usize, size);
    }
    assert!(d.join("index.html").is_file());
}

#[test]
fn groupware_items_are_ical_with_crlf() {
    let d = tmp("gw");
    let m = generate(
        &Fixture::Groupware {
            users: 3,
            items: 40,
        },
        &d,
        0,
    )
    .unwrap();
    assert_eq!(
        m.calendars,
        [
            "calendars/user1/calendar/",
            "calendars/user2/calendar/",
            "calendars/user3/calendar/"
        ]
    );
    assert_eq!(m.files.len(), 120);
    let mut uids = std::collections::HashSet::new();
    let (mut events, mut todos) = (0, 0);
    for f in &m.files {
        let text = String::from_utf8(read(&d, &f.path)).unwrap();
        assert!(f.path.ends_with(".ics"));
        assert!(text.starts_with("BEGIN:VCALENDAR\r\n") && text.ends_with("END:VCALENDAR\r\n"));
        assert!(
            !text.replace("\r\n", "").contains('\n'),
            "bare LF in {}",
            f.path
        );
        assert!(
            text.split("\r\n").all(|l| l.len() <= 75),
            "unfolded line in {}",
            f.path
        );
        let uid = text.lines().find_map(|l| l.strip_prefix("UID:")).unwrap();
        assert!(uids.insert(uid.to_owned()), "duplicate UID");
        assert!(text.contains("DTSTAMP:2025"));
        if text.contains("BEGIN:VEVENT") {
            events += 1;
            assert!(text.contains("DTSTART:2025") || text.contains("DTSTART:2026"));
        } else {
            todos += 1;
            assert!(text.contains("BEGIN:VTODO") && text.contains("DUE:"));
        }
    }
    assert!(events > 0 && todos > 0, "{events} events, {todos} todos");
    let mean = m.files.iter().map(|f| f.size).sum::<u64>() as f64 / m.files.len() as f64;
    assert!((550.0..=850.0).contains(&mean), "mean item {mean} bytes");
}

#[test]
fn cli_writes_and_rejects_unknown_sets() {
    let d = tmp("cli");
    let out = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["fixtures", "sizes"])
        .arg(&d)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("700b.html") && stdout.contains("145000b.html"),
        "{stdout}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["fixtures", "nope"])
        .arg(&d)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
