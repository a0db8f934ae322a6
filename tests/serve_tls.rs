//! `volley serve` over HTTPS, end to end: the real binary with `--tls-self-signed` and
//! with `--tls-cert/--tls-key`, fetched by curl trusting only the printed CA.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use crate::common;
use common::Served;

/// A temporary directory removed on drop.
struct TempDir(crate::common::TestDir);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = crate::common::fresh_dir(&format!("volley-serve-tls-{tag}"));
        std::fs::create_dir_all(p.join("site")).unwrap();
        std::fs::write(p.join("site/700b.html"), "x".repeat(700)).unwrap();
        std::fs::write(p.join("site/big.bin"), big()).unwrap();
        TempDir(p)
    }
}

fn big() -> Vec<u8> {
    (0..600_000u32).map(|i| (i % 251) as u8).collect()
}

/// curl with a hard time limit; returns (exit ok, stdout bytes, stderr text).
fn curl(args: &[&str]) -> (bool, Vec<u8>, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20"])
        .args(args)
        .output()
        .expect("curl is installed");
    (
        out.status.success(),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn self_signed_https_serves_curl_with_keep_alive() {
    let tmp = TempDir::new("self");
    let certs = tmp.0.join("certs");
    // Writable: the test ends with an upload.
    let mut s = Served::start(
        &tmp.0.join("site"),
        &["--tls-self-signed", certs.to_str().unwrap(), "--writable"],
    );
    let ca_path = s.ca_line();
    assert_eq!(ca_path, certs.join("ca.pem"));
    let ca = ca_path.to_str().unwrap().to_owned();
    let port = s.addr.rsplit(':').next().unwrap().to_owned();

    // Two URLs in one curl: the second reuses the TLS connection (0 new connects).
    let url = format!("https://localhost:{port}/700b.html");
    let (ok, out, err) = curl(&[
        "--cacert",
        &ca,
        "--http1.1",
        "-w",
        "|%{http_code} %{num_connects} %{size_download}\n",
        &url,
        &url,
    ]);
    assert!(ok, "{err}");
    let text = String::from_utf8_lossy(&out);
    let body = "x".repeat(700);
    assert_eq!(
        text,
        format!("{body}|200 1 700\n{body}|200 0 700\n"),
        "keep-alive over TLS"
    );

    // A streamed (uncached) file, by IP address (the certificate names 127.0.0.1 too).
    let big_path = tmp.0.join("got.bin");
    let (ok, _, err) = curl(&[
        "--cacert",
        &ca,
        "-o",
        big_path.to_str().unwrap(),
        &format!("https://127.0.0.1:{port}/big.bin"),
    ]);
    assert!(ok, "{err}");
    assert!(std::fs::read(&big_path).unwrap() == big());

    // An upload with Expect: 100-continue over TLS.
    let up = tmp.0.join("up.bin");
    std::fs::write(&up, vec![7u8; 50_000]).unwrap();
    let (ok, out, err) = curl(&[
        "--cacert",
        &ca,
        "-H",
        "Expect: 100-continue",
        "-T",
        up.to_str().unwrap(),
        "-w",
        "%{http_code}",
        "-o",
        "/dev/null",
        &format!("https://localhost:{port}/up.bin"),
    ]);
    assert!(ok, "{err}");
    assert_eq!(String::from_utf8_lossy(&out), "201");
    assert_eq!(
        std::fs::read(tmp.0.join("site/up.bin")).unwrap(),
        vec![7u8; 50_000]
    );

    // Without the CA, curl refuses the certificate: it really is the throw-away one.
    let (ok, _, _) = curl(&[&url]);
    assert!(
        !ok,
        "curl trusted a self-signed certificate without --cacert"
    );

    // Plain HTTP to the TLS port: a clear 400, then the close.
    let mut c = TcpStream::connect(&s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"GET /700b.html HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut all = Vec::new();
    c.read_to_end(&mut all).unwrap();
    assert!(
        all.starts_with(b"HTTP/1.1 400 "),
        "{}",
        String::from_utf8_lossy(&all)
    );
}

#[test]
fn cert_and_key_files_and_a_bad_key() {
    let tmp = TempDir::new("files");
    let paths = volley_server::self_signed_set(&tmp.0.join("certs")).unwrap();
    let s = Served::start(
        &tmp.0.join("site"),
        &[
            "--tls-cert",
            paths.cert.to_str().unwrap(),
            "--tls-key",
            paths.key.to_str().unwrap(),
        ],
    );
    let port = s.addr.rsplit(':').next().unwrap().to_owned();
    let (ok, out, err) = curl(&[
        "--cacert",
        paths.ca.to_str().unwrap(),
        &format!("https://localhost:{port}/700b.html"),
    ]);
    assert!(ok, "{err}");
    assert_eq!(out, "x".repeat(700).into_bytes());

    // The certificate given as the key: one clear line, exit code 1, no port left open.
    let out = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["serve", "--root"])
        .arg(tmp.0.join("site"))
        .arg("--tls-cert")
        .arg(&paths.cert)
        .arg("--tls-key")
        .arg(&paths.cert)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("TLS") || err.contains("key"), "{err}");
    assert!(out.stdout.is_empty());

    // --tls-cert without --tls-key is a usage error.
    let out = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["serve", "--root"])
        .arg(tmp.0.join("site"))
        .arg("--tls-cert")
        .arg(&paths.cert)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
