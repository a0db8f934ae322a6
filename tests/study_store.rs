//! One store, several writers (issue 26): two studies and a saved bench on one
//! `volley.db` at once, and a disk that fills up mid-study.

use std::process::{Command, Stdio};

use volley_faultserver::{Behaviour, FaultServer};
use volley_store::{Status, Store};

use crate::study_cli::{closed_study, temp_dir, volley, write};

/// Two studies and a `bench --save` writing one store at once: every step of each is
/// stored (none lost to "database is locked") and `history` lists all three runs.
#[test]
fn two_studies_and_a_saved_bench_share_one_store() {
    let server = FaultServer::start(Behaviour::Ok {
        body_len: 700,
        keep_alive: true,
    })
    .unwrap();
    let dir = temp_dir("writers");
    let db = dir.join("v.db");
    let url = server.url("/");
    let spawn = |args: Vec<String>| {
        volley()
            .args(&args)
            .arg("--db")
            .arg(&db)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut children = Vec::new();
    for name in ["one", "two"] {
        let f = write(
            &dir,
            &format!("{name}.toml"),
            &closed_study(name, std::slice::from_ref(&url), 4, 1),
        );
        children.push(spawn(vec![
            "study".into(),
            "run".into(),
            f.display().to_string(),
        ]));
    }
    let bench = [
        "bench",
        &url,
        "-c",
        "2",
        "-d",
        "1s",
        "--repeat",
        "4",
        "--cooldown",
        "0s",
    ];
    let mut args: Vec<String> = bench.iter().map(|s| s.to_string()).collect();
    args.extend(["-q", "--save", "--label", "b"].map(String::from));
    children.push(spawn(args));
    for child in children {
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(!err.contains("locked"), "{err}");
    }
    let store = Store::open(&db).unwrap();
    let runs = store.list_runs().unwrap();
    assert_eq!(runs.len(), 3, "{runs:?}");
    for r in &runs {
        assert_eq!(r.status, Status::Complete, "{}", r.target);
        assert_eq!(store.steps(r.id).unwrap().len(), 4, "{}", r.target);
    }
    let hist = volley()
        .arg("history")
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let h = String::from_utf8_lossy(&hist.stdout);
    assert!(
        h.contains("one (#") && h.contains("two (#") && h.contains("bench/b"),
        "{h}"
    );
}

/// The disk filling up mid-study (a small tmpfs in a mount namespace of its own, so
/// the host's mounts never change): the study stops with one line, and the steps
/// stored before stay readable in a sound file (`PRAGMA integrity_check`), on the
/// full disk itself too.
///
/// Reading needs no free space in either state a full disk leaves: the WAL the study
/// could not checkpoint (`history` on the disk it filled: its open used to write, and
/// failed whenever the sweep's frame did not fit), and a store closed cleanly on a disk
/// something else filled (no `-shm` file, which SQLite must create to read a WAL file).
#[test]
fn a_full_disk_stops_the_study_and_keeps_the_stored_steps() {
    let unshare_ok = Command::new("unshare")
        .args(["--mount", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !unshare_ok {
        eprintln!("skipping: needs root to mount a small tmpfs in a mount namespace");
        return;
    }
    let server = FaultServer::start(Behaviour::Ok {
        body_len: 700,
        keep_alive: true,
    })
    .unwrap();
    let dir = temp_dir("full");
    let concs: Vec<String> = (1..=60).map(|c| c.to_string()).collect();
    let study = format!(
        "name = \"full\"\n[[target]]\nname = \"t0\"\nkind = \"external\"\nurl = \"{}\"\n[[workload]]\nname = \"w\"\npaths = [\"/\"]\n[load]\nmodel = \"closed\"\n[sweep]\nconcurrency = [{}]\n[steps]\nduration = \"300ms\"\nwarmup = \"0s\"\ncooldown = \"0s\"\nrepeats = 1\nretries = 0\n",
        server.url("/"),
        concs.join(", ")
    );
    let f = write(&dir, "full.toml", &study);
    let mnt = dir.join("mnt");
    let kept = dir.join("kept");
    std::fs::create_dir_all(&mnt).unwrap();
    std::fs::create_dir_all(dir.join("mnt2")).unwrap();
    std::fs::create_dir_all(&kept).unwrap();
    // 600 KB hold a few dozen steps of this study, never all 60. After the study: a
    // reader on the full disk, then a copy out (database and WAL) to check here.
    let script = format!(
        "mount -t tmpfs -o size=600k tmpfs '{m}' || exit 99
         '{v}' study run '{f}' --db '{m}/v.db' >/dev/null 2>'{k}/study.err'; echo $? >'{k}/study.rc'
         '{v}' history --db '{m}/v.db' >'{k}/history.out' 2>&1; echo $? >'{k}/history.rc'
         cp '{m}'/v.db* '{k}/'
         mkdir '{k}/clean' && cp '{m}'/v.db* '{k}/clean/' || exit 98
         '{v}' history --db '{k}/clean/v.db' >/dev/null 2>&1
         ls '{k}/clean' >'{k}/clean.ls'
         mount -t tmpfs -o size=2m tmpfs '{m}2' || exit 97
         cp '{k}/clean/v.db' '{m}2/' || exit 96
         dd if=/dev/zero of='{m}2/fill' bs=4k 2>/dev/null
         '{v}' history --db '{m}2/v.db' >'{k}/history2.out' 2>&1; echo $? >'{k}/history2.rc'
         '{v}' report --db '{m}2/v.db' --md '{k}/report.md' >'{k}/report.out' 2>&1; echo $? >'{k}/report.rc'",
        m = mnt.display(),
        v = env!("CARGO_BIN_EXE_volley"),
        f = f.display(),
        k = kept.display()
    );
    let st = Command::new("timeout")
        .args([
            "120",
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
        ])
        .arg(&script)
        .status()
        .unwrap();
    assert!(st.success(), "{st:?}");
    let read = |name: &str| std::fs::read_to_string(kept.join(name)).unwrap();
    let err = read("study.err");
    let last = err.trim().lines().last().unwrap_or_default();
    assert_ne!(read("study.rc").trim(), "0", "{err}");
    assert!(last.contains("disk is full"), "{err}");
    assert!(!last.contains("Error code"), "one plain line: {last}");
    assert_eq!(read("history.rc").trim(), "0", "{}", read("history.out"));
    assert!(read("history.out").contains("full (#1)/t0"));
    assert_eq!(
        read("clean.ls").trim(),
        "v.db",
        "the roomy reader's close left no WAL"
    );
    assert_eq!(read("history2.rc").trim(), "0", "{}", read("history2.out"));
    assert!(read("history2.out").contains("full (#1)/t0"));
    assert_eq!(read("report.rc").trim(), "0", "{}", read("report.out"));
    assert!(!read("report.md").is_empty());
    let store = Store::open(kept.join("v.db")).unwrap();
    let run = &store.list_runs().unwrap()[0];
    let steps = store.steps(run.id).unwrap();
    assert!(
        !steps.is_empty() && steps.len() < 60,
        "{} steps stored",
        steps.len()
    );
    for s in &steps {
        assert!(!store.histograms(s.id).unwrap().is_empty());
    }
    drop(store);
    let check = Command::new("sqlite3")
        .arg(kept.join("v.db"))
        .arg("PRAGMA integrity_check")
        .output();
    if let Ok(out) = check {
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
    }
}
