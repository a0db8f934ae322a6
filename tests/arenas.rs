//! volley caps glibc's malloc arenas at one per CPU (at least two) unless the user
//! chose (`MALLOC_ARENA_MAX`): the office day's memory stays flatter with fewer arenas
//! (issue 26). Seen from outside, in `/proc/PID/maps`: every arena but the main one is
//! a heap mapped at a 64 MiB boundary (glibc's `HEAP_MAX_SIZE` on 64-bit), so a
//! `volley serve` with more event-loop threads than the cap allows holds at most
//! cap - 1 such heaps, and as many as its threads when the user asks for more.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use crate::common::Served;

/// glibc's heap alignment for non-main arenas on 64-bit targets.
const HEAP_ALIGN: u64 = 64 << 20;

/// Starts `volley serve` with `threads` event loops and `arena_max` (None: the
/// variable unset), has every thread's connection answered once, and counts the
/// non-main arenas' heaps in its memory map.
fn heaps_after_load(threads: usize, arena_max: Option<usize>) -> usize {
    let root = crate::common::fresh_dir("volley-arenas");
    std::fs::write(root.join("a.html"), "hello").unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_volley"));
    cmd.args(["serve", "--threads", &threads.to_string(), "--root"])
        .arg(&root)
        .env_remove("MALLOC_ARENA_MAX")
        .env_remove("GLIBC_TUNABLES");
    if let Some(n) = arena_max {
        cmd.env("MALLOC_ARENA_MAX", n.to_string());
    }
    let server = Served::start_cmd(cmd);
    let addr = server.addr.clone();
    // Several connections at once, each answered, so every event loop serves some.
    let mut conns: Vec<TcpStream> = (0..threads * 4)
        .map(|_| {
            let s = TcpStream::connect(&addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s
        })
        .collect();
    for c in &mut conns {
        c.write_all(b"GET /a.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .unwrap();
    }
    for c in &mut conns {
        let mut answer = Vec::new();
        let _ = c.read_to_end(&mut answer);
        assert!(answer.starts_with(b"HTTP/1.1 200"), "{answer:?}");
    }
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", server.pid())).unwrap();
    drop(server);
    maps.lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let start = f
                .first()
                .and_then(|r| r.split('-').next())
                .and_then(|s| u64::from_str_radix(s, 16).ok());
            // Anonymous (no path), private, writable, at a heap boundary.
            f.len() == 5 && f[1] == "rw-p" && start.is_some_and(|s| s % HEAP_ALIGN == 0)
        })
        .count()
}

#[test]
fn malloc_arenas_are_capped_unless_the_user_chose() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cap = cpus.max(2);
    let threads = cap + 3;
    let capped = heaps_after_load(threads, None);
    assert!(
        capped < cap,
        "{capped} arena heaps with {threads} threads; the cap is {cap} arenas"
    );
    // The user's choice stands, and this count sees arenas beyond the cap when there
    // are (so the check above can fail).
    let chosen = heaps_after_load(threads, Some(threads + 1));
    assert!(
        chosen >= cap,
        "{chosen} arena heaps with MALLOC_ARENA_MAX={} and {threads} threads",
        threads + 1
    );
}
