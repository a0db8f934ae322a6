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

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use volley_agents::ssh::{self, Host, SshConfig, SshError};

#[path = "../../../tests/sshd/mod.rs"]
mod sshd;
use sshd::{must, sh};

/// The fake volley copied to the hosts: answers `--version`, and `sleep N` runs long.
const FAKE_VOLLEY: &str = "#!/bin/sh\n\
    if [ \"$1\" = --version ]; then echo 'volley 0.0.0-ssh-test'; exit 0; fi\n\
    if [ \"$1\" = sleep ]; then exec sleep \"$2\"; fi\n\
    if [ \"$1\" = env ]; then echo \"secret=$VOLLEY_BUS_CREDENTIALS argv=$*\"; exit 0; fi\n\
    exit 3\n";

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
    /// Removes `dir` once `drop` below has stopped the hosts and unmounted `tiny` (fields
    /// drop after it), also when the lab's start panics half-way.
    _guard: tempfile::TempDir,
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.hosts.clear();
        sh(Command::new("umount").arg(self.dir.join("tiny")));
    }
}

impl Lab {
    fn start(tag: u32) -> Lab {
        let pid = std::process::id();
        let guard = tempfile::Builder::new()
            .prefix(&format!("volley-ssh-{tag}-"))
            .tempdir()
            .unwrap();
        let dir = guard.path().to_path_buf();
        std::fs::create_dir_all(dir.join("remote")).unwrap();
        std::fs::create_dir_all(dir.join("tiny")).unwrap();
        let mut lab = Lab {
            tag,
            dir,
            hosts: Vec::new(),
            _guard: guard,
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
        sshd::make_keys(&d, &["other_key"]);
        // A subnet per test process and lab, so parallel runs do not collide.
        let net = 10 + (pid % 60) * 4 + tag * 2;
        for i in 0..2 {
            let h = lab.add_host(i, net + i);
            lab.hosts.push(h);
        }
        for h in &mut lab.hosts {
            sshd::wait_listening(&h.addr);
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
        let child = sshd::start_sshd(
            &ns,
            &theirs,
            &self.dir,
            &h.files,
            &self.dir.join("remote"),
            &i.to_string(),
        );
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

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
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
            .start(i, &["--version"], None)
            .unwrap()
            .wait(Duration::from_secs(20))
            .unwrap();
        assert!(status.success());
        assert_eq!(out.trim(), "volley 0.0.0-ssh-test");
    }
    // A secret goes over the connection into the process's environment, not its argv.
    let (status, out) = d
        .start(
            1,
            &["env"],
            Some("{\"user\":\"inj2\",\"password\":\"p w\"}"),
        )
        .unwrap()
        .wait(Duration::from_secs(20))
        .unwrap();
    assert!(status.success());
    assert_eq!(
        out.trim(),
        "secret={\"user\":\"inj2\",\"password\":\"p w\"} argv=env"
    );
    assert!(d.start(0, &["env"], Some("two\nlines")).is_err());
    // A long-running process is stopped by its pid (the hosts share our pid namespace,
    // so /proc shows it).
    let p = d.start(0, &["sleep", "300"], None).unwrap();
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
    let mut p = d.start(0, &["sleep", "300"], None).unwrap();
    let pid = p.pid();
    assert!(alive(pid), "remote pid {pid} running");
    assert!(lab.hosts[0].files.join("bin/volley").exists());
    assert!(!p.ended());
    // The host's ssh service dies: the watcher sees the connection end, removes the
    // binary it copied and kills the process; the local ssh ends too.
    if let Some(listener) = lab.hosts[0].sshd.take() {
        sshd::kill_sshd(listener);
    }
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
    // Stopping now cannot reach the host: bounded, and no error (nothing to stop).
    p.stop().unwrap();
    // Starting there again while the host is down names it.
    let e = d.start(0, &["--version"], None).unwrap_err();
    assert!(e.to_string().starts_with(&lab.host(0).to_string()), "{e}");
    // The host comes back: the next start copies the binary again, and the removal at
    // the end takes that copy away.
    let h = &mut lab.hosts[0];
    h.sshd = Some(sshd::start_sshd(
        &h.ns,
        &h.addr,
        &lab.dir,
        &h.files,
        &lab.dir.join("remote"),
        "0-again",
    ));
    sshd::wait_listening(&lab.hosts[0].addr);
    let (status, out) = d
        .start(0, &["--version"], None)
        .unwrap()
        .wait(Duration::from_secs(20))
        .unwrap();
    assert!(status.success());
    assert_eq!(out.trim(), "volley 0.0.0-ssh-test");
    assert!(d.hosts()[0].copied);
    d.remove().unwrap();
    assert!(!lab.hosts[0].files.join("bin").exists(), "nothing left");
}
