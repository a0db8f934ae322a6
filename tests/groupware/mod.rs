//! What the multi-user groupware tests share: a users file made with `volley passwd`,
//! and one HTTP/1.1 request with Basic credentials on a fresh loopback connection.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine;

/// A test's own directory (`volley-gw-TAG-...`), removed when dropped.
pub fn temp_dir(tag: &str) -> crate::common::TestDir {
    crate::common::fresh_dir(&format!("volley-gw-{tag}"))
}

/// `NAME:HASH` from `volley passwd NAME --cost 4` (cheap hashes keep tests fast; the
/// cost is part of the hash, so the server verifies at that cost).
pub fn passwd_line(name: &str, password: &str) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["passwd", name, "--cost", "4"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn volley passwd");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{password}\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Writes a users file with `(name, password)` accounts into `dir`.
pub fn users_file(dir: &Path, accounts: &[(&str, &str)]) -> PathBuf {
    let text: String = accounts
        .iter()
        .map(|(n, p)| passwd_line(n, p) + "\n")
        .collect();
    let path = dir.join("users");
    std::fs::write(&path, text).unwrap();
    path
}

/// An answer: status, head (lines), body.
pub struct Reply {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Reply {
    /// The value of header `name`.
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    }
}

/// One request on a fresh connection, with Basic credentials when `user` is given.
pub fn send(
    addr: &str,
    user: Option<(&str, &str)>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    try_send(addr, user, method, path, headers, body).unwrap()
}

/// [`send`], with connection failures returned (a server being killed).
pub fn try_send(
    addr: &str,
    user: Option<(&str, &str)>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<Reply> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some((u, p)) = user {
        let enc = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
        head.push_str(&format!("Authorization: Basic {enc}\r\n"));
    }
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    s.write_all(body.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    if status == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(Reply {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    })
}
