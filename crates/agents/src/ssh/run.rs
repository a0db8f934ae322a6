//! Running one ssh command to its end within a bound, and naming why it failed.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::{Host, SshError};

/// What a finished remote command gave.
#[derive(Debug)]
pub(super) struct Ran {
    pub(super) status: ExitStatus,
    pub(super) stdout: String,
    pub(super) stderr: String,
}

/// Runs `cmd` to its end within `bound`, feeding it `stdin` (a file) if given.
pub(super) fn run_bounded(
    mut cmd: Command,
    stdin: Option<&Path>,
    host: &Host,
    action: &'static str,
    bound: Duration,
) -> Result<Ran, SshError> {
    let io = |source| SshError::Io {
        action: "running ssh",
        source,
    };
    let feed = match stdin {
        Some(p) => Some(std::fs::File::open(p).map_err(|source| SshError::Io {
            action: "reading the volley binary",
            source,
        })?),
        None => None,
    };
    cmd.stdin(if feed.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(io)?;
    let feeder = feed.zip(child.stdin.take()).map(|(mut f, mut w)| {
        // A remote that fails (no space) closes the pipe: the copy error is expected.
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut f, &mut w);
            let _ = w.flush();
        })
    });
    let out = reader(child.stdout.take());
    let err = reader(child.stderr.take());
    let status = wait_bounded(&mut child, bound).ok_or_else(|| SshError::Timeout {
        host: host.to_string(),
        action,
        after: bound,
    })?;
    if let Some(f) = feeder {
        let _ = f.join();
    }
    Ok(Ran {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

pub(super) fn reader<R: Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut r) = r {
            let _ = r.read_to_string(&mut s);
        }
        s
    })
}

/// Waits for `child` at most `bound`; past it kills and reaps it and gives `None`.
pub(super) fn wait_bounded(child: &mut Child, bound: Duration) -> Option<ExitStatus> {
    let s = wait_bounded_alive(child, bound);
    if s.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    s
}

/// Waits for `child` at most `bound`; past it gives `None` and leaves it running.
pub(super) fn wait_bounded_alive(child: &mut Child, bound: Duration) -> Option<ExitStatus> {
    let until = Instant::now() + bound;
    loop {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The last non-empty line of `s`: the cause, on one line.
pub(super) fn last_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("no message")
        .to_string()
}

/// Names the cause of a failed remote command from ssh's and the remote's words.
pub(super) fn classify(host: &Host, action: &'static str, ran: &Ran) -> SshError {
    let (host, detail) = (host.to_string(), last_line(&ran.stderr));
    let e = &ran.stderr;
    let has = |words: &[&str]| words.iter().any(|w| e.contains(w));
    // ssh itself exits 255; the remote command's own failures have other codes.
    if ran.status.code() == Some(255) {
        if has(&["Permission denied", "Too many authentication failures"]) {
            return SshError::KeyRefused { host, detail };
        }
        if has(&[
            "Host key verification failed",
            "REMOTE HOST IDENTIFICATION HAS CHANGED",
        ]) {
            return SshError::HostKey { host, detail };
        }
        if has(&[
            "Connection refused",
            "No route to host",
            "timed out",
            "Could not resolve",
            "Network is unreachable",
            "Connection closed",
            "Connection reset",
        ]) {
            return SshError::Unreachable { host, detail };
        }
    }
    if has(&["No space left", "Disk quota exceeded"]) {
        return SshError::NoSpace { host, detail };
    }
    SshError::Remote {
        host,
        action,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran(code: i32, stderr: &str) -> Ran {
        use std::os::unix::process::ExitStatusExt;
        Ran {
            status: ExitStatus::from_raw(code << 8),
            stdout: String::new(),
            stderr: stderr.into(),
        }
    }

    #[test]
    fn causes_are_named() {
        let h: Host = "u@h".parse().unwrap();
        let cases = [
            (
                255,
                "ssh: connect to host h port 22: Connection refused",
                "unreachable",
            ),
            (255, "u@h: Permission denied (publickey).", "key refused"),
            (255, "Host key verification failed.", "host key"),
            (1, "cat: write error: No space left on device", "no space"),
            (1, "sh: 1: frob: not found", "probe"),
        ];
        for (code, err, want) in cases {
            let e = classify(&h, "probe", &ran(code, err)).to_string();
            assert!(e.starts_with("u@h: ") && e.contains(want), "{e}");
            assert_eq!(e.lines().count(), 1);
        }
    }
}
