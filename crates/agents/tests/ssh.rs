//! SSH deployment against two test hosts: Debian's `sshd` (openssh-server, installed by
//! `scripts/install-deps.sh`) in two network namespaces the test makes, each with its
//! own address (10.214.x.2 behind a veth pair from here), a host key and an authorized
//! key generated in a temp dir. Each sshd also runs in a mount namespace of its own
//! where the binary directory is a bind mount of that host's own directory, so the two
//! hosts do not share their files as they share this machine's filesystem. Runs as root
//! (`PermitRootLogin prohibit-password`), which is who runs the tests here.
//!
//! Everything the test makes (namespaces, veths, sshd processes, files) is removed at the
//! end and on panic by `Drop`; every wait is bounded.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use volley_agents::ssh::{self, Host, SshConfig, SshError};

/// The fake volley copied to the hosts: answers `--version`, and `sleep N` runs long.
const FAKE_VOLLEY: &str = "#!/bin/sh\n\
    if [ \"$1\" = --version ]; then echo 'volley 0.0.0-ssh-test'; exit 0; fi\n\
    if [ \"$1\" = sleep ]; then exec sleep \"$2\"; fi\n\
    exit 3\n";

fn sh(cmd: &mut Command) -> bool {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn must(args: &[&str]) {
    let ok = sh(Command::new(args[0]).args(&args[1..]));
    assert!(ok, "{args:?} failed");
}

/// One test host: a namespace, a veth, an sshd.
struct TestHost {
    ns: String,
    veth: String,
    addr: String,
    sshd: Option<Child>,
    /// What this host sees at the shared binary path.
    files: PathBuf,
}

impl Drop for TestHost {
    fn drop(&mut self) {
        if let Some(mut c) = self.sshd.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        sh(Command::new("ip").args(["link", "del", &self.veth]));
        sh(Command::new("ip").args(["netns", "del", &self.ns]));
    }
}

/// The temp dir, keys, and both hosts.
struct Lab {
    /// Which of this process's labs (tests run in parallel).
    tag: u32,
    dir: PathBuf,
    hosts: Vec<TestHost>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.hosts.clear();
        sh(Command::new("umount").arg(self.dir.join("tiny")));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Lab {
    fn start(tag: u32) -> Lab {
        let pid = std::process::id();
        let dir = std::env::temp_dir().join(format!("volley-ssh-{pid}-{tag}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("remote")).unwrap();
        std::fs::create_dir_all(dir.join("tiny")).unwrap();
        let mut lab = Lab {
            tag,
            dir,
            hosts: Vec::new(),
        };
        // A 64 KiB file system, mounted before the sshds start so their mount
        // namespaces have it: the "no space" host directory.
        let tiny = lab.dir.join("tiny");
        must(&[
            "mount",
            "-t",
            "tmpfs",
            "-o",
            "size=64k",
            "tmpfs",
            tiny.to_str().unwrap(),
        ]);
        let d = lab.dir.clone();
        for (key, kind) in [
            ("host_key", "ed25519"),
            ("client_key", "ed25519"),
            ("other_key", "ed25519"),
        ] {
            must(&[
                "ssh-keygen",
                "-q",
                "-t",
                kind,
                "-N",
                "",
                "-f",
                d.join(key).to_str().unwrap(),
            ]);
        }
        std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).unwrap();
        // sshd refuses to start without its privilege separation directory.
        std::fs::create_dir_all("/run/sshd").unwrap();
        // A subnet per test process and lab, so parallel runs do not collide.
        let net = 10 + (pid % 60) * 4 + tag * 2;
        for i in 0..2 {
            let h = lab.add_host(i, net + i);
            lab.hosts.push(h);
        }
        for h in &mut lab.hosts {
            wait_listening(&h.addr);
        }
        lab
    }

    fn add_host(&self, i: u32, subnet: u32) -> TestHost {
        let pid = std::process::id();
        let ns = format!("volley-ssh-{pid}-{}-{i}", self.tag);
        let veth = format!("vs{}{}h{i}", pid % 100_000, self.tag);
        let (ours, theirs) = (format!("10.214.{subnet}.1"), format!("10.214.{subnet}.2"));
        let files = self.dir.join(format!("host{i}"));
        std::fs::create_dir_all(&files).unwrap();
        let mut h = TestHost {
            ns: ns.clone(),
            veth: veth.clone(),
            addr: theirs.clone(),
            sshd: None,
            files,
        };
        let peer = format!("{veth}p");
        must(&["ip", "netns", "add", &ns]);
        must(&[
            "ip", "link", "add", &veth, "type", "veth", "peer", "name", &peer,
        ]);
        must(&["ip", "link", "set", &peer, "netns", &ns]);
        must(&["ip", "addr", "add", &format!("{ours}/30"), "dev", &veth]);
        must(&["ip", "link", "set", &veth, "up"]);
        let inside = |args: &[&str]| {
            let mut v = vec!["ip", "netns", "exec", &ns];
            v.extend_from_slice(args);
            must(&v);
        };
        inside(&["ip", "addr", "add", &format!("{theirs}/30"), "dev", &peer]);
        inside(&["ip", "link", "set", &peer, "up"]);
        inside(&["ip", "link", "set", "lo", "up"]);
        let cfg = self.dir.join(format!("sshd_config{i}"));
        let d = &self.dir;
        std::fs::write(
            &cfg,
            format!(
                "ListenAddress {theirs}\nHostKey {}\nAuthorizedKeysFile {}\n\
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

    fn host(&self, i: usize) -> Host {
        format!("root@{}", self.hosts[i].addr).parse().unwrap()
    }

    fn config(&self, key: &str) -> SshConfig {
        let local = self.dir.join("local");
        std::fs::create_dir_all(&local).unwrap();
        let bin = local.join("volley");
        if !bin.exists() {
            std::fs::write(&bin, FAKE_VOLLEY).unwrap();
            must(&["chmod", "755", bin.to_str().unwrap()]);
        }
        SshConfig {
            options: vec![
                format!("IdentityFile={}", self.dir.join(key).display()),
                "IdentitiesOnly=yes".into(),
                format!(
                    "UserKnownHostsFile={}",
                    self.dir.join("known_hosts").display()
                ),
            ],
            remote_dir: self.dir.join("remote/bin").display().to_string(),
            local_bin: bin,
            bound: Duration::from_secs(20),
        }
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

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The parent pid and command name of `pid`, from `/proc/PID/stat`.
fn parent_and_comm(pid: u32) -> Option<(u32, String)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, rest) = stat.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_string();
    let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
    Some((ppid, comm))
}

/// Kills host `h`'s sshd (the listener this test started) and the session processes it
/// forked, as a host whose ssh service dies; what those sessions run is left alone.
fn kill_sshd(h: &mut TestHost) {
    let Some(mut listener) = h.sshd.take() else {
        return;
    };
    let mut tree = vec![listener.id()];
    // Bounded: a process tree is finite, and each pass only adds pids not yet seen.
    for _ in 0..8 {
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
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

#[test]
fn deploy_start_stop_remove_and_faults_name_the_host() {
    let lab = Lab::start(0);
    let cfg = lab.config("client_key");
    // Host 1 already has this version: checked, not copied, and left as found.
    std::fs::create_dir_all(lab.hosts[1].files.join("bin")).unwrap();
    std::fs::copy(&cfg.local_bin, lab.hosts[1].files.join("bin/volley")).unwrap();

    let d = ssh::deploy(&cfg, &[lab.host(0), lab.host(1)]).expect("deploy");
    let copied: Vec<bool> = d.hosts().iter().map(|p| p.copied).collect();
    assert_eq!(copied, [true, false]);
    assert!(d
        .hosts()
        .iter()
        .all(|p| p.version == "volley 0.0.0-ssh-test"));
    assert!(
        lab.hosts[0].files.join("bin/volley").exists(),
        "copied to host 0"
    );

    for i in 0..2 {
        let (status, out) = d
            .start(i, &["--version"])
            .unwrap()
            .wait(Duration::from_secs(20))
            .unwrap();
        assert!(status.success());
        assert_eq!(out.trim(), "volley 0.0.0-ssh-test");
    }
    // A long-running process is stopped by its pid (the hosts share our pid namespace,
    // so /proc shows it).
    let p = d.start(0, &["sleep", "300"]).unwrap();
    let pid = p.pid();
    assert!(alive(pid), "remote pid {pid} running");
    p.stop().unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    while alive(pid) {
        assert!(Instant::now() < until, "pid {pid} still alive");
        std::thread::sleep(Duration::from_millis(20));
    }
    d.remove().unwrap();
    assert!(
        !lab.hosts[0].files.join("bin").exists(),
        "nothing left on host 0"
    );
    assert!(
        lab.hosts[1].files.join("bin/volley").exists(),
        "host 1's own copy kept"
    );
    std::fs::remove_dir_all(lab.hosts[1].files.join("bin")).unwrap();

    // An unreachable host (nothing listens on port 2): one line naming it; what was
    // copied to host 0 first is removed.
    let dead: Host = format!("root@{}:2", lab.hosts[1].addr).parse().unwrap();
    let e = ssh::deploy(&cfg, &[lab.host(0), dead.clone()]).unwrap_err();
    assert!(matches!(e, SshError::Unreachable { .. }), "{e}");
    let line = e.to_string();
    assert!(
        line.starts_with(&dead.to_string()) && line.lines().count() == 1,
        "{line}"
    );
    assert!(
        !lab.hosts[0].files.join("bin/volley").exists(),
        "host 0 cleaned up"
    );

    // A key the host does not know.
    let e = ssh::deploy(&lab.config("other_key"), &[lab.host(1)]).unwrap_err();
    assert!(matches!(e, SshError::KeyRefused { .. }), "{e}");
    let line = e.to_string();
    assert!(
        line.starts_with(&lab.host(1).to_string()) && line.lines().count() == 1,
        "{line}"
    );
    for h in &lab.hosts {
        assert!(!h.files.join("bin").exists(), "nothing left on {}", h.addr);
    }

    // A binary larger than the host's free space: one line, and no partial file left.
    let mut big = lab.config("client_key");
    big.local_bin = lab.dir.join("local/volley-big");
    let pad = format!("{FAKE_VOLLEY}# {}\n", "x".repeat(256 * 1024));
    std::fs::write(&big.local_bin, pad).unwrap();
    must(&["chmod", "755", big.local_bin.to_str().unwrap()]);
    big.remote_dir = lab.dir.join("tiny/bin").display().to_string();
    let e = ssh::deploy(&big, &[lab.host(0)]).unwrap_err();
    assert!(matches!(e, SshError::NoSpace { .. }), "{e}");
    assert!(e.to_string().starts_with(&lab.host(0).to_string()), "{e}");
    assert!(
        !lab.dir.join("tiny/bin").exists(),
        "nothing left on the host"
    );
}

#[test]
fn a_lost_connection_ends_the_remote_process_and_removes_the_copy() {
    let mut lab = Lab::start(1);
    let cfg = lab.config("client_key");
    let d = ssh::deploy(&cfg, &[lab.host(0)]).expect("deploy");
    let mut p = d.start(0, &["sleep", "300"]).unwrap();
    let pid = p.pid();
    assert!(alive(pid), "remote pid {pid} running");
    assert!(lab.hosts[0].files.join("bin/volley").exists());
    assert!(!p.ended());
    // The host's ssh service dies: the watcher sees the connection end, removes the
    // binary it copied and kills the process; the local ssh ends too.
    kill_sshd(&mut lab.hosts[0]);
    let until = Instant::now() + Duration::from_secs(10);
    while alive(pid) || lab.hosts[0].files.join("bin").exists() || !p.ended() {
        assert!(
            Instant::now() < until,
            "after 10 s: process alive {}, binary there {}, ssh ended {}",
            alive(pid),
            lab.hosts[0].files.join("bin/volley").exists(),
            p.ended()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Stopping and removing now cannot reach the host: bounded, and an error at most.
    p.stop().unwrap();
    let e = d.remove().unwrap_err();
    assert!(matches!(e, SshError::Unreachable { .. }), "{e}");
}
