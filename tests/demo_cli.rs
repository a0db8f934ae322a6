//! `volley demo` as a new user runs it: it names a directory holding its store and an
//! HTML report, and the `volley report` / `volley history` commands it prints work
//! exactly as printed (run here through `sh -c`, the binary standing in for `volley`).
//! The demo runs at `--scale 0.1` so the test takes seconds, not a minute.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn volley() -> Command {
    Command::new(env!("CARGO_BIN_EXE_volley"))
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Runs a printed `volley ...` command line through the shell, from another directory
/// than the demo's, with the built binary first on PATH.
fn run_printed(line: &str, cwd: &Path) -> Output {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_volley"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("sh")
        .arg("-c")
        .arg(line)
        .current_dir(cwd)
        .env("PATH", path)
        .output()
        .unwrap()
}

/// The command after `label:` on the demo's output, e.g. `history: volley history ...`.
fn printed(stdout: &str, label: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.trim_start().strip_prefix(label))
        .unwrap_or_else(|| panic!("no '{label}' line in:\n{stdout}"))
        .trim()
        .to_string()
}

#[test]
fn the_demo_names_its_report_and_its_commands_work_as_printed() {
    let base = crate::common::fresh_dir("volley-demo-test");
    // A space in the path: the printed commands must quote it.
    let out_dir = base.join("demo out");
    let elsewhere = base.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let o = volley()
        .args(["demo", "--scale", "0.1", "--out"])
        .arg(&out_dir)
        .current_dir(&elsewhere)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    // Whatever the verdicts (a busy machine changes them), nothing printed is a
    // `snake_case=value` pair (tests/tables_cli.rs makes steps fail on purpose).
    let pairs = snake_case_pairs(&stdout) + &snake_case_pairs(&stderr);
    assert!(pairs.is_empty(), "field=value pairs printed: {pairs}");
    let html = out_dir.join("report.html");
    assert!(out_dir.join("volley.db").is_file(), "{stdout}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.contains("quick"));
    assert!(
        stdout.contains(&format!("report:  '{}'", html.display())),
        "{stdout}"
    );

    // The protocols part: its own study and report, HTTP/1.1, HTTP/2 and HTTP/3 over
    // HTTPS, each step's wire stored with it and shown by `volley report`.
    let protocols = std::fs::read_to_string(out_dir.join("protocols.html")).unwrap();
    assert!(protocols.contains("protocols"), "no protocols report");
    assert!(stdout.contains("protocols:"), "{stdout}");
    protocols_steps_keep_their_wire(&out_dir.join("volley.db"));

    let rebuild = printed(&stdout, "rebuild:");
    assert!(rebuild.starts_with("volley report study:"), "{rebuild}");
    std::fs::remove_file(&html).unwrap();
    let r = run_printed(&rebuild, &elsewhere);
    assert!(r.status.success(), "{rebuild}: {:?}", text(&r));
    assert!(std::fs::read_to_string(&html).unwrap().contains("quick"));

    let history = printed(&stdout, "history:");
    let h = run_printed(&history, &elsewhere);
    let (hout, herr) = text(&h);
    assert!(h.status.success(), "{history}: {herr}");
    assert!(hout.contains("quick"), "{hout}");
}

/// The protocols study's steps, read back from the store: one per protocol, each with
/// its wire report (the h3 step's QUIC handshakes by kind add up to all of them), and
/// the Markdown report shows the h3 handshakes.
fn protocols_steps_keep_their_wire(db: &Path) {
    let store = volley_store::Store::open_read(db).unwrap();
    let study = store
        .list_studies()
        .unwrap()
        .into_iter()
        .find(|s| s.name == "protocols")
        .expect("the protocols study is stored");
    let runs = store.runs_of_study(study.id).unwrap();
    let steps: Vec<_> = runs
        .iter()
        .flat_map(|r| store.steps(r.id).unwrap())
        .collect();
    let mut protocols: Vec<String> = steps
        .iter()
        .map(|s| {
            s.summary["wire"]["protocol"]
                .as_str()
                .unwrap_or("none")
                .to_string()
        })
        .collect();
    protocols.sort();
    protocols.dedup();
    assert_eq!(protocols, ["h2", "h3", "http/1.1"], "stored wires");
    for s in &steps {
        let wire = &s.summary["wire"];
        assert_eq!(wire["tls"]["resumption"], true, "{wire}");
        match wire["protocol"].as_str() {
            Some("h3") => {
                let h3 = &wire["h3"];
                let all = h3["handshakes"].as_u64().unwrap();
                let by_kind: u64 = ["handshakes_full", "handshakes_resumed", "handshakes_0rtt"]
                    .iter()
                    .map(|k| h3[k]["count"].as_u64().unwrap())
                    .sum();
                assert!(all >= 1 && by_kind == all, "{h3}");
                assert!(
                    h3["handshakes_full"]["mean_ms"].as_f64().unwrap() > 0.0,
                    "{h3}"
                );
            }
            Some("h2") => assert!(wire["h2"].is_object(), "{wire}"),
            _ => assert!(wire["h2"].is_null() && wire.get("h3").is_none(), "{wire}"),
        }
    }
    let md = db.with_file_name("protocols.md");
    let o = volley()
        .args(["report", "study:protocols", "--db"])
        .arg(db)
        .arg("--md")
        .arg(&md)
        .output()
        .unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
    let md = std::fs::read_to_string(&md).unwrap();
    let wire = md
        .split("Wire: handshakes and protocol events")
        .nth(1)
        .unwrap_or_else(|| panic!("no wire table in:\n{md}"));
    let h3_row = wire
        .lines()
        .find(|l| l.contains("| h3 |"))
        .unwrap_or_else(|| panic!("no h3 row in:\n{wire}"));
    assert!(
        h3_row.contains(" full") && h3_row.contains("resumed"),
        "{h3_row}"
    );
}

/// Every `word_with_underscore=` in `text`, space-separated (empty when none).
fn snake_case_pairs(text: &str) -> String {
    let mut found = Vec::new();
    for (i, _) in text.match_indices('=') {
        let word: String = text[..i]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if word.contains('_') {
            found.push(word.chars().rev().collect::<String>());
        }
    }
    found.join(" ")
}

#[test]
fn the_pair_finder_finds_pairs() {
    assert_eq!(
        snake_case_pairs("send_rate_short required_rps=1584 c=1 t_stat=null"),
        "required_rps t_stat"
    );
    assert_eq!(snake_case_pairs("c=1 ka=on rate=500"), "");
}
