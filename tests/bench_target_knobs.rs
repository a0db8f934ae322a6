//! `volley bench --target` with server knobs and kernel settings, through the real
//! binary: knobs reaching the generated config and the listen queue, sysctls and routes
//! inside the target's namespace only (the host's values read before and after), the
//! accept queue's overflows read where the listener is, and a study's other managed
//! target counted apart from others' CPU. Helpers are `bench_target`'s.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::bench_target::{assert_nothing_left, read_json, temp_json, volley};
use crate::common::{root_for, server_installed};

/// Send-Q of the listening TCP sockets (`ss -ltnH`): for a listener it is the accept
/// queue's limit, the backlog the server asked for (capped by somaxconn).
fn listen_backlogs() -> Vec<u32> {
    let Ok(out) = Command::new("ss").args(["-ltnH"]).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2)?.parse().ok())
        .collect()
}

/// `volley bench --target KIND -c 2 -d 3s -k ARGS`, watched while it runs: `look(pid)`
/// every 100 ms (for at most 30 s) until it says it saw what it looks for. Whether it
/// did, and the run's JSON once the run ended well.
fn watched_bench(kind: &str, args: &[&str], mut look: impl FnMut(u32) -> bool) -> (bool, Value) {
    let json = temp_json(&format!("watched-{kind}"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["bench", "--target", kind, "-c", "2", "-d", "3s", "-k"])
        .args(args)
        .args(["--json", json.to_str().unwrap(), "-q"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    let mut seen = false;
    while !seen && Instant::now() < until && child.try_wait().unwrap().is_none() {
        seen = look(child.id());
        std::thread::sleep(Duration::from_millis(100));
    }
    ended_well(child, kind);
    (seen, read_json(&json))
}

/// Waits for `child` (a volley with its stderr piped) and checks it succeeded, showing
/// its stderr when not.
fn ended_well(mut child: Child, what: &str) {
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{what}: {err}");
}

/// The network namespace volley run `pid` made for its target (`vlPID-...t`), once made.
fn target_ns_of(pid: u32) -> Option<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let prefix = format!("vl{pid}-");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .find(|n| n.starts_with(&prefix) && n.ends_with('t'))
        .map(str::to_string)
}

#[test]
fn server_knobs_reach_the_generated_config_and_the_listen_queue() {
    // An odd backlog per kind, so another test's server cannot be mistaken for ours.
    let cases = [
        (
            "nginx",
            "nginx",
            "37",
            "listen 127.0.0.1:",
            " deferred backlog=37;",
        ),
        (
            "apache-event",
            "apache2",
            "38",
            "ListenBacklog 38",
            "AcceptFilter http data",
        ),
        (
            "lighttpd",
            "lighttpd",
            "39",
            "server.listen-backlog = 39",
            "server.defer-accept = 1",
        ),
    ];
    for (kind, program, backlog, line_a, line_b) in cases {
        if !server_installed(kind, program) {
            continue;
        }
        let want: u32 = backlog.parse().unwrap();
        let set_backlog = format!("backlog={backlog}");
        let knobs = [
            "--set",
            &set_backlog,
            "--set",
            "defer_accept=true",
            "--set",
            "sendfile=false",
        ];
        let (seen, v) = watched_bench(kind, &knobs, |_| listen_backlogs().contains(&want));
        assert!(seen, "{kind}: no listener with backlog {want} in ss -ltn");
        let t = &v["targets"][0];
        let cfg = t["record"]["config_text"].as_str().unwrap();
        assert!(
            cfg.contains(line_a) && cfg.contains(line_b),
            "{kind}: {cfg}"
        );
        let sendfile_off = ["sendfile off;", "EnableSendfile Off", "\"writev\""];
        assert!(
            sendfile_off.iter().any(|s| cfg.contains(s)),
            "{kind}: {cfg}"
        );
        assert!(v["runs"][0]["requests"]["ok"].as_u64().unwrap() > 0);
        assert_nothing_left(t);
    }
}

#[test]
fn a_knob_a_kind_cannot_express_is_refused_before_anything_starts() {
    let (code, out, err) = volley(&[
        "bench",
        "--target",
        "nginx",
        "--target",
        "caddy",
        "--set",
        "backlog=16",
        "-n",
        "1",
    ]);
    assert_eq!(code, 2, "{out}{err}");
    assert_eq!(
        err.trim(),
        "volley: caddy cannot express server knob backlog: Go's listener takes its backlog \
         from net.core.somaxconn; set that sysctl in the target's namespace instead"
    );
    assert!(out.is_empty());
    let (code, _, err) = volley(&["bench", "--target", "nginx", "--set", "backlog=lots"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("server knob backlog: 'lots' is not a whole number"),
        "{err}"
    );
}

/// Send-Q of the listeners inside network namespace `ns` (see [`listen_backlogs`]).
fn listen_backlogs_in(ns: &str) -> Vec<u32> {
    let Ok(out) = Command::new("ip")
        .args(["netns", "exec", ns, "ss", "-ltnH"])
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2)?.parse().ok())
        .collect()
}

fn host_sysctl(key: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/{}", key.replace('.', "/"))).unwrap()
}

#[test]
fn sysctls_apply_in_the_targets_namespace_only() {
    let keys = ["net.core.somaxconn", "net.ipv4.tcp_max_syn_backlog"];
    let before: Vec<String> = keys.iter().map(|k| host_sysctl(k)).collect();
    let host_routes = || Command::new("ip").args(["route"]).output().unwrap().stdout;
    let routes_before = host_routes();
    for (kind, program) in [("nginx", "nginx"), ("apache-event", "apache2")] {
        if !server_installed(kind, program) {
            continue;
        }
        let args = [
            "--sysctl",
            "net.core.somaxconn=16",
            "--sysctl",
            "net.ipv4.tcp_max_syn_backlog=64",
            "--route",
            "quickack=true",
            "--set",
            "backlog=1024",
        ];
        let mut ns = String::new();
        let (seen, v) = watched_bench(kind, &args, |pid| {
            if let Some(n) = target_ns_of(pid) {
                ns = n;
            }
            // somaxconn = 16 in the namespace caps the server's backlog of 1024.
            listen_backlogs_in(&ns).contains(&16)
        });
        assert!(seen, "{kind}: no listener with backlog 16 inside {ns}");
        let t = &v["targets"][0];
        let n = &t["namespace"];
        assert_eq!(n["ns"], ns.as_str());
        assert_eq!(n["sysctls"][0]["key"], "net.core.somaxconn");
        assert_eq!(n["sysctls"][0]["value"], "16");
        assert_eq!(n["sysctls"][1]["value"], "64");
        // The generator's own setting there is stored apart from the variant's.
        assert_eq!(n["generator_sysctls"][0]["key"], "net.ipv4.tcp_tw_reuse");
        assert_eq!(n["generator_sysctls"][0]["value"], "1");
        assert!(
            n["routes"][0].as_str().unwrap().contains("quickack 1"),
            "{n}"
        );
        assert!(v["runs"][0]["requests"]["ok"].as_u64().unwrap() > 0);
        assert!(
            v["runs"][0]["url"]
                .as_str()
                .unwrap()
                .starts_with("http://10."),
            "the load reached the target at its lab address"
        );
        assert_nothing_left(t);
        let left = Command::new("ip").args(["netns", "list"]).output().unwrap();
        assert!(
            !String::from_utf8_lossy(&left.stdout).contains(&ns),
            "the namespace is removed"
        );
    }
    let after: Vec<String> = keys.iter().map(|k| host_sysctl(k)).collect();
    assert_eq!(before, after, "the host's sysctls are unchanged");
    assert_eq!(
        routes_before,
        host_routes(),
        "the host's routes are unchanged"
    );
}

#[test]
fn a_global_or_refused_sysctl_is_one_line_and_nothing_starts() {
    let before = host_sysctl("net.core.rmem_max");
    for (flag, want) in [
        (
            "net.core.rmem_max=1048576",
            "volley: sysctl net.core.rmem_max is global",
        ),
        ("vm.swappiness=1", "volley: sysctl vm.swappiness is global"),
        (
            "net.core.netdev_max_backlog=5000",
            "volley: sysctl net.core.netdev_max_backlog does not exist inside a network namespace",
        ),
        (
            "net.core.somaxconn=lots",
            "volley: sysctl net.core.somaxconn: the kernel refused 'lots'",
        ),
    ] {
        let (code, out, err) =
            volley(&["bench", "--target", "builtin", "--sysctl", flag, "-n", "1"]);
        assert_eq!(code, 2, "{flag}: {out}{err}");
        assert!(err.starts_with(want), "{flag}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(out.is_empty(), "no target started: {out}");
    }
    assert_eq!(before, host_sysctl("net.core.rmem_max"));
}

/// `net.ipv4.ip_local_port_range` is per network namespace: in the lab volley makes for
/// `--sysctl` (the load runs in it too) 20 ports, and an open loop that opens a pool
/// of 40 kept-alive connections up front: the 20 live ones hold every port, so the
/// others' connects fail with EADDRNOTAVAIL. (A new connection per request does not
/// exhaust them reliably: when the server closes first, TIME_WAIT sits on its side and
/// the client's port is free again, so some runs failed no connect at all.) The run
/// says those failures are the generator's machine's, with the counts, and is never
/// labelled server-bound; the value is read back in the namespace and the host's range
/// is untouched.
#[test]
fn a_tiny_port_range_is_the_generators_machine_never_the_servers() {
    if !root_for("the port range, set in a namespace volley makes,") {
        return;
    }
    let key = "net.ipv4.ip_local_port_range";
    let before = host_sysctl(key);
    let json = temp_json("no-free-port");
    let range = format!("{key}=40000 40019");
    let (code, out, err) = volley(&[
        "bench",
        "--target",
        "builtin",
        "--rate",
        "200",
        "-d",
        "3s",
        "-c",
        "40",
        "-k",
        "--max-connections",
        "40",
        "--timeout",
        "2s",
        "--sysctl",
        &range,
        "--json",
        json.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(host_sysctl(key), before, "the host's range is unchanged");
    let v = read_json(&json);
    let seen = format!("exit {code}: {out}{err}");
    let t = &v["targets"][0];
    let set = t["namespace"]["sysctls"].as_array().unwrap();
    let read_back = set
        .iter()
        .find(|s| s["key"] == key)
        .expect("the range is recorded");
    assert_eq!(read_back["value"], "40000 40019", "{seen}");
    let run = &v["runs"][0];
    let h = &run["headroom"];
    assert_eq!(
        h["port_range"], 20,
        "the range was read inside the namespace: {h}"
    );
    // At least the pool's 20 connects beyond the 20 ports (the probe's own took some).
    let no_port = h["connects_without_port"].as_u64().unwrap();
    assert!(no_port >= 20, "{no_port}: {seen}");
    assert!(run["requests"]["ok"].as_u64().unwrap() > 0, "{seen}");
    let verdict = &run["generator"]["verdict"];
    assert_eq!(verdict["label"], "generator-bound", "{verdict}");
    let reason = verdict["reason"].as_str().unwrap();
    let held = h["ports_in_use_max"].as_u64().unwrap();
    let tw = h["time_wait_max"].as_u64().unwrap();
    for words in [
        format!("{no_port} connect(s) failed for want of a free local port (EADDRNOTAVAIL)"),
        format!("{held} sockets towards the target held ports of the 20 in the local range, {tw} of them in TIME_WAIT"),
        "the generator's machine ran out of ports, not the server".to_string(),
    ] {
        assert!(reason.contains(&words), "{words}: {reason}");
    }
    assert!(
        held >= 15,
        "the live connections held the ports: {h} ({tw} in TIME_WAIT)"
    );
    let notes: Vec<&str> = run["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(notes.contains(&reason), "{notes:?}");
    assert!(
        !notes.iter().any(|n| n.contains("the server refused")),
        "no refusal is blamed on the server: {notes:?}"
    );
    assert_nothing_left(t);
}

/// TcpExt counter `name` of network namespace `ns` (`/proc/net/netstat` read from
/// inside it), `None` when the namespace is gone.
fn netstat_in(ns: &str, name: &str) -> Option<u64> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "cat", "/proc/net/netstat"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut tcpext = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (tcpext.next()?, tcpext.next()?);
    let at = names.split_whitespace().position(|n| n == name)?;
    values.split_whitespace().nth(at)?.parse().ok()
}

/// One `bench --target KIND` with `somaxconn` in the target's namespace, a slow
/// accepter (one worker at 5% of a CPU) and 256 new connections at a time: the most
/// ListenOverflows and ListenDrops the namespace counted, and the run's JSON.
fn slow_accepter_run(kind: &str, somaxconn: u32) -> (u64, u64, Value) {
    let json = temp_json(&format!("slow-{kind}-{somaxconn}"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args([
            "bench",
            "--target",
            kind,
            "--workers",
            "1",
            "--cpu-quota",
            "0.05",
        ])
        .args(["-c", "256", "-n", "3000", "--timeout", "10s"])
        .args(["--sysctl", &format!("net.core.somaxconn={somaxconn}")])
        .args(["--json", json.to_str().unwrap(), "-q"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut overflows, mut drops) = (0, 0);
    let until = Instant::now() + Duration::from_secs(120);
    while Instant::now() < until && child.try_wait().unwrap().is_none() {
        if let Some(ns) = target_ns_of(child.id()) {
            overflows = overflows.max(netstat_in(&ns, "ListenOverflows").unwrap_or(0));
            drops = drops.max(netstat_in(&ns, "ListenDrops").unwrap_or(0));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = child.kill();
    ended_well(child, &format!("{kind} somaxconn={somaxconn}"));
    let v = read_json(&json);
    assert_nothing_left(&v["targets"][0]);
    (overflows, drops, v)
}

#[test]
fn a_small_somaxconn_overflows_a_slow_accepters_queue_and_the_default_does_not() {
    let keys = ["net.core.somaxconn", "net.ipv4.tcp_max_syn_backlog"];
    let before: Vec<String> = keys.iter().map(|k| host_sysctl(k)).collect();
    for (kind, program) in [
        ("nginx", "nginx"),
        ("apache-event", "apache2"),
        ("lighttpd", "lighttpd"),
    ] {
        if !server_installed(kind, program) {
            continue;
        }
        // Both in a namespace of their own, so the only difference is the queue: 16,
        // or Linux's own default of 4096 (which every server's backlog fits under).
        let (small_over, small_drops, small) = slow_accepter_run(kind, 16);
        let (big_over, big_drops, big) = slow_accepter_run(kind, 4096);
        let connect = |v: &Value| v["runs"][0]["latency"]["connect_time"]["max_ms"].clone();
        let seen = format!(
            "{kind}: somaxconn 16: {small_over} overflows, {small_drops} drops, connect max {} ms; \
             4096: {big_over} overflows, {big_drops} drops, connect max {} ms",
            connect(&small),
            connect(&big)
        );
        // The kernel dropped handshakes at the full queue (a SYN, or the last ACK)...
        assert!(small_over > 0 && small_drops > 0, "{seen}");
        assert_eq!((big_over, big_drops), (0, 0), "{seen}");
        // ...and a dropped SYN costs the client its retransmission timeout (1 s).
        assert!(connect(&small).as_f64().unwrap() >= 900.0, "{seen}");
        // The default's queue held every connection: no request failed. (With 16, some
        // may fail outright: Apache's gave up on ~4% here.)
        assert_eq!(big["runs"][0]["requests"]["ok"], 3000, "{seen}");
        eprintln!("{seen}, ok {} of 3000", small["runs"][0]["requests"]["ok"]);
    }
    let after: Vec<String> = keys.iter().map(|k| host_sysctl(k)).collect();
    assert_eq!(before, after, "the host's sysctls are unchanged");
}

/// CPU of a managed target's own cgroup so far (v1 `cpuacct.usage` or cgroup2
/// `cpu.stat`), ns; `None` without one.
fn target_cgroup_cpu_ns(t: &volley_targets::RunningTarget) -> Option<u64> {
    let dir = t.procs_file()?.parent()?.to_path_buf();
    ["cpuacct.usage", "cpu.stat"].iter().find_map(|f| {
        let text = std::fs::read_to_string(dir.join(f)).ok()?;
        volley_monitor::parse::parse_cgroup_cpu_ns(&text)
    })
}

/// GETs `/` with a connection each, up to `max` requests or `within`, whichever first.
fn get_repeatedly(addr: std::net::SocketAddr, max: u32, within: Duration) -> u32 {
    use std::io::{Read, Write};
    let until = Instant::now() + within;
    let mut done = 0;
    while done < max && Instant::now() < until {
        let Ok(mut c) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
            continue;
        };
        let _ = c.set_read_timeout(Some(Duration::from_secs(1)));
        let _ = c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        let mut body = Vec::new();
        if c.read_to_end(&mut body).is_ok() && body.starts_with(b"HTTP/1.1 200") {
            done += 1;
        }
    }
    done
}

/// A study's other instances are its own, not someone else's load: with two managed
/// built-in servers, the monitor watching one counts the other's CPU apart
/// (`study_targets_cpu_pct`, left out of `others_cpu_pct`). Here the other one is the
/// one loaded, so its CPU is large enough to see, and the watched one sits idle.
#[test]
fn the_other_managed_target_is_counted_apart_from_others() {
    use volley_monitor::{Monitor, MonitorConfig};
    use volley_targets::{start, TargetKind, TargetSpec};
    let spec = || {
        let mut s = TargetSpec::new(TargetKind::Builtin);
        s.volley_exe = Some(PathBuf::from(env!("CARGO_BIN_EXE_volley")));
        s
    };
    let watched = start(&spec()).expect("the watched built-in server starts");
    let other = start(&spec()).expect("the other built-in server starts");
    let Some(before) = target_cgroup_cpu_ns(&other) else {
        eprintln!("skipped: volley could not make cgroups here (not root?)");
        return;
    };
    let mut cfg = MonitorConfig::new(volley_harness::scope_of(&watched), Instant::now());
    cfg.interval = Duration::from_millis(250);
    let monitor = Monitor::start(cfg).expect("monitor starts");
    let sent = get_repeatedly(other.addr, 3000, Duration::from_secs(2));
    let report = monitor.finish();
    let other_ns = target_cgroup_cpu_ns(&other).unwrap() - before;
    assert!(sent > 50, "the other server answered only {sent} requests");
    let s = &report.summary;
    let study_s = s.study_targets_cpu_pct.expect("read") / 100.0 * s.duration_s;
    let other_s = other_ns as f64 / 1e9;
    assert!(other_s > 0.01, "the loaded server used {other_s} s of CPU");
    // Other tests of this binary may start targets of their own meanwhile (the same
    // process): they can only add to the figure.
    assert!(
        study_s >= 0.7 * other_s,
        "the other target used {other_s:.3} s of CPU, the monitor counted {study_s:.3} s apart"
    );
    let watched_s = s.server_cpu_seconds.expect("the watched target's CPU");
    assert!(
        watched_s < 0.5 * other_s,
        "the idle watched target used {watched_s:.3} s, the loaded other {other_s:.3} s"
    );
    assert!(report
        .samples
        .iter()
        .all(|x| x.system.study_targets_cpu_pct.is_some()));
    watched.stop();
    other.stop();
}

/// A listener's dropped SYNs are counted in its own network namespace, and volley reads
/// them there through the listener's pid (`/proc/<pid>/net/netstat`), as a study step
/// reads a lab target's: a namespace this test makes, a listener with a backlog of 1
/// that never accepts, and 20 connects to it from inside (closed before the counters
/// are read, so no retransmitted SYN moves them between the two reads).
#[test]
fn listen_overflows_are_read_in_the_listeners_own_namespace() {
    let ns = format!("vt{}-ovf", std::process::id());
    let made = Command::new("ip")
        .args(["netns", "add", &ns])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        eprintln!("skipped: cannot make a network namespace here (not root?)");
        return;
    }
    struct Gone(String);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }
    let _gone = Gone(ns.clone());
    let up = Command::new("ip")
        .args(["netns", "exec", &ns, "ip", "link", "set", "lo", "up"])
        .status()
        .unwrap();
    assert!(up.success());
    let script = "import os, socket, sys, time\n\
l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(1)\n\
cs = []\n\
for _ in range(20):\n    c = socket.socket(); c.setblocking(False); c.connect_ex(l.getsockname()); cs.append(c)\n\
time.sleep(0.5)\n\
for c in cs: c.close()\n\
time.sleep(0.2)\n\
print(os.getpid(), flush=True)\n\
sys.stdin.read()\n";
    let mut child = Command::new("timeout")
        .args(["60", "ip", "netns", "exec", &ns, "python3", "-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid: u32 = line.trim().parse().expect("the listener's pid");
    let read = volley_monitor::headroom::listen_overflows(Some(pid));
    let theirs = netstat_in(&ns, "ListenOverflows");
    drop(child.stdin.take());
    let _ = child.wait();
    assert!(
        read.is_some_and(|n| n > 0),
        "a full accept queue dropped SYNs in the namespace: {read:?} (ip netns exec: {theirs:?})"
    );
    assert_eq!(read, theirs, "the namespace's own counter, not the host's");
}
