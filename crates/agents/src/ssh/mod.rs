//! Agents on other hosts over SSH: copy volley there, start it, stop it, remove it.
//!
//! Place in the flow: before a run with `placement = "ssh"`, and after it. As Tsung and
//! Hyperfoil deploy their agents, volley drives the system's OpenSSH client (`ssh`,
//! through `std::process`, no SSH library), so the user's keys, agent, known hosts and
//! `~/.ssh/config` apply unchanged. For each host it checks `uname -m` against this
//! build and the remote `volley --version` (in a per-user directory) against the local
//! binary's, copies the binary over `ssh 'cat > ...'` when it is missing or of another
//! version, and removes it afterwards only if it copied it. A started process reports
//! its remote pid first; a shell beside it on the host watches the connection, so a
//! `stop` line ends it and a lost connection (volley killed, the host's sshd killed,
//! the network cut) kills it and removes the copy there, and the pid is the fallback
//! when the connection hangs (`remote`). A failure on one host undoes what was done
//! on the others; each error is one line naming the host and the cause (`run`).
//! Every command is bounded in time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use std::time::Duration;

// Every word of a remote script is quoted for the remote POSIX shell.
use volley_proc::shell_quote as quote;

mod remote;
mod run;

pub use remote::RemoteProcess;
use run::{classify, last_line, run_bounded, Ran};

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
    /// The binary volley put on the host is gone (a lost connection removes it).
    #[error("{host}: volley is missing: {detail}")]
    Missing {
        /// The host as given.
        host: String,
        /// The remote line.
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
    /// The local binary's `--version`, for copying again.
    local_version: String,
    /// Behind a lock because [`Deployment::start`] copies again where the binary went.
    hosts: std::sync::Mutex<Vec<Prepared>>,
}

/// Checks each host and copies the binary where needed. On any host's failure, what was
/// copied to the hosts before it is removed and that host's error returned.
pub fn deploy(cfg: &SshConfig, hosts: &[Host]) -> Result<Deployment, SshError> {
    let local_version = local_version(&cfg.local_bin, cfg.bound)?;
    let d = Deployment {
        cfg: cfg.clone(),
        local_version,
        hosts: std::sync::Mutex::new(Vec::new()),
    };
    for h in hosts {
        // On error `d` drops here and removes the copies already made.
        let p = prepare(cfg, h, &d.local_version)?;
        d.lock().push(p);
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
    pub fn hosts(&self) -> Vec<Prepared> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Prepared>> {
        // A panic elsewhere cannot leave the list half-changed: each change is one push
        // or one assignment.
        self.hosts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Removes the binaries volley copied (not those it found).
    pub fn remove(mut self) -> Result<(), SshError> {
        self.remove_copies()
    }

    fn remove_copies(&mut self) -> Result<(), SshError> {
        let mut first = None;
        let hosts = std::mem::take(&mut *self.lock());
        for p in hosts.into_iter().filter(|p| p.copied) {
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
}
