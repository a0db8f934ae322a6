//! `volley bench --caldav`: a short office day of 20 users against the built-in
//! server (started in-process by bench), every correctness check passing and every
//! operation type used; and bad input refused with one line and exit 2.

use std::process::Command;

use volley_faultserver::{Behaviour, FaultServer};

fn volley() -> Command {
    Command::new(env!("CARGO_BIN_EXE_volley"))
}

/// Runs `volley bench --caldav ... --json -` and returns (exit code, JSON, stderr).
fn office(args: &[&str]) -> (i32, serde_json::Value, String) {
    let out = volley()
        .args(["bench", "--json", "-"])
        .args(args)
        .output()
        .expect("run volley");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap_or(-1),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn op<'a>(j: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    j["ops"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["name"] == name))
        .unwrap_or_else(|| panic!("no row {name} in {j}"))
}

#[test]
fn twenty_users_pass_every_check_against_the_builtin_server() {
    let (code, j, err) = office(&["--caldav", "20", "--duration", "15s", "--seed", "5"]);
    assert_eq!(code, 0, "stderr: {err}\n{j}");
    assert_eq!(j["violations_total"], 0, "{j}");
    assert_eq!(j["users"], 20);
    for name in [
        "options",
        "propfind-d0",
        "propfind-d1",
        "report-sync",
        "report-multiget",
        "report-query",
        "get",
        "put-create",
        "put-update",
        "delete",
    ] {
        let row = op(&j, name);
        assert!(row["count"].as_u64().unwrap() > 0, "{name}: {row}");
        assert_eq!(row["errors"], 0, "{name}: {row}");
        assert!(row["p99_ms"].as_f64().unwrap() > 0.0, "{name}: {row}");
    }
    let sessions = j["sessions"].as_array().unwrap();
    // Two devices per user: 40 initial syncs, then polls.
    assert_eq!(sessions[0]["name"], "sync-initial");
    assert_eq!(sessions[0]["count"], 40, "{j}");
    assert!(sessions[1]["count"].as_u64().unwrap() > 40, "{j}");
    assert_eq!(j["actions_skipped"], 0);
    assert!(j["items_at_end"].as_u64().unwrap() > 20 * 20);
}

#[test]
fn the_same_seed_plans_the_same_day() {
    let a = office(&["--caldav", "3", "--duration", "3s", "--seed", "9"]);
    let b = office(&["--caldav", "3", "--duration", "3s", "--seed", "9"]);
    assert_eq!((a.0, b.0), (0, 0), "{}{}", a.2, b.2);
    assert_eq!(a.1["actions_planned"], b.1["actions_planned"]);
    assert_eq!(
        op(&a.1, "put-create")["count"],
        op(&b.1, "put-create")["count"]
    );
}

fn usage_line(args: &[&str], needle: &str) {
    let out = volley().arg("bench").args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    usage_line(&["--caldav", "0"], "at least one user");
    usage_line(&["--caldav", "many"], "number of users");
    usage_line(
        &["--caldav", "2", "--profile", "outlook"],
        "unknown profile `outlook`",
    );
    usage_line(&["--caldav", "2", "--compress", "-3"], "--compress");
    // A plain HTTP server (answers 200 to everything, no DAV header) is not CalDAV.
    let plain = FaultServer::start(Behaviour::Ok {
        body_len: 700,
        keep_alive: true,
    })
    .unwrap();
    usage_line(&["--caldav", "2", &plain.url("/")], "does not speak CalDAV");
    // Nothing listening.
    let addr = plain.addr();
    drop(plain);
    usage_line(
        &["--caldav", "2", &format!("http://{addr}/")],
        "cannot connect",
    );
}

/// A static nginx (no DAV module configured) on a free loopback port; stopped on drop.
struct Nginx {
    child: std::process::Child,
    dir: std::path::PathBuf,
    port: u16,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn static_nginx() -> Option<Nginx> {
    let bin = std::path::Path::new("/usr/sbin/nginx");
    if !bin.exists() {
        return None;
    }
    let dir = std::env::temp_dir().join(format!("volley-office-nginx-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("www")).unwrap();
    std::fs::write(dir.join("www/index.html"), "hello").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let d = dir.display();
    let conf = format!(
        "daemon off; master_process off; pid {d}/nginx.pid; error_log {d}/error.log;\n\
         events {{}}\nhttp {{ access_log off; client_body_temp_path {d}/t1; proxy_temp_path {d}/t2;\n\
         fastcgi_temp_path {d}/t3; uwsgi_temp_path {d}/t4; scgi_temp_path {d}/t5;\n\
         server {{ listen 127.0.0.1:{port}; root {d}/www; }} }}\n"
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let child = Command::new(bin)
        .args(["-p", &d.to_string(), "-c", &format!("{d}/nginx.conf")])
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let n = Nginx { child, dir, port };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "nginx did not listen");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Some(n)
}

#[test]
fn a_static_nginx_is_not_caldav() {
    let Some(nginx) = static_nginx() else {
        eprintln!("SKIPPED: /usr/sbin/nginx is absent (scripts/install-deps.sh installs it)");
        return;
    };
    let url = format!("http://127.0.0.1:{}/", nginx.port);
    usage_line(&["--caldav", "2", &url], "does not speak CalDAV");
}
