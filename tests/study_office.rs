//! `kind = "caldav"` workloads in a study, driven as a user would: an office of
//! calendar clients swept over users against the built-in server (DAV accounts) and a
//! real Radicale (volley's venv, scripts/install-caldav.sh), each step's office report
//! and verdict stored, and the answer "carries N users" printed per server. Bad office
//! keys are one-line usage errors naming the key.

use std::path::{Path, PathBuf};

use volley_store::Store;

use crate::common::{volley_cmd as volley, write_file as write};

fn temp_dir(tag: &str) -> crate::common::TestDir {
    crate::common::fresh_dir(&format!("volley-office-study-{tag}"))
}

const OFFICE: &str = r#"name = "office"
[[target]]
name = "builtin"
kind = "builtin"
dav = true
[[target]]
name = "radicale"
kind = "radicale"
[[workload]]
name = "office"
kind = "caldav"
users = [2, 3]
profiles = ["thunderbird:1", "davx5:1", "evolution:1", "apple:1"]
compress = 960
[steps]
duration = "4s"
warmup = "0s"
cooldown = "0s"
[slo]
p99 = "60s"
"#;

/// Runs the study `text` in a fresh directory named after `tag`; it must succeed.
/// Returns the directory (removed when dropped), the store's path and what it printed.
fn run_study(tag: &str, text: &str) -> (crate::common::TestDir, PathBuf, String) {
    let dir = temp_dir(tag);
    let f = write(&dir, "office.toml", text);
    let db = dir.join("db.sqlite");
    let out = volley()
        .args(["study", "run"])
        .arg(&f)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{err}");
    (dir, db, stdout)
}

/// `volley report --db DB --md --json`: the Markdown, and the JSON of `target`.
fn report_of(dir: &Path, db: &Path, target: &str) -> (String, serde_json::Value) {
    let (md, json) = (dir.join("r.md"), dir.join("r.json"));
    let out = volley()
        .args(["report", "--db"])
        .arg(db)
        .arg("--md")
        .arg(&md)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(md).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    let t = json["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["target"] == target)
        .unwrap_or_else(|| panic!("no {target} in the report"))
        .clone();
    (md, t)
}

#[test]
fn an_office_sweep_stores_each_day_and_says_how_many_users_each_server_carries() {
    let (dir, db, text) = run_study("sweep", OFFICE);
    for target in ["builtin", "radicale"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("{target} carries "))),
            "no answer line for {target}: {text}"
        );
    }
    let store = Store::open(&db).unwrap();
    let runs = store.list_runs().unwrap();
    assert_eq!(runs.len(), 2, "one run per target");
    let mut users_seen = Vec::new();
    for run in &runs {
        for step in store.steps(run.id).unwrap() {
            let office = &step.summary["office"];
            let users = step.parameters.extra["users"].as_u64().unwrap();
            users_seen.push(users);
            assert_eq!(office["users"].as_u64(), Some(users), "{office}");
            assert_eq!(office["violations_total"].as_u64(), Some(0), "{office}");
            assert!(office["requests"].as_u64().unwrap() > 0, "{office}");
            let verdict = step.verdict.as_ref().unwrap();
            assert_eq!(verdict["office"]["users"].as_u64(), Some(users));
            assert_eq!(verdict["office"]["compress"], 960.0, "{verdict}");
            assert!(
                verdict["office"]["poll_p99_ms"].as_f64().is_some(),
                "{verdict}"
            );
            // The step's request figures are the office's own requests, over the
            // window's own time (set-up, lead-in and audit sent none of them).
            assert_eq!(
                step.summary["requests"]["completed"].as_u64(),
                office["requests"].as_u64(),
                "{}",
                step.summary
            );
            let window_s = office["wall_s"].as_f64().unwrap();
            let stored_s = step.summary["duration_s"].as_f64().unwrap();
            assert!(
                (stored_s - window_s).abs() < 1e-3,
                "{stored_s} vs {window_s}"
            );
            // Its seconds were stored as they closed and taken into the step (issue
            // 26): each second of its load series has a histogram of every kind the
            // whole day has, and none is left behind as a live row.
            let hists = store.histograms(step.id).unwrap();
            let kinds = hists.iter().filter(|h| h.second.is_none()).count();
            let mut per_second = std::collections::BTreeMap::<u32, usize>::new();
            for h in hists.iter().filter_map(|h| h.second) {
                *per_second.entry(h).or_default() += 1;
            }
            let load: Vec<u32> = store
                .series(step.id)
                .unwrap()
                .iter()
                .filter(|p| p.source == volley_store::SeriesSource::Load)
                .map(|p| p.second)
                .collect();
            assert!(kinds > 0 && !load.is_empty(), "{}", step.summary);
            assert_eq!(per_second.keys().copied().collect::<Vec<_>>(), load);
            assert!(per_second.values().all(|&n| n == kinds), "{per_second:?}");
            assert!(store.live_seconds(run.id, step.index).unwrap().is_empty());
            // A warm day: its lead-in's cost beside the verdict, failures set apart.
            let lead = &verdict["office"]["lead_in"];
            assert!(lead["requests"].as_u64().unwrap() > 0, "{verdict}");
            assert_eq!(
                lead["failed_requests"],
                office["lead_in"]["failed_requests"]
            );
        }
    }
    users_seen.sort_unstable();
    assert_eq!(users_seen, [2, 2, 3, 3]);
    // With a 60 s SLO and no violation the built-in server carries every count tried:
    // no failure bounds it, so "at least"; the day is compressed 960x, and the answer
    // says what its 3 users stand for.
    const CARRIES: &str = "builtin carries at least the request rate of about 2,880 people, with the data of 3 (office time compressed 960x) (office; not bounded: 3 was the most tried)";
    assert!(
        text.contains(CARRIES),
        "builtin should carry 3 users under a 60 s SLO: {text}"
    );
    assert!(text.contains("users=3 x960"), "{text}");
    // The end table gives each point's lead-in (before the window) with its failures.
    let row = text
        .lines()
        .find(|l| l.starts_with("builtin") && l.contains("users=3 x960"))
        .unwrap_or_else(|| panic!("no builtin row for 3 users: {text}"));
    assert!(
        row.contains("; lead-in ") && row.contains(" failed (set apart)"),
        "{row}"
    );
    // The report says the same, in its office table and its JSON.
    let (md, builtin) = report_of(&dir, &db, "builtin");
    assert!(md.contains("## Office days"), "{md}");
    assert!(md.contains("Lead-in (before the window)"), "{md}");
    assert!(md.contains(CARRIES), "{md}");
    assert_eq!(
        builtin["office"][0]["users_carried"], 3,
        "{}",
        builtin["office"]
    );
    assert_eq!(builtin["office"][0]["compress"], 960.0);
    assert_eq!(builtin["office"][0]["bounded"], false);
    for s in builtin["steps"].as_array().unwrap() {
        assert_eq!(s["office"]["violations"], 0, "{}", s["office"]);
        assert_eq!(s["office"]["compress"], 960.0, "{}", s["office"]);
    }
}

/// A sweep with a users search after it: an ab point on a plain built-in server, then
/// the office's users searched on the built-in server with DAV accounts from 1 to at most 4 (a 60 s SLO carries every count, so the
/// search doubles to its maximum: 1, 2, 4).
const SEARCH: &str = r#"name = "office-search"
[[target]]
name = "builtin"
kind = "builtin"
dav = true
[[target]]
name = "plain"
kind = "builtin"
[fixture]
kind = "sizes"
[[workload]]
name = "ab"
paths = ["/700b.html"]
requests = 50
targets = ["plain"]
[[workload]]
name = "office"
kind = "caldav"
users = "search"
targets = ["builtin"]
profiles = ["thunderbird:1", "davx5:1"]
compress = 960
[search]
start_users = 1
max_users = 4
repeats = 1
[steps]
duration = "3s"
warmup = "0s"
cooldown = "0s"
[slo]
p99 = "60s"
"#;

#[test]
fn a_users_search_after_a_sweep_stores_its_days_and_its_answer_in_users() {
    let (dir, db, text) = run_study("search", SEARCH);
    assert!(
        text.contains("1 users search(es) after the sweep from 1 users"),
        "the plan names the search: {text}"
    );
    assert!(
        text.contains("builtin carries at least the request rate of about 3,840 people, with the data of 4 (office time compressed 960x) (office; searched, 95% CI [4, unbounded] users, 3 days, not bounded: the most the search tries)"),
        "{text}"
    );
    let store = Store::open(&db).unwrap();
    let runs = store.list_runs().unwrap();
    let run_of = |t: &str| runs.iter().find(|r| r.target == t).unwrap().id;
    let ab = store.steps(run_of("plain")).unwrap();
    // A step noise spoiled (generator-bound, busy machine) is measured again: one first
    // attempt, and every re-measure numbered.
    let first = |s: &volley_store::StepRow| s.parameters.extra["attempt"] == 0;
    assert_eq!(ab.iter().filter(|s| first(s)).count(), 1, "{ab:?}");
    assert!(ab.iter().skip(1).all(|s| !first(s)));
    assert_eq!(ab[0].parameters.extra["phase"], "sweep");
    assert_eq!(ab[0].summary["requests"]["failed"], 0, "{}", ab[0].summary);
    let run = run_of("builtin");
    let steps = store.steps(run).unwrap();
    let phases: Vec<(&str, Option<u64>)> = steps
        .iter()
        .map(|s| {
            (
                s.parameters.extra["phase"].as_str().unwrap(),
                s.parameters.extra.get("users").and_then(|u| u.as_u64()),
            )
        })
        .collect();
    assert_eq!(
        phases,
        [
            ("search", Some(1)),
            ("search", Some(2)),
            ("search", Some(4))
        ],
        "the search's days, doubling"
    );
    assert!(
        ab[0].started_unix_ms <= steps[0].started_unix_ms,
        "the sweep runs before the search"
    );
    // Each larger day keeps the calendars the smaller one left and sets up the rest.
    let kept: Vec<u64> = steps
        .iter()
        .map(|s| s.summary["office"]["set_up_kept"].as_u64().unwrap())
        .collect();
    assert_eq!(kept, [0, 1, 2], "calendars kept from the day before");
    for s in &steps {
        assert_eq!(s.parameters.rate_rps, None, "a users step offers no rate");
        assert_eq!(s.summary["office"]["violations_total"], 0, "{}", s.summary);
        assert_eq!(
            s.summary["office"]["users"], s.parameters.extra["users"],
            "the day played the users the search asked for"
        );
    }
    let caps = store.capacities(run).unwrap();
    assert_eq!(caps.len(), 1, "one stored search");
    let c = &caps[0].record;
    assert_eq!(c.cell["unit"], "users");
    assert_eq!(c.cell["workload"], "office");
    assert_eq!(c.capacity_rps, Some(4.0));
    assert_eq!(c.end, volley_store::SearchEnd::ReachedMaxRate);
    assert_eq!(c.steps, 3);
    // The report answers in users from the stored search, not as a rate capacity.
    let (md, t) = report_of(&dir, &db, "builtin");
    assert!(
        md.contains("builtin carries at least the request rate of about 3,840 people, with the data of 4 (office time compressed 960x) (office; searched, 95% CI [4, unbounded] users, 3 days, not bounded: the most the search tries)"),
        "{md}"
    );
    assert_eq!(t["office"][0]["users_carried"], 4, "{}", t["office"]);
    assert_eq!(t["office"][0]["search"]["end"], "reached_max_rate");
    assert_eq!(t["office"][0]["search"]["steps"], 3);
    assert_eq!(
        t["searches"].as_array().map(Vec::len),
        Some(0),
        "{}",
        t["searches"]
    );
}

#[test]
fn bad_office_keys_are_one_line_usage_errors_naming_the_key() {
    let dir = temp_dir("bad");
    let cases: [(&str, String, &str); 8] = [
        (
            "bad memory cap",
            OFFICE.replace("dav = true\n", "dav = true\nmemory_max = \"8X\"\n"),
            "memory_max must be a size",
        ),
        (
            "zero users",
            OFFICE.replace("users = [2, 3]", "users = [0]"),
            "users",
        ),
        (
            "unknown profile",
            OFFICE.replace("\"apple:1\"", "\"outlook:1\""),
            "profiles",
        ),
        (
            "paths on caldav",
            OFFICE.replace("kind = \"caldav\"", "kind = \"caldav\"\npaths = [\"/\"]"),
            "paths",
        ),
        (
            "no dav on the target",
            OFFICE.replace("dav = true\n", ""),
            "dav = true",
        ),
        (
            "dav on caddy",
            OFFICE.replace(
                "kind = \"builtin\"\ndav = true",
                "kind = \"caddy\"\ndav = true",
            ),
            "dav = true needs",
        ),
        (
            "no duration",
            OFFICE.replace("duration = \"4s\"\n", "requests = 10\n"),
            "steps.duration",
        ),
        (
            "unknown kind",
            OFFICE.replace("kind = \"caldav\"", "kind = \"carddav\""),
            "kind must be",
        ),
    ];
    for (what, study, needle) in cases {
        let f = write(&dir, "bad.toml", &study);
        let out = volley()
            .args(["study", "run"])
            .arg(&f)
            .arg("--dry-run")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {err}");
        assert!(err.contains(needle), "{what}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{what}: one line: {err}");
    }
}

/// The office study on Xandikos and nginx's WebDAV tree, two users.
fn office_xandikos_nginx() -> String {
    OFFICE
        .replace(
            "name = \"builtin\"\nkind = \"builtin\"",
            "name = \"nginx\"\nkind = \"nginx\"",
        )
        .replace(
            "name = \"radicale\"\nkind = \"radicale\"",
            "name = \"xandikos\"\nkind = \"xandikos\"",
        )
        .replace("users = [2, 3]", "users = [2]")
}

/// Xandikos (its own paths, X-Remote-User on every request) and nginx's plain WebDAV
/// (no principal, no REPORT): the study maps each target's accounts into the office,
/// both days pass every check that applies, and nginx's report says what it lacks.
#[test]
fn an_office_study_runs_on_xandikos_and_on_plain_webdav() {
    let study = office_xandikos_nginx();
    assert!(
        study.contains("kind = \"xandikos\"") && study.contains("kind = \"nginx\"\ndav = true")
    );
    let (dir, db, text) = run_study("paths", &study);
    let store = Store::open(&db).unwrap();
    let runs = store.list_runs().unwrap();
    assert_eq!(runs.len(), 2, "one run per target");
    let mut protocols = Vec::new();
    for run in &runs {
        let steps = store.steps(run.id).unwrap();
        assert_eq!(steps.len(), 1);
        let office = &steps[0].summary["office"];
        assert_eq!(office["violations_total"].as_u64(), Some(0), "{office}");
        assert!(office["requests"].as_u64().unwrap() > 0, "{office}");
        let lacks: Vec<&str> = office["lacks"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|l| l.as_str())
            .collect();
        match office["protocol"].as_str() {
            Some("caldav") => assert!(lacks.is_empty(), "xandikos: {office}"),
            Some("webdav") => assert!(lacks.contains(&"REPORT sync-collection"), "nginx: {office}"),
            p => panic!("protocol {p:?}: {office}"),
        }
        protocols.push(office["protocol"].as_str().unwrap().to_owned());
    }
    protocols.sort();
    assert_eq!(protocols, ["caldav", "webdav"]);
    for target in ["xandikos", "nginx"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("{target} carries "))),
            "no answer line for {target}: {text}"
        );
    }
    // The report's office table says what nginx lacks.
    let (md, _) = report_of(&dir, &db, "nginx");
    assert!(
        md.lines().any(|l| l.starts_with("| nginx ")
            && l.contains("lacks")
            && l.contains("REPORT sync-collection")),
        "{md}"
    );
}
