//! `volley log phases` on a server's access log: the built-in server's own log, written
//! while clients bound to their own loopback addresses loaded it, the example log, a
//! named nginx format, bad logs, and a log of many addresses in a bounded table. Every
//! client's loop is bounded in count and time; assertions are on counts, sets and
//! orders. (Split from `replay.rs`, whose log and directory helpers it shares.)

use crate::common::Served;
use crate::replay::{many_clients_log, tempdir};
use socket2::{Domain, Socket, Type};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// One client from its own loopback address: a request on a fresh connection every
/// `every`, for `active`, starting after `delay`. Returns the requests answered.
fn client(ip: [u8; 4], server: SocketAddr, delay: Duration, active: Duration) -> u64 {
    std::thread::sleep(delay);
    let every = Duration::from_millis(25);
    let start = Instant::now();
    let mut answered = 0;
    let mut next = start;
    while start.elapsed() < active && answered < 1_000 {
        let sock = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        sock.bind(&SocketAddr::from((ip, 0)).into()).unwrap();
        sock.connect_timeout(&server.into(), Duration::from_secs(2))
            .unwrap();
        let mut s: TcpStream = sock.into();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        s.write_all(b"GET /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut reply = Vec::new();
        s.read_to_end(&mut reply).unwrap();
        assert!(reply.starts_with(b"HTTP/1.1 200"), "{reply:?}");
        answered += 1;
        next += every;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    answered
}

/// Three clients staggered by two seconds, each active for six: the server's own log
/// cut by `volley log phases` gives 1, 2, 3, 2, 1 active clients, and counts every
/// request the clients had answered.
#[test]
fn log_phases_of_three_staggered_clients_are_1_2_3_2_1() {
    let dir = tempdir("phases");
    std::fs::create_dir_all(dir.join("root")).unwrap();
    std::fs::write(dir.join("root/index.html"), "hello").unwrap();
    let log = dir.join("access.log");
    let mut served = Served::start(&dir.join("root"), &["--access-log", log.to_str().unwrap()]);
    let server: SocketAddr = served.addr.parse().unwrap();
    let clients: Vec<_> = [2u8, 3, 4]
        .into_iter()
        .enumerate()
        .map(|(i, last)| {
            let delay = Duration::from_secs(2 * i as u64);
            std::thread::spawn(move || {
                client([127, 0, 0, last], server, delay, Duration::from_secs(6))
            })
        })
        .collect();
    let sent: u64 = clients.into_iter().map(|c| c.join().unwrap()).sum();
    assert!(
        served.stop().is_some_and(|s| s.success()),
        "serve did not stop cleanly"
    );

    let (code, out, err) = crate::common::volley(&["log", "phases", log.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            ": {sent} requests from {sent} lines (combined format)"
        )),
        "{out}"
    );
    let (code, json, err) =
        crate::common::volley(&["log", "phases", "--json", log.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let read: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        (read["requests"].as_u64(), read["lines"].as_u64()),
        (Some(sent), Some(sent))
    );
    assert_eq!(
        read["spread_over_seconds"], false,
        "microsecond stamps: {read}"
    );
    let phases = &read["phases"];
    let sets: Vec<Vec<&str>> = phases
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            p["clients"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_str().unwrap())
                .collect()
        })
        .collect();
    let (a, b, c) = ("127.0.0.2", "127.0.0.3", "127.0.0.4");
    assert_eq!(
        sets,
        [vec![a], vec![a, b], vec![a, b, c], vec![b, c], vec![c]],
        "{out}"
    );
    // Each phase with a covered second counts its requests; the edges are left out.
    for p in phases.as_array().unwrap() {
        let (secs, reqs) = (
            p["seconds"].as_u64().unwrap(),
            p["requests"].as_u64().unwrap(),
        );
        assert_eq!(secs > 0, reqs > 0, "{p}");
        assert!(!p["left_out_s"].as_array().unwrap().is_empty(), "{p}");
    }
}

/// Bad logs: unreadable, empty, in no known format: one line each, exit 2.
#[test]
fn log_phases_refuses_bad_logs_with_one_line() {
    let dir = tempdir("bad");
    let empty = dir.join("empty.log");
    std::fs::write(&empty, "").unwrap();
    let junk = dir.join("junk.log");
    std::fs::write(&junk, "this is not\nan access log\n").unwrap();
    for (file, says) in [
        (dir.join("missing.log"), "cannot read"),
        (empty, "no requests"),
        (junk, "name the log's layout with --log-format"),
    ] {
        let (code, _, err) = crate::common::volley(&["log", "phases", file.to_str().unwrap()]);
        assert_eq!(code, 2, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says), "{err}");
    }
    let (code, _, err) = crate::common::volley(&["log", "phases", "--log-format", "$nothing", "x"]);
    assert_eq!(code, 2, "{err}");
}

/// The seeded example log reads back whole; a custom nginx `log_format` given with
/// `--log-format` gives each phase its logged request times.
#[test]
fn log_phases_reads_the_example_log_and_a_named_nginx_format() {
    let dir = tempdir("formats");
    let example = dir.join("example.log");
    let ex = example.to_str().unwrap();
    let (code, _, err) =
        crate::common::volley(&["log", "example", ex, "--span", "1m", "--seed", "7"]);
    assert_eq!(code, 0, "{err}");
    let written: u64 = err
        .trim()
        .strip_prefix("wrote ")
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{err}"));
    let (code, json, err) = crate::common::volley(&["log", "phases", "--json", ex]);
    assert_eq!(code, 0, "{err}");
    let read: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(read["requests"].as_u64(), Some(written), "{json}");
    assert_eq!(read["skipped"].as_array().map(Vec::len), Some(0), "{json}");

    // Two clients, one request a second each for 4 s, 10 ms (a) and 30 ms (b).
    let nginx = dir.join("nginx.log");
    let mut text = String::new();
    for s in 0..4 {
        for (c, t) in [("a", "0.010"), ("b", "0.030")] {
            text += &format!(
                "{c} {}.500 \"GET /{s} HTTP/1.1\" 200 {t}\n",
                1_700_000_000 + s
            );
        }
    }
    std::fs::write(&nginx, text).unwrap();
    let format = r#"$remote_addr $msec "$request" $status $request_time"#;
    let args = [
        "log",
        "phases",
        "--json",
        "--log-format",
        format,
        nginx.to_str().unwrap(),
    ];
    let (code, json, err) = crate::common::volley(&args);
    assert_eq!(code, 0, "{err}");
    let read: serde_json::Value = serde_json::from_str(&json).unwrap();
    let p = &read["phases"][0];
    assert_eq!(
        (p["requests"].as_u64(), p["seconds"].as_u64()),
        (Some(4), Some(2)),
        "{json}"
    );
    assert!(
        (p["mean_ms"].as_f64().unwrap() - 20.0).abs() < 0.1,
        "{json}"
    );
    assert!((p["p99_ms"].as_f64().unwrap() - 30.0).abs() < 0.1, "{json}");
    // Read as Combined (the default guess), the same file is refused in one line.
    let (code, _, err) = crate::common::volley(&["log", "phases", nginx.to_str().unwrap()]);
    assert_eq!((code, err.lines().count()), (2, 1), "{err}");
}

/// `volley log phases` on a log of 3,000 addresses keeps the first N apart and counts
/// the requests of the later ones together as one client, `others`, saying how many:
/// every request is still in its second, and the table has at most N + 1 clients.
#[test]
fn log_phases_of_many_addresses_keeps_a_bounded_table_and_says_what_it_folded() {
    let dir = tempdir("phases-many");
    let n = 3_000u64;
    let log = dir.join("many.log");
    std::fs::write(&log, many_clients_log(n)).unwrap();
    let file = log.to_str().unwrap();
    let (code, out, err) = crate::common::volley(&["log", "phases", "--max-clients", "64", file]);
    assert_eq!(code, 0, "{err}");
    // 10.9.9.9 and the next 63 addresses are kept; 10.9.9.9's last request is its own.
    let folded = n - 64 - 1;
    assert!(
        out.contains(&format!(
            "{folded} requests came from addresses first seen after the first 64 (--max-clients): counted together as one client, 'others'"
        )),
        "{out}"
    );
    let (code, json, err) =
        crate::common::volley(&["log", "phases", "--json", "--max-clients", "64", file]);
    assert_eq!(code, 0, "{err}");
    let read: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(read["requests"].as_u64(), Some(n), "{read}");
    assert_eq!(read["folded_requests"].as_u64(), Some(folded));
    assert_eq!(read["max_clients"].as_u64(), Some(64));
    let phases = read["phases"].as_array().unwrap();
    let most = phases
        .iter()
        .map(|p| p["clients"].as_array().unwrap().len())
        .max()
        .unwrap();
    assert!(
        most <= 65,
        "at most 64 addresses and 'others' in a phase: {most}"
    );
    // The log spans seconds 0..=2: 'others' is active from 0.064 s to 2.998 s and
    // 10.9.9.9 from 0 to 2.999, so second 1 is the one covered second, with its 1,000.
    let covered: u64 = phases.iter().map(|p| p["requests"].as_u64().unwrap()).sum();
    assert_eq!(covered, 1_000, "{read}");
    // The default table (1,024) folds fewer, and a table of 0 is a usage error.
    let (_, json, _) = crate::common::volley(&["log", "phases", "--json", file]);
    let read: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(read["folded_requests"].as_u64(), Some(n - 1_024 - 1));
    let (code, _, err) = crate::common::volley(&["log", "phases", "--max-clients", "0", file]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--max-clients"), "{err}");
}
