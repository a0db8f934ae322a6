//! Ctrl-C during `volley study run`: the targets the study started are stopped, the
//! finished steps stay in the store and the run is marked incomplete (exit 130); a
//! target that dies mid-study also leaves it incomplete, but exits 1.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use volley_store::{Status, Store};

use crate::common::output_of;
use crate::study_cli::{temp_dir, volley};

/// A study of one managed built-in target and eight 1 s closed-loop steps: long enough
/// to be stopped, or to lose its target, after the first.
const EIGHT_STEPS: &str = "name = \"int\"\n[[target]]\nname = \"builtin\"\nkind = \"builtin\"\n[[workload]]\nname = \"w\"\npaths = [\"/index.html\"]\n[load]\nmodel = \"closed\"\n[sweep]\nconcurrency = [1, 2, 3, 4, 5, 6, 7, 8]\n[steps]\nduration = \"1s\"\nwarmup = \"100ms\"\ncooldown = \"100ms\"\n";

/// `volley study run STUDY --db DB`, stdout dropped, stderr as given.
fn spawn_study(study: &Path, db: &Path, stderr: Stdio) -> Child {
    volley()
        .args(["study", "run"])
        .arg(study)
        .arg("--db")
        .arg(db)
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

/// Waits (30 s at most) until the study's first run has a stored step; the study must
/// still be running.
fn wait_for_a_stored_step(db: &Path, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let stored = Store::open(db).ok().is_some_and(|s| {
            s.list_runs()
                .ok()
                .and_then(|r| r.into_iter().next())
                .is_some_and(|run| s.steps(run.id).is_ok_and(|st| !st.is_empty()))
        });
        if stored {
            return;
        }
        assert!(Instant::now() < deadline, "no step stored in 30 s");
        assert!(child.try_wait().unwrap().is_none(), "study ended early");
    }
}

/// Sends `signal` to `pid` (a process this test started, or one its study started).
fn signal(name: &str, pid: u32) {
    let kill = Command::new("kill")
        .args([name, &pid.to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
}

/// The study's exit status, within `limit`.
fn wait_exit(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "study did not end within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn sigint_stops_the_targets_and_leaves_the_run_incomplete() {
    let dir = temp_dir("int");
    let study = dir.join("int.toml");
    std::fs::write(&study, EIGHT_STEPS).unwrap();
    let db = dir.join("v.db");
    let mut child = spawn_study(&study, &db, Stdio::null());
    let deadline = Instant::now() + Duration::from_secs(30);
    let addr: SocketAddr = loop {
        std::thread::sleep(Duration::from_millis(200));
        let found = Store::open(&db).ok().and_then(|s| {
            let run = s.list_runs().ok()?.into_iter().next()?;
            if s.steps(run.id).ok()?.is_empty() {
                return None;
            }
            let url = run.environment["instances"][0]["url"].as_str()?.to_string();
            let host = url
                .strip_prefix("http://")?
                .trim_end_matches('/')
                .to_string();
            host.parse().ok()
        });
        if let Some(a) = found {
            break a;
        }
        assert!(Instant::now() < deadline, "no step stored in 30 s");
        assert!(child.try_wait().unwrap().is_none(), "study ended early");
    };
    assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok());
    signal("-INT", child.id());
    let status = wait_exit(&mut child, Duration::from_secs(20));
    assert_eq!(status.code(), Some(130));
    // The built-in server the study started no longer listens.
    assert!(
        TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(),
        "target {addr} still answers after Ctrl-C"
    );
    let store = Store::open(&db).unwrap();
    let run = &store.list_runs().unwrap()[0];
    assert_eq!(run.status, Status::Incomplete);
    let steps = store.steps(run.id).unwrap().len();
    assert!((1..8).contains(&steps), "{steps} steps stored");
}

#[test]
fn sigint_mid_search_stores_the_search_as_interrupted_and_the_report_says_so() {
    use volley_faultserver::{Behaviour, FaultServer};
    let server = FaultServer::start(Behaviour::TokenBucket {
        rate_per_s: 400.0,
        burst: 10,
    })
    .unwrap();
    let dir = temp_dir("int-search");
    let study = dir.join("search.toml");
    // Many steps to go (3 runs per decision, 40 steps): interrupted after the first.
    // 3 s steps: the shortest rate step the rule can judge (shorter is refused).
    std::fs::write(
        &study,
        format!(
            "name = \"int-search\"\nmode = \"search\"\n[[target]]\nname = \"bucket\"\nkind = \"external\"\nurl = \"{}\"\n[[workload]]\nname = \"root\"\npaths = [\"/\"]\n[load]\nmodel = \"open\"\nconcurrency = 4\ntimeout = \"1s\"\n[steps]\nduration = \"3s\"\nwarmup = \"100ms\"\ncooldown = \"100ms\"\n[search]\nstart_rate = 100\nrepeats = 3\n",
            server.url("/")
        ),
    )
    .unwrap();
    let db = dir.join("v.db");
    let mut child = spawn_study(&study, &db, Stdio::null());
    wait_for_a_stored_step(&db, &mut child);
    signal("-INT", child.id());
    let status = wait_exit(&mut child, Duration::from_secs(20));
    assert_eq!(status.code(), Some(130));
    let store = Store::open(&db).unwrap();
    let run = &store.list_runs().unwrap()[0];
    assert_eq!(run.status, Status::Incomplete);
    let steps = store.steps(run.id).unwrap();
    let caps = store.capacities(run.id).unwrap();
    assert_eq!(caps.len(), 1, "the cut-short search keeps a row");
    let c = &caps[0].record;
    assert_eq!(c.end, volley_store::SearchEnd::Interrupted);
    assert_eq!((c.ci_lo_rps, c.ci_hi_rps), (None, None));
    assert_eq!(c.steps as usize, steps.len());
    let md = dir.join("r.md");
    let md = crate::common::markdown_report(&[&run.id.to_string()], &db, &md);
    assert!(
        md.contains("capacity search did not finish (interrupted, partial result stored)"),
        "{md}"
    );
}

/// Where in `steps` (stored in index order) the target died, by the stored verdict.
fn died_in(steps: &[volley_store::StepRow]) -> Vec<usize> {
    let died = |s: &&volley_store::StepRow| {
        s.verdict
            .as_ref()
            .is_some_and(|v| v["target_died"].is_string())
    };
    steps
        .iter()
        .filter(died)
        .map(|s| s.index as usize)
        .collect()
}

/// `volley report --db DB`: the Markdown report of the store's last run.
fn report_md(db: &Path) -> String {
    output_of(volley().args(["report", "--db"]).arg(db)).1
}

/// The processes descending from `root` (its children, theirs, ...), read from /proc.
fn descendants(root: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": comm may hold spaces, so split after its ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parent_of.push((pid, ppid));
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    out.remove(0);
    out
}

/// SIGKILLs a built-in server the study `child` started (one of them when it started
/// several): a descendant running `serve`.
fn kill_a_built_in_server(child: &Child) {
    let server = descendants(child.id())
        .into_iter()
        .find(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == b"serve"))
        })
        .expect("a built-in server of the study");
    signal("-KILL", server);
}

/// The study's exit status within `limit`, and what it wrote on its (piped) stderr.
fn exit_and_stderr(child: &mut Child, limit: Duration) -> (ExitStatus, String) {
    let status = wait_exit(child, limit);
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    (status, err)
}

#[test]
fn a_target_that_dies_mid_study_ends_it_with_exit_1_not_ctrl_c_s_130() {
    let dir = temp_dir("dead");
    let study = dir.join("dead.toml");
    std::fs::write(&study, EIGHT_STEPS).unwrap();
    let db = dir.join("v.db");
    let mut child = spawn_study(&study, &db, Stdio::piped());
    wait_for_a_stored_step(&db, &mut child);
    kill_a_built_in_server(&child);
    let (status, err) = exit_and_stderr(&mut child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("a target died"), "{err}");
    let store = Store::open(&db).unwrap();
    let run = &store.list_runs().unwrap()[0];
    assert_eq!(run.status, Status::Incomplete);
}

#[test]
fn a_target_that_dies_mid_search_ends_its_search_and_the_other_goes_on() {
    let dir = temp_dir("dead-search");
    let study = dir.join("search.toml");
    // Two built-in targets, a rate search each: 100, 200, 400 req/s (the maximum), one
    // 3 s step per rate (three whole seconds to judge), round-robin.
    std::fs::write(
        &study,
        "name = \"dead-search\"\nmode = \"search\"\n[[target]]\nname = \"a\"\nkind = \"builtin\"\n[[target]]\nname = \"b\"\nkind = \"builtin\"\n[[workload]]\nname = \"w\"\npaths = [\"/index.html\"]\n[load]\nconcurrency = 4\n[steps]\nduration = \"3s\"\nwarmup = \"100ms\"\ncooldown = \"100ms\"\n[slo]\np99 = \"1s\"\n[search]\nstart_rate = 100\nmax_rate = 400\nrepeats = 1\n",
    )
    .unwrap();
    let db = dir.join("v.db");
    let mut child = spawn_study(&study, &db, Stdio::piped());
    wait_for_a_stored_step(&db, &mut child);
    kill_a_built_in_server(&child);
    let (status, err) = exit_and_stderr(&mut child, Duration::from_secs(60));
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("died"), "{err}");
    // The survivor's search reached its end: 100, 200 and 400 req/s, all carried.
    let store = Store::open(&db).unwrap();
    let ends: Vec<volley_store::SearchEnd> = store
        .list_runs()
        .unwrap()
        .iter()
        .flat_map(|r| store.capacities(r.id).unwrap())
        .map(|c| c.record.end)
        .collect();
    assert!(
        ends.contains(&volley_store::SearchEnd::ReachedMaxRate),
        "the other search went on to its end: {ends:?}\n{err}"
    );
}

/// `restart = "next-step"`: the built-in server killed mid-step is started again for
/// the next step, the step it died in is stored with the death, every planned step
/// still runs (without the setting the rest are skipped: the test above), the study
/// ends complete, and the report's evidence names the step. (A closed-loop sweep: a
/// rate search on this busy machine may end early on a generator-bound step, which is
/// not what this tests; a search hears the death step as a failure through the same
/// verdict.)
#[test]
fn a_target_with_restart_next_step_comes_back_for_the_next_step() {
    let dir = temp_dir("restart");
    let study = dir.join("restart.toml");
    std::fs::write(
        &study,
        "name = \"restart\"\n[[target]]\nname = \"a\"\nkind = \"builtin\"\nrestart = \"next-step\"\n[[workload]]\nname = \"w\"\npaths = [\"/index.html\"]\n[load]\nmodel = \"closed\"\n[sweep]\nconcurrency = [1, 2, 3, 4]\n[steps]\nduration = \"2s\"\nwarmup = \"100ms\"\ncooldown = \"100ms\"\nretries = 0\n",
    )
    .unwrap();
    let db = dir.join("v.db");
    let mut child = spawn_study(&study, &db, Stdio::piped());
    wait_for_a_stored_step(&db, &mut child);
    // Inside the second step: it starts after a 100 ms rest and 100 ms of warm-up.
    std::thread::sleep(Duration::from_millis(900));
    kill_a_built_in_server(&child);
    let (status, err) = exit_and_stderr(&mut child, Duration::from_secs(60));
    assert!(err.contains("restarted for the next step"), "{err}");
    assert_eq!(status.code(), Some(0), "{err}");
    let store = Store::open(&db).unwrap();
    let run = &store.list_runs().unwrap()[0];
    assert_eq!(run.status, Status::Complete, "{err}");
    let steps = store.steps(run.id).unwrap();
    assert_eq!(steps.len(), 4, "every planned step ran: {err}");
    let died = died_in(&steps);
    assert_eq!(died, [1], "the second step saw the death\n{err}");
    drop(store);
    let md = report_md(&db);
    assert!(
        md.lines()
            .any(|l| l.starts_with("| a | 1 ") && l.contains("target died")),
        "{md}"
    );
}

/// `restart = "next-step"` in a users search (the office): the built-in DAV server
/// killed during the second day (4 users) is started again, the search hears the day
/// it died in as a failure and goes on to bisect (3 users) on the restarted server,
/// stores its answer, and the step that killed it is named in the store and the
/// report: a users search can go on past one crash and still say where the server
/// fell over.
#[test]
fn a_users_search_goes_on_past_a_crash_with_restart_next_step() {
    let dir = temp_dir("restart-search");
    let study = dir.join("search.toml");
    std::fs::write(
        &study,
        r#"name = "restart-search"
[[target]]
name = "b"
kind = "builtin"
dav = true
restart = "next-step"
[[workload]]
name = "office"
kind = "caldav"
users = "search"
profiles = ["thunderbird:1", "davx5:1"]
compress = 960
[search]
start_users = 2
max_users = 8
repeats = 1
[steps]
duration = "3s"
warmup = "0s"
cooldown = "0s"
retries = 0
[slo]
p99 = "60s"
"#,
    )
    .unwrap();
    let db = dir.join("v.db");
    let mut child = spawn_study(&study, &db, Stdio::piped());
    wait_for_a_stored_step(&db, &mut child);
    // Inside the second day (its set-up or its 3 s of load): either is a death the
    // step must carry.
    std::thread::sleep(Duration::from_millis(1_000));
    kill_a_built_in_server(&child);
    let (status, err) = exit_and_stderr(&mut child, Duration::from_secs(120));
    assert!(err.contains("restarted for the next step"), "{err}");
    assert_eq!(status.code(), Some(0), "{err}");
    let store = Store::open(&db).unwrap();
    let run = &store.list_runs().unwrap()[0];
    assert_eq!(run.status, Status::Complete, "{err}");
    let steps = store.steps(run.id).unwrap();
    let users: Vec<u64> = steps
        .iter()
        .map(|s| s.parameters.extra["users"].as_u64().unwrap())
        .collect();
    let died = died_in(&steps);
    assert_eq!(died, [1], "the second day saw the death: {users:?}\n{err}");
    assert_eq!(users[..2], [2, 4], "{users:?}");
    assert!(
        users.len() > 2 && users[2] == 3,
        "the search went on past the crash, bisecting: {users:?}\n{err}"
    );
    let caps = store.capacities(run.id).unwrap();
    assert_eq!(caps.len(), 1, "{err}");
    let c = &caps[0].record;
    assert_ne!(c.end, volley_store::SearchEnd::Interrupted, "{c:?}");
    assert_eq!(c.steps as usize, steps.len(), "{c:?}");
    assert!(
        c.capacity_rps.is_some_and(|u| u < 4.0),
        "the answer stays below the count that killed it: {c:?}"
    );
    drop(store);
    let md = report_md(&db);
    assert!(
        md.lines()
            .any(|l| l.starts_with("| b | 1 ") && l.contains("target died")),
        "{md}"
    );
}
