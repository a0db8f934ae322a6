//! Injectors on other hosts over SSH, through the real binary: `volley study run` with
//! `placement = "ssh"` copies itself to two test hosts and starts `volley agent` there
//! through the system's `ssh`, beside one local agent, against a `volley serve` the test
//! starts with its access log on.
//!
//! The hosts: two network namespaces the test makes, each running Debian's `sshd`
//! (openssh-server, installed by scripts/install-deps.sh) with a host key and an
//! authorized key the test generates, joined by a bridge in a third namespace of the
//! test's to one veth in the root namespace (the server, the bus and the local agent
//! listen or dial there). Each sshd also runs in a mount namespace of its own where the
//! binary directory is a bind mount of that host's own directory, so the hosts do not
//! share the files they otherwise share with this machine. Runs as root (who runs the
//! tests here). Everything the test makes is removed on drop; every wait is bounded;
//! traffic stays in the namespaces the test made, on its veth and on loopback.

use crate::common;
use crate::sshd;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::Served;
use serde_json::Value;
use sshd::{must, sh};
use volley_store::Store;

/// One test host: a namespace with an sshd.
struct TestHost {
    ns: String,
    addr: String,
    sshd: Option<Child>,
    /// What this host sees at the binary directory's parent.
    files: PathBuf,
}

/// The temp dir, keys, the bridge and both hosts.
struct Net {
    /// Removed after `drop` below has stopped the hosts (fields drop after it).
    dir: crate::common::TestDir,
    hub: String,
    root_veth: String,
    /// This host's address on the test network.
    root_addr: String,
    hosts: Vec<TestHost>,
}

impl Drop for Net {
    fn drop(&mut self) {
        for h in &mut self.hosts {
            kill_sshd(h);
            sh(Command::new("ip").args(["netns", "del", &h.ns]));
        }
        sh(Command::new("ip").args(["link", "del", &self.root_veth]));
        sh(Command::new("ip").args(["netns", "del", &self.hub]));
    }
}

impl Net {
    /// `tag` tells this process's tests apart (they run in parallel).
    fn start(tag: u32) -> Net {
        let pid = std::process::id();
        let dir = crate::common::fresh_dir(&format!("volley-injssh-{tag}"));
        std::fs::create_dir_all(dir.join("remote")).unwrap();
        let subnet = 20 + (pid % 50) * 4 + tag;
        let mut net = Net {
            hub: format!("volley-injssh-{pid}-{tag}-hub"),
            root_veth: format!("vj{}{tag}r", pid % 100_000),
            root_addr: format!("10.216.{subnet}.1"),
            dir,
            hosts: Vec::new(),
        };
        sshd::make_keys(&net.dir, &[]);
        let hub = net.hub.clone();
        must(&["ip", "netns", "add", &hub]);
        must(&["ip", "-n", &hub, "link", "add", "br0", "type", "bridge"]);
        must(&["ip", "-n", &hub, "link", "set", "br0", "up"]);
        must(&[
            "ip",
            "link",
            "add",
            &net.root_veth,
            "type",
            "veth",
            "peer",
            "name",
            "r",
            "netns",
            &hub,
        ]);
        must(&["ip", "-n", &hub, "link", "set", "r", "master", "br0", "up"]);
        must(&[
            "ip",
            "addr",
            "add",
            &format!("{}/24", net.root_addr),
            "dev",
            &net.root_veth,
        ]);
        must(&["ip", "link", "set", &net.root_veth, "up"]);
        for i in 0..2 {
            let h = net.add_host(i, &format!("10.216.{subnet}.{}", 2 + i));
            net.hosts.push(h);
        }
        for h in &net.hosts {
            sshd::wait_listening(&h.addr);
        }
        net
    }

    fn add_host(&self, i: u32, addr: &str) -> TestHost {
        let ns = format!("{}-h{i}", self.hub.trim_end_matches("-hub"));
        let files = self.dir.join(format!("host{i}"));
        std::fs::create_dir_all(&files).unwrap();
        let mut h = TestHost {
            ns: ns.clone(),
            addr: addr.to_string(),
            sshd: None,
            files,
        };
        let port = format!("h{i}");
        must(&["ip", "netns", "add", &ns]);
        must(&[
            "ip", "-n", &self.hub, "link", "add", &port, "type", "veth", "peer", "name", "eth0",
            "netns", &ns,
        ]);
        must(&[
            "ip", "-n", &self.hub, "link", "set", &port, "master", "br0", "up",
        ]);
        must(&[
            "ip",
            "-n",
            &ns,
            "addr",
            "add",
            &format!("{addr}/24"),
            "dev",
            "eth0",
        ]);
        must(&["ip", "-n", &ns, "link", "set", "eth0", "up"]);
        must(&["ip", "-n", &ns, "link", "set", "lo", "up"]);
        let child = sshd::start_sshd(
            &ns,
            addr,
            &self.dir,
            &h.files,
            &self.dir.join("remote"),
            &i.to_string(),
        );
        h.sshd = Some(child);
        h
    }

    /// The `[injectors]` keys that reach the hosts: one local agent, one on each host.
    fn injectors(&self) -> String {
        let d = self.dir.display();
        format!(
            "placement = \"ssh\"\nhosts = [\"local\", \"root@{}\", \"root@{}\"]\n\
             bus_url = \"nats://{}\"\nremote_dir = \"{d}/remote/bin\"\n\
             ssh_options = [\"IdentityFile={d}/client_key\", \"IdentitiesOnly=yes\"]\n",
            self.hosts[0].addr, self.hosts[1].addr, self.root_addr
        )
    }

    /// The option given on the command line (`--ssh-option`) rather than in the file.
    fn known_hosts_option(&self) -> String {
        format!(
            "UserKnownHostsFile={}",
            self.dir.join("known_hosts").display()
        )
    }
}

/// Host `h`'s ssh service dies (see [`sshd::kill_sshd`]).
fn kill_sshd(h: &mut TestHost) {
    if let Some(listener) = h.sshd.take() {
        sshd::kill_sshd(listener);
    }
}

/// The `volley agent` processes running in namespace `ns`.
fn agents_in(ns: &str) -> Vec<u32> {
    let out = Command::new("ip")
        .args(["netns", "pids", ns])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse::<u32>().ok())
        .filter(|p| {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmd)
                .replace('\0', " ")
                .contains("agent --bus")
        })
        .collect()
}

/// Checks `done` every 100 ms, at most `tries` times.
fn wait_until(tries: u32, mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..tries {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// A docroot with one small page.
fn docroot(dir: &Path) -> PathBuf {
    let root = dir.join("www");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.html"), "<p>volley</p>\n".repeat(20)).unwrap();
    root
}

/// A study of the `volley serve` at `base` with three injectors, one local and one on
/// each host, each sending `rate` req/s for `duration`.
fn study_text(net: &Net, base: &str, duration: &str) -> String {
    format!(
        "name = \"inj-ssh\"\n[[target]]\nname = \"served\"\nkind = \"external\"\nurl = \"{base}/a.html\"\n\
         [[workload]]\nname = \"w\"\npaths = [\"/a.html\"]\n\
         [load]\nmodel = \"open\"\nrate = 30\nconcurrency = 2\n\
         [injectors]\ncount = 3\nshare = \"each\"\n{}\
         [steps]\nduration = \"{duration}\"\nwarmup = \"0s\"\ncooldown = \"0s\"\n",
        net.injectors()
    )
}

fn study_command(net: &Net, file: &Path, db: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_volley"));
    c.args(["study", "run"])
        .arg(file)
        .arg("--db")
        .arg(db)
        .args(["--ssh-option", &net.known_hosts_option()]);
    c
}

/// The only step's summary.
fn only_step(db: &Path) -> Value {
    let store = Store::open(db).unwrap();
    let runs = store.list_runs().unwrap();
    assert_eq!(runs.len(), 1);
    let steps = store.steps(runs[0].id).unwrap();
    assert_eq!(steps.len(), 1);
    steps[0].summary.clone()
}

fn completed(summary: &Value) -> u64 {
    summary["requests"]["completed"].as_u64().unwrap()
}

/// Nothing of volley on either host: no agent, no binary.
fn assert_nothing_left(net: &Net) {
    for h in &net.hosts {
        let mut left = agents_in(&h.ns);
        wait_until(50, || {
            left = agents_in(&h.ns);
            left.is_empty()
        });
        assert!(left.is_empty(), "agents left on {}: {left:?}", h.addr);
        assert!(
            !h.files.join("bin").exists(),
            "volley's directory left on {}",
            h.addr
        );
    }
}

#[test]
fn one_local_and_two_ssh_agents_merge_exactly_and_leave_nothing() {
    let net = Net::start(0);
    let log = net.dir.join("access.log");
    let root = docroot(&net.dir);
    let listen = format!("{}:0", net.root_addr);
    let mut server = Served::start(
        &root,
        &["--listen", &listen, "--access-log", log.to_str().unwrap()],
    );
    let file = net.dir.join("s.toml");
    std::fs::write(&file, study_text(&net, &server.base, "4s")).unwrap();
    let db = net.dir.join("v.db");
    let out = study_command(&net, &file, &db).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    for h in &net.hosts {
        assert!(
            err.contains(&format!("root@{}: volley copied", h.addr)),
            "{err}"
        );
    }
    server.stop();
    let s = only_step(&db);
    let inj = s["injectors"].as_array().unwrap();
    assert_eq!(inj.len(), 3);
    assert!(inj.iter().all(|i| i["lost_from_s"].is_null()), "{inj:?}");
    for i in inj {
        let n = completed(&i["summary"]);
        // 4 s at 30 req/s: one request of slack for the schedule's boundary, and 2% for
        // a busy machine whose last arrivals are still in flight at the end.
        assert!((117..=121).contains(&n), "{}: {n}", i["name"]);
    }
    let sum: u64 = inj.iter().map(|i| completed(&i["summary"])).sum();
    let lines = common::load_lines(&log);
    assert_eq!(completed(&s), sum, "merged == sum of the injectors'");
    assert_eq!(
        completed(&s),
        lines,
        "merged == the server's access log lines"
    );
    assert!(s["degraded_from_s"].is_null());
    assert_nothing_left(&net);
}

#[test]
fn a_host_whose_sshd_dies_loses_its_agent_and_keeps_nothing() {
    let mut net = Net::start(1);
    let root = docroot(&net.dir);
    let listen = format!("{}:0", net.root_addr);
    let mut server = Served::start(&root, &["--listen", &listen]);
    let file = net.dir.join("s.toml");
    std::fs::write(&file, study_text(&net, &server.base, "10s")).unwrap();
    let db = net.dir.join("v.db");
    let mut study = study_command(&net, &file, &db)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Bounded: host 1's agent (inj3) appears within 120 s (the copies come first, on a
    // machine that may be busy) or the test fails, with the study's own words.
    let ns = net.hosts[1].ns.clone();
    let mut ended = false;
    let appeared = wait_until(1200, || {
        ended = !matches!(study.try_wait(), Ok(None));
        ended || !agents_in(&ns).is_empty()
    });
    if ended || !appeared {
        let _ = study.kill();
        let out = study.wait_with_output().unwrap();
        panic!(
            "no agent on host 1 (study ended: {ended}): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Mid-run: the agents start about 2 s after they join (the start lead), then run
    // 10 s.
    std::thread::sleep(Duration::from_secs(6));
    kill_sshd(&mut net.hosts[1]);
    let out = study.wait_with_output().unwrap();
    server.stop();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let s = only_step(&db);
    let inj = s["injectors"].as_array().unwrap();
    let lost: Vec<&str> = inj
        .iter()
        .filter(|i| !i["lost_from_s"].is_null())
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(lost, ["inj3"], "{inj:?}");
    assert!(s["degraded_from_s"].as_u64().is_some(), "{s}");
    let mut sum = 0;
    for i in inj.iter().filter(|i| i["name"] != "inj3") {
        let n = completed(&i["summary"]);
        // Its whole 10 s at 30 req/s: one request of slack for the schedule's boundary,
        // and 2% for a busy machine whose last arrivals are still in flight at the end.
        assert!((294..=301).contains(&n), "{}: {n}", i["name"]);
        assert_eq!(i["ending"], "Done", "{}", i["name"]);
        sum += n;
    }
    assert_eq!(completed(&s), sum, "the merge is the others' whole runs");
    assert!(s["notes"].to_string().contains("inj3 was lost"), "{s}");
    // The lost host's own side killed its agent and removed the binary; the other
    // host's copy was removed at the end.
    assert_nothing_left(&net);
}

#[test]
fn an_unreachable_host_fails_the_study_in_one_line_and_leaves_nothing_on_the_others() {
    let net = Net::start(2);
    let root = docroot(&net.dir);
    let listen = format!("{}:0", net.root_addr);
    let mut server = Served::start(&root, &["--listen", &listen]);
    let file = net.dir.join("s.toml");
    // Host 1 at a port nothing listens on: host 0 gets its copy first, which must go.
    let dead = format!("root@{}:2", net.hosts[1].addr);
    let text = study_text(&net, &server.base, "3s").replace(
        &format!("root@{}\"", net.hosts[1].addr),
        &format!("{dead}\""),
    );
    std::fs::write(&file, text).unwrap();
    let out = study_command(&net, &file, &net.dir.join("v.db"))
        .stdout(Stdio::null())
        .output()
        .unwrap();
    server.stop();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let last = err.trim().lines().last().unwrap_or_default();
    assert!(
        last.contains(&format!("{dead}: unreachable")),
        "one line naming the host and the cause: {err}"
    );
    assert_nothing_left(&net);
}

#[test]
fn a_sigkilled_study_leaves_nothing_on_the_hosts() {
    let net = Net::start(3);
    let root = docroot(&net.dir);
    let listen = format!("{}:0", net.root_addr);
    let mut server = Served::start(&root, &["--listen", &listen]);
    let file = net.dir.join("s.toml");
    std::fs::write(&file, study_text(&net, &server.base, "30s")).unwrap();
    let mut study = study_command(&net, &file, &net.dir.join("v.db"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let running = wait_until(1200, || {
        net.hosts.iter().all(|h| !agents_in(&h.ns).is_empty())
    });
    assert!(running, "an agent on each host");
    std::thread::sleep(Duration::from_secs(2));
    // No goodbye from volley: its ssh clients die with it (parent-death signal), and
    // each host's side sees its connection end.
    study.kill().unwrap();
    study.wait().unwrap();
    server.stop();
    assert_nothing_left(&net);
}
