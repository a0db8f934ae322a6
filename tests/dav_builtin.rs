//! The built-in server as a managed DAV target: `dav` accounts make volley start it in
//! multi-user mode (`volley serve --users`, a generated bcrypt users file) on a private
//! tree, never the docroot. Every account's calendar answers PROPFIND as its owner,
//! nobody else's and nothing without credentials; the capability probe finds a full
//! CalDAV server; after stop nothing is left.

use std::path::{Path, PathBuf};
use std::time::Duration;
use volley_office::capabilities::capabilities;
use volley_office::http::request;
use volley_office::Account;
use volley_targets::dav::CalendarSetup;
use volley_targets::{start, DavSettings, TargetKind, TargetSpec};

const T: Duration = Duration::from_secs(10);

const PROPFIND: &str = "<?xml version=\"1.0\"?><D:propfind xmlns:D=\"DAV:\">\
<D:prop><D:resourcetype/></D:prop></D:propfind>";

#[test]
fn the_builtin_server_with_dav_accounts_serves_each_user_a_calendar() {
    let mut spec = TargetSpec::new(TargetKind::Builtin);
    spec.volley_exe = Some(PathBuf::from(env!("CARGO_BIN_EXE_volley")));
    spec.settings.dav = Some(DavSettings {
        users: 3,
        seed_items: 0,
    });
    spec.start_timeout = Duration::from_secs(30);
    let t = start(&spec).unwrap_or_else(|e| panic!("builtin did not start: {e}"));
    let dav = t.dav.clone().expect("a DAV target reports its accounts");
    assert_eq!(dav.accounts.len(), 3);
    assert!(dav.checks_passwords);
    assert_eq!(dav.calendars, CalendarSetup::UsersFile);
    assert!(
        t.config_text.contains("--users"),
        "the recorded configuration says how it was started: {}",
        t.config_text
    );
    let (u1, u2) = (&dav.accounts[0], &dav.accounts[1]);
    for a in &dav.accounts {
        let r = request(
            t.addr,
            Some(&Account::from(a)),
            "PROPFIND",
            &a.calendar,
            &[("Depth", "0")],
            PROPFIND.as_bytes(),
            T,
        )
        .unwrap();
        assert_eq!(r.status, 207, "{}'s calendar {}", a.name, a.calendar);
    }
    let foreign = request(
        t.addr,
        Some(&Account::from(u2)),
        "PROPFIND",
        &u1.calendar,
        &[("Depth", "0")],
        PROPFIND.as_bytes(),
        T,
    )
    .unwrap();
    assert!(
        foreign.status == 403 || foreign.status == 404,
        "user2 read user1's calendar: {}",
        foreign.status
    );
    let anonymous = request(
        t.addr,
        None,
        "PROPFIND",
        &u1.calendar,
        &[("Depth", "0")],
        PROPFIND.as_bytes(),
        T,
    )
    .unwrap();
    assert_eq!(anonymous.status, 401, "no credentials, no calendar");
    let mut wrong = u1.clone();
    wrong.password = "not-the-password".into();
    let r = request(
        t.addr,
        Some(&Account::from(&wrong)),
        "PROPFIND",
        &u1.calendar,
        &[("Depth", "0")],
        PROPFIND.as_bytes(),
        T,
    )
    .unwrap();
    assert_eq!(r.status, 401, "a wrong password is refused");
    let caps =
        capabilities(t.addr, &Account::from(u1), T).unwrap_or_else(|e| panic!("builtin: {e}"));
    assert!(caps.lacks().is_empty(), "builtin lacks {:?}", caps.lacks());
    let (pid, dir) = (t.pid.expect("a managed target has a pid"), t.dir.clone());
    t.stop();
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "pid {pid} still running"
    );
    assert!(!dir.exists(), "{} left behind", dir.display());
}
