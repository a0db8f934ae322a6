//! The codec against a real server: nginx speaking h2c with prior knowledge
//! (`listen ... http2;` without TLS), driven over a blocking `TcpStream` on loopback.
//! Skipped (with a message) only when /usr/sbin/nginx is absent.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use volley_h2::{Event, H2Conn, RequestHead, Settings, SubmitError};

const NGINX: &str = "/usr/sbin/nginx";

/// A throw-away nginx: its prefix directory and process, both removed on drop.
struct Nginx {
    dir: PathBuf,
    child: Child,
    port: u16,
    /// Removes `dir` once `drop` below has stopped nginx (fields drop after it).
    _guard: tempfile::TempDir,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    l.local_addr().unwrap().port()
}

fn start_nginx(files: &[(&str, usize)]) -> Nginx {
    // Removed when the guard drops, also when nginx fails to start. Mode 0755 like a
    // directory made with `create_dir`: nginx's workers may run as another user.
    let guard = tempfile::Builder::new()
        .prefix("volley-h2-nginx-")
        .tempdir()
        .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(guard.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let dir = guard.path().to_path_buf();
    let www = dir.join("www");
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    std::fs::create_dir_all(&www).unwrap();
    for (name, len) in files {
        let body: Vec<u8> = (0..*len).map(|i| b'a' + (i % 26) as u8).collect();
        std::fs::write(www.join(name), body).unwrap();
    }
    let port = free_port();
    let d = dir.display();
    // master_process off: one process, so killing the child stops everything.
    let conf = format!(
        "master_process off;\ndaemon off;\nworker_processes 1;\n\
         error_log {d}/logs/error.log warn;\npid {d}/nginx.pid;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n\
           proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n\
           uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
           http2_max_concurrent_streams 10;\n\
           server {{\n    listen 127.0.0.1:{port} http2;\n    root {d}/www;\n  }}\n}}\n"
    );
    let conf_path = dir.join("nginx.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let child = Command::new(NGINX)
        .arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(&conf_path)
        .arg("-e")
        .arg(dir.join("logs/error.log"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn nginx");
    let nginx = Nginx {
        dir,
        child,
        port,
        _guard: guard,
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "nginx did not listen: {}",
            log(&nginx.dir)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    nginx
}

fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("logs/error.log")).unwrap_or_default()
}

/// Writes everything pending, then blocks for one read and feeds it.
fn pump(conn: &mut H2Conn, sock: &mut TcpStream, buf: &mut [u8]) {
    while !conn.pending_output().is_empty() {
        let n = sock.write(conn.pending_output()).expect("write");
        conn.consume_output(n);
    }
    let n = sock.read(buf).expect("read (2 s timeout)");
    assert!(n > 0, "nginx closed the connection");
    conn.feed(&buf[..n]).expect("codec error on nginx's bytes");
}

#[test]
fn hundred_requests_over_ten_streams_against_nginx() {
    if !Path::new(NGINX).exists() {
        eprintln!("skipping: {NGINX} not installed");
        return;
    }
    let files = [("small.txt", 1234usize), ("large.bin", 150_000)];
    let nginx = start_nginx(&files);
    let mut sock = TcpStream::connect(("127.0.0.1", nginx.port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    sock.set_nodelay(true).unwrap();
    // Small windows for part of the run would also work; large ones are the
    // benchmark default and what this checks.
    let mut conn = H2Conn::new(Settings::default());
    let authority = format!("127.0.0.1:{}", nginx.port);
    let mut buf = vec![0u8; 64 * 1024];

    // Learn the server's limit (10) before filling it.
    while conn.peer_max_concurrent_streams() == 100 {
        pump(&mut conn, &mut sock, &mut buf);
    }
    assert_eq!(conn.peer_max_concurrent_streams(), 10);

    const TOTAL: usize = 100;
    let mut submitted = 0usize;
    let mut done = 0usize;
    let mut expected_len = std::collections::HashMap::new();
    let mut got_len = std::collections::HashMap::new();
    let mut status_ok = 0usize;
    let mut max_open = 0usize;
    let deadline = Instant::now() + Duration::from_secs(10);
    while done < TOTAL {
        assert!(Instant::now() < deadline, "timed out: {done}/{TOTAL} done");
        while submitted < TOTAL {
            let (path, len) = if submitted % 3 == 0 {
                ("/large.bin", files[1].1)
            } else {
                ("/small.txt", files[0].1)
            };
            let head = RequestHead {
                method: "GET",
                scheme: "http",
                authority: &authority,
                path,
                headers: &[("user-agent", "volley-h2-test"), ("accept", "*/*")],
            };
            match conn.submit(&head, b"") {
                Ok(id) => {
                    expected_len.insert(id, len);
                    submitted += 1;
                }
                Err(SubmitError::TooManyStreams) => break,
                Err(e) => panic!("submit: {e}"),
            }
        }
        max_open = max_open.max(conn.open_streams());
        pump(&mut conn, &mut sock, &mut buf);
        while let Some(ev) = conn.poll_event() {
            match ev {
                Event::Headers {
                    stream,
                    status,
                    end_stream,
                } => {
                    assert_eq!(status, 200, "stream {stream}");
                    assert!(!end_stream);
                    status_ok += 1;
                }
                Event::Data {
                    stream,
                    len,
                    end_stream,
                } => {
                    *got_len.entry(stream).or_insert(0usize) += len;
                    if end_stream {
                        done += 1;
                    }
                }
                Event::PeerSettings | Event::Ping => {}
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    assert_eq!(status_ok, TOTAL);
    assert_eq!(max_open, 10, "ran 10 streams concurrently");
    assert_eq!(conn.open_streams(), 0);
    for (id, len) in &expected_len {
        assert_eq!(got_len.get(id), Some(len), "body length of stream {id}");
    }
    assert!(
        log(&nginx.dir).lines().all(|l| !l.contains("[error]")),
        "{}",
        log(&nginx.dir)
    );
}

#[test]
fn post_body_and_missing_file_against_nginx() {
    if !Path::new(NGINX).exists() {
        eprintln!("skipping: {NGINX} not installed");
        return;
    }
    let nginx = start_nginx(&[("f.txt", 10)]);
    let mut sock = TcpStream::connect(("127.0.0.1", nginx.port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut conn = H2Conn::new(Settings {
        capture_headers: true,
        ..Settings::default()
    });
    let authority = format!("127.0.0.1:{}", nginx.port);
    let get: RequestHead = RequestHead {
        method: "GET",
        scheme: "http",
        authority: &authority,
        path: "/nope",
        headers: &[],
    };
    let missing = conn.submit(&get, b"").unwrap();
    // A 100 kB body is larger than the default 65,535-byte send windows, so it only
    // completes if WINDOW_UPDATEs from nginx are applied (or nginx answers early).
    let post = RequestHead {
        method: "POST",
        path: "/f.txt",
        ..get
    };
    let body = vec![b'z'; 100_000];
    let posted = conn.submit(&post, &body).unwrap();
    let mut statuses = std::collections::HashMap::new();
    let mut finished = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = vec![0u8; 64 * 1024];
    while finished < 2 {
        assert!(Instant::now() < deadline, "timed out");
        pump(&mut conn, &mut sock, &mut buf);
        while let Some(ev) = conn.poll_event() {
            match ev {
                Event::Headers {
                    stream,
                    status,
                    end_stream,
                } => {
                    statuses.insert(stream, status);
                    finished += end_stream as usize;
                }
                Event::Data { end_stream, .. } => finished += end_stream as usize,
                Event::StreamReset { stream, .. } => {
                    assert!(statuses.contains_key(&stream), "reset before a response");
                    finished += 1;
                }
                _ => {}
            }
        }
    }
    assert_eq!(statuses.get(&missing), Some(&404));
    assert_eq!(
        statuses.get(&posted),
        Some(&405),
        "static files refuse POST"
    );
    let (_, fields) = conn.pop_captured_headers().unwrap();
    assert!(fields
        .iter()
        .any(|(n, v)| n == b"server" && v.starts_with(b"nginx")));
}
