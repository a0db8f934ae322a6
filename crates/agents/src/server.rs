//! A private `nats-server` on loopback, for local runs and tests.
//!
//! Place in the flow: before the coordinator, when no `--bus URL` is given. Debian's
//! `nats-server` is started with `-a 127.0.0.1 -p -1` (the server picks a free port, so
//! there is no race between choosing a port and binding it; [`PrivateNats::restart`]
//! binds the same port again) and no config file; the
//! port is read from its "Listening for client connections on" log line, then a TCP
//! connect proves it accepts. It is stopped, by its own pid, on [`PrivateNats::stop`]
//! or on drop.

use crate::AgentsError;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a server may take to say where it listens.
const START_BOUND: Duration = Duration::from_secs(10);

/// A running private server.
#[derive(Debug)]
pub struct PrivateNats {
    child: Option<Child>,
    ip: std::net::IpAddr,
    port: u16,
}

impl PrivateNats {
    /// Starts `nats-server` from `PATH`.
    pub fn start() -> Result<Self, AgentsError> {
        Self::start_bin("nats-server")
    }

    /// Starts `nats-server` listening on `ip` (a lab address the agents in network
    /// namespaces reach) instead of loopback.
    pub fn start_on(ip: std::net::IpAddr) -> Result<Self, AgentsError> {
        Self::start_bin_on("nats-server", ip)
    }

    /// Starts `nats-server` listening on `addr`, the address agents on other hosts
    /// dial (`bus_url`); port 0 lets the server pick a free one.
    pub fn start_at(addr: SocketAddr) -> Result<Self, AgentsError> {
        Self::start_bin_at("nats-server", addr.ip(), addr.port())
    }

    /// Starts the given `nats-server` binary.
    pub fn start_bin(bin: &str) -> Result<Self, AgentsError> {
        Self::start_bin_on(bin, std::net::Ipv4Addr::LOCALHOST.into())
    }

    /// Stops the server and starts a new one on the same address and port: the bus
    /// briefly away, as after a restart (tests of the agents' buffering).
    pub fn restart(&mut self) -> Result<(), AgentsError> {
        self.stop();
        let again = Self::start_bin_at("nats-server", self.ip, self.port)?;
        *self = again;
        Ok(())
    }

    fn start_bin_on(bin: &str, ip: std::net::IpAddr) -> Result<Self, AgentsError> {
        Self::start_bin_at(bin, ip, 0)
    }

    fn start_bin_at(bin: &str, ip: std::net::IpAddr, port: u16) -> Result<Self, AgentsError> {
        // `-p -1`: the server picks a free port and says which.
        let port_arg = if port == 0 {
            "-1".to_string()
        } else {
            port.to_string()
        };
        let mut cmd = Command::new(bin);
        cmd.args(["-a", &ip.to_string(), "-p", &port_arg])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // A private bus ends with its volley, even one killed by SIGKILL.
        volley_proc::die_with_parent(&mut cmd);
        let mut child = cmd.spawn().map_err(|source| AgentsError::Io {
            action: "starting nats-server",
            source,
        })?;
        let Some(stderr) = child.stderr.take() else {
            return Err(AgentsError::Server("no stderr pipe".into()));
        };
        let (tx, rx) = mpsc::channel();
        // Reads the log to its end so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(port) = listening_port(&line) {
                    let _ = tx.send(port);
                }
            }
        });
        let mut me = PrivateNats {
            child: Some(child),
            ip,
            port: 0,
        };
        me.port = rx.recv_timeout(START_BOUND).map_err(|_| {
            AgentsError::Server(format!(
                "did not report a client port within {START_BOUND:?}"
            ))
        })?;
        let addr = SocketAddr::new(ip, me.port);
        let deadline = Instant::now() + START_BOUND;
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if Instant::now() > deadline {
                return Err(AgentsError::Server(format!("does not accept on {addr}")));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(me)
    }

    /// Its client port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its client URL.
    pub fn url(&self) -> String {
        format!("nats://{}", SocketAddr::new(self.ip, self.port))
    }

    /// Kills and reaps it (idempotent).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for PrivateNats {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The port of a "Listening for client connections on HOST:PORT" log line.
fn listening_port(line: &str) -> Option<u16> {
    let (_, rest) = line.split_once("Listening for client connections on ")?;
    rest.trim().rsplit_once(':')?.1.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_from_the_log_line() {
        let l = "[10174] 2026/11/25 06:49:49.355963 [INF] Listening for client connections on 127.0.0.1:40957";
        assert_eq!(listening_port(l), Some(40957));
        assert_eq!(listening_port("[INF] Server is ready"), None);
        assert_eq!(
            listening_port("Listening for client connections on [::1]:x"),
            None
        );
    }

    #[test]
    fn a_missing_binary_is_a_typed_error() {
        let e = PrivateNats::start_bin("/nonexistent/nats-server").unwrap_err();
        assert!(matches!(e, AgentsError::Io { .. }));
    }
}
