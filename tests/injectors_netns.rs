//! Injectors in network namespaces on shaped links: labs that leave nothing behind, two
//! labs at once on their own addresses, delayed links, and link-bound answers. Moved out
//! of `injectors.rs` (its helpers are shared from there).

use crate::injectors::*;

use std::process::Command;

use volley_store::Store;

/// The lab namespaces of volley process `pid`.
fn lab_namespaces(pid: u32) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let prefix = format!("vl{pid}-");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&prefix))
        .map(str::to_string)
        .collect()
}

const NETNS_STUDY: &str = r#"
name = "inj-netns"
[[target]]
name = "builtin"
kind = "builtin"
[fixture]
kind = "uniserve"
[[workload]]
name = "w"
paths = ["/index1.html", "/index2.html"]
order = "random"
[load]
model = "open"
rate = 50
concurrency = 2
[injectors]
count = 3
share = "each"
placement = "netns"
links = [{ injectors = 2, rate = "100mbit" }, { injectors = 1, rate = "10mbit" }]
[steps]
duration = "DURATION"
warmup = "0s"
cooldown = "0s"
"#;

#[test]
fn injectors_in_namespaces_on_shaped_links_are_measured_and_leave_nothing() {
    let dir = temp_dir("netns");
    let file = study(dir.path(), &NETNS_STUDY.replace("DURATION", "3s"));
    let db = dir.path().join("v.db");
    let child = study_command(&file, &db)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("link of inj3: 10.0 Mbit/s set"), "{err}");
    let s = &step_summaries(&db)[0];
    let links = s["links"].as_array().unwrap();
    assert_eq!(links.len(), 3);
    let slow = links[2]["measured"]["throughput_bit"].as_f64().unwrap();
    assert!(
        (0.9..=1.1).contains(&(slow / 10e6)),
        "10 Mbit link measured {slow}"
    );
    assert_eq!(links[2]["rate_bit"], 10_000_000);
    let inj = s["injectors"].as_array().unwrap();
    let sum: u64 = inj.iter().map(|i| completed(&i["summary"])).sum();
    assert_eq!(completed(s), sum);
    assert!(
        sum >= 3 * 140,
        "each injector sent its 3 s at 50 req/s: {sum}"
    );
    assert!(lab_namespaces(pid).is_empty(), "{:?}", lab_namespaces(pid));
}

#[test]
fn two_netns_studies_at_once_take_different_lab_addresses() {
    // Each lab links volley's own namespace to its bridge; with the same addresses the
    // host would have two routes to one target address and one study would load (or
    // fail to reach) the other's target.
    let body = NETNS_STUDY
        .replace("DURATION", "3s")
        .replace("count = 3", "count = 1")
        .replace(
            r#"links = [{ injectors = 2, rate = "100mbit" }, { injectors = 1, rate = "10mbit" }]"#,
            "links = [{ injectors = 1 }]",
        );
    let dirs = [temp_dir("two-labs-a"), temp_dir("two-labs-b")];
    let children: Vec<_> = dirs
        .iter()
        .map(|d| {
            study_command(&study(d.path(), &body), &d.path().join("v.db"))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let pids: Vec<u32> = children.iter().map(|c| c.id()).collect();
    let mut namespaces = Vec::new();
    for (child, d) in children.into_iter().zip(&dirs) {
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let s = &step_summaries(&d.path().join("v.db"))[0];
        // The slots are what this test checks; how many of the 150 arrivals finished
        // depends on the machine (three studies at once share its two cores).
        assert!(completed(s) > 0, "3 s at 50 req/s: {}", completed(s));
        namespaces.push(s["links"][0]["namespace"].as_str().unwrap().to_string());
    }
    // `vl<pid>-<slot>i0`: the slots (and so the /24s) differ.
    let slot = |ns: &str, pid: u32| {
        ns.strip_prefix(&format!("vl{pid}-"))
            .and_then(|r| r.strip_suffix("i0"))
            .unwrap()
            .to_string()
    };
    assert_ne!(
        slot(&namespaces[0], pids[0]),
        slot(&namespaces[1], pids[1]),
        "{namespaces:?}"
    );
    for pid in pids {
        assert!(lab_namespaces(pid).is_empty(), "{:?}", lab_namespaces(pid));
    }
}

#[test]
fn a_sigkilled_netns_study_is_swept_by_the_next_volley() {
    let dir = temp_dir("netns-kill");
    let file = study(dir.path(), &NETNS_STUDY.replace("DURATION", "30s"));
    let mut child = study_command(&file, &dir.path().join("v.db"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut agents = Vec::new();
    wait_until(300, || {
        agents = children_with(pid, "agent --bus");
        agents.len() == 3
    });
    assert_eq!(agents.len(), 3, "three agents in the lab");
    assert_eq!(
        lab_namespaces(pid).len(),
        5,
        "bridge, target, three injectors"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    // The next volley start removes the dead one's lab (the file need not even exist).
    let out = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["study", "run", "/nonexistent/study.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(lab_namespaces(pid).is_empty(), "{:?}", lab_namespaces(pid));
    let mut left = agents.clone();
    wait_until(30, || {
        left.retain(|&p| alive(p));
        left.is_empty()
    });
    assert!(left.is_empty(), "agents still running: {left:?}");
}

/// Processes whose command line contains `needle` (any parent).
fn processes_with(needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline)
            .replace('\0', " ")
            .contains(needle)
            && alive(pid)
        {
            out.push(pid);
        }
    }
    out
}

#[test]
fn a_delayed_link_adds_its_round_trip_to_every_request_of_that_injector_only() {
    let dir = temp_dir("delay");
    let file = study(
        dir.path(),
        r#"
name = "inj-delay"
[[target]]
name = "builtin"
kind = "builtin"
[fixture]
kind = "uniserve"
[[workload]]
name = "w"
paths = ["/index1.html"]
[load]
model = "closed"
concurrency = 1
keepalive = true
[injectors]
count = 2
share = "each"
placement = "netns"
links = [{ injectors = 1 }, { injectors = 1, delay = "50ms" }]
[steps]
duration = "3s"
warmup = "0s"
cooldown = "0s"
"#,
    );
    let db = dir.path().join("v.db");
    let out = run_study(&file, &db);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("with 50 ms added"), "{err}");
    let s = &step_summaries(&db)[0];
    assert_eq!(s["links"][1]["delay_ms"], 50);
    let p50 = |i: usize| {
        s["injectors"][i]["summary"]["latency"]["service_time"]["p50_ms"]
            .as_f64()
            .unwrap()
    };
    assert!(p50(0) < 10.0, "undelayed p50 {}", p50(0));
    assert!(
        (50.0..80.0).contains(&p50(1)),
        "delayed p50 {} (50 ms added)",
        p50(1)
    );
    assert!(
        processes_with("toxiproxy-server -host 10.213.").is_empty(),
        "the delaying proxy outlived the study"
    );
}

/// Two servers behind the same shaped link: each step moves what the link carries, so
/// the figures are the link's. Every step is labelled link-bound and the answer names
/// no winner, in the end table and in the report alike.
#[test]
fn two_targets_behind_the_same_shaped_link_are_link_bound_with_no_winner() {
    link_bound_with_no_winner("inj-link-bound", r#"rate = "2mbit""#);
}

/// Two servers behind the same delayed link (no rate set): each request waits out the
/// link's 40 ms, which dwarfs what either server takes, so the per-request rule labels
/// every step link-bound (delay plus the server's unshaped time) and nothing is ranked.
#[test]
fn two_targets_behind_the_same_delayed_link_are_link_bound_with_no_winner() {
    link_bound_with_no_winner("inj-link-delayed", r#"delay = "40ms""#);
}

/// Runs study `name`: two built-in targets, one netns injector on a link shaped by
/// `link` (its settings, e.g. `rate = "2mbit"`), two repeats; asserts every step is
/// link-bound with the target's unshaped time stored, and that the end's answer and the
/// report's headline name no winner.
fn link_bound_with_no_winner(name: &str, link: &str) {
    let dir = temp_dir(name);
    let file = study(
        dir.path(),
        &r#"
name = "NAME"
[[target]]
name = "builtin"
kind = "builtin"
[[target]]
name = "builtin-too"
kind = "builtin"
[fixture]
kind = "sizes"
[[workload]]
name = "w"
paths = ["/12000b.html"]
[load]
model = "closed"
concurrency = 8
keepalive = true
[injectors]
count = 1
placement = "netns"
links = [{ injectors = 1, LINK }]
[steps]
duration = "3s"
warmup = "1s"
cooldown = "0s"
repeats = 2
retries = 0
"#
        .replace("NAME", name)
        .replace("LINK", link),
    );
    let db = dir.path().join("v.db");
    let out = run_study(&file, &db);
    let (stdout, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{err}");
    let store = Store::open(&db).unwrap();
    let runs = store.list_runs().unwrap();
    assert_eq!(runs.len(), 2, "two targets, two runs");
    for r in &runs {
        for s in store.steps(r.id).unwrap() {
            assert_eq!(
                s.label.as_deref(),
                Some("link-bound"),
                "{} step {}: {} (link {}, seconds' bytes {:?}, wire {} in {} s)",
                r.target,
                s.index,
                s.summary["notes"],
                s.summary["links"],
                s.summary["seconds"].as_array().map(|a| a
                    .iter()
                    .map(|x| x["wire_bytes"].clone())
                    .collect::<Vec<_>>()),
                s.summary["bytes"]["wire_total"],
                s.summary["duration_s"],
            );
            // The server's own time per request, measured outside the link before the
            // step for the link rule, is stored with it.
            let unshaped = &s.summary["unshaped"];
            let per = unshaped["per_request_ms"].as_f64().unwrap_or(0.0);
            assert!(
                per > 0.0 && per.is_finite(),
                "{} step {}: {unshaped}",
                r.target,
                s.index
            );
            assert!(unshaped["requests"].as_u64().unwrap_or(0) > 0, "{unshaped}");
        }
    }
    let answer = stdout
        .lines()
        .find_map(|l| l.strip_prefix("answer: "))
        .unwrap_or_else(|| panic!("no answer line: {stdout}"));
    assert!(
        answer.starts_with("No answer: every step was link-bound"),
        "{answer}"
    );
    let md = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["report", &format!("study:{name}"), "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(md.contains(&format!("**{answer}**")), "{md}");
}
