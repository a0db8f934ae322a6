//! HTTP/2 conformance of `volley serve`: h2spec (github.com/summerwind/h2spec, installed
//! by `scripts/install-deps.sh`) runs its whole suite against the real binary, over h2c
//! (prior knowledge) and over TLS (ALPN h2), and every case must pass. A missing h2spec
//! fails the test: a conformance check that silently skips proves nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common;
use common::Served;

/// Longest an h2spec run may take (it needs about a second; a hang must not stall CI).
const RUN_LIMIT: Duration = Duration::from_secs(300);

/// h2spec on PATH, else where `go install` puts it.
fn h2spec() -> PathBuf {
    if let Ok(path) = std::env::var("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join("h2spec");
            if p.is_file() {
                return p;
            }
        }
    }
    let gopath = Command::new("go")
        .args(["env", "GOPATH"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|s| !s.is_empty());
    let p = gopath.map(|g| Path::new(&g).join("bin/h2spec"));
    match p {
        Some(p) if p.is_file() => p,
        _ => panic!(
            "h2spec not found on PATH or in $(go env GOPATH)/bin: run scripts/install-deps.sh"
        ),
    }
}

/// Runs h2spec against `addr` (extra flags: `-t -k` for TLS) and returns (passed,
/// failed) from its summary line `145 tests, 145 passed, 0 skipped, 0 failed`.
fn run(addr: &str, extra: &[&str]) -> (u32, u32, String) {
    let (host, port) = addr.rsplit_once(':').unwrap();
    // Output into a file, not a pipe: a full pipe would stall h2spec while we wait. The
    // file is removed when `log` drops, also when this panics.
    let log = tempfile::Builder::new()
        .prefix(&format!("volley-h2spec-{port}-"))
        .suffix(".log")
        .tempfile()
        .unwrap();
    let file = log.reopen().unwrap();
    let mut child = Command::new(h2spec())
        .args(["-h", host, "-p", port, "-o", "5"])
        .args(extra)
        .stdout(file)
        .stderr(Stdio::null())
        .spawn()
        .expect("start h2spec");
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("h2spec took longer than {RUN_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let text = std::fs::read_to_string(log.path()).unwrap_or_default();
    let summary = text
        .lines()
        .find(|l| l.contains(" tests, ") && l.contains(" failed"))
        .unwrap_or_else(|| panic!("no h2spec summary in:\n{text}"));
    let count = |word: &str| -> u32 {
        summary
            .split(", ")
            .find_map(|part| part.trim().strip_suffix(word))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {word:?} count in {summary:?}"))
    };
    (count("passed"), count("failed"), text)
}

/// A docroot of one page, removed when the test ends.
fn root(tag: &str) -> crate::common::TestDir {
    let root = crate::common::fresh_dir(&format!("volley-h2spec-{tag}"));
    std::fs::write(root.join("index.html"), "<p>h2spec</p>\n").unwrap();
    root
}

fn check(addr: &str, extra: &[&str]) {
    let (passed, failed, text) = run(addr, extra);
    assert!(
        failed == 0 && passed > 0,
        "h2spec {extra:?}: {passed} passed, {failed} failed\n{text}"
    );
}

#[test]
fn h2spec_passes_over_h2c() {
    let root = root("h2c");
    let served = Served::start(&root, &[]);
    check(&served.addr, &[]);
}

#[test]
fn h2spec_passes_over_tls() {
    let root = root("tls");
    // Beside the docroot, not in it: the key is never served.
    let certs_dir = crate::common::fresh_dir("volley-h2spec-certs");
    let certs = certs_dir.join("certs");
    let certs_arg = certs.to_string_lossy().into_owned();
    let served = Served::start(&root, &["--tls-self-signed", &certs_arg]);
    assert!(served.base.starts_with("https://"), "{}", served.base);
    check(&served.addr, &["-t", "-k"]);
}
