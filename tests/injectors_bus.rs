//! The bus and the agents' faults through the real `volley agent` binary: a coordinator
//! (the library, as `volley study run` calls it) with `volley agent` processes loading
//! a `volley serve` the test starts, over a `nats-server` the test starts, kills and
//! freezes nothing else. Traffic stays on loopback; every wait is bounded.
//!
//! - The bus gone: the server's access log shows no request later than 2 s after the
//!   bus went; every agent exits 1 with one line; the coordinator ends with `BusGone`
//!   and the seconds it had.
//! - The same through `volley study run` on that bus (`bus = "existing"`): exit 1 with
//!   one line, and the seconds that reached the coordinator are in the store.
//! - An agent frozen (SIGSTOP) past three heartbeats is lost, the run degraded from
//!   that second; when it wakes it is told it is out of the run and exits 1 with one
//!   line, and nothing it sends afterwards enters the merge.
//! - Trust: `volley agent` without credentials, with a wrong password, against a bus
//!   without TLS or with an expired certificate ends with one line each (exit 2 for the
//!   missing credentials, 1 for the rest); one told to load an address outside its
//!   `--allow-target` refuses with one line, the run says so, and the server is never
//!   loaded.

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::Served;
use volley_agents::auth::CREDENTIALS_ENV;
use volley_agents::coordinator::{self, CoordinatorConfig, Event, RunResult};
use volley_agents::load::LoadSpec;
use volley_agents::merge::Slot;
use volley_agents::msg::Ending;
use volley_agents::server::PrivateNats;
use volley_agents::share::Whole;
use volley_agents::AgentsError;
use volley_store::Store;

/// A private directory with one small page, removed on drop.
struct Site(crate::common::TestDir);

impl Site {
    fn new(tag: &str) -> Site {
        let d = crate::common::fresh_dir(&format!("volley-bus-{tag}"));
        std::fs::create_dir_all(d.join("www")).unwrap();
        std::fs::write(d.join("www/a.html"), "<p>volley</p>\n".repeat(20)).unwrap();
        Site(d)
    }

    fn root(&self) -> std::path::PathBuf {
        self.0.join("www")
    }

    fn log(&self) -> std::path::PathBuf {
        self.0.join("access.log")
    }
}

/// A secured bus on loopback with users for the agents these tests name.
fn secured_bus() -> PrivateNats {
    let names: Vec<String> = ["a", "b", "victim", "inj1", "inj2"]
        .iter()
        .map(|n| n.to_string())
        .collect();
    PrivateNats::start_secured("127.0.0.1:0".parse().unwrap(), &names)
        .expect("nats-server (scripts/install-deps.sh)")
}

/// A `volley agent` process this test started, killed and reaped on drop.
struct Agent(Option<Child>);

impl Agent {
    /// Joins `nats` as `name` with its credentials in its environment.
    fn spawn(nats: &PrivateNats, name: &str) -> Agent {
        Agent::spawn_with(
            &nats.url(),
            name,
            nats.keys().unwrap().agent(name),
            &["--quiet"],
        )
    }

    /// Joins the bus at `url` as `name` with `creds` (none: none in its environment)
    /// and more flags.
    fn spawn_with(
        url: &str,
        name: &str,
        creds: Option<&volley_agents::auth::BusCredentials>,
        more: &[&str],
    ) -> Agent {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_volley"));
        cmd.args(["agent", "--bus", url, "--name", name, "--wait", "60s"])
            .args(more)
            .env_remove(CREDENTIALS_ENV)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(c) = creds {
            cmd.env(CREDENTIALS_ENV, c.to_json());
        }
        Agent(Some(cmd.spawn().expect("spawn volley agent")))
    }

    fn pid(&self) -> String {
        self.0.as_ref().expect("running").id().to_string()
    }

    /// Its exit status and output, waiting at most `bound`.
    fn finish(mut self, bound: Duration) -> Output {
        exit_within(self.0.take().expect("running"), bound, "volley agent")
    }
}

/// A child's exit status and output, waiting at most `bound` (killed past it).
fn exit_within(mut child: Child, bound: Duration, what: &str) -> Output {
    let until = Instant::now() + bound;
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} still running after {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Signals a process this test started (`kill -SIG PID`).
fn signal(sig: &str, pid: &str) {
    let ok = Command::new("kill")
        .args([sig, pid])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid}");
}

/// A run of two agents at 200 requests/s in all for `secs` against `addr`.
fn run_cfg(nats: &PrivateNats, run: &str, addr: &str, secs: u64) -> CoordinatorConfig {
    let url = &nats.url();
    let whole = Whole {
        requests: None,
        rate_rps: Some(200.0),
        connections: 2,
        duration_ms: Some(secs * 1_000),
    };
    let mut cfg = CoordinatorConfig::new(url, run, whole, 2);
    cfg.auth = nats.keys().map(|k| k.coordinator.clone());
    cfg.ready_bound = Duration::from_secs(20);
    cfg.max_offset = Duration::from_secs(1);
    cfg.start_lead = Duration::from_millis(1_500);
    cfg.run_bound = Duration::from_secs(60);
    cfg.load = Some(LoadSpec {
        addr: addr.to_string(),
        method: "GET".into(),
        paths: vec!["/a.html".into()],
        headers: Vec::new(),
        order: "same".into(),
        block: 1,
        weights: Vec::new(),
        seed: 1,
        keep_alive: true,
        threads: 1,
        arrival: "constant".into(),
        timeout_ms: 2_000,
        warmup_ms: 0,
    });
    cfg
}

type Coord = JoinHandle<Result<RunResult, AgentsError>>;

fn spawn_coordinator(cfg: CoordinatorConfig) -> (Coord, Receiver<Event>) {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        coordinator::coordinate(&cfg, &mut |e| {
            let _ = tx.send(e);
        })
    });
    (h, rx)
}

/// Waits (at most 30 s) until `n` seconds have been merged live.
fn wait_merged(events: &Receiver<Event>, n: usize) {
    let until = Instant::now() + Duration::from_secs(30);
    let mut seen = 0;
    while seen < n {
        assert!(
            Instant::now() < until,
            "{seen} of {n} seconds merged in 30 s"
        );
        if let Ok(Event::Merged(_)) = events.recv_timeout(Duration::from_millis(100)) {
            seen += 1;
        }
    }
}

fn join<T>(h: JoinHandle<T>, bound: Duration) -> T {
    let until = Instant::now() + bound;
    while !h.is_finished() {
        assert!(Instant::now() < until, "still running after {bound:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    h.join().expect("thread panicked")
}

/// Seconds since the epoch of an access-log line's `[10/Oct/2000:13:55:36.123456 +0000]`.
fn logged_at(line: &str) -> f64 {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let stamp = line
        .split_once('[')
        .and_then(|(_, r)| r.split_once(' '))
        .map(|(s, _)| s)
        .unwrap_or_else(|| panic!("no time in {line:?}"));
    let f: Vec<&str> = stamp.split(['/', ':', '.']).collect();
    let num = |i: usize| -> u32 { f[i].parse().unwrap_or_else(|_| panic!("{stamp}")) };
    let month = MONTHS.iter().position(|m| *m == f[1]).expect("month") as u8 + 1;
    let date = time::Date::from_calendar_date(
        num(2) as i32,
        time::Month::try_from(month).unwrap(),
        num(0) as u8,
    )
    .unwrap();
    let t = time::Time::from_hms_micro(num(3) as u8, num(4) as u8, num(5) as u8, num(6)).unwrap();
    let at = time::PrimitiveDateTime::new(date, t).assume_utc();
    at.unix_timestamp() as f64 + f64::from(at.microsecond()) / 1e6
}

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn one_line(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    err
}

fn log_times(log: &Path) -> Vec<f64> {
    std::fs::read_to_string(log)
        .expect("access log")
        .lines()
        .map(logged_at)
        .collect()
}

#[test]
fn the_bus_gone_stops_every_agents_load_within_2_s_and_ends_the_run_with_bus_gone() {
    let site = Site::new("gone");
    let mut server = Served::start(
        &site.root(),
        &["--access-log", site.log().to_str().unwrap()],
    );
    let mut nats = secured_bus();
    let agents: Vec<Agent> = ["a", "b"].iter().map(|n| Agent::spawn(&nats, n)).collect();
    let mut cfg = run_cfg(&nats, "gone", &server.addr, 30);
    cfg.bus_gone_after = Duration::from_secs(3);
    let (coord, events) = spawn_coordinator(cfg);
    wait_merged(&events, 2);
    let killed = now_s();
    nats.stop();
    let e = join(coord, Duration::from_secs(20)).unwrap_err();
    let AgentsError::BusGone { records, .. } = &e else {
        panic!("{e}");
    };
    assert!(*records >= 4, "two agents' two seconds at least: {records}");
    for a in agents {
        let out = a.finish(Duration::from_secs(20));
        assert_eq!(out.status.code(), Some(1));
        assert!(one_line(&out).contains("the bus was lost"));
    }
    server.stop();
    let times = log_times(&site.log());
    assert!(
        times.iter().any(|&t| t < killed),
        "load ran before the kill"
    );
    let last = times.iter().copied().fold(f64::MIN, f64::max);
    assert!(
        last <= killed + 2.0,
        "a request {:.3} s after the bus went",
        last - killed
    );
}

#[test]
fn an_agent_frozen_past_three_heartbeats_is_lost_and_told_to_stop_when_it_wakes() {
    let site = Site::new("stale");
    let server = Served::start(&site.root(), &[]);
    let nats = secured_bus();
    let a = Agent::spawn(&nats, "a");
    let victim = Agent::spawn(&nats, "victim");
    let mut cfg = run_cfg(&nats, "stale", &server.addr, 12);
    cfg.lost_after = Duration::from_secs(3);
    let (coord, events) = spawn_coordinator(cfg);
    wait_merged(&events, 2);
    signal("-STOP", &victim.pid());
    // Lost after 3 s of silence (this run's bound).
    std::thread::sleep(Duration::from_millis(4_500));
    signal("-CONT", &victim.pid());
    let out = victim.finish(Duration::from_secs(15));
    assert_eq!(out.status.code(), Some(1));
    let line = one_line(&out);
    assert!(
        line.contains("out of run stale") && line.contains("declared lost"),
        "{line}"
    );
    let r = join(coord, Duration::from_secs(30)).expect("run");
    assert_eq!(a.finish(Duration::from_secs(10)).status.code(), Some(0));
    let v = r.agents.iter().find(|x| x.name == "victim").unwrap();
    let from = v.lost_from_s.expect("victim lost");
    assert!(v.final_record.is_none(), "no final from a lost agent");
    assert_eq!(r.merged.degraded_from_s, Some(from));
    let vs = r
        .merged
        .agents
        .iter()
        .find(|s| s.agent == "victim")
        .unwrap();
    assert!(
        vs.seconds().iter().all(|&s| s < from),
        "nothing from after it was lost is merged"
    );
    assert_eq!(
        vs.seconds(),
        (0..from).collect::<Vec<_>>(),
        "its seconds up to then are kept"
    );
    assert!(from >= 2, "two seconds merged before the freeze: {from}");
    for s in &r.merged.seconds {
        assert_eq!(s.slots["a"], Slot::Present, "second {}", s.second);
        if s.second >= from {
            assert_eq!(s.slots["victim"], Slot::Lost, "second {}", s.second);
        }
    }
    let fin = r.agents.iter().find(|x| x.name == "a").unwrap();
    assert_eq!(fin.final_record.as_ref().unwrap().ending, Ending::Done);
}

#[test]
fn an_agent_frozen_for_less_than_the_grace_is_kept_and_its_seconds_fill_in() {
    let site = Site::new("frozen");
    let server = Served::start(&site.root(), &[]);
    let nats = secured_bus();
    let a = Agent::spawn(&nats, "a");
    let slow = Agent::spawn(&nats, "b");
    let mut cfg = run_cfg(&nats, "frozen", &server.addr, 10);
    // A stall of 2 s (a loaded machine not running the agent) against a grace of 8 s.
    cfg.lost_after = Duration::from_secs(8);
    let (coord, events) = spawn_coordinator(cfg);
    wait_merged(&events, 2);
    signal("-STOP", &slow.pid());
    std::thread::sleep(Duration::from_secs(2));
    signal("-CONT", &slow.pid());
    let r = join(coord, Duration::from_secs(40)).expect("run");
    for agent in [a, slow] {
        assert_eq!(agent.finish(Duration::from_secs(10)).status.code(), Some(0));
    }
    assert_eq!(r.merged.degraded_from_s, None, "nobody lost");
    for x in &r.agents {
        assert_eq!(x.lost_from_s, None, "{} kept", x.name);
        assert_eq!(x.final_record.as_ref().unwrap().ending, Ending::Done);
    }
    // Every second of both is in the merge: the stalled one's came late, and filled in.
    for s in &r.merged.seconds {
        assert_eq!(s.slots["a"], Slot::Present, "second {}", s.second);
        assert_eq!(s.slots["b"], Slot::Present, "second {}", s.second);
    }
    assert!(r.merged.seconds.len() >= 10, "{}", r.merged.seconds.len());
}

/// Injector seconds the study's store holds so far (0 before its run exists).
fn stored_seconds(db: &Path) -> usize {
    let Ok(store) = Store::open(db) else { return 0 };
    let Some(run) = store.list_runs().ok().and_then(|r| r.first().map(|r| r.id)) else {
        return 0;
    };
    store.injector_seconds(run, 0).map_or(0, |s| s.len())
}

/// Writes a study of two injectors at 40 requests/s for `secs` against `base`, on the
/// bus at `bus_url` (a 1 s request timeout: the agents hold each second open that long
/// before they send it), and starts `volley study run` on it, returning once the store holds
/// the injectors' first `n` seconds (bounded: 60 s).
fn start_study(
    site: &Site,
    base: &str,
    nats: &PrivateNats,
    secs: u64,
    n: usize,
) -> (Child, std::path::PathBuf) {
    let bus_url = nats.url();
    // The existing bus's credentials, as its operator would hand them out: the
    // coordinator's, and one file per agent (`{name}` in the study's path).
    let keys = nats.keys().unwrap();
    let coord = site.0.join("coordinator.json");
    std::fs::write(&coord, keys.coordinator.to_json()).unwrap();
    for (name, c) in &keys.agents {
        std::fs::write(site.0.join(format!("{name}.json")), c.to_json()).unwrap();
    }
    let agents = site.0.join("{name}.json");
    let file = site.0.join("s.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"bus\"\n[[target]]\nname = \"served\"\nkind = \"external\"\nurl = \"{base}/a.html\"\n[[workload]]\nname = \"w\"\npaths = [\"/a.html\"]\n[load]\nmodel = \"open\"\nrate = 40\nconcurrency = 2\ntimeout = \"1s\"\n[injectors]\ncount = 2\nbus = \"existing\"\nbus_url = \"{bus_url}\"\nbus_credentials = \"{}\"\nagent_credentials = \"{}\"\n[steps]\nduration = \"{secs}s\"\nwarmup = \"0s\"\n",
            coord.display(),
            agents.display()
        ),
    )
    .unwrap();
    let db = site.0.join("v.db");
    let study = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["study", "run"])
        .arg(&file)
        .arg("--db")
        .arg(&db)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("volley study run");
    let until = Instant::now() + Duration::from_secs(60);
    while stored_seconds(&db) < n && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(200));
    }
    (study, db)
}

/// Waits (at most 60 s) for the study to end.
fn study_output(study: Child) -> Output {
    exit_within(study, Duration::from_secs(60), "volley study run")
}

#[test]
fn a_study_whose_bus_goes_away_exits_1_with_one_line_and_keeps_the_seconds_it_had() {
    let site = Site::new("study");
    let server = Served::start(&site.root(), &[]);
    let mut nats = secured_bus();
    let (study, db) = start_study(&site, &server.base, &nats, 40, 4);
    let before = stored_seconds(&db);
    nats.stop();
    let out = study_output(study);
    assert!(before >= 4, "seconds stored before the bus went: {before}");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("volley:")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("the bus was gone"), "{err}");
    println!("{}", lines[0]);
    assert!(stored_seconds(&db) >= before, "the seconds it had are kept");
}

#[test]
fn a_study_whose_bus_restarts_mid_step_keeps_every_request_and_says_which_seconds_came_late() {
    let site = Site::new("restart");
    let log = site.log();
    let mut server = Served::start(&site.root(), &["--access-log", log.to_str().unwrap()]);
    let mut nats = secured_bus();
    let (study, db) = start_study(&site, &server.base, &nats, 30, 4);
    // Away for 4 s: past the agents' 1 s bound (their loads stop) and past the late
    // grace (2 s + the 1 s hold), well within the coordinator's 10 s.
    nats.stop();
    std::thread::sleep(Duration::from_secs(4));
    nats.restart().expect("nats-server again on its port");
    let out = study_output(study);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.stop();
    let store = Store::open(&db).unwrap();
    let run = store.list_runs().unwrap()[0].id;
    let step = &store.steps(run).unwrap()[0].summary;
    let merged = step["requests"]["completed"].as_u64().unwrap();
    let lines = common::load_lines(&log);
    assert_eq!(merged, lines, "every request the server saw is merged");
    assert!(step["degraded_from_s"].is_u64(), "{}", step["injectors"]);
    for i in step["injectors"].as_array().unwrap() {
        assert_eq!(i["ending"], "BusLost", "{i}");
        assert!(i["late_seconds"].as_u64().unwrap() >= 1, "{i}");
        assert!(i["max_late_ms"].as_u64().unwrap() > 0, "{i}");
    }
}

/// The lines an agent wrote that are not its progress.
fn agent_error(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| !l.contains(": on the bus "))
        .collect();
    assert_eq!(lines.len(), 1, "one line: {err}");
    lines[0].to_string()
}

#[test]
fn an_agent_without_valid_credentials_or_tls_ends_with_one_line_and_loads_nothing() {
    let nats = secured_bus();
    let url = nats.url();
    let keys = nats.keys().unwrap();
    // No credentials at all: a usage error, before any connection.
    let out = Agent::spawn_with(&url, "a", None, &[]).finish(Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(2));
    assert!(agent_error(&out).contains("--credentials FILE"), "{out:?}");
    // A wrong password: the server refuses it, and counts it.
    let mut wrong = keys.agent("a").unwrap().clone();
    wrong.password = "guessed".into();
    let out = Agent::spawn_with(&url, "a", Some(&wrong), &[]).finish(Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(1));
    let line = agent_error(&out);
    assert!(line.contains("the bus refused the connection"), "{line}");
    // --insecure-bus against a secured bus: its certificate is not trusted.
    let out =
        Agent::spawn_with(&url, "a", None, &["--insecure-bus"]).finish(Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        agent_error(&out).contains("TLS to the bus failed"),
        "{out:?}"
    );
    // A bus that does not speak TLS.
    let plain = PrivateNats::start().expect("nats-server");
    let out =
        Agent::spawn_with(&plain.url(), "a", keys.agent("a"), &[]).finish(Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(1));
    assert!(agent_error(&out).contains("does not speak TLS"), "{out:?}");
    // A bus whose certificate has expired (signed by the CA the agent trusts).
    let ca = volley_tls::certs::Authority::new().unwrap();
    let mut expired =
        volley_agents::auth::StudyKeys::generate(&["127.0.0.1"], &["a".into()]).unwrap();
    expired.server = ca.expired_server(&["127.0.0.1"]).unwrap();
    expired.ca_pem = ca.cert_pem();
    let dir = crate::common::fresh_dir("volley-expired");
    let (cert, key) = expired.server.write(&dir, "server").unwrap();
    let conf = dir.join("nats.conf");
    std::fs::write(
        &conf,
        expired.server_config(cert.to_str().unwrap(), key.to_str().unwrap()),
    )
    .unwrap();
    let old =
        PrivateNats::start_with_config(&conf, "127.0.0.1:0".parse().unwrap()).expect("nats-server");
    let mut creds = expired.agent("a").unwrap().clone();
    creds.ca_pem = Some(ca.cert_pem());
    let out = Agent::spawn_with(&old.url(), "a", Some(&creds), &[]).finish(Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        agent_error(&out).contains("certificate has expired"),
        "{out:?}"
    );
    let until = Instant::now() + Duration::from_secs(5);
    while nats.refused() < 2 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(nats.refused() >= 2, "refused {}", nats.refused());
}

#[test]
fn an_agent_told_to_load_outside_its_allow_list_refuses_and_the_run_says_so() {
    let site = Site::new("allow");
    let mut server = Served::start(
        &site.root(),
        &["--access-log", site.log().to_str().unwrap()],
    );
    let nats = secured_bus();
    // Allowed a documentation network only: the test's server is outside it.
    let agent = Agent::spawn_with(
        &nats.url(),
        "a",
        nats.keys().unwrap().agent("a"),
        &["--allow-target", "192.0.2.0/24"],
    );
    let mut cfg = run_cfg(&nats, "outside", &server.addr, 2);
    (cfg.agents, cfg.min_agents, cfg.whole.connections) = (1, 1, 1);
    let (coord, _events) = spawn_coordinator(cfg);
    let e = join(coord, Duration::from_secs(30)).unwrap_err();
    let want = format!(
        "agent a refused: target {} outside its allow-list (192.0.2.0/24)",
        server.addr
    );
    assert_eq!(e.to_string(), want);
    let out = agent.finish(Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(1));
    let line = agent_error(&out);
    assert!(
        line.starts_with("volley agent a: refused run outside: target")
            && line.ends_with("nothing loaded"),
        "{line}"
    );
    server.stop();
    let logged = std::fs::read_to_string(site.log()).unwrap_or_default();
    assert_eq!(logged.lines().count(), 0, "the server was loaded: {logged}");
}
