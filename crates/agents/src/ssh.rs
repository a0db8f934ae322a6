//! Agents on other hosts over SSH: copy volley there, start it, stop it, remove it.
//!
//! Place in the flow: before a run with `placement = "ssh"`, and after it. As Tsung and
//! Hyperfoil deploy their agents, volley drives the system's OpenSSH client (`ssh`,
//! through `std::process`, no SSH library), so the user's keys, agent, known hosts and
//! `~/.ssh/config` apply unchanged. For each host it checks `uname -m` against this
//! build and the remote `volley --version` (in a per-user directory) against the local
//! binary's, copies the binary over `ssh 'cat > ...'` when it is missing or of another
//! version, and removes it afterwards only if it copied it. A started process reports
//! its remote pid first, so it is stopped by pid, not by hoping a closed connection
//! reaches it. A failure on one host undoes what was done on the others; each error is
//! one line naming the host and the cause. Every command is bounded in time.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

/// OpenSSH options volley always sets: never prompt, trust a new host key on first
/// sight (refuse a changed one), give up on a dead host after 5 s.
pub const DEFAULT_OPTIONS: [&str; 3] = [
    "BatchMode=yes",
    "StrictHostKeyChecking=accept-new",
    "ConnectTimeout=5",
];

/// Where the binary goes, relative to the remote user's home (ssh starts there).
pub const REMOTE_DIR: &str = ".cache/volley/bin";

/// What can go wrong on a host; every variant names the host.
#[derive(Debug, thiserror::Error)]
pub enum SshError {
    /// Not `[user@]host[:port]`.
    #[error("bad host {0:?}: want [user@]host[:port]")]
    BadHost(String),
    /// No connection (refused, no route, timed out, unknown name).
    #[error("{host}: unreachable: {detail}")]
    Unreachable {
        /// The host as given.
        host: String,
        /// ssh's line.
        detail: String,
    },
    /// The host refused our key.
    #[error("{host}: key refused: {detail}")]
    KeyRefused {
        /// The host as given.
        host: String,
        /// ssh's line.
        detail: String,
    },
    /// The host's key changed (or cannot be checked).
    #[error("{host}: host key not accepted: {detail}")]
    HostKey {
        /// The host as given.
        host: String,
        /// ssh's line.
        detail: String,
    },
    /// The binary did not fit on the host.
    #[error("{host}: no space for the binary: {detail}")]
    NoSpace {
        /// The host as given.
        host: String,
        /// The remote line.
        detail: String,
    },
    /// The host's machine is not this build's.
    #[error("{host}: wrong architecture: the host is {remote}, this volley is {local}")]
    WrongArch {
        /// The host as given.
        host: String,
        /// Its `uname -m`.
        remote: String,
        /// `std::env::consts::ARCH`.
        local: &'static str,
    },
    /// A remote command failed otherwise.
    #[error("{host}: {action}: {detail}")]
    Remote {
        /// The host as given.
        host: String,
        /// What was being done.
        action: &'static str,
        /// The last line it wrote.
        detail: String,
    },
    /// A command ran past its bound.
    #[error("{host}: {action} timed out after {after:?}")]
    Timeout {
        /// The host as given.
        host: String,
        /// What was being done.
        action: &'static str,
        /// The bound.
        after: Duration,
    },
    /// A local failure (spawning ssh, reading the binary).
    #[error("{action}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// One host: `[user@]host[:port]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The login name, if given.
    pub user: Option<String>,
    /// Name or IPv4 address.
    pub host: String,
    /// The port, if given.
    pub port: Option<u16>,
}

impl FromStr for Host {
    type Err = SshError;

    fn from_str(s: &str) -> Result<Self, SshError> {
        let bad = || SshError::BadHost(s.into());
        let (user, rest) = match s.split_once('@') {
            Some((u, r)) if !u.is_empty() => (Some(u.to_string()), r),
            Some(_) => return Err(bad()),
            None => (None, s),
        };
        let (host, port) = match rest.split_once(':') {
            Some((h, p)) => (
                h,
                Some(p.parse::<u16>().ok().filter(|&p| p > 0).ok_or_else(bad)?),
            ),
            None => (rest, None),
        };
        // A leading '-' would be read by ssh as an option.
        let ok = !host.is_empty()
            && !host.starts_with('-')
            && host
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || b".-_".contains(&c));
        if !ok {
            return Err(bad());
        }
        Ok(Host {
            user,
            host: host.into(),
            port,
        })
    }
}

impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(u) = &self.user {
            write!(f, "{u}@")?;
        }
        f.write_str(&self.host)?;
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

/// How to reach the hosts and what to copy.
#[derive(Debug, Clone)]
pub struct SshConfig {
    /// Extra OpenSSH options, each passed as `-o OPTION` after [`DEFAULT_OPTIONS`] (ssh
    /// takes the first value it sees, so these cannot override the defaults).
    pub options: Vec<String>,
    /// The remote directory of the binary (relative: to the login's home).
    pub remote_dir: String,
    /// The binary to copy (the running volley by default).
    pub local_bin: PathBuf,
    /// The longest one remote command may take (a copy included).
    pub bound: Duration,
}

impl SshConfig {
    /// The defaults: this executable, [`REMOTE_DIR`], 120 s per command.
    pub fn new() -> Result<Self, SshError> {
        Ok(SshConfig {
            options: Vec::new(),
            remote_dir: REMOTE_DIR.into(),
            local_bin: std::env::current_exe().map_err(|source| SshError::Io {
                action: "finding the volley binary",
                source,
            })?,
            bound: Duration::from_secs(120),
        })
    }

    fn remote_bin(&self) -> String {
        format!("{}/volley", self.remote_dir.trim_end_matches('/'))
    }

    /// `ssh` with volley's options for `host`, ready for the remote command.
    fn ssh(&self, host: &Host, script: &str) -> Command {
        let mut c = Command::new("ssh");
        for o in DEFAULT_OPTIONS
            .iter()
            .copied()
            .chain(self.options.iter().map(String::as_str))
        {
            c.args(["-o", o]);
        }
        if let Some(p) = host.port {
            c.args(["-p", &p.to_string()]);
        }
        let dest = match &host.user {
            Some(u) => format!("{u}@{}", host.host),
            None => host.host.clone(),
        };
        c.arg("--").arg(dest).arg(script);
        c
    }

    /// Runs `script` on `host` within the bound; a failure is classified, naming `action`.
    fn run_ok(
        &self,
        host: &Host,
        script: &str,
        stdin: Option<&Path>,
        action: &'static str,
    ) -> Result<Ran, SshError> {
        let ran = run_bounded(self.ssh(host, script), stdin, host, action, self.bound)?;
        if ran.status.success() {
            Ok(ran)
        } else {
            Err(classify(host, action, &ran))
        }
    }
}

/// What a finished remote command gave.
#[derive(Debug)]
struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs `cmd` to its end within `bound`, feeding it `stdin` (a file) if given.
fn run_bounded(
    mut cmd: Command,
    stdin: Option<&Path>,
    host: &Host,
    action: &'static str,
    bound: Duration,
) -> Result<Ran, SshError> {
    let io = |source| SshError::Io {
        action: "running ssh",
        source,
    };
    let feed = match stdin {
        Some(p) => Some(std::fs::File::open(p).map_err(|source| SshError::Io {
            action: "reading the volley binary",
            source,
        })?),
        None => None,
    };
    cmd.stdin(if feed.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(io)?;
    let feeder = feed.zip(child.stdin.take()).map(|(mut f, mut w)| {
        // A remote that fails (no space) closes the pipe: the copy error is expected.
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut f, &mut w);
            let _ = w.flush();
        })
    });
    let out = reader(child.stdout.take());
    let err = reader(child.stderr.take());
    let status = wait_bounded(&mut child, bound).ok_or_else(|| SshError::Timeout {
        host: host.to_string(),
        action,
        after: bound,
    })?;
    if let Some(f) = feeder {
        let _ = f.join();
    }
    Ok(Ran {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

fn reader<R: Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut r) = r {
            let _ = r.read_to_string(&mut s);
        }
        s
    })
}

/// Waits for `child` at most `bound`; past it kills and reaps it and gives `None`.
fn wait_bounded(child: &mut Child, bound: Duration) -> Option<ExitStatus> {
    let s = wait_bounded_alive(child, bound);
    if s.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    s
}

/// Waits for `child` at most `bound`; past it gives `None` and leaves it running.
fn wait_bounded_alive(child: &mut Child, bound: Duration) -> Option<ExitStatus> {
    let until = Instant::now() + bound;
    loop {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The last non-empty line of `s`: the cause, on one line.
fn last_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("no message")
        .to_string()
}

/// Names the cause of a failed remote command from ssh's and the remote's words.
fn classify(host: &Host, action: &'static str, ran: &Ran) -> SshError {
    let (host, detail) = (host.to_string(), last_line(&ran.stderr));
    let e = &ran.stderr;
    let has = |words: &[&str]| words.iter().any(|w| e.contains(w));
    // ssh itself exits 255; the remote command's own failures have other codes.
    if ran.status.code() == Some(255) {
        if has(&["Permission denied", "Too many authentication failures"]) {
            return SshError::KeyRefused { host, detail };
        }
        if has(&[
            "Host key verification failed",
            "REMOTE HOST IDENTIFICATION HAS CHANGED",
        ]) {
            return SshError::HostKey { host, detail };
        }
        if has(&[
            "Connection refused",
            "No route to host",
            "timed out",
            "Could not resolve",
            "Network is unreachable",
            "Connection closed",
            "Connection reset",
        ]) {
            return SshError::Unreachable { host, detail };
        }
    }
    if has(&["No space left", "Disk quota exceeded"]) {
        return SshError::NoSpace { host, detail };
    }
    SshError::Remote {
        host,
        action,
        detail,
    }
}

/// Single-quotes `s` for the remote POSIX shell.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Whether a host's `uname -m` runs this build.
fn arch_matches(uname: &str) -> bool {
    let ours = std::env::consts::ARCH;
    uname == ours
        || (ours == "aarch64" && uname == "arm64")
        || (ours == "x86" && matches!(uname, "i386" | "i486" | "i586" | "i686"))
}

/// One host made ready.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The host.
    pub host: Host,
    /// Whether volley copied its binary there (and so removes it afterwards).
    pub copied: bool,
    /// The remote binary's `--version`, equal to the local one.
    pub version: String,
}

/// Hosts with volley on them; dropping it removes what was copied (best effort).
#[derive(Debug)]
pub struct Deployment {
    cfg: SshConfig,
    hosts: Vec<Prepared>,
}

/// Checks each host and copies the binary where needed. On any host's failure, what was
/// copied to the hosts before it is removed and that host's error returned.
pub fn deploy(cfg: &SshConfig, hosts: &[Host]) -> Result<Deployment, SshError> {
    let local_version = local_version(&cfg.local_bin, cfg.bound)?;
    let mut d = Deployment {
        cfg: cfg.clone(),
        hosts: Vec::new(),
    };
    for h in hosts {
        // On error `d` drops here and removes the copies already made.
        let p = prepare(cfg, h, &local_version)?;
        d.hosts.push(p);
    }
    Ok(d)
}

/// The local binary's `--version` line.
fn local_version(bin: &Path, bound: Duration) -> Result<String, SshError> {
    let local = Host {
        user: None,
        host: "localhost".into(),
        port: None,
    };
    let mut cmd = Command::new(bin);
    cmd.arg("--version");
    let ran = run_bounded(cmd, None, &local, "volley --version", bound)?;
    let v = ran.stdout.trim().to_string();
    if !ran.status.success() || v.is_empty() {
        return Err(SshError::Io {
            action: "reading the local volley --version",
            source: std::io::Error::other(last_line(&ran.stderr)),
        });
    }
    Ok(v)
}

fn prepare(cfg: &SshConfig, host: &Host, local_version: &str) -> Result<Prepared, SshError> {
    let bin = quote(&cfg.remote_bin());
    let probe = format!("uname -m; if [ -x {bin} ]; then {bin} --version 2>/dev/null; fi; true");
    let ran = cfg.run_ok(host, &probe, None, "probe")?;
    let mut lines = ran.stdout.lines().map(str::trim);
    let arch = lines.next().unwrap_or_default().to_string();
    if !arch_matches(&arch) {
        return Err(SshError::WrongArch {
            host: host.to_string(),
            remote: arch,
            local: std::env::consts::ARCH,
        });
    }
    if lines.next() == Some(local_version) {
        return Ok(Prepared {
            host: host.clone(),
            copied: false,
            version: local_version.into(),
        });
    }
    // Written beside the target and renamed, so a half-copied binary is never run; on
    // failure the partial file (and the directory, if empty) is removed.
    let (dir, tmp) = (
        quote(&cfg.remote_dir),
        quote(&format!("{}.part", cfg.remote_bin())),
    );
    let copy = format!(
        "mkdir -p {dir} && {{ cat > {tmp} && chmod 755 {tmp} && mv -f {tmp} {bin} || {{ rm -f {tmp}; rmdir {dir} 2>/dev/null; exit 1; }}; }} && {bin} --version"
    );
    let ran = cfg.run_ok(host, &copy, Some(&cfg.local_bin), "copying the binary")?;
    let got = ran.stdout.trim();
    if got != local_version {
        return Err(SshError::Remote {
            host: host.to_string(),
            action: "checking the copied binary",
            detail: format!("it says {got:?}, expected {local_version:?}"),
        });
    }
    Ok(Prepared {
        host: host.clone(),
        copied: true,
        version: local_version.into(),
    })
}

impl Deployment {
    /// The hosts, in the order given.
    pub fn hosts(&self) -> &[Prepared] {
        &self.hosts
    }

    /// Starts `volley ARGS` on host `i` (e.g. `agent --bus URL --name NAME`). The
    /// returned handle holds the ssh connection and the remote pid.
    ///
    /// The remote side watches the connection: a shell beside the process reads the
    /// connection's stdin. A `stop` line (what [`RemoteProcess::stop`] sends) ends the
    /// process; the end of input without it means the connection is gone (this volley
    /// killed, the host's sshd killed, the network cut), and then the process is killed
    /// and the binary removed if volley copied it, so nothing of volley stays on a host
    /// volley can no longer reach. The local `ssh` dies with this volley
    /// (`PR_SET_PDEATHSIG`), which closes the connection the same way.
    ///
    /// # Panics
    /// If `i` is not an index of [`Deployment::hosts`].
    pub fn start(&self, i: usize, args: &[&str]) -> Result<RemoteProcess, SshError> {
        let p = &self.hosts[i];
        let script = self.start_script(p.copied, args);
        let mut cmd = self.cfg.ssh(&p.host, &script);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        volley_netlab::exec::die_with_parent(&mut cmd);
        let mut child = cmd.spawn().map_err(|source| SshError::Io {
            action: "running ssh",
            source,
        })?;
        let stdin = child.stdin.take();
        let mut out = child.stdout.take();
        let (tx, rx) = std::sync::mpsc::channel();
        let out_reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            let mut byte = [0u8; 1];
            let mut sent = false;
            if let Some(o) = out.as_mut() {
                while let Ok(1) = o.read(&mut byte) {
                    all.push(byte[0]);
                    if !sent && byte[0] == b'\n' {
                        let _ = tx.send(String::from_utf8_lossy(&all).trim().to_string());
                        all.clear();
                        sent = true;
                    }
                }
            }
            String::from_utf8_lossy(&all).into_owned()
        });
        let err = reader(child.stderr.take());
        let pid = rx
            .recv_timeout(self.cfg.bound)
            .ok()
            .and_then(|l| l.parse::<u32>().ok());
        let Some(pid) = pid else {
            drop(stdin);
            let status = wait_bounded(&mut child, Duration::from_secs(1));
            let ran = Ran {
                status: status.unwrap_or_default(),
                stdout: String::new(),
                stderr: err.join().unwrap_or_default(),
            };
            return Err(classify(&p.host, "starting volley", &ran));
        };
        Ok(RemoteProcess {
            cfg: self.cfg.clone(),
            host: p.host.clone(),
            pid,
            child: Some(child),
            stdin,
            output: Some(out_reader),
        })
    }

    /// The remote script of [`Deployment::start`]: the pid first (printed by the
    /// process's own shell before it execs volley, so no output of volley can come
    /// before it), then the watcher of the connection (see `start`). `copied` decides
    /// whether a lost connection also removes the binary.
    fn start_script(&self, copied: bool, args: &[&str]) -> String {
        let bin = quote(&self.cfg.remote_bin());
        let argv: Vec<String> = args.iter().map(|a| quote(a)).collect();
        let forget = if copied {
            format!(
                "rm -f {bin}; rmdir {} 2>/dev/null; ",
                quote(&self.cfg.remote_dir)
            )
        } else {
            String::new()
        };
        // An asynchronous list reads /dev/null unless redirected explicitly, so the
        // watcher reads the connection through fd 3. On `stop`: SIGTERM, SIGKILL after
        // 5 s. On end of input: the binary goes first, then the process, so the main
        // shell, woken by the death, cannot end the watcher before it has cleaned up.
        format!(
            "exec 3<&0; [ -x {bin} ] || {{ echo \"volley is not at {rb}\" >&2; exit 127; }}; \
             sh -c {inner} {bin} {args} 3<&- & a=$!; \
             ( if read -r l && [ \"$l\" = stop ]; then kill $a 2>/dev/null; i=0; \
             while kill -0 $a 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; \
             kill -9 $a 2>/dev/null; else {forget}kill -9 $a 2>/dev/null; fi ) <&3 3<&- & w=$!; \
             exec 3<&-; wait $a; s=$?; kill $w 2>/dev/null; exit $s",
            rb = self
                .cfg
                .remote_bin()
                .replace(['"', '\'', '$', '`', '\\'], "_"),
            inner = quote("echo $$; exec \"$0\" \"$@\" 2>&1"),
            args = argv.join(" "),
        )
    }

    /// Removes the binaries volley copied (not those it found).
    pub fn remove(mut self) -> Result<(), SshError> {
        self.remove_copies()
    }

    fn remove_copies(&mut self) -> Result<(), SshError> {
        let mut first = None;
        for p in self.hosts.drain(..).filter(|p| p.copied) {
            let script = format!(
                "rm -f {}; rmdir {} 2>/dev/null; true",
                quote(&self.cfg.remote_bin()),
                quote(&self.cfg.remote_dir)
            );
            let r = self
                .cfg
                .run_ok(&p.host, &script, None, "removing the binary");
            if let Err(e) = r {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        let _ = self.remove_copies();
    }
}

/// A volley process running on a host. Dropping it stops it (best effort).
#[derive(Debug)]
pub struct RemoteProcess {
    cfg: SshConfig,
    host: Host,
    pid: u32,
    child: Option<Child>,
    /// The connection's stdin: the remote watcher takes its end as the connection's.
    stdin: Option<std::process::ChildStdin>,
    output: Option<std::thread::JoinHandle<String>>,
}

impl RemoteProcess {
    /// Its pid on the host.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Waits for it to end by itself within `bound`: its exit status and output.
    pub fn wait(mut self, bound: Duration) -> Result<(ExitStatus, String), SshError> {
        let child = self
            .child
            .as_mut()
            .expect("a running process has its child");
        // Past the bound the handle is dropped with its child: `Drop` stops it.
        let status = wait_bounded_alive(child, bound).ok_or_else(|| SshError::Timeout {
            host: self.host.to_string(),
            action: "waiting for volley",
            after: bound,
        })?;
        self.child = None;
        let out = self.output.take().map(|h| h.join().unwrap_or_default());
        Ok((status, out.unwrap_or_default()))
    }

    /// Whether it has ended (the connection closed: volley exited, or the host or the
    /// network went away).
    pub fn ended(&mut self) -> bool {
        self.child
            .as_mut()
            .is_none_or(|c| matches!(c.try_wait(), Ok(Some(_))))
    }

    /// Stops it: a `stop` line to the remote watcher (SIGTERM, SIGKILL after 5 s); if
    /// the connection does not end within 10 s, SIGTERM by pid over a new connection,
    /// SIGKILL after 5 s, and the local `ssh` is killed.
    pub fn stop(mut self) -> Result<(), SshError> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Result<(), SshError> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        if let Some(mut w) = self.stdin.take() {
            // Fails when the remote has already ended: nothing left to stop.
            let _ = w.write_all(b"stop\n").and_then(|()| w.flush());
        }
        if wait_bounded(&mut child, Duration::from_secs(10)).is_some() {
            if let Some(h) = self.output.take() {
                let _ = h.join();
            }
            return Ok(());
        }
        let pid = self.pid;
        let script = format!(
            "kill {pid} 2>/dev/null; i=0; while kill -0 {pid} 2>/dev/null; do \
             i=$((i+1)); [ $i -ge 50 ] && {{ kill -9 {pid}; break; }}; sleep 0.1; done; true"
        );
        let r = self
            .cfg
            .run_ok(&self.host, &script, None, "stopping volley");
        // The connection ends with the process; closing it is bounded either way.
        if wait_bounded(&mut child, Duration::from_secs(5)).is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(h) = self.output.take() {
            let _ = h.join();
        }
        r.map(|_| ())
    }
}

impl Drop for RemoteProcess {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_parse() {
        let h: Host = "root@10.0.0.2:2222".parse().unwrap();
        assert_eq!(
            h,
            Host {
                user: Some("root".into()),
                host: "10.0.0.2".into(),
                port: Some(2222)
            }
        );
        assert_eq!(h.to_string(), "root@10.0.0.2:2222");
        assert_eq!("box".parse::<Host>().unwrap().to_string(), "box");
        for bad in [
            "",
            "@h",
            "u@",
            "h:0",
            "h:x",
            "-oProxyCommand=x",
            "a b",
            "h;rm",
        ] {
            assert!(bad.parse::<Host>().is_err(), "{bad}");
        }
    }

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn arch() {
        assert!(arch_matches(std::env::consts::ARCH));
        assert!(!arch_matches("sparc64"));
    }

    fn ran(code: i32, stderr: &str) -> Ran {
        use std::os::unix::process::ExitStatusExt;
        Ran {
            status: ExitStatus::from_raw(code << 8),
            stdout: String::new(),
            stderr: stderr.into(),
        }
    }

    #[test]
    fn causes_are_named() {
        let h: Host = "u@h".parse().unwrap();
        let cases = [
            (
                255,
                "ssh: connect to host h port 22: Connection refused",
                "unreachable",
            ),
            (255, "u@h: Permission denied (publickey).", "key refused"),
            (255, "Host key verification failed.", "host key"),
            (1, "cat: write error: No space left on device", "no space"),
            (1, "sh: 1: frob: not found", "probe"),
        ];
        for (code, err, want) in cases {
            let e = classify(&h, "probe", &ran(code, err)).to_string();
            assert!(e.starts_with("u@h: ") && e.contains(want), "{e}");
            assert_eq!(e.lines().count(), 1);
        }
    }
}
