//! `volley bench` end to end: the real binary against small servers started here
//! (a std TcpListener answering fixed responses) and, when installed, real nginx.
//! Every server is bound to 127.0.0.1 port 0 and lives at most a bounded time; every
//! load is a few hundred requests. Assertions are on counts and fields, never on speed.

use assert_cmd::Command;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the test server behaves.
#[derive(Clone, Copy)]
pub(crate) enum Mode {
    /// Answer every request 200 "hello".
    Ok,
    /// Answer every request 503.
    Unavailable,
    /// Answer this many requests in total, then stop listening and drop every connection.
    DieAfter(u64),
}

pub(crate) struct TestServer {
    addr: SocketAddr,
    pub(crate) accepted: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl TestServer {
    pub(crate) fn start(mode: Mode) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicU64::new(0));
        let (acc, st) = (accepted.clone(), stop.clone());
        std::thread::spawn(move || {
            // Bounded life: a broken test must not leave a server behind.
            let deadline = Instant::now() + Duration::from_secs(60);
            while !st.load(Ordering::Relaxed) && Instant::now() < deadline {
                match listener.accept() {
                    Ok((sock, _)) => {
                        acc.fetch_add(1, Ordering::Relaxed);
                        let (st, answered) = (st.clone(), answered.clone());
                        std::thread::spawn(move || serve(sock, mode, &st, &answered));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        TestServer {
            addr,
            accepted,
            stop,
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve(sock: TcpStream, mode: Mode, stop: &AtomicBool, answered: &AtomicU64) {
    let _ = sock.set_read_timeout(Some(Duration::from_secs(5)));
    let mut w = sock.try_clone().unwrap();
    let mut r = BufReader::new(sock);
    for _ in 0..100_000 {
        let mut close = false;
        let mut len = 0usize;
        let mut line = String::new();
        let mut first = true;
        loop {
            line.clear();
            match r.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" {
                break;
            }
            if first {
                first = false;
                continue;
            }
            let lower = line.to_ascii_lowercase();
            if lower.starts_with("connection:") && lower.contains("close") {
                close = true;
            }
            if let Some(v) = lower.strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        if let Mode::DieAfter(n) = mode {
            if answered.fetch_add(1, Ordering::Relaxed) >= n {
                stop.store(true, Ordering::Relaxed);
                return;
            }
        }
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let resp: &[u8] = match mode {
            Mode::Unavailable => {
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy"
            }
            _ => b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
        };
        if w.write_all(resp).is_err() || close {
            return;
        }
    }
}

pub(crate) fn volley() -> Command {
    let mut c = Command::cargo_bin("volley").unwrap();
    c.timeout(Duration::from_secs(60));
    c
}

/// Runs `volley ARGS...`, which must succeed (its stderr shown if not): its output.
pub(crate) fn succeeded(args: &[&str]) -> std::process::Output {
    let out = volley().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub(crate) fn json_of(out: &[u8]) -> serde_json::Value {
    serde_json::from_slice(out)
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}", String::from_utf8_lossy(out)))
}

#[test]
fn n_requests_exact_counts_in_json_with_keepalive() {
    let srv = TestServer::start(Mode::Ok);
    let out = succeeded(&[
        "bench",
        &srv.url("/x"),
        "-n",
        "300",
        "-c",
        "4",
        "-k",
        "--json",
    ]);
    let j = json_of(&out.stdout);
    assert_eq!(j["schema_version"], 1);
    let r = &j["runs"][0];
    assert_eq!(r["requests"]["completed"], 300);
    assert_eq!(r["requests"]["ok"], 300);
    assert_eq!(r["requests"]["sent"], 300);
    assert_eq!(r["requests"]["failed"], 0);
    assert_eq!(r["status_codes"]["200"], 300);
    assert_eq!(r["bytes"]["body_total"], 300 * 5);
    assert_eq!(r["model"]["kind"], "closed");
    assert!(r["latency_definition"]
        .as_str()
        .unwrap()
        .starts_with("closed-loop service time"));
    // Keep-alive: 4 connections carry 300 requests.
    let opened = r["connections_stats"]["opened"].as_u64().unwrap();
    assert!((1..=4).contains(&opened), "opened {opened}");
    // The server saw those plus the one pre-flight probe.
    assert!(srv.accepted.load(Ordering::Relaxed) <= 5);
}

#[test]
fn without_keepalive_each_request_opens_a_connection() {
    let srv = TestServer::start(Mode::Ok);
    let out = succeeded(&["bench", &srv.url("/"), "-n", "60", "-c", "2", "--json", "-"]);
    let r = &json_of(&out.stdout)["runs"][0];
    assert_eq!(r["requests"]["ok"], 60);
    assert_eq!(r["connections_stats"]["opened"], 60);
    assert!(srv.accepted.load(Ordering::Relaxed) >= 60);
    assert!(r["connection_times"]["connect"]["count"].as_u64().unwrap() == 60);
}

#[test]
fn json_schema_fields_are_present() {
    let srv = TestServer::start(Mode::Ok);
    let out = volley()
        .args(["bench", &srv.url("/"), "-n", "50", "-k", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let j = json_of(&out.stdout);
    for k in ["schema_version", "tool", "tool_version", "runs", "repeat"] {
        assert!(j.get(k).is_some(), "missing top-level {k}");
    }
    let r = &j["runs"][0];
    for k in [
        "url",
        "method",
        "model",
        "threads",
        "connections",
        "keep_alive",
        "latency_definition",
        "duration_s",
        "requests",
        "errors",
        "status_codes",
        "bytes",
        "throughput",
        "rates",
        "connection_times",
        "served_within",
        "latency",
        "spectrum",
        "connections_stats",
        "generator",
        "seconds",
        "stopped_early",
        "notes",
    ] {
        assert!(r.get(k).is_some(), "missing runs[0].{k}");
    }
    for k in [
        "response_time",
        "service_time",
        "ttfb",
        "connect_time",
        "send_lag",
    ] {
        assert!(r["latency"][k]["definition"].is_string(), "latency.{k}");
    }
    assert_eq!(r["served_within"].as_array().unwrap().len(), 9);
    assert!(r["spectrum"].as_array().unwrap().len() > 5);
    let label = r["generator"]["verdict"]["label"].as_str().unwrap();
    assert!(["server-bound", "generator-bound", "inconclusive"].contains(&label));
    assert!(!r["seconds"].as_array().unwrap().is_empty());
    for row in ["connect", "processing", "waiting", "total"] {
        assert!(r["connection_times"][row]["median_ms"].is_number());
    }
}

#[test]
fn open_loop_sends_on_schedule() {
    let srv = TestServer::start(Mode::Ok);
    let out = succeeded(&[
        "bench",
        &srv.url("/"),
        "--rate",
        "200",
        "-n",
        "200",
        "-c",
        "4",
        "-k",
        "--json",
    ]);
    let r = &json_of(&out.stdout)["runs"][0];
    assert_eq!(r["requests"]["completed"], 200);
    assert_eq!(r["model"]["kind"], "open");
    assert_eq!(r["rates"]["offered_per_s"], 200.0);
    // Loose bounds: this checks the schedule was followed, not the machine's speed.
    let achieved = r["rates"]["achieved_send_per_s"].as_f64().unwrap();
    assert!((100.0..=400.0).contains(&achieved), "achieved {achieved}/s");
    assert!(r["latency_definition"]
        .as_str()
        .unwrap()
        .contains("coordinated-omission corrected"));
}

#[test]
fn an_open_loop_run_lasts_its_duration_when_its_arrivals_end_early() {
    // 2 req/s for 2 s: arrivals at 0, 0.5, 1 and 1.5 s. The run measures 2 s, so it
    // says 2 req/s; ending at the last answer (about 1.5 s) said 2.7.
    let srv = TestServer::start(Mode::Ok);
    let out = succeeded(&[
        "bench",
        &srv.url("/"),
        "--rate",
        "2",
        "-d",
        "2s",
        "-c",
        "2",
        "-k",
        "--json",
    ]);
    let r = &json_of(&out.stdout)["runs"][0];
    assert_eq!(r["requests"]["completed"], 4, "{r}");
    let d = r["duration_s"].as_f64().unwrap();
    assert!(d >= 1.99, "the run ended at {d} s, before its 2 s");
    let rps = r["throughput"]["requests_per_s"].as_f64().unwrap();
    assert!(rps <= 2.01, "{rps} req/s from 4 requests in 2 s");
}

#[test]
fn text_report_looks_like_ab_and_names_definitions() {
    let srv = TestServer::start(Mode::Ok);
    volley()
        .args(["bench", &srv.url("/"), "-n", "100", "-c", "2", "-k"])
        .assert()
        .success()
        .stdout(predicates::str::contains("Complete requests:      100"))
        .stdout(predicates::str::contains("Requests per second:"))
        .stdout(predicates::str::contains("Connection Times (ms)"))
        .stdout(predicates::str::contains(
            "Percentage of the requests served within a certain time (ms)",
        ))
        .stdout(predicates::str::contains("closed-loop service time"))
        .stdout(predicates::str::contains("Detailed Percentile spectrum"))
        .stdout(predicates::str::contains("Verdict:"));
}

pub(crate) fn one_line_usage_error(args: &[&str]) {
    let out = volley().arg("bench").args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(
        err.lines().count(),
        1,
        "{args:?} should print one line, got: {err}"
    );
    assert!(err.starts_with("volley: "), "{err}");
}

#[test]
fn bad_inputs_exit_2_with_one_line() {
    let srv = TestServer::start(Mode::Ok);
    let url = srv.url("/");
    one_line_usage_error(&["https://127.0.0.1/", "--tls-version", "1.1"]);
    one_line_usage_error(&["not a url"]);
    one_line_usage_error(&["ftp://127.0.0.1/"]);
    one_line_usage_error(&[]);
    one_line_usage_error(&[&url, "-n", "0"]);
    one_line_usage_error(&[&url, "-n", "-5"]);
    one_line_usage_error(&[&url, "-c", "0"]);
    one_line_usage_error(&[&url, "--rate", "-10"]);
    one_line_usage_error(&[&url, "-d", "ten"]);
    one_line_usage_error(&[&url, "--body-file", "/nonexistent/volley-body"]);
    one_line_usage_error(&[&url, "--urls", "/nonexistent/volley-urls"]);
    one_line_usage_error(&[&url, "-H", "no colon here"]);
    one_line_usage_error(&[&url, "--order", "sideways"]);
    one_line_usage_error(&["http://volley-test-host.invalid/"]);
    // https:// works now (tests/bench_tls.rs); its bad flags are usage errors.
    let out = volley()
        .args(["bench", "https://127.0.0.1/", "--tls-version", "1.1"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown TLS version"));
}

#[test]
fn an_output_file_that_cannot_be_written_is_refused_before_the_run() {
    let srv = TestServer::start(Mode::Ok);
    let url = srv.url("/");
    let dir = temp_dir("outputs");
    let missing = dir.path().join("no-such-dir").join("out.json");
    let missing = missing.to_str().unwrap();
    let a_dir = dir.path().to_str().unwrap();
    // A 60 s run: refused at once, before any connection, or the test's time says so.
    for flag in ["--json", "--csv", "--csv-seconds"] {
        one_line_usage_error(&[&url, "-d", "60s", flag, missing]);
        one_line_usage_error(&[&url, "-d", "60s", flag, a_dir]);
    }
    let out = volley()
        .args(["bench", &url, "-d", "60s", "--json", missing])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot write") && err.contains("out.json"),
        "{err}"
    );
    assert_eq!(srv.accepted.load(Ordering::Relaxed), 0, "no request sent");
    // The check leaves nothing behind when the run then fails on its own...
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let fresh = dir.path().join("fresh.json");
    let out = volley()
        .args(["bench", &format!("http://127.0.0.1:{port}/"), "-n", "1"])
        .arg("--json")
        .arg(&fresh)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(!fresh.exists(), "an empty file was left behind");
    // ...and a run that succeeds writes its file as before.
    let out = volley()
        .args(["bench", &url, "-n", "3", "--json"])
        .arg(&fresh)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&fresh).unwrap()).unwrap();
    assert_eq!(doc["runs"][0]["requests"]["ok"], 3);
}

#[test]
fn refused_port_exits_1_naming_the_cause() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let out = volley()
        .args(["bench", &format!("http://127.0.0.1:{port}/"), "-n", "100"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("no request succeeded") && err.contains("connection refused"),
        "{err}"
    );
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
}

#[test]
fn all_rejected_exits_1_with_status_errors_counted() {
    let srv = TestServer::start(Mode::Unavailable);
    let out = volley()
        .args(["bench", &srv.url("/"), "-n", "20", "-k", "-q"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no request succeeded: 20 status errors"),
        "{err}"
    );
}

#[test]
fn server_dying_mid_run_is_reported_not_fatal() {
    let srv = TestServer::start(Mode::DieAfter(50));
    let out = succeeded(&[
        "bench",
        &srv.url("/"),
        "-n",
        "400",
        "-c",
        "2",
        "--timeout",
        "2s",
        "--json",
    ]);
    let r = &json_of(&out.stdout)["runs"][0];
    assert_eq!(r["requests"]["completed"], 400);
    assert_eq!(r["requests"]["ok"], 50);
    assert_eq!(r["requests"]["failed"], 350);
    let notes: Vec<String> = r["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    assert!(notes.iter().any(|n| n.contains("the server")), "{notes:?}");
}

#[test]
fn repeat_prints_table_and_ci() {
    let srv = TestServer::start(Mode::Ok);
    let out = succeeded(&[
        "bench",
        &srv.url("/"),
        "-n",
        "50",
        "-k",
        "--repeat",
        "3",
        "--cooldown",
        "0s",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("=== run 3 of 3 ==="), "{text}");
    assert!(text.contains("Runs (3;"), "{text}");
    assert!(text.contains("req/s        median"), "{text}");
    assert!(text.contains("95% CI ["), "{text}");

    let out = volley()
        .args([
            "bench",
            &srv.url("/"),
            "-n",
            "30",
            "-k",
            "--repeat",
            "2",
            "--cooldown",
            "0s",
            "--json",
        ])
        .output()
        .unwrap();
    let j = json_of(&out.stdout);
    assert_eq!(j["runs"].as_array().unwrap().len(), 2);
    assert_eq!(j["repeat"]["rows"].as_array().unwrap().len(), 2);
    assert!(j["repeat"]["requests_per_s"]["lo"].is_number());
}

/// A fresh directory for the bench test `tag`, removed when the test ends.
pub(crate) fn temp_dir(tag: &str) -> crate::common::TestDir {
    crate::common::fresh_dir(&format!("volley-{tag}"))
}

#[test]
fn csv_files_and_url_lists() {
    let srv = TestServer::start(Mode::Ok);
    let dir = temp_dir("csv");
    let urls = dir.join("urls.txt");
    std::fs::write(&urls, format!("# a mix\n{} 3\n/b 1\n", srv.url("/a"))).unwrap();
    let (csv, secs) = (dir.join("runs.csv"), dir.join("seconds.csv"));
    let out = volley()
        .args(["bench", "--urls"])
        .arg(&urls)
        .args(["-n", "40", "-k", "-q", "--csv"])
        .arg(&csv)
        .arg("--csv-seconds")
        .arg(&secs)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty(), "--quiet prints nothing");
    let runs = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = runs.lines().collect();
    assert_eq!(lines.len(), 2);
    let header: Vec<&str> = lines[0].split(',').collect();
    let row: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(header.len(), row.len());
    let col = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
    assert_eq!(col("completed"), "40");
    assert_eq!(col("ok"), "40");
    let secs = std::fs::read_to_string(&secs).unwrap();
    assert!(secs.starts_with("run,second,"));
    assert!(secs.lines().count() >= 2);
}

#[test]
fn ctrl_c_stops_early_and_still_reports() {
    let srv = TestServer::start(Mode::Ok);
    let bin = assert_cmd::cargo::cargo_bin("volley");
    let mut child = std::process::Command::new(bin)
        .args([
            "bench",
            &srv.url("/"),
            "--rate",
            "100",
            "-d",
            "20s",
            "-k",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let st = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let deadline = Instant::now() + Duration::from_secs(15);
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "volley did not stop after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let r = &json_of(&out.stdout)["runs"][0];
    assert_eq!(r["stopped_early"], true);
    assert!(r["requests"]["ok"].as_u64().unwrap() > 0);
    assert!(r["notes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n.as_str().unwrap().contains("interrupted")));
    assert!(String::from_utf8_lossy(&out.stderr).contains("interrupted"));
}

#[test]
fn against_real_nginx_when_installed() {
    let nginx = std::path::Path::new("/usr/sbin/nginx");
    if !nginx.exists() {
        eprintln!("skipping: /usr/sbin/nginx not installed");
        return;
    }
    let dir = temp_dir("nginx");
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    std::fs::create_dir_all(dir.join("html")).unwrap();
    std::fs::write(dir.join("html/index.html"), "<h1>volley</h1>\n").unwrap();
    let d = dir.display();
    let conf = format!(
        "worker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{ worker_connections 256; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/tmp_body;\n  proxy_temp_path {d}/tmp_proxy;\n\
           fastcgi_temp_path {d}/tmp_fcgi;\n  uwsgi_temp_path {d}/tmp_uwsgi;\n  scgi_temp_path {d}/tmp_scgi;\n\
           server {{ listen 127.0.0.1:{port}; root {d}/html; }}\n}}\n"
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let child = std::process::Command::new(nginx)
        .arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .args(["-g", "daemon off;"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let nginx = Nginx(child);
    let ready = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let result = ready.then(|| {
        volley()
            .args([
                "bench",
                &format!("http://127.0.0.1:{port}/index.html"),
                "-n",
                "300",
                "-c",
                "4",
                "-k",
                "--json",
            ])
            .output()
            .unwrap()
    });
    drop(nginx);
    let out = result.expect("nginx did not start listening");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = &json_of(&out.stdout)["runs"][0];
    assert_eq!(r["requests"]["ok"], 300);
    assert_eq!(r["status_codes"]["200"], 300);
    assert_eq!(r["bytes"]["body_total"], 300 * 16);
    assert!(r["connections_stats"]["opened"].as_u64().unwrap() <= 4);
}

/// Stops nginx with SIGTERM (its master then stops the workers; SIGKILL would orphan
/// them), falling back to SIGKILL after 5 s.
struct Nginx(std::process::Child);

impl Drop for Nginx {
    fn drop(&mut self) {
        let pid = self.0.id().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn warmup_requests_are_excluded_from_the_measured_figures() {
    let srv = TestServer::start(Mode::Ok);
    // 200/s on a fixed schedule: the warm-up's 500 ms hold 100 scheduled arrivals
    // whatever the machine's speed; -d is the measured period after it.
    let out = succeeded(&[
        "bench",
        &srv.url("/"),
        "--rate",
        "200",
        "--warmup",
        "500ms",
        "-d",
        "500ms",
        "-c",
        "2",
        "-k",
        "--json",
    ]);
    let r = &json_of(&out.stdout)["runs"][0];
    let w = &r["warmup"];
    assert_eq!(w["duration_s"], 0.5);
    assert_eq!(w["requests"], 100, "{w}");
    // The initial pool of 2 is opened at the start, inside the warm-up, and kept.
    assert!(w["connections_opened"].as_u64().unwrap() >= 2, "{w}");
    assert!(w["open_at_boundary"].as_u64().unwrap() >= 1, "{w}");
    let req = &r["requests"];
    let measured = req["completed"].as_u64().unwrap() + req["in_flight"].as_u64().unwrap();
    assert_eq!(measured, 100, "{req}");
    // How many left before the end is the machine's: under the full suite 98 of the 100
    // were sent and 2 were still waiting for one of the two connections, censored.
    let sent = req["sent"].as_u64().unwrap();
    assert!(sent > 0 && sent <= 100, "{req}");
    assert_eq!(r["latency"]["response_time"]["count"], 100);
    // Seconds start at the boundary: the measured half second is second 0 only.
    let secs = r["seconds"].as_array().unwrap();
    assert_eq!(secs.len(), 1, "{secs:?}");
    assert_eq!(secs[0]["scheduled"], 100);
    assert!(r["notes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n.as_str().unwrap().starts_with("warm-up 0.5s excluded")));

    // Without --warmup the field is null; with nothing to measure after it, or a bad
    // duration, it is refused.
    let out = volley()
        .args(["bench", &srv.url("/"), "-n", "10", "--json"])
        .output()
        .unwrap();
    assert!(json_of(&out.stdout)["runs"][0]["warmup"].is_null());
    one_line_usage_error(&[&srv.url("/"), "--warmup", "1s"]);
    one_line_usage_error(&[&srv.url("/"), "--warmup", "soon", "-d", "1s"]);
}

#[test]
fn with_a_warmup_n_counts_the_measured_requests() {
    // As ab and hey users expect, -n is what is measured; the warm-up's requests come
    // on top (at least the first request of each of the 2 connections, sent at once).
    let srv = TestServer::start(Mode::Ok);
    let out = succeeded(&[
        "bench",
        &srv.url("/"),
        "-n",
        "40",
        "--warmup",
        "300ms",
        "-c",
        "2",
        "-k",
        "--json",
    ]);
    let r = &json_of(&out.stdout)["runs"][0];
    let req = &r["requests"];
    assert_eq!(req["sent"], 40, "{req}");
    assert_eq!(req["completed"], 40, "{req}");
    assert_eq!(r["latency"]["response_time"]["count"], 40);
    let w = &r["warmup"];
    assert_eq!(w["duration_s"], 0.3);
    assert!(w["requests"].as_u64().unwrap() >= 2, "{w}");
}
