//! `threads > 1`: several event loops share one listener. Every request on every
//! connection is answered whichever thread accepted it, and shutdown stops and joins
//! every thread (no listener clone left accepting, every connection closed).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::Duration;
use volley_server::{Server, ServerConfig};

const THREADS: usize = 4;
const CONNS: usize = 24;
const REQUESTS_PER_CONN: usize = 25;

fn read_response(r: &mut BufReader<TcpStream>) -> (u16, Vec<u8>) {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status = line.split(' ').nth(1).unwrap().parse().unwrap();
    let mut len = 0;
    loop {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        let l = l.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((n, v)) = l.split_once(':') {
            if n.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap();
            }
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    (status, body)
}

#[test]
fn many_connections_over_several_threads_are_all_answered_and_shutdown_joins() {
    // Removed when `tmp` drops: at the end, or when an assertion fails.
    let tmp = tempfile::Builder::new()
        .prefix("volley-server-threads-")
        .tempdir()
        .unwrap();
    let root = tmp.path().to_path_buf();
    std::fs::write(root.join("700b.html"), "x".repeat(700)).unwrap();
    let mut config = ServerConfig::new(&root);
    config.threads = THREADS;
    let server = Server::bind(config).unwrap();
    let addr = server.local_addr();
    let handle = server.spawn().unwrap();

    // All connections open at once (so they are spread over the loops), then each
    // sends its requests from its own client thread.
    let conns: Vec<TcpStream> = (0..CONNS)
        .map(|_| {
            let s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s
        })
        .collect();
    let clients: Vec<_> = conns
        .iter()
        .map(|s| {
            let s = s.try_clone().unwrap();
            std::thread::spawn(move || {
                let mut r = BufReader::new(s);
                let mut ok = 0;
                for _ in 0..REQUESTS_PER_CONN {
                    r.get_mut()
                        .write_all(b"GET /700b.html HTTP/1.1\r\nHost: t\r\n\r\n")
                        .unwrap();
                    let (status, body) = read_response(&mut r);
                    if status == 200 && body == vec![b'x'; 700] {
                        ok += 1;
                    }
                }
                ok
            })
        })
        .collect();
    let ok: usize = clients.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(ok, CONNS * REQUESTS_PER_CONN);
    let per_thread = handle.answered_per_thread();
    assert_eq!(per_thread.len(), THREADS);
    assert_eq!(
        per_thread.iter().sum::<u64>(),
        (CONNS * REQUESTS_PER_CONN) as u64,
        "{per_thread:?}"
    );
    eprintln!("answered per thread: {per_thread:?}");

    // Shutdown returns only after joining every thread (bounded by a watchdog here so
    // a hang fails the test instead of stalling it).
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        handle.shutdown();
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("shutdown did not return: a worker thread was not joined");
    // Every worker closed its connections...
    for mut c in conns {
        let mut rest = Vec::new();
        let n = c.read_to_end(&mut rest);
        assert!(
            matches!(n, Ok(0)) || n.is_err(),
            "connection still open after shutdown: {n:?}"
        );
    }
    // ...and its clone of the listener: nothing accepts on the port any more.
    assert!(
        TcpStream::connect(addr).is_err(),
        "a worker thread still holds the listener"
    );
}
