//! A short office day of 20 users against Radicale (installed by
//! scripts/install-deps.sh into /opt/volley-venv), started on a free loopback port with a
//! generated config and plain htpasswd accounts: every correctness check must pass.
//! Skipped, with a message saying why, only when Radicale is not installed.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RADICALE: &str = "/opt/volley-venv/bin/radicale";

/// A Radicale process and its directory, both gone on drop.
struct Radicale {
    child: Child,
    dir: PathBuf,
    url: String,
}

impl Drop for Radicale {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start(users: usize, password: &str) -> Radicale {
    let dir = std::env::temp_dir().join(format!("volley-office-radicale-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let htpasswd: String = (1..=users)
        .map(|i| format!("office{i}:{password}\n"))
        .collect();
    std::fs::write(dir.join("users"), htpasswd).unwrap();
    let port = free_port();
    let config = format!(
        "[server]\nhosts = 127.0.0.1:{port}\n[auth]\ntype = htpasswd\nhtpasswd_filename = {users}\nhtpasswd_encryption = plain\n[storage]\nfilesystem_folder = {store}\n[logging]\nlevel = warning\n",
        users = dir.join("users").display(),
        store = dir.join("collections").display(),
    );
    std::fs::write(dir.join("config"), config).unwrap();
    let child = Command::new(RADICALE)
        .arg("--config")
        .arg(dir.join("config"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start radicale");
    let r = Radicale {
        child,
        dir,
        url: format!("http://127.0.0.1:{port}/"),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "radicale did not listen within 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    r
}

#[test]
fn twenty_users_pass_every_check_against_radicale() {
    if !Path::new(RADICALE).exists() {
        eprintln!("SKIPPED: {RADICALE} is absent (scripts/install-deps.sh installs it)");
        return;
    }
    let server = start(20, "s3cret");
    // Radicale is a Python server a few times slower than the built-in one: a lighter
    // day (100 decisions) keeps the test short while every operation type still runs.
    let out = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args([
            "bench",
            "--json",
            "-",
            "--caldav",
            "20",
            "--caldav-password",
            "s3cret",
        ])
        .args([
            "--decisions",
            "100",
            "--duration",
            "20s",
            "--seed",
            "11",
            &server.url,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let j: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|_| panic!("no JSON; stderr: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(0), "{j}");
    assert_eq!(j["violations_total"], 0, "{j}");
    for row in j["ops"].as_array().unwrap() {
        assert!(row["count"].as_u64().unwrap() > 0, "{row}");
        assert_eq!(row["errors"], 0, "{row}");
    }
    // Radicale has no calendars before the run: set-up made each with MKCALENDAR.
    assert_eq!(j["sessions"][0]["count"], 40, "{j}");
    assert!(j["items_at_end"].as_u64().unwrap() >= 20 * 20);
}
