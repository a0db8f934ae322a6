//! `volley serve --users`: the users file, Basic authentication, per-account homes
//! and principals, RFC 6764 discovery, and that wrong passwords cost other users
//! nothing. Through the real binary on loopback.

use std::process::Command;

use crate::common;
use crate::groupware;
use common::Served;
use groupware::{send, temp_dir, users_file};

const CUP: &str = r#"<propfind xmlns="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><prop><current-user-principal/><C:calendar-home-set/><principal-URL/></prop></propfind>"#;

fn serve_err(root: &std::path::Path, users: &std::path::Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["serve", "--root"])
        .arg(root)
        .arg("--users")
        .arg(users)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_users_files_exit_2_with_one_line_naming_the_line() {
    let tmp = temp_dir("badusers");
    let good = groupware::passwd_line("alice", "pw");
    let hash = good.split_once(':').unwrap().1;
    let cases = [
        (
            format!("# staff\n{good}\nbob:$apr1$salt$hash\n"),
            "line 3: unknown password hash scheme",
        ),
        (
            format!("{good}\nalice:{hash}\n"),
            "line 2: user \"alice\" already defined on line 1",
        ),
        ("carol\n".to_owned(), "line 1: expected name:hash"),
        (format!("../x:{hash}\n"), "line 1: user name"),
    ];
    for (text, want) in cases {
        let f = tmp.join("users");
        std::fs::write(&f, &text).unwrap();
        let (code, err) = serve_err(&tmp, &f);
        assert_eq!(code, 2, "{err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.contains(want), "{err}");
    }
    let (code, err) = serve_err(&tmp, &tmp.join("missing"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot read users file"), "{err}");
    assert!(err.contains("No such file or directory"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}

#[test]
fn accounts_authenticate_and_reach_only_their_home() {
    let tmp = temp_dir("homes");
    let root = tmp.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let users = users_file(&tmp, &[("alice", "wonder land"), ("bob", "builder")]);
    let server = Served::start(&root, &["--users", users.to_str().unwrap()]);
    let a = &server.addr;
    let alice = Some(("alice", "wonder land"));
    let bob = Some(("bob", "builder"));

    // RFC 6764: the well-known URI redirects (307, keeping the PROPFIND body) to the
    // context path, without credentials.
    let r = send(
        a,
        None,
        "PROPFIND",
        "/.well-known/caldav",
        &[("Depth", "0")],
        "",
    );
    assert_eq!((r.status, r.header("Location")), (307, Some("/".into())));

    for who in [None, Some(("alice", "wrong")), Some(("nobody", "x"))] {
        let r = send(a, who, "PROPFIND", "/", &[("Depth", "0")], CUP);
        assert_eq!(r.status, 401, "{who:?}");
        assert!(r
            .header("WWW-Authenticate")
            .is_some_and(|v| v.starts_with("Basic realm=")));
    }

    let r = send(a, alice, "PROPFIND", "/", &[("Depth", "0")], CUP);
    assert_eq!(r.status, 207);
    assert!(
        r.body
            .contains("<D:current-user-principal><D:href>/alice/</D:href>"),
        "{}",
        r.body
    );
    assert!(
        r.body
            .contains("<C:calendar-home-set><D:href>/alice/</D:href>"),
        "{}",
        r.body
    );
    // The root lists only the caller's home; the home holds the default calendar.
    let r = send(a, alice, "PROPFIND", "/", &[("Depth", "1")], "");
    assert!(
        r.body.contains("<D:href>/alice/</D:href>") && !r.body.contains("/bob/"),
        "{}",
        r.body
    );
    let r = send(a, alice, "PROPFIND", "/alice/", &[("Depth", "1")], "");
    assert!(
        r.body.contains("<D:href>/alice/calendar/</D:href>"),
        "{}",
        r.body
    );
    assert!(r.body.contains("<C:calendar/>"), "{}", r.body);

    let ev = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:a1\r\nDTSTART:20240110T100000Z\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
    assert_eq!(
        send(a, alice, "PUT", "/alice/calendar/a1.ics", &[], ev).status,
        201
    );
    assert_eq!(
        send(a, alice, "GET", "/alice/calendar/a1.ics", &[], "").status,
        200
    );
    // Bob reaches none of it, by any method; and nothing outside his own home.
    for (m, p) in [
        ("GET", "/alice/calendar/a1.ics"),
        ("PROPFIND", "/alice/"),
        ("PUT", "/alice/calendar/b.ics"),
        ("DELETE", "/alice/calendar/a1.ics"),
        ("MKCALENDAR", "/alice/mine/"),
        ("PROPPATCH", "/"),
        ("GET", "/"),
    ] {
        let r = send(
            a,
            bob,
            m,
            p,
            &[("Depth", "0")],
            if m == "PUT" { ev } else { "" },
        );
        assert_eq!(r.status, 403, "bob {m} {p}: {}", r.body);
    }
    let mg = r#"<C:calendar-multiget xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop><C:calendar-data/></D:prop><D:href>/alice/calendar/a1.ics</D:href></C:calendar-multiget>"#;
    let r = send(a, bob, "REPORT", "/bob/calendar/", &[("Depth", "1")], mg);
    assert_eq!(r.status, 207);
    assert!(
        r.body.contains("403 Forbidden") && !r.body.contains("UID:a1"),
        "{}",
        r.body
    );
    let copy = send(
        a,
        bob,
        "COPY",
        "/bob/calendar/",
        &[("Destination", "/alice/stolen/")],
        "",
    );
    assert_eq!(copy.status, 403);
    assert!(!root.join("alice/stolen").exists());
    assert!(root.join("bob/calendar/.volley-collection").exists());
}

/// A guesser hammering one account with ever new passwords: that account locks (429)
/// for new credentials, while another user's requests, all made meanwhile, succeed.
#[test]
fn wrong_passwords_lock_one_account_and_spare_the_others() {
    let tmp = temp_dir("guess");
    let root = tmp.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let users = users_file(&tmp, &[("alice", "right"), ("bob", "builder")]);
    let server = Served::start(&root, &["--users", users.to_str().unwrap()]);
    let a = server.addr.clone();
    // Alice logs in once before the attack: her verified credentials stay valid.
    assert_eq!(
        send(
            &a,
            Some(("alice", "right")),
            "PROPFIND",
            "/alice/",
            &[("Depth", "0")],
            ""
        )
        .status,
        207
    );
    let guesser = {
        let a = a.clone();
        std::thread::spawn(move || {
            (0..40)
                .map(|i| {
                    let pw = format!("guess-{i}");
                    send(
                        &a,
                        Some(("alice", &pw)),
                        "PROPFIND",
                        "/alice/",
                        &[("Depth", "0")],
                        "",
                    )
                    .status
                })
                .collect::<Vec<u16>>()
        })
    };
    let bob: Vec<u16> = (0..40)
        .map(|_| {
            send(
                &a,
                Some(("bob", "builder")),
                "PROPFIND",
                "/bob/",
                &[("Depth", "1")],
                "",
            )
            .status
        })
        .collect();
    let guesses = guesser.join().unwrap();
    assert!(bob.iter().all(|s| *s == 207), "{bob:?}");
    assert!(
        guesses.iter().all(|s| *s == 401 || *s == 429),
        "{guesses:?}"
    );
    assert_eq!(
        guesses.iter().filter(|s| **s == 401).count(),
        5,
        "{guesses:?}"
    );
    let locked = send(
        &a,
        Some(("alice", "another")),
        "PROPFIND",
        "/alice/",
        &[("Depth", "0")],
        "",
    );
    assert_eq!(locked.status, 429);
    assert!(locked.header("Retry-After").is_some());
    assert_eq!(
        send(
            &a,
            Some(("alice", "right")),
            "PROPFIND",
            "/alice/",
            &[("Depth", "0")],
            ""
        )
        .status,
        207
    );
}

#[test]
fn anonymous_mode_is_unchanged_and_redirects_well_known() {
    let tmp = temp_dir("anon");
    std::fs::create_dir_all(tmp.join("cal")).unwrap();
    let server = Served::start(&tmp, &[]);
    let r = send(&server.addr, None, "GET", "/.well-known/caldav", &[], "");
    assert_eq!((r.status, r.header("Location")), (307, Some("/".into())));
    let r = send(
        &server.addr,
        None,
        "PROPFIND",
        "/cal/",
        &[("Depth", "0")],
        CUP,
    );
    assert_eq!(r.status, 207);
    assert!(
        r.body
            .contains("<D:current-user-principal><D:href>/cal/</D:href>"),
        "{}",
        r.body
    );
}

/// A users file from Apache's own tool (`htpasswd -B`, apache2-utils, which
/// scripts/install-deps.sh installs): its `$2y$` bcrypt lines work as they are.
#[test]
fn htpasswd_bcrypt_lines_are_accepted() {
    let tmp = temp_dir("htpasswd");
    let root = tmp.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let users = tmp.join("htpasswd");
    let st = Command::new("htpasswd")
        .args(["-cbB", "-C", "5"])
        .arg(&users)
        .args(["zoe", "pa ss:word"])
        .stderr(std::process::Stdio::null())
        .status()
        .expect("htpasswd (apache2-utils) installed");
    assert!(st.success());
    assert!(std::fs::read_to_string(&users)
        .unwrap()
        .starts_with("zoe:$2y$05$"));
    let server = Served::start(&root, &["--users", users.to_str().unwrap()]);
    let ok = send(
        &server.addr,
        Some(("zoe", "pa ss:word")),
        "PROPFIND",
        "/zoe/",
        &[("Depth", "0")],
        CUP,
    );
    assert_eq!(ok.status, 207);
    let bad = send(
        &server.addr,
        Some(("zoe", "pa ss")),
        "PROPFIND",
        "/zoe/",
        &[("Depth", "0")],
        CUP,
    );
    assert_eq!(bad.status, 401);
}
