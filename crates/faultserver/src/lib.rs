//! volley-faultserver: a deliberately misbehaving HTTP/1.1 server for tests.
//!
//! Place in the flow: beside the engine, as a *target*. The engine's and `volley bench`'s
//! integration tests (and later the study tests) start a [`FaultServer`] on
//! `127.0.0.1:0`, point the load at [`FaultServer::url`], and check that every injected
//! fault ends up as the right `ErrorKind` in the samples, with nothing silently dropped.
//! [`Behaviour::TokenBucket`] gives a server of *known* capacity, so a study's knee search
//! can be checked against the truth.
//!
//! Design: std only (threads + `std::net`), one accept thread plus one thread per
//! connection (bounded by [`Limits::max_connections`]). Every loop ends on
//! [`FaultServer::shutdown`] (also run on drop): the acceptor is woken by a self-connect,
//! live sockets are shut down so blocked reads return, and waits (slow, stall, token
//! bucket) sleep on a condition variable that shutdown signals.
#![deny(missing_docs)]

mod behaviour;
mod conn;
mod dav;
mod dav_fault;
mod dav_record;
mod http;

pub use behaviour::{
    Behaviour, BehaviourError, MalformedKind, DEFAULT_BODY_LEN, HOSTILE_PAYLOAD,
    OVERSIZED_HEADER_BYTES,
};
pub use dav::{DavFault, DavFaultError, DavServer};
pub use http::body_bytes;

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use behaviour::Script;

/// Resource bounds of a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A connection idle (or mid-request) this long is closed, as servers' keep-alive
    /// timeouts do. Stalled connections are exempt: they wait for the client or shutdown.
    pub idle_timeout: Duration,
    /// Connections served at once; more are accepted and closed at once, so a runaway
    /// client cannot make the server spawn unbounded threads.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            idle_timeout: Duration::from_secs(10),
            max_connections: 2048,
        }
    }
}

/// Counters since start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// TCP connections accepted (the shutdown wake-up connection excluded).
    pub connections: u64,
    /// Requests read completely (head and body), whether or not they were answered.
    pub requests: u64,
}

/// State shared by the acceptor, the connection threads and the handle.
pub(crate) struct Shared {
    pub script: Script,
    pub limits: Limits,
    addr: SocketAddr,
    stopped: AtomicBool,
    /// Paired with `wake` so waits end at once on stop.
    stop_lock: Mutex<()>,
    wake: Condvar,
    /// A clone of every live connection, so stop can shut them down (which unblocks
    /// their reads and writes). Also decides, under its lock, whether a newly accepted
    /// connection may still start (no race with stop).
    live: Mutex<HashMap<u64, TcpStream>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    connections: AtomicU64,
    pub requests: AtomicU64,
    /// Token bucket: theoretical arrival time of the next request (GCRA), if enabled.
    bucket_tat: Mutex<Option<Instant>>,
}

/// Locks a mutex, ignoring poisoning: the data are plain counters and sockets, valid even
/// if a holder panicked, and the server must keep shutting down cleanly.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub fn stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Stops the server without joining: used by shutdown and by `Dies` (from a
    /// connection thread, which must not join itself).
    pub fn stop(&self) {
        {
            let live = lock(&self.live);
            if self.stopped.swap(true, Ordering::SeqCst) {
                return;
            }
            for stream in live.values() {
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        }
        {
            let _guard = lock(&self.stop_lock);
            self.wake.notify_all();
        }
        // Wake the acceptor from its blocking accept(); it sees `stopped` and exits,
        // which closes the listener. A failed connect is harmless: the acceptor checks
        // the flag after every accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }

    /// Sleeps until `deadline`; returns `false` if the server stopped first.
    pub fn wait_until(&self, deadline: Instant) -> bool {
        let mut guard = lock(&self.stop_lock);
        loop {
            if self.stopped() {
                return false;
            }
            let now = Instant::now();
            if now >= deadline {
                return true;
            }
            guard = self
                .wake
                .wait_timeout(guard, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Token bucket admission (GCRA with queueing): returns when this request may be
    /// served. With interval T = 1/rate and tolerance tau = (burst-1)*T, the request is
    /// served at max(now, tat - tau) and tat advances to max(tat, now) + T, so a burst of
    /// `burst` requests passes at once and a sustained overload is served at exactly
    /// `rate_per_s`. Returns `false` if the server stopped while waiting.
    pub fn admit(&self) -> bool {
        let Some((rate_per_s, burst)) = self.script.bucket else {
            return true;
        };
        let interval = Duration::from_secs_f64(1.0 / rate_per_s);
        let tolerance = interval * burst.saturating_sub(1);
        let serve_at = {
            let mut tat = lock(&self.bucket_tat);
            let now = Instant::now();
            let current = tat.map_or(now, |t| t.max(now));
            let serve_at = current.checked_sub(tolerance).map_or(now, |t| t.max(now));
            *tat = Some(current + interval);
            serve_at
        };
        self.wait_until(serve_at)
    }
}

/// A running fault server. Dropping it shuts it down.
pub struct FaultServer {
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl FaultServer {
    /// Starts a server on `127.0.0.1:0` with default [`Limits`].
    ///
    /// Errors: `InvalidInput` (wrapping a [`BehaviourError`]) for an invalid behaviour,
    /// or the bind/spawn failure.
    pub fn start(behaviour: Behaviour) -> io::Result<FaultServer> {
        FaultServer::start_with(behaviour, Limits::default())
    }

    /// Starts a server with explicit limits.
    pub fn start_with(behaviour: Behaviour, limits: Limits) -> io::Result<FaultServer> {
        let script = Script::resolve(&behaviour)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            script,
            limits,
            addr,
            stopped: AtomicBool::new(false),
            stop_lock: Mutex::new(()),
            wake: Condvar::new(),
            live: Mutex::new(HashMap::new()),
            workers: Mutex::new(Vec::new()),
            connections: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            bucket_tat: Mutex::new(None),
        });
        let for_acceptor = Arc::clone(&shared);
        let acceptor = thread::Builder::new()
            .name("faultserver-accept".into())
            .spawn(move || accept_loop(listener, for_acceptor))?;
        Ok(FaultServer {
            shared,
            acceptor: Some(acceptor),
        })
    }

    /// The bound address (always loopback).
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// `http://127.0.0.1:PORT/path` (a missing leading slash is added).
    pub fn url(&self, path: &str) -> String {
        let slash = if path.starts_with('/') { "" } else { "/" };
        format!("http://{}{slash}{path}", self.shared.addr)
    }

    /// Counters so far.
    pub fn stats(&self) -> Stats {
        Stats {
            connections: self.shared.connections.load(Ordering::SeqCst),
            requests: self.shared.requests.load(Ordering::SeqCst),
        }
    }

    /// Whether the server has stopped listening (after [`Behaviour::Dies`] fired).
    pub fn is_stopped(&self) -> bool {
        self.shared.stopped()
    }

    /// Stops listening, closes every connection and joins every thread.
    pub fn shutdown(mut self) -> Stats {
        self.stop_and_join();
        self.stats()
    }

    fn stop_and_join(&mut self) {
        self.shared.stop();
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        // The acceptor has exited, so no new worker can be pushed.
        let workers = std::mem::take(&mut *lock(&self.shared.workers));
        for worker in workers {
            let _ = worker.join();
        }
    }
}

impl Drop for FaultServer {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut next_id: u64 = 0;
    loop {
        let accepted = listener.accept();
        if shared.stopped() {
            return;
        }
        let Ok((stream, _peer)) = accepted else {
            // EMFILE and friends: back off briefly instead of spinning.
            if shared.wait_until(Instant::now() + Duration::from_millis(10)) {
                continue;
            }
            return;
        };
        shared.connections.fetch_add(1, Ordering::SeqCst);
        lock(&shared.workers).retain(|w| !w.is_finished());
        next_id += 1;
        let id = next_id;
        {
            let mut live = lock(&shared.live);
            if shared.stopped() {
                return;
            }
            if live.len() >= shared.limits.max_connections {
                continue;
            }
            let Ok(clone) = stream.try_clone() else {
                continue;
            };
            live.insert(id, clone);
        }
        let for_worker = Arc::clone(&shared);
        let spawned = thread::Builder::new()
            .name("faultserver-conn".into())
            .stack_size(256 * 1024)
            .spawn(move || conn::run(for_worker, id, stream));
        match spawned {
            Ok(handle) => lock(&shared.workers).push(handle),
            Err(_) => {
                lock(&shared.live).remove(&id);
            }
        }
    }
}

#[cfg(test)]
mod tests;
