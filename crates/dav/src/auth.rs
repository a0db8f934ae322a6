//! Accounts of a multi-user server: the users file, HTTP Basic credentials, and a
//! verifier that keeps deliberately slow password hashes off the server's event loops.
//!
//! # The users file
//!
//! One account a line, `name:hash`, in the manner of Apache's htpasswd; blank lines and
//! lines starting with `#` are ignored. `name` is 1 to 64 of `A-Z a-z 0-9 . _ -`, not
//! starting with `.` (it becomes the home collection `/<name>/`). `hash` is one of
//! - argon2 in PHC form: `$argon2id$v=19$m=...,t=...,p=...$salt$hash` (also `argon2i`,
//!   `argon2d`), as the `argon2` tool and most libraries write it;
//! - bcrypt: `$2y$`, `$2b$`, `$2a$` (what `htpasswd -B` writes), and what `volley passwd`
//!   writes.
//!
//! Anything else (`$apr1$` MD5, `{SHA}`, crypt DES, plain text) is refused when the file
//! is read, naming the line, because those hashes are fast to brute-force.
//!
//! # Verification
//!
//! A slow hash (bcrypt cost 10 is ~70 ms of CPU, ~0.7 s under a 10% CPU quota) must not
//! run on an event loop: every other client of that loop would wait. So [`Auth::check`]
//! answers at once from two caches keyed by a salted SHA-256 of the credentials (never
//! the password itself): verified credentials (`Allowed`) and recently refused ones
//! (`Challenge`). Credentials in neither go to one verifier thread and the caller is told
//! `Pending`, with its waker called when the answer is cached; the server parks that
//! connection meanwhile. Guessing is bounded per account: after [`MAX_FAILURES`] wrong
//! passwords within [`FAILURE_WINDOW`], new credentials for that account are answered
//! `Locked` without hashing until the window ends; credentials verified before stay
//! valid, so an attack on one account slows neither that account's logged-in clients
//! nor anyone else.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use base64::Engine;
use sha2::{Digest, Sha256};

/// Wrong passwords per account within [`FAILURE_WINDOW`] before new credentials for it
/// are refused without verification.
pub const MAX_FAILURES: u32 = 5;
/// The window [`MAX_FAILURES`] counts in.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// How long verified credentials are trusted without hashing again.
const OK_TTL: Duration = Duration::from_secs(3600);
/// How long refused credentials are refused without hashing again.
const BAD_TTL: Duration = Duration::from_secs(60);
/// Entries per cache; past this, expired entries are dropped, then all.
const CACHE_ENTRIES: usize = 4096;
/// Verifications waiting for the verifier thread; past this, `Locked` (try later).
const QUEUE: usize = 64;

/// The realm of the `WWW-Authenticate` challenge.
pub const CHALLENGE: &str = "Basic realm=\"volley\", charset=\"UTF-8\"";

/// The password hash schemes accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Argon2 (id, i or d) in PHC string form.
    Argon2,
    /// bcrypt (`$2a$`, `$2b$`, `$2y$`).
    Bcrypt,
}

/// What is wrong with one line of a users file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// No `:` between name and hash.
    #[error("expected name:hash")]
    NoColon,
    /// The name cannot be a collection name.
    #[error("user name {0:?} must be 1-64 of A-Z a-z 0-9 . _ - and not start with '.'")]
    BadName(String),
    /// The same name twice.
    #[error("user {name:?} already defined on line {first}")]
    Duplicate {
        /// The name.
        name: String,
        /// The line that defined it first.
        first: usize,
    },
    /// A hash that is not argon2 or bcrypt.
    #[error("unknown password hash scheme {0:?} (use argon2id or bcrypt, e.g. `volley passwd` or `htpasswd -B`)")]
    UnknownScheme(String),
    /// An argon2 or bcrypt hash that does not parse.
    #[error("malformed {0:?} hash")]
    BadHash(Scheme),
}

/// Why a users file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum UsersError {
    /// Reading the file failed.
    #[error("cannot read users file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A line is wrong.
    #[error("users file {path} line {line}: {error}")]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        error: LineError,
    },
    /// No account at all.
    #[error("users file {0} defines no user")]
    Empty(PathBuf),
}

/// The accounts of a users file.
#[derive(Debug, Clone)]
pub struct Users {
    entries: Vec<(String, Scheme, String)>,
}

/// Whether `name` may be an account (and so a path segment).
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The scheme of a stored hash, checked for form.
fn scheme_of(hash: &str) -> Result<Scheme, LineError> {
    if hash.starts_with("$argon2") {
        // A PHC string must name an argon2 variant and carry valid parameters, a
        // salt and an output; the PHC grammar alone accepts `$argon2id$anything`.
        return match argon2::PasswordHash::new(hash) {
            Ok(h)
                if h.algorithm.as_str().starts_with("argon2")
                    && h.salt.is_some()
                    && h.hash.is_some()
                    && argon2::Params::try_from(&h).is_ok() =>
            {
                Ok(Scheme::Argon2)
            }
            _ => Err(LineError::BadHash(Scheme::Argon2)),
        };
    }
    if ["$2a$", "$2b$", "$2y$"].iter().any(|p| hash.starts_with(p)) {
        return match hash.parse::<bcrypt::HashParts>() {
            Ok(_) => Ok(Scheme::Bcrypt),
            Err(_) => Err(LineError::BadHash(Scheme::Bcrypt)),
        };
    }
    let shown: String = hash.chars().take(8).collect();
    Err(LineError::UnknownScheme(shown))
}

impl Users {
    /// Parses a users file's text (`path` only names it in errors).
    pub fn parse(path: &Path, text: &str) -> Result<Users, UsersError> {
        let mut entries: Vec<(String, Scheme, String)> = Vec::new();
        let mut lines_of: HashMap<String, usize> = HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            let n = i + 1;
            let err = |error| UsersError::Line {
                path: path.to_owned(),
                line: n,
                error,
            };
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, hash) = line
                .split_once(':')
                .ok_or_else(|| err(LineError::NoColon))?;
            if !valid_name(name) {
                return Err(err(LineError::BadName(name.to_owned())));
            }
            if let Some(first) = lines_of.get(name) {
                return Err(err(LineError::Duplicate {
                    name: name.to_owned(),
                    first: *first,
                }));
            }
            let scheme = scheme_of(hash).map_err(err)?;
            lines_of.insert(name.to_owned(), n);
            entries.push((name.to_owned(), scheme, hash.to_owned()));
        }
        if entries.is_empty() {
            return Err(UsersError::Empty(path.to_owned()));
        }
        Ok(Users { entries })
    }

    /// Reads and parses a users file.
    pub fn read(path: &Path) -> Result<Users, UsersError> {
        let text = std::fs::read_to_string(path).map_err(|source| UsersError::Read {
            path: path.to_owned(),
            source,
        })?;
        Users::parse(path, &text)
    }

    /// Account names, in file order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _, _)| n.as_str())
    }
}

/// Whether `password` matches the stored `hash` of `scheme`. Slow by design.
pub fn verify_password(scheme: Scheme, hash: &str, password: &[u8]) -> bool {
    match scheme {
        Scheme::Argon2 => {
            use argon2::PasswordVerifier;
            argon2::PasswordHash::new(hash).is_ok_and(|h| {
                argon2::Argon2::default()
                    .verify_password(password, &h)
                    .is_ok()
            })
        }
        Scheme::Bcrypt => bcrypt::verify(password, hash).unwrap_or(false),
    }
}

/// A bcrypt hash of `password` at `cost` (4..=31), for `volley passwd`.
pub fn hash_password(password: &[u8], cost: u32) -> Result<String, bcrypt::BcryptError> {
    bcrypt::hash(password, cost)
}

/// Called when a pending verification has been decided.
pub type Waker = Arc<dyn Fn() + Send + Sync>;

/// The outcome of one request's credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// The credentials are valid for this account.
    Allowed(Arc<str>),
    /// Missing, malformed or wrong: answer 401 with [`CHALLENGE`].
    Challenge,
    /// Being verified; the waker given will be called. Ask again then.
    Pending,
    /// Too many recent failures for this account (or a full queue): answer 429 with
    /// this `Retry-After`.
    Locked {
        /// Seconds until new credentials are verified again.
        retry_after_s: u64,
    },
}

type Key = [u8; 32];

#[derive(Default)]
struct State {
    ok: HashMap<Key, (Arc<str>, Instant)>,
    bad: HashMap<Key, Instant>,
    pending: HashMap<Key, Vec<Waker>>,
    failures: HashMap<Arc<str>, (u32, Instant)>,
}

struct Job {
    key: Key,
    user: Arc<str>,
    password: Vec<u8>,
}

/// The verifier shared by every event loop of one server.
pub struct Auth {
    users: HashMap<Arc<str>, (Scheme, String)>,
    salt: [u8; 16],
    state: Mutex<State>,
    jobs: Mutex<Option<SyncSender<Job>>>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("users", &self.users.len())
            .finish_non_exhaustive()
    }
}

/// `user` and `password` from an `Authorization: Basic` value.
pub fn parse_basic(value: &[u8]) -> Option<(String, Vec<u8>)> {
    let v = std::str::from_utf8(value).ok()?.trim();
    let (scheme, rest) = v.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()?;
    let colon = raw.iter().position(|b| *b == b':')?;
    let user = String::from_utf8(raw[..colon].to_vec()).ok()?;
    Some((user, raw[colon + 1..].to_vec()))
}

fn trim<V>(map: &mut HashMap<Key, V>, now: Instant, ttl: Duration, at: impl Fn(&V) -> Instant) {
    if map.len() >= CACHE_ENTRIES {
        map.retain(|_, v| now.duration_since(at(v)) < ttl);
        if map.len() >= CACHE_ENTRIES {
            map.clear();
        }
    }
}

impl Auth {
    /// A verifier for `users`, with its verifier thread started.
    pub fn start(users: &Users) -> io::Result<Arc<Auth>> {
        let mut salt = [0u8; 16];
        getrandom::fill(&mut salt).map_err(|e| io::Error::other(e.to_string()))?;
        let auth = Arc::new(Auth {
            users: users
                .entries
                .iter()
                .map(|(n, s, h)| (Arc::from(n.as_str()), (*s, h.clone())))
                .collect(),
            salt,
            state: Mutex::new(State::default()),
            jobs: Mutex::new(None),
        });
        let (tx, rx) = sync_channel::<Job>(QUEUE);
        let weak: Weak<Auth> = Arc::downgrade(&auth);
        std::thread::Builder::new()
            .name("volley-auth".into())
            .spawn(move || {
                // Ends when the Auth (the only sender's owner) is dropped.
                while let Ok(job) = rx.recv() {
                    let Some(auth) = weak.upgrade() else { break };
                    auth.run_job(job);
                }
            })?;
        *auth.jobs.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
        Ok(auth)
    }

    fn key(&self, user: &str, password: &[u8]) -> Key {
        let mut h = Sha256::new();
        h.update(self.salt);
        h.update(user.as_bytes());
        h.update([0u8]);
        h.update(password);
        h.finalize().into()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Decides a request's `Authorization` value. With `waker`, an uncached credential
    /// is queued and `Pending` returned; without one (a caller that cannot wait, e.g.
    /// an HTTP/2 stream) it is verified on the calling thread.
    pub fn check(&self, authorization: Option<&[u8]>, waker: Option<&Waker>) -> Check {
        let Some((name, password)) = authorization.and_then(parse_basic) else {
            return Check::Challenge;
        };
        let Some((user, _)) = self.users.get_key_value(name.as_str()) else {
            return Check::Challenge;
        };
        let user = user.clone();
        let key = self.key(&user, &password);
        let now = Instant::now();
        {
            let mut st = self.lock();
            if let Some((u, at)) = st.ok.get(&key) {
                if now.duration_since(*at) < OK_TTL {
                    return Check::Allowed(u.clone());
                }
            }
            if let Some(at) = st.bad.get(&key) {
                if now.duration_since(*at) < BAD_TTL {
                    return Check::Challenge;
                }
            }
            if let Some((n, since)) = st.failures.get(&user) {
                let age = now.duration_since(*since);
                if *n >= MAX_FAILURES && age < FAILURE_WINDOW {
                    return Check::Locked {
                        retry_after_s: (FAILURE_WINDOW - age).as_secs().max(1),
                    };
                }
            }
            if let Some(w) = waker {
                if let Some(waiting) = st.pending.get_mut(&key) {
                    waiting.push(w.clone());
                    return Check::Pending;
                }
                let job = Job {
                    key,
                    user: user.clone(),
                    password,
                };
                let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
                return match jobs.as_ref().map(|tx| tx.try_send(job)) {
                    Some(Ok(())) => {
                        st.pending.insert(key, vec![w.clone()]);
                        Check::Pending
                    }
                    Some(Err(TrySendError::Full(_))) | Some(Err(_)) | None => {
                        Check::Locked { retry_after_s: 1 }
                    }
                };
            }
        }
        self.decide(key, user, &password);
        self.check_cached(key)
    }

    fn check_cached(&self, key: Key) -> Check {
        let st = self.lock();
        match st.ok.get(&key) {
            Some((u, _)) => Check::Allowed(u.clone()),
            None => Check::Challenge,
        }
    }

    /// Hashes (slowly, without holding the lock) and records the result.
    fn decide(&self, key: Key, user: Arc<str>, password: &[u8]) {
        let good = self
            .users
            .get(&user)
            .is_some_and(|(scheme, hash)| verify_password(*scheme, hash, password));
        let now = Instant::now();
        let mut st = self.lock();
        if good {
            trim(&mut st.ok, now, OK_TTL, |v| v.1);
            st.ok.insert(key, (user.clone(), now));
            st.failures.remove(&user);
        } else {
            trim(&mut st.bad, now, BAD_TTL, |v| *v);
            st.bad.insert(key, now);
            let f = st.failures.entry(user).or_insert((0, now));
            if now.duration_since(f.1) >= FAILURE_WINDOW {
                *f = (0, now);
            }
            f.0 += 1;
        }
    }

    fn run_job(&self, job: Job) {
        self.decide(job.key, job.user, &job.password);
        let waiting = self.lock().pending.remove(&job.key).unwrap_or_default();
        for w in waiting {
            w();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn basic(user: &str, pw: &str) -> Vec<u8> {
        let enc = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pw}"));
        format!("Basic {enc}").into_bytes()
    }

    fn users() -> Users {
        let h = hash_password(b"secret", 4).unwrap();
        Users::parse(Path::new("u"), &format!("# office\n\nalice:{h}\nbob:{h}\n")).unwrap()
    }

    #[test]
    fn file_errors_name_the_line() {
        let p = Path::new("users");
        let bc = hash_password(b"x", 4).unwrap();
        let cases = [
            ("alice\n", 1, "expected name:hash"),
            ("# c\n.x:{bc}\n", 2, "user name"),
            ("a:{bc}\nb:{bc}\na:{bc}\n", 3, "already defined on line 1"),
            ("a:$apr1$abc$def\n", 1, "unknown password hash scheme"),
            ("a:plain\n", 1, "unknown password hash scheme"),
            ("a:$argon2id$nonsense\n", 1, "malformed"),
            ("a:$2y$10$short\n", 1, "malformed"),
        ];
        for (text, line, want) in cases {
            let text = text.replace("{bc}", &bc);
            let e = Users::parse(p, &text).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(&format!("line {line}:")), "{msg}");
            assert!(msg.contains(want), "{msg}");
            assert!(!msg.contains('\n'), "one line: {msg}");
        }
        assert!(matches!(
            Users::parse(p, "# nobody\n"),
            Err(UsersError::Empty(_))
        ));
        let argon =
            "$argon2id$v=19$m=1024,t=1,p=1$c29tZXNhbHQ$9sTbSlTio3Biev89thdrlKKiCaYsjjYVJxGAL3swxpQ";
        let u = Users::parse(p, &format!("carol:{argon}\ndave:{bc}\n")).unwrap();
        assert_eq!(u.names().collect::<Vec<_>>(), ["carol", "dave"]);
    }

    #[test]
    fn argon2_phc_lines_verify() {
        use argon2::PasswordHasher;
        let salt = argon2::password_hash::SaltString::encode_b64(b"volley-test-salt").unwrap();
        let params = argon2::Params::new(1024, 1, 1, None).unwrap();
        let a2 = argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
        let phc = a2.hash_password(b"open sesame", &salt).unwrap().to_string();
        assert!(phc.starts_with("$argon2id$v=19$m=1024,t=1,p=1$"), "{phc}");
        let users = Users::parse(Path::new("u"), &format!("ann:{phc}\n")).unwrap();
        let auth = Auth::start(&users).unwrap();
        assert_eq!(
            auth.check(Some(&basic("ann", "open sesame")), None),
            Check::Allowed("ann".into())
        );
        assert_eq!(
            auth.check(Some(&basic("ann", "open sesame!")), None),
            Check::Challenge
        );
    }

    #[test]
    fn basic_header_parsing() {
        assert_eq!(
            parse_basic(&basic("al", "p:w")),
            Some(("al".into(), b"p:w".to_vec()))
        );
        assert_eq!(parse_basic(b"Bearer x"), None);
        assert_eq!(parse_basic(b"Basic !!!"), None);
    }

    #[test]
    fn inline_checks_cache_and_lock_out() {
        let auth = Auth::start(&users()).unwrap();
        assert_eq!(auth.check(None, None), Check::Challenge);
        assert_eq!(
            auth.check(Some(&basic("zed", "secret")), None),
            Check::Challenge
        );
        let good = basic("alice", "secret");
        assert_eq!(
            auth.check(Some(&good), None),
            Check::Allowed("alice".into())
        );
        for i in 0..MAX_FAILURES {
            let bad = basic("alice", &format!("wrong{i}"));
            assert_eq!(auth.check(Some(&bad), None), Check::Challenge);
        }
        // Locked for new credentials; the verified one still passes, bob is untouched.
        assert!(matches!(
            auth.check(Some(&basic("alice", "another")), None),
            Check::Locked { .. }
        ));
        assert_eq!(
            auth.check(Some(&good), None),
            Check::Allowed("alice".into())
        );
        assert_eq!(
            auth.check(Some(&basic("bob", "secret")), None),
            Check::Allowed("bob".into())
        );
    }

    #[test]
    fn queued_checks_wake_the_caller() {
        let auth = Auth::start(&users()).unwrap();
        let woken = Arc::new(AtomicUsize::new(0));
        let w: Waker = {
            let woken = woken.clone();
            Arc::new(move || {
                woken.fetch_add(1, Ordering::SeqCst);
            })
        };
        let good = basic("bob", "secret");
        assert_eq!(auth.check(Some(&good), Some(&w)), Check::Pending);
        let deadline = Instant::now() + Duration::from_secs(30);
        while woken.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(woken.load(Ordering::SeqCst), 1);
        assert_eq!(
            auth.check(Some(&good), Some(&w)),
            Check::Allowed("bob".into())
        );
    }
}
