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

mod common;

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::Served;
use serde_json::Value;
use volley_store::Store;

fn sh(cmd: &mut Command) -> bool {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn must(args: &[&str]) {
    assert!(
        sh(Command::new(args[0]).args(&args[1..])),
        "{args:?} failed"
    );
}

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
    dir: PathBuf,
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
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Net {
    /// `tag` tells this process's tests apart (they run in parallel).
    fn start(tag: u32) -> Net {
        let pid = std::process::id();
        let dir = std::env::temp_dir().join(format!("volley-injssh-{pid}-{tag}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("remote")).unwrap();
        let subnet = 20 + (pid % 100) * 2 + tag;
        let mut net = Net {
            hub: format!("volley-injssh-{pid}-{tag}-hub"),
            root_veth: format!("vj{}{tag}r", pid % 100_000),
            root_addr: format!("10.216.{subnet}.1"),
            dir,
            hosts: Vec::new(),
        };
        for (key, kind) in [("host_key", "ed25519"), ("client_key", "ed25519")] {
            must(&[
                "ssh-keygen",
                "-q",
                "-t",
                kind,
                "-N",
                "",
                "-f",
                net.dir.join(key).to_str().unwrap(),
            ]);
        }
        std::fs::copy(
            net.dir.join("client_key.pub"),
            net.dir.join("authorized_keys"),
        )
        .unwrap();
        // sshd refuses to start without its privilege separation directory.
        std::fs::create_dir_all("/run/sshd").unwrap();
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
            wait_listening(&h.addr);
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
        let cfg = self.dir.join(format!("sshd_config{i}"));
        let d = &self.dir;
        std::fs::write(
            &cfg,
            format!(
                "ListenAddress {addr}\nHostKey {}\nAuthorizedKeysFile {}\n\
                 PermitRootLogin prohibit-password\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPidFile none\n",
                d.join("host_key").display(),
                d.join("authorized_keys").display()
            ),
        )
        .unwrap();
        // ip netns exec, unshare and sh each exec the next: the child's pid is sshd's.
        let script = format!(
            "mount --bind {} {} && exec /usr/sbin/sshd -D -e -f {} -p 22",
            h.files.display(),
            self.dir.join("remote").display(),
            cfg.display()
        );
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns,
                "unshare",
                "-m",
                "--propagation",
                "private",
            ])
            .args(["sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start sshd (scripts/install-deps.sh installs openssh-server)");
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

fn wait_listening(addr: &str) {
    let sa: SocketAddr = format!("{addr}:22").parse().unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect_timeout(&sa, Duration::from_millis(200)).is_err() {
        assert!(Instant::now() < until, "sshd on {sa} not up within 10 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The parent pid and command name of `pid`, from `/proc/PID/stat`.
fn parent_and_comm(pid: u32) -> Option<(u32, String)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, rest) = stat.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_string();
    let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
    Some((ppid, comm))
}

fn all_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
        .collect()
}

/// Kills host `h`'s sshd (the listener the test started) and the session processes it
/// forked: the host's ssh service dies. What the sessions run is left alone: ending it
/// is volley's job.
fn kill_sshd(h: &mut TestHost) {
    let Some(mut listener) = h.sshd.take() else {
        return;
    };
    let mut tree = vec![listener.id()];
    // Bounded: each pass only adds pids not yet seen, and the tree is shallow.
    for _ in 0..8 {
        for pid in all_pids() {
            if let Some((ppid, comm)) = parent_and_comm(pid) {
                if tree.contains(&ppid) && !tree.contains(&pid) && comm.starts_with("sshd") {
                    tree.push(pid);
                }
            }
        }
    }
    for pid in tree.iter().skip(1) {
        sh(Command::new("kill").args(["-KILL", &pid.to_string()]));
    }
    let _ = listener.kill();
    let _ = listener.wait();
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
        // 4 s at 30 req/s, one request of slack for the schedule's boundary.
        assert!((119..=121).contains(&n), "{}: {n}", i["name"]);
    }
    let sum: u64 = inj.iter().map(|i| completed(&i["summary"])).sum();
    let lines = std::fs::read_to_string(&log).unwrap().lines().count() as u64;
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
    let study = study_command(&net, &file, &db)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Bounded: host 1's agent (inj3) appears within 60 s (the copies come first) or
    // the test fails.
    let ns = net.hosts[1].ns.clone();
    assert!(
        wait_until(600, || !agents_in(&ns).is_empty()),
        "no agent on host 1"
    );
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
        assert!((299..=301).contains(&n), "{}: {n}", i["name"]);
        sum += n;
    }
    assert_eq!(completed(&s), sum, "the merge is the others' whole runs");
    assert!(s["notes"].to_string().contains("inj3 was lost"), "{s}");
    // The lost host's own side killed its agent and removed the binary; the other
    // host's copy was removed at the end.
    assert_nothing_left(&net);
}
