//! `volley bench --h3`, end to end: the real binary against a real Caddy (Debian's
//! 2.6 speaks RFC 9114) started here on loopback with a certificate from volley's
//! throw-away CA. Request counts must equal Caddy's access-log lines, closed and open
//! loop; a target with nothing on UDP, an untrusted certificate and bad flag
//! combinations each give one line; `--target caddy --h3` starts a managed Caddy that
//! offers it. A server that misbehaves on purpose (tests/h3_server.py, over aioquic)
//! has its faults counted by kind while the run goes on.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;
use volley_engine::volley_tls::certs;

use crate::common::{self, Spawned};

/// Bytes of the file the load fetches.
const FILE_BYTES: usize = 1000;

/// Bytes of the file that keeps a connection's streams busy (about a second for four
/// at once in a debug build, several times a handshake) so that an open loop opens
/// more connections, after the first one's session ticket came.
const BIG_BYTES: usize = 2_000_000;

fn bench(args: &[&str]) -> Output {
    bench_with(args, &[])
}

/// `volley bench` with `env` set (switches such as `VOLLEY_QPACK_TABLE`).
fn bench_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_volley"))
        .arg("bench")
        .args(["--timeout", "5s"])
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn json(args: &[&str]) -> serde_json::Value {
    json_with(args, &[])
}

fn json_with(args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["-q", "--json"]);
    let out = bench_with(&all, env);
    assert!(
        out.status.success(),
        "volley bench {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Caddy serving `site/` over h1, h2 and h3 on one free port (TCP and UDP), with an
/// access log; `None` (test skipped, said on stderr) where Caddy is not installed.
struct Caddy {
    server: Spawned,
    ca: PathBuf,
}

impl Caddy {
    fn start(tag: &str) -> Option<Caddy> {
        if Command::new("caddy").arg("version").output().is_err() {
            eprintln!("skipped: caddy is not installed");
            return None;
        }
        let dir = common::fresh_dir(&format!("volley-h3-{tag}"));
        std::fs::create_dir_all(dir.join("site")).unwrap();
        std::fs::write(dir.join("site/k1"), vec![b'k'; FILE_BYTES]).unwrap();
        std::fs::write(dir.join("site/big"), vec![b'b'; BIG_BYTES]).unwrap();
        let paths = certs::write_local_set(&dir.join("certs")).unwrap();
        let port = common::free_port();
        let d = |p: &Path| p.display().to_string();
        let caddyfile = format!(
            "{{\n  admin off\n  auto_https off\n  default_sni 127.0.0.1\n  ocsp_stapling off\n  \
             storage file_system {dir}/data\n  servers {{\n    protocols h1 h2 h3\n  }}\n}}\n\
             https://127.0.0.1:{port} {{\n  bind 127.0.0.1\n  tls {cert} {key}\n  \
             root * {dir}/site\n  file_server\n  log {{\n    output file {dir}/access.log\n  }}\n}}\n",
            dir = d(&dir),
            cert = d(&paths.cert),
            key = d(&paths.key),
        );
        std::fs::write(dir.join("Caddyfile"), caddyfile).unwrap();
        let mut cmd = Command::new("caddy");
        cmd.args(["run", "--adapter", "caddyfile", "--config"])
            .arg(dir.join("Caddyfile"))
            // Keep Caddy's autosave and data out of the user's home.
            .env("HOME", &dir)
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .env("XDG_DATA_HOME", dir.join("data"));
        let server = common::spawn_listening(cmd, dir, port);
        let caddy = Caddy {
            server,
            ca: paths.ca,
        };
        caddy.wait_for_udp();
        Some(caddy)
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}/k1", self.server.port)
    }

    fn ca(&self) -> &str {
        self.ca.to_str().unwrap()
    }

    /// Caddy opens its UDP listener beside the TCP one; a one-request run says when
    /// it answers (bounded: 30 tries over at most 15 s).
    fn wait_for_udp(&self) {
        for _ in 0..30 {
            let out = bench(&[&self.url(), "--h3", "--cacert", self.ca(), "-n", "1", "-q"]);
            if out.status.success() {
                self.wait_log_lines(1);
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        panic!("caddy never answered over HTTP/3");
    }

    /// Access-log lines, once their count stopped changing (Caddy writes them after
    /// each response; waits at most 5 s for `at_least`).
    fn wait_log_lines(&self, at_least: usize) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let read = || -> Vec<serde_json::Value> {
            let dir = self.server.dir.as_ref().expect("caddy's directory");
            std::fs::read_to_string(dir.join("access.log"))
                .unwrap_or_default()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        };
        let mut lines = read();
        while lines.len() < at_least && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            lines = read();
        }
        std::thread::sleep(Duration::from_millis(200));
        read()
    }
}

/// Requests answered over HTTP/3 in Caddy's log since `before` lines.
fn h3_lines(lines: &[serde_json::Value], before: usize) -> usize {
    lines[before..]
        .iter()
        .filter(|l| l["request"]["proto"] == "HTTP/3.0")
        .count()
}

#[test]
fn caddy_over_h3_closed_and_open_loop_counts_match_its_access_log() {
    let Some(caddy) = Caddy::start("counts") else {
        return;
    };
    let url = caddy.url();
    let size = FILE_BYTES.to_string();

    // Closed loop: 3 connections x 4 streams, every body checked.
    let before = caddy.wait_log_lines(0).len();
    let v = json(&[
        &url,
        "--h3",
        "--cacert",
        caddy.ca(),
        "-n",
        "300",
        "-c",
        "3",
        "--streams",
        "4",
        "--expect-size",
        &size,
    ]);
    let run = &v["runs"][0];
    assert_eq!(run["requests"]["ok"], 300, "{run}");
    assert_eq!(run["wire"]["protocol"], "h3");
    assert_eq!(run["wire"]["h3"]["handshake_failures"], 0);
    assert_eq!(run["wire"]["h3"]["handshakes"], 3, "one per connection");
    assert_eq!(run["wire"]["tls"]["negotiated_alpn"], "h3");
    assert_eq!(
        run["bytes"]["body_total"],
        300 * FILE_BYTES as u64,
        "{}",
        run["bytes"]
    );
    let lines = caddy.wait_log_lines(before + 300);
    assert_eq!(lines.len() - before, 300, "Caddy logged another count");
    assert_eq!(h3_lines(&lines, before), 300, "not all served over HTTP/3");

    // Open loop: 200 req/s for 1.5 s, each arrival one sample.
    let before = lines.len();
    let v = json(&[
        &url,
        "--h3",
        "--cacert",
        caddy.ca(),
        "--rate",
        "200",
        "-d",
        "1500ms",
        "-c",
        "2",
        "--streams",
        "8",
    ]);
    let run = &v["runs"][0];
    let ok = run["requests"]["ok"].as_u64().unwrap();
    let sent = run["requests"]["sent"].as_u64().unwrap();
    // How many of the ~300 arrivals were answered within the 1.5 s depends on how
    // busy the machine is (timing never decides this test); what must hold is that
    // each request sent was answered or still in flight at the end, none failed.
    let censored = run["requests"]["censored"].as_u64().unwrap();
    assert!(ok > 0 && ok + censored == sent, "{run}");
    assert_eq!(run["requests"]["failed"], 0, "{run}");
    // Requests still in flight when the run ended (censored) may or may not have
    // reached Caddy's log: every answered one did, and nothing unsent did.
    let lines = caddy.wait_log_lines(before + ok as usize);
    let logged = (lines.len() - before) as u64;
    assert!(
        (ok..=sent).contains(&logged),
        "Caddy logged {logged}, ok {ok}, sent {sent}"
    );
    assert_eq!(h3_lines(&lines, before) as u64, logged);
}

/// An open loop of 24 arrivals (each then waited for, up to the 5 s timeout) on the
/// big file with one initial connection of 4 streams: the
/// arrivals of the first 200 ms wait on it (so a handshake may take that long), and
/// once its 4 streams are busy each arrival opens another connection (up to 4),
/// after the first one's handshake and so with its session ticket in the cache.
/// Both spans grow alike on a busy machine (handshake and transfer are both CPU).
/// Returns the run and Caddy's log length before it.
fn churn(caddy: &Caddy, extra: &[&str]) -> (serde_json::Value, usize) {
    let url = caddy.url().replace("/k1", "/big");
    // On an idle machine the file goes fast enough that 20/s never fills the first
    // connection: the next rates shorten the window (4 streams / rate) until the load
    // opens more connections (at most three runs).
    let mut last = (serde_json::Value::Null, 0);
    for rate in ["20", "100", "400"] {
        let mut args = vec![
            url.as_str(),
            "--h3",
            "--cacert",
            caddy.ca(),
            "--rate",
            rate,
            "-n",
            "24",
            "-c",
            "1",
            "--streams",
            "4",
            "--max-connections",
            "4",
        ];
        args.extend(extra);
        let before = caddy.wait_log_lines(0).len();
        last = (json(&args)["runs"][0].clone(), before);
        if last.0["wire"]["h3"]["handshakes"].as_u64() >= Some(2) {
            break;
        }
    }
    last
}

/// (handshakes, full, resumed, 0-RTT) of a run, checked to add up.
fn kinds(run: &serde_json::Value) -> (u64, u64, u64, u64) {
    let h3 = &run["wire"]["h3"];
    let n = |k: &str| h3[k]["count"].as_u64().unwrap();
    let all = h3["handshakes"].as_u64().unwrap();
    let (full, resumed, zero) = (
        n("handshakes_full"),
        n("handshakes_resumed"),
        n("handshakes_0rtt"),
    );
    assert_eq!(
        full + resumed + zero,
        all,
        "every handshake has a kind: {h3}"
    );
    assert!(
        all >= 2,
        "the load opened too few connections to tell: {run}"
    );
    assert_eq!(h3["handshake_failures"], 0, "{h3}");
    for k in ["handshakes_full", "handshakes_resumed", "handshakes_0rtt"] {
        let mean = h3[k]["mean_ms"].as_f64().unwrap();
        assert_eq!(mean > 0.0, n(k) > 0, "{k} timed: {h3}");
    }
    (all, full, resumed, zero)
}

#[test]
fn caddy_over_h3_resumes_and_takes_0rtt_when_offered() {
    let Some(caddy) = Caddy::start("resume") else {
        return;
    };
    // Resumption on, early data off (the default): the first connection pays a full
    // handshake, later ones resume; nothing is sent early.
    let (run, _) = churn(&caddy, &[]);
    let (all, full, resumed, zero) = kinds(&run);
    assert!(
        full >= 1 && resumed >= 1,
        "{all} = {full} + {resumed} + {zero}"
    );
    assert_eq!(zero, 0);
    assert_eq!(run["wire"]["h3"]["early_data"], false);
    assert_eq!(run["wire"]["tls"]["full_handshakes"], full);

    // Early data on: Caddy (quic-go) accepts 0-RTT, so later connections send their
    // GET in the first flight.
    let (run, before) = churn(&caddy, &["--early-data", "on"]);
    let (all, full, resumed, zero) = kinds(&run);
    let h3 = &run["wire"]["h3"];
    assert!(
        full >= 1 && zero >= 1,
        "{all} = {full} + {resumed} + {zero}: {h3}"
    );
    assert_eq!(h3["zero_rtt_rejected"], 0, "{h3}");
    assert!(h3["early_requests"].as_u64().unwrap() >= zero, "{h3}");
    // Early requests are requests like any: answered once each, logged once each.
    let ok = run["requests"]["ok"].as_u64().unwrap();
    let sent = run["requests"]["sent"].as_u64().unwrap();
    let lines = caddy.wait_log_lines(before + ok as usize);
    let logged = (lines.len() - before) as u64;
    assert!(
        (ok..=sent).contains(&logged),
        "logged {logged}, ok {ok}, sent {sent}"
    );
    // Every answered request got the whole file (bodies cut off at the end add more).
    let bodies = run["bytes"]["body_total"].as_u64().unwrap();
    assert!(bodies >= ok * BIG_BYTES as u64, "{bodies} bytes for {ok}");

    // Resumption off: every connection pays a full handshake.
    let (run, _) = churn(&caddy, &["--tls-resume", "off"]);
    let (all, full, _, _) = kinds(&run);
    assert_eq!(full, all);
}

#[test]
fn h3_failures_are_one_line() {
    // Nothing on UDP at all: refused at once, not after the connect timeout.
    let port = common::free_port().to_string();
    let url = format!("https://127.0.0.1:{port}/");
    let started = Instant::now();
    let out = bench(&[&url, "--h3", "--insecure", "-n", "5"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no HTTP/3"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5), "{err}");

    // Usage errors: exit 2, one line.
    for (args, says) in [
        (vec!["http://127.0.0.1:1/", "--h3", "-n", "1"], "https://"),
        (
            vec!["https://127.0.0.1:1/", "--h3", "--h2", "-n", "1"],
            "--h2",
        ),
        (
            vec![
                "https://127.0.0.1:1/",
                "--h3",
                "--tls-version",
                "1.2",
                "-n",
                "1",
            ],
            "TLS 1.3",
        ),
        (
            vec!["https://127.0.0.1:1/", "--early-data", "on", "-n", "1"],
            "needs --h3",
        ),
        (
            vec![
                "https://127.0.0.1:1/",
                "--h3",
                "--early-data",
                "on",
                "--tls-resume",
                "off",
                "-n",
                "1",
            ],
            "--tls-resume on",
        ),
    ] {
        let out = bench(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn caddy_over_h3_with_an_untrusted_certificate_names_the_cause() {
    let Some(caddy) = Caddy::start("trust") else {
        return;
    };
    // Without --cacert the throw-away CA is unknown: a TLS failure, named.
    let out = bench(&[&caddy.url(), "--h3", "-n", "4"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("4 TLS failures"), "{err}");
    assert!(err.contains("--cacert"), "{err}");
}

#[test]
fn managed_caddy_target_over_h3_and_kinds_without_it_refused() {
    if Command::new("caddy").arg("version").output().is_err() {
        eprintln!("skipped: caddy is not installed");
        return;
    }
    let (code, out, err) = common::volley(&[
        "bench",
        "--target",
        "caddy",
        "--tls",
        "--h3",
        "-n",
        "200",
        "-c",
        "2",
        "--streams",
        "4",
        "--compressed",
        "gzip",
        "--first-request",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON on stdout");
    let run = &v["runs"][0];
    assert_eq!(run["wire"]["protocol"], "h3");
    assert_eq!(run["requests"]["ok"], 200, "{run}");
    assert_eq!(run["wire"]["tls"]["negotiated_alpn"], "h3");
    // Every body gzip-coded as asked and decoded; the cold request went over h3 too.
    assert_eq!(run["wire"]["compression"], "gzip");
    assert_eq!(
        run["first_request"]["status"], 200,
        "{}",
        run["first_request"]
    );
    // nginx 1.22 has no HTTP/3: refused before anything starts.
    let (code, _, err) =
        common::volley(&["bench", "--target", "nginx", "--tls", "--h3", "-n", "1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot offer HTTP/3"), "{err}");
}

/// The Python with aioquic (scripts/install-aioquic.sh).
const VENV_PYTHON: &str = "/opt/volley-venv/bin/python";

/// tests/h3_server.py in `mode` on `port` with the certificate in `paths`, once it
/// says it listens (it exits by itself after 60 s; killed on drop before that). Started
/// directly, not under `timeout`: a killed `timeout` leaves its child running, and each
/// test left its servers behind for their 60 s.
fn misbehaving_server(mode: &str, port: u16, paths: &certs::CertPaths) -> Spawned {
    use std::io::BufRead;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/h3_server.py");
    let mut child = Command::new(VENV_PYTHON)
        .arg(script)
        .arg(port.to_string())
        .args([&paths.cert, &paths.key])
        .arg(mode)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start tests/h3_server.py");
    let mut line = String::new();
    let stdout = child.stdout.take().unwrap();
    let _ = std::io::BufReader::new(stdout).read_line(&mut line);
    // The script keeps nothing on disk: no directory of its own.
    let server = Spawned {
        child,
        dir: None,
        port,
    };
    assert_eq!(
        line.trim(),
        "ready",
        "tests/h3_server.py {mode} did not start"
    );
    server
}

/// Whether tests/h3_server.py can run (said on stderr when not).
fn have_aioquic() -> bool {
    let have = Command::new(VENV_PYTHON)
        .args(["-c", "import aioquic"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        eprintln!("skipped: aioquic is not installed (scripts/install-aioquic.sh)");
    }
    have
}

/// tests/h3_server.py's certificates, in a scratch directory removed on drop.
struct Scripted {
    /// Held for its drop, which removes the certificates.
    _dir: common::TestDir,
    paths: certs::CertPaths,
}

impl Scripted {
    /// `None` (said on stderr) where aioquic is not installed.
    fn new(tag: &str) -> Option<Scripted> {
        if !have_aioquic() {
            return None;
        }
        let dir = common::fresh_dir(&format!("volley-h3-{tag}"));
        let paths = certs::write_local_set(&dir.join("certs")).unwrap();
        Some(Scripted { _dir: dir, paths })
    }

    /// tests/h3_server.py in `mode` on a free port, and its URL.
    fn start(&self, mode: &str) -> (Spawned, String) {
        let port = common::free_port();
        let server = misbehaving_server(mode, port, &self.paths);
        (server, format!("https://127.0.0.1:{port}/x"))
    }

    /// `volley bench --h3 -n N -c C --streams S` (with `env`) against the script in
    /// `mode`: its run's JSON.
    fn run(&self, mode: &str, n: &str, c: &str, streams: &str, env: &[(&str, &str)]) -> Value {
        let (_server, url) = self.start(mode);
        let ca = self.paths.ca.to_str().unwrap();
        let args = [
            url.as_str(),
            "--h3",
            "--cacert",
            ca,
            "-n",
            n,
            "-c",
            c,
            "--streams",
            streams,
        ];
        json_with(&args, env)["runs"][0].clone()
    }
}

/// aioquic's QPACK encoder (pylsqpack, over ls-qpack) uses the dynamic table as far
/// as the client allows: with volley's 4 KiB table and no blocked streams it inserts
/// a response's repeated fields and refers to them once volley's decoder stream
/// acknowledged them. Every response decodes, through the table (references and
/// inserts counted, no QPACK error); with `VOLLEY_QPACK_TABLE=off` the same run
/// uses no table at all.
#[test]
fn responses_are_decoded_through_the_servers_qpack_dynamic_table() {
    let Some(script) = Scripted::new("qpack") else {
        return;
    };
    let h3 = |r: &Value, key: &str| r["wire"]["h3"][key].as_u64().unwrap();
    let r = script.run("dynamic", "60", "2", "4", &[]);
    assert_eq!(r["requests"]["ok"], 60, "{r}");
    assert_eq!(h3(&r, "qpack_errors"), 0, "{r}");
    assert!(h3(&r, "qpack_inserts") > 0, "no insert: {r}");
    // The first responses of a connection come before the server learnt of its
    // inserts; the later ones (about 25 a connection) refer to them.
    assert!(h3(&r, "qpack_dynamic_refs") >= 10, "{r}");
    let r = script.run("dynamic", "60", "2", "4", &[("VOLLEY_QPACK_TABLE", "off")]);
    assert_eq!(r["requests"]["ok"], 60, "{r}");
    assert_eq!(h3(&r, "qpack_inserts"), 0, "{r}");
    assert_eq!(h3(&r, "qpack_dynamic_refs"), 0, "{r}");
}

/// Every third request stream of a connection misbehaves: reset, a frame type
/// reserved for HTTP/2, a HEADERS frame declaring 1 MB, a QPACK section that refers to
/// a dynamic entry never inserted, a CONNECTION_CLOSE halfway through a body. Each is
/// counted by its kind, every request is accounted for, and the run goes on to its
/// end (new connections after a fatal error). A server that starts with room for 2
/// request streams (and raises it only as they are used) against `--streams 4`:
/// every request answered, the waits counted.
#[test]
fn a_misbehaving_h3_server_is_counted_by_kind_and_the_run_goes_on() {
    let Some(script) = Scripted::new("faults") else {
        return;
    };
    for (mode, kind, counter) in [
        ("reset", "reset", "stream_resets"),
        ("frame", "malformed", "connection_errors"),
        ("oversized", "malformed", "connection_errors"),
        ("qpack", "malformed", "qpack_errors"),
        ("close", "closed", "peer_closes"),
    ] {
        let r = script.run(mode, "30", "1", "2", &[]);
        let n = |v: &Value| v.as_u64().unwrap_or_else(|| panic!("{mode}: {r}"));
        let (ok, failed) = (n(&r["requests"]["ok"]), n(&r["errors"][kind]));
        assert_eq!(n(&r["requests"]["completed"]), 30, "{mode}: {r}");
        assert!(ok >= 10 && failed >= 5, "{mode}: {r}");
        assert_eq!(ok + failed, 30, "{mode}: another kind of error: {r}");
        assert!(n(&r["wire"]["h3"][counter]) > 0, "{mode}: {r}");
        if mode == "close" {
            assert_eq!(r["wire"]["h3"]["last_close_code"], 0x102, "{r}");
        }
    }
    let r = script.run("limit", "30", "1", "4", &[]);
    assert_eq!(r["requests"]["ok"], 30, "{r}");
    assert!(
        r["wire"]["h3"]["stream_limit_waits"].as_u64() > Some(0),
        "{r}"
    );
    // A server that never grants a request stream: each request times out from its
    // intended instant, and a `-n` run ends instead of waiting for ever.
    let (_server, url) = script.start("frozen");
    let ca = script.paths.ca.to_str().unwrap();
    let out = bench(&[
        url.as_str(),
        "--h3",
        "--cacert",
        ca,
        "-n",
        "2",
        "-c",
        "1",
        "-q",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no request succeeded: 2 timeout errors"),
        "{err}"
    );
}
