//! `volley bench --h2 --compressed` against a real nginx speaking prior-knowledge h2c:
//! gzip and Brotli bodies decoded and validated (wire vs decoded bytes in the JSON),
//! and each bad answer over HTTP/2 (Accept-Encoding ignored, another coding, a corrupt
//! body, a size or hash mismatch) one counted error kind, exit 1 with one line.
//! Skipped, with a message, where nginx is not installed; the Brotli part where its
//! module is missing.

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const NGINX: &str = "/usr/sbin/nginx";
const BROTLI_MODULE: &str = "/usr/lib/nginx/modules/ngx_http_brotli_filter_module.so";

/// nginx and its prefix directory, both gone on drop: the process is killed first, then
/// the directory's guard (a field) removes it.
struct Nginx {
    child: Child,
    dir: crate::common::TestDir,
    port: u16,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Nginx {
    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

fn page() -> String {
    (0..2000)
        .map(|i| format!("<p>row {i:05} of an h2 page</p>\n"))
        .collect()
}

/// h2c nginx: `/index.html` compressed (gzip, and br when the module is there),
/// `/plain/` never compressed, `/wrong/` labelled br whatever it is, `/corrupt/`
/// labelled gzip over bytes that are not gzip.
fn start(brotli: bool) -> Option<Nginx> {
    if !Path::new(NGINX).exists() {
        eprintln!("skipping: {NGINX} not installed");
        return None;
    }
    let dir = crate::common::fresh_dir("volley-bench-h2c");
    for sub in ["www/plain", "www/wrong", "www/corrupt", "tmp"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    let www = dir.join("www");
    std::fs::write(www.join("index.html"), page()).unwrap();
    std::fs::write(www.join("plain/index.html"), page()).unwrap();
    std::fs::write(www.join("wrong/index.html"), page()).unwrap();
    std::fs::write(www.join("corrupt/index.html"), "not gzip at all").unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let d = dir.display();
    let (load, br, br_off) = if brotli {
        (
            format!("load_module {BROTLI_MODULE};\n"),
            " brotli on;\n brotli_types text/html;\n",
            " brotli off;",
        )
    } else {
        (String::new(), "", "")
    };
    let conf = format!(
        "{load}master_process off;\ndaemon off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
         error_log {d}/error.log warn;\nevents {{ worker_connections 256; }}\n\
         http {{\n access_log off;\n client_body_temp_path {d}/tmp/body;\n\
         proxy_temp_path {d}/tmp/proxy;\n fastcgi_temp_path {d}/tmp/fastcgi;\n\
         uwsgi_temp_path {d}/tmp/uwsgi;\n scgi_temp_path {d}/tmp/scgi;\n\
         gzip on;\n gzip_min_length 0;\n gzip_types text/html;\n{br}\
         server {{\n  listen 127.0.0.1:{port} http2;\n  root {d}/www;\n\
           location /plain/ {{ gzip off;{br_off} }}\n\
           location /wrong/ {{ gzip off;{br_off} add_header Content-Encoding br; }}\n\
           location /corrupt/ {{ gzip off;{br_off} add_header Content-Encoding gzip; }}\n\
         }}\n}}\n"
    );
    let conf_path = dir.join("nginx.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let child = Command::new(NGINX)
        .arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(&conf_path)
        .arg("-e")
        .arg(dir.join("error.log"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn nginx");
    let nginx = Nginx { child, dir, port };
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        let log = std::fs::read_to_string(nginx.dir.join("error.log")).unwrap_or_default();
        assert!(Instant::now() < deadline, "nginx did not start: {log}");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(nginx)
}

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_volley"))
        .arg("bench")
        .args(["--timeout", "5s", "-d", "20s", "--h2", "--streams", "4"])
        .args(args)
        .output()
        .unwrap()
}

fn one_line_failure(args: &[&str]) -> String {
    let out = bench(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    err
}

fn sha256_hex(data: &[u8]) -> String {
    // Removed when `file` drops, also if sha256sum cannot be run.
    let file = tempfile::Builder::new()
        .prefix("volley-h2-sha-")
        .tempfile()
        .unwrap();
    std::fs::write(file.path(), data).unwrap();
    let out = Command::new("sha256sum").arg(file.path()).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn h2c_bodies_are_decoded_and_validated_with_wire_and_decoded_bytes() {
    let brotli = Path::new(BROTLI_MODULE).exists();
    if !brotli {
        eprintln!("brotli part skipped: {BROTLI_MODULE} missing (libnginx-mod-http-brotli-filter)");
    }
    let Some(nginx) = start(brotli) else {
        return;
    };
    let page = page();
    let size = page.len().to_string();
    let sha = sha256_hex(page.as_bytes());
    let url = nginx.url("/index.html");
    let mut codings = vec!["gzip"];
    if brotli {
        codings.push("br");
    }
    for coding in codings {
        let out = bench(&[
            &url,
            "-n",
            "40",
            "-c",
            "2",
            "--compressed",
            coding,
            "--expect-size",
            &size,
            "--expect-sha256",
            &sha,
            "-q",
            "--json",
        ]);
        assert!(
            out.status.success(),
            "{coding}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let run = &v["runs"][0];
        assert_eq!(run["requests"]["ok"], 40, "{coding}");
        assert_eq!(run["wire"]["protocol"], "h2c");
        assert_eq!(run["wire"]["compression"], coding);
        assert_eq!(run["bytes"]["body_total"], 40 * page.len() as u64);
        let wire = run["bytes"]["wire_body_total"].as_u64().unwrap();
        assert!(
            wire > 0 && wire < 40 * page.len() as u64 / 4,
            "{coding}: {wire} coded bytes"
        );
    }

    // Bad answers, one error kind each.
    let zeros = "0".repeat(64);
    let cases: [(&str, Vec<&str>, &str); 5] = [
        ("/plain/index.html", vec![], "12 encoding errors"),
        ("/wrong/index.html", vec![], "12 encoding errors"),
        ("/corrupt/index.html", vec![], "12 encoding errors"),
        (
            "/index.html",
            vec!["--expect-size", "7"],
            "12 validation errors",
        ),
        (
            "/index.html",
            vec!["--expect-sha256", &zeros],
            "12 validation errors",
        ),
    ];
    for (path, extra, want) in &cases {
        let url = nginx.url(path);
        let mut args = vec![url.as_str(), "-n", "12", "--compressed", "gzip"];
        args.extend(extra.iter().copied());
        let line = one_line_failure(&args);
        assert!(line.contains(want), "{path} {extra:?}: {line}");
    }
}
