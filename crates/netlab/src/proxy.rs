//! Delay on a link where the kernel has no netem: Toxiproxy (the Go module
//! `github.com/Shopify/toxiproxy/v2`, installed by the test set-up as `toxiproxy-server`)
//! in the lab's target namespace, one proxy per (target, delay) with a `latency` toxic on
//! the downstream side, so every response arrives `delay` later: a request's round trip
//! grows by the delay, as seed 003's far injector saw (68 ms instead of 3.5 ms).
//!
//! An injector with a delayed link loads the proxy's address instead of the target's.
//! The proxy's TCP handshake is local, so connection set-up is not delayed; the issue's
//! "per request" latency is. The API is plain HTTP/1.1 with a JSON body, written here on
//! a `TcpStream` (two POSTs; no HTTP client crate for that).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use volley_proc::die_with_parent;

use crate::exec::command_in;
use crate::lab::Lab;
use crate::NetlabError;

/// The API port inside the target namespace (nothing else listens there).
const API_PORT: u16 = 8474;

/// `toxiproxy-server` on `PATH`, else in Go's default `GOPATH/bin`.
fn program() -> String {
    let on_path = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("toxiproxy-server").is_file()));
    if on_path {
        return "toxiproxy-server".into();
    }
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    format!("{home}/go/bin/toxiproxy-server")
}

/// A running Toxiproxy in a lab's target namespace (killed on drop).
#[derive(Debug)]
pub struct DelayProxies {
    child: Child,
    api: SocketAddr,
    next_port: u16,
}

impl DelayProxies {
    /// Starts Toxiproxy in `lab`'s target namespace and waits (bounded) for its API;
    /// needs the lab linked to volley's namespace ([`Lab::link_root`]).
    pub fn start(lab: &Lab) -> Result<DelayProxies, NetlabError> {
        let ip = lab.target_addr();
        let mut cmd = command_in(&lab.target_ns(), program());
        cmd.args(["-host", &ip.to_string(), "-port", &API_PORT.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        die_with_parent(&mut cmd);
        let child = cmd.spawn().map_err(|source| NetlabError::Spawn {
            program: "toxiproxy-server".into(),
            source,
        })?;
        let mut me = DelayProxies {
            child,
            api: SocketAddr::new(ip.into(), API_PORT),
            next_port: 28_080,
        };
        let until = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect_timeout(&me.api, Duration::from_millis(200)).is_err() {
            if let Ok(Some(status)) = me.child.try_wait() {
                return Err(NetlabError::Command {
                    command: "toxiproxy-server".into(),
                    stderr: format!("exited at start: {status} (is it installed?)"),
                });
            }
            if Instant::now() > until {
                return Err(NetlabError::Timeout("Toxiproxy's API did not answer"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(me)
    }

    /// A proxy to `upstream` whose responses arrive `delay_ms` later; returns the
    /// address to load instead of `upstream`.
    pub fn add(&mut self, upstream: SocketAddr, delay_ms: u64) -> Result<SocketAddr, NetlabError> {
        let port = self.next_port;
        self.next_port += 1;
        let listen = SocketAddr::new(self.api.ip(), port);
        let name = format!("p{port}");
        self.post(
            "/proxies",
            &format!(
                r#"{{"name":"{name}","listen":"{listen}","upstream":"{upstream}","enabled":true}}"#
            ),
        )?;
        self.post(
            &format!("/proxies/{name}/toxics"),
            &format!(
                r#"{{"name":"delay","type":"latency","stream":"downstream","toxicity":1.0,"attributes":{{"latency":{delay_ms},"jitter":0}}}}"#
            ),
        )?;
        Ok(listen)
    }

    fn post(&self, path: &str, body: &str) -> Result<(), NetlabError> {
        let io = |source| NetlabError::Io {
            action: "calling Toxiproxy's API",
            source,
        };
        let mut s = TcpStream::connect_timeout(&self.api, Duration::from_secs(5)).map_err(io)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .map_err(io)?;
        write!(
            s,
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.api,
            body.len()
        )
        .map_err(io)?;
        let mut answer = String::new();
        s.read_to_string(&mut answer).map_err(io)?;
        let status = answer.split_whitespace().nth(1).unwrap_or("");
        if status.starts_with('2') {
            Ok(())
        } else {
            Err(NetlabError::Command {
                command: format!("Toxiproxy POST {path}"),
                stderr: answer.lines().next().unwrap_or("no answer").to_string(),
            })
        }
    }
}

impl Drop for DelayProxies {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
