//! Helpers shared by the integration tests that start the real `volley serve`
//! (`tests/common/mod.rs` is Cargo's convention: not a test binary of its own, a module
//! each test file pulls in with `mod common;`).
//!
//! One [`Served`] instead of four copies: every copy had to get the same three things
//! right (read the first stdout line within a time limit, so a server that never starts
//! fails the test instead of hanging it; keep the rest of stdout for the lines that
//! follow; kill and reap the process on drop, also when the test panics).

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long `volley serve` may take to print a line before the test gives up.
const LINE_LIMIT: Duration = Duration::from_secs(20);

/// A running `volley serve`, killed and reaped on drop.
pub struct Served {
    child: Child,
    /// `http://127.0.0.1:PORT` or `https://127.0.0.1:PORT`, no trailing slash.
    pub base: String,
    /// `127.0.0.1:PORT`, for raw sockets.
    pub addr: String,
    /// The rest of the server's stdout; `None` only while a read is in flight.
    stdout: Option<BufReader<ChildStdout>>,
}

impl Served {
    /// Starts `volley serve --root ROOT EXTRA...` and waits for its first line,
    /// `listening on SCHEME://ADDR/`.
    pub fn start(root: &Path, extra: &[&str]) -> Served {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_volley"));
        cmd.args(["serve", "--root"]).arg(root).args(extra);
        Served::start_cmd(cmd)
    }

    /// [`Served::start`] of a `volley serve` command the caller built (its own
    /// environment, say).
    pub fn start_cmd(mut cmd: Command) -> Served {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn volley serve");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        // Built before the first read so that a failed read kills the child on drop.
        let mut served = Served {
            child,
            base: String::new(),
            addr: String::new(),
            stdout: Some(stdout),
        };
        let line = served.next_line();
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|s| s.strip_suffix('/'))
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        served.addr = base
            .split_once("://")
            .map(|(_, a)| a.to_owned())
            .unwrap_or_else(|| panic!("no scheme in {base:?}"));
        served.base = base;
        served
    }

    /// The next line of the server's stdout (without the newline), waiting at most
    /// [`LINE_LIMIT`]: a blocking read on a thread, handed back through a channel, so a
    /// silent server fails the test rather than hanging it.
    pub fn next_line(&mut self) -> String {
        let mut reader = self.stdout.take().expect("a previous read timed out");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let n = reader.read_line(&mut line);
            let _ = tx.send((n.map(|_| line), reader));
        });
        match rx.recv_timeout(LINE_LIMIT) {
            Ok((Ok(line), reader)) => {
                self.stdout = Some(reader);
                assert!(!line.is_empty(), "volley serve closed its stdout");
                line.trim_end().to_owned()
            }
            Ok((Err(e), _)) => panic!("reading volley serve's stdout: {e}"),
            Err(_) => panic!("volley serve printed no line within {LINE_LIMIT:?}"),
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Reads the `tls ca: PATH` line `--tls-self-signed` prints after the address.
    pub fn ca_line(&mut self) -> PathBuf {
        let line = self.next_line();
        line.strip_prefix("tls ca: ")
            .map(PathBuf::from)
            .unwrap_or_else(|| panic!("no CA line: {line:?}"))
    }

    /// Stops with SIGTERM (the clean shutdown: access log flushed, connections closed)
    /// and returns the exit status if the server ended within 2 s; otherwise kills it
    /// and returns `None`.
    pub fn stop(&mut self) -> Option<ExitStatus> {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        for _ in 0..100 {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        None
    }

    /// SIGKILL and reap (a crash in the middle of whatever the test is doing).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
        }
    }
}

/// The office accounts of a started DAV target's first `users` accounts, each with its
/// own paths and headers (as the target lays them out: `From<&DavAccount>`).
pub fn office_accounts(
    target: &volley_targets::RunningTarget,
    users: usize,
) -> Vec<volley_office::Account> {
    let dav = target
        .dav
        .as_ref()
        .expect("a DAV target reports its accounts");
    assert!(
        dav.accounts.len() >= users,
        "{} accounts",
        dav.accounts.len()
    );
    dav.accounts[..users]
        .iter()
        .map(volley_office::Account::from)
        .collect()
}

/// Starts `kind` with `users` DAV accounts (30 s to start); the built-in server is
/// this build's `volley`.
pub fn dav_target(kind: volley_targets::TargetKind, users: u32) -> volley_targets::RunningTarget {
    let mut spec = volley_targets::TargetSpec::new(kind);
    spec.volley_exe = Some(PathBuf::from(env!("CARGO_BIN_EXE_volley")));
    spec.settings.dav = Some(volley_targets::DavSettings {
        users,
        seed_items: 0,
    });
    spec.start_timeout = Duration::from_secs(30);
    volley_targets::start(&spec).unwrap_or_else(|e| panic!("{kind} did not start: {e}"))
}

/// Runs `volley ARGS...` to the end: exit code (-1 when killed), stdout, stderr.
pub fn volley(args: &[&str]) -> (i32, String, String) {
    let (code, out, err) = output_of(volley_cmd().args(args));
    (code.unwrap_or(-1), out, err)
}

/// The `volley` binary under test, to add arguments to.
pub fn volley_cmd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_volley"))
}

/// Runs `cmd` to the end: its exit code (`None` when a signal ended it), stdout and
/// stderr as text.
pub fn output_of(cmd: &mut Command) -> (Option<i32>, String, String) {
    let out = cmd.output().expect("run the command");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The pids of `parent`'s children whose command line contains `needle`.
pub fn children_with(parent: u32, needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Field 4, after the parenthesised command name (which may hold spaces).
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if ppid == Some(parent) && cmdline.contains(needle) {
            out.push(pid);
        }
    }
    out
}

/// `volley report ARGS --db DB --md MD`, which must succeed: the Markdown it wrote.
pub fn markdown_report(args: &[&str], db: &Path, md: &Path) -> String {
    let (code, _, err) = output_of(
        volley_cmd()
            .arg("report")
            .args(args)
            .arg("--db")
            .arg(db)
            .arg("--md")
            .arg(md),
    );
    assert_eq!(code, Some(0), "{err}");
    std::fs::read_to_string(md).expect("the Markdown report")
}

/// A test's own directory in the temporary directory, removed with everything in it when
/// the value is dropped: when the test ends, and also when it panics, so a failing test
/// leaves nothing behind either. Derefs to its `Path`, so `dir.join(..)` and `&dir` read
/// as they did when it was a `PathBuf`; bind it to a name (`let dir = ...`), never `_`,
/// or it goes at once.
#[derive(Debug)]
pub struct TestDir(tempfile::TempDir);

impl TestDir {
    /// The directory's path.
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl std::ops::Deref for TestDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for TestDir {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<std::ffi::OsStr> for TestDir {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.path().as_os_str()
    }
}

/// A fresh, empty directory `NAME-XXXXXX` in the temporary directory (a random suffix, so
/// tests never share one), removed when the [`TestDir`] is dropped. Mode 0755 like a
/// directory made with `create_dir`: a server the test starts as root may read it from a
/// worker running as another user.
pub fn fresh_dir(name: &str) -> TestDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::Builder::new()
        .prefix(&format!("{name}-"))
        .tempdir()
        .expect("create the test directory");
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755))
        .expect("open the test directory to other users");
    TestDir(d)
}

/// Writes `text` to `dir/name`; returns the file's path.
pub fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write the test file");
    p
}

/// A free loopback port: bound with port 0 and released, for servers that bind by
/// themselves (a rare collision shows as a failed start).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A server process the test started and the directory it runs in, if it has one of its
/// own: the process is killed and reaped on drop (also when the test panics), then the
/// directory's guard removes it.
pub struct Spawned {
    pub child: Child,
    pub dir: Option<TestDir>,
    pub port: u16,
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Spawns `cmd` (output discarded) and waits up to 30 s until `port` accepts
/// connections; `dir` goes with it.
pub fn spawn_listening(mut cmd: Command, dir: TestDir, port: u16) -> Spawned {
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the server");
    let spawned = Spawned {
        child,
        dir: Some(dir),
        port,
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the server did not listen on {port} within 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    spawned
}

/// The load's requests in a server's access log: every line but those of volley's own
/// checks (the target's readiness probe and a study's path check, User-Agent
/// `volley-probe`), which reach the server before the load and are not part of it.
pub fn load_lines(log: &std::path::Path) -> u64 {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.contains("\"volley-probe\""))
        .count() as u64
}

/// Whether `program` (a server's binary) is where volley itself would find it; when
/// not, says that `what` is skipped and how to install it. The one preamble of the
/// tests of managed servers.
pub fn server_installed(what: &str, program: &str) -> bool {
    let there = volley_targets::kind::find_program(program).is_some();
    if !there {
        eprintln!("{what} not installed: run scripts/install-servers.sh");
    }
    there
}

/// Whether this test runs as root; when not, says it is skipped because `what` needs
/// root (a namespace or a sysctl volley sets inside one).
pub fn root_for(what: &str) -> bool {
    let root = volley_targets::config::running_as_root();
    if !root {
        eprintln!("skipped: {what} needs root");
    }
    root
}

/// The built-in server as target `builtin` serving the `sizes` fixture, as study TOML:
/// the start of the study tests that load volley's own server.
pub const BUILTIN_SIZES: &str = r#"[[target]]
name = "builtin"
kind = "builtin"
[fixture]
kind = "sizes""#;

/// The `sizes` fixture and one workload `w` of `/700b.html`, as study TOML: what the
/// study tests load when the page does not matter.
pub const ONE_PAGE: &str = r#"[fixture]
kind = "sizes"
[[workload]]
name = "w"
paths = ["/700b.html"]"#;

/// A study of one target `web` of `kind`: [`ONE_PAGE`], a closed loop of 2 connections, then `sweep` (its `[sweep]` table and
/// `[[variant]]`s, as TOML), and steps of 1 s with no warm-up, cool-down or retry, with
/// `steps` (more `[steps]` keys, e.g. `repeats = 2`) added.
pub fn variant_study(name: &str, kind: &str, sweep: &str, steps: &str) -> String {
    format!(
        r#"
name = "{name}"
[[target]]
name = "web"
kind = "{kind}"
{ONE_PAGE}
[load]
model = "closed"
concurrency = 2
{sweep}
[steps]
duration = "1s"
warmup = "0s"
cooldown = "0s"
retries = 0
{steps}
"#
    )
}

/// A v1 cpu cgroup a test makes, holding what joins it to `quota_us` per 100 ms period
/// (2,000: 2% of one CPU), removed when dropped; `None` without a writable v1 cpu
/// controller. A child joins it by writing its pid to `cgroup.procs` (`echo $$ > ...`
/// in a shell that then execs it).
pub struct CappedCgroup(pub PathBuf);

impl CappedCgroup {
    pub fn make(quota_us: u64) -> Option<CappedCgroup> {
        let root = Path::new("/sys/fs/cgroup/cpu");
        if !root.join("cpu.cfs_quota_us").exists() {
            return None;
        }
        let dir = root.join(format!("volley-test-cap-{}-{quota_us}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let g = CappedCgroup(dir);
        std::fs::write(g.0.join("cpu.cfs_period_us"), "100000").ok()?;
        std::fs::write(g.0.join("cpu.cfs_quota_us"), quota_us.to_string()).ok()?;
        Some(g)
    }

    /// The shell words that move the shell running them into this cgroup.
    pub fn join(&self) -> String {
        format!("echo $$ > {}/cgroup.procs", self.0.display())
    }
}

impl Drop for CappedCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}
