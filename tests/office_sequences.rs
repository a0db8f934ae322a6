//! The exact request sequence of each client profile, checked against golden files:
//! one user with two devices lives a short seeded day against the fault server's DAV
//! mode (no fault) with `--record`; the profile's requests (the harness's set-up and
//! audit, told apart by User-Agent, left out) must equal `tests/office/<profile>.txt`.
//! `VOLLEY_BLESS=1` rewrites the files (review the diff: it is the profile).

use std::path::PathBuf;
use std::process::Command;

use volley_faultserver::{DavFault, DavServer};

fn recorded(profile: &str) -> Vec<String> {
    // The server's record, in a directory that goes when the test ends.
    let dir = crate::common::fresh_dir(&format!("volley-office-seq-{profile}"));
    let file = dir.join("requests.tsv");
    let server = DavServer::start(DavFault::None, Some(&file)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_volley"))
        // A cold day: the golden files pin each device's first sync among its polls.
        .args(["bench", "-q", "--caldav", "1", "--profile", profile])
        .arg("--caldav-cold-start")
        .args([
            "--compress",
            "480",
            "--duration",
            "5s",
            "--decisions",
            "60",
            "--seed",
            "4",
            &server.url(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.shutdown();
    let text = std::fs::read_to_string(&file).unwrap();
    text.lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, '\t');
            let (_user, agent, line) = (parts.next()?, parts.next()?, parts.next()?);
            let device = agent.strip_prefix("volley-office/")?;
            (device != "setup" && device != "audit")
                .then(|| format!("{device} {}", line.replace("office1", "{user}")))
        })
        .collect()
}

fn check(profile: &str) -> Vec<String> {
    let got = recorded(profile);
    let golden =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/office/{profile}.txt"));
    if std::env::var_os("VOLLEY_BLESS").is_some() {
        std::fs::write(&golden, got.join("\n") + "\n").unwrap();
    }
    let want = std::fs::read_to_string(&golden).unwrap_or_default();
    let want: Vec<&str> = want.lines().collect();
    assert_eq!(
        got,
        want,
        "{profile}: sequence differs from {}",
        golden.display()
    );
    got
}

/// The first requests of device 0, up to its first multiget.
fn first_sync(lines: &[String], device: &str) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l.starts_with(device))
        .take_while(|l| !l.contains("calendar-multiget"))
        .cloned()
        .collect()
}

#[test]
fn thunderbird_sequence() {
    let lines = check("thunderbird");
    let first = first_sync(&lines, "thunderbird#0");
    assert!(
        first[0].contains("PROPFIND /{user}/calendar/ depth=0")
            && first[0].contains("getctag")
            && first[0].contains("sync-token")
            && first[0].contains("supported-report-set"),
        "{first:?}"
    );
    assert!(first[1].contains("OPTIONS /{user}/calendar/"), "{first:?}");
    assert!(first[2].contains("props=calendar-home-set"), "{first:?}");
    assert!(
        first[3].contains("report=sync-collection token=empty"),
        "{first:?}"
    );
    assert!(lines
        .iter()
        .any(|l| l.contains("report=sync-collection token=given")));
    assert!(lines
        .iter()
        .any(|l| l.contains("PUT") && l.contains("if-none-match=*")));
}

#[test]
fn davx5_sequence() {
    let lines = check("davx5");
    let first = first_sync(&lines, "davx5#0");
    assert!(
        first[0].contains("PROPFIND / depth=0 props=current-user-principal"),
        "{first:?}"
    );
    assert!(first[1].contains("calendar-home-set"), "{first:?}");
    assert!(first[2].contains("PROPFIND /{user}/ depth=1"), "{first:?}");
    assert!(
        first[3].contains("props=getctag,sync-token,supported-report-set"),
        "{first:?}"
    );
    assert!(
        first[4].contains("report=sync-collection token=empty"),
        "{first:?}"
    );
    // Multigets of at most 10 hrefs.
    for l in lines.iter().filter(|l| l.contains("calendar-multiget")) {
        let n: usize = l
            .rsplit("hrefs=")
            .next()
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=10).contains(&n), "{l}");
    }
    // Uploads come after the poll's PROPFIND Depth 0 and before its sync-collection.
    for device in ["davx5#0", "davx5#1"] {
        let own: Vec<&String> = lines.iter().filter(|l| l.starts_with(device)).collect();
        let upload = |l: &str| l.contains(" PUT ") || l.contains(" DELETE ");
        for (i, l) in own.iter().enumerate().filter(|(_, l)| upload(l)) {
            let before = own[..i].iter().rev().find(|p| !upload(p)).unwrap();
            let after = own[i + 1..].iter().find(|n| !upload(n)).unwrap();
            assert!(
                before.contains("depth=0 props=getctag,sync-token"),
                "{l} after {before}"
            );
            assert!(
                after.contains("sync-collection token=given"),
                "{l} before {after}"
            );
        }
    }
}

#[test]
fn evolution_sequence() {
    let lines = check("evolution");
    let first = first_sync(&lines, "evolution#0");
    assert!(
        first[0].contains("props=resourcetype,displayname,getctag"),
        "{first:?}"
    );
    assert!(first[1].contains("report=calendar-query"), "{first:?}");
    assert!(!lines.iter().any(|l| l.contains("sync-collection")));
}

#[test]
fn apple_sequence() {
    let lines = check("apple");
    let first = first_sync(&lines, "apple#0");
    assert!(
        first[0]
            .contains("PROPFIND / depth=0 props=current-user-principal,principal-collection-set"),
        "{first:?}"
    );
    assert!(first[2].contains("PROPFIND /{user}/ depth=1"), "{first:?}");
    assert!(
        first[3].contains("report=sync-collection token=empty"),
        "{first:?}"
    );
    assert!(lines
        .iter()
        .any(|l| l.contains("PROPFIND /{user}/ depth=1 props=getctag,sync-token")));
}
