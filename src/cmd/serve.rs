//! `volley serve`: run the built-in server on a directory until SIGINT/SIGTERM.
//!
//! Prints `listening on http://ADDR/` (or `https://` with TLS) as the first stdout line
//! (tests and `volley demo` read the port from it when `--listen` used port 0); with
//! `--tls-self-signed` a second line `tls ca: PATH` names the CA certificate to trust;
//! with `--h3`, a line `http/3: udp ADDR` follows.
//!
//! What the server allows: with `--users`, each account reads and writes its own home;
//! without, everyone may read and nobody may write unless `--writable` is given, and
//! anonymous writes are refused outright on an address beyond loopback (anyone on the
//! network could then delete the tree).

// The timeouts take volley's one duration syntax, as bench's flags do (`10s`, `500ms`,
// `2m`, bare seconds), parsed once by clap; zero is refused: a server cannot time out at 0.
use crate::cmd::bench::load::values::positive_duration;
use crate::exit::usage;
use anyhow::Context;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use volley_server::{Server, ServerConfig, ServerTls};

/// Flags of `volley serve`.
#[derive(clap::Args)]
#[command(
    after_help = "What the server allows: without --users it is read-only for \
everyone (GET, HEAD, OPTIONS, PROPFIND, REPORT; PUT, DELETE, MKCOL, MKCALENDAR, COPY, MOVE \
and PROPPATCH get 405) unless --writable is given, which lets anyone who reaches it \
change the tree and is refused beyond loopback. With --users every request needs an \
account, and each account reads and writes only its own home."
)]
pub struct Args {
    /// Directory to serve.
    #[arg(long)]
    root: PathBuf,
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Event-loop threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Append an Apache combined-format access log (microsecond timestamps) to FILE.
    #[arg(long, value_name = "FILE")]
    access_log: Option<PathBuf>,
    /// Connections beyond this get 503 and are closed.
    #[arg(long, default_value_t = 10_000)]
    max_connections: usize,
    /// Close a client that has not sent a full header block within this (e.g. 10s, 500ms).
    #[arg(long, default_value = "10s", value_parser = positive_duration)]
    header_timeout: Duration,
    /// Close an idle keep-alive connection after this.
    #[arg(long, default_value = "60s", value_parser = positive_duration)]
    idle_timeout: Duration,
    /// Largest request body in bytes (larger gets 413).
    #[arg(long, default_value_t = 16 << 20)]
    max_body: u64,
    /// Serve HTTPS (HTTP/2 through ALPN `h2`, and HTTP/1.1) with this PEM certificate
    /// chain (needs --tls-key).
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Serve HTTPS with a throw-away CA and server certificate (localhost, 127.0.0.1,
    /// ::1) written into DIR; prints the CA path for clients to trust.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["tls_cert", "tls_key"])]
    tls_self_signed: Option<PathBuf>,
    /// Speak HTTP/1.1 only: no `h2` in TLS ALPN and no h2c prior-knowledge connections
    /// (by default both are answered).
    #[arg(long)]
    http1_only: bool,
    /// Speak HTTP/3 too: QUIC on UDP at the same port number, advertised by Alt-Svc on
    /// the HTTP/1.1 and HTTP/2 answers. Needs --tls-self-signed or --tls-cert (QUIC
    /// always runs TLS 1.3).
    #[arg(long)]
    h3: bool,
    /// Multi-user mode: accounts from FILE (`name:hash` lines, argon2id or bcrypt; see
    /// `volley passwd`). Every request then needs HTTP Basic credentials; each account
    /// gets the home `/<name>/` (its principal) with a default calendar
    /// `/<name>/calendar/`, and reaches nothing else. Without it the server is anonymous.
    #[arg(long, value_name = "FILE")]
    users: Option<PathBuf>,
    /// Without --users, let anyone who reaches the server write into --root (PUT,
    /// DELETE, MKCOL, MKCALENDAR, COPY, MOVE, PROPPATCH). Only on a loopback --listen:
    /// beyond it, use --users.
    #[arg(long, conflicts_with = "users")]
    writable: bool,
}

/// Runs `volley serve`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut config = checked_config(&args)?;
    if let Some(file) = &args.users {
        config.auth = Some(accounts(file, &args.root)?);
    }
    let ca_path = tls(&args, &mut config)?;
    // SIGINT/SIGTERM/SIGHUP set a flag this thread polls, so the workers stop cleanly
    // (access log flushed, threads joined). `ctrlc`, the crate every other command
    // already uses, rather than a second hand-written sigaction in the server library.
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || stop.store(true, Ordering::SeqCst))
            .context("installing signal handlers")?;
    }
    let server = Server::bind(config)?;
    let addr = server.local_addr();
    let scheme = server.scheme();
    let handle = server.spawn()?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on {scheme}://{addr}/")?;
        if let Some(ca) = &ca_path {
            writeln!(out, "tls ca: {}", ca.display())?;
        }
        if args.h3 {
            writeln!(out, "http/3: udp {addr}")?;
        }
        out.flush()?;
    }
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
    }
    handle.shutdown();
    eprintln!("volley: stopped");
    Ok(ExitCode::SUCCESS)
}

/// The server's configuration from the flags, each checked first (a bad one is a
/// usage error, before anything is written), without accounts or TLS.
fn checked_config(args: &Args) -> anyhow::Result<ServerConfig> {
    let (listen, header_timeout, idle_timeout) =
        (args.listen, args.header_timeout, args.idle_timeout);
    if args.writable && !listen.ip().is_loopback() {
        usage!(
            "--writable on {listen} would let anyone on the network change {}: listen on loopback, or give accounts with --users",
            args.root.display()
        );
    }
    if !args.root.is_dir() {
        usage!("--root {} is not a directory", args.root.display());
    }
    if args.h3 && args.tls_cert.is_none() && args.tls_self_signed.is_none() {
        usage!("--h3 needs TLS (QUIC always runs TLS 1.3): add --tls-self-signed DIR or --tls-cert/--tls-key");
    }
    if args.threads == 0 || args.max_connections == 0 {
        usage!("--threads and --max-connections must be at least 1");
    }
    let mut config = ServerConfig::new(&args.root);
    config.writable = args.writable;
    config.listen = listen;
    config.threads = args.threads;
    config.access_log = args.access_log.clone();
    config.max_connections = args.max_connections;
    config.header_timeout = header_timeout;
    config.idle_timeout = idle_timeout;
    config.max_body_bytes = args.max_body;
    config.http2 = !args.http1_only;
    config.http3 = args.h3;
    Ok(config)
}

/// The accounts of `--users FILE`, each with its home provisioned under `root`, behind
/// the password verifier's thread. A file that cannot be read or parsed is a usage
/// error naming it.
fn accounts(file: &Path, root: &Path) -> anyhow::Result<Arc<volley_dav::auth::Auth>> {
    let users = match volley_dav::auth::Users::read(file) {
        Ok(u) => u,
        Err(e @ volley_dav::auth::UsersError::Read { .. }) => {
            let cause = std::error::Error::source(&e).map(ToString::to_string);
            usage!("{e}: {}", cause.unwrap_or_default())
        }
        Err(e) => usage!("{e}"),
    };
    for name in users.names() {
        volley_dav::provision(root, name)
            .with_context(|| format!("creating the home of {name} under {}", root.display()))?;
    }
    volley_dav::auth::Auth::start(&users).context("starting the password verifier")
}

/// TLS from `--tls-cert`/`--tls-key`, or a throw-away set written by
/// `--tls-self-signed` (whose CA path is returned, for the banner).
fn tls(args: &Args, config: &mut ServerConfig) -> anyhow::Result<Option<PathBuf>> {
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        config.tls = Some(ServerTls::new(cert, key));
    } else if let Some(dir) = &args.tls_self_signed {
        let paths = volley_server::self_signed_set(dir)
            .with_context(|| format!("writing certificates into {}", dir.display()))?;
        config.tls = Some(ServerTls::new(&paths.cert, &paths.key));
        return Ok(Some(paths.ca));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::positive_duration;
    use std::time::Duration;

    #[test]
    fn durations() {
        let ok = |s: &str| positive_duration(s).ok();
        assert_eq!(ok("10s"), Some(Duration::from_secs(10)));
        assert_eq!(ok("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(ok("2"), Some(Duration::from_secs(2)));
        assert_eq!(ok("1m"), Some(Duration::from_secs(60)));
        assert_eq!(
            ok("1h"),
            Some(Duration::from_secs(3600)),
            "the one syntax: hours work here as in bench and study"
        );
        assert_eq!(ok("0s"), None);
        assert_eq!(ok("abc"), None);
        assert_eq!(ok("5d"), None);
    }
}
