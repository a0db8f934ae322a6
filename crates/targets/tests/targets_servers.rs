//! Real servers on loopback: start, validate, load with a bounded keep-alive burst,
//! monitor, stop, and check nothing is left behind. A server whose binary is absent is
//! skipped with a message (CI installs them all with scripts/install-deps.sh).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use volley_monitor::{Monitor, MonitorConfig, ProcessScope};
use volley_targets::{start, CpuQuota, TargetError, TargetKind, TargetSpec};

const PAGE: &[u8] = b"<!doctype html><title>t</title><p>volley test page, 64 bytes....</p>\n";

/// A small docroot in its own temp dir (removed on drop, by the guard).
struct Docroot {
    path: PathBuf,
    /// Removes `path` when the docroot drops.
    _guard: tempfile::TempDir,
}

impl Docroot {
    fn new(tag: &str) -> Docroot {
        let guard = temp_dir(&format!("volley-test-www-{tag}-"));
        let d = guard.path().to_path_buf();
        std::fs::write(d.join("index.html"), PAGE).unwrap();
        Docroot {
            path: d,
            _guard: guard,
        }
    }
}

/// A fresh directory `PREFIX-XXXXXX` in the temporary directory, removed when the guard
/// drops: when the test ends, and also when it panics. Mode 0755 like a directory made
/// with `create_dir`: a server started as root reads it from workers of another user.
fn temp_dir(prefix: &str) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn installed(kind: TargetKind) -> bool {
    let p = kind.program().unwrap();
    if volley_targets::kind::find_program(p).is_none() {
        eprintln!("skipping {kind}: {p} is not installed (scripts/install-servers.sh)");
        return false;
    }
    true
}

/// Sends up to `n` keep-alive GETs (reconnecting when the server closes), stopping at
/// `max_time`; returns the number of correct 200 responses.
fn burst(addr: SocketAddr, n: u32, max_time: Duration) -> u32 {
    let until = Instant::now() + max_time;
    let req = format!("GET /index.html HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    let mut ok = 0;
    let mut conn: Option<TcpStream> = None;
    let mut sent = 0;
    while sent < n && Instant::now() < until {
        let s = match conn.as_mut() {
            Some(s) => s,
            None => {
                let s = TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                conn.insert(s)
            }
        };
        sent += 1;
        if s.write_all(req.as_bytes()).is_err() {
            conn = None;
            continue;
        }
        match read_response(s) {
            Some((200, body, close)) => {
                assert_eq!(body, PAGE);
                ok += 1;
                if close {
                    conn = None;
                }
            }
            _ => conn = None,
        }
    }
    ok
}

fn read_response(s: &mut TcpStream) -> Option<(u16, Vec<u8>, bool)> {
    let mut buf = Vec::with_capacity(1024);
    let mut byte = [0u8; 4096];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let n = s.read(&mut byte).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&byte[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let status: u16 = head.split_whitespace().nth(1)?.parse().ok()?;
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))?
        .trim()
        .parse()
        .ok()?;
    let close = head.contains("connection: close");
    while buf.len() < head_end + len {
        let n = s.read(&mut byte).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&byte[..n]);
    }
    Some((status, buf[head_end..head_end + len].to_vec(), close))
}

fn gone(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

fn run_server(kind: TargetKind, keep_alive: bool) {
    if !installed(kind) {
        return;
    }
    let www = Docroot::new(kind.name());
    let mut spec = TargetSpec::new(kind);
    spec.docroot = Some(www.path.clone());
    spec.settings.workers = 2;
    spec.settings.keep_alive = keep_alive;
    let t = start(&spec).unwrap_or_else(|e| panic!("{kind}: {e}"));
    assert!(t.url.starts_with("http://127.0.0.1:"), "{}", t.url);
    assert!(t.version.is_some(), "{kind} version");
    assert!(!t.config_text.is_empty());
    let pid = t.pid.unwrap();
    let dir = t.dir.clone();
    let origin = Instant::now();
    let mut cfg = MonitorConfig::new(ProcessScope::Tree { root_pid: pid }, origin);
    cfg.interval = Duration::from_millis(200);
    let mon = Monitor::start(cfg).unwrap();
    let n = if keep_alive { 2000 } else { 500 };
    let ok = burst(t.addr, n, Duration::from_secs(8));
    let report = mon.finish();
    assert!(
        ok >= n * 9 / 10,
        "{kind}: only {ok} of {n} correct responses"
    );
    t.check().unwrap_or_else(|e| panic!("{kind} died: {e}"));
    let cpu = report.summary.server_cpu_seconds.unwrap();
    assert!(cpu > 0.0, "{kind}: monitor saw no server CPU time");
    assert!(report.summary.max_rss_bytes.unwrap() > 0);
    eprintln!(
        "{kind}: {ok} ok, server cpu {cpu:.3}s = {:.2} ms per 1000 req, {} processes",
        report.summary.cpu_ms_per_1000_requests(ok as u64).unwrap(),
        report
            .samples
            .last()
            .and_then(|s| s.target.as_ref())
            .map_or(0, |t| t.processes)
    );
    let left = t.stop();
    assert!(left.is_empty(), "cgroups left: {left:?}");
    assert!(gone(pid), "{kind}: pid {pid} still exists");
    assert!(!dir.exists(), "{kind}: {} still exists", dir.display());
}

#[test]
fn nginx_serves_validated_and_cleans_up() {
    run_server(TargetKind::Nginx, true);
}

#[test]
fn apache_event_serves_validated_and_cleans_up() {
    run_server(TargetKind::ApacheEvent, true);
}

#[test]
fn apache_prefork_without_keep_alive() {
    run_server(TargetKind::ApachePrefork, false);
}

#[test]
fn lighttpd_serves_validated_and_cleans_up() {
    run_server(TargetKind::Lighttpd, true);
}

#[test]
fn caddy_serves_validated_and_cleans_up() {
    run_server(TargetKind::Caddy, true);
}

#[test]
fn killed_target_is_reported_by_check() {
    if !installed(TargetKind::Nginx) {
        return;
    }
    let mut spec = TargetSpec::new(TargetKind::Nginx);
    spec.settings.workers = 1;
    let t = start(&spec).unwrap();
    let pid = t.pid.unwrap();
    t.check().unwrap();
    // SAFETY: pid is the nginx master this test started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let deadline = Instant::now() + Duration::from_secs(5);
    let died = loop {
        match t.check() {
            Err(d) => break d,
            Ok(()) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(()) => panic!("check() never noticed the SIGKILL"),
        }
    };
    assert_eq!(died.pid, pid);
    assert!(died.exit_status.contains("SIGKILL"), "{}", died.exit_status);
    assert!(died.to_string().contains("last log lines"));
    let dir = t.dir.clone();
    t.stop();
    assert!(gone(pid));
    assert!(!dir.exists());
}

#[test]
fn rejected_config_shows_the_servers_error_and_leaves_nothing() {
    if !installed(TargetKind::Nginx) {
        return;
    }
    // A docroot whose name holds a double quote breaks nginx's quoted `root` directive:
    // nginx refuses the configuration and exits.
    let www = Docroot::new("bad\"quote");
    let mut spec = TargetSpec::new(TargetKind::Nginx);
    spec.docroot = Some(www.path.clone());
    let before = volley_dirs();
    let e = start(&spec).unwrap_err();
    match &e {
        TargetError::Rejected { first_line, .. } => {
            assert!(first_line.contains("emerg"), "{first_line}")
        }
        other => panic!("expected Rejected, got {other}"),
    }
    assert_eq!(volley_dirs(), before, "private dir left behind");
}

/// The private dirs of this test process in the temp dir.
fn volley_dirs() -> Vec<PathBuf> {
    let tag = format!("-{}-", std::process::id());
    let mut v: Vec<PathBuf> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            n.starts_with("volley-nginx") && n.contains(&tag)
        })
        .collect();
    v.sort();
    v
}

/// A stand-in for `volley serve` (the built-in server is built elsewhere): prints the
/// banner and serves `--root`, or always answers a wrong body when `wrong`.
fn fake_builtin(dir: &Path, wrong: bool) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let handler = if wrong {
        "class H(http.server.BaseHTTPRequestHandler):\n    def log_message(self, *a): pass\n    def do_GET(self):\n        b = b'wrong'\n        self.send_response(200)\n        self.send_header('Content-Type', 'text/html')\n        self.send_header('Content-Length', str(len(b)))\n        self.end_headers()\n        self.wfile.write(b)\nh = H\n"
    } else {
        "class H(http.server.SimpleHTTPRequestHandler):\n    def log_message(self, *a): pass\nh = functools.partial(H, directory=root)\n"
    };
    let script = format!(
        "#!/usr/bin/python3\nimport sys, http.server, functools\nroot = sys.argv[sys.argv.index('--root') + 1]\n{handler}srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), h)\nprint(f'listening on http://127.0.0.1:{{srv.server_port}}/', flush=True)\nsrv.serve_forever()\n"
    );
    let p = dir.join(if wrong { "fake-wrong" } else { "fake-volley" });
    std::fs::write(&p, script).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn builtin_protocol_banner_probe_and_stop() {
    if !Path::new("/usr/bin/python3").exists() {
        eprintln!("skipping: /usr/bin/python3 absent");
        return;
    }
    let www = Docroot::new("builtin");
    let exe = fake_builtin(&www.path, false);
    let mut spec = TargetSpec::new(TargetKind::Builtin);
    spec.docroot = Some(www.path.clone());
    spec.volley_exe = Some(exe);
    let t = start(&spec).unwrap();
    let pid = t.pid.unwrap();
    assert!(t.config_text.contains("serve --root"));
    assert!(burst(t.addr, 20, Duration::from_secs(5)) > 0);
    t.check().unwrap();
    drop(t); // Drop must stop it just like stop() does.
    assert!(gone(pid));
}

#[test]
fn wrong_answer_is_an_error() {
    if !Path::new("/usr/bin/python3").exists() {
        eprintln!("skipping: /usr/bin/python3 absent");
        return;
    }
    let www = Docroot::new("wrong");
    let exe = fake_builtin(&www.path, true);
    let mut spec = TargetSpec::new(TargetKind::Builtin);
    spec.docroot = Some(www.path.clone());
    spec.volley_exe = Some(exe);
    match start(&spec) {
        Err(TargetError::WrongAnswer { reason, .. }) => {
            assert!(reason.contains("Content-Length 5"), "{reason}")
        }
        other => panic!("expected WrongAnswer, got {other:?}"),
    }
}

#[test]
fn cpu_quota_caps_the_server_and_records_throttling() {
    if !installed(TargetKind::Nginx) {
        return;
    }
    let www = Docroot::new("quota");
    let mut spec = TargetSpec::new(TargetKind::Nginx);
    spec.docroot = Some(www.path.clone());
    spec.settings.workers = 2;
    // 10%, not more: on a machine busy with other work the clients get little CPU, and
    // they must still want more than the cap for the kernel to throttle.
    spec.limits.cpu_quota = Some(CpuQuota::of_one_cpu(0.1));
    let t = match start(&spec) {
        Ok(t) => t,
        Err(
            e @ (TargetError::NoCgroupController { .. } | TargetError::CgroupPermission { .. }),
        ) => {
            eprintln!("skipping the quota test: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let cgroups = t.cgroup_dirs();
    assert!(!cgroups.is_empty());
    let before = t.throttle_stats().unwrap();
    let mon = Monitor::start(MonitorConfig::new(
        ProcessScope::Cgroup {
            root_pid: t.pid.unwrap(),
            procs_file: t.procs_file().unwrap(),
        },
        Instant::now(),
    ))
    .unwrap();
    // Two client threads, ~3 s: enough to want more than 10% of a CPU.
    let addr = t.addr;
    let clients: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(move || burst(addr, 200_000, Duration::from_secs(3))))
        .collect();
    let ok: u32 = clients.into_iter().map(|c| c.join().unwrap()).sum();
    let report = mon.finish();
    let throttled = t.throttle_stats().unwrap().since(&before);
    let s = &report.summary;
    let cpu_pct = s.server_cpu_seconds.unwrap() / s.duration_s * 100.0;
    eprintln!(
        "quota 10%: {ok} requests, server CPU {cpu_pct:.1}% of one CPU, throttled {} of {} periods ({} us)",
        throttled.nr_throttled, throttled.nr_periods, throttled.throttled_us
    );
    assert!(ok > 0);
    assert!(cpu_pct <= 25.0, "server used {cpu_pct:.1}% under a 10% cap");
    assert!(
        throttled.nr_throttled > 0,
        "no throttling recorded: {throttled:?}"
    );
    let left = t.stop();
    assert!(left.is_empty());
    for c in cgroups {
        assert!(!c.exists(), "{} left behind", c.display());
    }
}
