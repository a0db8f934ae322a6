//! DAV mode: a correct CalDAV store (`volley_dav`, the built-in server's handler) that
//! misbehaves on purpose in one chosen way, and can record every request it receives.
//!
//! It exists so the office workload's checks can be shown to catch what they claim to
//! (docs/methodology.md, "The office"): a server whose ETags do not change with content
//! ([`DavFault::StaleEtag`]), one that acknowledges a PUT and keeps nothing
//! ([`DavFault::LostPut`]), one whose sync-collection delta leaves a change out
//! ([`DavFault::WrongSync`]), one that answers 500 now and then ([`DavFault::Error5xx`]).
//! Every account is accepted (Basic credentials name the user; the password is not
//! checked) and gets its home and calendar on first sight, as `volley serve --users`
//! provisions them. `--record FILE` writes one line per request: the account, the
//! User-Agent, method, path, Depth, the PROPFIND's properties or the REPORT's kind, and
//! the conditional headers.
//!
//! Threads: one acceptor plus one thread per connection, like the HTTP mode; every loop
//! ends on [`DavServer::shutdown`] (also on drop).

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use base64::Engine as _;
use volley_dav::{Dav, DavResponse};

use crate::lock;

/// The one way a DAV-mode server misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DavFault {
    /// None: a correct server (for recording request sequences).
    None,
    /// An item's ETag never changes after its creation, whatever is written to it.
    StaleEtag,
    /// Every `every`-th creating PUT is answered 201 and not kept.
    LostPut {
        /// Period.
        every: u64,
    },
    /// Every `every`-th sync-collection delta that has changes leaves the first out.
    WrongSync {
        /// Period.
        every: u64,
    },
    /// Every `every`-th request is answered 500 without being handled.
    Error5xx {
        /// Period.
        every: u64,
    },
    /// A bad morning: the first `count` requests of the office's devices (a
    /// User-Agent naming a profile and device, `volley-office/davx5#1`: after set-up,
    /// a warm day's lead-in) are handled, then answered 500, as a server that timed
    /// out after committing does.
    BusyMorning {
        /// Requests so answered.
        count: u64,
    },
}

/// Why a DAV fault's text form did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DavFaultError {
    /// The `:N` after the name is not a positive integer.
    #[error("`{0}`: the period must be a positive integer")]
    Period(String),
    /// No such fault, or a period on one that takes none.
    #[error(
        "unknown DAV fault `{0}` (none, stale-etag, lost-put[:N], wrong-sync[:N], error-5xx[:N], busy-morning[:N])"
    )]
    Unknown(String),
}

impl std::str::FromStr for DavFault {
    type Err = DavFaultError;

    /// `none`, `stale-etag`, `lost-put[:N]` (default 4), `wrong-sync[:N]` (default 3),
    /// `error-5xx[:N]` (default 20), `busy-morning[:N]` (default 30).
    fn from_str(s: &str) -> Result<DavFault, DavFaultError> {
        let (name, n) = match s.split_once(':') {
            Some((a, b)) => {
                let n: u64 = b
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| DavFaultError::Period(s.to_string()))?;
                (a, Some(n))
            }
            None => (s, None),
        };
        match name {
            "none" if n.is_none() => Ok(DavFault::None),
            "stale-etag" if n.is_none() => Ok(DavFault::StaleEtag),
            "lost-put" => Ok(DavFault::LostPut {
                every: n.unwrap_or(4),
            }),
            "wrong-sync" => Ok(DavFault::WrongSync {
                every: n.unwrap_or(3),
            }),
            "error-5xx" => Ok(DavFault::Error5xx {
                every: n.unwrap_or(20),
            }),
            "busy-morning" => Ok(DavFault::BusyMorning {
                count: n.unwrap_or(30),
            }),
            _ => Err(DavFaultError::Unknown(s.to_string())),
        }
    }
}

/// An item's ETag as the client was first told it, and its real current one.
pub(crate) struct Pin {
    pub(crate) pinned: String,
    pub(crate) current: String,
}

/// Counters and pins of the fault.
#[derive(Default)]
pub(crate) struct FaultState {
    pub(crate) requests: u64,
    pub(crate) creates: u64,
    pub(crate) syncs: u64,
    /// Requests after set-up so far (`BusyMorning`).
    pub(crate) morning: u64,
    pub(crate) pins: HashMap<String, Pin>,
}

struct State {
    dav: Dav,
    root: PathBuf,
    fault: DavFault,
    faults: Mutex<FaultState>,
    homes: Mutex<HashSet<String>>,
    record: Option<Mutex<File>>,
    stopped: AtomicBool,
    live: Mutex<Vec<TcpStream>>,
}

/// A running DAV-mode server over a private directory (removed on drop).
pub struct DavServer {
    state: Arc<State>,
    addr: SocketAddr,
    acceptor: Option<JoinHandle<()>>,
    workers: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl DavServer {
    /// Starts on `127.0.0.1:0`, storing under a fresh directory in the system's temp
    /// directory; `record` names the file request lines are written to.
    pub fn start(fault: DavFault, record: Option<&Path>) -> io::Result<DavServer> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let addr = listener.local_addr()?;
        let root = std::env::temp_dir().join(format!(
            "volley-faultserver-dav-{}-{}",
            std::process::id(),
            addr.port()
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root)?;
        let record = match record {
            Some(p) => Some(Mutex::new(File::create(p)?)),
            None => None,
        };
        let state = Arc::new(State {
            dav: Dav::new(&root),
            root,
            fault,
            faults: Mutex::new(FaultState::default()),
            homes: Mutex::new(HashSet::new()),
            record,
            stopped: AtomicBool::new(false),
            live: Mutex::new(Vec::new()),
        });
        let workers: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::new(Mutex::new(Vec::new()));
        let (s, w) = (Arc::clone(&state), Arc::clone(&workers));
        let acceptor = std::thread::Builder::new()
            .name("faultserver-dav-accept".into())
            .spawn(move || accept(listener, s, w))?;
        Ok(DavServer {
            state,
            addr,
            acceptor: Some(acceptor),
            workers,
        })
    }

    /// `http://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Stops, closes every connection, joins every thread, removes the store.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if self.state.stopped.swap(true, Ordering::SeqCst) {
            return;
        }
        for s in lock(&self.state.live).iter() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        for w in std::mem::take(&mut *lock(&self.workers)) {
            let _ = w.join();
        }
        let _ = std::fs::remove_dir_all(&self.state.root);
    }
}

impl Drop for DavServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept(listener: TcpListener, state: Arc<State>, workers: Arc<Mutex<Vec<JoinHandle<()>>>>) {
    for stream in listener.incoming() {
        if state.stopped.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let Ok(clone) = stream.try_clone() else {
            continue;
        };
        lock(&state.live).push(clone);
        let s = Arc::clone(&state);
        let spawned = std::thread::Builder::new()
            .name("faultserver-dav".into())
            .spawn(move || serve(&s, stream));
        if let Ok(h) = spawned {
            let mut w = lock(&workers);
            w.retain(|h| !h.is_finished());
            w.push(h);
        }
    }
}

/// A request read off the wire.
pub(crate) struct Incoming {
    pub(crate) method: String,
    pub(crate) target: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Incoming {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Largest request head and body accepted.
const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 16 << 20;

fn read_request(r: &mut BufReader<&TcpStream>) -> Option<Incoming> {
    let mut head = Vec::new();
    loop {
        let n = r
            .by_ref()
            .take(MAX_HEAD as u64)
            .read_until(b'\n', &mut head)
            .ok()?;
        if n == 0 || head.len() >= MAX_HEAD {
            return None;
        }
        if head.ends_with(b"\r\n\r\n") || head == b"\r\n" {
            break;
        }
    }
    let mut hs = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut hs);
    req.parse(&head).ok()?;
    let headers: Vec<(String, String)> = req
        .headers
        .iter()
        .map(|h| {
            (
                h.name.to_owned(),
                String::from_utf8_lossy(h.value).trim().to_owned(),
            )
        })
        .collect();
    let mut inc = Incoming {
        method: req.method?.to_owned(),
        target: req.path?.to_owned(),
        headers,
        body: Vec::new(),
    };
    let len: usize = inc
        .header("Content-Length")
        .map_or(Some(0), |v| v.parse().ok())?;
    if len > MAX_BODY || inc.header("Transfer-Encoding").is_some() {
        return None;
    }
    inc.body.resize(len, 0);
    r.read_exact(&mut inc.body).ok()?;
    Some(inc)
}

fn serve(state: &State, stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(&stream);
    let mut writer = &stream;
    while !state.stopped.load(Ordering::SeqCst) {
        let Some(req) = read_request(&mut reader) else {
            return;
        };
        let resp = answer(state, &req);
        let mut out = format!(
            "HTTP/1.1 {} X\r\nContent-Length: {}\r\n",
            resp.status,
            resp.body.len()
        );
        for (n, v) in &resp.headers {
            out.push_str(&format!("{n}: {v}\r\n"));
        }
        out.push_str("\r\n");
        let mut bytes = out.into_bytes();
        if req.method != "HEAD" {
            bytes.extend_from_slice(&resp.body);
        }
        if writer.write_all(&bytes).is_err() {
            return;
        }
    }
}

pub(crate) fn plain(status: u16) -> DavResponse {
    DavResponse {
        status,
        headers: Vec::new(),
        body: Vec::new(),
    }
}

/// The account named by Basic credentials (any password).
fn basic_user(req: &Incoming) -> Option<String> {
    let v = req.header("Authorization")?.strip_prefix("Basic ")?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(v.trim())
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let user = text.split(':').next()?.to_owned();
    volley_dav::auth::valid_name(&user).then_some(user)
}

fn answer(state: &State, req: &Incoming) -> DavResponse {
    let Some(user) = basic_user(req) else {
        let mut r = plain(401);
        r.headers
            .push(("WWW-Authenticate".into(), "Basic realm=\"volley\"".into()));
        return r;
    };
    if lock(&state.homes).insert(user.clone()) && volley_dav::provision(&state.root, &user).is_err()
    {
        return plain(500);
    }
    if let Some(file) = &state.record {
        let line = crate::dav_record::line(
            &req.method,
            &req.target,
            req.header("Depth"),
            &req.headers,
            &req.body,
        );
        let agent = req.header("User-Agent").unwrap_or("-");
        let _ = writeln!(lock(file), "{user}\t{agent}\t{line}");
    }
    let dav = state.dav.for_user(Arc::from(user.as_str()));
    crate::dav_fault::handle(state.fault, &state.faults, &dav, req)
}

#[cfg(test)]
mod tests {
    use super::DavFault;

    #[test]
    fn faults_parse_with_default_and_given_periods() {
        assert_eq!("none".parse(), Ok(DavFault::None));
        assert_eq!("stale-etag".parse(), Ok(DavFault::StaleEtag));
        assert_eq!("lost-put".parse(), Ok(DavFault::LostPut { every: 4 }));
        assert_eq!("wrong-sync:7".parse(), Ok(DavFault::WrongSync { every: 7 }));
        assert_eq!("error-5xx".parse(), Ok(DavFault::Error5xx { every: 20 }));
        assert_eq!(
            "busy-morning:5".parse(),
            Ok(DavFault::BusyMorning { count: 5 })
        );
        assert!("error-5xx:0".parse::<DavFault>().is_err());
        assert!("stale-etag:2".parse::<DavFault>().is_err());
        assert!("teapot".parse::<DavFault>().is_err());
    }
}
