//! Request bodies through the event loop, in-process: every body size split at any
//! point of the byte stream is answered (a body arriving in a later read than its head
//! used to be left unanswered), and `Expect: 100-continue` gets its interim response.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;
use volley_server::{Server, ServerConfig, ServerHandle};

/// A server on a free loopback port over a fresh temporary root.
struct Served {
    root: PathBuf,
    addr: std::net::SocketAddr,
    handle: Option<ServerHandle>,
    /// Removes `root` once `drop` below has shut the server down (fields drop after it).
    _guard: tempfile::TempDir,
}

impl Served {
    fn start(tag: &str, max_body_bytes: u64) -> Served {
        let guard = tempfile::Builder::new()
            .prefix(&format!("volley-server-{tag}-"))
            .tempdir()
            .unwrap();
        let root = guard.path().to_path_buf();
        let mut config = ServerConfig::new(&root);
        config.max_body_bytes = max_body_bytes;
        // These tests upload: an anonymous server takes writes only when asked.
        config.writable = true;
        let server = Server::bind(config).unwrap();
        let addr = server.local_addr();
        Served {
            root,
            addr,
            handle: Some(server.spawn().unwrap()),
            _guard: guard,
        }
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown();
        }
    }
}

struct Resp {
    status: u16,
    body: Vec<u8>,
}

fn read_resp(r: &mut BufReader<TcpStream>) -> Resp {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status = line
        .split(' ')
        .nth(1)
        .unwrap_or_else(|| panic!("status line {line:?}"))
        .parse()
        .unwrap();
    let mut len = 0;
    loop {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        let l = l.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l.split_once(':').unwrap();
        if n.eq_ignore_ascii_case("content-length") {
            len = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    Resp { status, body }
}

fn req(path: &str, extra: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n")
}

/// Deterministic body bytes (so a shifted or truncated copy is detected).
fn body_of(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

/// Writes `bytes` in pieces split at `splits`, pausing between them so each piece
/// arrives in its own read on the server (the pause shapes input; nothing is timed).
fn write_split(c: &mut TcpStream, bytes: &[u8], splits: &[usize]) {
    let mut at = 0;
    for &s in splits.iter().chain([bytes.len()].iter()) {
        let s = s.min(bytes.len()).max(at);
        c.write_all(&bytes[at..s]).unwrap();
        c.flush().unwrap();
        at = s;
        std::thread::sleep(Duration::from_millis(15));
    }
}

fn put_bytes(path: &str, body: &[u8], close: bool) -> (Vec<u8>, usize) {
    let conn = if close { "Connection: close\r\n" } else { "" };
    let mut raw = format!(
        "PUT {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n{conn}\r\n",
        body.len()
    )
    .into_bytes();
    let head_len = raw.len();
    raw.extend_from_slice(body);
    (raw, head_len)
}

/// Bug report: a PUT whose body arrives in a later read than its head (or outgrows the
/// first 4 KiB buffer) was never answered. Every size, split anywhere, keep-alive or not.
#[test]
fn request_bodies_of_any_size_and_split_are_answered() {
    let s = Served::start("bodies", 16 << 20);
    let sizes = [0usize, 1, 3600, 4095, 4096, 4097, 4950, 16 << 10, 1 << 20];
    for (k, &size) in sizes.iter().enumerate() {
        let body = body_of(size);
        // Where to cut: head alone then body; inside the head; head + 1 body byte;
        // mid body; at the first buffer's edge; one write.
        let (probe, head_len) = put_bytes("/x", &body, false);
        let cuts: Vec<Vec<usize>> = vec![
            vec![head_len],
            vec![head_len / 2],
            vec![head_len + 1],
            vec![head_len + size / 2],
            vec![4096],
            vec![head_len, head_len + size / 3, head_len + 2 * size / 3],
            vec![],
        ];
        drop(probe);
        for close in [true, false] {
            // A NEW connection per request, as in the report.
            for (j, cut) in cuts.iter().enumerate() {
                let path = format!("/b{k}-{j}-{close}.bin");
                let (raw, _) = put_bytes(&path, &body, close);
                let mut c = s.connect();
                write_split(&mut c, &raw, cut);
                let mut r = BufReader::new(c);
                let resp = read_resp(&mut r);
                assert!(
                    resp.status == 201 || resp.status == 204,
                    "size {size} cut {cut:?} close {close}: {}",
                    resp.status
                );
                assert_eq!(
                    std::fs::read(s.root.join(&path[1..])).unwrap(),
                    body,
                    "size {size} cut {cut:?}"
                );
            }
        }
        // Keep-alive: all cuts one after another on ONE connection, then a GET back.
        let mut r = BufReader::new(s.connect());
        for (j, cut) in cuts.iter().enumerate() {
            let path = format!("/ka{k}-{j}.bin");
            let (raw, _) = put_bytes(&path, &body, false);
            write_split(r.get_mut(), &raw, cut);
            let resp = read_resp(&mut r);
            assert!(
                resp.status == 201 || resp.status == 204,
                "keep-alive size {size} cut {cut:?}: {}",
                resp.status
            );
            r.get_mut().write_all(req(&path, "").as_bytes()).unwrap();
            let back = read_resp(&mut r);
            assert_eq!((back.status, back.body.len()), (200, size));
            assert!(back.body == body, "keep-alive size {size} cut {cut:?}");
        }
    }
}

/// Reads exactly the next `n` bytes (or what came before EOF / the read timeout).
fn read_n(c: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut got = vec![0; n];
    let mut have = 0;
    while have < n {
        match c.read(&mut got[have..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => have += k,
        }
    }
    got.truncate(have);
    got
}

/// Bug report: no `100 Continue` for `Expect: 100-continue` (litmus http/expect100).
#[test]
fn expect_100_continue_gets_an_interim_response() {
    let s = Served::start("expect", 100_000);
    const INTERIM: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
    for (size, close) in [(10usize, false), (5000, false), (70_000, true)] {
        let body = body_of(size);
        let mut c = s.connect();
        let conn = if close { "Connection: close\r\n" } else { "" };
        write!(
            c,
            "PUT /e{size}.bin HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: {size}\r\n{conn}\r\n"
        )
        .unwrap();
        let interim = read_n(&mut c, INTERIM.len());
        assert_eq!(
            String::from_utf8_lossy(&interim),
            String::from_utf8_lossy(INTERIM),
            "size {size}"
        );
        c.write_all(&body).unwrap();
        let mut r = BufReader::new(c);
        let resp = read_resp(&mut r);
        assert_eq!(resp.status, 201, "size {size}");
        assert_eq!(
            std::fs::read(s.root.join(format!("e{size}.bin"))).unwrap(),
            body
        );
        if !close {
            // The next request on the same connection has no stray interim before it.
            r.get_mut()
                .write_all(req(&format!("/e{size}.bin"), "").as_bytes())
                .unwrap();
            assert_eq!(read_resp(&mut r).body, body);
        }
    }
    // Rejected early (too large): the final status, no interim, then close.
    let mut c = s.connect();
    c.write_all(
        b"PUT /big HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 200000\r\n\r\n",
    )
    .unwrap();
    let mut all = Vec::new();
    let _ = c.read_to_end(&mut all);
    assert!(
        all.starts_with(b"HTTP/1.1 413 "),
        "{:?}",
        String::from_utf8_lossy(&all)
    );
    // A method nobody handles: 405 at once, not an invitation to send the body.
    let mut c = s.connect();
    c.write_all(
        b"BREW /pot HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n",
    )
    .unwrap();
    let mut all = Vec::new();
    let _ = c.read_to_end(&mut all);
    assert!(
        all.starts_with(b"HTTP/1.1 405 "),
        "{:?}",
        String::from_utf8_lossy(&all)
    );
    // Body already sent with the head: no interim needed, just the answer.
    let mut c = s.connect();
    c.write_all(b"PUT /now.txt HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc")
        .unwrap();
    let mut all = Vec::new();
    let _ = c.read_to_end(&mut all);
    assert!(
        all.starts_with(b"HTTP/1.1 201 "),
        "{:?}",
        String::from_utf8_lossy(&all)
    );
    // HTTP/1.0 clients never get a 1xx (RFC 9110 15.2).
    let mut c = s.connect();
    c.write_all(b"PUT /old.txt HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    c.write_all(b"abc").unwrap();
    let mut all = Vec::new();
    let _ = c.read_to_end(&mut all);
    assert!(
        all.starts_with(b"HTTP/1.1 201 "),
        "{:?}",
        String::from_utf8_lossy(&all)
    );
}
