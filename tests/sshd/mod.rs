//! Test hosts with a real sshd, shared by `tests/injectors_ssh.rs` and
//! `crates/agents/tests/ssh.rs` (which includes this file by path).
//!
//! Debian's `sshd` (openssh-server, installed by scripts/install-deps.sh) runs inside a
//! network namespace the test made, listening on that namespace's address, with a host
//! key and an authorized key the test generated, as root (`PermitRootLogin
//! prohibit-password`). It also runs in a mount namespace of its own where a shared
//! directory is a bind mount of that host's own directory, so test hosts do not share
//! the files they otherwise share with this machine.

// Each including test binary uses a different subset.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `cmd` quietly; true when it succeeded.
pub fn sh(cmd: &mut Command) -> bool {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `args` quietly and fails the test if it fails.
pub fn must(args: &[&str]) {
    assert!(
        sh(Command::new(args[0]).args(&args[1..])),
        "{args:?} failed"
    );
}

/// Generates `host_key`, `client_key` and the `extra` keys in `dir` (ed25519, no
/// passphrase), and authorizes `client_key` (`authorized_keys`).
pub fn make_keys(dir: &Path, extra: &[&str]) {
    for key in ["host_key", "client_key"].iter().chain(extra) {
        must(&[
            "ssh-keygen",
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-f",
            dir.join(key).to_str().unwrap(),
        ]);
    }
    std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys")).unwrap();
    // sshd refuses to start without its privilege separation directory.
    std::fs::create_dir_all("/run/sshd").unwrap();
}

/// Starts sshd in namespace `ns` on `addr:22` with the keys of `keys` (see
/// [`make_keys`]), `own` bind-mounted over `shared` in its mount namespace; `name` tells
/// its config file apart. The child's pid is sshd's (ip netns exec, unshare and sh each
/// exec the next).
pub fn start_sshd(
    ns: &str,
    addr: &str,
    keys: &Path,
    own: &Path,
    shared: &Path,
    name: &str,
) -> Child {
    let cfg = keys.join(format!("sshd_config_{name}"));
    std::fs::write(
        &cfg,
        format!(
            "ListenAddress {addr}\nHostKey {}\nAuthorizedKeysFile {}\n\
             PermitRootLogin prohibit-password\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPidFile none\n",
            keys.join("host_key").display(),
            keys.join("authorized_keys").display()
        ),
    )
    .unwrap();
    let script = format!(
        "mount --bind {} {} && exec /usr/sbin/sshd -D -e -f {} -p 22",
        own.display(),
        shared.display(),
        cfg.display()
    );
    Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
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
        .expect("start sshd (scripts/install-deps.sh installs openssh-server)")
}

/// Waits (at most 10 s) until something accepts on `addr:22`.
pub fn wait_listening(addr: &str) {
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

/// Kills the sshd `listener` (started by [`start_sshd`]) and the session processes it
/// forked, as a host whose ssh service dies; what those sessions run is left alone
/// (ending it is volley's job).
pub fn kill_sshd(mut listener: Child) {
    let mut tree = vec![listener.id()];
    // Bounded: each pass only adds pids not yet seen, and the tree is shallow.
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
