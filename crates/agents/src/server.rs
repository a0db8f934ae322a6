//! A private `nats-server` on loopback, for local runs and tests.
//!
//! Place in the flow: before the coordinator, when no `--bus URL` is given. Debian's
//! `nats-server` is started with `-a 127.0.0.1 -p -1` (the server picks a free port, so
//! there is no race between choosing a port and binding it; [`PrivateNats::restart`]
//! binds the same port again) and no config file; the
//! port is read from its "Listening for client connections on" log line, and its
//! "Server is ready" line says it accepts. No connection of volley's own proves it: on
//! a secured server a bare TCP connect that closes is a failed TLS handshake in the
//! server's log, which would count as a refusal in every step (issue 26). It is
//! stopped, by its own pid, on [`PrivateNats::stop`] or on drop.
//!
//! A secured one ([`PrivateNats::start_secured`], what studies start) also gets a
//! config file: TLS with a certificate from a throw-away CA for its address, and one
//! user per party with only its own subjects ([`crate::auth::StudyKeys`]); the files
//! live in a directory only this user can read, removed on drop. Connections the server
//! refused (bad credentials, failed TLS handshakes) are counted from its log; after
//! [`PrivateNats::stop`] the count is final (the log has been read to its end).

use crate::auth::StudyKeys;
use crate::AgentsError;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a server may take to say where it listens.
const START_BOUND: Duration = Duration::from_secs(10);

/// A running private server.
#[derive(Debug)]
pub struct PrivateNats {
    child: Option<Child>,
    ip: std::net::IpAddr,
    port: u16,
    /// Its keys and the directory of its config, when secured.
    secured: Option<Arc<Secured>>,
    /// A config file of the caller's ([`PrivateNats::start_with_config`]).
    conf: Option<PathBuf>,
    /// Connections it refused so far (its log's authorization and TLS errors).
    refused: Arc<AtomicU64>,
    /// The thread reading its log, joined on stop so the count is final.
    log: Option<JoinHandle<()>>,
}

/// A secured server's keys and files (the directory goes with the last handle).
#[derive(Debug)]
struct Secured {
    keys: StudyKeys,
    dir: PathBuf,
    /// The directory's line in this process's ledger: it holds the bus's private key,
    /// and a volley killed before the drop leaves it to the next one's orphan sweep
    /// (dropped after the removal).
    _noted: volley_targets::NotedDir,
}

impl Drop for Secured {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Secured {
    fn conf(&self) -> PathBuf {
        self.dir.join("nats.conf")
    }

    /// Writes the certificate, key and config into a new directory of mode 0700.
    fn write(keys: StudyKeys) -> Result<Self, AgentsError> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let io = |source| AgentsError::Io {
            action: "writing the private bus's config",
            source,
        };
        let dir = std::env::temp_dir().join(format!(
            "volley-nats-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let noted = volley_targets::NotedDir::note("bus", &dir);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(io)?;
        let me = Secured {
            keys,
            dir,
            _noted: noted,
        };
        let put = |name: &str, text: &str| -> Result<(), AgentsError> {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(me.dir.join(name))
                .map_err(io)?;
            std::io::Write::write_all(&mut f, text.as_bytes()).map_err(io)
        };
        put("server.pem", &me.keys.server.cert_pem)?;
        put("server.key", &me.keys.server.key_pem)?;
        let conf = me.keys.server_config(
            &me.dir.join("server.pem").display().to_string(),
            &me.dir.join("server.key").display().to_string(),
        );
        put("nats.conf", &conf)?;
        Ok(me)
    }
}

impl PrivateNats {
    /// Starts a secured `nats-server` from `PATH` listening on `addr` (port 0: a free
    /// one): TLS with a certificate for `addr`'s IP from a new throw-away CA, and users
    /// for the coordinator and the agents `names`, each with its own subjects only
    /// ([`PrivateNats::keys`] hands out their credentials).
    pub fn start_secured(addr: SocketAddr, names: &[String]) -> Result<Self, AgentsError> {
        let ip = addr.ip().to_string();
        let keys = StudyKeys::generate(&[ip.as_str()], names)?;
        let secured = Arc::new(Secured::write(keys)?);
        Self::spawn("nats-server", addr.ip(), addr.port(), Some(secured))
    }

    /// Starts `nats-server` from `PATH` with a configuration file of the caller's (e.g.
    /// the one `volley agents manifest` puts in its Secret), listening on `addr`.
    pub fn start_with_config(
        conf: &std::path::Path,
        addr: SocketAddr,
    ) -> Result<Self, AgentsError> {
        let mut me = Self::spawn_conf("nats-server", addr.ip(), addr.port(), None, Some(conf))?;
        me.conf = Some(conf.to_path_buf());
        Ok(me)
    }

    /// The keys of a secured server.
    pub fn keys(&self) -> Option<&StudyKeys> {
        self.secured.as_deref().map(|s| &s.keys)
    }

    /// Connections the server refused so far: wrong or missing credentials, failed TLS
    /// handshakes (a client without TLS, or one that does not trust the CA). Only
    /// others' connections: volley makes none of its own to see the server up. Final
    /// once [`PrivateNats::stop`] returned; before, a refusal of the last moments may
    /// not have been read from the log yet.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Starts `nats-server` from `PATH`, its security off (tests of the bus itself,
    /// `bus_security = "off"`).
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
        let mut again = Self::spawn_conf(
            "nats-server",
            self.ip,
            self.port,
            self.secured.clone(),
            self.conf.as_deref(),
        )?;
        again.conf = self.conf.clone();
        again.refused.fetch_add(self.refused(), Ordering::Relaxed);
        *self = again;
        Ok(())
    }

    fn start_bin_on(bin: &str, ip: std::net::IpAddr) -> Result<Self, AgentsError> {
        Self::start_bin_at(bin, ip, 0)
    }

    fn start_bin_at(bin: &str, ip: std::net::IpAddr, port: u16) -> Result<Self, AgentsError> {
        Self::spawn(bin, ip, port, None)
    }

    fn spawn(
        bin: &str,
        ip: std::net::IpAddr,
        port: u16,
        secured: Option<Arc<Secured>>,
    ) -> Result<Self, AgentsError> {
        Self::spawn_conf(bin, ip, port, secured, None)
    }

    fn spawn_conf(
        bin: &str,
        ip: std::net::IpAddr,
        port: u16,
        secured: Option<Arc<Secured>>,
        conf: Option<&std::path::Path>,
    ) -> Result<Self, AgentsError> {
        // `-p -1`: the server picks a free port and says which.
        let port_arg = if port == 0 {
            "-1".to_string()
        } else {
            port.to_string()
        };
        let mut cmd = Command::new(bin);
        // Flags after the file override it: the address and port stay ours.
        if let Some(s) = &secured {
            cmd.arg("-c").arg(s.conf());
        } else if let Some(c) = conf {
            cmd.arg("-c").arg(c);
        }
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
        let refused = Arc::new(AtomicU64::new(0));
        let count = refused.clone();
        // Reads the log to its end so the server never blocks on a full pipe.
        let log = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                match startup_line(&line) {
                    Some(s) => {
                        let _ = tx.send(s);
                    }
                    None if is_refusal(&line) => {
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                    None => {}
                }
            }
        });
        let mut me = PrivateNats {
            child: Some(child),
            ip,
            port: 0,
            secured,
            conf: None,
            refused,
            log: Some(log),
        };
        // On error `me` drops here: the server is killed and its log joined.
        me.port = wait_ready(&rx)?;
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

    /// Kills and reaps it, then reads its log to the end (idempotent): [`refused`]
    /// is final after it.
    ///
    /// [`refused`]: PrivateNats::refused
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        // The pipe's writer is gone with the server, so the reader ends. A server that
        // forked a child holding its stderr would keep it open: nats-server does not.
        if let Some(log) = self.log.take() {
            let _ = log.join();
        }
    }
}

impl Drop for PrivateNats {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether a log line says a client connection was refused: bad credentials
/// ("authentication error", "Authorization Violation") or a failed TLS handshake.
fn is_refusal(line: &str) -> bool {
    let l = line.to_ascii_lowercase();
    l.contains("[err]")
        && (l.contains("authentication error")
            || l.contains("authorization violation")
            || l.contains("tls handshake error"))
}

/// What the server's start says in its log, in order.
#[derive(Debug, PartialEq, Eq)]
enum Startup {
    /// "Listening for client connections on HOST:PORT".
    Listening(u16),
    /// "Server is ready": every listener is open.
    Ready,
}

/// The start-up line `line` is, if any.
fn startup_line(line: &str) -> Option<Startup> {
    if line.contains("[INF] Server is ready") {
        return Some(Startup::Ready);
    }
    listening_port(line).map(Startup::Listening)
}

/// Waits (at most [`START_BOUND`]) for the server's port, then for it to be ready.
fn wait_ready(rx: &mpsc::Receiver<Startup>) -> Result<u16, AgentsError> {
    let deadline = std::time::Instant::now() + START_BOUND;
    let mut port = None;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match (rx.recv_timeout(left), port) {
            (Ok(Startup::Listening(p)), _) => port = Some(p),
            (Ok(Startup::Ready), Some(p)) => return Ok(p),
            (Ok(Startup::Ready), None) => {
                return Err(AgentsError::Server(
                    "said it was ready without a client port".into(),
                ))
            }
            (Err(_), None) => {
                return Err(AgentsError::Server(format!(
                    "did not report a client port within {START_BOUND:?}"
                )))
            }
            (Err(_), Some(p)) => {
                return Err(AgentsError::Server(format!(
                    "listened on port {p} but did not say it was ready within {START_BOUND:?}"
                )))
            }
        }
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
    fn start_up_lines_in_order_and_a_server_that_never_says_ready() {
        let ready = "[10174] 2026/11/25 06:49:49.356012 [INF] Server is ready";
        assert_eq!(startup_line(ready), Some(Startup::Ready));
        assert_eq!(startup_line("[ERR] cid:4 - TLS handshake error: EOF"), None);
        let (tx, rx) = mpsc::channel();
        tx.send(Startup::Listening(4222)).unwrap();
        tx.send(Startup::Ready).unwrap();
        assert_eq!(wait_ready(&rx).unwrap(), 4222);
        // Ready before any port, or the log ending before ready: typed errors.
        let (tx, rx) = mpsc::channel();
        tx.send(Startup::Ready).unwrap();
        assert!(matches!(wait_ready(&rx), Err(AgentsError::Server(_))));
        let (tx, rx) = mpsc::channel();
        tx.send(Startup::Listening(4222)).unwrap();
        drop(tx);
        let e = wait_ready(&rx).unwrap_err().to_string();
        assert!(e.contains("4222") && e.contains("ready"), "{e}");
    }

    #[test]
    fn a_missing_binary_is_a_typed_error() {
        let e = PrivateNats::start_bin("/nonexistent/nats-server").unwrap_err();
        assert!(matches!(e, AgentsError::Io { .. }));
    }
}
