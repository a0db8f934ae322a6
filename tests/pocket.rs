//! The pocket server: `volley serve --users` inside a cgroup capped at 8 MB of memory
//! and a tenth of one CPU (the stand-in for an 80 MHz microcontroller board) serves a
//! 20-user office day without one error and stays alive. The day is each user's
//! requests of a working day (discovery, 8 new events, a week's query, 4 edits, 2
//! deletions, a poll every 12 minutes, free-busy, a multiget: ~110 requests) sent back
//! to back, all users at once: a harder load than the same requests spread over 8 h.
//!
//! The cgroups are `volley_targets`' own (`PrivateCgroups`: `volley-<pid>-<n>`, unique
//! per test process, removed at the end); the server joins them before exec, as managed
//! targets do, so everything it allocates is charged and throttled. The load generator
//! (this test) stays outside. Needs root and the cpu and memory controllers (v1 or v2).

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use volley_targets::cgroup::PrivateCgroups;
use volley_targets::{CpuQuota, ResourceLimits};

use crate::groupware;
use groupware::{send, temp_dir};

const USERS: usize = 20;
/// Polls per user in the day (one every 12 minutes for 8 hours).
const POLLS: usize = 40;
const MEMORY_CAP_BYTES: u64 = 8 << 20;
/// The whole day must end within this, or the test fails (it never hangs).
const DAY_LIMIT: Duration = Duration::from_secs(300);

/// A running server in the cgroups, killed and reaped on drop.
struct Pocket {
    child: std::process::Child,
    addr: String,
}

impl Drop for Pocket {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_in(cgroups: &PrivateCgroups, root: &std::path::Path, users: &std::path::Path) -> Pocket {
    use std::io::BufRead;
    use std::os::fd::AsRawFd;
    let joins: Vec<std::fs::File> = cgroups
        .dirs()
        .iter()
        .map(|d| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(d.join("cgroup.procs"))
                .unwrap()
        })
        .collect();
    let fds: Vec<i32> = joins.iter().map(|f| f.as_raw_fd()).collect();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_volley"));
    cmd.args(["serve", "--root"])
        .arg(root)
        .arg("--users")
        .arg(users)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // SAFETY: between fork and exec only write(2) on fds opened before the fork, which
    // is async-signal-safe; "0" means "the writing process" to cgroup.procs.
    unsafe {
        cmd.pre_exec(move || {
            for fd in &fds {
                if libc::write(*fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn volley serve in the cgroups");
    drop(joins);
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    // Bounded: the server prints this line before serving; a dead server closes stdout.
    out.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .and_then(|s| s.strip_suffix('/'))
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    Pocket { child, addr }
}

fn event(uid: &str, day: u32, hour: u32, recurring: bool) -> String {
    let rule = if recurring {
        "RRULE:FREQ=WEEKLY;COUNT=20\r\n"
    } else {
        ""
    };
    format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//office//EN\r\nBEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:20240101T000000Z\r\nDTSTART;TZID=Europe/Berlin:202403{day:02}T{hour:02}0000\r\nDURATION:PT1H\r\n{rule}SUMMARY:Meeting {uid}\r\nBEGIN:VALARM\r\nACTION:DISPLAY\r\nDESCRIPTION:x\r\nTRIGGER:-PT10M\r\nEND:VALARM\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    )
}

fn token_of(body: &str) -> String {
    body.split("<D:sync-token>")
        .nth(1)
        .and_then(|s| s.split('<').next())
        .unwrap_or("")
        .to_owned()
}

/// One user's day: discovery, an initial sync, new events, a week's query, edits with
/// If-Match, deletions, polling syncs, free-busy and a multiget. Returns the requests
/// made and the ones whose status was not the one a client expects.
fn office_day(addr: &str, user: &str, deadline: Instant) -> (usize, Vec<String>) {
    let cred = Some((user, "office"));
    let cal = format!("/{user}/calendar/");
    let mut made = 0;
    let mut errors = Vec::new();
    let mut expect = |what: &str, got: u16, want: u16| {
        made += 1;
        if got != want {
            errors.push(format!("{user} {what}: {got}, expected {want}"));
        }
    };
    let sync = |token: &str| {
        format!(
            r#"<D:sync-collection xmlns:D="DAV:"><D:sync-token>{token}</D:sync-token><D:sync-level>1</D:sync-level><D:prop><D:getetag/></D:prop></D:sync-collection>"#
        )
    };
    let cup = r#"<propfind xmlns="DAV:"><prop><current-user-principal/></prop></propfind>"#;
    let r = send(addr, cred, "PROPFIND", "/", &[("Depth", "0")], cup);
    expect("discover", r.status, 207);
    let r = send(
        addr,
        cred,
        "PROPFIND",
        &format!("/{user}/"),
        &[("Depth", "1")],
        "",
    );
    expect("list calendars", r.status, 207);
    let r = send(addr, cred, "REPORT", &cal, &[], &sync(""));
    expect("initial sync", r.status, 207);
    let mut token = token_of(&r.body);
    for i in 0..8u32 {
        let body = event(&format!("{user}-{i}"), 4 + i % 5, 9 + i, i % 3 == 0);
        let r = send(
            addr,
            cred,
            "PUT",
            &format!("{cal}ev{i}.ics"),
            &[("If-None-Match", "*")],
            &body,
        );
        expect("create", r.status, 201);
    }
    let week = r#"<C:calendar-query xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop><D:getetag/></D:prop><C:filter><C:comp-filter name="VCALENDAR"><C:comp-filter name="VEVENT"><C:time-range start="20240311T000000Z" end="20240318T000000Z"/></C:comp-filter></C:comp-filter></C:filter></C:calendar-query>"#;
    let r = send(addr, cred, "REPORT", &cal, &[("Depth", "1")], week);
    expect("week query", r.status, 207);
    for i in 0..4u32 {
        if Instant::now() > deadline {
            break;
        }
        let path = format!("{cal}ev{i}.ics");
        let r = send(addr, cred, "GET", &path, &[], "");
        expect("read", r.status, 200);
        let tag = r.header("ETag").unwrap_or_default();
        let body = event(&format!("{user}-{i}"), 4 + i % 5, 14, i % 3 == 0);
        let r = send(addr, cred, "PUT", &path, &[("If-Match", &tag)], &body);
        expect("edit", r.status, 204);
    }
    for i in [6, 7] {
        let r = send(addr, cred, "DELETE", &format!("{cal}ev{i}.ics"), &[], "");
        expect("delete", r.status, 204);
    }
    // A client polls every ~12 minutes over an 8-hour day: the ctag, then a sync.
    let ctag = r#"<propfind xmlns="DAV:" xmlns:CS="http://calendarserver.org/ns/"><prop><CS:getctag/></prop></propfind>"#;
    for _ in 0..POLLS {
        if Instant::now() > deadline {
            break;
        }
        let r = send(addr, cred, "PROPFIND", &cal, &[("Depth", "0")], ctag);
        expect("ctag", r.status, 207);
        let r = send(addr, cred, "REPORT", &cal, &[], &sync(&token));
        expect("poll", r.status, 207);
        token = token_of(&r.body);
    }
    let fb = r#"<C:free-busy-query xmlns:C="urn:ietf:params:xml:ns:caldav"><C:time-range start="20240304T000000Z" end="20240311T000000Z"/></C:free-busy-query>"#;
    let r = send(addr, cred, "REPORT", &cal, &[("Depth", "1")], fb);
    expect("free-busy", r.status, 200);
    let hrefs: String = (0..6)
        .map(|i| format!("<D:href>{cal}ev{i}.ics</D:href>"))
        .collect();
    let mg = format!(
        r#"<C:calendar-multiget xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop><D:getetag/><C:calendar-data/></D:prop>{hrefs}</C:calendar-multiget>"#
    );
    let r = send(addr, cred, "REPORT", &cal, &[("Depth", "1")], &mg);
    expect("multiget", r.status, 207);
    if r.body.matches("BEGIN:VCALENDAR").count() != 6 {
        errors.push(format!("{user} multiget: not 6 objects"));
    }
    if Instant::now() > deadline {
        errors.push(format!("{user}: the day did not end within {DAY_LIMIT:?}"));
    }
    (made, errors)
}

#[test]
fn twenty_users_office_day_in_8_mb_and_a_tenth_of_a_cpu() {
    let tmp = temp_dir("pocket");
    let root = tmp.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let names: Vec<String> = (0..USERS).map(|i| format!("user{i:02}")).collect();
    // One hash for all: the same password, salted once, is enough for a load test.
    let line = groupware::passwd_line("x", "office");
    let hash = line.split_once(':').unwrap().1;
    let text: String = names.iter().map(|n| format!("{n}:{hash}\n")).collect();
    let users = tmp.join("users");
    std::fs::write(&users, text).unwrap();

    let limits = ResourceLimits {
        cpus: None,
        cpu_quota: Some(CpuQuota::of_one_cpu(0.1)),
        memory_max_bytes: Some(MEMORY_CAP_BYTES),
    };
    let mut cgroups = PrivateCgroups::create(&limits)
        .expect("cgroups with cpu and memory controllers (run as root)");
    let result = std::panic::catch_unwind(|| {
        let mut server = start_in(&cgroups, &root, &users);
        let deadline = Instant::now() + DAY_LIMIT;
        let addr = Arc::new(server.addr.clone());
        let days: Vec<_> = names
            .iter()
            .map(|n| {
                let (addr, n) = (addr.clone(), n.clone());
                std::thread::spawn(move || office_day(&addr, &n, deadline))
            })
            .collect();
        let mut made = 0;
        let mut errors = Vec::new();
        for d in days {
            let (m, mut e) = d
                .join()
                .expect("a user's day panicked (connection refused?)");
            made += m;
            errors.append(&mut e);
        }
        assert!(
            errors.is_empty(),
            "{} errors in {made} requests: {errors:#?}",
            errors.len()
        );
        assert_eq!(made, USERS * (24 + 2 * POLLS), "requests made");
        assert!(
            server.child.try_wait().unwrap().is_none(),
            "the server died under the caps"
        );
        let peak = cgroups
            .dirs()
            .iter()
            .find_map(|d| {
                std::fs::read_to_string(d.join("memory.max_usage_in_bytes"))
                    .ok()
                    .or_else(|| std::fs::read_to_string(d.join("memory.peak")).ok())
            })
            .unwrap_or_default();
        let throttled = cgroups.throttle_stats();
        eprintln!("pocket: {made} requests, 0 errors, memory peak {} B of {MEMORY_CAP_BYTES}, {throttled:?}", peak.trim());
    });
    let left = cgroups.remove();
    assert!(left.is_empty(), "cgroups left behind: {left:?}");
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}
