//! Launching one server process: the private directory, a free port, the command
//! (process group, cgroup joined and CPUs pinned before exec), the configured servers'
//! and the built-in server's command lines, and the wait until its answer is right.

use super::process::Inner;
use super::{NetnsPlace, TargetSpec};
use crate::cgroup::ResourceLimits;
use crate::config::{self, Compression, Placement, TlsFiles};
use crate::kind::TargetKind;
use crate::probe::{self, Expected, ProbeFailure, ProbeOptions, Validated};
use crate::TargetError;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

pub(super) enum Launch {
    AddrInUse,
    Failed(TargetError),
}

impl From<TargetError> for Launch {
    fn from(e: TargetError) -> Self {
        Launch::Failed(e)
    }
}

pub(super) fn make_private_dir(kind: TargetKind) -> Result<PathBuf, TargetError> {
    use std::os::unix::fs::PermissionsExt;
    let base = std::env::temp_dir();
    for _ in 0..100 {
        let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("volley-{kind}-{}-{n}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => {
                // 0755: Apache's children run as www-data when volley is root and must
                // reach a docroot inside this directory.
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
                    .map_err(TargetError::io("setting the private dir's mode"))?;
                for sub in ["tmp", "data", "config"] {
                    std::fs::create_dir(dir.join(sub))
                        .map_err(TargetError::io("creating the private dir"))?;
                }
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(TargetError::Io {
                    what: format!("creating a private dir in {}", base.display()),
                    source: e,
                })
            }
        }
    }
    Err(TargetError::Io {
        what: "creating a private dir".into(),
        source: std::io::Error::other("too many name collisions"),
    })
}

/// A port that was free a moment ago. Someone may take it before the server binds it,
/// which is why the caller retries on "address in use".
fn free_port() -> Result<u16, TargetError> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(TargetError::io("finding a free port"))?;
    Ok(l.local_addr()
        .map_err(TargetError::io("finding a free port"))?
        .port())
}

/// A port for a server in a lab namespace. Nothing else listens there but volley's own
/// targets, so a per-process counter suffices; a clash is retried like any "address in
/// use".
fn lab_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    18_080 + NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 10_000
}

/// The address a configured server listens on.
fn listen_addr(spec: &TargetSpec) -> Result<SocketAddr, TargetError> {
    Ok(match &spec.netns {
        Some(p) => SocketAddr::new(p.ip, lab_port()),
        None => SocketAddr::from(([127, 0, 0, 1], free_port()?)),
    })
}

/// Common process setup: own process group, output files, cgroups joined and CPUs pinned
/// before exec; inside the spec's network namespace through `ip netns exec` (which execs
/// the server in its own place, so the pid, the group and the death signal carry over).
fn base_command(
    program: &Path,
    dir: &Path,
    inner: &Inner,
    limits: &ResourceLimits,
    netns: Option<&NetnsPlace>,
) -> Command {
    let mut cmd = match netns {
        Some(p) => volley_netlab::exec::command_in(&p.ns, program),
        None => Command::new(program),
    };
    cmd.current_dir(dir).stdin(Stdio::null()).process_group(0);
    let join_fds = inner.cgroups.join_fds();
    let cpuset = limits.cpus.as_ref().map(|cpus| {
        // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET only write inside it.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in cpus {
            if c < libc::CPU_SETSIZE as usize {
                unsafe { libc::CPU_SET(c, &mut set) };
            }
        }
        set
    });
    // Dies with volley (volley starts targets from its main thread, so: when volley
    // ends, even by SIGKILL); what survives is in the cgroup and the ledger the next
    // volley sweeps. First, so the hooks below run only for a child that will be told.
    volley_proc::die_with_parent(&mut cmd);
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
    // system calls (write, sched_setaffinity) on data prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            for &fd in &join_fds {
                // "0" = the writing process: join before exec so forks inherit the group.
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(set) = &cpuset {
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    cmd
}

fn spawn_err(kind: TargetKind, program: &Path, e: std::io::Error) -> TargetError {
    match e.kind() {
        std::io::ErrorKind::NotFound => TargetError::NotInstalled {
            kind,
            program: program.display().to_string(),
        },
        _ => TargetError::Io {
            what: format!(
                "starting {kind} ({}: exec, or joining its cgroup / pinning its CPUs before exec)",
                program.display()
            ),
            source: e,
        },
    }
}

fn log_file(dir: &Path, name: &str) -> Result<File, TargetError> {
    File::create(dir.join(name)).map_err(TargetError::io(format!("creating {name}")))
}

/// What every launch attempt of one target shares.
pub(super) struct LaunchCtx<'a> {
    pub spec: &'a TargetSpec,
    pub kind: TargetKind,
    pub program: &'a Path,
    pub dir: &'a Path,
    pub docroot: &'a Path,
    pub tls: Option<&'a TlsFiles>,
}

/// What a launch that answered correctly hands back.
pub(super) struct Ready {
    pub url: String,
    pub addr: SocketAddr,
    pub config_text: String,
    /// Just before the process that answered was spawned.
    pub started_at: Instant,
    pub validated: Validated,
}

/// Launches until the server answers the probe correctly, retrying (up to 5 times) when
/// another process took the free port between our check and the server's bind.
pub(super) fn until_ready(
    ctx: &LaunchCtx,
    inner: &mut Inner,
    expected: &Expected,
    probe_opts: &ProbeOptions,
) -> Result<Ready, TargetError> {
    const ATTEMPTS: u32 = 5;
    let scheme = if ctx.tls.is_some() { "https" } else { "http" };
    for _ in 0..ATTEMPTS {
        let started_at = Instant::now();
        let launched = if ctx.kind == TargetKind::Builtin {
            launch_builtin(ctx, inner)
        } else {
            launch_configured(ctx, inner)
        };
        let (addr, config_text) = match launched {
            Ok(v) => v,
            Err(Launch::AddrInUse) => {
                inner.reap_for_retry();
                continue;
            }
            Err(Launch::Failed(e)) => return Err(e),
        };
        let timeout = ctx.spec.start_wait();
        let dav_ready = crate::dav::accounts_only(ctx.kind, ctx.spec.settings.dav);
        match wait_ready(
            inner, ctx.dir, addr, scheme, expected, probe_opts, timeout, dav_ready,
        ) {
            Ok(validated) => {
                return Ok(Ready {
                    url: format!("{scheme}://{addr}/"),
                    addr,
                    config_text,
                    started_at,
                    validated,
                })
            }
            Err(Launch::AddrInUse) => inner.reap_for_retry(),
            Err(Launch::Failed(e)) => return Err(e),
        }
    }
    Err(TargetError::PortInUse {
        kind: ctx.kind,
        attempts: ATTEMPTS,
    })
}

fn launch_configured(ctx: &LaunchCtx, inner: &mut Inner) -> Result<(SocketAddr, String), Launch> {
    let LaunchCtx {
        spec,
        kind,
        program,
        dir,
        docroot,
        tls,
    } = *ctx;
    let addr = listen_addr(spec)?;
    let placement = Placement {
        dir: dir.to_path_buf(),
        docroot: docroot.to_path_buf(),
        addr,
        as_root: config::running_as_root(),
        tls: tls.cloned(),
    };
    let mut cmd = base_command(program, dir, inner, &spec.limits, spec.netns.as_ref());
    let text = if kind == TargetKind::Xandikos {
        // No configuration file: the command line is the configuration.
        let args = config::xandikos_args(dir, addr);
        cmd.args(&args);
        format!("{} {}\n", program.display(), args.join(" "))
    } else {
        let text = config::render(kind, &spec.settings, &placement).unwrap_or_default();
        let conf = dir.join(config::config_file_name(kind));
        std::fs::write(&conf, &text).map_err(TargetError::io("writing the server config"))?;
        cmd.args(config::command_args(kind, dir, &conf));
        text
    };
    cmd.stdout(log_file(dir, "stdout.log")?)
        .stderr(log_file(dir, "stderr.log")?);
    if kind.is_caldav_server() {
        // Python servers read per-user config and caches from $HOME / XDG dirs: keep
        // them in the private directory, and unbuffer their logs for the error line.
        cmd.env("HOME", dir)
            .env("XDG_DATA_HOME", dir.join("data"))
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .env("XDG_CACHE_HOME", dir.join("tmp"))
            .env("PYTHONUNBUFFERED", "1");
    }
    if kind == TargetKind::Caddy {
        // Caddy keeps state under $HOME / XDG dirs: keep it in the private dir.
        cmd.env("HOME", dir)
            .env("XDG_DATA_HOME", dir.join("data"))
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .env("GOMAXPROCS", spec.settings.workers.max(1).to_string());
    }
    let child = cmd.spawn().map_err(|e| spawn_err(kind, program, e))?;
    inner.note(|e| e.spawned(child.id()));
    inner.child = Some(child);
    Ok((addr, text))
}

fn launch_builtin(ctx: &LaunchCtx, inner: &mut Inner) -> Result<(SocketAddr, String), Launch> {
    let LaunchCtx {
        spec,
        program,
        dir,
        docroot,
        tls,
        ..
    } = *ctx;
    let listen = match &spec.netns {
        Some(p) => SocketAddr::new(p.ip, 0).to_string(),
        None => "127.0.0.1:0".to_string(),
    };
    let mut cmd = base_command(program, dir, inner, &spec.limits, spec.netns.as_ref());
    // With DAV accounts the server's root is a private tree (each account's home is
    // provisioned there at start), never the caller's docroot.
    let dav_paths = spec
        .settings
        .dav
        .map(|_| crate::config::DavPaths::in_dir(dir));
    let root = dav_paths.as_ref().map_or(docroot, |p| p.tree.as_path());
    if let Some(p) = &dav_paths {
        std::fs::create_dir_all(&p.tree)
            .map_err(TargetError::io("creating the built-in server's DAV tree"))?;
    }
    cmd.arg("serve")
        .arg("--root")
        .arg(root)
        .arg("--listen")
        .arg(&listen)
        .stdout(Stdio::piped())
        .stderr(log_file(dir, "stderr.log")?);
    let mut config_text = format!(
        "{} serve --root {} --listen {listen}",
        program.display(),
        root.display()
    );
    if let Some(p) = &dav_paths {
        cmd.arg("--users").arg(&p.users_file);
        config_text += &format!(" --users {}", p.users_file.display());
    }
    // Its event-loop threads are the kind's workers (the knob and `workers`), and its
    // access log goes into the private directory as every kind's does.
    let threads = spec.settings.workers.max(1);
    if threads > 1 {
        cmd.arg("--threads").arg(threads.to_string());
        config_text += &format!(" --threads {threads}");
    }
    if spec.settings.access_log {
        let log = dir.join("access.log");
        cmd.arg("--access-log").arg(&log);
        config_text += &format!(" --access-log {}", log.display());
    }
    if !spec.settings.http2 {
        // Offer h2 only when asked, as the configured servers do: a run without
        // HTTP/2 must not have it negotiated by ALPN.
        cmd.arg("--http1-only");
        config_text += " --http1-only";
    }
    if spec.settings.http3 {
        cmd.arg("--h3");
        config_text += " --h3";
    }
    if let Some(t) = tls {
        cmd.arg("--tls-cert")
            .arg(&t.cert)
            .arg("--tls-key")
            .arg(&t.key);
        config_text += &format!(
            " --tls-cert {} --tls-key {}",
            t.cert.display(),
            t.key.display()
        );
    }
    if let Some(c) = spec.settings.compression {
        config_text += &precompressed_note(c);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| spawn_err(TargetKind::Builtin, program, e))?;
    let stdout = child.stdout.take();
    inner.note(|e| e.spawned(child.id()));
    inner.child = Some(child);
    let addr = read_banner(stdout, dir, spec.start_wait(), inner)?;
    Ok((addr, config_text))
}

/// The built-in server's banner line read from its stdout (then stdout drained into
/// `stdout.log`), as the address it listens on; a server that exits or stays silent past
/// `timeout` is refused with its first error line.
fn read_banner(
    stdout: Option<std::process::ChildStdout>,
    dir: &Path,
    timeout: Duration,
    inner: &mut Inner,
) -> Result<SocketAddr, Launch> {
    let Some(stdout) = stdout else {
        return Err(Launch::Failed(TargetError::BadBanner {
            line: String::new(),
        }));
    };
    let mut rest = log_file(dir, "stdout.log")?;
    let (tx, rx) = std::sync::mpsc::channel();
    // Reads the banner, then keeps draining stdout into a file so the server never
    // blocks on a full pipe.
    std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut line = String::new();
        let _ = tx.send(r.read_line(&mut line).map(|_| line));
        let _ = std::io::copy(&mut r, &mut rest);
        let _ = rest.flush();
    });
    let line = match rx.recv_timeout(timeout) {
        Ok(Ok(line)) => line,
        _ => {
            return Err(Launch::Failed(match inner.exit_status() {
                Some(status) => TargetError::Rejected {
                    kind: TargetKind::Builtin,
                    exit_status: status,
                    first_line: first_error_line(dir),
                },
                None => TargetError::StartTimeout {
                    kind: TargetKind::Builtin,
                    url: "(no banner yet)".into(),
                    timeout,
                    last: "no 'listening on' line on stdout".into(),
                    dir: dir.to_path_buf(),
                },
            }))
        }
    };
    let addr = parse_banner(&line).ok_or_else(|| TargetError::BadBanner {
        line: line.trim_end().to_string(),
    })?;
    Ok(addr)
}

/// The configuration text's note on compression: the built-in server does not compress on
/// the fly, it serves the `.gz` / `.br` siblings `precompress` wrote before the start.
fn precompressed_note(c: Compression) -> String {
    format!(
        "\n# compression: precompressed siblings written by volley ({})",
        c.encodings()
            .iter()
            .map(|e| match *e {
                "br" => format!(".br at quality {}", c.brotli_level),
                _ => format!(".gz at level {}", c.gzip_level),
            })
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// `listening on http://127.0.0.1:PORT/` (or `https://`) -> the address.
pub fn parse_banner(line: &str) -> Option<SocketAddr> {
    let line = line.trim();
    let rest = line
        .strip_prefix("listening on http://")
        .or_else(|| line.strip_prefix("listening on https://"))?;
    rest.trim_end_matches('/').parse().ok()
}

/// Waits until the server answers `expected` correctly (`dav_ready`: until it answers
/// OPTIONS at all: a CalDAV server has no file to compare).
#[allow(clippy::too_many_arguments)]
fn wait_ready(
    inner: &mut Inner,
    dir: &Path,
    addr: SocketAddr,
    scheme: &str,
    expected: &Expected,
    opts: &ProbeOptions,
    timeout: Duration,
    dav_ready: bool,
) -> Result<Validated, Launch> {
    let deadline = Instant::now() + timeout;
    let mut last = String::from("not probed yet");
    let mut wrong = 0;
    loop {
        if let Some(status) = inner.exit_status() {
            let text = read_logs(dir).to_ascii_lowercase();
            if text.contains("address already in use") || text.contains("address in use") {
                return Err(Launch::AddrInUse);
            }
            return Err(Launch::Failed(TargetError::Rejected {
                kind: inner.kind,
                exit_status: status,
                first_line: first_error_line(dir),
            }));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Launch::Failed(TargetError::StartTimeout {
                kind: inner.kind,
                url: format!("{scheme}://{addr}{}", expected.path),
                timeout,
                last,
                dir: dir.to_path_buf(),
            }));
        }
        let each = left.min(Duration::from_secs(2));
        let answer = if dav_ready {
            volley_office::capabilities::responds(addr, each)
                .map(|_| Validated::default())
                .map_err(|e| match e.kind {
                    volley_engine::ErrorKind::Malformed => ProbeFailure::Wrong(e.to_string()),
                    _ => ProbeFailure::NotReady(e.to_string()),
                })
        } else {
            probe::probe(addr, expected, opts, each)
        };
        match answer {
            Ok(v) => return Ok(v),
            Err(ProbeFailure::NotReady(e)) => {
                wrong = 0;
                last = e;
            }
            // A server may answer from a half-initialised state for a moment; three
            // wrong answers in a row are its real answer.
            Err(ProbeFailure::Wrong(e)) => {
                wrong += 1;
                if wrong >= 3 {
                    return Err(Launch::Failed(TargetError::WrongAnswer {
                        kind: inner.kind,
                        url: format!("{scheme}://{addr}{}", expected.path),
                        reason: e,
                    }));
                }
                last = e;
            }
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

pub(super) fn read_logs(dir: &Path) -> String {
    ["stderr.log", "error.log", "stdout.log"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(dir.join(f)).ok())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first line of the server's output that looks like an error (servers print
/// notices first), else the first non-empty line.
fn first_error_line(dir: &Path) -> String {
    pick_error_line(&read_logs(dir))
}

/// Pure part of [`first_error_line`].
pub fn pick_error_line(text: &str) -> String {
    const MARKS: [&str; 9] = [
        "emerg", "error", "fail", "syntax", "invalid", "unknown", "cannot", "can't", "denied",
    ];
    let lines = || text.lines().map(str::trim).filter(|l| !l.is_empty());
    lines()
        .find(|l| {
            let low = l.to_ascii_lowercase();
            MARKS.iter().any(|m| low.contains(m))
        })
        .or_else(|| lines().next())
        .unwrap_or("(no output)")
        .chars()
        .take(400)
        .collect()
}

pub(super) fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
