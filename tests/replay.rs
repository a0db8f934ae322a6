//! Access logs read back and replayed: `volley log phases` on the built-in server's own
//! log, written while clients bound to their own loopback addresses loaded it. Every
//! client's loop is bounded in count and time; assertions are on counts and sets,
//! never on speed.

use crate::common::Served;
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
    std::fs::remove_dir_all(&dir).unwrap();
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
    std::fs::remove_dir_all(&dir).unwrap();
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("volley-replay-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
