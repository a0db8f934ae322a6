//! Measuring a link before a run: its round trip (TCP connect, the lowest of several) and
//! its throughput (a bulk transfer target -> injector, the download direction that
//! carries responses), from threads that have entered the two namespaces.
//!
//! `setns(2)` moves only the calling thread, so each side runs on a thread of its own
//! and the rest of volley stays where it was.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::lab::Lab;
use crate::NetlabError;

/// What a link measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LinkMeasure {
    /// Lowest TCP connect time of the probes, ms (one round trip).
    pub rtt_ms: f64,
    /// Payload throughput target -> injector, bits per second (after the first
    /// `SKIP_BYTES`, which may ride tbf's burst).
    pub throughput_bit: f64,
}

const PROBES: usize = 5;
const SKIP_BYTES: u64 = 256 * 1024;
const BOUND: Duration = Duration::from_secs(60);

/// Runs `f` on a new thread inside network namespace `ns`.
fn in_ns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> Result<T, NetlabError> + Send + 'static,
) -> std::thread::JoinHandle<Result<T, NetlabError>> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let fd = File::open(&path).map_err(|source| NetlabError::Io {
            action: "opening a namespace",
            source,
        })?;
        // SAFETY: setns on a valid namespace fd; it changes this thread only.
        if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(NetlabError::Io {
                action: "entering a namespace",
                source: std::io::Error::last_os_error(),
            });
        }
        f()
    })
}

fn io(action: &'static str) -> impl Fn(std::io::Error) -> NetlabError {
    move |source| NetlabError::Io { action, source }
}

/// Accepts `PROBES` connections and drops them, then sends `bytes` on the next one.
fn serve(listener: TcpListener, bytes: u64) -> Result<(), NetlabError> {
    listener.set_nonblocking(true).map_err(io("listening"))?;
    let until = Instant::now() + BOUND;
    let mut accepted = 0;
    while accepted <= PROBES {
        match listener.accept() {
            Ok((mut s, _)) => {
                accepted += 1;
                if accepted > PROBES {
                    s.set_nonblocking(false).map_err(io("sending"))?;
                    s.set_write_timeout(Some(BOUND)).map_err(io("sending"))?;
                    let chunk = vec![0u8; 64 * 1024];
                    let mut left = bytes;
                    while left > 0 {
                        let n = left.min(chunk.len() as u64) as usize;
                        s.write_all(&chunk[..n]).map_err(io("sending"))?;
                        left -= n as u64;
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() > until {
                    return Err(NetlabError::Timeout("the link measurement's server"));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(io("accepting")(e)),
        }
    }
    Ok(())
}

fn probe(addr: SocketAddr, bytes: u64) -> Result<LinkMeasure, NetlabError> {
    let mut rtt = f64::INFINITY;
    for _ in 0..PROBES {
        let t = Instant::now();
        let s =
            TcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(io("probing"))?;
        rtt = rtt.min(t.elapsed().as_secs_f64() * 1e3);
        drop(s);
    }
    let mut s =
        TcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(io("probing"))?;
    s.set_read_timeout(Some(BOUND)).map_err(io("reading"))?;
    let mut buf = vec![0u8; 64 * 1024];
    let (mut got, mut from) = (0u64, None);
    loop {
        let n = s.read(&mut buf).map_err(io("reading"))?;
        if n == 0 {
            break;
        }
        got += n as u64;
        if from.is_none() && got >= SKIP_BYTES {
            from = Some((Instant::now(), got));
        }
    }
    let (t, at) = from.ok_or(NetlabError::Timeout("too few bytes to measure a rate"))?;
    if got != bytes {
        return Err(NetlabError::Timeout("the transfer ended early"));
    }
    let secs = t.elapsed().as_secs_f64().max(1e-9);
    Ok(LinkMeasure {
        rtt_ms: rtt,
        throughput_bit: (got - at) as f64 * 8.0 / secs,
    })
}

/// Measures injector group `i`'s link with a transfer of `bytes` (give at least a few
/// seconds' worth at the link's rate, so the burst at the start does not count).
pub fn measure(lab: &Lab, i: usize, bytes: u64) -> Result<LinkMeasure, NetlabError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let ip = lab.target_addr();
    let server = in_ns(&lab.target_ns(), move || {
        let l = TcpListener::bind((ip, 0)).map_err(io("listening"))?;
        let _ = tx.send(l.local_addr().map_err(io("listening"))?);
        serve(l, bytes)
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(10))
        .map_err(|_| NetlabError::Timeout("the link measurement's server did not start"))?;
    let client = in_ns(&lab.injector_ns(i), move || probe(addr, bytes));
    let m = client
        .join()
        .map_err(|_| NetlabError::Timeout("the probe thread panicked"))?;
    let s = server
        .join()
        .map_err(|_| NetlabError::Timeout("the server thread panicked"))?;
    let m = m?;
    s?;
    Ok(m)
}
